// SPDX-License-Identifier: Apache-2.0
// Tessera: a strided copy on one GPU, compiled once into tessera_runtime (strided_copy.cu) for the
// backend libraries that need their operands laid out otherwise than the user's arrays are (the
// FFT's real passes over strided data). No CUDA header: plain C++ callers include it.
#pragma once
#include <cstdint>

namespace tessera::detail::cuda {

// Copies the `nd` (1..3) dimensional box of extents `ext` from `src` (element strides `src_st`) to
// `dst` (strides `dst_st`), elements of `elem_bytes` (4, 8 or 16), on the device's stream.
void strided_copy(int device, const void* src, const std::int64_t* src_st, void* dst, const std::int64_t* dst_st,
                  const std::int64_t* ext, int nd, int elem_bytes);

}  // namespace tessera::detail::cuda
