// SPDX-License-Identifier: Apache-2.0
// The solver layer (solver.hpp): cuSOLVER's dense API on GPUs, LAPACKE on host devices.
#include <backend/runtime/runtime.hpp>
#include <backend/solver/gpu.hpp>
#include <backend/solver/solver.hpp>

#include <climits>
#include <cstdint>
#include <mutex>
#include <string>
#include <type_traits>
#include <vector>

#if TESSERA_HAS_CUDA
#include <cuda_runtime.h>
#include <cusolverDn.h>
#endif
#ifndef TESSERA_HAS_LAPACKE
#define TESSERA_HAS_LAPACKE 0
#endif
#if TESSERA_HAS_LAPACKE
#include <lapacke.h>
#endif

namespace tessera::detail::solver {
namespace {

[[maybe_unused]] const char* routine(kind k) {
  switch (k) {
    case kind::gesv: return "getrf/getrs";
    case kind::getrf: return "getrf";
    case kind::potrf: return "potrf";
    case kind::geqrf: return "geqrf";
    case kind::orgqr: return "orgqr";
    case kind::gesvd: return "gesvd";
    case kind::syevd: return "syevd";
  }
  return "?";
}

// LAPACK and cuSOLVER's dense API take int extents: larger matrices are refused by name.
[[maybe_unused]] int to_int(std::int64_t v, const char* what) {
  if (v > INT_MAX) {
    throw invalid_argument(std::string("tessera: a dense solver with ") + what + " = " + std::to_string(v) +
                           ": LAPACK and cuSOLVER take at most " + std::to_string(INT_MAX));
  }
  return static_cast<int>(v);
}

// A negative info is a bad argument: a bug of the caller, not a property of the matrix.
[[maybe_unused]] void check_argument(int info, const char* call, const std::string& where) {
  if (info >= 0) return;
  throw backend_error(std::string("tessera: ") + call + " on " + where + " rejected argument " +
                      std::to_string(-info) + " (info " + std::to_string(info) + ")");
}

template <class T>
[[maybe_unused]] T* at(void* p, std::int64_t stride, std::int64_t i) {
  return p == nullptr ? nullptr : static_cast<T*>(p) + i * stride;
}

#if TESSERA_HAS_LAPACKE
static_assert(sizeof(lapack_int) == sizeof(std::int32_t),
              "Tessera keeps pivots as int32: LAPACKE must use 32-bit integers (not LAPACK_ILP64)");

// The LAPACKE routine of each kind, by element type.
template <class T>
struct lapacke;
#define TESSERA_LAPACKE(T, P)                                                                                 \
  template <>                                                                                                 \
  struct lapacke<T> {                                                                                         \
    static constexpr auto getrf = LAPACKE_##P##getrf;                                                         \
    static constexpr auto getrs = LAPACKE_##P##getrs;                                                         \
    static constexpr auto potrf = LAPACKE_##P##potrf;                                                         \
    static constexpr auto geqrf = LAPACKE_##P##geqrf;                                                         \
    static constexpr auto orgqr = LAPACKE_##P##orgqr;                                                         \
    static constexpr auto gesvd = LAPACKE_##P##gesvd;                                                         \
    static constexpr auto syevd = LAPACKE_##P##syevd;                                                         \
  };
TESSERA_LAPACKE(float, s)
TESSERA_LAPACKE(double, d)
#undef TESSERA_LAPACKE

template <class T>
void host_solve(const SolverTask& t) {
  using L = lapacke<T>;
  const int m = to_int(t.m, "rows"), n = to_int(t.n, "columns"), k = to_int(t.k, "k");
  const int lda = to_int(t.lda, "leading dimension"), ldb = to_int(t.ldb, "leading dimension");
  const int ldu = to_int(t.ldu, "leading dimension"), ldvt = to_int(t.ldvt, "leading dimension");
  const std::string where = "a host device";
  std::vector<T> superb(static_cast<std::size_t>(m < n ? m : n) + 1);
  for (std::int64_t i = 0; i < t.batch; ++i) {
    T* a = at<T>(t.a, t.stride_a, i);
    T* b = at<T>(t.b, t.stride_b, i);
    std::int32_t* piv = t.ipiv == nullptr ? nullptr : t.ipiv + i * t.stride_piv;
    int info = 0;
    if (t.kind == kind::gesv) t.info[i * t.stride_info + 1] = 0;
    switch (t.kind) {
      case kind::gesv:
        info = L::getrf(LAPACK_COL_MAJOR, n, n, a, lda, piv);
        check_argument(info, "LAPACKE getrf", where);
        if (info == 0 && k > 0) check_argument(L::getrs(LAPACK_COL_MAJOR, 'N', n, k, a, lda, piv, b, ldb), "LAPACKE getrs", where);
        break;
      case kind::getrf: info = L::getrf(LAPACK_COL_MAJOR, m, n, a, lda, piv); break;
      case kind::potrf: info = L::potrf(LAPACK_COL_MAJOR, 'L', n, a, lda); break;
      case kind::geqrf: info = L::geqrf(LAPACK_COL_MAJOR, m, n, a, lda, b); break;
      case kind::orgqr: info = L::orgqr(LAPACK_COL_MAJOR, m, n, k, a, lda, b); break;
      case kind::gesvd: {
        const char job = t.vectors ? 'S' : 'N';
        info = L::gesvd(LAPACK_COL_MAJOR, job, job, m, n, a, lda, b, at<T>(t.u, t.stride_u, i), ldu,
                        at<T>(t.vt, t.stride_vt, i), ldvt, superb.data());
        break;
      }
      case kind::syevd: info = L::syevd(LAPACK_COL_MAJOR, t.vectors ? 'V' : 'N', 'L', n, a, lda, b); break;
    }
    check_argument(info, routine(t.kind), where);
    t.info[i * t.stride_info] = info;
  }
}
#endif

#if TESSERA_HAS_CUDA
const char* status_name(cusolverStatus_t s) {
  switch (s) {
    case CUSOLVER_STATUS_SUCCESS: return "CUSOLVER_STATUS_SUCCESS";
    case CUSOLVER_STATUS_NOT_INITIALIZED: return "CUSOLVER_STATUS_NOT_INITIALIZED";
    case CUSOLVER_STATUS_ALLOC_FAILED: return "CUSOLVER_STATUS_ALLOC_FAILED";
    case CUSOLVER_STATUS_INVALID_VALUE: return "CUSOLVER_STATUS_INVALID_VALUE";
    case CUSOLVER_STATUS_ARCH_MISMATCH: return "CUSOLVER_STATUS_ARCH_MISMATCH";
    case CUSOLVER_STATUS_EXECUTION_FAILED: return "CUSOLVER_STATUS_EXECUTION_FAILED";
    case CUSOLVER_STATUS_INTERNAL_ERROR: return "CUSOLVER_STATUS_INTERNAL_ERROR";
    case CUSOLVER_STATUS_NOT_SUPPORTED: return "CUSOLVER_STATUS_NOT_SUPPORTED";
    default: return "cuSOLVER error";
  }
}

void check(cusolverStatus_t s, const char* call, int device, int shard) {
  if (s == CUSOLVER_STATUS_SUCCESS) return;
  throw backend_error(std::string("tessera: ") + call + " failed on " + rt::info(device).name + " (shard " +
                      std::to_string(shard) + "): " + status_name(s) + " (status " + std::to_string(int(s)) + ")");
}

// One handle per GPU, created on first use with the device current and bound to its stream, so
// factorizations are ordered with the rest of the device's work; like the runtime's state,
// deliberately never destroyed (static destruction order).
cusolverDnHandle_t handle(int device, int shard) {
  static std::mutex mu;
  static std::vector<cusolverDnHandle_t> handles;
  std::lock_guard<std::mutex> lock(mu);
  if (handles.empty()) handles.resize(static_cast<std::size_t>(rt::device_count()), nullptr);
  cusolverDnHandle_t& h = handles[static_cast<std::size_t>(device)];
  if (h == nullptr) {
    check(cusolverDnCreate(&h), "cusolverDnCreate", device, shard);
    check(cusolverDnSetStream(h, static_cast<cudaStream_t>(rt::stream(device))), "cusolverDnSetStream", device, shard);
  }
  return h;
}

// Device memory from the runtime's cache for one task's workspaces, returned in stream order (the
// cache records an event on the device's stream).
struct device_block {
  device_block(int dev, std::size_t n) : device(dev), bytes(n), p(rt::allocate(dev, n, memory::device)) {}
  ~device_block() { rt::deallocate(device, p, bytes, memory::device); }
  device_block(const device_block&) = delete;
  device_block& operator=(const device_block&) = delete;
  int device;
  std::size_t bytes;
  void* p;
};

template <class T>
struct dn;
#define TESSERA_CUSOLVER(T, P)                                              \
  template <>                                                               \
  struct dn<T> {                                                            \
    static constexpr auto getrf_size = cusolverDn##P##getrf_bufferSize;     \
    static constexpr auto getrf = cusolverDn##P##getrf;                     \
    static constexpr auto getrs = cusolverDn##P##getrs;                     \
    static constexpr auto potrf_size = cusolverDn##P##potrf_bufferSize;     \
    static constexpr auto potrf = cusolverDn##P##potrf;                     \
    static constexpr auto geqrf_size = cusolverDn##P##geqrf_bufferSize;     \
    static constexpr auto geqrf = cusolverDn##P##geqrf;                     \
    static constexpr auto orgqr_size = cusolverDn##P##orgqr_bufferSize;     \
    static constexpr auto orgqr = cusolverDn##P##orgqr;                     \
    static constexpr auto gesvd_size = cusolverDn##P##gesvd_bufferSize;     \
    static constexpr auto gesvd = cusolverDn##P##gesvd;                     \
    static constexpr auto syevd_size = cusolverDn##P##syevd_bufferSize;     \
    static constexpr auto syevd = cusolverDn##P##syevd;                     \
    static constexpr const char* prefix = "cusolverDn" #P;                  \
  };
TESSERA_CUSOLVER(float, S)
TESSERA_CUSOLVER(double, D)
#undef TESSERA_CUSOLVER

template <class T>
void gpu_solve(const SolverTask& t, int device, int shard) {
  using D = dn<T>;
  rt::device_restorer restore;
  rt::set_device(device);
  cusolverDnHandle_t h = handle(device, shard);
  const auto st = static_cast<cudaStream_t>(rt::stream(device));
  const int m = to_int(t.m, "rows"), n = to_int(t.n, "columns"), k = to_int(t.k, "k");
  const int lda = to_int(t.lda, "leading dimension"), ldb = to_int(t.ldb, "leading dimension");
  const int ldu = to_int(t.ldu, "leading dimension"), ldvt = to_int(t.ldvt, "leading dimension");
  const std::string pre = D::prefix;
  auto call = [&](cusolverStatus_t s, const char* name) { check(s, (pre + name).c_str(), device, shard); };
  T* a0 = static_cast<T*>(t.a);
  T* b0 = static_cast<T*>(t.b);
  const auto jobz = t.vectors ? CUSOLVER_EIG_MODE_VECTOR : CUSOLVER_EIG_MODE_NOVECTOR;
  int lwork = 0;
  switch (t.kind) {
    case kind::gesv: call(D::getrf_size(h, n, n, a0, lda, &lwork), "getrf_bufferSize"); break;
    case kind::getrf: call(D::getrf_size(h, m, n, a0, lda, &lwork), "getrf_bufferSize"); break;
    case kind::potrf: call(D::potrf_size(h, CUBLAS_FILL_MODE_LOWER, n, a0, lda, &lwork), "potrf_bufferSize"); break;
    case kind::geqrf: call(D::geqrf_size(h, m, n, a0, lda, &lwork), "geqrf_bufferSize"); break;
    case kind::orgqr: call(D::orgqr_size(h, m, n, k, a0, lda, b0, &lwork), "orgqr_bufferSize"); break;
    case kind::gesvd: call(D::gesvd_size(h, m, n, &lwork), "gesvd_bufferSize"); break;
    case kind::syevd:
      call(D::syevd_size(h, jobz, CUBLAS_FILL_MODE_LOWER, n, a0, lda, b0, &lwork), "syevd_bufferSize");
      break;
  }
  const std::size_t batch = static_cast<std::size_t>(t.batch);
  // Workspaces come from the device's memory cache and go back to it in stream order, so the
  // host need not wait for the factorizations to end.
  device_block work(device, static_cast<std::size_t>(lwork > 0 ? lwork : 1) * sizeof(T));
  device_block rwork(device, static_cast<std::size_t>(t.kind == kind::gesvd ? (n > 1 ? n : 1) : 1) * sizeof(T));
  T* w = static_cast<T*>(work.p);
  for (std::size_t i = 0; i < batch; ++i) {
    T* a = at<T>(t.a, t.stride_a, std::int64_t(i));
    T* b = at<T>(t.b, t.stride_b, std::int64_t(i));
    int* piv = t.ipiv == nullptr ? nullptr : t.ipiv + std::int64_t(i) * t.stride_piv;
    int* info = t.info + std::int64_t(i) * t.stride_info;
    switch (t.kind) {
      case kind::gesv:
        call(D::getrf(h, n, n, a, lda, w, piv, info), "getrf");
        // Queued whatever getrf finds: a singular matrix gives infinities in a result the caller
        // discards, and no host wait comes between the two calls.
        if (k > 0) call(D::getrs(h, CUBLAS_OP_N, n, k, a, lda, piv, b, ldb, info + 1), "getrs");
        else rt::check_cuda(cudaMemsetAsync(info + 1, 0, sizeof(int), st), "cudaMemsetAsync (getrs info)", device);
        break;
      case kind::getrf: call(D::getrf(h, m, n, a, lda, w, piv, info), "getrf"); break;
      case kind::potrf: call(D::potrf(h, CUBLAS_FILL_MODE_LOWER, n, a, lda, w, lwork, info), "potrf"); break;
      case kind::geqrf: call(D::geqrf(h, m, n, a, lda, b, w, lwork, info), "geqrf"); break;
      case kind::orgqr: call(D::orgqr(h, m, n, k, a, lda, b, w, lwork, info), "orgqr"); break;
      case kind::gesvd: {
        const signed char job = t.vectors ? 'S' : 'N';
        call(D::gesvd(h, job, job, m, n, a, lda, b, at<T>(t.u, t.stride_u, std::int64_t(i)), ldu,
                      at<T>(t.vt, t.stride_vt, std::int64_t(i)), ldvt, w, lwork, static_cast<T*>(rwork.p), info),
             "gesvd");
        break;
      }
      case kind::syevd:
        call(D::syevd(h, jobz, CUBLAS_FILL_MODE_LOWER, n, a, lda, b, w, lwork, info), "syevd");
        break;
    }
  }
}
#endif

}  // namespace

#if TESSERA_HAS_CUDA
cusolverDnHandle_t dn_handle(int device) { return handle(device, 0); }
#endif

bool host_lapack_available() { return TESSERA_HAS_LAPACKE != 0; }

const char* host_lapack_name() {
#if TESSERA_HAS_LAPACKE
  return "LAPACKE";
#else
  return "none (LAPACKE was not found at configure time: install liblapacke-dev and reconfigure)";
#endif
}

}  // namespace tessera::detail::solver

namespace tessera::detail::host {

void run(const SolverTask& t) {
#if TESSERA_HAS_LAPACKE
  if (t.type == solver::dtype::f32) solver::host_solve<float>(t);
  else solver::host_solve<double>(t);
#else
  (void)t;
  throw error("tessera: dense solvers on host devices need LAPACKE, which was not found when Tessera was configured; "
              "install liblapacke-dev (with libopenblas-dev) and reconfigure, or run on GPUs");
#endif
}

}  // namespace tessera::detail::host

namespace tessera::detail::cuda {

void run(const SolverTask& t, int device, int shard) {
#if TESSERA_HAS_CUDA
  if (t.type == solver::dtype::f32) solver::gpu_solve<float>(t, device, shard);
  else solver::gpu_solve<double>(t, device, shard);
#else
  (void)t, (void)shard;
  throw error("tessera: this build has no CUDA, so a dense solver cannot run on " + rt::info(device).name);
#endif
}

}  // namespace tessera::detail::cuda
