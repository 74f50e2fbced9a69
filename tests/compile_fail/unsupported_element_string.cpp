// SPDX-License-Identifier: Apache-2.0
// std::string is not an element type.
// expect: TESSERA_UNSUPPORTED_ELEMENT_TYPE
#include <tessera/tessera.hpp>

#include <string>

int main() {
  tessera::Array<std::string, 1> a;
  (void)a;
}
