// SPDX-License-Identifier: Apache-2.0
// Contiguous copies between any two devices (runtime.hpp, copy_between): host devices by memcpy,
// GPU <-> host device through the pinned staging of transfer.cpp, GPU <-> GPU by
// cudaMemcpyPeerAsync on the destination's stream, ordered after the source's queued work and
// before the source's later work.
#include <backend/runtime/state.hpp>

#include <cstring>

namespace tessera::detail::rt {

void copy_between(int dst_device, void* dst, int src_device, const void* src, std::size_t bytes) {
  if (bytes == 0) return;
  const state& s = get();
  const bool dst_gpu = is_gpu(s, dst_device), src_gpu = is_gpu(s, src_device);
  (void)info(dst_device), (void)info(src_device);
  if (!dst_gpu && !src_gpu) {
    std::memcpy(dst, src, bytes);
    return;
  }
  if (dst_gpu && !src_gpu) return copy_from_host(dst_device, dst, bytes, src, bytes, bytes, 1);
  if (!dst_gpu && src_gpu) return copy_to_host(src_device, dst, bytes, src, bytes, bytes, 1);
#if TESSERA_HAS_CUDA
  device_guard guard(dst_device);
  auto dst_stream = static_cast<cudaStream_t>(stream(dst_device));
  if (dst_device == src_device) {
    cuda_check(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, dst_stream), "cudaMemcpyAsync", dst_device);
    return;
  }
  auto src_stream = static_cast<cudaStream_t>(stream(src_device));
  cudaEvent_t ready = nullptr, done = nullptr;
  {
    device_guard on_src(src_device);
    cuda_check(cudaEventCreateWithFlags(&ready, cudaEventDisableTiming), "cudaEventCreateWithFlags", src_device);
    cuda_check(cudaEventRecord(ready, src_stream), "cudaEventRecord", src_device);
  }
  cuda_check(cudaStreamWaitEvent(dst_stream, ready, 0), "cudaStreamWaitEvent", dst_device);
  cuda_check(cudaMemcpyPeerAsync(dst, dst_device, src, src_device, bytes, dst_stream), "cudaMemcpyPeerAsync",
             dst_device);
  cuda_check(cudaEventCreateWithFlags(&done, cudaEventDisableTiming), "cudaEventCreateWithFlags", dst_device);
  cuda_check(cudaEventRecord(done, dst_stream), "cudaEventRecord", dst_device);
  {
    device_guard on_src(src_device);  // the source's later work waits for the copy to have read it
    cuda_check(cudaStreamWaitEvent(src_stream, done, 0), "cudaStreamWaitEvent", src_device);
  }
  (void)cudaEventDestroy(ready);  // released once the queued waits are done
  (void)cudaEventDestroy(done);
#endif
}

}  // namespace tessera::detail::rt
