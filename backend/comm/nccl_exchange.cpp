// SPDX-License-Identifier: Apache-2.0
// comm::exchange on GPUs: a batch of copies between GPUs (a re-shard, an FFT's transpose) moved by
// NCCL sends and receives instead of the copy engines (within this process) or host staging and
// MPI (across ranks).
//
// Why: on 4 H200s the copy engines cap an all-to-all at 0.49x of one pair's peer bandwidth per
// device, in plain CUDA as in Tessera; NCCL's transport (the SMs) reaches 0.75-0.80x
// (docs/performance.md). NCCL moves contiguous bytes only, so a piece whose rows lie at a pitch is
// packed on its source (or unpacked on its destination) by a kernel through staging from the
// memory cache. A re-shard of a column-major matrix from columns to rows packs on the sources only.
//
// The schedule, so that the packing hides behind the transfers: the batch is cut into chunks (rows
// of every piece); each source packs chunk after chunk on its side stream, one event per chunk, and
// the main streams run one NCCL group per chunk, each behind its chunk's packing. Unpacking follows
// each group on the destination's side stream, and the pieces within one GPU run there too. The
// main streams join their side streams at the end, so later work sees the whole batch.
#include <backend/comm/comm.hpp>
#include <backend/comm/ipc.hpp>
#include <backend/comm/nccl.hpp>
#include <backend/process/mpi.hpp>
#include <backend/runtime/runtime.hpp>
#include <tessera/device.hpp>
#include <tessera/distributed.hpp>

#if TESSERA_HAS_CUDA
#include <backend/comm/device_rows.hpp>
#include <backend/cuda/strided_copy.hpp>

#include <cuda_runtime.h>

#include <algorithm>
#include <exception>
#include <cstdlib>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace tessera::detail::comm::nccl {
namespace {

// TESSERA_PEER_NCCL: unset, large batches (rt::large_copy_batch_bytes) across ranks, or over 3 or
// more GPUs of this process that the runtime's gather kernels do not take (rt::gathers_between_gpus:
// every pair over NVLink, faster on 4 H200s), go through NCCL (on 2 GPUs a pair's copy engines are
// not the limit, and small batches such as halos would pay NCCL's launch); 0 never; 1 every
// qualifying batch.
int peer_nccl_mode() {
  static const int mode = [] {
    const char* v = std::getenv("TESSERA_PEER_NCCL");
    if (v == nullptr || *v == '\0') return -1;
    return std::atoi(v) != 0 ? 1 : 0;
  }();
  return mode;
}

// Bytes per device per chunk (TESSERA_PEER_NCCL_CHUNK_MB, default 64): smaller chunks hide more of
// the packing, each costs one more NCCL launch.
std::size_t chunk_bytes() {
  static const std::size_t b = [] {
    const char* v = std::getenv("TESSERA_PEER_NCCL_CHUNK_MB");
    const long mb = v != nullptr ? std::atol(v) : 0;
    return (mb > 0 ? static_cast<std::size_t>(mb) : std::size_t{64}) << 20;
  }();
  return b;
}

// A staging block from the memory cache, returned in the order of its device's main stream.
struct staging {
  int device;
  std::size_t bytes;
  void* p;
  staging(int d, std::size_t b) : device(d), bytes(b), p(rt::allocate(d, b, memory::device)) {}
  ~staging() { rt::deallocate(device, p, bytes, memory::device); }
  staging(const staging&) = delete;
  staging& operator=(const staging&) = delete;
};

// Events given back to their GPUs' pools once the function returns (rt::take_event).
struct events {
  std::vector<std::pair<int, cudaEvent_t>> all;
  events() = default;
  events(const events&) = delete;
  events& operator=(const events&) = delete;
  ~events() {
    for (const auto& [d, e] : all) rt::give_event(d, e);
  }
  cudaEvent_t record(int device, cudaStream_t st) {
    all.reserve(all.size() + 1);
    const auto e = static_cast<cudaEvent_t>(rt::take_event(device));
    all.push_back({device, e});
    rt::check_cuda(cudaEventRecord(e, st), "cudaEventRecord", device);
    return e;
  }
};

void wait(int device, cudaStream_t st, cudaEvent_t e) {
  rt::check_cuda(cudaStreamWaitEvent(st, e, 0), "cudaStreamWaitEvent", device);
}

// One piece between two GPUs: `units` rows of `unit` bytes (a strided piece, moved by rows) or
// bytes (a contiguous one), sent from `send` and received into `recv`.
struct piece {
  const rt::copy_region* r;
  bool pack, unpack;
  std::size_t unit, units;
  void* send;
  void* recv;
  std::size_t begin(std::size_t j, std::size_t k) const { return units * j / k; }
};

}  // namespace

bool exchange(const rt::copy_region* c, std::size_t n) {
  const int mode = peer_nccl_mode();
  if (mode == 0 || rt::capturing() || rt::recording()) return false;
  auto empty = [](const rt::copy_region& r) { return r.width == 0 || r.height == 0; };
  // GPUs only. Across ranks (devices of devices(), shared by all ranks) every rank makes the same
  // call with the same batch (the program runs on every rank), so every rank reaches the same
  // decision below and joins the groups; each queues and stages only its own devices' part. The
  // communicators are keyed by the GPUs that pieces cross between, not by those with pieces
  // within one GPU only.
  std::vector<int> devices;
  std::vector<std::size_t> sent;  // bytes each device sends, by index in `devices`
  for (std::size_t i = 0; i < n; ++i) {
    if (empty(c[i])) continue;
    for (int d : {c[i].src_device, c[i].dst_device})
      if (rt::info(d).kind != device_kind::cuda) return false;
    if (c[i].src_device == c[i].dst_device) continue;
    for (int d : {c[i].src_device, c[i].dst_device})
      if (std::find(devices.begin(), devices.end(), d) == devices.end()) devices.push_back(d);
  }
  if (devices.empty()) return false;
  // One order on every rank: device ids are this rank's own (its GPUs by CUDA ordinal, other
  // ranks' after them), so sorting by id would give each rank another list, hence another NCCL
  // numbering and another communicator key: rank 0, whose sorted list matched devices()' order,
  // found the collectives' cached set and went straight into the group while the others
  // created a new set (the 60 s timeout in the GPUs' identity check on 4 GPU ranks). By (rank,
  // CUDA ordinal) instead, the same on every rank; within one process the same as by id.
  auto before = [](int a, int b) {
    const auto& x = rt::info(a);
    const auto& y = rt::info(b);
    return x.rank != y.rank ? x.rank < y.rank : x.ordinal < y.ordinal;
  };
  std::sort(devices.begin(), devices.end(), before);
  auto index = [&](int d) {
    return static_cast<std::size_t>(std::find(devices.begin(), devices.end(), d) - devices.begin());
  };
  sent.assign(devices.size(), 0);
  std::size_t total = 0;
  for (std::size_t i = 0; i < n; ++i)
    if (!empty(c[i]) && c[i].src_device != c[i].dst_device) {
      sent[index(c[i].src_device)] += c[i].width * c[i].height;
      total += c[i].width * c[i].height;
    }
  // Across ranks when the GPUs are devices() (shared); a batch mixing those with rank-private
  // GPUs (each pair of one kind) is left to the usual path, which takes its pieces one by one.
  std::size_t shared = 0;
  for (int d : devices) shared += rt::is_shared(d) ? 1 : 0;
  if (shared != 0 && shared != devices.size()) return false;
  const bool across = shared != 0;
  auto local = [](int d) { return !rt::is_remote(d); };
  // Within this process the gather kernels or, on 2 GPUs, the copy engines are faster; across
  // ranks the alternative is host staging and MPI, one piece at a time, for any number of GPUs.
  if (mode < 0 && (total < rt::large_copy_batch_bytes || (!across && (devices.size() < 3 || rt::gathers_between_gpus(c, n)))))
    return false;
  // NCCL cannot span two ranks on one GPU: such a batch keeps the MPI path (every rank learns it
  // from the same exchange of the GPUs' identities).
  if (across && !distinct_gpus(devices.data(), static_cast<int>(devices.size()))) return false;
  // Across ranks of one node, one GPU each: pushed through CUDA IPC, faster than NCCL's sends
  // (ipc_exchange.cpp: why).
  if (across && ipc::exchange(c, n, devices.data(), static_cast<int>(devices.size()))) return true;

  // NCCL moves contiguous bytes: rows at a pitch other than their width go through staging.
  std::vector<piece> pieces;
  std::vector<std::unique_ptr<staging>> blocks;
  // 0: staged; 1: short of memory here (every rank then takes the usual path); 2: failed here
  // (every rank then throws). Across ranks the worst of every rank's answer is everyone's.
  int staged = 0;
  std::exception_ptr failure;
  try {
    for (std::size_t i = 0; i < n; ++i) {
      const rt::copy_region& r = c[i];
      if (empty(r) || r.src_device == r.dst_device) continue;
      piece p{&r, r.height > 1 && r.src_pitch != r.width, r.height > 1 && r.dst_pitch != r.width, 1, 0,
              const_cast<void*>(r.src), r.dst};
      const std::size_t bytes = r.width * r.height;
      if (p.pack || p.unpack) p.unit = r.width, p.units = r.height;
      else p.units = bytes;
      // Staging on this rank's devices only (another rank's pieces are only named in the ops,
      // which run_group leaves to that rank).
      if (p.pack && local(r.src_device)) p.send = blocks.emplace_back(std::make_unique<staging>(r.src_device, bytes))->p;
      if (p.unpack && local(r.dst_device))
        p.recv = blocks.emplace_back(std::make_unique<staging>(r.dst_device, bytes))->p;
      pieces.push_back(p);
    }
  } catch (const out_of_memory&) {
    staged = 1;  // nothing queued yet: the usual path takes the batch
  } catch (...) {
    if (!across) throw;
    staged = 2;
    failure = std::current_exception();
  }
  if (across) dist::allreduce(&staged, 1, dtype::i32, op::max, "staging for copies between ranks (NCCL)");
  if (staged == 2) {
    if (failure) std::rethrow_exception(failure);
    throw distributed_error("tessera (rank " + std::to_string(dist::world_rank()) +
                            "): a copy between ranks through NCCL not started: another rank failed to stage it");
  }
  if (staged == 1) return false;
  const bool packs = std::any_of(pieces.begin(), pieces.end(), [](const piece& p) { return p.pack || p.unpack; });
  // One chunk when nothing is packed (nothing to hide); else about chunk_bytes() per device each.
  const std::size_t most = *std::max_element(sent.begin(), sent.end());
  const std::size_t k = packs ? std::clamp<std::size_t>((most + chunk_bytes() - 1) / chunk_bytes(), 1, 16) : 1;
  // Every rank must cut the batch alike (TESSERA_PEER_NCCL_CHUNK_MB is read on each): a
  // difference is named here instead of mismatched sends and receives.
  if (across) dist::agree("the chunks of a copy between ranks (TESSERA_PEER_NCCL_CHUNK_MB)", k);

  for (std::size_t i = 0; i < n; ++i) {
    if (empty(c[i])) continue;
    if (c[i].dst_buf && local(c[i].dst_device)) rt::make_resident(*c[i].dst_buf);
    if (c[i].src_buf && local(c[i].src_device)) rt::make_resident(*c[i].src_buf);
  }
  rt::device_restorer restore;
  events ev;
  // Every device's side stream starts behind the work queued on its main stream (the sources'
  // data, the staging's previous users, the destinations' last reads of their regions).
  std::vector<int> involved;
  for (int d : devices)
    if (local(d)) involved.push_back(d);
  for (std::size_t i = 0; i < n; ++i)
    if (!empty(c[i]) && local(c[i].dst_device) &&
        std::find(involved.begin(), involved.end(), c[i].dst_device) == involved.end())
      involved.push_back(c[i].dst_device);
  // Later work on each main stream (the staging's release included) sees the side streams' work,
  // also when a group fails midway; every involved side stream is joined, whatever it was given.
  auto join_sides = [&] {
    for (int d : involved) {
      rt::set_device(d);
      wait(d, main_of(d), ev.record(d, side_of(d)));
    }
  };
  try {
    for (int d : involved) {
      rt::set_device(d);
      wait(d, side_of(d), ev.record(d, main_of(d)));
    }
    // The packing, chunk by chunk; packed[j][s] marks chunk j packed on device s.
    std::vector<std::vector<cudaEvent_t>> packed(k, std::vector<cudaEvent_t>(devices.size(), nullptr));
    for (std::size_t j = 0; j < k; ++j)
      for (int s : involved) {
        bool any = false;
        for (const piece& p : pieces) {
          if (!p.pack || p.r->src_device != s) continue;
          const std::size_t a = p.begin(j, k), b = p.begin(j + 1, k);
          const auto* src = static_cast<const unsigned char*>(p.r->src) + a * p.r->src_pitch;
          copy_rows(s, side_of(s), static_cast<unsigned char*>(p.send) + a * p.unit, p.unit, src, p.r->src_pitch, p.unit,
                    b - a, "cudaMemcpy2DAsync (packing a piece)");
          any = true;
        }
        if (any) {
          rt::set_device(s);
          packed[j][index(s)] = ev.record(s, side_of(s));
        }
      }
    // The pieces within one GPU, on its side stream beside the transfers.
    for (std::size_t i = 0; i < n; ++i) {
      const rt::copy_region& r = c[i];
      if (empty(r) || r.src_device != r.dst_device || !local(r.dst_device)) continue;
      copy_rows(r.dst_device, side_of(r.dst_device), r.dst, r.dst_pitch, r.src, r.src_pitch, r.width, r.height,
                "cudaMemcpy2DAsync (a piece within a GPU)");
    }
    // One group per chunk on the main streams, each behind its chunk's packing; the unpacking of a
    // chunk follows its group on the destination's side stream.
      std::vector<p2p_op> ops;
      for (std::size_t j = 0; j < k; ++j) {
        for (int s : involved)
          if (index(s) < devices.size() && devices[index(s)] == s && packed[j][index(s)] != nullptr) {
            const cudaEvent_t e = packed[j][index(s)];
            rt::set_device(s);
            wait(s, main_of(s), e);
          }
        ops.clear();
        for (const piece& p : pieces) {
          const std::size_t a = p.begin(j, k), b = p.begin(j + 1, k);
          if (a == b) continue;
          ops.push_back({p.r->src_device, p.r->dst_device, true, static_cast<unsigned char*>(p.send) + a * p.unit,
                         (b - a) * p.unit});
          ops.push_back({p.r->dst_device, p.r->src_device, false, static_cast<unsigned char*>(p.recv) + a * p.unit,
                         (b - a) * p.unit});
        }
        send_recv(devices.data(), static_cast<int>(devices.size()), ops.data(), ops.size(),
                  "ncclSend/ncclRecv (copies between GPUs)");
        for (int d : involved) {
          bool any = false;
          for (const piece& p : pieces) any = any || (p.unpack && p.r->dst_device == d);
          if (!any) continue;
          rt::set_device(d);
          wait(d, side_of(d), ev.record(d, main_of(d)));
          for (const piece& p : pieces) {
            if (!p.unpack || p.r->dst_device != d) continue;
            const std::size_t a = p.begin(j, k), b = p.begin(j + 1, k);
            copy_rows(d, side_of(d), static_cast<unsigned char*>(p.r->dst) + a * p.r->dst_pitch, p.r->dst_pitch,
                      static_cast<unsigned char*>(p.recv) + a * p.unit, p.unit, p.unit, b - a,
                      "cudaMemcpy2DAsync (unpacking a piece)");
          }
        }
      }
  } catch (...) {
    // Across ranks the others learn of it at their next check (the next chunk's group) instead of
    // waiting out the timeout.
    if (across) {
      std::string why = "an unknown error";
      try {
        throw;
      } catch (const std::exception& e) {
        why = e.what();
      } catch (...) {
      }
      dist::fail("a copy between ranks through NCCL failed: " + why);
    }
    // The staging goes back to the cache in main-stream order when this returns: the main streams
    // must follow the side streams' kernels, or, failing that, the side streams must be done.
    try {
      join_sides();
    } catch (...) {  // the first error is the one to report
      for (int d : involved) {
        rt::set_device(d);
        (void)cudaStreamSynchronize(side_of(d));
      }
      (void)cudaGetLastError();
    }
    throw;
  }
  join_sides();
  return true;
}

}  // namespace tessera::detail::comm::nccl

#endif  // TESSERA_HAS_CUDA
