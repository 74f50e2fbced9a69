// SPDX-License-Identifier: Apache-2.0
// Private to backend/comm's copies between ranks through CUDA IPC (ipc_exchange.cpp): what this
// process keeps for them (its receive buffers, its flags, the peers' buffers, flags and arrays it
// opened), what each rank tells the others per call (`card`), the stream memory operations by which
// one rank's GPU waits for another's, and the watchdog's view of one call (ipc_endpoint.cpp).
// Includes the CUDA runtime: GPU builds only.
#pragma once
#include <backend/comm/watchdog.hpp>

#include <cuda_runtime.h>

#include <array>
#include <cstddef>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

namespace tessera::detail::comm::ipc {

constexpr int max_chunks = 16;
constexpr std::size_t max_retired = 8;  // retired blocks announced per call (more wait for the next)

// Whether the driver has the stream memory operations below (no runtime API has them).
bool have_memops();
// `stream` waits until the flag reaches `value` (cyclically: the counters may wrap).
void wait_flag(int device, cudaStream_t stream, const std::uint32_t* flag, std::uint32_t value);
// After the work queued before it on `stream` (and a fence: its writes are seen first).
void write_flag(int device, cudaStream_t stream, std::uint32_t* flag, std::uint32_t value);

// The flags one rank's GPU keeps for one peer rank q, written by q's GPU: `sent[b][j]` (q pushed
// chunk j of the call that last used this rank's buffer b), `freed[b]` (q copied out of its buffer
// b the pieces this rank pushed there), `open` (q's GPU reached call `open`, which writes into q's
// array itself: what q's work before it did with the array is done).
struct slot {
  std::uint32_t sent[2][max_chunks];
  std::uint32_t freed[2];
  std::uint32_t open;
};

// What one rank lends and exports for one call (dist::share_blocks moves it as bytes).
struct card {
  std::uint64_t host;          // a hash of the host name: IPC needs one node
  std::int32_t status;         // 0 ready; 1 short of memory or without IPC here
  std::uint64_t generation;    // of the receive buffer this call fills (b): a new allocation has a new one
  cudaIpcMemHandle_t memory;   // that buffer
  cudaIpcMemHandle_t flags;    // the rank's flags: one slot per rank, never reallocated
  std::int32_t direct;         // 1: the sources write into the array itself, not into the buffer
  std::uint64_t array_id;      // that array's block (rt::allocation_id)
  cudaIpcMemHandle_t array;    // its handle
  std::uint32_t retired;       // arrays' blocks this rank will free once every peer closed them
  std::uint64_t retired_ids[max_retired];
};

// This process's side of it for one GPU, kept for the next calls (its buffers and flags live as long
// as the process; the peers' are opened once, buffers again when they grow).
struct endpoint {
  struct lent {
    void* p = nullptr;
    std::size_t bytes = 0;
    std::uint64_t generation = 0;
    cudaIpcMemHandle_t handle{};
  };
  std::array<lent, 2> buffers;
  slot* flags = nullptr;
  std::uint32_t* counters = nullptr;  // the signalling kernel's, one per chunk (zero between calls)
  cudaIpcMemHandle_t flags_handle{};
  std::uint64_t generations = 0;
  int device = -1;        // the GPU of this rank that every call uses (the first one's)
  std::uint32_t seq = 0;  // calls done, the same on every rank (every rank takes part in each)
  cudaStream_t release = nullptr;  // the watchdog's stream for writing flags itself
  struct mapped {
    std::uint64_t generation = 0;
    void* p = nullptr;
  };
  std::map<std::pair<int, int>, mapped> peer_buffers;  // by (rank, buffer)
  std::map<int, slot*> peer_flags;                     // by rank
  // Peers' arrays written in place, by (rank, allocation id), with the last call that wrote each;
  // this rank's arrays exported so far, by allocation id.
  struct array_map {
    void* p = nullptr;
    std::uint32_t used = 0;
  };
  std::map<std::pair<int, std::uint64_t>, array_map> peer_arrays;
  std::map<std::uint64_t, cudaIpcMemHandle_t> exported;
};

// The one endpoint of this process, and the lock every call holds while it uses it.
std::mutex& lock();
endpoint& state();
// A hash of the host's name: CUDA IPC needs every rank on one node.
std::uint64_t host_hash();

// One call on this rank's GPU, as the watchdog sees it: events around its work on the main stream,
// and the flags its streams wait on (with the values that release them).
class watched_copy final : public inflight {
 public:
  watched_copy(int device, cudaStream_t release, std::string name)
      : device_(device), release_(release), name_(std::move(name)) {}
  ~watched_copy() override;
  // Records the event before (false) or after (true) the call's work on the main stream.
  void mark(bool after);
  void waits_on(std::uint32_t* flag, std::uint32_t value) { waits_.push_back({flag, value}); }
  state poll() override;
  // Writes every awaited flag from this process: the streams drain (the pieces that never came
  // leave the destination's regions unspecified; the rank is failed by then).
  void abort() override;
  std::string name() const override { return name_; }

 private:
  int device_;
  cudaStream_t release_;
  std::string name_;
  cudaEvent_t before_ = nullptr, after_ = nullptr;
  std::vector<std::pair<std::uint32_t*, std::uint32_t>> waits_;
};

// Closes, for each peer rank, the mappings of its arrays beyond the few written last (never one
// this call writes). Pushes through them were queued on this GPU's main stream: they finish first.
void close_unused_arrays(endpoint& ep, int device, std::uint32_t seq);
// Closes this rank's mappings of the arrays the peers announced as retired (dead, to be freed).
void close_retired(endpoint& ep, int device, const std::vector<card>& cards, int me);

}  // namespace tessera::detail::comm::ipc
