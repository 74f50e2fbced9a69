// SPDX-License-Identifier: Apache-2.0
// Tessera: compile-time configuration shared by host and device code.
#pragma once
#include <cstddef>
#include <cstdint>
#include <type_traits>

// TS_HD marks functions that run on the host and, when compiled by nvcc, on the device.
#if defined(__CUDACC__)
#define TS_HD __host__ __device__
#define TS_DEVICE_COMPILER 1
#else
#define TS_HD
#define TS_DEVICE_COMPILER 0
#endif

#if defined(__CUDA_ARCH__)
#define TS_ON_DEVICE 1
#else
#define TS_ON_DEVICE 0
#endif

namespace tessera {

using index_t = std::int64_t;  // global indices and extents are always 64-bit on the host

namespace detail {
// Kernels index in 32 bits below this many elements (and element offsets); a shard or offset that
// reaches it takes the 64-bit variant. 2^30 rather than 2^31 leaves room for `i + threads`.
inline constexpr index_t narrow_index_limit = index_t(1) << 30;
// The largest kernel parameter CUDA accepts (12.1+, Volta and newer): a task must fit in it.
inline constexpr std::size_t kernel_param_limit = 32764;
}  // namespace detail

// The element types an Array may hold (DESIGN.md: bool, int32, int64, float, double).
template <class T>
concept element_type = std::is_same_v<T, bool> || std::is_same_v<T, std::int32_t> ||
                       std::is_same_v<T, std::int64_t> || std::is_same_v<T, float> ||
                       std::is_same_v<T, double>;

// Scalars that may be mixed into expressions (any arithmetic C++ type).
template <class T>
concept scalar_type = std::is_arithmetic_v<std::remove_cvref_t<T>>;

// nvcc wraps a __host__ __device__ lambda that captures in a closure type that is not
// trivially copyable; such closures are still copied to the device bytewise by nvcc itself.
#if defined(__CUDACC__) && defined(__CUDACC_EXTENDED_LAMBDA__)
template <class F>
inline constexpr bool is_extended_lambda_v = __nv_is_extended_host_device_lambda_closure_type(F) ||
                                             __nv_is_extended_device_lambda_closure_type(F);
#else
template <class F>
inline constexpr bool is_extended_lambda_v = false;
#endif

// What may be copied to a device as (part of) a kernel parameter.
template <class F>
inline constexpr bool device_copyable_functor_v = std::is_trivially_copyable_v<F> || is_extended_lambda_v<F>;

}  // namespace tessera
