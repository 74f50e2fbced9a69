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
// (fence + store, a release store, the value packed with the number in one 8-byte store).
// Built and run by `bash scripts/gpu_check.sh reduce_probe` (nvcc ... -lcuda), not by CMake.
#include <cub/device/device_reduce.cuh>
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

// Every block's end: fold the block's sums into its partial; the last block to finish folds the
// partials into the result and signals the host when asked.
template <class Acc>
__device__ void finish_block(Acc s, Acc* partials, unsigned* counter, Acc* result, volatile unsigned* done,
                             unsigned ticket) {
  __shared__ Acc smem[threads / 32];
  __shared__ bool last;
  // block fold: warp shuffles, then the warps' sums
  for (int o = 16; o > 0; o /= 2) s += __shfl_down_sync(0xffffffffu, s, o);
  if (threadIdx.x % 32 == 0) smem[threadIdx.x / 32] = s;
  __syncthreads();
  if (threadIdx.x == 0) {
    Acc b = 0;
    for (int w = 0; w < threads / 32; ++w) b += smem[w];
    partials[blockIdx.x] = b;
    __threadfence();
    last = atomicAdd(counter, 1u) == gridDim.x - 1;
  }
  __syncthreads();
  if (!last) return;
  __threadfence();
  Acc a = 0;
  for (unsigned b = threadIdx.x; b < gridDim.x; b += threads) a += *(volatile Acc*)(partials + b);
  for (int o = 16; o > 0; o /= 2) a += __shfl_down_sync(0xffffffffu, a, o);
  if (threadIdx.x % 32 == 0) smem[threadIdx.x / 32] = a;
  __syncthreads();
  if (threadIdx.x == 0) {
    Acc r = 0;
    for (int w = 0; w < threads / 32; ++w) r += smem[w];
    *result = r;
    *counter = 0;
    if (done != nullptr) {
      __threadfence_system();
      *done = ticket;
    }
  }
}

// U float4 loads in flight per thread per step; SPLIT: one accumulator per load (no chain of
// dependent adds across the step's values); EVEN: each block walks one contiguous share (CUB's
// even share) instead of the grid-stride interleave.
template <class Acc, int U, bool SPLIT, bool EVEN>
__global__ void __launch_bounds__(threads) reduce_kernel(const float4* __restrict__ x, long long nvec, const float* tail,
                                                         int ntail, Acc* partials, unsigned* counter, Acc* result,
                                                         volatile unsigned* done, unsigned ticket) {
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
  finish_block<Acc>(s, partials, counter, result, done, ticket);
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
                                     done, ticket);
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
      *done = ticket;
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
