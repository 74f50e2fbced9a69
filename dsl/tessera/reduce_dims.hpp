// SPDX-License-Identifier: Apache-2.0
// Tessera: reductions along dimensions, sum(x, dims(0, 2)). The result keeps the rank, with size
// 1 along the reduced dimensions. Each output element folds its slice of the shard through a
// reducing evaluator, run by the ordinary elementwise executors (so a fused expression is read
// once and never materialized). The placement is kept when the shard dimension is not reduced;
// when it is, every device folds its own block and the partials are combined into a replicated
// result.
#pragma once
#include <tessera/reduce.hpp>

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

// Folds the reduced dimensions (extent rext[k] > 1... or 0) of the inner evaluator for one output
// element. Only the cartesian path is meaningful: the launcher always selects it.
template <class H, class Map, class Op, class E, int N>
struct ReduceEval {
  using value_type = H;
  E e;
  Map map;
  Op op;
  H init;
  index_t rext[N > 0 ? N : 1];  // the folded extent along reduced dims, 1 elsewhere
  bool empty;                   // some reduced dim has extent 0

  template <class I>
  TS_HD H at(const I* idx) const {
    if (empty) return init;
    I j[N > 0 ? N : 1];
    for (int k = 0; k < N; ++k) j[k] = idx[k];
    H acc = init;
    for (;;) {
      acc = op(acc, static_cast<H>(map(e.at(j))));
      int k = 0;
      for (; k < N; ++k) {
        if (rext[k] == 1) continue;
        if (++j[k] < static_cast<I>(rext[k])) break;
        j[k] = 0;
      }
      if (k == N) return acc;
    }
  }
  template <class I>
  TS_HD H linear(I) const {
    return init;  // never selected (see above)
  }
  template <int K, class I>
  TS_HD void vec(I, H (&out)[K]) const {
    for (int j = 0; j < K; ++j) out[j] = init;
  }
};

template <class H, class Map, class Op, class E, int N>
struct device_copyable<ReduceEval<H, Map, Op, E, N>>
    : std::bool_constant<device_copyable_functor_v<Map> && device_copyable_functor_v<Op> &&
                         device_copyable<E>::value> {};

template <int R>
std::array<bool, R> reduced_mask(const ReduceDims& d, const char* what) {
  std::array<bool, R> m{};
  for (int i = 0; i < d.count; ++i) {
    const int k = d.d[i];
    if (k < 0 || k >= R || m[k]) {
      throw invalid_argument(std::string("tessera: ") + what + "(x, dims(...)) on an expression of rank " +
                             std::to_string(R) + ": dimension " + std::to_string(k) +
                             (k >= 0 && k < R ? " is listed twice" : " is outside [0, rank)"));
    }
    m[k] = true;
  }
  return m;
}

template <class Acc, class Node, class Map, class Op>
Array<Acc, Node::rank> reduce_dims_node(const Node& node, const ReduceDims& dd, Map map, Op op, Acc init, const char* what) {
  constexpr int R = Node::rank;
  using H = std::conditional_t<double_combine_v<Op, Acc>, double, Acc>;
  using E = eval_t<Node, R>;
  using RE = ReduceEval<H, Map, Op, E, R>;
  using Task = ShardTask<OutEval<Acc, R>, RE, R>;
  const auto mask = reduced_mask<R>(dd, what);
  const Shape<R> in_shape = node.shape();
  Shape<R> out_shape = in_shape;
  for (int k = 0; k < R; ++k)
    if (mask[k]) out_shape[k] = 1;
  LayoutChoice<R> choice;
  choose<R>(node, in_shape, choice);
  const Geometry<R> gin = choice.rank ? choice.g : geometry_from_placement<R>(in_shape, Placement{});
  const bool shard_reduced = gin.shard_dim >= 0 && mask[gin.shard_dim] && gin.boxes.size() > 1;
  // The output: the input's boxes with the reduced dims collapsed; full boxes (one partial per
  // device, then combined) when the shard dim is reduced.
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
  auto out = std::make_shared<const Layout<Acc, R>>(allocate_layout<Acc, R>(gout, choice.mem));
  std::vector<Task> tasks;
  std::vector<rt::shard_launch> launches;
  for (std::size_t s = 0; s < gin.boxes.size(); ++s) {
    const auto& b = gin.boxes[s];
    const auto& p = out->parts[s];
    const index_t n = volume<R>(p.extent);
    if (n == 0) continue;
    ShardContext<R> c{b.device, in_shape, b.origin, b.extent, nullptr, nullptr, nullptr, {}, nullptr};
    c.dst = &in_shape;
    c.describe_dst = [](const void* sh) {
      return "a reduction along dims over " + shape_string<R>(*static_cast<const Shape<R>*>(sh));
    };
    RE re{build(node, c), map, op, static_cast<H>(init), {}, volume<R>(b.extent) == 0};
    for (int k = 0; k < R; ++k) re.rext[k] = mask[k] ? b.extent[k] : 1;
    Task t{OutEval<Acc, R>{p.ptr, {}}, re, {}, n, path::cartesian, false};
    for (int k = 0; k < R; ++k) {
      t.out.st[k] = p.stride[k];
      t.ext[k] = p.extent[k];
    }
    t.wide = volume<R>(b.extent) >= (index_t(1) << 30) || c.max_offset >= (index_t(1) << 30);
    rt::make_resident(*p.buf);
    tasks.push_back(t);
    launches.push_back({b.device.id(), static_cast<int>(s), b.device.is_host(), n, &run_shard<Task>, nullptr});
  }
  for (std::size_t i = 0; i < tasks.size(); ++i) launches[i].task = &tasks[i];
  rt::run_shards(launches.data(), launches.size(), false);
  if (shard_reduced) {
    // Combine the per-device partials (blocks that were empty hold init) and replicate the result.
    const auto n = static_cast<std::size_t>(volume<R>(out_shape));
    using Store = std::conditional_t<std::is_same_v<Acc, bool>, unsigned char, Acc>;  // vector<bool> is packed
    static_assert(sizeof(Store) == sizeof(Acc));
    std::vector<H> total(n, static_cast<H>(init));
    std::vector<Store> part(n);
    for (std::size_t s = 0; s < out->parts.size(); ++s) {
      const auto& p = out->parts[s];
      if (n == 0 || volume<R>(gin.boxes[s].extent) == 0) continue;
      rt::copy_to_host(p.device.id(), part.data(), n * sizeof(Acc), p.ptr, n * sizeof(Acc), n * sizeof(Acc), 1);
      for (std::size_t i = 0; i < n; ++i) {
        total[i] = static_cast<H>(op(total[i], static_cast<H>(static_cast<Acc>(part[i]))));
      }
    }
    for (std::size_t i = 0; i < n; ++i) part[i] = static_cast<Store>(static_cast<Acc>(total[i]));
    for (auto& p : out->parts) {
      if (n > 0) rt::copy_from_host(p.device.id(), p.ptr, n * sizeof(Acc), part.data(), n * sizeof(Acc), n * sizeof(Acc), 1);
    }
  }
  return Array<Acc, R>(std::move(out));
}

template <class X>
index_t reduced_count(const X& node, const ReduceDims& d) {
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
template <bool IsMax, class X>
auto extremum_dims(X&& x, const ReduceDims& d, const char* name) {
  auto node = to_node(std::forward<X>(x));
  using V = typename decltype(node)::value_type;
  constexpr int R = decltype(node)::rank;
  (void)reduced_mask<R>(d, name);
  if (reduced_count(node, d) == 0 && length_of(node) == 0) {
    Shape<R> out = node.shape();
    for (int i = 0; i < d.count; ++i) out[d.d[i]] = 1;
    if (volume<R>(out) > 0) {
      throw invalid_argument(std::string("tessera: ") + name + "(x, dims(...)) over an empty dimension of shape " +
                             shape_string<R>(node.shape()) + " has no value");
    }
  }
  V init;
  if constexpr (std::is_same_v<V, bool>) init = !IsMax;
  else if constexpr (std::is_floating_point_v<V>) init = IsMax ? -std::numeric_limits<V>::infinity() : std::numeric_limits<V>::infinity();
  else init = IsMax ? std::numeric_limits<V>::lowest() : std::numeric_limits<V>::max();
  return reduce_dims_node<V>(node, d, red::identity{}, red::extremum<IsMax>{}, init, name);
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

// mean(x, dims(...)): float for float input, double otherwise; NaN over an empty dimension.
template <expression X>
auto mean(X&& x, const ReduceDims& d) {
  auto node = detail::to_node(std::forward<X>(x));
  using R = detail::real_result_t<typename decltype(node)::value_type>;
  const auto n = static_cast<double>(detail::reduced_count(node, d));
  auto s = detail::reduce_dims_node<double>(node, d, detail::red::to<double>{}, detail::red::add{}, 0.0, "mean");
  if constexpr (std::is_same_v<R, double>) {
    s = s / n;
    return s;
  } else {
    return Array<R, decltype(node)::rank>(cast<R>(s / n));
  }
}

}  // namespace tessera
