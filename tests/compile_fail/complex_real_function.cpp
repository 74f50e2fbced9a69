// SPDX-License-Identifier: Apache-2.0
// A real-only function (floor) of a complex array stops with a named message.
// expect: TESSERA_COMPLEX_UNSUPPORTED: floor
#include <tessera/tessera.hpp>
#include <tessera/complex.hpp>

int main() {
  tessera::Array<tessera::complex<double>, 1> a;
  auto e = floor(a);
  (void)e;
}
