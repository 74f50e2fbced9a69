// SPDX-License-Identifier: Apache-2.0
// Tessera CUDA executor for elementwise work: one generic grid-stride kernel with three paths
// chosen per launch (vectorized linear, scalar linear, cartesian), sized here and launched through
// the launch helper. Included only by translation units compiled with nvcc.
#pragma once
#include <backend/cuda/launch.cuh>
#include <tessera/evaluator.hpp>
#include <backend/cuda/stencil_jit.cuh>

// The five instructions of the staged path only: <cuda/ptx> (every instruction) cost 0.6 s of
// every program's compile (bench/compile_time/include_only.cpp: 2.34 -> 2.97 s on 2 cores).
#include <cuda/__ptx/instructions/cp_async_bulk.h>
#include <cuda/__ptx/instructions/fence.h>
#include <cuda/__ptx/instructions/mbarrier_arrive.h>
#include <cuda/__ptx/instructions/mbarrier_init.h>
#include <cuda/__ptx/instructions/mbarrier_wait.h>

#include <cstdint>
#include <cstdlib>
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

// -- the staged vector path (Hopper and later) ---------------------------------------------------
// An expression over contiguous, 16-byte aligned operands (the vector path) with each operand's
// tile of the block copied into shared memory by one bulk copy (the TMA engine, cp.async.bulk)
// before the block's threads compute from it and store: fewer, larger memory requests than 16-byte
// loads per thread, which is how CUB's DeviceTransform reaches 1.037x-1.044x memcpy for c = a + b
// on an H200 where the per-thread vector loads give 1.02x-1.033x (docs/performance.md). One tile
// per block, bulk_threads threads each computing bulk_items<E> elements, tiles sized so that 8
// resident blocks per SM keep 48 KiB of loads in flight (CUB's figure for an H200); only for light
// expressions (below). Operands repeated in the expression (`a` in a * b + a) are copied once.
// TESSERA_ELEMENTWISE_BULK=0 keeps the per-thread loads.
inline constexpr int bulk_threads = 256;
template <class E>
struct leaf_bytes : std::integral_constant<std::size_t, 0> {};
template <class T, int N>
struct leaf_bytes<LeafEval<T, N>> : std::integral_constant<std::size_t, sizeof(T)> {};
template <class F, class... E>
struct leaf_bytes<NodeEval<F, E...>>
    : std::integral_constant<std::size_t, (std::size_t{0} + ... + leaf_bytes<E>::value)> {};
// Every leaf's staged bytes stay a multiple of 16 when the tile is cut at a multiple of K elements.
template <class E, int K>
struct leaves_stage_whole : std::true_type {};
template <class T, int N, int K>
struct leaves_stage_whole<LeafEval<T, N>, K> : std::bool_constant<(K * sizeof(T)) % 16 == 0> {};
template <class F, class... E, int K>
struct leaves_stage_whole<NodeEval<F, E...>, K>
    : std::bool_constant<(true && ... && leaves_stage_whole<E, K>::value)> {};
template <class E>
inline constexpr int bulk_items = [] {
  const std::size_t b = leaf_bytes<E>::value == 0 ? 1 : leaf_bytes<E>::value;
  const std::size_t k = (48 * 1024 / 8 / bulk_threads + b - 1) / b;
  return static_cast<int>(k < 1 ? 1 : k > 16 ? 16 : k);
}();
// Shared memory of one tile: each leaf's slice, 128-byte aligned.
template <class E>
inline constexpr std::size_t bulk_smem = [] {
  std::size_t total = 0;
  constexpr std::size_t tile = std::size_t{bulk_threads} * static_cast<std::size_t>(bulk_items<E>);
  // Upper bound: one slice per leaf (repeated leaves reuse theirs), each rounded up to 128 bytes.
  total = tile * leaf_bytes<E>::value + 128 * static_cast<std::size_t>(leaf_count<E>::value);
  return total;
}();
// Expressions of a few additions, subtractions and products: the staged path waits for the tile
// before computing, so it pays where the loads are everything (c = a + b: 1.037x memcpy against
// 1.033x on an H200) and loses where the arithmetic is not free (sin(a) * b + 2 * a: 0.80x against
// 1.04x with the per-thread loads, which overlap it with the loads of other chunks).
template <class F>
struct light_fn : std::false_type {};
template <>
struct light_fn<fn::plus> : std::true_type {};
template <>
struct light_fn<fn::minus> : std::true_type {};
template <>
struct light_fn<fn::multiplies> : std::true_type {};
template <>
struct light_fn<fn::negate> : std::true_type {};
template <class E>
struct light_expr : std::true_type {};
template <class F, class... E>
struct light_expr<NodeEval<F, E...>> : std::bool_constant<(light_fn<F>::value && ... && light_expr<E>::value)> {};
template <class E>
struct node_count : std::integral_constant<int, 0> {};
template <class F, class... E>
struct node_count<NodeEval<F, E...>> : std::integral_constant<int, (1 + ... + node_count<E>::value)> {};

template <class Out, class E>
inline constexpr bool bulk_path = [] {
  constexpr int K = vector_width<E, sizeof(typename Out::value_type)>;
#ifdef TESSERA_NO_ELEMENTWISE_BULK
  return false;
#endif
  return leaf_count<E>::value >= 1 && light_expr<E>::value && node_count<E>::value <= 4 &&
         leaves_stage_whole<E, K>::value && bulk_smem<E> <= 40 * 1024 &&
         (bulk_threads * bulk_items<E>) % K == 0;
}();
inline bool bulk_enabled() {
  static const bool on = [] {
    const char* v = std::getenv("TESSERA_ELEMENTWISE_BULK");
    return v == nullptr || *v == '\0' || std::atoi(v) != 0;
  }();
  return on;
}

// Calls f(leaf) for every array leaf of an evaluator (scalars and indices have none).
template <class X, class F>
__device__ __forceinline__ void for_each_leaf(X&, F&) {}
template <class T, int N, class F>
__device__ __forceinline__ void for_each_leaf(LeafEval<T, N>& l, F& f) {
  f(l);
}
template <class Fn, class... E, class F>
__device__ __forceinline__ void for_each_leaf(NodeEval<Fn, E...>& n, F& f);
template <class Fn, class... E, class F, std::size_t... S>
__device__ __forceinline__ void for_each_leaf_of(NodeEval<Fn, E...>& n, F& f, std::index_sequence<S...>) {
  (for_each_leaf(ev_get<S>(n.a), f), ...);
}
template <class Fn, class... E, class F>
__device__ __forceinline__ void for_each_leaf(NodeEval<Fn, E...>& n, F& f) {
  for_each_leaf_of(n, f, std::index_sequence_for<E...>{});
}

template <class I, class Out, class E, int N>
__global__ void __launch_bounds__(bulk_threads) bulk_kernel(const ShardTask<Out, E, N> t) {
  constexpr int K = ShardTask<Out, E, N>::K, T = bulk_threads * bulk_items<E>;
  const I n = static_cast<I>(t.n);
  const I start = static_cast<I>(blockIdx.x) * T;
  const int size = static_cast<int>(n - start < T ? n - start : T);
  const int whole = size / K * K;  // staged; the last tile's few remaining elements are read directly
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  __shared__ alignas(128) unsigned char smem[bulk_smem<E>];
  __shared__ std::uint64_t bar;
  E e = t.e;
  // Every thread points its copy of the leaves into the tile (p[start + i] = slice[i]); thread 0
  // also issues the copies. Leaves of one array share a slice.
  const void* seen[leaf_count<E>::value > 0 ? leaf_count<E>::value : 1];
  unsigned char* slice[leaf_count<E>::value > 0 ? leaf_count<E>::value : 1];
  int leaves = 0;
  std::size_t offset = 0;
  std::uint32_t bytes = 0;
  const bool issuer = threadIdx.x == 0;
  if (issuer) {
    ::cuda::ptx::mbarrier_init(&bar, 1);
    ::cuda::ptx::fence_proxy_async(::cuda::ptx::space_shared);
  }
  auto stage = [&](auto& leaf) {
    using L = std::remove_cvref_t<decltype(*leaf.p)>;
    unsigned char* to = nullptr;
    for (int j = 0; j < leaves; ++j)
      if (seen[j] == leaf.p) to = slice[j];
    if (to == nullptr) {
      to = smem + offset;
      const std::uint32_t b = static_cast<std::uint32_t>(whole) * sizeof(L);
      if (issuer && b > 0) {
        ::cuda::ptx::cp_async_bulk(::cuda::ptx::space_cluster, ::cuda::ptx::space_global, to, leaf.p + start, b, &bar);
        bytes += b;
      }
      seen[leaves] = leaf.p;
      slice[leaves++] = to;
      offset += (static_cast<std::size_t>(T) * sizeof(L) + 127) / 128 * 128;
    }
    leaf.p = reinterpret_cast<const L*>(to) - start;
  };
  for_each_leaf(e, stage);
  if (issuer) ::cuda::ptx::mbarrier_arrive_expect_tx(::cuda::ptx::sem_release, ::cuda::ptx::scope_cta,
                                                       ::cuda::ptx::space_shared, &bar, bytes);
  __syncthreads();
  while (!::cuda::ptx::mbarrier_try_wait_parity(&bar, 0)) {
  }
#pragma unroll 1
  for (int i = static_cast<int>(threadIdx.x); i < whole; i += bulk_threads)
    t.out.store_linear(start + i, e.linear(start + static_cast<I>(i)));
#else
  for (int i = static_cast<int>(threadIdx.x); i < whole; i += bulk_threads)
    t.out.store_linear(start + i, t.e.linear(start + static_cast<I>(i)));
#endif
  for (int i = whole + static_cast<int>(threadIdx.x); i < size; i += bulk_threads)
    t.out.store_linear(start + i, t.e.linear(start + static_cast<I>(i)));
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
// Dims 1.. of the N-d index of outer row o of a box (column-major, dim 0 left to the caller).
template <int N, class I>
__device__ __forceinline__ void outer_index(I o, const Extents<N>& ext, I* idx) {
#pragma unroll
  for (int k = 1; k < N; ++k) {
    const I e = static_cast<I>(ext[k]);
    if (k + 1 < N) {
      idx[k] = o % e;
      o /= e;
    } else {
      idx[k] = o;
    }
  }
}

// The cartesian path's kernel when the box's first dimension is long (a stencil's shifted views,
// a strided window): blocks of threads along dim 0, each block taking rows_unroll consecutive
// outer rows, so a thread decodes its index once per row instead of dividing per element, and
// loads all its rows before storing any.
template <class I, class Out, class E, int N>
__global__ void __launch_bounds__(rows_block<E>) rows_kernel(const ShardTask<Out, E, N> t) {
  using V = typename E::value_type;
  constexpr int U = rows_unroll, C = rows_cols<E>;
  const I B = static_cast<I>(blockDim.x);  // at most rows_block<E>, chosen per launch by run()
  const I inner = static_cast<I>(t.ext[0]);
  const I outer = static_cast<I>(t.n) / inner;
  const I i0 = static_cast<I>(blockIdx.x) * (B * C) + static_cast<I>(threadIdx.x);
  if (i0 >= inner) return;
  auto decode = [&](I o, I* idx) { outer_index<N>(o, t.ext, idx); };
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

#ifndef TESSERA_ROWS_VEC_UNROLL
#define TESSERA_ROWS_VEC_UNROLL 2
#endif
inline constexpr int rows_vec_block = 128;
// Whether an expression takes the row-vector kernel: a wide stencil (six or more array operands)
// whose operands and output share one element size of 2, 4 or 8 bytes; a shard also needs every
// operand contiguous or broadcast along dim 0 (checked per launch). Measured on an H200 (row
// vectors / the scalar rows kernel): 3-D 7-point diffusion 512^3 (9 operands) float 0.513x /
// 0.328x memcpy, double 0.606x / 0.459x; 2-D 5-point Jacobi 16384^2 (4 operands) 0.737x / 0.832x,
// which is why a narrow stencil keeps the scalar kernel. Rows per block: 2 (4 gave 0.453x and
// 0.709x, 8 0.312x and 0.582x: the registers of more rows cost more occupancy than they save).
template <class Out, class E>
inline constexpr bool row_vectors = [] {
  constexpr std::size_t s = sizeof(typename Out::value_type);
#ifdef TESSERA_NO_ROWS_VEC
  return false;
#endif
  return leaf_count<E>::value >= 6 && min_leaf_size<E>::value == s && max_leaf_size<E>::value == s &&
         (s == 2 || s == 4 || s == 8);
}();
// The rows kernel with K = 16 / element size outputs per thread and row, each operand read as
// 16-byte vectors (LeafEval::row_vec): a 5-point stencil's 20 scalar loads per 4 outputs become
// 6 vector loads. The few elements before the row's first aligned output and after its last
// whole vector are done one by one by the first threads of the row.
template <class I, class Out, class E, int N>
__global__ void __launch_bounds__(rows_vec_block) rows_vec_kernel(const ShardTask<Out, E, N> t) {
  using V = typename E::value_type;
  constexpr int U = TESSERA_ROWS_VEC_UNROLL, K = static_cast<int>(16 / sizeof(typename Out::value_type));
  const I inner = static_cast<I>(t.ext[0]);
  const I outer = static_cast<I>(t.n) / inner;
  const I q = static_cast<I>(blockIdx.x) * static_cast<I>(blockDim.x) + static_cast<I>(threadIdx.x);
  const bool edges = blockIdx.x == 0 && threadIdx.x < 2 * K;
  const I groups = (outer + U - 1) / U;
  for (I g = static_cast<I>(blockIdx.y); g < groups; g += static_cast<I>(gridDim.y)) {
    const I o = g * U, last = o + U < outer ? o + U : outer;
    I idx[U][N];
    V v[U][K];
    bool whole[U];
#pragma unroll
    for (int u = 0; u < U; ++u) {
      whole[u] = false;
      if (o + u < last) {
        outer_index<N>(o + u, t.ext, idx[u]);
        idx[u][0] = 0;
        const I i = static_cast<I>(t.out.template row_head<K>(idx[u])) + q * K;
        if (i + K <= inner) {
          whole[u] = true;
          idx[u][0] = i;
          t.e.template row_vec<K>(idx[u], v[u]);
        }
      }
    }
#pragma unroll
    for (int u = 0; u < U; ++u) {
      if (whole[u]) t.out.template store_row_vec<K>(idx[u], v[u]);
    }
    if (edges) {
      const I j = static_cast<I>(threadIdx.x);
      for (I r = o; r < last; ++r) {
        I x[N];
        outer_index<N>(r, t.ext, x);
        x[0] = 0;
        const I h = static_cast<I>(t.out.template row_head<K>(x));
        const I tail = h + (inner - h) / K * K;
        const I e = j < K ? j : tail + (j - K);
        if (j < K ? e < h : e < inner) {
          x[0] = e;
          t.out.store_at(x, t.e.at(x));
        }
      }
    }
  }
}

// The grid of the row kernels for a box of n elements in rows of `inner`: threads along dim 0,
// each taking `per_thread` elements of a row; as few blocks along dim 0 as `max_block` threads
// allow, each as narrow as covers the row in whole warps (a short row, 510 elements of a 512^3
// stencil's interior, then leaves 11% of the lanes idle instead of 34% with a fixed 128 x 3);
// `rows` outer rows per block along y, at most 65535 groups (the kernels loop past that).
struct row_grid {
  dim3 grid;
  int block = 0;
  bool fits = false;  // the blocks along dim 0 fit the grid's x
  row_grid(index_t inner, index_t n, index_t per_thread, index_t max_block, index_t rows) {
    const index_t x = (inner + max_block * per_thread - 1) / (max_block * per_thread);
    index_t b = ((inner + x * per_thread - 1) / (x * per_thread) + 31) / 32 * 32;
    if (b > max_block) b = max_block;
    index_t y = (n / inner + rows - 1) / rows;
    if (y > 65535) y = 65535;
    if (y < 1) y = 1;
    fits = x <= 0x7fffffff;
    grid = dim3(static_cast<unsigned>(fits ? x : 1), static_cast<unsigned>(y));
    block = static_cast<int>(b);
  }
};

template <class Out, class E, int N>
void run(const ShardTask<Out, E, N>& t, int device, int shard) {
  using Task = ShardTask<Out, E, N>;
  if constexpr (N >= 2 && jit_stencil_candidate<Out, E>) {
    if (t.mode == path::cartesian && t.n > 0 && t.ext[0] >= TESSERA_ROWS_MIN_INNER && t.out.st[0] == 1 &&
        jit_stencil_enabled() && run_jit_stencil(t, device, shard))
      return;
  }
  if constexpr (N >= 2 && row_vectors<Out, E>) {
    if (t.mode == path::cartesian && t.ext[0] >= TESSERA_ROWS_MIN_INNER && !t.wide && t.out.st[0] == 1 &&
        t.e.dim0_unit()) {
      constexpr index_t K = 16 / sizeof(typename Out::value_type);
      const row_grid g(t.ext[0], t.n, K, rows_vec_block, TESSERA_ROWS_VEC_UNROLL);
      launch(&rows_vec_kernel<std::int32_t, Out, E, N>, g.grid, g.block, t, device, shard, "rows_vec_kernel");
      return;
    }
  }
  if constexpr (N >= 2) {
    if (t.mode == path::cartesian && t.ext[0] >= TESSERA_ROWS_MIN_INNER) {
      const row_grid g(t.ext[0], t.n, rows_cols<E>, rows_block<E>, rows_unroll);
      if (g.fits) {
        launch(t.wide ? &rows_kernel<std::int64_t, Out, E, N> : &rows_kernel<std::int32_t, Out, E, N>, g.grid,
               g.block, t, device, shard, "rows_kernel");
        return;
      }
    }
  }
  const bool vec = t.mode == path::vector;
  if constexpr (bulk_path<Out, E>) {
    constexpr index_t tile = index_t{bulk_threads} * bulk_items<E>;
    if (vec && t.n >= tile * 64 && (t.n + tile - 1) / tile <= index_t(0x7fffffff) && bulk_enabled()) {
      launch(t.wide ? &bulk_kernel<std::int64_t, Out, E, N> : &bulk_kernel<std::int32_t, Out, E, N>,
             dim3(static_cast<unsigned>((t.n + tile - 1) / tile)), bulk_threads, t, device, shard, "bulk_kernel");
      return;
    }
  }
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
