// SPDX-License-Identifier: Apache-2.0
// The layer between processes, as the runtime and the collectives see it: rank, size, and a few
// byte-moving collectives over Tessera's own communicator (a duplicate of MPI_COMM_WORLD, so user
// messages never match ours). Includes no MPI header: mpi.cpp holds every MPI_* call, and without
// MPI in the build it compiles to one rank of one (every function below is then trivial).
//
// Every function marked "collective" must be called by every rank, in the same order: Tessera
// programs are SPMD, so the dsl layer calls them from the same place on every rank. Waits poll
// with a deadline (TESSERA_MPI_TIMEOUT seconds, default 300, 0: none): a peer that never comes
// gives a distributed_error instead of a hang, and the layer is then marked broken (later calls
// throw at once; finalize() aborts the job so that no rank waits forever).
#pragma once
#include <backend/process/elements.hpp>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace tessera::detail::dist {

// True when more than one rank takes part. A plain load: the runtime asks on hot paths.
bool spans_processes();
// This rank and the number of ranks (0 and 1 outside a launched, initialized job).
int world_rank();
int world_size();

// One device of a rank's default set, as the other ranks learn it at start-up.
struct device_record {
  int kind;        // device_kind
  int ordinal;     // CUDA ordinal or host device index on its rank
  char model[56];  // "NVIDIA H200", "" for host devices
};
// Every rank's records, indexed by rank (this rank's included). Collective.
std::vector<std::vector<device_record>> exchange_devices(const std::vector<device_record>& mine);

// Checks that every rank makes the same call: `what` and `size` are compared across ranks, and a
// difference throws distributed_error on every rank, naming what each rank called. It also carries
// each rank's failure (fail() below): when any rank has failed, every rank throws, naming it, and
// the failure becomes every rank's. Collective; a no-op on one rank. Every function below except
// send/recv calls it first. One MPI_Allgather of every rank's record, or, where every rank runs on
// one node, an exchange through the node's mailbox in shared memory (mailbox.hpp).
void agree(const char* what, std::uint64_t size);

// Marks this rank failed: an NCCL collective spanning ranks failed or timed out here and its
// communicators were aborted (nccl.cpp, watchdog.hpp). Waits and calls that need other ranks then
// throw distributed_error naming `reason`, the next agree() tells every other rank (no second
// timeout), and finalize() ends the job. The first reason is kept. Thread-safe, no MPI call.
void fail(const std::string& reason);
// Throws distributed_error, naming `what`, when this rank failed or the layer is broken; no MPI
// call (the host waits call it after waiting on a device).
void check_healthy(const char* what);
// TESSERA_MPI_TIMEOUT in seconds (0: no deadline): also the deadline of NCCL work across ranks.
double timeout_seconds();
// How long a wait for peer ranks spins (yielding) before it sleeps (comm::backoff, backoff.hpp):
// TESSERA_MPI_SPIN_US when set, else 2000 us where the node has at least two cores per rank on it,
// else 0: spinning on an oversubscribed node (mpirun --oversubscribe) takes the core from the peer
// being waited for.
std::chrono::microseconds spin_time();

// `bytes` at `data` on `root` go to every rank: up to 256 bytes ride along with the consistency
// check (one round), more take MPI_Bcast after it. Collective.
void broadcast(void* data, std::size_t bytes, int root, const char* what);
// `n` blocks of `bytes` at `data`: block i is valid on rank owner[i] before the call, on every
// rank after it. Collective.
void share_blocks(void* data, std::size_t n, std::size_t bytes, const int* owner, const char* what);
// The same for blocks of any size anywhere: block i, sizes[i] bytes at blocks[i], valid on rank
// owner[i] before, on every rank after. One MPI_Allgatherv per GiB moved in all. Collective.
void share(void* const* blocks, const std::size_t* sizes, const int* owner, std::size_t n, const char* what);
// `count` elements of type t at `data` become, on every rank, `o` over every rank's elements:
// up to 256 bytes ride along with the consistency check (one round), more take an MPI_Allreduce
// after it. Integer and byte types only (u8, i32, i64: sums and products wrap, so any
// order gives the same bits); floating types throw invalid_argument. Collective.
void allreduce(void* data, std::size_t count, comm::dtype t, comm::op o, const char* what);
// Point to point between two ranks, matched in program order (both sides name each other).
// The receiver checks the size, so a mismatched pair is named rather than truncated.
void send(const void* data, std::size_t bytes, int to, const char* what);
void recv(void* data, std::size_t bytes, int from, const char* what);

// Starts the layer: MPI (when launched by mpirun), this rank's place on its node and its share of
// the node's GPUs (CUDA_VISIBLE_DEVICES, before CUDA starts). False when it was already running.
// distributed::init (backend/runtime/processes.cpp) calls it, then builds the device table.
bool start(int& argc, char**& argv);
// Throws distributed_error when init() did not run, naming the function that needed it.
void require_init(const char* what);

}  // namespace tessera::detail::dist
