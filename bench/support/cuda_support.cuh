// SPDX-License-Identifier: Apache-2.0
// Benchmark support on GPUs: every CUDA runtime call a benchmark needs lives here, so that
// the programs in bench/ hold none. Include only from translation units compiled by nvcc:
//
//   #if defined(__CUDACC__)
//   #include <bench/support/cuda_support.cuh>
//   #endif
//
//  * event_timer / time_ms: CUDA-event timing of work queued on Tessera's per-device streams,
//    over one or several GPUs (fan-out from one start event, fan-in to one end event).
//  * memcpy_ms: the cudaMemcpy device-to-device baseline.
//  * reference_ms: plain-CUDA references (cub::DeviceTransform, a hand-written float4 kernel),
//    to tell what the GPU allows from what Tessera reaches.
//  * alltoall_ms: the re-shard's all-to-all in plain CUDA, one stream per pair of GPUs.
//  * nccl_alltoall_ms: the same all-to-all as grouped NCCL send/recv (pieces already contiguous).
//  * empty_launch_us: the host cost of a bare (empty) kernel launch.
//
// Every CUDA call is checked; a failure throws tessera::backend_error naming the call and the
// device. Device switches go through the runtime (rt::set_device), never cudaSetDevice
// directly, so the runtime's cached current device stays right.
#pragma once
#if !defined(__CUDACC__)
#error "bench/support/cuda_support.cuh needs nvcc; guard its #include with #if defined(__CUDACC__)"
#endif
#include <bench/support/bench_support.hpp>
#include <backend/runtime/runtime.hpp>
#include <tessera/device.hpp>
#include <tessera/error.hpp>

#include <cub/device/device_transform.cuh>
#include <cuda_runtime.h>
#include <nccl.h>

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdlib>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace tessera::bench::cuda {

// Throws backend_error "bench: <call> failed on cuda:<n>: <name> (<text>)".
inline void check(cudaError_t e, const char* call, Device d) {
  if (e == cudaSuccess) return;
  (void)cudaGetLastError();  // clear the sticky slot so that later launches are not blamed
  throw backend_error(std::string("bench: ") + call + " failed on " + d.name() + ": " + cudaGetErrorName(e) + " (" +
                      cudaGetErrorString(e) + ")");
}

inline cudaStream_t stream_of(Device d) { return static_cast<cudaStream_t>(detail::rt::stream(d.id())); }

template <class = void>
__global__ void empty_kernel() {}

// Keeps a stream busy until the host sets *release (pinned host memory, mapped) or `ns`
// nanoseconds have passed, so that the host can queue the timed work behind it: the measurement
// then holds GPU time only, not the host's launch latency. With release null it spins `ns`.
template <class = void>
__global__ void spin_kernel(unsigned long long ns, const volatile int* release) {
  unsigned long long t0 = 0, t = 0;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
  do {
    if (release != nullptr && *release != 0) return;
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 700
    __nanosleep(release != nullptr ? 100 : 500);
#endif
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  } while (t - t0 < ns);
}

// TESSERA_BENCH_TIMER=spin: the timer of sessions before 38 (below), for comparisons in one run.
inline bool released_timer() {
  static const bool on = [] {
    const char* v = std::getenv("TESSERA_BENCH_TIMER");
    return v == nullptr || std::string(v) != "spin";
  }();
  return on;
}

// Times the work queued between start() and stop() on the streams of `devs` (Tessera's
// streams). start() blocks every stream behind a spin kernel and records a start event on each;
// stop() records a stop event on each stream, then releases the spins all at once through one
// flag in pinned host memory, and returns the longest of the devices' start-to-stop times. So all
// GPUs start together: the spins used to run a fixed time each, and since the host launches them
// one GPU after the other (3-5 us per launch), the last GPU started 10-15 us after the first,
// and the samples were joined on the first GPU by cross-device event waits; both were charged to
// every multi-GPU sample and to no single-GPU one (about 5 us per Jacobi sweep in samples of 5
// on 4 GPUs). A spin that runs out before the release (after spin_us) starts its GPU anyway:
// late() counts samples where that happened on the first GPU (the host queued too slowly: those
// include host gaps; raise spin_us). TESSERA_BENCH_TIMER=spin keeps the former timer: fixed
// spins, the other streams waiting for the first one's start event, one join on the first GPU.
class event_timer {
 public:
  event_timer(DeviceSet devs, double spin_us)
      : devs_(std::move(devs)), spin_ns_(static_cast<unsigned long long>(spin_us * 1e3)), released_(released_timer()) {
    if (devs_.empty()) throw invalid_argument("bench: event_timer needs at least one GPU");
    starts_.assign(devs_.size(), nullptr);
    stops_.assign(devs_.size(), nullptr);
    try {
      for (std::size_t i = 0; i < devs_.size(); ++i) {
        detail::rt::set_device(devs_[i].id());
        check(cudaEventCreate(&starts_[i]), "cudaEventCreate", devs_[i]);
        check(cudaEventCreate(&stops_[i]), "cudaEventCreate", devs_[i]);
      }
      detail::rt::set_device(devs_[0].id());
      check(cudaEventCreate(&end_), "cudaEventCreate", devs_[0]);
      if (released_) {
        void* p = nullptr;
        check(cudaHostAlloc(&p, sizeof(int), cudaHostAllocMapped | cudaHostAllocPortable), "cudaHostAlloc", devs_[0]);
        flag_ = static_cast<volatile int*>(p);
        *flag_ = 0;
      }
    } catch (...) {
      release();
      throw;
    }
  }
  ~event_timer() { release(); }
  event_timer(const event_timer&) = delete;
  event_timer& operator=(const event_timer&) = delete;

  void start() {
    if (flag_ != nullptr) *flag_ = 0;
    std::atomic_thread_fence(std::memory_order_seq_cst);
    for (std::size_t i = 0; i < devs_.size(); ++i) {
      const Device d = devs_[i];
      detail::rt::set_device(d.id());
      spin_kernel<<<1, 1, 0, stream_of(d)>>>(spin_ns_, flag_);
      check(cudaGetLastError(), "spin_kernel<<<1, 1>>>", d);
      if (released_ || i == 0) check(cudaEventRecord(starts_[i], stream_of(d)), "cudaEventRecord", d);
    }
    if (!released_) {
      for (std::size_t i = 1; i < devs_.size(); ++i) {
        detail::rt::set_device(devs_[i].id());
        check(cudaStreamWaitEvent(stream_of(devs_[i]), starts_[0], 0), "cudaStreamWaitEvent", devs_[i]);
      }
    }
  }

  double stop() {
    const cudaError_t q = cudaEventQuery(starts_[0]);
    if (q == cudaSuccess) ++late_;
    else if (q != cudaErrorNotReady) check(q, "cudaEventQuery", devs_[0]);
    for (std::size_t i = 0; i < devs_.size(); ++i) {
      detail::rt::set_device(devs_[i].id());
      check(cudaEventRecord(stops_[i], stream_of(devs_[i])), "cudaEventRecord", devs_[i]);
    }
    if (released_) {
      std::atomic_thread_fence(std::memory_order_seq_cst);
      *flag_ = 1;
      double longest = 0;
      for (std::size_t i = 0; i < devs_.size(); ++i) {
        detail::rt::set_device(devs_[i].id());
        check(cudaEventSynchronize(stops_[i]), "cudaEventSynchronize", devs_[i]);
        float ms = 0;
        check(cudaEventElapsedTime(&ms, starts_[i], stops_[i]), "cudaEventElapsedTime", devs_[i]);
        longest = std::max(longest, static_cast<double>(ms));
      }
      return longest;
    }
    detail::rt::set_device(devs_[0].id());
    const cudaStream_t s0 = stream_of(devs_[0]);
    for (std::size_t i = 1; i < devs_.size(); ++i)
      check(cudaStreamWaitEvent(s0, stops_[i], 0), "cudaStreamWaitEvent", devs_[0]);
    check(cudaEventRecord(end_, s0), "cudaEventRecord", devs_[0]);
    check(cudaEventSynchronize(end_), "cudaEventSynchronize", devs_[0]);
    float ms = 0;
    check(cudaEventElapsedTime(&ms, starts_[0], end_), "cudaEventElapsedTime", devs_[0]);
    return ms;
  }

  int late() const { return late_; }

 private:
  void release() noexcept {
    for (auto& e : starts_) destroy(e);
    for (auto& e : stops_) destroy(e);
    destroy(end_);
    if (flag_ != nullptr) {
      *flag_ = 1;  // a spin still queued must not wait for its full time
      (void)cudaFreeHost(const_cast<int*>(flag_));
    }
    flag_ = nullptr;
    (void)cudaGetLastError();
  }

  static void destroy(cudaEvent_t& e) noexcept {
    if (e) (void)cudaEventDestroy(e);
    e = nullptr;
  }

  DeviceSet devs_;
  unsigned long long spin_ns_;
  bool released_;
  volatile int* flag_ = nullptr;
  cudaEvent_t end_ = nullptr;
  std::vector<cudaEvent_t> starts_, stops_;
  int late_ = 0;
};

// Milliseconds of `work()` per call, measured with an event_timer over `devs`: `warmup`
// untimed calls, then `reps` timed ones. `late`, when given, receives event_timer::late().
// `between` runs after every call, warm-up ones included, outside the timing (after the stop
// event has completed, so that it may free device memory).
template <class F, class B = no_op>
std::vector<double> time_ms(const DeviceSet& devs, int warmup, int reps, F&& work, double spin_us,
                            int* late = nullptr, B&& between = B{}) {
  for (int i = 0; i < warmup; ++i) {
    work();
    between();
  }
  for (auto d : devs) synchronize(d);
  event_timer timer(devs, spin_us);
  std::vector<double> ms;
  ms.reserve(static_cast<std::size_t>(reps));
  for (int i = 0; i < reps; ++i) {
    timer.start();
    work();
    ms.push_back(timer.stop());
    between();
  }
  if (late) *late = timer.late();
  return ms;
}

// Device memory for the baseline (cudaMalloc), freed on scope exit.
class device_buffer {
 public:
  device_buffer(Device d, std::size_t bytes) : d_(d) {
    detail::rt::set_device(d.id());
    check(cudaMalloc(&p_, bytes ? bytes : 1), "cudaMalloc", d);
  }
  ~device_buffer() {
    try {
      detail::rt::set_device(d_.id());
    } catch (...) {
    }
    (void)cudaFree(p_);
    (void)cudaGetLastError();
  }
  device_buffer(const device_buffer&) = delete;
  device_buffer& operator=(const device_buffer&) = delete;
  void* get() const { return p_; }

 private:
  Device d_;
  void* p_ = nullptr;
};

// The baseline: cudaMemcpyAsync device to device of `bytes` on one GPU (cudaMalloc'd buffers,
// Tessera's stream), in ms per copy; each sample times `batch` copies back to back. Throws
// out_of_memory (the runtime's guard) when the two buffers exceed the device's free memory.
inline std::vector<double> memcpy_ms(Device d, std::size_t bytes, int warmup, int reps, int batch, double spin_us,
                                     int* late = nullptr) {
  detail::rt::check_free(d.id(), 2 * bytes + (std::size_t(64) << 20));  // 64 MiB of headroom
  device_buffer src(d, bytes), dst(d, bytes);
  const cudaStream_t s = stream_of(d);
  check(cudaMemsetAsync(src.get(), 1, bytes, s), "cudaMemsetAsync", d);
  check(cudaMemsetAsync(dst.get(), 0, bytes, s), "cudaMemsetAsync", d);
  auto ms = time_ms(
      DeviceSet{d}, warmup, reps,
      [&] {
        detail::rt::set_device(d.id());
        for (int k = 0; k < batch; ++k)
          check(cudaMemcpyAsync(dst.get(), src.get(), bytes, cudaMemcpyDeviceToDevice, s), "cudaMemcpyAsync", d);
      },
      spin_us, late);
  check(cudaStreamSynchronize(s), "cudaStreamSynchronize", d);
  for (auto& m : ms) m /= batch;
  return ms;
}

// -- reference kernels (not Tessera): what plain CUDA reaches on the same GPU ------------------------

struct add_op {
  __device__ float operator()(float x, float y) const { return x + y; }
};
struct sin_expr_op {
  __device__ float operator()(float x, float y) const { return sinf(x) * y + 2.f * x; }
};

// c = a + b with 16-byte loads, U float4 per thread, one pass (no grid-stride loop).
template <int U>
__global__ void __launch_bounds__(256) add_float4_kernel(const float4* a, const float4* b, float4* c, std::size_t n4) {
  const std::size_t base = std::size_t(blockIdx.x) * 256 * U + threadIdx.x;
  float4 x[U], y[U];
#pragma unroll
  for (int u = 0; u < U; ++u) {
    const std::size_t i = base + std::size_t(u) * 256;
    if (i < n4) {
      x[u] = a[i];
      y[u] = b[i];
    }
  }
#pragma unroll
  for (int u = 0; u < U; ++u) {
    const std::size_t i = base + std::size_t(u) * 256;
    if (i < n4) c[i] = make_float4(x[u].x + y[u].x, x[u].y + y[u].y, x[u].z + y[u].z, x[u].w + y[u].w);
  }
}

enum class reference { cub_add, cub_sin_expr, float4_add };

inline const char* reference_name(reference r) {
  switch (r) {
    case reference::cub_add: return "cub::DeviceTransform a + b";
    case reference::cub_sin_expr: return "cub::DeviceTransform sin expr";
    default: return "hand-written float4 a + b";
  }
}

// ms per run of a reference kernel over n floats (c = f(a, b), cudaMalloc'd buffers) on one
// GPU, timed like everything else. n must be a multiple of 4 for float4_add.
inline std::vector<double> reference_ms(Device d, std::size_t n, reference which, int warmup, int reps, int batch,
                                        double spin_us, int* late = nullptr) {
  const std::size_t bytes = n * sizeof(float);
  detail::rt::check_free(d.id(), 3 * bytes + (std::size_t(64) << 20));
  device_buffer a(d, bytes), b(d, bytes), c(d, bytes);
  const cudaStream_t s = stream_of(d);
  check(cudaMemsetAsync(a.get(), 0x3f, bytes, s), "cudaMemsetAsync", d);  // 0.747f everywhere
  check(cudaMemsetAsync(b.get(), 0x3f, bytes, s), "cudaMemsetAsync", d);
  const auto* pa = static_cast<const float*>(a.get());
  const auto* pb = static_cast<const float*>(b.get());
  auto* pc = static_cast<float*>(c.get());
  auto run_once = [&] {
    switch (which) {
      case reference::cub_add:
        check(cub::DeviceTransform::Transform(::cuda::std::make_tuple(pa, pb), pc, static_cast<std::int64_t>(n),
                                              add_op{}, s),
              "cub::DeviceTransform::Transform", d);
        break;
      case reference::cub_sin_expr:
        check(cub::DeviceTransform::Transform(::cuda::std::make_tuple(pa, pb), pc, static_cast<std::int64_t>(n),
                                              sin_expr_op{}, s),
              "cub::DeviceTransform::Transform", d);
        break;
      case reference::float4_add: {
        constexpr int U = 4;
        const std::size_t n4 = n / 4;
        const std::size_t blocks = (n4 + 256 * U - 1) / (256 * U);
        add_float4_kernel<U><<<static_cast<unsigned>(blocks ? blocks : 1), 256, 0, s>>>(
            reinterpret_cast<const float4*>(pa), reinterpret_cast<const float4*>(pb), reinterpret_cast<float4*>(pc),
            n4);
        check(cudaGetLastError(), "add_float4_kernel", d);
        break;
      }
    }
  };
  auto ms = time_ms(
      DeviceSet{d}, warmup, reps,
      [&] {
        detail::rt::set_device(d.id());
        for (int k = 0; k < batch; ++k) run_once();
      },
      spin_us, late);
  check(cudaStreamSynchronize(s), "cudaStreamSynchronize", d);
  for (auto& m : ms) m /= batch;
  return ms;
}

// -- the re-shard's pattern in plain CUDA (bench_stencil (2)) ----------------------------------------

// The buffers of an all-to-all of a rows x rows float matrix over `devs` (alltoall_ms,
// nccl_alltoall_ms): each device's source part (set to a fixed pattern) and destination part,
// rows x (rows / G) floats each, and the sizes of a part and of one device's piece for another.
struct alltoall_parts {
  std::size_t G, cols, block, piece;
  std::vector<std::unique_ptr<device_buffer>> src, dst;
  alltoall_parts(const DeviceSet& devs, std::size_t rows, const char* who) : G(devs.size()) {
    if (G < 2 || rows % G != 0) {
      throw invalid_argument(std::string("bench: ") + who + " needs 2 or more GPUs and rows divisible by them, found " +
                             std::to_string(G) + " GPUs and " + std::to_string(rows) + " rows");
    }
    cols = rows / G, block = rows * cols * sizeof(float), piece = cols * cols * sizeof(float);
    for (auto d : devs) {
      detail::rt::check_free(d.id(), 2 * block + (std::size_t(64) << 20));
      src.push_back(std::make_unique<device_buffer>(d, block));
      dst.push_back(std::make_unique<device_buffer>(d, block));
      check(cudaMemsetAsync(src.back()->get(), 1, block, stream_of(d)), "cudaMemsetAsync", d);
    }
  }
};

// Milliseconds of one all-to-all between the GPUs of `devs` shaped like Tessera's re-shard of a
// rows x rows float matrix from shard(1) to shard(0) (column-major, as Tessera stores it): device
// s holds rows x (rows / G), leading dimension rows; device d receives the (rows / G) x (rows / G)
// block d of every source, rows d * rows / G onwards of each of the source's columns, into its
// (rows / G) x rows part, where the blocks from s lie one after another (contiguous). Each
// (destination, source) pair copies on a stream of its own, all at once, from cudaMalloc'd
// buffers. `pitched`: each block is read at the source's pitch, as the re-shard reads it (a 3-D
// peer copy); otherwise from a contiguous range of the same size (a plain peer copy), which tells
// whether the pitch costs bandwidth. The block that stays on its device is a 2-D copy.
inline std::vector<double> alltoall_ms(const DeviceSet& devs, std::size_t rows, bool pitched, int warmup, int reps,
                                       double spin_us) {
  alltoall_parts parts(devs, rows, "alltoall_ms");
  const std::size_t G = parts.G, cols = parts.cols, piece = parts.piece;
  auto& src = parts.src;
  auto& dst = parts.dst;
  // Streams and events, released however this ends.
  struct resources {
    const DeviceSet& devs;
    std::vector<cudaStream_t> streams;  // [d * G + s]
    std::vector<cudaEvent_t> start, done;
    ~resources() {
      for (std::size_t i = 0; i < streams.size(); ++i) {
        try {
          detail::rt::set_device(devs[i / devs.size()].id());
        } catch (...) {
        }
        if (streams[i]) (void)cudaStreamDestroy(streams[i]);
        if (done[i]) (void)cudaEventDestroy(done[i]);
      }
      for (auto e : start)
        if (e) (void)cudaEventDestroy(e);
      (void)cudaGetLastError();
    }
  } r{devs, std::vector<cudaStream_t>(G * G, nullptr), std::vector<cudaEvent_t>(G, nullptr),
      std::vector<cudaEvent_t>(G * G, nullptr)};
  for (std::size_t d = 0; d < G; ++d) {
    detail::rt::set_device(devs[d].id());
    check(cudaEventCreateWithFlags(&r.start[d], cudaEventDisableTiming), "cudaEventCreateWithFlags", devs[d]);
    for (std::size_t s = 0; s < G; ++s) {
      check(cudaStreamCreateWithFlags(&r.streams[d * G + s], cudaStreamNonBlocking), "cudaStreamCreateWithFlags",
            devs[d]);
      check(cudaEventCreateWithFlags(&r.done[d * G + s], cudaEventDisableTiming), "cudaEventCreateWithFlags", devs[d]);
    }
  }
  auto once = [&] {
    for (std::size_t d = 0; d < G; ++d) {
      detail::rt::set_device(devs[d].id());
      check(cudaEventRecord(r.start[d], stream_of(devs[d])), "cudaEventRecord", devs[d]);
    }
    for (std::size_t d = 0; d < G; ++d) {
      const Device dd = devs[d];
      detail::rt::set_device(dd.id());
      char* out = static_cast<char*>(dst[d]->get());
      for (std::size_t k = 1; k <= G; ++k) {  // sources d + 1, d + 2, ..., d itself last
        const std::size_t s = (d + k) % G;
        const cudaStream_t st = r.streams[d * G + s];
        check(cudaStreamWaitEvent(st, r.start[d], 0), "cudaStreamWaitEvent", dd);
        const char* in = static_cast<const char*>(src[s]->get()) + (pitched ? d * cols * sizeof(float) : d * piece);
        const std::size_t pitch = pitched ? rows * sizeof(float) : cols * sizeof(float);
        char* to = out + s * piece;
        if (s == d) {
          check(cudaMemcpy2DAsync(to, cols * sizeof(float), in, pitch, cols * sizeof(float), cols,
                                  cudaMemcpyDeviceToDevice, st),
                "cudaMemcpy2DAsync", dd);
        } else if (pitched) {
          cudaMemcpy3DPeerParms q{};
          q.srcPtr = make_cudaPitchedPtr(const_cast<char*>(in), pitch, cols * sizeof(float), cols);
          q.srcDevice = devs[s].id();
          q.dstPtr = make_cudaPitchedPtr(to, cols * sizeof(float), cols * sizeof(float), cols);
          q.dstDevice = dd.id();
          q.extent = make_cudaExtent(cols * sizeof(float), cols, 1);
          check(cudaMemcpy3DPeerAsync(&q, st), "cudaMemcpy3DPeerAsync", dd);
        } else {
          check(cudaMemcpyPeerAsync(to, dd.id(), in, devs[s].id(), piece, st), "cudaMemcpyPeerAsync", dd);
        }
        check(cudaEventRecord(r.done[d * G + s], st), "cudaEventRecord", dd);
        check(cudaStreamWaitEvent(stream_of(dd), r.done[d * G + s], 0), "cudaStreamWaitEvent", dd);
      }
    }
  };
  auto ms = time_ms(devs, warmup, reps, once, spin_us);
  for (auto d : devs) check(cudaStreamSynchronize(stream_of(d)), "cudaStreamSynchronize", d);
  return ms;
}

// Milliseconds per all-to-all of a rows x rows float matrix over `devs` through NCCL: every
// device sends each other device its piece (rows / G)^2 with ncclSend/ncclRecv in one group, on
// Tessera's streams, and copies its own piece locally. The pieces are contiguous on both sides
// (a re-shard through NCCL would first pack the strided ones, one local pass at HBM speed), so
// this is what NCCL's transport gives the pattern. One communicator per device, by
// ncclCommInitAll, destroyed at the end.
inline std::vector<double> nccl_alltoall_ms(const DeviceSet& devs, std::size_t rows, int warmup, int reps,
                                            double spin_us) {
  alltoall_parts parts(devs, rows, "nccl_alltoall_ms");
  const std::size_t G = parts.G, cols = parts.cols, piece = parts.piece;
  auto& src = parts.src;
  auto& dst = parts.dst;
  struct comms {
    std::vector<ncclComm_t> c;
    ~comms() {
      for (auto x : c)
        if (x) (void)ncclCommDestroy(x);
    }
  } r{std::vector<ncclComm_t>(G, nullptr)};
  std::vector<int> ordinals;
  for (auto d : devs) ordinals.push_back(detail::rt::info(d.id()).ordinal);
  auto nccl_check = [&](ncclResult_t e, const char* call) {
    if (e != ncclSuccess) {
      throw backend_error(std::string("bench: ") + call + " failed: " + ncclGetErrorString(e));
    }
  };
  nccl_check(ncclCommInitAll(r.c.data(), static_cast<int>(G), ordinals.data()), "ncclCommInitAll");
  (void)detail::rt::get_cuda_device();  // NCCL switched devices behind the runtime's cache
  const std::size_t count = cols * cols;
  auto once = [&] {
    nccl_check(ncclGroupStart(), "ncclGroupStart");
    // A throw inside the group must still close it: an open group would hold every later NCCL
    // call of this thread (the comms' destruction, Tessera's collectives).
    struct group_closer {
      bool open = true;
      ~group_closer() {
        if (open) (void)ncclGroupEnd();
      }
    } closer;
    for (std::size_t d = 0; d < G; ++d) {
      char* in = static_cast<char*>(src[d]->get());
      char* out = static_cast<char*>(dst[d]->get());
      for (std::size_t k = 1; k < G; ++k) {
        const std::size_t peer = (d + k) % G;
        nccl_check(ncclSend(in + peer * piece, count, ncclFloat, static_cast<int>(peer), r.c[d], stream_of(devs[d])),
                   "ncclSend");
        nccl_check(ncclRecv(out + peer * piece, count, ncclFloat, static_cast<int>(peer), r.c[d], stream_of(devs[d])),
                   "ncclRecv");
      }
    }
    closer.open = false;
    nccl_check(ncclGroupEnd(), "ncclGroupEnd");
    (void)detail::rt::get_cuda_device();
    for (std::size_t d = 0; d < G; ++d) {
      detail::rt::set_device(devs[d].id());
      check(cudaMemcpyAsync(static_cast<char*>(dst[d]->get()) + d * piece,
                            static_cast<const char*>(src[d]->get()) + d * piece, piece, cudaMemcpyDeviceToDevice,
                            stream_of(devs[d])),
            "cudaMemcpyAsync", devs[d]);
    }
  };
  auto ms = time_ms(devs, warmup, reps, once, spin_us);
  for (auto d : devs) {
    detail::rt::set_device(d.id());
    check(cudaStreamSynchronize(stream_of(d)), "cudaStreamSynchronize", d);
  }
  return ms;
}

// Host microseconds per bare kernel launch: `n` launches of an empty kernel <<<1, 1>>> on each
// device of `devs` in turn (switching devices as a multi-GPU dispatch does), each checked with
// cudaGetLastError like Tessera's launch helper, without synchronizing inside the loop; the
// clock stops before the final synchronize. Divided by the number of launches.
inline double empty_launch_us(const DeviceSet& devs, int n) {
  auto launch_all = [&] {
    for (auto d : devs) {
      detail::rt::set_device(d.id());
      empty_kernel<<<1, 1, 0, stream_of(d)>>>();
      check(cudaGetLastError(), "empty_kernel<<<1, 1>>>", d);
    }
  };
  for (int i = 0; i < 200; ++i) launch_all();  // warm-up: module load, first-launch costs
  for (auto d : devs) check(cudaStreamSynchronize(stream_of(d)), "cudaStreamSynchronize", d);
  const double t0 = host_seconds();
  for (int i = 0; i < n; ++i) launch_all();
  const double t1 = host_seconds();
  for (auto d : devs) check(cudaStreamSynchronize(stream_of(d)), "cudaStreamSynchronize", d);
  return (t1 - t0) * 1e6 / (double(n > 0 ? n : 1) * double(devs.size()));
}

}  // namespace tessera::bench::cuda
