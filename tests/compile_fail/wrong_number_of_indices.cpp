// SPDX-License-Identifier: Apache-2.0
// A rank-2 array indexed with one index: a view needs exactly N indices.
// expect: TESSERA_WRONG_NUMBER_OF_INDICES
#include <tessera/tessera.hpp>

int main() {
  tessera::Array<float, 2> a;
  auto v = a(0);
  (void)v;
}
