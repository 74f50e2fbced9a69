// SPDX-License-Identifier: Apache-2.0
// Tessera: full reductions. Each shard is folded by its device's executor in one pass over the
// shard's evaluator (one kernel per GPU shard, a loop on host devices), so sum(a * b) reads a and
// b once and materializes nothing. To the host: every GPU writes its partial straight into
// mapped pinned memory, the host waits for each device's stream and combines the partials, in
// double for floating sums and products. As an array (`sum(x, as_array)`): the partials are
// allgathered (NCCL on GPUs, in process on host devices) and folded on every device into a
// replicated 0-d array, so `a / sum(a, as_array)` never leaves the devices. A replicated
// expression is reduced over one replica (to the host) or over each (as an array).
#pragma once
#include <tessera/assign.hpp>
#include <tessera/reduce_task.hpp>

#include <backend/comm/comm.hpp>
#include <backend/host/reduce.hpp>
#if TS_DEVICE_COMPILER
#include <backend/cuda/reduce.cuh>
#endif

#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <type_traits>
#include <vector>

namespace tessera {

// Where a full reduction's result goes: `sum(x)` to the host (a scalar, synchronizes);
// `sum(x, as_array)` stays on the devices, as a replicated 0-d Array usable in later expressions.
struct to_host_t {};
struct as_array_t {};
inline constexpr as_array_t as_array{};

namespace detail {

template <class W>
concept result_target = std::is_same_v<W, to_host_t> || std::is_same_v<W, as_array_t>;

template <class Op, class Acc>
inline constexpr bool double_combine_v =
    std::is_floating_point_v<Acc> && (std::is_same_v<Op, red::add> || std::is_same_v<Op, red::mul>);

template <class Op, class Acc>
using combine_t = std::conditional_t<double_combine_v<Op, Acc>, double, Acc>;

[[noreturn]] inline void no_device_compiler(Device d, const char* what) {
  throw error(std::string("tessera: ") + what + " ran on " + d.name() +
              " from a translation unit compiled without nvcc; compile it as CUDA (tessera_add_program in CMake) "
              "or run on host devices (TESSERA_BACKEND=host)");
}

// The boxes an expression is reduced over (its own placement, or the default one).
template <int R, class Node>
Geometry<R> reduction_geometry(const Node& node, const Shape<R>& shape, memory* mem = nullptr) {
  LayoutChoice<R> choice;
  choose<R>(node, shape, choice);
  if (mem) *mem = choice.mem;
  return choice.rank ? choice.g : geometry_from_placement<R>(shape, Placement{});
}

template <class Acc, class Node, class Map, class Op>
using full_task_t = FullTask<Acc, eval_t<Node, Node::rank>, Map, Op, Node::rank>;

// One task per box (every box of a replicated geometry when `every_replica`, else its first);
// all evaluators are built, and placements checked, before anything runs.
template <class Acc, class Node, class Map, class Op>
std::vector<full_task_t<Acc, Node, Map, Op>> plan_full(const Node& node, const Geometry<Node::rank>& g, Map map, Op op,
                                                        Acc init, bool every_replica) {
  constexpr int R = Node::rank;
  const Shape<R> shape = node.shape();
  std::vector<full_task_t<Acc, Node, Map, Op>> tasks;
  for (auto& b : g.boxes) {
    ShardContext<R> c{b.device, shape, b.origin, b.extent, nullptr, nullptr, nullptr, {}, nullptr};
    c.dst = &shape;
    c.describe_dst = [](const void* sh) {
      return "a reduction over " + shape_string<R>(*static_cast<const Shape<R>*>(sh));
    };
    full_task_t<Acc, Node, Map, Op> t{build(node, c), map, op, init, {}, volume<R>(b.extent), path::cartesian,
                                      false, nullptr, nullptr, nullptr};
    for (int k = 0; k < R; ++k) t.ext[k] = b.extent[k];
    t.mode = c.linear ? (c.aligned ? path::vector : path::linear) : path::cartesian;
    t.wide = t.n >= (index_t(1) << 30) || c.max_offset >= (index_t(1) << 30);
    tasks.push_back(t);
    if (g.replicated && !every_replica) break;  // every replica holds the same values
  }
  return tasks;
}

// Queues the reduction of one GPU shard; its value lands in *result (device or mapped memory).
template <class Task>
void launch_full(Task t, typename Task::acc_type* result, Device d, int shard) {
#if TS_DEVICE_COMPILER
  using Acc = typename Task::acc_type;
  const int id = d.id();
  const index_t work = t.mode == path::vector ? t.n / Task::K / cuda::reduce_unroll : t.n;
  const unsigned blocks = cuda::full_reduce_blocks(work, id);
  t.partials = static_cast<Acc*>(rt::scratch(id, blocks * sizeof(Acc)));
  t.counter = rt::block_counter(id);
  t.result = result;
  cuda::reduce(t, blocks, id, shard);
#else
  (void)t, (void)result, (void)shard;
  no_device_compiler(d, "a reduction");
#endif
}

// Folds map(x) with op over the whole expression into a host value (init must be op's neutral
// element: each shard starts from it, as Julia's reduce(op, x; init) requires).
template <class Acc, class Node, class Map, class Op>
Acc reduce_node(const Node& node, Map map, Op op, Acc init) {
  using H = combine_t<Op, Acc>;
  const auto g = reduction_geometry<Node::rank>(node, node.shape());
  auto tasks = plan_full<Acc>(node, g, map, op, init, false);
  std::vector<H> partials;
  std::vector<std::pair<int, std::size_t>> waiting;  // device, index into partials
  const int saved = rt::get_cuda_device();
  try {
    // Every GPU is busy before the host folds its own shards or waits on the first result.
    for (std::size_t s = 0; s < tasks.size(); ++s) {
      const Device d = g.boxes[s].device;
      if (d.is_host() || tasks[s].n == 0) continue;
      launch_full(tasks[s], static_cast<Acc*>(rt::mapped_result(d.id()).device), d, static_cast<int>(s));
      waiting.push_back({d.id(), partials.size()});
      partials.push_back(static_cast<H>(init));
    }
    for (std::size_t s = 0; s < tasks.size(); ++s) {
      if (g.boxes[s].device.is_host() && tasks[s].n > 0) partials.push_back(host::reduce<H>(tasks[s]));
    }
    for (auto [d, i] : waiting) {
      rt::synchronize_device(d);  // this device's stream only
      Acc v;
      std::memcpy(&v, rt::mapped_result(d).host, sizeof(Acc));
      partials[i] = static_cast<H>(v);
    }
  } catch (...) {
    rt::restore_cuda_device(saved);
    throw;
  }
  rt::restore_cuda_device(saved);
  H total = static_cast<H>(init);
  for (H p : partials) total = static_cast<H>(op(total, p));
  return static_cast<Acc>(total);
}

// Folds, on every device r, the `count` partials gathered on it (gather[r]: `ndev` blocks of
// `k` values, block q from device q) into out[r] (k values). The same order everywhere, so every
// replica holds the same bits.
template <class Acc, class Op>
void fold_gathered(const std::vector<Device>& devs, const std::vector<Acc*>& gather, const std::vector<Acc*>& out,
                   index_t k, Op op, Acc init) {
  using H = combine_t<Op, Acc>;
  using Task = DimsTask<Acc, H, LeafEval<Acc, 2>, red::to<H>, Op, 2>;
  const index_t ndev = static_cast<index_t>(devs.size());
  for (std::size_t r = 0; r < devs.size(); ++r) {
    Task t{LeafEval<Acc, 2>{gather[r], {1, k}}, red::to<H>{}, op, static_cast<H>(init), 1, 1, {0, 0}, {1, 0},
           {k, 0}, {ndev, 0}, {1, k}, k, ndev, ndev, 1, 1, path::cartesian, dims_access::scalar, false, out[r],
           nullptr};
    if (devs[r].is_host()) {
      host::reduce_dims(t);
    } else {
#if TS_DEVICE_COMPILER
      cuda::reduce_dims(t, devs[r].id(), static_cast<int>(r));
#else
      no_device_compiler(devs[r], "a reduction");
#endif
    }
  }
}

// Device ids and buffer pointers of a layout's parts, for comm:: calls.
template <class T, int N>
void part_pointers(const Layout<T, N>& l, std::vector<int>& ids, std::vector<void*>& ptrs) {
  for (auto& p : l.parts) {
    ids.push_back(p.device.id());
    ptrs.push_back(p.ptr);
  }
}

// Like reduce_node, into a replicated 0-d array on the expression's devices.
template <class Acc, class Node, class Map, class Op>
Array<Acc, 0> reduce_node_array(const Node& node, Map map, Op op, Acc init) {
  static_assert(element_type<Acc>, "TESSERA_UNSUPPORTED_RESULT_TYPE: as_array results are bool, int32_t, int64_t, "
                                   "float or double");
  memory mem = memory::unified;
  const auto g = reduction_geometry<Node::rank>(node, node.shape(), &mem);
  auto tasks = plan_full<Acc>(node, g, map, op, init, true);
  Geometry<0> og{{}, -1, true, {}};
  for (auto& b : g.boxes) og.boxes.push_back({b.device, {}, {}});
  auto out = std::make_shared<const Layout<Acc, 0>>(allocate_layout<Acc, 0>(og, mem));
  // Shards of one array need combining; replicas and single devices already hold the whole value.
  const bool combine = !g.replicated && g.boxes.size() > 1;
  const std::size_t ndev = g.boxes.size();
  std::shared_ptr<const Layout<Acc, 1>> gather;
  if (combine) {
    Geometry<1> gg{{static_cast<index_t>(ndev)}, -1, true, {}};
    for (auto& b : g.boxes) gg.boxes.push_back({b.device, {0}, {static_cast<index_t>(ndev)}});
    gather = std::make_shared<const Layout<Acc, 1>>(allocate_layout<Acc, 1>(gg, memory::device));
  }
  const int saved = rt::get_cuda_device();
  try {
    for (std::size_t s = 0; s < ndev; ++s) {
      const Device d = g.boxes[s].device;
      rt::make_resident(*out->parts[s].buf);
      Acc* dst = combine ? gather->parts[s].ptr + s : out->parts[s].ptr;
      if (d.is_host()) *dst = static_cast<Acc>(host::reduce<combine_t<Op, Acc>>(tasks[s]));
      else launch_full(tasks[s], dst, d, static_cast<int>(s));  // n == 0 still stores init
    }
    if (combine) {
      std::vector<int> ids;
      std::vector<void*> ptrs;
      part_pointers(*gather, ids, ptrs);
      std::vector<const void*> send;
      for (std::size_t r = 0; r < ndev; ++r) send.push_back(gather->parts[r].ptr + r);
      comm::allgather(ids.data(), static_cast<int>(ndev), send.data(), ptrs.data(), sizeof(Acc));
      std::vector<Device> devs;
      std::vector<Acc*> gp, op_out;
      for (std::size_t r = 0; r < ndev; ++r) {
        devs.push_back(g.boxes[r].device);
        gp.push_back(gather->parts[r].ptr);
        op_out.push_back(out->parts[r].ptr);
      }
      fold_gathered<Acc>(devs, gp, op_out, 1, op, init);
    }
  } catch (...) {
    rt::restore_cuda_device(saved);
    throw;
  }
  rt::restore_cuda_device(saved);
  // The gather buffers die here: their blocks go back to the memory cache, reused only after the
  // work above (stream order, backend/runtime/pool.cpp).
  return Array<Acc, 0>(std::move(out));
}

template <class Acc, class W, class Node, class Map, class Op>
auto reduce_to(W, const Node& node, Map map, Op op, Acc init) {
  if constexpr (std::is_same_v<W, as_array_t>) return reduce_node_array<Acc>(node, map, op, init);
  else return reduce_node<Acc>(node, map, op, init);
}

template <class V>
using sum_t = std::conditional_t<std::is_floating_point_v<V>, V, std::int64_t>;
template <class V>
using real_result_t = std::conditional_t<std::is_same_v<V, float>, float, double>;

template <class E>
index_t length_of(const E& node) {
  return volume<E::rank>(node.shape());
}

// Applies f to a host value, or lazily to an as_array result and evaluates it on its devices.
template <class R, class V, class F>
auto finish(V v, F f) {
  if constexpr (std::is_arithmetic_v<V>) return static_cast<R>(f(v));
  else return eval(cast<R>(f(std::move(v))));
}

template <class V>
V extremum_init(bool is_max) {
  if constexpr (std::is_same_v<V, bool>) return !is_max;
  else if constexpr (std::is_floating_point_v<V>) return is_max ? -std::numeric_limits<V>::infinity() : std::numeric_limits<V>::infinity();
  else return is_max ? std::numeric_limits<V>::lowest() : std::numeric_limits<V>::max();
}

template <bool IsMax, class W, class X>
auto extremum(X&& x, W w, const char* name) {
  auto node = to_node(std::forward<X>(x));
  using V = typename decltype(node)::value_type;
  if (length_of(node) == 0) {
    throw invalid_argument(std::string("tessera: ") + name + " of an empty collection (shape " +
                           shape_string<decltype(node)::rank>(node.shape()) +
                           ") has no value; expected at least one element (use reduce with an init)");
  }
  return reduce_to<V>(w, node, red::to<V>{}, red::extremum<IsMax>{}, extremum_init<V>(IsMax));
}

}  // namespace detail

// Every full reduction returns a host scalar (synchronizing), or with `as_array` a replicated 0-d
// Array that stays on the devices: `a / sum(a, as_array)`.

// sum(x): float stays float, integers and bool sum in int64; empty gives 0.
template <expression X, detail::result_target W = to_host_t>
auto sum(X&& x, W w = {}) {
  auto node = detail::to_node(std::forward<X>(x));
  using A = detail::sum_t<typename decltype(node)::value_type>;
  return detail::reduce_to<A>(w, node, detail::red::to<A>{}, detail::red::add{}, A(0));
}

// prod(x): like sum, with 1 for an empty input.
template <expression X, detail::result_target W = to_host_t>
auto prod(X&& x, W w = {}) {
  auto node = detail::to_node(std::forward<X>(x));
  using A = detail::sum_t<typename decltype(node)::value_type>;
  return detail::reduce_to<A>(w, node, detail::red::to<A>{}, detail::red::mul{}, A(1));
}

// maximum(x) / minimum(x): NaN propagates; an empty input throws invalid_argument.
template <expression X, detail::result_target W = to_host_t>
auto maximum(X&& x, W w = {}) {
  return detail::extremum<true>(std::forward<X>(x), w, "maximum");
}
template <expression X, detail::result_target W = to_host_t>
auto minimum(X&& x, W w = {}) {
  return detail::extremum<false>(std::forward<X>(x), w, "minimum");
}

// mean(x): float for float input, double otherwise (Julia); NaN for an empty input.
template <expression X, detail::result_target W = to_host_t>
auto mean(X&& x, W w = {}) {
  auto node = detail::to_node(std::forward<X>(x));
  using R = detail::real_result_t<typename decltype(node)::value_type>;
  const double n = static_cast<double>(detail::length_of(node));
  auto s = detail::reduce_to<double>(w, node, detail::red::to<double>{}, detail::red::add{}, 0.0);
  return detail::finish<R>(std::move(s), [n](auto v) { return v / n; });
}

// norm(x): the 2-norm, accumulated in double.
template <expression X, detail::result_target W = to_host_t>
auto norm(X&& x, W w = {}) {
  auto node = detail::to_node(std::forward<X>(x));
  using R = detail::real_result_t<typename decltype(node)::value_type>;
  auto s = detail::reduce_to<double>(w, node, detail::red::abs2{}, detail::red::add{}, 0.0);
  return detail::finish<R>(std::move(s), [](auto v) {
    using std::sqrt;
    return sqrt(std::move(v));
  });
}

// any(x) / all(x) / count(x): by truth value (x != 0), on bool or any other expressions.
template <expression X, detail::result_target W = to_host_t>
auto any(X&& x, W w = {}) {
  return detail::reduce_to<bool>(w, detail::to_node(std::forward<X>(x)), detail::red::truthy{}, detail::red::lor{}, false);
}
template <expression X, detail::result_target W = to_host_t>
auto all(X&& x, W w = {}) {
  return detail::reduce_to<bool>(w, detail::to_node(std::forward<X>(x)), detail::red::truthy{}, detail::red::land{}, true);
}
template <expression X, detail::result_target W = to_host_t>
auto count(X&& x, W w = {}) {
  return detail::reduce_to<std::int64_t>(w, detail::to_node(std::forward<X>(x)), detail::red::count_true{},
                                         detail::red::add{}, std::int64_t(0));
}

// dot(a, b): sum(a * b) without a temporary.
template <expression A, expression B, detail::result_target W = to_host_t>
auto dot(A&& a, B&& b, W w = {}) {
  return sum(std::forward<A>(a) * std::forward<B>(b), w);
}

// reduce(op, x, init) and mapreduce(f, op, x, init) with user __host__ __device__ functors: op must
// be associative and init its neutral element (each shard and each block starts from it).
template <class Op, expression X, scalar_type Init, detail::result_target W = to_host_t>
auto reduce(Op op, X&& x, Init init, W w = {}) {
  auto node = detail::to_node(std::forward<X>(x));
  using V = typename decltype(node)::value_type;
  using A = std::decay_t<std::invoke_result_t<const Op&, Init, V>>;
  return detail::reduce_to<A>(w, node, detail::red::to<A>{}, op, static_cast<A>(init));
}
template <class F, class Op, expression X, scalar_type Init, detail::result_target W = to_host_t>
auto mapreduce(F f, Op op, X&& x, Init init, W w = {}) {
  auto node = detail::to_node(std::forward<X>(x));
  using V = typename decltype(node)::value_type;
  using M = std::decay_t<std::invoke_result_t<const F&, V>>;
  using A = std::decay_t<std::invoke_result_t<const Op&, Init, M>>;
  return detail::reduce_to<A>(w, node, f, op, static_cast<A>(init));
}

}  // namespace tessera
