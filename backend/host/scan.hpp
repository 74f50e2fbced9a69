// SPDX-License-Identifier: Apache-2.0
// Tessera host executor for scans and sorts: the tasks of dsl/tessera/scan_task.hpp as loops and
// standard algorithms on a host device. Same results as the GPU side (backend/cuda/scan.cu), up to
// the rounding of floating sums and products, which a GPU scan associates differently.
#pragma once
#include <tessera/scan_task.hpp>

#include <cstdint>

namespace tessera::detail::host {

template <class T, class Op>
void scan_lines(const ScanTask<T>& t, Op op) {
  // Line by line along j, all i of a step together: the inner index is the contiguous one.
  for (index_t o = 0; o < t.outer; ++o) {
    const index_t base = t.inner * t.len * o;
    for (index_t j = 0; j < t.len; ++j) {
      const index_t row = base + t.inner * j;
      for (index_t i = 0; i < t.inner; ++i) {
        t.out[row + i] = j == 0 ? t.in[row + i] : static_cast<T>(op(t.out[row - t.inner + i], t.in[row + i]));
      }
    }
  }
}

template <class T>
void run(const ScanTask<T>& t) {
  switch (t.op) {
    case scan_kind::plus: return scan_lines(t, fn::plus{});
    case scan_kind::multiplies: return scan_lines(t, fn::multiplies{});
    case scan_kind::min: return scan_lines(t, fn::min{});
    case scan_kind::max: return scan_lines(t, fn::max{});
  }
}

// Sorts of the two key types (sort_key_t), compiled once into tessera_runtime (sort.cpp) so that
// programs include no <algorithm>; unique runs likewise.
void run(const SortTask<std::int32_t>& t);
void run(const SortTask<std::int64_t>& t);
void run(const UniqueTask<std::int32_t>& t);
void run(const UniqueTask<std::int64_t>& t);

template <class K>
void run(const MergeTask<K>& t) {
  index_t i = 0, j = 0, o = 0;
  // Ties take the left run first: it holds the smaller indices.
  while (i < t.na && j < t.nb) {
    const bool right = t.descending ? t.a[i] < t.b[j] : t.b[j] < t.a[i];
    if (right) {
      t.out[o] = t.b[j];
      if (t.iout) t.iout[o] = t.ib[j];
      ++j;
    } else {
      t.out[o] = t.a[i];
      if (t.iout) t.iout[o] = t.ia[i];
      ++i;
    }
    ++o;
  }
  for (; i < t.na; ++i, ++o) {
    t.out[o] = t.a[i];
    if (t.iout) t.iout[o] = t.ia[i];
  }
  for (; j < t.nb; ++j, ++o) {
    t.out[o] = t.b[j];
    if (t.iout) t.iout[o] = t.ib[j];
  }
}

}  // namespace tessera::detail::host
