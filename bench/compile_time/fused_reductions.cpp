// SPDX-License-Identifier: Apache-2.0
// Compile-time probe (scripts/compile_time.sh): ten fused expressions of distinct types and five
// reductions (four to a host scalar, one along a dimension), the size of a small user program
// (DESIGN.md target: <= 15 s with nvcc on a 2-core machine). It also runs, on GPUs or host devices,
// and prints a checksum, so that the expressions cannot be optimized away.
#include <tessera/tessera.hpp>

#include <cstdio>

using namespace tessera;

int main() {
  const index_t n = 1 << 12;
  const auto a = rand<float>({n});
  const auto b = rand<float>({n});
  Array<float, 1> c = zeros<float>({n});

  // Ten fused expressions, each a kernel of its own type.
  c = a + b;
  c = sin(a) * b + 2 * a;
  c = exp(-a * a) / (1 + b);
  c = sqrt(abs(a - b)) + log1p(b);
  c = where(a > b, a, b) * 0.5f;
  c = max(a, b) - min(a, b);
  c = tanh(a) * cos(b) + erf(a);
  c = pow(a, 2.f) + floor(b * 10);
  c += a * b;
  c = cast<float>(cast<double>(a) * 3.0 + b);

  // Five reductions.
  const double s = sum(a * b);
  const float m = maximum(abs(a - b));
  const double mu = mean(c);
  const double nb = norm(b);
  const auto x = rand<float>({64, 64});
  const Array<float, 2> col = sum(x * x, dims(0));

  std::printf("%g %g %g %g %g\n", s, static_cast<double>(m), mu, nb, static_cast<double>(col.at(0, 0)));
  return 0;
}
