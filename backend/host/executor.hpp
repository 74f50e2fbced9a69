// SPDX-License-Identifier: Apache-2.0
// Tessera host executor: runs a shard's evaluator as plain loops on a host device. The same
// evaluator that the CUDA kernel runs, so host devices and GPUs compute the same function.
#pragma once
#include <tessera/evaluator.hpp>

namespace tessera::detail::host {

template <class Out, class E, int N>
void run(const ShardTask<Out, E, N>& t) {
  const index_t n = t.n;
  if (t.mode != path::cartesian) {
    for (index_t i = 0; i < n; ++i) t.out.store_linear(i, t.e.linear(i));
    return;
  }
  if constexpr (N > 0) {
    // Walk the box in column-major order, carrying the N-d index instead of dividing.
    index_t idx[N] = {};
    const index_t inner = t.ext[0];
    for (index_t done = 0; done < n; done += inner) {
      for (index_t i = 0; i < inner; ++i) {
        idx[0] = i;
        t.out.store_at(idx, t.e.at(idx));
      }
      idx[0] = 0;
      for (int k = 1; k < N; ++k) {
        if (++idx[k] < t.ext[k]) break;
        idx[k] = 0;
      }
    }
  } else {
    const index_t* idx = nullptr;
    t.out.store_at(idx, t.e.at(idx));
  }
}

}  // namespace tessera::detail::host
