// SPDX-License-Identifier: Apache-2.0
// Tessera: the task of one device's dense factorization, planned per part by the solvers
// (solver.hpp) and run through execute() like every operation. A part holds `batch` column-major
// matrices one after another (one matrix, or a shard of an m x n x batch array); the executor
// runs the LAPACK routine on each. Its executors call cuSOLVER on GPUs and LAPACKE on host
// devices; both are compiled once into tessera_runtime (backend/solver/solver.cpp), so any
// translation unit may queue one.
#pragma once
#include <cstdint>

namespace tessera::detail {
namespace solver {

enum class dtype { f32, f64 };

// The LAPACK routine a task runs on every matrix of its part.
enum class kind {
  gesv,   // getrf then getrs: a (n x n) is factored, b (n x nrhs) overwritten with the solution
  getrf,  // a (m x n) factored in place, pivots in ipiv (1-based, LAPACK's)
  potrf,  // a (n x n): its lower triangle becomes L (the strict upper triangle is left as it was)
  geqrf,  // a (m x n) becomes R and the Householder vectors, b the k = min(m, n) scalars tau
  orgqr,  // a (m x n, the output of geqrf) becomes Q's first n columns, from k reflectors and tau in b
  gesvd,  // a (m x n, m >= n, destroyed): singular values in b; with `vectors`, U (m x n) and Vt (n x n)
  syevd,  // a (n x n, lower triangle read): eigenvalues ascending in b; with `vectors`, a becomes V
};

}  // namespace solver

struct SolverTask {
  static constexpr bool in_library = true;  // both executors are in tessera_runtime (execute.hpp)
  solver::kind kind;
  solver::dtype type;
  std::int64_t m, n;  // each matrix `a` is m x n
  std::int64_t k;     // gesv: right-hand sides (columns of b); orgqr: reflectors
  std::int64_t batch;  // matrices in this part, `stride_*` elements apart
  void* a;
  std::int64_t lda, stride_a;
  void* b;  // gesv: the right-hand sides; geqrf, orgqr: tau; gesvd, syevd: the values
  std::int64_t ldb, stride_b;
  void* u;  // gesvd: U, m x n
  std::int64_t ldu, stride_u;
  void* vt;  // gesvd: Vt, n x n
  std::int64_t ldvt, stride_vt;
  std::int32_t* ipiv;  // gesv, getrf: min(m, n) pivots per matrix
  std::int64_t stride_piv;
  bool vectors;  // gesvd: U and Vt too; syevd: V too
  // LAPACK's info of matrix i at info[i * stride_info] (gesv: getrs's at the next entry), in the
  // device's memory: written in stream order, read by the planner once the device has finished,
  // so that the executor never waits and the GPUs of a stack work at once.
  std::int32_t* info;
  std::int64_t stride_info;
};

}  // namespace tessera::detail

namespace tessera::detail {

// The most GPUs one multi-GPU solve spans (the task is a kernel-free aggregate of fixed size).
inline constexpr int max_mg_devices = 16;

// What a multi-GPU task runs (cusolverMg; cholesky: Tessera's own, backend/solver/split_cholesky.cpp).
enum class mg_kind { solve, cholesky, eigh };

// One solve A X = B, one Cholesky factorization or one symmetric eigensolve, with A's columns
// spread over several GPUs of this process: A is n x n in 1-D block-cyclic columns of `tile`
// (column block b on devices[b % count], as its local block b / count), X (B on entry) n x nrhs on devices[0]. One
// job on devices[0] runs it; the library works on every device itself and returns when done.
struct MgSolveTask {
  static constexpr bool in_library = true;
  mg_kind kind;  // solve: getrf + getrs; cholesky: potrf (lower) in place; eigh: syevd (lower)
  bool vectors;  // eigh: V in place of the tiles too
  solver::dtype type;
  std::int64_t n, nrhs, tile;
  int count;
  int devices[max_mg_devices];            // Tessera device ids
  void* a[max_mg_devices];                // each device's tiles, one after another, leading dimension n
  std::int32_t* ipiv[max_mg_devices];     // each device's pivots, one per local column
  void* x;                                // leading dimension n
  void* w;                                // eigh: host memory, the n eigenvalues ascending
  int* info;                              // host memory: getrf's info, set when the task returns
};

}  // namespace tessera::detail
