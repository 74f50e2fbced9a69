// SPDX-License-Identifier: Apache-2.0
// Tessera CUDA executor: the marching kernel of stencils (issue 22). An assignment over a 2-d or
// 3-d box whose operands are shifted views of a few arrays reads each input element several times:
// once per view that covers it. The row kernels (executor.cuh) take each block's rows from L2
// again for every view; here each block walks its box along the last dimension, a chunk of
// `steps` rows (2-d) or planes (3-d) at a time, so that the neighbour a view reads one step ahead
// is the centre of the next step and the one behind was the centre of the step before: both come
// from L1. Threads run along dim 0 with one 16-byte vector of outputs each (LeafEval::row_vec), a
// 3-d block holding `rows` neighbouring rows of dim 1 (whose views one row up or down come from
// the same block's loads). The few elements before a row's first aligned output and after its last
// whole vector are loaded by the first 2K lanes of the row in the same batch as their vectors, so
// no lane waits for a second round trip.
// Included by executor.cuh only.
#pragma once
#include <backend/cuda/launch.cuh>
#include <tessera/evaluator.hpp>

#include <algorithm>
#include <cstdint>
#include <cstdlib>

namespace tessera::detail::cuda {

inline constexpr int march_threads = 512;
#ifndef TESSERA_MARCH_UNROLL
#define TESSERA_MARCH_UNROLL 2
#endif

// Whether an expression may march: 2-d or 3-d, three or more array operands (a stencil), operands
// and output of one element size of 2, 4 or 8 bytes (checked at compile time; contiguity along
// dim 0 per launch).
template <class Out, class E, int N>
inline constexpr bool march_vectors = [] {
  constexpr std::size_t s = sizeof(typename Out::value_type);
#ifdef TESSERA_NO_MARCH
  return false;
#endif
  return (N == 2 || N == 3) && leaf_count<E>::value >= 3 && min_leaf_size<E>::value == s &&
         max_leaf_size<E>::value == s && (s == 2 || s == 4 || s == 8);
}();

// Lanes along dim 0 per block: as few blocks along dim 0 as 128 lanes allow, each as narrow as
// covers the row's vectors in whole warps. The kernel recomputes it from gridDim.x.
template <class I>
__host__ __device__ inline I march_lanes(I inner, I k, I blocks_x) {
  const I vectors = (inner + k - 1) / k;
  const I lanes = ((vectors + blocks_x - 1) / blocks_x + 31) / 32 * 32;
  return lanes < 128 ? lanes : 128;
}

template <class I, class Out, class E, int N>
__global__ void __launch_bounds__(march_threads) march_kernel(const ShardTask<Out, E, N> t) {
  using V = typename E::value_type;
  constexpr int K = static_cast<int>(16 / sizeof(typename Out::value_type)), U = TESSERA_MARCH_UNROLL;
  const I inner = static_cast<I>(t.ext[0]);
  const I bx = march_lanes<I>(inner, K, static_cast<I>(gridDim.x));
  const I tx = static_cast<I>(threadIdx.x) % bx, ty = static_cast<I>(threadIdx.x) / bx;
  const I q = static_cast<I>(blockIdx.x) * bx + tx;
  const bool edge_lane = blockIdx.x == 0 && tx < 2 * K;
  I row = 0;  // dim 1 of a 3-d box
  if constexpr (N == 3) {
    row = static_cast<I>(blockIdx.y) * (static_cast<I>(blockDim.x) / bx) + ty;
    if (row >= static_cast<I>(t.ext[1])) return;
  }
  const I last = static_cast<I>(t.ext[N - 1]);
  const I steps = (last + static_cast<I>(gridDim.z) - 1) / static_cast<I>(gridDim.z);
  const I z0 = static_cast<I>(blockIdx.z) * steps, z1 = z0 + steps < last ? z0 + steps : last;
  for (I z = z0; z < z1; z += U) {
    I idx[U][N], edx[U][N];
    V v[U][K], ev[U];
    bool whole[U], edge[U];
#pragma unroll
    for (int u = 0; u < U; ++u) {
      whole[u] = edge[u] = false;
      if (z + u < z1) {
        idx[u][0] = 0;
        if constexpr (N == 3) idx[u][1] = row;
        idx[u][N - 1] = z + u;
        const I h = static_cast<I>(t.out.template row_head<K>(idx[u]));
#pragma unroll
        for (int k = 0; k < N; ++k) edx[u][k] = idx[u][k];
        if (edge_lane) {
          const I tail = h + (inner - h) / K * K, e = tx < K ? tx : tail + (tx - K);
          edge[u] = tx < K ? e < h : e < inner;
          edx[u][0] = e;
          if (edge[u]) ev[u] = t.e.at(edx[u]);
        }
        const I i = h + q * K;
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
      if (edge[u]) t.out.store_at(edx[u], ev[u]);
    }
  }
}

// Rows per block (3-d) and steps per block along the last dimension; TESSERA_MARCH_ROWS and
// TESSERA_MARCH_STEPS override them, TESSERA_MARCH=0 turns the kernel off (to measure beside the
// row kernels).
struct march_config {
  bool on = true;
  int rows = 2;
  int steps = 16;
};
inline const march_config& march_settings() {
  static const march_config c = [] {
    march_config m;
    if (const char* v = std::getenv("TESSERA_MARCH")) m.on = std::atoi(v) != 0;
    if (const char* v = std::getenv("TESSERA_MARCH_ROWS"); v && std::atoi(v) > 0) m.rows = std::atoi(v);
    if (const char* v = std::getenv("TESSERA_MARCH_STEPS"); v && std::atoi(v) > 0) m.steps = std::atoi(v);
    return m;
  }();
  return c;
}

// Launches the marching kernel when the shard suits it (the caller has checked for the cartesian
// path and a long first dimension); false leaves the task to the row kernels.
template <class Out, class E, int N>
bool try_march(const ShardTask<Out, E, N>& t, int device, int shard) {
  if constexpr (!march_vectors<Out, E, N>) {
    return false;
  } else {
    const march_config& c = march_settings();
    if (!c.on || t.wide || t.out.st[0] != 1 || !t.e.dim0_unit() || t.n == 0) return false;
    constexpr index_t K = 16 / sizeof(typename Out::value_type);
    const index_t vectors = (t.ext[0] + K - 1) / K;
    const index_t bx_count = (vectors + 127) / 128;
    const index_t lanes = march_lanes<index_t>(t.ext[0], K, bx_count);
    const index_t rows = N == 3 ? std::max<index_t>(1, std::min<index_t>(c.rows, march_threads / lanes)) : 1;
    const index_t grid_y = N == 3 ? (t.ext[1] + rows - 1) / rows : 1;
    const index_t last = t.ext[N - 1];
    index_t steps = c.steps;
    if ((last + steps - 1) / steps > 65535) steps = (last + 65534) / 65535;
    const index_t grid_z = (last + steps - 1) / steps;
    if (bx_count > 0x7fffffff || grid_y > 65535) return false;
    launch(&march_kernel<std::int32_t, Out, E, N>,
           dim3(static_cast<unsigned>(bx_count), static_cast<unsigned>(grid_y), static_cast<unsigned>(grid_z)),
           static_cast<unsigned>(lanes * rows), t, device, shard, "march_kernel");
    return true;
  }
}

}  // namespace tessera::detail::cuda
