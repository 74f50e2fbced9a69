// SPDX-License-Identifier: Apache-2.0
// An Array<float, 2> built from a rank-1 expression.
// expect: TESSERA_RANK_MISMATCH
#include <tessera/tessera.hpp>

int main() {
  tessera::Array<float, 1> v;
  tessera::Array<float, 2> m = v + 1.f;
  (void)m;
}
