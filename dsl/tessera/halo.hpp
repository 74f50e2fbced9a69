// SPDX-License-Identifier: Apache-2.0
// Tessera: halos and stencils. An array created with shard(dim, halo(w)) stores, next to each
// shard, the w cells of each neighbouring shard along `dim`; update_halo(u) refreshes them (and
// the ghost cells of periodic dimensions). Views of such an array may then reach w cells beyond a
// shard's block, so that the shifted views of a stencil,
//   unew(range(1, n-1), range(1, n-1)) = 0.25f * (u(range(0, n-2), range(1, n-1)) + ...),
// evaluate in one fused kernel per shard like any other expression: the planner finds the halo
// cells through the parts' halo_lo/halo_hi (layout.hpp, index.hpp, instantiate.hpp). Nothing is
// exchanged implicitly: halo cells change only at creation, in copies and in update_halo.
// See docs/semantics.md, "Halos and stencils".
#pragma once
#include <tessera/copy.hpp>

#include <memory>
#include <string>
#include <type_traits>
#include <utility>

namespace tessera {
namespace detail {

// The halo cells of every part of `l`, as parts of their own (one box below and one above the
// part's box along each dimension that has halo cells), in the same global coordinates.
template <class T, int N>
Layout<T, N> halo_cells(const Layout<T, N>& l) {
  Layout<T, N> o;
  o.shape = l.shape;
  o.mem = l.mem;
  o.shard_dim = l.shard_dim;
  for (const auto& p : l.parts) {
    if (p.ptr == nullptr) continue;
    for (int k = 0; k < N; ++k) {
      auto side = [&](index_t width, bool below) {
        if (width == 0) return;
        Part<T, N> h;
        h.device = p.device;
        h.buf = p.buf;
        h.stride = p.stride;
        h.origin = p.origin;
        h.extent = p.extent;
        h.origin[k] = below ? p.origin[k] - width : p.origin[k] + p.extent[k];
        h.extent[k] = width;
        h.ptr = p.ptr + (h.origin[k] - p.origin[k]) * p.stride[k];
        o.parts.push_back(std::move(h));
      };
      side(p.halo_lo[k], true);
      side(p.halo_hi[k], false);
    }
  }
  return o;
}

// Refreshes every part's halo cells from the parts that own them: a peer copy per neighbour on
// GPUs (packed where the piece is strided), a memcpy on host devices.
template <class T, int N>
void exchange_halo_cells(const Layout<T, N>& l) {
  copy_into(halo_cells(l), l);
}

// The slab [lo, hi) of dimension `dim` (every index of the other dimensions), as a view.
template <class T, int N, std::size_t... K>
std::shared_ptr<const Layout<T, N>> slab(const Layout<T, N>& l, int dim, index_t lo, index_t hi,
                                         std::index_sequence<K...>) {
  return make_view<T, N, N>(l, (static_cast<int>(K) == dim ? Range{lo, hi, 1} : Range{0, l.shape[K], 1})...);
}
template <class T, int N>
std::shared_ptr<const Layout<T, N>> slab(const Layout<T, N>& l, int dim, index_t lo, index_t hi) {
  return slab<T, N>(l, dim, lo, hi, std::make_index_sequence<static_cast<std::size_t>(N)>{});
}

template <class T, int N>
void update_halo_of(const Layout<T, N>& l) {
  const Halo& h = l.halo;
  if (h.width == 0 || volume<N>(l.shape) == 0) return;
  // Periodic ghost cells, the dimensions other than the shard dimension first: the shard
  // dimension's copies then carry whole slabs, ghost cells included, so that the corners of a
  // 9-point stencil are right.
  auto periodic = [&](int k) {
    if (h.along(k) != boundary::periodic) return;
    const index_t n = l.shape[k], w = h.width;
    copy_into(*slab<T, N>(l, k, 0, w), *slab<T, N>(l, k, n - 2 * w, n - w));
    copy_into(*slab<T, N>(l, k, n - w, n), *slab<T, N>(l, k, w, 2 * w));
  };
  for (int k = 0; k < N; ++k)
    if (k != l.shard_dim) periodic(k);
  if (l.shard_dim >= 0) periodic(l.shard_dim);
  if (has_halo_cells(l)) exchange_halo_cells(l);
}

}  // namespace detail

/// update_halo(u, ...): refreshes the halo cells of each array (created with shard(dim, halo(w))
/// or on(device, halo(w, ...))): first the ghost cells of its periodic dimensions (the outermost w
/// cells on each side take the opposite interior cells), then each shard's copy of its
/// neighbours' w cells. Asynchronous like an assignment: later work on each device sees the new
/// values. An array without a halo is left as it is. ImplicitGlobalGrid.jl's update_halo!.
template <class... A>
  requires(sizeof...(A) > 0 && (detail::is_array_like<std::remove_cvref_t<A>>::value && ...))
void update_halo(const A&... arrays) {
  static_assert((std::is_same_v<std::remove_cvref_t<A>, Array<typename A::value_type, A::rank>> && ...),
                "TESSERA_HALO_OF_VIEW: update_halo takes arrays (Array<T, N>); a view has no halo of its own");
  (detail::update_halo_of(arrays.layout()), ...);
}

/// The halo width an array was created with (0: none).
template <class T, int N>
index_t halo_width(const Array<T, N>& a) {
  return a.layout().halo.width;
}

}  // namespace tessera
