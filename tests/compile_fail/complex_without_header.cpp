// SPDX-License-Identifier: Apache-2.0
// Under nvcc (CCCL on the path) the umbrella header declares complex without defining it: an array
// of complex elements names the header it needs, in one short message.
// with-cccl
// expect: TESSERA_COMPLEX_NEEDS_HEADER
// expect: #include <tessera/complex.hpp>
// expect-max-lines: 20
#include <tessera/tessera.hpp>

int main() {
  tessera::Array<tessera::complex<float>, 1> a;
  (void)a;
}
