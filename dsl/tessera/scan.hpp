// SPDX-License-Identifier: Apache-2.0
// Tessera: cumulative operations, Julia's cumsum, cumprod and accumulate(op, x; dims). The result
// is a new array with x's shape and placement. Each shard scans its own box (a ScanTask: a loop on
// host devices, CUB on GPUs, backend/cuda/scan.cu). Along the shard dimension the shards' scans are
// then joined: the last slice of every shard (its total) is allgathered, every device scans those
// totals in shard order, and each shard but the first combines the total of all earlier shards (its
// carry) into its elements with one fused assignment, op(carry, x), the carry on the left since op
// need not commute. Views and expressions are first materialized into contiguous storage with
// their placement; so is an input of another element type than the result.
#pragma once
#include <tessera/collective.hpp>
#include <tessera/reduce_dims.hpp>
#include <tessera/scan_task.hpp>

#include <backend/execute.hpp>

#include <memory>
#include <string>
#include <type_traits>
#include <vector>

namespace tessera {
namespace detail {

// Scans every non-empty part of `src` along `dim` into the same part of `dst` (same geometry, both
// contiguous).
template <class A, int N>
void scan_parts(const Layout<A, N>& src, const Layout<A, N>& dst, int dim, scan_kind kind) {
  std::vector<Job<ScanTask<A>>> jobs;
  for (std::size_t s = 0; s < src.parts.size(); ++s) {
    const Part<A, N>& p = src.parts[s];
    const Part<A, N>& q = dst.parts[s];
    if (p.empty()) continue;
    index_t inner = 1, outer = 1;
    for (int k = 0; k < dim; ++k) inner *= p.extent[k];
    for (int k = dim + 1; k < N; ++k) outer *= p.extent[k];
    jobs.push_back({.task = {.in = p.ptr, .out = q.ptr, .inner = inner, .len = p.extent[dim], .outer = outer, .op = kind},
                    .device = p.device,
                    .shard = static_cast<int>(s),
                    .n = volume<N>(p.extent)});
    jobs.back().uses.add(p.buf.get());
    jobs.back().uses.add(q.buf.get());
  }
  execute(jobs);
}

// Joins the per-shard scans of `out`, sharded along `d`: see the header comment.
template <class A, int N, class Op>
void add_carries(const Layout<A, N>& out, int d, Op op, scan_kind kind) {
  // Non-empty parts in the order of their indices along d (a reversed view's parts run backwards).
  std::vector<std::size_t> live;
  for (std::size_t s = 0; s < out.parts.size(); ++s)
    if (!out.parts[s].empty()) live.push_back(s);
  order_along(live, out, d);
  const index_t np = static_cast<index_t>(live.size());
  if (np < 2) return;
  // Totals: a slot of extent 1 along d per live part, on its device; filled from its last slice.
  Shape<N> tshape = out.shape;
  tshape[d] = np;
  Geometry<N> tg{tshape, d, false, {}};
  auto slices = blank_layout<A, N>(tshape, d, out.mem);
  for (index_t k = 0; k < np; ++k) {
    const Part<A, N>& p = out.parts[live[static_cast<std::size_t>(k)]];
    typename Geometry<N>::Box b{p.device, {}, p.extent};
    b.origin[d] = k;
    b.extent[d] = 1;
    tg.boxes.push_back(b);
    add_part(*slices, p.device, p.buf, p.ptr + (p.extent[d] - 1) * p.stride[d], b.origin, b.extent, p.stride);
  }
  auto totals = std::make_shared<const Layout<A, N>>(allocate_layout<A, N>(tg, out.mem));
  assign_node(*totals, ArrayLeaf<A, N>{std::shared_ptr<const Layout<A, N>>(std::move(slices))}, par);
  // Every live device gets every total, then scans them: slot k - 1 is the carry of live part k.
  const Array<A, N> gathered = allgather(Array<A, N>(totals));
  const auto& g = gathered.layout();
  auto prefix = clone_geometry<A, N>(g);
  scan_parts(g, *prefix, d, kind);
  auto dst = blank_layout<A, N>(out.shape, d, out.mem);
  Shape<N> cshape = out.shape;
  cshape[d] = 1;
  auto carry = blank_layout<A, N>(cshape, -1, out.mem);
  for (index_t k = 1; k < np; ++k) {
    const Part<A, N>& p = out.parts[live[static_cast<std::size_t>(k)]];
    const Part<A, N>& c = prefix->parts[static_cast<std::size_t>(k)];  // replica on p's device
    add_part(*dst, p.device, p.buf, p.ptr, p.origin, p.extent, p.stride);
    Shape<N> origin = p.origin, extent = p.extent;
    origin[d] = 0;
    extent[d] = 1;
    add_part(*carry, c.device, c.buf, c.ptr + (k - 1) * c.stride[d], origin, extent, c.stride);
  }
  std::shared_ptr<const Layout<A, N>> dst_c(std::move(dst));
  assign_node(*dst_c, make_node(op, ArrayLeaf<A, N>{std::shared_ptr<const Layout<A, N>>(std::move(carry))},
                                ArrayLeaf<A, N>{dst_c}),
              par);
}

template <int N>
int checked_scan_dim(int dim, const Shape<N>& shape, const char* what) {
  if (dim < 0 || dim >= N) {
    throw invalid_argument(std::string("tessera: ") + what + "(x, dim) on an array of shape " + shape_string<N>(shape) +
                           ": expected a dimension in [0, " + std::to_string(N) + "), found " + std::to_string(dim));
  }
  return dim;
}

template <int N>
int single_dim(const ReduceDims& d, const Shape<N>& shape, const char* what) {
  if (d.count != 1) {
    throw invalid_argument(std::string("tessera: ") + what + "(x, dims(...)) scans along one dimension, found " +
                           std::to_string(d.count) + " dimensions");
  }
  return checked_scan_dim<N>(d.d[0], shape, what);
}

template <class A, class Op, class Node>
Array<A, Node::rank> scan_node(const Node& node, int dim, Op op) {
  constexpr int N = Node::rank;
  using V = typename Node::value_type;
  const Shape<N> shape = node.shape();
  constexpr scan_kind kind = scan_kind_of<Op>::value;
  // The input as contiguous storage of A: an array of that type as it is, anything else
  // (views, expressions, other element types) materialized with its placement.
  std::shared_ptr<const Layout<A, N>> src;
  if constexpr (std::is_same_v<Node, ArrayLeaf<A, N>>) {
    bool contiguous = true;
    for (auto& p : node.layout->parts) contiguous = contiguous && (p.empty() || p.contiguous());
    if (contiguous) src = node.layout;
  }
  if (!src) {
    memory mem = memory::unified;
    const Geometry<N> g = placement_of<N>(node, shape, &mem);
    auto tmp = std::make_shared<const Layout<A, N>>(allocate_layout<A, N>(g, mem));
    if constexpr (std::is_same_v<V, A>) assign_node(*tmp, node, par);
    else assign_node(*tmp, make_node(fn::cast_to<A>{}, node), par);
    src = std::move(tmp);
  }
  auto out = clone_geometry<A, N>(*src);
  scan_parts(*src, *out, dim, kind);
  if (out->shard_dim == dim && !out->replicated) add_carries<A, N>(*out, dim, op, kind);
  return Array<A, N>(std::move(out));
}

template <class X>
inline constexpr int expr_rank_v = node_t<X>::rank;

}  // namespace detail

/// The operators accumulate takes: fn::plus, fn::multiplies, fn::min, fn::max (tessera::detail::fn,
/// also reachable as tessera::fn). User functors would need CUB compiled into the calling program.
template <class Op>
concept scan_operator = requires { detail::scan_kind_of<std::remove_cvref_t<Op>>::value; };

namespace fn {
using detail::fn::max;
using detail::fn::min;
using detail::fn::multiplies;
using detail::fn::plus;
}  // namespace fn

/// accumulate(op, x, dim): Julia's accumulate(op, x; dims=dim+1), an inclusive scan along `dim`
/// (0-based). The result type is op's on two elements (plus on int32 stays int32, as in Julia).
template <scan_operator Op, expression X>
auto accumulate(Op op, X&& x, int dim) {
  auto node = detail::to_node(std::forward<X>(x));
  using V = typename decltype(node)::value_type;
  using A = std::decay_t<std::invoke_result_t<const Op&, V, V>>;
  static_assert(detail::scan_type_v<A>,
                "TESSERA_UNSUPPORTED_SCAN_TYPE: scans run in int32_t, int64_t, float or double; cast<T>(x) first");
  constexpr int N = decltype(node)::rank;
  return detail::scan_node<A>(node, detail::checked_scan_dim<N>(dim, node.shape(), "accumulate"), op);
}
template <scan_operator Op, expression X>
auto accumulate(Op op, X&& x, const ReduceDims& d) {
  auto node = detail::to_node(std::forward<X>(x));
  return accumulate(op, std::move(node), detail::single_dim<decltype(node)::rank>(d, node.shape(), "accumulate"));
}
/// accumulate(op, v) of a vector.
template <scan_operator Op, expression X>
  requires(detail::expr_rank_v<X> == 1)
auto accumulate(Op op, X&& v) {
  return accumulate(op, std::forward<X>(v), 0);
}

/// cumsum(x, dim) / cumprod(x, dim): floating types keep their type, integers and bool accumulate
/// in int64_t (Julia's and NumPy's widening, as sum does). cumsum(v) / cumprod(v) of a vector.
template <expression X>
auto cumsum(X&& x, int dim) {
  auto node = detail::to_node(std::forward<X>(x));
  using A = detail::sum_t<typename decltype(node)::value_type>;
  constexpr int N = decltype(node)::rank;
  return detail::scan_node<A>(node, detail::checked_scan_dim<N>(dim, node.shape(), "cumsum"), detail::fn::plus{});
}
template <expression X>
auto cumprod(X&& x, int dim) {
  auto node = detail::to_node(std::forward<X>(x));
  using A = detail::sum_t<typename decltype(node)::value_type>;
  constexpr int N = decltype(node)::rank;
  return detail::scan_node<A>(node, detail::checked_scan_dim<N>(dim, node.shape(), "cumprod"),
                              detail::fn::multiplies{});
}
template <expression X>
auto cumsum(X&& x, const ReduceDims& d) {
  auto node = detail::to_node(std::forward<X>(x));
  return cumsum(std::move(node), detail::single_dim<decltype(node)::rank>(d, node.shape(), "cumsum"));
}
template <expression X>
auto cumprod(X&& x, const ReduceDims& d) {
  auto node = detail::to_node(std::forward<X>(x));
  return cumprod(std::move(node), detail::single_dim<decltype(node)::rank>(d, node.shape(), "cumprod"));
}
template <expression X>
  requires(detail::expr_rank_v<X> == 1)
auto cumsum(X&& v) {
  return cumsum(std::forward<X>(v), 0);
}
template <expression X>
  requires(detail::expr_rank_v<X> == 1)
auto cumprod(X&& v) {
  return cumprod(std::forward<X>(v), 0);
}

}  // namespace tessera
