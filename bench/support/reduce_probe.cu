// SPDX-License-Identifier: Apache-2.0
// What a one-kernel full reduction of n floats (default 30M, issue #22 item 5) reaches on this GPU,
// without Tessera: CUB's DeviceReduce::Sum (two kernels) against hand-written one-kernel variants
// of Tessera's full_reduce_kernel (backend/cuda/reduce.cuh: 16-byte loads, a grid-stride or
// even-share walk, the last block folds the partials), with float (as Tessera: like CUB) or double accumulators, one
// accumulator per thread or one per load in flight, and several grid sizes. Prints the GPU time
// per call (CUDA events around 200 back-to-back calls) and, for the one-kernel variants, the host
// time per call of a result the host waits for (the last block writes it into mapped memory and
// then a sequence number the host spins on, as Tessera's sum to host does). Also: variants that
// read through bulk copies (the TMA engine) into shared memory, and an empty kernel that only
// signals (the fixed cost). `reduce_probe N signal` instead compares three ways to signal the host
// (fence + store, a release store, the value packed with the number in one 8-byte store), and
// `reduce_probe N dyn` Tessera's grid-stride kernel against a deterministic dynamic schedule (chunks
// handed out by an atomic counter), each with a timeline of its blocks' starts and ends (the GPU's
// global timer): where a kernel's time goes between its first block's start and the host's result;
// `reduce_probe N graph` launches through the runtime and the driver against the same kernel as a
// one-node CUDA graph (fixed, or its parameters set before each launch).
// Built and run by `bash scripts/gpu_check.sh reduce_probe` (nvcc ... -lcuda), not by CMake.
#include <cub/device/device_reduce.cuh>
#include <cuda.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#define CHECK(x)                                                                        \
  do {                                                                                  \
    cudaError_t e_ = (x);                                                               \
    if (e_ != cudaSuccess) {                                                            \
      std::fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_)); \
      std::exit(1);                                                                     \
    }                                                                                   \
  } while (0)

constexpr int threads = 256;

__device__ __forceinline__ unsigned long long global_ns() {
  unsigned long long t;
  asm volatile("mov.u64 %0, %globaltimer;" : "=l"(t));
  return t;
}

// The block's sum of every thread's `v`, in thread 0 (warp shuffles, then the warps' sums).
template <class Acc>
__device__ Acc block_sum(Acc v, Acc* smem) {
  for (int o = 16; o > 0; o /= 2) v += __shfl_down_sync(0xffffffffu, v, o);
  if (threadIdx.x % 32 == 0) smem[threadIdx.x / 32] = v;
  __syncthreads();
  Acc r = 0;
  if (threadIdx.x == 0)
    for (int w = 0; w < threads / 32; ++w) r += smem[w];
  return r;
}

// A ticket that the kernel takes from a device counter (`graph` mode: a graph's parameters are
// fixed, so the number the host waits for cannot be one).
constexpr unsigned auto_ticket = 0xffffffffu;
__device__ unsigned g_seq;
__device__ __forceinline__ unsigned take_ticket(unsigned ticket) { return ticket == auto_ticket ? ++g_seq : ticket; }

// Every block's end: fold the block's sums into its partial; the last block to finish folds the
// partials into the result and signals the host when asked.
template <class Acc>
__device__ void finish_block(Acc s, Acc* partials, unsigned* counter, Acc* result, volatile unsigned* done,
                             unsigned ticket, unsigned long long* stamps = nullptr) {
  __shared__ Acc smem[threads / 32];
  __shared__ bool last;
  const Acc b = block_sum(s, smem);
  if (threadIdx.x == 0) {
    partials[blockIdx.x] = b;
    __threadfence();
    last = atomicAdd(counter, 1u) == gridDim.x - 1;
  }
  __syncthreads();
  if (!last) return;
  __threadfence();
  Acc a = 0;
  for (unsigned i = threadIdx.x; i < gridDim.x; i += threads) a += *(volatile Acc*)(partials + i);
  const Acc r = block_sum(a, smem);
  if (threadIdx.x == 0) {
    *result = r;
    *counter = 0;
    if (done != nullptr) {
      __threadfence_system();
      *done = take_ticket(ticket);
    }
    if (stamps != nullptr) stamps[2 * gridDim.x] = global_ns();  // the result's time
  }
}

// U float4 loads in flight per thread per step; SPLIT: one accumulator per load (no chain of
// dependent adds across the step's values); EVEN: each block walks one contiguous share (CUB's
// even share) instead of the grid-stride interleave.
template <class Acc, int U, bool SPLIT, bool EVEN>
__global__ void __launch_bounds__(threads) reduce_kernel(const float4* __restrict__ x, long long nvec, const float* tail,
                                                         int ntail, Acc* partials, unsigned* counter, Acc* result,
                                                         volatile unsigned* done, unsigned ticket,
                                                         unsigned long long* stamps) {
  if (stamps != nullptr && threadIdx.x == 0) stamps[2 * blockIdx.x] = global_ns();
  Acc acc[SPLIT ? U : 1] = {};
  long long begin = blockIdx.x * (long long)threads + threadIdx.x, end = nvec, stride = (long long)gridDim.x * threads;
  if (EVEN) {
    const long long tile = (long long)threads * U;
    const long long share = ((nvec + gridDim.x - 1) / gridDim.x + tile - 1) / tile * tile;
    const long long b0 = blockIdx.x * share;
    end = b0 + share < nvec ? b0 + share : nvec;
    begin = b0 + threadIdx.x;
    stride = threads;
  }
  for (long long c0 = begin; c0 < end; c0 += stride * U) {
    float4 v[U];
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const long long c = c0 + u * stride;
      v[u] = c < end ? x[c] : make_float4(0, 0, 0, 0);
    }
#pragma unroll
    for (int u = 0; u < U; ++u) {
      Acc& a = acc[SPLIT ? u : 0];
      a += Acc(v[u].x);
      a += Acc(v[u].y);
      a += Acc(v[u].z);
      a += Acc(v[u].w);
    }
  }
  Acc s = 0;
#pragma unroll
  for (int u = 0; u < (SPLIT ? U : 1); ++u) s += acc[u];
  if (blockIdx.x == 0 && threadIdx.x < ntail) s += Acc(tail[threadIdx.x]);
  if (stamps != nullptr && threadIdx.x == 0) stamps[2 * blockIdx.x + 1] = global_ns();
  finish_block<Acc>(s, partials, counter, result, done, ticket, stamps);
}

static double now() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }

struct setup {
  float* x;
  long long n;
  int sms;
  cudaStream_t s;
  cudaEvent_t e0, e1;
  void* scratch;
  unsigned* counter;
  double* result_host;  // mapped
  unsigned* done_host;  // mapped
  double expect;
};

// Times one kernel: GPU time per call over 200 back-to-back calls, then the host time per call of
// a result the host spins for (launch(result, done, ticket) queues one call).
template <class Acc, class Launch>
void measure(setup& st, int blocks, const char* name, Launch launch) {
  Acc* partials = static_cast<Acc*>(st.scratch);
  Acc* result_dev = partials + blocks;
  (void)result_dev;
  for (int i = 0; i < 20; ++i) launch(result_dev, nullptr, 0u);
  CHECK(cudaGetLastError());
  CHECK(cudaStreamSynchronize(st.s));
  const int reps = 200;
  CHECK(cudaEventRecord(st.e0, st.s));
  for (int i = 0; i < reps; ++i) launch(result_dev, nullptr, 0u);
  CHECK(cudaEventRecord(st.e1, st.s));
  CHECK(cudaEventSynchronize(st.e1));
  float ms = 0;
  CHECK(cudaEventElapsedTime(&ms, st.e0, st.e1));
  // host-result path: launch, spin on the mapped sequence number, read the mapped result
  Acc* result_mapped = nullptr;
  CHECK(cudaHostGetDevicePointer(reinterpret_cast<void**>(&result_mapped), st.result_host, 0));
  unsigned* done_mapped = nullptr;
  CHECK(cudaHostGetDevicePointer(reinterpret_cast<void**>(&done_mapped), st.done_host, 0));
  static unsigned ticket = 0;
  const int calls = 1000;
  std::vector<double> t(calls);
  double value = 0;
  for (int i = 0; i < calls; ++i) {
    const unsigned want = ++ticket;
    const double a = now();
    launch(result_mapped, done_mapped, want);
    while (*(volatile unsigned*)st.done_host != want) {
    }
    value = double(*(volatile Acc*)st.result_host);
    t[i] = now() - a;
  }
  CHECK(cudaGetLastError());
  std::sort(t.begin(), t.end());
  const double gb = double(st.n) * 4 / 1e9;
  const double us = ms * 1e3 / reps;
  std::printf("%-44s blocks %5d (%2d/SM)  GPU %7.2f us  %6.0f GB/s   host result median %7.2f us  best %7.2f  rel err %.1e\n",
              name, blocks, blocks / st.sms, us, gb / (us * 1e-6), t[calls / 2] * 1e6, t[0] * 1e6,
              st.expect == 0 ? 0.0 : std::abs(value - st.expect) / std::abs(st.expect));
}

template <class Acc, int U, bool SPLIT, bool EVEN>
void variant(setup& st, int per_sm, const char* name) {
  auto* k = &reduce_kernel<Acc, U, SPLIT, EVEN>;
  int resident = 0;
  CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&resident, k, threads, 0));
  const int blocks = st.sms * (per_sm > 0 ? per_sm : resident);
  const long long nvec = st.n / 4;
  const int ntail = int(st.n - nvec * 4);
  const float* tail = st.x + nvec * 4;
  Acc* partials = static_cast<Acc*>(st.scratch);
  measure<Acc>(st, blocks, name, [&](Acc* result, unsigned* done, unsigned ticket) {
    k<<<blocks, threads, 0, st.s>>>(reinterpret_cast<const float4*>(st.x), nvec, tail, ntail, partials, st.counter, result,
                                     done, ticket, nullptr);
  });
}

// -- a deterministic dynamic schedule --------------------------------------------------------------
// Chunks of CH float4 handed out by an atomic counter (each block starts at chunk blockIdx.x and
// fetches its next while it loads), so fast SMs take more and all finish together. Each chunk's sum
// lands in its own slot in a fixed order, so the result does not depend on which block took which
// chunk: warp 0 of the block that completes a group of G chunks folds the group, and the one that
// completes the last group folds the groups and signals.
struct dyn_scratch {
  float* cpart;          // one per chunk
  float* gpart;          // one per group
  unsigned* gcount;      // chunks done per group (zero between calls)
  unsigned* next;        // chunks handed out beyond the first gridDim.x (zero between calls)
  unsigned* groups_done; // (zero between calls)
};

__device__ __forceinline__ unsigned add_acq_rel(unsigned* p, unsigned v) {
  unsigned old;
  asm volatile("atom.acq_rel.gpu.global.add.u32 %0, [%1], %2;" : "=r"(old) : "l"(p), "r"(v) : "memory");
  return old;
}

// The warp's sum of p[0 .. n), lane k taking k, k + 32, ... (a fixed order), read past L1.
__device__ __forceinline__ float warp_sum(const float* p, unsigned n) {
  const unsigned lane = threadIdx.x % 32;
  float r = 0;
#pragma unroll 8
  for (unsigned k = lane; k < n; k += 32) r += __ldcg(p + k);
  for (int o = 16; o > 0; o /= 2) r += __shfl_down_sync(0xffffffffu, r, o);
  return r;
}

template <int CH, int G>
__global__ void __launch_bounds__(threads) dyn_kernel(const float4* __restrict__ x, long long nvec, const float* tail,
                                                      int ntail, dyn_scratch d, float* result, volatile unsigned* done,
                                                      unsigned ticket, unsigned long long* stamps) {
  constexpr int U = CH / threads;
  static_assert(U * threads == CH, "CH: a multiple of the block");
  __shared__ float wsum[2][threads / 32];
  __shared__ long long nxt[2];
  if (stamps != nullptr && threadIdx.x == 0) stamps[2 * blockIdx.x] = global_ns();
  const long long nchunks = (nvec + CH - 1) / CH;
  const unsigned ngroups = unsigned((nchunks + G - 1) / G);
  const unsigned lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  int parity = 0;
  for (long long c = blockIdx.x; c < nchunks; parity ^= 1) {
    unsigned ticket_next = 0;
    if (threadIdx.x == 0) ticket_next = atomicAdd(d.next, 1u);
    float4 v[U];
    const long long base = c * CH + threadIdx.x;
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const long long i = base + u * threads;
      v[u] = i < nvec ? x[i] : make_float4(0, 0, 0, 0);
    }
    float a = 0;
#pragma unroll
    for (int u = 0; u < U; ++u) {
      a += v[u].x;
      a += v[u].y;
      a += v[u].z;
      a += v[u].w;
    }
    if (c == 0 && threadIdx.x < ntail) a += tail[threadIdx.x];
    for (int o = 16; o > 0; o /= 2) a += __shfl_down_sync(0xffffffffu, a, o);
    if (lane == 0) wsum[parity][warp] = a;
    if (threadIdx.x == 0) nxt[parity] = static_cast<long long>(ticket_next) + gridDim.x;
    __syncthreads();
    if (warp == 0) {
      float s = lane < threads / 32 ? wsum[parity][lane] : 0.0f;
      for (int o = 4; o > 0; o /= 2) s += __shfl_down_sync(0xffffffffu, s, o);
      const unsigned g = unsigned(c / G);
      const unsigned members = unsigned(nchunks - (long long)g * G < G ? nchunks - (long long)g * G : G);
      unsigned last = 0;
      if (lane == 0) {
        d.cpart[c] = s;
        last = add_acq_rel(d.gcount + g, 1u) == members - 1;
      }
      last = __shfl_sync(0xffffffffu, last, 0);
      __syncwarp();
      if (last) {
        const float gs = warp_sum(d.cpart + (long long)g * G, members);
        unsigned all = 0;
        if (lane == 0) {
          d.gpart[g] = gs;
          d.gcount[g] = 0;
          all = add_acq_rel(d.groups_done, 1u) == ngroups - 1;
        }
        all = __shfl_sync(0xffffffffu, all, 0);
        __syncwarp();
        if (all) {
          const float r = warp_sum(d.gpart, ngroups);
          if (lane == 0) {
            *d.next = 0;
            *d.groups_done = 0;
            *result = r;  // signalled as the other kernels here do (measure() spins on `done`)
            if (done != nullptr) {
              __threadfence_system();
              *done = ticket;
            }
            if (stamps != nullptr) stamps[2 * gridDim.x] = global_ns();
          }
        }
      }
    }
    c = nxt[parity];
  }
  if (stamps != nullptr && threadIdx.x == 0) stamps[2 * blockIdx.x + 1] = global_ns();
}

// Where a kernel's time goes: one more call with each block's start and end stamped (global timer),
// as percentiles from the first start.
template <class Launch>
void timeline(setup& st, int blocks, const char* name, Launch launch) {
  unsigned long long* stamps = nullptr;
  CHECK(cudaMalloc(&stamps, sizeof(unsigned long long) * (2 * blocks + 1)));
  std::vector<unsigned long long> h(2 * blocks + 1);
  for (int rep = 0; rep < 3; ++rep) {
    launch(stamps);
    CHECK(cudaStreamSynchronize(st.s));
    CHECK(cudaMemcpy(h.data(), stamps, h.size() * sizeof(h[0]), cudaMemcpyDeviceToHost));
    std::vector<double> s(blocks), e(blocks);
    unsigned long long t0 = ~0ull;
    for (int b = 0; b < blocks; ++b) t0 = std::min(t0, h[2 * b]);
    for (int b = 0; b < blocks; ++b) {
      s[b] = (h[2 * b] - t0) * 1e-3;
      e[b] = (h[2 * b + 1] - t0) * 1e-3;
    }
    std::sort(s.begin(), s.end());
    std::sort(e.begin(), e.end());
    auto q = [&](std::vector<double>& v, double f) {
      return v[std::min<std::size_t>(v.size() - 1, std::size_t(f * v.size()))];
    };
    std::printf("  timeline %-32s us from first start: starts 50%% %5.2f 100%% %5.2f | ends 0%% %5.2f 10%% %5.2f "
                "50%% %5.2f 90%% %5.2f 99%% %5.2f 100%% %5.2f | result %5.2f\n",
                name, q(s, 0.5), s.back(), e[0], q(e, 0.1), q(e, 0.5), q(e, 0.9), q(e, 0.99), e.back(),
                (h[2 * blocks] - t0) * 1e-3);
  }
  CHECK(cudaFree(stamps));
}

template <int CH, int G>
void dyn_variant(setup& st, int per_sm, const char* name) {
  auto* k = &dyn_kernel<CH, G>;
  const int blocks = st.sms * per_sm;
  const long long nvec = st.n / 4;
  const int ntail = int(st.n - nvec * 4);
  const float* tail = st.x + nvec * 4;
  const long long nchunks = (nvec + CH - 1) / CH;
  const long long ngroups = (nchunks + G - 1) / G;
  static char* zeroed = nullptr;  // counters, zero between calls
  if (zeroed == nullptr) {
    CHECK(cudaMalloc(&zeroed, 1 << 20));
    CHECK(cudaMemset(zeroed, 0, 1 << 20));
  }
  dyn_scratch d{};
  d.cpart = static_cast<float*>(st.scratch);
  d.gpart = d.cpart + nchunks;
  d.next = reinterpret_cast<unsigned*>(zeroed);
  d.groups_done = d.next + 1;
  d.gcount = d.next + 32;
  if ((nchunks + ngroups) * 4 > (1 << 20) || (ngroups + 32) * 4 > (1 << 20)) {
    std::printf("%-44s skipped: too many chunks\n", name);
    return;
  }
  measure<float>(st, blocks, name, [&](float* result, unsigned* done, unsigned ticket) {
    k<<<blocks, threads, 0, st.s>>>(reinterpret_cast<const float4*>(st.x), nvec, tail, ntail, d, result, done, ticket,
                                     nullptr);
  });
  float* result_dev = static_cast<float*>(st.scratch) + (1 << 18) - 1;
  // the same bits every call, whichever block took which chunk
  float first = 0;
  int differ = 0;
  for (int i = 0; i < 50; ++i) {
    k<<<blocks, threads, 0, st.s>>>(reinterpret_cast<const float4*>(st.x), nvec, tail, ntail, d, result_dev, nullptr,
                                     0u, nullptr);
    float r = 0;
    CHECK(cudaMemcpyAsync(&r, result_dev, sizeof r, cudaMemcpyDeviceToHost, st.s));
    CHECK(cudaStreamSynchronize(st.s));
    if (i == 0) first = r;
    differ += r != first;
  }
  std::printf("  %s: %d of 50 calls differ from the first (%.9g)\n", name, differ, first);
  timeline(st, blocks, name, [&](unsigned long long* stamps) {
    k<<<blocks, threads, 0, st.s>>>(reinterpret_cast<const float4*>(st.x), nvec, tail, ntail, d, result_dev, nullptr,
                                     0u, stamps);
  });
}

// The grid-stride kernel Tessera uses (2 loads per thread, 8 blocks per SM), timed and stamped.
void stride_timeline(setup& st) {
  variant<float, 2, false, false>(st, 8, "float U2 chain stride (Tessera since s43)");
  const int blocks = st.sms * 8;
  const long long nvec = st.n / 4;
  float* partials = static_cast<float*>(st.scratch);
  timeline(st, blocks, "float U2 chain stride", [&](unsigned long long* stamps) {
    reduce_kernel<float, 2, false, false><<<blocks, threads, 0, st.s>>>(
        reinterpret_cast<const float4*>(st.x), nvec, st.x + nvec * 4, int(st.n - nvec * 4), partials, st.counter,
        partials + blocks, nullptr, 0u, stamps);
  });
}

// -- bulk copies (Hopper's TMA engine, cp.async.bulk) into shared memory, threads fold from there --
// One thread per block keeps STAGES chunks of CHUNK bytes in flight: the bytes in flight no longer
// depend on the threads' loads and registers.
__device__ __forceinline__ unsigned smem_addr(const void* p) {
  return static_cast<unsigned>(__cvta_generic_to_shared(p));
}
__device__ __forceinline__ void bar_wait(unsigned bar, unsigned phase) {
  unsigned ok = 0;
  do {
    asm volatile("{ .reg .pred p; mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2; selp.u32 %0, 1, 0, p; }"
                 : "=r"(ok) : "r"(bar), "r"(phase) : "memory");
  } while (!ok);
}

template <int STAGES, int CHUNK>
__global__ void __launch_bounds__(threads) bulk_kernel(const float4* __restrict__ x, long long nvec, const float* tail,
                                                       int ntail, float* partials, unsigned* counter, float* result,
                                                       volatile unsigned* done, unsigned ticket) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  extern __shared__ __align__(128) unsigned char buf[];
  __shared__ __align__(8) unsigned long long bar[STAGES];
  constexpr long long per_chunk = CHUNK / 16;
  const long long nchunks = (nvec + per_chunk - 1) / per_chunk;
  const long long share = (nchunks + gridDim.x - 1) / gridDim.x;
  const long long c0 = blockIdx.x * share;
  const long long c1 = c0 + share < nchunks ? c0 + share : nchunks;
  if (threadIdx.x == 0) {
    for (int s = 0; s < STAGES; ++s) asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" ::"r"(smem_addr(&bar[s])));
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
  }
  __syncthreads();
  auto issue = [&](long long c, int s) {
    const long long v0 = c * per_chunk;
    const unsigned bytes = unsigned((nvec - v0 < per_chunk ? nvec - v0 : per_chunk) * 16);
    const unsigned b = smem_addr(&bar[s]);
    asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(b), "r"(bytes) : "memory");
    asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];"
                 ::"r"(smem_addr(buf + s * CHUNK)), "l"(x + v0), "r"(bytes), "r"(b) : "memory");
  };
  if (threadIdx.x == 0)
    for (int s = 0; s < STAGES && c0 + s < c1; ++s) issue(c0 + s, s);
  float acc0 = 0, acc1 = 0;
  long long k = 0;
  for (long long c = c0; c < c1; ++c, ++k) {
    const int s = int(k % STAGES);
    bar_wait(smem_addr(&bar[s]), unsigned(k / STAGES) & 1u);
    const long long v0 = c * per_chunk;
    const int nv = int(nvec - v0 < per_chunk ? nvec - v0 : per_chunk);
    const float4* p = reinterpret_cast<const float4*>(buf + s * CHUNK);
    for (int i = threadIdx.x; i < nv; i += threads) {
      const float4 v = p[i];
      acc0 += v.x + v.y;
      acc1 += v.z + v.w;
    }
    __syncthreads();
    if (threadIdx.x == 0 && c + STAGES < c1) issue(c + STAGES, s);
  }
  float sum = acc0 + acc1;
  if (blockIdx.x == 0 && threadIdx.x < ntail) sum += tail[threadIdx.x];
  finish_block<float>(sum, partials, counter, result, done, ticket);
#endif
}

template <int STAGES, int CHUNK>
void bulk_variant(setup& st, int per_sm, const char* name) {
  auto* k = &bulk_kernel<STAGES, CHUNK>;
  const int bytes = STAGES * CHUNK;
  CHECK(cudaFuncSetAttribute(k, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes));
  int resident = 0;
  CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&resident, k, threads, bytes));
  if (resident < per_sm) {
    std::printf("%-44s skipped: %d blocks per SM fit, %d asked\n", name, resident, per_sm);
    return;
  }
  const int blocks = st.sms * per_sm;
  const long long nvec = st.n / 4;
  const int ntail = int(st.n - nvec * 4);
  const float* tail = st.x + nvec * 4;
  float* partials = static_cast<float*>(st.scratch);
  measure<float>(st, blocks, name, [&](float* result, unsigned* done, unsigned ticket) {
    k<<<blocks, threads, bytes, st.s>>>(reinterpret_cast<const float4*>(st.x), nvec, tail, ntail, partials, st.counter,
                                        result, done, ticket);
  });
}

// The fixed cost: an empty kernel of one block that only signals. HOW: 0 the result, a system
// fence, then the number (as Tessera); 1 the number stored with release semantics at system scope
// (no separate fence); 2 result and number packed into one 8-byte store, no fence (the host reads
// both in one load).
template <int HOW>
__global__ void signal_kernel(float* result, volatile unsigned* done, unsigned ticket) {
  if (HOW == 2) {
    if (done != nullptr) {
      const unsigned long long v = (static_cast<unsigned long long>(ticket) << 32) | __float_as_uint(0.0f);
      *reinterpret_cast<volatile unsigned long long*>(result) = v;
    } else {
      *result = 0;
    }
    return;
  }
  *result = 0;
  if (done != nullptr) {
    if (HOW == 0) {
      __threadfence_system();
      *done = take_ticket(ticket);
    } else {
      asm volatile("st.release.sys.global.u32 [%0], %1;" ::"l"(done), "r"(ticket) : "memory");
    }
  }
}

// Host time per call of each signal, alternately, three rounds.
void signals(setup& st) {
  float* result_mapped = nullptr;
  CHECK(cudaHostGetDevicePointer(reinterpret_cast<void**>(&result_mapped), st.result_host, 0));
  unsigned* done_mapped = nullptr;
  CHECK(cudaHostGetDevicePointer(reinterpret_cast<void**>(&done_mapped), st.done_host, 0));
  unsigned ticket = 1000000;
  for (int round = 0; round < 3; ++round) {
    for (int how = 0; how < 3; ++how) {
      std::vector<double> t(2000);
      for (auto& ti : t) {
        const unsigned want = ++ticket;
        const double a = now();
        if (how == 0) signal_kernel<0><<<1, 32, 0, st.s>>>(result_mapped, done_mapped, want);
        if (how == 1) signal_kernel<1><<<1, 32, 0, st.s>>>(result_mapped, done_mapped, want);
        if (how == 2) signal_kernel<2><<<1, 32, 0, st.s>>>(result_mapped, done_mapped, want);
        if (how < 2) {
          while (*(volatile unsigned*)st.done_host != want) {
          }
        } else {
          while ((*(volatile unsigned long long*)st.result_host >> 32) != want) {
          }
        }
        ti = now() - a;
      }
      CHECK(cudaGetLastError());
      std::sort(t.begin(), t.end());
      std::printf("signal %d (%s): host median %6.2f us, best %6.2f, 90%% %6.2f\n", how,
                  how == 0 ? "fence + store" : how == 1 ? "st.release.sys" : "packed 8-byte store",
                  t[t.size() / 2] * 1e6, t[0] * 1e6, t[t.size() * 9 / 10] * 1e6);
    }
  }
}

// Host time per result of one kernel launched four ways, alternately, three rounds: <<<>>>
// (cudaLaunchKernel), through the driver (cuLaunchKernel, as Tessera launches), as a one-node CUDA
// graph launched each call (cudaGraphLaunch), and that graph with its kernel's parameters set
// again before each launch (cudaGraphExecKernelNodeSetParams: what a graph kept for an operation
// whose arrays change would cost). Where the host's launch is most of the fixed cost, a graph's
// launch may be cheaper. `args` point at the kernel's arguments, `*ticket` among them: the first
// three take the number from a device counter (a graph's parameters are fixed), the fourth sets it.
void launch_ways(setup& st, const char* name, const void* kernel, unsigned blocks, unsigned block_threads, void** args,
                 unsigned* ticket) {
  cudaFunction_t f = nullptr;
  CHECK(cudaGetFuncBySymbol(&f, kernel));
  *ticket = auto_ticket;
  cudaGraph_t g = nullptr;
  cudaGraphExec_t ge = nullptr;
  CHECK(cudaStreamBeginCapture(st.s, cudaStreamCaptureModeThreadLocal));
  CHECK(cudaLaunchKernel(kernel, dim3(blocks), dim3(block_threads), args, 0, st.s));
  CHECK(cudaStreamEndCapture(st.s, &g));
  CHECK(cudaGraphInstantiate(&ge, g, 0));
  cudaGraphNode_t node = nullptr;
  std::size_t nodes = 1;
  CHECK(cudaGraphGetNodes(g, &node, &nodes));
  unsigned seq = 0;
  CHECK(cudaStreamSynchronize(st.s));
  CHECK(cudaMemcpyToSymbol(g_seq, &seq, sizeof seq));
  *st.done_host = 0;
  // The graph's kernel takes the arguments `args` point at now.
  auto set_params = [&] {
    cudaKernelNodeParams p{};
    p.func = const_cast<void*>(kernel);
    p.gridDim = dim3(blocks);
    p.blockDim = dim3(block_threads);
    p.kernelParams = args;
    CHECK(cudaGraphExecKernelNodeSetParams(ge, node, &p));
  };
  const char* names[] = {"<<<>>>", "driver", "graph", "graph+set"};
  for (int round = 0; round < 3; ++round) {
    for (int how = 0; how < 4; ++how) {
      std::vector<double> t(1000);
      for (int i = -50; i < int(t.size()); ++i) {
        const unsigned want = ++seq;
        const double a = now();
        if (how == 0) {
          CHECK(cudaLaunchKernel(kernel, dim3(blocks), dim3(block_threads), args, 0, st.s));
        } else if (how == 1) {
          if (cuLaunchKernel(reinterpret_cast<CUfunction>(f), blocks, 1, 1, block_threads, 1, 1, 0, st.s, args,
                             nullptr) != CUDA_SUCCESS) {
            std::fprintf(stderr, "cuLaunchKernel failed\n");
            std::exit(1);
          }
        } else if (how == 2) {
          CHECK(cudaGraphLaunch(ge, st.s));
        } else {
          *ticket = want;
          set_params();
          CHECK(cudaGraphLaunch(ge, st.s));
        }
        while (*(volatile unsigned*)st.done_host != want) {
        }
        if (i >= 0) t[i] = now() - a;
      }
      if (how == 3) {
        // The device counter goes on from the set numbers (the next rounds take it again).
        *ticket = auto_ticket;
        CHECK(cudaStreamSynchronize(st.s));
        CHECK(cudaMemcpyToSymbol(g_seq, &seq, sizeof seq));
        set_params();
      }
      CHECK(cudaGetLastError());
      std::sort(t.begin(), t.end());
      const double v = double(*(volatile float*)st.result_host);
      std::printf("%-40s %-9s host result median %7.2f us  best %7.2f  90%% %7.2f  rel err %.1e\n", name, names[how],
                  t[t.size() / 2] * 1e6, t[0] * 1e6, t[t.size() * 9 / 10] * 1e6,
                  st.expect == 0 ? 0.0 : std::abs(v - st.expect) / std::abs(st.expect));
    }
  }
  CHECK(cudaGraphExecDestroy(ge));
  CHECK(cudaGraphDestroy(g));
}

void graphs(setup& st) {
  float* result = nullptr;
  CHECK(cudaHostGetDevicePointer(reinterpret_cast<void**>(&result), st.result_host, 0));
  unsigned* done = nullptr;
  CHECK(cudaHostGetDevicePointer(reinterpret_cast<void**>(&done), st.done_host, 0));
  unsigned ticket = auto_ticket;
  const unsigned blocks = static_cast<unsigned>(st.sms * 8);
  long long nvec = st.n / 4;
  int ntail = int(st.n - nvec * 4);
  const float* tail = st.x + nvec * 4;
  float* partials = static_cast<float*>(st.scratch);
  const float4* x4 = reinterpret_cast<const float4*>(st.x);
  unsigned long long* no_stamps = nullptr;
  void* sum_args[] = {&x4, &nvec, &tail, &ntail, &partials, &st.counter, &result, &done, &ticket, &no_stamps};
  launch_ways(st, "float U2 chain stride, 8/SM (Tessera's)",
              reinterpret_cast<const void*>(&reduce_kernel<float, 2, false, false>), blocks, threads, sum_args, &ticket);
  const double keep = st.expect;
  st.expect = 0;
  void* signal_args[] = {&result, &done, &ticket};
  launch_ways(st, "empty kernel that signals", reinterpret_cast<const void*>(&signal_kernel<0>), 1, 32, signal_args,
              &ticket);
  st.expect = keep;
}

int main(int argc, char** argv) {
  setup st{};
  st.n = argc > 1 ? std::atoll(argv[1]) : 30000000LL;
  int dev = 0;
  CHECK(cudaSetDevice(dev));
  CHECK(cudaDeviceGetAttribute(&st.sms, cudaDevAttrMultiProcessorCount, dev));
  CHECK(cudaStreamCreateWithFlags(&st.s, cudaStreamNonBlocking));
  CHECK(cudaEventCreate(&st.e0));
  CHECK(cudaEventCreate(&st.e1));
  CHECK(cudaMalloc(&st.x, st.n * sizeof(float)));
  std::vector<float> h(st.n);
  srand(7);
  for (auto& v : h) v = float(rand()) / RAND_MAX;
  for (float v : h) st.expect += v;
  CHECK(cudaMemcpy(st.x, h.data(), st.n * sizeof(float), cudaMemcpyHostToDevice));
  CHECK(cudaMalloc(&st.scratch, 1 << 20));
  CHECK(cudaMalloc(&st.counter, sizeof(unsigned)));
  CHECK(cudaMemset(st.counter, 0, sizeof(unsigned)));
  CHECK(cudaHostAlloc(&st.result_host, sizeof(double), cudaHostAllocMapped));
  CHECK(cudaHostAlloc(&st.done_host, sizeof(unsigned), cudaHostAllocMapped));
  *st.done_host = 0;
  cudaDeviceProp prop{};
  CHECK(cudaGetDeviceProperties(&prop, dev));
  std::printf("%s, %d SMs, n = %lld floats (%.1f MB)\n", prop.name, st.sms, st.n, st.n * 4 / 1e6);
  if (argc > 2 && std::string(argv[2]) == "signal") {
    signals(st);
    return 0;
  }
  if (argc > 2 && std::string(argv[2]) == "graph") {
    graphs(st);
    return 0;
  }
  if (argc > 2 && std::string(argv[2]) == "dyn") {
    for (int round = 0; round < 2; ++round) {
      stride_timeline(st);
      dyn_variant<512, 64>(st, 8, "dyn 8 KiB chunks, 8/SM");
      dyn_variant<1024, 64>(st, 8, "dyn 16 KiB chunks, 8/SM");
      dyn_variant<1024, 64>(st, 4, "dyn 16 KiB chunks, 4/SM");
      dyn_variant<2048, 64>(st, 4, "dyn 32 KiB chunks, 4/SM");
      dyn_variant<2048, 64>(st, 8, "dyn 32 KiB chunks, 8/SM");
      dyn_variant<512, 32>(st, 8, "dyn 8 KiB chunks, 8/SM, groups of 32");
    }
    return 0;
  }

  // CUB: DeviceReduce::Sum, float accumulator, into device memory; GPU time; and with a copy to the host
  {
    float* out = nullptr;
    CHECK(cudaMalloc(&out, sizeof(float)));
    std::size_t temp_bytes = 0;
    cub::DeviceReduce::Sum(nullptr, temp_bytes, st.x, out, st.n, st.s);
    void* temp = nullptr;
    CHECK(cudaMalloc(&temp, temp_bytes));
    for (int i = 0; i < 20; ++i) cub::DeviceReduce::Sum(temp, temp_bytes, st.x, out, st.n, st.s);
    CHECK(cudaStreamSynchronize(st.s));
    const int reps = 200;
    CHECK(cudaEventRecord(st.e0, st.s));
    for (int i = 0; i < reps; ++i) cub::DeviceReduce::Sum(temp, temp_bytes, st.x, out, st.n, st.s);
    CHECK(cudaEventRecord(st.e1, st.s));
    CHECK(cudaEventSynchronize(st.e1));
    float ms = 0;
    CHECK(cudaEventElapsedTime(&ms, st.e0, st.e1));
    const double us = ms * 1e3 / reps;
    float* pinned = nullptr;
    CHECK(cudaHostAlloc(&pinned, sizeof(float), 0));
    std::vector<double> t(1000);
    for (auto& ti : t) {
      const double a = now();
      cub::DeviceReduce::Sum(temp, temp_bytes, st.x, out, st.n, st.s);
      CHECK(cudaMemcpyAsync(pinned, out, sizeof(float), cudaMemcpyDeviceToHost, st.s));
      CHECK(cudaStreamSynchronize(st.s));
      ti = now() - a;
    }
    std::sort(t.begin(), t.end());
    std::printf("%-44s                      GPU %7.2f us  %6.0f GB/s   host result median %7.2f us  best %7.2f  rel err %.1e\n",
                "CUB DeviceReduce::Sum (float) + copy", us, st.n * 4 / 1e9 / (us * 1e-6), t[500] * 1e6, t[0] * 1e6,
                std::abs(*pinned - st.expect) / st.expect);
  }
  // Tessera's loads until session 43 (FullTask accumulates a float sum in float, like CUB): 4 loads
  // in flight, one chain of adds, grid-stride, 8 blocks per SM; 2 loads since (U2 below). The
  // tail here keeps the fences Tessera's kernel no longer has (backend/cuda/reduce.cuh).
  variant<float, 4, false, false>(st, 8, "float U4 chain stride (Tessera until s43)");
  variant<float, 4, true, false>(st, 8, "float U4 split stride");
  variant<float, 8, false, false>(st, 8, "float U8 chain stride");
  variant<float, 8, true, false>(st, 8, "float U8 split stride");
  variant<float, 2, false, false>(st, 8, "float U2 chain stride (Tessera since s43)");
  variant<float, 4, false, true>(st, 8, "float U4 chain even");
  variant<float, 8, false, true>(st, 8, "float U8 chain even");
  variant<float, 4, false, false>(st, 4, "float U4 chain stride");
  variant<float, 8, false, false>(st, 4, "float U8 chain stride");
  variant<float, 4, false, false>(st, 16, "float U4 chain stride");
  variant<float, 4, false, false>(st, 0, "float U4 chain stride (occupancy)");
  variant<float, 8, false, true>(st, 4, "float U8 chain even");
  variant<double, 4, false, false>(st, 8, "double U4 chain stride");
  variant<float, 4, false, false>(st, 8, "float U4 chain stride (until s43, again)");
  bulk_variant<8, 16384>(st, 1, "bulk 8 x 16 KiB, 1/SM");
  bulk_variant<12, 16384>(st, 1, "bulk 12 x 16 KiB, 1/SM");
  bulk_variant<6, 16384>(st, 2, "bulk 6 x 16 KiB, 2/SM");
  bulk_variant<4, 32768>(st, 1, "bulk 4 x 32 KiB, 1/SM");
  bulk_variant<6, 32768>(st, 1, "bulk 6 x 32 KiB, 1/SM");
  bulk_variant<8, 8192>(st, 2, "bulk 8 x 8 KiB, 2/SM");
  bulk_variant<4, 8192>(st, 4, "bulk 4 x 8 KiB, 4/SM");
  bulk_variant<8, 4096>(st, 4, "bulk 8 x 4 KiB, 4/SM");
  {
    const double keep = st.expect;
    st.expect = 0;
    measure<float>(st, 1, "empty kernel that signals (launch + signal)", [&](float* result, unsigned* done, unsigned t) {
      signal_kernel<0><<<1, 32, 0, st.s>>>(result, done, t);
    });
    st.expect = keep;
  }
  return 0;
}
