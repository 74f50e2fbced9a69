// SPDX-License-Identifier: Apache-2.0
// Tessera: how a kernel reads one element of an operand on the cartesian path (LeafEval::at).
// Device code only; no CUDA runtime call.
#pragma once
#include <tessera/config.hpp>

#include <cstdint>
#include <type_traits>

namespace tessera::detail {

#if defined(__CUDACC__)
// Through the read-only data cache (ld.global.nc, what __ldg emits), with the L2::128B prefetch
// hint on sm_75 and newer: a scalar load then brings the whole 128-byte line into L2, which is
// what the neighbouring threads and the next rows of a stencil read. Safe because the planner
// never lets a kernel read bytes that it writes through another mapping (a read of the written
// element itself comes first, in the same thread). Measured on an H200, 5-point Jacobi 16384^2:
// __ldg 0.768x memcpy, with the hint 0.781x (and 0.833x with three elements per thread,
// backend/cuda/executor.cuh); TESSERA_NO_L2_HINT leaves the plain __ldg.
template <class T>
__device__ __forceinline__ T load_read_only(const T* p) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 750 && !defined(TESSERA_NO_L2_HINT)
  if constexpr (std::is_same_v<T, float>) {
    float r;
    asm volatile("ld.global.nc.L2::128B.f32 %0, [%1];" : "=f"(r) : "l"(p));
    return r;
  } else if constexpr (std::is_same_v<T, double>) {
    double r;
    asm volatile("ld.global.nc.L2::128B.f64 %0, [%1];" : "=d"(r) : "l"(p));
    return r;
  } else if constexpr (std::is_integral_v<T> && sizeof(T) == 4) {
    std::uint32_t r;
    asm volatile("ld.global.nc.L2::128B.b32 %0, [%1];" : "=r"(r) : "l"(p));
    return static_cast<T>(r);
  } else if constexpr (std::is_integral_v<T> && sizeof(T) == 8) {
    std::uint64_t r;
    asm volatile("ld.global.nc.L2::128B.b64 %0, [%1];" : "=l"(r) : "l"(p));
    return static_cast<T>(r);
  } else {
    return __ldg(p);
  }
#else
  return __ldg(p);
#endif
}

// 16 bytes from a 16-byte aligned address, the same way (the row-vector path of stencils:
// LeafEval::row_vec). Not volatile: the compiler may hoist and schedule these loads freely.
__device__ __forceinline__ uint4 load16_read_only(const void* p) {
  uint4 r;
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 750 && !defined(TESSERA_NO_L2_HINT)
  asm("ld.global.nc.L2::128B.v4.u32 {%0, %1, %2, %3}, [%4];"
      : "=r"(r.x), "=r"(r.y), "=r"(r.z), "=r"(r.w)
      : "l"(p));
#else
  r = __ldg(static_cast<const uint4*>(p));
#endif
  return r;
}
#endif

}  // namespace tessera::detail
