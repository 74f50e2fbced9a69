// SPDX-License-Identifier: Apache-2.0
// Tessera host executor for scans and sorts: the tasks of dsl/tessera/scan_task.hpp as loops and
// standard algorithms on a host device. Same results as the GPU side (backend/cuda/scan.cu), up to
// the rounding of floating sums and products, which a GPU scan associates differently.
#pragma once
#include <tessera/scan_task.hpp>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <numeric>
#include <vector>

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

template <class K>
void run(const SortTask<K>& t) {
  const auto n = static_cast<std::size_t>(t.n);
  if (!t.idx_out) {
    // Equal keys are equal bits: stability cannot show.
    std::copy(t.keys_in, t.keys_in + n, t.keys_out);
    if (t.descending) std::sort(t.keys_out, t.keys_out + n, [](K a, K b) { return b < a; });
    else std::sort(t.keys_out, t.keys_out + n);
    return;
  }
  std::vector<std::int64_t> p(n);
  std::iota(p.begin(), p.end(), std::int64_t(0));
  const K* k = t.keys_in;
  if (t.descending) std::stable_sort(p.begin(), p.end(), [k](std::int64_t a, std::int64_t b) { return k[b] < k[a]; });
  else std::stable_sort(p.begin(), p.end(), [k](std::int64_t a, std::int64_t b) { return k[a] < k[b]; });
  for (std::size_t i = 0; i < n; ++i) {
    t.keys_out[i] = k[p[i]];
    t.idx_out[i] = t.idx_in[p[i]];
  }
}

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

template <class K>
void run(const UniqueTask<K>& t) {
  const K* end = std::unique_copy(t.in, t.in + t.n, t.out);
  *t.count = static_cast<std::int64_t>(end - t.out);
}

}  // namespace tessera::detail::host
