// SPDX-License-Identifier: Apache-2.0
// Private to backend/runtime: the runtime's state and the helpers its .cpp files share. Only
// these .cpp files include it, so the CUDA header stays out of everything else.
#pragma once
#include <backend/runtime/runtime.hpp>

#include <atomic>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#ifndef TESSERA_HAS_CUDA
#define TESSERA_HAS_CUDA 0
#endif
#if TESSERA_HAS_CUDA
#include <cuda_runtime.h>
#endif

namespace tessera::detail::rt {

// One turn of a spin-wait loop: tells the core to let its sibling thread run.
inline void spin_pause() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#else
  std::atomic_signal_fence(std::memory_order_seq_cst);
#endif
}

// How bytes move between two GPUs, decided once at initialization.
enum class copy_path { self, nvlink, pcie, host_staged };

#if TESSERA_HAS_CUDA
struct gpu_state {
  cudaStream_t stream = nullptr;
  // The side stream (rt::side_stream, highest priority): hide_communication's boundary pass and
  // halo copies, the NCCL exchange's packing, beside the work on `stream`.
  cudaStream_t copy_stream = nullptr;
  // On 3 or more GPUs (copy.cpp, peer_streams_enabled): one stream per source GPU, on which this
  // device receives a batch's pieces from that source, all sources at once; empty otherwise.
  std::vector<cudaStream_t> peer_streams;
  bool concurrent_managed = false;  // false: no advise/prefetch, host access needs a device sync
  // The device's primary context (a CUcontext), for get_cuda_device's check without cudaGetDevice;
  // null when the driver's cuCtxGetCurrent was not found.
  void* context = nullptr;
  // Staging is per device so transfers to different GPUs proceed in parallel; the mutex
  // serializes transfers of one device because they share the two chunks.
  std::mutex staging_mutex;
  char* staging = nullptr;  // 2 * staging_chunk_bytes of pinned memory
  cudaEvent_t chunk_done[2] = {nullptr, nullptr};
  // Events given back (rt::give_event), for take_event to hand out again.
  std::mutex events_mutex;
  std::vector<cudaEvent_t> spare_events;
  // One-kernel graphs kept for rt::graph_launch (kept_graphs.cpp), the latest used last.
  struct kept_graph {
    const void* kernel = nullptr;
    void* stream = nullptr;
    unsigned grid[3] = {}, block[3] = {};
    std::size_t shared_bytes = 0;
    cudaGraph_t graph = nullptr;
    cudaGraphNode_t node = nullptr;
    cudaGraphExec_t exec = nullptr;
    std::vector<unsigned char> params;  // the parameter bytes the graph's kernel node holds now
    std::vector<unsigned char> before;  // and those it held before them
    bool unusable = false;       // the graph could not be made: launched directly
    std::uint64_t launches = 0;  // as a graph
  };
  std::mutex graphs_mutex;
  std::vector<kept_graph> kept_graphs;
  int wasted_graphs = 0;  // graphs given up after a few launches (kept_graphs.cpp)
};
#endif

struct state {
  state();
  state(const state&) = delete;
  state& operator=(const state&) = delete;

  int gpu_count = 0;
  // gpu_count + max_host_devices entries, all filled in the constructor and never modified,
  // so readers need no lock; host_count says how many host entries were handed out.
  std::vector<device_info> table;
  std::atomic<int> host_count{0};
  std::vector<copy_path> paths;  // gpu_count * gpu_count, row = source device
  // Other ranks' default devices follow this rank's host devices, from remote_base on; rank_devices[q]
  // lists rank q's ids (empty for this rank and in one process). Filled in the constructor.
  int remote_base = 0;
  std::vector<std::vector<int>> rank_devices;
  int shared_lo = 0, shared_hi = 0;  // this rank's default devices: ids [shared_lo, shared_hi)
#if TESSERA_HAS_CUDA
  std::unique_ptr<gpu_state[]> gpus;
#endif
};

// The process-wide state, initialized on first use and deliberately leaked: destroying
// streams or freeing pinned memory after the CUDA runtime has unloaded (static destruction
// order) fails, and user statics may still free buffers at exit.
state& get();

// Captured loops (capture.cpp): while this thread captures, frees are kept for the graph, host
// devices' launches and copies are recorded (each returns true when it took the work).
bool capture_defer_free(int device_id, void* p, std::size_t bytes, memory kind, bool host_touched);
void capture_note_allocation(void* p);  // a block allocated while this thread captures
bool capture_host_launches(const shard_launch* shards, std::size_t count, bool sequential);
bool capture_host_copies(const copy_region* regions, std::size_t n);

inline bool is_gpu(const state& s, int device_id) { return device_id >= 0 && device_id < s.gpu_count; }

#if TESSERA_HAS_CUDA
inline gpu_state& gpu(int device_id) { return get().gpus[static_cast<std::size_t>(device_id)]; }

// Whether a batch of copies between GPUs receives from every source at once, on one stream per
// (destination, source) pair (the default on 3 or more GPUs), or one source after another on the
// destination's stream (TESSERA_PEER_STREAMS=0; copy.cpp, copy_peers). Read once.
bool peer_streams_enabled();

// Throws backend_error "tessera: <call> failed on device cuda:N: <error>" and clears the
// thread's last-error slot, so the next check_launch does not report this failure again.
void cuda_check(cudaError_t e, const char* call, int ordinal);

// Makes `ordinal` the thread's CUDA device for the scope and restores the previous one, so a
// runtime call never leaves the caller's device changed behind its back. Uses the thread's
// cached device: no CUDA call at all when the device is already current.
class device_guard {
 public:
  explicit device_guard(int ordinal);
  ~device_guard();
  device_guard(const device_guard&) = delete;
  device_guard& operator=(const device_guard&) = delete;

 private:
  int previous_;
  int ordinal_;
};

// Queues a prefetch of unified memory to the device on its stream.
void prefetch(const void* p, std::size_t bytes, int ordinal, cudaStream_t s);

// The caching allocator (pool.cpp). pool_take returns a cached block of exactly `cls` bytes,
// ordered after its previous life on the owner's stream, or nullptr; pool_give caches a block
// (false: the caller frees it); pool_mark_exact flags a block allocated below its class.
void* pool_take(int device_id, std::size_t cls, memory kind);
bool pool_give(int device_id, void* p, std::size_t cls, memory kind, bool host_touched) noexcept;
void pool_mark_exact(int device_id, void* p);
// cudaFree for a GPU block (memory.cpp), or, for a block another process may have mapped
// (mark_exported), no free yet: the block waits in the device's retired list until every process
// closed its mapping (freeing it before is undefined behaviour in CUDA IPC).
void free_gpu_block(int device_id, void* p) noexcept;
#endif
// Host transfers of this rank's own devices only (transfer.cpp): what copy_to_host/copy_from_host
// do in one process, without the broadcast between ranks; copy_between uses them.
void local_copy_to_host(int device_id, void* dst, std::size_t dst_pitch, const void* src, std::size_t src_pitch,
                        std::size_t width, std::size_t height);
void local_copy_from_host(int device_id, void* dst, std::size_t dst_pitch, const void* src, std::size_t src_pitch,
                          std::size_t width, std::size_t height);

// The size class a GPU request of `bytes` is allocated with (bytes itself with the cache off).
std::size_t pool_class(std::size_t bytes);
// Frees a device's cached blocks; returns the bytes freed.
std::size_t pool_trim(int device_id);

}  // namespace tessera::detail::rt
