// SPDX-License-Identifier: Apache-2.0
// Tessera DLPack layer: what to_dlpack and from_dlpack (dsl/tessera/dlpack.hpp) do that depends on
// no element type or rank (names of DLPack dtypes and devices, the device a tensor lives on, the
// release of an imported tensor), compiled once into tessera_runtime (backend/io/dlpack.cpp).
// It takes DLPack's codes as integers and includes no DLPack header, so that tessera_runtime has
// the same contents whether or not <dlpack/dlpack.h> is installed where it is built; dlpack.hpp
// checks that the codes below are dlpack.h's.
#pragma once
#include <tessera/device.hpp>

#include <cstdint>
#include <string>

namespace tessera::detail::dlpack {

// DLDeviceType values (fixed by DLPack's ABI).
namespace device_code {
inline constexpr int cpu = 1, cuda = 2, cuda_host = 3, rocm = 10, cuda_managed = 13;
}
// DLDataTypeCode values; bool is kDLBool from DLPack 0.8 on (before, producers wrote uint8).
namespace type_code {
inline constexpr std::uint8_t int_ = 0, uint = 1, float_ = 2, bfloat = 4, complex = 5, bool_ = 6;
}

// "float32", "int64", "bool8", "uint8x4", "code 9 16".
std::string dtype_name(std::uint8_t code, std::uint8_t bits, std::uint16_t lanes);
// "kDLCUDA 1", "device type 7 0".
std::string device_name(int device_type, int device_id);
// The Tessera device of a DLPack device: host device 0 for kDLCPU, the GPU of that CUDA ordinal for
// kDLCUDA and kDLCUDAManaged; invalid_argument (naming `who`) for any other.
Device device_of(int device_type, int device_id, const std::string& who);

// The producer's tensor, released (`release(tensor)`, which calls its deleter) when the last Tessera
// reference to the storage goes, after the device has finished the work queued on it: the producer
// may free or reuse the memory at once. `armed` stays false until from_dlpack has succeeded, so
// that a failed import leaves the tensor to its caller.
struct import_owner {
  void* tensor = nullptr;
  void (*release)(void*) = nullptr;
  Device device;
  bool armed = false;
  import_owner() = default;
  import_owner(const import_owner&) = delete;
  import_owner& operator=(const import_owner&) = delete;
  ~import_owner();
};

}  // namespace tessera::detail::dlpack
