#include <tessera/device.hpp>
#include <backend/runtime/runtime.hpp>
#include <cuda_runtime.h>
#include <chrono>
#include <cstdio>
#include <iostream>
#include <thread>
#include <vector>
namespace rt = tessera::detail::rt;
__global__ void fill(int* p, int n, int v) { int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) p[i] = v + i; }
__global__ void check(const int* p, int n, int v, int* bad) { int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n && p[i] != v + i) atomicAdd(bad, 1); }
__global__ void copyk(const int* src, int* dst, int n) { int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) dst[i] = src[i]; }
#define EXPECT(c) do { if (!(c)) { std::printf("FAIL %s:%d %s\n", __FILE__, __LINE__, #c); fails++; } } while (0)
int fails = 0;
double now() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }
int main() {
  tessera::print_topology(std::cout);
  auto gs = tessera::gpus();
  std::printf("gpus=%zu cuda_backend=%d\n", gs.size(), (int)tessera::cuda_backend());
  for (auto d : gs) {
    int id = d.id();
    rt::set_device(id);
    auto s = static_cast<cudaStream_t>(rt::stream(id));
    // launch failure
    fill<<<0, 1, 0, s>>>(nullptr, 0, 0);
    try { rt::check_launch(id, 3, "fill"); EXPECT(false); } catch (const tessera::backend_error& e) { std::printf("ok: %s\n", e.what()); }
    rt::check_launch(id, 0, "nothing");  // cleared
    // unified: kernel writes, host reads, host writes, prefetch, kernel checks
    const int n = 1 << 20;
    rt::buffer b(id, n * sizeof(int), tessera::memory::unified);
    rt::buffer bad(id, sizeof(int), tessera::memory::device);
    cudaMemsetAsync(bad.ptr, 0, 4, s);
    rt::make_resident(b);
    fill<<<(n + 255) / 256, 256, 0, s>>>((int*)b.ptr, n, 7); rt::check_launch(id, 0, "fill");
    int* h = (int*)rt::host_access(b);
    EXPECT(h[n - 1] == 7 + n - 1);
    for (int i = 0; i < n; ++i) h[i] = 100 + i;
    rt::make_resident(b);
    EXPECT(!b.host_touched.load());
    check<<<(n + 255) / 256, 256, 0, s>>>((int*)b.ptr, n, 100, (int*)bad.ptr); rt::check_launch(id, 0, "check");
    int nbad = -1; rt::copy_to_host(id, &nbad, 4, bad.ptr, 4, 4, 1);
    EXPECT(nbad == 0);
    // device memory host_access throws
    try { rt::host_access(bad); EXPECT(false); } catch (const tessera::invalid_argument& e) { std::printf("ok: %s\n", e.what()); }
    // timings
    double t0 = now(); for (int i = 0; i < 1000000; ++i) rt::set_device(id); double t1 = now();
    std::printf("set_device fast path: %.1f ns\n", (t1 - t0) * 1e3);
    t0 = now(); for (int i = 0; i < 1000000; ++i) rt::make_resident(b); t1 = now();
    std::printf("make_resident clear: %.1f ns\n", (t1 - t0) * 1e3);
    t0 = now(); for (int i = 0; i < 1000; ++i) rt::check_free(id, 1000); t1 = now();
    std::printf("check_free: %.2f us\n", (t1 - t0) * 1e3);
    t0 = now(); for (int i = 0; i < 1000000; ++i) (void)tessera::current_device(); t1 = now();
    std::printf("current_device: %.1f ns\n", (t1 - t0) * 1e3);
    const size_t big = size_t(1) << 30;
    t0 = now(); rt::buffer g(id, big, tessera::memory::device); t1 = now();
    std::printf("allocate 1 GiB device: %.2f ms\n", (t1 - t0) * 1e3);
    t0 = now(); { rt::buffer u(id, big, tessera::memory::unified); tessera::synchronize(d); t1 = now(); }
    std::printf("allocate+prefetch 1 GiB unified: %.2f ms\n", (t1 - t0) * 1e3);
    std::vector<char> host(big, 1);
    for (int rep = 0; rep < 2; ++rep) {
      t0 = now(); rt::copy_from_host(id, g.ptr, big, host.data(), big, big, 1); t1 = now();
      double t2 = now(); rt::copy_to_host(id, host.data(), big, g.ptr, big, big, 1); double t3 = now();
      std::printf("1 GiB H2D %.1f GB/s, D2H %.1f GB/s\n", big / (t1 - t0) / 1e9, big / (t3 - t2) / 1e9);
    }
    t0 = now(); for (int i = 0; i < 1000; ++i) rt::copy_to_host(id, &nbad, 4, bad.ptr, 4, 4, 1); t1 = now();
    std::printf("4-byte copy_to_host: %.2f us\n", (t1 - t0) * 1e3);
    rt::synchronize_device(id);
  }
  // concurrent transfers from several threads
  if (gs.size() >= 1) {
    std::vector<std::thread> th;
    for (int t = 0; t < 4; ++t) th.emplace_back([&, t] {
      int id = gs[t % gs.size()].id();
      rt::buffer b(id, 48 << 20, tessera::memory::device);
      std::vector<unsigned char> src(48 << 20), dst(48 << 20);
      for (size_t i = 0; i < src.size(); ++i) src[i] = (unsigned char)(i * 7 + t);
      for (int r = 0; r < 3; ++r) { rt::copy_from_host(id, b.ptr, 0, src.data(), 0, src.size(), 1); rt::copy_to_host(id, dst.data(), 0, b.ptr, 0, dst.size(), 1); EXPECT(src == dst); }
    });
    for (auto& x : th) x.join();
  }
  // peer access: kernel on gpu a reads gpu b memory
  for (auto a : gs) for (auto bdev : gs) if (rt::can_access_peer(a.id(), bdev.id())) {
    const int n = 1 << 16;
    rt::buffer src(bdev.id(), n * 4, tessera::memory::device), dst(a.id(), n * 4, tessera::memory::device), bad(a.id(), 4, tessera::memory::device);
    rt::set_device(bdev.id()); fill<<<n / 256, 256, 0, (cudaStream_t)rt::stream(bdev.id())>>>((int*)src.ptr, n, 5); rt::check_launch(bdev.id(), 0, "fill");
    rt::synchronize_device(bdev.id());
    rt::set_device(a.id()); auto s = (cudaStream_t)rt::stream(a.id());
    cudaMemsetAsync(bad.ptr, 0, 4, s);
    copyk<<<n / 256, 256, 0, s>>>((int*)src.ptr, (int*)dst.ptr, n); rt::check_launch(a.id(), 0, "peer copy");
    check<<<n / 256, 256, 0, s>>>((int*)dst.ptr, n, 5, (int*)bad.ptr); rt::check_launch(a.id(), 0, "check");
    int nbad = -1; rt::copy_to_host(a.id(), &nbad, 4, bad.ptr, 4, 4, 1); EXPECT(nbad == 0);
    std::printf("peer read cuda:%d <- cuda:%d ok\n", a.ordinal(), bdev.ordinal());
  }
  // DeviceScope on GPUs
  if (gs.size() > 1) {
    int before = rt::get_cuda_device();
    { tessera::DeviceScope sc(gs[1]); EXPECT(rt::get_cuda_device() == 1); EXPECT(tessera::current_device() == gs[1]); }
    EXPECT(rt::get_cuda_device() == before);
  }
  std::printf("%s (%d failures)\n", fails ? "FAILED" : "ALL OK", fails);
  return fails != 0;
}
