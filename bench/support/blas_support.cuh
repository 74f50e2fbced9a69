// SPDX-License-Identifier: Apache-2.0
// The plain cuBLAS baselines of bench/linalg: cublasSgemv / cublasSgemm on raw device pointers,
// queued on Tessera's stream of the device (so the runner's CUDA events time them like Tessera's
// own work), through a handle of the benchmark's own. Include only from nvcc-compiled programs.
#pragma once
#if !defined(__CUDACC__)
#error "bench/support/blas_support.cuh needs nvcc; guard its #include with #if defined(__CUDACC__)"
#endif
#include <bench/support/cuda_support.cuh>

#include <cublas_v2.h>

#include <cstdint>
#include <string>

namespace tessera::bench::cuda {

class plain_cublas {
 public:
  explicit plain_cublas(Device d) : d_(d) {
    detail::rt::set_device(d.id());
    check_status(cublasCreate(&h_), "cublasCreate");
    check_status(cublasSetStream(h_, stream_of(d)), "cublasSetStream");
  }
  ~plain_cublas() {
    if (h_) (void)cublasDestroy(h_);
  }
  plain_cublas(const plain_cublas&) = delete;
  plain_cublas& operator=(const plain_cublas&) = delete;

  // y (m) = A (m x n, column-major, lda = m) * x (n)
  void sgemv(std::int64_t m, std::int64_t n, const float* a, const float* x, float* y) {
    const float one = 1.f, zero = 0.f;
    detail::rt::set_device(d_.id());
    check_status(cublasSgemv_64(h_, CUBLAS_OP_N, m, n, &one, a, m, x, 1, &zero, y, 1), "cublasSgemv_64");
  }
  // C (m x n) = A (m x k) * B (k x n), column-major, tight leading dimensions
  void sgemm(std::int64_t m, std::int64_t n, std::int64_t k, const float* a, const float* b, float* c) {
    const float one = 1.f, zero = 0.f;
    detail::rt::set_device(d_.id());
    check_status(cublasSgemm_64(h_, CUBLAS_OP_N, CUBLAS_OP_N, m, n, k, &one, a, m, b, k, &zero, c, m),
                 "cublasSgemm_64");
  }

 private:
  void check_status(cublasStatus_t s, const char* call) {
    if (s != CUBLAS_STATUS_SUCCESS)
      throw backend_error(std::string("bench: ") + call + " failed on " + d_.name() + ": status " + std::to_string(int(s)));
  }
  Device d_;
  cublasHandle_t h_ = nullptr;
};

}  // namespace tessera::bench::cuda
