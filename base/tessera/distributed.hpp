// SPDX-License-Identifier: Apache-2.0
// Tessera across processes: one program started N times by mpirun, each process (rank) holding
// and computing the shards of its own devices, with devices() listing the devices of every rank.
// Declarations only: every MPI call lives in backend/process/mpi.cpp. See docs/distributed.md.
//
//   int main(int argc, char** argv) {
//     tessera::distributed::session mpi(argc, argv);  // before any other Tessera call
//     auto a = tessera::rand<float>({30'000'000});     // sharded over every rank's devices
//     double s = tessera::sum(a);                      // the same value on every rank
//   }
#pragma once
#include <tessera/device.hpp>
#include <tessera/error.hpp>

#include <string>

namespace tessera {

// A failure of the layer between processes: init/finalize misuse, a call made on some ranks and
// not others (named, with what each rank called), a peer that did not answer within
// TESSERA_MPI_TIMEOUT seconds, or an MPI error (named with its call and MPI's text).
struct distributed_error : error {
  using error::error;
};

namespace distributed {

// True when this Tessera was built with MPI (TESSERA_ENABLE_MPI and an MPI library found).
bool built_with_mpi();

// Starts the layer; call it before any other Tessera call, on every rank. Under a launcher
// (mpirun/srun: OMPI_COMM_WORLD_SIZE, PMI_SIZE or PMIX_RANK in the environment) it calls
// MPI_Init_thread (unless the program already initialized MPI), learns the node-local rank and
// gives this rank its share of the node's GPUs (CUDA_VISIBLE_DEVICES-style, before CUDA starts;
// TESSERA_GPU_SELECT=none leaves the GPUs to the user). Without a launcher, or without MPI in this
// build, the program is one rank of one and no MPI is involved, so the same program runs both
// ways. Idempotent. Throws distributed_error when the device table was already built (a Tessera
// call came first) or after finalize().
void init(int& argc, char**& argv);
void init();

// Ends the layer (MPI_Finalize when init() started MPI): a collective call. Registered with
// std::atexit by init(), so calling it is optional. After a distributed operation failed or timed
// out it calls MPI_Abort instead, so that no rank waits forever for a dead peer. Idempotent.
void finalize();

// Whether init() ran (and finalize() did not).
bool initialized();
// This process's rank and the number of ranks (0 and 1 without a launcher). Throw
// distributed_error before init().
int rank();
int size();
// The rank among the ranks of this node (MPI_Comm_split_type, shared memory), and their count.
int local_rank();
int local_size();

// The default devices of this rank (its part of devices()).
DeviceSet local_devices();
// Whether a device belongs to this rank (its shards are computed here).
bool is_local(Device d);

// RAII: init() on construction, finalize() on destruction.
class session {
 public:
  session(int& argc, char**& argv) { init(argc, argv); }
  session() { init(); }
  ~session() { finalize(); }
  session(const session&) = delete;
  session& operator=(const session&) = delete;
};

}  // namespace distributed
}  // namespace tessera
