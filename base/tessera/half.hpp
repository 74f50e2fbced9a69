// SPDX-License-Identifier: Apache-2.0
// Tessera: half (IEEE binary16, Julia's Float16, NumPy's float16) and bfloat16 (the upper half of
// a float), storage types that compute in float (docs/semantics.md, "half and bfloat16"). Each is
// a 16-bit trivially copyable struct of our own rather than CUDA's __half / __nv_bfloat16: those
// need the CUDA headers, which a host-only build (g++, no CCCL on the include path) does not have,
// and their host conversions are not guaranteed to give the device's bits. The conversions here
// are portable bit manipulation, the same code on the host and on the device, so both give the
// same bits: round to nearest, ties to even; subnormals, infinities and overflow as IEEE 754 says;
// a NaN stays a NaN of the same sign with the top bits of its payload (its quiet bit among them), so
// every 16-bit pattern survives a round trip through float and an array copy keeps every bit.
#pragma once
#include <tessera/config.hpp>

#include <bit>
#include <cstdint>
#include <type_traits>

namespace tessera {
namespace detail::narrow {

TS_HD inline std::uint32_t bits_of(float f) {
#if defined(__CUDA_ARCH__)
  return __float_as_uint(f);
#else
  return std::bit_cast<std::uint32_t>(f);
#endif
}
TS_HD inline float float_of(std::uint32_t u) {
#if defined(__CUDA_ARCH__)
  return __uint_as_float(u);
#else
  return std::bit_cast<float>(u);
#endif
}

// float -> binary16, round to nearest even.
TS_HD inline std::uint16_t half_from_float(float f) {
  const std::uint32_t x = bits_of(f);
  const auto sign = static_cast<std::uint16_t>((x >> 16) & 0x8000u);
  const std::uint32_t a = x & 0x7fffffffu;
  if (a >= 0x7f800000u) {  // Inf, or NaN: the sign and the top 10 payload bits (quiet bit first)
    if (a == 0x7f800000u) return sign | 0x7c00u;
    const std::uint32_t payload = (a >> 13) & 0x3ffu;
    return static_cast<std::uint16_t>(sign | 0x7c00u | (payload ? payload : 0x200u));  // never Inf
  }
  // 65520 lies halfway between 65504 (the largest half, odd significand) and 65536: ties to even
  // give 65536, which overflows, so everything from there on is Inf.
  if (a >= 0x477ff000u) return sign | 0x7c00u;
  if (a < 0x38800000u) {  // below 2^-14: a subnormal half (or zero)
    // Up to 2^-25 (halfway to the smallest subnormal, 2^-24) ties to the even zero.
    if (a <= 0x33000000u) return sign;
    const std::uint32_t e = a >> 23;  // 102..112
    const std::uint32_t m = (a & 0x7fffffu) | 0x800000u;
    const std::uint32_t shift = 126u - e;  // the value is m * 2^(e - 150), in units of 2^-24
    std::uint32_t q = m >> shift;
    const std::uint32_t rest = m & ((1u << shift) - 1u), halfway = 1u << (shift - 1u);
    if (rest > halfway || (rest == halfway && (q & 1u))) ++q;  // may carry into the smallest normal
    return static_cast<std::uint16_t>(sign | q);
  }
  // Normal: round the 13 dropped bits to even (a carry moves into the exponent, as it should), then
  // rebias the exponent from 127 to 15.
  const std::uint32_t r = a + 0xfffu + ((a >> 13) & 1u) - 0x38000000u;
  return static_cast<std::uint16_t>(sign | (r >> 13));
}

// binary16 -> float: exact (NaN payloads shift into place).
TS_HD inline float half_to_float(std::uint16_t h) {
  const std::uint32_t sign = static_cast<std::uint32_t>(h & 0x8000u) << 16;
  const std::uint32_t e = (h >> 10) & 0x1fu;
  std::uint32_t m = h & 0x3ffu;
  if (e == 0x1fu) return float_of(sign | 0x7f800000u | (m << 13));
  if (e == 0) {
    if (m == 0) return float_of(sign);
    int k = 0;  // a subnormal: normalize the significand
    while (!(m & 0x400u)) {
      m <<= 1;
      ++k;
    }
    return float_of(sign | (static_cast<std::uint32_t>(113 - k) << 23) | ((m & 0x3ffu) << 13));
  }
  return float_of(sign | ((e + 112u) << 23) | (m << 13));
}

// float -> bfloat16, round to nearest even (rounding a NaN could carry it into Inf or the sign). A
// NaN keeps its sign and top payload bits; one whose payload sits in the low 16 bits only (a
// signalling NaN, which truncation would turn into Inf) becomes quiet.
TS_HD inline std::uint16_t bfloat16_from_float(float f) {
  const std::uint32_t x = bits_of(f);
  if ((x & 0x7fffffffu) > 0x7f800000u) {
    const auto t = static_cast<std::uint16_t>(x >> 16);
    return (t & 0x7fu) ? t : static_cast<std::uint16_t>(t | 0x40u);
  }
  return static_cast<std::uint16_t>((x + 0x7fffu + ((x >> 16) & 1u)) >> 16);
}
TS_HD inline float bfloat16_to_float(std::uint16_t b) { return float_of(static_cast<std::uint32_t>(b) << 16); }

// double -> float rounded to odd (truncate, then set the last bit if anything was dropped). Rounding
// that float to half or bfloat16 (to nearest even) gives the double rounded once: float keeps more
// than two extra bits of either, the condition for round-to-odd to be innocuous. A plain
// double -> float -> half could round twice (a double just above a half tie lands on the tie).
TS_HD inline float to_float_odd(double d) {
  const float f = static_cast<float>(d);
  const double back = static_cast<double>(f);
  if (back == d || d != d) return f;
  std::uint32_t u = bits_of(f);
  const double mag_f = back < 0 ? -back : back, mag_d = d < 0 ? -d : d;
  if (mag_f > mag_d) --u;  // rounded away from zero (f != 0 here): step back toward zero
  return float_of(u | 1u);
}

}  // namespace detail::narrow

// IEEE binary16 (Julia's Float16, NumPy's float16): 1 sign, 5 exponent and 10 significand bits,
// largest finite value 65504. Converts implicitly to float, the type it computes in; conversions
// into it are explicit (half(1.5f), half(x), static_cast<half>(y)) and round once, to nearest even.
struct half {
  half() = default;
  TS_HD explicit half(float f) : b_(detail::narrow::half_from_float(f)) {}
  TS_HD explicit half(double d) : b_(detail::narrow::half_from_float(detail::narrow::to_float_odd(d))) {}
  // Integers (and bool) through double: exact below 2^53, where every half is far behind.
  template <class I>
    requires std::is_integral_v<I>
  TS_HD explicit half(I i) : half(static_cast<double>(i)) {}
  TS_HD operator float() const { return detail::narrow::half_to_float(b_); }
  // The bit pattern (Julia's reinterpret(UInt16, x)) and back.
  TS_HD std::uint16_t bits() const { return b_; }
  TS_HD static half from_bits(std::uint16_t b) {
    half h;
    h.b_ = b;
    return h;
  }

 private:
  std::uint16_t b_;
};

// bfloat16 (BFloat16s.jl's BFloat16, ml_dtypes' bfloat16): a float's sign, 8 exponent bits and top
// 7 significand bits, so the range of float with 8 significant bits. Converts like half.
struct bfloat16 {
  bfloat16() = default;
  TS_HD explicit bfloat16(float f) : b_(detail::narrow::bfloat16_from_float(f)) {}
  TS_HD explicit bfloat16(double d) : b_(detail::narrow::bfloat16_from_float(detail::narrow::to_float_odd(d))) {}
  // Integers (and bool) through double: exact below 2^53.
  template <class I>
    requires std::is_integral_v<I>
  TS_HD explicit bfloat16(I i) : bfloat16(static_cast<double>(i)) {}
  TS_HD operator float() const { return detail::narrow::bfloat16_to_float(b_); }
  TS_HD std::uint16_t bits() const { return b_; }
  TS_HD static bfloat16 from_bits(std::uint16_t b) {
    bfloat16 h;
    h.b_ = b;
    return h;
  }

 private:
  std::uint16_t b_;
};

static_assert(sizeof(half) == 2 && alignof(half) == 2 && std::is_trivially_copyable_v<half> &&
              std::is_trivially_default_constructible_v<half>);
static_assert(sizeof(bfloat16) == 2 && alignof(bfloat16) == 2 && std::is_trivially_copyable_v<bfloat16> &&
              std::is_trivially_default_constructible_v<bfloat16>);

namespace detail {
// half and bfloat16: 16-bit storage whose values are computed on as float.
template <class T>
inline constexpr bool is_narrow_v =
    std::is_same_v<std::remove_cvref_t<T>, half> || std::is_same_v<std::remove_cvref_t<T>, bfloat16>;
// The type a stored element is computed in: float for half and bfloat16, the type itself otherwise.
template <class T>
using compute_t = std::conditional_t<is_narrow_v<T>, float, T>;
}  // namespace detail

}  // namespace tessera
