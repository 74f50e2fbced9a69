// SPDX-License-Identifier: Apache-2.0
// Tessera: materialization. Julia's instantiate + copyto!: combine shapes once, match every
// operand's placement to the destination, detect aliasing, build one evaluator per shard, then
// hand each shard to its device's executor (backend/host or backend/cuda).
#pragma once
#include <tessera/array.hpp>
#include <tessera/evaluator.hpp>

#include <backend/host/executor.hpp>
#if TS_DEVICE_COMPILER
#include <backend/cuda/executor.cuh>
#endif

#include <cstdint>
#include <string>
#include <vector>

namespace tessera::detail {

// Everything the evaluator builder needs to know about the shard being computed.
template <int N>
struct ShardContext {
  Device device;
  Shape<N> dst_shape, origin, extent;
  const void* out_lo;  // byte range written by this shard, for the alias check
  const void* out_hi;
  const void* out_ptr;
  Shape<N> out_stride;
  const rt::buffer* out_buf;
  bool linear = true, aligned = true, hazard = false;
  index_t max_offset = 0;
  int operand = 0;
  // Described only when an error message needs it: string building costs more than a launch.
  const void* dst = nullptr;
  std::string (*describe_dst)(const void*) = nullptr;
};

inline std::string box_string(const index_t* lo, const index_t* ext, int n) {
  std::string s;
  for (int k = 0; k < n; ++k) {
    s += (k ? "×[" : "[") + std::to_string(lo[k]) + "," + std::to_string(lo[k] + ext[k]) + ")";
  }
  return n ? s : "[]";
}

// Byte range touched by a strided box, to test two accesses for overlap.
template <int N, class T>
std::pair<const char*, const char*> byte_span(const T* p, const index_t* st, const index_t* ext) {
  index_t lo = 0, hi = 0;
  for (int k = 0; k < N; ++k) {
    const index_t d = (ext[k] - 1) * st[k];
    (d < 0 ? lo : hi) += d;
  }
  return {reinterpret_cast<const char*>(p + lo), reinterpret_cast<const char*>(p + hi + 1)};
}

template <int N>
void note_strides(ShardContext<N>& c, const index_t* st, const void* p) {
  index_t acc = 1, off = 0;
  for (int k = 0; k < N; ++k) {
    if (c.extent[k] != 1 && st[k] != acc) c.linear = false;
    acc *= c.extent[k];
    off += (c.extent[k] - 1) * (st[k] < 0 ? -st[k] : st[k]);
  }
  if (off > c.max_offset) c.max_offset = off;
  if (reinterpret_cast<std::uintptr_t>(p) % 16 != 0) c.aligned = false;
}

template <class T, int M, int N>
LeafEval<T, N> build(const ArrayLeaf<T, M>& leaf, ShardContext<N>& c) {
  static_assert(M <= N, "operand rank exceeds the destination rank");
  const int operand = ++c.operand;
  if (volume<N>(c.extent) == 0) return {};  // an empty box (a reduction over an empty dimension) reads nothing
  const Layout<T, M>& l = *leaf.layout;
  index_t lo[M > 0 ? M : 1], len[M > 0 ? M : 1];
  bool bcast[M > 0 ? M : 1];
  for (int k = 0; k < M; ++k) {
    bcast[k] = l.shape[k] != c.dst_shape[k];  // then l.shape[k] == 1 (checked by instantiate)
    lo[k] = bcast[k] ? 0 : c.origin[k];
    len[k] = bcast[k] ? 1 : c.extent[k];
  }
  const Part<T, M>* found = nullptr;
  for (auto& q : l.parts) {
    if (!(q.device == c.device) || q.ptr == nullptr) continue;
    bool contains = true;
    for (int k = 0; k < M && contains; ++k) {
      contains = q.origin[k] <= lo[k] && lo[k] + len[k] <= q.origin[k] + q.extent[k];
    }
    if (contains) {
      found = &q;
      break;
    }
  }
  if (!found) {
    throw placement_mismatch(
        "tessera::placement_mismatch: operand #" + std::to_string(operand) + " (" + shape_string<M>(l.shape) + ", " +
        describe_placement(l) + ") has no part on " + c.device.name() + " holding indices " + box_string(lo, len, M) +
        ", which the destination (" + c.describe_dst(c.dst) + ") computes there. Operands must share the destination's "
        "shard dimension and block boundaries, be replicated, or be replicated with size 1 along the shard "
        "dimension; nothing is moved between devices implicitly. Fix: create the operand with the destination's "
        "placement, or replicate() it.");
  }
  LeafEval<T, N> e{};
  index_t off = 0;
  for (int k = 0; k < M; ++k) {
    off += (lo[k] - found->origin[k]) * found->stride[k];
    e.st[k] = bcast[k] ? 0 : found->stride[k];
  }
  for (int k = M; k < N; ++k) e.st[k] = 0;
  e.p = found->ptr + off;
  note_strides<N>(c, e.st, e.p);
  rt::make_resident(*found->buf);
  // Alias check: reading the written buffer through another mapping needs a temporary.
  if (found->buf.get() == c.out_buf) {
    bool same_map = static_cast<const void*>(e.p) == c.out_ptr;
    for (int k = 0; k < N && same_map; ++k) same_map = c.extent[k] == 1 || e.st[k] == c.out_stride[k];
    if (!same_map) {
      auto [rlo, rhi] = byte_span<N>(e.p, e.st, c.extent.data());
      if (rlo < static_cast<const char*>(c.out_hi) && static_cast<const char*>(c.out_lo) < rhi) c.hazard = true;
    }
  }
  return e;
}

template <class T, int N>
ScalarEval<T> build(const Scalar<T>& s, ShardContext<N>&) {
  return {s.value};
}

template <int M, int N>
IndexEval<N> build(const IndexLeaf<M>& leaf, ShardContext<N>& c) {
  IndexEval<N> e{};
  const Shape<M> gst = column_major_strides<M>(leaf.dims);
  e.base = 0;
  for (int k = 0; k < N; ++k) {
    const bool bcast = k >= M || leaf.dims[k] != c.dst_shape[k];
    e.st[k] = bcast ? 0 : gst[k];
    if (!bcast) e.base += c.origin[k] * gst[k];
  }
  index_t acc = 1;
  for (int k = 0; k < N; ++k) {
    if (c.extent[k] != 1 && e.st[k] != acc) c.linear = false;
    acc *= c.extent[k];
  }
  return e;
}

template <class F, class... A, int N>
NodeEval<F, eval_t<A, N>...> build(const Broadcasted<F, A...>& b, ShardContext<N>& c) {
  return std::apply([&](const auto&... a) { return NodeEval<F, eval_t<A, N>...>{b.f, {{build(a, c)}...}}; }, b.args);
}

// One shard on its device's executor; the runtime calls it through a pointer (rt::run_shards),
// so the dispatch loop with its threads and error handling is compiled once, not per expression.
template <class Task>
void run_shard(const void* task, int device, int shard, bool host) {
  const Task& t = *static_cast<const Task*>(task);
  if (host) {
    host::run(t);
  } else {
#if TS_DEVICE_COMPILER
    cuda::run(t, device, shard);
#else
    (void)shard;
    throw error("tessera: an expression was evaluated on " + Device(device).name() +
                " from a translation unit compiled without nvcc; compile it as CUDA (tessera_add_program in "
                "CMake) or run on host devices (TESSERA_BACKEND=host)");
#endif
  }
}

template <class T, int N, class Node>
void assign_node(const Layout<T, N>& dst, const Node& node, execution_policy pol) {
  // Instantiate: the expression's shape must broadcast to the destination's.
  const auto src_shape = node.shape();
  check_assignable<N, Node::rank>(dst.shape, src_shape);
  // Unlike Julia, an expression of higher rank than its destination is a compile error even when
  // its extra dimensions have size 1: take a view that drops them instead.
  static_assert(Node::rank <= N, "TESSERA_RANK_MISMATCH: the expression has a higher rank than the destination");
  using E = eval_t<Node, N>;
  using Task = ShardTask<OutEval<T, N>, E, N>;
  // Build every shard's evaluator before launching anything: a placement error leaves every
  // array intact.
  std::vector<Task> tasks;
  std::vector<rt::shard_launch> launches;
  tasks.reserve(dst.parts.size());
  launches.reserve(dst.parts.size());
  bool hazard = false;
  for (std::size_t s = 0; s < dst.parts.size(); ++s) {
    const auto& p = dst.parts[s];
    const index_t n = volume<N>(p.extent);
    if (n == 0) continue;
    ShardContext<N> c{p.device, dst.shape, p.origin, p.extent, nullptr, nullptr, p.ptr, p.stride, p.buf.get()};
    c.dst = &dst;
    c.describe_dst = [](const void* l) {
      const auto& d = *static_cast<const Layout<T, N>*>(l);
      return shape_string<N>(d.shape) + ", " + describe_placement(d);
    };
    auto [olo, ohi] = byte_span<N>(p.ptr, p.stride.data(), p.extent.data());
    c.out_lo = olo;
    c.out_hi = ohi;
    note_strides<N>(c, p.stride.data(), p.ptr);
    rt::make_resident(*p.buf);
    Task t{OutEval<T, N>{p.ptr, {}}, build(node, c), {}, n, path::cartesian, false};
    for (int k = 0; k < N; ++k) {
      t.out.st[k] = p.stride[k];
      t.ext[k] = p.extent[k];
    }
    t.mode = c.linear ? (c.aligned ? path::vector : path::linear) : path::cartesian;
    t.wide = n >= (index_t(1) << 30) || c.max_offset >= (index_t(1) << 30);
    hazard = hazard || c.hazard;
    tasks.push_back(t);
    launches.push_back({p.device.id(), static_cast<int>(s), p.device.is_host(), n, &run_shard<Task>, nullptr});
  }
  if (hazard) {
    // A read overlaps the written region at another offset: evaluate into a temporary first.
    auto tmp = clone_geometry<T, N>(dst);
    assign_node(*tmp, node, pol);
    assign_node(dst, ArrayLeaf<T, N>{tmp}, pol);
    return;
  }
  for (std::size_t i = 0; i < tasks.size(); ++i) launches[i].task = &tasks[i];
  rt::run_shards(launches.data(), launches.size(), pol.sequential);
}

// Fresh contiguous storage with the same devices and boxes as `l`.
template <class T, int N, class U>
std::shared_ptr<const Layout<T, N>> clone_geometry(const Layout<U, N>& l) {
  return std::make_shared<const Layout<T, N>>(allocate_layout<T, N>(geometry_of(l), l.mem));
}

template <class T, int N>
std::shared_ptr<const Layout<T, N>> clone_layout(const Layout<T, N>& src) {
  auto out = clone_geometry<T, N>(src);
  assign_node(*out, ArrayLeaf<T, N>{std::shared_ptr<const Layout<T, N>>(std::shared_ptr<const Layout<T, N>>{}, &src)},
              par);
  return out;
}

// The placement an expression takes when it has no destination: that of its first sharded
// operand (along a dimension it does not broadcast), else its first single-device operand, else
// its first replicated operand, else the default placement.
template <int R>
struct LayoutChoice {
  int rank = 0;  // 3: sharded, 2: single device, 1: replicated, 0: none
  Geometry<R> g;
  memory mem = memory::unified;
};

template <int R, class X>
void choose(const X&, const Shape<R>&, LayoutChoice<R>&) {}

template <int R, class T, int M>
void choose(const ArrayLeaf<T, M>& leaf, const Shape<R>& shape, LayoutChoice<R>& c) {
  const auto& l = *leaf.layout;
  int rank = l.replicated ? 1 : (l.shard_dim >= 0 && l.parts.size() > 1) ? 3 : 2;
  if (rank == 3 && l.shape[l.shard_dim] != shape[l.shard_dim]) rank = 0;
  if (l.parts.empty()) rank = 0;
  if (rank <= c.rank) return;
  c.rank = rank;
  c.mem = l.mem;
  c.g = Geometry<R>{shape, rank == 3 ? l.shard_dim : -1, rank == 1, {}};
  for (auto& p : l.parts) {
    typename Geometry<R>::Box b{p.device, {}, shape};
    if (rank == 3) {
      b.origin[l.shard_dim] = p.origin[l.shard_dim];
      b.extent[l.shard_dim] = p.extent[l.shard_dim];
    }
    c.g.boxes.push_back(b);
  }
}

template <int R, class F, class... A>
void choose(const Broadcasted<F, A...>& b, const Shape<R>& shape, LayoutChoice<R>& c) {
  std::apply([&](const auto&... a) { (choose<R>(a, shape, c), ...); }, b.args);
}

template <class Node>
auto materialize(const Node& node) {
  constexpr int R = Node::rank;
  using V = typename Node::value_type;
  static_assert(element_type<V>,
                "TESSERA_UNSUPPORTED_RESULT_TYPE: an expression materializes into bool, int32_t, int64_t, float or "
                "double; wrap it in cast<T>(...)");
  const Shape<R> shape = node.shape();
  LayoutChoice<R> c;
  choose<R>(node, shape, c);
  Geometry<R> g = c.rank ? c.g : geometry_from_placement<R>(shape, Placement{});
  auto out = std::make_shared<const Layout<V, R>>(allocate_layout<V, R>(g, c.mem));
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
