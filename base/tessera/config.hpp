// SPDX-License-Identifier: Apache-2.0
// Tessera: compile-time configuration shared by host and device code.
#pragma once
#include <cstddef>
#include <cstdint>
#include <type_traits>

// Complex numbers: libcu++'s cuda::std::complex (host and device code, nvcc and g++) wherever its
// header can be found (always with nvcc), else std::complex (host-only builds, which do not put
// CCCL's include directory on the path). Both hold {real, imag} of T, in that order (cuda::std's
// aligned to its size, std's to T's); nothing compiled into the runtime library depends on which.
// With libcu++ only the type's declaration is included here: <cuda/std/complex> brings libcu++'s
// <cmath>, CUDA's 8- to 16-bit float headers, <complex> and <sstream>, more than a second of nvcc
// time in every translation unit. Programs that compute with complex elements include
// <tessera/complex.hpp> (or <tessera/fft.hpp>, which does); Array checks it (docs/semantics.md).
#if __has_include(<cuda/std/complex>)
// CUDA's cuda_fp16.h (which libcu++ and CUB include) declares a global `half` (a typedef of
// __half) unless CUDA_NO_HALF is defined: with it, `half` after `using namespace tessera;` would be
// ambiguous with tessera::half (half.hpp). A program that includes cuda_fp16.h before Tessera keeps
// both names and must write tessera::half; __half itself is unaffected.
#ifndef CUDA_NO_HALF
#define CUDA_NO_HALF
#endif
#if __has_include(<cuda/std/__fwd/complex.h>)
#include <cuda/std/__fwd/complex.h>
#else
#include <cuda/std/complex>  // a CCCL without the forward declaration: the whole type
#endif
#define TESSERA_COMPLEX_CUDA_STD 1
#else
#include <complex>
#define TESSERA_COMPLEX_CUDA_STD 0
#endif

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

// 16-bit floating storage types that compute in float (half.hpp, included at the end of this file).
struct half;
struct bfloat16;

// complex<float> and complex<double> are element types (docs/semantics.md, "Complex numbers").
#if TESSERA_COMPLEX_CUDA_STD
template <class T>
using complex = ::cuda::std::complex<T>;
#else
template <class T>
using complex = ::std::complex<T>;
#endif

namespace detail {
// Kernels index in 32 bits below this many elements (and element offsets); a shard or offset that
// reaches it takes the 64-bit variant. 2^30 rather than 2^31 leaves room for `i + threads`.
inline constexpr index_t narrow_index_limit = index_t(1) << 30;
// The largest kernel parameter CUDA accepts (12.1+, Volta and newer): a task must fit in it.
inline constexpr std::size_t kernel_param_limit = 32764;

template <class T>
struct is_complex : std::false_type {};
template <class T>
struct is_complex<complex<T>> : std::true_type {};
template <class T>
inline constexpr bool is_complex_v = is_complex<std::remove_cvref_t<T>>::value;
// The type of a complex value's parts; T itself for a real T.
template <class T>
struct real_of {
  using type = T;
};
template <class T>
struct real_of<complex<T>> {
  using type = T;
};
template <class T>
using real_of_t = typename real_of<T>::type;
}  // namespace detail

// The element types an Array may hold (DESIGN.md: bool, int32, int64, float, double, complex;
// half and bfloat16 as storage computing in float).
template <class T>
concept element_type = std::is_same_v<T, bool> || std::is_same_v<T, std::int32_t> ||
                       std::is_same_v<T, std::int64_t> || std::is_same_v<T, float> ||
                       std::is_same_v<T, double> || std::is_same_v<T, complex<float>> ||
                       std::is_same_v<T, complex<double>> || std::is_same_v<T, half> ||
                       std::is_same_v<T, bfloat16>;

// A complex element type is complete where <tessera/complex.hpp> was included (config.hpp only
// declares it under nvcc); ArrayBase names the header when it is not.
template <class T>
concept complete_type = requires { sizeof(T); };

// Scalars that may be mixed into expressions (any arithmetic C++ type, complex<float/double>,
// half and bfloat16, which enter as float).
template <class T>
concept scalar_type = std::is_arithmetic_v<std::remove_cvref_t<T>> ||
                      std::is_same_v<std::remove_cvref_t<T>, complex<float>> ||
                      std::is_same_v<std::remove_cvref_t<T>, complex<double>> ||
                      std::is_same_v<std::remove_cvref_t<T>, half> || std::is_same_v<std::remove_cvref_t<T>, bfloat16>;

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

#include <tessera/half.hpp>
