// SPDX-License-Identifier: Apache-2.0
// Dense solvers, part 1: solve, inv, det, logdet, slogdet, cholesky and lu on one device and
// replicated, against host products in double (residuals, reconstructions, 2x2 and 3x3 formulas);
// singular and non-positive-definite matrices throw linalg_error naming the pivot and leave the
// input intact; bad shapes are named. test_solver_factor.cpp covers qr, svd, eigh, lstsq, pinv and
// stacks of matrices.
#include "solver_support.hpp"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <string>
#include <vector>

using namespace solver_test;

namespace {

template <class T>
void check_solve(const DeviceSet& ds) {
  for (const auto& [pname, pl] : matrix_placements(ds)) {
    for (index_t n : solver_sizes()) {
      INFO(set_name(ds) << ", " << pname << ", n = " << n);
      const Mat a = well_conditioned(n);
      const Mat b = random_mat(n, 3);
      const auto bvec = random_values<double>(static_cast<std::size_t>(n));
      auto A = put_mat<T>(a, pl);
      const auto before = to_host(A);
      auto X = solve(A, put_mat<T>(b, pl));
      CHECK(X.layout().shape == Shape<2>{n, 3});
      CHECK(rel_diff(product(a, get_mat(X)), b) < tol<T>(n));
      auto x = solve(A, put_vec<T>(bvec, pl));
      CHECK(rel_diff(product(a, Mat{n, 1, get_vec(x)}), Mat{n, 1, bvec}) < tol<T>(n));
      CHECK(to_host(A) == before);  // the factorization worked on a copy
      auto Ai = inv(A);
      CHECK(rel_diff(product(get_mat(Ai), a), identity(n)) < tol<T>(n));
    }
  }
}

template <class T>
void check_det(const DeviceSet& ds) {
  const Placement pl = on(ds.back());
  // 2x2 and 3x3 formulas.
  const Mat a2{2, 2, {3, -1, 2, 5}};
  CHECK(close(det(put_mat<T>(a2, pl)), 3.0 * 5 - 2 * -1, 1e-5, 1e-6));
  // A random 3x3 whose determinant float resolves: near |det| = 0 float's rounding (about 1e-7)
  // can flip the sign or move log|det| past any tolerance, which would test the draw, not det.
  Mat a3;
  double d3 = 0;
  do {
    a3 = random_mat(3, 3);
    d3 = a3(0, 0) * (a3(1, 1) * a3(2, 2) - a3(1, 2) * a3(2, 1)) -
         a3(0, 1) * (a3(1, 0) * a3(2, 2) - a3(1, 2) * a3(2, 0)) +
         a3(0, 2) * (a3(1, 0) * a3(2, 1) - a3(1, 1) * a3(2, 0));
  } while (std::fabs(d3) < 0.05);
  CHECK(close(det(put_mat<T>(a3, pl)), d3, 1e-4, 1e-6));
  const auto s3 = slogdet(put_mat<T>(a3, pl));
  CHECK(static_cast<double>(s3.sign) == (d3 < 0 ? -1.0 : 1.0));
  CHECK(close(s3.logabsdet, std::log(std::fabs(d3)), 1e-4, 1e-5));
  if (d3 > 0) CHECK(close(logdet(put_mat<T>(a3, pl)), std::log(d3), 1e-4, 1e-5));
  else CHECK(std::isnan(logdet(put_mat<T>(a3, pl))));
  // Larger: against the product of lu's diagonal and the pivots' sign, and a permutation's sign.
  for (index_t n : solver_sizes()) {
    INFO("n = " << n);
    const Mat a = well_conditioned(n);
    auto A = put_mat<T>(a, replicate(ds));
    const auto [LU, piv] = lu(A);
    const Mat f = get_mat(LU);
    const auto p = to_host(piv);
    double logabs = 0, sign = 1;
    for (index_t i = 0; i < n; ++i) {
      logabs += std::log(std::fabs(f(i, i)));
      sign *= (f(i, i) < 0 ? -1 : 1) * (p[static_cast<std::size_t>(i)] != i ? -1 : 1);
    }
    const auto s = slogdet(A);
    CHECK(static_cast<double>(s.sign) == sign);
    CHECK(close(s.logabsdet, logabs, 1e-5, 1e-5));
    // float overflows beyond n = 7 here (det ~ (n + 1)^n)
    if (n <= 7 || std::is_same_v<T, double>) CHECK(close(det(A), sign * std::exp(logabs), 1e-4, 1e-6));
  }
  CHECK(det(put_mat<T>(zeros_mat(0, 0), pl)) == T(1));
  CHECK(det(put_mat<T>(Mat{2, 2, {1, 2, 2, 4}}, pl)) == T(0));  // singular: no error, det 0
  CHECK(logdet(put_mat<T>(Mat{2, 2, {1, 2, 2, 4}}, pl)) == -std::numeric_limits<T>::infinity());
  const Mat swap{2, 2, {0, 1, 1, 0}};  // a row swap: det -1
  CHECK(det(put_mat<T>(swap, pl)) == T(-1));
}

template <class T>
void check_cholesky(const DeviceSet& ds) {
  for (const auto& [pname, pl] : matrix_placements(ds)) {
    for (index_t n : solver_sizes()) {
      INFO(set_name(ds) << ", " << pname << ", n = " << n);
      const Mat a = spd(n);
      auto A = put_mat<T>(a, pl);
      const Mat l = get_mat(cholesky(A));
      for (index_t j = 0; j < n; ++j)
        for (index_t i = 0; i < j; ++i) CHECK(l(i, j) == 0.0);
      CHECK(rel_diff(product(l, transposed(l)), a) < tol<T>(n));
    }
  }
}

template <class T>
void check_lu(const DeviceSet& ds) {
  for (auto [m, n] : std::vector<std::pair<index_t, index_t>>{{0, 0}, {1, 1}, {7, 7}, {33, 33}, {20, 9}, {9, 20}}) {
    INFO(set_name(ds) << ", " << m << " x " << n);
    const Mat a = random_mat(m, n);
    const auto [LU, piv] = lu(put_mat<T>(a, on(ds[0])));
    const index_t k = std::min(m, n);
    CHECK(piv.layout().shape == Shape<1>{k});
    const Mat f = get_mat(LU);
    Mat l = zeros_mat(m, k), u = zeros_mat(k, n);
    for (index_t j = 0; j < k; ++j)
      for (index_t i = 0; i < m; ++i) l(i, j) = i == j ? 1.0 : i > j ? f(i, j) : 0.0;
    for (index_t j = 0; j < n; ++j)
      for (index_t i = 0; i < k && i <= j; ++i) u(i, j) = f(i, j);
    // P A: A's rows swapped in pivot order.
    Mat pa = a;
    const auto p = to_host(piv);
    for (index_t i = 0; i < k; ++i) {
      const index_t r = p[static_cast<std::size_t>(i)];
      REQUIRE(r >= i);
      REQUIRE(r < m);
      for (index_t j = 0; j < n; ++j) std::swap(pa(i, j), pa(r, j));
    }
    CHECK(rel_diff(product(l, u), pa) < tol<T>(m + n));
  }
}

}  // namespace

TEST_CASE("solve and inv: residuals A X - B, inv(A) A = I, float and double, input intact") {
  for (const auto& ds : device_sets()) {
    check_solve<float>(ds);
    check_solve<double>(ds);
  }
}

TEST_CASE("det, logdet, slogdet: 2x2 and 3x3 formulas, LU's diagonal, singular gives 0") {
  for (const auto& ds : device_sets()) {
    check_det<float>(ds);
    check_det<double>(ds);
  }
}

TEST_CASE("cholesky: L lower triangular with L L' = A") {
  for (const auto& ds : device_sets()) {
    check_cholesky<float>(ds);
    check_cholesky<double>(ds);
  }
}

TEST_CASE("lu: P A = L U with 0-based pivots, square and rectangular") {
  for (const auto& ds : device_sets()) {
    check_lu<float>(ds);
    check_lu<double>(ds);
  }
}

TEST_CASE("a matrix split along columns or rows is gathered on its first device and solved there") {
  for (const auto& ds : device_sets()) {
    const index_t n = 37;
    const Mat a = well_conditioned(n), b = random_mat(n, 2);
    for (int dim : {0, 1}) {
      INFO(set_name(ds) << ", shard(" << dim << ")");
      auto A = put_mat<double>(a, shard(dim, ds));
      auto X = solve(A, put_mat<double>(b, on(ds[0])));
      CHECK(X.layout().parts.size() == 1);
      CHECK(X.layout().parts[0].device == ds[0]);
      CHECK(rel_diff(product(a, get_mat(X)), b) < tol<double>(n));
      const Mat l = get_mat(cholesky(put_mat<double>(spd(n), shard(dim, ds))));
      CHECK(l(0, n - 1) == 0.0);
    }
  }
}

TEST_CASE("errors: a singular matrix and a non-positive-definite one throw linalg_error naming the pivot") {
  for (const auto& ds : device_sets()) {
    INFO(set_name(ds));
    // Column 2 is zero: elimination never changes it, so pivot 2 is exactly zero.
    const Mat s{3, 3, {1, 2, 3, 0, 1, 4, 0, 0, 0}};
    auto S = put_mat<double>(s, on(ds.back()));
    auto B = put_mat<double>(random_mat(3, 1), on(ds.back()));
    const auto before = to_host(S);
    for (int which = 0; which < 2; ++which) {
      bool thrown = false;
      try {
        if (which == 0) (void)solve(S, B);
        else (void)inv(S);
      } catch (const linalg_error& e) {
        thrown = true;
        const std::string what = e.what();
        INFO(what);
        CHECK(what.find(which == 0 ? "solve(A, B)" : "inv(A)") != std::string::npos);
        CHECK(what.find("singular") != std::string::npos);
        CHECK(what.find("pivot " + std::to_string(e.index)) != std::string::npos);
        CHECK(e.index == 2);
      }
      CHECK(thrown);
    }
    CHECK(to_host(S) == before);
    // Not positive definite: the leading minor of order 2 is negative.
    const Mat np{3, 3, {1, 2, 0, 2, 1, 0, 0, 0, 1}};
    auto P = put_mat<float>(np, replicate(ds));
    const auto pbefore = to_host(P);
    bool thrown = false;
    try {
      (void)cholesky(P);
    } catch (const linalg_error& e) {
      thrown = true;
      const std::string what = e.what();
      INFO(what);
      CHECK(e.index == 1);
      CHECK(what.find("not positive definite") != std::string::npos);
      CHECK(what.find("leading minor of order 2") != std::string::npos);
    }
    CHECK(thrown);
    CHECK(to_host(P) == pbefore);
    // Shapes.
    auto R = put_mat<double>(random_mat(3, 4), on(ds.back()));
    check_throws_naming<dimension_mismatch>([&] { (void)solve(R, B); }, {"solve(A, B)", "square", "3 rows and 4 columns"});
    check_throws_naming<dimension_mismatch>([&] { (void)inv(R); }, {"inv(A)", "square"});
    check_throws_naming<dimension_mismatch>([&] { (void)cholesky(R); }, {"cholesky(A)", "square"});
    check_throws_naming<dimension_mismatch>([&] { (void)det(R); }, {"det(A)", "square"});
    check_throws_naming<dimension_mismatch>([&] { (void)eigh(R); }, {"eigh(A)", "square"});
    auto B4 = put_mat<double>(random_mat(4, 2), on(ds.back()));
    check_throws_naming<dimension_mismatch>([&] { (void)solve(S, B4); }, {"solve(A, B)", "3 rows", "found 4"});
    check_throws_naming<dimension_mismatch>([&] { (void)lstsq(S, B4); }, {"lstsq(A, B)", "3 rows", "found 4"});
  }
}

TEST_CASE("solve, inv, cholesky and eigh of a matrix split by columns: over the GPUs, gathered on host devices") {
  for (const auto& ds : multi_device_sets()) {
    for (index_t n : {index_t(1), index_t(2), index_t(37), index_t(300), index_t(513)}) {
      INFO(set_name(ds) << ", n = " << n);
      const Mat a = well_conditioned(n), b = random_mat(n, 3);
      auto A = put_mat<double>(a, shard(1, ds));
      const auto before = to_host(A);
      auto X = solve(A, put_mat<double>(b, shard(1, ds)));
      CHECK(X.layout().parts.size() == 1);
      CHECK(X.layout().parts[0].device == ds[0]);
      CHECK(rel_diff(product(a, get_mat(X)), b) < tol<double>(n));
      const auto bv = random_values<double>(static_cast<std::size_t>(n));
      auto x = solve(A, put_vec<double>(bv, replicate(ds)));
      CHECK(rel_diff(product(a, Mat{n, 1, get_vec(x)}), Mat{n, 1, bv}) < tol<double>(n));
      if (n <= 300) CHECK(rel_diff(product(get_mat(inv(A)), a), identity(n)) < tol<double>(n));
      CHECK(to_host(A) == before);
      // cholesky: on GPUs Tessera's own over the tiles (split_cholesky.cpp), L keeping A's column blocks;
      // float too, whose factor tolerance is its own.
      const Mat p = spd(n);
      const Mat l = get_mat(cholesky(put_mat<double>(p, shard(1, ds))));
      for (index_t j = 0; j < n; ++j)
        for (index_t i = 0; i < j; ++i) CHECK(l(i, j) == 0.0);
      CHECK(rel_diff(product(l, transposed(l)), p) < tol<double>(n));
      const Mat lf = get_mat(cholesky(put_mat<float>(p, shard(1, ds))));
      CHECK(rel_diff(product(lf, transposed(lf)), p) < tol<float>(n));
      // eigh: on GPUs through cusolverMg, V keeping A's column blocks.
      const Mat sym = symmetric(n);
      auto [w, V] = eigh(put_mat<double>(sym, shard(1, ds)));
      const auto wv = get_vec(w);
      const Mat v = get_mat(V);
      CHECK(std::is_sorted(wv.begin(), wv.end()));
      Mat vw = v;
      for (index_t j = 0; j < n; ++j)
        for (index_t i = 0; i < n; ++i) vw(i, j) *= wv[static_cast<std::size_t>(j)];
      CHECK(rel_diff(product(sym, v), vw) < tol<double>(n) * 10);
      CHECK(rel_diff(product(transposed(v), v), identity(n)) < tol<double>(n) * 10);
      const auto w2 = get_vec(eigvalsh(put_mat<double>(sym, shard(1, ds))));
      check_all_close(w2, wv, 1e-9, 1e-9);
    }
    // Positive definite but for one leading minor: in the first tile, a middle one, the last one
    // (8 columns on 4 GPUs are tiles of 2; 37 columns, 4 tiles of 8 and a last one of 5).
    for (const auto& [n, bad] : {std::pair<index_t, index_t>{8, 0}, {8, 5}, {8, 7}, {37, 36}}) {
      INFO(set_name(ds) << ", n = " << n << ", minor " << bad + 1);
      Mat np = identity(n);
      np(bad, bad) = -1.0;
      auto NP = put_mat<double>(np, shard(1, ds));
      bool thrown = false;
      try {
        (void)cholesky(NP);
      } catch (const linalg_error& e) {
        thrown = true;
        INFO(e.what());
        CHECK(e.index == bad);
        CHECK(std::string(e.what()).find("leading minor of order " + std::to_string(bad + 1)) != std::string::npos);
      }
      CHECK(thrown);
      CHECK(to_host(NP) == to_host(put_mat<double>(np, on(ds[0]))));
    }
    // A singular matrix split by columns: the zero pivot is named, A is intact.
    const Mat s{3, 3, {1, 2, 3, 0, 1, 4, 0, 0, 0}};
    auto S = put_mat<float>(s, shard(1, ds));
    const auto before = to_host(S);
    check_throws_naming<linalg_error>([&] { (void)solve(S, put_vec<float>({1, 2, 3}, on(ds[0]))); },
                                      {"solve(A, B)", "singular", "pivot"});
    CHECK(to_host(S) == before);
  }
}

// cusolverMgPotrf over 4 GPUs gave a wrong factor (max |L L' - A| about 1% of max |A|) in the split
// test above in 4 of 8 runs of `ctest -j 8` on 4 GPUs, and in 18 of 32 processes of this case run 8
// at once with GPU 0 busy (scripts/gpu_check.sh mgrace); Tessera's own split cholesky, which
// replaced it, passed 32 of 32 there. Each repetition follows the sequence that failed: a split
// solve (getrf + getrs), then the factor of a matrix uploaded just before. A wrong factor is
// compared with the one-device factor of the same matrix, and the columns that differ are named
// with their tiles. TESSERA_TEST_REPEAT sets the repetitions.
TEST_CASE("cholesky of a matrix split by columns, repeated after a split solve: every factor reconstructs A") {
  const int reps = [] {
    const char* v = std::getenv("TESSERA_TEST_REPEAT");
    return v != nullptr && std::atoi(v) > 0 ? std::atoi(v) : 2;
  }();
  for (const auto& ds : multi_device_sets()) {
    for (index_t n : {index_t(37), index_t(300), index_t(512), index_t(513)}) {
      // The tile width copy_to_tiles picks (dsl/tessera/solver_ops.hpp), for the message only.
      const index_t widest = std::min<index_t>(256, n / static_cast<index_t>(ds.size()));
      const index_t count = (n + widest - 1) / widest, tile = (n + count - 1) / count;
      for (int r = 0; r < reps; ++r) {
        INFO(set_name(ds) << ", n = " << n << ", repetition " << r);
        const Mat a = well_conditioned(n), b = random_mat(n, 3);
        auto A = put_mat<double>(a, shard(1, ds));
        CHECK(rel_diff(product(a, get_mat(solve(A, put_mat<double>(b, shard(1, ds))))), b) < tol<double>(n));
        const Mat p = spd(n);
        const Mat l = get_mat(cholesky(put_mat<double>(p, shard(1, ds))));
        const double d = rel_diff(product(l, transposed(l)), p);
        if (d >= tol<double>(n)) {
          const Mat one = get_mat(cholesky(put_mat<double>(p, on(ds[0]))));
          index_t first = -1, last = -1, count = 0;
          for (index_t j = 0; j < n; ++j) {
            bool differs = false;
            for (index_t i = j; i < n; ++i) differs = differs || std::fabs(l(i, j) - one(i, j)) > 1e-9 * (1 + std::fabs(one(i, j)));
            if (differs) {
              if (first < 0) first = j;
              last = j, ++count;
            }
          }
          MESSAGE("one-device factor reconstructs A: " << (rel_diff(product(one, transposed(one)), p) < tol<double>(n))
                  << "; columns that differ from it: " << count << ", first " << first << " (tile " << first / tile
                  << "), last " << last << " (tile " << last / tile << "), tile width " << tile);
        }
        CHECK(d < tol<double>(n));
      }
    }
  }
}
