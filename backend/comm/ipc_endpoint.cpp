// SPDX-License-Identifier: Apache-2.0
// The process's side of copies between ranks through CUDA IPC (ipc_endpoint.hpp): the stream memory
// operations, the endpoint, the watchdog's view of a call, and the closing of peers' arrays that
// are no longer written. The schedule of a call is in ipc_exchange.cpp.
#include <backend/runtime/runtime.hpp>
#include <tessera/error.hpp>

#if TESSERA_HAS_CUDA
#include <backend/comm/device_rows.hpp>
#include <backend/comm/ipc_endpoint.hpp>

#include <cuda.h>
#include <unistd.h>

#include <algorithm>

namespace tessera::detail::comm::ipc {
namespace {

// The driver's stream memory operations (no runtime API has them), found once.
using value_fn = CUresult (*)(CUstream, CUdeviceptr, cuuint32_t, unsigned int);
struct memops {
  value_fn wait = nullptr, write = nullptr;
};
const memops& ops() {
  static const memops m = [] {
    memops o;
    void* w = nullptr;
    void* x = nullptr;
    cudaDriverEntryPointQueryResult found = cudaDriverEntryPointSymbolNotFound;
    if (cudaGetDriverEntryPointByVersion("cuStreamWaitValue32", &w, 12000, cudaEnableDefault, &found) == cudaSuccess &&
        found == cudaDriverEntryPointSuccess &&
        cudaGetDriverEntryPointByVersion("cuStreamWriteValue32", &x, 12000, cudaEnableDefault, &found) == cudaSuccess &&
        found == cudaDriverEntryPointSuccess) {
      o.wait = reinterpret_cast<value_fn>(w);
      o.write = reinterpret_cast<value_fn>(x);
    }
    (void)cudaGetLastError();
    return o;
  }();
  return m;
}

void check_cu(CUresult r, const char* what, int device) {
  if (r != CUDA_SUCCESS)
    throw backend_error(std::string("tessera: ") + what + " failed on " + rt::info(device).name + " (CUresult " +
                        std::to_string(static_cast<int>(r)) + ")");
}

// Mappings of one peer's arrays kept open: an array that died stays mapped (and its block held, if
// the driver counts the mapping) until a later call finds it unused.
constexpr std::size_t kept_arrays = 4;

}  // namespace

bool have_memops() { return ops().wait != nullptr && ops().write != nullptr; }

void wait_flag(int device, cudaStream_t stream, const std::uint32_t* flag, std::uint32_t value) {
  check_cu(ops().wait(reinterpret_cast<CUstream>(stream), reinterpret_cast<CUdeviceptr>(flag), value,
                      CU_STREAM_WAIT_VALUE_GEQ),
           "cuStreamWaitValue32", device);
}
void write_flag(int device, cudaStream_t stream, std::uint32_t* flag, std::uint32_t value) {
  check_cu(ops().write(reinterpret_cast<CUstream>(stream), reinterpret_cast<CUdeviceptr>(flag), value,
                       CU_STREAM_WRITE_VALUE_DEFAULT),
           "cuStreamWriteValue32", device);
}

std::mutex& lock() {
  static std::mutex m;
  return m;
}
endpoint& state() {
  static auto* e = new endpoint;  // never destroyed: CUDA may be gone at exit
  return *e;
}

std::uint64_t host_hash() {
  char name[256] = {};
  (void)gethostname(name, sizeof name - 1);
  std::uint64_t h = 1469598103934665603ull;
  for (const char* c = name; *c != '\0'; ++c) h = (h ^ static_cast<unsigned char>(*c)) * 1099511628211ull;
  return h;
}


watched_copy::~watched_copy() {
  rt::give_event(device_, before_);
  rt::give_event(device_, after_);
}

void watched_copy::mark(bool after) {
  cudaEvent_t& e = after ? after_ : before_;
  if (e == nullptr) e = static_cast<cudaEvent_t>(rt::take_event(device_));
  rt::check_cuda(cudaEventRecord(e, main_of(device_)), "cudaEventRecord", device_);
}

namespace {
bool done(cudaEvent_t e) {
  if (e == nullptr) return false;
  const cudaError_t q = cudaEventQuery(e);
  if (q == cudaErrorNotReady) return false;
  (void)cudaGetLastError();
  return true;
}
}  // namespace

inflight::state watched_copy::poll() { return {.started = done(before_), .finished = done(after_), .error = {}}; }

void watched_copy::abort() {
  if (cudaSetDevice(rt::info(device_).ordinal) != cudaSuccess) return;
  for (const auto& [flag, value] : waits_)
    (void)ops().write(reinterpret_cast<CUstream>(release_), reinterpret_cast<CUdeviceptr>(flag), value,
                      CU_STREAM_WRITE_VALUE_DEFAULT);
  (void)cudaStreamSynchronize(release_);
  (void)cudaGetLastError();
}

void close_unused_arrays(endpoint& ep, int device, std::uint32_t seq) {
  using key = std::pair<int, std::uint64_t>;
  std::map<int, std::vector<std::pair<std::uint32_t, key>>> by_rank;  // (calls ago, mapping)
  for (const auto& [k, a] : ep.peer_arrays) by_rank[k.first].push_back({seq - a.used, k});
  bool waited = false;
  for (auto& [r, list] : by_rank) {
    if (list.size() <= kept_arrays) continue;
    std::sort(list.begin(), list.end());
    for (std::size_t i = kept_arrays; i < list.size(); ++i) {
      if (list[i].first == 0) continue;
      if (!waited) {
        rt::check_cuda(cudaStreamSynchronize(main_of(device)), "cudaStreamSynchronize", device);
        waited = true;
      }
      if (void* p = ep.peer_arrays[list[i].second].p) (void)cudaIpcCloseMemHandle(p);
      (void)cudaGetLastError();
      ep.peer_arrays.erase(list[i].second);
    }
  }
}

// Pushes into a retired array were queued on this GPU's main stream: they finish first.
void close_retired(endpoint& ep, int device, const std::vector<card>& cards, int me) {
  bool waited = false;
  for (std::size_t q = 0; q < cards.size(); ++q) {
    if (static_cast<int>(q) == me) continue;
    const card& o = cards[q];
    for (std::uint32_t i = 0; i < std::min<std::uint32_t>(o.retired, max_retired); ++i) {
      const auto it = ep.peer_arrays.find({static_cast<int>(q), o.retired_ids[i]});
      if (it == ep.peer_arrays.end()) continue;
      if (!waited) {
        try {
          rt::set_device(device);
        } catch (...) {
        }
        (void)cudaStreamSynchronize(main_of(device));
        waited = true;
      }
      if (it->second.p != nullptr) (void)cudaIpcCloseMemHandle(it->second.p);
      (void)cudaGetLastError();
      ep.peer_arrays.erase(it);
    }
  }
}

}  // namespace tessera::detail::comm::ipc

#endif  // TESSERA_HAS_CUDA
