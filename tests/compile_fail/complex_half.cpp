// SPDX-License-Identifier: Apache-2.0
// complex<half> is not an element type: half and bfloat16 are real storage types computing in float.
// expect: TESSERA_COMPLEX_HALF_UNSUPPORTED
#include <tessera/tessera.hpp>

int main() {
  tessera::Array<tessera::complex<tessera::half>, 1> a;
  (void)a;
}
