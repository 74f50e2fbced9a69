// SPDX-License-Identifier: Apache-2.0
// Tessera: statistics built from the reductions. var and std are Julia's (two passes: the mean,
// then the squared deviations, so no cancellation between large sums), corrected by default:
// divided by n - 1 (Julia's corrected=true; NumPy's ddof=1). With dims, the mean broadcasts back
// over the reduced dims; it is replicated when the shard dim was reduced, which the placement rule
// allows against the sharded input. Call std qualified (tessera::std) or as stddev: after `using
// namespace tessera;` an unqualified std(x) is ambiguous with namespace std.
#pragma once
#include <tessera/reduce_dims.hpp>

#include <cmath>
#include <limits>

namespace tessera {

/// var(x[, corrected]): the variance of every element; NaN with fewer than two (one when
/// uncorrected) elements. float for float input, double otherwise.
template <expression X>
auto var(X&& x, bool corrected = true) {
  auto node = detail::to_node(std::forward<X>(x));
  using R = detail::real_result_t<typename decltype(node)::value_type>;
  const double n = static_cast<double>(detail::length_of(node));
  const double m = static_cast<double>(mean(node));
  const double ss = sum(abs2(cast<double>(node) - m));
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
  using R = detail::real_result_t<typename decltype(node)::value_type>;
  const double n = static_cast<double>(detail::reduced_count(node, d));
  auto m = sum(cast<double>(node), d);  // the sum, scaled below: one array less
  auto ss = sum(abs2(cast<double>(node) - m / n), d);
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
