// SPDX-License-Identifier: Apache-2.0
// Copies between any two devices (runtime.hpp, copy_between and copy_between_2d: contiguous, or
// rows at a pitch): host devices by memcpy, GPU <-> host device through the pinned staging of
// transfer.cpp, GPU <-> GPU by cudaMemcpyPeerAsync / cudaMemcpy3DPeerAsync on the destination's
// stream, ordered after the source's queued work and before the source's later work;
// copy_between_many issues several such copies at once (copy_peers), and start_copies /
// finish_copies put them on the GPUs' copy streams for hide_communication.
#include <backend/cuda/strided_copy.hpp>
#include <backend/process/mpi.hpp>
#include <backend/runtime/state.hpp>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <utility>
#include <vector>

namespace tessera::detail::rt {
#if TESSERA_HAS_CUDA
// One stream per (destination, source) pair on machines of 3 or more GPUs (TESSERA_PEER_STREAMS=0:
// every piece of a destination on its one stream, in rotated order). On 4 H100s the re-shard of
// bench_stencil moved 0.480-0.482x of one pair's peer bandwidth per device with the pair streams
// and 0.311-0.315x on one stream, and fft2 over 4 GPUs took 0.737-0.741x of one GPU's time
// against 0.550-0.551x (two runs each, alternating, one machine).
bool peer_streams_enabled() {
  static const bool on = [] {
    const char* v = std::getenv("TESSERA_PEER_STREAMS");
    return v == nullptr || *v == '\0' || std::atoi(v) != 0;
  }();
  return on;
}

#endif
namespace {

#if TESSERA_HAS_CUDA
// Which copies between GPUs with peer access a kernel makes (backend/cuda/strided_copy.cu: the
// destination's SMs read the source over NVLink, or pushed, the source's SMs write the
// destination) instead of the copy engines: TESSERA_PEER_KERNEL=0 none, 1 the pitched ones (blocks
// of a matrix), 2 all, 3 all of every batch's pieces of one device in one kernel (cuda::gather_rows:
// its blocks spread over the pieces, so every source or destination is served at once); unset
// (-1), that kernel for large batches over 3 or more GPUs (gathers_between_gpus), pushed by default
// (peer_push_mode). Measured by bench_stencil (2), a re-shard of 16384^2 floats on 4 H200s, per
// device against one pair's peer bandwidth: 0.756x pushed, 0.706x-0.759x pulled, 0.64x through
// NCCL, 0.48x on the copy engines. One pitched kernel per piece gained nothing on 2 H100s (1.95 ms
// against 1.94 ms): it fills the GPU for one source at a time.
int peer_kernel_mode() {
  static const int mode = [] {
    const char* v = std::getenv("TESSERA_PEER_KERNEL");
    return v == nullptr || *v == '\0' ? -1 : std::atoi(v);
  }();
  return mode;
}

// Whether copies between GPUs are pushed by their sources: each piece is issued on a stream of
// the source device, so a kernel copy runs on the source's SMs, reading locally and writing over
// NVLink, as NCCL's transport does, and a copy-engine copy runs on the source's engines.
// TESSERA_PEER_PUSH=1 pushes every batch (no ticket, not captured, NVLink both ways), 0 none;
// unset (-1), the batches that the kernels take (gathers_between_gpus) are pushed, as one scatter
// kernel per source: a re-shard of 16384^2 floats on 4 H200s moved 0.756x of one pair's peer
// bandwidth per device pushed, 0.706x pulled by one gather kernel per destination (bench_stencil
// (2), docs/performance.md).
int peer_push_mode() {
  static const int mode = [] {
    const char* v = std::getenv("TESSERA_PEER_PUSH");
    return v == nullptr || *v == '\0' ? -1 : (std::atoi(v) != 0 ? 1 : 0);
  }();
  return mode;
}

// Blocks per SM of the kernel that copies a batch's pieces within one GPU beside its copies between
// GPUs (local_side_copies: managed memory beside the copy engines), TESSERA_PEER_SIDE_BLOCKS, 1 to 16
// (default 16, two waves of 256 threads). Across ranks the same kind of kernel held up the pushing
// kernel queued after it by 0.1 ms until its second wave was out (docs/performance.md, session 44);
// within one process on 2 H200s the peer copy also starts 0.1 ms after it, which this setting
// lets a run test (across ranks the same setting has its own default: ipc_exchange.cpp).
int side_copy_blocks() {
  static const int blocks = [] {
    const char* v = std::getenv("TESSERA_PEER_SIDE_BLOCKS");
    const int b = v == nullptr || *v == '\0' ? 16 : std::atoi(v);
    return b >= 1 && b <= 16 ? b : 16;
  }();
  return blocks;
}

// A batch's events, given back to their GPUs' pools however the batch ends (rt::take_event).
struct batch_events {
  std::vector<copy_ticket::held> held;
  batch_events() = default;
  batch_events(const batch_events&) = delete;
  batch_events& operator=(const batch_events&) = delete;
  ~batch_events() {
    for (const auto& h : held) give_event(h.device, h.event);
  }
  // An event of `device` (current) recorded on `st`.
  cudaEvent_t record(int device, cudaStream_t st) {
    held.reserve(held.size() + 1);
    const auto e = static_cast<cudaEvent_t>(take_event(device));
    held.push_back({device, e});
    cuda_check(cudaEventRecord(e, st), "cudaEventRecord", device);
    return e;
  }
};

// The regions `mine` of c as the gather kernel's pieces (cuda::gather_rows).
std::vector<cuda::gather_piece> gather_pieces(const copy_region* c, const std::vector<std::size_t>& mine) {
  std::vector<cuda::gather_piece> pieces;
  pieces.reserve(mine.size());
  for (std::size_t i : mine) {
    const copy_region& r = c[i];
    pieces.push_back({r.src, r.dst, r.height > 1 ? r.src_pitch : r.width, r.height > 1 ? r.dst_pitch : r.width,
                      r.width, r.height});
  }
  return pieces;
}

// The pushed form of copy_peers (no ticket, not captured, every pair over NVLink both ways): each
// source waits for the queued work of itself and of each destination it writes (their events),
// issues its pieces per destination on its pair stream for that destination (its main stream on 2
// GPUs or with TESSERA_PEER_STREAMS=0), in rotated order; once all are queued, both main streams
// of each pair wait for that pair's event. With `scatter` (the batch is one that
// gathers_between_gpus takes) each source's pieces go instead to one kernel on its main stream,
// writing every destination at once.
void push_peers(const copy_region* c, std::size_t n, bool scatter) {
  const auto G = static_cast<std::size_t>(get().gpu_count);
  std::vector<int> devices;
  for (std::size_t i = 0; i < n; ++i)
    for (int d : {c[i].src_device, c[i].dst_device})
      if (std::find(devices.begin(), devices.end(), d) == devices.end()) devices.push_back(d);
  batch_events events;
  auto record = [&](int device, cudaStream_t st) { return events.record(device, st); };
  auto main_stream = [](int d) { return static_cast<cudaStream_t>(stream(d)); };
  std::vector<cudaEvent_t> ready(G, nullptr);
  for (int d : devices) {
    device_guard guard(d);
    ready[static_cast<std::size_t>(d)] = record(d, main_stream(d));
  }
  const int gpus = get().gpu_count;
  struct join {
    int src, dst;
    cudaEvent_t done;
    cudaStream_t on;
  };
  std::vector<join> joins;
  for (int s : devices) {
    std::vector<std::size_t> mine;
    for (std::size_t i = 0; i < n; ++i)
      if (c[i].src_device == s) mine.push_back(i);
    if (mine.empty()) continue;
    if (scatter) {
      // The gather kernel run by the source over all its pieces: its blocks write every
      // destination at once, reading locally (NCCL's direction).
      device_guard guard(s);
      const cudaStream_t st = main_stream(s);
      std::vector<int> to;
      for (std::size_t i : mine) {
        const int d = c[i].dst_device;
        if (std::find(to.begin(), to.end(), d) != to.end()) continue;
        to.push_back(d);
        cuda_check(cudaStreamWaitEvent(st, ready[static_cast<std::size_t>(d)], 0), "cudaStreamWaitEvent", s);
      }
      const std::vector<cuda::gather_piece> pieces = gather_pieces(c, mine);
      cuda::gather_rows(s, st, pieces.data(), static_cast<int>(pieces.size()));
      const cudaEvent_t done = record(s, st);
      for (int d : to) joins.push_back({s, d, done, st});
      continue;
    }
    auto turn = [&](std::size_t i) { return ((c[i].dst_device - s) % gpus + gpus) % gpus; };
    std::stable_sort(mine.begin(), mine.end(), [&](std::size_t x, std::size_t y) { return turn(x) < turn(y); });
    for (std::size_t k = 0; k < mine.size();) {
      const int d = c[mine[k]].dst_device;
      {
        device_guard guard(s);
        const auto& pair_streams = gpu(s).peer_streams;
        const cudaStream_t ps = pair_streams.empty() ? main_stream(s) : pair_streams[static_cast<std::size_t>(d)];
        cuda_check(cudaStreamWaitEvent(ps, ready[static_cast<std::size_t>(s)], 0), "cudaStreamWaitEvent", s);
        cuda_check(cudaStreamWaitEvent(ps, ready[static_cast<std::size_t>(d)], 0), "cudaStreamWaitEvent", s);
        for (; k < mine.size() && c[mine[k]].dst_device == d; ++k) {
          const copy_region& r = c[mine[k]];
          const int mode = peer_kernel_mode();
          if ((mode >= 2 || (mode == 1 && r.height > 1)) &&
              cuda::pitched_copy(s, ps, r.dst, r.dst_pitch, r.src, r.src_pitch, r.width, r.height))
            continue;
          if (r.height == 1) {
            cuda_check(cudaMemcpyPeerAsync(r.dst, d, r.src, s, r.width, ps), "cudaMemcpyPeerAsync (pushed)", s);
            continue;
          }
          cudaMemcpy3DPeerParms p{};
          p.srcPtr = make_cudaPitchedPtr(const_cast<void*>(r.src), r.src_pitch, r.width, r.height);
          p.srcDevice = info(s).ordinal;
          p.dstPtr = make_cudaPitchedPtr(r.dst, r.dst_pitch, r.width, r.height);
          p.dstDevice = info(d).ordinal;
          p.extent = make_cudaExtent(r.width, r.height, 1);
          cuda_check(cudaMemcpy3DPeerAsync(&p, ps), "cudaMemcpy3DPeerAsync (pushed)", s);
        }
        joins.push_back({s, d, record(s, ps), ps});
      }
    }
  }
  // Every piece is queued before any main stream waits: on one stream per source (2 GPUs, or
  // TESSERA_PEER_STREAMS=0) a wait queued mid-batch would hold back that device's own pushes.
  for (const auto& j : joins) {
    {
      device_guard guard(j.src);
      if (j.on != main_stream(j.src))
        cuda_check(cudaStreamWaitEvent(main_stream(j.src), j.done, 0), "cudaStreamWaitEvent", j.src);
    }
    device_guard guard(j.dst);
    cuda_check(cudaStreamWaitEvent(main_stream(j.dst), j.done, 0), "cudaStreamWaitEvent", j.dst);
  }
}

// Copies between distinct GPUs of this process, all at once: one event per source device marks
// the work queued before the batch, each destination's stream waits for the sources it reads
// and then copies (a peer copy, or a 3-D peer copy for rows at a pitch), and each source's stream
// waits for the destinations that read it before its later work. The copies of a batch thus run
// concurrently, where one copy after another would chain their waits across the devices (a halo
// exchange between two GPUs would cost two copies and four cross-device waits instead of one and
// two). With a ticket (start_copies) the copies go on the destinations' copy streams, which also
// wait for the destinations' own queued work, and the final waits are left to finish_copies.
// `gather`: gathers_between_gpus(c, n), which the caller has computed.
void copy_peers(const copy_region* c, std::size_t n, copy_ticket* ticket, bool gather) {
  if (capture_links_devices()) return;  // an independent capture: recorded again, jointly
  const bool captured = capturing();
  const int push = peer_push_mode();
  if (!captured && ticket == nullptr && (push == 1 || (push < 0 && gather))) {
    // A pushed kernel copy needs the source's access to the destination, a pulled one the reverse.
    bool nvlink = true;
    auto path = [](int a, int b) { return get().paths[static_cast<std::size_t>(a * get().gpu_count + b)]; };
    for (std::size_t i = 0; i < n; ++i)
      nvlink = nvlink && c[i].src_device != c[i].dst_device &&
               path(c[i].dst_device, c[i].src_device) == copy_path::nvlink &&
               path(c[i].src_device, c[i].dst_device) == copy_path::nvlink;
    if (nvlink) return push_peers(c, n, gather);
  }
  std::vector<int> srcs, dsts;
  auto add = [](std::vector<int>& v, int d) {
    if (std::find(v.begin(), v.end(), d) == v.end()) v.push_back(d);
  };
  for (std::size_t i = 0; i < n; ++i) {
    add(srcs, c[i].src_device);
    add(dsts, c[i].dst_device);
  }
  std::vector<int> marked = srcs;  // devices whose queued work the copies wait for
  if (ticket)
    for (int d : dsts) add(marked, d);
  const auto G = static_cast<std::size_t>(get().gpu_count);
  std::vector<cudaEvent_t> ready(G, nullptr), done(G, nullptr);
  // Given back once the waits on them are queued; a ticket's `done` events once finish_copies
  // has queued its waits.
  batch_events events;
  auto record = [&](int device, cudaEvent_t& e, cudaStream_t st) { e = events.record(device, st); };
  auto reads = [&](int dst, int src) {
    for (std::size_t i = 0; i < n; ++i)
      if (c[i].dst_device == dst && c[i].src_device == src) return true;
    return false;
  };
  auto main_stream = [](int d) { return static_cast<cudaStream_t>(stream(d)); };
  for (int s : marked) {
    device_guard guard(s);
    record(s, ready[static_cast<std::size_t>(s)], main_stream(s));
  }
  for (int d : dsts) {
    device_guard guard(d);
    const cudaStream_t st = ticket ? gpu(d).copy_stream : main_stream(d);
    for (int s : marked)
      if (reads(d, s) || (ticket && s == d))
        cuda_check(cudaStreamWaitEvent(st, ready[static_cast<std::size_t>(s)], 0), "cudaStreamWaitEvent", d);
    // One region (or piece of one) on stream `on`.
    auto issue = [&](const copy_region& r, cudaStream_t on) {
      const bool peer = get().paths[static_cast<std::size_t>(d * get().gpu_count + r.src_device)] == copy_path::nvlink;
      const int mode = peer_kernel_mode();
      if (peer && (mode >= 2 || (mode == 1 && r.height > 1)) &&
          cuda::pitched_copy(d, on, r.dst, r.dst_pitch, r.src, r.src_pitch, r.width, r.height)) {
        return;
      }
      if (captured) {
        // Peer copies cannot be captured; with unified addressing a plain copy between the devices
        // can, and moves the bytes the same way.
        cuda_check(cudaMemcpy2DAsync(r.dst, r.dst_pitch, r.src, r.src_pitch, r.width, r.height, cudaMemcpyDefault, on),
                   "cudaMemcpy2DAsync (captured copy between GPUs)", d);
        return;
      }
      if (r.height == 1) {
        cuda_check(cudaMemcpyPeerAsync(r.dst, d, r.src, r.src_device, r.width, on), "cudaMemcpyPeerAsync", d);
        return;
      }
      // A strided piece in one peer copy (re-sharding moves blocks of rows), not packed first.
      cudaMemcpy3DPeerParms p{};
      p.srcPtr = make_cudaPitchedPtr(const_cast<void*>(r.src), r.src_pitch, r.width, r.height);
      p.srcDevice = info(r.src_device).ordinal;
      p.dstPtr = make_cudaPitchedPtr(r.dst, r.dst_pitch, r.width, r.height);
      p.dstDevice = info(d).ordinal;
      p.extent = make_cudaExtent(r.width, r.height, 1);
      cuda_check(cudaMemcpy3DPeerAsync(&p, on), "cudaMemcpy3DPeerAsync", d);
    };
    // Each destination reads its sources in rotated order, d + 1, d + 2, ... (mod the GPU count):
    // the pieces of one stream run one after another, and in index order every destination would
    // first read from the same GPU (an all-to-all re-shard on 4 GPUs: three readers on GPU 0 while
    // two GPUs send nothing); rotated, each step of the batch is a permutation of the GPUs.
    std::vector<std::size_t> mine;
    for (std::size_t i = 0; i < n; ++i)
      if (c[i].dst_device == d) mine.push_back(i);
    const int gpus = get().gpu_count;
    auto turn = [&](std::size_t i) { return ((c[i].src_device - d) % gpus + gpus) % gpus; };
    std::stable_sort(mine.begin(), mine.end(), [&](std::size_t x, std::size_t y) { return turn(x) < turn(y); });
    const auto& pair_streams = gpu(d).peer_streams;
    if (gather) {  // one kernel reads every source at once (gathers_between_gpus checked NVLink)
      const std::vector<cuda::gather_piece> pieces = gather_pieces(c, mine);
      cuda::gather_rows(d, st, pieces.data(), static_cast<int>(pieces.size()));
    } else if (pair_streams.empty() || captured) {
      for (std::size_t i : mine) issue(c[i], st);
    } else {
      // One stream per source, each behind `st`'s waits (a gate event) and joined back into `st`
      // (one event per source), so everything after the batch sees the same order as above.
      const cudaEvent_t gate = events.record(d, st);
      for (std::size_t k = 0; k < mine.size();) {
        const int s = c[mine[k]].src_device;
        const cudaStream_t ps = pair_streams[static_cast<std::size_t>(s)];
        cuda_check(cudaStreamWaitEvent(ps, gate, 0), "cudaStreamWaitEvent (a pair stream after the gate)", d);
        for (; k < mine.size() && c[mine[k]].src_device == s; ++k) issue(c[mine[k]], ps);
        cuda_check(cudaStreamWaitEvent(st, events.record(d, ps), 0), "cudaStreamWaitEvent (the stream after a pair stream)",
                   d);
      }
    }
    cudaEvent_t& e = done[static_cast<std::size_t>(d)];
    if (ticket) {
      ticket->events.reserve(ticket->events.size() + 1);
      e = static_cast<cudaEvent_t>(take_event(d));
      ticket->events.push_back({d, e});
      cuda_check(cudaEventRecord(e, st), "cudaEventRecord", d);
    } else {
      record(d, e, st);
    }
  }
  // The destinations' later work waits for what they received; the sources' later work waits
  // for the copies to have read them.
  auto join = [&](int device, int d) {
    if (ticket) {
      ticket->waits.push_back({device, done[static_cast<std::size_t>(d)], d});
      return;
    }
    if (device == d) return;  // the copies ran on d's own stream
    device_guard guard(device);
    cuda_check(cudaStreamWaitEvent(main_stream(device), done[static_cast<std::size_t>(d)], 0), "cudaStreamWaitEvent",
               device);
  };
  for (int d : dsts) join(d, d);
  for (int s : srcs)
    for (int d : dsts)
      if (reads(d, s)) join(s, d);
}
#endif

// `height` rows of `width` bytes, `dst_pitch` / `src_pitch` bytes apart (one row: contiguous).
void copy_local(int dst_device, void* dst, std::size_t dst_pitch, int src_device, const void* src,
                std::size_t src_pitch, std::size_t width, std::size_t height) {
  const state& s = get();
  const bool dst_gpu = is_gpu(s, dst_device), src_gpu = is_gpu(s, src_device);
  (void)info(dst_device), (void)info(src_device);
  if (!dst_gpu && !src_gpu) {
    for (std::size_t r = 0; r < height; ++r)
      std::memcpy(static_cast<char*>(dst) + r * dst_pitch, static_cast<const char*>(src) + r * src_pitch, width);
    return;
  }
  if (dst_gpu && !src_gpu) return local_copy_from_host(dst_device, dst, dst_pitch, src, src_pitch, width, height);
  if (!dst_gpu && src_gpu) return local_copy_to_host(src_device, dst, dst_pitch, src, src_pitch, width, height);
#if TESSERA_HAS_CUDA
  if (dst_device == src_device) {
    device_guard guard(dst_device);
    cuda_check(cudaMemcpy2DAsync(dst, dst_pitch, src, src_pitch, width, height, cudaMemcpyDeviceToDevice,
                                 static_cast<cudaStream_t>(stream(dst_device))),
               "cudaMemcpy2DAsync", dst_device);
    return;
  }
  const copy_region one{dst_device, dst, dst_pitch, src_device, src, src_pitch, width, height};
  copy_peers(&one, 1, nullptr, gathers_between_gpus(&one, 1));
#endif
}

void copy_local(int dst_device, void* dst, int src_device, const void* src, std::size_t bytes) {
  copy_local(dst_device, dst, bytes, src_device, src, bytes, bytes, 1);
}

// Between ranks: the source's rank sends the bytes (staged through host memory from a GPU; no
// CUDA-aware MPI is assumed), the destination's rank receives them, every other rank only takes
// part in the consistency check. Every rank calls this for every copy in the same order, and each
// copy involves at most two ranks, so the blocking pairs cannot deadlock.
void copy_across(int dst_device, void* dst, std::size_t dst_pitch, int src_device, const void* src,
                 std::size_t src_pitch, std::size_t width, std::size_t height) {
  const int to = info(dst_device).rank, from = info(src_device).rank, me = dist::world_rank();
  if (to == from) {
    if (to == me) copy_local(dst_device, dst, dst_pitch, src_device, src, src_pitch, width, height);
    return;
  }
  // One message of the rows packed back to back: a pitched piece (a block of a matrix) costs one
  // exchange, not one per row.
  const std::size_t bytes = width * height;
  dist::agree("a copy between ranks", bytes);
  const char* what = "a copy between ranks (copy, copyto, update_halo)";
  if (me == from) {
    const bool packed = height == 1 || src_pitch == width;
    if (!is_gpu(get(), src_device) && packed) return dist::send(src, bytes, to, what);
    std::vector<char> staged(bytes);
    if (is_gpu(get(), src_device)) {
      local_copy_to_host(src_device, staged.data(), width, src, src_pitch, width, height);
    } else {
      for (std::size_t r = 0; r < height; ++r)
        std::memcpy(staged.data() + r * width, static_cast<const char*>(src) + r * src_pitch, width);
    }
    dist::send(staged.data(), bytes, to, what);
  } else if (me == to) {
    const bool packed = height == 1 || dst_pitch == width;
    if (!is_gpu(get(), dst_device) && packed) return dist::recv(dst, bytes, from, what);
    std::vector<char> staged(bytes);
    dist::recv(staged.data(), bytes, from, what);
    if (is_gpu(get(), dst_device)) {
      local_copy_from_host(dst_device, dst, dst_pitch, staged.data(), width, width, height);
    } else {
      for (std::size_t r = 0; r < height; ++r)
        std::memcpy(static_cast<char*>(dst) + r * dst_pitch, staged.data() + r * width, width);
    }
  }
}

// While capturing (capture.cpp): a copy between host devices is recorded for the replays, one
// between a GPU and a host device (staged through host memory, with waits) is refused; one
// between GPUs runs into the stream capture. Returns true when the copy was recorded.
bool captured_copy(const copy_region& r) {
  if (!capturing()) return false;
  const bool dg = is_gpu(get(), r.dst_device), sg = is_gpu(get(), r.src_device);
  if (dg && sg) return false;
  if (dg != sg) refuse_while_capturing("a copy between a GPU and a host device");
  return capture_host_copies(&r, 1);
}

}  // namespace

void copy_between_2d(int dst_device, void* dst, std::size_t dst_pitch, int src_device, const void* src,
                     std::size_t src_pitch, std::size_t width, std::size_t height) {
  refuse_while_recording("a copy between devices");
  if (width == 0 || height == 0) return;
  if (captured_copy({dst_device, dst, dst_pitch, src_device, src, src_pitch, width, height})) return;
  const int pair[2] = {dst_device, src_device};
  if (crosses_ranks(pair, 2, "a copy between devices")) {
    return copy_across(dst_device, dst, dst_pitch, src_device, src, src_pitch, width, height);
  }
  copy_local(dst_device, dst, dst_pitch, src_device, src, src_pitch, width, height);
}

void copy_between(int dst_device, void* dst, int src_device, const void* src, std::size_t bytes, buffer* dst_buf,
                  buffer* src_buf) {
  refuse_while_recording("a copy between devices");
  if (bytes == 0) return;
  if (captured_copy({dst_device, dst, bytes, src_device, src, bytes, bytes, 1})) return;
  if (dst_buf) make_resident(*dst_buf);
  if (src_buf) make_resident(*src_buf);
  const int pair[2] = {dst_device, src_device};
  if (crosses_ranks(pair, 2, "a copy between devices")) {
    return copy_across(dst_device, dst, bytes, src_device, src, bytes, bytes, 1);
  }
  copy_local(dst_device, dst, src_device, src, bytes);
}

namespace {
#if TESSERA_HAS_CUDA
// Copies within one GPU that come with copies between GPUs (the piece of a re-shard that stays
// on its device), on the GPU's copy stream: on the main stream they would run before the peer
// copies queued there, one after the other, where the copy engines can run both at once. The copy
// stream starts after the main stream's queued work; `join` makes the main stream's later work
// wait for these copies, once the peer copies are queued on it. `engines_between`: the copies
// between GPUs go by copy engines. A piece of managed memory is then copied by a kernel: copy
// engines serialize copies of managed memory, so the diagonal block of a 2-GPU re-shard ran after
// the peer copy instead of beside it (plain CUDA on 2 H200s, 8192^2 floats each: peer and diagonal
// at once 1.031 ms with both on the engines, 0.740 ms with the diagonal by a kernel, 0.680 ms for
// cudaMalloc memory either way; scripts of session 42, docs/performance.md).
struct local_side_copies {
  batch_events done;
  void issue(const std::vector<copy_region>& locals, bool engines_between) {
    std::vector<int> devs;
    for (const auto& r : locals)
      if (std::find(devs.begin(), devs.end(), r.dst_device) == devs.end()) devs.push_back(r.dst_device);
    for (int d : devs) {
      device_guard guard(d);
      const auto main = static_cast<cudaStream_t>(stream(d));
      const cudaStream_t side = gpu(d).copy_stream;
      stream_after(d, side, main);
      for (const auto& r : locals) {
        if (r.dst_device != d) continue;
        const bool managed = (r.dst_buf && r.dst_buf->kind == memory::unified) ||
                             (r.src_buf && r.src_buf->kind == memory::unified);
        if (engines_between && managed &&
            cuda::pitched_copy(d, side, r.dst, r.dst_pitch, r.src, r.src_pitch, r.width, r.height,
                               side_copy_blocks()))
          continue;
        cuda_check(cudaMemcpy2DAsync(r.dst, r.dst_pitch, r.src, r.src_pitch, r.width, r.height,
                                     cudaMemcpyDeviceToDevice, side),
                   "cudaMemcpy2DAsync", d);
      }
      done.record(d, side);
    }
  }
  void join() {
    for (const auto& h : done.held) {
      device_guard guard(h.device);
      cuda_check(cudaStreamWaitEvent(static_cast<cudaStream_t>(stream(h.device)), static_cast<cudaEvent_t>(h.event), 0),
                 "cudaStreamWaitEvent", h.device);
    }
  }
};
#endif

// The copies between distinct GPUs of this process go to copy_peers together, with the copies
// within one GPU beside them (local_side_copies); the others are made one by one, before them.
void copy_many(const copy_region* regions, std::size_t n, copy_ticket* ticket) {
  std::vector<copy_region> peers, locals;
  for (std::size_t i = 0; i < n; ++i) {
    const copy_region& r = regions[i];
    if (r.width == 0 || r.height == 0) continue;
    if (captured_copy(r)) continue;
    if (r.dst_buf) make_resident(*r.dst_buf);
    if (r.src_buf) make_resident(*r.src_buf);
    const int pair[2] = {r.dst_device, r.src_device};
    const bool gpus = is_gpu(get(), r.dst_device) && is_gpu(get(), r.src_device);
    if (gpus && r.dst_device != r.src_device && !crosses_ranks(pair, 2, "a copy between devices")) {
      peers.push_back(r);
    } else if (gpus && r.dst_device == r.src_device && !ticket && !capturing() && !is_remote(r.dst_device)) {
      locals.push_back(r);
    } else {
      copy_between_2d(r.dst_device, r.dst, r.dst_pitch, r.src_device, r.src, r.src_pitch, r.width, r.height);
    }
  }
#if TESSERA_HAS_CUDA
  if (peers.empty()) {
    for (const auto& r : locals)
      copy_between_2d(r.dst_device, r.dst, r.dst_pitch, r.src_device, r.src, r.src_pitch, r.width, r.height);
    return;
  }
  local_side_copies side;
  const bool gather = gathers_between_gpus(peers.data(), peers.size());
  side.issue(locals, peer_kernel_mode() <= 0 && !gather);
  copy_peers(peers.data(), peers.size(), ticket, gather);
  side.join();
#else
  (void)ticket;
#endif
}
}  // namespace

bool gathers_between_gpus(const copy_region* c, std::size_t n) {
#if TESSERA_HAS_CUDA
  const int mode = peer_kernel_mode();
  if ((mode >= 0 && mode != 3) || capturing()) return false;
  const state& s = get();
  std::vector<int> devices;
  std::size_t moved = 0;
  for (std::size_t i = 0; i < n; ++i) {
    const copy_region& r = c[i];
    if (r.width == 0 || r.height == 0 || r.src_device == r.dst_device) continue;
    for (int d : {r.src_device, r.dst_device}) {
      if (!is_gpu(s, d) || is_remote(d)) return false;
      if (std::find(devices.begin(), devices.end(), d) == devices.end()) devices.push_back(d);
    }
    if (s.paths[static_cast<std::size_t>(r.dst_device * s.gpu_count + r.src_device)] != copy_path::nvlink) return false;
    moved += r.width * r.height;
  }
  return !devices.empty() && (mode == 3 || (devices.size() >= 3 && moved >= large_copy_batch_bytes));
#else
  (void)c, (void)n;
  return false;
#endif
}

void copy_between_many(const copy_region* regions, std::size_t n) {
  refuse_while_recording("a copy between devices");
  copy_many(regions, n, nullptr);
}

void start_copies(const copy_region* regions, std::size_t n, copy_ticket& ticket) {
  copy_many(regions, n, &ticket);
}

void finish_copies(copy_ticket& ticket) {
#if TESSERA_HAS_CUDA
  std::vector<copy_ticket::wait> waits;
  batch_events events;
  waits.swap(ticket.waits);
  events.held.swap(ticket.events);
  // A device's waits for other GPUs' copies go on its copy stream, and its stream (the main one,
  // or the side one inside a side_stream_scope, which is the copy stream) waits once for an event
  // of its own: a wait for another GPU's event costs its stream about 3.5 us even when that event
  // is long complete (4 H200s, a CUPTI timeline of hide_communication), and on the copy stream it
  // is off the path of the main stream's kernels. The device's own copies ran on its copy stream.
  // Inside a capture the waits stay direct (each becomes an edge of the graph; measured so).
  const bool direct = capturing();
  std::vector<int> devices;
  for (const auto& w : waits)
    if (std::find(devices.begin(), devices.end(), w.device) == devices.end()) devices.push_back(w.device);
  for (int d : devices) {
    device_guard guard(d);
    const auto on = static_cast<cudaStream_t>(stream(d));
    const cudaStream_t copies = gpu(d).copy_stream;
    bool crossed = false;
    for (const auto& w : waits) {
      if (direct || w.device != d || w.from == d) continue;
      cuda_check(cudaStreamWaitEvent(copies, static_cast<cudaEvent_t>(w.event), 0), "cudaStreamWaitEvent", d);
      crossed = true;
    }
    // The own copies ran on this stream. (Inside a capture `on` is never the copy stream: a
    // capture has no side streams. Giving it some needs the direct waits here too.)
    if (on == copies) continue;
    if (crossed) {
      stream_after(d, on, copies);
      continue;
    }
    for (const auto& w : waits)
      if (w.device == d)
        cuda_check(cudaStreamWaitEvent(on, static_cast<cudaEvent_t>(w.event), 0), "cudaStreamWaitEvent", d);
  }
#else
  ticket.waits.clear();
  ticket.events.clear();
#endif
}

copy_ticket::~copy_ticket() {
  try {
    finish_copies(*this);
  } catch (...) {  // a destructor must not throw; the error that unwound matters more
  }
}

}  // namespace tessera::detail::rt
