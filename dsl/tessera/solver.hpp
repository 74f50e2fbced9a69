// SPDX-License-Identifier: Apache-2.0
// Tessera: dense solvers and factorizations (NumPy's numpy.linalg and Julia's LinearAlgebra
// names): solve, inv, det, logdet, slogdet, cholesky, lu, qr, svd, svdvals, eigh, eigvalsh,
// lstsq, pinv, on float or double matrices. Each device runs the LAPACK routine on the matrices
// it holds (cuSOLVER on GPUs, LAPACKE on host devices, backend/solver), as one SolverTask per
// part through execute(). A matrix is solved where it lives: on one device, or on every device
// of a replicated one (each computes the same result, which is replicated); an m x n x batch
// array sharded along its last dim has each device factor its own matrices. A matrix split along
// rows or columns is first gathered on its first device (docs/semantics.md, "Dense solvers").
// The factorizations overwrite their input, so they work on a copy: the caller's arrays are
// never written, also when a linalg_error is thrown.
#pragma once
#include <tessera/array.hpp>
#include <tessera/assign.hpp>
#include <tessera/copy.hpp>
#include <tessera/linalg.hpp>
#include <tessera/reshape.hpp>
#include <tessera/transfer.hpp>

#include <backend/solver/solver.hpp>

#include <cmath>
#include <cstdint>
#include <limits>
#include <memory>
#include <string>
#include <type_traits>
#include <vector>

namespace tessera {

/// The results of the factorizations (aggregates: `auto [Q, R] = qr(A);`). For an m x n x batch
/// array every member carries the batch as its last dim.
template <class T, int N>
struct lu_result {
  Array<T, N> LU;                // L below the diagonal (unit diagonal implied), U on and above
  Array<std::int32_t, N - 1> piv;  // 0-based: row i was interchanged with row piv[i] (SciPy lu_factor)
};
template <class T, int N>
struct qr_result {
  Array<T, N> Q;  // m x k, orthonormal columns (k = min(m, n))
  Array<T, N> R;  // k x n, upper triangular
};
template <class T, int N>
struct svd_result {
  Array<T, N> U;       // m x k
  Array<T, N - 1> S;   // k singular values, descending
  Array<T, N> Vt;      // k x n
};
template <class T, int N>
struct eigh_result {
  Array<T, N - 1> w;  // n eigenvalues, ascending
  Array<T, N> V;      // n x n, column j the eigenvector of w[j]
};
template <class T>
struct slogdet_result {
  T sign;       // 1, -1, or 0 for a singular matrix
  T logabsdet;  // log |det A| (-inf for a singular matrix)
};
template <class T, int NB>
struct lstsq_result {
  Array<T, NB> x;  // the minimum-norm least-squares solution
  index_t rank;    // singular values above rcond * the largest
  Array<T, 1> s;   // A's singular values, descending
};

namespace detail {

template <class X>
concept solver_array = blas_array<X> && (std::remove_cvref_t<X>::rank == 2 || std::remove_cvref_t<X>::rank == 3);
template <class X>
concept matrix_array = blas_array<X> && std::remove_cvref_t<X>::rank == 2;

template <class T>
constexpr solver::dtype solver_type() {
  return std::is_same_v<T, float> ? solver::dtype::f32 : solver::dtype::f64;
}

namespace fn {
// Keeps the lower (or upper) triangle of each rows x cols matrix of a column-major stack.
template <class T>
struct keep_triangle {
  index_t rows, cols;
  bool lower;
  TS_HD T operator()(T v, index_t i) const {
    const index_t r = i % rows, c = (i / rows) % cols;
    return (lower ? r >= c : r <= c) ? v : T(0);
  }
};
// The n x n identity, once per matrix of a stack.
template <class T>
struct eye_of {
  index_t n;
  TS_HD T operator()(index_t i) const { return i % n == (i / n) % n ? T(1) : T(0); }
};
// LAPACK's 1-based pivots to 0-based ones.
struct pivot_from_lapack {
  TS_HD std::int32_t operator()(std::int32_t p) const { return p - 1; }
};
// 1 / s above the cut-off, 0 below (the pseudo-inverse of a diagonal).
template <class T>
struct reciprocal_above {
  T tol;
  TS_HD T operator()(T s) const { return s > tol ? T(1) / s : T(0); }
};
}  // namespace fn

template <int N>
Shape<N> matrix_shape(index_t rows, index_t cols, index_t batch) {
  if constexpr (N == 2) return {rows, cols};
  else return {rows, cols, batch};
}
template <int N>
Shape<N - 1> vector_shape(index_t rows, index_t batch) {
  if constexpr (N == 2) return {rows};
  else return {rows, batch};
}
template <class T, int N>
index_t batch_of(const Layout<T, N>& l) {
  return N == 3 ? l.shape[N - 1] : 1;
}

template <class T, int N>
std::string matrix_name(const char* name, const Layout<T, N>& l) {
  return std::string(name) + " " + shape_string<N>(l.shape) + (N == 3 ? " (a stack of matrices)" : "");
}

template <class T, int N>
void require_square(const char* what, const Layout<T, N>& l) {
  if (l.shape[0] != l.shape[1]) {
    throw dimension_mismatch("tessera::dimension_mismatch: " + std::string(what) + " with " + matrix_name("A", l) +
                             ": A must be square (n x n), found " + std::to_string(l.shape[0]) + " rows and " +
                             std::to_string(l.shape[1]) + " columns");
  }
}

// `src` when each of its parts holds whole matrices (on one device, replicated, or a stack split
// along its last dim); a 2-d matrix split along rows or columns is gathered on its first device
// (the solvers that cusolverMg offers have taken a column split over GPUs before this point); a
// stack split along a matrix dim is refused.
template <class T, int N>
std::shared_ptr<const Layout<T, N>> whole_matrices(const std::shared_ptr<const Layout<T, N>>& src, const char* what) {
  const Layout<T, N>& l = *src;
  if (l.replicated || l.parts.size() <= 1 || l.shard_dim < 0 || l.shard_dim == 2) return src;
  if constexpr (N == 3) {
    throw placement_mismatch("tessera::placement_mismatch: " + std::string(what) + " with " + matrix_name("A", l) +
                             ", " + describe_placement(l) + ": each matrix of a stack must be whole on one device. "
                             "Fix: shard the stack along its last dim (shard(2)), replicate it, or place it on one "
                             "device");
  } else {
    return tessera::copy(View<T, N>(src), on(l.parts[0].device)).layout_ptr();
  }
}

// Every matrix of `l` transposed, into contiguous storage with the same devices.
template <class T, int N>
std::shared_ptr<const Layout<T, N>> transposed_copy(const Layout<T, N>& l) {
  std::array<int, N> perm{};
  for (int k = 0; k < N; ++k) perm[k] = k;
  perm[0] = 1, perm[1] = 0;
  return clone_layout<T, N>(*permuted<T, N>(l, perm));
}

// The copy a factorization overwrites: contiguous, with the geometry of whole_matrices(src), of
// A or (`transposed`) of every matrix's transpose.
template <class T, int N>
std::shared_ptr<const Layout<T, N>> working_copy(const std::shared_ptr<const Layout<T, N>>& src, const char* what,
                                                 bool transposed = false) {
  auto whole = whole_matrices<T, N>(src, what);
  if (transposed) return transposed_copy<T, N>(*whole);
  return whole == src ? clone_layout<T, N>(*src) : whole;
}

// A result of shape `shape` (its last dim the batch when N == 3) with the devices and batch
// blocks of the working copy `w`: part s of the result lies beside part s of `w`.
template <class U, int M, class T, int N>
std::shared_ptr<const Layout<U, M>> allocate_beside(const Layout<T, N>& w, const Shape<M>& shape) {
  Geometry<M> g{shape, -1, w.replicated, {}};
  if (N == 3 && w.shard_dim == 2) g.shard_dim = M - 1;
  for (const auto& p : w.parts) {
    typename Geometry<M>::Box b{p.device, {}, shape};
    if constexpr (N == 3) b.origin[M - 1] = p.origin[2], b.extent[M - 1] = p.extent[2];
    g.boxes.push_back(b);
  }
  return std::make_shared<const Layout<U, M>>(allocate_layout<U, M>(g, w.mem));
}

// One SolverTask per non-empty part of `w` (m x n matrices, `w`'s own), completed by
// `per_part(job, s)` (the other buffers of part s), run through execute(). Returns LAPACK's info
// of every matrix of the stack (one for a matrix), read once the devices have finished: positive
// values describe the matrix (a zero pivot, a minor that is not positive definite), negative ones
// a rejected argument, which is a bug and throws backend_error here.
template <class T, int N, class F>
std::vector<std::int32_t> run_solver(const Layout<T, N>& w, solver::kind kind, index_t m, index_t n, F&& per_part) {
  const index_t batch = batch_of(w);
  // Two slots per matrix (the factorization's, then getrs's), beside each part, zero where no task runs.
  auto info = allocate_beside<std::int32_t, N - 1>(w, vector_shape<N>(2, batch));
  assign_node(*info, Scalar<std::int32_t>{0}, par);
  std::vector<Job<SolverTask>> jobs;
  for (std::size_t s = 0; s < w.parts.size(); ++s) {
    const auto& p = w.parts[s];
    if (volume<N>(p.extent) == 0 || m == 0 || n == 0) continue;
    const index_t count = N == 3 ? p.extent[2] : 1;
    Job<SolverTask> j{.task = {}, .device = p.device, .shard = static_cast<int>(s), .n = m * n * count};
    SolverTask& t = j.task;
    t.kind = kind;
    t.type = solver_type<T>();
    t.m = m, t.n = n, t.k = 0, t.batch = count;
    t.a = p.ptr, t.lda = w.shape[0] > 1 ? w.shape[0] : 1, t.stride_a = w.shape[0] * w.shape[1];
    t.b = t.u = t.vt = nullptr;
    t.ldb = t.ldu = t.ldvt = 1;
    t.stride_b = t.stride_u = t.stride_vt = t.stride_piv = 0;
    t.ipiv = nullptr;
    t.vectors = false;
    t.info = info->parts[s].ptr, t.stride_info = 2;
    j.uses.add(p.buf.get());
    j.uses.add(info->parts[s].buf.get());
    per_part(j, s);
    jobs.push_back(std::move(j));
  }
  execute(jobs);
  if (jobs.empty()) return std::vector<std::int32_t>(static_cast<std::size_t>(batch), 0);
  const auto all = to_host(Array<std::int32_t, N - 1>(info));
  std::vector<std::int32_t> out(static_cast<std::size_t>(batch));
  for (std::size_t b = 0; b < out.size(); ++b) {
    for (int slot = 0; slot < 2; ++slot) {
      const std::int32_t v = all[2 * b + static_cast<std::size_t>(slot)];
      if (v < 0) {
        throw backend_error("tessera: the dense solver's " + std::string(slot == 0 ? "factorization" : "getrs") +
                            " rejected its argument " + std::to_string(-v) + " (info " + std::to_string(v) +
                            ") for matrix " + std::to_string(b) + " of shape " + std::to_string(m) + " x " +
                            std::to_string(n));
      }
    }
    out[b] = all[2 * b];
  }
  return out;
}

// The first matrix with a positive info: its index in the stack and the info, or {-1, 0}.
inline std::pair<std::int64_t, int> first_failure(const std::vector<std::int32_t>& info) {
  for (std::size_t b = 0; b < info.size(); ++b)
    if (info[b] > 0) return {static_cast<std::int64_t>(b), info[b]};
  return {-1, 0};
}

template <class T, int N>
std::string which_matrix(std::int64_t batch_index) {
  return N == 3 ? " (matrix " + std::to_string(batch_index) + " of the stack)" : std::string();
}

template <class T, int N>
void throw_if_singular(const char* what, const Layout<T, N>& a, const std::vector<std::int32_t>& info) {
  const auto [b, code] = first_failure(info);
  if (b < 0) return;
  throw linalg_error("tessera::linalg_error: " + std::string(what) + " with " + matrix_name("A", a) + ": A" +
                         which_matrix<T, N>(b) + " is singular: U(" + std::to_string(code - 1) + ", " +
                         std::to_string(code - 1) + ") of its LU factorization is exactly zero (pivot " +
                         std::to_string(code - 1) + ", 0-based); nothing was written",
                     code - 1, b);
}

template <class T, int N>
void throw_if_unconverged(const char* what, const Layout<T, N>& a, const std::vector<std::int32_t>& info) {
  const auto [b, code] = first_failure(info);
  if (b < 0) return;
  throw linalg_error("tessera::linalg_error: " + std::string(what) + " with " + matrix_name("A", a) + ": the " +
                         "iteration did not converge for A" + which_matrix<T, N>(b) + " (LAPACK info " +
                         std::to_string(code) + ")",
                     -1, b);
}

}  // namespace detail
}  // namespace tessera

#include <tessera/solver_ops.hpp>
