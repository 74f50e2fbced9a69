// SPDX-License-Identifier: Apache-2.0
// Tessera: the public face of one program across processes (tessera/distributed.hpp) where it
// needs the device table: init() starts the process layer (backend/process/mpi.cpp: MPI, ranks,
// GPU selection), which lies under the runtime and knows nothing of devices, then builds the table
// on every rank at once; is_local and local_devices read the table.
#include <backend/process/mpi.hpp>
#include <backend/runtime/runtime.hpp>
#include <tessera/distributed.hpp>

namespace tessera::distributed {

void init() {
  int argc = 0;
  char** argv = nullptr;
  init(argc, argv);
}

void init(int& argc, char**& argv) {
  if (initialized()) return;
  if (detail::rt::table_built()) {
    throw distributed_error(
        "tessera: distributed::init() must come before any other Tessera call: the device table was already "
        "built for this process alone (and CUDA started before this rank could choose its GPUs)");
  }
  if (!detail::dist::start(argc, argv)) return;
  // Built now, on every rank at once: the table exchange is a collective call.
  (void)detail::rt::device_count();
}

bool is_local(Device d) { return !detail::rt::is_remote(d.id()); }

DeviceSet local_devices() {
  DeviceSet out;
  for (Device d : devices())
    if (is_local(d)) out.push_back(d);
  return out;
}

}  // namespace tessera::distributed
