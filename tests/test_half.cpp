// SPDX-License-Identifier: Apache-2.0
// half and bfloat16 conversions (storage computing in float) against an independent reference
// (value arithmetic with ldexp and nearbyint, not bit manipulation), over every 16-bit pattern, every
// rounding tie and random floats and doubles; the same conversions run on the devices, bit for bit,
// over 1, 2, 3 and 8 host devices (1 and all GPUs in the CUDA variant). Arrays of them:
// test_half_arrays.cpp.
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

}  // namespace
