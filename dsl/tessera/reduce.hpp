// SPDX-License-Identifier: Apache-2.0
// Tessera: full reductions to a host scalar. Each shard is folded by its device's executor
// (a CUB DeviceReduce over a transform iterator of the shard's evaluator on GPUs, a loop on host
// devices), so sum(a * b) reads a and b once; the partials are combined on the host, in double
// for floating sums and products. A replicated expression is reduced over one replica.
#pragma once
#include <tessera/assign.hpp>

#include <backend/host/reduce.hpp>
#if TS_DEVICE_COMPILER
#include <backend/cuda/reduce.cuh>
#endif

#include <cmath>
#include <limits>
#include <string>
#include <type_traits>
#include <vector>

namespace tessera {
namespace detail {
namespace red {

struct add {
  template <class A, class B>
  TS_HD auto operator()(A a, B b) const {
    return a + b;
  }
};
struct mul {
  template <class A, class B>
  TS_HD auto operator()(A a, B b) const {
    return a * b;
  }
};
template <bool IsMax>
struct extremum {  // NaN wins wherever it sits (Julia's maximum/minimum)
  template <class A>
  TS_HD A operator()(A a, A b) const {
    if constexpr (std::is_floating_point_v<A>) {
      if (a != a) return a;
      if (b != b) return b;
    }
    return (IsMax ? a < b : b < a) ? b : a;
  }
};
struct lor {
  TS_HD bool operator()(bool a, bool b) const { return a || b; }
};
struct land {
  TS_HD bool operator()(bool a, bool b) const { return a && b; }
};
struct identity {
  template <class A>
  TS_HD A operator()(A a) const {
    return a;
  }
};
struct truthy {
  template <class A>
  TS_HD bool operator()(A a) const {
    return a != A(0);
  }
};
struct count_true {
  template <class A>
  TS_HD std::int64_t operator()(A a) const {
    return a != A(0) ? 1 : 0;
  }
};
struct abs2 {
  template <class A>
  TS_HD double operator()(A a) const {
    return double(a) * double(a);
  }
};
template <class T>
struct to {
  template <class A>
  TS_HD T operator()(A a) const {
    return static_cast<T>(a);
  }
};

}  // namespace red

template <class Op, class Acc>
inline constexpr bool double_combine_v =
    std::is_floating_point_v<Acc> && (std::is_same_v<Op, red::add> || std::is_same_v<Op, red::mul>);

// Folds map(x) with op over every shard of the expression (init must be op's neutral element:
// each shard starts from it, as Julia's reduce(op, x; init) requires), then the partials.
template <class Acc, class Node, class Map, class Op>
Acc reduce_node(const Node& node, Map map, Op op, Acc init) {
  constexpr int R = Node::rank;
  using E = eval_t<Node, R>;
  using H = std::conditional_t<double_combine_v<Op, Acc>, double, Acc>;  // host-side accumulator
  const Shape<R> shape = node.shape();
  LayoutChoice<R> choice;
  choose<R>(node, shape, choice);
  const Geometry<R> g = choice.rank ? choice.g : geometry_from_placement<R>(shape, Placement{});
  struct Planned {
    E e;
    path mode;
    index_t n;
    Shape<R> ext;
    Device device;
    int shard;
  };
  std::vector<Planned> plan;
  for (std::size_t s = 0; s < g.boxes.size(); ++s) {
    const auto& b = g.boxes[s];
    const index_t n = volume<R>(b.extent);
    if (n > 0) {
      ShardContext<R> c{b.device, shape, b.origin, b.extent, nullptr, nullptr, nullptr, {}, nullptr};
      c.dst = &shape;
      c.describe_dst = [](const void* sh) {
        return "a reduction over " + shape_string<R>(*static_cast<const Shape<R>*>(sh));
      };
      E e = build(node, c);
      plan.push_back({e, c.linear ? path::linear : path::cartesian, n, b.extent, b.device, static_cast<int>(s)});
    }
    if (g.replicated) break;  // every replica holds the same values
  }
  std::vector<H> partials;
  partials.reserve(plan.size());
#if TS_DEVICE_COMPILER
  std::vector<std::pair<const Planned*, Acc*>> pending;
#endif
  const int saved = rt::get_cuda_device();
  try {
    for (auto& p : plan) {
      if (p.device.is_host()) {
        partials.push_back(host::reduce<H, E, R>(p.e, p.mode, p.n, p.ext.data(), map, op, static_cast<H>(init)));
        continue;
      }
#if TS_DEVICE_COMPILER
      const int d = p.device.id();
      const std::size_t temp = cuda::reduce_temp_bytes<Acc, E, R>(p.e, p.n, map, op, init, d, p.shard);
      auto* base = static_cast<char*>(rt::scratch(d, 256 + temp));
      auto* out = reinterpret_cast<Acc*>(base);
      cuda::reduce<Acc, E, R>(p.e, p.mode, p.n, p.ext.data(), map, op, init, out, base + 256, temp, d, p.shard);
      pending.push_back({&p, out});
#else
      throw error("tessera: a reduction ran on " + p.device.name() +
                  " from a translation unit compiled without nvcc; compile it as CUDA or use host devices");
#endif
    }
#if TS_DEVICE_COMPILER
    // Every GPU is busy before the host waits on the first result.
    for (auto& [p, out] : pending) {
      Acc v{};
      rt::copy_to_host(p->device.id(), &v, sizeof(Acc), out, sizeof(Acc), sizeof(Acc), 1);
      partials.push_back(static_cast<H>(v));
    }
#endif
  } catch (...) {
    rt::restore_cuda_device(saved);
    throw;
  }
  rt::restore_cuda_device(saved);
  if (partials.empty()) return init;
  H total = partials[0];
  for (std::size_t i = 1; i < partials.size(); ++i) total = static_cast<H>(op(total, partials[i]));
  return static_cast<Acc>(total);
}

template <class V>
using sum_t = std::conditional_t<std::is_floating_point_v<V>, V, std::int64_t>;
template <class V>
using real_result_t = std::conditional_t<std::is_same_v<V, float>, float, double>;

template <class E>
auto length_of(const E& node) {
  return volume<std::remove_cvref_t<decltype(node)>::rank>(node.shape());
}

}  // namespace detail

// sum(x): a host scalar (float stays float, integers and bool sum in int64); empty gives 0.
template <expression X>
auto sum(X&& x) {
  auto node = detail::to_node(std::forward<X>(x));
  using A = detail::sum_t<typename decltype(node)::value_type>;
  return detail::reduce_node<A>(node, detail::red::to<A>{}, detail::red::add{}, A(0));
}

// prod(x): like sum, with 1 for an empty input.
template <expression X>
auto prod(X&& x) {
  auto node = detail::to_node(std::forward<X>(x));
  using A = detail::sum_t<typename decltype(node)::value_type>;
  return detail::reduce_node<A>(node, detail::red::to<A>{}, detail::red::mul{}, A(1));
}

namespace detail {
template <bool IsMax, class X>
auto extremum(X&& x, const char* name) {
  auto node = to_node(std::forward<X>(x));
  using V = typename decltype(node)::value_type;
  if (length_of(node) == 0) {
    throw invalid_argument(std::string("tessera: ") + name + " of an empty collection (shape " +
                           shape_string<decltype(node)::rank>(node.shape()) + ") has no value; use reduce with an init");
  }
  V init;
  if constexpr (std::is_same_v<V, bool>) init = !IsMax;
  else if constexpr (std::is_floating_point_v<V>) init = IsMax ? -std::numeric_limits<V>::infinity() : std::numeric_limits<V>::infinity();
  else init = IsMax ? std::numeric_limits<V>::lowest() : std::numeric_limits<V>::max();
  return reduce_node<V>(node, red::identity{}, red::extremum<IsMax>{}, init);
}
}  // namespace detail

// maximum(x) / minimum(x): NaN propagates; an empty input throws invalid_argument.
template <expression X>
auto maximum(X&& x) {
  return detail::extremum<true>(std::forward<X>(x), "maximum");
}
template <expression X>
auto minimum(X&& x) {
  return detail::extremum<false>(std::forward<X>(x), "minimum");
}

// mean(x): float for float input, double otherwise (Julia); NaN for an empty input.
template <expression X>
auto mean(X&& x) {
  auto node = detail::to_node(std::forward<X>(x));
  using R = detail::real_result_t<typename decltype(node)::value_type>;
  const auto n = detail::length_of(node);
  const double s = detail::reduce_node<double>(node, detail::red::to<double>{}, detail::red::add{}, 0.0);
  return static_cast<R>(s / static_cast<double>(n));
}

// norm(x): the 2-norm, accumulated in double.
template <expression X>
auto norm(X&& x) {
  auto node = detail::to_node(std::forward<X>(x));
  using R = detail::real_result_t<typename decltype(node)::value_type>;
  return static_cast<R>(std::sqrt(detail::reduce_node<double>(node, detail::red::abs2{}, detail::red::add{}, 0.0)));
}

// any(x) / all(x) / count(x): on bool (or any) expressions, by truth value.
template <expression X>
bool any(X&& x) {
  return detail::reduce_node<bool>(detail::to_node(std::forward<X>(x)), detail::red::truthy{}, detail::red::lor{}, false);
}
template <expression X>
bool all(X&& x) {
  return detail::reduce_node<bool>(detail::to_node(std::forward<X>(x)), detail::red::truthy{}, detail::red::land{}, true);
}
template <expression X>
std::int64_t count(X&& x) {
  return detail::reduce_node<std::int64_t>(detail::to_node(std::forward<X>(x)), detail::red::count_true{},
                                           detail::red::add{}, std::int64_t(0));
}

// dot(a, b): sum(a * b) without a temporary.
template <expression A, expression B>
auto dot(A&& a, B&& b) {
  return sum(std::forward<A>(a) * std::forward<B>(b));
}

// reduce(op, x, init) and mapreduce(f, op, x, init) with user __host__ __device__ functors; init
// must be op's neutral element (each shard starts from it).
template <class Op, expression X, scalar_type Init>
auto reduce(Op op, X&& x, Init init) {
  auto node = detail::to_node(std::forward<X>(x));
  using V = typename decltype(node)::value_type;
  using A = std::decay_t<std::invoke_result_t<const Op&, Init, V>>;
  return detail::reduce_node<A>(node, detail::red::to<A>{}, op, static_cast<A>(init));
}
template <class F, class Op, expression X, scalar_type Init>
auto mapreduce(F f, Op op, X&& x, Init init) {
  auto node = detail::to_node(std::forward<X>(x));
  using V = typename decltype(node)::value_type;
  using M = std::decay_t<std::invoke_result_t<const F&, V>>;
  using A = std::decay_t<std::invoke_result_t<const Op&, Init, M>>;
  return detail::reduce_node<A>(node, f, op, static_cast<A>(init));
}

}  // namespace tessera
