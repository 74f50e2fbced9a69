// SPDX-License-Identifier: Apache-2.0
// cholesky(A) of a matrix split by columns over the GPUs of one process (MgSolveTask, kind
// cholesky; gpu.hpp): right-looking, over the 1-D block-cyclic tiles that copy_to_tiles lays out
// (tile j on devices[j % G]), one step per tile k:
//   - its owner factors the diagonal block (cuSOLVER potrf) and solves the panel below it against
//     that factor (cuBLAS trsm), then records its event;
//   - every other GPU that holds a later tile waits for that event and copies the panel (NVLink);
//   - each GPU subtracts the panel's outer product from its later tiles (cuBLAS gemm, one per tile,
//     on the tile's lower trapezoid).
// The owner of tile k + 1 updates that tile first and factors it at once (a one-step look-ahead),
// so the next panel is ready while the owner updates its other tiles of step k; a receiving GPU
// copies it on its one stream, after its own updates of step k (a copy stream and two panel
// buffers would overlap that copy too).
// Everything runs on Tessera's streams, ordered across GPUs by one event per GPU; the host waits
// once, at the end, to read each step's info. cusolverMgPotrf, which ran this before, returned a
// factor about 1% wrong in the later tiles when the GPUs were shared with other processes
// (docs/semantics.md, "Dense solvers").
#include <backend/runtime/runtime.hpp>
#include <backend/solver/gpu.hpp>

#if TESSERA_HAS_CUDA
#include <cuda_runtime.h>

#include <algorithm>
#include <climits>
#include <cstdint>
#include <string>
#include <vector>

namespace tessera::detail::solver {
namespace {

template <class T>
struct calls;
#define TESSERA_POTRF_CALLS(T, P)                                          \
  template <>                                                              \
  struct calls<T> {                                                        \
    static constexpr auto potrf_size = cusolverDn##P##potrf_bufferSize;    \
    static constexpr auto potrf = cusolverDn##P##potrf;                    \
    static constexpr auto trsm = cublas##P##trsm;                          \
    static constexpr auto gemm = cublas##P##gemm;                          \
    static constexpr const char* prefix = #P;                              \
  };
TESSERA_POTRF_CALLS(float, S)
TESSERA_POTRF_CALLS(double, D)
#undef TESSERA_POTRF_CALLS

[[noreturn]] void fail(const std::string& call, int status, int device, std::int64_t tile) {
  throw backend_error("tessera: " + call + " failed on " + rt::info(device).name + " (tile " + std::to_string(tile) +
                      " of a cholesky split over GPUs): status " + std::to_string(status));
}

// One GPU's share of the factorization: its stream and event, the panel it receives, potrf's
// workspace and one info slot per local tile. Blocks go back to the memory cache in stream order.
struct gpu_part {
  int device = -1;
  cudaStream_t stream = nullptr;
  cudaEvent_t factored = nullptr;  // recorded after each of its tiles is factored
  void* panel = nullptr;
  void* work = nullptr;
  int* info = nullptr;
  std::size_t panel_bytes = 0, work_bytes = 0, info_bytes = 0;
  gpu_part() = default;
  gpu_part(const gpu_part&) = delete;
  gpu_part& operator=(const gpu_part&) = delete;
  ~gpu_part() {
    if (device < 0) return;
    try {
      if (factored != nullptr) {
        rt::set_device(device);
        (void)cudaEventDestroy(factored);
      }
    } catch (...) {  // a destructor must not throw; the work's own error matters more
    }
    if (panel) rt::deallocate(device, panel, panel_bytes, memory::device);
    if (work) rt::deallocate(device, work, work_bytes, memory::device);
    if (info) rt::deallocate(device, info, info_bytes, memory::device);
  }
};

template <class T>
void factor(const MgSolveTask& t) {
  using C = calls<T>;
  const int G = t.count;
  const std::int64_t n = t.n, nb = t.tile, blocks = (n + nb - 1) / nb;
  if (n > INT32_MAX) {
    throw invalid_argument("tessera: cholesky over GPUs takes at most 2^31 - 1 rows, found n = " + std::to_string(n));
  }
  const int ld = static_cast<int>(n);
  const std::string pre = C::prefix;
  rt::device_restorer restore;
  std::vector<gpu_part> parts(static_cast<std::size_t>(G));
  auto owner = [&](std::int64_t j) -> gpu_part& { return parts[static_cast<std::size_t>(j % G)]; };
  // Column j * nb of A, row 0, in its owner's tiles (leading dimension n).
  auto column = [&](std::int64_t j) { return static_cast<T*>(t.a[j % G]) + (j / G) * nb * n; };
  auto width = [&](std::int64_t j) { return static_cast<int>(std::min(nb, n - j * nb)); };
  for (int g = 0; g < G; ++g) {
    gpu_part& p = parts[static_cast<std::size_t>(g)];
    p.device = t.devices[g];
    rt::set_device(p.device);
    p.stream = static_cast<cudaStream_t>(rt::stream(p.device));
    rt::check_cuda(cudaEventCreateWithFlags(&p.factored, cudaEventDisableTiming), "cudaEventCreateWithFlags", p.device);
    int lwork = 0;
    const cusolverStatus_t s =
        C::potrf_size(dn_handle(p.device), CUBLAS_FILL_MODE_LOWER, static_cast<int>(nb), column(g), ld, &lwork);
    if (s != CUSOLVER_STATUS_SUCCESS) fail("cusolverDn" + pre + "potrf_bufferSize", int(s), p.device, g);
    p.work_bytes = static_cast<std::size_t>(std::max(lwork, 1)) * sizeof(T);
    p.work = rt::allocate(p.device, p.work_bytes, memory::device);
    p.panel_bytes = static_cast<std::size_t>(n * nb) * sizeof(T);
    p.panel = rt::allocate(p.device, p.panel_bytes, memory::device);
    p.info_bytes = static_cast<std::size_t>((blocks + G - 1) / G) * sizeof(int);
    p.info = static_cast<int*>(rt::allocate(p.device, p.info_bytes, memory::device));
    rt::check_cuda(cudaMemsetAsync(p.info, 0, p.info_bytes, p.stream), "cudaMemsetAsync (info)", p.device);
  }

  // Tile k: potrf of its diagonal block, trsm of the rows below, the event.
  auto factor_tile = [&](std::int64_t k) {
    gpu_part& o = owner(k);
    rt::set_device(o.device);
    T* akk = column(k) + k * nb;
    const int w = width(k);
    const cusolverStatus_t s = C::potrf(dn_handle(o.device), CUBLAS_FILL_MODE_LOWER, w, akk, ld,
                                        static_cast<T*>(o.work), static_cast<int>(o.work_bytes / sizeof(T)),
                                        o.info + k / G);
    if (s != CUSOLVER_STATUS_SUCCESS) fail("cusolverDn" + pre + "potrf", int(s), o.device, k);
    if (const std::int64_t below = n - k * nb - w; below > 0) {
      const T one = 1;
      const cublasStatus_t b = C::trsm(blas::cublas_handle(o.device), CUBLAS_SIDE_RIGHT, CUBLAS_FILL_MODE_LOWER,
                                       CUBLAS_OP_T, CUBLAS_DIAG_NON_UNIT, static_cast<int>(below), w, &one, akk, ld,
                                       akk + w, ld);
      if (b != CUBLAS_STATUS_SUCCESS) fail("cublas" + pre + "trsm", int(b), o.device, k);
    }
    rt::check_cuda(cudaEventRecord(o.factored, o.stream), "cudaEventRecord (a factored tile)", o.device);
  };

  std::vector<std::vector<int>> infos(static_cast<std::size_t>(G));
  try {
    if (blocks > 0) factor_tile(0);
    for (std::int64_t k = 0; k < blocks; ++k) {
      for (int g = 0; g < G; ++g) {
        // g's first tile after k; the panel of tile k is needed only where there is one.
        const std::int64_t first = k + 1 + ((g - (k + 1) % G) % G + G) % G;
        if (first >= blocks) continue;
        gpu_part& p = parts[static_cast<std::size_t>(g)];
        rt::set_device(p.device);
        const T* panel = column(k);  // row 0 of tile k; its rows k * nb.. are L's
        if (g != k % G) {
          // The event was recorded for tile k and is recorded next for tile k + G, which is queued
          // only in step k + G - 1 >= k + 1: this wait sees tile k's.
          rt::check_cuda(cudaStreamWaitEvent(p.stream, owner(k).factored, 0), "cudaStreamWaitEvent (a panel)",
                         p.device);
          // Rows k * nb.. of the tile (the updates read rows (k + 1) * nb.. of it; the diagonal
          // block comes along, as in the version measured on the GPUs).
          const std::size_t pitch = static_cast<std::size_t>(n) * sizeof(T);
          const std::int64_t from = k * nb;
          T* dst = static_cast<T*>(p.panel);
          rt::check_cuda(cudaMemcpy2DAsync(dst + from, pitch, column(k) + from, pitch,
                                           static_cast<std::size_t>(n - from) * sizeof(T),
                                           static_cast<std::size_t>(width(k)), cudaMemcpyDefault, p.stream),
                         "cudaMemcpy2DAsync (a panel from another GPU)", p.device);
          panel = dst;
        }
        const T minus_one = -1, one = 1;
        for (std::int64_t j = first; j < blocks; j += G) {
          // Tile j's rows j * nb.. less the panel's rows j * nb.. times the transpose of its
          // rows j * nb .. j * nb + width(j).
          const T* pj = panel + j * nb;
          const cublasStatus_t s =
              C::gemm(blas::cublas_handle(p.device), CUBLAS_OP_N, CUBLAS_OP_T, static_cast<int>(n - j * nb), width(j),
                      width(k), &minus_one, pj, ld, pj, ld, &one, column(j) + j * nb, ld);
          if (s != CUBLAS_STATUS_SUCCESS) fail("cublas" + pre + "gemm", int(s), p.device, j);
          if (j == k + 1) factor_tile(j);
        }
      }
    }
    for (int g = 0; g < G; ++g) {
      gpu_part& p = parts[static_cast<std::size_t>(g)];
      auto& v = infos[static_cast<std::size_t>(g)];
      v.assign(p.info_bytes / sizeof(int), 0);
      rt::set_device(p.device);
      rt::check_cuda(cudaMemcpyAsync(v.data(), p.info, p.info_bytes, cudaMemcpyDeviceToHost, p.stream),
                     "cudaMemcpyAsync (info)", p.device);
    }
    for (auto& p : parts) rt::synchronize_device(p.device);
  } catch (...) {
    // Queued copies read other GPUs' tiles, which the caller frees once this throws: every stream
    // is drained first, whatever fails on the way.
    for (auto& p : parts) {
      try {
        rt::set_device(p.device);
        (void)cudaStreamSynchronize(p.stream);
      } catch (...) {
      }
    }
    throw;
  }

  // After a block that is not positive definite the later ones hold whatever followed: the first
  // one names the leading minor, as LAPACK's info does.
  *t.info = 0;
  for (std::int64_t k = 0; k < blocks; ++k) {
    const int v = infos[static_cast<std::size_t>(k % G)][static_cast<std::size_t>(k / G)];
    if (v < 0) fail("cusolverDn" + pre + "potrf (argument " + std::to_string(-v) + ")", v, owner(k).device, k);
    if (v > 0) {
      *t.info = static_cast<int>(k * nb + v);
      break;
    }
  }
}

}  // namespace

void split_cholesky(const MgSolveTask& t) {
  if (t.type == dtype::f32) factor<float>(t);
  else factor<double>(t);
}

}  // namespace tessera::detail::solver
#endif
