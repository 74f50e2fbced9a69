// SPDX-License-Identifier: Apache-2.0
// The positive control of solve_mixed_types.cpp: the same call with one element type compiles.
// expect-success
#include <tessera/tessera.hpp>

int main() {
  tessera::Array<float, 2> a;
  tessera::Array<float, 1> b;
  auto x = tessera::solve(a, b);
  auto [q, r] = tessera::qr(a);
  (void)x, (void)q, (void)r;
}
