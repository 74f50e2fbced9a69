// SPDX-License-Identifier: Apache-2.0
// var and std, whole and along dims, corrected and not, against two-pass plain loops in double.
#include "dims_reference.hpp"

#include <cmath>
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
