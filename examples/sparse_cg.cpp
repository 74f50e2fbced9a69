// SPDX-License-Identifier: Apache-2.0
// Conjugate gradients on the 2-D Poisson problem: -laplacian(u) = 1 on the unit square with u = 0
// on the boundary, discretized by the 5-point Laplacian (laplacian_2d) on an n x n grid of
// interior points, the matrix sharded by rows over every device and the vectors sharded like its
// rows, so each product exchanges only the ghost rows of the grid lines between shards. The
// solution is checked by its residual |b - A x| / |b| computed afresh, and by its maximum, which
// for this problem is 0.0737 (the torsion function of the square), and drawn into sparse_cg.png.
// Runs on the GPUs (4096 x 4096 unknowns), or on host devices where there is none (128 x 128;
// TESSERA_HOST_DEVICES=4 to try several). Usage: sparse_cg [n]
#include <tessera/tessera.hpp>
#include <tessera/sparse.hpp>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <vector>

using namespace tessera;

int main(int argc, char** argv) {
  try {
    const bool gpu = cuda_backend();
    const DeviceSet all = devices();
    const index_t n = argc > 1 ? std::atoll(argv[1]) : gpu ? 4096 : 128;
    const double h = 1.0 / double(n + 1);
    std::printf("CG on the 2-D Poisson matrix, %lld x %lld grid (%lld unknowns), sharded by rows over %zu %s\n",
                static_cast<long long>(n), static_cast<long long>(n), static_cast<long long>(n * n), all.size(),
                gpu ? "GPU(s)" : "host device(s)");
    const auto A = laplacian_2d<double>(n, n, shard(0, all));  // h^2 times -laplacian
    const auto b = full<double>({n * n}, h * h, shard(0, all));
    Array<double, 1> x = zeros<double>({n * n}, shard(0, all));
    Array<double, 1> r = b;
    Array<double, 1> p = r;
    double rs = sum(r * r);
    const double bnorm = std::sqrt(rs), tol = 1e-8;
    int it = 0;
    const int max_it = 50000;
    while (it < max_it && std::sqrt(rs) > tol * bnorm) {
      auto Ap = matmul(A, p);
      const double alpha = rs / sum(p * Ap);
      x += alpha * p;
      r -= alpha * Ap;
      const double next = sum(r * r);
      p = r + (next / rs) * p;
      rs = next;
      ++it;
    }
    // The residual afresh, not the recursively updated one.
    const double res = std::sqrt(double(sum(pow(b - matmul(A, x), 2.0)))) / bnorm;
    const double peak = maximum(x);
    std::printf("%d iterations: |b - A x| / |b| = %.3g, max u = %.5f (analytic 0.07367 as n grows)\n", it, res, peak);

    // The solution as an image, every step-th grid point.
    const index_t step = n > 512 ? n / 512 : 1;
    const auto host = to_host(x);
    auto grid = from_host(std::span<const double>(host), {n, n}, on(all[0]));
    save_png(Array<double, 2>(grid(range(0, n, step), range(0, n, step))), "sparse_cg.png", colormap::viridis);
    std::printf("wrote sparse_cg.png (%lld x %lld)\n", static_cast<long long>((n + step - 1) / step),
                static_cast<long long>((n + step - 1) / step));
    const bool ok = res < 1e-7 && std::fabs(peak - 0.07367) < (n >= 128 ? 2e-4 : 5e-3);
    std::printf("%s\n", ok ? "OK: CG converged and the solution matches the torsion function's maximum"
                           : "FAIL: CG did not converge to the expected solution");
    return ok ? 0 : 1;
  } catch (const std::exception& e) {
    std::printf("FAIL: %s\n", e.what());
    return 1;
  }
}
