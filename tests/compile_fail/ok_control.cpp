// SPDX-License-Identifier: Apache-2.0
// Positive control: the correct counterpart of every compile-fail file compiles with the same
// command, so a failure above is the expected diagnostic and not a broken include path.
// expect-success
#include <tessera/tessera.hpp>

#include <cstdint>

struct PlusOne {
  float operator()(float x) const { return x + 1.f; }
};

int main() {
  using namespace tessera;
  Array<float, 2> a;
  auto col = a(_, 0);                  // two indices for rank 2
  auto win = a(range(0, 2), _);
  float x = a.at(0, 1);                // two indices for at()
  Array<std::int32_t, 1> i;            // supported element types
  Array<bool, 1> b;
  Array<double, 3> d;
  Array<std::int64_t, 0> z;
  auto e = a * 2.0 + 1;                // arithmetic scalars
  Array<float, 2> m = a + 1.f;         // rank 2 from rank 2
  Array<float, 1> v = col * 2.f;       // rank 1 from rank 1
  auto f = broadcast(PlusOne{}, a);    // a trivially copyable functor
  (void)win; (void)x; (void)i; (void)b; (void)d; (void)z; (void)e; (void)m; (void)v; (void)f;
}
