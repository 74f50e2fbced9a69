// SPDX-License-Identifier: Apache-2.0
// Tessera host executor for reductions: the same tasks the CUDA kernels run, folded in loops.
// Host devices accumulate in the task's fold type (double for floating sums and products): the
// host has no bandwidth to save.
#pragma once
#include <backend/host/executor.hpp>
#include <tessera/reduce_task.hpp>

namespace tessera::detail::host {

// Folds the shard into *t.result (converted to the result type once, at the end).
template <class Acc, class H, class E, class Map, class Op, int N>
void run(const FullTask<Acc, H, E, Map, Op, N>& t) {
  H acc = static_cast<H>(t.init);
  if (t.mode != path::cartesian) {
    // Eight independent accumulators, as NumPy's pairwise sum keeps: the adds no longer wait on
    // each other and the compiler vectorizes them (2^25 floats on one core: 26.5 ms -> see
    // docs/performance.md). Local variables, not a lambda's captures: g++ kept those in memory.
    constexpr int L = 8;
    H lane[L];
    for (int j = 0; j < L; ++j) lane[j] = static_cast<H>(t.init);
    index_t i = 0;
    for (; i + L <= t.n; i += L) {
      for (int j = 0; j < L; ++j) lane[j] = static_cast<H>(t.op(lane[j], static_cast<H>(t.map(t.e.linear(i + j)))));
    }
    for (; i < t.n; ++i) acc = static_cast<H>(t.op(acc, static_cast<H>(t.map(t.e.linear(i)))));
    for (int j = 0; j < L; ++j) acc = static_cast<H>(t.op(acc, lane[j]));
  } else {
    for_each_index<N>(t.ext, t.n, [&](const index_t* idx) {
      acc = static_cast<H>(t.op(acc, static_cast<H>(t.map(t.e.at(idx)))));
    });
  }
  *t.result = static_cast<Acc>(acc);
}

// Every output of the shard, one after another, each folded in one piece (chunks are a GPU
// device for parallelism).
template <class Acc, class H, class E, class Map, class Op, int N>
void run(const DimsTask<Acc, H, E, Map, Op, N>& t) {
  for (index_t o = 0; o < t.n_out; ++o) {
    index_t idx[N > 0 ? N : 1] = {};
    t.kept_index(o, idx);
    t.out[o] = static_cast<Acc>(t.template fold<H>(idx, index_t(0), t.n_red, 0, 1));
  }
}

}  // namespace tessera::detail::host
