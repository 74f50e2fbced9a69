// SPDX-License-Identifier: Apache-2.0
// Tessera BLAS layer: one matrix product or matrix-vector product on one device's memory. GPUs
// call cuBLAS (one handle per device, bound to the device's stream, created on first use); host
// devices call the CBLAS found at configure time (OpenBLAS where installed), or plain loops when
// none was found. This header includes no CUDA or BLAS header, so dsl/ may include it.
//
// Matrices are column-major: element (i, j) of a stored matrix is p[i + j * ld]. `trans` means
// the operand is the transpose of the stored matrix (a row-major view of it). On GPUs the call is
// queued on the device's stream and the host does not wait; on host devices it is done when the
// call returns. Failures throw backend_error naming the call and the device.
#pragma once
#include <cstdint>

namespace tessera::detail::blas {

enum class dtype { f32, f64 };

// One operand: op(stored) is rows x cols; stored is (trans ? cols x rows : rows x cols) with
// leading dimension ld.
struct operand {
  const void* p;
  std::int64_t ld;
  bool trans;
};

// C (m x n, leading dimension ldc) = op(A) (m x k) * op(B) (k x n). k == 0 writes zeros.
void gemm(int device, dtype t, std::int64_t m, std::int64_t n, std::int64_t k, operand a, operand b, void* c,
          std::int64_t ldc);
// y (m elements, stride incy) = op(A) (m x k) * x (k elements, stride incx).
void gemv(int device, dtype t, std::int64_t m, std::int64_t k, operand a, const void* x, std::int64_t incx, void* y,
          std::int64_t incy);
// The library behind host devices' products ("OpenBLAS", "CBLAS", or "loops").
const char* host_blas_name();

}  // namespace tessera::detail::blas
