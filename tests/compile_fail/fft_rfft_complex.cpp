// SPDX-License-Identifier: Apache-2.0
// rfft transforms real input; a complex array goes through fft.
// expect: TESSERA_FFT_REAL_INPUT
#include <tessera/fft.hpp>

int main() {
  tessera::Array<tessera::complex<float>, 1> a;
  (void)tessera::rfft(a);
}
