// SPDX-License-Identifier: Apache-2.0
// The strided copy of strided_copy.hpp: one grid-stride kernel per element size, through the one
// launch helper.
#include <backend/cuda/launch.cuh>
#include <backend/cuda/strided_copy.hpp>

#include <algorithm>
#include <string>
#include <type_traits>

namespace tessera::detail::cuda {
namespace {

// The word each kernel moves: a vector type, so that one register holds 4 bytes (a struct of
// chars held the 16-byte words a byte per register: 98 registers in the gather kernel).
template <int Bytes>
struct word;
template <>
struct word<1> { using type = unsigned char; };
template <>
struct word<2> { using type = unsigned short; };
template <>
struct word<4> { using type = unsigned; };
template <>
struct word<8> { using type = uint2; };
template <>
struct word<16> { using type = uint4; };
template <int Bytes>
using element = typename word<Bytes>::type;

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
                std::size_t width, std::size_t height, int blocks_per_sm) {
  const PitchedTask<Bytes> t{static_cast<const element<Bytes>*>(src), static_cast<element<Bytes>*>(dst),
                             static_cast<std::int64_t>(width / Bytes), static_cast<std::int64_t>(height),
                             static_cast<std::int64_t>(src_pitch / Bytes), static_cast<std::int64_t>(dst_pitch / Bytes)};
  // About blocks_per_sm (default 16) blocks per SM in all: along the row as far as it is long, the
  // rest over the rows.
  const index_t cap = sm_count(device) * (blocks_per_sm > 0 ? blocks_per_sm : 16);
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

// Chunk c of piece p, by the block's threads: every load before any store, so that several reads
// over NVLink are in flight per thread. One division per item: the next element of a thread is
// gather_threads further on, one row further at most where the rows are at least that wide (64-bit
// divisions per element held 96-106 registers, so 2 blocks per SM where 4 or 8 were asked for).
template <int Bytes>
__device__ __forceinline__ void gather_item(const typename GatherTask<Bytes>::piece& p, std::int64_t c) {
  const std::int64_t first = c * gather_chunk + threadIdx.x;
  const std::int64_t row0 = first / p.width, col0 = first % p.width;
  const auto next = [&](std::int64_t& row, std::int64_t& col) {
    col += gather_threads;
    if (p.width >= gather_threads) {
      if (col >= p.width) col -= p.width, ++row;
    } else {  // narrow rows: col < 2 * gather_threads, so 32 bits divide it
      const auto w = static_cast<unsigned>(p.width), x = static_cast<unsigned>(col);
      row += x / w;
      col = x % w;
    }
  };
  element<Bytes> v[gather_unroll];
  std::int64_t row = row0, col = col0;
#pragma unroll
  for (int u = 0; u < gather_unroll; ++u) {
    if (first + u * gather_threads < p.count) v[u] = p.src[row * p.src_pitch + col];
    next(row, col);
  }
  row = row0, col = col0;
#pragma unroll
  for (int u = 0; u < gather_unroll; ++u) {
    if (first + u * gather_threads < p.count) p.dst[row * p.dst_pitch + col] = v[u];
    next(row, col);
  }
}

template <int Bytes>
__global__ void __launch_bounds__(gather_threads) gather_kernel(const GatherTask<Bytes> t) {
  const std::int64_t total = t.most * t.n;
  for (std::int64_t q = blockIdx.x; q < total; q += gridDim.x) {
    const auto& p = t.p[q % t.n];
    const std::int64_t j = q / t.n;
    if (j >= p.chunks) continue;
    gather_item<Bytes>(p, j);
  }
}

template <int Bytes>
typename GatherTask<Bytes>::piece piece_of(const gather_piece& g) {
  typename GatherTask<Bytes>::piece p{};
  p.src = static_cast<const element<Bytes>*>(g.src);
  p.dst = static_cast<element<Bytes>*>(g.dst);
  p.width = static_cast<std::int64_t>(g.width / Bytes);
  p.src_pitch = static_cast<std::int64_t>(g.src_pitch / Bytes);
  p.dst_pitch = static_cast<std::int64_t>(g.dst_pitch / Bytes);
  p.count = p.width * static_cast<std::int64_t>(g.height);
  p.chunks = (p.count + gather_chunk - 1) / gather_chunk;
  return p;
}

// The widest element (16, 8, 4, 2 or 1 bytes) that divides every size, pitch and address.
int widest(const gather_piece* g, int n) {
  for (int b = 16; b > 1; b /= 2) {
    bool ok = true;
    for (int i = 0; i < n && ok; ++i)
      ok = g[i].width % b == 0 && g[i].src_pitch % b == 0 && g[i].dst_pitch % b == 0 &&
           reinterpret_cast<std::uintptr_t>(g[i].src) % b == 0 && reinterpret_cast<std::uintptr_t>(g[i].dst) % b == 0;
    if (ok) return b;
  }
  return 1;
}

// Calls f(std::integral_constant<int, B>{}) for the element width B (16, 8, 4, 2, else 1 bytes)
// that `widest` found: one kernel instance per width.
template <class F>
void with_width(int width, F&& f) {
  switch (width) {
    case 16: return f(std::integral_constant<int, 16>{});
    case 8: return f(std::integral_constant<int, 8>{});
    case 4: return f(std::integral_constant<int, 4>{});
    case 2: return f(std::integral_constant<int, 2>{});
    default: return f(std::integral_constant<int, 1>{});
  }
}

// Blocks per SM of a kernel whose blocks loop over the work: as asked (1 to 8), at most what an SM
// holds at once. Blocks past that would start only once resident ones had done all their share
// (a second wave, alone at the end), and a chunk signalled from the device would wait for them.
template <class Task>
index_t per_sm(void (*kernel)(Task), int device, int asked) {
  const index_t want = asked < 1 ? 1 : asked > 8 ? 8 : asked;
  const index_t fit = resident_blocks(kernel, gather_threads, device);
  return want < fit ? want : fit;
}

template <int Bytes>
void gather_as(int device, void* stream, const gather_piece* pieces, int n, int blocks_per_sm) {
  GatherTask<Bytes> t{};
  t.n = 0;
  t.most = 0;
  for (int i = 0; i < n; ++i) {
    if (pieces[i].width == 0 || pieces[i].height == 0) continue;
    auto& p = t.p[t.n++];
    p = piece_of<Bytes>(pieces[i]);
    if (p.chunks > t.most) t.most = p.chunks;
  }
  if (t.n == 0) return;
  const index_t work = t.most * t.n;
  const index_t cap = sm_count(device) * per_sm(&gather_kernel<Bytes>, device, blocks_per_sm);
  launch(&gather_kernel<Bytes>, dim3(static_cast<unsigned>(work < cap ? work : cap)), gather_threads, t, device, 0,
         "gather_kernel", stream);
}

// gather_rows in chunks, each signalled from the device: chunk j is pieces [first[j], first[j+1]),
// interleaved like gather_kernel's, and its items come before chunk j + 1's (each block takes items
// q, q + gridDim.x, ...). A block leaving chunk j (its last item there done) fences its writes
// system-wide and counts itself in counters[j]; the last of the chunk's blocks writes `value` to
// flags[f][j] (another GPU's memory, mapped) for every f and puts the counter back to 0 for the
// next call on this stream.
template <int Bytes>
struct SignalTask {
  typename GatherTask<Bytes>::piece p[signal_max_pieces];
  std::int64_t start[signal_max_chunks + 1];  // the chunks' first items
  int first[signal_max_chunks + 1];
  std::uint32_t* flags[signal_max_flags];
  std::uint32_t* counters;
  int chunks, nflags;
  std::uint32_t value;
};

template <int Bytes>
__device__ void signal_chunk(const SignalTask<Bytes>& t, int j, std::int64_t items) {
  // Every thread's writes of the chunk, then the block's (as cooperative groups' grid sync
  // publishes a block's writes: barrier, then a fence by the thread that counts), before the count.
  __threadfence_system();
  __syncthreads();
  if (threadIdx.x == 0) {
    __threadfence_system();
    const std::int64_t blocks = items < gridDim.x ? items : std::int64_t(gridDim.x);
    if (atomicAdd(t.counters + j, 1u) + 1 == static_cast<std::uint32_t>(blocks)) {
      __threadfence_system();  // every counted block's writes, before the flags
      for (int f = 0; f < t.nflags; ++f) *reinterpret_cast<volatile std::uint32_t*>(t.flags[f] + j) = t.value;
      t.counters[j] = 0;
    }
  }
}

template <int Bytes>
__global__ void __launch_bounds__(gather_threads, 4) signalled_gather_kernel(const SignalTask<Bytes> t) {
  // Chunks without items are signalled at once.
  if (blockIdx.x == 0 && threadIdx.x == 0) {
    bool any = false;
    for (int j = 0; j < t.chunks; ++j) any |= t.start[j + 1] == t.start[j];
    if (any) {
      __threadfence_system();
      for (int j = 0; j < t.chunks; ++j)
        if (t.start[j + 1] == t.start[j])
          for (int f = 0; f < t.nflags; ++f) *reinterpret_cast<volatile std::uint32_t*>(t.flags[f] + j) = t.value;
    }
  }
  const std::int64_t G = gridDim.x;
  for (int j = 0; j < t.chunks; ++j) {
    const std::int64_t s = t.start[j], e = t.start[j + 1];
    std::int64_t q = s + ((std::int64_t(blockIdx.x) - s) % G + G) % G;  // the block's first item here
    if (q >= e) continue;  // none (an empty chunk was signalled above)
    const int n = t.first[j + 1] - t.first[j];
    for (; q < e; q += G) {
      const auto& p = t.p[t.first[j] + (q - s) % n];
      const std::int64_t c = (q - s) / n;
      if (c < p.chunks) gather_item<Bytes>(p, c);
    }
    signal_chunk(t, j, e - s);
  }
}

template <int Bytes>
void signalled_as(int device, void* stream, const gather_piece* pieces, const int* first, int chunks,
                  std::uint32_t* const* flags, int nflags, std::uint32_t value, std::uint32_t* counters,
                  int blocks_per_sm) {
  SignalTask<Bytes> t{};
  t.chunks = chunks;
  t.nflags = nflags;
  t.value = value;
  t.counters = counters;
  for (int f = 0; f < nflags; ++f) t.flags[f] = flags[f];
  t.start[0] = 0;
  for (int j = 0; j < chunks; ++j) {
    t.first[j] = first[j];
    std::int64_t most = 0;
    for (int i = first[j]; i < first[j + 1]; ++i) {
      t.p[i] = piece_of<Bytes>(pieces[i]);
      if (t.p[i].chunks > most) most = t.p[i].chunks;
    }
    t.start[j + 1] = t.start[j] + most * (first[j + 1] - first[j]);
  }
  t.first[chunks] = first[chunks];
  const index_t work = t.start[chunks] > 0 ? t.start[chunks] : 1;
  const index_t cap = sm_count(device) * per_sm(&signalled_gather_kernel<Bytes>, device, blocks_per_sm);
  launch(&signalled_gather_kernel<Bytes>, dim3(static_cast<unsigned>(work < cap ? work : cap)), gather_threads, t,
         device, 0, "signalled_gather_kernel", stream, /*direct=*/true);
}

// gather_rows in groups, each copied once its flag says that its bytes have landed: group g is
// pieces [first[g], first[g + 1]) of lane lane[g]; the blocks are split into `lanes` sets (block b
// is in set b % lanes), and each set takes its lane's groups in order, so a set waiting for one
// source's next chunk does not hold up another source's. A block with items in group g waits until
// *waits[g] reaches `value` (cyclically, as cuStreamWaitValue32's GEQ compares), one thread polling
// with a system-scope acquire load and short sleeps, then copies its items of the group.
template <int Bytes>
struct AwaitTask {
  typename GatherTask<Bytes>::piece p[await_max_pieces];
  const std::uint32_t* waits[await_max_groups];
  std::int32_t start[await_max_groups + 1];  // the groups' first items
  std::int16_t first[await_max_groups + 1];
  std::int8_t lane[await_max_groups];
  int groups, lanes;
  std::uint32_t value;
};

__device__ __forceinline__ std::uint32_t acquire_load(const std::uint32_t* flag) {
  std::uint32_t v;
  asm volatile("ld.acquire.sys.global.u32 %0, [%1];" : "=r"(v) : "l"(flag) : "memory");
  return v;
}

template <int Bytes>
__global__ void __launch_bounds__(gather_threads) awaited_gather_kernel(const AwaitTask<Bytes> t) {
  const int lane = static_cast<int>(blockIdx.x % t.lanes);
  const std::int64_t b = blockIdx.x / t.lanes;
  const std::int64_t G = (gridDim.x - lane + t.lanes - 1) / t.lanes;  // blocks in this lane's set
  for (int g = 0; g < t.groups; ++g) {
    if (t.lane[g] != lane) continue;
    const std::int64_t s = t.start[g], e = t.start[g + 1];
    if (s + b >= e) continue;  // no item of this group for this block
    if (threadIdx.x == 0) {
      while (static_cast<std::int32_t>(acquire_load(t.waits[g]) - t.value) < 0) __nanosleep(256);
    }
    __syncthreads();
    const int n = t.first[g + 1] - t.first[g];
    for (std::int64_t q = s + b; q < e; q += G) {
      const auto& p = t.p[t.first[g] + (q - s) % n];
      const std::int64_t c = (q - s) / n;
      if (c < p.chunks) gather_item<Bytes>(p, c);
    }
  }
}

template <int Bytes>
void awaited_as(int device, void* stream, const gather_piece* pieces, const int* first, const int* lane, int groups,
                const std::uint32_t* const* waits, std::uint32_t value, int blocks_per_sm) {
  AwaitTask<Bytes> t{};
  t.groups = groups;
  t.value = value;
  t.lanes = 1;
  t.start[0] = 0;
  for (int g = 0; g < groups; ++g) {
    t.first[g] = static_cast<std::int16_t>(first[g]);
    t.lane[g] = static_cast<std::int8_t>(lane[g]);
    t.waits[g] = waits[g];
    if (lane[g] + 1 > t.lanes) t.lanes = lane[g] + 1;
    std::int64_t most = 0;
    for (int i = first[g]; i < first[g + 1]; ++i) {
      t.p[i] = piece_of<Bytes>(pieces[i]);
      if (t.p[i].chunks > most) most = t.p[i].chunks;
    }
    t.start[g + 1] = static_cast<std::int32_t>(t.start[g] + most * (first[g + 1] - first[g]));
  }
  t.first[groups] = static_cast<std::int16_t>(first[groups]);
  // At least one block per lane; the grid never more than fits at once (every block must be
  // resident: one that waits for a flag holds its place until the flag comes).
  const index_t cap = sm_count(device) * per_sm(&awaited_gather_kernel<Bytes>, device, blocks_per_sm);
  const index_t grid = cap > t.lanes ? cap : t.lanes;
  launch(&awaited_gather_kernel<Bytes>, dim3(static_cast<unsigned>(grid)), gather_threads, t, device, 0,
         "awaited_gather_kernel", stream, /*direct=*/true);
}

}  // namespace

bool gather_rows_awaited(int device, void* stream, const gather_piece* pieces, const int* first, const int* lane,
                         int groups, const std::uint32_t* const* waits, std::uint32_t value, int blocks_per_sm) {
  if (groups < 1 || groups > await_max_groups || first[groups] > await_max_pieces) return false;
  std::int64_t items = 0;
  for (int g = 0; g < groups; ++g) {
    if (lane[g] < 0 || lane[g] >= await_max_lanes) return false;
    std::int64_t most = 0;
    for (int i = first[g]; i < first[g + 1]; ++i)
      most = std::max<std::int64_t>(
          most, static_cast<std::int64_t>((pieces[i].width * pieces[i].height + gather_chunk - 1) / gather_chunk));
    items += most * (first[g + 1] - first[g]);
  }
  if (items >= (std::int64_t(1) << 31)) return false;  // the groups' 32-bit starts (at 1-byte elements)
  with_width(widest(pieces, first[groups]), [&](auto b) {
    awaited_as<decltype(b)::value>(device, stream, pieces, first, lane, groups, waits, value, blocks_per_sm);
  });
  return true;
}

void gather_rows(int device, void* stream, const gather_piece* pieces, int n, int blocks_per_sm) {
  // More pieces than one kernel's parameters hold: one kernel per group of them.
  for (int first = 0; first < n; first += gather_max_pieces) {
    const gather_piece* g = pieces + first;
    const int k = n - first < gather_max_pieces ? n - first : gather_max_pieces;
    with_width(widest(g, k), [&](auto b) { gather_as<decltype(b)::value>(device, stream, g, k, blocks_per_sm); });
  }
}

bool pitched_copy(int device, void* stream, void* dst, std::size_t dst_pitch, const void* src, std::size_t src_pitch,
                  std::size_t width, std::size_t height, int blocks_per_sm) {
  if (width == 0 || height == 0) return true;
  const auto all = [&](std::size_t b) {
    return width % b == 0 && dst_pitch % b == 0 && src_pitch % b == 0 && reinterpret_cast<std::uintptr_t>(dst) % b == 0 &&
           reinterpret_cast<std::uintptr_t>(src) % b == 0;
  };
  if (all(16)) pitched_as<16>(device, stream, dst, dst_pitch, src, src_pitch, width, height, blocks_per_sm);
  else if (all(8)) pitched_as<8>(device, stream, dst, dst_pitch, src, src_pitch, width, height, blocks_per_sm);
  else if (all(4)) pitched_as<4>(device, stream, dst, dst_pitch, src, src_pitch, width, height, blocks_per_sm);
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

bool gather_rows_signalled(int device, void* stream, const gather_piece* pieces, const int* first, int chunks,
                           std::uint32_t* const* flags, int nflags, std::uint32_t value, std::uint32_t* counters,
                           int blocks_per_sm) {
  if (chunks < 1 || chunks > signal_max_chunks || first[chunks] > signal_max_pieces || nflags > signal_max_flags)
    return false;
  with_width(widest(pieces, first[chunks]), [&](auto b) {
    signalled_as<decltype(b)::value>(device, stream, pieces, first, chunks, flags, nflags, value, counters,
                                     blocks_per_sm);
  });
  return true;
}

}  // namespace tessera::detail::cuda
