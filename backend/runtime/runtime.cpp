// SPDX-License-Identifier: Apache-2.0
// The device table, the default device set, the current device, streams and synchronization.
#include <backend/process/mpi.hpp>
#include <backend/runtime/state.hpp>
#include <tessera/device.hpp>
#include <tessera/distributed.hpp>

#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <string>
#include <vector>

namespace tessera {
namespace detail::rt {
namespace {

// The thread's current Tessera device id (-1: the first device of the default set).
thread_local int tl_current = -1;

#if TESSERA_HAS_CUDA
// The thread's CUDA device as last set or read by the runtime (-1: not known yet). Lets
// set_device skip cudaSetDevice when nothing changes.
thread_local int tl_cuda_device = -1;
// The CUDA devices to restore when the thread's active DeviceScopes end, innermost last.
thread_local std::vector<int> tl_saved_cuda;

bool debug_sync() {
  static const bool on = [] {
    const char* v = std::getenv("TESSERA_DEBUG_SYNC");
    return v != nullptr && std::strcmp(v, "1") == 0;
  }();
  return on;
}
#endif

[[noreturn]] void throw_bad_device(int device_id) {
  const state& s = get();
  const int g = s.gpu_count, h = s.host_count.load();
  throw invalid_argument("tessera: no device with id " + std::to_string(device_id) + "; the device table holds " +
                         std::to_string(g) + " GPU(s) (ids 0.." + std::to_string(g) + ") and " + std::to_string(h) +
                         " host device(s) (ids " + std::to_string(g) + ".." + std::to_string(g + h) +
                         ", half-open); a default-constructed Device has id -1");
}

#if TESSERA_HAS_CUDA
namespace {
// cuLaunchKernel's and cuGetErrorString's signatures, without cuda.h's CUresult and handle types.
using cu_launch_kernel = int (*)(void*, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, void*,
                                 void**, void**);
using cu_error_string = int (*)(int, const char**);
using cu_ctx_get_current = int (*)(void**);
struct driver_entries {
  cu_launch_kernel launch = nullptr;
  cu_error_string error_string = nullptr;
  cu_ctx_get_current ctx_get_current = nullptr;  // found even under TESSERA_RUNTIME_LAUNCH=1
};
const driver_entries& driver() {
  static const driver_entries d = [] {
    driver_entries e;
#if CUDART_VERSION >= 12050  // cudaGetDriverEntryPointByVersion: CUDA 12.5 on; before, <<<>>>
    void* launch = nullptr;
    void* error_string = nullptr;
    void* ctx = nullptr;
    cudaDriverEntryPointQueryResult found = cudaDriverEntryPointSymbolNotFound;
    if (cudaGetDriverEntryPointByVersion("cuCtxGetCurrent", &ctx, 12000, cudaEnableDefault, &found) == cudaSuccess &&
        found == cudaDriverEntryPointSuccess)
      e.ctx_get_current = reinterpret_cast<cu_ctx_get_current>(ctx);
    (void)cudaGetLastError();
    const char* off = std::getenv("TESSERA_RUNTIME_LAUNCH");
    if (off != nullptr && std::atoi(off) != 0) return e;
    if (cudaGetDriverEntryPointByVersion("cuLaunchKernel", &launch, 12000, cudaEnableDefault, &found) != cudaSuccess ||
        found != cudaDriverEntryPointSuccess)
      launch = nullptr;
    if (cudaGetDriverEntryPointByVersion("cuGetErrorString", &error_string, 12000, cudaEnableDefault, &found) !=
            cudaSuccess ||
        found != cudaDriverEntryPointSuccess)
      error_string = nullptr;
    (void)cudaGetLastError();  // a failed lookup leaves no error behind for the next launch check
    if (launch != nullptr && error_string != nullptr) {
      e.launch = reinterpret_cast<cu_launch_kernel>(launch);
      e.error_string = reinterpret_cast<cu_error_string>(error_string);
    }
#endif
    return e;
  }();
  return d;
}
}  // namespace
#endif

#if TESSERA_HAS_CUDA
// Everything about GPUs that the constructor learns; a failure throws and the next get()
// retries the whole initialization.
void init_gpus(state& s) {
  int count = 0;
  // No driver, no device or CUDA_VISIBLE_DEVICES="" all mean: host devices only.
  if (cudaGetDeviceCount(&count) != cudaSuccess || count <= 0) {
    (void)cudaGetLastError();
    return;
  }
  int original = 0;
  cuda_check(cudaGetDevice(&original), "cudaGetDevice", original);
  s.gpus = std::make_unique<gpu_state[]>(static_cast<std::size_t>(count));
  for (int d = 0; d < count; ++d) {
    cudaDeviceProp prop{};
    cuda_check(cudaGetDeviceProperties(&prop, d), "cudaGetDeviceProperties", d);
    int concurrent = 0;
    cuda_check(cudaDeviceGetAttribute(&concurrent, cudaDevAttrConcurrentManagedAccess, d), "cudaDeviceGetAttribute", d);
    cuda_check(cudaSetDevice(d), "cudaSetDevice", d);
    gpu_state& g = s.gpus[static_cast<std::size_t>(d)];
    cuda_check(cudaStreamCreateWithFlags(&g.stream, cudaStreamNonBlocking), "cudaStreamCreateWithFlags", d);
    // Highest priority: a boundary pass on it gets SMs ahead of the interior on `stream`.
    int least = 0, greatest = 0;
    cuda_check(cudaDeviceGetStreamPriorityRange(&least, &greatest), "cudaDeviceGetStreamPriorityRange", d);
    cuda_check(cudaStreamCreateWithPriority(&g.copy_stream, cudaStreamNonBlocking, greatest),
               "cudaStreamCreateWithPriority", d);
    if (count > 2 && peer_streams_enabled()) {
      g.peer_streams.assign(static_cast<std::size_t>(count), nullptr);
      for (auto& st : g.peer_streams)
        cuda_check(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking), "cudaStreamCreateWithFlags", d);
    }
    g.concurrent_managed = concurrent != 0;
    // The stream's creation made the primary context current.
    if (const auto get_ctx = driver().ctx_get_current; get_ctx != nullptr && get_ctx(&g.context) != 0)
      g.context = nullptr;
    s.table.push_back({device_kind::cuda, d, "cuda:" + std::to_string(d) + " (" + prop.name + ")",
                       prop.multiProcessorCount, static_cast<std::size_t>(prop.l2CacheSize)});
  }
  s.paths.assign(static_cast<std::size_t>(count) * static_cast<std::size_t>(count), copy_path::host_staged);
  for (int a = 0; a < count; ++a) {
    cuda_check(cudaSetDevice(a), "cudaSetDevice", a);
    for (int b = 0; b < count; ++b) {
      copy_path& path = s.paths[static_cast<std::size_t>(a * count + b)];
      if (a == b) {
        path = copy_path::self;
        continue;
      }
      int can = 0;
      cuda_check(cudaDeviceCanAccessPeer(&can, a, b), "cudaDeviceCanAccessPeer", a);
      if (!can) continue;
      const cudaError_t e = cudaDeviceEnablePeerAccess(b, 0);
      if (e == cudaErrorTooManyPeers) {  // PCIe boxes cap peers per device: stage via host
        (void)cudaGetLastError();
        continue;
      }
      if (e != cudaErrorPeerAccessAlreadyEnabled) cuda_check(e, "cudaDeviceEnablePeerAccess", a);
      (void)cudaGetLastError();
      int atomics = 0;
      cuda_check(cudaDeviceGetP2PAttribute(&atomics, cudaDevP2PAttrNativeAtomicSupported, a, b),
                 "cudaDeviceGetP2PAttribute", a);
      // Native peer atomics are an NVLink (or C2C) property; plain PCIe P2P lacks them.
      path = atomics ? copy_path::nvlink : copy_path::pcie;
    }
  }
  cuda_check(cudaSetDevice(original), "cudaSetDevice", original);
  tl_cuda_device = original;
  s.gpu_count = count;
}
#endif

// This rank's default devices, from the environment: every visible GPU, or host devices. Read
// by the state's constructor (to tell the other ranks) and by default_devices(), so both agree.
struct default_spec {
  bool gpus = false;
  int count = 0;
  std::string error;
  bool invalid_value = false;
};

default_spec local_default_spec(int gpu_count) {
  default_spec c;
  const char* backend_env = std::getenv("TESSERA_BACKEND");
  const std::string backend = backend_env ? backend_env : "";
  if (backend != "" && backend != "auto" && backend != "host" && backend != "cuda") {
    c.error = "tessera: TESSERA_BACKEND=" + backend + " is not a backend; accepted values are host, cuda and auto "
              "(or unset: every visible GPU, else host devices)";
    c.invalid_value = true;
    return c;
  }
  if (backend == "cuda" && gpu_count == 0) {
    c.error = built_with_cuda()
                  ? "tessera: TESSERA_BACKEND=cuda but no GPU is visible (cudaGetDeviceCount found none; check the "
                    "driver and CUDA_VISIBLE_DEVICES), unset it or use TESSERA_BACKEND=host"
                  : "tessera: TESSERA_BACKEND=cuda but this Tessera was built without CUDA (TESSERA_ENABLE_CUDA=OFF "
                    "or no nvcc at configure time); unset it or use TESSERA_BACKEND=host";
    return c;
  }
  if (backend != "host" && gpu_count > 0) {
    c.gpus = true;
    c.count = gpu_count;
    return c;
  }
  c.count = 1;
  if (const char* v = std::getenv("TESSERA_HOST_DEVICES"); v != nullptr && *v != '\0') {
    char* end = nullptr;
    const long parsed = std::strtol(v, &end, 10);
    if (*end != '\0' || parsed < 1 || parsed > max_host_devices) {
      c.error = std::string("tessera: TESSERA_HOST_DEVICES=") + v + " is not a device count; expected an integer from 1 to " +
                std::to_string(max_host_devices);
      c.invalid_value = true;
      c.count = 0;
      return c;
    }
    c.count = static_cast<int>(parsed);
  }
  return c;
}

// The default device set, chosen once from the environment. An invalid environment is kept
// as an error that every devices() call reports, so gpus() and host_devices() still work.
struct default_choice {
  DeviceSet set;
  std::string error;
  bool invalid_value = false;
};

default_choice choose_default() {
  default_choice c;
  const state& s = get();
  const default_spec spec = local_default_spec(s.gpu_count);
  if (!spec.error.empty()) {
    c.error = spec.error;
    c.invalid_value = spec.invalid_value;
    return c;
  }
  const DeviceSet local = spec.gpus ? gpus() : host_devices(spec.count);
  // Across processes: every rank's default devices, in rank order, the same list on every rank.
  for (std::size_t q = 0; q < s.rank_devices.size(); ++q) {
    if (static_cast<int>(q) == dist::world_rank()) c.set.insert(c.set.end(), local.begin(), local.end());
    for (int id : s.rank_devices[q]) c.set.emplace_back(id);
  }
  if (s.rank_devices.empty()) c.set = local;
  return c;
}

const default_choice& default_devices() {
  static const default_choice c = choose_default();
  if (!c.error.empty()) {
    if (c.invalid_value) throw invalid_argument(c.error);
    throw error(c.error);
  }
  return c;
}

// Tells the other ranks this rank's default devices and appends theirs to the table, after the
// host entries (ids from remote_base on), in rank order.
void add_remote_devices(state& s) {
  const int me = dist::world_rank();
  for (device_info& d : s.table) d.rank = me;
  const default_spec spec = local_default_spec(s.gpu_count);
  std::vector<dist::device_record> mine;
  for (int i = 0; i < spec.count; ++i) {
    dist::device_record r{};
    r.kind = static_cast<int>(spec.gpus ? device_kind::cuda : device_kind::host);
    r.ordinal = i;
    const std::string& name = s.table[static_cast<std::size_t>(spec.gpus ? i : s.gpu_count + i)].name;
    std::strncpy(r.model, name.c_str(), sizeof r.model - 1);
    mine.push_back(r);
  }
  s.shared_lo = spec.gpus ? 0 : s.gpu_count;
  s.shared_hi = s.shared_lo + spec.count;
  const auto all = dist::exchange_devices(mine);
  s.rank_devices.assign(all.size(), {});
  for (std::size_t q = 0; q < all.size(); ++q) {
    if (static_cast<int>(q) == me) continue;
    for (const dist::device_record& r : all[q]) {
      s.rank_devices[q].push_back(static_cast<int>(s.table.size()));
      s.table.push_back({static_cast<device_kind>(r.kind), r.ordinal, "rank" + std::to_string(q) + "/" + r.model, 0, 0,
                         static_cast<int>(q)});
    }
  }
}

std::atomic<bool> table_started{false};

}  // namespace

state::state() {
#if TESSERA_HAS_CUDA
  init_gpus(*this);
#endif
  for (int h = 0; h < max_host_devices; ++h)
    table.push_back({device_kind::host, h, "host:" + std::to_string(h), 0, 0});
  remote_base = gpu_count + max_host_devices;
  if (dist::spans_processes()) add_remote_devices(*this);
}

state& get() {
  static state* s = [] {
    table_started.store(true);
    return new state();  // leaked on purpose, see state.hpp
  }();
  return *s;
}

bool table_built() { return table_started.load(); }

bool is_remote(int device_id) { return device_id >= get().remote_base; }

bool is_shared(int device_id) {
  if (!dist::spans_processes()) return false;
  const state& s = get();
  return device_id >= s.remote_base || (device_id >= s.shared_lo && device_id < s.shared_hi);
}

bool crosses_ranks(const int* devices, std::size_t n, const char* what) {
  if (!dist::spans_processes()) return false;
  std::size_t shared = 0;
  for (std::size_t i = 0; i < n; ++i) shared += is_shared(devices[i]) ? 1 : 0;
  if (shared != 0 && shared != n) {
    std::string list;
    for (std::size_t i = 0; i < n; ++i) list += (i ? ", " : "") + Device(devices[i]).name();
    throw distributed_error("tessera: " + std::string(what) + " over [" + list +
                            "] mixes devices of devices() (shared by all ranks) with rank-private devices (local "
                            "devices outside devices(), a different one on each rank); use devices from devices() "
                            "only, or private ones only");
  }
  return shared != 0;
}

#if TESSERA_HAS_CUDA
void cuda_check(cudaError_t e, const char* call, int ordinal) {
  if (e == cudaSuccess) return;
  (void)cudaGetLastError();
  throw backend_error(std::string("tessera: ") + call + " failed on device cuda:" + std::to_string(ordinal) + ": " +
                      cudaGetErrorName(e) + " (" + cudaGetErrorString(e) + ")");
}

device_guard::device_guard(int ordinal) : previous_(tl_cuda_device), ordinal_(ordinal) {
  if (previous_ < 0) {
    cuda_check(cudaGetDevice(&previous_), "cudaGetDevice", ordinal);
    tl_cuda_device = previous_;
  }
  if (previous_ != ordinal) {
    cuda_check(cudaSetDevice(ordinal), "cudaSetDevice", ordinal);
    tl_cuda_device = ordinal;
  }
}

device_guard::~device_guard() {
  if (previous_ != ordinal_ && cudaSetDevice(previous_) == cudaSuccess) tl_cuda_device = previous_;
  (void)cudaGetLastError();
}
#endif

bool is_gpu(int device_id) { return is_gpu(get(), device_id); }

void check_cuda(int code, const char* call, int device_id) {
#if TESSERA_HAS_CUDA
  cuda_check(static_cast<cudaError_t>(code), call, device_id);
#else
  if (code != 0) {
    throw backend_error(std::string("tessera: ") + call + " failed on device " + std::to_string(device_id) +
                        " (error " + std::to_string(code) + ")");
  }
#endif
}

bool built_with_cuda() { return TESSERA_HAS_CUDA != 0; }

int device_count() {
  const state& s = get();
  return s.gpu_count + s.host_count.load(std::memory_order_acquire);
}

const device_info& info(int device_id) {
  const state& s = get();
  if (device_id >= s.remote_base && device_id < static_cast<int>(s.table.size()))
    return s.table[static_cast<std::size_t>(device_id)];
  if (device_id < 0 || device_id >= s.gpu_count + s.host_count.load(std::memory_order_acquire))
    throw_bad_device(device_id);
  return s.table[static_cast<std::size_t>(device_id)];
}

bool can_access_peer(int device_id, int peer_id) {
  const state& s = get();
  (void)info(device_id);
  (void)info(peer_id);
  if (!is_gpu(s, device_id) || !is_gpu(s, peer_id) || device_id == peer_id) return false;
  const copy_path p = s.paths[static_cast<std::size_t>(device_id * s.gpu_count + peer_id)];
  return p == copy_path::nvlink || p == copy_path::pcie;
}

namespace {
thread_local bool tl_on_side = false;  // inside a side_stream_scope that took effect
}

void* stream(int device_id) {
  (void)info(device_id);
#if TESSERA_HAS_CUDA
  if (is_gpu(get(), device_id)) return tl_on_side ? gpu(device_id).copy_stream : gpu(device_id).stream;
#endif
  return nullptr;
}

#if TESSERA_HAS_CUDA
void* take_event(int device_id) {
  gpu_state& g = gpu(device_id);
  {
    std::lock_guard<std::mutex> lock(g.events_mutex);
    if (!g.spare_events.empty()) {
      const cudaEvent_t e = g.spare_events.back();
      g.spare_events.pop_back();
      return e;
    }
  }
  device_guard guard(device_id);
  cudaEvent_t e = nullptr;
  cuda_check(cudaEventCreateWithFlags(&e, cudaEventDisableTiming), "cudaEventCreateWithFlags", device_id);
  return e;
}

void give_event(int device_id, void* event) noexcept {
  if (event == nullptr) return;
  gpu_state& g = gpu(device_id);
  {
    // A bound, so that a burst (a capture of many copies) does not keep its events forever.
    std::lock_guard<std::mutex> lock(g.events_mutex);
    if (g.spare_events.size() < 256) {
      try {
        g.spare_events.push_back(static_cast<cudaEvent_t>(event));
        return;
      } catch (...) {  // out of memory: destroyed below instead
      }
    }
  }
  (void)cudaEventDestroy(static_cast<cudaEvent_t>(event));
}

void stream_after(int device_id, void* waiter, void* after) {
  const auto e = static_cast<cudaEvent_t>(take_event(device_id));
  const cudaError_t r = cudaEventRecord(e, static_cast<cudaStream_t>(after));
  const cudaError_t w = r == cudaSuccess ? cudaStreamWaitEvent(static_cast<cudaStream_t>(waiter), e, 0) : r;
  give_event(device_id, e);
  cuda_check(r, "cudaEventRecord", device_id);
  cuda_check(w, "cudaStreamWaitEvent", device_id);
}
#else
void* take_event(int) { return nullptr; }
void give_event(int, void*) noexcept {}
void stream_after(int, void*, void*) {}
#endif

#if TESSERA_HAS_CUDA
namespace {
// This thread's fork and join events, one pair per GPU, made on first use and kept: a scope per
// time step would otherwise create and destroy 4 events per GPU each step.
struct side_events {
  std::vector<cudaEvent_t> fork, join;
  ~side_events() {
    for (auto* v : {&fork, &join})
      for (cudaEvent_t e : *v)
        if (e) (void)cudaEventDestroy(e);  // may run after CUDA's teardown at exit: ignored
  }
  cudaEvent_t get(std::vector<cudaEvent_t>& v, int d) {
    if (v.size() <= static_cast<std::size_t>(d)) v.resize(static_cast<std::size_t>(d) + 1, nullptr);
    cudaEvent_t& e = v[static_cast<std::size_t>(d)];
    if (!e) cuda_check(cudaEventCreateWithFlags(&e, cudaEventDisableTiming), "cudaEventCreateWithFlags", d);
    return e;
  }
};
thread_local side_events tl_side_events;
}  // namespace
#endif

side_stream_scope::side_stream_scope() {
#if TESSERA_HAS_CUDA
  if (tl_on_side || capturing()) return;
  const int gpus = get().gpu_count;
  if (gpus == 0) return;
  device_restorer restore;
  for (int d = 0; d < gpus; ++d) {
    set_device(d);
    const cudaEvent_t e = tl_side_events.get(tl_side_events.fork, d);
    cuda_check(cudaEventRecord(e, gpu(d).stream), "cudaEventRecord", d);
    cuda_check(cudaStreamWaitEvent(gpu(d).copy_stream, e, 0), "cudaStreamWaitEvent", d);
  }
  active_ = true;
  tl_on_side = true;
#endif
}

bool on_side_stream() { return tl_on_side; }

void side_stream_scope::end() noexcept {
  if (active_) tl_on_side = false;
}

void side_stream_scope::join() {
  end();
#if TESSERA_HAS_CUDA
  if (!active_) return;
  active_ = false;
  device_restorer restore;
  // Every GPU is joined even if one fails; the first error is rethrown after.
  std::exception_ptr first;
  for (int d = 0; d < get().gpu_count; ++d) {
    try {
      set_device(d);
      const cudaEvent_t e = tl_side_events.get(tl_side_events.join, d);
      cuda_check(cudaEventRecord(e, gpu(d).copy_stream), "cudaEventRecord", d);
      cuda_check(cudaStreamWaitEvent(gpu(d).stream, e, 0), "cudaStreamWaitEvent", d);
    } catch (...) {
      if (!first) first = std::current_exception();
    }
  }
  if (first) std::rethrow_exception(first);
#endif
}

side_stream_scope::~side_stream_scope() {
  try {
    join();
  } catch (...) {  // a destructor must not throw; the error that unwound matters more
  }
}

void* side_stream(int device_id) {
  (void)info(device_id);
#if TESSERA_HAS_CUDA
  if (is_gpu(get(), device_id)) return gpu(device_id).copy_stream;
#endif
  return nullptr;
}

void set_device(int device_id) {
#if TESSERA_HAS_CUDA
  if (device_id >= 0 && device_id < get().gpu_count) {
    if (tl_cuda_device != device_id) {  // GPU id == CUDA ordinal
      cuda_check(cudaSetDevice(device_id), "cudaSetDevice", device_id);
      tl_cuda_device = device_id;
    }
    return;
  }
#endif
  (void)info(device_id);  // validates; host devices need no setting
}

int scoped_device() { return tl_current; }

int get_cuda_device() {
#if TESSERA_HAS_CUDA
  if (get().gpu_count == 0) return -1;
  // Asks CUDA rather than the cache: user code may have called cudaSetDevice directly. When the
  // current context is still the cached device's primary one, the driver's cuCtxGetCurrent says
  // so for less than cudaGetDevice (once per operation: issue #22's plain launches).
  if (const auto get_ctx = driver().ctx_get_current; get_ctx != nullptr && tl_cuda_device >= 0) {
    void* c = nullptr;
    if (get_ctx(&c) == 0 && c != nullptr && c == gpu(tl_cuda_device).context) return tl_cuda_device;
  }
  int d = 0;
  cuda_check(cudaGetDevice(&d), "cudaGetDevice", tl_cuda_device < 0 ? 0 : tl_cuda_device);
  tl_cuda_device = d;
  return d;
#else
  return -1;
#endif
}

void restore_cuda_device(int ordinal) {
#if TESSERA_HAS_CUDA
  if (ordinal < 0 || get().gpu_count == 0) return;
  cuda_check(cudaSetDevice(ordinal), "cudaSetDevice", ordinal);
  tl_cuda_device = ordinal;
#else
  (void)ordinal;
#endif
}

void synchronize_device(int device_id) {
  refuse_while_capturing("a wait for a device (synchronize, a host read)");
  (void)info(device_id);
#if TESSERA_HAS_CUDA
  if (is_gpu(get(), device_id)) {
    // stream(): inside a side_stream_scope the side stream, which follows the main one.
    cuda_check(cudaStreamSynchronize(static_cast<cudaStream_t>(stream(device_id))), "cudaStreamSynchronize",
               device_id);
    // Across processes the wait may have ended because the watchdog aborted NCCL work that a
    // failed peer would never serve: what the stream computed is then not to be trusted.
    if (dist::spans_processes()) dist::check_healthy("a wait on a GPU");
  }
#endif
}

void check_launch(int device_id, int shard, const char* what, bool by_driver) {
#if TESSERA_HAS_CUDA
  if (!is_gpu(get(), device_id)) return;  // host executors report errors by throwing directly
  auto fail = [&](cudaError_t e, const char* when) {
    throw backend_error(std::string("tessera: kernel launch `") + what + "` failed " + when + " on device cuda:" +
                        std::to_string(device_id) + " (shard " + std::to_string(shard) + "): " + cudaGetErrorName(e) +
                        " (" + cudaGetErrorString(e) + ")");
  };
  if (!by_driver) {
    if (const cudaError_t e = cudaGetLastError(); e != cudaSuccess) fail(e, "to launch");
  }
  if (debug_sync()) {
    const cudaError_t e = cudaStreamSynchronize(static_cast<cudaStream_t>(stream(device_id)));
    (void)cudaGetLastError();
    if (e != cudaSuccess) fail(e, "while running (TESSERA_DEBUG_SYNC=1)");
  }
#else
  (void)device_id, (void)shard, (void)what, (void)by_driver;
#endif
}


bool driver_launch_enabled() {
#if TESSERA_HAS_CUDA
  return driver().launch != nullptr;
#else
  return false;
#endif
}

#if TESSERA_HAS_CUDA
namespace {
// The kernel's function on `device` for the driver's launch: cudaGetFuncBySymbol once per kernel,
// device and thread, then found again among the thread's (64 sets of two: a loop launches a
// handful of kernels, and with kept graphs only their first launches come here).
cudaFunction_t function_of(const void* kernel, int device) {
  struct entry {
    const void* kernel = nullptr;
    int device = -1;
    cudaFunction_t function = nullptr;
  };
  constexpr std::size_t sets = 64;
  thread_local entry cache[sets][2];
  thread_local unsigned char newer[sets] = {};
  const std::size_t at =
      ((reinterpret_cast<std::uintptr_t>(kernel) * 0x9e3779b97f4a7c15ull) >> 58 ^ static_cast<std::size_t>(device)) % sets;
  for (int w = 0; w < 2; ++w) {
    if (cache[at][w].kernel == kernel && cache[at][w].device == device) return cache[at][w].function;
  }
  // The function belongs to the current context: make sure it is the device's, whatever user code
  // did with cudaSetDevice behind the runtime's per-thread cache (get_cuda_device re-reads it).
  if (get_cuda_device() != device) set_device(device);
  cudaFunction_t f = nullptr;
  check_cuda(cudaGetFuncBySymbol(&f, kernel), "cudaGetFuncBySymbol", device);
  const int w = newer[at] ^ 1;  // the older of the two
  cache[at][w] = {kernel, device, f};
  newer[at] = static_cast<unsigned char>(w);
  return f;
}
}  // namespace
#endif

bool driver_launch(const void* kernel, const unsigned (&grid)[3], const unsigned (&block)[3], std::size_t shared_bytes,
                   void** args, void* stream, int device_id, int shard, const char* what) {
#if TESSERA_HAS_CUDA
  const driver_entries& d = driver();
  if (d.launch == nullptr) return false;
  const int r = d.launch(function_of(kernel, device_id), grid[0], grid[1], grid[2], block[0], block[1], block[2],
                         static_cast<unsigned>(shared_bytes), stream, args, nullptr);
  if (r != 0) {
    const char* text = nullptr;
    if (d.error_string(r, &text) != 0 || text == nullptr) text = "unknown driver error";
    throw backend_error(std::string("tessera: kernel launch `") + what + "` failed to launch on device cuda:" +
                        std::to_string(device_id) + " (shard " + std::to_string(shard) + "): CUDA driver error " +
                        std::to_string(r) + " (" + text + "), grid " + std::to_string(grid[0]) + "x" +
                        std::to_string(grid[1]) + "x" + std::to_string(grid[2]) + ", block " +
                        std::to_string(block[0]));
  }
  return true;
#else
  (void)kernel, (void)grid, (void)block, (void)shared_bytes, (void)args, (void)stream, (void)device_id, (void)shard,
      (void)what;
  return false;
#endif
}

namespace {
std::atomic<std::uint64_t>& seed_state() {
  static std::atomic<std::uint64_t> s{0x7e55e7a5eedull};
  return s;
}
}  // namespace
std::uint64_t advance_seed() { return seed_state().fetch_add(0x9e3779b97f4a7c15ull); }
void set_seed(std::uint64_t s) { seed_state().store(s); }

}  // namespace detail::rt

// -- public API (tessera/device.hpp) ----------------------------------------------------------

device_kind Device::kind() const { return detail::rt::info(id_).kind; }
int Device::ordinal() const { return detail::rt::info(id_).ordinal; }
int Device::rank() const { return detail::rt::info(id_).rank; }
std::string Device::name() const {
  const auto& i = detail::rt::info(id_);
  // Across processes every rank names a device the same way: its rank, then its local name.
  const std::string prefix = detail::dist::spans_processes() ? "rank" + std::to_string(i.rank) + "/" : "";
  return prefix + (i.kind == device_kind::cuda ? "cuda:" : "host:") + std::to_string(i.ordinal);
}

DeviceSet devices() { return detail::rt::default_devices().set; }

DeviceSet host_devices(int n) {
  using namespace detail::rt;
  if (n < 0 || n > max_host_devices)
    throw invalid_argument("tessera: host_devices(" + std::to_string(n) + "): expected 0 to " +
                           std::to_string(max_host_devices) + " host devices");
  state& s = get();
  int have = s.host_count.load(std::memory_order_acquire);
  // Entries are pre-filled, so "creating" a host device only publishes a larger count.
  while (have < n && !s.host_count.compare_exchange_weak(have, n, std::memory_order_acq_rel)) {
  }
  DeviceSet set;
  set.reserve(static_cast<std::size_t>(n));
  for (int h = 0; h < n; ++h) set.emplace_back(s.gpu_count + h);
  return set;
}

DeviceSet gpus() {
  DeviceSet set;
  const int g = detail::rt::get().gpu_count;
  for (int d = 0; d < g; ++d) set.emplace_back(d);
  return set;
}

bool cuda_backend() {
  const DeviceSet& set = detail::rt::default_devices().set;
  return !set.empty() && set.front().kind() == device_kind::cuda;
}

Device current_device() {
  if (detail::rt::tl_current >= 0) return Device(detail::rt::tl_current);
  return detail::rt::default_devices().set.front();
}

void synchronize() {
  detail::rt::refuse_while_capturing("a wait for the devices (synchronize)");
  const int g = detail::rt::get().gpu_count;
  for (int d = 0; d < g; ++d) detail::rt::synchronize_device(d);
}

void synchronize(Device d) { detail::rt::synchronize_device(d.id()); }

DeviceScope::DeviceScope(Device d) : previous_(detail::rt::tl_current) {
  using namespace detail::rt;
#if TESSERA_HAS_CUDA
  // The CUDA device is saved on a per-thread stack (scopes nest, and the public class has no
  // room for it), so the exit restores exactly what the caller had, like torch.cuda.device.
  int saved = -1;
  if (get().gpu_count > 0) {
    if (tl_cuda_device < 0) (void)get_cuda_device();
    saved = tl_cuda_device;
  }
  set_device(d.id());  // validates the id; cudaSetDevice for GPUs
  tl_saved_cuda.push_back(saved);
#else
  (void)info(d.id());
#endif
  tl_current = d.id();
}

static Device default_device_at(int index) {
  const DeviceSet ds = devices();
  if (index < 0 || index >= static_cast<int>(ds.size())) {
    throw invalid_argument("tessera: DeviceScope(" + std::to_string(index) + "): expected an index into devices(), in [0, " +
                           std::to_string(ds.size()) + ")");
  }
  return ds[static_cast<std::size_t>(index)];
}

DeviceScope::DeviceScope(int index) : DeviceScope(default_device_at(index)) {}

DeviceScope::~DeviceScope() {
  using namespace detail::rt;
  tl_current = previous_.id();
#if TESSERA_HAS_CUDA
  if (tl_saved_cuda.empty()) return;
  const int saved = tl_saved_cuda.back();
  tl_saved_cuda.pop_back();
  if (saved >= 0 && saved != tl_cuda_device && cudaSetDevice(saved) == cudaSuccess) tl_cuda_device = saved;
  (void)cudaGetLastError();  // a destructor must not throw; a failed restore leaves d current
#endif
}

}  // namespace tessera
