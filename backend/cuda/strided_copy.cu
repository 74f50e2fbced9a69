// SPDX-License-Identifier: Apache-2.0
// The strided copy of strided_copy.hpp: one grid-stride kernel per element size, through the one
// launch helper.
#include <backend/cuda/launch.cuh>
#include <backend/cuda/strided_copy.hpp>

#include <string>

namespace tessera::detail::cuda {
namespace {

template <int Bytes>
struct alignas(Bytes) element {
  unsigned char b[Bytes];
};

template <int Bytes>
struct CopyTask {
  const element<Bytes>* src;
  element<Bytes>* dst;
  std::int64_t ext[3], sst[3], dst_st[3];
  std::int64_t n;
};

template <int Bytes>
__global__ void __launch_bounds__(256) strided_copy_kernel(const CopyTask<Bytes> t) {
  for (std::int64_t i = blockIdx.x * std::int64_t(256) + threadIdx.x; i < t.n; i += std::int64_t(gridDim.x) * 256) {
    std::int64_t r = i, s = 0, d = 0;
#pragma unroll
    for (int k = 0; k < 3; ++k) {
      const std::int64_t x = r % t.ext[k];
      r /= t.ext[k];
      s += x * t.sst[k];
      d += x * t.dst_st[k];
    }
    t.dst[d] = t.src[s];
  }
}

template <int Bytes>
void copy_as(int device, const void* src, const std::int64_t* sst, void* dst, const std::int64_t* dst_st,
             const std::int64_t* ext, int nd) {
  CopyTask<Bytes> t{static_cast<const element<Bytes>*>(src), static_cast<element<Bytes>*>(dst), {1, 1, 1}, {0, 0, 0},
                    {0, 0, 0}, 1};
  for (int k = 0; k < nd; ++k) t.ext[k] = ext[k], t.sst[k] = sst[k], t.dst_st[k] = dst_st[k], t.n *= ext[k];
  if (t.n == 0) return;
  launch(&strided_copy_kernel<Bytes>, grid_blocks(t.n, 256, sm_count(device) * 32), 256, t, device, 0,
         "strided_copy_kernel");
}

// Rows of `width` elements: blocks along a row (x) and over the rows (y), grid-stride in both, so
// one long row spreads over the SMs as well as many short ones.
template <int Bytes>
struct PitchedTask {
  const element<Bytes>* src;
  element<Bytes>* dst;
  std::int64_t width, height, src_pitch, dst_pitch;  // in elements
};

template <int Bytes>
__global__ void __launch_bounds__(256) pitched_copy_kernel(const PitchedTask<Bytes> t) {
  for (std::int64_t r = blockIdx.y; r < t.height; r += gridDim.y) {
    const element<Bytes>* s = t.src + r * t.src_pitch;
    element<Bytes>* d = t.dst + r * t.dst_pitch;
    for (std::int64_t i = blockIdx.x * std::int64_t(256) + threadIdx.x; i < t.width; i += std::int64_t(gridDim.x) * 256)
      d[i] = s[i];
  }
}

template <int Bytes>
void pitched_as(int device, void* stream, void* dst, std::size_t dst_pitch, const void* src, std::size_t src_pitch,
                std::size_t width, std::size_t height) {
  const PitchedTask<Bytes> t{static_cast<const element<Bytes>*>(src), static_cast<element<Bytes>*>(dst),
                             static_cast<std::int64_t>(width / Bytes), static_cast<std::int64_t>(height),
                             static_cast<std::int64_t>(src_pitch / Bytes), static_cast<std::int64_t>(dst_pitch / Bytes)};
  // About 16 blocks per SM in all: along the row as far as it is long, the rest over the rows.
  const index_t cap = sm_count(device) * 16;
  const index_t along = (t.width + 255) / 256;
  const index_t x = along < cap ? along : cap;
  index_t y = cap / x;
  if (y > t.height) y = t.height;
  if (y > 65535) y = 65535;
  launch(&pitched_copy_kernel<Bytes>, dim3(static_cast<unsigned>(x), static_cast<unsigned>(y < 1 ? 1 : y)), 256, t,
         device, 0, "pitched_copy_kernel", stream);
}

// The pieces of gather_rows in elements of Bytes, each with its count of chunks of gather_chunk
// elements; virtual chunk q is chunk q / n of piece q % n, so consecutive blocks read different
// sources.
constexpr int gather_threads = 256, gather_unroll = 4, gather_chunk = gather_threads * gather_unroll;
template <int Bytes>
struct GatherTask {
  struct piece {
    const element<Bytes>* src;
    element<Bytes>* dst;
    std::int64_t width, src_pitch, dst_pitch, count, chunks;
  } p[gather_max_pieces];
  int n;
  std::int64_t most;  // the largest chunk count
};

template <int Bytes>
__global__ void __launch_bounds__(gather_threads) gather_kernel(const GatherTask<Bytes> t) {
  const std::int64_t total = t.most * t.n;
  for (std::int64_t q = blockIdx.x; q < total; q += gridDim.x) {
    const auto& p = t.p[q % t.n];
    const std::int64_t j = q / t.n;
    if (j >= p.chunks) continue;
    const std::int64_t first = j * gather_chunk + threadIdx.x;
    element<Bytes> v[gather_unroll];
    // Every load of the chunk before any store: several reads over NVLink in flight per thread.
#pragma unroll
    for (int u = 0; u < gather_unroll; ++u) {
      const std::int64_t e = first + u * gather_threads;
      if (e < p.count) v[u] = p.src[(e / p.width) * p.src_pitch + e % p.width];
    }
#pragma unroll
    for (int u = 0; u < gather_unroll; ++u) {
      const std::int64_t e = first + u * gather_threads;
      if (e < p.count) p.dst[(e / p.width) * p.dst_pitch + e % p.width] = v[u];
    }
  }
}

template <int Bytes>
void gather_as(int device, void* stream, const gather_piece* pieces, int n, int blocks_per_sm) {
  GatherTask<Bytes> t{};
  t.n = 0;
  t.most = 0;
  for (int i = 0; i < n; ++i) {
    const gather_piece& g = pieces[i];
    if (g.width == 0 || g.height == 0) continue;
    auto& p = t.p[t.n++];
    p.src = static_cast<const element<Bytes>*>(g.src);
    p.dst = static_cast<element<Bytes>*>(g.dst);
    p.width = static_cast<std::int64_t>(g.width / Bytes);
    p.src_pitch = static_cast<std::int64_t>(g.src_pitch / Bytes);
    p.dst_pitch = static_cast<std::int64_t>(g.dst_pitch / Bytes);
    p.count = p.width * static_cast<std::int64_t>(g.height);
    p.chunks = (p.count + gather_chunk - 1) / gather_chunk;
    if (p.chunks > t.most) t.most = p.chunks;
  }
  if (t.n == 0) return;
  const index_t work = t.most * t.n;
  const int per_sm = blocks_per_sm < 1 ? 1 : blocks_per_sm > 8 ? 8 : blocks_per_sm;
  const index_t cap = sm_count(device) * static_cast<index_t>(per_sm);
  launch(&gather_kernel<Bytes>, dim3(static_cast<unsigned>(work < cap ? work : cap)), gather_threads, t, device, 0,
         "gather_kernel", stream);
}

}  // namespace

void gather_rows(int device, void* stream, const gather_piece* pieces, int n, int blocks_per_sm) {
  // More pieces than one kernel's parameters hold: one kernel per group of them.
  for (int first = 0; first < n; first += gather_max_pieces) {
    const gather_piece* g = pieces + first;
    const int k = n - first < gather_max_pieces ? n - first : gather_max_pieces;
    auto all = [&](std::size_t b) {
      for (int i = 0; i < k; ++i)
        if (g[i].width % b || g[i].src_pitch % b || g[i].dst_pitch % b ||
            reinterpret_cast<std::uintptr_t>(g[i].src) % b || reinterpret_cast<std::uintptr_t>(g[i].dst) % b)
          return false;
      return true;
    };
    if (all(16)) gather_as<16>(device, stream, g, k, blocks_per_sm);
    else if (all(8)) gather_as<8>(device, stream, g, k, blocks_per_sm);
    else if (all(4)) gather_as<4>(device, stream, g, k, blocks_per_sm);
    else if (all(2)) gather_as<2>(device, stream, g, k, blocks_per_sm);
    else gather_as<1>(device, stream, g, k, blocks_per_sm);
  }
}

bool pitched_copy(int device, void* stream, void* dst, std::size_t dst_pitch, const void* src, std::size_t src_pitch,
                  std::size_t width, std::size_t height) {
  if (width == 0 || height == 0) return true;
  const auto all = [&](std::size_t b) {
    return width % b == 0 && dst_pitch % b == 0 && src_pitch % b == 0 && reinterpret_cast<std::uintptr_t>(dst) % b == 0 &&
           reinterpret_cast<std::uintptr_t>(src) % b == 0;
  };
  if (all(16)) pitched_as<16>(device, stream, dst, dst_pitch, src, src_pitch, width, height);
  else if (all(8)) pitched_as<8>(device, stream, dst, dst_pitch, src, src_pitch, width, height);
  else if (all(4)) pitched_as<4>(device, stream, dst, dst_pitch, src, src_pitch, width, height);
  else return false;
  return true;
}

void strided_copy(int device, const void* src, const std::int64_t* src_st, void* dst, const std::int64_t* dst_st,
                  const std::int64_t* ext, int nd, int elem_bytes) {
  if (nd < 1 || nd > 3) throw invalid_argument("tessera: internal: strided_copy of " + std::to_string(nd) + " dims");
  switch (elem_bytes) {
    case 4: return copy_as<4>(device, src, src_st, dst, dst_st, ext, nd);
    case 8: return copy_as<8>(device, src, src_st, dst, dst_st, ext, nd);
    case 16: return copy_as<16>(device, src, src_st, dst, dst_st, ext, nd);
    default: throw invalid_argument("tessera: internal: strided_copy of " + std::to_string(elem_bytes) + "-byte elements");
  }
}

}  // namespace tessera::detail::cuda
