// SPDX-License-Identifier: Apache-2.0
// Tessera: the per-shard tasks of scans and sorts (scan.hpp, sort.hpp), run by backend/host/scan.hpp
// on host devices and by backend/cuda/scan.cuh on GPUs. Unlike the elementwise and reduction tasks
// they carry no evaluator: their operands are contiguous buffers (the callers materialize views and
// casts first), so the GPU side is a fixed set of CUB calls compiled once into tessera_runtime
// (backend/cuda/scan.cu) instead of in every program: CUB's device headers cost 3.5 s per nvcc
// translation unit (a minimal program: 7.8 s -> 11.3 s on the 2-core dev machine).
#pragma once
#include <tessera/config.hpp>
#include <tessera/functional.hpp>

#include <cstdint>
#include <cstring>
#include <limits>
#include <type_traits>

namespace tessera::detail {

// The operators a scan runs with, as a value: the GPU side is compiled for these four only.
enum class scan_kind { plus, multiplies, min, max };

template <class Op>
struct scan_kind_of {};
template <>
struct scan_kind_of<fn::plus> : std::integral_constant<scan_kind, scan_kind::plus> {};
template <>
struct scan_kind_of<fn::multiplies> : std::integral_constant<scan_kind, scan_kind::multiplies> {};
template <>
struct scan_kind_of<fn::min> : std::integral_constant<scan_kind, scan_kind::min> {};
template <>
struct scan_kind_of<fn::max> : std::integral_constant<scan_kind, scan_kind::max> {};

// Element types a scan runs in (after cumsum's widening to int64).
template <class T>
inline constexpr bool scan_type_v = std::is_same_v<T, std::int32_t> || std::is_same_v<T, std::int64_t> ||
                                    std::is_same_v<T, float> || std::is_same_v<T, double>;

// One shard's inclusive scan along one dimension of a contiguous column-major box, seen as
// inner x len x outer: element j of line (i, o) sits at i + inner * (j + len * o). `in` and `out`
// do not overlap.
template <class T>
struct ScanTask {
  const T* in;
  T* out;
  index_t inner, len, outer;
  scan_kind op;
};

// -- sort keys ------------------------------------------------------------------------------------
// Sorting runs on signed integer keys whose order is Julia's isless: -0.0 before 0.0, NaN (made
// canonical) after +Inf. Radix sorts, merges and unique then compare plain integers, and equal keys
// are equal bits (isequal: NaN equals NaN, -0.0 differs from 0.0). float and int32 sort as int32,
// double and int64 as int64.
template <class T>
using sort_key_t = std::conditional_t<sizeof(T) == 8, std::int64_t, std::int32_t>;

struct to_sort_key {
  template <class T>
  TS_HD sort_key_t<T> operator()(T x) const {
    using K = sort_key_t<T>;
    if constexpr (std::is_integral_v<T>) {
      return static_cast<K>(x);
    } else {
      if (x != x) x = std::numeric_limits<T>::quiet_NaN();  // every NaN sorts as the positive quiet one
      K k;
      memcpy(&k, &x, sizeof(K));
      // Negative floats order backwards as integers: flip all bits but the sign.
      return k < 0 ? static_cast<K>(k ^ std::numeric_limits<K>::max()) : k;
    }
  }
};

template <class T>
struct from_sort_key {
  template <class K>
  TS_HD T operator()(K k) const {
    if constexpr (std::is_integral_v<T>) {
      return static_cast<T>(k);
    } else {
      if (k < 0) k = static_cast<K>(k ^ std::numeric_limits<K>::max());
      T x;
      memcpy(&x, &k, sizeof(T));
      return x;
    }
  }
};

// One run's stable sort by key (with the global indices alongside for sortperm; both index pointers
// null otherwise). Descending keeps equal keys in their original order too (Julia's rev=true).
template <class K>
struct SortTask {
  const K* keys_in;
  K* keys_out;
  const std::int64_t* idx_in;
  std::int64_t* idx_out;
  index_t n;
  bool descending;
};

// Merges two sorted runs into `out`. With indices, equal keys are ordered by index, which keeps a
// merge of runs in index order stable; na or nb may be 0 (a copy).
template <class K>
struct MergeTask {
  const K* a;
  const std::int64_t* ia;
  index_t na;
  const K* b;
  const std::int64_t* ib;
  index_t nb;
  K* out;
  std::int64_t* iout;
  bool descending;
};

// The distinct keys of a sorted run, in order, and their count (written to device memory).
template <class K>
struct UniqueTask {
  const K* in;
  K* out;
  index_t n;
  std::int64_t* count;
};

}  // namespace tessera::detail
