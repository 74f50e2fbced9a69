// SPDX-License-Identifier: Apache-2.0
// Tessera CUDA reductions. A full reduction of a shard is one kernel launch: blocks fold a
// grid-stride share of the shard's evaluator (16-byte vector loads on the linear path, several in
// flight), store a partial each, and the last block to finish folds the partials into the result,
// which may be pinned host memory mapped into the device: the value reaches the host without a
// second launch or a copy (the launches, not the bytes, dominate small multi-GPU reductions).
// Reductions along dims run one kernel too (plus a fold of chunk partials when the output alone
// cannot fill the GPU): threads cooperate on one output when the contiguous dim is reduced, and
// one thread per output (K outputs, one 16-byte load per reduced element, when the layout allows)
// walks the reduced dims otherwise, so loads stay coalesced either way.
// Included only by translation units compiled with nvcc.
#pragma once
#include <backend/cuda/executor.cuh>
#include <tessera/reduce_task.hpp>

#include <cstdint>
#include <cstring>

namespace tessera::detail::cuda {

#ifndef TESSERA_REDUCE_BLOCK
#define TESSERA_REDUCE_BLOCK 256
#endif
// 16-byte loads in flight per thread in a full reduction. 2 rather than 4, measured alternately in
// one run on an H200 (bench_reduce, three rounds each, session 43): dot vs CUB's sum 1.00x -> 1.05x,
// sum vs CUB + copy 1.01x -> 1.02x; with the faster tail (block_fold, batched partial loads) the 30M
// sum to the host 39.4 -> 38.4 us. 8 gave dot the same but the 30M sum 40.1 us.
#ifndef TESSERA_REDUCE_UNROLL
#define TESSERA_REDUCE_UNROLL 2
#endif
// Blocks per SM of a full reduction's grid (0: as many as one SM holds at once, the occupancy
// API), and whether each block folds one contiguous share of the vectors (CUB's even share, 1)
// instead of a grid-stride interleave (0). Both alternatives were measured against the defaults in
// one run on 4 H100s (scripts/bench_ab.sh, bench_reduce): occupancy-sized with even shares, sum of
// 2^28 float to the host went from 1.004x to 0.952x of CUB + copy (0.997x -> 0.948x with one GPU
// visible), dot from 1.012x to 0.942x; so 8 per SM, interleaved, stay the defaults. 4 per SM,
// interleaved: faster for a bare one-kernel sum of 30M floats (bench/support/reduce_probe.cu,
// H200 33.2 -> 32.0 us, H100 44.2 -> 43.5 us) but not for this kernel (bench_reduce on an H200:
// sum vs CUB + copy 1.001x -> 0.936x, the 30M sum to host 39.1 -> 42.1 us; dot 0.990x -> 1.032x).
#ifndef TESSERA_REDUCE_BLOCKS_PER_SM
#define TESSERA_REDUCE_BLOCKS_PER_SM 8
#endif
#ifndef TESSERA_REDUCE_EVEN_SHARE
#define TESSERA_REDUCE_EVEN_SHARE 0
#endif
// Resident blocks per SM the dims kernel is compiled for (registers capped at 64 per thread):
// measured on an H200, sum(W .* x_row, dims(1)) of 10000 x 300000 float ran at 0.51x memcpy with
// 1 (78+ registers, 2-3 blocks), 0.82x with 4 and 0.56x with 6 (spills); sum(x, dims(0)) and
// dims(1) of 2^14 x 2^14 stayed at 1.04x and 0.96x.
#ifndef TESSERA_DIMS_MIN_BLOCKS
#define TESSERA_DIMS_MIN_BLOCKS 4
#endif
inline constexpr int reduce_threads = TESSERA_REDUCE_BLOCK;
inline constexpr int reduce_unroll = TESSERA_REDUCE_UNROLL;

// Folds v over the lanes [base, base + lanes) of the block through shared memory; every thread of
// the block must call it (it synchronizes). Lane 0 of each group gets the group's value.
template <class H, class Op>
__device__ H group_fold(H v, Op op, H* smem, int lanes) {
  const int t = static_cast<int>(threadIdx.x);
  smem[t] = v;
  for (int w = lanes / 2; w > 0; w /= 2) {
    __syncthreads();
    if (t % lanes < w) smem[t] = static_cast<H>(op(smem[t], smem[t + w]));
  }
  __syncthreads();
  const H r = smem[t - t % lanes];
  __syncthreads();  // smem is reused by the caller's next fold
  return r;
}

// Moves a value of any trivially copyable type down the warp by o lanes, a 32-bit word at a time
// (__shfl_down_sync takes only arithmetic types).
template <class T>
__device__ __forceinline__ T shuffle_down(const T& v, int o) {
  constexpr int words = static_cast<int>((sizeof(T) + sizeof(unsigned) - 1) / sizeof(unsigned));
  unsigned w[words] = {};
  memcpy(w, &v, sizeof(T));
#pragma unroll
  for (int k = 0; k < words; ++k) w[k] = __shfl_down_sync(0xffffffffu, w[k], o);
  T out = v;
  memcpy(&out, w, sizeof(T));
  return out;
}

// Folds v over the whole block, by warp shuffles and then one pass through shared memory (a value
// per warp): one barrier where group_fold takes one per halving. Only thread 0's result is the
// block's; every thread must call it, and the caller synchronizes before reusing smem. The order of
// the operands is kept (the lower lanes on the left), as in group_fold.
template <class H, class Op>
__device__ H block_fold(H v, Op op, H* smem) {
  constexpr int warps = reduce_threads / 32;
  static_assert(reduce_threads % 32 == 0 && warps <= 32);
#pragma unroll
  for (int o = 16; o > 0; o /= 2) v = static_cast<H>(op(v, shuffle_down(v, o)));
  const int t = static_cast<int>(threadIdx.x);
  if (t % 32 == 0) smem[t / 32] = v;
  __syncthreads();
  if (t < 32) {
    v = smem[t < warps ? t : 0];  // lanes past the warps never reach lane 0's result
#pragma unroll
    for (int o = warps / 2; o > 0; o /= 2) v = static_cast<H>(op(v, shuffle_down(v, o)));
  }
  return v;
}

// A load that bypasses L1 (volatile), for values of any trivially copyable type: arithmetic
// values directly, structs (argmax's value-index pairs) word by word.
template <class T>
__device__ __forceinline__ T load_volatile(const T* p) {
  if constexpr (std::is_arithmetic_v<T>) {
    return *static_cast<const volatile T*>(p);
  } else {
    static_assert(sizeof(T) % sizeof(unsigned) == 0 && alignof(T) >= alignof(unsigned));
    T out;
    const volatile unsigned* src = reinterpret_cast<const volatile unsigned*>(p);
    unsigned* dst = reinterpret_cast<unsigned*>(&out);
#pragma unroll
    for (unsigned k = 0; k < sizeof(T) / sizeof(unsigned); ++k) dst[k] = src[k];
    return out;
  }
}

// Shared memory for one value per thread of a block, as raw bytes: a __shared__ array may not have
// a constructor, and complex numbers (cuda::std::complex) have one.
#define TESSERA_SHARED_SLOTS(T, NAME)                                                 \
  __shared__ alignas(T) unsigned char NAME##_bytes[sizeof(T) * reduce_threads]; \
  T* const NAME = reinterpret_cast<T*>(NAME##_bytes)

template <class I, class Task>
__global__ void __launch_bounds__(reduce_threads) full_reduce_kernel(const Task t) {
  using Acc = typename Task::acc_type;
  constexpr int K = Task::K;
  TESSERA_SHARED_SLOTS(Acc, smem);
  __shared__ bool last;
  const I n = static_cast<I>(t.n);
  const I tid = static_cast<I>(blockIdx.x) * reduce_threads + static_cast<I>(threadIdx.x);
  const I threads = static_cast<I>(gridDim.x) * reduce_threads;
  Acc acc = t.init;
  if (t.mode == path::vector) {
    using V = typename decltype(t.e)::value_type;
    const I chunks = n / K;
    auto fold = [&](I, const V(&v)[K]) {
#pragma unroll
      for (int j = 0; j < K; ++j) acc = static_cast<Acc>(t.op(acc, static_cast<Acc>(t.map(v[j]))));
    };
#if TESSERA_REDUCE_EVEN_SHARE
    // In 64 bits: the shares may add up to more than the vectors.
    constexpr index_t tile = index_t(reduce_threads) * reduce_unroll;
    const index_t blocks = gridDim.x, all = chunks;
    const index_t share = ((all + blocks - 1) / blocks + tile - 1) / tile * tile;
    const index_t begin = index_t(blockIdx.x) * share;
    const index_t end = begin + share < all ? begin + share : all;
    if (begin < end) {
      for_each_vector<K, reduce_unroll>(t.e, static_cast<I>(end), static_cast<I>(begin) + static_cast<I>(threadIdx.x),
                                        static_cast<I>(reduce_threads), fold);
    }
#else
    for_each_vector<K, reduce_unroll>(t.e, chunks, tid, threads, fold);
#endif
    const I i = chunks * K + tid;  // the tail of fewer than K elements
    if (i < n) acc = static_cast<Acc>(t.op(acc, t.element(i)));
  } else {
    for (I i = tid; i < n; i += threads) acc = static_cast<Acc>(t.op(acc, t.element(i)));
  }
  acc = block_fold<Acc>(acc, t.op, smem);
  if (threadIdx.x == 0) {
    t.partials[blockIdx.x] = acc;
    // One acquire-release count: it publishes this block's partial (release) and, in the last
    // block, makes every earlier block's partial visible (acquire: the counts form one release
    // sequence), where two device-wide fences stood on the last block's path (the 30M-float sum
    // to the host on an H200, alternately: 38.3 -> 37.0 us).
    unsigned before = 0;
    asm volatile("atom.acq_rel.gpu.global.add.u32 %0, [%1], 1;" : "=r"(before) : "l"(t.counter) : "memory");
    last = before == gridDim.x - 1;
  }
  __syncthreads();  // orders the block's reads of the partials after thread 0's acquire
  if (!last) return;
  acc = t.init;
  // Written by other blocks: read past L1.
  // Several loads in flight before the first is folded: each is a round trip to L2.
  constexpr unsigned batch = 4;
  static_assert(batch == 4, "p's initializer below names each slot");
  for (unsigned b0 = threadIdx.x; b0 < gridDim.x; b0 += batch * reduce_threads) {
    Acc p[batch] = {t.init, t.init, t.init, t.init};
#pragma unroll
    for (unsigned u = 0; u < batch; ++u)
      if (b0 + u * reduce_threads < gridDim.x) p[u] = load_volatile(t.partials + b0 + u * reduce_threads);
#pragma unroll
    for (unsigned u = 0; u < batch; ++u)
      if (b0 + u * reduce_threads < gridDim.x) acc = static_cast<Acc>(t.op(acc, p[u]));
  }
  acc = block_fold<Acc>(acc, t.op, smem);
  if (threadIdx.x == 0) {
    *t.counter = 0;  // ready for the next launch on this device
    if (t.done == nullptr) {
      *t.result = acc;
    } else if constexpr (sizeof(Acc) <= rt::packed_result_bytes) {
      // The host spins on it (rt::armed_result): the value rides with the ticket in one 8-byte
      // store, which needs no system fence between the two (0.6 us sooner on an H200).
      unsigned bits = 0;
      memcpy(&bits, &acc, sizeof(Acc));
      *static_cast<volatile unsigned long long*>(static_cast<void*>(t.done)) =
          static_cast<unsigned long long>(bits) << 32 | t.ticket;
    } else {
      *t.result = acc;  // the result first
      __threadfence_system();
      *static_cast<volatile unsigned*>(t.done) = t.ticket;
    }
  }
}

// Queues the reduction of one shard on its device's stream: enough blocks to keep every SM busy,
// few enough that the last block folds their partials alone; the partials live in the device's
// scratch buffer (stream ordered: the next reduction on this device runs after this one).
template <class Acc, class H, class E, class Map, class Op, int N>
void run(const FullTask<Acc, H, E, Map, Op, N>& task, int device, int shard) {
  using Task = FullTask<Acc, H, E, Map, Op, N>;
  Task t = task;
  const index_t work = t.mode == path::vector ? t.n / Task::K / reduce_unroll : t.n;
  auto* kernel = t.wide ? &full_reduce_kernel<std::int64_t, Task> : &full_reduce_kernel<std::int32_t, Task>;
  const index_t per_sm =
      TESSERA_REDUCE_BLOCKS_PER_SM > 0 ? TESSERA_REDUCE_BLOCKS_PER_SM : resident_blocks(kernel, reduce_threads, device);
  const unsigned blocks = grid_blocks(work, reduce_threads, sm_count(device) * per_sm);
  t.partials = static_cast<Acc*>(rt::scratch(device, blocks * sizeof(Acc)));
  t.counter = rt::block_counter(device);
  launch(kernel, blocks, reduce_threads, t, device, shard, "full_reduce_kernel");
}

// -- along dims -----------------------------------------------------------------------------------

template <class I, class Task>
__global__ void __launch_bounds__(reduce_threads, TESSERA_DIMS_MIN_BLOCKS) dims_reduce_kernel(const Task t) {
  using H = typename Task::fold_type;
  using Acc = typename Task::acc_type;
  constexpr int K = Task::K;
  TESSERA_SHARED_SLOTS(Acc, smem);
  const I c = static_cast<I>(blockIdx.y);
  const I r0 = c * static_cast<I>(t.chunk);
  const I r1 = r0 + static_cast<I>(t.chunk) < static_cast<I>(t.n_red) ? r0 + static_cast<I>(t.chunk)
                                                                     : static_cast<I>(t.n_red);
  const I n_out = static_cast<I>(t.n_out);
  // Accumulates in the result type, like CUB: converting every float to double halves the
  // bandwidth (measured on an H100: 0.44x -> 0.75x memcpy for sum(x, dims(k)) of 2^14 x 2^14).
  // The vector paths index in 32 bits (choose_access makes sure that suffices): the 64-bit kernel
  // leaves them out, which keeps compile times down.
  constexpr bool vectors = sizeof(I) == 4;
  if constexpr (vectors) {
    if (t.access == dims_access::vec_kept) {  // K neighbouring outputs per thread
      const I threads = static_cast<I>(gridDim.x) * reduce_threads;
      for (I q = static_cast<I>(blockIdx.x) * reduce_threads + static_cast<I>(threadIdx.x); q < n_out / K; q += threads) {
        I j[Task::rank > 0 ? Task::rank : 1] = {};
        t.kept_index(q * K, j);
        Acc acc[K];
        t.template fold_columns<Acc>(j, r0, r1, acc);
#pragma unroll
        for (int k = 0; k < K; ++k) {
          if (t.chunks == 1) t.out[q * K + k] = acc[k];
          else t.partial[static_cast<index_t>(c) * t.n_out + q * K + k] = static_cast<H>(acc[k]);
        }
      }
      return;
    }
  }
  const int lanes = t.group;
  const int lane = static_cast<int>(threadIdx.x) % lanes;
  const I per_block = reduce_threads / lanes;
  // Every thread of a block runs the same number of iterations (group_fold synchronizes).
  for (I base = static_cast<I>(blockIdx.x) * per_block; base < n_out; base += static_cast<I>(gridDim.x) * per_block) {
    const I o = base + static_cast<I>(threadIdx.x) / lanes;
    Acc acc = static_cast<Acc>(t.init);
    I j[Task::rank > 0 ? Task::rank : 1] = {};
    if (o < n_out) {
      t.kept_index(o, j);
      if constexpr (vectors) {
        acc = t.access == dims_access::vec_reduced ? t.template fold_vec<Acc>(j, r0, r1, lane, lanes)
                                                   : t.template fold<Acc>(j, r0, r1, lane, lanes);
      } else {
        acc = t.template fold<Acc>(j, r0, r1, lane, lanes);
      }
    }
    if (lanes > 1) acc = group_fold<Acc>(acc, t.op, smem, lanes);
    if (o < n_out && lane == 0) {
      if (t.chunks == 1) t.out[o] = acc;
      else t.partial[static_cast<index_t>(c) * t.n_out + o] = static_cast<H>(acc);
    }
  }
}

// Folds the chunk partials of each output (partial[c * n_out + o], coalesced over o).
template <class Task>
__global__ void __launch_bounds__(reduce_threads) dims_chunks_kernel(const Task t) {
  using H = typename Task::fold_type;
  using Acc = typename Task::acc_type;
  for (index_t o = static_cast<index_t>(blockIdx.x) * reduce_threads + threadIdx.x; o < t.n_out;
       o += static_cast<index_t>(gridDim.x) * reduce_threads) {
    H acc = t.init;
    for (int c = 0; c < t.chunks; ++c) acc = static_cast<H>(t.op(acc, t.partial[static_cast<index_t>(c) * t.n_out + o]));
    t.out[o] = static_cast<Acc>(acc);
  }
}

// The task over merged dims, for the vector paths, which address the box linearly: dims of
// extent 1 dropped, and each run of neighbouring dims that are all kept or all reduced merged
// into one dim of their product extent (5 x 400 x 5000 reduced along dim 2 is 2000 outputs of
// 5000 elements each, and its leading kept extent 2000 takes 16-byte loads where 5 could not).
template <class Task>
Task merge_dims(const Task& t) {
  constexpr int N = Task::rank;
  index_t ext[N > 0 ? N : 1] = {};
  bool red[N > 0 ? N : 1] = {};
  for (int k = 0; k < t.nk; ++k) ext[t.kdim[k]] = t.kext[k];
  for (int k = 0; k < t.nr; ++k) ext[t.rdim[k]] = t.rext[k], red[t.rdim[k]] = true;
  Task m = t;
  m.nk = m.nr = 0;
  int v = -1;
  for (int d = 0; d < N; ++d) {
    if (ext[d] == 1) continue;
    const bool extend = v >= 0 && red[d] == (m.nr > 0 && m.rdim[m.nr - 1] == v);
    if (extend) {
      if (red[d]) m.rext[m.nr - 1] *= ext[d];
      else m.kext[m.nk - 1] *= ext[d];
      continue;
    }
    ++v;
    if (red[d]) m.rdim[m.nr] = v, m.rext[m.nr++] = ext[d];
    else m.kdim[m.nk] = v, m.kext[m.nk++] = ext[d];
  }
  if (m.nr == 0) m.rdim[0] = ++v, m.rext[m.nr++] = 1;  // every reduced dim had extent 1
  index_t vext[N > 0 ? N : 1] = {};
  for (int k = 0; k < m.nk; ++k) vext[m.kdim[k]] = m.kext[k];
  for (int k = 0; k < m.nr; ++k) vext[m.rdim[k]] = m.rext[k];
  for (int k = 0; k < N; ++k) m.cst[k] = k == 0 ? 1 : (k <= v ? m.cst[k - 1] * vext[k - 1] : 0);
  return m;
}

// Decides how a dims reduction reads its shard: 16-byte vector loads where the layout allows,
// else the N-d evaluator one element at a time.
template <class Task>
void choose_access(Task& t) {
  constexpr int K = Task::K;
  t.access = dims_access::scalar;
  // The vector paths index in 32 bits: vectors of the linear layout when every operand is
  // contiguous (dims merged first), else run cursors with 64-bit offsets (Evaluator::run) when
  // the operands are contiguous or broadcast along dim 0, as in sum(W .* x_row, dims(1)).
  const index_t volume = t.n_out * t.n_red;
  const bool small = t.n_red < narrow_index_limit && t.n_out < narrow_index_limit;
  const bool linear = t.mode == path::vector && volume / K < narrow_index_limit;
  if (K > 1 && small && (linear || t.dim0_vectors)) {
    Task m = linear ? merge_dims(t) : t;
    m.nd = !linear;
    const bool r0 = m.rdim[0] == 0;
    if ((r0 ? m.rext[0] : m.kext[0]) % K == 0) {
      m.access = r0 ? dims_access::vec_reduced : dims_access::vec_kept;
      t = m;
    }
  }
}

// Outputs one block folds, and the blocks along x (outputs) of the grid.
template <class Task>
index_t outputs_per_block(const Task& t) {
  return t.access == dims_access::vec_kept ? index_t(reduce_threads) * Task::K : index_t(reduce_threads / t.group);
}
template <class Task>
index_t output_blocks(const Task& t, int device) {
  const index_t per_block = outputs_per_block(t);
  const index_t bx = (t.n_out + per_block - 1) / per_block;
  const index_t cap = sm_count(device) * 64;
  return bx < cap ? bx : cap;
}

// Spreads a dims reduction over the GPU: lanes per output, then chunks of the reduced range so
// that about two waves of threads run, rounded to whole waves of `wave` resident blocks (2.05
// waves ran at 0.68x of 2 for sum(W .* x_row, dims(1)) of 10000 x 300000). Returns the partial
// bytes needed.
template <class Task>
std::size_t spread(Task& t, int device, index_t wave) {
  using H = typename Task::fold_type;
  constexpr int K = Task::K;
  const index_t target = sm_count(device) * 2048 * 2;
  const bool reduced0 = t.nr > 0 && t.rdim[0] == 0;
  const index_t e0 = reduced0 ? t.rext[0] : (t.nk > 0 && t.kdim[0] == 0 ? t.kext[0] : 1);
  // Lanes per output: only when the contiguous dim is reduced (else threads of a warp read
  // neighbouring outputs, which is what coalesces), counted in loads along the run.
  const index_t loads0 = t.access == dims_access::vec_reduced ? e0 / K : e0;
  t.group = 1;
  if (reduced0 && loads0 >= 32) t.group = loads0 >= 1024 ? reduce_threads : 32;
  const index_t threads = (t.access == dims_access::vec_kept ? t.n_out / K : t.n_out) * t.group;
  index_t chunks = 1;
  const index_t min_chunk = static_cast<index_t>(t.group) * 64;  // enough work per lane to pay the partial
  if (threads < target && t.n_red > min_chunk) {
    chunks = (target + threads - 1) / threads;
    const index_t bx = output_blocks(t, device);
    const index_t waves = (bx * chunks + wave / 2) / wave;
    if (waves >= 1) chunks = waves * wave / bx;
    const index_t most = (t.n_red + min_chunk - 1) / min_chunk;
    if (chunks > most) chunks = most;
    if (chunks > 65535) chunks = 65535;
    if (chunks < 1) chunks = 1;
  }
  t.chunk = chunks > 1 ? (t.n_red + chunks - 1) / chunks : (t.n_red > 0 ? t.n_red : 1);
  // Vector runs start at multiples of K: chunk boundaries too.
  if (t.access == dims_access::vec_reduced) t.chunk = (t.chunk + K - 1) / K * K;
  t.chunks = chunks > 1 ? static_cast<int>((t.n_red + t.chunk - 1) / t.chunk) : 1;
  return t.chunks > 1 ? static_cast<std::size_t>(t.chunks) * static_cast<std::size_t>(t.n_out) * sizeof(H) : 0;
}

// Blocks of Kernel resident on one SM (the occupancy API, asked once per kernel: the GPUs of one
// machine are of one kind).
template <auto Kernel>
index_t resident_blocks(int device) {
  static const int blocks = [device] {
    rt::set_device(device);
    int b = 0;
    if (cudaOccupancyMaxActiveBlocksPerMultiprocessor(&b, Kernel, reduce_threads, 0) != cudaSuccess) {
      (void)cudaGetLastError();
      b = 0;
    }
    return b > 0 ? b : 2048 / reduce_threads;
  }();
  return blocks;
}

// Queues one shard's dims reduction: plans it for this device, then one kernel, and a second
// that folds the chunk partials when the reduced range was split.
template <class Acc, class H, class E, class Map, class Op, int N>
void run(const DimsTask<Acc, H, E, Map, Op, N>& task, int device, int shard) {
  using Task = DimsTask<Acc, H, E, Map, Op, N>;
  if (task.n_out == 0) return;
  Task t = task;
  choose_access(t);
  const bool wide = t.wide && t.access == dims_access::scalar;
  constexpr auto k64 = &dims_reduce_kernel<std::int64_t, Task>;
  constexpr auto k32 = &dims_reduce_kernel<std::int32_t, Task>;
  const auto kernel = wide ? k64 : k32;
  const index_t per_sm = wide ? resident_blocks<k64>(device) : resident_blocks<k32>(device);
  const std::size_t bytes = spread(t, device, sm_count(device) * per_sm);
  if (bytes > 0) t.partial = static_cast<H*>(rt::scratch(device, bytes));
  const dim3 grid(static_cast<unsigned>(output_blocks(t, device)), static_cast<unsigned>(t.chunks));
  launch(kernel, grid, reduce_threads, t, device, shard, "dims_reduce_kernel");
  if (t.chunks > 1) {
    launch(&dims_chunks_kernel<Task>, grid_blocks(t.n_out, reduce_threads, sm_count(device) * 64), reduce_threads, t,
           device, shard, "dims_chunks_kernel");
  }
}

}  // namespace tessera::detail::cuda
