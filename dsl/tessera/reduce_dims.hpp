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

// One shard on its device's executor, called through rt::run_shards like elementwise work.
template <class Task>
void run_dims_shard(const void* task, int device, int shard, bool host) {
  const Task& t = *static_cast<const Task*>(task);
  if (host) {
    host::reduce_dims(t);
  } else {
#if TS_DEVICE_COMPILER
    cuda::reduce_dims(t, device, shard);
#else
    (void)shard;
    no_device_compiler(Device(device), "a reduction along dims");
#endif
  }
}

template <class Acc, class Node, class Map, class Op>
Array<Acc, Node::rank> reduce_dims_node(const Node& node, const ReduceDims& dd, Map map, Op op, Acc init,
                                        const char* what) {
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
  const Geometry<R> gin = reduction_geometry<R>(node, in_shape, &mem);
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
  const std::size_t ndev = gin.boxes.size();
  std::shared_ptr<const Layout<Acc, 2>> gather;  // ndev blocks of k_out partials on every device
  if (shard_reduced && k_out > 0) {
    Geometry<2> gg{{k_out, static_cast<index_t>(ndev)}, -1, true, {}};
    for (auto& b : gin.boxes) gg.boxes.push_back({b.device, {0, 0}, gg.shape});
    gather = std::make_shared<const Layout<Acc, 2>>(allocate_layout<Acc, 2>(gg, memory::device));
  }
  std::vector<Task> tasks;
  std::vector<rt::shard_launch> launches;
  tasks.reserve(ndev);
  const int saved = rt::get_cuda_device();
  try {
    for (std::size_t s = 0; s < ndev; ++s) {
      const auto& b = gin.boxes[s];
      const auto& p = out->parts[s];
      const index_t n = volume<R>(p.extent);
      if (n == 0) continue;
      ShardContext<R> c{b.device, in_shape, b.origin, b.extent, nullptr, nullptr, nullptr, {}, nullptr};
      c.dst = &in_shape;
      c.describe_dst = [](const void* sh) {
        return "a reduction along dims over " + shape_string<R>(*static_cast<const Shape<R>*>(sh));
      };
      Task t{build(node, c), map, op, static_cast<H>(init), 0, 0, {}, {}, {}, {}, {}, n, 1, 1, 1, 1,
             path::cartesian, dims_access::scalar, false, nullptr, nullptr};
      t.mode = c.linear ? (c.aligned ? path::vector : path::linear) : path::cartesian;
      for (int k = 0; k < R; ++k) {
        t.cst[k] = k == 0 ? 1 : t.cst[k - 1] * b.extent[k - 1];
        if (mask[k]) {
          t.rdim[t.nr] = k;
          t.rext[t.nr++] = b.extent[k];
        } else {
          t.kdim[t.nk] = k;
          t.kext[t.nk++] = b.extent[k];
        }
      }
      t.n_red = volume<R>(b.extent) / n;  // 0 when a reduced dim is empty: the outputs get init
      t.chunk = t.n_red > 0 ? t.n_red : 1;
      t.wide = volume<R>(b.extent) >= (index_t(1) << 30) || c.max_offset >= (index_t(1) << 30) ||
               n * static_cast<index_t>(ndev) >= (index_t(1) << 30);
      t.out = shard_reduced ? gather->parts[s].ptr + static_cast<index_t>(s) * k_out : p.ptr;
      rt::make_resident(*p.buf);
#if TS_DEVICE_COMPILER
      if (!b.device.is_host()) {
        const std::size_t bytes = cuda::plan_dims(t, b.device.id());
        if (bytes > 0) t.partial = static_cast<H*>(rt::scratch(b.device.id(), bytes));
      }
#endif
      tasks.push_back(t);
      launches.push_back({b.device.id(), static_cast<int>(s), b.device.is_host(), n, &run_dims_shard<Task>, nullptr});
    }
    for (std::size_t i = 0; i < tasks.size(); ++i) launches[i].task = &tasks[i];
    rt::run_shards(launches.data(), launches.size(), false);
    if (gather) {
      std::vector<int> ids;
      std::vector<void*> ptrs;
      part_pointers(*gather, ids, ptrs);
      std::vector<const void*> send;
      for (std::size_t r = 0; r < ndev; ++r) send.push_back(gather->parts[r].ptr + static_cast<index_t>(r) * k_out);
      comm::allgather(ids.data(), static_cast<int>(ndev), send.data(), ptrs.data(), static_cast<std::size_t>(k_out) * sizeof(Acc));
      std::vector<Device> devs;
      std::vector<Acc*> gp, op_out;
      for (std::size_t r = 0; r < ndev; ++r) {
        devs.push_back(gin.boxes[r].device);
        gp.push_back(gather->parts[r].ptr);
        op_out.push_back(out->parts[r].ptr);
      }
      fold_gathered<Acc>(devs, gp, op_out, k_out, op, init);
    }
  } catch (...) {
    rt::restore_cuda_device(saved);
    throw;
  }
  rt::restore_cuda_device(saved);
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
  if (reduced_count(node, d) == 0) {
    Shape<R> out = node.shape();
    for (int i = 0; i < d.count; ++i) out[d.d[i]] = 1;
    if (volume<R>(out) > 0) {
      throw invalid_argument(std::string("tessera: ") + name + "(x, dims(...)) over an empty dimension of shape " +
                             shape_string<R>(node.shape()) +
                             " has no value; expected every reduced dimension to have at least one element");
    }
  }
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

// mean(x, dims(...)): float for float input, double otherwise; NaN over an empty dimension.
template <expression X>
auto mean(X&& x, const ReduceDims& d) {
  auto node = detail::to_node(std::forward<X>(x));
  using R = detail::real_result_t<typename decltype(node)::value_type>;
  const auto n = static_cast<double>(detail::reduced_count(node, d));
  auto s = detail::reduce_dims_node<double>(node, d, detail::red::to<double>{}, detail::red::add{}, 0.0, "mean");
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
