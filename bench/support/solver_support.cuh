// SPDX-License-Identifier: Apache-2.0
// The plain cuSOLVER baseline of bench/solver: cusolverDnSgetrf + cusolverDnSgetrs on raw device
// pointers, queued on Tessera's stream of the device (so the runner's CUDA events time them like
// Tessera's own work), through a handle and workspace of the benchmark's own. Include only from
// nvcc-compiled programs.
#pragma once
#if !defined(__CUDACC__)
#error "bench/support/solver_support.cuh needs nvcc; guard its #include with #if defined(__CUDACC__)"
#endif
#include <bench/support/cuda_support.cuh>

#include <cusolverDn.h>

#include <cstdint>
#include <string>

namespace tessera::bench::cuda {

class plain_cusolver {
 public:
  // Sized for an n x n getrf with `nrhs` right-hand sides: the factors, pivots, info and workspace
  // are allocated once here, outside the timing.
  plain_cusolver(Device d, int n, int nrhs) : d_(d), n_(n), nrhs_(nrhs) {
    detail::rt::set_device(d.id());
    status(cusolverDnCreate(&h_), "cusolverDnCreate");
    status(cusolverDnSetStream(h_, stream_of(d)), "cusolverDnSetStream");
    check(cudaMalloc(&lu_, sizeof(float) * std::size_t(n) * std::size_t(n)), "cudaMalloc", d);
    check(cudaMalloc(&x_, sizeof(float) * std::size_t(n) * std::size_t(nrhs)), "cudaMalloc", d);
    check(cudaMalloc(&piv_, sizeof(int) * std::size_t(n)), "cudaMalloc", d);
    check(cudaMalloc(&info_, sizeof(int)), "cudaMalloc", d);
    status(cusolverDnSgetrf_bufferSize(h_, n, n, lu_, n, &lwork_), "cusolverDnSgetrf_bufferSize");
    check(cudaMalloc(&work_, sizeof(float) * std::size_t(lwork_ > 0 ? lwork_ : 1)), "cudaMalloc", d);
  }
  ~plain_cusolver() {
    for (void* p : {static_cast<void*>(lu_), static_cast<void*>(x_), static_cast<void*>(piv_),
                    static_cast<void*>(info_), static_cast<void*>(work_)})
      if (p) (void)cudaFree(p);
    if (h_) (void)cusolverDnDestroy(h_);
  }
  plain_cusolver(const plain_cusolver&) = delete;
  plain_cusolver& operator=(const plain_cusolver&) = delete;

  // X = A \ B as an application writes it when A and B must stay: copy both, getrf, getrs.
  void solve(const float* a, const float* b) {
    detail::rt::set_device(d_.id());
    const cudaStream_t s = stream_of(d_);
    check(cudaMemcpyAsync(lu_, a, sizeof(float) * std::size_t(n_) * std::size_t(n_), cudaMemcpyDeviceToDevice, s),
          "cudaMemcpyAsync", d_);
    check(cudaMemcpyAsync(x_, b, sizeof(float) * std::size_t(n_) * std::size_t(nrhs_), cudaMemcpyDeviceToDevice, s),
          "cudaMemcpyAsync", d_);
    status(cusolverDnSgetrf(h_, n_, n_, lu_, n_, work_, piv_, info_), "cusolverDnSgetrf");
    status(cusolverDnSgetrs(h_, CUBLAS_OP_N, n_, nrhs_, lu_, n_, piv_, x_, n_, info_), "cusolverDnSgetrs");
  }
  const float* x() const { return x_; }

 private:
  void status(cusolverStatus_t s, const char* call) {
    if (s != CUSOLVER_STATUS_SUCCESS)
      throw backend_error(std::string("bench: ") + call + " failed on " + d_.name() + ": status " + std::to_string(int(s)));
  }
  Device d_;
  int n_, nrhs_;
  cusolverDnHandle_t h_ = nullptr;
  float *lu_ = nullptr, *x_ = nullptr, *work_ = nullptr;
  int *piv_ = nullptr, *info_ = nullptr;
  int lwork_ = 0;
};

}  // namespace tessera::bench::cuda
