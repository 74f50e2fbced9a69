// SPDX-License-Identifier: Apache-2.0
// half and bfloat16 (storage computing in float): the conversions against an independent reference
// (value arithmetic with ldexp and nearbyint, not bit manipulation), over every 16-bit pattern, every
// rounding tie and random floats and doubles; the same conversions run on the devices, bit for bit;
// arrays: creation, transfer, elementwise expressions (result types and values), fills, reductions,
// printing, .npy and DLPack, over 1, 2, 3 and 8 host devices (1 and all GPUs in the CUDA variant)
// and sizes 0, 1, odd, 2^k +- 1 and 2^20 + 3.
#include "test_support.hpp"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <limits>
#include <sstream>

using namespace tessera;
using namespace tessera_test;

namespace {

// -- the reference: each format's value set, described by its significand bits and exponents ----
template <class T>
struct format;
template <>
struct format<half> {
  static constexpr int p = 11, emin = -14, ebits = 5, mbits = 10;
  static constexpr double max = 65504.0;
  static constexpr const char* name = "half";
};
template <>
struct format<bfloat16> {
  static constexpr int p = 8, emin = -126, ebits = 8, mbits = 7;
  static constexpr double max = 0x1.fep127;
  static constexpr const char* name = "bfloat16";
};

// The value of a bit pattern, decoded arithmetically.
template <class T>
double ref_decode(std::uint16_t b) {
  using F = format<T>;
  const int bias = (1 << (F::ebits - 1)) - 1;
  const int e = (b >> F::mbits) & ((1 << F::ebits) - 1);
  const int m = b & ((1 << F::mbits) - 1);
  const double s = (b & 0x8000) ? -1.0 : 1.0;
  if (e == (1 << F::ebits) - 1) return m == 0 ? s * INFINITY : NAN;
  if (e == 0) return s * std::ldexp(m, 1 - bias - F::mbits);
  return s * std::ldexp((1 << F::mbits) + m, e - bias - F::mbits);
}

// x rounded to the format, to nearest with ties to even (nearbyint in the default rounding mode),
// overflowing to infinity past the largest finite value.
template <class T>
double ref_round(double x) {
  using F = format<T>;
  if (std::isnan(x) || x == 0 || std::isinf(x)) return x;
  const double a = std::fabs(x);
  const int e = std::max(std::ilogb(a), F::emin);
  const double q = std::ldexp(1.0, e - (F::p - 1));
  double r = std::nearbyint(a / q) * q;
  if (r > F::max) r = INFINITY;
  return std::copysign(r, x);
}

// T(x) against ref_round: the same value and sign. A float NaN keeps its sign and the top bits of
// its payload, or becomes the quiet NaN when those are all zero.
template <class T, class X>
bool converts_like_reference(X x) {
  const T t(x);
  const double got = static_cast<double>(static_cast<float>(t));
  if (std::isnan(static_cast<double>(x))) {
    if constexpr (std::is_same_v<X, float>) {
      constexpr int m = format<T>::mbits;
      const std::uint32_t top = (std::bit_cast<std::uint32_t>(x) >> (23 - m)) & ((1u << m) - 1);
      const std::uint32_t want = top ? top : 1u << (m - 1);
      if ((t.bits() & ((1u << m) - 1)) != want) return false;
    }
    return std::isnan(got) && std::signbit(got) == std::signbit(static_cast<double>(x));
  }
  const double want = ref_round<T>(static_cast<double>(x));
  return got == want && std::signbit(got) == std::signbit(want);
}

template <class T>
std::uint32_t fbits(T v) {
  return std::bit_cast<std::uint32_t>(static_cast<float>(v));
}

// Every finite positive pattern below the largest with its successor: the tie between them, and the
// floats just below and above it (exact in float: the formats have far fewer significand bits).
template <class T, class F>
void for_each_tie(F&& f) {
  const std::uint16_t inf = static_cast<std::uint16_t>(((1u << format<T>::ebits) - 1) << format<T>::mbits);
  for (std::uint32_t b = 0; b + 1 < inf; ++b) {
    const float lo = static_cast<float>(T::from_bits(static_cast<std::uint16_t>(b)));
    const float hi = static_cast<float>(T::from_bits(static_cast<std::uint16_t>(b + 1)));
    f(static_cast<std::uint16_t>(b), static_cast<float>((static_cast<double>(lo) + hi) / 2));
  }
}

template <class T>
void check_all_patterns() {
  INFO(format<T>::name);
  int bad = 0;
  for (std::uint32_t b = 0; b < 65536 && bad < 5; ++b) {
    const auto bits = static_cast<std::uint16_t>(b);
    const float f = static_cast<float>(T::from_bits(bits));
    const double want = ref_decode<T>(bits);
    const bool value_ok = std::isnan(want) ? std::isnan(f) : (f == want && std::signbit(f) == std::signbit(want));
    // Back: every pattern, NaNs (quiet or signalling, with their payloads) included.
    const std::uint16_t back = T(f).bits();
    const bool back_ok = back == bits;
    if (!value_ok || !back_ok) {
      ++bad;
      FAIL_CHECK("pattern 0x" << std::hex << b << std::dec << ": float " << f << " (expected " << want
                              << "), back 0x" << std::hex << back);
    }
  }
}

template <class T>
void check_rounding() {
  INFO(format<T>::name);
  int bad = 0;
  auto expect = [&](float x, std::uint16_t want, const char* what) {
    const std::uint16_t got = T(x).bits(), got_neg = T(-x).bits();
    if ((got != want || got_neg != (want | 0x8000)) && bad++ < 5) {
      FAIL_CHECK(what << " " << x << ": got 0x" << std::hex << got << ", expected 0x" << want);
    }
  };
  for_each_tie<T>([&](std::uint16_t lo, float mid) {
    expect(mid, (lo & 1) ? static_cast<std::uint16_t>(lo + 1) : lo, "tie");
    expect(std::nextafter(mid, 0.0f), lo, "below the tie");
    expect(std::nextafter(mid, INFINITY), static_cast<std::uint16_t>(lo + 1), "above the tie");
  });
  // Overflow: the tie between the largest finite value and the next power of two goes to Inf.
  const std::uint16_t inf = static_cast<std::uint16_t>(((1u << format<T>::ebits) - 1) << format<T>::mbits);
  const double top = format<T>::max + std::ldexp(1.0, std::ilogb(format<T>::max) - format<T>::p);
  if (top < std::numeric_limits<float>::max()) {
    expect(static_cast<float>(top), inf, "overflow tie");
    expect(std::nextafter(static_cast<float>(top), 0.0f), static_cast<std::uint16_t>(inf - 1), "below overflow");
  }
  expect(std::numeric_limits<float>::max(), std::is_same_v<T, half> ? inf : inf, "float max");
  expect(INFINITY, inf, "infinity");
  expect(0.0f, 0, "zero");
  expect(std::numeric_limits<float>::denorm_min(), 0, "float denorm_min");
  // Random float bit patterns, every exponent.
  for (int i = 0; i < 1000000; ++i) {
    const float x = std::bit_cast<float>(static_cast<std::uint32_t>(rng()()));
    if (!converts_like_reference<T>(x) && bad++ < 5) FAIL_CHECK("float " << x << " (0x" << std::hex << fbits(x) << ")");
  }
  // Doubles round once: just above a tie (float would land on the tie and round to even), and random.
  for_each_tie<T>([&](std::uint16_t lo, float mid) {
    if (lo % 97 != 0) return;
    const double above = std::nextafter(static_cast<double>(mid), INFINITY), below = std::nextafter(static_cast<double>(mid), 0.0);
    if (T(above).bits() != lo + 1 && bad++ < 5) FAIL_CHECK("double above the tie " << above);
    if (T(below).bits() != lo && bad++ < 5) FAIL_CHECK("double below the tie " << below);
  });
  for (int i = 0; i < 200000; ++i) {
    const double x = std::ldexp(std::uniform_real_distribution<double>(-1, 1)(rng()),
                                std::uniform_int_distribution<int>(-140, 130)(rng()));
    if (!converts_like_reference<T>(x) && bad++ < 5) FAIL_CHECK("double " << x);
  }
  // Integers through double.
  for (long long n : {0LL, 1LL, -7LL, 255LL, 257LL, 259LL, 2049LL, 2051LL, -2051LL, 65519LL, 65520LL, 1LL << 40,
                      -(1LL << 62)}) {
    if (!converts_like_reference<T>(static_cast<double>(n)) || T(n).bits() != T(static_cast<double>(n)).bits()) {
      if (bad++ < 5) FAIL_CHECK("integer " << n);
    }
  }
  CHECK(bad == 0);
}

TEST_CASE("half and bfloat16 are 16-bit element types that convert implicitly to float only") {
  static_assert(sizeof(half) == 2 && sizeof(bfloat16) == 2);
  static_assert(std::is_trivially_copyable_v<half> && std::is_trivially_copyable_v<bfloat16>);
  static_assert(element_type<half> && element_type<bfloat16> && scalar_type<half>);
  static_assert(std::is_convertible_v<half, float> && !std::is_convertible_v<float, half>);
  static_assert(std::is_convertible_v<bfloat16, float> && !std::is_convertible_v<double, bfloat16>);
  CHECK(half(1.0f).bits() == 0x3c00);
  CHECK(half(-2.0).bits() == 0xc000);
  CHECK(half(65504.0f).bits() == 0x7bff);
  CHECK(bfloat16(1.0f).bits() == 0x3f80);
  CHECK(bfloat16(-3).bits() == 0xc040);
  CHECK(static_cast<float>(half::from_bits(0x0001)) == std::ldexp(1.0f, -24));
}

TEST_CASE("every half and bfloat16 bit pattern converts to float exactly and back") {
  check_all_patterns<half>();
  check_all_patterns<bfloat16>();
}

TEST_CASE("float, double and integers round to nearest even: ties, subnormals, overflow to Inf") {
  check_rounding<half>();
  check_rounding<bfloat16>();
}

// -- the devices convert with the same bits --------------------------------------------------------
template <class T>
void check_device_conversions(const DeviceSet& ds) {
  INFO(format<T>::name << " on " << set_name(ds));
  std::vector<T> all(65536);
  for (std::uint32_t b = 0; b < 65536; ++b) all[b] = T::from_bits(static_cast<std::uint16_t>(b));
  const Array<T, 1> a = from_host(all, {65536}, shard(0, ds));
  const Array<float, 1> f = cast<float>(a);
  std::vector<float> floats = to_host(f);
  int bad = 0;
  for (std::uint32_t b = 0; b < 65536; ++b) {
    if (fbits(floats[b]) != fbits(all[b]) && bad++ < 5) FAIL_CHECK("to float, pattern 0x" << std::hex << b);
  }
  // Back, plus every tie and its neighbours, and random float patterns.
  for_each_tie<T>([&](std::uint16_t, float mid) {
    floats.push_back(mid);
    floats.push_back(std::nextafter(mid, INFINITY));
  });
  for (int i = 0; i < 100000; ++i) floats.push_back(std::bit_cast<float>(static_cast<std::uint32_t>(rng()())));
  const auto n = static_cast<index_t>(floats.size());
  const Array<T, 1> back = cast<T>(from_host(floats, {n}, shard(0, ds)));
  const auto got = to_host(back);
  for (std::size_t i = 0; i < floats.size(); ++i) {
    if (got[i].bits() != T(floats[i]).bits() && bad++ < 5) FAIL_CHECK("from float " << floats[i]);
  }
  // Doubles round once on the devices too.
  std::vector<double> doubles(4097);
  for (auto& d : doubles) d = std::ldexp(std::uniform_real_distribution<double>(-1, 1)(rng()), std::uniform_int_distribution<int>(-30, 20)(rng()));
  const auto gd = to_host(Array<T, 1>(cast<T>(from_host(doubles, {4097}, shard(0, ds)))));
  for (std::size_t i = 0; i < doubles.size(); ++i) {
    if (gd[i].bits() != T(doubles[i]).bits() && bad++ < 5) FAIL_CHECK("from double " << doubles[i]);
  }
  CHECK(bad == 0);
}

TEST_CASE("conversions on the devices give the host's bits") {
  for (const auto& ds : device_sets()) {
    check_device_conversions<half>(ds);
    check_device_conversions<bfloat16>(ds);
  }
}

// -- arrays ---------------------------------------------------------------------------------------
inline std::vector<index_t> half_sizes() { return {0, 1, 7, 15, 16, 17, 255, 256, 257, 1023, (1 << 20) + 3}; }

template <class T>
std::vector<T> rounded(const std::vector<double>& v) {
  std::vector<T> out(v.size());
  for (std::size_t i = 0; i < v.size(); ++i) out[i] = T(v[i]);
  return out;
}

template <class T>
void check_bits(const std::vector<T>& got, const std::vector<T>& want, const char* what) {
  INFO(what);
  REQUIRE(got.size() == want.size());
  for (std::size_t i = 0; i < got.size(); ++i) {
    if (got[i].bits() != want[i].bits()) {
      FAIL_CHECK("element " << i << ": got " << float(got[i]) << " (0x" << std::hex << got[i].bits() << "), expected "
                            << float(want[i]) << " (0x" << want[i].bits() << ")");
      return;
    }
  }
}

// One rounding of T away from the exact value, plus what float arithmetic on terms of magnitude
// below 10 may add (GPUs contract a * b + c into one FMA; near zero that is more than T's ulp).
template <class T>
void check_one_ulp(const std::vector<T>& got, const std::vector<double>& exact, const char* what) {
  INFO(what);
  REQUIRE(got.size() == exact.size());
  const double rel = std::ldexp(1.0, 1 - format<T>::p), atol = 4e-6;
  for (std::size_t i = 0; i < got.size(); ++i) {
    if (std::fabs(double(got[i]) - exact[i]) > rel * std::fabs(exact[i]) + atol) {
      FAIL_CHECK("element " << i << ": got " << float(got[i]) << ", expected about " << exact[i]);
      return;
    }
  }
}

template <class T>
void check_elementwise(const DeviceSet& ds, std::size_t n) {
  using U = std::conditional_t<std::is_same_v<T, half>, bfloat16, half>;  // the other narrow type
  const auto av = rounded<T>(random_values<double>(n)), bv = rounded<T>(random_values<double>(n, 0.5, 3.0));
  const auto fv = random_values<float>(n);
  const auto iv = random_values<i32>(n);
  const auto uv = rounded<U>(random_values<double>(n));
  const index_t len = static_cast<index_t>(n);
  const auto p = shard(0, ds);
  const Array<T, 1> a = from_host(av, {len}, p), b = from_host(bv, {len}, p);
  const Array<float, 1> f = from_host(fv, {len}, p);
  const Array<i32, 1> k = from_host(iv, {len}, p);
  const Array<U, 1> u = from_host(uv, {len}, p);
  check_bits(to_host(a), av, "from_host then to_host");
  if (n > 0) CHECK(a.at(len - 1).bits() == av[n - 1].bits());

  // half op half stays half, rounded once from the float result (exact ops: no FMA contraction).
  auto ab = eval(a + b);
  static_assert(std::is_same_v<decltype(ab), Array<T, 1>>);
  std::vector<T> want(n);
  for (std::size_t i = 0; i < n; ++i) want[i] = T(float(av[i]) + float(bv[i]));
  check_bits(to_host(ab), want, "a + b");
  for (std::size_t i = 0; i < n; ++i) want[i] = T(float(av[i]) * float(bv[i]));
  check_bits(to_host(eval(a * b)), want, "a * b");
  for (std::size_t i = 0; i < n; ++i) want[i] = T(float(av[i]) / float(bv[i]));
  check_bits(to_host(eval(a / b)), want, "a / b");
  // Chains compute in float and round once at the end; functions too.
  std::vector<double> exact(n);
  auto chain = eval(a * b - a / 3 + 1.5);
  static_assert(std::is_same_v<decltype(chain), Array<T, 1>>);
  for (std::size_t i = 0; i < n; ++i) exact[i] = double(av[i]) * double(bv[i]) - double(av[i]) / 3 + 1.5;
  check_one_ulp(to_host(chain), exact, "a * b - a / 3 + 1.5");
  auto fun = eval(sqrt(b) + sin(a) * abs(a));
  static_assert(std::is_same_v<decltype(fun), Array<T, 1>>);
  for (std::size_t i = 0; i < n; ++i) exact[i] = std::sqrt(double(bv[i])) + std::sin(double(av[i])) * std::fabs(double(av[i]));
  check_one_ulp(to_host(fun), exact, "sqrt(b) + sin(a) * abs(a)");

  // Mixed: with float, int32 or the other narrow type the result is float (computed in float).
  auto mf = eval(a + f);
  static_assert(std::is_same_v<decltype(mf), Array<float, 1>>);
  auto mi = eval(k * a);
  static_assert(std::is_same_v<decltype(mi), Array<float, 1>>);
  auto mu = eval(a - u);
  static_assert(std::is_same_v<decltype(mu), Array<float, 1>>);
  static_assert(std::is_same_v<decltype(eval(a * 2.0)), Array<T, 1>>);  // weak scalars keep T
  static_assert(std::is_same_v<decltype(eval(cast<double>(a) + 1)), Array<double, 1>>);
  const auto hf = to_host(mf), hi = to_host(mi), hu = to_host(mu);
  std::vector<float> wf(n), wi(n), wu(n);
  for (std::size_t i = 0; i < n; ++i) {
    wf[i] = float(av[i]) + fv[i];
    wi[i] = float(iv[i]) * float(av[i]);
    wu[i] = float(av[i]) - float(uv[i]);
  }
  check_equal(hf, wf);
  check_equal(hi, wi);
  check_equal(hu, wu);

  // Comparisons and where: float compares; where of two T operands is T.
  auto lt = eval(a < b);
  static_assert(std::is_same_v<decltype(lt), Array<bool, 1>>);
  auto mx = eval(where(a > b, a, b));
  static_assert(std::is_same_v<decltype(mx), Array<T, 1>>);
  const auto hl = to_host(lt);
  for (std::size_t i = 0; i < n; ++i) want[i] = float(av[i]) > float(bv[i]) ? av[i] : bv[i];
  check_bits(to_host(mx), want, "where(a > b, a, b)");
  for (std::size_t i = 0; i < n; ++i) {
    if (hl[i] != (float(av[i]) < float(bv[i]))) {
      FAIL_CHECK("a < b, element " << i);
      break;
    }
  }

  // Stores into T round once: a float expression, a double array, a fill, compound assignment.
  Array<T, 1> c(Shape<1>{len}, p);
  c = f * 3.0f;
  for (std::size_t i = 0; i < n; ++i) want[i] = T(fv[i] * 3.0f);
  check_bits(to_host(c), want, "c = f * 3");
  const auto dv = random_values<double>(n, -1e3, 1e3);
  c = from_host(dv, {len}, p);
  check_bits(to_host(c), rounded<T>(dv), "c = double array");
  c = 0.1;
  check_bits(to_host(c), std::vector<T>(n, T(0.1)), "c = 0.1");
  c += a;
  for (std::size_t i = 0; i < n; ++i) want[i] = T(float(T(0.1)) + float(av[i]));
  check_bits(to_host(c), want, "c += a");
  const Array<T, 1> cd = cast<T>(from_host(dv, {len}, p));
  check_bits(to_host(cd), rounded<T>(dv), "cast<T>(double array)");
}

TEST_CASE("elementwise expressions compute in float: half op half is half, mixed is float") {
  for (const auto& ds : device_sets()) {
    for (index_t n : half_sizes()) {
      INFO("device set " << set_name(ds) << ", n = " << n);
      check_elementwise<half>(ds, static_cast<std::size_t>(n));
      check_elementwise<bfloat16>(ds, static_cast<std::size_t>(n));
    }
  }
}

// A view starting one element in: its data is not 16-byte aligned, so GPUs take the scalar path.
TEST_CASE("unaligned views and 2-d broadcasting over half arrays") {
  for (const auto& ds : device_sets()) {
    INFO(set_name(ds));
    const index_t n = 1027;
    const auto av = rounded<half>(random_values<double>(n));
    Array<half, 1> a = from_host(av, {n}, on(ds.back()));
    a(range(1, n)) = a(range(1, n)) * 2;
    auto h = to_host(a);
    for (index_t i = 1; i < n; ++i) CHECK_MESSAGE(h[i].bits() == half(float(av[i]) * 2).bits(), "element " << i);
    const index_t m = 33, k = 3 * static_cast<index_t>(ds.size()) + 1;
    const auto mv = rounded<bfloat16>(random_values<double>(static_cast<std::size_t>(m * k)));
    const auto rv = rounded<bfloat16>(random_values<double>(static_cast<std::size_t>(m)));
    const Array<bfloat16, 2> x = from_host(mv, {m, k}, shard(1, ds));
    const Array<bfloat16, 1> r = from_host(rv, {m}, replicate(ds));
    const Array<bfloat16, 2> y = x * r;  // r broadcasts along dim 1
    const auto hy = to_host(y);
    int bad = 0;
    for (index_t j = 0; j < k; ++j)
      for (index_t i = 0; i < m; ++i) {
        const auto w = bfloat16(float(mv[i + j * m]) * float(rv[i]));
        if (hy[i + j * m].bits() != w.bits() && bad++ < 3) FAIL_CHECK("x * r at " << i << ", " << j);
      }
  }
}

template <class T>
void check_reductions(const DeviceSet& ds, std::size_t n) {
  const auto av = rounded<T>(random_values<double>(n, -2.0, 2.0));
  const auto bv = rounded<T>(random_values<double>(n, 0.5, 1.5));
  const auto p = shard(0, ds);
  const Array<T, 1> a = from_host(av, {static_cast<index_t>(n)}, p), b = from_host(bv, {static_cast<index_t>(n)}, p);
  double s = 0, sa = 0, d = 0, q = 0, mx = -INFINITY, mn = INFINITY;
  for (std::size_t i = 0; i < n; ++i) {
    s += double(av[i]);
    sa += std::fabs(double(av[i]));
    d += double(av[i]) * double(bv[i]);
    q += double(av[i]) * double(av[i]);
    mx = std::max(mx, double(av[i]));
    mn = std::min(mn, double(av[i]));
  }
  const auto got_sum = sum(a);
  static_assert(std::is_same_v<decltype(got_sum), const float>, "reductions of half return float");
  static_assert(std::is_same_v<decltype(mean(a)), float> && std::is_same_v<decltype(maximum(a)), float>);
  const double tol = 1e-5 * (sa + 1) + 1e-6 * static_cast<double>(n);
  CHECK(std::fabs(got_sum - s) <= tol);
  CHECK(std::fabs(dot(a, b) - d) <= 2 * tol);
  CHECK(std::fabs(norm(a) - std::sqrt(q)) <= 1e-5 * std::sqrt(q) + 1e-6);
  CHECK(sum(a, as_array).at() == doctest::Approx(got_sum).epsilon(1e-5));
  if (n > 0) {
    CHECK(maximum(a) == mx);
    CHECK(minimum(a) == mn);
    CHECK(std::fabs(mean(a) - s / static_cast<double>(n)) <= tol / static_cast<double>(n));
    CHECK(prod(b) == doctest::Approx([&] {
            double r = 1;
            for (auto v : bv) r *= double(v);
            return r;
          }()).epsilon(1e-4));
  }
}

TEST_CASE("reductions over half and bfloat16 accumulate in float and return float") {
  for (const auto& ds : device_sets()) {
    for (index_t n : half_sizes()) {
      INFO("device set " << set_name(ds) << ", n = " << n);
      check_reductions<half>(ds, static_cast<std::size_t>(n));
      check_reductions<bfloat16>(ds, static_cast<std::size_t>(n));
    }
    // Along dims of a sharded matrix, either dimension.
    const index_t m = 37, k = 2 * static_cast<index_t>(ds.size()) + 3;
    const auto v = rounded<half>(random_values<double>(static_cast<std::size_t>(m * k)));
    const Array<half, 2> x = from_host(v, {m, k}, shard(1, ds));
    auto s0 = sum(x, dims(0));
    auto s1 = maximum(x, dims(1));
    static_assert(std::is_same_v<decltype(s0), Array<float, 2>> && std::is_same_v<decltype(s1), Array<float, 2>>);
    const auto h0 = to_host(s0), h1 = to_host(s1);
    for (index_t j = 0; j < k; ++j) {
      double w = 0;
      for (index_t i = 0; i < m; ++i) w += double(v[i + j * m]);
      CHECK(h0[j] == doctest::Approx(w).epsilon(1e-5));
    }
    for (index_t i = 0; i < m; ++i) {
      float w = -INFINITY;
      for (index_t j = 0; j < k; ++j) w = std::max(w, float(v[i + j * m]));
      CHECK(h1[i] == w);
    }
  }
}

// One device of the set, so that reproducibility is checked across placements.
Placement host_or_first(const DeviceSet& ds) { return on(ds.front()); }

template <class T>
void check_creation(const DeviceSet& ds, index_t n) {
  const auto p = shard(0, ds);
  check_bits(to_host(zeros<T>({n}, p)), std::vector<T>(n, T(0)), "zeros");
  check_bits(to_host(ones<T>({n}, p)), std::vector<T>(n, T(1)), "ones");
  check_bits(to_host(full<T>({n}, T(-0.3), p)), std::vector<T>(n, T(-0.3)), "full");
  std::vector<T> want(n);
  for (index_t i = 0; i < n; ++i) want[i] = T(2.5 + static_cast<double>(i));
  check_bits(to_host(iota<T>({n}, p, memory::unified, T(2.5))), want, "iota from 2.5");
  // rand: in [0, 1), on the grid of T's significand, and the same values on every device set.
  seed(1234);
  const auto r = to_host(rand<T>({n}, p));
  const double grid = std::ldexp(1.0, -format<T>::p);
  for (index_t i = 0; i < n; ++i) {
    const double x = float(r[i]);
    if (!(x >= 0 && x < 1 && std::fmod(x, grid) == 0)) {
      FAIL_CHECK("rand element " << i << " = " << x);
      break;
    }
  }
  seed(1234);
  check_bits(to_host(rand<T>({n}, host_or_first(ds))), r, "rand reproducible on another placement");
  seed(99);
  const auto g = to_host(randn<T>({n}, p));
  seed(99);
  check_bits(to_host(randn<T>({n}, host_or_first(ds))), g, "randn reproducible on another placement");
  double m = 0;
  for (auto x : g) m += float(x);
  if (n > 10000) CHECK(std::fabs(m / static_cast<double>(n)) < 0.01);
}

}  // namespace

TEST_CASE("zeros ones full iota rand randn of half and bfloat16") {
  for (const auto& ds : device_sets()) {
    for (index_t n : {index_t(0), index_t(1), index_t(17), index_t(4099)}) {
      INFO("device set " << set_name(ds) << ", n = " << n);
      check_creation<half>(ds, n);
      check_creation<bfloat16>(ds, n);
    }
    // iota past 2048 rounds each value once (2049 is a tie in half: to even, 2048).
    CHECK(iota<half>({3}, shard(0, ds), memory::unified, half(2048)).at(1).bits() == half(2048).bits());
    CHECK(iota<half>({4}, shard(0, ds), memory::unified, half(2048)).at(3).bits() == half(2052).bits());
  }
}

TEST_CASE("printing names Float16 and BFloat16 and shows the shortest digits that read back") {
  if (skip_without_gpu()) return;
  std::ostringstream os;
  os << from_host(std::vector<half>{half(0.1), half(-2.5), half(65504.0f), half(1e-7)}, {4});
  const std::string s = os.str();
  check_mentions(s, {"4-element Array{Float16, 1}", "0.1\n", "-2.5", "6.55e+04", "1e-07"});
  std::ostringstream ob;
  ob << full<bfloat16>({2, 2}, bfloat16(0.1));
  check_mentions(ob.str(), {"2×2 Array{BFloat16, 2}", "0.1"});
  CHECK(detail::format_value(half(0.1)) == "0.1");
  CHECK(detail::format_value(half::from_bits(0x3555)) == "0.3333");
  CHECK(detail::format_value(bfloat16(1.0f / 3)) == "0.334");
  CHECK(detail::format_value(bfloat16(INFINITY)) == "inf");
}

TEST_CASE("copies between placements keep every bit") {
  for (const auto& ds : device_sets()) {
    INFO(set_name(ds));
    std::vector<half> all(65536);
    for (std::uint32_t b = 0; b < 65536; ++b) all[b] = half::from_bits(static_cast<std::uint16_t>(b));
    const Array<half, 1> a = from_host(all, {65536}, shard(0, ds));
    check_bits(to_host(copy(a, replicate(ds))), all, "copy to replicated");
    check_bits(to_host(copy(a, on(ds.back()))), all, "copy to one device");
  }
}

TEST_CASE(".npy: half is '<f2' (and loads as float or double); bfloat16 has no NumPy dtype") {
  if (skip_without_gpu()) return;
  namespace fs = std::filesystem;
  const fs::path dir = fs::temp_directory_path() / ("tessera_half_" + std::to_string(rng()()));
  fs::create_directories(dir);
  for (const auto& ds : device_sets()) {
    INFO(set_name(ds));
    const index_t m = 5, n = 2 * static_cast<index_t>(ds.size()) + 1;
    const auto v = rounded<half>(random_values<double>(static_cast<std::size_t>(m * n), -100, 100));
    const Array<half, 2> a = from_host(v, {m, n}, shard(1, ds));
    save_npy(dir / "h.npy", a);
    std::string head(128, '\0');
    {
      std::FILE* f = std::fopen((dir / "h.npy").c_str(), "rb");
      REQUIRE(f != nullptr);
      head.resize(std::fread(head.data(), 1, head.size(), f));
      std::fclose(f);
    }
    CHECK(contains(head, "'descr': '<f2'"));
    check_bits(to_host(load_npy<half, 2>(dir / "h.npy", shard(0, ds))), v, "load_npy<half>");
    std::vector<float> wf(v.begin(), v.end());
    check_equal(to_host(load_npy<float, 2>(dir / "h.npy", shard(1, ds))), wf);
    check_mentions(expect_error<invalid_argument>([&] { (void)load_npy<bfloat16, 2>(dir / "h.npy"); }),
                   {"h.npy", "load_npy<bfloat16, 2>", "expected bfloat16", "found <f2 (half)", "cast<bfloat16>"});
    check_mentions(expect_error<invalid_argument>([&] { save_npy(dir / "b.npy", eval(cast<bfloat16>(a))); }),
                   {"b.npy", "no bfloat16 dtype", "found bfloat16", "cast<float>"});
    CHECK(!fs::exists(dir / "b.npy"));
    save_npy(dir / "f.npy", eval(cast<float>(a)));
    check_mentions(expect_error<invalid_argument>([&] { (void)load_npy<half, 2>(dir / "f.npy"); }),
                   {"f.npy", "<f4 (float)", "expected <f2", "cast<half>"});
  }
  std::error_code ec;
  fs::remove_all(dir, ec);
}

#if defined(TESSERA_HAS_DLPACK)
TEST_CASE("DLPack: half is kDLFloat 16, bfloat16 kDLBfloat 16; a mismatch names both") {
  for (const auto& ds : device_sets()) {
    INFO(set_name(ds));
    const auto v = rounded<bfloat16>(random_values<double>(12));
    const Array<bfloat16, 1> b = from_host(v, {12}, on(ds.front()));
    DLManagedTensor* t = to_dlpack(b);
    CHECK(t->dl_tensor.dtype.code == kDLBfloat);
    CHECK(t->dl_tensor.dtype.bits == 16);
    check_mentions(expect_error<invalid_argument>([&] { (void)from_dlpack<half, 1>(t); }),
                   {"from_dlpack<half, 1>", "expected float16", "found bfloat16"});
    check_bits(to_host(from_dlpack<bfloat16, 1>(t)), v, "from_dlpack<bfloat16>");
    const Array<half, 1> h = cast<half>(b);
    DLManagedTensor* th = to_dlpack(h);
    CHECK(th->dl_tensor.dtype.code == kDLFloat);
    CHECK(th->dl_tensor.dtype.bits == 16);
    th->deleter(th);
  }
}
#endif

TEST_CASE("Array c = expr deduces the element type; statistics, scans and sorts work on the float values") {
  for (const auto& ds : device_sets()) {
    INFO(set_name(ds));
    const index_t n = 1001;
    const auto v = rounded<half>(random_values<double>(static_cast<std::size_t>(n)));
    const Array<half, 1> a = from_host(v, {n}, shard(0, ds));
    const Array<float, 1> f = ones<float>({n}, shard(0, ds));
    Array c = a * 2;
    Array d = a + f;
    Array e = a;  // a copy, still half
    static_assert(std::is_same_v<decltype(c), Array<half, 1>> && std::is_same_v<decltype(d), Array<float, 1>> &&
                  std::is_same_v<decltype(e), Array<half, 1>>);
    check_bits(to_host(e), v, "Array e = a");
    std::vector<double> w(v.begin(), v.end());
    double mu = 0, var_ref = 0;
    for (double x : w) mu += x;
    mu /= static_cast<double>(n);
    for (double x : w) var_ref += (x - mu) * (x - mu);
    var_ref /= static_cast<double>(n - 1);
    CHECK(var(a) == doctest::Approx(var_ref).epsilon(1e-4));
    const auto [mx, at] = findmax(a);
    const auto best = std::max_element(w.begin(), w.end());
    CHECK(mx == *best);
    CHECK(at == best - w.begin());
    auto cs = cumsum(a);
    auto so = sort(a);
    static_assert(std::is_same_v<decltype(cs), Array<float, 1>> && std::is_same_v<decltype(so), Array<float, 1>>);
    std::sort(w.begin(), w.end());
    check_equal(to_host(so), std::vector<float>(w.begin(), w.end()));
    CHECK(to_host(cs).back() == doctest::Approx(mu * static_cast<double>(n)).epsilon(1e-4));
  }
}
