// SPDX-License-Identifier: Apache-2.0
// Tessera: ahead-of-time user code on every shard. for_each_shard(f, args...) calls the functor
// f(i, args...) for every element index i of each shard of the first array argument, where an
// Array<T, N> or View argument arrives as tessera::Shard<T, N> (the shard on that device: pointer,
// extents, strides, global origin; the same description RawKernel kernels receive), a scalar as
// itself and per_shard(values) as values[shard]. f must be a __host__ __device__ functor (or an
// nvcc extended lambda): on GPUs it runs in a grid-stride kernel on the shard's stream, on host
// devices in a loop. It is a task like any other (ForEachTask, backend/execute.hpp), planned by
// the user kernels' rule (raw_kernel.hpp).
#pragma once
#include <tessera/assign.hpp>
#include <tessera/raw_kernel.hpp>

#include <backend/execute.hpp>

#include <string>
#include <tuple>
#include <vector>

namespace tessera {

/// for_each_shard(f, args...): f(i, shard args...) for every element index i of every shard of the
/// first array argument, on the shard's device (see the header comment).
template <class F, detail::kernel_arg... A>
void for_each_shard(F f, const A&... args) {
  static_assert(device_copyable_functor_v<F>,
                "TESSERA_FUNCTOR_NOT_TRIVIALLY_COPYABLE: for_each_shard's functor is copied to the devices bytewise");
  using Task = detail::ForEachTask<F, detail::shard_value_t<A>...>;
  const std::string name = "for_each_shard";
  const auto boxes = detail::kernel_boxes(name, args...);
  std::vector<detail::Job<Task>> jobs;
  for (const auto& b : boxes) {
    detail::rt::buffer_list uses;
    int position = 0;
    Task t{.f = f, .args = {{detail::shard_value_of(args, b, name, ++position, uses)}...}, .n = b.n};
    if (b.n > 0) jobs.push_back({.task = t, .device = b.device, .shard = b.index, .n = b.n, .uses = std::move(uses)});
  }
  detail::execute(jobs);
}

/// for_each_shard(kernel, config, args...): launches your own compiled __global__ function (from a
/// translation unit compiled by nvcc) once per GPU shard of the first array argument, with the
/// arguments RawKernel kernels get (tessera::Shard<T, N> for arrays). GPUs only.
template <class... P, detail::kernel_arg... A>
void for_each_shard(void (*kernel)(P...), const LaunchConfig& cfg, const A&... args) {
  static_assert(sizeof...(P) == sizeof...(A), "TESSERA_KERNEL_ARITY: the kernel takes another number of arguments");
  static_assert((std::is_same_v<std::remove_cvref_t<P>, detail::shard_value_t<A>> && ...),
                "TESSERA_KERNEL_ARGUMENT_TYPE: an Array<T, N> argument needs a tessera::Shard<T, N> parameter, a "
                "scalar or per_shard value one of its own type");
  detail::launch_per_shard(detail::kernel_kind::compiled, nullptr, reinterpret_cast<const void*>(kernel),
                           "a __global__ function", cfg, args...);
}

}  // namespace tessera
