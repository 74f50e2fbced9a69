// SPDX-License-Identifier: Apache-2.0
// Private to backend/comm's exchanges across GPUs (nccl_exchange.cpp, ipc_exchange.cpp): a device's
// streams, and rows copied within one GPU. Includes the CUDA runtime: GPU builds only.
#pragma once
#include <backend/cuda/strided_copy.hpp>
#include <backend/runtime/runtime.hpp>

#include <cuda_runtime.h>

#include <cstddef>

namespace tessera::detail::comm {

inline cudaStream_t main_of(int device) { return static_cast<cudaStream_t>(rt::stream(device)); }
inline cudaStream_t side_of(int device) { return static_cast<cudaStream_t>(rt::side_stream(device)); }


// Rows on one GPU: a kernel (HBM speed; a pitched copy-engine copy within a GPU is much slower), or
// cudaMemcpy2DAsync where the sizes are not multiples of 4 bytes. `blocks_per_sm`: the kernel's
// grid (cuda::pitched_copy).
inline void copy_rows(int device, cudaStream_t st, void* dst, std::size_t dst_pitch, const void* src,
                      std::size_t src_pitch, std::size_t width, std::size_t height, const char* what,
                      int blocks_per_sm = 16) {
  if (width == 0 || height == 0) return;
  rt::set_device(device);
  if (cuda::pitched_copy(device, st, dst, dst_pitch, src, src_pitch, width, height, blocks_per_sm)) return;
  rt::check_cuda(cudaMemcpy2DAsync(dst, dst_pitch, src, src_pitch, width, height, cudaMemcpyDeviceToDevice, st), what,
                 device);
}

}  // namespace tessera::detail::comm
