// SPDX-License-Identifier: Apache-2.0
// Shared helpers for the tests: which device sets a test runs on, fresh random host data, and
// comparison against plain-loop references.
#pragma once
#include <doctest/doctest.h>
#include <tessera/tessera.hpp>

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <random>
#include <string>
#include <type_traits>
#include <vector>

namespace tessera_test {

using namespace tessera;

// True in the `.cuda` ctest variant (TESSERA_BACKEND=cuda).
inline bool cuda_variant() {
  const char* b = std::getenv("TESSERA_BACKEND");
  return b != nullptr && std::string(b) == "cuda";
}

// The device sets a test body runs on: 1, 2, 3 and 8 host devices in the host variant; one GPU
// and every GPU in the CUDA variant. Empty (after a visible skip message) when the CUDA variant
// finds no GPU.
inline std::vector<DeviceSet> device_sets() {
  if (cuda_variant()) {
    const DeviceSet g = gpus();
    if (g.empty()) {
      MESSAGE("SKIPPED: no GPU visible (TESSERA_BACKEND=cuda)");
      return {};
    }
    std::vector<DeviceSet> sets{DeviceSet{g[0]}};
    if (g.size() > 1) sets.push_back(g);
    return sets;
  }
  return {host_devices(1), host_devices(2), host_devices(3), host_devices(8)};
}

// True, after a visible skip message, when the CUDA variant finds no GPU (then devices() and
// current_device() throw by design).
inline bool skip_without_gpu() {
  if (cuda_variant() && gpus().empty()) {
    MESSAGE("SKIPPED: no GPU visible (TESSERA_BACKEND=cuda)");
    return true;
  }
  return false;
}

// Multi-device sets only (2 or more devices); empty with a visible skip message when there are
// fewer than two GPUs in the CUDA variant.
inline std::vector<DeviceSet> multi_device_sets() {
  std::vector<DeviceSet> out;
  for (auto& s : device_sets())
    if (s.size() > 1) out.push_back(s);
  if (out.empty() && cuda_variant() && !gpus().empty()) MESSAGE("SKIPPED: fewer than two GPUs visible");
  return out;
}

inline std::string set_name(const DeviceSet& s) { return std::to_string(s.size()) + " x " + s[0].name(); }

// A fresh generator per call site and run (seeded from random_device, printed on failure).
inline std::mt19937_64& rng() {
  static std::mt19937_64 g([] {
    std::random_device rd;
    const std::uint64_t seed = (std::uint64_t(rd()) << 32) ^ rd();
    return seed;
  }());
  return g;
}

template <class T>
std::vector<T> random_values(std::size_t n, double lo = -2.0, double hi = 2.0) {
  std::vector<T> v(n);
  if constexpr (std::is_same_v<T, bool>) {
    std::bernoulli_distribution d(0.5);
    for (std::size_t i = 0; i < n; ++i) v[i] = d(rng());
  } else if constexpr (std::is_integral_v<T>) {
    std::uniform_int_distribution<long long> d(static_cast<long long>(lo * 10), static_cast<long long>(hi * 10));
    for (auto& x : v) x = static_cast<T>(d(rng()));
  } else {
    std::uniform_real_distribution<double> d(lo, hi);
    for (auto& x : v) x = static_cast<T>(d(rng()));
  }
  return v;
}

// Relative-or-absolute closeness; NaN matches NaN, infinities must match exactly.
inline bool close(double a, double b, double rtol = 1e-5, double atol = 1e-6) {
  if (std::isnan(a) || std::isnan(b)) return std::isnan(a) && std::isnan(b);
  if (std::isinf(a) || std::isinf(b)) return a == b;
  return std::fabs(a - b) <= atol + rtol * std::fabs(b);
}

// Checks every element and reports the first mismatch with its index.
template <class A, class B>
void check_all_close(const std::vector<A>& got, const std::vector<B>& want, double rtol = 1e-5, double atol = 1e-6) {
  REQUIRE(got.size() == want.size());
  for (std::size_t i = 0; i < got.size(); ++i) {
    if (!close(static_cast<double>(got[i]), static_cast<double>(want[i]), rtol, atol)) {
      FAIL_CHECK("element " << i << ": got " << static_cast<double>(got[i]) << ", expected "
                            << static_cast<double>(want[i]));
      return;
    }
  }
}

// Sizes every test sweeps: 0, 1, odd, powers of two +-1, and one large.
inline std::vector<index_t> sweep_sizes() { return {0, 1, 7, 31, 32, 33, 255, 256, 257, 1000, 1 << 20}; }

// A 1-d array of `v`, sharded over `ds`.
template <class T>
Array<T, 1> put(const std::vector<T>& v, const DeviceSet& ds) {
  return from_host(v, {static_cast<index_t>(v.size())}, shard(0, ds));
}

// Runs body(ds, n) for every device set and sweep size, both named in any failure.
template <class F>
void for_each_case(F&& body) {
  for (const auto& ds : device_sets()) {
    for (index_t n : sweep_sizes()) {
      INFO("device set " << set_name(ds) << ", n = " << n);
      body(ds, static_cast<std::size_t>(n));
    }
  }
}

// Element by element: integers and bools exactly (as int64), floating values with close().
template <class G, class W>
void check_values(const std::vector<G>& got, const std::vector<W>& want, double rtol, double atol,
                  const char* what = nullptr) {
  INFO("expression: " << (what ? what : "(the values listed in the test)"));
  REQUIRE(got.size() == want.size());
  for (std::size_t i = 0; i < got.size(); ++i) {
    const G g = got[i];
    const W w = want[i];
    bool ok;
    if constexpr (std::is_integral_v<G> && std::is_integral_v<W>) {
      ok = static_cast<std::int64_t>(g) == static_cast<std::int64_t>(w);
    } else {
      ok = close(static_cast<double>(g), static_cast<double>(w), rtol, atol);
    }
    if (!ok) {
      FAIL_CHECK("element " << i << " of " << got.size() << ": got " << static_cast<double>(g) << ", expected "
                            << static_cast<double>(w));
      return;
    }
  }
}


}  // namespace tessera_test
