// SPDX-License-Identifier: Apache-2.0
// at() on a rank-2 array with three indices.
// expect: TESSERA_WRONG_NUMBER_OF_INDICES
#include <tessera/tessera.hpp>

int main() {
  tessera::Array<float, 2> a;
  return static_cast<int>(a.at(0, 1, 2));
}
