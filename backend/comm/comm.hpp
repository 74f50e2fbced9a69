// SPDX-License-Identifier: Apache-2.0
// Tessera collectives on raw per-device buffers: NCCL across GPUs (backend/comm/nccl.cpp), plain
// copies and loops in process across host devices (backend/comm/host.cpp). This header includes
// no CUDA or NCCL header, so dsl/ may include it.
//
// Every function takes the participating devices as Tessera device ids, devices[r] being rank r:
// all GPUs or all host devices, each listed once. buffers[r] lives on devices[r]. On GPUs the work
// is queued on each device's stream (one NCCL group over all ranks, one communicator per device
// set, created on first use and cached) and the host does not wait; on host devices the work is
// done when the call returns. Failures throw backend_error naming the call and the device;
// invalid arguments throw invalid_argument. With one device, no communicator is made.
#pragma once
#include <backend/process/elements.hpp>

#include <cstddef>

namespace tessera::detail::rt {
class buffer_list;
struct copy_region;
}

namespace tessera::detail::comm {

// `uses`, when given, lists the buffers behind send and recv: they are made resident on their owners
// first (a unified buffer that host code touched is prefetched back), as for any task.
//
// recv[r] receives n * bytes: rank q's `bytes` from send[q] at offset q * bytes. In place when
// send[r] == recv[r] + r * bytes.
void allgather(const int* devices, int n, const void* const* send, void* const* recv, std::size_t bytes,
               const rt::buffer_list* uses = nullptr);
// recv[r][i] = op over q of send[q][i], i < count. In place when send[r] == recv[r].
void allreduce(const int* devices, int n, const void* const* send, void* const* recv, std::size_t count, dtype t,
               op o, const rt::buffer_list* uses = nullptr);
// recv[r] = send[root] (bytes). In place when send[r] == recv[r].
void broadcast(const int* devices, int n, int root, const void* const* send, void* const* recv, std::size_t bytes,
               const rt::buffer_list* uses = nullptr);
// recv[r][i] = op over q of send[q][r * count + i], i < count.
void reduce_scatter(const int* devices, int n, const void* const* send, void* const* recv, std::size_t count,
                    dtype t, op o, const rt::buffer_list* uses = nullptr);

// A batch of copies (copy_into's regions, as rt::copy_between_many takes them) moved by NCCL sends
// and receives (backend/comm/nccl_exchange.cpp): by default a batch that moves at least 32 MiB
// between GPUs and either spans ranks (GPUs of devices(): every rank calls this with the same
// batch, stages and queues its own GPUs' part; the alternative is host staging and MPI) or
// crosses between 3 or more GPUs of this process that the runtime's one-kernel copies do not take
// (rt::gathers_between_gpus: they do where every pair has peer access); TESSERA_PEER_NCCL=1
// every batch, 0 none (the same setting on every rank). A batch across ranks where every rank holds
// one GPU of it, all on one node, goes through CUDA IPC instead (backend/comm/ipc_exchange.cpp;
// TESSERA_PEER_IPC=0: never). For NCCL, a strided region is packed on its source
// (or unpacked on its destination) through staging from the memory cache, chunk by chunk on the
// GPUs' side streams behind one NCCL group per chunk; a region within one GPU is copied on its
// side stream. The main streams join their side streams at the end (hide_communication's copies
// keep their own path). Returns false, having queued nothing, when the batch does not qualify (a
// host device, a batch mixing devices() with rank-private GPUs, ranks sharing a GPU, a capture or
// a recording, no copy between two GPUs, staging that does not fit on some rank); the caller then
// copies as usual. Like the collectives it is NCCL groups: other threads must not queue
// cross-device waits on these GPUs meanwhile.
bool exchange(const rt::copy_region* regions, std::size_t n);

}  // namespace tessera::detail::comm
