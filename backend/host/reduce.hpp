// SPDX-License-Identifier: Apache-2.0
// Tessera host executor for reductions: the same tasks the CUDA kernels run, folded in loops.
#pragma once
#include <tessera/reduce_task.hpp>

namespace tessera::detail::host {

// Folds the shard into one value. H is the accumulator (double for floating sums and products,
// so host devices sum in double); the caller combines the shards' values.
template <class H, class Acc, class E, class Map, class Op, int N>
H reduce(const FullTask<Acc, E, Map, Op, N>& t) {
  H acc = static_cast<H>(t.init);
  if (t.mode != path::cartesian) {
    for (index_t i = 0; i < t.n; ++i) acc = static_cast<H>(t.op(acc, static_cast<H>(t.map(t.e.linear(i)))));
    return acc;
  }
  if constexpr (N > 0) {
    index_t idx[N] = {};  // column-major walk, carrying the index instead of dividing
    for (index_t done = 0; done < t.n; done += t.ext[0]) {
      for (index_t i = 0; i < t.ext[0]; ++i) {
        idx[0] = i;
        acc = static_cast<H>(t.op(acc, static_cast<H>(t.map(t.e.at(idx)))));
      }
      idx[0] = 0;
      for (int k = 1; k < N; ++k) {
        if (++idx[k] < t.ext[k]) break;
        idx[k] = 0;
      }
    }
  } else {
    const index_t* idx = nullptr;
    acc = static_cast<H>(t.op(acc, static_cast<H>(t.map(t.e.at(idx)))));
  }
  return acc;
}

// Every output of the shard, one after another, accumulated in H (double for floating sums: the
// host has no bandwidth to save; chunks are a GPU device for parallelism, the host folds each
// output in one piece).
template <class Acc, class H, class E, class Map, class Op, int N>
void reduce_dims(const DimsTask<Acc, H, E, Map, Op, N>& t) {
  for (index_t o = 0; o < t.n_out; ++o) {
    index_t idx[N > 0 ? N : 1] = {};
    t.kept_index(o, idx);
    t.out[o] = static_cast<Acc>(t.template fold<H>(idx, index_t(0), t.n_red, 0, 1));
  }
}

}  // namespace tessera::detail::host
