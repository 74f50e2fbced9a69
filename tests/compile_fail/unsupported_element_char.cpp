// SPDX-License-Identifier: Apache-2.0
// char is not an element type (bool, int32_t, int64_t, float, double).
// expect: TESSERA_UNSUPPORTED_ELEMENT_TYPE
#include <tessera/tessera.hpp>

int main() {
  tessera::Array<char, 1> a;
  (void)a;
}
