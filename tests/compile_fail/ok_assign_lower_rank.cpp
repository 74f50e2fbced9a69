// SPDX-License-Identifier: Apache-2.0
// Positive control that documents a library bug: assigning a lower-rank expression to an
// existing Array must compile (DESIGN.md: "the right side must broadcast to the left side's
// shape"; c = v fills every column of c with v). It fails today because
// Array<T, N>::operator=(E&&) instantiates materialize_as(e) for the default-constructed case,
// and that static_asserts TESSERA_RANK_MISMATCH for any expression whose rank is not N.
// expect-success
#include <tessera/tessera.hpp>

int main() {
  using namespace tessera;
  Array<float, 2> c;
  Array<float, 1> v;
  Array<float, 0> s;
  c = v;        // each column becomes v
  c = v * 2.f;  // a lower-rank expression
  c = s;        // a 0-d array fills
}
