// SPDX-License-Identifier: Apache-2.0
// Tessera: full reductions. Each shard is folded by its device's executor in one pass over the
// shard's evaluator (one kernel per GPU shard, a loop on host devices), so sum(a * b) reads a and
// b once and materializes nothing. To the host: every GPU writes its partial straight into
// mapped pinned memory and then signals that it is there, the host waits for those signals and
// combines the partials, in double for floating sums and products. As an array (`sum(x, as_array)`): the partials are
// allgathered (NCCL on GPUs, in process on host devices) and folded on every device into a
// replicated 0-d array, so `a / sum(a, as_array)` never leaves the devices. A replicated
// expression is reduced over one replica (to the host) or over each (as an array).
#pragma once
#include <tessera/assign.hpp>
#include <tessera/reduce_task.hpp>

#include <backend/comm/comm.hpp>
#include <backend/execute.hpp>

#include <cmath>
#include <cstring>
#include <limits>
#include <memory>
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
inline constexpr bool double_combine_v = (std::is_floating_point_v<Acc> || is_complex_v<Acc>) &&
                                         (std::is_same_v<Op, red::add> || std::is_same_v<Op, red::mul>);

// Floating sums and products combine in double (complex ones in complex<double>).
template <class Op, class Acc>
using combine_t =
    std::conditional_t<double_combine_v<Op, Acc>, std::conditional_t<is_complex_v<Acc>, complex<double>, double>, Acc>;

// A reduction's description in placement errors.
template <int R>
std::string describe_reduction(const void* shape) {
  return "a reduction over " + shape_string<R>(*static_cast<const Shape<R>*>(shape));
}

template <class Acc, class Node, class Map, class Op>
using full_task_t = FullTask<Acc, combine_t<Op, Acc>, eval_t<Node, Node::rank>, Map, Op, Node::rank>;

// One job per box of `g` (every box of a replicated geometry when `every_replica`, else its first);
// the caller points each task's result at device memory or a mapped slot. Every box is planned,
// and every placement checked, before anything runs.
template <class Acc, class Node, class Map, class Op>
std::vector<Job<full_task_t<Acc, Node, Map, Op>>> plan_full(const Node& node, const Geometry<Node::rank>& g, Map map,
                                                             Op op, Acc init, bool every_replica) {
  constexpr int R = Node::rank;
  const Shape<R> shape = node.shape();
  std::vector<Job<full_task_t<Acc, Node, Map, Op>>> jobs;
  for (std::size_t s = 0; s < g.boxes.size(); ++s) {
    const auto& b = g.boxes[s];
    const auto plan = plan_shard<R>(node, shape, b, {&shape, &describe_reduction<R>});
    full_task_t<Acc, Node, Map, Op> t{.e = plan.e, .map = map, .op = op, .init = init, .ext = plan.ext,
                                      .n = plan.n, .mode = plan.mode, .wide = plan.wide, .result = nullptr};
    jobs.push_back({.task = t, .device = b.device, .shard = static_cast<int>(s), .n = plan.n, .uses = plan.uses});
    if (g.replicated && !every_replica) break;  // every replica holds the same values
  }
  return jobs;
}

// Folds map(x) with op over the whole expression into a host value (init must be op's neutral
// element: each shard starts from it, as Julia's reduce(op, x; init) requires). Each shard's value
// lands in its device's mapped result slot; the host waits for each GPU's signal that it is there.
template <class Acc, class Node, class Map, class Op>
Acc reduce_node(const Node& node, Map map, Op op, Acc init) {
  using H = combine_t<Op, Acc>;
  auto jobs = plan_full<Acc>(node, placement_of<Node::rank>(node, node.shape()), map, op, init, false);
  std::erase_if(jobs, [](const auto& j) { return j.n == 0; });  // an empty shard adds init
  for (auto& j : jobs) {
    const rt::result_slot slot = rt::armed_result(j.device.id());
    j.task.result = static_cast<Acc*>(slot.device);
    j.task.done = slot.done;
    j.task.ticket = slot.ticket;
  }
  execute(jobs);
  // Each device's stream only; across processes, other ranks' partials arrive in one exchange and
  // every rank folds them all in shard order (the same bits as one process).
  std::vector<int> ids;
  for (auto& j : jobs) ids.push_back(j.device.id());
  auto partials = std::make_unique<Acc[]>(jobs.size());  // not std::vector: vector<bool> is packed
  rt::read_results(ids.data(), ids.size(), partials.get(), sizeof(Acc));
  H total = static_cast<H>(init);
  for (std::size_t i = 0; i < jobs.size(); ++i) total = static_cast<H>(op(total, static_cast<H>(partials[i])));
  return static_cast<Acc>(total);
}

// Shards' partials, combined on the devices: every device r has written its k partials into block
// r of its part of `gather` (k x ndev values, replicated); the blocks are allgathered (NCCL on GPUs,
// copies on host devices), then every device folds the k x ndev matrix along its columns into its
// part of `out`, in the same order everywhere, so that every replica holds the same bits.
template <class Acc, int G, int O, class Op>
void combine_partials(const Layout<Acc, G>& gather, const Layout<Acc, O>& out, index_t k, Op op, Acc init) {
  using H = combine_t<Op, Acc>;
  using Task = DimsTask<Acc, H, LeafEval<Acc, 2>, red::to<H>, Op, 2>;
  const std::size_t ndev = gather.parts.size();
  std::vector<int> ids;
  std::vector<void*> recv;
  std::vector<const void*> send;
  std::vector<Job<Task>> jobs;
  for (std::size_t r = 0; r < ndev; ++r) {
    Acc* g = gather.parts[r].ptr;
    ids.push_back(gather.parts[r].device.id());
    recv.push_back(g);
    send.push_back(g + static_cast<index_t>(r) * k);
    // Output o folds row o of the k x ndev block matrix: dim 0 kept, dim 1 reduced.
    const index_t n = static_cast<index_t>(ndev);
    Task t{.e = {g, {1, k}}, .map = {}, .op = op, .init = static_cast<H>(init), .mode = path::cartesian,
           .wide = k * n >= narrow_index_limit, .out = out.parts[r].ptr, .n_out = k, .n_red = n, .nk = 1, .nr = 1, .kdim = {0},
           .rdim = {1}, .kext = {k}, .rext = {n}, .cst = {1, k}, .chunk = n};
    jobs.push_back({.task = t, .device = gather.parts[r].device, .shard = static_cast<int>(r), .n = k * n});
  }
  comm::allgather(ids.data(), static_cast<int>(ndev), send.data(), recv.data(), static_cast<std::size_t>(k) * sizeof(Acc));
  execute(jobs);
}

// A replicated k x ndev buffer of device memory on the devices of `g`, for combine_partials.
template <class Acc, int R>
std::shared_ptr<const Layout<Acc, 2>> partials_buffer(const Geometry<R>& g, index_t k) {
  Geometry<2> gg{{k, static_cast<index_t>(g.boxes.size())}, -1, true, {}};
  for (auto& b : g.boxes) gg.boxes.push_back({b.device, {0, 0}, gg.shape});
  return std::make_shared<const Layout<Acc, 2>>(allocate_layout<Acc, 2>(gg, memory::device));
}

// Like reduce_node, into a replicated 0-d array on the expression's devices. Shards of one array
// are combined on the devices: their values are allgathered, then every device folds them.
template <class Acc, class Node, class Map, class Op>
Array<Acc, 0> reduce_node_array(const Node& node, Map map, Op op, Acc init) {
  static_assert(element_type<Acc>, "TESSERA_UNSUPPORTED_RESULT_TYPE: as_array results are bool, int32_t, int64_t, "
                                   "float or double");
  memory mem = memory::unified;
  const auto g = placement_of<Node::rank>(node, node.shape(), &mem);
  auto jobs = plan_full<Acc>(node, g, map, op, init, true);
  Geometry<0> og{{}, -1, true, {}};
  for (auto& b : g.boxes) og.boxes.push_back({b.device, {}, {}});
  auto out = std::make_shared<const Layout<Acc, 0>>(allocate_layout<Acc, 0>(og, mem));
  // Replicas and single devices already hold the whole value.
  const bool combine = !g.replicated && g.boxes.size() > 1;
  const std::size_t ndev = g.boxes.size();
  std::shared_ptr<const Layout<Acc, 2>> gather;
  if (combine) gather = partials_buffer<Acc>(g, 1);
  for (std::size_t s = 0; s < ndev; ++s) {  // an empty shard still stores init
    jobs[s].uses.add(out->parts[s].buf.get());
    jobs[s].task.result = combine ? gather->parts[s].ptr + s : out->parts[s].ptr;
  }
  execute(jobs);
  if (combine) combine_partials<Acc>(*gather, *out, 1, op, init);
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
using sum_t = std::conditional_t<std::is_floating_point_v<V> || is_complex_v<V>, V, std::int64_t>;
// A real result (mean, norm, var): float for float and complex<float> input, double otherwise.
template <class V>
using real_result_t = std::conditional_t<std::is_same_v<real_of_t<V>, float>, float, double>;
// mean's result and accumulator: complex for complex input (accumulated in complex<double>).
template <class V>
using mean_t = std::conditional_t<is_complex_v<V>, V, real_result_t<V>>;
template <class V>
using mean_acc_t = std::conditional_t<is_complex_v<V>, complex<double>, double>;

template <class E>
index_t length_of(const E& node) {
  return volume<E::rank>(node.shape());
}

// Applies f to a host value, or lazily to an as_array result and evaluates it on its devices.
template <class R, class V, class F>
auto finish(V v, F f) {
  if constexpr (std::is_arithmetic_v<V> || is_complex_v<V>) return static_cast<R>(f(v));
  else return eval(cast<R>(f(std::move(v))));
}

template <class V>
V extremum_init(bool is_max) {
  static_assert(!is_complex_v<V>, "TESSERA_COMPLEX_UNORDERED: maximum, minimum, argmax, findmax... are not defined "
                                  "for complex numbers; reduce abs(z), real(z) or imag(z)");
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

// mean(x): float for float input, double otherwise (Julia), complex for complex input; NaN for an
// empty input.
template <expression X, detail::result_target W = to_host_t>
auto mean(X&& x, W w = {}) {
  auto node = detail::to_node(std::forward<X>(x));
  using R = detail::mean_t<typename decltype(node)::value_type>;
  using A = detail::mean_acc_t<typename decltype(node)::value_type>;
  const double n = static_cast<double>(detail::length_of(node));
  auto s = detail::reduce_to<A>(w, node, detail::red::to<A>{}, detail::red::add{}, A(0));
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

// dot(a, b): sum(a * b) without a temporary; sum(conj(a) * b) for complex a (Julia's dot).
template <expression A, expression B, detail::result_target W = to_host_t>
auto dot(A&& a, B&& b, W w = {}) {
  if constexpr (detail::is_complex_v<typename detail::node_t<A>::value_type>)
    return sum(conj(std::forward<A>(a)) * std::forward<B>(b), w);
  else
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
