// SPDX-License-Identifier: Apache-2.0
// Tessera CUDA launch helper: every kernel launch of the library goes through launch(). It checks
// at compile time that the task can be a kernel parameter (trivially copyable, within CUDA's
// parameter limit), sets the device, launches on the device's stream (a kept one-node graph,
// rt::graph_launch, from a shape's second launch on; else the driver's cuLaunchKernel,
// rt::driver_launch; else <<<>>>) and checks the launch
// (rt::check_launch names the kernel, device and shard; TESSERA_DEBUG_SYNC=1 also synchronizes).
// Included only by translation units compiled with nvcc.
#pragma once
#include <backend/runtime/runtime.hpp>
#include <tessera/evaluator.hpp>

#include <cuda_runtime.h>

#include <atomic>

namespace tessera::detail::cuda {

// SMs of a device (at least 1): grids are sized from it.
inline index_t sm_count(int device) {
  const int sms = rt::info(device).sm_count;
  return sms > 0 ? sms : 1;
}

// Blocks for `work` items of `per_block` each, between 1 and `cap`.
inline unsigned grid_blocks(index_t work, index_t per_block, index_t cap) {
  index_t blocks = (work + per_block - 1) / per_block;
  if (blocks > cap) blocks = cap;
  return static_cast<unsigned>(blocks < 1 ? 1 : blocks);
}

// Blocks of `threads` threads of `kernel` that one SM of `device` holds at once, asked once per
// kernel and device: a grid-stride kernel sized for more than that runs a second, partial wave.
template <class Task>
index_t resident_blocks(void (*kernel)(Task), int threads, int device) {
  static std::atomic<int> cached[64];
  const bool cacheable = device >= 0 && device < 64;
  if (cacheable) {
    if (const int c = cached[device].load(std::memory_order_relaxed); c > 0) return c;
  }
  rt::set_device(device);
  int blocks = 0;
  rt::check_cuda(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&blocks, kernel, threads, 0),
                 "cudaOccupancyMaxActiveBlocksPerMultiprocessor", device);
  if (blocks < 1) blocks = 1;
  if (cacheable) cached[device].store(blocks, std::memory_order_relaxed);
  return blocks;
}

// `stream`: another of the device's streams (a cudaStream_t; null: the device's main stream).
// `direct`: never as a kept graph. For the kernels that copy across ranks, which wait for or
// signal other processes' kernels running at the same time: launched as graphs, a 16384^2 float
// re-shard between 2 H200 ranks measured 0.799x of one pair's bandwidth per device against 0.857x
// launched directly (session 47), and a kernel that runs for milliseconds gains nothing from a
// cheaper launch.
template <class Task>
void launch(void (*kernel)(Task), dim3 grid, unsigned block, const Task& t, int device, int shard, const char* name,
            void* stream = nullptr, bool direct = false) {
  static_assert(device_copyable<Task>::value,
                "TESSERA_EVALUATOR_NOT_TRIVIALLY_COPYABLE: kernel parameters are copied bytewise");
  static_assert(sizeof(Task) <= kernel_param_limit,
                "TESSERA_EXPRESSION_TOO_LARGE: the task exceeds CUDA's 32764-byte kernel parameter limit; split "
                "the expression with eval()");
  rt::set_device(device);
  void* const on = stream ? stream : rt::stream(device);
  const unsigned g[3] = {grid.x, grid.y, grid.z}, b[3] = {block, 1, 1};
  void* args[] = {const_cast<Task*>(&t)};
  const bool by_driver =
      (!direct &&
       rt::graph_launch(reinterpret_cast<const void*>(kernel), g, b, 0, args, &t, sizeof(Task), on, device, shard,
                        name)) ||
      (rt::driver_launch_enabled() &&
       rt::driver_launch(reinterpret_cast<const void*>(kernel), g, b, 0, args, on, device, shard, name));
  if (!by_driver) kernel<<<grid, block, 0, static_cast<cudaStream_t>(on)>>>(t);
  rt::check_launch(device, shard, name, by_driver);
}

}  // namespace tessera::detail::cuda
