// SPDX-License-Identifier: Apache-2.0
// The fft family takes floating and complex arrays; an integer array must be converted first.
// expect: TESSERA_FFT_ELEMENT_TYPE
#include <tessera/fft.hpp>

int main() {
  tessera::Array<std::int32_t, 1> a;
  (void)tessera::fft(a);
}
