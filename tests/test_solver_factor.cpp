// SPDX-License-Identifier: Apache-2.0
// Dense solvers, part 2: qr, svd, svdvals, eigh, eigvalsh, lstsq and pinv against host products in
// double (Q'Q = I, A = QR = U S Vt = V diag(w) V', the normal equations, the Penrose conditions),
// square, tall and wide; and stacks of matrices sharded along their last dim, each result equal
// to the one of its matrix alone.
#include "solver_support.hpp"

#include <algorithm>
#include <string>
#include <vector>

using namespace solver_test;

namespace {

std::vector<std::pair<index_t, index_t>> shapes() {
  return {{0, 0}, {1, 1}, {0, 3}, {3, 0}, {7, 7}, {31, 31}, {33, 33}, {40, 9}, {9, 40}, {130, 33}};
}

Mat diag_scale_rows(const std::vector<double>& s, const Mat& a) {  // diag(s) * a
  Mat r = a;
  for (index_t j = 0; j < a.cols; ++j)
    for (index_t i = 0; i < a.rows; ++i) r(i, j) *= s[static_cast<std::size_t>(i)];
  return r;
}

void check_orthonormal_columns(const Mat& q, double t) {
  CHECK(rel_diff(product(transposed(q), q), identity(q.cols)) < t);
}

template <class T>
void check_qr(const DeviceSet& ds) {
  for (const auto& [pname, pl] : matrix_placements(ds)) {
    for (auto [m, n] : shapes()) {
      INFO(set_name(ds) << ", " << pname << ", " << m << " x " << n);
      const Mat a = random_mat(m, n);
      auto A = put_mat<T>(a, pl);
      const auto before = to_host(A);
      auto [Q, R] = qr(A);
      const index_t k = std::min(m, n);
      CHECK(Q.layout().shape == Shape<2>{m, k});
      CHECK(R.layout().shape == Shape<2>{k, n});
      const Mat q = get_mat(Q), r = get_mat(R);
      check_orthonormal_columns(q, tol<T>(m + n));
      for (index_t j = 0; j < n; ++j)
        for (index_t i = j + 1; i < k; ++i) CHECK(r(i, j) == 0.0);
      CHECK(rel_diff(product(q, r), a) < tol<T>(m + n));
      CHECK(to_host(A) == before);
    }
  }
}

template <class T>
void check_svd(const DeviceSet& ds) {
  for (const auto& [pname, pl] : matrix_placements(ds)) {
    for (auto [m, n] : shapes()) {
      INFO(set_name(ds) << ", " << pname << ", " << m << " x " << n);
      const Mat a = random_mat(m, n);
      auto A = put_mat<T>(a, pl);
      auto [U, S, Vt] = svd(A);
      const index_t k = std::min(m, n);
      CHECK(U.layout().shape == Shape<2>{m, k});
      CHECK(S.layout().shape == Shape<1>{k});
      CHECK(Vt.layout().shape == Shape<2>{k, n});
      const Mat u = get_mat(U), vt = get_mat(Vt);
      const auto s = get_vec(S);
      CHECK(std::is_sorted(s.rbegin(), s.rend()));
      for (double x : s) CHECK(x >= 0.0);
      check_orthonormal_columns(u, tol<T>(m + n));
      check_orthonormal_columns(transposed(vt), tol<T>(m + n));
      CHECK(rel_diff(product(u, diag_scale_rows(s, vt)), a) < tol<T>(m + n));
      const auto sv = get_vec(svdvals(A));
      REQUIRE(sv.size() == s.size());
      for (std::size_t i = 0; i < s.size(); ++i) CHECK(close(sv[i], s[i], tol<T>(m + n), tol<T>(m + n)));
    }
  }
}

template <class T>
void check_eigh(const DeviceSet& ds) {
  for (const auto& [pname, pl] : matrix_placements(ds)) {
    for (index_t n : solver_sizes()) {
      INFO(set_name(ds) << ", " << pname << ", n = " << n);
      const Mat a = symmetric(n);
      auto A = put_mat<T>(a, pl);
      auto [w, V] = eigh(A);
      const auto wv = get_vec(w);
      const Mat v = get_mat(V);
      CHECK(std::is_sorted(wv.begin(), wv.end()));
      check_orthonormal_columns(v, tol<T>(n));
      // A = V diag(w) V'
      CHECK(rel_diff(product(v, diag_scale_rows(wv, transposed(v))), a) < tol<T>(n));
      const auto w2 = get_vec(eigvalsh(A));
      REQUIRE(w2.size() == wv.size());
      for (std::size_t i = 0; i < wv.size(); ++i) CHECK(close(w2[i], wv[i], tol<T>(n), tol<T>(n)));
    }
  }
}

// Solves the normal equations A'A x = A'b on the host (Gauss-Jordan in double).
Mat normal_equations(const Mat& a, const Mat& b) {
  Mat g = product(transposed(a), a), r = product(transposed(a), b);
  const index_t n = g.rows;
  for (index_t c = 0; c < n; ++c) {
    for (index_t i = 0; i < n; ++i) {
      if (i == c) continue;
      const double f = g(i, c) / g(c, c);
      for (index_t j = 0; j < n; ++j) g(i, j) -= f * g(c, j);
      for (index_t j = 0; j < r.cols; ++j) r(i, j) -= f * r(c, j);
    }
  }
  for (index_t i = 0; i < n; ++i)
    for (index_t j = 0; j < r.cols; ++j) r(i, j) /= g(i, i);
  return r;
}

template <class T>
void check_lstsq_pinv(const DeviceSet& ds) {
  const double t = std::is_same_v<T, float> ? 2e-3 : 1e-8;
  for (const auto& [pname, pl] : matrix_placements(ds)) {
    for (auto [m, n] : std::vector<std::pair<index_t, index_t>>{{1, 1}, {7, 3}, {40, 9}, {130, 33}, {33, 33}}) {
      INFO(set_name(ds) << ", " << pname << ", " << m << " x " << n);
      // Well conditioned: the normal equations square the condition number, and the reference
      // solves them in double.
      Mat a = random_mat(m, n);
      for (index_t i = 0; i < std::min(m, n); ++i) a(i, i) += static_cast<double>(n) + 1.0;
      const Mat b = random_mat(m, 2);
      auto A = put_mat<T>(a, pl);
      auto r = lstsq(A, put_mat<T>(b, pl));
      CHECK(r.rank == n);
      CHECK(r.s.layout().shape == Shape<1>{n});
      CHECK(rel_diff(get_mat(r.x), normal_equations(a, b)) < t);
      const auto bv = random_values<double>(static_cast<std::size_t>(m));
      auto rv = lstsq(A, put_vec<T>(bv, pl));
      CHECK(rel_diff(Mat{n, 1, get_vec(rv.x)}, normal_equations(a, Mat{m, 1, bv})) < t);
    }
    // Rank deficient and wide: the minimum-norm solution, and the four Penrose conditions of pinv.
    for (auto [m, n] : std::vector<std::pair<index_t, index_t>>{{0, 0}, {2, 5}, {9, 40}, {40, 9}, {12, 12}}) {
      INFO(set_name(ds) << ", " << pname << ", pinv " << m << " x " << n);
      Mat a = random_mat(m, n);
      if (m == 12) {  // rank 11: the last column repeats the first
        for (index_t i = 0; i < m; ++i) a(i, n - 1) = a(i, 0);
      }
      auto A = put_mat<T>(a, pl);
      // float's default cut-off (eps * max(m, n)) sits close to the rounding of a zero singular
      // value in float: a wider one keeps the deficient case deterministic on every library.
      const double rc = std::is_same_v<T, float> ? 1e-5 : -1;
      auto P = pinv(A, rc);
      CHECK(P.layout().shape == Shape<2>{n, m});
      const Mat p = get_mat(P);
      const Mat ap = product(a, p), pa = product(p, a);
      CHECK(rel_diff(product(ap, a), a) < t);
      CHECK(rel_diff(product(pa, p), p) < t);
      CHECK(rel_diff(transposed(ap), ap) < t);
      CHECK(rel_diff(transposed(pa), pa) < t);
      if (m == 12) {
        auto r = lstsq(A, put_mat<T>(random_mat(m, 1), pl), rc);
        CHECK(r.rank == 11);
      }
    }
  }
}

// A stack n x n x batch sharded along its last dim: every result equals its matrix's alone.
template <class T>
void check_stacks(const DeviceSet& ds) {
  const index_t n = 9, batch = 7;
  std::vector<Mat> mats, spds;
  std::vector<double> av, sv, bv;
  for (index_t k = 0; k < batch; ++k) {
    mats.push_back(well_conditioned(n));
    spds.push_back(spd(n));
    av.insert(av.end(), mats.back().v.begin(), mats.back().v.end());
    sv.insert(sv.end(), spds.back().v.begin(), spds.back().v.end());
  }
  bv = random_values<double>(static_cast<std::size_t>(n * 2 * batch));
  auto stack = [&](const std::vector<double>& v, Shape<3> s) {
    std::vector<T> t(v.begin(), v.end());
    return from_host(t, {s[0], s[1], s[2]}, shard(2, ds));
  };
  auto A = stack(av, {n, n, batch});
  auto S = stack(sv, {n, n, batch});
  std::vector<T> bt(bv.begin(), bv.end());
  auto B = from_host(bt, {n, 2, batch}, shard(2, ds));
  auto b1 = from_host(std::vector<T>(bt.begin(), bt.begin() + n * batch), {n, batch}, shard(1, ds));
  auto X = solve(A, B);
  auto x1 = solve(A, b1);
  auto Ai = inv(A);
  auto L = cholesky(S);
  auto [Q, R] = qr(A);
  auto [U, Sv, Vt] = svd(A);
  auto [w, V] = eigh(S);
  auto [LU, piv] = lu(A);
  const auto dets = to_host(det(A));
  const auto sld = slogdet(A);
  const auto signs = to_host(sld.sign), logs = to_host(sld.logabsdet), logdets = to_host(logdet(S));
  CHECK(sld.sign.layout().shard_dim == 0);
  REQUIRE(dets.size() == static_cast<std::size_t>(batch));
  CHECK(X.layout().shard_dim == 2);
  CHECK(x1.layout().shard_dim == 1);
  CHECK(w.layout().shard_dim == 1);
  for (index_t k = 0; k < batch; ++k) {
    INFO(set_name(ds) << ", matrix " << k);
    auto Ak = put_mat<T>(mats[static_cast<std::size_t>(k)], on(ds[0]));
    auto Sk = put_mat<T>(spds[static_cast<std::size_t>(k)], on(ds[0]));
    auto one = [&](const auto& stacked, const auto& alone) {
      const auto h1 = to_host(stacked);
      const auto h2 = to_host(alone);
      REQUIRE(h1.size() == h2.size());
      std::vector<double> d1(h1.begin(), h1.end()), d2(h2.begin(), h2.end());
      check_all_close(d1, d2, tol<T>(n), tol<T>(n));
    };
    one(X(_, _, k), solve(Ak, copy(B(_, _, k), on(ds[0]))));
    one(x1(_, k), solve(Ak, copy(b1(_, k), on(ds[0]))));
    one(Ai(_, _, k), inv(Ak));
    one(L(_, _, k), cholesky(Sk));
    const auto qk = qr(Ak);
    one(Q(_, _, k), qk.Q);
    one(R(_, _, k), qk.R);
    const auto fk = svd(Ak);
    one(Sv(_, k), fk.S);
    // Singular vectors are unique up to sign: compare U S Vt instead.
    const auto uk = get_mat(U(_, _, k)), vk = get_mat(Vt(_, _, k));
    CHECK(rel_diff(product(uk, diag_scale_rows(get_vec(Sv(_, k)), vk)), mats[static_cast<std::size_t>(k)]) < tol<T>(n));
    one(w(_, k), eigvalsh(Sk));
    const auto kk = static_cast<std::size_t>(k);
    CHECK(close(dets[kk], det(Ak), tol<T>(n), 0));
    CHECK(static_cast<double>(signs[kk]) == static_cast<double>(slogdet(Ak).sign));
    CHECK(close(logs[kk], slogdet(Ak).logabsdet, tol<T>(n), tol<T>(n)));
    CHECK(close(logdets[kk], logdet(Sk), tol<T>(n), tol<T>(n)));
    const auto lk = lu(Ak);
    one(LU(_, _, k), lk.LU);
    one(piv(_, k), lk.piv);
  }
}

}  // namespace

TEST_CASE("qr: Q'Q = I, A = QR, R upper triangular; tall, wide and empty") {
  for (const auto& ds : device_sets()) {
    check_qr<float>(ds);
    check_qr<double>(ds);
  }
}

TEST_CASE("svd and svdvals: A = U S Vt, orthonormal U and V, S descending") {
  for (const auto& ds : device_sets()) {
    check_svd<float>(ds);
    check_svd<double>(ds);
  }
}

TEST_CASE("eigh and eigvalsh: A = V diag(w) V', w ascending, V orthogonal") {
  for (const auto& ds : device_sets()) {
    check_eigh<float>(ds);
    check_eigh<double>(ds);
  }
}

TEST_CASE("lstsq against the normal equations; pinv's Penrose conditions; the rank of a deficient matrix") {
  for (const auto& ds : device_sets()) {
    check_lstsq_pinv<float>(ds);
    check_lstsq_pinv<double>(ds);
  }
}

TEST_CASE("stacks of matrices sharded along the last dim: each device solves its own (det too), equal to one by one") {
  for (const auto& ds : device_sets()) {
    check_stacks<float>(ds);
    check_stacks<double>(ds);
  }
}

TEST_CASE("a stack with one singular matrix: linalg_error names the matrix and the pivot, the stack is intact") {
  for (const auto& ds : device_sets()) {
    INFO(set_name(ds));
    const index_t n = 4, batch = 5;
    std::vector<double> v;
    for (index_t k = 0; k < batch; ++k) {
      Mat a = well_conditioned(n);
      if (k == 3)  // column 2 zero: elimination never changes it, so pivot 2 is exactly zero
        for (index_t i = 0; i < n; ++i) a(i, 2) = 0.0;
      v.insert(v.end(), a.v.begin(), a.v.end());
    }
    auto A = from_host(v, {n, n, batch}, shard(2, ds));
    auto B = from_host(random_values<double>(static_cast<std::size_t>(n * batch)), {n, batch}, shard(1, ds));
    const auto before = to_host(A);
    bool thrown = false;
    try {
      (void)solve(A, B);
    } catch (const linalg_error& e) {
      thrown = true;
      const std::string what = e.what();
      INFO(what);
      CHECK(e.batch == 3);
      CHECK(what.find("matrix 3 of the stack") != std::string::npos);
      CHECK(e.index == 2);
      CHECK(what.find("pivot 2") != std::string::npos);
    }
    CHECK(thrown);
    CHECK(to_host(A) == before);
  }
}
