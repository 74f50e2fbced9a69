// SPDX-License-Identifier: Apache-2.0
// Tessera host executor: runs a shard's evaluator as plain loops on a host device. The same
// evaluator that the CUDA kernel runs, so host devices and GPUs compute the same function. A large
// shard's loop is cut into chunks that run on every core (parallel.hpp).
#pragma once
#include <backend/host/parallel.hpp>
#include <tessera/evaluator.hpp>

namespace tessera::detail::host {

// Calls f(idx) for elements [begin, end) of a box with extents ext, in column-major order: the
// N-d index is decoded once, at begin, then carried instead of divided (the cartesian path of
// every host loop).
template <int N, class F>
void for_each_index(const Extents<N>& ext, index_t begin, index_t end, F&& f) {
  if (begin >= end) return;
  if constexpr (N > 0) {
    index_t idx[N];
    box_index<N>(begin, ext, idx);
    const index_t inner = ext[0];
    for (index_t done = begin; done < end;) {
      const index_t i0 = idx[0];
      const index_t stop = end - done < inner - i0 ? i0 + (end - done) : inner;
      for (index_t i = i0; i < stop; ++i) {
        idx[0] = i;
        f(static_cast<const index_t*>(idx));
      }
      done += stop - i0;
      idx[0] = 0;
      for (int k = 1; k < N; ++k) {
        if (++idx[k] < ext[k]) break;
        idx[k] = 0;
      }
    }
  } else {
    f(static_cast<const index_t*>(nullptr));
  }
}

// Elements [begin, end) of an assignment. A function of its own, with the task by reference, as
// before chunking: the linear loop vectorizes like a hand-written one (docs/performance.md).
template <class Out, class E, int N>
void run_range(const ShardTask<Out, E, N>& t, index_t begin, index_t end) {
  if (t.mode != path::cartesian) {
    for (index_t i = begin; i < end; ++i) t.out.store_linear(i, t.e.linear(i));
    return;
  }
  for_each_index<N>(t.ext, begin, end, [&](const index_t* idx) { t.out.store_at(idx, t.e.at(idx)); });
}

template <class Out, class E, int N>
void run(const ShardTask<Out, E, N>& t) {
  for_each_chunk(t.n, [&t](index_t, index_t begin, index_t end) { run_range(t, begin, end); });
}

// Sequential: f may be any user function, which need not be safe to call from several threads.
template <class F, class... A>
void run(const ForEachTask<F, A...>& t) {
  for (index_t i = 0; i < t.n; ++i) t(i);
}

}  // namespace tessera::detail::host
