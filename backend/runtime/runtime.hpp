// SPDX-License-Identifier: Apache-2.0
// Tessera runtime: the device table, memory, streams and host transfers. This header makes
// no CUDA call and includes no CUDA header, so dsl/ may include it; runtime.cpp holds every
// cuda* call of the runtime.
#pragma once
#include <tessera/device.hpp>
#include <tessera/error.hpp>
#include <tessera/memory.hpp>

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace tessera::detail::rt {

struct device_info {
  device_kind kind;
  int ordinal;              // CUDA ordinal, or host device index
  std::string name;         // "cuda:0 (NVIDIA H200)" / "host:0"
  int sm_count;             // 0 on host devices
  std::size_t l2_bytes;     // 0 on host devices
  int rank = 0;             // the process holding it (distributed::rank(); 0 in one process)
};

// True when this library was built with CUDA support.
bool built_with_cuda();
// Number of entries in the device table (GPUs + host devices created so far).
int device_count();
// Whether the device table exists (the first Tessera call builds it; distributed::init must come
// before).
bool table_built();
// True for a device of another process (rank): its shards are computed there, never here. Its
// parts get address space without memory (PROT_NONE: touching one faults), the shard loop skips
// it, and host transfers and copies involving it are messages between ranks (docs/distributed.md).
bool is_remote(int device_id);
// Across processes, the devices of devices() (this rank's default devices and every remote one)
// are shared: every rank knows them by the same place in that list. Local devices outside it
// (host_devices(n) beyond the default count, say) are rank-private: each rank has its own, and
// work on them involves no other rank. Always false in one process.
bool is_shared(int device_id);
// Whether an operation over these devices involves other ranks (some device is shared); throws
// distributed_error, naming `what`, when shared and rank-private devices are mixed, which would
// mean a different device on each rank.
bool crosses_ranks(const int* devices, std::size_t n, const char* what);
// Host devices are created on demand up to this many (host_devices(n) with n above it throws).
inline constexpr int max_host_devices = 64;
// True for a GPU of this process's device table (false for host devices and ids outside it).
bool is_gpu(int device_id);
// Throws backend_error naming `call` and the device when `code`, a cudaError_t, is not success:
// the check of the CUDA calls that backend libraries (cuBLAS, NVRTC loading, NCCL) make themselves.
void check_cuda(int code, const char* call, int device_id);
// The entry of a device; throws invalid_argument for an id outside the table. Lock-free: the
// table is filled once at initialization and never moves.
const device_info& info(int device_id);
// True when `device_id` can read and write memory of `peer_id` directly (peer access enabled
// at initialization between GPUs; false for host devices and for a device with itself).
bool can_access_peer(int device_id, int peer_id);

// -- memory -------------------------------------------------------------------------------
// Free and total bytes of a device (host devices: MemAvailable and MemTotal).
void memory_info(int device_id, std::size_t& free, std::size_t& total);
// Throws out_of_memory when `bytes` exceed the free memory of `device_id`. allocate() calls it;
// callers that allocate on several devices check all of them first.
void check_free(int device_id, std::size_t bytes);
// Allocates `bytes` (256-byte aligned) on the device. Unified memory is advised to prefer the
// owner and prefetched there on the owner's stream. bytes == 0 returns nullptr.
void* allocate(int device_id, std::size_t bytes, memory kind);
// GPU memory goes back to the device's cache (freed by check_free when a request needs it, or by
// tessera::reclaim()); the next allocation of its size class takes it, in stream order.
// `host_touched`: host code may have pulled the pages of a unified block to the host.
void deallocate(int device_id, void* p, std::size_t bytes, memory kind, bool host_touched = false) noexcept;
// A number that names the cudaMalloc allocation starting at `base` (a memory::device block of a GPU
// of this process) for as long as it lives: a later allocation at the same address gets another.
// 0 for anything else. Another process that mapped the block through CUDA IPC knows by it whether
// its mapping still shows this block (backend/comm/ipc_exchange.cpp writes into such arrays).
std::uint64_t allocation_id(const void* base);
// The block at `base` (one with an allocation_id) may be mapped by other processes from now on: it
// is never freed but retired (retired_blocks), until free_retired.
void mark_exported(const void* base);
// The retired blocks of a GPU of this process, with their ids (at most `most`, oldest first), and
// the free of one of them, once no other process has it mapped.
std::vector<std::pair<void*, std::uint64_t>> retired_blocks(int device_id, std::size_t most);
void free_retired(int device_id, void* p) noexcept;
// Bytes of freed GPU memory a device's cache holds.
std::size_t pool_bytes(int device_id);

// A grow-only device buffer of at least `bytes` per device, for reductions' temporary storage
// and results. Valid until the next scratch() call for that device from any thread; callers
// finish the work that uses it (stream order plus a host wait) before returning.
void* scratch(int device_id, std::size_t bytes);
// Gives the device's scratch back to its memory cache (tessera::reclaim(): the scratch only grows,
// to the largest reduction so far). Call it between operations only.
void release_scratch(int device_id);

// What a one-pass reduction kernel needs besides its scratch: a block counter (zero between
// launches: the last block resets it) in device memory, and a small result slot in pinned host
// memory mapped into the device's address space, so that a partial reaches the host without a
// copy launch. Both are allocated on first use and live as long as the process. Host devices
// get plain host memory. Like scratch(), one reduction at a time per device.
struct result_slot {
  void* host;    // where the host reads it (after waiting for the device's stream)
  void* device;  // where a kernel writes it
  // With armed_result: the kernel writes `ticket` to `done` (mapped too) once the result is there.
  // A result of up to packed_result_bytes comes with it instead, in one 8-byte store at `done`:
  // the ticket in the low 32 bits, the value's bytes in the high 32 (`host` is then not written).
  unsigned* done = nullptr;
  unsigned ticket = 0;
};
inline constexpr std::size_t result_slot_bytes = 64;
inline constexpr std::size_t packed_result_bytes = 4;
result_slot mapped_result(int device_id);
// mapped_result, for a kernel that also signals `done`: read_results then waits for that signal
// rather than for the whole stream (a spin on host memory, about a microsecond sooner than
// cudaStreamSynchronize). Host devices and other ranks' devices get no signal, nor any with
// TESSERA_REDUCE_SIGNAL=0.
result_slot armed_result(int device_id);
unsigned* block_counter(int device_id);

// Reads the full-reduction results of `n` devices into `out` (`bytes` each, in order): each of
// this rank's devices after waiting for its stream (or its armed slot's signal), from its mapped
// slot; the others' from their ranks (one exchange). The same values on every rank; collective
// when the devices span ranks.
void read_results(const int* devices, std::size_t n, void* out, std::size_t bytes);

// A flag that host threads set and launches on any thread clear, atomically: through
// std::atomic_ref in memory.cpp, so that this header, in every program, needs no <atomic>. Loads
// acquire, stores release, exchange does both.
class touched_flag {
 public:
  bool load() const noexcept;
  void store(bool v) noexcept;
  bool exchange(bool v) noexcept;

 private:
  bool v_ = false;
};

// One allocation on one device. `host_touched` records that host code may have pulled pages
// of a unified buffer to the host; the next launch that reads or writes it prefetches it back.
struct buffer {
  buffer(int dev, std::size_t n_bytes, memory k)
      : device(dev), bytes(n_bytes), kind(k), ptr(allocate(dev, n_bytes, k)) {}
  ~buffer() { deallocate(device, ptr, bytes, kind, host_touched.load()); }
  buffer(const buffer&) = delete;
  buffer& operator=(const buffer&) = delete;
  int device;
  std::size_t bytes;
  memory kind;
  void* ptr;
  touched_flag host_touched;
};

// Before a launch on the owner: if host code touched the buffer, prefetch it back (stream
// ordered, no host wait) and clear the flag. No-op for device memory and host devices.
void make_resident(buffer& b);
// Gives host code direct access to a unified buffer: waits for the owner's stream and marks
// the buffer as touched. Throws for memory::device on a GPU.
void* host_access(buffer& b);

// -- streams ------------------------------------------------------------------------------
// The device's stream as an opaque pointer (cudaStream_t on GPUs, nullptr on host devices): its
// main stream, or its side stream inside a side_stream_scope on this thread.
void* stream(int device_id);
// Whether this thread is inside a side_stream_scope that took effect.
bool on_side_stream();
// While it is open, this thread's work on GPUs (launches, copies, the memory cache's stream order:
// everything that asks stream()) goes to the GPUs' side streams, which first wait for the work
// queued on the main streams; end() closes it, join() also makes every main stream wait for its
// side stream, so work queued on a main stream after join() sees the scope's work (the destructor
// joins if join() was not called). hide_communication's boundary pass and halo copies run in one,
// so the interior pass queued on the main streams between end() and join() runs beside them. A
// no-op while capturing, inside another scope, and without GPUs.
class side_stream_scope {
 public:
  side_stream_scope();
  ~side_stream_scope();
  void end() noexcept;
  void join();
  side_stream_scope(const side_stream_scope&) = delete;
  side_stream_scope& operator=(const side_stream_scope&) = delete;

 private:
  bool active_ = false;
};
// A second stream of a GPU, beside the main one (hide_communication's copies, the packing of an
// NCCL exchange); nullptr on host devices. Work on it orders against the main stream only through
// events.
void* side_stream(int device_id);
// Makes `device_id` current for CUDA runtime calls made by this thread (no-op on host).
void set_device(int device_id);
// An event that orders streams (timing off) of GPU `device_id`: from the GPU's spare events, or
// new. give_event hands it back for reuse at once: a wait queued on an
// event keeps the record it saw, so recording it again cannot release that wait early (the side
// stream scopes rely on the same rule). A re-shard or halo exchange uses a dozen events, and a
// cudaEventCreate and cudaEventDestroy per event cost the host more than the reuse.
void* take_event(int device_id);
void give_event(int device_id, void* event) noexcept;
// Stream `waiter` of GPU `device_id` (current) goes on only after the work queued on its stream
// `after` so far (one pooled event).
void stream_after(int device_id, void* waiter, void* after);
// The device of the thread's innermost active DeviceScope, or -1 outside any scope: new arrays
// without an explicit placement live there (PyTorch's and CuPy's current device).
int scoped_device();
// Current CUDA device of this thread, to restore it after work (-1 on host-only builds).
int get_cuda_device();
void restore_cuda_device(int ordinal);
// Restores the thread's current CUDA device when the scope ends, normally or by an exception:
// the one guard of every path that switches devices (the shard loop, collectives).
class device_restorer {
 public:
  device_restorer() : saved_(get_cuda_device()) {}
  // Only when the device changed: cudaSetDevice of the device already current still costs a call,
  // on every one-GPU operation. Read again, not taken from the runtime's cache, since a library
  // call (cusolverMg) may have switched it behind the cache; while the context is the cached
  // device's, that reading is one cuCtxGetCurrent.
  ~device_restorer() {
    try {
      if (saved_ != get_cuda_device()) restore_cuda_device(saved_);
    } catch (...) {  // a destructor must not throw; the work's own error matters more
    }
  }
  device_restorer(const device_restorer&) = delete;
  device_restorer& operator=(const device_restorer&) = delete;

 private:
  int saved_;
};
void synchronize_device(int device_id);
// Throws backend_error naming the kernel launch, the device and the shard if the last launch
// on this thread failed; in TESSERA_DEBUG_SYNC=1 mode also synchronizes the stream. `by_driver`:
// the launch went through driver_launch, which reported its own error (and any sticky one), so
// the runtime's last-error slot is not read (one CUDA call less per launch).
void check_launch(int device_id, int shard, const char* what, bool by_driver = false);
// Launches `kernel` (a __global__ function's host symbol; the device `device_id` current on this
// thread) with the driver's cuLaunchKernel, found once through cudaGetDriverEntryPointByVersion (no
// link against libcuda; the kernel's cudaFunction_t looked up once per device and thread):
// 0.3-0.5 us less host time per launch than <<<>>> or cudaLaunchKernel on H200s, where a launch
// costs 3.5-4.5 us (docs/performance.md). Returns false, queuing nothing, where the entry point is
// unavailable or TESSERA_RUNTIME_LAUNCH=1 (the caller launches through the runtime); throws
// backend_error naming `what`, the device and the shard when the launch fails.
// Whether driver_launch will launch (the entry point was found and TESSERA_RUNTIME_LAUNCH is not 1).
bool driver_launch_enabled();
bool driver_launch(const void* kernel, const unsigned (&grid)[3], const unsigned (&block)[3], std::size_t shared_bytes,
                   void** args, void* stream, int device_id, int shard, const char* what);
// Launches `kernel` (its host symbol or a cudaKernel_t; `args` point to each argument, as
// cudaLaunchKernel's) on `stream` of the current device `device_id` as a one-node CUDA graph kept
// for this kernel, stream and shape (kept_graphs.cpp): a kept graph costs the host about half a
// direct launch on H200s and reaches the GPU sooner. `bytes` (`size` of them) are all the
// arguments' bytes, compared with the last launch's so that unchanged parameters are not set
// again; null: they are set at every launch. Returns false, queuing nothing, on a shape's first
// launch, while capturing, where the graph cannot be made and under TESSERA_GRAPH_LAUNCH=0 (the
// caller launches directly); throws backend_error naming `what`, the device and the shard when
// the launch fails.
bool graph_launch(const void* kernel, const unsigned (&grid)[3], const unsigned (&block)[3], std::size_t shared_bytes,
                  void** args, const void* bytes, std::size_t size, void* stream, int device_id, int shard,
                  const char* what);
// Kernels launched as kept graphs so far, all devices, and how many of those launches set their
// graph's parameters first (for the tests).
std::uint64_t graph_launches();
std::uint64_t graph_parameter_sets();

// -- dispatch -------------------------------------------------------------------------------
// The buffers one task reads or writes, as its planner found them. The shard loop makes each
// resident on its owner just before the task runs (a unified buffer that host code touched is
// prefetched back), so residency is decided in one place rather than by every planner. Up to
// six buffers are held without an allocation.
class buffer_list {
 public:
  void add(buffer* b) {
    if (b == nullptr || contains(b)) return;
    if (count_ < inline_count) first_[count_++] = b;
    else more_.push_back(b);
  }
  bool contains(const buffer* b) const {
    for (int i = 0; i < count_; ++i)
      if (first_[i] == b) return true;
    for (auto* m : more_)
      if (m == b) return true;
    return false;
  }
  template <class F>
  void for_each(F&& f) const {
    for (int i = 0; i < count_; ++i) f(*first_[i]);
    for (auto* m : more_) f(*m);
  }

 private:
  static constexpr int inline_count = 6;
  buffer* first_[inline_count] = {};
  int count_ = 0;
  std::vector<buffer*> more_;
};
// Makes every buffer of the list resident on its owner (make_resident).
void make_resident(const buffer_list& uses);

// One planned shard: `run(task, device, shard, host)` executes it on its device's executor (the
// typed call, instantiated once per task type by backend/execute.hpp), after the buffers it
// `uses` are made resident.
struct shard_launch {
  int device;
  int shard;
  bool host;
  std::int64_t n;
  void (*run)(const void* task, int device, int shard, bool host);
  const void* task;
  const buffer_list* uses = nullptr;
  // Whether the GPU shards may be queued by the launcher threads (launch_in_parallel): the task's
  // GPU executor only touches the runtime's thread-safe state.
  bool parallel = false;
  // A copy of the task that outlives the caller's (a captured host operation keeps one), and
  // its deletion.
  void* (*clone)(const void* task) = nullptr;
  void (*destroy)(void* task) = nullptr;
};
// A task type, for the shard loop: its size, its typed run (as shard_launch::run) and its copy and
// deletion (as shard_launch::clone and destroy). Tasks listed this way are trivially copyable.
struct task_type {
  std::size_t size;
  void (*run)(const void* task, int device, int shard, bool host);
  void* (*clone)(const void* task);
  void (*destroy)(void* task);
  void (*destroy_in_place)(void* task);  // null when the task is trivially destructible
  bool parallel;                         // as shard_launch::parallel
};
// The jobs of one operation, all with tasks of one type, held without knowing that type: an
// assignment plans into it (dsl/tessera/assign.hpp), so that the job vector and the launch list
// are compiled once here rather than once per expression type. Room for `capacity` jobs is made up
// front: the tasks and use lists never move while the shard loop points at them.
struct job_storage;
class job_list {
 public:
  job_list(const task_type& type, std::size_t capacity);
  job_list(const job_list&) = delete;
  job_list& operator=(const job_list&) = delete;
  ~job_list();
  // Adds a job and returns the storage of its task (suitably aligned for any task type, at most
  // alignof(std::max_align_t)), for the caller to construct the task in. Whether the job runs
  // on the host thread pool or a GPU's stream follows from the device.
  void* add(int device, int shard, std::int64_t n, buffer_list&& uses);
  // run_shards over the jobs added.
  void run(bool sequential) const;

 private:
  const task_type* type_;
  std::size_t slots_;  // max_align_t units per task
  job_storage* s_;     // the jobs' tasks, buffer lists and launches (dispatch.cpp)
};

// Host shards at least this large run concurrently on the host thread pool when several are
// launched with par.
inline constexpr std::int64_t host_parallel_threshold = std::int64_t(1) << 16;
// Runs the shards of one operation: GPU shards first, each on its device's stream without waiting,
// so that every GPU is busy before the host works (the shards of several GPUs at once through the
// launcher threads when the task allows it, else in order from this thread); then host shards, the large ones concurrently on the host thread pool. With `sequential` (seq) every
// shard runs alone and is waited for. Restores the caller's current CUDA device, and rethrows the
// first error after every started shard has finished.
void run_shards(const shard_launch* shards, std::size_t count, bool sequential);
// GPU launcher threads (launchers.cpp): queues the shards (GPU shards, none remote) of two or more
// GPUs at once, the first GPU's from this thread and each other GPU's from its launcher thread when
// that one is spinning (else from here too); returns once all are queued, rethrowing the error of
// the first shard that threw. False, having run nothing, when the shards are on one GPU, another
// thread is using the launchers or one cannot start. TESSERA_PARALLEL_LAUNCH=0 turns the
// launchers off; TESSERA_LAUNCH_SPIN_US (default 500) is how long an idle one spins before it
// sleeps (an invalid value throws invalid_argument from parallel_launch_enabled). Not used with
// fewer cores than GPUs + 1 (the launchers spin).
bool parallel_launch_enabled();
bool launch_in_parallel(const shard_launch* const* shards, std::size_t count);
// Groups of shards handed to launcher threads since the process started.
std::uint64_t launcher_handoffs();

// -- host threads ---------------------------------------------------------------------------
// Within one host shard, work is split into chunks of this many elements (the last one shorter),
// which run on the host thread pool when there are two or more. The chunks do not depend on the
// thread count, and a full reduction folds each chunk on its own and combines the partials in
// chunk order, so a host sum has the same bits whatever the thread count (docs/performance.md).
inline constexpr std::int64_t host_chunk_elements = std::int64_t(1) << 16;
inline constexpr int max_host_threads = 1024;
// Threads that host work uses, the calling thread included: TESSERA_HOST_THREADS (read once; an
// invalid value throws invalid_argument from every call that needs it), else the number of cores.
int host_threads();
// Uses n threads from now on (n <= 0: back to TESSERA_HOST_THREADS or the core count); for tests and
// benchmarks. Throws invalid_argument when called while host work runs.
void set_host_threads(int n);
// Runs body(ctx, i) for every i in [0, count) on the host thread pool, the calling thread taking
// part, and returns when every body has returned. Once a body throws, bodies not yet started are
// skipped, and the exception of the lowest index that threw is rethrown here. Nested calls (from a
// body) are allowed. One pool serves every caller: the threads in use stay at host_threads().
void parallel_for(std::int64_t count, void (*body)(const void* ctx, std::int64_t i), const void* ctx);

// Copies `bytes` of contiguous memory from one device to another (or within one), ordered
// after the work queued on both: host devices with memcpy, GPU <-> host device through the
// staging buffers below (waits), GPU <-> GPU with a peer copy on the destination's stream (the
// host does not wait). Between ranks: a message from the source's rank to the destination's
// (both wait; every rank calls it, the others return at once).
// `dst_buf` and `src_buf`, the allocations holding dst and src when known, are made resident first.
void copy_between(int dst_device, void* dst, int src_device, const void* src, std::size_t bytes,
                  buffer* dst_buf = nullptr, buffer* src_buf = nullptr);
// The same for `height` rows of `width` bytes, `dst_pitch` / `src_pitch` bytes apart: one
// cudaMemcpy3DPeerAsync between GPUs instead of a pack, a copy and an unpack.
void copy_between_2d(int dst_device, void* dst, std::size_t dst_pitch, int src_device, const void* src,
                     std::size_t src_pitch, std::size_t width, std::size_t height);
// One region of copy_between_many: the arguments of copy_between_2d.
struct copy_region {
  int dst_device;
  void* dst;
  std::size_t dst_pitch;
  int src_device;
  const void* src;
  std::size_t src_pitch, width, height;
  buffer* dst_buf = nullptr;  // the allocations holding dst and src, made resident before the copy
  buffer* src_buf = nullptr;
};
// Several copies at once (disjoint destinations), each ordered as copy_between orders one: the
// copies between GPUs of this process run concurrently, behind one cross-device wait per pair of
// devices rather than a chain of waits per copy (update_halo, re-sharding).
void copy_between_many(const copy_region* regions, std::size_t n);
// A batch of copies between GPUs that moves at least this much is a large one (a re-shard, a
// transpose; not a halo): the one-kernel copies and comm::exchange take only those by default.
inline constexpr std::size_t large_copy_batch_bytes = std::size_t{32} << 20;
// Whether copy_between_many moves this batch's copies between GPUs with one kernel per device
// (cuda::gather_rows: by default each source writes every destination at once over NVLink, a
// scatter; pulled, each destination reads every source at once): by default a large batch (at
// least large_copy_batch_bytes) that crosses between 3 or more GPUs of this process with NVLink
// peer access for every pair it crosses; TESSERA_PEER_KERNEL=3 every batch, 0 none. comm::exchange
// leaves such a batch to it (a re-shard of 16384^2 floats on 4 H200s: 0.756x of one pair's
// bandwidth per device, against 0.64x through NCCL and 0.48x on the copy engines).
bool gathers_between_gpus(const copy_region* regions, std::size_t n);

// -- hide_communication ----------------------------------------------------------------------
// Copies started by start_copies and not yet joined: which streams wait for what (CUDA events,
// opaque here). finish_copies (or the destructor) joins them.
class copy_ticket {
 public:
  copy_ticket() = default;
  copy_ticket(const copy_ticket&) = delete;
  copy_ticket& operator=(const copy_ticket&) = delete;
  ~copy_ticket();
  struct wait {
    int device;   // whose stream waits
    void* event;  // recorded on a destination's copy stream after its copies
    int from;     // that destination
  };
  struct held {
    int device;
    void* event;
  };
  std::vector<wait> waits;
  std::vector<held> events;  // given back (give_event) once the waits are queued
};
// Like copy_between_many, except that the copies between GPUs of this process run on each
// destination's copy stream, after the work queued so far on both devices, and that nothing
// queued later waits for them until finish_copies: work queued in between on the main streams
// runs alongside the copies, so it must not touch the bytes they move. Other copies (host
// devices, other ranks) are done before start_copies returns.
void start_copies(const copy_region* regions, std::size_t n, copy_ticket& ticket);
// Every stream involved waits for the ticket's copies (later work sees them; sources may be
// written again).
void finish_copies(copy_ticket& ticket);

// While this thread records the body of hide_communication, every operation that queues work
// (launches, copies, host transfers, collectives) is refused with an invalid_argument naming
// `what`: only assignments may be recorded, and they are replayed after the body.
void set_recording(bool on);
bool recording();
void refuse_while_recording(const char* what);

// -- captured loops (tessera::capture, dsl/tessera/capture.hpp; backend/runtime/capture.cpp) --
// While this thread runs a capture's body, the work it queues is recorded, not run: on GPUs into
// CUDA graphs (see `joint` below), on host devices as a list of operations. Memory the body
// allocates is kept until release_capture. What would wait for the host is refused by name.
struct capture_session;
// `joint`: one capture over every GPU, joined through events (needed when the body moves data
// between GPUs); otherwise each GPU's stream is captured into a graph of its own, and a replay is
// one launch per GPU without any cross-device wait. Work that links two GPUs in an independent
// capture is not queued and marks the session (capture_needs_joint): tessera::capture then
// records the body again, jointly.
capture_session* begin_capture(bool joint = false);
bool capture_needs_joint(const capture_session* s);
// Ends the recording (instantiates the graph); throws a named error when the body's GPU work
// could not be captured. On a throw, the caller still owns the session (release_capture).
void end_capture(capture_session* s);
// Ends a recording whose body threw, and releases it.
void abort_capture(capture_session* s) noexcept;
// Runs the recorded work once more, ordered after the work queued before on every device and
// before the work queued after.
void replay(capture_session* s);
// Waits for the replays, frees the graph and the memory kept for it.
void release_capture(capture_session* s) noexcept;
bool capturing();
void refuse_while_capturing(const char* what);
// Called before work that links two GPUs (a peer copy): true in an independent capture, where the
// caller queues nothing (the body will be recorded again, jointly).
bool capture_links_devices();

// -- host transfers (through pinned staging buffers; each call waits for the copy) ------------
// Across processes copy_to_host is collective: the device's rank sends the rows to every rank, so
// every rank reads the same global values (to_host, at, printing); copy_from_host writes only devices of
// this rank (each rank fills its own parts from its own host values) and is a no-op for others.
// Each GPU owns two pinned staging chunks of this size (allocated on its first transfer); a
// larger transfer is split into chunks and double-buffered.
inline constexpr std::size_t staging_chunk_bytes = std::size_t(16) << 20;
// Copies `height` rows of `width` bytes from device memory to host memory; rows start every
// `src_pitch` bytes on the device and every `dst_pitch` bytes on the host. Ordered after the
// work already queued on the device's stream.
void copy_to_host(int device_id, void* dst, std::size_t dst_pitch, const void* src,
                  std::size_t src_pitch, std::size_t width, std::size_t height);
void copy_from_host(int device_id, void* dst, std::size_t dst_pitch, const void* src,
                    std::size_t src_pitch, std::size_t width, std::size_t height);
// One region of a host read: the arguments of copy_to_host.
struct host_region {
  int device;
  void* dst;
  std::size_t dst_pitch;
  const void* src;
  std::size_t src_pitch, width, height;
};
// Reads several regions to the host, each as copy_to_host does. Across processes (collective then)
// each rank reads its own devices' regions and one exchange gives every rank all of them (one
// MPI_Allgatherv, where a copy_to_host per region would be one broadcast each).
void copy_regions_to_host(const host_region* regions, std::size_t n);

// -- random streams -----------------------------------------------------------------------------
// The global seed of rand and randn (an atomic, here so that programs include no <atomic>):
// advance_seed returns it and advances it by one stream; set_seed restarts the sequence.
std::uint64_t advance_seed();
void set_seed(std::uint64_t s);

}  // namespace tessera::detail::rt
