// SPDX-License-Identifier: Apache-2.0
// Tessera: ahead-of-time user code on every shard. for_each_shard(f, args...) calls the functor
// f(i, args...) for every element index i of each shard of the first array argument, where an
// Array<T, N> or View argument arrives as tessera::Shard<T, N> (the shard on that device: pointer,
// extents, strides, global origin; the same description RawKernel kernels receive), a scalar as
// itself and per_shard(values) as values[shard]. f must be a __host__ __device__ functor (or an
// nvcc extended lambda): on GPUs it runs in a grid-stride kernel on the shard's stream, on host
// devices in a loop. It is a task like any other (backend/execute.hpp).
#pragma once
#include <tessera/assign.hpp>
#include <tessera/kernel.hpp>

#include <backend/execute.hpp>

#include <tuple>
#include <vector>

namespace tessera {
namespace detail {

// What a shard argument becomes inside the task.
template <class X>
struct shard_value {
  using V = std::remove_cvref_t<X>;
  using type = V;
};
template <class T, int N>
struct shard_value<Array<T, N>> {
  using type = Shard<T, N>;
};
template <class T, int N>
struct shard_value<View<T, N>> {
  using type = Shard<T, N>;
};
template <class T>
struct shard_value<PerShard<T>> {
  using type = T;
};
template <class X>
using shard_value_t = typename shard_value<std::remove_cvref_t<X>>::type;

template <class X>
shard_value_t<X> shard_value_of(const X& x, const ShardBox& b, const char* what, int position) {
  using V = std::remove_cvref_t<X>;
  if constexpr (is_array_like<V>::value) {
    return shard_arg(x.layout(), b, what, position);
  } else if constexpr (is_per_shard<V>::value) {
    if (static_cast<int>(x.values.size()) != b.count) {
      throw invalid_argument(std::string("tessera: ") + what + ", argument #" + std::to_string(position) +
                             ": per_shard(values) has " + std::to_string(x.values.size()) +
                             " values; expected one per shard, " + std::to_string(b.count));
    }
    return x.values[static_cast<std::size_t>(b.index)];
  } else {
    return x;
  }
}

}  // namespace detail

/// for_each_shard(f, args...): f(i, shard args...) for every element index i of every shard of the
/// first array argument, on the shard's device (see the header comment).
template <class F, detail::kernel_arg... A>
void for_each_shard(F f, const A&... args) {
  static_assert(device_copyable_functor_v<F>,
                "TESSERA_FUNCTOR_NOT_TRIVIALLY_COPYABLE: for_each_shard's functor is copied to the devices bytewise");
  using Task = detail::ForEachTask<F, detail::shard_value_t<A>...>;
  std::vector<detail::ShardBox> boxes;
  (detail::add_boxes(boxes, args), ...);
  if (boxes.empty()) {
    throw invalid_argument("tessera: for_each_shard was called without an array argument; expected at least one "
                           "Array or View, whose shards it runs on");
  }
  std::vector<detail::Job<Task>> jobs;
  for (const auto& b : boxes) {
    const index_t n = detail::box_volume(b);
    int position = 0;
    Task t{.f = f, .args = {{detail::shard_value_of(args, b, "for_each_shard", ++position)}...}, .n = n};
    if (n > 0) jobs.push_back({.task = t, .device = b.device, .shard = b.index, .n = n});
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
  detail::KernelState state;
  state.src.name = "a __global__ function";
  detail::launch_per_shard_fn(state, reinterpret_cast<const void*>(kernel), cfg, args...);
}

}  // namespace tessera
