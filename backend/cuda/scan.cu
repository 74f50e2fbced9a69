// SPDX-License-Identifier: Apache-2.0
// Tessera CUDA scans and sorts: the entry points of backend/cuda/scan.cuh, compiled once into
// tessera_runtime (CUB's device headers would add 3.5 s to every program that includes
// tessera.hpp). Every call queues its work on the device's stream with CUB's two-phase API, the
// temporary storage taken from the device's scratch buffer (stream ordered, like the reductions'),
// and returns without waiting.
#include <backend/cuda/launch.cuh>
#include <backend/cuda/scan.cuh>
#include <backend/runtime/runtime.hpp>

#include <cub/device/device_merge.cuh>
#include <cub/device/device_radix_sort.cuh>
#include <cub/device/device_scan.cuh>
#include <cub/device/device_select.cuh>
#include <thrust/iterator/counting_iterator.h>
#include <thrust/iterator/permutation_iterator.h>
#include <thrust/iterator/transform_iterator.h>
#include <thrust/iterator/zip_iterator.h>

#include <cstddef>
#include <cstdint>
#include <string>

namespace tessera::detail::cuda {
namespace {

void check(cudaError_t e, const char* what, int device, int shard) {
  if (e == cudaSuccess) return;
  (void)cudaGetLastError();
  throw backend_error(std::string("tessera: ") + what + " failed on " + rt::info(device).name + " (shard " +
                      std::to_string(shard) + "): " + cudaGetErrorString(e));
}

// CUB's two phases: ask for the temporary bytes, then run with the device's scratch buffer.
template <class F>
void cub_call(const char* what, int device, int shard, F&& f) {
  rt::set_device(device);
  const auto stream = static_cast<cudaStream_t>(rt::stream(device));
  std::size_t bytes = 0;
  check(f(nullptr, bytes, stream), what, device, shard);
  void* temp = rt::scratch(device, bytes > 0 ? bytes : 1);
  check(f(temp, bytes, stream), what, device, shard);
  check(cudaPeekAtLastError(), what, device, shard);
}

void copy_async(void* dst, const void* src, std::size_t bytes, int device, int shard) {
  if (bytes == 0 || dst == src) return;
  rt::set_device(device);
  check(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, static_cast<cudaStream_t>(rt::stream(device))),
        "cudaMemcpyAsync", device, shard);
}

// -- scans ---------------------------------------------------------------------------------------

struct line_of {
  index_t len;
  __host__ __device__ index_t operator()(index_t p) const { return p / len; }
};
// Position p of the lines laid end to end -> offset in the column-major box.
struct offset_of {
  index_t inner, len;
  __host__ __device__ index_t operator()(index_t p) const {
    const index_t line = p / len, j = p - line * len;
    const index_t o = line / inner, i = line - o * inner;
    return i + inner * (j + len * o);
  }
};

template <class T, class Op>
struct column_scan {
  const T* in;
  T* out;
  index_t inner, len, outer;
  Op op;
};

// One thread per line, walking it: neighbouring threads read neighbouring addresses. CUB has no
// scan of many strided lines; ScanByKey through a permutation (below) reads them uncoalesced.
constexpr int column_threads = 256;
template <class T, class Op>
__global__ void __launch_bounds__(column_threads) scan_columns_kernel(const column_scan<T, Op> t) {
  const index_t lines = t.inner * t.outer;
  for (index_t l = static_cast<index_t>(blockIdx.x) * column_threads + threadIdx.x; l < lines;
       l += static_cast<index_t>(gridDim.x) * column_threads) {
    const index_t o = l / t.inner, base = (l - o * t.inner) + t.inner * t.len * o;
    T acc = t.in[base];
    t.out[base] = acc;
    for (index_t j = 1; j < t.len; ++j) {
      acc = static_cast<T>(t.op(acc, t.in[base + j * t.inner]));
      t.out[base + j * t.inner] = acc;
    }
  }
}

template <class T, class Op>
void scan_with(const T* in, T* out, index_t inner, index_t len, index_t outer, Op op, int device, int shard) {
  const index_t n = inner * len * outer;
  if (n == 0) return;
  const index_t lines = inner * outer;
  if (inner == 1 && outer == 1) {
    cub_call("cub::DeviceScan::InclusiveScan", device, shard, [&](void* tmp, std::size_t& bytes, cudaStream_t s) {
      return cub::DeviceScan::InclusiveScan(tmp, bytes, in, out, op, n, s);
    });
    return;
  }
  const auto keys = thrust::make_transform_iterator(thrust::counting_iterator<index_t>(0), line_of{len});
  if (inner == 1) {  // contiguous lines: one scan by key
    cub_call("cub::DeviceScan::InclusiveScanByKey", device, shard, [&](void* tmp, std::size_t& bytes, cudaStream_t s) {
      return cub::DeviceScan::InclusiveScanByKey(tmp, bytes, keys, in, out, op, n, ::cuda::std::equal_to<>{}, s);
    });
    return;
  }
  if (inner >= 32 && lines >= sm_count(device) * column_threads) {
    const column_scan<T, Op> t{in, out, inner, len, outer, op};
    launch(&scan_columns_kernel<T, Op>, grid_blocks(lines, column_threads, sm_count(device) * 32), column_threads, t,
           device, shard, "scan_columns_kernel");
    return;
  }
  // Few strided lines: one scan by key over the lines laid end to end.
  const auto at = thrust::make_transform_iterator(thrust::counting_iterator<index_t>(0), offset_of{inner, len});
  const auto src = thrust::make_permutation_iterator(in, at);
  const auto dst = thrust::make_permutation_iterator(out, at);
  cub_call("cub::DeviceScan::InclusiveScanByKey", device, shard, [&](void* tmp, std::size_t& bytes, cudaStream_t s) {
    return cub::DeviceScan::InclusiveScanByKey(tmp, bytes, keys, src, dst, op, n, ::cuda::std::equal_to<>{}, s);
  });
}

template <class T>
void scan_impl(const T* in, T* out, index_t inner, index_t len, index_t outer, scan_kind op, int device, int shard) {
  switch (op) {
    case scan_kind::plus: return scan_with(in, out, inner, len, outer, fn::plus{}, device, shard);
    case scan_kind::multiplies: return scan_with(in, out, inner, len, outer, fn::multiplies{}, device, shard);
    case scan_kind::min: return scan_with(in, out, inner, len, outer, fn::min{}, device, shard);
    case scan_kind::max: return scan_with(in, out, inner, len, outer, fn::max{}, device, shard);
  }
}

// -- sorts ---------------------------------------------------------------------------------------

template <class K>
void sort_impl(const K* keys_in, K* keys_out, const std::int64_t* idx_in, std::int64_t* idx_out, index_t n,
               bool descending, int device, int shard) {
  if (n == 0) return;
  constexpr int bits = static_cast<int>(sizeof(K) * 8);
  if (!idx_out) {
    cub_call("cub::DeviceRadixSort::SortKeys", device, shard, [&](void* tmp, std::size_t& bytes, cudaStream_t s) {
      return descending ? cub::DeviceRadixSort::SortKeysDescending(tmp, bytes, keys_in, keys_out, n, 0, bits, s)
                        : cub::DeviceRadixSort::SortKeys(tmp, bytes, keys_in, keys_out, n, 0, bits, s);
    });
    return;
  }
  cub_call("cub::DeviceRadixSort::SortPairs", device, shard, [&](void* tmp, std::size_t& bytes, cudaStream_t s) {
    return descending
               ? cub::DeviceRadixSort::SortPairsDescending(tmp, bytes, keys_in, keys_out, idx_in, idx_out, n, 0, bits, s)
               : cub::DeviceRadixSort::SortPairs(tmp, bytes, keys_in, keys_out, idx_in, idx_out, n, 0, bits, s);
  });
}

template <bool Desc>
struct key_order {
  template <class A, class B>
  __host__ __device__ bool operator()(const A& a, const B& b) const {
    return Desc ? b < a : a < b;
  }
};
// (key, index) pairs: indices are distinct, so the order is total and the merge's instability
// (cub::DeviceMerge makes no promise for equivalent items) cannot show.
template <bool Desc>
struct key_index_order {
  template <class A, class B>
  __host__ __device__ bool operator()(const A& a, const B& b) const {
    const auto ka = thrust::get<0>(a);
    const auto kb = thrust::get<0>(b);
    if (ka != kb) return Desc ? kb < ka : ka < kb;
    return thrust::get<1>(a) < thrust::get<1>(b);
  }
};

template <bool Desc, class K>
void merge_with(const K* a, const std::int64_t* ia, index_t na, const K* b, const std::int64_t* ib, index_t nb, K* out,
                std::int64_t* iout, int device, int shard) {
  if (!iout) {
    cub_call("cub::DeviceMerge::MergeKeys", device, shard, [&](void* tmp, std::size_t& bytes, cudaStream_t s) {
      return cub::DeviceMerge::MergeKeys(tmp, bytes, a, na, b, nb, out, key_order<Desc>{}, s);
    });
    return;
  }
  const auto za = thrust::make_zip_iterator(a, ia);
  const auto zb = thrust::make_zip_iterator(b, ib);
  const auto zo = thrust::make_zip_iterator(out, iout);
  cub_call("cub::DeviceMerge::MergeKeys", device, shard, [&](void* tmp, std::size_t& bytes, cudaStream_t s) {
    return cub::DeviceMerge::MergeKeys(tmp, bytes, za, na, zb, nb, zo, key_index_order<Desc>{}, s);
  });
}

template <class K>
void merge_impl(const K* a, const std::int64_t* ia, index_t na, const K* b, const std::int64_t* ib, index_t nb, K* out,
                std::int64_t* iout, bool descending, int device, int shard) {
  if (na == 0 || nb == 0) {  // one run: a copy
    const K* k = na ? a : b;
    const std::int64_t* i = na ? ia : ib;
    const index_t n = na + nb;
    copy_async(out, k, static_cast<std::size_t>(n) * sizeof(K), device, shard);
    if (iout) copy_async(iout, i, static_cast<std::size_t>(n) * sizeof(std::int64_t), device, shard);
    return;
  }
  if (descending) merge_with<true>(a, ia, na, b, ib, nb, out, iout, device, shard);
  else merge_with<false>(a, ia, na, b, ib, nb, out, iout, device, shard);
}

template <class K>
void unique_impl(const K* in, K* out, index_t n, std::int64_t* count, int device, int shard) {
  if (n == 0) {
    rt::set_device(device);
    check(cudaMemsetAsync(count, 0, sizeof(std::int64_t), static_cast<cudaStream_t>(rt::stream(device))),
          "cudaMemsetAsync", device, shard);
    return;
  }
  cub_call("cub::DeviceSelect::Unique", device, shard, [&](void* tmp, std::size_t& bytes, cudaStream_t s) {
    return cub::DeviceSelect::Unique(tmp, bytes, in, out, count, n, s);
  });
}

}  // namespace

#define TESSERA_SCAN_ENTRY(T)                                                                                \
  void scan_lines(const T* in, T* out, index_t inner, index_t len, index_t outer, scan_kind op, int device, \
                  int shard) {                                                                               \
    scan_impl<T>(in, out, inner, len, outer, op, device, shard);                                             \
  }
TESSERA_SCAN_ENTRY(std::int32_t)
TESSERA_SCAN_ENTRY(std::int64_t)
TESSERA_SCAN_ENTRY(float)
TESSERA_SCAN_ENTRY(double)
#undef TESSERA_SCAN_ENTRY

#define TESSERA_SORT_ENTRIES(K)                                                                                    \
  void sort_run(const K* keys_in, K* keys_out, const std::int64_t* idx_in, std::int64_t* idx_out, index_t n,      \
                bool descending, int device, int shard) {                                                          \
    sort_impl<K>(keys_in, keys_out, idx_in, idx_out, n, descending, device, shard);                                \
  }                                                                                                                \
  void merge_runs(const K* a, const std::int64_t* ia, index_t na, const K* b, const std::int64_t* ib, index_t nb, \
                  K* out, std::int64_t* iout, bool descending, int device, int shard) {                            \
    merge_impl<K>(a, ia, na, b, ib, nb, out, iout, descending, device, shard);                                     \
  }                                                                                                                \
  void unique_run(const K* in, K* out, index_t n, std::int64_t* count, int device, int shard) {                  \
    unique_impl<K>(in, out, n, count, device, shard);                                                              \
  }
TESSERA_SORT_ENTRIES(std::int32_t)
TESSERA_SORT_ENTRIES(std::int64_t)
#undef TESSERA_SORT_ENTRIES

}  // namespace tessera::detail::cuda
