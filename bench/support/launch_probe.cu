// SPDX-License-Identifier: Apache-2.0
// The host cost of a bare kernel launch on this machine (no Tessera): <<<>>>, cudaLaunchKernel and
// the driver's cuLaunchKernel, at 16 and 512 parameter bytes, host microseconds per launch over
// 20000 launches. The floor under bench_capture's plain launches. Built and run by
// `bash scripts/gpu_check.sh launch` (nvcc ... -lcuda), not by CMake.
#include <cuda.h>
#include <cuda_runtime.h>
#include <chrono>
#include <cstdio>
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
}
int main() {
  cudaSetDevice(0);
  cudaStream_t s;
  cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
  sizes<16>(s, dim3(64), dim3(256));
  sizes<512>(s, dim3(64), dim3(256));
  return 0;
}
