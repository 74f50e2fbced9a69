// SPDX-License-Identifier: Apache-2.0
// The plain cuSPARSE baseline of bench/sparse: cusparseSpMV on raw device pointers of a CSR matrix
// (32-bit indices), queued on Tessera's stream of the device so that the runner's CUDA events time
// it like Tessera's own work, through a handle, descriptors and workspace of the benchmark's own,
// made once outside the timing (what an application that calls cuSPARSE itself would do). Include
// only from nvcc-compiled programs.
#pragma once
#if !defined(__CUDACC__)
#error "bench/support/sparse_support.cuh needs nvcc; guard its #include with #if defined(__CUDACC__)"
#endif
#include <bench/support/cuda_support.cuh>

#include <cusparse.h>

#include <cstdint>
#include <string>

namespace tessera::bench::cuda {

class plain_cusparse {
 public:
  // y = A x for the m x n float matrix (rowptr, col, val) on device d.
  plain_cusparse(Device d, std::int64_t m, std::int64_t n, std::int64_t nnz, const std::int32_t* rowptr,
                 const std::int32_t* col, const float* val, const float* x, float* y)
      : d_(d) {
    detail::rt::set_device(d.id());
    status(cusparseCreate(&h_), "cusparseCreate");
    status(cusparseSetStream(h_, stream_of(d)), "cusparseSetStream");
    status(cusparseCreateCsr(&a_, m, n, nnz, const_cast<std::int32_t*>(rowptr), const_cast<std::int32_t*>(col),
                             const_cast<float*>(val), CUSPARSE_INDEX_32I, CUSPARSE_INDEX_32I, CUSPARSE_INDEX_BASE_ZERO,
                             CUDA_R_32F),
           "cusparseCreateCsr");
    status(cusparseCreateDnVec(&x_, n, const_cast<float*>(x), CUDA_R_32F), "cusparseCreateDnVec");
    status(cusparseCreateDnVec(&y_, m, y, CUDA_R_32F), "cusparseCreateDnVec");
    std::size_t bytes = 0;
    status(cusparseSpMV_bufferSize(h_, CUSPARSE_OPERATION_NON_TRANSPOSE, &one_, a_, x_, &zero_, y_, CUDA_R_32F,
                                   CUSPARSE_SPMV_ALG_DEFAULT, &bytes),
           "cusparseSpMV_bufferSize");
    check(cudaMalloc(&work_, bytes > 0 ? bytes : 1), "cudaMalloc", d);
  }
  ~plain_cusparse() {
    if (work_) (void)cudaFree(work_);
    if (a_) (void)cusparseDestroySpMat(a_);
    if (x_) (void)cusparseDestroyDnVec(x_);
    if (y_) (void)cusparseDestroyDnVec(y_);
    if (h_) (void)cusparseDestroy(h_);
  }
  plain_cusparse(const plain_cusparse&) = delete;
  plain_cusparse& operator=(const plain_cusparse&) = delete;

  void spmv() {
    detail::rt::set_device(d_.id());
    status(cusparseSpMV(h_, CUSPARSE_OPERATION_NON_TRANSPOSE, &one_, a_, x_, &zero_, y_, CUDA_R_32F,
                        CUSPARSE_SPMV_ALG_DEFAULT, work_),
           "cusparseSpMV");
  }

 private:
  void status(cusparseStatus_t s, const char* call) {
    if (s != CUSPARSE_STATUS_SUCCESS)
      throw backend_error(std::string("bench: ") + call + " failed on " + d_.name() + ": status " + std::to_string(int(s)));
  }
  Device d_;
  cusparseHandle_t h_ = nullptr;
  cusparseSpMatDescr_t a_ = nullptr;
  cusparseDnVecDescr_t x_ = nullptr, y_ = nullptr;
  void* work_ = nullptr;
  const float one_ = 1, zero_ = 0;
};

}  // namespace tessera::bench::cuda
