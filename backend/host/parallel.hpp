// SPDX-License-Identifier: Apache-2.0
// Tessera host executor: how one host shard's work spreads over the cores. A shard of more than
// rt::host_chunk_elements elements is cut into chunks of that size, which run on the runtime's host
// thread pool (backend/runtime/host_pool.cpp); a smaller one runs inline, with no pool involved.
// The chunks are the same whatever the thread count, so anything that folds them in chunk order
// (full reductions) gives the same bits with 1 thread or 64.
#pragma once
#include <backend/runtime/runtime.hpp>
#include <tessera/config.hpp>

#include <cstdint>
#include <type_traits>

namespace tessera::detail::host {

inline constexpr index_t chunk_elements = rt::host_chunk_elements;

inline index_t chunk_count(index_t n, index_t chunk = chunk_elements) { return n <= 0 ? 0 : (n + chunk - 1) / chunk; }

// Calls f(c, begin, end) for each chunk c of [0, n) (`chunk` items each, the last one shorter),
// concurrently when there are several; returns once all have run. An exception from f propagates
// (rt::parallel_for: the lowest chunk's, after every started chunk has finished).
template <class F>
void for_each_chunk(index_t n, F&& f, index_t chunk = chunk_elements) {
  const index_t chunks = chunk_count(n, chunk);
  if (chunks <= 1) {
    if (n > 0) f(index_t(0), index_t(0), n);
    return;
  }
  using Fn = std::remove_reference_t<F>;
  struct context {
    Fn* f;
    index_t n, chunk;
  } ctx{&f, n, chunk};
  rt::parallel_for(
      chunks,
      [](const void* p, std::int64_t c) {
        const context& x = *static_cast<const context*>(p);
        const index_t begin = c * x.chunk;
        const index_t end = x.n - begin < x.chunk ? x.n : begin + x.chunk;
        (*x.f)(index_t(c), begin, end);
      },
      &ctx);
}

}  // namespace tessera::detail::host
