// SPDX-License-Identifier: Apache-2.0
// Tessera: indices (_, range, integers) and the construction of views. A view of a sharded
// array is sharded: each part of the source contributes the piece of the window it holds.
#pragma once
#include <tessera/layout.hpp>

#include <string>
#include <tuple>
#include <type_traits>
#include <utility>

namespace tessera {

struct all_t {};
// `_`: every index of a dimension (Julia's `:`).
inline constexpr all_t _{};

struct Range {
  index_t first, last, step;
};
// range(first, last[, step]): the half-open range first, first + step, ... (last excluded);
// a negative step counts down.
inline Range range(index_t first, index_t last, index_t step = 1) {
  if (step == 0) throw invalid_argument("tessera: range(" + std::to_string(first) + ", " + std::to_string(last) + ", 0): the step must not be 0");
  return {first, last, step};
}

namespace detail {

template <class X>
inline constexpr bool is_range_like = std::is_same_v<X, all_t> || std::is_same_v<X, Range>;
template <class X>
inline constexpr bool index_arg = is_range_like<X> || std::is_integral_v<X>;

// The resolved index along one dimension: `count` positions first, first+step, ...; `drop` for
// an integer index.
struct Resolved {
  index_t first, step, count;
  bool drop;
};

inline Resolved resolve(all_t, index_t n, int) { return {0, 1, n, false}; }
inline Resolved resolve(const Range& r, index_t n, int dim) {
  const index_t count = r.step > 0 ? (r.last > r.first ? (r.last - r.first + r.step - 1) / r.step : 0)
                                   : (r.first > r.last ? (r.first - r.last - r.step - 1) / (-r.step) : 0);
  if (count > 0) {
    const index_t lo = r.step > 0 ? r.first : r.first + (count - 1) * r.step;
    const index_t hi = r.step > 0 ? r.first + (count - 1) * r.step : r.first;
    if (lo < 0 || hi >= n) {
      throw out_of_bounds("tessera: range(" + std::to_string(r.first) + ", " + std::to_string(r.last) + ", " +
                          std::to_string(r.step) + ") in dimension " + std::to_string(dim) + " spans indices " +
                          std::to_string(lo) + " to " + std::to_string(hi) + ", outside [0, " + std::to_string(n) + ")");
    }
  }
  return {r.first, r.step, count, false};
}
template <class I>
  requires std::is_integral_v<I>
Resolved resolve(I i, index_t n, int dim) {
  const auto v = static_cast<index_t>(i);
  if (v < 0 || v >= n) {
    throw out_of_bounds("tessera: index " + std::to_string(v) + " in dimension " + std::to_string(dim) +
                        " is outside [0, " + std::to_string(n) + ")");
  }
  return {v, 1, 1, true};
}

// Positions j in [0, count) with first + j*step inside [lo, hi): a half-open range of j.
inline std::pair<index_t, index_t> window(const Resolved& r, index_t lo, index_t hi) {
  if (r.count == 0 || hi <= lo) return {0, 0};
  auto ceil_div = [](index_t a, index_t b) { return a >= 0 ? (a + b - 1) / b : -((-a) / b); };
  index_t jlo, jhi;
  if (r.step > 0) {
    jlo = ceil_div(lo - r.first, r.step);
    jhi = ceil_div(hi - r.first, r.step);
  } else {
    const index_t s = -r.step;
    jlo = ceil_div(r.first - (hi - 1), s);
    jhi = ceil_div(r.first - lo + 1, s);
  }
  if (jlo < 0) jlo = 0;
  if (jhi > r.count) jhi = r.count;
  return jlo < jhi ? std::pair{jlo, jhi} : std::pair<index_t, index_t>{0, 0};
}

template <class T, int N, int M, class... Idx>
std::shared_ptr<const Layout<T, M>> make_view(const Layout<T, N>& src, Idx... idx) {
  Resolved res[N > 0 ? N : 1];
  {
    int k = 0;
    ((res[k] = resolve(idx, src.shape[k], k), ++k), ...);
  }
  auto out = std::make_shared<Layout<T, M>>();
  out->mem = src.mem;
  out->replicated = src.replicated;
  int dim_map[N > 0 ? N : 1];  // source dimension -> view dimension, -1 when dropped
  for (int k = 0, m = 0; k < N; ++k) {
    dim_map[k] = res[k].drop ? -1 : m;
    if (!res[k].drop) out->shape[m++] = res[k].count;
  }
  out->shard_dim = src.shard_dim >= 0 ? dim_map[src.shard_dim] : -1;
  for (auto& p : src.parts) {
    Part<T, M> v;
    v.device = p.device;
    v.buf = p.buf;
    index_t offset = 0, readable = 1;
    bool inside = true;
    for (int k = 0; k < N && inside; ++k) {
      // The window over the part's box, and over the box plus its halo cells: a part whose box
      // misses the window but whose halo reaches it stays, with an empty box, for reading.
      auto [jlo, jhi] = window(res[k], p.origin[k], p.origin[k] + p.extent[k]);
      auto [rlo, rhi] = std::pair{jlo, jhi};
      if (p.halo_lo[k] + p.halo_hi[k] > 0 && !res[k].drop) {
        std::tie(rlo, rhi) = window(res[k], p.origin[k] - p.halo_lo[k], p.origin[k] + p.extent[k] + p.halo_hi[k]);
        if (jlo >= jhi && rlo < rhi) {
          // Where the empty box sits in the window's order: after the halo cells or before them.
          const bool halo_first = (res[k].first + rlo * res[k].step < p.origin[k]) == (res[k].step > 0);
          jlo = jhi = halo_first ? rhi : rlo;
        }
      }
      if (res[k].count > 0 && rlo >= rhi) {
        inside = false;
        break;
      }
      offset += (res[k].first + jlo * res[k].step - p.origin[k]) * p.stride[k];
      if (dim_map[k] >= 0) {
        const int m = dim_map[k];
        v.origin[m] = jlo;
        v.extent[m] = jhi - jlo;
        v.stride[m] = res[k].step * p.stride[k];
        v.halo_lo[m] = jlo - rlo;
        v.halo_hi[m] = rhi - jhi;
        readable *= rhi - rlo;
      }
    }
    if (!inside) continue;
    v.ptr = readable > 0 ? p.ptr + offset : nullptr;
    out->parts.push_back(std::move(v));
  }
  // A window that lost the shard dimension (or kept a single part) lives on one device.
  if (out->shard_dim >= 0 && out->parts.size() <= 1 && !out->replicated) out->shard_dim = -1;
  return out;
}

}  // namespace detail
}  // namespace tessera
