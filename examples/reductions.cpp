// SPDX-License-Identifier: Apache-2.0
// Reductions on a sharded matrix: a CuPy/Julia statistics notebook in C++.
//
//  * Column statistics: `mean(x, dims(0))` reduces the contiguous dimension of each column; the
//    result is 1 x k and keeps the matrix's placement (columns sharded over the devices), so it
//    broadcasts against the matrix with no data movement: `(x - mu) / sd` standardizes.
//  * A column softmax, `exp(x - maximum(x, dims(0))) / sum(..., dims(0))`, fused: neither the
//    exponentials nor the shifted matrix are materialized before their column sums.
//  * Row sums `sum(x, dims(1))` reduce the shard dimension: every device folds its columns, the
//    partials are combined (NCCL on GPUs) and the n x 1 result is replicated on every device.
//  * Full reductions return host scalars (`dot`, `norm`, `count`), or, with `as_array`, a
//    replicated 0-d array that later expressions use on the devices: `x / sum(abs(x), as_array)`.
//
// Every result is checked against plain host loops in double; the program exits non-zero on a
// wrong result. Without a GPU it runs on host devices (TESSERA_HOST_DEVICES=n).
#include <tessera/tessera.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <exception>
#include <string>
#include <vector>

using namespace tessera;

namespace {

int failures = 0;

void check(const char* what, const std::vector<double>& got, const std::vector<double>& want, double rtol) {
  double worst = 0;
  bool ok = got.size() == want.size();
  for (std::size_t i = 0; ok && i < got.size(); ++i) {
    const double err = std::fabs(got[i] - want[i]) / std::max(1.0, std::fabs(want[i]));
    worst = std::max(worst, err);
    ok = err <= rtol;  // also false for NaN
  }
  std::printf("  %-46s max rel. error %.2e  %s\n", what, worst, ok ? "ok" : "WRONG");
  failures += ok ? 0 : 1;
}

template <class T, int N>
std::vector<double> host(const Array<T, N>& a) {
  const auto v = to_host(a);
  return std::vector<double>(v.begin(), v.end());
}

}  // namespace

int main() try {
  const index_t n = 4099, k = 8 * static_cast<index_t>(devices().size()) + 3;  // uneven column blocks
  std::printf("%lld x %lld Float32 matrix, columns sharded over %zu device(s)\n", static_cast<long long>(n),
              static_cast<long long>(k), devices().size());
  seed(7);
  const auto x = randn<float>({n, k}, shard(1));
  const auto xv = host(x);
  auto X = [&](index_t i, index_t j) { return xv[static_cast<std::size_t>(i + j * n)]; };

  // Column statistics and standardization.
  const auto mu = mean(x, dims(0));
  const auto sd = sqrt(mean((x - mu) * (x - mu), dims(0)));
  const Array<float, 2> z = (x - mu) / sd;
  std::vector<double> mu_ref(k), sd_ref(k), z_ref(xv.size());
  for (index_t j = 0; j < k; ++j) {
    double s = 0, q = 0;
    for (index_t i = 0; i < n; ++i) s += X(i, j);
    for (index_t i = 0; i < n; ++i) q += (X(i, j) - s / n) * (X(i, j) - s / n);
    mu_ref[j] = s / n;
    sd_ref[j] = std::sqrt(q / n);
    for (index_t i = 0; i < n; ++i) z_ref[static_cast<std::size_t>(i + j * n)] = (X(i, j) - mu_ref[j]) / sd_ref[j];
  }
  check("mean(x, dims(0))", host(mu), mu_ref, 1e-5);
  check("(x - mu) / sd", host(z), z_ref, 1e-4);

  // Column softmax, fused.
  const auto m = maximum(x, dims(0));
  const auto e = exp(x - m);
  const Array<float, 2> p = e / sum(e, dims(0));
  std::vector<double> p_ref(xv.size());
  for (index_t j = 0; j < k; ++j) {
    double mx = -INFINITY, s = 0;
    for (index_t i = 0; i < n; ++i) mx = std::max(mx, X(i, j));
    for (index_t i = 0; i < n; ++i) s += std::exp(X(i, j) - mx);
    for (index_t i = 0; i < n; ++i) p_ref[static_cast<std::size_t>(i + j * n)] = std::exp(X(i, j) - mx) / s;
  }
  check("softmax along dims(0)", host(p), p_ref, 1e-4);
  check("sum(softmax) == number of columns", {double(sum(p))}, {double(k)}, 1e-5);

  // Row sums across the shard dimension: replicated result.
  const auto rows = sum(x * x, dims(1));
  std::vector<double> rows_ref(n, 0.0);
  for (index_t j = 0; j < k; ++j)
    for (index_t i = 0; i < n; ++i) rows_ref[i] += X(i, j) * X(i, j);
  check("sum(x * x, dims(1)) (replicated)", host(rows), rows_ref, 1e-5);
  std::printf("  row sums replicated on every device: %s\n", rows.is_replicated() || devices().size() == 1 ? "yes" : "NO");

  // Full reductions to the host, and one that stays on the devices.
  double dot_ref = 0, l1 = 0;
  long long big = 0;
  for (double v : xv) {
    dot_ref += v * v;
    l1 += std::fabs(v);
    big += v > 2.0 ? 1 : 0;
  }
  check("dot(x, x)", {double(dot(x, x))}, {dot_ref}, 1e-5);
  check("norm(z)^2 == n k", {double(norm(z)) * norm(z)}, {double(n * k)}, 1e-4);
  check("count(x > 2)", {double(count(x > 2.0f))}, {double(big)}, 0);
  const Array<float, 2> w = x / sum(abs(x), as_array);
  check("x / sum(abs(x), as_array): l1 norm is 1", {double(sum(abs(w)))}, {1.0}, 1e-5);
  check("x / sum(abs(x), as_array): first element", {double(w.at(0, 0))}, {X(0, 0) / l1}, 1e-5);

  std::printf(failures ? "FAILED: %d check(s)\n" : "OK: every reduction matches the host loops\n", failures);
  return failures ? 1 : 0;
} catch (const std::exception& ex) {
  std::fprintf(stderr, "error: %s\n", ex.what());
  return 1;
}
