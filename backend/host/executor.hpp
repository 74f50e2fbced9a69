// SPDX-License-Identifier: Apache-2.0
// Tessera host executor: runs a shard's evaluator as plain loops on a host device. The same
// evaluator that the CUDA kernel runs, so host devices and GPUs compute the same function.
#pragma once
#include <tessera/evaluator.hpp>

namespace tessera::detail::host {

// Calls f(idx) for the n elements of a box with extents ext, in column-major order, carrying the
// N-d index instead of dividing (the cartesian path of every host loop).
template <int N, class F>
void for_each_index(const Extents<N>& ext, index_t n, F&& f) {
  if constexpr (N > 0) {
    index_t idx[N] = {};
    const index_t inner = ext[0];
    for (index_t done = 0; done < n; done += inner) {
      for (index_t i = 0; i < inner; ++i) {
        idx[0] = i;
        f(static_cast<const index_t*>(idx));
      }
      idx[0] = 0;
      for (int k = 1; k < N; ++k) {
        if (++idx[k] < ext[k]) break;
        idx[k] = 0;
      }
    }
  } else {
    if (n > 0) f(static_cast<const index_t*>(nullptr));
  }
}

template <class Out, class E, int N>
void run(const ShardTask<Out, E, N>& t) {
  if (t.mode != path::cartesian) {
    for (index_t i = 0; i < t.n; ++i) t.out.store_linear(i, t.e.linear(i));
    return;
  }
  for_each_index<N>(t.ext, t.n, [&](const index_t* idx) { t.out.store_at(idx, t.e.at(idx)); });
}

template <class F, class... A>
void run(const ForEachTask<F, A...>& t) {
  for (index_t i = 0; i < t.n; ++i) t(i);
}

}  // namespace tessera::detail::host
