// SPDX-License-Identifier: Apache-2.0
// What a hand-written stencil reaches on this machine (no Tessera): the 2-D 5-point Jacobi on a
// 16384^2 float grid and the 3-D 7-point diffusion (T2 = T + 0.1 Ci lap T, ParallelStencil's
// diffusion3D) on 512^3, several kernels each, against cudaMemcpy and a 16-byte copy kernel of the
// same grid. Tells bench_stencil's item-1 targets (>= 0.93x memcpy) apart from the machine's limit
// and shows which scheme a generated stencil kernel should follow.
// Built and run by `bash scripts/gpu_check.sh stencil_probe` (nvcc -O3 -arch=sm_90), not by CMake.
#include <cuda_runtime.h>
#include <cstdio>
#include <cstdlib>
#include <cmath>
#include <algorithm>
#include <vector>

#define CK(x)                                                                   \
  do {                                                                          \
    cudaError_t e_ = (x);                                                       \
    if (e_ != cudaSuccess) {                                                    \
      std::printf("%s:%d %s\n", __FILE__, __LINE__, cudaGetErrorString(e_));    \
      std::exit(1);                                                             \
    }                                                                           \
  } while (0)

using ll = long long;

// ---- 2-D Jacobi: v[j][i] = 0.25 (u[j][i-1] + u[j][i+1] + u[j-1][i] + u[j+1][i]) over the interior.
__global__ void copy4(const float4* a, float4* b, ll n4) {
  for (ll i = blockIdx.x * ll(blockDim.x) + threadIdx.x; i < n4; i += ll(gridDim.x) * blockDim.x) b[i] = a[i];
}
__global__ void jac_textbook(const float* u, float* v, int n) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x + 1, j = blockIdx.y + 1;
  if (i >= n - 1) return;
  const ll c = i + ll(j) * n;
  v[c] = 0.25f * (u[c - 1] + u[c + 1] + u[c - n] + u[c + n]);
}
// 2-D blocks: BY rows of 32..128 threads, one point each.
__global__ void jac_block2d(const float* u, float* v, int n) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x + 1, j = blockIdx.y * blockDim.y + threadIdx.y + 1;
  if (i >= n - 1 || j >= n - 1) return;
  const ll c = i + ll(j) * n;
  v[c] = 0.25f * (__ldg(u + c - 1) + __ldg(u + c + 1) + __ldg(u + c - n) + __ldg(u + c + n));
}
// Marching along j: a thread per column walks CH rows, keeping rows j-1, j, j+1 in registers and
// taking its left and right neighbours from the lanes beside it (the warp's edge lanes load theirs);
// P rows loaded ahead per batch. chunk_fast: consecutive blocks take consecutive chunks of one
// column band (their shared halo rows then come from L2).
template <int P>
__global__ void jac_march(const float* __restrict__ u, float* __restrict__ v, int n, int ch, bool chunk_fast) {
  const int bx = chunk_fast ? blockIdx.y : blockIdx.x, by = chunk_fast ? blockIdx.x : blockIdx.y;
  const int i = bx * blockDim.x + threadIdx.x;  // every column, edges included, so lanes line up
  const int lane = threadIdx.x & 31;
  const int j0 = 1 + by * ch, j1 = min(j0 + ch, n - 1);
  const bool in = i < n;
  const int ic = in ? i : n - 1;
  float up = __ldg(u + ll(j0 - 1) * n + ic), c = __ldg(u + ll(j0) * n + ic);
  for (int j = j0; j < j1; j += P) {
    float dn[P], el[P], er[P];
#pragma unroll
    for (int k = 0; k < P; ++k) {
      const int r = min(j + k + 1, n - 1), rc = min(j + k, n - 1);
      dn[k] = __ldg(u + ll(r) * n + ic);
      el[k] = lane == 0 && ic > 0 ? __ldg(u + ll(rc) * n + ic - 1) : 0.f;
      er[k] = lane == 31 && ic < n - 1 ? __ldg(u + ll(rc) * n + ic + 1) : 0.f;
    }
#pragma unroll
    for (int k = 0; k < P; ++k) {
      float l = __shfl_up_sync(0xffffffffu, c, 1), r = __shfl_down_sync(0xffffffffu, c, 1);
      if (lane == 0) l = el[k];
      if (lane == 31) r = er[k];
      if (in && i > 0 && i < n - 1 && j + k < j1) v[ll(j + k) * n + i] = 0.25f * (l + r + up + dn[k]);
      up = c;
      c = dn[k];
    }
  }
}
// The same with 4 columns per thread as float4 (n a multiple of 4).
template <int P>
__global__ void jac_march4(const float* __restrict__ u, float* __restrict__ v, int n, int ch, bool chunk_fast) {
  const int bx = chunk_fast ? blockIdx.y : blockIdx.x, by = chunk_fast ? blockIdx.x : blockIdx.y;
  const int q = bx * blockDim.x + threadIdx.x, n4 = n / 4;
  const int lane = threadIdx.x & 31;
  const int j0 = 1 + by * ch, j1 = min(j0 + ch, n - 1);
  const bool in = q < n4;
  const int qc = in ? q : n4 - 1;
  const float4* u4 = reinterpret_cast<const float4*>(u);
  float4* v4 = reinterpret_cast<float4*>(v);
  float4 up = __ldg(u4 + ll(j0 - 1) * n4 + qc), c = __ldg(u4 + ll(j0) * n4 + qc);
  for (int j = j0; j < j1; j += P) {
    float4 dn[P];
    float el[P], er[P];
#pragma unroll
    for (int k = 0; k < P; ++k) {
      const int r = min(j + k + 1, n - 1), rc = min(j + k, n - 1);
      dn[k] = __ldg(u4 + ll(r) * n4 + qc);
      el[k] = lane == 0 && qc > 0 ? __ldg(u + ll(rc) * n + 4 * qc - 1) : 0.f;
      er[k] = lane == 31 && qc < n4 - 1 ? __ldg(u + ll(rc) * n + 4 * qc + 4) : 0.f;
    }
#pragma unroll
    for (int k = 0; k < P; ++k) {
      float l = __shfl_up_sync(0xffffffffu, c.w, 1), r = __shfl_down_sync(0xffffffffu, c.x, 1);
      if (lane == 0) l = el[k];
      if (lane == 31) r = er[k];
      if (in && j + k < j1) {
        float4 o;
        o.x = 0.25f * (l + c.y + up.x + dn[k].x);
        o.y = 0.25f * (c.x + c.z + up.y + dn[k].y);
        o.z = 0.25f * (c.y + c.w + up.z + dn[k].z);
        o.w = 0.25f * (c.z + r + up.w + dn[k].w);
        float4* p = v4 + ll(j + k) * n4 + q;
        if (q == 0 || q == n4 - 1) {  // the first and last columns are not interior
          float* s = reinterpret_cast<float*>(p);
          if (q != 0) s[0] = o.x;
          s[1] = o.y, s[2] = o.z;
          if (q != n4 - 1) s[3] = o.w;
        } else {
          *p = o;
        }
      }
      up = c;
      c = dn[k];
    }
  }
}

// Tiles: a thread takes W float4 columns (W x 128 threads apart... consecutive lanes) and R rows,
// loading all R + 2 rows at once (no loop-carried loads), neighbours along i from the lanes beside it.
template <int R, int W>
__global__ void jac_tile(const float* __restrict__ u, float* __restrict__ v, int n) {
  const int n4 = n / 4, lane = threadIdx.x & 31;
  const int j0 = 1 + blockIdx.y * R;
  const float4* u4 = reinterpret_cast<const float4*>(u);
  float4* v4 = reinterpret_cast<float4*>(v);
  float4 a[W][R + 2];
  float el[W][R], er[W][R];
  int qs[W];
#pragma unroll
  for (int w = 0; w < W; ++w) {
    const int q = (blockIdx.x * W + w) * blockDim.x + threadIdx.x;
    const int qc = q < n4 ? q : n4 - 1;
    qs[w] = q;
#pragma unroll
    for (int r = 0; r < R + 2; ++r) a[w][r] = __ldg(u4 + ll(min(j0 - 1 + r, n - 1)) * n4 + qc);
#pragma unroll
    for (int r = 0; r < R; ++r) {
      const ll row = ll(min(j0 + r, n - 1)) * n;
      el[w][r] = lane == 0 && qc > 0 ? __ldg(u + row + 4 * qc - 1) : 0.f;
      er[w][r] = lane == 31 && qc < n4 - 1 ? __ldg(u + row + 4 * qc + 4) : 0.f;
    }
  }
#pragma unroll
  for (int w = 0; w < W; ++w) {
    const int q = qs[w];
#pragma unroll
    for (int r = 0; r < R; ++r) {
      const float4 c = a[w][r + 1], up = a[w][r], dn = a[w][r + 2];
      float l = __shfl_up_sync(0xffffffffu, c.w, 1), rr = __shfl_down_sync(0xffffffffu, c.x, 1);
      if (lane == 0) l = el[w][r];
      if (lane == 31) rr = er[w][r];
      if (q < n4 && j0 + r < n - 1) {
        float4 o;
        o.x = 0.25f * (l + c.y + up.x + dn.x);
        o.y = 0.25f * (c.x + c.z + up.y + dn.y);
        o.z = 0.25f * (c.y + c.w + up.z + dn.z);
        o.w = 0.25f * (c.z + rr + up.w + dn.w);
        float4* p = v4 + ll(j0 + r) * n4 + q;
        if (q == 0 || q == n4 - 1) {
          float* s = reinterpret_cast<float*>(p);
          if (q != 0) s[0] = o.x;
          s[1] = o.y, s[2] = o.z;
          if (q != n4 - 1) s[3] = o.w;
        } else {
          *p = o;
        }
      }
    }
  }
}

// ---- 3-D diffusion over the interior of an n^3 grid (x fastest).
template <class T>
__global__ void dif_textbook(const T* __restrict__ t, const T* __restrict__ ci, T* __restrict__ t2, int n) {
  const int x = blockIdx.x * blockDim.x + threadIdx.x + 1, y = blockIdx.y * blockDim.y + threadIdx.y + 1,
            z = blockIdx.z + 1;
  if (x >= n - 1 || y >= n - 1) return;
  const ll s = n, p = ll(n) * n, c = x + y * s + z * p;
  const T tc = t[c];
  t2[c] = tc + T(0.1) * ci[c] * (t[c - 1] + t[c + 1] + t[c - s] + t[c + s] + t[c - p] + t[c + p] - T(6) * tc);
}
// Marching along z: a block of 32 x BY threads walks a chunk of planes; z neighbours in registers,
// x neighbours from lanes (edge lanes load), y neighbours loaded (from L1: the block loaded that
// plane one batch before as its "down" plane), P planes ahead per batch.
template <class T, int P>
__global__ void dif_march(const T* __restrict__ t, const T* __restrict__ ci, T* __restrict__ t2, int n, int ch) {
  const int x = blockIdx.x * 32 + threadIdx.x, y = blockIdx.y * blockDim.y + threadIdx.y;
  const int lane = threadIdx.x;
  const int z0 = 1 + blockIdx.z * ch, z1 = min(z0 + ch, n - 1);
  const bool in = x < n && y < n, inner = in && x > 0 && x < n - 1 && y > 0 && y < n - 1;
  const int xc = min(x, n - 1), yc = min(y, n - 1);
  const ll s = n, p = ll(n) * n, base = xc + yc * s;
  T up = t[base + (z0 - 1) * p], c = t[base + z0 * p];
  for (int z = z0; z < z1; z += P) {
    T dn[P], ys[P], yn[P], el[P], er[P], k[P];
#pragma unroll
    for (int q = 0; q < P; ++q) {
      const ll zc = min(z + q, n - 2), zd = zc + 1, o = base + zc * p;
      dn[q] = t[base + zd * p];
      k[q] = inner ? ci[o] : T(0);
      ys[q] = inner ? t[o - s] : T(0);
      yn[q] = inner ? t[o + s] : T(0);
      el[q] = lane == 0 && xc > 0 ? t[o - 1] : T(0);
      er[q] = lane == 31 && xc < n - 1 ? t[o + 1] : T(0);
    }
#pragma unroll
    for (int q = 0; q < P; ++q) {
      T l = __shfl_up_sync(0xffffffffu, c, 1), r = __shfl_down_sync(0xffffffffu, c, 1);
      if (lane == 0) l = el[q];
      if (lane == 31) r = er[q];
      if (inner && z + q < z1)
        t2[base + ll(z + q) * p] = c + T(0.1) * k[q] * (l + r + ys[q] + yn[q] + up + dn[q] - T(6) * c);
      up = c;
      c = dn[q];
    }
  }
}

// The march with V consecutive x per thread (a vector of V T's), for float.
template <class T, int V, int P>
__global__ void dif_march_v(const T* __restrict__ t, const T* __restrict__ ci, T* __restrict__ t2, int n, int ch) {
  struct alignas(sizeof(T) * V) vec { T e[V]; };
  const int lane = threadIdx.x, x0 = (blockIdx.x * 32 + lane) * V, y = blockIdx.y * blockDim.y + threadIdx.y;
  const int z0 = 1 + blockIdx.z * ch, z1 = min(z0 + ch, n - 1);
  const bool in = x0 < n && y < n, yin = in && y > 0 && y < n - 1;
  const int xc = min(x0, n - V), yc = min(y, n - 1);
  const ll s = n, p = ll(n) * n, base = xc + yc * s;
  auto ld = [&](const T* a, ll o) { return *reinterpret_cast<const vec*>(a + o); };
  vec up = ld(t, base + (z0 - 1) * p), c = ld(t, base + z0 * p);
  for (int z = z0; z < z1; z += P) {
    vec dn[P], ys[P], yn[P], k[P];
    T el[P], er[P];
#pragma unroll
    for (int q = 0; q < P; ++q) {
      const ll zc = min(z + q, n - 2), o = base + zc * p;
      dn[q] = ld(t, o + p);
      k[q] = yin ? ld(ci, o) : vec{};
      ys[q] = yin ? ld(t, o - s) : vec{};
      yn[q] = yin ? ld(t, o + s) : vec{};
      el[q] = lane == 0 && xc > 0 ? t[o - 1] : T(0);
      er[q] = lane == 31 && xc + V < n ? t[o + V] : T(0);
    }
#pragma unroll
    for (int q = 0; q < P; ++q) {
      T l = __shfl_up_sync(0xffffffffu, c.e[V - 1], 1), r = __shfl_down_sync(0xffffffffu, c.e[0], 1);
      if (lane == 0) l = el[q];
      if (lane == 31) r = er[q];
      if (yin && z + q < z1) {
        T* out = t2 + base + ll(z + q) * p;
#pragma unroll
        for (int e = 0; e < V; ++e) {
          const int x = xc + e;
          const T xl = e == 0 ? l : c.e[e - 1], xr = e == V - 1 ? r : c.e[e + 1];
          if (x > 0 && x < n - 1)
            out[e] = c.e[e] + T(0.1) * k[q].e[e] * (xl + xr + ys[q].e[e] + yn[q].e[e] + up.e[e] + dn[q].e[e] - T(6) * c.e[e]);
        }
      }
      up = c;
      c = dn[q];
    }
  }
}

// ---- timing
struct timer {
  cudaEvent_t a, b;
  timer() { CK(cudaEventCreate(&a)); CK(cudaEventCreate(&b)); }
  template <class F> double ms(F f, int reps = 20) {
    for (int i = 0; i < 3; ++i) f();
    CK(cudaDeviceSynchronize());
    std::vector<float> t;
    for (int r = 0; r < 5; ++r) {
      CK(cudaEventRecord(a));
      for (int i = 0; i < reps; ++i) f();
      CK(cudaEventRecord(b));
      CK(cudaEventSynchronize(b));
      float m = 0;
      CK(cudaEventElapsedTime(&m, a, b));
      t.push_back(m / reps);
    }
    CK(cudaGetLastError());
    std::sort(t.begin(), t.end());
    return t[2];
  }
};

int main() {
  timer tm;
  // 2-D
  {
    const int n = 16384;
    const size_t bytes = size_t(n) * n * 4;
    float *u, *v;
    CK(cudaMalloc(&u, bytes)); CK(cudaMalloc(&v, bytes));
    std::vector<float> h(size_t(n) * n);
    for (size_t i = 0; i < h.size(); ++i) h[i] = float((i * 2654435761u) % 1000) * 1e-3f;
    CK(cudaMemcpy(u, h.data(), bytes, cudaMemcpyHostToDevice));
    const double mc = tm.ms([&] { CK(cudaMemcpyAsync(v, u, bytes, cudaMemcpyDeviceToDevice)); });
    const double gb = 2.0 * bytes / 1e9;
    std::printf("2-D %d^2 float: cudaMemcpy %.3f ms = %.1f GB/s (read + write)\n", n, mc, gb / mc * 1e3);
    auto show = [&](const char* name, double ms) {
      std::printf("  %-44s %.3f ms  %.1f GB/s  %.3fx memcpy\n", name, ms, gb / ms * 1e3, mc / ms);
    };
    show("copy kernel float4, 132x16 blocks x256",
         tm.ms([&] { copy4<<<132 * 16, 256>>>((const float4*)u, (float4*)v, ll(bytes / 16)); }));
    show("copy kernel float4, one per thread x256",
         tm.ms([&] { copy4<<<unsigned(bytes / 16 / 256), 256>>>((const float4*)u, (float4*)v, ll(bytes / 16)); }));
    // reference for correctness: textbook into v, compare others against it
    jac_textbook<<<dim3((n - 2 + 255) / 256, n - 2), 256>>>(u, v, n);
    CK(cudaDeviceSynchronize());
    std::vector<float> ref(h.size()), got(h.size());
    CK(cudaMemcpy(ref.data(), v, bytes, cudaMemcpyDeviceToHost));
    auto check = [&](const char* name) {
      CK(cudaDeviceSynchronize());
      CK(cudaMemcpy(got.data(), v, bytes, cudaMemcpyDeviceToHost));
      size_t bad = 0;
      for (int j = 1; j < n - 1; ++j)
        for (int i = 1; i < n - 1; ++i)
          if (got[size_t(j) * n + i] != ref[size_t(j) * n + i]) ++bad;
      if (bad) std::printf("  %s: %zu WRONG values\n", name, bad);
      CK(cudaMemset(v, 0, bytes));
    };
    show("textbook, 256 x 1", tm.ms([&] { jac_textbook<<<dim3((n - 2 + 255) / 256, n - 2), 256>>>(u, v, n); }));
    for (int by : {2, 4, 8}) {
      for (int bx : {32, 64, 128}) {
        const dim3 b(bx, by), g((n - 2 + bx - 1) / bx, (n - 2 + by - 1) / by);
        char name[64];
        std::snprintf(name, sizeof name, "2-D blocks %d x %d", bx, by);
        CK(cudaMemset(v, 0, bytes));
        jac_block2d<<<g, b>>>(u, v, n);
        check(name);
        show(name, tm.ms([&] { jac_block2d<<<g, b>>>(u, v, n); }));
      }
    }
    auto march = [&](auto kern, const char* what, int per, int bx, int ch, bool fast) {
      const int bands = (n / per + bx - 1) / bx, chunks = (n - 2 + ch - 1) / ch;
      const dim3 g = fast ? dim3(chunks, bands) : dim3(bands, chunks);
      char name[96];
      std::snprintf(name, sizeof name, "%s x%d, %d rows%s", what, bx, ch, fast ? ", chunks fast" : "");
      CK(cudaMemset(v, 0, bytes));
      kern<<<g, bx>>>(u, v, n, ch, fast);
      check(name);
      show(name, tm.ms([&] { kern<<<g, bx>>>(u, v, n, ch, fast); }));
    };
    for (bool fast : {false})
      for (int ch : {32, 128}) {
        march(jac_march<1>, "march P=1", 1, 128, ch, fast);
        march(jac_march<4>, "march P=4", 1, 128, ch, fast);
        march(jac_march<8>, "march P=8", 1, 128, ch, fast);
        march(jac_march4<1>, "march float4 P=1", 4, 128, ch, fast);
        march(jac_march4<2>, "march float4 P=2", 4, 128, ch, fast);
        march(jac_march4<4>, "march float4 P=4", 4, 128, ch, fast);
      }
    march(jac_march<4>, "march P=4", 1, 256, 64, true);
    march(jac_march4<2>, "march float4 P=2", 4, 64, 64, true);
    march(jac_march4<2>, "march float4 P=2", 4, 256, 64, true);
    march(jac_march4<2>, "march float4 P=2", 4, 128, 512, true);
    auto tile = [&](auto kern, const char* what, int rows, int w, int bx) {
      const dim3 g((n / 4 + w * bx - 1) / (w * bx), (n - 2 + rows - 1) / rows);
      char name[96];
      std::snprintf(name, sizeof name, "%s x%d", what, bx);
      CK(cudaMemset(v, 0, bytes));
      kern<<<g, bx>>>(u, v, n);
      check(name);
      show(name, tm.ms([&] { kern<<<g, bx>>>(u, v, n); }));
    };
    tile(jac_tile<2, 1>, "tile float4, 2 rows", 2, 1, 128);
    tile(jac_tile<4, 1>, "tile float4, 4 rows", 4, 1, 128);
    tile(jac_tile<8, 1>, "tile float4, 8 rows", 8, 1, 128);
    tile(jac_tile<16, 1>, "tile float4, 16 rows", 16, 1, 128);
    tile(jac_tile<4, 2>, "tile 2 float4, 4 rows", 4, 2, 128);
    tile(jac_tile<8, 2>, "tile 2 float4, 8 rows", 8, 2, 128);
    tile(jac_tile<4, 1>, "tile float4, 4 rows", 4, 1, 256);
    tile(jac_tile<8, 1>, "tile float4, 8 rows", 8, 1, 256);
    tile(jac_tile<8, 1>, "tile float4, 8 rows", 8, 1, 64);
    CK(cudaFree(u)); CK(cudaFree(v));
  }
  // 3-D
  auto three = [&]<class T>(T, const char* tn) {
    const int n = 512;
    const size_t cells = size_t(n) * n * n, bytes = cells * sizeof(T);
    T *t, *ci, *t2;
    CK(cudaMalloc(&t, bytes)); CK(cudaMalloc(&ci, bytes)); CK(cudaMalloc(&t2, bytes));
    std::vector<T> h(cells);
    for (size_t i = 0; i < cells; ++i) h[i] = T((i * 2654435761u) % 1000) * T(1e-3);
    CK(cudaMemcpy(t, h.data(), bytes, cudaMemcpyHostToDevice));
    for (size_t i = 0; i < cells; ++i) h[i] = T(1) + T((i * 40503u) % 7) * T(0.1);
    CK(cudaMemcpy(ci, h.data(), bytes, cudaMemcpyHostToDevice));
    const double mc = tm.ms([&] { CK(cudaMemcpyAsync(t2, t, bytes, cudaMemcpyDeviceToDevice)); }, 10);
    std::printf("3-D %d^3 %s: cudaMemcpy %.3f ms = %.1f GB/s (read + write)\n", n, tn, mc, 2.0 * bytes / mc / 1e6);
    auto show = [&](const char* name, double ms) {
      // T_eff = 3 cells / t against memcpy's 2 cells / t
      std::printf("  %-44s %.3f ms  T_eff %.1f GB/s  %.3fx memcpy\n", name, ms, 3.0 * bytes / ms / 1e6,
                  (3.0 * bytes / ms) / (2.0 * bytes / mc));
    };
    CK(cudaMemset(t2, 0, bytes));
    dif_textbook<T><<<dim3((n - 2 + 31) / 32, (n - 2 + 3) / 4, n - 2), dim3(32, 4)>>>(t, ci, t2, n);
    CK(cudaDeviceSynchronize());
    std::vector<T> ref(cells), got(cells);
    CK(cudaMemcpy(ref.data(), t2, bytes, cudaMemcpyDeviceToHost));
    auto check = [&](const char* name) {
      CK(cudaDeviceSynchronize());
      CK(cudaMemcpy(got.data(), t2, bytes, cudaMemcpyDeviceToHost));
      size_t bad = 0;
      for (size_t i = 0; i < cells; ++i)
        if (got[i] != ref[i] && std::abs(double(got[i]) - double(ref[i])) > 1e-5 * (1 + std::abs(double(ref[i])))) ++bad;
      if (bad) std::printf("  %s: %zu WRONG values\n", name, bad);
      CK(cudaMemset(t2, 0, bytes));
    };
    for (int by : {4, 8}) {
      const dim3 b(32, by), g((n - 2 + 31) / 32, (n - 2 + by - 1) / by, n - 2);
      char name[64];
      std::snprintf(name, sizeof name, "textbook 32 x %d", by);
      show(name, tm.ms([&] { dif_textbook<T><<<g, b>>>(t, ci, t2, n); }, 10));
    }
    auto march = [&](auto kern, const char* what, int by, int ch) {
      const dim3 b(32, by), g(n / 32, (n + by - 1) / by, (n - 2 + ch - 1) / ch);
      char name[96];
      std::snprintf(name, sizeof name, "%s 32 x %d, %d planes", what, by, ch);
      CK(cudaMemset(t2, 0, bytes));
      kern<<<g, b>>>(t, ci, t2, n, ch);
      check(name);
      show(name, tm.ms([&] { kern<<<g, b>>>(t, ci, t2, n, ch); }, 10));
    };
    for (int by : {4, 8, 16})
      for (int ch : {16, 64}) {
        march(dif_march<T, 1>, "march P=1", by, ch);
        march(dif_march<T, 2>, "march P=2", by, ch);
        march(dif_march<T, 4>, "march P=4", by, ch);
      }
    if constexpr (sizeof(T) == 4) {
      auto marchv = [&](auto kern, const char* what, int v, int by, int ch) {
        const dim3 b(32, by), g(n / 32 / v, (n + by - 1) / by, (n - 2 + ch - 1) / ch);
        char name[96];
        std::snprintf(name, sizeof name, "%s 32 x %d, %d planes", what, by, ch);
        CK(cudaMemset(t2, 0, bytes));
        kern<<<g, b>>>(t, ci, t2, n, ch);
        check(name);
        show(name, tm.ms([&] { kern<<<g, b>>>(t, ci, t2, n, ch); }, 10));
      };
      for (int by : {4, 8})
        for (int ch : {16, 64}) {
          marchv(dif_march_v<T, 2, 1>, "march float2 P=1", 2, by, ch);
          marchv(dif_march_v<T, 2, 2>, "march float2 P=2", 2, by, ch);
          marchv(dif_march_v<T, 4, 1>, "march float4 P=1", 4, by, ch);
        }
    }
    CK(cudaFree(t)); CK(cudaFree(ci)); CK(cudaFree(t2));
  };
  three(0.0f, "float");
  three(0.0, "double");
  return 0;
}
