// SPDX-License-Identifier: Apache-2.0
// A batch of copies between GPUs of several ranks on one node (a re-shard across ranks) pushed by
// the sources' SMs through CUDA IPC into receive buffers the destinations lend, instead of NCCL
// (0.695x of one pair's peer copy per device on 4 H100 ranks, against 0.60x-0.62x).
//
// Why: NCCL across processes packs each strided piece on its source (a local pass), then moves it
// through its own FIFO buffers (another pass on each side), one group per chunk; on 4 H100 ranks
// a 16384^2 float re-shard moved 233-237 GB/s per device, 0.60x of one pair's peer copy, and each
// group held the host for about 250 us (bench_distributed (5), docs/performance.md). Within one
// process the runtime's scatter kernel (cuda::gather_rows run by the source, reading its strided
// rows locally and writing every destination at once over NVLink) reaches 0.79x. Across processes
// the user's arrays (managed memory by default) cannot be mapped by another process, so each
// destination lends a receive buffer of its own (cudaMalloc, exported with cudaIpcGetMemHandle):
// the sources write their pieces there, contiguous, and the destination copies them into place,
// chunk by chunk, behind the sources. A destination whose incoming pieces all land in one
// memory::device array (a whole cudaMalloc block, rt::allocation_id) exports that array instead,
// and the sources write in place, one chunk, no copy into place (TESSERA_PEER_IPC_DIRECT=0: the
// receive buffer); the sources first wait until the destination's GPU has reached the call (its
// `open` flag), as its earlier work may still read or write the array. A source whose pieces all
// go from memory::device into such arrays pushes with its copy engines instead of a kernel.
//
// Every wait between processes is a GPU's, on a flag in its own memory that the other process's GPU
// writes (cuStreamWaitValue32 / cuStreamWriteValue32 on memory mapped through CUDA IPC, as
// NVIDIA's nvFuser and PyTorch's symmetric memory signal between GPUs): the host waits for nothing,
// and each chunk is copied into place as soon as it has landed. A peer that dies leaves such a wait
// unsatisfied, so every call is watched like an NCCL collective across ranks (watchdog.hpp): past
// TESSERA_MPI_TIMEOUT the rank is marked failed and the watchdog writes the flags its streams wait
// on itself, so that they drain and the host's waits throw distributed_error instead of hanging.
// The schedule of call number `seq` (the same on every rank; buffer b = seq % 2):
//   1. each rank makes sure its receive buffer b holds its incoming bytes (two buffers, used in
//      turn, so that a call does not wait for the previous call's copies out of its buffer), then
//      one exchange of every rank's handles (dist::share_blocks) and one small collective once the
//      peers' buffers and flags are opened (cached); a rank short of memory, without IPC or on
//      another node sends every rank to NCCL, nothing queued;
//   2. each source's main stream waits until each destination has copied out of buffer b in call
//      seq - 2 (`freed`), then pushes chunk after chunk with one scatter kernel that writes
//      `sent[b][j] = seq` into each destination's flags itself once chunk j is visible there
//      (cuda::gather_rows_signalled; one kernel per chunk followed by the stream's flag writes,
//      TESSERA_PEER_IPC_SIGNAL=0, measured 0.706x against 0.702x on 4 H200 ranks, and 0.655x
//      against 0.710x on 2, where it left gaps between the chunks);
//   3. each destination's side stream first copies the pieces that stay on its GPU (beside the
//      push), then copies every source's chunks into place with one kernel whose blocks wait for
//      each chunk's flag themselves (cuda::gather_rows_awaited: a chunk goes into place as soon as
//      it has landed; written in place, the stream only waits for the flags), then writes
//      `freed[b] = seq` into every other rank's flags; the main stream joins the side stream;
//   4. one small collective: every rank has queued its part, or every rank releases its waits and
//      throws (the watchdog's flag writes release the awaiting kernel like the streams' waits).
// TESSERA_PEER_IPC=0 leaves such batches to NCCL; TESSERA_PEER_IPC_CHUNK_MB (default 32) sets the
// mean bytes per source per chunk (at most 16 chunks), TESSERA_PEER_IPC_EVEN=0 shrinking chunks,
// TESSERA_PEER_IPC_BLOCKS the pushing kernel's blocks per SM (TESSERA_PEER_SIDE_BLOCKS and
// TESSERA_PEER_AWAIT_BLOCKS those of the copies within a GPU and into place), TESSERA_PEER_IPC_SIGNAL=0
// one pushing kernel per chunk, TESSERA_PEER_IPC_AWAIT=0 a stream wait and a kernel per source and
// chunk into place (TESSERA_PEER_PLACE_BLOCKS their grid), TESSERA_PEER_IPC_WAIT_ALL=1 (with it) a
// chunk into place once every source's part landed.
#include <backend/comm/comm.hpp>
#include <backend/comm/ipc.hpp>
#include <backend/comm/watchdog.hpp>
#include <backend/process/mpi.hpp>
#include <backend/runtime/runtime.hpp>
#include <tessera/device.hpp>
#include <tessera/distributed.hpp>

#if TESSERA_HAS_CUDA
#include <backend/comm/device_rows.hpp>
#include <backend/comm/ipc_endpoint.hpp>
#include <backend/cuda/strided_copy.hpp>

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

namespace tessera::detail::comm::ipc {
namespace {

// An integer setting from the environment, `fallback` when unset or empty (read once by each caller).
long setting(const char* name, long fallback) {
  const char* v = std::getenv(name);
  return v == nullptr || *v == '\0' ? fallback : std::atol(v);
}

int mode() {
  static const int m = setting("TESSERA_PEER_IPC", 1) != 0 ? 1 : 0;
  return m;
}

// Mean bytes per source per chunk (TESSERA_PEER_IPC_CHUNK_MB). Smaller chunks leave a smaller last
// chunk to copy into place after the push, but each cost a stream wait and a launch while the
// copies into place took those: 16384^2 floats on 4 H200 ranks, 64 / 32 / 16 MiB gave 0.747x /
// 0.720x / 0.638x of a pair's bandwidth per device. With the awaiting kernel (no launch per chunk)
// 0.781x / 0.813x / 0.805x, hence 32.
std::size_t chunk_bytes() {
  static const long mb = setting("TESSERA_PEER_IPC_CHUNK_MB", 32);
  return static_cast<std::size_t>(mb > 0 ? mb : 32) << 20;
}

// Blocks per SM of the pushing kernel (TESSERA_PEER_IPC_BLOCKS, 1 to 8). Its blocks loop over the
// work until it is done, so with all 8 the copies into place on the side stream found no room and
// ran only between chunks: on 4 H100 ranks the re-shard took the push's time plus the copies'
// (0.680x of a pair's bandwidth per device against 0.80x for the push alone). Default: 3 where a
// destination copies into place beside the push (`staged`), else 4. Measured on H200s, 16384^2
// floats, per device over a pair's bandwidth, 3 against 4: into place 0.829x-0.843x against
// 0.801x-0.833x on 2 ranks, 0.750x against 0.742x on 4; written in place 0.965x-0.969x against
// 0.972x-0.978x on 2, 0.895x against 0.905x on 4.
int push_blocks(bool staged) {
  static const long x = setting("TESSERA_PEER_IPC_BLOCKS", 0);
  return x >= 1 && x <= 8 ? static_cast<int>(x) : staged ? 3 : 4;
}

// How every chunk is pushed (TESSERA_PEER_IPC_SIGNAL): 1 (default) one kernel for all of them that
// signals each chunk itself (cuda::gather_rows_signalled), 0 one kernel per chunk, each followed by
// the stream's flag writes.
bool signal_in_kernel() {
  static const bool s = setting("TESSERA_PEER_IPC_SIGNAL", 1) != 0;
  return s;
}

bool wait_all() {
  static const bool w = setting("TESSERA_PEER_IPC_WAIT_ALL", 0) != 0;
  return w;
}

// Whether a destination whose incoming pieces all land in one memory::device array lets the sources
// write there (TESSERA_PEER_IPC_DIRECT, default 1): no receive buffer and no copy into place.
bool direct_setting() {
  static const bool d = setting("TESSERA_PEER_IPC_DIRECT", 1) != 0;
  return d;
}

// How a source pushes (TESSERA_PEER_IPC_ENGINES): 1 with the copy engines (cudaMemcpy2DAsync into
// the mapped destination, one destination after another), 0 with a kernel; default (2): the copy
// engines where every piece it pushes goes from a memory::device array into a destination's array
// in place (4 H200 ranks: 0.860x of one pair's bandwidth per device against 0.814x for the kernel;
// 2 ranks: 0.816x against 0.78x), a kernel otherwise (copy engines read managed memory slowly:
// 0.680x against 0.711x into the receive buffers).
int engines() {
  static const long e = setting("TESSERA_PEER_IPC_ENGINES", 2);
  return e == 0 || e == 1 ? static_cast<int>(e) : 2;
}

// Blocks per SM of the kernel that copies the pieces within this GPU beside the push (above).
int side_blocks(int push) {
  static const long b = setting("TESSERA_PEER_SIDE_BLOCKS", 0);
  return b >= 1 && b <= 16 ? static_cast<int>(b) : std::max(1, 8 - push);
}

// Blocks per SM of the kernels that copy each landed chunk into place without the awaiting kernel
// (TESSERA_PEER_PLACE_BLOCKS, 1 to 16, default 16: the pitched copy's full grid). They start once
// the push is resident, so they take only the room it leaves. Fewer were not faster on 2 H200
// ranks: 4 and 8 gave 0.811x and 0.821x of a pair's bandwidth per device against 0.824x-0.825x.
int place_blocks() {
  static const long b = setting("TESSERA_PEER_PLACE_BLOCKS", 16);
  return b >= 1 && b <= 16 ? static_cast<int>(b) : 16;
}

// How a destination copies the landed chunks into place (TESSERA_PEER_IPC_AWAIT): 1 (default) one
// kernel for the whole call whose blocks wait for each chunk's flag themselves
// (cuda::gather_rows_awaited), 0 a stream wait and a pitched kernel per source and chunk. 16384^2
// floats on 4 H200 ranks: 0.813x of a pair's bandwidth per device against 0.747x (1.02x of one
// process's speed against 0.935x); on 2 ranks 0.856x against 0.833x (each against the former
// defaults: a kernel per chunk into place, 64 MiB chunks).
bool await_in_kernel() {
  static const bool a = setting("TESSERA_PEER_IPC_AWAIT", 1) != 0;
  return a;
}

// Blocks per SM of that kernel (TESSERA_PEER_AWAIT_BLOCKS, default 2). Its blocks hold their
// place while they wait, so they must leave the push room: at most 4, and at most 8 - `push` (8
// blocks of 256 threads fill an SM); 4 of its blocks (48 registers a thread, 12288 a block) still
// leave one pushing block (56 registers a thread) its registers on every SM, so the pushes, which
// every GPU's waits depend on, always run. On 4 H200 ranks, 64 MiB chunks: 2 blocks 0.784x of a
// pair's bandwidth per device, 1 block 0.740x.
int await_blocks(int push) {
  static const long b = setting("TESSERA_PEER_AWAIT_BLOCKS", 2);
  return std::max(1, std::min({b >= 1 ? static_cast<int>(b) : 2, 4, 8 - push}));
}

// Equal chunks (TESSERA_PEER_IPC_EVEN, default 1), or chunks that shrink linearly (0). Equal ones
// were faster on 2 H200 ranks (0.821x of a pair's bandwidth per device against 0.802x) and on 4
// (0.692x against 0.683x-0.687x, session 41).
bool even_chunks() {
  static const bool e = setting("TESSERA_PEER_IPC_EVEN", 1) != 0;
  return e;
}

// Pieces start 256 bytes apart in a receive buffer, so that the kernels keep their widest loads.
std::size_t round_up(std::size_t b) { return (b + 255) / 256 * 256; }

// One piece between two ranks' GPUs: its rows, its place in the destination's receive buffer.
struct piece {
  const rt::copy_region* r;
  std::size_t rows, offset;
  // Chunk j of k starts here: equal chunks, or (TESSERA_PEER_IPC_EVEN=0) chunks that shrink
  // linearly (weights k, k - 1, ..., 1), so that the copy into place of the last chunk, the part
  // that nothing overlaps, is the smallest.
  std::size_t begin(std::size_t j, std::size_t k) const {
    if (even_chunks()) return rows * j / k;
    const std::size_t w = j * k - j * (j - 1) / 2, all = k * (k + 1) / 2;
    return static_cast<std::size_t>(static_cast<unsigned __int128>(rows) * w / all);
  }
  std::size_t pitch_src() const { return r->height > 1 ? r->src_pitch : r->width; }
  std::size_t pitch_dst() const { return r->height > 1 ? r->dst_pitch : r->width; }
};

int rank_of(int device) { return rt::info(device).rank; }

// One call as this rank sees it. The pieces and `most` are the same on every rank; the rest follows
// from this rank's GPU in the batch (`mine`, -1 when it holds none).
struct call_plan {
  int me = 0, P = 0, mine = -1;
  std::vector<int> ranks;      // the rank of each GPU the pieces cross between
  std::vector<int> to, from;   // the ranks this rank pushes to, and receives from
  std::vector<piece> pieces;   // each destination's incoming pieces in batch order
  std::size_t most = 0;        // the most bytes one source sends
  std::size_t need = 0;        // the bytes this rank's GPU receives
  rt::buffer* into = nullptr;  // the array every incoming piece lands in, when there is one,
  bool may_direct = false;     // and it is memory::device on this GPU: the sources may write there
};

// The plan of a batch, or nothing where this path does not take it: every rank with one GPU among
// the devices the pieces cross between (a rank's own pair would need its in-process path, and with
// every rank in every call the calls' numbers, which buffer and which flag values, are the same
// everywhere). Other batches stay with NCCL. The same answer on every rank.
std::optional<call_plan> plan_call(const rt::copy_region* c, std::size_t n, const int* devices, int nd) {
  call_plan cp;
  cp.me = dist::world_rank();
  cp.P = dist::world_size();
  for (int i = 0; i < nd; ++i) {
    const int r = rank_of(devices[i]);
    if (std::find(cp.ranks.begin(), cp.ranks.end(), r) != cp.ranks.end()) return std::nullopt;
    cp.ranks.push_back(r);
  }
  if (static_cast<int>(cp.ranks.size()) != cp.P) return std::nullopt;
  for (int i = 0; i < nd; ++i)
    if (!rt::is_remote(devices[i])) cp.mine = devices[i];
  const int mine = cp.mine;
  std::map<int, std::size_t> incoming;  // bytes by destination
  std::map<int, std::size_t> outgoing;  // bytes by source
  for (std::size_t i = 0; i < n; ++i) {
    const rt::copy_region& r = c[i];
    if (r.width == 0 || r.height == 0 || r.src_device == r.dst_device) continue;
    std::size_t& in = incoming[r.dst_device];
    cp.pieces.push_back({&r, r.height, in});
    in += round_up(r.width * r.height);
    outgoing[r.src_device] += r.width * r.height;
  }
  for (const auto& [d, b] : outgoing) cp.most = std::max(cp.most, b);
  cp.need = mine >= 0 && incoming.count(mine) ? incoming.at(mine) : 0;
  // Every incoming piece lands in one memory::device array of this rank's GPU: the sources may
  // write there themselves (a cudaMalloc block is what CUDA IPC exports; managed memory is not).
  cp.may_direct = direct_setting() && cp.need > 0;
  for (const piece& p : cp.pieces) {
    if (p.r->dst_device != mine) continue;
    rt::buffer* d = p.r->dst_buf;
    if (d == nullptr || d->kind != memory::device || d->device != mine || (cp.into != nullptr && d != cp.into))
      cp.may_direct = false;
    cp.into = d;
  }
  auto& to = cp.to;
  auto& from = cp.from;
  for (const piece& p : cp.pieces) {
    if (p.r->src_device == mine && std::find(to.begin(), to.end(), rank_of(p.r->dst_device)) == to.end())
      to.push_back(rank_of(p.r->dst_device));
    if (p.r->dst_device == mine && std::find(from.begin(), from.end(), rank_of(p.r->src_device)) == from.end())
      from.push_back(rank_of(p.r->src_device));
  }
  return cp;
}

// 1. This rank's card for the call that fills buffer b: its endpoint set up, its array exported (where
// the sources may write in place) or its receive buffer b lent (status 1 when short of memory),
// its dead exported blocks announced (`retired`). Throws on any other failure.
void fill_card(const call_plan& cp, endpoint& ep, int b, card& my,
               std::vector<std::pair<void*, std::uint64_t>>& retired) {
  const int mine = cp.mine;
  if (!have_memops()) throw backend_error("tessera: no stream memory operations");
  // One GPU per rank for the life of the process (its flags are the ones peers write).
  if (ep.device >= 0 && ep.device != mine) throw backend_error("tessera: another GPU than the first call's");
  ep.device = mine;
  if (ep.flags == nullptr) {
    // Device memory, not the cache's: IPC exports whole cudaMalloc allocations.
    void* f = nullptr;
    const std::size_t bytes = sizeof(slot) * static_cast<std::size_t>(cp.P);
    rt::check_cuda(cudaMalloc(&f, bytes), "cudaMalloc (the flags of copies between ranks)", mine);
    rt::check_cuda(cudaMemset(f, 0, bytes), "cudaMemset", mine);
    rt::check_cuda(cudaIpcGetMemHandle(&ep.flags_handle, f), "cudaIpcGetMemHandle", mine);
    rt::check_cuda(cudaStreamCreateWithFlags(&ep.release, cudaStreamNonBlocking), "cudaStreamCreateWithFlags", mine);
    ep.flags = static_cast<slot*>(f);
  }
  if (ep.counters == nullptr) {
    void* c = nullptr;
    rt::check_cuda(cudaMalloc(&c, sizeof(std::uint32_t) * max_chunks), "cudaMalloc (chunk counters)", mine);
    rt::check_cuda(cudaMemset(c, 0, sizeof(std::uint32_t) * max_chunks), "cudaMemset", mine);
    ep.counters = static_cast<std::uint32_t*>(c);
  }
  if (cp.may_direct) {
    const std::uint64_t id = rt::allocation_id(cp.into->ptr);
    auto it = ep.exported.find(id);
    if (id != 0 && it == ep.exported.end()) {
      cudaIpcMemHandle_t h{};
      if (cudaIpcGetMemHandle(&h, cp.into->ptr) == cudaSuccess) {
        rt::mark_exported(cp.into->ptr);  // freed only once no peer maps it (retired blocks)
        it = ep.exported.emplace(id, h).first;
      } else
        (void)cudaGetLastError();
    }
    if (it != ep.exported.end()) {
      my.direct = 1;
      my.array_id = id;
      my.array = it->second;
    }
  }
  endpoint::lent& l = ep.buffers[static_cast<std::size_t>(b)];
  if (!my.direct && cp.need > l.bytes) {
    if (l.p != nullptr) {
      // Its last call's copies out of it (on the side stream) must be done before it goes; the
      // sources' writes into it were, before those copies started.
      rt::check_cuda(cudaStreamSynchronize(side_of(mine)), "cudaStreamSynchronize", mine);
      rt::check_cuda(cudaFree(l.p), "cudaFree (a receive buffer of copies between ranks)", mine);
      l = {};
    }
    void* p = nullptr;
    if (cudaMalloc(&p, cp.need) != cudaSuccess) {
      (void)cudaGetLastError();
      my.status = 1;  // short of memory: every rank takes NCCL's path
    } else {
      l.p = p;
      l.bytes = cp.need;
      l.generation = ++ep.generations;
      rt::check_cuda(cudaIpcGetMemHandle(&l.handle, l.p), "cudaIpcGetMemHandle", mine);
    }
  }
  my.generation = l.generation;
  my.memory = l.handle;
  my.flags = ep.flags_handle;
  retired = rt::retired_blocks(mine, max_retired);
  my.retired = static_cast<std::uint32_t>(retired.size());
  for (std::size_t i = 0; i < retired.size(); ++i) my.retired_ids[i] = retired[i].second;
}

// Where each of this rank's pieces goes in the peers' memory: their arrays (written in place) or
// their receive buffers b, opened here and cached, as are their flags. Throws when one cannot be
// opened (no IPC between these GPUs).
std::vector<void*> open_targets(const call_plan& cp, endpoint& ep, const std::vector<card>& cards, std::uint32_t seq,
                                int b) {
  const int mine = cp.mine;
  std::vector<void*> target(cp.pieces.size(), nullptr);
  for (int q : cp.ranks) {
    if (q == cp.me || ep.peer_flags.count(q)) continue;
    void* f = nullptr;
    const cudaIpcMemHandle_t h = cards[static_cast<std::size_t>(q)].flags;
    rt::check_cuda(cudaIpcOpenMemHandle(&f, h, cudaIpcMemLazyEnablePeerAccess),
                   "cudaIpcOpenMemHandle (a peer rank's flags)", mine);
    ep.peer_flags[q] = static_cast<slot*>(f);
  }
  for (std::size_t i = 0; i < cp.pieces.size(); ++i) {
    const piece& p = cp.pieces[i];
    if (p.r->src_device != mine) continue;
    const int q = rank_of(p.r->dst_device);
    const card& o = cards[static_cast<std::size_t>(q)];
    if (o.direct) {
      if (p.r->dst_buf == nullptr) throw backend_error("tessera: a piece without its array");
      endpoint::array_map& a = ep.peer_arrays[{q, o.array_id}];
      if (a.p == nullptr) {
        void* m = nullptr;
        rt::check_cuda(cudaIpcOpenMemHandle(&m, o.array, cudaIpcMemLazyEnablePeerAccess),
                       "cudaIpcOpenMemHandle (a peer rank's array)", mine);
        a.p = m;
      }
      a.used = seq;
      const auto* base = static_cast<const unsigned char*>(p.r->dst_buf->ptr);
      target[i] = static_cast<unsigned char*>(a.p) + (static_cast<const unsigned char*>(p.r->dst) - base);
      continue;
    }
    endpoint::mapped& m = ep.peer_buffers[{q, b}];
    if (m.p == nullptr || m.generation != o.generation) {
      if (m.p != nullptr) (void)cudaIpcCloseMemHandle(m.p);
      m = {};
      void* mapped = nullptr;
      rt::check_cuda(cudaIpcOpenMemHandle(&mapped, o.memory, cudaIpcMemLazyEnablePeerAccess),
                     "cudaIpcOpenMemHandle (a peer rank's receive buffer)", mine);
      m = {o.generation, mapped};
    }
    target[i] = static_cast<unsigned char*>(m.p) + p.offset;
  }
  close_unused_arrays(ep, mine, seq);
  return target;
}

// The pieces within this rank's GPU of the batch, on its side stream, beside the push (queued
// before it). Behind the copies into place they ran once the last chunk had landed, after the
// whole transfer (2 H200 ranks, 16384^2 floats: 0.821x of a pair's bandwidth per device in place,
// 0.710x through the receive buffers). Their kernel reaches the SMs first and the GPU hands out
// all its blocks before the push's, so it gets fewer: at its usual 16 blocks per SM (two waves)
// the push started 0.1 ms later of 0.93 ms per call. 8 minus the push's blocks per SM
// (8 of 256 threads fill an SM's threads; the push's 56 registers a thread leave it less room than
// that, so part of the push still starts behind them), or TESSERA_PEER_SIDE_BLOCKS.
void queue_within(const rt::copy_region* c, std::size_t n, int mine, int push) {
  const int beside = side_blocks(push);
  for (std::size_t i = 0; i < n; ++i) {
    const rt::copy_region& r = c[i];
    if (r.width == 0 || r.height == 0 || r.src_device != r.dst_device || r.dst_device != mine) continue;
    copy_rows(mine, side_of(mine), r.dst, r.dst_pitch, r.src, r.src_pitch, r.width, r.height,
              "cudaMemcpy2DAsync (a piece within a GPU)", beside);
  }
}

// 2. On this rank's main stream: the sources of its array let in (written in place), then the
// push of its pieces, chunk after chunk, once each destination has copied out of buffer b in call
// seq - 2 (or, written in place, has reached this call), each destination's flag for a chunk
// written once its part of the chunk has landed.
void queue_push(const call_plan& cp, endpoint& ep, const std::vector<card>& cards, const std::vector<void*>& target,
                std::uint32_t seq, int b, std::size_t k, bool direct, int push, watched_copy& watch) {
  const int mine = cp.mine, me = cp.me, P = cp.P;
  const auto& to = cp.to;
  const cudaStream_t st = main_of(mine);
  // Written in place, this rank lets its sources start once its GPU has reached this call.
  if (direct)
    for (int q : cp.from) write_flag(mine, st, &ep.peer_flags.at(q)[me].open, seq);
  for (int q : to) {
    const bool in_place = cards[static_cast<std::size_t>(q)].direct != 0;
    std::uint32_t* f = in_place ? &ep.flags[q].open : &ep.flags[q].freed[b];
    const std::uint32_t v = in_place ? seq : seq - 2;
    wait_flag(mine, st, f, v);
    watch.waits_on(f, v);
  }
  // The pieces' rows of chunk j, j = 0 .. k - 1, in that order (first[j]: chunk j's first).
  std::vector<cuda::gather_piece> g;
  std::vector<int> dest_rank;  // of each of g
  std::vector<int> first{0};
  for (std::size_t j = 0; j < k; ++j) {
    for (std::size_t i = 0; i < cp.pieces.size(); ++i) {
      const piece& p = cp.pieces[i];
      if (p.r->src_device != mine) continue;
      const std::size_t a = p.begin(j, k), e2 = p.begin(j + 1, k);
      if (a == e2) continue;
      const std::size_t to_pitch =
          cards[static_cast<std::size_t>(rank_of(p.r->dst_device))].direct ? p.pitch_dst() : p.r->width;
      g.push_back({static_cast<const unsigned char*>(p.r->src) + a * p.pitch_src(),
                   static_cast<unsigned char*>(target[i]) + a * to_pitch, p.pitch_src(), to_pitch, p.r->width,
                   e2 - a});
      dest_rank.push_back(rank_of(p.r->dst_device));
    }
    first.push_back(static_cast<int>(g.size()));
  }
  std::vector<std::uint32_t*> flags;
  for (int q : to) flags.push_back(ep.peer_flags.at(q)[me].sent[b]);
  bool by_engines = engines() == 1;
  if (engines() == 2) {
    by_engines = !to.empty();
    for (const piece& p : cp.pieces)
      if (p.r->src_device == mine)
        by_engines = by_engines && p.r->src_buf != nullptr && p.r->src_buf->kind == memory::device &&
                     cards[static_cast<std::size_t>(rank_of(p.r->dst_device))].direct != 0;
  }
  if (by_engines) {
    // The copy engines, one destination after another from the next rank on: while every source
    // keeps pace, each destination receives from one source at a time.
    for (std::size_t j = 0; j < k; ++j)
      for (int step = 1; step < P; ++step) {
        const int q = (me + step) % P;
        if (std::find(to.begin(), to.end(), q) == to.end()) continue;
        for (int x = first[j]; x < first[j + 1]; ++x)
          if (dest_rank[static_cast<std::size_t>(x)] == q)
            rt::check_cuda(cudaMemcpy2DAsync(g[x].dst, g[x].dst_pitch, g[x].src, g[x].src_pitch, g[x].width,
                                             g[x].height, cudaMemcpyDeviceToDevice, st),
                           "cudaMemcpy2DAsync (a piece to another rank)", mine);
        write_flag(mine, st, ep.peer_flags.at(q)[me].sent[b] + j, seq);
      }
  } else if (!signal_in_kernel() || to.empty() ||
             !cuda::gather_rows_signalled(mine, st, g.data(), first.data(), static_cast<int>(k), flags.data(),
                                          static_cast<int>(flags.size()), seq, ep.counters, push)) {
    for (std::size_t j = 0; j < k; ++j) {
      cuda::gather_rows(mine, st, g.data() + first[j], first[j + 1] - first[j], push);
      for (std::uint32_t* f : flags) write_flag(mine, st, f + j, seq);
    }
  }
}

// 3. On this rank's side stream: each incoming chunk into place as it lands, each source's part as
// soon as it has (by the awaiting kernel, or a stream wait and a kernel per part;
// TESSERA_PEER_IPC_WAIT_ALL=1: once every source's part of the chunk has; written in place, only
// the waits), then every peer told that buffer b is free again.
void queue_into_place(const call_plan& cp, endpoint& ep, std::uint32_t seq, int b, std::size_t k, bool direct,
                      int push, watched_copy& watch) {
  const int mine = cp.mine, me = cp.me;
  const cudaStream_t side = side_of(mine);
  const endpoint::lent& l = ep.buffers[static_cast<std::size_t>(b)];
  std::vector<cuda::gather_piece> g;
  // Chunk j's pieces from rank from_rank (every source's where it is -1), appended to g.
  auto landed = [&](std::size_t j, int from_rank) {
    for (const piece& p : cp.pieces) {
      if (p.r->dst_device != mine || (from_rank >= 0 && rank_of(p.r->src_device) != from_rank)) continue;
      const std::size_t a = p.begin(j, k), e2 = p.begin(j + 1, k);
      if (a == e2) continue;
      g.push_back({static_cast<unsigned char*>(l.p) + p.offset + a * p.r->width,
                   static_cast<unsigned char*>(p.r->dst) + a * p.pitch_dst(), p.r->width, p.pitch_dst(), p.r->width,
                   e2 - a});
    }
  };
  auto into_place = [&](std::size_t j, int from_rank) {
    if (direct) return;  // the sources wrote in place
    g.clear();
    landed(j, from_rank);
    // A pitched kernel per piece, filling the SMs the push leaves: on 2 H200 ranks the copy engines
    // (cudaMemcpy2DAsync) gave 0.609x and one gather kernel of 2 blocks per SM for the chunk
    // 0.556x, against 0.710x (before the pushing kernel's registers were cut).
    for (const cuda::gather_piece& x : g)
      copy_rows(mine, side, x.dst, x.dst_pitch, x.src, x.src_pitch, x.width, x.height,
                "cudaMemcpy2DAsync (a piece from another rank into place)", place_blocks());
  };
  // One kernel that waits for each chunk itself: a source's chunk goes into place as soon as it has
  // landed, without a stream wait and a launch per chunk between it and the copy.
  // (Written in place, the stream still waits for every source's chunk: nothing to copy, but the
  // work after the call must not run before the pieces have landed.)
  bool queued = cp.need == 0;
  if (!queued && !direct && await_in_kernel() && !wait_all()) {
    std::vector<int> first{0}, lane;
    std::vector<const std::uint32_t*> waits;
    g.clear();
    for (std::size_t j = 0; j < k; ++j)
      for (std::size_t i = 0; i < cp.from.size(); ++i) {
        landed(j, cp.from[i]);
        first.push_back(static_cast<int>(g.size()));
        lane.push_back(static_cast<int>(i));
        waits.push_back(&ep.flags[cp.from[i]].sent[b][j]);
      }
    // Every flag the kernel may wait on is the watchdog's to write, before the kernel is queued.
    for (const std::uint32_t* f : waits) watch.waits_on(const_cast<std::uint32_t*>(f), seq);
    queued = cuda::gather_rows_awaited(mine, side, g.data(), first.data(), lane.data(), static_cast<int>(waits.size()),
                                       waits.data(), seq, await_blocks(push));
  }
  for (std::size_t j = 0; j < k && !queued; ++j) {
    for (int q : cp.from) {
      std::uint32_t* f = &ep.flags[q].sent[b][j];
      wait_flag(mine, side, f, seq);
      watch.waits_on(f, seq);
      if (!wait_all()) into_place(j, q);
    }
    if (wait_all()) into_place(j, -1);
  }
  // Every peer learns that buffer b is free again, whether or not it pushed into it this time: its
  // next push there (call seq + 2 or later) waits for the last call that used it.
  for (int q : cp.ranks)
    if (q != me) write_flag(mine, side, &ep.peer_flags.at(q)[me].freed[b], seq);
}

}  // namespace

bool exchange(const rt::copy_region* c, std::size_t n, const int* devices, int nd) {
  if (mode() == 0) return false;
  const std::optional<call_plan> plan = plan_call(c, n, devices, nd);
  if (!plan) return false;
  const call_plan& cp = *plan;
  const int me = cp.me, mine = cp.mine;

  std::lock_guard<std::mutex> guard(lock());
  rt::device_restorer restore;
  std::vector<card> cards(static_cast<std::size_t>(cp.P));
  std::vector<int> owner(static_cast<std::size_t>(cp.P));
  for (int q = 0; q < cp.P; ++q) owner[static_cast<std::size_t>(q)] = q;
  card& my = cards[static_cast<std::size_t>(me)];
  std::memset(&my, 0, sizeof my);
  my.host = host_hash();
  endpoint* ep = nullptr;
  std::vector<std::pair<void*, std::uint64_t>> retired;  // this rank's dead exported blocks
  std::uint32_t seq = 0;
  int b = 0;
  if (mine >= 0) {
    try {
      rt::set_device(mine);
      ep = &state();
      seq = ep->seq + 1;
      b = static_cast<int>(seq % 2);
      fill_card(cp, *ep, b, my, retired);
    } catch (const std::exception&) {
      (void)cudaGetLastError();
      my.status = 1;  // every rank then takes NCCL's path; nothing is queued yet
    }
  }
  dist::share_blocks(cards.data(), cards.size(), sizeof(card), owner.data(),
                     "the receive buffers of a copy between ranks (CUDA IPC)");
  // The peers' dead arrays that this rank maps are closed now; their owners free them after the
  // next collective, which every rank reaches only after this.
  if (ep != nullptr) close_retired(*ep, mine, cards, me);
  for (int r : cp.ranks) {
    const card& o = cards[static_cast<std::size_t>(r)];
    if (o.status != 0 || o.host != my.host) return false;
  }
  const bool direct = my.direct != 0;
  // Chunks let a destination copy into place behind the sources; where every destination is
  // written in place, one chunk.
  bool every_direct = true;
  for (const piece& p : cp.pieces)
    every_direct = every_direct && cards[static_cast<std::size_t>(rank_of(p.r->dst_device))].direct != 0;
  const std::size_t k =
      every_direct ? 1 : std::clamp<std::size_t>((cp.most + chunk_bytes() - 1) / chunk_bytes(), 1, max_chunks);

  // The peers' buffers and flags. A failure (no IPC between these GPUs) sends every rank to NCCL,
  // still before anything is queued.
  std::int32_t failed = 0;
  std::vector<void*> target;
  if (mine >= 0) {
    try {
      rt::set_device(mine);
      target = open_targets(cp, *ep, cards, seq, b);
    } catch (const std::exception&) {
      (void)cudaGetLastError();
      failed = 1;
    }
  }
  dist::allreduce(&failed, 1, dtype::i32, op::max, "opening the peers' receive buffers (CUDA IPC)");
  for (const auto& [p, id] : retired) {
    rt::free_retired(mine, p);
    if (ep != nullptr) ep->exported.erase(id);
  }
  if (failed != 0) return false;

  for (std::size_t i = 0; i < n; ++i) {
    const rt::copy_region& r = c[i];
    if (r.width == 0 || r.height == 0) continue;
    if (r.dst_buf && !rt::is_remote(r.dst_device)) rt::make_resident(*r.dst_buf);
    if (r.src_buf && !rt::is_remote(r.src_device)) rt::make_resident(*r.src_buf);
  }

  // 2, 3: queued on this rank's GPU.
  std::int32_t queue_failed = 0;
  std::exception_ptr failure;
  std::shared_ptr<watched_copy> watch;
  try {
    if (mine >= 0) {
      rt::set_device(mine);
      watch = std::make_shared<watched_copy>(mine, ep->release,
                                             "a copy between ranks (CUDA IPC) on " + rt::info(mine).name);
      watch->mark(false);
      // The side stream starts behind the main stream's work so far (the regions' last users).
      rt::stream_after(mine, side_of(mine), main_of(mine));
      const int push = push_blocks(!every_direct);
      queue_within(c, n, mine, push);
      queue_push(cp, *ep, cards, target, seq, b, k, direct, push, *watch);
      queue_into_place(cp, *ep, seq, b, k, direct, push, *watch);
    }
    // The pieces within another GPU of this rank (not one of the batch's): in stream order there.
    for (std::size_t i = 0; i < n; ++i) {
      const rt::copy_region& r = c[i];
      if (r.width == 0 || r.height == 0 || r.src_device != r.dst_device || rt::is_remote(r.dst_device) ||
          r.dst_device == mine)
        continue;
      copy_rows(r.dst_device, main_of(r.dst_device), r.dst, r.dst_pitch, r.src, r.src_pitch, r.width, r.height,
                "cudaMemcpy2DAsync (a piece within a GPU)");
    }
  } catch (...) {
    queue_failed = 1;
    failure = std::current_exception();
  }
  // The main stream joins the side stream (also after a failure: later work must follow whatever
  // was queued), and the watchdog watches the call until it is done on this GPU.
  if (watch) {
    try {
      rt::set_device(mine);
      rt::stream_after(mine, main_of(mine), side_of(mine));
      watch->mark(true);
      watch_in_background(watch);
    } catch (...) {
      if (!failure) failure = std::current_exception();
      queue_failed = 1;
      watch->abort();  // unwatched: nothing else would release its waits
    }
  }
  // 4. Every rank has queued its part, or every rank releases its own waits and throws.
  try {
    dist::allreduce(&queue_failed, 1, dtype::i32, op::max, "a copy between ranks (CUDA IPC), queued");
  } catch (...) {
    if (watch) watch->abort();
    throw;
  }
  if (queue_failed != 0) {
    if (watch) watch->abort();
    const std::string why = "a copy between ranks (CUDA IPC) failed";
    dist::fail(why);
    if (failure) std::rethrow_exception(failure);
    throw distributed_error("tessera (rank " + std::to_string(me) + "): " + why +
                            ": another rank failed to queue its part");
  }
  if (ep != nullptr) ep->seq = seq;
  return true;
}

}  // namespace tessera::detail::comm::ipc

#endif  // TESSERA_HAS_CUDA
