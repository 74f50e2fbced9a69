// SPDX-License-Identifier: Apache-2.0
// Tessera: the task of one shard of a sparse operation, planned by sparse.hpp and run through
// execute() like every operation. Its executors loop on host devices and call cuSPARSE's generic
// API (and a few small kernels of backend/cuda/sparse.cu) on GPUs; both are compiled once into
// tessera_runtime (backend/sparse/sparse.cpp), so any translation unit may queue one.
// The shard's arrays are described in backend/sparse/csr.hpp (host_shard): a local block in CSR
// with local column numbers and a remote block of compressed rows whose columns are positions in
// the shard's ghost list. Dense operands are column-major with a leading dimension.
#pragma once
#include <cstdint>

namespace tessera::detail {
namespace sparse {

enum class dtype { f32, f64 };
enum class op {
  product,   // y = A_local * x  (k right-hand sides; rows x k, overwritten)
  remote,    // y += A_remote * g, g the ghost rows of x (or x itself read at the ghost columns)
  pack,      // y[i + j * ldy] = x[idx[i] + j * ldx] for i < count (the gather plan's send side)
  to_dense,  // y (rows x n, zero-filled first) gets every entry at (row, global column)
  diag,      // y[i] = A(row0 + i, row0 + i) for i < count
};

}  // namespace sparse

struct SparseTask {
  static constexpr bool in_library = true;  // both executors are in tessera_runtime (execute.hpp)
  static constexpr bool capturable = true;  // pure device work (capture.hpp)
  sparse::op op;
  sparse::dtype type;
  std::int64_t rows = 0, cols = 0;  // the shard's row block and column block
  std::int64_t row0 = 0, col0 = 0;  // their first global row and column
  std::int64_t nnz_local = 0;
  const std::int32_t* rowptr = nullptr;  // local block: rows + 1 offsets
  const std::int32_t* col = nullptr;     // local columns, then (from nnz_local on) ghost positions
  const void* val = nullptr;             // values, local block then remote block
  std::int64_t rem_rows = 0;             // rows with remote entries
  const std::int32_t* rem_row = nullptr;
  const std::int32_t* rem_ptr = nullptr;  // rem_rows + 1 offsets into the remote block
  const std::int64_t* ghost = nullptr;    // the ghost list's global columns
  std::int64_t k = 1;                     // right-hand sides (columns of x and y)
  const void* x = nullptr;                // product: x's local block; remote: the ghost rows, or null
  std::int64_t ldx = 0;
  const void* x_full = nullptr;           // remote with every row of x on the device: read at ghost[]
  std::int64_t ld_full = 0;
  const std::int32_t* idx = nullptr;      // pack: local rows of x to send
  std::int64_t count = 0;                 // pack: rows sent; diag: diagonal entries of the shard
  void* y = nullptr;
  std::int64_t ldy = 0;
};

}  // namespace tessera::detail
