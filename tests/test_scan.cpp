// SPDX-License-Identifier: Apache-2.0
// cumsum, cumprod and accumulate against plain host loops: vectors of every sweep size over every
// device set, every dimension of 3-d arrays under every placement, views, uneven and empty shards,
// and bad dimensions.
#include "test_support.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

using namespace tessera_test;

namespace {

// Inclusive scan along dim d of column-major host data of `shape`, accumulating in A.
template <class A, class T>
[[gnu::noipa]] std::vector<A> ref_scan(const std::vector<T>& v, const Dims& shape, int d, A (*op)(A, A)) {
  index_t inner = 1, outer = 1;
  for (int k = 0; k < d; ++k) inner *= shape[static_cast<std::size_t>(k)];
  for (std::size_t k = static_cast<std::size_t>(d) + 1; k < shape.size(); ++k) outer *= shape[k];
  const index_t len = shape[static_cast<std::size_t>(d)];
  std::vector<A> out(v.size());
  for (index_t o = 0; o < outer; ++o)
    for (index_t i = 0; i < inner; ++i) {
      A acc{};
      for (index_t j = 0; j < len; ++j) {
        const auto at = static_cast<std::size_t>(i + inner * (j + len * o));
        acc = j == 0 ? static_cast<A>(v[at]) : op(acc, static_cast<A>(v[at]));
        out[at] = acc;
      }
    }
  return out;
}

template <class T>
T add(T a, T b) { return a + b; }
template <class T>
T mul(T a, T b) { return a * b; }
template <class T>
T nan_max(T a, T b) { return a != a ? a : (b != b ? b : (a < b ? b : a)); }
template <class T>
T nan_min(T a, T b) { return a != a ? a : (b != b ? b : (b < a ? b : a)); }

// Small integers as floats: partial sums stay exact, so every device set must agree bit for bit.
std::vector<float> small_ints(std::size_t n) {
  auto v = random_values<std::int32_t>(n, -0.2, 0.2);  // -2 .. 2
  return std::vector<float>(v.begin(), v.end());
}

template <class A, int N>
void check_same_placement(const Array<A, N>& got, const Dims& shape, int shard_dim, bool replicated,
                          const DeviceSet& devs) {
  for (int k = 0; k < N; ++k) CHECK(got.shape()[k] == shape[static_cast<std::size_t>(k)]);
  CHECK(got.is_replicated() == replicated);
  if (!replicated) CHECK(got.shard_dim() == shard_dim);
  CHECK(got.devices() == devs);
}

}  // namespace

TEST_CASE("cumsum, cumprod and accumulate of vectors: every size, every device set") {
  for_each_case([](const DeviceSet& ds, std::size_t n) {
    const Dims shape{static_cast<index_t>(n)};
    const auto f = small_ints(n);
    Array<float, 1> x = put(f, ds);
    Array<float, 1> s = cumsum(x);
    static_assert(std::is_same_v<decltype(cumsum(x)), Array<float, 1>>);
    check_same_placement(s, shape, 0, false, ds);
    check_equal(to_host(s), ref_scan<float>(f, shape, 0, &add<float>));
    check_equal(to_host(x), f);  // the input is untouched

    const auto iv = random_values<std::int32_t>(n);
    Array<std::int32_t, 1> xi = put(iv, ds);
    static_assert(std::is_same_v<decltype(cumsum(xi)), Array<std::int64_t, 1>>);
    check_equal(to_host(cumsum(xi)), ref_scan<std::int64_t>(iv, shape, 0, &add<std::int64_t>));
    static_assert(std::is_same_v<decltype(accumulate(fn::plus{}, xi)), Array<std::int32_t, 1>>);
    check_equal(to_host(accumulate(fn::plus{}, xi)), ref_scan<std::int32_t>(iv, shape, 0, &add<std::int32_t>));

    // Products of values near 1 (no overflow), in double; signs +-1 in int64 exactly.
    const auto d = random_values<double>(n, 0.999, 1.001);
    Array<double, 1> xd = put(d, ds);
    check_values(to_host(cumprod(xd)), ref_scan<double>(d, shape, 0, &mul<double>), 1e-12, 1e-12, "cumprod");
    auto sg = random_values<std::int64_t>(n, -0.1, 0.1);
    for (auto& e : sg) e = e < 0 ? -1 : 1;
    Array<std::int64_t, 1> xs = put(sg, ds);
    check_equal(to_host(cumprod(xs)), ref_scan<std::int64_t>(sg, shape, 0, &mul<std::int64_t>));

    // Running max and min, NaN propagating from wherever it sits (Julia's max).
    auto g = random_values<float>(n, -5, 5);
    if (n > 3) g[n / 2] = std::numeric_limits<float>::quiet_NaN();
    Array<float, 1> xg = put(g, ds);
    check_equal(to_host(accumulate(fn::max{}, xg)), ref_scan<float>(g, shape, 0, &nan_max<float>));
    check_equal(to_host(accumulate(fn::min{}, xg, 0)), ref_scan<float>(g, shape, 0, &nan_min<float>));
  });
}

TEST_CASE("cumsum along every dimension of 3-d arrays, every placement") {
  const std::vector<Dims> shapes{{5, 6, 7}, {1, 9, 3}, {33, 2, 17}, {4, 0, 3}};
  for (const auto& ds : device_sets()) {
    for (const auto& shape : shapes) {
      const auto f = small_ints(static_cast<std::size_t>(volume(shape)));
      const auto dv = random_values<double>(f.size(), -1, 1);
      for (const auto& np : placements(3, ds)) {
        INFO(set_name(ds) << ", shape " << dims_string(shape) << ", " << np.name);
        const auto a = make<3>(f, shape, np.p);
        const auto b = make<3>(dv, shape, np.p);
        for (int d = 0; d < 3; ++d) {
          INFO("dim " << d);
          Array<float, 3> s = cumsum(a, d);
          check_same_placement(s, shape, a.shard_dim(), a.is_replicated(), a.devices());
          const auto want = ref_scan<float>(f, shape, d, &add<float>);
          check_replicas(s, want);
          check_equal(to_host(cumsum(a, dims(d))), want);
          check_values(to_host(accumulate(fn::max{}, b, d)), ref_scan<double>(dv, shape, d, &nan_max<double>), 0, 0,
                       "accumulate(max)");
          check_values(to_host(cumprod(b + 1.0, d)), ref_scan<double>(map1<double>(dv, +[](double x) { return x + 1; }),
                                                                     shape, d, &mul<double>),
                       1e-12, 1e-12, "cumprod(b + 1)");
        }
      }
    }
  }
}

TEST_CASE("a large matrix along both dims: contiguous lines and many strided lines") {
  for (const auto& ds : device_sets()) {
    const Dims shape{1024, 257};
    const auto f = small_ints(static_cast<std::size_t>(volume(shape)));
    for (int sd = 0; sd < 2; ++sd) {
      const auto a = make<2>(f, shape, shard(sd, ds));
      for (int d = 0; d < 2; ++d) {
        INFO(set_name(ds) << ", shard(" << sd << "), dim " << d);
        check_equal(to_host(cumsum(a, d)), ref_scan<float>(f, shape, d, &add<float>));
      }
    }
  }
}

TEST_CASE("scans of views: windows, strided, reversed, a column of a sharded matrix") {
  for (const auto& ds : device_sets()) {
    const Dims shape{13, 11};
    const auto f = small_ints(13 * 11);
    for (int sd = 0; sd < 2; ++sd) {
      INFO(set_name(ds) << ", shard(" << sd << ")");
      const auto a = make<2>(f, shape, shard(sd, ds));
      // A window: rows 2..11, columns 1..10, as host data.
      auto v = a(range(2, 12), range(1, 10));
      std::vector<float> hv;
      for (index_t j = 1; j < 10; ++j)
        for (index_t i = 2; i < 12; ++i) hv.push_back(f[static_cast<std::size_t>(i + 13 * j)]);
      for (int d = 0; d < 2; ++d) check_equal(to_host(cumsum(v, d)), ref_scan<float>(hv, {10, 9}, d, &add<float>));
      // Every other row, reversed columns.
      auto w = reverse(a(range(0, 13, 2), _), 1);
      const auto hw = to_host(eval(w));
      for (int d = 0; d < 2; ++d) check_equal(to_host(cumsum(w, d)), ref_scan<float>(hw, {7, 11}, d, &add<float>));
      // One column (a vector that lives wherever the column does).
      auto c = a(_, 4);
      const std::vector<float> hc(f.begin() + 4 * 13, f.begin() + 5 * 13);
      check_equal(to_host(cumsum(c)), ref_scan<float>(hc, {13}, 0, &add<float>));
      // A row across the shards of shard(1).
      auto r = a(3, _);
      std::vector<float> hr;
      for (index_t j = 0; j < 11; ++j) hr.push_back(f[static_cast<std::size_t>(3 + 13 * j)]);
      check_equal(to_host(cumsum(r)), ref_scan<float>(hr, {11}, 0, &add<float>));
    }
  }
}

TEST_CASE("uneven and empty shards: blocks taken from a view of a longer array") {
  for (const auto& ds : multi_device_sets()) {
    // 40 elements over the set, then a window that starts and ends inside blocks: the window's
    // blocks are uneven, and its first or last may be empty.
    const auto f = small_ints(40);
    Array<float, 1> x = put(f, ds);
    for (auto [lo, hi] : {std::pair{3, 37}, std::pair{0, 1}, std::pair{11, 29}, std::pair{39, 40}}) {
      INFO(set_name(ds) << ", window [" << lo << ", " << hi << ")");
      auto v = x(range(lo, hi));
      const std::vector<float> hv(f.begin() + lo, f.begin() + hi);
      Array<float, 1> s = cumsum(v);
      check_equal(to_host(s), ref_scan<float>(hv, {hi - lo}, 0, &add<float>));
      CHECK(s.devices() == v.devices());
      check_equal(to_host(accumulate(fn::multiplies{}, v * 0.f + 1.f)), std::vector<float>(hv.size(), 1.f));
    }
  }
}

TEST_CASE("bad dimensions throw invalid_argument naming the expected range, arrays intact") {
  for (const auto& ds : device_sets()) {
    const auto f = small_ints(12);
    const auto a = make<2>(f, {3, 4}, shard(1, ds));
    auto msg = expect_error<invalid_argument>([&] { (void)cumsum(a, 2); });
    check_mentions(msg, {"cumsum", "[0, 2)", "found 2", "3×4"});
    msg = expect_error<invalid_argument>([&] { (void)accumulate(fn::max{}, a, -1); });
    check_mentions(msg, {"accumulate", "[0, 2)", "found -1"});
    msg = expect_error<invalid_argument>([&] { (void)cumprod(a, dims(0, 1)); });
    check_mentions(msg, {"cumprod", "one dimension", "found 2"});
    check_equal(to_host(a), f);
  }
}
