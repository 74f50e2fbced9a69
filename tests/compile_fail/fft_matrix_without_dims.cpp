// SPDX-License-Identifier: Apache-2.0
// fft(A) of a matrix is ambiguous between NumPy (the last axis) and Julia (every dim): dims are required.
// expect: TESSERA_FFT_DIMS_REQUIRED
#include <tessera/fft.hpp>

int main() {
  tessera::Array<float, 2> a;
  (void)tessera::fft(a);
}
