// SPDX-License-Identifier: Apache-2.0
// Sparse matrices (tessera/sparse.hpp): sparse(I, J, V, m, n) and sparse(host_csr) against a dense
// reference built by plain loops (duplicates summed), to_host_csr, to_dense, diag, nnz, values,
// sums and elementwise maps; matmul(S, x) and matmul(S, X) with x sharded like S's columns,
// replicated, on one device, a strided view and sharded otherwise, and through transpose(S);
// the Laplacian builders; named errors that leave everything intact. Sizes 0, 1, odd, powers of
// two +-1 and large, on 1, 2, 3 and 8 host devices and on one and every GPU.
#include "test_support.hpp"

#include <tessera/sparse.hpp>

#include <map>
#include <string>
#include <vector>

using namespace tessera_test;

namespace {

struct Triplets {
  index_t m, n;
  std::vector<std::int64_t> I, J;
  std::vector<double> V;
};

// About `per_row` entries per row at random columns, plus duplicates of some of them.
Triplets random_triplets(index_t m, index_t n, int per_row) {
  Triplets t{m, n, {}, {}, {}};
  if (m == 0 || n == 0) return t;
  std::uniform_int_distribution<index_t> col(0, n - 1);
  const auto vals = random_values<double>(static_cast<std::size_t>(m * per_row + m), -2, 2);
  std::size_t v = 0;
  for (index_t i = 0; i < m; ++i) {
    for (int k = 0; k < per_row; ++k) t.I.push_back(i), t.J.push_back(col(rng())), t.V.push_back(vals[v++]);
    if (i % 3 == 0) {  // a duplicate of this row's first entry, summed
      t.I.push_back(i), t.J.push_back(t.J[t.J.size() - per_row]), t.V.push_back(vals[v++]);
    }
  }
  return t;
}

// Column-major dense reference and the canonical CSR, by loops.
std::vector<double> dense_of(const Triplets& t) {
  std::vector<double> d(static_cast<std::size_t>(t.m * t.n), 0.0);
  for (std::size_t k = 0; k < t.I.size(); ++k) d[static_cast<std::size_t>(t.I[k] + t.J[k] * t.m)] += t.V[k];
  return d;
}
std::map<std::pair<index_t, index_t>, double> entries_of(const Triplets& t) {
  std::map<std::pair<index_t, index_t>, double> e;
  for (std::size_t k = 0; k < t.I.size(); ++k) e[{t.I[k], t.J[k]}] += t.V[k];
  return e;
}
std::vector<double> dense_product(const std::vector<double>& a, index_t m, index_t n, const std::vector<double>& x,
                                  index_t k) {
  std::vector<double> y(static_cast<std::size_t>(m * k), 0.0);
  for (index_t j = 0; j < k; ++j)
    for (index_t c = 0; c < n; ++c)
      for (index_t i = 0; i < m; ++i) y[i + j * m] += a[i + c * m] * x[c + j * n];
  return y;
}

template <class T>
std::vector<T> as(const std::vector<double>& v) {
  return std::vector<T>(v.begin(), v.end());
}
template <class T>
std::vector<double> wide(const std::vector<T>& v) {
  return std::vector<double>(v.begin(), v.end());
}

template <class T>
double tol() {
  return std::is_same_v<T, float> ? 2e-5 : 1e-12;
}

std::vector<std::pair<std::string, Placement>> matrix_placements(const DeviceSet& ds) {
  return {{"shard(0)", shard(0, ds)}, {"replicate", replicate(ds)}, {"on(first)", on(ds[0])}};
}

const std::vector<std::pair<index_t, index_t>> shapes = {{0, 0}, {1, 1}, {0, 5}, {7, 5}, {5, 7}, {31, 33}, {64, 64},
                                                         {257, 255}, {1000, 1000}};

template <class T>
void check_structure(const DeviceSet& ds) {
  for (auto [m, n] : shapes) {
    const Triplets t = random_triplets(m, n, 3);
    const auto want = dense_of(t);
    const auto ent = entries_of(t);
    for (const auto& [pname, pl] : matrix_placements(ds)) {
      INFO(set_name(ds) << ", " << pname << ", " << m << " x " << n);
      const SparseMatrix<T> S = sparse<T>(t.I, t.J, as<T>(t.V), m, n, pl);
      CHECK(S.rows() == m);
      CHECK(S.cols() == n);
      CHECK(nnz(S) == static_cast<index_t>(ent.size()));
      CHECK(contains(S.placement_string(), pname == "replicate" ? "replicated" : pname == "on(first)" ? "on " : "sharded by rows"));
      check_all_close(wide(to_host(to_dense(S))), want, tol<T>(), tol<T>());
      // The host CSR: rows in order, columns ascending, duplicates summed.
      const host_csr<T> h = to_host_csr(S);
      REQUIRE(h.indptr.size() == static_cast<std::size_t>(m + 1));
      std::size_t k = 0;
      for (const auto& [ij, v] : ent) {
        REQUIRE(k < h.indices.size());
        CHECK(h.indices[k] == ij.second);
        CHECK(h.indptr[ij.first] <= static_cast<std::int64_t>(k));
        CHECK(h.indptr[ij.first + 1] > static_cast<std::int64_t>(k));
        CHECK(close(h.data[k], v, tol<T>(), tol<T>()));
        ++k;
      }
      // diag, sums, maps on the values.
      std::vector<double> d(static_cast<std::size_t>(std::min(m, n)));
      for (index_t i = 0; i < std::min(m, n); ++i) d[i] = want[i + i * m];
      check_all_close(wide(to_host(diag(S))), d, tol<T>(), tol<T>());
      double total = 0;
      for (double v : want) total += v;
      CHECK(close(sum(S), total, 1e-4, 1e-4));
      std::vector<double> rows(static_cast<std::size_t>(m), 0.0), cols(static_cast<std::size_t>(n), 0.0);
      for (index_t j = 0; j < n; ++j)
        for (index_t i = 0; i < m; ++i) rows[i] += want[i + j * m], cols[j] += want[i + j * m];
      auto rs = sum(S, dims(1));
      CHECK(rs.shape() == Shape<2>{m, 1});
      check_all_close(wide(to_host(rs)), rows, 1e-4, 1e-4);
      auto cs = sum(S, dims(0));
      CHECK(cs.shape() == Shape<2>{1, n});
      check_all_close(wide(to_host(cs)), cols, 1e-4, 1e-4);
      check_all_close(wide(to_host(sum(S, dims(0, 1)))), std::vector<double>{total}, 1e-4, 1e-4);
      std::vector<double> scaled(want), absd(want);
      for (auto& v : scaled) v *= -2.5;
      for (auto& v : absd) v = std::abs(v);
      check_all_close(wide(to_host(to_dense(S * -2.5))), scaled, tol<T>(), tol<T>());
      check_all_close(wide(to_host(to_dense(-2.5 * S))), scaled, tol<T>(), tol<T>());
      check_all_close(wide(to_host(to_dense(abs(S)))), absd, tol<T>(), tol<T>());
      check_all_close(wide(to_host(to_dense(-S / 0.4))), scaled, tol<T>(), tol<T>());
      // transpose: a view, its dense form and shape.
      const auto St = transpose(S);
      CHECK(St.shape() == Shape<2>{n, m});
      auto dt = to_host(to_dense(St));
      std::vector<double> wt(want.size());
      for (index_t j = 0; j < n; ++j)
        for (index_t i = 0; i < m; ++i) wt[j + i * n] = want[i + j * m];
      check_all_close(wide(dt), wt, tol<T>(), tol<T>());
      // The same matrix from its host CSR.
      check_all_close(wide(to_host(to_dense(sparse(h, pl)))), want, tol<T>(), tol<T>());
    }
  }
}

// x placements a product must accept, for S placed by `pl` over ds.
template <class T, int N>
std::vector<std::pair<std::string, Array<T, N>>> operands(const std::vector<T>& host, const Shape<N>& shape,
                                                          const DeviceSet& ds) {
  std::vector<std::pair<std::string, Array<T, N>>> out;
  out.push_back({"shard(0)", from_host(std::span<const T>(host), shape, shard(0, ds))});
  out.push_back({"default", from_host(std::span<const T>(host), shape)});
  out.push_back({"replicate", from_host(std::span<const T>(host), shape, replicate(ds))});
  out.push_back({"on(first)", from_host(std::span<const T>(host), shape, on(ds[0]))});
  out.push_back({"on(last)", from_host(std::span<const T>(host), shape, on(ds[ds.size() - 1]))});
  return out;
}

template <class T>
void check_products(const DeviceSet& ds) {
  for (auto [m, n] : shapes) {
    const Triplets t = random_triplets(m, n, 4);
    const auto a = dense_of(t);
    const auto xv = random_values<double>(static_cast<std::size_t>(n));
    const auto Xv = random_values<double>(static_cast<std::size_t>(n * 3));
    const auto yv = dense_product(a, m, n, xv, 1);
    const auto Yv = dense_product(a, m, n, Xv, 3);
    for (const auto& [pname, pl] : matrix_placements(ds)) {
      const SparseMatrix<T> S = sparse<T>(t.I, t.J, as<T>(t.V), m, n, pl);
      const double rtol = std::is_same_v<T, float> ? 1e-4 : 1e-11;
      // An x wholly off S's devices is refused (the errors test): on(last) with S on(first).
      auto refused = [&](const std::string& xname) { return pname == "on(first)" && xname == "on(last)" && ds.size() > 1; };
      for (auto& [xname, x] : operands<T, 1>(as<T>(xv), Shape<1>{n}, ds)) {
        if (refused(xname)) continue;
        INFO(set_name(ds) << ", S " << pname << ", x " << xname << ", " << m << " x " << n);
        const auto before = to_host(x);
        auto y = matmul(S, x);
        CHECK(y.shape() == Shape<1>{m});
        CHECK(y.devices() == S.devices());
        check_all_close(wide(to_host(y)), yv, rtol, rtol);
        CHECK(to_host(x) == before);
      }
      for (auto& [xname, X] : operands<T, 2>(as<T>(Xv), Shape<2>{n, 3}, ds)) {
        if (refused(xname)) continue;
        INFO(set_name(ds) << ", S " << pname << ", X " << xname << ", " << m << " x " << n << " times 3 columns");
        auto Y = matmul(S, X);
        CHECK(Y.shape() == Shape<2>{m, 3});
        check_all_close(wide(to_host(Y)), Yv, rtol, rtol);
        // One column of X as a strided view (a row of a matrix is not column-major).
        auto Xt = copy(Array<T, 2>(transpose(X)), shard(1, ds));  // on S's devices
        check_all_close(wide(to_host(matmul(S, Xt(1, _)))),
                        std::vector<double>(Yv.begin() + m, Yv.begin() + 2 * m), rtol, rtol);
      }
      // Through the transpose: S' * z, z of length m.
      const auto zv = random_values<double>(static_cast<std::size_t>(m));
      std::vector<double> at(a.size());
      for (index_t j = 0; j < n; ++j)
        for (index_t i = 0; i < m; ++i) at[j + i * n] = a[i + j * m];
      auto z = from_host(std::span<const T>(as<T>(zv)), {m}, shard(0, ds));
      check_all_close(wide(to_host(matmul(transpose(S), z))), dense_product(at, n, m, zv, 1), rtol, rtol);
    }
  }
}

}  // namespace

TEST_CASE("sparse(I, J, V, m, n): structure, to_dense, to_host_csr, diag, sums, maps, transpose") {
  for (const auto& ds : device_sets()) {
    check_structure<double>(ds);
    check_structure<float>(ds);
  }
}

TEST_CASE("matmul(S, x) and matmul(S, X) against loops, every placement of x") {
  for (const auto& ds : device_sets()) {
    check_products<double>(ds);
    check_products<float>(ds);
  }
}

TEST_CASE("laplacian and laplacian_2d: entries, and products on large grids") {
  for (const auto& ds : device_sets()) {
    for (index_t n : {0, 1, 2, 7, 33}) {
      INFO(set_name(ds) << ", laplacian(" << n << ")");
      auto d = to_host(to_dense(laplacian<double>(n, shard(0, ds))));
      for (index_t j = 0; j < n; ++j)
        for (index_t i = 0; i < n; ++i) CHECK(d[i + j * n] == (i == j ? 2.0 : (i - j == 1 || j - i == 1) ? -1.0 : 0.0));
    }
    for (auto [nx, ny] : std::vector<std::pair<index_t, index_t>>{{1, 1}, {3, 4}, {5, 1}, {8, 7}}) {
      INFO(set_name(ds) << ", laplacian_2d(" << nx << ", " << ny << ")");
      const index_t n = nx * ny;
      auto d = to_host(to_dense(laplacian_2d<double>(nx, ny, shard(0, ds))));
      for (index_t j = 0; j < n; ++j) {
        for (index_t i = 0; i < n; ++i) {
          const index_t xi = i % nx, yi = i / nx, xj = j % nx, yj = j / nx;
          const index_t dist = std::abs(xi - xj) + std::abs(yi - yj);
          CHECK(d[i + j * n] == (dist == 0 ? 4.0 : dist == 1 ? -1.0 : 0.0));
        }
      }
    }
    // Large: a 2-D grid of 2^20 - 1 unknowns (1023 x 1025) and the 1-D Laplacian of 2^20 + 1 points,
    // against the stencil applied by loops.
    const index_t nx = 1023, ny = 1025, n = nx * ny;
    const auto xv = random_values<double>(static_cast<std::size_t>(n));
    auto x = from_host(std::span<const double>(xv), {n}, shard(0, ds));
    auto y = to_host(matmul(laplacian_2d<double>(nx, ny, shard(0, ds)), x));
    double worst = 0;
    for (index_t i = 0; i < n; ++i) {
      const index_t a = i % nx, b = i / nx;
      double want = 4 * xv[i];
      if (a > 0) want -= xv[i - 1];
      if (a + 1 < nx) want -= xv[i + 1];
      if (b > 0) want -= xv[i - nx];
      if (b + 1 < ny) want -= xv[i + nx];
      worst = std::max(worst, std::abs(y[i] - want));
    }
    CHECK(worst < 1e-12);
    const index_t n1 = (index_t(1) << 20) + 1;
    auto ones1 = ones<float>({n1}, shard(0, ds));
    auto y1 = to_host(matmul(laplacian<float>(n1, shard(0, ds)), ones1));
    CHECK(y1.front() == 1.0f);
    CHECK(y1.back() == 1.0f);
    CHECK(std::count(y1.begin(), y1.end(), 0.0f) == static_cast<std::ptrdiff_t>(n1 - 2));
  }
}

TEST_CASE("sparse errors are named and change nothing") {
  for (const auto& ds : device_sets()) {
    INFO(set_name(ds));
    using V = std::vector<std::int64_t>;
    check_mentions(expect_error<invalid_argument>([&] { sparse<double>(V{0, 3}, V{0, 1}, {1.0, 2.0}, 3, 3); }),
                   {"entry 1", "row 3", "[0, 3)"});
    check_mentions(expect_error<invalid_argument>([&] { sparse<double>(V{0, 1}, V{0, -1}, {1.0, 2.0}, 3, 3); }),
                   {"entry 1", "column -1", "negative"});
    check_mentions(expect_error<invalid_argument>([&] { sparse<double>(V{0, 1}, V{0}, {1.0, 2.0}, 3, 3); }),
                   {"same length", "2, 1 and 2"});
    check_mentions(expect_error<invalid_argument>([&] { sparse<double>(V{}, V{}, {}, -1, 3); }), {"m >= 0"});
    check_mentions(expect_error<invalid_argument>([&] { sparse<double>(V{0}, V{0}, {1.0}, 3, 3, shard(1, ds)); }),
                   {"shard(1)", "by rows"});
    host_csr<float> bad{2, 2, {0, 2, 1}, {0, 1}, {1.0f, 2.0f}};
    check_mentions(expect_error<invalid_argument>([&] { sparse(bad); }), {"indptr must not decrease"});
    bad.indptr = {0, 1};
    check_mentions(expect_error<invalid_argument>([&] { sparse(bad); }), {"m + 1 = 3"});
    bad.indptr = {0, 1, 2};
    bad.indices = {0, 2};
    check_mentions(expect_error<invalid_argument>([&] { sparse(bad); }), {"entry 1", "column 2"});
    auto S = laplacian<double>(10, shard(0, ds));
    auto x = ones<double>({9}, shard(0, ds));
    check_mentions(expect_error<dimension_mismatch>([&] { matmul(S, x); }), {"10 columns", "9 rows"});
    CHECK(to_host(x) == std::vector<double>(9, 1.0));
    check_mentions(expect_error<placement_mismatch>([&] { S.with_values(ones<double>({3})); }),
                   {"with_values", "expected an expression over values()"});
    if (ds.size() > 1) {
      // x on a device S does not use.
      auto S0 = laplacian<double>(10, on(ds[0]));
      auto x1 = ones<double>({10}, on(ds[1]));
      check_mentions(expect_error<placement_mismatch>([&] { matmul(S0, x1); }), {"no part on S's devices", "Fix"});
      CHECK(to_host(x1) == std::vector<double>(10, 1.0));
    }
    SparseMatrix<double> empty;
    check_mentions(expect_error<invalid_argument>([&] { (void)empty.nnz(); }), {"default-constructed"});
  }
}
