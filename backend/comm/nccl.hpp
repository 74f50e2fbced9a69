// SPDX-License-Identifier: Apache-2.0
// Private to backend/comm: the NCCL collectives (nccl.cpp), which comm.hpp's functions
// (host.cpp) call for GPUs once they have checked the arguments (all GPUs, each listed once, a
// count above zero). Declared here once; no NCCL or CUDA header, so host.cpp stays plain C++.
#pragma once
#include <backend/process/elements.hpp>

#include <cstddef>

namespace tessera::detail::rt {
struct copy_region;
}

namespace tessera::detail::comm::nccl {

void allgather(const int* devices, int n, const void* const* send, void* const* recv, std::size_t bytes);
void allreduce(const int* devices, int n, const void* const* send, void* const* recv, std::size_t count, dtype t,
               op o);
void broadcast(const int* devices, int n, int root, const void* const* send, void* const* recv, std::size_t bytes);
void reduce_scatter(const int* devices, int n, const void* const* send, void* const* recv, std::size_t count,
                    dtype t, op o);

// One send or receive of `bytes` contiguous bytes by `device` to or from `peer`.
struct p2p_op {
  int device;
  int peer;
  bool send;
  void* buf;
  std::size_t bytes;
};
// One NCCL group of sends and receives among `devices` (GPUs, each listed once; across ranks every
// rank passes the same list and queues its own GPUs' operations), queued on their streams. The
// operations between one pair match in the order given.
void send_recv(const int* devices, int n, const p2p_op* ops, std::size_t count, const char* what);

// Whether `devices` (a list spanning ranks) are distinct GPUs, so that NCCL may span them: one
// exchange of the GPUs' identities among the ranks the first time a list is asked (collective:
// every rank asks for the same list), then cached.
bool distinct_gpus(const int* devices, int n);

// comm::exchange on GPUs (comm.hpp), built on send_recv (nccl_exchange.cpp).
bool exchange(const rt::copy_region* regions, std::size_t n);

}  // namespace tessera::detail::comm::nccl
