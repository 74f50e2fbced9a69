// SPDX-License-Identifier: Apache-2.0
// Tessera host executor for reductions: the shard's evaluator folded in a loop.
#pragma once
#include <tessera/evaluator.hpp>

namespace tessera::detail::host {

// Folds map(e(i)) over the shard with op, starting from init. Acc is the accumulator type
// (callers pass double for floating sums and products, so host devices sum in double).
template <class Acc, class E, int N, class Map, class Op>
Acc reduce(const E& e, path mode, index_t n, const index_t* ext, Map map, Op op, Acc init) {
  Acc acc = init;
  if (mode != path::cartesian) {
    for (index_t i = 0; i < n; ++i) acc = op(acc, static_cast<Acc>(map(e.linear(i))));
    return acc;
  }
  if constexpr (N > 0) {
    index_t idx[N] = {};
    for (index_t done = 0; done < n; done += ext[0]) {
      for (index_t i = 0; i < ext[0]; ++i) {
        idx[0] = i;
        acc = op(acc, static_cast<Acc>(map(e.at(idx))));
      }
      idx[0] = 0;
      for (int k = 1; k < N; ++k) {
        if (++idx[k] < ext[k]) break;
        idx[k] = 0;
      }
    }
  } else {
    const index_t* idx = nullptr;
    acc = op(acc, static_cast<Acc>(map(e.at(idx))));
  }
  return acc;
}

}  // namespace tessera::detail::host
