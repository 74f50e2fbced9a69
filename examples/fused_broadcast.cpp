// SPDX-License-Identifier: Apache-2.0
// Fused expressions and broadcasting on a sharded matrix.
//
//  * A multi-term expression such as `c = sin(a) * b + 2 * a` is one lazy tree; assigning it
//    runs ONE fused kernel per shard (no temporaries for sin(a), sin(a) * b, ...).
//  * `where(cond, x, y)` selects elementwise, e.g. a numerically stable softplus.
//  * Broadcasting follows Julia: shapes align from the first dimension, missing trailing
//    dimensions count as 1 and size-1 dimensions stretch. A length-n vector therefore
//    broadcasts along dim 1 of an n x k matrix (`m .- v` in Julia), and a 1 x k row along dim 0.
//  * Placement: the matrix is sharded along dim 1 (columns split over the devices). The
//    length-n vector is replicated (each device holds a copy); the 1 x k row is sharded along
//    dim 1 with the same blocks as the matrix. Nothing is moved between devices implicitly.
//
// Every result is checked against a plain host loop (in double); the program exits non-zero on
// a wrong result. Without a GPU it runs on host devices (TESSERA_HOST_DEVICES=n).
#include <tessera/tessera.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <exception>
#include <iostream>
#include <string>
#include <vector>

using namespace tessera;

namespace {

int failures = 0;

// Compares a result with its host reference; prints one line per check.
void check(const std::string& what, const std::vector<float>& got, const std::vector<double>& want, bool verbose,
           double rtol = 2e-6) {
  double max_err = 0;
  std::size_t bad = got.size() == want.size() ? 0 : std::max(got.size(), want.size()), first_bad = want.size();
  for (std::size_t i = 0; i < got.size() && i < want.size(); ++i) {
    const double err = std::fabs(double(got[i]) - want[i]);
    if (!(err <= rtol * std::max(1.0, std::fabs(want[i])))) {  // also catches NaN
      if (bad++ == 0) first_bad = i;
    }
    max_err = std::max(max_err, std::isnan(err) ? INFINITY : err);
  }
  if (verbose || bad) {
    std::printf("  %-44s max |error| = %.3g%s\n", what.c_str(), max_err, bad ? "  WRONG" : "  ok");
  }
  if (bad) {
    ++failures;
    if (first_bad < want.size())
      std::printf("    %zu element(s) off, first at linear index %zu: got %.9g, want %.9g\n", bad, first_bad,
                  double(got[first_bad]), want[first_bad]);
    else
      std::printf("    sizes differ: got %zu, want %zu\n", got.size(), want.size());
  }
}

// One run on an n x k matrix sharded along dim 1; prints the arrays when `show`.
void run(index_t n, index_t k, bool show) {
  const auto N = static_cast<std::size_t>(n), K = static_cast<std::size_t>(k);
  std::printf("\n== %lld x %lld Float32 matrices, sharded along dim 1 over %zu device(s)%s\n",
              static_cast<long long>(n), static_cast<long long>(k), devices().size(), show ? "" : " (not printed)");

  auto a = rand<float>({n, k}, shard(1));   // uniform [0, 1)
  auto b = randn<float>({n, k}, shard(1));  // standard normal
  const auto ha = to_host(a), hb = to_host(b);
  std::vector<double> want(N * K);

  // 1. A multi-term fused expression: one kernel per shard.
  Array<float, 2> c = sin(a) * b + 2 * a;
  for (std::size_t i = 0; i < N * K; ++i) want[i] = std::sin(double(ha[i])) * hb[i] + 2.0 * ha[i];
  check("c = sin(a) * b + 2 * a", to_host(c), want, true);
  if (show) std::cout << "\na = " << a << "\nb = " << b << "\nc = sin(a) * b + 2 * a = " << c << '\n';

  // 2. where + exp/log1p: softplus(b) = log(1 + e^b), stable for large |b|.
  Array<float, 2> sp = where(b > 0, b + log1p(exp(-b)), log1p(exp(b)));
  for (std::size_t i = 0; i < N * K; ++i) {
    const double x = hb[i];
    want[i] = x > 0 ? x + std::log1p(std::exp(-x)) : std::log1p(std::exp(x));
  }
  check("sp = where(b > 0, b + log1p(exp(-b)), log1p(exp(b)))", to_host(sp), want, true);
  if (show) std::cout << "\nsp = " << sp << '\n';

  // 3. A length-n vector broadcast along dim 1: center each row by its mean over the columns.
  //    The row means are computed on the host here and uploaded replicated (one copy per device).
  std::vector<float> hrow(N, 0.f);
  for (std::size_t i = 0; i < N; ++i) {
    double s = 0;
    for (std::size_t j = 0; j < K; ++j) s += hb[i + j * N];
    hrow[i] = static_cast<float>(s / double(k));
  }
  auto row_mean = from_host(hrow, {n}, replicate());  // shape (n,): counts as (n, 1)
  Array<float, 2> rows_centered = b - row_mean;
  for (std::size_t j = 0; j < K; ++j)
    for (std::size_t i = 0; i < N; ++i) want[i + j * N] = double(hb[i + j * N]) - double(hrow[i]);
  check("rows_centered = b - row_mean   (n) over (n, k)", to_host(rows_centered), want, true);
  if (show) std::cout << "\nrow_mean = " << row_mean << "\nrows_centered = " << rows_centered << '\n';

  // 4. A 1 x k row broadcast along dim 0: standardize each column. The row is sharded along
  //    dim 1 like b, so each device holds the statistics of its own columns.
  std::vector<float> hmu(K), hsd(K);
  for (std::size_t j = 0; j < K; ++j) {
    double s = 0, ss = 0;
    for (std::size_t i = 0; i < N; ++i) s += hb[i + j * N];
    const double mu = N ? s / double(N) : 0.0;
    for (std::size_t i = 0; i < N; ++i) ss += (hb[i + j * N] - mu) * (hb[i + j * N] - mu);
    hmu[j] = static_cast<float>(mu);
    hsd[j] = static_cast<float>(N > 1 ? std::sqrt(ss / double(N - 1)) : 1.0);
  }
  auto mu = from_host(hmu, {1, k}, shard(1));
  auto sd = from_host(hsd, {1, k}, shard(1));
  Array<float, 2> z = (b - mu) / sd;
  for (std::size_t j = 0; j < K; ++j)
    for (std::size_t i = 0; i < N; ++i)
      want[i + j * N] = (double(hb[i + j * N]) - double(hmu[j])) / double(hsd[j]);
  check("z = (b - mu) / sd   (1, k) over (n, k)", to_host(z), want, true, 1e-5);
  if (show) std::cout << "\nmu = " << mu << "\nsd = " << sd << "\nz = " << z << '\n';

  // 5. Scalars, a replicated vector and a sharded row in one fused expression, assigned in
  //    place (`a = a + 1` style assignments write into existing storage).
  c = where(z > 1.5f, 1.5f, z) * 0.5 + row_mean - mu;  // a clipped z, recentered
  for (std::size_t j = 0; j < K; ++j)
    for (std::size_t i = 0; i < N; ++i) {
      const double zz = (double(hb[i + j * N]) - double(hmu[j])) / double(hsd[j]);
      want[i + j * N] = (zz > 1.5 ? 1.5 : zz) * 0.5 + double(hrow[i]) - double(hmu[j]);
    }
  check("c = where(z > 1.5, 1.5, z) * 0.5 + row_mean - mu", to_host(c), want, true, 1e-5);
  if (show) std::cout << "\nc = " << c << '\n';
}

}  // namespace

int main() {
  try {
    const DeviceSet devs = devices();
    std::cout << "Tessera fused expressions and broadcasting\n";
    if (cuda_backend()) {
      std::cout << "running on " << devs.size() << " GPU(s):";
    } else {
      std::cout << "no GPU in use: running on " << devs.size()
                << " host device(s) (set TESSERA_HOST_DEVICES=n for more; the same code runs on GPUs):";
    }
    for (auto d : devs) std::cout << ' ' << d.name();
    std::cout << '\n';

    run(4, 6, true);        // small, printed
    run(1000, 1001, false); // uneven shards, checked only
    run(3, 2, false);       // fewer columns than devices when run on 3+ devices
    synchronize();

    if (failures) {
      std::cout << "\nFAILED: " << failures << " check(s) gave wrong results\n";
      return 1;
    }
    std::cout << "\nOK: every fused and broadcast result matches the host loops\n";
    return 0;
  } catch (const std::exception& e) {
    std::cerr << "fused_broadcast: error: " << e.what() << '\n';
    return 2;
  }
}
