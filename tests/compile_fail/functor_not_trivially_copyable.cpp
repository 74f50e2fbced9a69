// SPDX-License-Identifier: Apache-2.0
// broadcast(f, a) with a functor that owns a resource (it is copied to every device).
// expect: TESSERA_FUNCTOR_NOT_TRIVIALLY_COPYABLE
#include <tessera/tessera.hpp>

#include <vector>

struct Owning {
  std::vector<float> table;
  float operator()(float x) const { return x + table[0]; }
};

int main() {
  tessera::Array<float, 1> a;
  auto e = tessera::broadcast(Owning{{1.f}}, a);
  (void)e;
}
