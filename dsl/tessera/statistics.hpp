// SPDX-License-Identifier: Apache-2.0
// Tessera: statistics built from the reductions. var and std are Julia's (two passes: the mean,
// then the squared deviations, so no cancellation between large sums), corrected by default:
// divided by n - 1 (Julia's corrected=true; NumPy's ddof=1). With dims, the mean broadcasts back
// over the reduced dims; it is replicated when the shard dim was reduced, which the placement rule
// allows against the sharded input. Call std qualified (tessera::std) or as stddev: after `using
// namespace tessera;` an unqualified std(x) is ambiguous with namespace std. findmax/argmax and
// friends fold (value, index) pairs, whole or along dims.
#pragma once
#include <tessera/reduce_dims.hpp>

#include <cmath>
#include <cstdint>
#include <limits>
#include <memory>
#include <utility>

namespace tessera {
namespace detail {

template <bool IsMax, class X>
auto find_extremum(X&& x, const char* name) {
  auto node = to_node(std::forward<X>(x));
  using V = typename decltype(node)::value_type;
  constexpr int R = decltype(node)::rank;
  if (length_of(node) == 0) {
    throw invalid_argument(std::string("tessera: ") + name + " of an empty collection (shape " +
                           shape_string<R>(node.shape()) + ") has no value; expected at least one element");
  }
  const Shape<R> shape = node.shape();
  auto pairs = make_node(red::with_index{}, std::move(node), IndexLeaf<R>{shape});
  using P = red::value_index<V>;
  const P init{extremum_init<V>(IsMax), std::numeric_limits<std::int64_t>::max()};
  return reduce_node<P>(pairs, red::to<P>{}, red::arg_extremum<IsMax>{}, init);
}

// Along dims: the same pairs, folded by the dims reduction (every shard and GPU path, and, when the
// shard dim is reduced, the allgather and the fold of the partials in shard order: the pair order
// is total, so the first index wins however the fold is split). The pairs land in a layout of the
// result's geometry, which one elementwise pass splits into what the caller wants.
template <bool IsMax, class X>
auto find_extremum_dims(X&& x, const ReduceDims& d, const char* name) {
  auto node = to_node(std::forward<X>(x));
  using V = typename decltype(node)::value_type;
  constexpr int R = decltype(node)::rank;
  static_assert(element_type<V>, "TESSERA_UNSUPPORTED_RESULT_TYPE: findmax/argmax along dims return values of the "
                                 "expression's type, which must be bool, int32_t, int64_t, float or double; wrap it "
                                 "in cast<T>(...)");
  check_nonempty_slices(node, d, name);
  const Shape<R> shape = node.shape();
  auto pairs = make_node(red::with_index{}, std::move(node), IndexLeaf<R>{shape});
  using P = red::value_index<V>;
  const P init{extremum_init<V>(IsMax), std::numeric_limits<std::int64_t>::max()};
  return reduce_dims_layout<P>(pairs, d, red::to<P>{}, red::arg_extremum<IsMax>{}, init, name);
}

// One half of the pairs (red::value_of or red::index_of), as an array of their geometry.
template <class T, class F, class P, int R>
Array<T, R> split_pairs(const std::shared_ptr<const Layout<P, R>>& pairs, F f) {
  auto out = clone_geometry<T, R>(*pairs);
  assign_node(*out, Broadcasted<F, ArrayLeaf<P, R>>{f, {ArrayLeaf<P, R>{pairs}}}, par);
  return Array<T, R>(std::move(out));
}

// Both halves: (values, indices).
template <class V, int R>
std::pair<Array<V, R>, Array<std::int64_t, R>> split_both(const std::shared_ptr<const Layout<red::value_index<V>, R>>& pairs) {
  return {split_pairs<V>(pairs, red::value_of{}), split_pairs<std::int64_t>(pairs, red::index_of{})};
}

}  // namespace detail

/// findmax(x) / findmin(x): the largest (smallest) element and its index, a column-major linear
/// index into x (Julia's findmax gives a CartesianIndex for arrays); NaN wins wherever it sits,
/// ties give the first index; an empty x throws. argmax / argmin: the index alone.
template <expression X>
auto findmax(X&& x) {
  const auto p = detail::find_extremum<true>(std::forward<X>(x), "findmax");
  return std::pair{p.value, p.index};
}
template <expression X>
auto findmin(X&& x) {
  const auto p = detail::find_extremum<false>(std::forward<X>(x), "findmin");
  return std::pair{p.value, p.index};
}
template <expression X>
std::int64_t argmax(X&& x) {
  return detail::find_extremum<true>(std::forward<X>(x), "argmax").index;
}
template <expression X>
std::int64_t argmin(X&& x) {
  return detail::find_extremum<false>(std::forward<X>(x), "argmin").index;
}

/// findmax(x, dims(...)) / findmin(x, dims(...)): the largest (smallest) element of every slice
/// along dims and its index, as two arrays of the input's rank with size 1 along dims (the
/// placement of sum(x, dims(...))): `auto [v, i] = findmax(a, dims(1));`. Each index is the
/// column-major linear index into x of the element found, like the whole-array findmax (Julia
/// gives CartesianIndex into x); NaN wins, ties give the first index; a slice with no element
/// throws. argmax / argmin along dims: the index array alone.
template <expression X>
auto findmax(X&& x, const ReduceDims& d) {
  return detail::split_both(detail::find_extremum_dims<true>(std::forward<X>(x), d, "findmax"));
}
template <expression X>
auto findmin(X&& x, const ReduceDims& d) {
  return detail::split_both(detail::find_extremum_dims<false>(std::forward<X>(x), d, "findmin"));
}
template <expression X>
auto argmax(X&& x, const ReduceDims& d) {
  auto pairs = detail::find_extremum_dims<true>(std::forward<X>(x), d, "argmax");
  return detail::split_pairs<std::int64_t>(pairs, detail::red::index_of{});
}
template <expression X>
auto argmin(X&& x, const ReduceDims& d) {
  auto pairs = detail::find_extremum_dims<false>(std::forward<X>(x), d, "argmin");
  return detail::split_pairs<std::int64_t>(pairs, detail::red::index_of{});
}

namespace detail {
// What var computes in: double, or complex<double> for complex input (then the variance is the
// mean of |x - mean|^2, a real number, as in Julia and NumPy).
template <class V>
using var_work_t = std::conditional_t<is_complex_v<V>, complex<double>, double>;
}  // namespace detail

/// var(x[, corrected]): the variance of every element; NaN with fewer than two (one when
/// uncorrected) elements. float for float (and complex<float>) input, double otherwise.
template <expression X>
auto var(X&& x, bool corrected = true) {
  auto node = detail::to_node(std::forward<X>(x));
  using V = typename decltype(node)::value_type;
  using R = detail::real_result_t<V>;
  using W = detail::var_work_t<V>;
  const double n = static_cast<double>(detail::length_of(node));
  const W m = sum(cast<W>(node)) / n;  // in double: a float mean would round first
  const double ss = sum(abs2(cast<W>(node) - m));
  const double d = n - (corrected ? 1.0 : 0.0);
  return static_cast<R>(d > 0 ? ss / d : std::numeric_limits<double>::quiet_NaN());
}

/// std(x[, corrected]): sqrt(var(x)).
template <expression X>
auto std(X&& x, bool corrected = true) {
  using std::sqrt;
  return sqrt(var(std::forward<X>(x), corrected));
}

/// var(x, dims(...)[, corrected]): along dims, keeping the rank (size 1 along them).
template <expression X>
auto var(X&& x, const ReduceDims& d, bool corrected = true) {
  auto node = detail::to_node(std::forward<X>(x));
  using V = typename decltype(node)::value_type;
  using R = detail::real_result_t<V>;
  using W = detail::var_work_t<V>;
  const double n = static_cast<double>(detail::reduced_count(node, d, "var"));
  auto m = sum(cast<W>(node), d);  // the sum, scaled below: one array less
  auto ss = sum(abs2(cast<W>(node) - m / n), d);
  const double dn = n - (corrected ? 1.0 : 0.0);
  const double scale = dn > 0 ? 1.0 / dn : std::numeric_limits<double>::quiet_NaN();
  return Array<R, decltype(node)::rank>(cast<R>(ss * scale));
}

/// std(x, dims(...)[, corrected]): sqrt of var along dims.
template <expression X>
auto std(X&& x, const ReduceDims& d, bool corrected = true) {
  auto v = var(std::forward<X>(x), d, corrected);
  using A = decltype(v);
  return A(sqrt(v));
}

}  // namespace tessera

namespace tessera {

/// stddev(...): tessera::std under a name that an unqualified call can use after
/// `using namespace tessera;` (where `std(x)` would be ambiguous with namespace std).
template <expression X>
auto stddev(X&& x, bool corrected = true) {
  return tessera::std(std::forward<X>(x), corrected);
}
template <expression X>
auto stddev(X&& x, const ReduceDims& d, bool corrected = true) {
  return tessera::std(std::forward<X>(x), d, corrected);
}

}  // namespace tessera
