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

}  // namespace

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
