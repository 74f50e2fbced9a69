// SPDX-License-Identifier: Apache-2.0
// A non-arithmetic "scalar" in an expression: rejected by the `operand` concept, so the
// compiler reports that no operator* matches, and the diagnostic stays short (no instantiation
// backtrace through the library).
// expect: Meters
// expect: constraints not satisfied
// expect: 'operand
// expect-not: static assertion
// expect-max-lines: 60
#include <tessera/tessera.hpp>

struct Meters {
  double value;
};

int main() {
  tessera::Array<float, 1> a;
  auto e = a * Meters{2.0};
  (void)e;
}
