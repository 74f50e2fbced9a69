// SPDX-License-Identifier: Apache-2.0
// The host cost of a bare kernel launch on this machine (no Tessera): <<<>>>, cudaLaunchKernel,
// the driver's cuLaunchKernel and a kept one-node graph (unchanged, and with its parameters set
// before each launch), at 16 and 512 parameter bytes, host microseconds per launch over
// 20000 launches. The floor under bench_capture's plain launches. With several GPUs, also an
// "operation" of one launch per GPU: from one thread in turn, and from one thread per GPU at once
// (a spin barrier per operation, as Tessera's launcher threads), and each thread launching on its
// own GPU without barriers: whether the driver lets launches to different GPUs overlap. Also ten
// distinct kernels in turn against one repeated.
// Built and run by `bash scripts/gpu_check.sh launch` (nvcc ... -lcuda -lpthread), not by CMake.
#include <cuda.h>
#include <cuda_runtime.h>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <thread>
#include <utility>
#include <vector>
template <int B> struct P { char b[B]; };
template <int B> __global__ void k(P<B> p) { if (p.b[0] == 123 && threadIdx.x == 999) printf("x"); }
static double now() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }
template <class F> double per(const char* name, F f, int n = 20000) {
  cudaDeviceSynchronize();
  for (int i = 0; i < 1000; ++i) f();
  cudaDeviceSynchronize();
  double t0 = now();
  for (int i = 0; i < n; ++i) f();
  double t1 = now();
  cudaDeviceSynchronize();
  double t2 = now();
  std::printf("%-48s host %.3f us  wall %.3f us\n", name, (t1 - t0) * 1e6 / n, (t2 - t0) * 1e6 / n);
  return (t1 - t0) * 1e6 / n;
}
template <int B> void sizes(cudaStream_t s, dim3 g, dim3 b) {
  P<B> p{};
  char name[96];
  std::snprintf(name, sizeof name, "<<<%u,%u>>> param %d B", g.x, b.x, B);
  per(name, [&] { k<B><<<g, b, 0, s>>>(p); });
  std::snprintf(name, sizeof name, "cudaLaunchKernel param %d B", B);
  void* args[] = {&p};
  per(name, [&] { cudaLaunchKernel((const void*)&k<B>, g, b, args, 0, s); });
  cudaFunction_t f;
  cudaGetFuncBySymbol(&f, (const void*)&k<B>);
  std::snprintf(name, sizeof name, "cuLaunchKernel param %d B", B);
  per(name, [&] { cuLaunchKernel((CUfunction)f, g.x, 1, 1, b.x, 1, 1, 0, (CUstream)s, args, nullptr); });
  // A one-node graph kept and launched again (Tessera's kept graphs, backend/runtime/kept_graphs.cpp):
  // unchanged, and with its parameters set before each launch (a byte changes every time).
  cudaGraph_t graph = nullptr;
  cudaGraphNode_t node = nullptr;
  cudaGraphExec_t exec = nullptr;
  cudaKernelNodeParams kp{};
  kp.func = (void*)&k<B>;
  kp.gridDim = g;
  kp.blockDim = b;
  kp.kernelParams = args;
  if (cudaGraphCreate(&graph, 0) != cudaSuccess || cudaGraphAddKernelNode(&node, graph, nullptr, 0, &kp) != cudaSuccess ||
      cudaGraphInstantiate(&exec, graph, 0) != cudaSuccess) {
    std::printf("graph launch: could not make the graph\n");
    return;
  }
  std::snprintf(name, sizeof name, "cudaGraphLaunch, kept graph, param %d B", B);
  per(name, [&] { cudaGraphLaunch(exec, s); });
  std::snprintf(name, sizeof name, "cudaGraphExecKernelNodeSetParams + launch, %d B", B);
  per(name, [&] {
    ++p.b[1];
    cudaGraphExecKernelNodeSetParams(exec, node, &kp);
    cudaGraphLaunch(exec, s);
  });
  if (cudaGetLastError() != cudaSuccess) std::printf("graph launch: an error\n");
  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(graph);
}
// Ten distinct kernels launched in turn (bench_capture's body: ten operations, each its own
// kernel, 32 blocks at 2^16 floats) against one of them repeated: whether the driver's cost per
// launch grows when the function changes from one launch to the next.
template <int I> __global__ void ten(P<256> p) { if (p.b[I] == 123 && threadIdx.x == 999) printf("x"); }
template <int... I> void distinct(cudaStream_t s, std::integer_sequence<int, I...>) {
  CUfunction f[sizeof...(I)];
  int j = 0;
  ((void)cudaGetFuncBySymbol(reinterpret_cast<cudaFunction_t*>(&f[j++]), (const void*)&ten<I>), ...);
  P<256> p{};
  void* args[] = {&p};
  unsigned i = 0;
  per("cuLaunchKernel, 10 kernels in turn, 256 B, 32 blocks", [&] {
    cuLaunchKernel(f[i++ % sizeof...(I)], 32, 1, 1, 256, 1, 1, 0, (CUstream)s, args, nullptr);
  });
  per("cuLaunchKernel, one of them repeated, 256 B, 32 blocks",
      [&] { cuLaunchKernel(f[0], 32, 1, 1, 256, 1, 1, 0, (CUstream)s, args, nullptr); });
}
// One launch per GPU per operation, n operations: host us per operation.
void several(int gpus, int n = 20000) {
  std::vector<cudaStream_t> st(gpus);
  std::vector<CUfunction> fn(gpus);
  for (int d = 0; d < gpus; ++d) {
    cudaSetDevice(d);
    cudaStreamCreateWithFlags(&st[d], cudaStreamNonBlocking);
    cudaGetFuncBySymbol(reinterpret_cast<cudaFunction_t*>(&fn[d]), (const void*)&k<16>);
  }
  P<16> p{};
  void* args[] = {&p};
  auto one = [&](int d) { cuLaunchKernel(fn[d], 64, 1, 1, 256, 1, 1, 0, (CUstream)st[d], args, nullptr); };
  auto sync_all = [&] {
    for (int d = 0; d < gpus; ++d) cudaSetDevice(d), cudaDeviceSynchronize();
  };
  // (1) one thread, GPUs in turn (cuLaunchKernel needs the stream's context current).
  sync_all();
  double t0 = now();
  for (int i = 0; i < n; ++i)
    for (int d = 0; d < gpus; ++d) cudaSetDevice(d), one(d);
  double t1 = now();
  sync_all();
  std::printf("%d GPUs, one thread in turn: host %.3f us per operation (%.3f per launch)\n", gpus, (t1 - t0) * 1e6 / n,
              (t1 - t0) * 1e6 / n / gpus);
  // (2) one thread per GPU, a spin barrier per operation; (3) the same threads, no barrier.
  for (const bool barrier : {true, false}) {
    std::atomic<int> arrived{0};
    std::atomic<bool> go{false};
    std::vector<std::thread> th;
    std::vector<double> took(gpus);
    for (int d = 0; d < gpus; ++d) {
      th.emplace_back([&, d] {
        cudaSetDevice(d);
        for (int i = 0; i < 1000; ++i) one(d);
        cudaDeviceSynchronize();
        arrived.fetch_add(1);
        while (!go.load()) {
        }
        const double a = now();
        for (int i = 0; i < n; ++i) {
          one(d);
          if (barrier) {  // generation barrier: every thread finishes operation i before i + 1
            const int target = gpus * (i + 2);
            arrived.fetch_add(1);
            while (arrived.load() < target) {
            }
          }
        }
        took[d] = now() - a;
      });
    }
    while (arrived.load() < gpus) {
    }
    go.store(true);
    for (auto& t : th) t.join();
    sync_all();
    double worst = 0;
    for (double t : took) worst = t > worst ? t : worst;
    std::printf("%d GPUs, one thread each, %s: host %.3f us per operation\n", gpus,
                barrier ? "a barrier per operation" : "no barrier", worst * 1e6 / n);
  }
}

int main() {
  cudaSetDevice(0);
  cudaStream_t s;
  cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
  sizes<16>(s, dim3(64), dim3(256));
  sizes<512>(s, dim3(64), dim3(256));
  distinct(s, std::make_integer_sequence<int, 10>{});
  int gpus = 0;
  cudaGetDeviceCount(&gpus);
  if (gpus > 1) several(gpus);
  return 0;
}
