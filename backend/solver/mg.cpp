// SPDX-License-Identifier: Apache-2.0
// The multi-GPU solvers (MgSolveTask, solver.hpp): cusolverMg's getrf + getrs or syevd over the
// GPUs of one process, A in 1-D block-cyclic columns; cholesky is Tessera's own
// (split_cholesky.cpp). cusolverMg runs on streams of its own and returns when its work is done,
// so this executor waits for Tessera's streams of those devices before the call (the tiles were
// copied there) and for the devices after it.
#include <backend/runtime/runtime.hpp>
#include <backend/solver/gpu.hpp>
#include <backend/solver/solver.hpp>

#include <algorithm>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#ifndef TESSERA_HAS_CUSOLVERMG
#define TESSERA_HAS_CUSOLVERMG 0
#endif
#if TESSERA_HAS_CUDA && TESSERA_HAS_CUSOLVERMG
#include <cuda_runtime.h>
#include <cusolverMg.h>
#endif

namespace tessera::detail::solver {

bool multi_gpu_available() { return TESSERA_HAS_CUDA && TESSERA_HAS_CUSOLVERMG; }

bool multi_gpu_available(const int* devices, std::size_t n) {
  if (!multi_gpu_available()) return false;
  for (std::size_t i = 0; i < n; ++i)
    if (rt::info(devices[i]).kind != device_kind::cuda || rt::is_remote(devices[i])) return false;
  return true;
}

#if TESSERA_HAS_CUDA && TESSERA_HAS_CUSOLVERMG
// CUDA 13 marks cusolverMg deprecated, yet ships it and offers no other in-process multi-GPU
// LU; the warnings would only repeat that.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
namespace {

std::string devices_text(const MgSolveTask& t) {
  std::string s;
  for (int g = 0; g < t.count; ++g) s += (g ? ", " : "") + rt::info(t.devices[g]).name;
  return s;
}

void check_mg(cusolverStatus_t s, const char* call, const MgSolveTask& t) {
  if (s == CUSOLVER_STATUS_SUCCESS) return;
  throw backend_error(std::string("tessera: ") + call + " failed over " + devices_text(t) + ": status " +
                      std::to_string(int(s)));
}

// One cusolverMg handle per set of devices, created on first use; never destroyed, like the
// per-device handles (static destruction order).
cusolverMgHandle_t mg_handle(const MgSolveTask& t, const std::vector<int>& ordinals) {
  static std::mutex mu;
  static std::map<std::vector<int>, cusolverMgHandle_t> handles;
  std::lock_guard<std::mutex> lock(mu);
  auto it = handles.find(ordinals);
  if (it != handles.end()) return it->second;
  cusolverMgHandle_t h = nullptr;
  check_mg(cusolverMgCreate(&h), "cusolverMgCreate", t);
  std::vector<int> ids = ordinals;
  check_mg(cusolverMgDeviceSelect(h, static_cast<int>(ids.size()), ids.data()), "cusolverMgDeviceSelect", t);
  handles.emplace(ordinals, h);
  return h;
}

// The grid and the two matrix descriptors of one call, released however it ends.
struct mg_descriptors {
  cudaLibMgGrid_t grid = nullptr;
  cudaLibMgMatrixDesc_t a = nullptr, b = nullptr;
  ~mg_descriptors() {
    if (a) (void)cusolverMgDestroyMatrixDesc(a);
    if (b) (void)cusolverMgDestroyMatrixDesc(b);
    if (grid) (void)cusolverMgDestroyGrid(grid);
  }
};

// Each device's workspace, from the runtime's memory cache.
struct mg_workspace {
  std::vector<int> devices;
  std::vector<void*> p;
  std::size_t bytes = 0;
  ~mg_workspace() {
    for (std::size_t g = 0; g < p.size(); ++g) rt::deallocate(devices[g], p[g], bytes, memory::device);
  }
};

}  // namespace
#pragma GCC diagnostic pop
#endif

}  // namespace tessera::detail::solver

namespace tessera::detail::host {

void run(const MgSolveTask&) {
  throw error("tessera: a multi-GPU solve (cusolverMg) was planned on a host device; the solvers gather a split "
              "matrix on host devices instead");
}

}  // namespace tessera::detail::host

namespace tessera::detail::cuda {

void run(const MgSolveTask& t, int device, int shard) {
  (void)device, (void)shard;
#if TESSERA_HAS_CUDA
  if (t.kind == mg_kind::cholesky) {
    solver::split_cholesky(t);
    return;
  }
#endif
#if TESSERA_HAS_CUDA && TESSERA_HAS_CUSOLVERMG
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
  using namespace solver;
  rt::device_restorer restore;
  const int G = t.count;
  std::vector<int> ordinals(static_cast<std::size_t>(G));
  for (int g = 0; g < G; ++g) ordinals[static_cast<std::size_t>(g)] = rt::info(t.devices[g]).ordinal;
  // The tiles and B were written on Tessera's streams.
  for (int g = 0; g < G; ++g) rt::synchronize_device(t.devices[g]);
  if (t.n > INT32_MAX || t.nrhs > INT32_MAX) {
    throw invalid_argument("tessera: cusolverMg takes at most 2^31 - 1 rows, found n = " + std::to_string(t.n));
  }
  const int n = static_cast<int>(t.n);
  const cudaDataType dt = t.type == dtype::f32 ? CUDA_R_32F : CUDA_R_64F;
  const std::size_t elem = t.type == dtype::f32 ? sizeof(float) : sizeof(double);
  cusolverMgHandle_t h = mg_handle(t, ordinals);
  // Every cusolverMg call may leave another device current behind the runtime's per-thread cache,
  // after which rt::set_device would skip a switch it must make (a cudaDeviceSynchronize or an
  // allocation meant for one GPU would go to another): the cache is re-read after each call, as
  // nccl.cpp does after ncclCommInitAll.
  auto resync = [] { (void)rt::get_cuda_device(); };
  resync();
  mg_descriptors d;
  check_mg(cusolverMgCreateDeviceGrid(&d.grid, 1, G, ordinals.data(), CUDALIBMG_GRID_MAPPING_COL_MAJOR),
           "cusolverMgCreateDeviceGrid", t);
  check_mg(cusolverMgCreateMatrixDesc(&d.a, t.n, t.n, t.n, t.tile, dt, d.grid), "cusolverMgCreateMatrixDesc (A)", t);
  // One right-hand side per getrs, as one column block of width 1 (so cusolverMg's tile is exactly
  // that column of X), which lies on devices[0].
  check_mg(cusolverMgCreateMatrixDesc(&d.b, t.n, 1, t.n, 1, dt, d.grid), "cusolverMgCreateMatrixDesc (B)", t);
  std::vector<void*> a(t.a, t.a + G);
  std::vector<int*> ipiv(static_cast<std::size_t>(G));
  for (int g = 0; g < G; ++g) ipiv[static_cast<std::size_t>(g)] = t.ipiv[g];
  // B's array names one buffer per device; only devices[0] holds its one block, the others point
  // at their own A tiles, which cusolverMg does not read for B.
  std::vector<void*> b(a);
  std::int64_t lwork_f = 0, lwork_s = 0;
  const auto jobz = t.vectors ? CUSOLVER_EIG_MODE_VECTOR : CUSOLVER_EIG_MODE_NOVECTOR;
  if (t.kind == mg_kind::eigh) {
    check_mg(cusolverMgSyevd_bufferSize(h, jobz, CUBLAS_FILL_MODE_LOWER, n, a.data(), 1, 1, d.a, t.w, dt, dt, &lwork_f),
             "cusolverMgSyevd_bufferSize", t);
  } else {
    check_mg(cusolverMgGetrf_bufferSize(h, n, n, a.data(), 1, 1, d.a, ipiv.data(), dt, &lwork_f),
             "cusolverMgGetrf_bufferSize", t);
    b[0] = t.x;
    check_mg(cusolverMgGetrs_bufferSize(h, CUBLAS_OP_N, n, 1, a.data(), 1, 1, d.a, ipiv.data(), b.data(), 1, 1, d.b,
                                        dt, &lwork_s),
             "cusolverMgGetrs_bufferSize", t);
  }
  resync();
  mg_workspace work;
  work.bytes = static_cast<std::size_t>(std::max<std::int64_t>({lwork_f, lwork_s, 1})) * elem;
  for (int g = 0; g < G; ++g) {
    work.devices.push_back(t.devices[g]);
    work.p.push_back(rt::allocate(t.devices[g], work.bytes, memory::device));
  }
  // Blocks from the memory cache hold what their last user left: the workspace is zeroed, and so
  // are the columns past the last one in the narrower last tile, so that cusolverMg reads the same
  // bytes whatever ran before (a fresh cudaMalloc is usually zero, a reused block is not).
  const std::int64_t blocks = (t.n + t.tile - 1) / t.tile;
  const std::int64_t last_width = t.n - (blocks - 1) * t.tile;
  for (int g = 0; g < G; ++g) {
    rt::set_device(t.devices[g]);
    const auto st = static_cast<cudaStream_t>(rt::stream(t.devices[g]));
    char* base = static_cast<char*>(t.a[g]);
    const std::size_t ld = static_cast<std::size_t>(t.n) * elem;
    rt::check_cuda(cudaMemsetAsync(work.p[static_cast<std::size_t>(g)], 0, work.bytes, st), "cudaMemsetAsync (workspace)",
                   t.devices[g]);
    const std::int64_t mine = (blocks - g + G - 1) / G;  // tiles g, g + G, ... (copy_to_tiles)
    const bool holds_last = mine > 0 && (blocks - 1) % G == g;
    if (holds_last && last_width < t.tile) {
      const std::size_t from = static_cast<std::size_t>((mine - 1) * t.tile + last_width) * ld;
      rt::check_cuda(cudaMemsetAsync(base + from, 0, static_cast<std::size_t>(t.tile - last_width) * ld, st),
                     "cudaMemsetAsync (last tile)", t.devices[g]);
    }
  }
  // The cache hands blocks back in the order of Tessera's streams, which cusolverMg does not use.
  for (int g = 0; g < G; ++g) rt::synchronize_device(t.devices[g]);
  const std::int64_t lwork = static_cast<std::int64_t>(work.bytes / elem);
  // Every device's work is done before a failed status throws: cusolverMg may still be using the
  // workspace that the throw would release.
  auto settle = [&](cusolverStatus_t s, const char* call) {
    resync();
    const std::string after = std::string("cudaDeviceSynchronize (after ") + call + ")";
    for (int g = 0; g < G; ++g) {
      rt::set_device(t.devices[g]);
      rt::check_cuda(cudaDeviceSynchronize(), after.c_str(), t.devices[g]);
    }
    check_mg(s, call, t);
  };
  int info = 0;
  rt::set_device(t.devices[0]);  // the grid's first device current, as NVIDIA's samples call it
  if (t.kind == mg_kind::eigh) {
    // W is host memory (cusolverMg returns the eigenvalues to the host).
    settle(cusolverMgSyevd(h, jobz, CUBLAS_FILL_MODE_LOWER, n, a.data(), 1, 1, d.a, t.w, dt, dt, work.p.data(), lwork,
                           &info),
           "cusolverMgSyevd");
  } else {
    settle(cusolverMgGetrf(h, n, n, a.data(), 1, 1, d.a, ipiv.data(), dt, work.p.data(), lwork, &info),
           "cusolverMgGetrf");
  }
  *t.info = info;
  // The planner names a zero pivot or a minor that is not positive definite, and a rejected argument.
  if (info != 0 || t.kind != mg_kind::solve) return;
  for (std::int64_t j = 0; j < t.nrhs; ++j) {
    b[0] = static_cast<char*>(t.x) + static_cast<std::size_t>(j) * static_cast<std::size_t>(t.n) * elem;
    int sinfo = 0;
    const cusolverStatus_t s = cusolverMgGetrs(h, CUBLAS_OP_N, n, 1, a.data(), 1, 1, d.a, ipiv.data(), b.data(), 1, 1,
                                               d.b, dt, work.p.data(), lwork, &sinfo);
    if (s != CUSOLVER_STATUS_SUCCESS || sinfo < 0) settle(s, "cusolverMgGetrs");
    if (sinfo < 0) {
      throw backend_error("tessera: cusolverMgGetrs over " + devices_text(t) + " rejected argument " +
                          std::to_string(-sinfo));
    }
  }
  settle(CUSOLVER_STATUS_SUCCESS, "cusolverMgGetrs");
#pragma GCC diagnostic pop
#else
  (void)t;
  throw error("tessera: this build has no cusolverMg (CUDA with libcusolverMg), so a multi-GPU solve cannot run");
#endif
}

}  // namespace tessera::detail::cuda
