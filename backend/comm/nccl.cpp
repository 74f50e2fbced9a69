// SPDX-License-Identifier: Apache-2.0
// Collectives across GPUs through NCCL, reached from the entry points in host.cpp with checked
// arguments (all GPUs, each listed once, something to move). One communicator set per ordered
// list of devices, created on first use and cached: by ncclCommInitAll within this process, by
// ncclCommInitRank when the list spans ranks (the unique id broadcast over MPI; each rank creates
// and drives only its own devices' communicators). Every call is one
// NCCL group over all ranks, each rank's operation queued on its device's Tessera stream, so it
// is ordered after the kernels already queued there and before the ones queued next; the host
// does not wait. One rank needs no NCCL: a stream-ordered device-to-device copy.
#include <backend/comm/comm.hpp>
#include <backend/comm/mpi.hpp>
#include <backend/runtime/state.hpp>

#if TESSERA_HAS_CUDA
#include <nccl.h>

#include <cstdlib>
#include <map>
#include <mutex>
#include <string>
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
struct registry {
  // Guards the map and is held while a group is queued: two threads queueing collectives over
  // overlapping devices in different orders would deadlock on the devices' streams, so every
  // group is queued whole before the next one starts.
  std::mutex m;
  std::map<std::vector<int>, std::vector<ncclComm_t>> sets;
};

registry& reg() {
  static registry* r = new registry();  // leaked, see above
  return *r;
}

// Drops a set whose communicators hit an asynchronous error, so the next call starts afresh.
void discard(registry& rg, const std::vector<int>& key) {
  auto it = rg.sets.find(key);
  if (it == rg.sets.end()) return;
  for (ncclComm_t c : it->second)
    if (c != nullptr) (void)ncclCommAbort(c);
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

// One communicator per device of this rank in a list spanning ranks: list rank r is NCCL rank r.
// The first device's rank makes the unique id and every rank receives it (also ranks without a
// device in the list: the broadcast is collective, and they then cache an empty set, so that the
// next call over these devices finds the set on every rank alike).
void init_across_ranks(std::vector<ncclComm_t>& comms, const int* devices, int n) {
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
    failure = ncclCommInitRank(&comms[static_cast<std::size_t>(r)], n, id, r);
    if (failure != ncclSuccess) failed = r;
  }
  const ncclResult_t end = ncclGroupEnd();
  (void)rt::get_cuda_device();  // NCCL switched devices behind the runtime's per-thread cache
  if (failed >= 0) fail("ncclCommInitRank", rank_name(devices, n, failed), failure, nullptr);
  if (end != ncclSuccess) fail("ncclGroupEnd (ncclCommInitRank)", "devices " + device_list(devices, n), end, nullptr);
}

// The set for `devices` (caller holds rg.m), created on first use.
std::vector<ncclComm_t>& comms_for(registry& rg, const int* devices, int n, const std::vector<int>& key) {
  auto it = rg.sets.find(key);
  if (it != rg.sets.end()) return it->second;
  // NVLink SHARP (NVLS) reserves multicast memory per communicator and fails on machines where
  // multicast objects are not available to us; it must stay off. A value the user set wins.
  setenv("NCCL_NVLS_ENABLE", "0", 0);
  std::vector<ncclComm_t> comms(static_cast<std::size_t>(n), nullptr);
  if (rt::crosses_ranks(devices, static_cast<std::size_t>(n), "an NCCL communicator")) {
    init_across_ranks(comms, devices, n);
    return rg.sets.emplace(key, std::move(comms)).first->second;
  }
  std::vector<int> ordinals(static_cast<std::size_t>(n));
  for (int r = 0; r < n; ++r) ordinals[static_cast<std::size_t>(r)] = rt::info(devices[r]).ordinal;
  const ncclResult_t e = ncclCommInitAll(comms.data(), n, ordinals.data());
  // ncclCommInitAll switches devices behind the runtime's per-thread cache: re-read it.
  (void)rt::get_cuda_device();
  if (e != ncclSuccess) fail("ncclCommInitAll", "devices " + device_list(devices, n), e, nullptr);
  return rg.sets.emplace(key, std::move(comms)).first->second;
}

cudaStream_t stream_of(int device) { return static_cast<cudaStream_t>(rt::stream(device)); }

// One rank: a stream-ordered copy on the device (nothing when in place).
void copy_one(int device, void* dst, const void* src, std::size_t bytes) {
  if (dst == src) return;
  rt::device_restorer guard;
  rt::set_device(device);
  rt::cuda_check(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, stream_of(device)), "cudaMemcpyAsync",
                 rt::info(device).ordinal);
}

// Queues `call(rank, comm, stream)` for every rank inside one NCCL group. `what` names the NCCL
// call in errors.
template <class Call>
void run_group(const char* what, const int* devices, int n, Call&& call) {
  rt::device_restorer guard;
  registry& rg = reg();
  std::lock_guard<std::mutex> lock(rg.m);
  std::vector<int> key(static_cast<std::size_t>(n));
  // Device ids: equal to CUDA ordinals for this process's GPUs, and distinct for other ranks'.
  for (int r = 0; r < n; ++r) key[static_cast<std::size_t>(r)] = devices[r];
  std::vector<ncclComm_t>& comms = comms_for(rg, devices, n, key);
  // A communicator broken by an earlier failure would never complete: report, and start afresh
  // on the next call.
  if (std::string stale = async_errors(comms, devices, n); !stale.empty()) {
    discard(rg, key);
    throw backend_error(std::string("tessera: ") + what + " over " + device_list(devices, n) +
                        " not started: an earlier collective on these devices failed" + stale +
                        "; the communicators were aborted and will be recreated by the next call");
  }
  if (const ncclResult_t e = ncclGroupStart(); e != ncclSuccess)
    fail("ncclGroupStart", "devices " + device_list(devices, n), e, nullptr);
  int failed = -1;
  ncclResult_t failure = ncclSuccess;
  try {
    for (int r = 0; r < n; ++r) {
      if (rt::is_remote(devices[r])) continue;  // queued by its own rank
      rt::set_device(devices[r]);
      const ncclResult_t e = call(r, comms[static_cast<std::size_t>(r)], stream_of(devices[r]));
      if (e != ncclSuccess) {
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
  run_group("ncclAllGather", devices, n, [&](int r, ncclComm_t c, cudaStream_t s) {
    return ncclAllGather(send[r], recv[r], bytes, ncclChar, c, s);
  });
}

void allreduce(const int* devices, int n, const void* const* send, void* const* recv, std::size_t count, dtype t,
               op o) {
  if (n == 1) return copy_one(devices[0], recv[0], send[0], count * size_of(t));
  const ncclDataType_t type = nccl_type(t);
  const ncclRedOp_t red = nccl_op(o);
  run_group("ncclAllReduce", devices, n, [&](int r, ncclComm_t c, cudaStream_t s) {
    return ncclAllReduce(send[r], recv[r], count, type, red, c, s);
  });
}

void broadcast(const int* devices, int n, int root, const void* const* send, void* const* recv, std::size_t bytes) {
  if (n == 1) return copy_one(devices[0], recv[0], send[0], bytes);
  run_group("ncclBroadcast", devices, n, [&](int r, ncclComm_t c, cudaStream_t s) {
    // Only the root's send buffer is read; other ranks pass their receive buffer (in place).
    return ncclBroadcast(r == root ? send[r] : recv[r], recv[r], bytes, ncclChar, root, c, s);
  });
}

void reduce_scatter(const int* devices, int n, const void* const* send, void* const* recv, std::size_t count,
                    dtype t, op o) {
  if (n == 1) return copy_one(devices[0], recv[0], send[0], count * size_of(t));
  const ncclDataType_t type = nccl_type(t);
  const ncclRedOp_t red = nccl_op(o);
  run_group("ncclReduceScatter", devices, n, [&](int r, ncclComm_t c, cudaStream_t s) {
    return ncclReduceScatter(send[r], recv[r], count, type, red, c, s);
  });
}

}  // namespace tessera::detail::comm::nccl

#endif  // TESSERA_HAS_CUDA
