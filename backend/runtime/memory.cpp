// SPDX-License-Identifier: Apache-2.0
// Device memory: free/total queries, the out-of-memory check, allocation (unified / device /
// host) and the residency protocol between host code and kernels for unified buffers.
#include <backend/process/mpi.hpp>
#include <backend/runtime/state.hpp>

#include <algorithm>
#include <atomic>
#include <bit>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <cstdlib>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include <sys/mman.h>
#include <unistd.h>

namespace tessera::detail::rt {
namespace {

constexpr std::size_t alignment = 256;  // what cudaMalloc gives; vector loads need >= 16

// MemAvailable counts reclaimable page cache, which is what a new allocation can really get;
// sysconf's free pages would report a busy machine as nearly full.
void host_memory(std::size_t& free, std::size_t& total) {
  free = total = 0;
  if (std::FILE* f = std::fopen("/proc/meminfo", "r")) {
    char line[256];
    unsigned long long kib = 0;
    int found = 0;
    while (found != 3 && std::fgets(line, sizeof line, f) != nullptr) {
      if (std::sscanf(line, "MemTotal: %llu kB", &kib) == 1) {
        total = static_cast<std::size_t>(kib) * 1024;
        found |= 1;
      } else if (std::sscanf(line, "MemAvailable: %llu kB", &kib) == 1) {
        free = static_cast<std::size_t>(kib) * 1024;
        found |= 2;
      }
    }
    std::fclose(f);
    if (found == 3) return;
  }
  const long page = sysconf(_SC_PAGESIZE);
  const long pages = sysconf(_SC_PHYS_PAGES);
  const long avail = sysconf(_SC_AVPHYS_PAGES);
  total = pages > 0 && page > 0 ? static_cast<std::size_t>(pages) * static_cast<std::size_t>(page) : 0;
  free = avail > 0 && page > 0 ? static_cast<std::size_t>(avail) * static_cast<std::size_t>(page) : 0;
}

[[noreturn]] void throw_oom(int device_id, std::size_t bytes) {
  std::size_t free = 0, total = 0;
  memory_info(device_id, free, total);
  throw out_of_memory(bytes, free, total, device_id, info(device_id).name);
}

// A part on another rank's device gets address space without memory: distinct addresses keep the
// alias checks exact (two remote parts never look like one buffer), PROT_NONE makes any local
// access fault at once instead of reading garbage, and MAP_NORESERVE costs no memory.
std::size_t remote_span(std::size_t bytes) { return (bytes + alignment - 1) / alignment * alignment; }

void* reserve_remote(int device_id, std::size_t bytes) {
  void* p = mmap(nullptr, remote_span(bytes), PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (p == MAP_FAILED) {
    throw error("tessera: could not reserve " + std::to_string(bytes) + " bytes of address space for a part on " +
                info(device_id).name + " (another rank's device)");
  }
  return p;
}

#if TESSERA_HAS_CUDA
cudaMemLocation location_of(int ordinal) {
  cudaMemLocation loc{};
  loc.type = cudaMemLocationTypeDevice;
  loc.id = ordinal;
  return loc;
}

// CUDA 13 takes a cudaMemLocation where CUDA 12 took a device ordinal.
void advise(const void* p, std::size_t bytes, cudaMemoryAdvise advice, int ordinal) {
#if CUDART_VERSION >= 13000
  cuda_check(cudaMemAdvise(p, bytes, advice, location_of(ordinal)), "cudaMemAdvise", ordinal);
#else
  cuda_check(cudaMemAdvise(p, bytes, advice, ordinal), "cudaMemAdvise", ordinal);
#endif
}

// The ids of allocation_id, set at each cudaMalloc (which is where an address can come back as a
// new allocation), so no free has to report.
struct allocation_ids {
  std::mutex m;
  std::unordered_map<const void*, std::uint64_t> of;
  std::uint64_t last = 0;
  std::unordered_set<const void*> exported;
  std::vector<std::pair<int, void*>> retired;  // (device, block), oldest first
};
allocation_ids& ids() {
  static auto* a = new allocation_ids;  // leaked: arrays may die at exit
  return *a;
}

void* allocate_gpu(int d, std::size_t bytes, memory kind) {
  device_guard guard(d);
  void* p = nullptr;
  const cudaError_t e = kind == memory::unified ? cudaMallocManaged(&p, bytes, cudaMemAttachGlobal)
                                                : cudaMalloc(&p, bytes);
  if (e == cudaErrorMemoryAllocation) {  // lost a race with another allocation after check_free
    (void)cudaGetLastError();
    throw_oom(d, bytes);
  }
  cuda_check(e, kind == memory::unified ? "cudaMallocManaged" : "cudaMalloc", d);
  if (kind == memory::device) {
    allocation_ids& a = ids();
    std::lock_guard<std::mutex> lock(a.m);
    a.of[p] = ++a.last;
  }
  if (kind == memory::unified && gpu(d).concurrent_managed) {
    try {
      advise(p, bytes, cudaMemAdviseSetPreferredLocation, d);
      advise(p, bytes, cudaMemAdviseSetAccessedBy, d);
      // Populates the pages on the owner now, in stream order, so the first kernel does not
      // page-fault its way through a fresh buffer. A prefetch cannot be captured: a buffer made
      // by a captured body is populated by its first replay.
      if (!capturing()) prefetch(p, bytes, d, static_cast<cudaStream_t>(stream(d)));
    } catch (...) {
      free_gpu_block(d, p);
      throw;
    }
  }
  return p;
}
#endif

}  // namespace

#if TESSERA_HAS_CUDA
void prefetch(const void* p, std::size_t bytes, int ordinal, cudaStream_t s) {
#if CUDART_VERSION >= 13000
  cuda_check(cudaMemPrefetchAsync(p, bytes, location_of(ordinal), 0, s), "cudaMemPrefetchAsync", ordinal);
#else
  cuda_check(cudaMemPrefetchAsync(p, bytes, ordinal, s), "cudaMemPrefetchAsync", ordinal);
#endif
}
#endif

#if TESSERA_HAS_CUDA
// Errors (e.g. the runtime already unloaded at exit) are dropped: there is nothing a destructor
// could do about them.
void free_gpu_block(int device_id, void* p) noexcept {
  if (p == nullptr) return;
  {
    allocation_ids& a = ids();
    std::lock_guard<std::mutex> lock(a.m);
    if (a.exported.count(p)) {
      a.retired.emplace_back(device_id, p);
      return;
    }
    a.of.erase(p);
  }
  (void)cudaFree(p);
  (void)cudaGetLastError();
}
#endif

void mark_exported(const void* base) {
#if TESSERA_HAS_CUDA
  allocation_ids& a = ids();
  std::lock_guard<std::mutex> lock(a.m);
  a.exported.insert(base);
#else
  (void)base;
#endif
}

std::vector<std::pair<void*, std::uint64_t>> retired_blocks(int device_id, std::size_t most) {
  std::vector<std::pair<void*, std::uint64_t>> out;
#if TESSERA_HAS_CUDA
  allocation_ids& a = ids();
  std::lock_guard<std::mutex> lock(a.m);
  for (const auto& [d, p] : a.retired) {
    if (d != device_id || out.size() >= most) continue;
    const auto it = a.of.find(p);
    out.emplace_back(p, it == a.of.end() ? 0 : it->second);
  }
#else
  (void)device_id, (void)most;
#endif
  return out;
}

void free_retired(int device_id, void* p) noexcept {
#if TESSERA_HAS_CUDA
  {
    allocation_ids& a = ids();
    std::lock_guard<std::mutex> lock(a.m);
    const auto it = std::find(a.retired.begin(), a.retired.end(), std::pair<int, void*>{device_id, p});
    if (it == a.retired.end()) return;
    a.retired.erase(it);
    a.exported.erase(p);
    a.of.erase(p);
  }
  (void)cudaFree(p);  // by address: no current device needed
  (void)cudaGetLastError();
#else
  (void)device_id, (void)p;
#endif
}

std::uint64_t allocation_id(const void* base) {
#if TESSERA_HAS_CUDA
  allocation_ids& a = ids();
  std::lock_guard<std::mutex> lock(a.m);
  const auto it = a.of.find(base);
  return it == a.of.end() ? 0 : it->second;
#else
  (void)base;
  return 0;
#endif
}

void memory_info(int device_id, std::size_t& free, std::size_t& total) {
  (void)info(device_id);
  if (is_remote(device_id)) {  // known only on its rank
    free = total = 0;
    return;
  }
#if TESSERA_HAS_CUDA
  if (is_gpu(get(), device_id)) {
    device_guard guard(device_id);
    cuda_check(cudaMemGetInfo(&free, &total), "cudaMemGetInfo", device_id);
    return;
  }
#endif
  host_memory(free, total);
}

// Free memory, counting the blocks the device's cache would give back for a request this size.
static void free_for(int device_id, std::size_t bytes, std::size_t& free, std::size_t& total) {
  memory_info(device_id, free, total);
  if (bytes > free && pool_trim(device_id) > 0) memory_info(device_id, free, total);
}

void check_free(int device_id, std::size_t bytes) {
  if (is_remote(device_id)) return;  // its rank checks it
  std::size_t free = 0, total = 0;
  free_for(device_id, bytes, free, total);
  if (bytes > free) throw out_of_memory(bytes, free, total, device_id, info(device_id).name);
}

static void* allocate_block(int device_id, std::size_t bytes, memory kind) {
  (void)info(device_id);
  if (bytes == 0) return nullptr;
  if (is_remote(device_id)) return reserve_remote(device_id, bytes);
#if TESSERA_HAS_CUDA
  if (is_gpu(get(), device_id)) {
    // GPU blocks come in size classes so that a dead array's block fits the next one (pool.cpp).
    const std::size_t cls = pool_class(bytes);
    if (void* p = pool_take(device_id, cls, kind)) return p;
    std::size_t free = 0, total = 0;
    free_for(device_id, cls, free, total);
    if (bytes > free) throw out_of_memory(bytes, free, total, device_id, info(device_id).name);
    if (cls <= free) return allocate_gpu(device_id, cls, kind);
    void* p = allocate_gpu(device_id, bytes, kind);  // fits only unrounded: never cached
    pool_mark_exact(device_id, p);
    return p;
  }
#endif
  check_free(device_id, bytes);
  (void)kind;
  const std::size_t rounded = (bytes + alignment - 1) / alignment * alignment;
  if (rounded < bytes) throw_oom(device_id, bytes);  // overflow of the rounding
  void* p = std::aligned_alloc(alignment, rounded);
  if (p == nullptr) throw_oom(device_id, bytes);
  return p;
}

void* allocate(int device_id, std::size_t bytes, memory kind) {
  void* p = allocate_block(device_id, bytes, kind);
  capture_note_allocation(p);  // a captured graph's block: its release waits for the graph's
  return p;
}

void deallocate(int device_id, void* p, std::size_t bytes, memory kind, bool host_touched) noexcept {
  (void)bytes, (void)kind, (void)host_touched;
  if (p == nullptr) return;
  if (capture_defer_free(device_id, p, bytes, kind, host_touched)) return;  // the captured graph uses it
  if (is_remote(device_id)) {
    (void)munmap(p, remote_span(bytes));
    return;
  }
#if TESSERA_HAS_CUDA
  if (is_gpu(get(), device_id)) {
    if (pool_give(device_id, p, pool_class(bytes), kind, host_touched)) return;
    // cudaFree waits for the device, which is what lets arrays die while kernels that read
    // them are still queued.
    free_gpu_block(device_id, p);
    return;
  }
#else
  (void)device_id;
#endif
  std::free(p);
}

static_assert(alignof(bool) >= std::atomic_ref<bool>::required_alignment);
bool touched_flag::load() const noexcept {
  return std::atomic_ref<bool>(const_cast<bool&>(v_)).load(std::memory_order_acquire);
}
void touched_flag::store(bool v) noexcept { std::atomic_ref<bool>(v_).store(v, std::memory_order_release); }
bool touched_flag::exchange(bool v) noexcept {
  return std::atomic_ref<bool>(v_).exchange(v, std::memory_order_acq_rel);
}

void make_resident(buffer& b) {
  if (!b.host_touched.load()) return;
  // A prefetch cannot be captured: the pages migrate on the first replay's touch, and the next
  // plain launch prefetches (docs/semantics.md, "Captured loops").
  if (capturing()) return;
  // exchange: only one of several racing launches issues the prefetch.
  if (!b.host_touched.exchange(false)) return;
#if TESSERA_HAS_CUDA
  if (b.kind == memory::unified && b.ptr != nullptr && is_gpu(get(), b.device) && gpu(b.device).concurrent_managed) {
    try {
      device_guard guard(b.device);
      prefetch(b.ptr, b.bytes, b.device, static_cast<cudaStream_t>(stream(b.device)));
    } catch (...) {
      b.host_touched.store(true);
      throw;
    }
  }
#endif
}

void make_resident(const buffer_list& uses) {
  uses.for_each([](buffer& b) { make_resident(b); });
}

void* host_access(buffer& b) {
  refuse_while_capturing("host access to an array's storage (host_data, element writes)");
  if (is_remote(b.device)) {
    throw invalid_argument("tessera: host code cannot read or write storage on " + info(b.device).name +
                           ", a device of another rank; use to_host(a) or a.at(...) (every rank gets the values) or "
                           "host_data on the rank that holds the shard");
  }
#if TESSERA_HAS_CUDA
  if (is_gpu(get(), b.device)) {
    if (b.kind == memory::device)
      throw invalid_argument("tessera: host code cannot read or write memory::device storage on " +
                             info(b.device).name +
                             " directly; copy it with to_host(a) or read one element with a.at(...), or allocate "
                             "the array with memory::unified");
    gpu_state& g = gpu(b.device);
    if (g.concurrent_managed) {
      cuda_check(cudaStreamSynchronize(g.stream), "cudaStreamSynchronize", b.device);
    } else {
      // Without concurrent managed access the host may not touch managed memory while any
      // kernel runs on the device, whatever its stream.
      device_guard guard(b.device);
      cuda_check(cudaDeviceSynchronize(), "cudaDeviceSynchronize", b.device);
    }
    b.host_touched.store(true);
    return b.ptr;
  }
#endif
  (void)info(b.device);
  return b.ptr;
}


namespace {
struct scratch_slot {
  std::mutex m;
  void* p = nullptr;
  std::size_t size = 0;
};
scratch_slot& scratch_slot_of(int device_id) {
  static scratch_slot slots[64 + max_host_devices];
  if (device_id < 0 || device_id >= 64 + max_host_devices) {
    throw invalid_argument("tessera: scratch memory supports device ids below " + std::to_string(64 + max_host_devices) +
                           ", found " + std::to_string(device_id));
  }
  return slots[device_id];
}
}  // namespace

void* scratch(int device_id, std::size_t bytes) {
  // The scratch grows (and moves) with later reductions: a captured graph would keep the old one.
  refuse_while_capturing("a reduction, scan or sort (their temporary storage is the runtime's scratch)");
  (void)info(device_id);
  scratch_slot& sl = scratch_slot_of(device_id);
  std::lock_guard<std::mutex> lock(sl.m);
  if (sl.size < bytes) {
    const std::size_t grown = bytes < 4096 ? 4096 : bytes + bytes / 2;
    void* p = allocate(device_id, grown, memory::device);
    if (sl.p) deallocate(device_id, sl.p, sl.size, memory::device);
    sl.p = p;
    sl.size = grown;
  }
  return sl.p;
}

void release_scratch(int device_id) {
  scratch_slot& sl = scratch_slot_of(device_id);
  std::lock_guard<std::mutex> lock(sl.m);
  if (!sl.p) return;
  deallocate(device_id, sl.p, sl.size, memory::device);  // to the cache, in stream order
  sl.p = nullptr;
  sl.size = 0;
}

namespace {
struct reduce_slots {
  std::mutex m;
  result_slot result{nullptr, nullptr};  // on GPUs with `done` (the device's view), ticket unused
  unsigned ticket = 0;                    // the last one handed out
  bool armed = false;                     // a reduction signals `ticket` and nobody has read it yet
  unsigned* counter = nullptr;
};
reduce_slots& slots_of(int device_id) {
  static reduce_slots slots[64 + max_host_devices];
  (void)info(device_id);
  if (device_id < 0 || device_id >= 64 + max_host_devices) {
    throw invalid_argument("tessera: reduction slots support device ids below " + std::to_string(64 + max_host_devices) +
                           ", found " + std::to_string(device_id));
  }
  return slots[device_id];
}

// Under sl.m.
void allocate_slot(reduce_slots& sl, int device_id) {
  if (sl.result.host != nullptr) return;
#if TESSERA_HAS_CUDA
  if (is_gpu(get(), device_id)) {
    // The result, then the done signal in its own 64 bytes.
    device_guard guard(device_id);
    void* h = nullptr;
    void* d = nullptr;
    cuda_check(cudaHostAlloc(&h, 2 * result_slot_bytes, cudaHostAllocMapped | cudaHostAllocPortable), "cudaHostAlloc",
               device_id);
    cuda_check(cudaHostGetDevicePointer(&d, h, 0), "cudaHostGetDevicePointer", device_id);
    std::memset(h, 0, 2 * result_slot_bytes);
    sl.result = {h, d, reinterpret_cast<unsigned*>(static_cast<char*>(d) + result_slot_bytes), 0};
    return;
  }
#endif
  (void)device_id;
  void* h = std::calloc(1, result_slot_bytes);
  if (h == nullptr) throw error("tessera: could not allocate a reduction result slot on the host");
  sl.result = {h, h};
}

// Waits for device_id's armed reduction: a spin on its done signal, with a look at the stream now
// and then, so that a kernel that failed (or a stale ticket: the launch threw) ends the wait.
// Returns the 8-byte word at `done` (the ticket in its low half, a packed result in its high
// half, as result_slot says), read in one load.
std::uint64_t wait_signal(int device_id, const unsigned* done, unsigned ticket) {
  static_assert(std::endian::native == std::endian::little, "the ticket is the low half of the signal word");
  const std::atomic_ref<const std::uint64_t> seen(*reinterpret_cast<const std::uint64_t*>(done));
#if TESSERA_HAS_CUDA
  for (unsigned k = 1;; ++k) {
    const std::uint64_t word = seen.load(std::memory_order_acquire);
    if (static_cast<unsigned>(word) == ticket) return word;
    spin_pause();
    if (k % 1024 == 0) {
      const cudaError_t e = cudaStreamQuery(static_cast<cudaStream_t>(stream(device_id)));
      if (e == cudaErrorNotReady) continue;
      synchronize_device(device_id);  // done, or the stream's error, as every wait reports it
      return seen.load(std::memory_order_acquire);
    }
  }
#else
  (void)ticket;
  synchronize_device(device_id);
  return seen.load(std::memory_order_acquire);
#endif
}
}  // namespace

result_slot mapped_result(int device_id) {
  if (is_remote(device_id)) return {nullptr, nullptr};  // its rank computes the result; read_results fetches it
  reduce_slots& sl = slots_of(device_id);
  std::lock_guard<std::mutex> lock(sl.m);
  allocate_slot(sl, device_id);
  // A kernel without a signal writes the slot next: an armed ticket left by a reduction whose
  // operation threw before its read (whose kernel may still signal) must not stand for it.
  sl.armed = false;
  return {sl.result.host, sl.result.device};
}

result_slot armed_result(int device_id) {
  // TESSERA_REDUCE_SIGNAL=0: wait for the streams instead (for comparisons).
  static const bool signals = [] {
    const char* v = std::getenv("TESSERA_REDUCE_SIGNAL");
    return v == nullptr || std::strcmp(v, "0") != 0;
  }();
  if (is_remote(device_id)) return {nullptr, nullptr};
  reduce_slots& sl = slots_of(device_id);
  std::lock_guard<std::mutex> lock(sl.m);
  allocate_slot(sl, device_id);
  if (sl.result.done == nullptr || !signals) return {sl.result.host, sl.result.device};
  result_slot r = sl.result;
  r.ticket = ++sl.ticket;
  sl.armed = true;
  return r;
}

unsigned* block_counter(int device_id) {
  reduce_slots& sl = slots_of(device_id);
  std::lock_guard<std::mutex> lock(sl.m);
  if (sl.counter == nullptr) {
    auto* c = static_cast<unsigned*>(allocate(device_id, alignment, memory::device));
#if TESSERA_HAS_CUDA
    if (is_gpu(get(), device_id)) {
      // On the device's stream, before the first reduction kernel: the legacy default stream
      // (cudaMemset) is not ordered with the non-blocking streams.
      device_guard guard(device_id);
      cuda_check(cudaMemsetAsync(c, 0, alignment, static_cast<cudaStream_t>(gpu(device_id).stream)), "cudaMemsetAsync",
                 device_id);
    } else
#endif
    {
      *c = 0;
    }
    sl.counter = c;
  }
  return sl.counter;
}

void read_results(const int* devices, std::size_t n, void* out, std::size_t bytes) {
  refuse_while_recording("a reduction to the host");
  refuse_while_capturing("a reduction to the host");
  auto* o = static_cast<char*>(out);
  std::vector<int> owner(n);
  // Across processes every wait ends with a health check, as synchronize_device's do: a wait may
  // have ended because the watchdog aborted work that a failed peer would never serve.
  const bool processes = dist::spans_processes();
  for (std::size_t i = 0; i < n; ++i) {
    owner[i] = info(devices[i]).rank;
    if (is_remote(devices[i])) continue;
    reduce_slots& sl = slots_of(devices[i]);
    const unsigned* done = nullptr;
    unsigned ticket = 0;
    {
      std::lock_guard<std::mutex> lock(sl.m);
      // The host's view of `done`: just past the result, as allocate_slot placed it.
      if (sl.armed) {
        done = reinterpret_cast<const unsigned*>(static_cast<const char*>(sl.result.host) + result_slot_bytes);
        ticket = sl.ticket;
      }
      sl.armed = false;
    }
    if (done) {
      const std::uint64_t word = wait_signal(devices[i], done, ticket);
      if (processes) dist::check_healthy("a wait on a GPU");
      if (bytes <= packed_result_bytes) {  // the value came with the ticket
        const auto value = static_cast<std::uint32_t>(word >> 32);
        std::memcpy(o + i * bytes, &value, bytes);
        continue;
      }
    } else {
      synchronize_device(devices[i]);  // this device's stream only
    }
    std::memcpy(o + i * bytes, mapped_result(devices[i]).host, bytes);
  }
  if (crosses_ranks(devices, n, "a reduction")) dist::share_blocks(out, n, bytes, owner.data(), "a reduction's partial results");
}

}  // namespace tessera::detail::rt
