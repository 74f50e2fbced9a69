// SPDX-License-Identifier: Apache-2.0
// Contiguous copies between any two devices (runtime.hpp, copy_between): host devices by memcpy,
// GPU <-> host device through the pinned staging of transfer.cpp, GPU <-> GPU by
// cudaMemcpyPeerAsync on the destination's stream, ordered after the source's queued work and
// before the source's later work.
#include <backend/comm/mpi.hpp>
#include <backend/runtime/state.hpp>

#include <cstring>
#include <vector>

namespace tessera::detail::rt {
namespace {

void copy_local(int dst_device, void* dst, int src_device, const void* src, std::size_t bytes) {
  const state& s = get();
  const bool dst_gpu = is_gpu(s, dst_device), src_gpu = is_gpu(s, src_device);
  (void)info(dst_device), (void)info(src_device);
  if (!dst_gpu && !src_gpu) {
    std::memcpy(dst, src, bytes);
    return;
  }
  if (dst_gpu && !src_gpu) return local_copy_from_host(dst_device, dst, bytes, src, bytes, bytes, 1);
  if (!dst_gpu && src_gpu) return local_copy_to_host(src_device, dst, bytes, src, bytes, bytes, 1);
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

void copy_between(int dst_device, void* dst, int src_device, const void* src, std::size_t bytes) {
  if (bytes == 0) return;
  const int pair[2] = {dst_device, src_device};
  if (crosses_ranks(pair, 2, "a copy between devices")) return copy_across(dst_device, dst, src_device, src, bytes);
  copy_local(dst_device, dst, src_device, src, bytes);
}

}  // namespace tessera::detail::rt
