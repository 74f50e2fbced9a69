// SPDX-License-Identifier: Apache-2.0
// Tessera sparse layer: the executors of one shard's sparse operation (SparseTask,
// dsl/tessera/sparse_task.hpp). GPUs call cuSPARSE's generic API (cusparseSpMV, cusparseSpMM; one
// handle per device, bound to the device's stream, created on first use; workspaces from the
// device's memory cache) and the kernels of backend/cuda/sparse.cu; host devices run loops. This
// header includes no CUDA header, so dsl/ may include it.
#pragma once
#include <backend/sparse/csr.hpp>
#include <tessera/sparse_task.hpp>

namespace tessera::detail::host {
void run(const SparseTask& t);
}
namespace tessera::detail::cuda {
// Queued on the device's stream; nothing waits. A failed cuSPARSE call throws backend_error
// naming the call, the device and the shard.
void run(const SparseTask& t, int device, int shard);
// The small kernels (remote, pack, to_dense, diag) of backend/cuda/sparse.cu.
void sparse_kernel(const SparseTask& t, int device, int shard);
}
