// SPDX-License-Identifier: Apache-2.0
// The sparse layer's executors (sparse.hpp): loops on host devices, cuSPARSE's generic API and
// backend/cuda/sparse.cu on GPUs.
#include <backend/runtime/runtime.hpp>
#include <backend/sparse/sparse.hpp>

#include <algorithm>
#include <cstring>
#include <mutex>
#include <string>
#include <vector>

#if TESSERA_HAS_CUDA
#include <cuda_runtime.h>
#include <cusparse.h>
#endif

namespace tessera::detail {
namespace {

// Entry (row, global column c) of a shard, 0 when not stored (see entry_at in sparse.cu).
template <class T>
T entry_at(const SparseTask& t, std::int64_t row, std::int64_t c) {
  const T* v = static_cast<const T*>(t.val);
  if (c >= t.col0 && c < t.col0 + t.cols) {
    const std::int32_t* b = t.col + t.rowptr[row];
    const std::int32_t* e = t.col + t.rowptr[row + 1];
    const std::int32_t* p = std::lower_bound(b, e, static_cast<std::int32_t>(c - t.col0));
    return p != e && *p == c - t.col0 ? v[p - t.col] : T(0);
  }
  const std::int32_t* r = std::lower_bound(t.rem_row, t.rem_row + t.rem_rows, static_cast<std::int32_t>(row));
  if (r == t.rem_row + t.rem_rows || *r != row) return T(0);
  const std::int64_t q = r - t.rem_row;
  for (std::int64_t p = t.nnz_local + t.rem_ptr[q]; p < t.nnz_local + t.rem_ptr[q + 1]; ++p) {
    if (t.ghost[t.col[p]] == c) return v[p];
  }
  return T(0);
}

// Rows [r0, r1) of y = A_local * x.
template <class T>
void product_rows(const SparseTask& t, std::int64_t r0, std::int64_t r1) {
  const T* v = static_cast<const T*>(t.val);
  const T* x = static_cast<const T*>(t.x);
  T* y = static_cast<T*>(t.y);
  for (std::int64_t j = 0; j < t.k; ++j) {
    for (std::int64_t i = r0; i < r1; ++i) {
      T acc = 0;
      for (std::int32_t p = t.rowptr[i]; p < t.rowptr[i + 1]; ++p) acc += v[p] * x[t.col[p] + j * t.ldx];
      y[i + j * t.ldy] = acc;
    }
  }
}

template <class T>
void host_run(const SparseTask& t) {
  const T* v = static_cast<const T*>(t.val);
  T* y = static_cast<T*>(t.y);
  switch (t.op) {
    case sparse::op::product: {
      if (t.rows == 0 || t.k == 0) return;
      if (t.nnz_local == 0) {
        for (std::int64_t j = 0; j < t.k; ++j) std::fill(y + j * t.ldy, y + j * t.ldy + t.rows, T(0));
        return;
      }
      // Large shards: row chunks on the host thread pool (each row is written by one chunk).
      const std::int64_t chunk = rt::host_chunk_elements;
      const std::int64_t chunks = (t.rows + chunk - 1) / chunk;
      if (chunks < 2) {
        product_rows<T>(t, 0, t.rows);
        return;
      }
      rt::parallel_for(
          chunks,
          [](const void* ctx, std::int64_t c) {
            const auto& task = *static_cast<const SparseTask*>(ctx);
            const std::int64_t b = c * rt::host_chunk_elements;
            product_rows<T>(task, b, std::min(task.rows, b + rt::host_chunk_elements));
          },
          &t);
      return;
    }
    case sparse::op::remote: {
      const T* g = static_cast<const T*>(t.x);
      const T* xf = static_cast<const T*>(t.x_full);
      for (std::int64_t j = 0; j < t.k; ++j) {
        for (std::int64_t r = 0; r < t.rem_rows; ++r) {
          T acc = 0;
          for (std::int64_t p = t.nnz_local + t.rem_ptr[r]; p < t.nnz_local + t.rem_ptr[r + 1]; ++p) {
            acc += v[p] * (g ? g[t.col[p] + j * t.ldx] : xf[t.ghost[t.col[p]] + j * t.ld_full]);
          }
          y[t.rem_row[r] + j * t.ldy] += acc;
        }
      }
      return;
    }
    case sparse::op::pack: {
      const T* x = static_cast<const T*>(t.x);
      for (std::int64_t j = 0; j < t.k; ++j)
        for (std::int64_t i = 0; i < t.count; ++i) y[i + j * t.ldy] = x[t.idx[i] + j * t.ldx];
      return;
    }
    case sparse::op::to_dense: {
      for (std::int64_t c = 0; c < t.count; ++c) std::fill(y + c * t.ldy, y + c * t.ldy + t.rows, T(0));
      for (std::int64_t i = 0; i < t.rows; ++i)
        for (std::int32_t p = t.rowptr[i]; p < t.rowptr[i + 1]; ++p) y[i + (t.col0 + t.col[p]) * t.ldy] = v[p];
      for (std::int64_t r = 0; r < t.rem_rows; ++r)
        for (std::int64_t p = t.nnz_local + t.rem_ptr[r]; p < t.nnz_local + t.rem_ptr[r + 1]; ++p)
          y[t.rem_row[r] + t.ghost[t.col[p]] * t.ldy] = v[p];
      return;
    }
    case sparse::op::diag:
      for (std::int64_t i = 0; i < t.count; ++i) y[i] = entry_at<T>(t, i, t.row0 + i);
      return;
  }
}

#if TESSERA_HAS_CUDA
const char* status_name(cusparseStatus_t s) {
  const char* n = cusparseGetErrorName(s);
  return n ? n : "cuSPARSE error";
}

void check(cusparseStatus_t s, const char* call, int device, int shard) {
  if (s == CUSPARSE_STATUS_SUCCESS) return;
  throw backend_error(std::string("tessera: ") + call + " failed on " + rt::info(device).name + " (shard " +
                      std::to_string(shard) + "): " + status_name(s) + " (status " + std::to_string(int(s)) + ")");
}

// One handle per GPU, created on first use with the device current and bound to its stream, so
// products are ordered with the rest of the device's work; never destroyed (static destruction
// order), like the runtime's state.
cusparseHandle_t handle(int device, int shard) {
  static std::mutex mu;
  static std::vector<cusparseHandle_t> handles;
  std::lock_guard<std::mutex> lock(mu);
  if (handles.empty()) handles.resize(static_cast<std::size_t>(rt::device_count()), nullptr);
  cusparseHandle_t& h = handles[static_cast<std::size_t>(device)];
  if (h == nullptr) {
    check(cusparseCreate(&h), "cusparseCreate", device, shard);
    check(cusparseSetStream(h, static_cast<cudaStream_t>(rt::stream(device))), "cusparseSetStream", device, shard);
  }
  return h;
}

// The product's workspace, from the device's memory cache and back to it in stream order.
struct device_block {
  device_block(int dev, std::size_t n) : device(dev), bytes(n), p(n ? rt::allocate(dev, n, memory::device) : nullptr) {}
  ~device_block() {
    if (p) rt::deallocate(device, p, bytes, memory::device);
  }
  device_block(const device_block&) = delete;
  device_block& operator=(const device_block&) = delete;
  int device;
  std::size_t bytes;
  void* p;
};

// The descriptors of one call, destroyed when it is queued (cuSPARSE copies what it needs).
struct descriptors {
  cusparseSpMatDescr_t a = nullptr;
  cusparseDnVecDescr_t xv = nullptr, yv = nullptr;
  cusparseDnMatDescr_t xm = nullptr, ym = nullptr;
  ~descriptors() {
    if (a) cusparseDestroySpMat(a);
    if (xv) cusparseDestroyDnVec(xv);
    if (yv) cusparseDestroyDnVec(yv);
    if (xm) cusparseDestroyDnMat(xm);
    if (ym) cusparseDestroyDnMat(ym);
  }
};

template <class T>
void gpu_product(const SparseTask& t, int device, int shard) {
  if (t.rows == 0 || t.k == 0) return;
  rt::device_restorer restore;
  rt::set_device(device);
  const auto st = static_cast<cudaStream_t>(rt::stream(device));
  if (t.nnz_local == 0) {
    rt::check_cuda(cudaMemset2DAsync(t.y, static_cast<std::size_t>(t.ldy) * sizeof(T), 0,
                                     static_cast<std::size_t>(t.rows) * sizeof(T), static_cast<std::size_t>(t.k), st),
                   "cudaMemset2DAsync (sparse product of an empty block)", device);
    return;
  }
  const cudaDataType dt = sizeof(T) == 4 ? CUDA_R_32F : CUDA_R_64F;
  cusparseHandle_t h = handle(device, shard);
  descriptors d;
  check(cusparseCreateCsr(&d.a, t.rows, t.cols, t.nnz_local, const_cast<std::int32_t*>(t.rowptr),
                          const_cast<std::int32_t*>(t.col), const_cast<void*>(t.val), CUSPARSE_INDEX_32I,
                          CUSPARSE_INDEX_32I, CUSPARSE_INDEX_BASE_ZERO, dt),
        "cusparseCreateCsr", device, shard);
  const T one = 1, zero = 0;
  std::size_t bytes = 0;
  if (t.k == 1) {
    check(cusparseCreateDnVec(&d.xv, t.cols, const_cast<void*>(t.x), dt), "cusparseCreateDnVec", device, shard);
    check(cusparseCreateDnVec(&d.yv, t.rows, t.y, dt), "cusparseCreateDnVec", device, shard);
    check(cusparseSpMV_bufferSize(h, CUSPARSE_OPERATION_NON_TRANSPOSE, &one, d.a, d.xv, &zero, d.yv, dt,
                                  CUSPARSE_SPMV_ALG_DEFAULT, &bytes),
          "cusparseSpMV_bufferSize", device, shard);
    device_block work(device, bytes);
    check(cusparseSpMV(h, CUSPARSE_OPERATION_NON_TRANSPOSE, &one, d.a, d.xv, &zero, d.yv, dt, CUSPARSE_SPMV_ALG_DEFAULT,
                       work.p),
          "cusparseSpMV", device, shard);
    return;
  }
  check(cusparseCreateDnMat(&d.xm, t.cols, t.k, t.ldx, const_cast<void*>(t.x), dt, CUSPARSE_ORDER_COL),
        "cusparseCreateDnMat", device, shard);
  check(cusparseCreateDnMat(&d.ym, t.rows, t.k, t.ldy, t.y, dt, CUSPARSE_ORDER_COL), "cusparseCreateDnMat", device,
        shard);
  check(cusparseSpMM_bufferSize(h, CUSPARSE_OPERATION_NON_TRANSPOSE, CUSPARSE_OPERATION_NON_TRANSPOSE, &one, d.a, d.xm,
                                &zero, d.ym, dt, CUSPARSE_SPMM_ALG_DEFAULT, &bytes),
        "cusparseSpMM_bufferSize", device, shard);
  device_block work(device, bytes);
  check(cusparseSpMM(h, CUSPARSE_OPERATION_NON_TRANSPOSE, CUSPARSE_OPERATION_NON_TRANSPOSE, &one, d.a, d.xm, &zero,
                     d.ym, dt, CUSPARSE_SPMM_ALG_DEFAULT, work.p),
        "cusparseSpMM", device, shard);
}
#endif

}  // namespace

void host::run(const SparseTask& t) {
  if (t.type == sparse::dtype::f32) host_run<float>(t);
  else host_run<double>(t);
}

void cuda::run(const SparseTask& t, int device, int shard) {
#if TESSERA_HAS_CUDA
  if (t.op == sparse::op::to_dense && t.rows > 0 && t.count > 0) {
    rt::device_restorer restore;
    rt::set_device(device);
    const std::size_t elem = t.type == sparse::dtype::f32 ? 4 : 8;
    rt::check_cuda(cudaMemset2DAsync(t.y, static_cast<std::size_t>(t.ldy) * elem, 0,
                                     static_cast<std::size_t>(t.rows) * elem, static_cast<std::size_t>(t.count),
                                     static_cast<cudaStream_t>(rt::stream(device))),
                   "cudaMemset2DAsync (to_dense)", device);
  }
  if (t.op != sparse::op::product) {
    rt::device_restorer restore;
    sparse_kernel(t, device, shard);
    return;
  }
  if (t.type == sparse::dtype::f32) gpu_product<float>(t, device, shard);
  else gpu_product<double>(t, device, shard);
#else
  (void)t, (void)device, (void)shard;
  throw error("tessera: a sparse operation was queued on a GPU in a build without CUDA");
#endif
}

}  // namespace tessera::detail
