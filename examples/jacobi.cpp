// SPDX-License-Identifier: Apache-2.0
// A 2-D Jacobi solver for Laplace's equation (5-point stencil) on a grid split along its columns
// over every device: each shard holds one column of each neighbour (a halo), the sweep is one
// fused kernel per shard over shifted views, and the halo columns are refreshed with a peer copy
// per neighbour, hidden behind the sweep: hide_communication computes each shard's edge columns
// first, starts the copies, and computes the rest while they run. The boundary (u = 1 on the first column, 0 elsewhere) is part of the
// array and never written by the sweep. Checked against the same iterations in plain host loops;
// exits non-zero on a wrong result. Runs on the GPUs, or on host devices where there is none
// (TESSERA_HOST_DEVICES=4 to try several).
#include <tessera/tessera.hpp>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <exception>
#include <utility>
#include <vector>

using namespace tessera;

namespace {

// The same sweeps in plain loops over column-major storage, with the same operation order.
std::vector<float> host_jacobi(index_t n, int iterations) {
  std::vector<float> u(static_cast<std::size_t>(n * n), 0.f);
  for (index_t i = 0; i < n; ++i) u[static_cast<std::size_t>(i)] = 1.f;
  std::vector<float> v = u;
  auto at = [n](std::vector<float>& a, index_t i, index_t j) -> float& { return a[static_cast<std::size_t>(i + j * n)]; };
  for (int it = 0; it < iterations; ++it) {
    for (index_t j = 1; j < n - 1; ++j)
      for (index_t i = 1; i < n - 1; ++i)
        at(v, i, j) = 0.25f * (((at(u, i - 1, j) + at(u, i + 1, j)) + at(u, i, j - 1)) + at(u, i, j + 1));
    std::swap(u, v);
  }
  return u;
}

}  // namespace

int main() {
  try {
    const bool gpu = cuda_backend();
    const DeviceSet all = devices();
    const index_t n = gpu ? 4096 : 256;
    const int iterations = gpu ? 1000 : 200;
    std::printf("Jacobi %lld x %lld float over %zu %s, columns split, halo(1)\n", static_cast<long long>(n),
                static_cast<long long>(n), all.size(), gpu ? "GPU(s)" : "host device(s)");

    Array<float, 2> u = zeros<float>({n, n}, shard(1, halo(1), all));
    u(_, 0) = 1.f;   // the fixed boundary: first column 1, the other edges 0
    update_halo(u);  // a block may be one column wide: its neighbour's halo holds that column
    Array<float, 2> v = u;  // the same boundary, halo cells included
    const auto I = range(1, n - 1);
    // One sweep, then update_halo(to), with the exchange overlapping the interior's work.
    auto sweep = [&](Array<float, 2>& to, const Array<float, 2>& from) {
      hide_communication(to, [&] {
        to(I, I) = 0.25f * (from(range(0, n - 2), I) + from(range(2, n), I) + from(I, range(0, n - 2)) +
                            from(I, range(2, n)));
      });
    };
    const auto t0 = std::chrono::steady_clock::now();
    for (int it = 0; it < iterations; ++it) {
      sweep(v, u);
      std::swap(u, v);
    }
    const float change = maximum(abs(u - v));  // waits for the sweeps
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();

    const auto want = host_jacobi(n, iterations);
    const auto got = to_host(u);
    double err = 0;
    for (std::size_t i = 0; i < want.size(); ++i) err = std::fmax(err, std::fabs(double(got[i]) - want[i]));
    std::printf("%d iterations in %.3f s (%.0f iterations/s), last change %.3e, max |u - host loops| = %.2e\n",
                iterations, seconds, iterations / seconds, double(change), err);
    const bool ok = err < 1e-5;
    std::printf("%s\n", ok ? "OK: the Jacobi iterations match the host loops" : "FAIL: the result differs from the host loops");
    return ok ? 0 : 1;
  } catch (const std::exception& e) {
    std::printf("FAIL: %s\n", e.what());
    return 1;
  }
}
