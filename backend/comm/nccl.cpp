// SPDX-License-Identifier: Apache-2.0
// Collectives across GPUs through NCCL, reached from the entry points in host.cpp with checked
// arguments (all GPUs, each listed once, something to move). One communicator set per ordered
// list of devices, created on first use and cached: by ncclCommInitAll within this process, by
// ncclCommInitRank when the list spans ranks (the unique id broadcast over MPI; each rank creates
// and drives only its own devices' communicators). Every call is one
// NCCL group over all ranks, each rank's operation queued on its device's Tessera stream, so it
// is ordered after the kernels already queued there and before the ones queued next; the host
// does not wait. One rank needs no NCCL: a stream-ordered device-to-device copy.
//
// Sets spanning ranks are where a peer can fail, so they are made differently:
//  * non-blocking communicators (ncclConfig_t.blocking = 0): no NCCL call waits for a peer inside
//    NCCL (creation and the first collective connect to peers); a call answered ncclInProgress is
//    polled here (ready()) against TESSERA_MPI_TIMEOUT, and aborted past it;
//  * every call first checks with the other ranks (dist::agree, one small MPI exchange), so that
//    mismatched calls are named and a rank that failed earlier stops every rank before anything
//    is queued;
//  * each queued group is handed to the watchdog (watchdog.hpp) with an event before and after it
//    on each of this rank's devices: a collective that fails or outlives the deadline is aborted
//    (ncclCommAbort), which lets waits behind it return, and the rank is marked failed
//    (dist::fail), so the waits and every rank's next call throw distributed_error. A failure
//    across ranks is final: the communicators are not recreated (that would need every rank to
//    agree on it); finalize() ends the job.
//
// One thread at a time per communicator, the watchdog's included. NCCL allows a communicator to be
// used from several threads only "as long as only one thread operates the communicator at a time"
// (user guide, Thread Safety), and ncclCommGetAsyncError is no exception: on a non-blocking
// communicator ncclGroupEnd hands the launch to a job thread and links the job to the
// communicator (comm->groupJob); the next ncclCommGetAsyncError that finds the launch done joins
// that thread, drops the job's reference (freeing it) and unlinks it, without a lock. The watchdog
// polling while this thread waited for its group (ready()) made two such calls at once: both took
// the job, one freed it, the other joined a stale thread id or read a freed job (issue 20, 4 ranks
// x 1 GPU: a segmentation fault in ncclCommGetAsyncError, or "ncclAsyncJobComplete: job 0x...
// failed, job error -1350311184", a freed job's garbage). So every NCCL call on a communicator is
// made under the registry's lock (`registry::m`), the watchdog's polls too (they skip a sweep's
// query while a call holds it: the events still tell started and finished apart, and the caller's
// own ready() names any error meanwhile), and every non-blocking call is completed (ready()) before
// the lock is released, so that no call ever meets a communicator in ncclInProgress.
#include <backend/comm/comm.hpp>
#include <backend/comm/nccl.hpp>
#include <backend/comm/watchdog.hpp>
#include <backend/process/backoff.hpp>
#include <backend/process/mpi.hpp>
#include <backend/runtime/runtime.hpp>
#include <tessera/distributed.hpp>

#if TESSERA_HAS_CUDA
#include <nccl.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace tessera::detail::comm::nccl {
namespace {

std::string device_list(const int* devices, int n) {
  std::string s = "[";
  for (int r = 0; r < n; ++r) s += (r ? ", " : "") + Device(devices[r]).name();
  return s + "]";
}

std::string rank_name(const int* devices, int n, int r) {
  return Device(devices[r]).name() + " (rank " + std::to_string(r) + " of " + device_list(devices, n) + ")";
}

// The text NCCL keeps about its last failure, as " (NCCL: ...)" when it has any.
std::string last_error(ncclComm_t comm) {
  const char* s = comm != nullptr ? ncclGetLastError(comm) : ncclGetLastError(nullptr);
  return s != nullptr && *s != '\0' ? std::string(" (NCCL: ") + s + ")" : std::string();
}

[[noreturn]] void fail(const char* call, const std::string& where, ncclResult_t e, ncclComm_t comm) {
  throw backend_error(std::string("tessera: ") + call + " failed on " + where + ": " + ncclGetErrorString(e) +
                      last_error(comm));
}

ncclDataType_t nccl_type(dtype t) {
  switch (t) {
    case dtype::u8: return ncclUint8;
    case dtype::i32: return ncclInt32;
    case dtype::i64: return ncclInt64;
    case dtype::f32: return ncclFloat32;
    case dtype::f64: return ncclFloat64;
  }
  throw invalid_argument("tessera: comm: unknown element type " + std::to_string(static_cast<int>(t)));
}

ncclRedOp_t nccl_op(op o) {
  switch (o) {
    case op::sum: return ncclSum;
    case op::prod: return ncclProd;
    case op::max: return ncclMax;
    case op::min: return ncclMin;
  }
  throw invalid_argument("tessera: comm: unknown reduction operator " + std::to_string(static_cast<int>(o)));
}

std::size_t size_of(dtype t) { return t == dtype::u8 ? 1 : (t == dtype::i32 || t == dtype::f32) ? 4 : 8; }

// The communicators, one per rank, of each device set that has run a collective.
//
// Never destroyed: the registry is leaked on purpose, like the runtime's state. Destroying a
// communicator from a static destructor runs after (or while) the CUDA runtime tears down its
// contexts at exit, and ncclCommDestroy then touches freed streams and memory: a crash or a hang
// at exit instead of a clean one. The process's exit releases everything anyway.
struct comm_set {
  std::vector<ncclComm_t> comms;  // one per listed device; null for another rank's
  bool across = false;            // spans ranks: non-blocking communicators, watched
  // Guards `aborted`: held while the communicators are polled or aborted, always inside the
  // registry's lock (which serializes the NCCL calls themselves).
  std::mutex m;
  bool aborted = false;
  // ncclCommAbort on every communicator, once; the caller holds `m`.
  void abort_locked() {
    if (aborted) return;
    aborted = true;
    for (ncclComm_t c : comms)
      if (c != nullptr) (void)ncclCommAbort(c);
  }
};

struct registry {
  // The NCCL lock: guards the map, and every NCCL call on a communicator is made under it, from
  // creation to the completion of a non-blocking call (ready()), the watchdog's polls and aborts
  // included (NCCL: one thread at a time per communicator; see the top of this file). Also two
  // threads queueing collectives over overlapping devices in different orders would deadlock on
  // the devices' streams, so every group is queued whole before the next one starts. Taken before
  // a set's `m`, never after.
  std::mutex m;
  std::map<std::vector<int>, std::shared_ptr<comm_set>> sets;
};

registry& reg() {
  static registry* r = new registry();  // leaked, see above
  return *r;
}

// Drops a set whose communicators hit an asynchronous error, so the next call starts afresh.
void discard(registry& rg, const std::vector<int>& key) {
  auto it = rg.sets.find(key);
  if (it == rg.sets.end()) return;
  {
    std::lock_guard<std::mutex> lock(it->second->m);
    it->second->abort_locked();
  }
  rg.sets.erase(it);
}

// Asynchronous errors of a set's communicators, one line each; empty when none.
std::string async_errors(const std::vector<ncclComm_t>& comms, const int* devices, int n) {
  std::string s;
  for (int r = 0; r < n; ++r) {
    if (comms[static_cast<std::size_t>(r)] == nullptr) continue;  // another rank's device
    ncclResult_t a = ncclSuccess;
    const ncclResult_t e = ncclCommGetAsyncError(comms[static_cast<std::size_t>(r)], &a);
    if (e != ncclSuccess) a = e;
    if (a != ncclSuccess && a != ncclInProgress) {
      s += std::string("; asynchronous error on ") + Device(devices[r]).name() + ": " + ncclGetErrorString(a) +
           last_error(comms[static_cast<std::size_t>(r)]);
    }
  }
  return s;
}

// A set spanning ranks failed here: mark the rank failed (the other ranks learn it at their next
// call, or time out on the collective), abort the set and throw. The caller holds the registry lock.
[[noreturn]] void fail_across(comm_set& set, const std::string& reason) {
  dist::fail(reason);  // before the abort, which wakes waits that then check for it (watchdog.hpp)
  {
    std::lock_guard<std::mutex> lock(set.m);
    set.abort_locked();
  }
  throw distributed_error("tessera (rank " + std::to_string(dist::world_rank()) + "): " + reason);
}

// Waits until no communicator of a non-blocking set has an operation in progress (ncclInProgress:
// being set up or queued), polling, against the layer's deadline.
void ready(comm_set& set, const char* what, const int* devices, int n) {
  const double timeout = dist::timeout_seconds();
  const auto start = std::chrono::steady_clock::now();
  backoff pace(dist::spin_time());  // spins, then sleeps (backoff.hpp: why)
  for (;;) {
    bool busy = false;
    for (int r = 0; r < n; ++r) {
      ncclComm_t c = set.comms[static_cast<std::size_t>(r)];
      if (c == nullptr) continue;
      ncclResult_t a = ncclSuccess;
      const ncclResult_t e = ncclCommGetAsyncError(c, &a);
      if (e != ncclSuccess) a = e;
      if (a == ncclInProgress) busy = true;
      else if (a != ncclSuccess)
        fail_across(set, std::string(what) + " failed on " + rank_name(devices, n, r) + ": " + ncclGetErrorString(a) +
                             last_error(c) + "; its communicators were aborted");
    }
    if (!busy) return;
    const double waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (timeout > 0 && waited > timeout) {
      fail_across(set, std::string(what) + " over " + device_list(devices, n) + " was not ready within " +
                           std::to_string(static_cast<long long>(timeout)) +
                           " s: a peer rank died, hangs, or made a different call; TESSERA_MPI_TIMEOUT sets the "
                           "limit; its communicators were aborted");
    }
    pace.pause();
  }
}

// One collective queued on this rank's devices of a set spanning ranks, as the watchdog sees it.
class queued_group final : public inflight {
 public:
  queued_group(std::shared_ptr<comm_set> set, std::string name) : set_(std::move(set)), name_(std::move(name)) {}
  ~queued_group() override {
    for (auto* v : {&before_, &after_})
      for (const auto& [d, e] : *v) rt::give_event(d, e);
  }
  // Records an event on `stream` (the current device's): before the group, then after it.
  void mark(cudaStream_t stream, int device, bool after) {
    auto& v = after ? after_ : before_;
    v.reserve(v.size() + 1);
    const auto e = static_cast<cudaEvent_t>(rt::take_event(device));
    v.push_back({device, e});
    rt::check_cuda(cudaEventRecord(e, stream), "cudaEventRecord", rt::info(device).ordinal);
  }
  state poll() override {
    state s{.started = done(before_), .finished = done(after_), .error = {}};
    // NCCL only under the NCCL lock. While a call holds it (queueing, or waiting for a
    // non-blocking call in ready(), which checks these communicators itself) this sweep asks
    // nothing: blocking here would stall the deadlines of every other collective in flight.
    std::unique_lock<std::mutex> nccl_lock(reg().m, std::try_to_lock);
    if (!nccl_lock.owns_lock()) {
      s.checked = false;
      return s;
    }
    std::lock_guard<std::mutex> lock(set_->m);
    if (set_->aborted) {
      s.error = "its communicators were aborted";
      return s;
    }
    for (ncclComm_t c : set_->comms) {
      if (c == nullptr) continue;
      ncclResult_t a = ncclSuccess;
      const ncclResult_t e = ncclCommGetAsyncError(c, &a);
      if (e != ncclSuccess) a = e;
      if (a != ncclSuccess && a != ncclInProgress) {
        s.error = std::string(ncclGetErrorString(a)) + last_error(c);
        break;
      }
    }
    return s;
  }
  void abort() override {
    std::lock_guard<std::mutex> outer(reg().m);  // the NCCL lock: not while another thread uses these
    std::lock_guard<std::mutex> lock(set_->m);
    set_->abort_locked();
  }
  std::string name() const override { return name_; }

 private:
  static bool done(const std::vector<std::pair<int, cudaEvent_t>>& events) {
    for (const auto& [d, e] : events) {
      const cudaError_t q = cudaEventQuery(e);
      if (q == cudaErrorNotReady) return false;
      (void)cudaGetLastError();  // another error (the runtime unloading at exit): nothing to wait for
    }
    return true;
  }
  std::shared_ptr<comm_set> set_;
  std::string name_;
  std::vector<std::pair<int, cudaEvent_t>> before_, after_;  // (device, event)
};

// One communicator per device of this rank in a list spanning ranks: list rank r is NCCL rank r.
// The first device's rank makes the unique id and every rank receives it (also ranks without a
// device in the list: the broadcast is collective, and they then cache an empty set, so that the
// next call over these devices finds the set on every rank alike). Non-blocking: a peer that
// never comes is a timeout here, not a hang inside ncclCommInitRank.
void init_across_ranks(comm_set& set, const int* devices, int n) {
  start_watchdog();  // its thread exists from the first communicator across ranks on
  std::vector<ncclComm_t>& comms = set.comms;
  ncclUniqueId id{};
  const int root = rt::info(devices[0]).rank;
  if (root == dist::world_rank()) {
    if (const ncclResult_t e = ncclGetUniqueId(&id); e != ncclSuccess)
      fail("ncclGetUniqueId", "devices " + device_list(devices, n), e, nullptr);
  }
  dist::broadcast(&id, sizeof id, root, "the NCCL unique id of a communicator");
  if (const ncclResult_t e = ncclGroupStart(); e != ncclSuccess)
    fail("ncclGroupStart", "devices " + device_list(devices, n), e, nullptr);
  int failed = -1;
  ncclResult_t failure = ncclSuccess;
  for (int r = 0; r < n && failed < 0; ++r) {
    if (rt::is_remote(devices[r])) continue;
    rt::set_device(devices[r]);
    ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
    config.blocking = 0;
    failure = ncclCommInitRankConfig(&comms[static_cast<std::size_t>(r)], n, id, r, &config);
    if (failure != ncclSuccess && failure != ncclInProgress) failed = r;
  }
  const ncclResult_t end = ncclGroupEnd();
  (void)rt::get_cuda_device();  // NCCL switched devices behind the runtime's per-thread cache
  if (failed >= 0) {
    const std::string why = std::string("ncclCommInitRankConfig failed on ") + rank_name(devices, n, failed) + ": " +
                            ncclGetErrorString(failure);
    fail_across(set, why);
  }
  if (end != ncclSuccess && end != ncclInProgress) {
    fail_across(set, std::string("ncclGroupEnd (ncclCommInitRankConfig) failed over ") + device_list(devices, n) +
                         ": " + ncclGetErrorString(end));
  }
  ready(set, "ncclCommInitRankConfig", devices, n);
}

// Two entries of `devices` that are one GPU (a, b), or false: one exchange of the GPUs' UUIDs
// among the ranks (collective); its own failures (a peer gone, a mismatched call) throw.
bool same_gpu(const int* devices, int n, int& a, int& b) {
  constexpr std::size_t uuid_bytes = sizeof(cudaUUID_t);
  std::vector<char> uuids(static_cast<std::size_t>(n) * uuid_bytes, 0);
  std::vector<int> owner(static_cast<std::size_t>(n));
  for (int r = 0; r < n; ++r) {
    owner[static_cast<std::size_t>(r)] = rt::info(devices[r]).rank;
    if (rt::is_remote(devices[r])) continue;
    cudaDeviceProp prop{};
    rt::check_cuda(cudaGetDeviceProperties(&prop, rt::info(devices[r]).ordinal), "cudaGetDeviceProperties",
                   rt::info(devices[r]).ordinal);
    std::memcpy(uuids.data() + static_cast<std::size_t>(r) * uuid_bytes, &prop.uuid, uuid_bytes);
  }
  dist::share_blocks(uuids.data(), static_cast<std::size_t>(n), uuid_bytes, owner.data(), "the GPUs' identities");
  for (a = 0; a < n; ++a)
    for (b = a + 1; b < n; ++b)
      if (std::memcmp(uuids.data() + static_cast<std::size_t>(a) * uuid_bytes,
                      uuids.data() + static_cast<std::size_t>(b) * uuid_bytes, uuid_bytes) == 0)
        return true;
  return false;
}

// NCCL refuses a communicator with two ranks on one GPU ("Duplicate GPU detected"), which happens
// when a node starts more ranks than it has GPUs (init then gives rank l GPU l % count), and its
// failure ends every later call. Checked first, from the GPUs' UUIDs (one exchange), so that every
// rank throws the same distributed_error and the library keeps working.
void check_distinct_gpus(const int* devices, int n) {
  int a = 0, b = 0;
  if (!same_gpu(devices, n, a, b)) return;
  throw distributed_error("tessera: NCCL cannot span two ranks on one GPU, and " + rank_name(devices, n, a) +
                          " and " + rank_name(devices, n, b) + " are the same GPU (more ranks than GPUs on a "
                          "node share them); start at most one rank per GPU, or run on host devices "
                          "(TESSERA_BACKEND=host). Nothing was queued.");
}

// The set for `devices` (caller holds rg.m), created on first use.
std::shared_ptr<comm_set> set_for(registry& rg, const int* devices, int n, const std::vector<int>& key, bool across) {
  auto it = rg.sets.find(key);
  if (it != rg.sets.end()) return it->second;
  // NVLink SHARP (NVLS) reserves multicast memory per communicator and fails on machines where
  // multicast objects are not available to us; it must stay off. A value the user set wins.
  setenv("NCCL_NVLS_ENABLE", "0", 0);
  auto set = std::make_shared<comm_set>();
  set->comms.assign(static_cast<std::size_t>(n), nullptr);
  set->across = across;
  if (across) {
    check_distinct_gpus(devices, n);  // before anything is made or cached: every rank throws alike
    // Cached before it is made: a failure leaves it aborted in the registry, so that no rank
    // recreates a set its peers gave up on.
    rg.sets.emplace(key, set);
    init_across_ranks(*set, devices, n);
    return set;
  }
  std::vector<int> ordinals(static_cast<std::size_t>(n));
  for (int r = 0; r < n; ++r) ordinals[static_cast<std::size_t>(r)] = rt::info(devices[r]).ordinal;
  const ncclResult_t e = ncclCommInitAll(set->comms.data(), n, ordinals.data());
  // ncclCommInitAll switches devices behind the runtime's per-thread cache: re-read it.
  (void)rt::get_cuda_device();
  if (e != ncclSuccess) fail("ncclCommInitAll", "devices " + device_list(devices, n), e, nullptr);
  return rg.sets.emplace(key, std::move(set)).first->second;
}

cudaStream_t stream_of(int device) { return static_cast<cudaStream_t>(rt::stream(device)); }

// One rank: a stream-ordered copy on the device (nothing when in place).
void copy_one(int device, void* dst, const void* src, std::size_t bytes) {
  if (dst == src) return;
  rt::device_restorer guard;
  rt::set_device(device);
  rt::check_cuda(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, stream_of(device)), "cudaMemcpyAsync",
                 rt::info(device).ordinal);
}

// Queues `call(rank, comm, stream)` for every rank inside one NCCL group. `what` names the NCCL
// call in errors; `bytes` (per device) goes into the consistency check across ranks.
template <class Call>
void run_group(const char* what, const int* devices, int n, std::size_t bytes, Call&& call) {
  rt::refuse_while_capturing(what);
  const bool across = rt::crosses_ranks(devices, static_cast<std::size_t>(n), what);
  // Before anything is queued or created: a mismatched call, or a rank that failed earlier, is
  // named on every rank here instead of hanging in NCCL.
  if (across) dist::agree(what, bytes);
  rt::device_restorer guard;
  registry& rg = reg();
  std::lock_guard<std::mutex> lock(rg.m);
  std::vector<int> key(static_cast<std::size_t>(n));
  // Device ids: equal to CUDA ordinals for this process's GPUs, and distinct for other ranks'.
  for (int r = 0; r < n; ++r) key[static_cast<std::size_t>(r)] = devices[r];
  const std::shared_ptr<comm_set> set = set_for(rg, devices, n, key, across);
  std::vector<ncclComm_t>& comms = set->comms;
  if (across) {
    bool aborted = false;
    {
      std::lock_guard<std::mutex> set_lock(set->m);
      aborted = set->aborted;
    }
    if (aborted) dist::check_healthy(what);  // an abort always comes with the rank's failure
    if (aborted) throw distributed_error(std::string("tessera: ") + what + ": its communicators were aborted");
    // An error raised while nothing was in flight (so unseen by the watchdog) is final here too.
    if (std::string stale = async_errors(comms, devices, n); !stale.empty())
      fail_across(*set, std::string(what) + " over " + device_list(devices, n) + " not started" + stale);
  } else if (std::string stale = async_errors(comms, devices, n); !stale.empty()) {
    // A communicator broken by an earlier failure would never complete: report, and start afresh
    // on the next call.
    discard(rg, key);
    throw backend_error(std::string("tessera: ") + what + " over " + device_list(devices, n) +
                        " not started: an earlier collective on these devices failed" + stale +
                        "; the communicators were aborted and will be recreated by the next call");
  }
  std::shared_ptr<queued_group> watched;
  if (across) watched = std::make_shared<queued_group>(set, std::string(what) + " over " + device_list(devices, n));
  if (const ncclResult_t e = ncclGroupStart(); e != ncclSuccess)
    fail("ncclGroupStart", "devices " + device_list(devices, n), e, nullptr);
  int failed = -1;
  ncclResult_t failure = ncclSuccess;
  try {
    for (int r = 0; r < n; ++r) {
      if (rt::is_remote(devices[r])) continue;  // queued by its own rank
      rt::set_device(devices[r]);
      if (watched) watched->mark(stream_of(devices[r]), devices[r], false);
      const ncclResult_t e = call(r, comms[static_cast<std::size_t>(r)], stream_of(devices[r]));
      if (e != ncclSuccess && !(across && e == ncclInProgress)) {
        failed = r;
        failure = e;
        break;
      }
    }
  } catch (...) {
    (void)ncclGroupEnd();  // the group must be closed on this thread; a failed group launches nothing
    throw;
  }
  // With a failed operation inside, ncclGroupEnd reports the error and launches nothing.
  const ncclResult_t end = ncclGroupEnd();
  if (across) {
    if (failed >= 0) {
      fail_across(*set, std::string(what) + " failed on " + rank_name(devices, n, failed) + ": " +
                            ncclGetErrorString(failure) + last_error(comms[static_cast<std::size_t>(failed)]));
    }
    if (end != ncclSuccess && end != ncclInProgress) {
      fail_across(*set, std::string("ncclGroupEnd failed for ") + what + " over " + device_list(devices, n) + ": " +
                            ncclGetErrorString(end));
    }
    ready(*set, what, devices, n);  // queued on every stream of this rank (or failed, named)
    for (int r = 0; r < n; ++r) {
      if (rt::is_remote(devices[r])) continue;
      rt::set_device(devices[r]);
      watched->mark(stream_of(devices[r]), devices[r], true);
    }
    watch_in_background(std::move(watched));
    return;
  }
  if (failed >= 0) {
    fail(what, rank_name(devices, n, failed), failure, comms[static_cast<std::size_t>(failed)]);
  }
  if (end != ncclSuccess) {
    // Name what the communicators say rather than leave a half-launched collective to hang.
    const std::string async = async_errors(comms, devices, n);
    ncclComm_t any = nullptr;
    for (ncclComm_t c : comms) any = any != nullptr ? any : c;
    const std::string last = last_error(any);
    if (!async.empty()) discard(rg, key);
    throw backend_error(std::string("tessera: ncclGroupEnd failed for ") + what + " over " +
                        device_list(devices, n) + ": " + ncclGetErrorString(end) + last + async);
  }
}

}  // namespace

void allgather(const int* devices, int n, const void* const* send, void* const* recv, std::size_t bytes) {
  if (n == 1) return copy_one(devices[0], recv[0], send[0], bytes);
  run_group("ncclAllGather", devices, n, bytes, [&](int r, ncclComm_t c, cudaStream_t s) {
    return ncclAllGather(send[r], recv[r], bytes, ncclChar, c, s);
  });
}

void allreduce(const int* devices, int n, const void* const* send, void* const* recv, std::size_t count, dtype t,
               op o) {
  if (n == 1) return copy_one(devices[0], recv[0], send[0], count * size_of(t));
  const ncclDataType_t type = nccl_type(t);
  const ncclRedOp_t red = nccl_op(o);
  run_group("ncclAllReduce", devices, n, count * size_of(t), [&](int r, ncclComm_t c, cudaStream_t s) {
    return ncclAllReduce(send[r], recv[r], count, type, red, c, s);
  });
}

void broadcast(const int* devices, int n, int root, const void* const* send, void* const* recv, std::size_t bytes) {
  if (n == 1) return copy_one(devices[0], recv[0], send[0], bytes);
  run_group("ncclBroadcast", devices, n, bytes, [&](int r, ncclComm_t c, cudaStream_t s) {
    // Only the root's send buffer is read; other ranks pass their receive buffer (in place).
    return ncclBroadcast(r == root ? send[r] : recv[r], recv[r], bytes, ncclChar, root, c, s);
  });
}

void reduce_scatter(const int* devices, int n, const void* const* send, void* const* recv, std::size_t count,
                    dtype t, op o) {
  if (n == 1) return copy_one(devices[0], recv[0], send[0], count * size_of(t));
  const ncclDataType_t type = nccl_type(t);
  const ncclRedOp_t red = nccl_op(o);
  run_group("ncclReduceScatter", devices, n, count * size_of(t), [&](int r, ncclComm_t c, cudaStream_t s) {
    return ncclReduceScatter(send[r], recv[r], count, type, red, c, s);
  });
}

bool distinct_gpus(const int* devices, int n) {
  static std::mutex m;
  static std::map<std::vector<int>, bool> known;
  const std::vector<int> key(devices, devices + n);
  std::lock_guard<std::mutex> lock(m);
  if (auto it = known.find(key); it != known.end()) return it->second;
  int a = 0, b = 0;
  // The same answer on every rank (they compared the same identities); the exchange's own
  // failures propagate.
  const bool distinct = !same_gpu(devices, n, a, b);
  return known.emplace(key, distinct).first->second;
}

void send_recv(const int* devices, int n, const p2p_op* ops, std::size_t count, const char* what) {
  auto rank = [&](int d) {
    for (int r = 0; r < n; ++r)
      if (devices[r] == d) return r;
    throw invalid_argument("tessera: internal: " + std::string(what) + ": device " + std::to_string(d) +
                           " is not among " + device_list(devices, n));
  };
  // Ranks resolved first: nothing may throw inside the group.
  std::vector<int> peer(count);
  for (std::size_t i = 0; i < count; ++i) peer[i] = rank(ops[i].peer), (void)rank(ops[i].device);
  run_group(what, devices, n, 0, [&](int r, ncclComm_t comm, cudaStream_t st) {
    for (std::size_t i = 0; i < count; ++i) {
      const p2p_op& o = ops[i];
      if (o.device != devices[r] || o.bytes == 0) continue;
      const ncclResult_t e = o.send ? ncclSend(o.buf, o.bytes, ncclChar, peer[i], comm, st)
                                    : ncclRecv(o.buf, o.bytes, ncclChar, peer[i], comm, st);
      if (e != ncclSuccess) return e;
    }
    return ncclSuccess;
  });
}

}  // namespace tessera::detail::comm::nccl

#endif  // TESSERA_HAS_CUDA
