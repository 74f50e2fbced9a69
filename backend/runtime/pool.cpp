// SPDX-License-Identifier: Apache-2.0
// The caching allocator for GPU memory, on by default as in CuPy and CUDA.jl. Without it every
// array that dies calls cudaFree, which waits for the whole device, and every new array pays for
// cudaMemGetInfo, cudaMallocManaged, two advises and a prefetch that populates fresh pages: about
// 0.1 ms of GPU time per array on an H100, a quarter of the time of sum(x, dims(0)) over 1 GiB.
// A dead array's block goes back to its device's cache instead; a new array of the same size
// class takes it. Reuse is stream ordered: the release records an event on every GPU's stream
// (work of other devices may still read the block: copies, collectives), and the reuse makes the
// owner's stream wait on those events. Host code reaches a buffer only after waiting for the
// owner's stream (host_access), which then covers the block's previous life too.
//
// Other devices touch a block only inside NCCL collectives that include its owner, so ordering
// the owner's stream is enough. TESSERA_MEMORY_POOL=0 turns the cache off (every release is a cudaFree). check_free() empties
// a device's cache before it refuses a request, so cached blocks never cause an out_of_memory.
#include <backend/runtime/state.hpp>
#include <tessera/device.hpp>

#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <unordered_set>
#include <utility>
#include <vector>

#if defined(__GLIBC__)
#include <malloc.h>
#endif

namespace tessera {
namespace detail::rt {

#if TESSERA_HAS_CUDA
namespace {

struct cached_block {
  void* p;
  bool host_touched;                 // pages may sit on the host: prefetch before reuse
  std::vector<cudaEvent_t> after;    // recorded on every GPU's stream at release
  std::vector<int> after_device;     // the device each event belongs to
};

struct device_cache {
  std::mutex m;
  std::map<std::pair<int, std::size_t>, std::vector<cached_block>> blocks;  // (kind, size class)
  std::size_t bytes = 0;
  std::unordered_set<void*> exact;  // blocks smaller than their size class: never cached
};

bool pool_enabled() {
  static const bool on = [] {
    const char* v = std::getenv("TESSERA_MEMORY_POOL");
    return v == nullptr || std::strcmp(v, "0") != 0;
  }();
  return on;
}

// Deliberately leaked with the runtime state: user statics may release arrays at exit.
device_cache& cache(int device_id) {
  static auto* caches = new device_cache[64];
  return caches[device_id];
}

void return_events(const cached_block& b) {
  for (std::size_t i = 0; i < b.after.size(); ++i) give_event(b.after_device[i], b.after[i]);
}

}  // namespace

std::size_t pool_class(std::size_t bytes) {
  if (!pool_enabled()) return bytes;
  if (bytes <= 4096) return (bytes + 511) / 512 * 512;
  // Quarter steps between powers of two: at most 25% more than asked for, few classes.
  std::size_t p = 4096;
  while (p * 2 <= bytes && p * 2 > p) p *= 2;
  const std::size_t q = p / 4;
  const std::size_t c = (bytes + q - 1) / q * q;
  return c < bytes ? bytes : c;  // overflow near SIZE_MAX: no rounding
}

void* pool_take(int device_id, std::size_t cls, memory kind) {
  if (!pool_enabled() || device_id >= 64) return nullptr;
  device_cache& c = cache(device_id);
  cached_block b;
  {
    std::lock_guard<std::mutex> lock(c.m);
    auto it = c.blocks.find({static_cast<int>(kind), cls});
    if (it == c.blocks.end() || it->second.empty()) return nullptr;
    b = std::move(it->second.back());
    it->second.pop_back();
    c.bytes -= cls;
  }
  gpu_state& g = gpu(device_id);
  const auto on = static_cast<cudaStream_t>(stream(device_id));  // the side stream inside a side_stream_scope
  try {
    device_guard guard(device_id);
    // While capturing, the events recorded before the capture have completed (begin_capture waits
    // for every GPU) and none is recorded during it (frees are kept), so nothing is waited for: a
    // wait on an event from outside would break the capture.
    for (cudaEvent_t e : b.after) {
      if (capturing() && cudaEventQuery(e) == cudaSuccess) continue;
      cuda_check(cudaStreamWaitEvent(on, e, 0), "cudaStreamWaitEvent", device_id);
    }
    if (kind == memory::unified && b.host_touched && g.concurrent_managed && !capturing())
      prefetch(b.p, cls, device_id, on);  // a prefetch cannot be captured
  } catch (...) {
    return_events(b);
    device_guard guard(device_id);
    free_gpu_block(device_id, b.p);
    throw;
  }
  return_events(b);
  return b.p;
}

void pool_mark_exact(int device_id, void* p) {
  if (device_id >= 64) return;
  device_cache& c = cache(device_id);
  std::lock_guard<std::mutex> lock(c.m);
  c.exact.insert(p);
}

bool pool_give(int device_id, void* p, std::size_t cls, memory kind, bool host_touched) noexcept {
  if (!pool_enabled() || device_id >= 64) return false;
  {
    device_cache& c = cache(device_id);
    std::lock_guard<std::mutex> lock(c.m);
    if (c.exact.erase(p) > 0) return false;
  }
  cached_block b{p, host_touched, {}, {}};
  try {
    const int g = get().gpu_count;
    b.after.reserve(static_cast<std::size_t>(g));
    for (int d = 0; d < g; ++d) {
      const auto e = static_cast<cudaEvent_t>(take_event(d));
      b.after.push_back(e);
      b.after_device.push_back(d);
      device_guard guard(d);
      cuda_check(cudaEventRecord(e, static_cast<cudaStream_t>(stream(d))), "cudaEventRecord", d);
    }
  } catch (...) {  // e.g. the CUDA runtime already unloaded at exit: the caller frees
    (void)cudaGetLastError();
    return false;
  }
  device_cache& c = cache(device_id);
  std::lock_guard<std::mutex> lock(c.m);
  c.blocks[{static_cast<int>(kind), cls}].push_back(std::move(b));
  c.bytes += cls;
  return true;
}

std::size_t pool_trim(int device_id) {
  if (device_id >= 64 || !is_gpu(get(), device_id)) return 0;
  device_cache& c = cache(device_id);
  std::vector<cached_block> freed;
  std::size_t bytes = 0;
  {
    std::lock_guard<std::mutex> lock(c.m);
    for (auto& [key, list] : c.blocks) {
      for (auto& b : list) freed.push_back(std::move(b));
      list.clear();
    }
    bytes = c.bytes;
    c.bytes = 0;
  }
  device_guard guard(device_id);
  for (auto& b : freed) {
    // cudaFree waits for the device; the other devices' work on the block is what the events
    // say, so wait for them first.
    for (cudaEvent_t e : b.after) (void)cudaEventSynchronize(e);
    free_gpu_block(device_id, b.p);
    return_events(b);
  }
  return bytes;
}

std::size_t pool_bytes(int device_id) {
  if (device_id >= 64 || !is_gpu(get(), device_id)) return 0;
  device_cache& c = cache(device_id);
  std::lock_guard<std::mutex> lock(c.m);
  return c.bytes;
}
#else
std::size_t pool_class(std::size_t bytes) { return bytes; }
std::size_t pool_trim(int) { return 0; }
std::size_t pool_bytes(int) { return 0; }
#endif

}  // namespace detail::rt

void reclaim() {
  detail::rt::refuse_while_capturing("reclaim() (it frees what the recorded work may use)");
  const int g = detail::rt::get().gpu_count;
  for (int d = 0; d < g; ++d) {
    detail::rt::release_scratch(d);  // grown to the largest reduction so far: back to the cache, then freed
    (void)detail::rt::pool_trim(d);
  }
#if defined(__GLIBC__)
  // Host memory too. Copies between ranks stage GPU data through host buffers as large as a
  // message (copy.cpp), and glibc keeps what they freed: after one 28 MiB buffer its mmap
  // threshold rises to that size, later buffers come from the heap, and up to twice the threshold
  // stays resident after they are freed (two 20 MiB buffers: +41 MiB of RSS until malloc_trim).
  // Issue 20's soak asks for RSS back within 1% after reclaim().
  (void)malloc_trim(0);
#endif
}

}  // namespace tessera
