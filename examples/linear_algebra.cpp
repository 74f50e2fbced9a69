// SPDX-License-Identifier: Apache-2.0
// Linear algebra on every device: the CUDA.jl multi-GPU seed (y = W * x with W split along its
// columns, the partial products summed across devices) and CuPy's conjugate-gradient example on
// a dense symmetric positive definite matrix, both checked against plain host loops. Runs on
// the GPUs, or on host devices where there is none (TESSERA_HOST_DEVICES=4 to try several).
#include <tessera/tessera.hpp>

#include <cmath>
#include <cstdio>
#include <exception>
#include <random>
#include <vector>

using namespace tessera;

namespace {

std::vector<double> host_matvec(const std::vector<double>& a, const std::vector<double>& x, index_t m, index_t n) {
  std::vector<double> y(static_cast<std::size_t>(m), 0.0);
  for (index_t j = 0; j < n; ++j)
    for (index_t i = 0; i < m; ++i) y[i] += a[i + j * m] * x[j];
  return y;
}

double rel_error(const std::vector<double>& got, const std::vector<double>& want) {
  double num = 0, den = 0;
  for (std::size_t i = 0; i < want.size(); ++i) {
    num += (got[i] - want[i]) * (got[i] - want[i]);
    den += want[i] * want[i];
  }
  return std::sqrt(num / (den > 0 ? den : 1));
}

template <class T>
std::vector<double> widen(const std::vector<T>& v) {
  return {v.begin(), v.end()};
}

// The seed: W (m x n) split along columns, x split alike; y = W * x replicated on every device.
bool seed_matvec(bool gpu) {
  const index_t m = gpu ? 2000 : 200, n = gpu ? 60000 : 3000;
  const DeviceSet all = devices();
  std::mt19937_64 rng(7);
  std::uniform_real_distribution<float> u(-1.f, 1.f);
  std::vector<float> wv(static_cast<std::size_t>(m * n)), xv(static_cast<std::size_t>(n));
  for (auto& v : wv) v = u(rng);
  for (auto& v : xv) v = u(rng);
  const auto want = host_matvec(widen(wv), widen(xv), m, n);

  Array<float, 2> w1 = from_host(wv, {m, n}, on(all[0]));
  Array<float, 1> x1 = from_host(xv, {n}, on(all[0]));
  const double e1 = rel_error(widen(to_host(matmul(w1, x1))), want);

  Array<float, 2> w = from_host(wv, {m, n}, shard(1, all));  // each device: a block of columns
  Array<float, 1> x = from_host(xv, {n}, shard(0, all));     // ... and the matching block of x
  Array<float, 1> y = matmul(w, x);                          // partials allreduced: y replicated
  const double e = rel_error(widen(to_host(y)), want);
  std::printf("seed matvec %lld x %lld float: one device rel. error %.2e; %zu device(s), W shard(1): %.2e (y %s)\n",
              static_cast<long long>(m), static_cast<long long>(n), e1, all.size(), e, y.placement_string().c_str());
  return e1 < 1e-5 && e < 1e-5;
}

// CuPy's cg example: solve A x = b for a dense SPD matrix, A split along columns and every vector
// split along rows (so A * p reduce-scatters straight into p's blocks), dot and norm each step.
bool conjugate_gradient() {
  const index_t n = 400;
  const DeviceSet all = devices();
  std::mt19937_64 rng(11);
  std::uniform_real_distribution<double> u(-1.0, 1.0);
  std::vector<double> bmat(static_cast<std::size_t>(n * n)), av(static_cast<std::size_t>(n * n), 0.0),
      bv(static_cast<std::size_t>(n));
  for (auto& v : bmat) v = u(rng);
  for (auto& v : bv) v = u(rng);
  for (index_t j = 0; j < n; ++j)  // A = B^T B / n + I
    for (index_t i = 0; i < n; ++i) {
      double s = 0;
      for (index_t k = 0; k < n; ++k) s += bmat[k + i * n] * bmat[k + j * n];
      av[i + j * n] = s / double(n) + (i == j ? 1.0 : 0.0);
    }

  Array<double, 2> a = from_host(av, {n, n}, shard(1, all));
  Array<double, 1> b = from_host(bv, {n}, shard(0, all));
  Array<double, 1> x = zeros<double>({n}, shard(0, all));
  Array<double, 1> r = b;
  Array<double, 1> p = r;
  double rr = dot(r, r);
  int it = 0;
  const double tol = 1e-10 * std::sqrt(rr);
  for (; it < 2 * n && std::sqrt(rr) > tol; ++it) {
    Array<double, 1> ap = matmul(a, p, shard(0, all));
    const double alpha = rr / dot(p, ap);
    x += alpha * p;
    r -= alpha * ap;
    const double rr_new = dot(r, r);
    p = r + (rr_new / rr) * p;
    rr = rr_new;
  }
  // Check against the host: the residual of the solution, in plain loops.
  const auto xh = to_host(x);
  const auto ax = host_matvec(av, xh, n, n);
  double res = 0, bn = 0;
  for (index_t i = 0; i < n; ++i) {
    res += (ax[i] - bv[i]) * (ax[i] - bv[i]);
    bn += bv[i] * bv[i];
  }
  const double rel = std::sqrt(res / bn);
  std::printf("conjugate gradient, dense SPD %lld x %lld over %zu device(s): %d iterations, ||b - A x|| / ||b|| = "
              "%.2e (host loops)\n",
              static_cast<long long>(n), static_cast<long long>(n), all.size(), it, rel);
  return rel < 1e-8;
}

}  // namespace

int main() {
  try {
    const bool gpu = cuda_backend();
    std::printf("linear algebra on %zu %s\n", devices().size(), gpu ? "GPU(s)" : "host device(s)");
    const bool ok = seed_matvec(gpu) && conjugate_gradient();
    std::printf("%s\n", ok ? "OK: matmul and conjugate gradient match the host loops"
                           : "FAIL: a result differs from the host loops");
    return ok ? 0 : 1;
  } catch (const std::exception& e) {
    std::printf("FAIL: %s\n", e.what());
    return 1;
  }
}
