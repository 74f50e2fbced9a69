// SPDX-License-Identifier: Apache-2.0
// Tessera FFT layer: the executors of one device's FFT pass (FftTask, dsl/tessera/fft_task.hpp).
// GPUs call cuFFT (plans cached per shape, type and device, bound to the device's stream, their
// work area taken from the runtime's allocator); host devices call FFTW3 (float and double plans,
// FFTW_ESTIMATE, cached per shape, type and direction, planned under one mutex because FFTW's
// planner is not thread-safe) or, in a build without FFTW, the library's own transforms (radix-2
// for powers of two, a direct O(n^2) DFT otherwise, both accumulating in double). This header
// includes no CUDA or FFTW header, so dsl/ may include it.
#pragma once
#include <tessera/fft_task.hpp>

namespace tessera::detail::fft {

// The library behind host devices' FFTs ("FFTW3" or "built-in (radix-2 / O(n^2) DFT)").
const char* host_fft_name();

}  // namespace tessera::detail::fft

// The executors of an FftTask: FFTW or the built-in transforms (done when it returns) and cuFFT
// (queued on the device's stream). Failures throw backend_error naming the call and the device.
namespace tessera::detail::host {
void run(const FftTask& t);
}
namespace tessera::detail::cuda {
void run(const FftTask& t, int device, int shard);
}
