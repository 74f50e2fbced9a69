// SPDX-License-Identifier: Apache-2.0
// The DLPack layer (dlpack.hpp): names of DLPack dtypes and devices for error messages, the device
// of a tensor, and the release of an imported tensor. Compiled whether or not dlpack.h is
// installed: nothing here needs its types.
#include <backend/io/dlpack.hpp>
#include <backend/runtime/runtime.hpp>
#include <tessera/error.hpp>

namespace tessera::detail::dlpack {

std::string dtype_name(std::uint8_t code, std::uint8_t bits, std::uint16_t lanes) {
  const char* name = code == type_code::int_      ? "int"
                     : code == type_code::uint    ? "uint"
                     : code == type_code::float_  ? "float"
                     : code == type_code::bfloat  ? "bfloat"
                     : code == type_code::complex ? "complex"
                     : code == type_code::bool_   ? "bool"
                                                  : "code ";
  std::string s = name;
  if (s == "code ") s += std::to_string(code) + " ";
  s += std::to_string(bits);
  if (lanes != 1) s += "x" + std::to_string(lanes);
  return s;
}

std::string device_name(int device_type, int device_id) {
  const char* type = device_type == device_code::cpu            ? "kDLCPU"
                     : device_type == device_code::cuda         ? "kDLCUDA"
                     : device_type == device_code::cuda_host    ? "kDLCUDAHost"
                     : device_type == device_code::cuda_managed ? "kDLCUDAManaged"
                     : device_type == device_code::rocm         ? "kDLROCM"
                                                                : nullptr;
  std::string s = type ? type : "device type " + std::to_string(device_type);
  return s + " " + std::to_string(device_id);
}

Device device_of(int device_type, int device_id, const std::string& who) {
  if (device_type == device_code::cpu) return host_devices(1)[0];
  if (device_type == device_code::cuda || device_type == device_code::cuda_managed) {
    const DeviceSet g = gpus();
    for (Device x : g)
      if (x.ordinal() == device_id) return x;
    throw invalid_argument(who + ": the tensor lives on " + device_name(device_type, device_id) + " (cuda:" +
                           std::to_string(device_id) + "), which Tessera does not know: it sees " +
                           std::to_string(g.size()) + " GPU" + (g.size() == 1 ? "" : "s") +
                           (rt::built_with_cuda() ? "" : " (built without CUDA)"));
  }
  throw invalid_argument(who + ": unsupported device " + device_name(device_type, device_id) +
                         ": expected kDLCPU, kDLCUDA or kDLCUDAManaged");
}

import_owner::~import_owner() {
  if (!armed || tensor == nullptr) return;
  try {
    synchronize(device);
  } catch (...) {  // a destructor must not throw; the release below matters more
  }
  if (release != nullptr) release(tensor);
}

}  // namespace tessera::detail::dlpack
