// SPDX-License-Identifier: Apache-2.0
// What the FFT tests share (test_fft.cpp, test_fft_nd.cpp): a naive DFT in long double (no FFT
// library), along any dim of a column-major array, and element-wise comparisons scaled by the
// input's size (an FFT's error grows with n and with the values' magnitude).
#pragma once
#include "test_support.hpp"

#include <tessera/fft.hpp>

#include <cmath>
#include <complex>
#include <numbers>
#include <vector>

namespace tessera_test {

using cd = std::complex<double>;

// The DFT of `v` along dim `dim` of a column-major array of shape `shape`:
// X[k] = sum_j x[j] e^{sign 2 pi i jk/n}, unscaled.
inline std::vector<cd> dft_along(const std::vector<cd>& v, const std::vector<index_t>& shape, int dim, int sign) {
  index_t inner = 1, outer = 1;
  for (int k = 0; k < dim; ++k) inner *= shape[k];
  for (std::size_t k = dim + 1; k < shape.size(); ++k) outer *= shape[k];
  const index_t n = shape[dim];
  std::vector<cd> out(v.size());
  const long double w0 = sign * 2.0L * std::numbers::pi_v<long double> / (long double)(n > 0 ? n : 1);
  for (index_t o = 0; o < outer; ++o)
    for (index_t i = 0; i < inner; ++i)
      for (index_t k = 0; k < n; ++k) {
        std::complex<long double> s = 0;
        for (index_t j = 0; j < n; ++j) {
          const long double a = w0 * (long double)((j * k) % n);
          const cd x = v[i + inner * (j + n * o)];
          s += std::complex<long double>(x.real(), x.imag()) * std::complex<long double>(std::cos(a), std::sin(a));
        }
        out[i + inner * (k + n * o)] = cd(double(s.real()), double(s.imag()));
      }
  return out;
}

inline std::vector<cd> dft(const std::vector<cd>& v, int sign = -1) {
  return dft_along(v, {static_cast<index_t>(v.size())}, 0, sign);
}

template <class T>
std::vector<cd> as_cd(const std::vector<T>& v) {
  std::vector<cd> out(v.size());
  for (std::size_t i = 0; i < v.size(); ++i) {
    if constexpr (tessera::detail::is_complex_v<T>) out[i] = cd(double(v[i].real()), double(v[i].imag()));
    else out[i] = cd(double(v[i]), 0.0);
  }
  return out;
}

template <class T>
constexpr double eps_of() {
  return std::is_same_v<tessera::detail::real_of_t<T>, double> ? 1e-15 : 2e-7;
}

// got against want: every element within tol * (1 + log2 n) * the largest |want| (at least 1).
template <class G>
void check_spectrum(const std::vector<G>& got, const std::vector<cd>& want, double eps, const std::string& what) {
  INFO(what);
  REQUIRE(got.size() == want.size());
  double scale = 1, worst = 0;
  for (auto& w : want) scale = std::max(scale, std::abs(w));
  const double tol = 40 * eps * (1 + std::log2(double(want.size()) + 1)) * scale;
  std::size_t at = 0;
  for (std::size_t i = 0; i < got.size(); ++i) {
    cd g;
    if constexpr (tessera::detail::is_complex_v<G>) g = cd(double(got[i].real()), double(got[i].imag()));
    else g = cd(double(got[i]), 0.0);
    const double e = std::abs(g - want[i]);
    if (!(e <= worst)) worst = e, at = i;
  }
  CHECK_MESSAGE(worst <= tol, "largest error " << worst << " at element " << at << " (tolerance " << tol << ")");
}

template <class T>
std::vector<T> random_input(std::size_t n) {
  if constexpr (tessera::detail::is_complex_v<T>) {
    using R = tessera::detail::real_of_t<T>;
    const auto re = random_values<R>(n), im = random_values<R>(n);
    std::vector<T> v(n);
    for (std::size_t i = 0; i < n; ++i) v[i] = T(re[i], im[i]);
    return v;
  } else {
    return random_values<T>(n);
  }
}

}  // namespace tessera_test
