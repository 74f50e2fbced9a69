// SPDX-License-Identifier: Apache-2.0
// Tessera: complex element types, complete. The umbrella header declares tessera::complex<T>
// (config.hpp) without libcu++'s definition, which costs more than a second of nvcc time per
// translation unit; a program that makes, computes with or reads complex arrays includes this
// header (the FFT header does). Host-only builds, where complex is std::complex, have it either way.
#pragma once
#if __has_include(<cuda/std/complex>)
// No global `half` from cuda_fp16.h, which libcu++'s complex includes (config.hpp says why).
#ifndef CUDA_NO_HALF
#define CUDA_NO_HALF
#endif
#include <cuda/std/complex>
#else
#include <complex>
#endif
#include <tessera/config.hpp>
