// SPDX-License-Identifier: Apache-2.0
// Tessera CUDA reductions: one CUB DeviceReduce per shard over a transform iterator of the
// shard's evaluator, so sum(a * b) reads a and b once and materializes nothing.
#pragma once
#include <backend/runtime/runtime.hpp>
#include <tessera/evaluator.hpp>

#include <cub/device/device_reduce.cuh>
#include <cuda_runtime.h>
#include <thrust/iterator/counting_iterator.h>
#include <thrust/iterator/transform_iterator.h>

#include <cstdint>
#include <string>

namespace tessera::detail::cuda {

// Element i of the shard, mapped: the linear path reads leaves directly, the cartesian path
// rebuilds the N-d index.
template <class Acc, class E, int N, class Map, class I>
struct shard_element {
  E e;
  Map map;
  index_t ext[N > 0 ? N : 1];
  bool cartesian;
  __host__ __device__ Acc operator()(I i) const {
    if (!cartesian) return static_cast<Acc>(map(e.linear(i)));
    I idx[N > 0 ? N : 1];
    I r = i;
#pragma unroll
    for (int k = 0; k < N; ++k) {
      const I x = static_cast<I>(ext[k]);
      if (k + 1 < N) {
        idx[k] = r % x;
        r /= x;
      } else {
        idx[k] = r;
      }
    }
    return static_cast<Acc>(map(e.at(idx)));
  }
};

inline void check(cudaError_t err, const char* call, int device, int shard) {
  if (err != cudaSuccess) {
    (void)cudaGetLastError();
    throw backend_error(std::string("tessera: ") + call + " failed on device cuda:" +
                        std::to_string(rt::info(device).ordinal) + " (shard " + std::to_string(shard) +
                        "): " + cudaGetErrorString(err));
  }
}

// Queues the reduction of one shard on its device's stream; the result lands in *out (device
// scratch memory) once the stream reaches it.
template <class Acc, class E, int N, class Map, class Op>
void reduce(const E& e, path mode, index_t n, const index_t* ext, Map map, Op op, Acc init, Acc* out, void* temp,
            std::size_t temp_bytes, int device, int shard) {
  static_assert(device_copyable<E>::value, "TESSERA_EVALUATOR_NOT_TRIVIALLY_COPYABLE");
  rt::set_device(device);
  auto stream = static_cast<cudaStream_t>(rt::stream(device));
  auto run = [&](auto index_zero) {
    using I = decltype(index_zero);
    shard_element<Acc, E, N, Map, I> f{e, map, {}, mode == path::cartesian};
    for (int k = 0; k < N; ++k) f.ext[k] = ext[k];
    auto it = thrust::make_transform_iterator(thrust::counting_iterator<I>(0), f);
    check(cub::DeviceReduce::Reduce(temp, temp_bytes, it, out, static_cast<I>(n), op, init, stream),
          "cub::DeviceReduce::Reduce", device, shard);
  };
  if (n >= (index_t(1) << 31) - 1) run(std::int64_t(0));
  else run(std::int32_t(0));
  rt::check_launch(device, shard, "cub::DeviceReduce::Reduce");
}

// Temporary storage CUB needs for a shard of n elements.
template <class Acc, class E, int N, class Map, class Op>
std::size_t reduce_temp_bytes(const E& e, index_t n, Map map, Op op, Acc init, int device, int shard) {
  std::size_t bytes = 0;
  auto query = [&](auto index_zero) {
    using I = decltype(index_zero);
    shard_element<Acc, E, N, Map, I> f{e, map, {}, false};
    auto it = thrust::make_transform_iterator(thrust::counting_iterator<I>(0), f);
    check(cub::DeviceReduce::Reduce(nullptr, bytes, it, static_cast<Acc*>(nullptr), static_cast<I>(n), op, init,
                                    cudaStream_t{}),
          "cub::DeviceReduce::Reduce (temporary storage query)", device, shard);
  };
  if (n >= (index_t(1) << 31) - 1) query(std::int64_t(0));
  else query(std::int32_t(0));
  return bytes;
}

}  // namespace tessera::detail::cuda
