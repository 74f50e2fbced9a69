// SPDX-License-Identifier: Apache-2.0
// var and std, whole and along dims, corrected and not, against two-pass plain loops in double.
#include "dims_reference.hpp"

#include <cmath>
#include <algorithm>
#include <limits>

using namespace tessera_test;

namespace {
double ref_var(const std::vector<double>& v, bool corrected) {
  if (v.size() < (corrected ? 2u : 1u)) return std::numeric_limits<double>::quiet_NaN();
  double m = 0;
  for (double x : v) m += x;
  m /= double(v.size());
  double ss = 0;
  for (double x : v) ss += (x - m) * (x - m);
  return ss / (double(v.size()) - (corrected ? 1 : 0));
}
}  // namespace

TEST_CASE("var and std of every element") {
  for_each_case([](const DeviceSet& ds, std::size_t n) {
    const auto v = random_values<float>(n, 100, 104);  // a large mean: a one-pass formula would cancel
    Array<float, 1> x = put(v, ds);
    const std::vector<double> d(v.begin(), v.end());
    for (bool corrected : {true, false}) {
      const double want = ref_var(d, corrected);
      const float got = var(x, corrected);
      static_assert(std::is_same_v<decltype(var(x)), float>);
      CHECK(close(got, want, 1e-4, 1e-5));
      CHECK(close(tessera::std(x, corrected), std::sqrt(want), 1e-4, 1e-5));
      CHECK(close(stddev(x, corrected), tessera::std(x, corrected), 0, 0));
    }
    Array<std::int32_t, 1> xi = put(random_values<std::int32_t>(n), ds);
    static_assert(std::is_same_v<decltype(var(xi)), double>);
  });
}

TEST_CASE("var and std along dims keep the rank and the placement rules of reductions") {
  for (const auto& ds : device_sets()) {
    const Shape<2> s{33, 17};
    const auto v = random_values<double>(33 * 17, -3, 5);
    for (const auto& p : {on(ds[0]), shard(1, ds), shard(0, ds)}) {
      const auto a = from_host(v, s, p);
      for (const auto& mask : {std::array<bool, 2>{true, false}, std::array<bool, 2>{false, true}}) {
        const auto d = to_dims<2>(mask);
        // Reference: per slice, the two-pass variance.
        const auto sums = fold<2>(v, s, mask, 0.0, [](double x) { return x; }, [](double x, double y) { return x + y; });
        const double n = mask[0] ? 33 : 17;
        std::vector<double> want(sums.size(), 0.0);
        for (index_t j = 0; j < s[1]; ++j)
          for (index_t i = 0; i < s[0]; ++i) {
            const std::size_t o = static_cast<std::size_t>(mask[0] ? j : i);
            const double dev = v[static_cast<std::size_t>(i + j * s[0])] - sums[o] / n;
            want[o] += dev * dev / (n - 1);
          }
        Array<double, 2> got = var(a, d);
        CHECK(got.shape()[mask[0] ? 0 : 1] == 1);
        check_all_close(to_host(got), want, 1e-10, 1e-12);
        std::vector<double> want_std(want.size());
        for (std::size_t k = 0; k < want.size(); ++k) want_std[k] = std::sqrt(want[k]);
        check_all_close(to_host(tessera::std(a, d)), want_std, 1e-10, 1e-12);
        check_all_close(to_host(stddev(a, d)), want_std, 1e-10, 1e-12);
      }
    }
  }
}

TEST_CASE("argmax, argmin, findmax, findmin: the first extreme index, NaN winning, over every shard") {
  for_each_case([](const DeviceSet& ds, std::size_t n) {
    if (n == 0) {
      Array<float, 1> e = put(std::vector<float>{}, ds);
      (void)expect_error<invalid_argument>([&] { (void)argmax(e); });
      return;
    }
    auto v = random_values<float>(n, -5, 5);
    if (n > 3) v[n / 3] = v[n - 1] = 9.f;  // ties: the first index wins
    Array<float, 1> x = put(v, ds);
    std::size_t imax = 0, imin = 0;
    for (std::size_t i = 0; i < n; ++i) {
      if (v[i] > v[imax]) imax = i;
      if (v[i] < v[imin]) imin = i;
    }
    CHECK(argmax(x) == static_cast<std::int64_t>(imax));
    CHECK(argmin(x) == static_cast<std::int64_t>(imin));
    const auto [mv, mi] = findmax(x);
    CHECK(mv == v[imax]);
    CHECK(mi == static_cast<std::int64_t>(imax));
    const auto [nv, ni] = findmin(x * 2.f);
    CHECK(nv == 2.f * v[imin]);
    CHECK(ni == static_cast<std::int64_t>(imin));
    if (n > 2) {
      v[n - 2] = std::numeric_limits<float>::quiet_NaN();
      Array<float, 1> xn = put(v, ds);
      CHECK(argmax(xn) == static_cast<std::int64_t>(n - 2));
      CHECK(argmin(xn) == static_cast<std::int64_t>(n - 2));
    }
    // Integers, and a matrix (column-major linear index).
    const auto iv = random_values<std::int32_t>(n);
    Array<std::int32_t, 1> xi = put(iv, ds);
    CHECK(argmax(xi) == static_cast<std::int64_t>(std::max_element(iv.begin(), iv.end()) - iv.begin()));
  });
  for (const auto& ds : device_sets()) {
    auto v = random_values<double>(12 * 7);
    v[5 + 3 * 12] = 100;
    Array<double, 2> a = from_host(v, {12, 7}, shard(1, ds));
    CHECK(argmax(a) == 5 + 3 * 12);
  }
}

TEST_CASE("var of float input takes the mean in double") {
  for (const auto& ds : device_sets()) {
    Array<float, 1> x = put(std::vector<float>{1e7f, 1e7f + 1}, ds);
    CHECK(var(x) == doctest::Approx(0.5));
    CHECK(var(x, dims(0)).at(0) == doctest::Approx(0.5));
    (void)expect_error<invalid_argument>([&] { (void)var(x, dims(5)); });
  }
}
