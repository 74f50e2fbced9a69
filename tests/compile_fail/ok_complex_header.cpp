// SPDX-License-Identifier: Apache-2.0
// The positive control of complex_without_header.cpp: with <tessera/complex.hpp> (included after
// the umbrella header, which works as well as before it) complex arrays and their functions compile.
// with-cccl
// expect-success
#include <tessera/tessera.hpp>
#include <tessera/complex.hpp>

int main() {
  using namespace tessera;
  Array<complex<float>, 1> z = full<complex<float>, 1>({5}, complex<float>(1, 2));
  Array<complex<float>, 1> w = exp(z) + sqrt(z) * log(z);
  Array<float, 1> m = abs(w) * 2.0f - angle(w);
  (void)m;
}
