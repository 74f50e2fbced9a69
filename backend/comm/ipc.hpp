// SPDX-License-Identifier: Apache-2.0
// Private to backend/comm: copies between GPUs of several ranks on one node through CUDA IPC
// (ipc_exchange.cpp), which nccl::exchange tries first for a batch spanning ranks. No CUDA header.
#pragma once
#include <cstddef>

namespace tessera::detail::rt {
struct copy_region;
}

namespace tessera::detail::comm::ipc {

// Moves the batch (every rank calls it with the same batch, as for nccl::exchange) when each rank
// holds at most one of `devices` (the GPUs that pieces cross between, ordered alike on every
// rank), all on one node, and every rank could lend a receive buffer and open its peers'. Returns
// false, every rank alike and nothing queued, otherwise (TESSERA_PEER_IPC=0: always). Collective.
bool exchange(const rt::copy_region* regions, std::size_t n, const int* devices, int nd);

}  // namespace tessera::detail::comm::ipc
