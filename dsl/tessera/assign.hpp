// SPDX-License-Identifier: Apache-2.0
// Tessera: materialization. Julia's instantiate + copyto!: combine shapes once, plan every shard
// (instantiate.hpp: placement match, evaluator, path, alias check), build one ShardTask per shard,
// then hand them to the executors (backend/execute.hpp).
#pragma once
#include <tessera/array.hpp>
#include <tessera/instantiate.hpp>

#include <backend/execute.hpp>

#include <string>
#include <vector>

namespace tessera::detail {

// The destination, named in placement errors.
template <class T, int N>
std::string describe_destination(const void* l) {
  const auto& d = *static_cast<const Layout<T, N>*>(l);
  return shape_string<N>(d.shape) + ", " + describe_placement(d);
}

template <class T, int N, class Node>
void assign_node(const Layout<T, N>& dst, const Node& node, execution_policy pol) {
  // Instantiate: the expression's shape must broadcast to the destination's.
  check_assignable<N, Node::rank>(dst.shape, node.shape());
  // Unlike Julia, an expression of higher rank than its destination is a compile error even when
  // its extra dimensions have size 1: take a view that drops them instead.
  static_assert(Node::rank <= N, "TESSERA_RANK_MISMATCH: the expression has a higher rank than the destination");
  using Task = ShardTask<OutEval<T, N>, eval_t<Node, N>, N>;
  // Every shard is planned before anything runs: a placement error leaves every array intact.
  std::vector<Job<Task>> jobs;
  jobs.reserve(dst.parts.size());
  bool hazard = false;
  for (std::size_t s = 0; s < dst.parts.size(); ++s) {
    const Part<T, N>& p = dst.parts[s];
    if (p.empty()) continue;
    const auto plan = plan_shard<N>(node, dst.shape, {p.device, p.origin, p.extent},
                                    {&dst, &describe_destination<T, N>}, &p);
    hazard = hazard || plan.hazard;
    Task t{.out = {p.ptr, {}}, .e = plan.e, .ext = plan.ext, .n = plan.n, .mode = plan.mode, .wide = plan.wide};
    for (int k = 0; k < N; ++k) t.out.st[k] = p.stride[k];
    jobs.push_back({.task = t, .device = p.device, .shard = static_cast<int>(s), .n = plan.n});
  }
  if (hazard) {
    // A read overlaps the written region at another offset: evaluate into a temporary first.
    auto tmp = clone_geometry<T, N>(dst);
    assign_node(*tmp, node, pol);
    assign_node(dst, ArrayLeaf<T, N>{tmp}, pol);
    return;
  }
  execute(jobs, pol.sequential);
}

// Fresh contiguous storage with the same devices and boxes as `l`.
template <class T, int N, class U>
std::shared_ptr<const Layout<T, N>> clone_geometry(const Layout<U, N>& l) {
  return std::make_shared<const Layout<T, N>>(allocate_layout<T, N>(geometry_of(l), l.mem));
}

// Writes `node`, an expression of the global index alone (a fill, a generator), into a new array:
// its halo cells too, so that they hold their owners' values from the start.
template <class T, int N, class Node>
void assign_generated(const Layout<T, N>& dst, const Node& node) {
  if (has_halo_cells(dst)) {
    assign_node(including_halo(dst), node, par);
  } else {
    assign_node(dst, node, par);
  }
}

template <class T, int N>
std::shared_ptr<const Layout<T, N>> clone_layout(const Layout<T, N>& src) {
  auto out = clone_geometry<T, N>(src);
  // Same geometry, halos included: every part's halo cells are readable in src's part too.
  assign_generated(*out,
                   ArrayLeaf<T, N>{std::shared_ptr<const Layout<T, N>>(std::shared_ptr<const Layout<T, N>>{}, &src)});
  return out;
}

template <class Node>
auto materialize(const Node& node) {
  constexpr int R = Node::rank;
  using V = typename Node::value_type;
  static_assert(element_type<V>,
                "TESSERA_UNSUPPORTED_RESULT_TYPE: an expression materializes into bool, int32_t, int64_t, float or "
                "double; wrap it in cast<T>(...)");
  const Shape<R> shape = node.shape();
  memory mem = memory::unified;
  const Geometry<R> g = placement_of<R>(node, shape, &mem);
  auto out = std::make_shared<const Layout<V, R>>(allocate_layout<V, R>(g, mem));
  assign_node(*out, node, par);
  return Array<V, R>(std::move(out));
}

}  // namespace tessera::detail

namespace tessera {

// eval(expr): materializes now, into an array with the expression's shape and placement.
template <expression E>
auto eval(E&& e) {
  return detail::materialize(detail::to_node(std::forward<E>(e)));
}

// assign(dst, expr, policy): dst = expr with an explicit dispatch policy (par or seq).
template <class D, operand E>
  requires detail::is_array_like<std::remove_cvref_t<D>>::value
void assign(D&& dst, E&& e, execution_policy pol = par) {
  detail::assign_operand(dst.layout_ptr(), std::forward<E>(e), pol);
}

}  // namespace tessera
