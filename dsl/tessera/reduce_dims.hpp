// SPDX-License-Identifier: Apache-2.0
// Tessera: reductions along dimensions, sum(x, dims(0, 2)). The result keeps the rank, with size
// 1 along the reduced dimensions. Each shard runs one DimsTask (backend/cuda/reduce.cuh: lanes
// cooperate on an output when the contiguous dim is reduced, one thread per output walks the
// reduced dims otherwise; a fused expression is read once, never materialized). The placement is
// kept when the shard dimension is not reduced; when it is, every device folds its own block into
// a partial, the partials are allgathered (NCCL on GPUs, in process on host devices) and every
// device folds them, in the same order, into its replica of the result.
#pragma once
#include <tessera/reduce.hpp>

#include <array>
#include <memory>
#include <string>
#include <type_traits>
#include <vector>

namespace tessera {

// The dimensions a reduction folds: dims(1), dims(0, 2).
struct ReduceDims {
  int d[8];
  int count;
};
template <class... I>
  requires(sizeof...(I) >= 1 && sizeof...(I) <= 8 && (std::is_integral_v<I> && ...))
ReduceDims dims(I... i) {
  return ReduceDims{{static_cast<int>(i)...}, static_cast<int>(sizeof...(I))};
}

namespace detail {

template <int R>
std::array<bool, R> reduced_mask(const ReduceDims& d, const char* what) {
  std::array<bool, R> m{};
  for (int i = 0; i < d.count; ++i) {
    const int k = d.d[i];
    if (k < 0 || k >= R || m[k]) {
      throw invalid_argument(std::string("tessera: ") + what + "(x, dims(...)) on an expression of rank " +
                             std::to_string(R) + ": expected distinct dimensions in [0, " + std::to_string(R) +
                             "), found dimension " + std::to_string(k) +
                             (k >= 0 && k < R ? " listed twice" : ", outside that range"));
    }
    m[k] = true;
  }
  return m;
}

template <int R>
std::string describe_dims_reduction(const void* shape) {
  return "a reduction along dims over " + shape_string<R>(*static_cast<const Shape<R>*>(shape));
}

// The task of one shard: the plan's evaluator over the box, its dims split into kept dims (the
// output's, in order) and reduced dims.
template <class Acc, class H, class E, class Map, class Op, int R>
DimsTask<Acc, H, E, Map, Op, R> dims_task(const ShardPlan<E, R>& plan, const std::type_identity_t<std::array<bool, R>>& mask, Map map,
                                          Op op, Acc init, Acc* out, index_t n_out) {
  DimsTask<Acc, H, E, Map, Op, R> t{.e = plan.e, .map = map, .op = op, .init = static_cast<H>(init),
                                    .mode = plan.mode, .wide = plan.wide, .dim0_vectors = plan.dim0_vectors,
                                    .out = out, .n_out = n_out,
                                    // 0 when a reduced dim is empty: the outputs get init
                                    .n_red = plan.n / n_out};
  for (int k = 0; k < R; ++k) {
    t.cst[k] = k == 0 ? 1 : t.cst[k - 1] * plan.ext[k - 1];
    if (mask[k]) {
      t.rdim[t.nr] = k;
      t.rext[t.nr++] = plan.ext[k];
    } else {
      t.kdim[t.nk] = k;
      t.kext[t.nk++] = plan.ext[k];
    }
  }
  t.chunk = t.n_red > 0 ? t.n_red : 1;
  return t;
}

// The reduction itself, into a layout: Acc need not be an element type (argmax folds value-index
// pairs, statistics.hpp), so the caller wraps the layout into an Array, or splits it.
template <class Acc, class Node, class Map, class Op>
std::shared_ptr<const Layout<Acc, Node::rank>> reduce_dims_layout(const Node& node, const ReduceDims& dd, Map map,
                                                                   Op op, Acc init, const char* what) {
  constexpr int R = Node::rank;
  using H = combine_t<Op, Acc>;
  using Task = DimsTask<Acc, H, eval_t<Node, R>, Map, Op, R>;
  const auto mask = reduced_mask<R>(dd, what);
  const Shape<R> in_shape = node.shape();
  Shape<R> out_shape = in_shape;
  for (int k = 0; k < R; ++k)
    if (mask[k]) out_shape[k] = 1;
  const index_t k_out = volume<R>(out_shape);
  memory mem = memory::unified;
  const Geometry<R> gin = placement_of<R>(node, in_shape, &mem);
  const bool shard_reduced = gin.shard_dim >= 0 && mask[gin.shard_dim] && gin.boxes.size() > 1;
  // The output: the input's boxes with the reduced dims collapsed; whole (replicated) boxes when
  // the shard dim is reduced: each device folds its block into a partial, then they combine.
  Geometry<R> gout{out_shape, shard_reduced ? -1 : gin.shard_dim, gin.replicated || shard_reduced, {}};
  for (auto& b : gin.boxes) {
    typename Geometry<R>::Box o{b.device, b.origin, b.extent};
    for (int k = 0; k < R; ++k) {
      if (mask[k] || shard_reduced) {
        o.origin[k] = 0;
        o.extent[k] = out_shape[k];
      }
    }
    gout.boxes.push_back(o);
  }
  auto out = std::make_shared<const Layout<Acc, R>>(allocate_layout<Acc, R>(gout, mem));
  std::shared_ptr<const Layout<Acc, 2>> gather;  // ndev blocks of k_out partials on every device
  if (shard_reduced && k_out > 0) gather = partials_buffer<Acc>(gin, k_out);
  std::vector<Job<Task>> jobs;
  for (std::size_t s = 0; s < gin.boxes.size(); ++s) {
    const auto& p = out->parts[s];
    const index_t n = volume<R>(p.extent);
    if (n == 0) continue;
    const auto plan = plan_shard<R>(node, in_shape, gin.boxes[s], {&in_shape, &describe_dims_reduction<R>});
    Acc* dst = shard_reduced ? gather->parts[s].ptr + static_cast<index_t>(s) * k_out : p.ptr;
    Task t = dims_task<Acc, H>(plan, mask, map, op, init, dst, n);
    jobs.push_back({.task = t, .device = p.device, .shard = static_cast<int>(s), .n = n, .uses = plan.uses});
    jobs.back().uses.add(p.buf.get());
  }
  execute(jobs);
  if (gather) combine_partials<Acc>(*gather, *out, k_out, op, init);
  return out;
}

template <class Acc, class Node, class Map, class Op>
Array<Acc, Node::rank> reduce_dims_node(const Node& node, const ReduceDims& dd, Map map, Op op, Acc init,
                                        const char* what) {
  return Array<Acc, Node::rank>(reduce_dims_layout<Acc>(node, dd, map, op, init, what));
}

template <class X>
index_t reduced_count(const X& node, const ReduceDims& d, const char* what) {
  (void)reduced_mask<X::rank>(d, what);  // the dims are valid before they index the shape
  const auto s = node.shape();
  index_t n = 1;
  for (int i = 0; i < d.count; ++i) n *= s[d.d[i]];
  return n;
}

}  // namespace detail

template <expression X>
auto sum(X&& x, const ReduceDims& d) {
  auto node = detail::to_node(std::forward<X>(x));
  using A = detail::sum_t<typename decltype(node)::value_type>;
  return detail::reduce_dims_node<A>(node, d, detail::red::to<A>{}, detail::red::add{}, A(0), "sum");
}
template <expression X>
auto prod(X&& x, const ReduceDims& d) {
  auto node = detail::to_node(std::forward<X>(x));
  using A = detail::sum_t<typename decltype(node)::value_type>;
  return detail::reduce_dims_node<A>(node, d, detail::red::to<A>{}, detail::red::mul{}, A(1), "prod");
}
template <expression X>
auto count(X&& x, const ReduceDims& d) {
  return detail::reduce_dims_node<std::int64_t>(detail::to_node(std::forward<X>(x)), d, detail::red::count_true{},
                                                detail::red::add{}, std::int64_t(0), "count");
}
template <expression X>
auto any(X&& x, const ReduceDims& d) {
  return detail::reduce_dims_node<bool>(detail::to_node(std::forward<X>(x)), d, detail::red::truthy{},
                                        detail::red::lor{}, false, "any");
}
template <expression X>
auto all(X&& x, const ReduceDims& d) {
  return detail::reduce_dims_node<bool>(detail::to_node(std::forward<X>(x)), d, detail::red::truthy{},
                                        detail::red::land{}, true, "all");
}

namespace detail {
// Reductions without an identity (maximum, argmax...) throw when some output would fold nothing:
// a reduced dimension is empty while the kept ones are not (Julia: "collection slices must be
// non-empty"); an empty output is fine.
template <class X>
void check_nonempty_slices(const X& node, const ReduceDims& d, const char* name) {
  constexpr int R = X::rank;
  if (reduced_count(node, d, name) != 0) return;  // validates the dims first
  Shape<R> out = node.shape();
  for (int i = 0; i < d.count; ++i) out[d.d[i]] = 1;
  if (volume<R>(out) > 0) {
    throw invalid_argument(std::string("tessera: ") + name + "(x, dims(...)) over an empty dimension of shape " +
                           shape_string<R>(node.shape()) +
                           " has no value; expected every reduced dimension to have at least one element");
  }
}

template <bool IsMax, class X>
auto extremum_dims(X&& x, const ReduceDims& d, const char* name) {
  auto node = to_node(std::forward<X>(x));
  using V = typename decltype(node)::value_type;
  check_nonempty_slices(node, d, name);
  return reduce_dims_node<V>(node, d, red::to<V>{}, red::extremum<IsMax>{}, extremum_init<V>(IsMax), name);
}
}  // namespace detail

template <expression X>
auto maximum(X&& x, const ReduceDims& d) {
  return detail::extremum_dims<true>(std::forward<X>(x), d, "maximum");
}
template <expression X>
auto minimum(X&& x, const ReduceDims& d) {
  return detail::extremum_dims<false>(std::forward<X>(x), d, "minimum");
}

// mean(x, dims(...)): float for float input, double otherwise, complex for complex input; NaN over
// an empty dimension.
template <expression X>
auto mean(X&& x, const ReduceDims& d) {
  auto node = detail::to_node(std::forward<X>(x));
  using R = detail::mean_t<typename decltype(node)::value_type>;
  using A = detail::mean_acc_t<typename decltype(node)::value_type>;
  const auto n = static_cast<double>(detail::reduced_count(node, d, "mean"));
  auto s = detail::reduce_dims_node<A>(node, d, detail::red::to<A>{}, detail::red::add{}, A(0), "mean");
  return Array<R, decltype(node)::rank>(cast<R>(s / n));
}

// norm(x, dims(...)): the 2-norm of every slice, accumulated in double.
template <expression X>
auto norm(X&& x, const ReduceDims& d) {
  auto node = detail::to_node(std::forward<X>(x));
  using R = detail::real_result_t<typename decltype(node)::value_type>;
  auto s = detail::reduce_dims_node<double>(node, d, detail::red::abs2{}, detail::red::add{}, 0.0, "norm");
  return Array<R, decltype(node)::rank>(cast<R>(sqrt(s)));
}

// reduce(op, x, init, dims(...)) and mapreduce(f, op, x, init, dims(...)).
template <class Op, expression X, scalar_type Init>
auto reduce(Op op, X&& x, Init init, const ReduceDims& d) {
  auto node = detail::to_node(std::forward<X>(x));
  using V = typename decltype(node)::value_type;
  using A = std::decay_t<std::invoke_result_t<const Op&, Init, V>>;
  return detail::reduce_dims_node<A>(node, d, detail::red::to<A>{}, op, static_cast<A>(init), "reduce");
}
template <class F, class Op, expression X, scalar_type Init>
auto mapreduce(F f, Op op, X&& x, Init init, const ReduceDims& d) {
  auto node = detail::to_node(std::forward<X>(x));
  using V = typename decltype(node)::value_type;
  using M = std::decay_t<std::invoke_result_t<const F&, V>>;
  using A = std::decay_t<std::invoke_result_t<const Op&, Init, M>>;
  return detail::reduce_dims_node<A>(node, d, f, op, static_cast<A>(init), "mapreduce");
}

}  // namespace tessera
