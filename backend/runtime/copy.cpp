// SPDX-License-Identifier: Apache-2.0
// Copies between any two devices (runtime.hpp, copy_between and copy_between_2d: contiguous, or
// rows at a pitch): host devices by memcpy, GPU <-> host device through the pinned staging of
// transfer.cpp, GPU <-> GPU by cudaMemcpyPeerAsync / cudaMemcpy3DPeerAsync on the destination's
// stream, ordered after the source's queued work and before the source's later work.
#include <backend/comm/mpi.hpp>
#include <backend/runtime/state.hpp>

#include <cstring>
#include <vector>

namespace tessera::detail::rt {
namespace {

// `height` rows of `width` bytes, `dst_pitch` / `src_pitch` bytes apart (one row: contiguous).
void copy_local(int dst_device, void* dst, std::size_t dst_pitch, int src_device, const void* src,
                std::size_t src_pitch, std::size_t width, std::size_t height) {
  const state& s = get();
  const bool dst_gpu = is_gpu(s, dst_device), src_gpu = is_gpu(s, src_device);
  (void)info(dst_device), (void)info(src_device);
  if (!dst_gpu && !src_gpu) {
    for (std::size_t r = 0; r < height; ++r)
      std::memcpy(static_cast<char*>(dst) + r * dst_pitch, static_cast<const char*>(src) + r * src_pitch, width);
    return;
  }
  if (dst_gpu && !src_gpu) return local_copy_from_host(dst_device, dst, dst_pitch, src, src_pitch, width, height);
  if (!dst_gpu && src_gpu) return local_copy_to_host(src_device, dst, dst_pitch, src, src_pitch, width, height);
#if TESSERA_HAS_CUDA
  device_guard guard(dst_device);
  auto dst_stream = static_cast<cudaStream_t>(stream(dst_device));
  if (dst_device == src_device) {
    cuda_check(cudaMemcpy2DAsync(dst, dst_pitch, src, src_pitch, width, height, cudaMemcpyDeviceToDevice, dst_stream),
               "cudaMemcpy2DAsync", dst_device);
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
  if (height == 1) {
    cuda_check(cudaMemcpyPeerAsync(dst, dst_device, src, src_device, width, dst_stream), "cudaMemcpyPeerAsync",
               dst_device);
  } else {
    // A strided piece in one peer copy (re-sharding moves blocks of rows), not packed first.
    cudaMemcpy3DPeerParms p{};
    p.srcPtr = make_cudaPitchedPtr(const_cast<void*>(src), src_pitch, width, height);
    p.srcDevice = info(src_device).ordinal;
    p.dstPtr = make_cudaPitchedPtr(dst, dst_pitch, width, height);
    p.dstDevice = info(dst_device).ordinal;
    p.extent = make_cudaExtent(width, height, 1);
    cuda_check(cudaMemcpy3DPeerAsync(&p, dst_stream), "cudaMemcpy3DPeerAsync", dst_device);
  }
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

void copy_local(int dst_device, void* dst, int src_device, const void* src, std::size_t bytes) {
  copy_local(dst_device, dst, bytes, src_device, src, bytes, bytes, 1);
}

// Between ranks: the source's rank sends the bytes (staged through host memory from a GPU; no
// CUDA-aware MPI is assumed), the destination's rank receives them, every other rank only takes
// part in the consistency check. Every rank calls this for every copy in the same order, and each
// copy involves at most two ranks, so the blocking pairs cannot deadlock.
void copy_across(int dst_device, void* dst, int src_device, const void* src, std::size_t bytes) {
  const int to = info(dst_device).rank, from = info(src_device).rank, me = dist::world_rank();
  if (to == from) {
    if (to == me) copy_local(dst_device, dst, src_device, src, bytes);
    return;
  }
  dist::agree("a copy between ranks", bytes);
  const char* what = "a copy between ranks (copy, copyto, update_halo)";
  if (me == from) {
    if (!is_gpu(get(), src_device)) return dist::send(src, bytes, to, what);
    std::vector<char> staged(bytes);
    local_copy_to_host(src_device, staged.data(), bytes, src, bytes, bytes, 1);
    dist::send(staged.data(), bytes, to, what);
  } else if (me == to) {
    if (!is_gpu(get(), dst_device)) return dist::recv(dst, bytes, from, what);
    std::vector<char> staged(bytes);
    dist::recv(staged.data(), bytes, from, what);
    local_copy_from_host(dst_device, dst, bytes, staged.data(), bytes, bytes, 1);
  }
}

}  // namespace

void copy_between_2d(int dst_device, void* dst, std::size_t dst_pitch, int src_device, const void* src,
                     std::size_t src_pitch, std::size_t width, std::size_t height) {
  if (width == 0 || height == 0) return;
  const int pair[2] = {dst_device, src_device};
  if (crosses_ranks(pair, 2, "a copy between devices")) {
    for (std::size_t r = 0; r < height; ++r)  // correct, not fast: callers pack pieces across ranks
      copy_across(dst_device, static_cast<char*>(dst) + r * dst_pitch, src_device,
                  static_cast<const char*>(src) + r * src_pitch, width);
    return;
  }
  copy_local(dst_device, dst, dst_pitch, src_device, src, src_pitch, width, height);
}

void copy_between(int dst_device, void* dst, int src_device, const void* src, std::size_t bytes) {
  if (bytes == 0) return;
  const int pair[2] = {dst_device, src_device};
  if (crosses_ranks(pair, 2, "a copy between devices")) return copy_across(dst_device, dst, src_device, src, bytes);
  copy_local(dst_device, dst, src_device, src, bytes);
}

}  // namespace tessera::detail::rt
