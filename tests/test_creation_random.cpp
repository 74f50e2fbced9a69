// SPDX-License-Identifier: Apache-2.0
// rand and randn: the statistics of large samples (range, mean, variance, histogram, serial
// correlation, the normal's tails) for float and double, reproducibility after seed() whatever the
// placement, memory kind and device count, and empty and tiny shapes.
#include "test_support.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

using namespace tessera;
using namespace tessera_test;

namespace {

struct Moments {
  bool in_range = true, finite = true;
  double mean = 0, var = 0, lag1 = 0;
  std::vector<double> bins;  // rand: fraction in each tenth of [0, 1)
  double within1 = 0, within2 = 0;  // randn: fraction with |x| < 1 and < 2
  double distinct = 0;
};

Moments moments(const std::vector<double>& a, bool uniform) {
  Moments m;
  const double n = static_cast<double>(a.size());
  double sum = 0, sq = 0;
  m.bins.assign(10, 0);
  for (double x : a) {
    if (uniform && !(x >= 0 && x < 1)) m.in_range = false;
    if (!std::isfinite(x)) m.finite = false;
    sum += x;
    sq += x * x;
    if (uniform) m.bins[std::min<std::size_t>(9, static_cast<std::size_t>(x * 10))] += 1 / n;
    m.within1 += (std::fabs(x) < 1) / n;
    m.within2 += (std::fabs(x) < 2) / n;
  }
  m.mean = sum / n;
  m.var = sq / n - m.mean * m.mean;
  double cov = 0;
  for (std::size_t i = 0; i + 1 < a.size(); ++i) cov += (a[i] - m.mean) * (a[i + 1] - m.mean);
  m.lag1 = cov / (n - 1) / m.var;
  auto sorted = a;
  std::sort(sorted.begin(), sorted.end());
  m.distinct = static_cast<double>(std::unique(sorted.begin(), sorted.end()) - sorted.begin()) / n;
  return m;
}

template <class T>
std::vector<double> as_double(const std::vector<T>& v) {
  return {v.begin(), v.end()};
}

void check_rand_statistics(bool single) {
  INFO("element type " << (single ? "float" : "double"));
  const index_t n = 1 << 20;
  for (const auto& ds : device_sets()) {
    INFO("device set " << set_name(ds));
    const auto u = moments(single ? as_double(to_host(rand<float>({n, 1, 1}, shard(0, ds))))
                                  : as_double(to_host(rand<double>({n, 1, 1}, shard(0, ds)))),
                           true);
    CHECK_MESSAGE(u.in_range, "rand produced a value outside [0, 1)");
    // Standard error of the mean: sqrt(1/12/n) = 2.8e-4; the bounds are ~18 standard errors.
    CHECK(std::fabs(u.mean - 0.5) < 0.005);
    CHECK(std::fabs(u.var - 1.0 / 12) < 0.003);
    for (int b = 0; b < 10; ++b) {
      INFO("bin " << b);
      CHECK(std::fabs(u.bins[static_cast<std::size_t>(b)] - 0.1) < 0.005);
    }
    CHECK(std::fabs(u.lag1) < 0.01);  // neighbours are not correlated
    CHECK(u.distinct > 0.9);          // not many repeated values

    const auto g = moments(single ? as_double(to_host(randn<float>({1, n, 1}, replicate(ds))))
                                  : as_double(to_host(randn<double>({1, n, 1}, replicate(ds)))),
                           false);
    CHECK(g.finite);
    CHECK(std::fabs(g.mean) < 0.01);      // standard error 1e-3
    CHECK(std::fabs(g.var - 1) < 0.015);  // standard error 1.4e-3
    CHECK(std::fabs(g.within1 - 0.682689) < 0.005);
    CHECK(std::fabs(g.within2 - 0.954500) < 0.003);
    CHECK(std::fabs(g.lag1) < 0.01);
  }
}


}  // namespace

TEST_CASE("rand and randn statistics: float") { check_rand_statistics(true); }
TEST_CASE("rand and randn statistics: double") { check_rand_statistics(false); }

TEST_CASE("rand / randn: same seed, same values, whatever the placement and device count") {
  const std::uint64_t s = std::uniform_int_distribution<std::uint64_t>()(rng());
  CAPTURE(s);
  const auto sets = device_sets();
  if (sets.empty()) return;
  // The reference: one host device.
  const DeviceSet h1 = host_devices(1);
  seed(s);
  const auto ref_u = to_host(rand<float>({33, 5, 13}, shard(1, h1)));
  const auto ref_n = to_host(randn<double>({33, 5, 13}, shard(1, h1)));
  const auto ref_u2 = to_host(rand<float>({33, 5, 13}, shard(1, h1)));
  CHECK(ref_u != ref_u2);  // consecutive calls differ
  for (const auto& ds : sets) {
    INFO("device set " << set_name(ds));
    for (const auto& np : placements(3, ds)) {
      for (memory m : {memory::unified, memory::device}) {
        INFO(np.name << (m == memory::device ? ", memory::device" : ""));
        seed(s);
        const auto u = to_host(rand<float>({33, 5, 13}, np.p, m));
        const auto g = to_host(randn<double>({33, 5, 13}, np.p, m));
        const auto u2 = to_host(rand<float>({33, 5, 13}, np.p, m));
        CHECK(u == ref_u);
        CHECK(u2 == ref_u2);
        // randn goes through log and cos: bit-identical on host devices, within a few ulps on GPUs.
        if (ds[0].is_host()) CHECK(g == ref_n);
        else check_all_close(g, ref_n, 1e-12, 1e-12);
      }
    }
    // Large and 1-d, uneven shards.
    seed(s + 1);
    const auto big_ref = to_host(rand<double>({1, 1, (1 << 20) + 1}, on(h1[0])));
    seed(s + 1);
    const auto big = to_host(rand<double>({1, 1, (1 << 20) + 1}, shard(2, ds)));
    CHECK(big == big_ref);
  }
  // A different seed gives different values; two calls after one seed differ from each other.
  seed(s + 2);
  const auto other = to_host(rand<float>({33, 5, 13}, shard(1, h1)));
  std::size_t equal = 0;
  for (std::size_t i = 0; i < other.size(); ++i) equal += other[i] == ref_u[i];
  CHECK(equal < other.size() / 100 + 2);
  equal = 0;
  for (std::size_t i = 0; i < ref_u.size(); ++i) equal += ref_u2[i] == ref_u[i];
  CHECK(equal < ref_u.size() / 100 + 2);
}

TEST_CASE("rand / randn on empty and tiny shapes") {
  for (const auto& ds : device_sets()) {
    INFO("device set " << set_name(ds));
    for (index_t n : {index_t(0), index_t(1), index_t(2), index_t(7)}) {
      INFO("n = " << n);
      auto u = rand<float>({n, 3, 1}, shard(0, ds));
      auto g = randn<double>({3, 1, n}, shard(2, ds));
      CHECK(u.shape() == std::array<index_t, 3>{n, 3, 1});
      CHECK(g.shape() == std::array<index_t, 3>{3, 1, n});
      const auto hu = to_host(u);
      const auto hg = to_host(g);
      CHECK(hu.size() == static_cast<std::size_t>(3 * n));
      CHECK(hg.size() == static_cast<std::size_t>(3 * n));
      CHECK(std::all_of(hu.begin(), hu.end(), [](float x) { return x >= 0.f && x < 1.f; }));
      CHECK(std::all_of(hg.begin(), hg.end(), [](double x) { return std::isfinite(x); }));
    }
  }
}
