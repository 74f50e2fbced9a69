// SPDX-License-Identifier: Apache-2.0
// Sparse matrices across processes (tessera/distributed.hpp): a matrix sharded by rows over
// devices() when those span MPI ranks (ctest .mpi2 and .mpi3 on host devices, .mpi2.cuda and
// .mpi4.cuda on GPUs), so that the gather plan's ghost rows travel between ranks; products, the
// transpose and to_dense against host loops that every rank computes alike from fixed seeds. In
// one process (.host, .cuda) it runs over the default devices.
#include "test_support.hpp"

#include <tessera/distributed.hpp>
#include <tessera/sparse.hpp>

#include <random>

using namespace tessera_test;

namespace {

const bool initialized = [] {
  distributed::init();
  return true;
}();

}  // namespace

TEST_CASE("sparse products, transpose and to_dense with shards on every rank") {
  if (skip_without_gpu()) return;
  REQUIRE(initialized);
  const DeviceSet D = devices();
  for (auto [m, n] : std::vector<std::pair<index_t, index_t>>{{1, 1}, {33, 33}, {257, 255}, {1000, 1000}}) {
    INFO(m << " x " << n << " over " << D.size() << " devices");
    std::mt19937_64 g(static_cast<std::uint64_t>(m * 7919 + n));
    std::uniform_int_distribution<index_t> col(0, n - 1);
    std::uniform_real_distribution<double> val(-1, 1);
    std::vector<std::int64_t> I, J;
    std::vector<double> V;
    for (index_t i = 0; i < m; ++i)
      for (int k = 0; k < 4; ++k) I.push_back(i), J.push_back(col(g)), V.push_back(val(g));
    std::vector<double> a(static_cast<std::size_t>(m * n), 0.0);
    for (std::size_t k = 0; k < I.size(); ++k) a[static_cast<std::size_t>(I[k] + J[k] * m)] += V[k];
    std::vector<double> xv(static_cast<std::size_t>(n * 2)), zv(static_cast<std::size_t>(m));
    for (auto& v : xv) v = val(g);
    for (auto& v : zv) v = val(g);
    const auto S = sparse<double>(I, J, V, m, n, shard(0, D));
    check_all_close(to_host(to_dense(S)), a, 1e-15, 1e-15);
    auto x = from_host(std::span<const double>(xv.data(), static_cast<std::size_t>(n)), {n}, shard(0, D));
    auto X = from_host(std::span<const double>(xv), {n, 2}, shard(0, D));
    std::vector<double> y(static_cast<std::size_t>(m * 2), 0.0), t(static_cast<std::size_t>(n), 0.0);
    for (index_t j = 0; j < 2; ++j)
      for (index_t c = 0; c < n; ++c)
        for (index_t i = 0; i < m; ++i) y[i + j * m] += a[i + c * m] * xv[c + j * n];
    for (index_t c = 0; c < n; ++c)
      for (index_t i = 0; i < m; ++i) t[c] += a[i + c * m] * zv[i];
    check_all_close(to_host(matmul(S, x)), std::vector<double>(y.begin(), y.begin() + m), 1e-12, 1e-12);
    check_all_close(to_host(matmul(S, X)), y, 1e-12, 1e-12);
    auto z = from_host(std::span<const double>(zv), {m}, shard(0, D));
    check_all_close(to_host(matmul(transpose(S), z)), t, 1e-12, 1e-12);
    check_all_close(to_host(matmul(S, copy(x, replicate(D)))), std::vector<double>(y.begin(), y.begin() + m), 1e-12,
                    1e-12);
  }
  // The 2-D Laplacian over the ranks: ghost grid lines between neighbouring shards.
  const index_t nx = 37, ny = 41;
  auto L = laplacian_2d<double>(nx, ny, shard(0, D));
  auto u = to_host(matmul(L, ones<double>({nx * ny}, shard(0, D))));
  for (index_t i = 0; i < nx * ny; ++i) {
    const index_t a = i % nx, b = i / nx;
    const double want = double((a == 0) + (a + 1 == nx) + (b == 0) + (b + 1 == ny));
    CHECK(u[i] == want);
  }
}
