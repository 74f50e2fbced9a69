// SPDX-License-Identifier: Apache-2.0
// solve(A, B) with a float matrix and a double right-hand side: one element type is required.
// expect: TESSERA_ELEMENT_TYPE_MISMATCH
#include <tessera/tessera.hpp>

int main() {
  tessera::Array<float, 2> a;
  tessera::Array<double, 1> b;
  auto x = tessera::solve(a, b);
  (void)x;
}
