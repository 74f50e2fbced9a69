// SPDX-License-Identifier: Apache-2.0
// What the array tests of half and bfloat16 share (test_half_arrays.cpp, test_half_io.cpp): sizes,
// rounding a double reference to the type, and bit-exact and one-ulp comparisons.
#pragma once
#include "test_support.hpp"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <limits>
#include <sstream>

namespace tessera_test {

using tessera::bfloat16;
using tessera::half;

// Significand bits, the implicit one included: 11 for half, 8 for bfloat16.
template <class T>
inline constexpr int significand_bits = std::is_same_v<T, half> ? 11 : 8;


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
  const double rel = std::ldexp(1.0, 1 - significand_bits<T>), atol = 4e-6;
  for (std::size_t i = 0; i < got.size(); ++i) {
    if (std::fabs(double(got[i]) - exact[i]) > rel * std::fabs(exact[i]) + atol) {
      FAIL_CHECK("element " << i << ": got " << float(got[i]) << ", expected about " << exact[i]);
      return;
    }
  }
}

}  // namespace tessera_test
