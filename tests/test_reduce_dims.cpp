// SPDX-License-Identifier: Apache-2.0
// Reductions along dimensions against plain loops: every dims combination of ranks 1 to 4, every
// placement (the result keeps it, or is replicated when the shard dimension is reduced), uneven
// shards, empty dimensions, fused expressions.
#include "dims_reference.hpp"

#include <cmath>
#include <limits>

using namespace tessera;
using namespace tessera_test;

namespace {

template <int R>
void check_rank(const DeviceSet& ds, const Shape<R>& s) {
  std::vector<Placement> ps{replicate(ds), on(ds.back())};
  for (int k = 0; k < R; ++k) ps.push_back(shard(k, ds));
  const auto v = random_values<float>(static_cast<std::size_t>(detail::volume<R>(s)));
  for (std::size_t pi = 0; pi < ps.size(); ++pi) {
    const auto a = from_host(v, s, ps[pi]);
    for (int bits = 1; bits < (1 << R); ++bits) {
      std::array<bool, R> mask{};
      for (int k = 0; k < R; ++k) mask[k] = (bits >> k) & 1;
      const ReduceDims d = to_dims<R>(mask);
      INFO("device set " << set_name(ds) << ", shape " << detail::shape_string<R>(s) << ", placement #" << pi
                         << ", dims mask " << bits);
      auto add = [](double x, double y) { return x + y; };
      const auto want = fold<R>(v, s, mask, 0.0, [](double x) { return x; }, add);
      const auto got = sum(a, d);
      static_assert(std::is_same_v<typename decltype(got)::value_type, float>);
      for (int k = 0; k < R; ++k) CHECK(got.shape()[k] == (mask[k] ? 1 : s[k]));
      // The placement is kept unless the shard dim is reduced (then replicated). An array sharded
      // over one device counts as living on that device.
      if (a.shard_dim() >= 0 && a.devices().size() > 1) {
        if (mask[a.shard_dim()]) CHECK(got.is_replicated());
        else CHECK(got.shard_dim() == a.shard_dim());
      }
      CHECK(got.devices() == a.devices());
      if (a.is_replicated()) CHECK(got.is_replicated());
      check_all_close(to_host(got), want, 1e-5, 1e-4);
      // Fused expression, mean, maximum, count.
      const auto want_sq = fold<R>(v, s, mask, 0.0, [](double x) { return std::fabs(x) * x; }, add);
      check_all_close(to_host(sum(abs(a) * a, d)), want_sq, 1e-5, 1e-4);
      index_t cnt = 1;
      for (int k = 0; k < R; ++k)
        if (mask[k]) cnt *= s[k];
      if (cnt > 0) {
        std::vector<double> want_mean = want;
        for (auto& x : want_mean) x /= static_cast<double>(cnt);
        check_all_close(to_host(mean(a, d)), want_mean, 1e-5, 1e-5);
        const auto want_max = fold<R>(v, s, mask, -INFINITY, [](double x) { return x; },
                                      [](double x, double y) { return x > y ? x : y; });
        check_all_close(to_host(maximum(a, d)), want_max, 0, 0);
      }
      const auto want_cnt = fold<R>(v, s, mask, 0.0, [](double x) { return x > 0.5 ? 1.0 : 0.0; }, add);
      check_all_close(to_host(count(a > 0.5f, d)), want_cnt, 0, 0);
    }
  }
}

}  // namespace

TEST_CASE("sum, mean, maximum, count along every dims combination, ranks 1 to 4") {
  for (const auto& ds : device_sets()) {
    const index_t p = static_cast<index_t>(ds.size());
    check_rank<1>(ds, {0});
    check_rank<1>(ds, {1});
    check_rank<1>(ds, {257});
    check_rank<2>(ds, {31, 2 * p + 1});
    check_rank<2>(ds, {1, 7});
    check_rank<2>(ds, {5, 0});
    check_rank<3>(ds, {3, 4, p + 2});
    check_rank<3>(ds, {33, 2, 5});
    check_rank<4>(ds, {2, 3, 2, p + 1});
  }
}

TEST_CASE("integer sums along dims accumulate in 64 bits; any and all; NaN in maximum") {
  for (const auto& ds : device_sets()) {
    INFO("device set " << set_name(ds));
    const index_t rows = 5, cols = 3 * static_cast<index_t>(ds.size()) + 1;
    std::vector<std::int32_t> v(static_cast<std::size_t>(rows * cols));
    for (auto& x : v) x = static_cast<std::int32_t>(rng()() % 2000000000u);
    const auto a = from_host(v, {rows, cols}, shard(1, ds));
    const auto s = to_host(sum(a, dims(1)));
    for (index_t i = 0; i < rows; ++i) {
      std::int64_t want = 0;
      for (index_t j = 0; j < cols; ++j) want += v[static_cast<std::size_t>(i + j * rows)];
      CHECK(s[static_cast<std::size_t>(i)] == want);
    }
    const auto an = to_host(any(a > 1900000000, dims(0)));
    const auto al = to_host(all(a >= 0, dims(0)));
    for (index_t j = 0; j < cols; ++j) {
      bool want = false;
      for (index_t i = 0; i < rows; ++i) want = want || v[static_cast<std::size_t>(i + j * rows)] > 1900000000;
      CHECK(an[static_cast<std::size_t>(j)] == want);
      CHECK(al[static_cast<std::size_t>(j)]);
    }
    auto f = random_values<double>(static_cast<std::size_t>(rows * cols));
    f[static_cast<std::size_t>(rows * cols - 1)] = std::numeric_limits<double>::quiet_NaN();
    const auto fm = to_host(maximum(from_host(f, {rows, cols}, shard(1, ds)), dims(1)));
    CHECK(std::isnan(fm[static_cast<std::size_t>(rows - 1)]));
    CHECK(!std::isnan(fm[0]));
  }
}

TEST_CASE("bad dims and empty maximum throw") {
  for (const auto& ds : device_sets()) {
    const auto a = rand<float>({4, 5}, shard(1, ds));
    CHECK_THROWS_WITH_AS(sum(a, dims(2)), doctest::Contains("outside"), invalid_argument);
    CHECK_THROWS_WITH_AS(sum(a, dims(1, 1)), doctest::Contains("twice"), invalid_argument);
    const auto e = zeros<float>({4, 0}, shard(1, ds));
    CHECK_THROWS_AS(maximum(e, dims(1)), invalid_argument);
    CHECK(to_host(sum(e, dims(1))) == std::vector<float>(4, 0.f));
  }
}
