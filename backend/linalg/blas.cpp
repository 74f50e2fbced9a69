// SPDX-License-Identifier: Apache-2.0
// The BLAS layer (blas.hpp): cuBLAS on GPUs, CBLAS or loops on host devices.
#include <backend/linalg/blas.hpp>
#include <backend/runtime/runtime.hpp>
#include <backend/solver/gpu.hpp>

#include <climits>
#include <mutex>
#include <string>
#include <vector>

#if TESSERA_HAS_CUDA
#include <cublas_v2.h>
#endif
#ifndef TESSERA_HAS_CBLAS
#define TESSERA_HAS_CBLAS 0
#endif
#if TESSERA_HAS_CBLAS
#include <cblas.h>
#endif

namespace tessera::detail::blas {
namespace {

#if TESSERA_HAS_CUDA
const char* cublas_status_name(cublasStatus_t s) {
  switch (s) {
    case CUBLAS_STATUS_SUCCESS: return "CUBLAS_STATUS_SUCCESS";
    case CUBLAS_STATUS_NOT_INITIALIZED: return "CUBLAS_STATUS_NOT_INITIALIZED";
    case CUBLAS_STATUS_ALLOC_FAILED: return "CUBLAS_STATUS_ALLOC_FAILED";
    case CUBLAS_STATUS_INVALID_VALUE: return "CUBLAS_STATUS_INVALID_VALUE";
    case CUBLAS_STATUS_ARCH_MISMATCH: return "CUBLAS_STATUS_ARCH_MISMATCH";
    case CUBLAS_STATUS_MAPPING_ERROR: return "CUBLAS_STATUS_MAPPING_ERROR";
    case CUBLAS_STATUS_EXECUTION_FAILED: return "CUBLAS_STATUS_EXECUTION_FAILED";
    case CUBLAS_STATUS_INTERNAL_ERROR: return "CUBLAS_STATUS_INTERNAL_ERROR";
    case CUBLAS_STATUS_NOT_SUPPORTED: return "CUBLAS_STATUS_NOT_SUPPORTED";
    default: return "cuBLAS error";
  }
}

void check(cublasStatus_t s, const char* call, int device) {
  if (s == CUBLAS_STATUS_SUCCESS) return;
  throw backend_error(std::string("tessera: ") + call + " failed on " + rt::info(device).name + ": " +
                      cublas_status_name(s));
}

// One handle per GPU, created on first use with the device current and bound to its stream;
// like the runtime's state, deliberately never destroyed (static destruction order).
cublasHandle_t handle(int device) {
  static std::mutex m;
  static std::vector<cublasHandle_t> handles;
  std::lock_guard<std::mutex> lock(m);
  if (handles.empty()) handles.resize(static_cast<std::size_t>(rt::device_count()), nullptr);
  cublasHandle_t& h = handles[static_cast<std::size_t>(device)];
  if (h == nullptr) {
    check(cublasCreate(&h), "cublasCreate", device);
    check(cublasSetStream(h, static_cast<cudaStream_t>(rt::stream(device))), "cublasSetStream", device);
  }
  return h;
}

cublasOperation_t op_of(const operand& a) { return a.trans ? CUBLAS_OP_T : CUBLAS_OP_N; }

void gpu_gemm(int device, dtype t, std::int64_t m, std::int64_t n, std::int64_t k, operand a, operand b, void* c,
              std::int64_t ldc) {
  rt::device_restorer restore;
  rt::set_device(device);
  cublasHandle_t h = handle(device);
  if (t == dtype::f32) {
    const float one = 1.f, zero = 0.f;
    check(cublasSgemm_64(h, op_of(a), op_of(b), m, n, k, &one, static_cast<const float*>(a.p), a.ld,
                         static_cast<const float*>(b.p), b.ld, &zero, static_cast<float*>(c), ldc),
          "cublasSgemm_64", device);
  } else {
    const double one = 1.0, zero = 0.0;
    check(cublasDgemm_64(h, op_of(a), op_of(b), m, n, k, &one, static_cast<const double*>(a.p), a.ld,
                         static_cast<const double*>(b.p), b.ld, &zero, static_cast<double*>(c), ldc),
          "cublasDgemm_64", device);
  }
}

void gpu_gemv(int device, dtype t, std::int64_t m, std::int64_t k, operand a, const void* x, std::int64_t incx,
              void* y, std::int64_t incy) {
  rt::device_restorer restore;
  rt::set_device(device);
  cublasHandle_t h = handle(device);
  // gemv takes the stored matrix's shape: rows x cols of A itself, before the op.
  const std::int64_t rows = a.trans ? k : m, cols = a.trans ? m : k;
  if (t == dtype::f32) {
    const float one = 1.f, zero = 0.f;
    check(cublasSgemv_64(h, op_of(a), rows, cols, &one, static_cast<const float*>(a.p), a.ld,
                         static_cast<const float*>(x), incx, &zero, static_cast<float*>(y), incy),
          "cublasSgemv_64", device);
  } else {
    const double one = 1.0, zero = 0.0;
    check(cublasDgemv_64(h, op_of(a), rows, cols, &one, static_cast<const double*>(a.p), a.ld,
                         static_cast<const double*>(x), incx, &zero, static_cast<double*>(y), incy),
          "cublasDgemv_64", device);
  }
}
#endif

// Host devices. CBLAS takes int extents: larger products are refused with a named error.
void check_int(std::int64_t v, const char* what) {
  if (v > INT_MAX) {
    throw invalid_argument(std::string("tessera: a matrix product on a host device with ") + what + " = " +
                           std::to_string(v) + ": the host BLAS takes at most " + std::to_string(INT_MAX));
  }
}

template <class T>
T element(const operand& a, std::int64_t i, std::int64_t j) {  // op(A)(i, j)
  const T* p = static_cast<const T*>(a.p);
  return a.trans ? p[j + i * a.ld] : p[i + j * a.ld];
}

template <class T>
void host_gemm(std::int64_t m, std::int64_t n, std::int64_t k, operand a, operand b, T* c, std::int64_t ldc) {
#if TESSERA_HAS_CBLAS
  check_int(m, "rows");
  check_int(n, "columns");
  check_int(k, "inner extent");
  check_int(a.ld, "leading dimension");
  check_int(b.ld, "leading dimension");
  check_int(ldc, "leading dimension");
  const auto ta = a.trans ? CblasTrans : CblasNoTrans, tb = b.trans ? CblasTrans : CblasNoTrans;
  if (m == 0 || n == 0) return;
  if (k == 0) {  // reference BLAS leaves C untouched when k == 0 with beta == 0 on some builds
    for (std::int64_t j = 0; j < n; ++j)
      for (std::int64_t i = 0; i < m; ++i) c[i + j * ldc] = T(0);
    return;
  }
  if constexpr (std::is_same_v<T, float>) {
    cblas_sgemm(CblasColMajor, ta, tb, int(m), int(n), int(k), 1.f, static_cast<const float*>(a.p), int(a.ld),
                static_cast<const float*>(b.p), int(b.ld), 0.f, c, int(ldc));
  } else {
    cblas_dgemm(CblasColMajor, ta, tb, int(m), int(n), int(k), 1.0, static_cast<const double*>(a.p), int(a.ld),
                static_cast<const double*>(b.p), int(b.ld), 0.0, c, int(ldc));
  }
#else
  // No CBLAS at configure time: loops in the order that reads A and C contiguously (j, p, i).
  for (std::int64_t j = 0; j < n; ++j) {
    T* cj = c + j * ldc;
    for (std::int64_t i = 0; i < m; ++i) cj[i] = T(0);
    for (std::int64_t p = 0; p < k; ++p) {
      const T bpj = element<T>(b, p, j);
      for (std::int64_t i = 0; i < m; ++i) cj[i] += element<T>(a, i, p) * bpj;
    }
  }
#endif
}

template <class T>
void host_gemv(std::int64_t m, std::int64_t k, operand a, const T* x, std::int64_t incx, T* y, std::int64_t incy) {
#if TESSERA_HAS_CBLAS
  check_int(m, "rows");
  check_int(k, "columns");
  check_int(a.ld, "leading dimension");
  check_int(incx, "stride");
  check_int(incy, "stride");
  if (m == 0) return;
  if (k == 0) {
    for (std::int64_t i = 0; i < m; ++i) y[i * incy] = T(0);
    return;
  }
  const std::int64_t rows = a.trans ? k : m, cols = a.trans ? m : k;
  const auto ta = a.trans ? CblasTrans : CblasNoTrans;
  if constexpr (std::is_same_v<T, float>) {
    cblas_sgemv(CblasColMajor, ta, int(rows), int(cols), 1.f, static_cast<const float*>(a.p), int(a.ld), x,
                int(incx), 0.f, y, int(incy));
  } else {
    cblas_dgemv(CblasColMajor, ta, int(rows), int(cols), 1.0, static_cast<const double*>(a.p), int(a.ld), x,
                int(incx), 0.0, y, int(incy));
  }
#else
  for (std::int64_t i = 0; i < m; ++i) y[i * incy] = T(0);
  for (std::int64_t p = 0; p < k; ++p) {
    const T xp = x[p * incx];
    for (std::int64_t i = 0; i < m; ++i) y[i * incy] += element<T>(a, i, p) * xp;
  }
#endif
}

}  // namespace

#if TESSERA_HAS_CUDA
cublasHandle_t cublas_handle(int device) { return handle(device); }
#endif

}  // namespace tessera::detail::blas

namespace tessera::detail::host {

void run(const ProductTask& t) {
  using namespace blas;
  if (t.matrix_vector) {
    if (t.type == dtype::f32)
      host_gemv<float>(t.m, t.k, t.a, static_cast<const float*>(t.b.p), t.b.ld, static_cast<float*>(t.c), t.ldc);
    else
      host_gemv<double>(t.m, t.k, t.a, static_cast<const double*>(t.b.p), t.b.ld, static_cast<double*>(t.c), t.ldc);
  } else if (t.type == dtype::f32) {
    host_gemm<float>(t.m, t.n, t.k, t.a, t.b, static_cast<float*>(t.c), t.ldc);
  } else {
    host_gemm<double>(t.m, t.n, t.k, t.a, t.b, static_cast<double*>(t.c), t.ldc);
  }
}

}  // namespace tessera::detail::host

namespace tessera::detail::cuda {

void run(const ProductTask& t, int device, int shard) {
  (void)shard;
#if TESSERA_HAS_CUDA
  using namespace blas;
  if (t.matrix_vector) {
    if (t.m > 0) gpu_gemv(device, t.type, t.m, t.k, t.a, t.b.p, t.b.ld, t.c, t.ldc);
  } else if (t.m > 0 && t.n > 0) {
    gpu_gemm(device, t.type, t.m, t.n, t.k, t.a, t.b, t.c, t.ldc);
  }
#else
  (void)t;
  throw error("tessera: this build has no CUDA, so a matrix product cannot run on " + rt::info(device).name);
#endif
}

}  // namespace tessera::detail::cuda

namespace tessera::detail::blas {

const char* host_blas_name() {
#if TESSERA_HAS_CBLAS
  return TESSERA_CBLAS_NAME;
#else
  return "loops (no CBLAS found at configure time)";
#endif
}

}  // namespace tessera::detail::blas
