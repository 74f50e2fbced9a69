// SPDX-License-Identifier: Apache-2.0
// The small kernels of the sparse layer (backend/sparse/sparse.hpp) that cuSPARSE has no call for:
// the remote block's rows, the gather plan's packing, to_dense's scatter and the diagonal. One
// grid-stride kernel each, through the one launch helper; a SparseTask's op picks it.
#include <backend/cuda/launch.cuh>
#include <backend/sparse/sparse.hpp>

#include <string>

namespace tessera::detail::cuda {
namespace {

constexpr unsigned block = 256;

template <class T>
struct Sparse {
  SparseTask t;
};

// One thread per (row with remote entries, right-hand side).
template <class T>
__global__ void __launch_bounds__(block) remote_kernel(const Sparse<T> s) {
  const SparseTask& t = s.t;
  const T* v = static_cast<const T*>(t.val) + t.nnz_local;
  const std::int32_t* c = t.col + t.nnz_local;
  const T* g = static_cast<const T*>(t.x);
  const T* xf = static_cast<const T*>(t.x_full);
  T* y = static_cast<T*>(t.y);
  const std::int64_t n = t.rem_rows * t.k;
  for (std::int64_t i = blockIdx.x * std::int64_t(block) + threadIdx.x; i < n; i += std::int64_t(gridDim.x) * block) {
    const std::int64_t r = i % t.rem_rows, j = i / t.rem_rows;
    T acc = 0;
    for (std::int32_t p = t.rem_ptr[r]; p < t.rem_ptr[r + 1]; ++p) {
      acc += v[p] * (g ? g[c[p] + j * t.ldx] : xf[t.ghost[c[p]] + j * t.ld_full]);
    }
    y[t.rem_row[r] + j * t.ldy] += acc;
  }
}

template <class T>
__global__ void __launch_bounds__(block) pack_kernel(const Sparse<T> s) {
  const SparseTask& t = s.t;
  const T* x = static_cast<const T*>(t.x);
  T* y = static_cast<T*>(t.y);
  const std::int64_t n = t.count * t.k;
  for (std::int64_t i = blockIdx.x * std::int64_t(block) + threadIdx.x; i < n; i += std::int64_t(gridDim.x) * block) {
    const std::int64_t r = i % t.count, j = i / t.count;
    y[r + j * t.ldy] = x[t.idx[r] + j * t.ldx];
  }
}

// One thread per row: its local entries; then one per row with remote entries.
template <class T>
__global__ void __launch_bounds__(block) to_dense_kernel(const Sparse<T> s) {
  const SparseTask& t = s.t;
  const T* v = static_cast<const T*>(t.val);
  T* y = static_cast<T*>(t.y);
  const std::int64_t n = t.rows + t.rem_rows;
  for (std::int64_t i = blockIdx.x * std::int64_t(block) + threadIdx.x; i < n; i += std::int64_t(gridDim.x) * block) {
    if (i < t.rows) {
      for (std::int32_t p = t.rowptr[i]; p < t.rowptr[i + 1]; ++p) y[i + (t.col0 + t.col[p]) * t.ldy] = v[p];
    } else {
      const std::int64_t r = i - t.rows, row = t.rem_row[r];
      for (std::int64_t p = t.nnz_local + t.rem_ptr[r]; p < t.nnz_local + t.rem_ptr[r + 1]; ++p) {
        y[row + t.ghost[t.col[p]] * t.ldy] = v[p];
      }
    }
  }
}

// Entry (row, global column c) of the shard, 0 when not stored: a binary search of the row's
// local columns, or of its remote entries (ghost positions ascend with their columns).
template <class T>
__device__ T entry_at(const SparseTask& t, std::int64_t row, std::int64_t c) {
  const T* v = static_cast<const T*>(t.val);
  if (c >= t.col0 && c < t.col0 + t.cols) {
    std::int32_t lo = t.rowptr[row], hi = t.rowptr[row + 1];
    const auto want = static_cast<std::int32_t>(c - t.col0);
    while (lo < hi) {
      const std::int32_t mid = lo + (hi - lo) / 2;
      if (t.col[mid] < want) lo = mid + 1;
      else hi = mid;
    }
    return lo < t.rowptr[row + 1] && t.col[lo] == want ? v[lo] : T(0);
  }
  std::int64_t lo = 0, hi = t.rem_rows;
  while (lo < hi) {
    const std::int64_t mid = lo + (hi - lo) / 2;
    if (t.rem_row[mid] < row) lo = mid + 1;
    else hi = mid;
  }
  if (lo == t.rem_rows || t.rem_row[lo] != row) return T(0);
  for (std::int64_t p = t.nnz_local + t.rem_ptr[lo]; p < t.nnz_local + t.rem_ptr[lo + 1]; ++p) {
    if (t.ghost[t.col[p]] == c) return v[p];
  }
  return T(0);
}

template <class T>
__global__ void __launch_bounds__(block) diag_kernel(const Sparse<T> s) {
  const SparseTask& t = s.t;
  T* y = static_cast<T*>(t.y);
  for (std::int64_t i = blockIdx.x * std::int64_t(block) + threadIdx.x; i < t.count; i += std::int64_t(gridDim.x) * block) {
    y[i] = entry_at<T>(t, i, t.row0 + i);
  }
}

template <class T>
void run_as(const SparseTask& t, int device, int shard) {
  const Sparse<T> s{t};
  const index_t cap = sm_count(device) * 32;
  switch (t.op) {
    case sparse::op::remote:
      if (t.rem_rows * t.k > 0)
        launch(&remote_kernel<T>, grid_blocks(t.rem_rows * t.k, block, cap), block, s, device, shard, "sparse remote_kernel");
      return;
    case sparse::op::pack:
      if (t.count * t.k > 0)
        launch(&pack_kernel<T>, grid_blocks(t.count * t.k, block, cap), block, s, device, shard, "sparse pack_kernel");
      return;
    case sparse::op::to_dense:
      if (t.rows + t.rem_rows > 0)
        launch(&to_dense_kernel<T>, grid_blocks(t.rows + t.rem_rows, block, cap), block, s, device, shard,
               "sparse to_dense_kernel");
      return;
    case sparse::op::diag:
      if (t.count > 0)
        launch(&diag_kernel<T>, grid_blocks(t.count, block, cap), block, s, device, shard, "sparse diag_kernel");
      return;
    case sparse::op::product: break;
  }
  throw invalid_argument("tessera: internal: sparse_kernel called for a product");
}

}  // namespace

void sparse_kernel(const SparseTask& t, int device, int shard) {
  if (t.type == sparse::dtype::f32) run_as<float>(t, device, shard);
  else run_as<double>(t, device, shard);
}

}  // namespace tessera::detail::cuda
