// SPDX-License-Identifier: Apache-2.0
// Tessera: arrays built from pieces of others. cat(dim, xs...) (vcat: dim 0, hcat: dim 1),
// stack(xs..., dim) and repeat(a, counts...) make a new array whose placement follows the first
// operand (placement_like) and fill windows of it with copy_into, copy's machinery: an assignment
// of views where a piece stays on its device, a device-to-device copy where it moves. Operands of
// lower rank count as having trailing dims of size 1 (Julia), through reshape views.
#pragma once
#include <tessera/reshape.hpp>

#include <limits>
#include <memory>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

namespace tessera {
namespace detail {

// The placement of a new array that follows `l`: sharded along the same dim over the same devices
// (balanced blocks of the new extent), replicated over the same devices, or on the same device.
template <class T, int N>
Placement placement_like(const Layout<T, N>& l) {
  if (l.parts.empty()) return Placement{};
  if (l.replicated) return replicate(l.devices());
  if (l.shard_dim >= 0 && l.parts.size() > 1) return shard(l.shard_dim, l.devices());
  return on(l.parts[0].device);
}

// The box [origin, origin + extent) of `l`, as a view whose indices start at 0.
template <class T, int N>
std::shared_ptr<const Layout<T, N>> window(const Layout<T, N>& l, const Shape<N>& origin, const Shape<N>& extent) {
  return [&]<std::size_t... K>(std::index_sequence<K...>) {
    return make_view<T, N, N>(l, range(origin[K], origin[K] + extent[K])...);
  }(std::make_index_sequence<N>{});
}

// `l` with trailing size-1 dims up to rank R (a view; reshape_layout copies only if it must).
template <int R, class T, int N>
std::shared_ptr<const Layout<T, R>> padded(const Layout<T, N>& l) {
  static_assert(N <= R, "padded: the rank only grows");
  if constexpr (N == R) {
    return std::shared_ptr<const Layout<T, R>>(std::shared_ptr<const Layout<T, R>>{}, &l);
  } else {
    Shape<R> s;
    s.fill(1);
    for (int k = 0; k < N; ++k) s[k] = l.shape[k];
    return reshape_layout<T, N, R>(l, s);
  }
}

// The first `rank` extents of s: an operand's shape as the user wrote it, before padding.
template <int R>
std::string shape_prefix(const Shape<R>& s, int rank) {
  if (rank == 0) return "0-dimensional";
  std::string out;
  for (int k = 0; k < rank; ++k) out += (k ? "×" : "") + std::to_string(s[k]);
  return rank == 1 ? out + "-element" : out;
}

// cat's core: xs (padded to rank R; ranks[i] is operand i's own rank) concatenated along dim.
// Every check runs before anything is allocated, so an error leaves every array as it was.
template <class T, int R>
Array<T, R> concat(const std::vector<std::shared_ptr<const Layout<T, R>>>& xs, const std::vector<int>& ranks,
                   int dim, const std::string& what) {
  if (xs.empty()) throw invalid_argument("tessera: " + what + " of no arrays: expected at least one");
  if (dim < 0 || dim >= R) {
    throw invalid_argument("tessera: " + what + " along dimension " + std::to_string(dim) + " of arrays of rank " +
                           std::to_string(R) + ": expected a dimension in [0, " + std::to_string(R) +
                           "); stack(xs..., dim) adds a dimension");
  }
  Shape<R> shape = xs[0]->shape;
  shape[dim] = 0;
  for (std::size_t i = 0; i < xs.size(); ++i) {
    for (int k = 0; k < R; ++k) {
      if (k == dim || xs[i]->shape[k] == xs[0]->shape[k]) continue;
      throw dimension_mismatch("tessera::dimension_mismatch: " + what + " along dimension " + std::to_string(dim) +
                               ": operand #1 has shape " + shape_prefix<R>(xs[0]->shape, ranks[0]) + " and operand #" +
                               std::to_string(i + 1) + " has shape " + shape_prefix<R>(xs[i]->shape, ranks[i]) +
                               "; dimension " + std::to_string(k) + " has sizes " + std::to_string(xs[0]->shape[k]) +
                               " and " + std::to_string(xs[i]->shape[k]) + " (all but dimension " +
                               std::to_string(dim) + " must agree)");
    }
    shape[dim] += xs[i]->shape[dim];
  }
  auto out = std::make_shared<const Layout<T, R>>(
      allocate_layout<T, R>(geometry_from_placement<R>(shape, placement_like(*xs[0])), xs[0]->mem));
  Shape<R> at{};
  for (auto& x : xs) {
    if (volume<R>(x->shape) > 0) copy_into(*window<T, R>(*out, at, x->shape), *x);
    at[dim] += x->shape[dim];
  }
  return Array<T, R>(std::move(out));
}

template <class X, class... Rest>
inline constexpr bool same_value_types = (std::is_same_v<value_of<X>, value_of<Rest>> && ...);

template <int Min, class... X>
inline constexpr int cat_rank = [] {
  int r = Min;
  ((r = array_rank<X> > r ? array_rank<X> : r), ...);
  return r;
}();

template <int R, class... X>
auto cat_pack(int dim, const std::string& what, const X&... xs) {
  static_assert(same_value_types<X...>,
                "TESSERA_ELEMENT_TYPE_MISMATCH: cat/hcat/vcat/stack take arrays of one element type; convert with "
                "Array<T, N>(cast<T>(x))");
  using T = value_of<std::tuple_element_t<0, std::tuple<X...>>>;
  return concat<T, R>({padded<R>(xs.layout())...}, {array_rank<X>...}, dim, what);
}

// stack's core: every x of rank N gets a size-1 dim inserted at `dim`, then they are concatenated
// along it. Shapes are compared first, as the user wrote them.
template <class T, int N>
Array<T, N + 1> stack_layouts(const std::vector<const Layout<T, N>*>& xs, int dim) {
  if (xs.empty()) throw invalid_argument("tessera: stack of no arrays: expected at least one");
  if (dim < 0 || dim > N) {
    throw invalid_argument("tessera: stack along dimension " + std::to_string(dim) + " of arrays of rank " +
                           std::to_string(N) + ": expected a dimension in [0, " + std::to_string(N) + "]");
  }
  for (std::size_t i = 1; i < xs.size(); ++i) {
    if (xs[i]->shape == xs[0]->shape) continue;
    throw dimension_mismatch("tessera::dimension_mismatch: stack needs arrays of one shape: operand #1 has shape " +
                             shape_string<N>(xs[0]->shape) + " and operand #" + std::to_string(i + 1) +
                             " has shape " + shape_string<N>(xs[i]->shape));
  }
  std::vector<std::shared_ptr<const Layout<T, N + 1>>> grown;
  for (auto* x : xs) {
    Shape<N + 1> s;
    for (int k = 0, j = 0; k <= N; ++k) s[k] = k == dim ? 1 : x->shape[j++];
    grown.push_back(reshape_layout<T, N, N + 1>(*x, s));
  }
  return concat<T, N + 1>(grown, std::vector<int>(xs.size(), N + 1), dim, "stack");
}

template <class... A>
consteval bool stack_args() {
  constexpr std::size_t n = sizeof...(A);
  constexpr bool arrays[] = {array_like<A>...};
  constexpr bool ints[] = {std::is_integral_v<std::remove_cvref_t<A>>...};
  for (std::size_t i = 0; i + 1 < n; ++i)
    if (!arrays[i]) return false;
  return n >= 1 && (arrays[n - 1] || (n >= 2 && ints[n - 1]));
}

template <class... X>
auto stack_pack(int dim, const X&... xs) {
  static_assert(same_value_types<X...>, "TESSERA_ELEMENT_TYPE_MISMATCH: stack takes arrays of one element type");
  using First = std::tuple_element_t<0, std::tuple<X...>>;
  static_assert(((array_rank<X> == array_rank<First>) && ...), "TESSERA_RANK_MISMATCH: stack takes arrays of one rank");
  return stack_layouts<value_of<First>, array_rank<First>>({&xs.layout()...}, dim);
}

// a tiled counts[k] times along each dim (Julia's repeat, NumPy's tile). The first tile is copied
// from a; each dim is then filled by doubling: [f, f + len) from [0, len) of the result itself, so
// a count c costs log2(c) rounds of piece moves rather than c.
template <class T, int R>
Array<T, R> repeat_layout(const Layout<T, R>& a, const Shape<R>& counts) {
  auto call = [&] {
    std::string c;
    for (int j = 0; j < R; ++j) c += ", " + std::to_string(counts[j]);
    return "tessera: repeat(a" + c + ") of a " + shape_string<R>(a.shape) + " array: ";
  };
  Shape<R> shape;
  for (int k = 0; k < R; ++k) {
    if (counts[k] < 0) {
      throw invalid_argument(call() + "counts must be >= 0, found " + std::to_string(counts[k]) + " for dimension " +
                             std::to_string(k));
    }
    if (counts[k] > 0 && a.shape[k] > std::numeric_limits<index_t>::max() / counts[k]) {
      throw invalid_argument(call() + "the extent of dimension " + std::to_string(k) + " overflows a 64-bit index");
    }
    shape[k] = a.shape[k] * counts[k];
  }
  auto out = std::make_shared<const Layout<T, R>>(
      allocate_layout<T, R>(geometry_from_placement<R>(shape, placement_like(a)), a.mem));
  if (volume<R>(shape) == 0) return Array<T, R>(std::move(out));
  copy_into(*window<T, R>(*out, Shape<R>{}, a.shape), a);
  Shape<R> filled = a.shape;
  for (int k = 0; k < R; ++k) {
    for (index_t f = a.shape[k]; f < shape[k];) {
      const index_t len = f < shape[k] - f ? f : shape[k] - f;
      Shape<R> ext = filled, at{};
      ext[k] = len;
      at[k] = f;
      copy_into(*window<T, R>(*out, at, ext), *window<T, R>(*out, Shape<R>{}, ext));
      f += len;
    }
    filled[k] = shape[k];
  }
  return Array<T, R>(std::move(out));
}

}  // namespace detail

/// cat(dim, xs...): the arrays concatenated along `dim` (0-based: Julia's cat(xs...; dims=dim+1)).
/// Every other dimension must agree (dimension_mismatch names both shapes); lower-rank operands
/// count as having trailing dims of size 1. A new array whose placement follows the first operand
/// (placement_like): sharded along the same dim with balanced blocks, replicated, or on its device.
template <detail::array_like... X>
  requires(sizeof...(X) >= 1)
auto cat(int dim, const X&... xs) {
  return detail::cat_pack<detail::cat_rank<0, X...>>(dim, "cat", xs...);
}
/// cat(dim, std::vector of arrays): a run-time number of pieces.
template <detail::array_like X>
auto cat(int dim, const std::vector<X>& xs) {
  using T = detail::value_of<X>;
  constexpr int N = detail::array_rank<X>;
  std::vector<std::shared_ptr<const detail::Layout<T, N>>> ls;
  for (auto& x : xs) {
    x.layout();  // a default-constructed array throws here
    ls.push_back(x.layout_ptr());
  }
  return detail::concat<T, N>(ls, std::vector<int>(xs.size(), N), dim, "cat");
}

/// vcat(xs...): cat along dim 0 (Julia's vcat: vectors give a longer vector, matrices stack rows).
template <detail::array_like... X>
  requires(sizeof...(X) >= 1)
auto vcat(const X&... xs) {
  return detail::cat_pack<detail::cat_rank<1, X...>>(0, "vcat", xs...);
}

/// hcat(xs...): cat along dim 1 (Julia's hcat): vectors are n x 1 columns, so hcat of vectors
/// gives an n x k matrix, and hcat(A, b) appends the column b.
template <detail::array_like... X>
  requires(sizeof...(X) >= 1)
auto hcat(const X&... xs) {
  return detail::cat_pack<detail::cat_rank<2, X...>>(1, "hcat", xs...);
}

/// stack(xs...[, dim]): arrays of one shape along a new dimension `dim` in [0, N], by default the
/// last (Julia's stack: stack(a, b) of vectors is an n x 2 matrix; NumPy's stack(axis=dim)).
/// Placement: follows the first operand, its shard dim shifted past the new dim.
template <class... A>
  requires(detail::stack_args<A...>())
auto stack(const A&... args) {
  using Last = std::remove_cvref_t<std::tuple_element_t<sizeof...(A) - 1, std::tuple<A...>>>;
  if constexpr (std::is_integral_v<Last>) {
    auto t = std::forward_as_tuple(args...);
    return [&]<std::size_t... I>(std::index_sequence<I...>) {
      return detail::stack_pack(static_cast<int>(std::get<sizeof...(A) - 1>(t)), std::get<I>(t)...);
    }(std::make_index_sequence<sizeof...(A) - 1>{});
  } else {
    return detail::stack_pack(detail::array_rank<std::tuple_element_t<0, std::tuple<A...>>>, args...);
  }
}
/// stack(std::vector of arrays[, dim]).
template <detail::array_like X>
auto stack(const std::vector<X>& xs, int dim = detail::array_rank<X>) {
  std::vector<const detail::Layout<detail::value_of<X>, detail::array_rank<X>>*> ls;
  for (auto& x : xs) ls.push_back(&x.layout());
  return detail::stack_layouts<detail::value_of<X>, detail::array_rank<X>>(ls, dim);
}

/// repeat(a, counts...): a tiled counts[k] times along dim k (Julia's repeat(A, counts...), NumPy's
/// tile). Missing counts are 1; more counts than dims add trailing dims. A new array whose
/// placement follows a, like cat.
template <detail::array_like X, std::integral... C>
  requires(sizeof...(C) >= 1)
auto repeat(const X& a, C... counts) {
  using T = detail::value_of<X>;
  constexpr int R = detail::array_rank<X> > static_cast<int>(sizeof...(C)) ? detail::array_rank<X>
                                                                            : static_cast<int>(sizeof...(C));
  Shape<R> c;
  c.fill(1);
  int k = 0;
  ((c[k++] = static_cast<index_t>(counts)), ...);
  return detail::repeat_layout<T, R>(*detail::padded<R>(a.layout()), c);
}

}  // namespace tessera
