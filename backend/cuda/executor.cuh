// SPDX-License-Identifier: Apache-2.0
// Tessera CUDA executor for elementwise work: one generic grid-stride kernel with three paths
// chosen per launch (vectorized linear, scalar linear, cartesian), sized here and launched through
// the launch helper. Included only by translation units compiled with nvcc.
#pragma once
#include <backend/cuda/launch.cuh>
#include <tessera/evaluator.hpp>

#include <cstdint>
#include <type_traits>

namespace tessera::detail::cuda {

#ifndef TESSERA_ELEMENTWISE_BLOCK
#define TESSERA_ELEMENTWISE_BLOCK 256
#endif
#ifndef TESSERA_ELEMENTWISE_UNROLL
#define TESSERA_ELEMENTWISE_UNROLL 2
#endif
inline constexpr int block_threads = TESSERA_ELEMENTWISE_BLOCK;
// Vector chunks in flight per thread per iteration: loads of all chunks are issued before any
// store, so each thread keeps unroll * 16 bytes per operand in flight. Measured on an H200 at
// 2^28 floats (c = a + b, one pass): unroll 2 gives 1.033x memcpy, 4 gives 1.029x, 8 1.023x.
inline constexpr int unroll = TESSERA_ELEMENTWISE_UNROLL;

// The vector path's loop, shared by the elementwise and the full-reduction kernels: chunks of K
// elements in a grid-stride loop, U chunks per thread per iteration, every load of an iteration
// issued before its values are consumed by f(chunk, values).
template <int K, int U, class I, class E, class F>
__device__ __forceinline__ void for_each_vector(const E& e, I chunks, I tid, I threads, F&& f) {
  using V = typename E::value_type;
  for (I c0 = tid; c0 < chunks; c0 += threads * U) {
    V v[U][K];
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const I c = c0 + u * threads;
      if (c < chunks) e.template vec<K>(c, v[u]);
    }
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const I c = c0 + u * threads;
      if (c < chunks) f(c, v[u]);
    }
  }
}

template <class I, class Out, class E, int N>
__global__ void __launch_bounds__(block_threads) elementwise_kernel(const ShardTask<Out, E, N> t) {
  using V = typename E::value_type;
  constexpr int K = ShardTask<Out, E, N>::K;
  const I n = static_cast<I>(t.n);
  const I tid = static_cast<I>(blockIdx.x) * block_threads + static_cast<I>(threadIdx.x);
  const I threads = static_cast<I>(gridDim.x) * block_threads;
  if (t.mode == path::vector) {
    const I chunks = n / K;
    for_each_vector<K, unroll>(t.e, chunks, tid, threads,
                               [&](I c, const V(&v)[K]) { t.out.template store_vec<K>(c, v); });
    const I i = chunks * K + tid;  // the tail of fewer than K elements
    if (i < n) t.out.store_linear(i, t.e.linear(i));
  } else if (t.mode == path::linear) {
    for (I i = tid; i < n; i += threads) t.out.store_linear(i, t.e.linear(i));
  } else {
    for (I i = tid; i < n; i += threads) {
      I idx[N > 0 ? N : 1];
      box_index<N>(i, t.ext, idx);
      t.out.store_at(idx, t.e.at(idx));
    }
  }
}

#ifndef TESSERA_ROWS_MIN_INNER
#define TESSERA_ROWS_MIN_INNER 128
#endif
#ifndef TESSERA_ROWS_UNROLL
#define TESSERA_ROWS_UNROLL 4
#endif
// Rows whose loads a thread issues before storing any: scalar loads need several in flight to
// cover DRAM latency (the vector path gets the same from 16-byte loads).
inline constexpr int rows_unroll = TESSERA_ROWS_UNROLL;
// Threads per block and elements per thread along dim 0 (C, `rows_block` apart). Expressions of
// three or more array operands (a stencil) take C = 3 in blocks of 128: each thread then has 3 U
// elements of every operand in flight, where a one-operand copy is best with C = 1. Measured on
// an H200 (loads with the L2::128B hint, evaluator.hpp), 5-point Jacobi 16384^2 (4 operands):
// C = 1 x 256 threads 0.73x memcpy, C = 2 x 128 0.78x, C = 2 x 256 0.76x, C = 3 x 128 0.83x;
// a shifted copy: C = 1 0.93x, C = 3 x 128 0.88x. U = 3 or 6 instead of 4: 0.65x and 0.79x.
// TESSERA_ROWS_BLOCK / TESSERA_ROWS_COLS force one choice for every expression.
template <class E>
struct leaf_count : std::integral_constant<int, 0> {};
template <class T, int N>
struct leaf_count<LeafEval<T, N>> : std::integral_constant<int, 1> {};
template <class F, class... E>
struct leaf_count<NodeEval<F, E...>> : std::integral_constant<int, (0 + ... + leaf_count<E>::value)> {};
template <class E>
inline constexpr int rows_cols =
#ifdef TESSERA_ROWS_COLS
    TESSERA_ROWS_COLS;
#else
    leaf_count<E>::value >= 3 ? 3 : 1;
#endif
template <class E>
inline constexpr int rows_block =
#ifdef TESSERA_ROWS_BLOCK
    TESSERA_ROWS_BLOCK;
#else
    rows_cols<E> > 1 ? 128 : block_threads;
#endif
// The cartesian path's kernel when the box's first dimension is long (a stencil's shifted views,
// a strided window): blocks of threads along dim 0, each block taking rows_unroll consecutive
// outer rows, so a thread decodes its index once per row instead of dividing per element, and
// loads all its rows before storing any.
template <class I, class Out, class E, int N>
__global__ void __launch_bounds__(rows_block<E>) rows_kernel(const ShardTask<Out, E, N> t) {
  using V = typename E::value_type;
  constexpr int U = rows_unroll, C = rows_cols<E>, B = rows_block<E>;
  const I inner = static_cast<I>(t.ext[0]);
  const I outer = static_cast<I>(t.n) / inner;
  const I i0 = static_cast<I>(blockIdx.x) * (B * C) + static_cast<I>(threadIdx.x);
  if (i0 >= inner) return;
  auto decode = [&](I o, I* idx) {
#pragma unroll
    for (int k = 1; k < N; ++k) {
      const I e = static_cast<I>(t.ext[k]);
      if (k + 1 < N) {
        idx[k] = o % e;
        o /= e;
      } else {
        idx[k] = o;
      }
    }
  };
  // Each block takes U consecutive rows (a grid-stride loop only past 65535 groups): a
  // stencil's neighbouring rows then come from L1, and the grid stays large enough to fill the
  // GPU. Measured on an H200, plain CUDA 5-point Jacobi 16384^2: U = 4 without a grid cap 0.76x
  // memcpy; the same rows with the grid capped at 64 blocks per SM 0.55x; one row per block 0.54x.
  const I groups = (outer + U - 1) / U;
  for (I g = static_cast<I>(blockIdx.y); g < groups; g += static_cast<I>(gridDim.y)) {
    const I o = g * U, last = o + U < outer ? o + U : outer;
    I idx[U][N];
    V v[U][C];
#pragma unroll
    for (int u = 0; u < U; ++u) {
      if (o + u < last) {
        decode(o + u, idx[u]);
#pragma unroll
        for (int c = 0; c < C; ++c) {
          idx[u][0] = i0 + c * B;
          if (idx[u][0] < inner) v[u][c] = t.e.at(idx[u]);
        }
      }
    }
#pragma unroll
    for (int u = 0; u < U; ++u) {
      if (o + u < last) {
#pragma unroll
        for (int c = 0; c < C; ++c) {
          idx[u][0] = i0 + c * B;
          if (idx[u][0] < inner) t.out.store_at(idx[u], v[u][c]);
        }
      }
    }
  }
}

template <class Out, class E, int N>
void run(const ShardTask<Out, E, N>& t, int device, int shard) {
  using Task = ShardTask<Out, E, N>;
  if constexpr (N >= 2) {
    if (t.mode == path::cartesian && t.ext[0] >= TESSERA_ROWS_MIN_INNER) {
      constexpr index_t B = rows_block<E>, C = rows_cols<E>;
      const index_t x = (t.ext[0] + B * C - 1) / (B * C);
      const index_t outer = t.n / t.ext[0];
      index_t y = (outer + rows_unroll - 1) / rows_unroll;
      if (y > 65535) y = 65535;
      if (y < 1) y = 1;
      if (x <= 0x7fffffff) {
        const dim3 grid(static_cast<unsigned>(x), static_cast<unsigned>(y));
        launch(t.wide ? &rows_kernel<std::int64_t, Out, E, N> : &rows_kernel<std::int32_t, Out, E, N>, grid,
               static_cast<int>(B), t, device, shard, "rows_kernel");
        return;
      }
    }
  }
  const bool vec = t.mode == path::vector;
  const index_t work = vec ? (t.n / Task::K + unroll - 1) / unroll : t.n;
  // The vector path runs one pass (a grid-stride loop capped at 64 blocks per SM cost 3% of
  // bandwidth at 2^28 floats); the scalar paths keep the cap, which also bounds the grid size.
  const index_t cap = vec ? index_t(0x7fffffff) : sm_count(device) * 64;
  launch(t.wide ? &elementwise_kernel<std::int64_t, Out, E, N> : &elementwise_kernel<std::int32_t, Out, E, N>,
         grid_blocks(work, block_threads, cap), block_threads, t, device, shard, "elementwise_kernel");
}

template <class I, class F, class... A>
__global__ void __launch_bounds__(block_threads) for_each_kernel(const ForEachTask<F, A...> t) {
  const I n = static_cast<I>(t.n);
  const I threads = static_cast<I>(gridDim.x) * block_threads;
  for (I i = static_cast<I>(blockIdx.x) * block_threads + static_cast<I>(threadIdx.x); i < n; i += threads) t(i);
}

template <class F, class... A>
void run(const ForEachTask<F, A...>& t, int device, int shard) {
  const bool wide = t.n >= narrow_index_limit;
  launch(wide ? &for_each_kernel<std::int64_t, F, A...> : &for_each_kernel<std::int32_t, F, A...>,
         grid_blocks(t.n, block_threads, sm_count(device) * 32), block_threads, t, device, shard, "for_each_kernel");
}

}  // namespace tessera::detail::cuda
