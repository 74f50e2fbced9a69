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
// comm::exchange on GPUs (comm.hpp).
bool exchange(const rt::copy_region* regions, std::size_t n);

}  // namespace tessera::detail::comm::nccl
