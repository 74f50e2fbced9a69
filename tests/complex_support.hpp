// SPDX-License-Identifier: Apache-2.0
// What the complex tests share (test_complex.cpp, test_complex_reductions.cpp): random complex
// values, the std::complex reference type and element-by-element comparisons.
#pragma once
#include "test_support.hpp"

#include <tessera/complex.hpp>

#include <complex>
#include <sstream>

namespace tessera_test {

using tessera::complex;
namespace detail = tessera::detail;

template <class T>
using sc = std::complex<T>;  // the reference type

template <class T>
std::vector<complex<T>> random_complex(std::size_t n, double lo = -2.0, double hi = 2.0) {
  const auto re = random_values<T>(n, lo, hi);
  const auto im = random_values<T>(n, lo, hi);
  std::vector<complex<T>> v(n);
  for (std::size_t i = 0; i < n; ++i) v[i] = complex<T>(re[i], im[i]);
  return v;
}

template <class T>
sc<T> ref(complex<T> z) {
  return {z.real(), z.imag()};
}

template <class G, class W>
bool close_c(G g, W w, double rtol, double atol) {
  return close(double(g.real()), double(w.real()), rtol, atol) && close(double(g.imag()), double(w.imag()), rtol, atol);
}

// got (tessera complex or real) against want (std::complex or real), element by element.
template <class G, class W>
void check_c(const std::vector<G>& got, const std::vector<W>& want, double rtol, double atol, const char* what) {
  INFO("expression: " << what);
  REQUIRE(got.size() == want.size());
  for (std::size_t i = 0; i < got.size(); ++i) {
    bool ok;
    if constexpr (detail::is_complex_v<G>) ok = close_c(got[i], want[i], rtol, atol);
    else ok = close(double(got[i]), double(want[i]), rtol, atol);
    if (!ok) {
      if constexpr (detail::is_complex_v<G>)
        FAIL_CHECK("element " << i << ": got " << got[i].real() << "+" << got[i].imag() << "i, expected "
                              << want[i].real() << "+" << want[i].imag() << "i");
      else
        FAIL_CHECK("element " << i << ": got " << double(got[i]) << ", expected " << double(want[i]));
      return;
    }
  }
}

template <class T>
constexpr double tol() {
  return std::is_same_v<T, float> ? 2e-5 : 1e-12;
}

}  // namespace tessera_test
