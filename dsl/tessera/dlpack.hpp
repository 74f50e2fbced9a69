// SPDX-License-Identifier: Apache-2.0
// Tessera: DLPack export and import of single-device arrays, without a copy, so that PyTorch,
// CuPy, JAX or NumPy tensors and Tessera arrays can share memory. Compiled only where the DLPack
// header is installed (Debian: libdlpack-dev); TESSERA_HAS_DLPACK tells a program whether it was.
// What depends on no element type (names, devices, the release of an imported tensor) is compiled
// into tessera_runtime (backend/io/dlpack.cpp) whether or not the header is installed there.
// See docs/semantics.md, "Files and interop".
#pragma once
#if __has_include(<dlpack/dlpack.h>)
#include <dlpack/dlpack.h>
#include <backend/io/dlpack.hpp>
#include <tessera/reshape.hpp>

#include <cstdint>
#include <memory>
#include <string>

#define TESSERA_HAS_DLPACK 1

namespace tessera {

// How to_dlpack labels memory::unified storage on a GPU: DLPack's kDLCUDAManaged (the truth; CuPy
// takes it), or kDLCUDA, which is also true for device access and is what PyTorch accepts
// (torch.from_dlpack refuses device type 13: pytorch/pytorch#96318).
enum class dlpack_unified_as { managed, cuda };

namespace detail::dlpack {

// backend/io/dlpack.hpp holds DLPack's codes as plain integers (tessera_runtime is built without
// dlpack.h where it is not installed): they must be this header's.
static_assert(device_code::cpu == kDLCPU && device_code::cuda == kDLCUDA && device_code::cuda_host == kDLCUDAHost &&
              device_code::rocm == kDLROCM && device_code::cuda_managed == kDLCUDAManaged);
static_assert(type_code::int_ == kDLInt && type_code::uint == kDLUInt && type_code::float_ == kDLFloat &&
              type_code::bfloat == kDLBfloat && type_code::complex == kDLComplex);

template <class T>
DLDataType dtype_of() {
  static_assert(!is_complex_v<T>, "TESSERA_COMPLEX_UNSUPPORTED: DLPack export/import of complex arrays is not "
                                  "supported yet");
  if constexpr (std::is_same_v<T, bool>) {
    return {static_cast<std::uint8_t>(DLPACK_VERSION >= 80 ? type_code::bool_ : type_code::uint), 8, 1};
  } else if constexpr (std::is_same_v<T, bfloat16>) {  // torch.bfloat16, jnp.bfloat16
    return {static_cast<std::uint8_t>(kDLBfloat), 16, 1};
  } else if constexpr (std::is_floating_point_v<T> || std::is_same_v<T, half>) {
    return {static_cast<std::uint8_t>(kDLFloat), static_cast<std::uint8_t>(8 * sizeof(T)), 1};
  } else {
    return {static_cast<std::uint8_t>(kDLInt), static_cast<std::uint8_t>(8 * sizeof(T)), 1};
  }
}

template <class T>
constexpr const char* type_name() {
  if constexpr (std::is_same_v<T, bool>) return "bool";
  else if constexpr (std::is_same_v<T, std::int32_t>) return "int32_t";
  else if constexpr (std::is_same_v<T, std::int64_t>) return "int64_t";
  else if constexpr (std::is_same_v<T, float>) return "float";
  else if constexpr (std::is_same_v<T, half>) return "half";
  else if constexpr (std::is_same_v<T, bfloat16>) return "bfloat16";
  else return "double";
}

template <class T>
bool dtype_matches(DLDataType t) {
  if (t.lanes != 1) return false;
  if constexpr (std::is_same_v<T, bool>) {
    return t.bits == 8 && (t.code == type_code::bool_ || t.code == type_code::uint);
  } else {
    const DLDataType want = dtype_of<T>();
    return t.code == want.code && t.bits == want.bits;
  }
}

// What a tensor exported by to_dlpack owns: the layout (and through it the storage), the shape and
// strides DLTensor points to, and the DLManagedTensor itself, all freed by one delete.
template <class T, int N>
struct export_context {
  std::shared_ptr<const Layout<T, N>> keep;
  std::int64_t shape[N > 0 ? N : 1] = {};
  std::int64_t strides[N > 0 ? N : 1] = {};
  DLManagedTensor tensor{};
};

}  // namespace detail::dlpack

/// to_dlpack(a): a DLManagedTensor* sharing the storage of `a`, an Array or View on one device
/// (one part), for PyTorch's torch.from_dlpack, CuPy's cupy.from_dlpack and the like. Index k of the
/// tensor is dimension k of `a` (x[i, j] is a(i, j)); strides are Tessera's, in elements, so a
/// contiguous array arrives as a Fortran-ordered (column-major) tensor. Device: kDLCPU for host
/// devices; kDLCUDA (memory::device) or kDLCUDAManaged (memory::unified) with the CUDA ordinal for
/// GPUs (`unified_as` = dlpack_unified_as::cuda labels unified memory kDLCUDA, for PyTorch). Waits
/// for the work queued on the device, so the consumer may read at once on any stream.
/// The tensor's deleter releases the storage; call it (or let the consumer call it) exactly once.
/// Throws invalid_argument for an array with several parts (sharded or replicated over several
/// devices: copy(a, on(d)) first) and for a default-constructed array.
template <detail::array_like X>
DLManagedTensor* to_dlpack(const X& a, dlpack_unified_as unified_as = dlpack_unified_as::managed) {
  using T = detail::value_of<X>;
  constexpr int N = detail::array_rank<X>;
  if (!a.has_storage()) {
    throw invalid_argument("tessera: to_dlpack: expected an array with a shape, found a default-constructed one");
  }
  const auto& l = a.layout();
  if (l.parts.size() != 1) {
    throw invalid_argument("tessera: to_dlpack exports an array on one device: expected one part, found " +
                           std::to_string(l.parts.size()) + " (" + detail::describe_placement(l) +
                           "); copy(a, on(device)) first");
  }
  const auto& p = l.parts[0];
  if (p.buf && l.mem == memory::unified && !p.device.is_host()) {
    (void)detail::rt::host_access(*p.buf);  // waits, and marks the pages as possibly touched on the host
  } else {
    synchronize(p.device);
  }
  auto ctx = std::make_unique<detail::dlpack::export_context<T, N>>();
  ctx->keep = a.layout_ptr();
  for (int k = 0; k < N; ++k) {
    ctx->shape[k] = p.extent[k];
    ctx->strides[k] = p.stride[k];
  }
  DLTensor& t = ctx->tensor.dl_tensor;
  t.data = p.empty() ? nullptr : static_cast<void*>(p.ptr);  // byte_offset 0, as PyTorch and CuPy export
  if (p.device.is_host()) {
    t.device = {kDLCPU, 0};
  } else {
    const bool managed = l.mem == memory::unified && unified_as == dlpack_unified_as::managed;
    t.device = {managed ? kDLCUDAManaged : kDLCUDA, p.device.ordinal()};
  }
  t.ndim = N;
  t.dtype = detail::dlpack::dtype_of<T>();
  t.shape = ctx->shape;
  t.strides = ctx->strides;
  t.byte_offset = 0;
  ctx->tensor.manager_ctx = ctx.get();
  ctx->tensor.deleter = [](DLManagedTensor* self) {
    delete static_cast<detail::dlpack::export_context<T, N>*>(self->manager_ctx);
  };
  return &ctx.release()->tensor;
}

/// from_dlpack<T, N>(tensor): a View<T, N> of a DLPack tensor's memory, without a copy: writes
/// through the view reach the producer's tensor. Index k is the tensor's dimension k, with its
/// strides (null strides: C order); a row-major tensor gives a strided view, which expressions read
/// on their cartesian path (pass x.T for a contiguous column-major view). kDLCPU tensors live on
/// host device 0, kDLCUDA (memory::device) and kDLCUDAManaged (memory::unified) tensors on the GPU
/// with that ordinal. On success the view owns the tensor: its deleter is called once, after the
/// device's queued work, when the last Tessera reference (views, expressions, copies of the view)
/// goes. On failure (null tensor, rank or dtype other than N and T, a device Tessera does not
/// know, misaligned data) invalid_argument names what was expected and found, and the tensor stays
/// the caller's. The producer's queued work is not awaited: synchronize its stream first.
template <element_type T, int N>
View<T, N> from_dlpack(DLManagedTensor* tensor) {
  namespace dl = detail::dlpack;
  const std::string who = "tessera: from_dlpack<" + std::string(dl::type_name<T>()) + ", " +
                          std::to_string(N) + ">";
  if (tensor == nullptr) throw invalid_argument(who + ": expected a DLManagedTensor, found a null pointer");
  const DLTensor& t = tensor->dl_tensor;
  if (t.ndim != N) {
    throw invalid_argument(who + ": rank mismatch: expected a tensor of rank " + std::to_string(N) + ", found rank " +
                           std::to_string(t.ndim));
  }
  if (!dl::dtype_matches<T>(t.dtype)) {
    const DLDataType want = dl::dtype_of<T>();
    throw invalid_argument(who + ": dtype mismatch: expected " + dl::dtype_name(want.code, want.bits, want.lanes) +
                           (std::is_same_v<T, bool> ? " (or uint8 holding 0 and 1)" : "") + ", found " +
                           dl::dtype_name(t.dtype.code, t.dtype.bits, t.dtype.lanes));
  }
  const Device dev = dl::device_of(static_cast<int>(t.device.device_type), t.device.device_id, who);
  detail::Layout<T, N> l;
  l.mem = t.device.device_type == kDLCUDA ? memory::device : memory::unified;
  detail::Part<T, N> p;
  p.device = dev;
  index_t stride = 1;
  for (int k = N - 1; k >= 0; --k) {
    if (t.shape[k] < 0) {
      throw invalid_argument(who + ": expected extents >= 0, found " + std::to_string(t.shape[k]) + " in dimension " +
                             std::to_string(k));
    }
    p.extent[k] = t.shape[k];
    p.stride[k] = t.strides ? t.strides[k] : stride;  // null strides: compact row-major (DLPack)
    stride *= t.shape[k];
  }
  l.shape = p.extent;
  char* data = static_cast<char*>(t.data) + t.byte_offset;
  if (reinterpret_cast<std::uintptr_t>(data) % alignof(T) != 0) {
    throw invalid_argument(who + ": expected data aligned to " + std::to_string(alignof(T)) +
                           " bytes, found data + byte_offset at an address that is not");
  }
  auto owner = std::make_shared<dl::import_owner>();
  owner->tensor = tensor;
  owner->release = [](void* t) {
    auto* m = static_cast<DLManagedTensor*>(t);
    if (m->deleter != nullptr) m->deleter(m);
  };
  owner->device = dev;
  if (!p.empty()) {
    // The storage wraps the producer's memory: an rt::buffer made empty (so that it never frees)
    // and pointed at the lowest byte the view can reach, which is what a prefetch back to the
    // owner needs after host code touched unified memory.
    index_t lo = 0, hi = 0;
    for (int k = 0; k < N; ++k) (p.stride[k] < 0 ? lo : hi) += (p.extent[k] - 1) * p.stride[k];
    p.buf = std::shared_ptr<detail::rt::buffer>(new detail::rt::buffer(dev.id(), 0, l.mem),
                                                [owner](detail::rt::buffer* b) {
                                                  b->ptr = nullptr;
                                                  delete b;
                                                });
    p.buf->ptr = data + lo * static_cast<index_t>(sizeof(T));
    p.buf->bytes = static_cast<std::size_t>(hi - lo + 1) * sizeof(T);
    p.ptr = reinterpret_cast<T*>(data);
  }
  l.parts.push_back(std::move(p));
  View<T, N> v(std::make_shared<const detail::Layout<T, N>>(std::move(l)));
  // Nothing below throws: from here on the view owns the tensor. An empty tensor has no storage to
  // keep, so `owner` dies on return and releases it at once.
  owner->armed = true;
  return v;
}

}  // namespace tessera
#endif
