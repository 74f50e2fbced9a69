// SPDX-License-Identifier: Apache-2.0
// Tessera host executor for reductions: the same tasks the CUDA kernels run, folded in loops.
// Host devices accumulate in the task's fold type (double for floating sums and products): the
// host has no bandwidth to save. Large shards fold on every core (parallel.hpp).
#pragma once
#include <backend/host/executor.hpp>
#include <tessera/reduce_task.hpp>

#include <memory>

namespace tessera::detail::host {

// Folds elements [begin, end) of a full reduction's shard, from init.
template <class H, class Acc, class E, class Map, class Op, int N>
H fold_range(const FullTask<Acc, H, E, Map, Op, N>& t, index_t begin, index_t end) {
  H acc = static_cast<H>(t.init);
  if (t.mode != path::cartesian) {
    // Eight independent accumulators, as NumPy's pairwise sum keeps: the adds no longer wait on
    // each other and the compiler vectorizes them (2^25 floats on one core: 26.5 ms -> see
    // docs/performance.md). Local variables, not a lambda's captures: g++ kept those in memory.
    constexpr int L = 8;
    H lane[L];
    for (int j = 0; j < L; ++j) lane[j] = static_cast<H>(t.init);
    index_t i = begin;
    for (; i + L <= end; i += L) {
      for (int j = 0; j < L; ++j) lane[j] = static_cast<H>(t.op(lane[j], static_cast<H>(t.map(t.e.linear(i + j)))));
    }
    for (; i < end; ++i) acc = static_cast<H>(t.op(acc, static_cast<H>(t.map(t.e.linear(i)))));
    for (int j = 0; j < L; ++j) acc = static_cast<H>(t.op(acc, lane[j]));
  } else {
    for_each_index<N>(t.ext, begin, end, [&](const index_t* idx) {
      acc = static_cast<H>(t.op(acc, static_cast<H>(t.map(t.e.at(idx)))));
    });
  }
  return acc;
}

// Folds the shard into *t.result (converted to the result type once, at the end). Each chunk
// (parallel.hpp) folds its own partial from init, and the partials are folded in chunk order: the
// chunks do not depend on the thread count, so neither do the bits of the result. A shard of one
// chunk folds exactly as before chunking.
template <class Acc, class H, class E, class Map, class Op, int N>
void run(const FullTask<Acc, H, E, Map, Op, N>& t) {
  const index_t chunks = chunk_count(t.n);
  if (chunks <= 1) {
    *t.result = static_cast<Acc>(fold_range<H>(t, 0, t.n));
    return;
  }
  const std::unique_ptr<H[]> partial(new H[static_cast<std::size_t>(chunks)]);  // H may be bool
  for_each_chunk(t.n, [&](index_t c, index_t begin, index_t end) { partial[c] = fold_range<H>(t, begin, end); });
  H acc = static_cast<H>(t.init);
  for (index_t c = 0; c < chunks; ++c) acc = static_cast<H>(t.op(acc, partial[c]));
  *t.result = static_cast<Acc>(acc);
}

// Every output of the shard, each folded in one piece by one thread (chunks of the reduced range
// are a GPU device for parallelism), so the result does not depend on the thread count. Outputs
// are spread over the cores in groups of about host_chunk_elements reduced elements; a shard with
// a single output (or only a few large ones) runs on one thread.
template <class Acc, class H, class E, class Map, class Op, int N>
void run(const DimsTask<Acc, H, E, Map, Op, N>& t) {
  const index_t per_group = t.n_red >= chunk_elements ? 1 : chunk_elements / (t.n_red > 0 ? t.n_red : 1);
  for_each_chunk(
      t.n_out,
      [&t](index_t, index_t o0, index_t o1) {
        for (index_t o = o0; o < o1; ++o) {
          index_t idx[N > 0 ? N : 1] = {};
          t.kept_index(o, idx);
          t.out[o] = static_cast<Acc>(t.template fold<H>(idx, index_t(0), t.n_red, 0, 1));
        }
      },
      per_group);
}

}  // namespace tessera::detail::host
