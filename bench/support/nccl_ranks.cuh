// SPDX-License-Identifier: Apache-2.0
// The raw-NCCL baseline of bench/distributed.cpp: communicators over every rank's GPUs made the way
// a hand-written MPI + NCCL program makes them (one unique id from the first device's rank,
// ncclCommInitRank for each GPU of this rank inside one group; ncclCommInitAll in one process),
// and an in-place ncclAllReduce queued on the same buffers and streams as Tessera's. The id
// travels through Tessera's MPI layer (detail::dist::broadcast), so that every MPI call stays in
// backend/comm/mpi.cpp. Include only from translation units compiled by nvcc.
#pragma once
#if !defined(__CUDACC__)
#error "bench/support/nccl_ranks.cuh needs nvcc; guard its #include with #if defined(__CUDACC__)"
#endif
#include <backend/process/mpi.hpp>
#include <bench/support/cuda_support.cuh>
#include <tessera/distributed.hpp>

#include <nccl.h>

#include <string>
#include <vector>

namespace tessera::bench::cuda {

class raw_nccl {
 public:
  // Over `devs`, every rank's GPUs (tessera::devices()): list rank r is devs[r]. Collective.
  explicit raw_nccl(const DeviceSet& devs) {
    const int n = static_cast<int>(devs.size());
    std::vector<int> list_rank;
    for (int r = 0; r < n; ++r) {
      if (!distributed::is_local(devs[static_cast<std::size_t>(r)])) continue;
      local_.push_back(devs[static_cast<std::size_t>(r)]);
      list_rank.push_back(r);
    }
    comms_.assign(local_.size(), nullptr);
    if (distributed::size() == 1) {
      std::vector<int> ordinals;
      for (Device d : local_) ordinals.push_back(d.ordinal());
      check(ncclCommInitAll(comms_.data(), n, ordinals.data()), "ncclCommInitAll");
      (void)detail::rt::get_cuda_device();  // NCCL switched devices behind the runtime's cache
      return;
    }
    ncclUniqueId id{};
    const int root = devs[0].rank();
    if (distributed::rank() == root) check(ncclGetUniqueId(&id), "ncclGetUniqueId");
    detail::dist::broadcast(&id, sizeof id, root, "bench: the raw NCCL unique id");
    check(ncclGroupStart(), "ncclGroupStart");
    for (std::size_t i = 0; i < local_.size(); ++i) {
      detail::rt::set_device(local_[i].id());
      check(ncclCommInitRank(&comms_[i], n, id, list_rank[i]), "ncclCommInitRank");
    }
    check(ncclGroupEnd(), "ncclGroupEnd (ncclCommInitRank)");
    (void)detail::rt::get_cuda_device();
  }
  ~raw_nccl() {
    for (ncclComm_t c : comms_)
      if (c != nullptr) (void)ncclCommDestroy(c);
  }
  raw_nccl(const raw_nccl&) = delete;
  raw_nccl& operator=(const raw_nccl&) = delete;

  // This rank's GPUs, in list order: buffers[i] lives on local()[i].
  const DeviceSet& local() const { return local_; }

  // Queues one in-place sum of `count` floats on each of this rank's buffers (one group), on
  // Tessera's streams: what tessera::allreduce(x) does, without Tessera.
  void allreduce(const std::vector<float*>& buffers, std::size_t count) {
    check(ncclGroupStart(), "ncclGroupStart");
    for (std::size_t i = 0; i < local_.size(); ++i) {
      detail::rt::set_device(local_[i].id());
      check(ncclAllReduce(buffers[i], buffers[i], count, ncclFloat, ncclSum, comms_[i], stream_of(local_[i])),
            "ncclAllReduce");
    }
    check(ncclGroupEnd(), "ncclGroupEnd (ncclAllReduce)");
  }

 private:
  static void check(ncclResult_t r, const char* call) {
    if (r != ncclSuccess) throw backend_error(std::string("bench: ") + call + " failed: " + ncclGetErrorString(r));
  }
  DeviceSet local_;
  std::vector<ncclComm_t> comms_;
};

}  // namespace tessera::bench::cuda
