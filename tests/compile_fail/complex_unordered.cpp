// SPDX-License-Identifier: Apache-2.0
// Complex numbers have no order: `<` on a complex array stops with a named message.
// expect: TESSERA_COMPLEX_UNORDERED
#include <tessera/tessera.hpp>
#include <tessera/complex.hpp>

int main() {
  tessera::Array<tessera::complex<float>, 1> a;
  auto e = a < 1.0f;
  (void)e;
}
