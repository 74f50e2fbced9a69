// SPDX-License-Identifier: Apache-2.0
// Full reductions to a host scalar against double-precision plain loops on fresh random data:
// every placement, uneven shards, 1 to 8 host devices (1 and all GPUs in the CUDA variant).
#include "test_support.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

using namespace tessera;
using namespace tessera_test;

namespace {

template <class T>
Array<T, 2> put2(const std::vector<T>& v, index_t rows, index_t cols, const Placement& p) {
  return from_host(v, {rows, cols}, p);
}

std::vector<Placement> placements(const DeviceSet& ds) {
  return {shard(1, ds), shard(0, ds), replicate(ds), on(ds.back())};
}

struct plus_functor {
  TS_HD double operator()(double a, double b) const { return a + b; }
};
struct square_functor {
  TS_HD double operator()(float x) const { return double(x) * double(x); }
};

}  // namespace

TEST_CASE("sum, prod, mean, norm, dot of float arrays and fused expressions") {
  for (const auto& ds : device_sets()) {
    for (index_t cols : {index_t(0), index_t(1), index_t(7), index_t(33), index_t(257)}) {
      const index_t rows = cols == 257 ? 4099 : 3;
      for (const auto& p : placements(ds)) {
        INFO("device set " << set_name(ds) << ", shape " << rows << "x" << cols);
        const auto av = random_values<float>(static_cast<std::size_t>(rows * cols));
        const auto bv = random_values<float>(static_cast<std::size_t>(rows * cols));
        const auto a = put2(av, rows, cols, p);
        const auto b = put2(bv, rows, cols, p);
        double s = 0, sab = 0, sq = 0;
        for (std::size_t i = 0; i < av.size(); ++i) {
          s += av[i];
          sab += double(av[i]) * bv[i];
          sq += double(av[i]) * av[i];
        }
        const double tol = 1e-5 * (1 + std::sqrt(double(av.size())));
        static_assert(std::is_same_v<decltype(sum(a)), float>);
        CHECK(close(sum(a), s, 1e-5, tol));
        CHECK(close(sum(a * b), sab, 1e-5, tol));
        CHECK(close(dot(a, b), sab, 1e-5, tol));
        CHECK(close(norm(a), std::sqrt(sq), 1e-5, 1e-5));
        if (!av.empty()) CHECK(close(mean(a), s / double(av.size()), 1e-5, 1e-5));
        else CHECK(std::isnan(mean(a)));
        CHECK(close(reduce(plus_functor{}, a, 0.0), s, 1e-9, tol));
        CHECK(close(mapreduce(square_functor{}, plus_functor{}, a, 0.0), sq, 1e-9, tol));
        // prod over values near 1 stays finite
        const auto pv = random_values<double>(av.size(), 0.9, 1.1);
        double pr = 1;
        for (double x : pv) pr *= x;
        CHECK(close(prod(put2(pv, rows, cols, p)), pr, 1e-10, 1e-12));
      }
    }
  }
}

TEST_CASE("integer and bool reductions accumulate in 64 bits; any, all, count") {
  for (const auto& ds : device_sets()) {
    for (index_t n : {index_t(0), index_t(1), index_t(31), index_t(1000), index_t(1) << 17}) {
      INFO("device set " << set_name(ds) << ", n " << n);
      std::vector<std::int32_t> v(static_cast<std::size_t>(n));
      for (auto& x : v) x = static_cast<std::int32_t>(rng()() % 2000000000u);  // the sum overflows int32
      const auto a = from_host(v, {n}, shard(0, ds));
      std::int64_t s = 0, big = 0;
      for (auto x : v) {
        s += x;
        big += x > 1000000000 ? 1 : 0;
      }
      static_assert(std::is_same_v<decltype(sum(a)), std::int64_t>);
      CHECK(sum(a) == s);
      CHECK(count(a > 1000000000) == big);
      CHECK(sum(a > 1000000000) == big);
      CHECK(any(a > 1000000000) == (big > 0));
      CHECK(all(a > 1000000000) == (big == n));
      CHECK(any(a < 0) == false);
      CHECK(all(a >= 0) == true);
      if (n > 0) {
        CHECK(maximum(a) == *std::max_element(v.begin(), v.end()));
        CHECK(minimum(a) == *std::min_element(v.begin(), v.end()));
      }
    }
  }
}

TEST_CASE("maximum and minimum propagate NaN wherever it sits; empty inputs") {
  for (const auto& ds : device_sets()) {
    const index_t n = 1001;
    // first, middle, last, and the first element of the second shard
    for (index_t where_nan : {index_t(0), n / 2, n - 1, std::min(n - 1, (n + index_t(ds.size()) - 1) / index_t(ds.size()))}) {
      INFO("device set " << set_name(ds) << ", NaN at " << where_nan);
      auto v = random_values<double>(static_cast<std::size_t>(n));
      const auto a0 = from_host(v, {n}, shard(0, ds));
      CHECK(maximum(a0) == *std::max_element(v.begin(), v.end()));
      CHECK(minimum(a0) == *std::min_element(v.begin(), v.end()));
      v[static_cast<std::size_t>(where_nan)] = std::numeric_limits<double>::quiet_NaN();
      const auto a = from_host(v, {n}, shard(0, ds));
      CHECK(std::isnan(maximum(a)));
      CHECK(std::isnan(minimum(a)));
      CHECK(std::isnan(sum(a)));
    }
    const auto e = zeros<float>({0, 5}, shard(1, ds));
    CHECK(sum(e) == 0.f);
    CHECK(prod(e) == 1.f);
    CHECK(count(e) == 0);
    CHECK(any(e) == false);
    CHECK(all(e) == true);
    CHECK_THROWS_AS(maximum(e), invalid_argument);
    CHECK_THROWS_WITH_AS(minimum(e), doctest::Contains("empty"), invalid_argument);
  }
}

TEST_CASE("a reduction of operands with mismatched placement throws and changes nothing") {
  for (const auto& ds : multi_device_sets()) {
    const auto a = rand<float>({10, 12}, shard(1, ds));
    const auto b = rand<float>({10, 12}, shard(0, ds));
    const auto before = to_host(a);
    CHECK_THROWS_AS(sum(a * b), placement_mismatch);
    CHECK(to_host(a) == before);
  }
}

TEST_CASE("sum and dot over the size sweep, 2^k +- 1 and large: every block and tail path") {
  for_each_case([](const DeviceSet& ds, index_t n) {
    for (index_t m : {n, n == (index_t(1) << 20) ? (index_t(1) << 22) + 3 : n}) {
      const auto av = random_values<float>(static_cast<std::size_t>(m));
      const auto bv = random_values<double>(static_cast<std::size_t>(m));
      const auto a = put(av, ds);
      const auto b = put(bv, ds);
      double s = 0, sab = 0;
      for (std::size_t i = 0; i < av.size(); ++i) {
        s += av[i];
        sab += double(av[i]) * bv[i];
      }
      const double tol = 1e-5 * (1 + std::sqrt(double(m)));
      CHECK(close(sum(a), s, 1e-5, tol));
      CHECK(close(dot(a, b), sab, 1e-9, 1e-9 * (1 + std::sqrt(double(m)))));
      // A view one element in: unaligned (scalar linear path); every other element: cartesian.
      if (m > 2) {
        double s1 = 0, s2 = 0;
        for (std::size_t i = 1; i < av.size(); ++i) s1 += av[i];
        for (std::size_t i = 0; i < av.size(); i += 2) s2 += av[i];
        const auto ar = from_host(av, {m}, on(ds[0]));
        CHECK(close(sum(ar(range(1, m))), s1, 1e-5, tol));
        CHECK(close(sum(ar(range(0, m, 2))), s2, 1e-5, tol));
      }
    }
  });
}

TEST_CASE("NaN in each shard propagates through maximum and minimum") {
  for (const auto& ds : device_sets()) {
    const index_t n = 4 * static_cast<index_t>(ds.size()) + 3;
    for (std::size_t shard_i = 0; shard_i < ds.size(); ++shard_i) {
      for (int at_end = 0; at_end < 2; ++at_end) {
        auto v = random_values<float>(static_cast<std::size_t>(n));
        const auto a0 = from_host(v, {n}, shard(0, ds));
        // the shard's first or last element, from the balanced blocks the placement makes
        const auto parts = detail::balanced_block(n, static_cast<int>(ds.size()), static_cast<int>(shard_i));
        const index_t where = at_end ? parts.second - 1 : parts.first;
        INFO("device set " << set_name(ds) << ", NaN at " << where << " (shard " << shard_i << ")");
        v[static_cast<std::size_t>(where)] = std::numeric_limits<float>::quiet_NaN();
        const auto a = from_host(v, {n}, shard(0, ds));
        CHECK(std::isnan(maximum(a)));
        CHECK(std::isnan(minimum(a)));
        CHECK(std::isnan(maximum(a, as_array).at()));
        CHECK(!std::isnan(maximum(a0)));
      }
    }
  }
}

TEST_CASE("as_array: a replicated 0-d result that later expressions use on the devices") {
  for (const auto& ds : device_sets()) {
    for (index_t n : {index_t(0), index_t(1), index_t(2), index_t(1001), (index_t(1) << 18) + 1}) {
      INFO("device set " << set_name(ds) << ", n " << n);
      const auto av = random_values<float>(static_cast<std::size_t>(n), 0.5, 2.0);
      const auto a = put(av, ds);
      double s = 0, mx = -INFINITY;
      for (float x : av) {
        s += x;
        mx = std::max(mx, double(x));
      }
      const double tol = 1e-5 * (1 + std::sqrt(double(n)));
      const Array<float, 0> t = sum(a, as_array);
      CHECK(t.is_replicated());
      CHECK(t.devices() == a.devices());
      CHECK(close(t.at(), s, 1e-5, tol));
      // a / sum(a): the normalized vector sums to 1, computed without a host round trip
      Array<float, 1> w = a / sum(a, as_array);
      if (n > 0) {
        const auto wv = to_host(w);
        for (std::size_t i = 0; i < wv.size(); i += 97) CHECK(close(wv[i], av[i] / s, 1e-4, 1e-9));
        CHECK(close(sum(w), 1.0, 1e-4, 1e-6));
        CHECK(close(maximum(a, as_array).at(), mx, 0, 0));
        CHECK(close(mean(a, as_array).at(), s / double(n), 1e-5, 1e-6));
      }
      CHECK(count(a > 1.0f, as_array).at() == count(a > 1.0f));
      CHECK(any(a > 1.5f, as_array).at() == any(a > 1.5f));
      CHECK(all(a > 0.0f, as_array).at() == true);
      CHECK(close(norm(a, as_array).at(), norm(a), 1e-6, 1e-6));
      CHECK(close(dot(a, a, as_array).at(), dot(a, a), 1e-5, tol));
      // replicated input: every replica reduces itself
      const auto r = from_host(av, {n}, replicate(ds));
      const auto rs = sum(r, as_array);
      CHECK(rs.is_replicated());
      CHECK(close(rs.at(), s, 1e-5, tol));
    }
  }
}
