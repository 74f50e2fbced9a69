// SPDX-License-Identifier: Apache-2.0
// Tessera solver layer: the executors of one device's dense factorization (SolverTask,
// dsl/tessera/solver_task.hpp). GPUs call cuSOLVER's dense API (one handle per device, bound to
// the device's stream, created on first use; workspaces from the device's memory cache); host
// devices call LAPACKE (on OpenBLAS where installed), found at configure time. This header
// includes no CUDA or LAPACK header, so dsl/ may include it.
#pragma once
#include <tessera/solver_task.hpp>

namespace tessera::detail::solver {

// The library behind host devices' solvers ("LAPACKE"), or a sentence saying that none was found.
const char* host_lapack_name();
// Whether host devices can run solvers (LAPACKE found at configure time).
bool host_lapack_available();
// Whether a matrix split by columns over GPUs can be solved where it lies (cusolverMg found at
// configure time), and whether one split over these devices can: every one a GPU of this process.
bool multi_gpu_available();
bool multi_gpu_available(const int* devices, std::size_t n);

}  // namespace tessera::detail::solver

// The executors of a SolverTask: LAPACKE (done when it returns) and cuSOLVER (queued on the
// device's stream, with devInfo written into the task's info slots; nothing waits). A failed call
// of the library itself throws backend_error naming the call, the device and the shard.
namespace tessera::detail::host {
void run(const SolverTask& t);
void run(const MgSolveTask& t);  // throws: planned for GPUs only
}
namespace tessera::detail::cuda {
void run(const SolverTask& t, int device, int shard);
// cusolverMg over the task's GPUs: waits for their streams first (the tiles were copied there),
// and for the library's own work before it returns.
void run(const MgSolveTask& t, int device, int shard);
}
