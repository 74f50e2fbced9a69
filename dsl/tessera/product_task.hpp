// SPDX-License-Identifier: Apache-2.0
// Tessera: the task of one device's matrix product, C = op(A) op(B) (gemm), or matrix-vector
// product, y = op(A) x (gemv), planned per device by matmul (linalg.hpp) and run through execute()
// like every operation. Its executors call cuBLAS on GPUs and the host CBLAS (or loops) on host
// devices; both are compiled once into tessera_runtime (backend/linalg/blas.cpp), so any
// translation unit may queue one.
#pragma once
#include <cstdint>

namespace tessera::detail {
namespace blas {

enum class dtype { f32, f64 };

// One operand: op(stored) is rows x cols; stored is (trans ? cols x rows : rows x cols), column-major
// with leading dimension ld (element (i, j) of a stored matrix is p[i + j * ld]).
struct operand {
  const void* p;
  std::int64_t ld;
  bool trans;
};

}  // namespace blas

struct ProductTask {
  static constexpr bool in_library = true;  // both executors are in tessera_runtime (execute.hpp)
  static constexpr bool capturable = true;  // pure device work (capture.hpp)
  blas::dtype type;
  bool matrix_vector;  // gemv: `b` is x (b.ld its stride), `c` is y (ldc its stride)
  std::int64_t m, n, k;  // C is m x n, the inner dimension k (k == 0 writes zeros)
  blas::operand a, b;
  void* c;
  std::int64_t ldc;
};

}  // namespace tessera::detail
