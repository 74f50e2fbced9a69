// SPDX-License-Identifier: Apache-2.0
// Tessera runtime: kernels launched as kept one-node CUDA graphs. On the H200s we measure, the
// host's launch is most of a small operation's cost, and a one-node graph kept from one launch to
// the next costs the host about half a direct launch and reaches the GPU sooner (one H200,
// session 47, docs/performance.md): per launch in a loop, 4.4 / 3.6 us through cuLaunchKernel at
// 16 / 512 parameter bytes against 2.1 / 1.8 us for the kept graph, 2.7 / 2.8 us with its
// parameters set before each launch (bench/support/launch_probe.cu); the 30M-float sum to the
// host 39.1 us through cuLaunchKernel, 36.4 us with the parameters set, 35.8 us unchanged
// (bench/support/reduce_probe.cu).
//
// A graph is kept per device for each kernel, stream and launch shape, made on the shape's second
// launch (a shape launched once, as a test's sizes are, costs no instantiation), and its
// parameters are set only when they differ from the last launch's: a loop over the same arrays
// launches its graphs unchanged. A shape whose parameters alternate between two sets gets a second
// graph, so that a loop between two arrays (u -> v, then v -> u) sets none either. Launches of one
// executable graph run in order whatever streams they go to, so a graph is never shared between
// streams. Not while capturing (capture.cpp): the capture records plain launches. The library's
// kernels (backend/cuda/launch.cuh) pass their task's bytes for the comparison, the user kernels
// and stencils compiled by NVRTC (backend/rtc) their arguments'; a launch whose bytes are not
// known (a ReductionKernel's two kernels) has its parameters set every time. TESSERA_GRAPH_LAUNCH=0 turns it off.
#include <backend/runtime/state.hpp>

#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace tessera::detail::rt {

#if TESSERA_HAS_CUDA
namespace {
// Graphs kept per device (one or two per shape): a time-stepping loop launches a few dozen shapes
// at most; past this the least recently launched graph is destroyed (a launch still running
// completes first).
constexpr std::size_t max_kept = 64;
// A program that cycles through more shapes than are kept, some launched twice in a row, would
// make a graph for such a shape every cycle and give it up before its next use: a graph given up
// after fewer than `few_launches` launches is counted as wasted, and past `max_wasted` of them a
// device makes no new graph (those it keeps still launch), so the instantiations such a program
// pays stay bounded.
constexpr std::uint64_t few_launches = 4;
constexpr int max_wasted = 64;
std::atomic<std::uint64_t> launched{0}, parameters_set{0};

bool enabled_by_env() {
  static const bool on = [] {
    const char* v = std::getenv("TESSERA_GRAPH_LAUNCH");
    return v == nullptr || *v == '\0' || std::atoi(v) != 0;
  }();
  return on;
}

// Whether `held` are the `size` bytes at `bytes` (unknown bytes, null, never are).
bool holds(const std::vector<unsigned char>& held, const void* bytes, std::size_t size) {
  return bytes != nullptr && held.size() == size && std::memcmp(held.data(), bytes, size) == 0;
}

void destroy(gpu_state::kept_graph& k) noexcept {
  if (k.exec != nullptr) (void)cudaGraphExecDestroy(k.exec);
  if (k.graph != nullptr) (void)cudaGraphDestroy(k.graph);
  k.exec = nullptr;
  k.graph = nullptr;
  k.node = nullptr;
}

[[noreturn]] void launch_failed(cudaError_t e, const char* call, const unsigned (&grid)[3],
                                const unsigned (&block)[3], int device_id, int shard, const char* what) {
  (void)cudaGetLastError();  // the error is reported here, not by the next launch's check
  throw backend_error(std::string("tessera: kernel launch `") + what + "` failed to launch on device cuda:" +
                      std::to_string(device_id) + " (shard " + std::to_string(shard) + "): " + call + ": " +
                      cudaGetErrorName(e) + " (" + cudaGetErrorString(e) + "), grid " + std::to_string(grid[0]) +
                      "x" + std::to_string(grid[1]) + "x" + std::to_string(grid[2]) + ", block " +
                      std::to_string(block[0]) + "x" + std::to_string(block[1]) + "x" + std::to_string(block[2]));
}
}  // namespace

bool graph_launch(const void* kernel, const unsigned (&grid)[3], const unsigned (&block)[3], std::size_t shared_bytes,
                  void** args, const void* bytes, std::size_t size, void* stream, int device_id, int shard,
                  const char* what) {
  if (!enabled_by_env() || capturing()) return false;
  gpu_state& g = gpu(device_id);
  std::lock_guard<std::mutex> lock(g.graphs_mutex);
  auto& kept = g.kept_graphs;
  // A shape may have two graphs, so that a loop alternating between two sets of parameters (a
  // Jacobi sweep u -> v, then v -> u) sets none: the one holding these bytes, else one not made
  // yet, else the least recently launched of the shape's.
  const std::size_t none = kept.size();
  std::size_t at = none, unmade = none, oldest = none;
  int of_shape = 0;
  bool same = false;  // `at` holds these bytes: launched without setting them
  for (std::size_t i = kept.size(); i-- > 0;) {
    const gpu_state::kept_graph& k = kept[i];
    if (k.kernel == kernel && k.stream == stream && k.shared_bytes == shared_bytes &&
        std::memcmp(k.grid, grid, sizeof k.grid) == 0 && std::memcmp(k.block, block, sizeof k.block) == 0) {
      ++of_shape;
      oldest = i;
      if (k.exec == nullptr && unmade == none) unmade = i;
      if (k.exec != nullptr && holds(k.params, bytes, size)) {
        at = i;
        same = true;
        break;
      }
    }
  }
  // The shape's one graph holds other parameters, and held these before them (a loop alternating
  // between two sets): a second graph, made on the next launch that finds no graph with its
  // bytes. Parameters that never come back (new arrays every step) keep one graph per shape, and
  // so does every shape of a device that makes no new graphs.
  const bool second = at == none && of_shape == 1 && kept[oldest].exec != nullptr &&
                      g.wasted_graphs < max_wasted && holds(kept[oldest].before, bytes, size);
  if (at == none) at = unmade != none ? unmade : oldest;
  if (at == none || second) {
    // First launch of this shape (or of its second set of parameters): remembered only; the
    // caller launches it directly.
    if (kept.size() >= max_kept) {
      if (kept.front().exec != nullptr && kept.front().launches < few_launches) ++g.wasted_graphs;
      destroy(kept.front());
      kept.erase(kept.begin());
    }
    gpu_state::kept_graph k;
    k.kernel = kernel;
    k.stream = stream;
    std::memcpy(k.grid, grid, sizeof k.grid);
    std::memcpy(k.block, block, sizeof k.block);
    k.shared_bytes = shared_bytes;
    kept.push_back(std::move(k));
    return false;
  }
  // Most recently launched last, so that the front is the one to give up.
  if (at + 1 != kept.size()) {
    gpu_state::kept_graph k = std::move(kept[at]);
    kept.erase(kept.begin() + static_cast<std::ptrdiff_t>(at));
    kept.push_back(std::move(k));
  }
  gpu_state::kept_graph& k = kept.back();
  if (k.unusable) return false;
  cudaKernelNodeParams p{};
  p.func = const_cast<void*>(kernel);
  p.gridDim = dim3(grid[0], grid[1], grid[2]);
  p.blockDim = dim3(block[0], block[1], block[2]);
  p.sharedMemBytes = static_cast<unsigned>(shared_bytes);
  p.kernelParams = args;
  if (k.exec == nullptr) {
    if (g.wasted_graphs >= max_wasted) return false;
    // The node belongs to the current device's context: the caller set `device_id` current.
    // Where the graph cannot be made (no memory left for it, say), this shape is launched
    // directly from now on, and the direct launch reports what is wrong with the launch itself.
    cudaError_t e = cudaGraphCreate(&k.graph, 0);
    if (e == cudaSuccess) e = cudaGraphAddKernelNode(&k.node, k.graph, nullptr, 0, &p);
    if (e == cudaSuccess) e = cudaGraphInstantiate(&k.exec, k.graph, 0);
    if (e != cudaSuccess) {
      (void)cudaGetLastError();
      destroy(k);
      k.unusable = true;
      return false;
    }
  } else if (!same) {
    if (cudaGraphExecKernelNodeSetParams(k.exec, k.node, &p) != cudaSuccess) {
      (void)cudaGetLastError();
      destroy(k);
      k.unusable = true;
      return false;
    }
  }
  if (!same) {
    k.before.swap(k.params);
    if (bytes != nullptr) k.params.assign(static_cast<const unsigned char*>(bytes),
                                          static_cast<const unsigned char*>(bytes) + size);
    else k.params.clear();
  }
  if (const cudaError_t e = cudaGraphLaunch(k.exec, static_cast<cudaStream_t>(stream)); e != cudaSuccess)
    launch_failed(e, "cudaGraphLaunch", grid, block, device_id, shard, what);
  ++k.launches;
  launched.fetch_add(1, std::memory_order_relaxed);
  if (!same && k.launches > 1) parameters_set.fetch_add(1, std::memory_order_relaxed);
  return true;
}
std::uint64_t graph_launches() { return launched.load(std::memory_order_relaxed); }
std::uint64_t graph_parameter_sets() { return parameters_set.load(std::memory_order_relaxed); }
#else
bool graph_launch(const void*, const unsigned (&)[3], const unsigned (&)[3], std::size_t, void**, const void*,
                  std::size_t, void*, int, int, const char*) {
  return false;
}
std::uint64_t graph_launches() { return 0; }
std::uint64_t graph_parameter_sets() { return 0; }
#endif

}  // namespace tessera::detail::rt
