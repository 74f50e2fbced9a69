// SPDX-License-Identifier: Apache-2.0
// The plain cuFFT baseline of bench/fft: one cufftPlan1d C2C plan (cuFFT's own work area) executed
// out of place on raw device pointers, queued on Tessera's stream of the device, so the runner's
// CUDA events time it like Tessera's own work. Include only from nvcc-compiled programs.
#pragma once
#if !defined(__CUDACC__)
#error "bench/support/fft_support.cuh needs nvcc; guard its #include with #if defined(__CUDACC__)"
#endif
#include <bench/support/cuda_support.cuh>

#include <cufft.h>

#include <cstdint>
#include <string>

namespace tessera::bench::cuda {

class plain_cufft_c2c {
 public:
  plain_cufft_c2c(Device d, std::int64_t n) : d_(d) {
    detail::rt::set_device(d.id());
    check_result(cufftCreate(&plan_), "cufftCreate");
    long long len = n;
    std::size_t work = 0;
    check_result(cufftMakePlanMany64(plan_, 1, &len, nullptr, 1, len, nullptr, 1, len, CUFFT_C2C, 1, &work),
                 "cufftMakePlanMany64");
    check_result(cufftSetStream(plan_, stream_of(d)), "cufftSetStream");
  }
  ~plain_cufft_c2c() {
    if (plan_) (void)cufftDestroy(plan_);
  }
  plain_cufft_c2c(const plain_cufft_c2c&) = delete;
  plain_cufft_c2c& operator=(const plain_cufft_c2c&) = delete;

  // out = forward DFT of in (complex<float>, as cufftComplex)
  void forward(const void* in, void* out) {
    detail::rt::set_device(d_.id());
    check_result(cufftExecC2C(plan_, static_cast<cufftComplex*>(const_cast<void*>(in)), static_cast<cufftComplex*>(out),
                              CUFFT_FORWARD),
                 "cufftExecC2C");
  }

 private:
  void check_result(cufftResult r, const char* call) {
    if (r != CUFFT_SUCCESS)
      throw backend_error(std::string("bench: ") + call + " failed on " + d_.name() + ": cufftResult " +
                          std::to_string(int(r)));
  }
  Device d_;
  cufftHandle plan_ = 0;
};

}  // namespace tessera::bench::cuda
