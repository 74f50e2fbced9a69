// SPDX-License-Identifier: Apache-2.0
// Tessera: the task of one device's batched FFT pass, planned per shard by the fft family
// (fft.hpp) and run through execute() like every operation. A pass transforms up to three
// dimensions of one contiguous part (given fastest first, as Tessera stores them) for every index
// of up to two batch ("loop") dimensions. Its executors call FFTW3 (or the built-in transforms) on
// host devices and cuFFT on GPUs; both are compiled once into tessera_runtime (backend/fft/fft.cpp),
// so any translation unit may queue one. Scaling (norm) is not part of the pass: the caller applies
// it once, after the last pass.
#pragma once
#include <cstdint>

namespace tessera::detail {
namespace fft {

// c2c: complex to complex; r2c: real to the n/2 + 1 non-negative frequencies of the first
// transformed dimension; c2r: the inverse of r2c (its input is read as Hermitian and may be
// overwritten by the library).
enum class kind { c2c, r2c, c2r };
enum class precision { f32, f64 };

// One dimension: the logical length n (the real length for r2c/c2r), and the strides between
// neighbouring elements of the input and of the output, in elements of their own types.
struct iodim {
  std::int64_t n, is, os;
};

inline constexpr int max_rank = 3;
inline constexpr int max_loops = 2;

}  // namespace fft

struct FftTask {
  static constexpr bool in_library = true;  // both executors are in tessera_runtime (execute.hpp)
  fft::kind kind;
  fft::precision type;
  int sign;  // -1 forward (e^{-2 pi i jk/n}), +1 backward (c2c only; r2c is forward, c2r backward)
  int rank;  // 1..3 transformed dimensions, fastest first; for r2c/c2r exactly 1
  fft::iodim dims[fft::max_rank];
  int loops;  // 0..2 batch dimensions
  fft::iodim loop[fft::max_loops];
  const void* in;  // may equal out (in place) for c2c
  void* out;
};

}  // namespace tessera::detail
