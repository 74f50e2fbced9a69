// SPDX-License-Identifier: Apache-2.0
// Tessera: new shapes for the same elements. reshape(a, shape) reads a's column-major order in
// another shape (Julia's reshape, NumPy's order='F'); permutedims(a, perm) reorders the
// dimensions (Julia's permutedims, NumPy's transpose(axes)). Both return views: permutedims always
// shares a's storage (each part's extents and strides are permuted, the shard dimension moves with
// its data); reshape shares it when every part can be re-strided in place (NumPy's
// _attempt_nocopy_reshape, column-major) and, for a sharded a, its blocks are whole blocks of the
// new shape along one dimension. Otherwise reshape copies, with the placement documented at
// reshape_layout and in docs/semantics.md ("Shapes").
#pragma once
#include <tessera/copy.hpp>

#include <array>
#include <cstddef>
#include <memory>
#include <string>
#include <type_traits>

namespace tessera {
namespace detail {

template <class X>
concept array_like = is_array_like<std::remove_cvref_t<X>>::value;
template <class X>
using value_of = typename std::remove_cvref_t<X>::value_type;
template <class X>
inline constexpr int array_rank = std::remove_cvref_t<X>::rank;

// The product of s[lo..hi).
template <int N>
index_t dims_product(const Shape<N>& s, int lo, int hi) {
  index_t v = 1;
  for (int k = lo; k < hi; ++k) v *= s[k];
  return v;
}

// Strides that walk a box of extents `to` in the same column-major order as the box (ext, st)
// walks its elements, when they exist. Old and new dimensions are grouped into runs of equal
// product; within a run the old dimensions must be nested (stride[k+1] == stride[k] * ext[k]),
// then the new ones nest from the run's first stride. Size-1 dimensions constrain nothing.
template <int N, int M>
bool reshape_strides(const Shape<N>& ext, const Shape<N>& st, const Shape<M>& to, Shape<M>& out) {
  if (volume<N>(ext) == 0) {
    out = column_major_strides<M>(to);
    return true;
  }
  index_t oe[N > 0 ? N : 1], os[N > 0 ? N : 1];
  int n = 0;
  for (int k = 0; k < N; ++k) {
    if (ext[k] == 1) continue;
    oe[n] = ext[k];
    os[n++] = st[k];
  }
  int oi = 0, ni = 0;
  while (ni < M && oi < n) {
    int nj = ni + 1, oj = oi + 1;
    index_t np = to[ni], op = oe[oi];
    while (np != op) {  // both products end equal, so neither index runs past its end
      if (np < op) np *= to[nj++];
      else op *= oe[oj++];
    }
    for (int k = oi; k + 1 < oj; ++k)
      if (os[k + 1] != os[k] * oe[k]) return false;
    out[ni] = os[oi];
    for (int k = ni + 1; k < nj; ++k) out[k] = out[k - 1] * to[k - 1];
    ni = nj;
    oi = oj;
  }
  for (; ni < M; ++ni) out[ni] = ni > 0 ? out[ni - 1] * to[ni - 1] : 1;  // trailing size-1 dims
  return true;
}

// `src` read in `shape` without moving data, or null when its parts do not allow it. A sharded
// src with shard dim d holds, per block [b0, b1), the column-major runs [I*b0, I*b1) of every
// period P = I * shape[d] (I: the product of the dims before d). A new dim d' with the same
// period and I' dividing every I*b holds the same runs as blocks [I*b0/I', I*b1/I'); within a
// part the local column-major order is then unchanged, so only its strides need re-deriving.
template <class T, int N, int M>
std::shared_ptr<Layout<T, M>> reshape_view(const Layout<T, N>& src, const Shape<M>& shape) {
  auto out = std::make_shared<Layout<T, M>>();
  out->shape = shape;
  out->mem = src.mem;
  out->replicated = src.replicated;
  const bool sharded = !src.replicated && src.shard_dim >= 0 && src.parts.size() > 1;
  int d = -1, nd = -1;
  index_t inner = 1, new_inner = 1;
  if (sharded) {
    d = src.shard_dim;
    inner = dims_product<N>(src.shape, 0, d);
    const index_t outer = dims_product<N>(src.shape, d + 1, N);
    // A new dim of size 1 only holds such blocks when all but one are empty: the last resort.
    for (int pass = 0; pass < 2 && nd < 0; ++pass) {
      for (int j = 0; j < M && nd < 0; ++j) {
        if ((pass == 0 && shape[j] == 1) || dims_product<M>(shape, j + 1, M) != outer) continue;
        const index_t ij = dims_product<M>(shape, 0, j);
        bool whole = ij > 0;
        for (auto& p : src.parts) {
          whole = whole && (inner * p.origin[d]) % ij == 0 && (inner * (p.origin[d] + p.extent[d])) % ij == 0;
        }
        if (whole) nd = j, new_inner = ij;
      }
    }
    if (nd < 0) return nullptr;
    out->shard_dim = nd;
  }
  for (auto& p : src.parts) {
    if (!sharded && p.extent != src.shape) return nullptr;  // not a whole copy: let copy_into sort it out
    Part<T, M> q;
    q.device = p.device;
    q.extent = shape;
    if (sharded) {
      q.extent[nd] = inner * p.extent[d] / new_inner;
      q.origin[nd] = inner * p.origin[d] / new_inner;
    }
    if (volume<N>(p.extent) == 0 || volume<M>(q.extent) == 0) {
      q.stride = column_major_strides<M>(q.extent);
    } else {
      if (!reshape_strides<N, M>(p.extent, p.stride, q.extent, q.stride)) return nullptr;
      q.buf = p.buf;
      q.ptr = p.ptr;
    }
    out->parts.push_back(std::move(q));
  }
  return out;
}

// The placement of a reshape that has to copy: the source's devices, memory kind and kind of
// placement; a sharded source gives the default placement over its devices (shard(M - 1) with
// balanced blocks), or, for a 0-d result, the device of the one element.
template <class T, int N, int M>
Placement reshape_copy_placement(const Layout<T, N>& src) {
  if (src.parts.empty()) return Placement{};
  if (src.replicated) return replicate(src.devices());
  if (src.shard_dim < 0 || src.parts.size() == 1) return on(src.parts[0].device);
  if constexpr (M > 0) {
    return shard(M - 1, src.devices());
  } else {
    for (auto& p : src.parts)
      if (!p.empty()) return on(p.device);
    return on(src.parts[0].device);
  }
}

// The boxes of an empty reshape. Nothing moves, but a sharded source keeps its blocks along the new
// dim whose extent and products before and after match its shard dim's (padding with size-1 dims,
// as cat and stack do, keeps the shard dim where non-empty arrays keep it); else `fallback`.
template <class T, int N, int M>
Geometry<M> empty_geometry(const Layout<T, N>& src, const Shape<M>& shape, const Placement& fallback) {
  const int d = src.shard_dim;
  if (src.replicated || d < 0 || src.parts.size() < 2) return geometry_from_placement<M>(shape, fallback);
  for (int j = 0; j < M; ++j) {
    if (shape[j] != src.shape[d] || dims_product<M>(shape, 0, j) != dims_product<N>(src.shape, 0, d) ||
        dims_product<M>(shape, j + 1, M) != dims_product<N>(src.shape, d + 1, N)) {
      continue;
    }
    Geometry<M> g{shape, j, false, {}};
    for (auto& p : src.parts) {
      typename Geometry<M>::Box b{p.device, {}, shape};
      b.origin[j] = p.origin[d];
      b.extent[j] = p.extent[d];
      g.boxes.push_back(b);
    }
    return g;
  }
  return geometry_from_placement<M>(shape, fallback);
}

template <int N, int M>
[[noreturn]] void reshape_count_error(const Shape<N>& from, const Shape<M>& to, const std::string& why) {
  throw invalid_argument("tessera: reshape of a " + shape_string<N>(from) + " array (" +
                         std::to_string(volume<N>(from)) + " elements) to " + shape_string<M>(to) + ": " + why);
}

// A layout of `shape` holding src's elements in column-major order: a view of src when
// reshape_view allows it; otherwise new contiguous storage with reshape_copy_placement, filled
// through 1-d views of both sides (a sharded source is first re-sharded along its last dim, where
// its blocks are runs of the column-major order).
template <class T, int N, int M>
std::shared_ptr<const Layout<T, M>> reshape_layout(const Layout<T, N>& src, const Shape<M>& shape) {
  for (int k = 0; k < M; ++k)
    if (shape[k] < 0) reshape_count_error<N, M>(src.shape, shape, "extents must be >= 0 (or one -1, inferred)");
  const index_t n = volume<N>(src.shape);
  if (volume<M>(shape) != n) {
    reshape_count_error<N, M>(src.shape, shape, "it holds " + std::to_string(volume<M>(shape)) +
                                                    " elements; the counts must be equal");
  }
  const Placement placement = reshape_copy_placement<T, N, M>(src);
  if (n == 0) return std::make_shared<const Layout<T, M>>(allocate_layout<T, M>(empty_geometry<T, N, M>(src, shape, placement), src.mem));
  if (auto v = reshape_view<T, N, M>(src, shape)) return v;
  auto out = std::make_shared<const Layout<T, M>>(allocate_layout<T, M>(geometry_from_placement<M>(shape, placement), src.mem));
  std::shared_ptr<const Layout<T, 1>> flat_src = reshape_view<T, N, 1>(src, Shape<1>{n});
  if (!flat_src) {
    Placement staging = placement;
    if constexpr (N > 0) {
      if (placement.kind == Placement::kind_t::shard) staging = shard(N - 1, src.devices());
    }
    auto staged = allocate_layout<T, N>(geometry_from_placement<N>(src.shape, staging), src.mem);
    copy_into(staged, src);
    flat_src = reshape_view<T, N, 1>(staged, Shape<1>{n});
  }
  auto flat_out = reshape_view<T, M, 1>(*out, Shape<1>{n});
  if (!flat_src || !flat_out) throw error("tessera: internal error: a contiguous layout has no 1-d view");
  copy_into(*flat_out, *flat_src);
  return out;
}

// A's dims reordered: dim j of the result is dim perm[j] of `l`.
template <class T, int N>
std::shared_ptr<const Layout<T, N>> permuted(const Layout<T, N>& l, const std::array<int, N>& perm) {
  auto out = std::make_shared<Layout<T, N>>();
  out->mem = l.mem;
  out->replicated = l.replicated;
  for (int j = 0; j < N; ++j) {
    out->shape[j] = l.shape[perm[j]];
    if (perm[j] == l.shard_dim) out->shard_dim = j;
  }
  for (auto& p : l.parts) {
    Part<T, N> q;
    q.device = p.device;
    for (int j = 0; j < N; ++j) {
      q.extent[j] = p.extent[perm[j]];
      q.stride[j] = p.stride[perm[j]];
      q.origin[j] = p.origin[perm[j]];
    }
    if (!p.empty()) {
      q.buf = p.buf;
      q.ptr = p.ptr;
    }
    out->parts.push_back(std::move(q));
  }
  return out;
}

template <int N>
void check_permutation(const std::array<int, N>& perm) {
  bool seen[N > 0 ? N : 1] = {};
  for (int j = 0; j < N; ++j) {
    std::string found;
    if (perm[j] < 0 || perm[j] >= N) {
      found = std::to_string(perm[j]) + ", outside [0, " + std::to_string(N) + ")";
    } else if (seen[perm[j]]) {
      found = std::to_string(perm[j]) + " twice";
    } else {
      seen[perm[j]] = true;
      continue;
    }
    std::string list = "{";
    for (int k = 0; k < N; ++k) list += (k ? "," : "") + std::to_string(perm[k]);
    throw invalid_argument("tessera: permutedims(a, " + list + "}) on an array of rank " + std::to_string(N) +
                           ": expected a permutation of 0.." + std::to_string(N - 1) + " (each dimension once), found " +
                           found);
  }
}

template <class D>
inline constexpr bool shape_arg = std::is_integral_v<D> || std::is_same_v<D, all_t>;

}  // namespace detail

/// reshape(a, shape): a's elements in column-major order, in `shape` (Julia's reshape). One
/// extent may be -1, inferred from the others. Returns a view sharing a's storage when a's
/// layout allows it (see the header comment), else a view of a fresh copy; shares_storage(r, a)
/// tells which. Throws invalid_argument naming both shapes when the element counts differ.
template <detail::array_like X, std::size_t M>
View<detail::value_of<X>, int(M)> reshape(const X& a, const std::array<index_t, M>& shape) {
  using T = detail::value_of<X>;
  constexpr int N = detail::array_rank<X>;
  const auto& l = a.layout();
  Shape<int(M)> s = shape;
  int inferred = -1;
  index_t known = 1;
  for (int k = 0; k < int(M); ++k) {
    if (s[k] != -1) {
      known *= s[k] < 0 ? 1 : s[k];
      continue;
    }
    if (inferred >= 0) detail::reshape_count_error<N, int(M)>(l.shape, s, "only one extent may be -1 (inferred)");
    inferred = k;
  }
  if (inferred >= 0) {
    const index_t n = detail::volume<N>(l.shape);
    if (known == 0 || n % known != 0) {
      detail::reshape_count_error<N, int(M)>(l.shape, s, "the other extents (product " + std::to_string(known) +
                                                            ") do not divide the element count");
    }
    s[inferred] = n / known;
  }
  return View<T, int(M)>(detail::reshape_layout<T, N, int(M)>(l, s));
}
/// reshape(a, {3, 4}): the shape as a braced list.
template <detail::array_like X, std::size_t M>
auto reshape(const X& a, const index_t (&dims)[M]) {
  std::array<index_t, M> s;
  for (std::size_t k = 0; k < M; ++k) s[k] = dims[k];
  return reshape(a, s);
}
/// reshape(a, 3, 4) and reshape(a, _, 4) (Julia's reshape(a, :, 4)): `_` is the inferred extent.
template <detail::array_like X, class... D>
  requires(sizeof...(D) >= 1 && (detail::shape_arg<D> && ...))
auto reshape(const X& a, D... dims) {
  auto extent = []<class E>(E e) -> index_t {
    if constexpr (std::is_same_v<E, all_t>) return -1;
    else return static_cast<index_t>(e);
  };
  return reshape(a, std::array<index_t, sizeof...(D)>{extent(dims)...});
}

/// vec(a): a as a vector (Julia's vec, NumPy's ravel(order='F')), a reshape.
template <detail::array_like X>
auto vec(const X& a) {
  return reshape(a, std::array<index_t, 1>{a.length()});
}

/// permutedims(a, perm): dimension j of the result is dimension perm[j] of a (Julia's
/// permutedims, NumPy's transpose(a, axes)), as a view sharing a's storage: nothing moves, and a
/// sharded a gives a view sharded along the dim its shard dim moved to. Parts become strided; an
/// expression reads them through the cartesian path, and copy(p, shard(d)) makes them contiguous.
template <detail::array_like X>
View<detail::value_of<X>, detail::array_rank<X>> permutedims(const X& a,
                                                          const std::array<int, detail::array_rank<X>>& perm) {
  detail::check_permutation<detail::array_rank<X>>(perm);
  return View<detail::value_of<X>, detail::array_rank<X>>(detail::permuted<detail::value_of<X>, detail::array_rank<X>>(a.layout(), perm));
}
/// permutedims(m) of a matrix is its transpose; of a vector, its 1 x n row (Julia).
template <detail::array_like X>
  requires(detail::array_rank<X> == 1 || detail::array_rank<X> == 2)
View<detail::value_of<X>, 2> permutedims(const X& a) {
  if constexpr (detail::array_rank<X> == 2) {
    return permutedims(a, {1, 0});
  } else {
    return reshape(a, std::array<index_t, 2>{1, a.length()});
  }
}

/// shares_storage(a, b): whether a and b read any buffer in common (NumPy's may_share_memory):
/// tells a reshape that is a view of its source from one that copied.
template <detail::array_like A, detail::array_like B>
bool shares_storage(const A& a, const B& b) {
  for (auto& p : a.layout().parts)
    for (auto& q : b.layout().parts)
      if (p.buf && p.buf == q.buf) return true;
  return false;
}

}  // namespace tessera
