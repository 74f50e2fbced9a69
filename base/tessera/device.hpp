// SPDX-License-Identifier: Apache-2.0
// Tessera: devices, device sets, the current device and synchronization (declarations only;
// the definitions live in backend/runtime).
#pragma once
#include <iosfwd>
#include <string>
#include <vector>

namespace tessera {

enum class device_kind { host, cuda };

// A device is a small handle: an index into the runtime's device table. GPUs come first
// (ids 0..G-1, ordinal = CUDA ordinal), host devices after them.
class Device {
 public:
  constexpr Device() = default;
  constexpr explicit Device(int id) : id_(id) {}
  constexpr int id() const { return id_; }
  device_kind kind() const;
  int ordinal() const;       // CUDA ordinal for GPUs, 0.. for host devices (on its rank)
  int rank() const;          // the process holding it (tessera/distributed.hpp; 0 in one process)
  std::string name() const;  // "cuda:1", "host:0"; across processes "rank1/cuda:0"
  bool is_host() const { return kind() == device_kind::host; }
  friend constexpr bool operator==(Device a, Device b) { return a.id_ == b.id_; }

 private:
  int id_ = -1;
};

using DeviceSet = std::vector<Device>;

// The default device set: every visible GPU, or TESSERA_HOST_DEVICES host devices (default 1)
// when there is none. TESSERA_BACKEND=host|cuda forces one. Across processes
// (tessera/distributed.hpp): every rank's default devices, in rank order.
DeviceSet devices();
// n host devices (always available, whatever the backend), for tests and host-side work.
DeviceSet host_devices(int n);
// Every visible GPU (empty without CUDA).
DeviceSet gpus();
// True when the default set is made of GPUs.
bool cuda_backend();

// The thread's current device (the first default device unless a DeviceScope is active).
Device current_device();

// Waits for all work on every device.
void synchronize();
// Waits for all work on one device.
void synchronize(Device d);

// Frees the GPU memory that dead arrays left in each device's cache (CUDA.jl's reclaim(), CuPy's
// free_all_blocks()). Never needed for correctness: a request that needs the memory frees it.
void reclaim();

// Prints each device, the peer-access matrix and the copy path of each pair.
void print_topology(std::ostream& os);

// Sets the current device for the scope (PyTorch's torch.cuda.device); restores on exit.
class DeviceScope {
 public:
  explicit DeviceScope(Device d);
  // The index-th device of devices() (CUDA.jl's device!(i)); throws invalid_argument when out of range.
  explicit DeviceScope(int index);
  ~DeviceScope();
  DeviceScope(const DeviceScope&) = delete;
  DeviceScope& operator=(const DeviceScope&) = delete;

 private:
  Device previous_;
};

}  // namespace tessera
