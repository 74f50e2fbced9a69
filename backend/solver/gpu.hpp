// SPDX-License-Identifier: Apache-2.0
// Tessera solver layer, CUDA side: the per-GPU library handles that solver.cpp (cuSOLVER's dense
// API) and blas.cpp (cuBLAS) create, bound to the device's Tessera stream, for backend files that
// combine them; and the Cholesky factorization of a matrix split over GPUs (split_cholesky.cpp).
// Backend .cpp files of CUDA builds only: this header includes the libraries' headers.
#pragma once
#include <tessera/solver_task.hpp>

#if TESSERA_HAS_CUDA
#include <cublas_v2.h>
#include <cusolverDn.h>

namespace tessera::detail::solver {
cusolverDnHandle_t dn_handle(int device);
// potrf (lower) in place over the task's 1-D block-cyclic tiles, every GPU on its own stream;
// returns once the factor is done, with the task's info set (0, or the order of the first leading
// minor that is not positive definite).
void split_cholesky(const MgSolveTask& t);
}  // namespace tessera::detail::solver

namespace tessera::detail::blas {
cublasHandle_t cublas_handle(int device);
}
#endif
