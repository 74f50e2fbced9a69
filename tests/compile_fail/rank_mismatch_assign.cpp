// SPDX-License-Identifier: Apache-2.0
// A rank-2 expression assigned to a rank-1 array: the expression has a higher rank than the
// destination.
// expect: TESSERA_RANK_MISMATCH
#include <tessera/tessera.hpp>

int main() {
  tessera::Array<float, 2> m;
  tessera::Array<float, 1> v;
  v = m * 2.f;
}
