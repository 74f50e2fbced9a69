// SPDX-License-Identifier: Apache-2.0
// Tessera: complex element types, complete. The umbrella header declares tessera::complex<T>
// (config.hpp) without libcu++'s definition, which costs more than a second of nvcc time per
// translation unit; a program that makes, computes with or reads complex arrays includes this
// header (the FFT header does). Host-only builds, where complex is std::complex, have it either way.
#pragma once
#include <tessera/config.hpp>  // first: its CUDA_NO_HALF must precede libcu++'s cuda_fp16.h
#if TESSERA_COMPLEX_CUDA_STD
#include <cuda/std/complex>
#endif
