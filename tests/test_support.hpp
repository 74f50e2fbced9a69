// SPDX-License-Identifier: Apache-2.0
// Shared helpers for the tests: which device sets a test runs on, fresh random host data, shapes
// and placements as data, comparison against plain-loop references, and checks of errors.
#pragma once
#include <doctest/doctest.h>
#include <tessera/tessera.hpp>

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <exception>
#include <random>
#include <span>
#include <string>
#include <type_traits>
#include <utility>
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
  // As a std::string: doctest prints a char* as its address.
  INFO("expression: " << std::string(what ? what : "(the values listed in the test)"));
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
      if constexpr (std::is_integral_v<G> && std::is_integral_v<W>) {  // every digit of an int64
        FAIL_CHECK("element " << i << " of " << got.size() << ": got " << static_cast<std::int64_t>(g)
                              << ", expected " << static_cast<std::int64_t>(w));
      } else {
        FAIL_CHECK("element " << i << " of " << got.size() << ": got " << static_cast<double>(g) << ", expected "
                              << static_cast<double>(w));
      }
      return;
    }
  }
}

// -- shapes and placements as data --------------------------------------------------------------
using Dims = std::vector<index_t>;

// "{3,4,2}".
inline std::string dims_string(const Dims& d) {
  std::string s = "{";
  for (std::size_t k = 0; k < d.size(); ++k) s += (k ? "," : "") + std::to_string(d[k]);
  return s + "}";
}

inline index_t volume(const Dims& d) {
  index_t v = 1;
  for (auto x : d) v *= x;
  return v;
}

template <int N>
Shape<N> to_shape(const Dims& d) {
  REQUIRE(d.size() == static_cast<std::size_t>(N));
  Shape<N> s{};
  for (int k = 0; k < N; ++k) s[k] = d[static_cast<std::size_t>(k)];
  return s;
}

// A rank-N array of the column-major host values `v`, of `shape`, placed by `p`.
template <int N, class T>
Array<T, N> make(const std::vector<T>& v, const Dims& shape, const Placement& p) {
  return from_host<T, static_cast<std::size_t>(N)>(std::span<const T>(v), to_shape<N>(shape), p);
}

// Fresh random float values for an array of `shape`.
inline std::vector<float> fresh(const Dims& shape) {
  return random_values<float>(static_cast<std::size_t>(volume(shape)));
}

struct NamedPlacement {
  std::string name;
  Placement p;
};

// The placements of a rank-`rank` array over `ds`: shard along each dimension, replicate, and on
// one device (the last of the set, so that it is not always the first device). With `all` false,
// shard along the last dimension only.
inline std::vector<NamedPlacement> placements(int rank, const DeviceSet& ds, bool all = true) {
  std::vector<NamedPlacement> out;
  for (int d = all ? 0 : rank - 1; d < rank; ++d) out.push_back({"shard(" + std::to_string(d) + ")", shard(d, ds)});
  if (all) {
    out.push_back({"replicate", replicate(ds)});
    out.push_back({"on(" + ds.back().name() + ")", on(ds.back())});
  }
  return out;
}

// What every part of `a` holds (every shard, every replica), read through host_data: works for
// host devices and unified memory.
template <class T, int N>
std::vector<std::vector<T>> part_data(const Array<T, N>& a) {
  std::vector<std::vector<T>> out;
  const auto& l = a.layout();
  for (int i = 0; i < static_cast<int>(l.parts.size()); ++i) {
    const auto n = static_cast<std::size_t>(detail::volume<N>(l.parts[static_cast<std::size_t>(i)].extent));
    const T* h = n ? a.host_data(i) : nullptr;
    REQUIRE((n == 0 || h != nullptr));
    out.emplace_back(h, h + n);
  }
  return out;
}

// -- exact comparison, error checks --------------------------------------------------------------
// Element by element with ==, NaN matching NaN; reports the first mismatch.
template <class T>
void check_equal(const std::vector<T>& got, const std::vector<T>& want) {
  REQUIRE(got.size() == want.size());
  for (std::size_t i = 0; i < got.size(); ++i) {
    const bool same = got[i] == want[i] ||
                      (std::isnan(static_cast<double>(got[i])) && std::isnan(static_cast<double>(want[i])));
    if (!same) {
      FAIL_CHECK("element " << i << ": got " << static_cast<double>(got[i]) << ", expected "
                            << static_cast<double>(want[i]));
      return;
    }
  }
}

// The values of an array as the host sees them: to_host, then (replicated) every replica read
// through host_data, as to_host reads only one of them.
template <class T, int N>
std::vector<std::vector<T>> snapshot(const Array<T, N>& a) {
  std::vector<std::vector<T>> out{to_host(a)};
  if (!a.is_replicated() || out[0].empty()) return out;
  for (auto& p : part_data(a)) out.push_back(std::move(p));
  return out;
}

template <class T>
void check_snapshot(const std::vector<std::vector<T>>& snap, const std::vector<T>& want) {
  for (std::size_t s = 0; s < snap.size(); ++s) {
    INFO((s == 0 ? std::string("to_host") : "replica " + std::to_string(s - 1)));
    check_equal(snap[s], want);
  }
}

// to_host and every replica hold `want`.
template <class T, int N>
void check_replicas(const Array<T, N>& a, const std::vector<T>& want) {
  check_snapshot(snapshot(a), want);
}

// Points TESSERA_KERNEL_CACHE at a fresh directory for the life of the object (removed after), so
// that a test's compile counts (detail::rtc::stats) are its own.
struct PrivateKernelCache {
  std::string path;
  PrivateKernelCache() {
    char tmpl[] = "/tmp/tessera-test-cache-XXXXXX";
    path = mkdtemp(tmpl);
    setenv("TESSERA_KERNEL_CACHE", path.c_str(), 1);
  }
  ~PrivateKernelCache() { (void)std::system(("rm -rf '" + path + "'").c_str()); }
  PrivateKernelCache(const PrivateKernelCache&) = delete;
  PrivateKernelCache& operator=(const PrivateKernelCache&) = delete;
};

inline bool contains(const std::string& s, const std::string& what) { return s.find(what) != std::string::npos; }

// Runs f, expects exception Ex, returns its message (empty after a recorded failure).
template <class Ex, class F>
std::string expect_error(F&& f) {
  try {
    f();
  } catch (const Ex& e) {
    return e.what();
  } catch (const std::exception& e) {
    FAIL_CHECK("wrong exception type, message: " << e.what());
    return {};
  }
  FAIL_CHECK("no exception thrown");
  return {};
}

// The message names every one of `parts`. An empty message (expect_error has already recorded the
// failure) is not checked again.
inline void check_mentions(const std::string& msg, const std::vector<std::string>& parts) {
  if (msg.empty()) return;
  for (auto& p : parts) CHECK_MESSAGE(contains(msg, p), "message \"" << msg << "\" lacks \"" << p << "\"");
}

// -- expressions against plain-loop references (operators, functions) ----------------------------
using i32 = std::int32_t;
using i64 = std::int64_t;

// Evaluates `e`, checks the result's element type at compile time and its values against `want`
// with check_values.
template <class Want, class E, class R>
void expect_expr(const char* what, E&& e, const std::vector<R>& want, double rtol, double atol) {
  auto r = eval(std::forward<E>(e));
  static_assert(std::is_same_v<typename decltype(r)::value_type, Want>, "unexpected result element type");
  check_values(to_host(r), want, rtol, atol, what);
}
#define EXPECT_EXPR_TOL(Want, expr, want, rtol, atol) ::tessera_test::expect_expr<Want>(#expr, expr, want, rtol, atol)

// The element type eval(expr) gives, checked at compile time.
#define RESULT_IS(expr, T) static_assert(std::is_same_v<decltype(eval(expr))::value_type, T>, #expr " gives " #T)

// Plain-loop references. They take function pointers (`+[](...) {...}`) so that one loop serves
// every function of a signature: a file's compile time is spent on the library, not on these.
template <class R, class A, class FA>
[[gnu::noipa]] std::vector<R> map1(const std::vector<A>& a, R (*f)(FA)) {
  std::vector<R> out(a.size());
  for (std::size_t i = 0; i < a.size(); ++i) out[i] = f(static_cast<FA>(static_cast<A>(a[i])));
  return out;
}
template <class R, class A, class B, class FA, class FB>
[[gnu::noipa]] std::vector<R> map2(const std::vector<A>& a, const std::vector<B>& b, R (*f)(FA, FB)) {
  std::vector<R> out(a.size());
  for (std::size_t i = 0; i < a.size(); ++i)
    out[i] = f(static_cast<FA>(static_cast<A>(a[i])), static_cast<FB>(static_cast<B>(b[i])));
  return out;
}

}  // namespace tessera_test
