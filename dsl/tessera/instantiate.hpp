// SPDX-License-Identifier: Apache-2.0
// Tessera: the per-shard planner shared by every operation (Julia's instantiate, per shard).
// plan_shard(node, shape, box, ...) walks the expression for one box of the global index space on
// one device and returns everything an executor needs: the evaluator (each array leaf replaced by
// a pointer into its part on that device, strides 0 on broadcast dimensions), the box extents and
// element count, the access path, whether 64-bit index math is needed, and whether a read aliases
// the written region. Assignments, full reductions and reductions along dims all plan through it;
// only what they build around the plan differs. placement_of() chooses the boxes of an expression
// that has no destination (eval, reductions).
#pragma once
#include <tessera/evaluator.hpp>
#include <tessera/layout.hpp>

#include <cstdint>
#include <string>
#include <utility>

namespace tessera::detail {

// What an assignment writes on the shard being planned: reads of the same buffer through another
// mapping make it hazardous (evaluate through a temporary).
struct ShardOutput {
  const void* ptr = nullptr;
  const index_t* stride = nullptr;
  const rt::buffer* buf = nullptr;
  const char* lo = nullptr;  // byte range written
  const char* hi = nullptr;
};

// Everything the evaluator builder needs to know about the shard being planned; filled in while
// the tree is walked.
template <int N>
struct ShardContext {
  Device device;
  Shape<N> shape, origin, extent;  // the global shape and this shard's box
  lazy_text what;
  ShardOutput out;
  bool linear = true, aligned = true, hazard = false;
  bool dim0_vectors = N > 0;  // every leaf is readable K elements at a time along dim 0 (vec_at)
  index_t max_offset = 0;
  int operand = 0;
  const int* positions = nullptr;  // user kernels: the argument position of each array operand, for messages
  rt::buffer_list uses;            // every buffer read or written, made resident by execute()
};

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

// Records whether an access with strides `st` walks the box in its column-major order.
template <int N>
void note_contiguity(ShardContext<N>& c, const index_t* st) {
  index_t acc = 1;
  for (int k = 0; k < N; ++k) {
    if (c.extent[k] != 1 && st[k] != acc) c.linear = false;
    acc *= c.extent[k];
  }
}

// Records how a memory access with strides `st` starting at `p` walks the box: contiguous or not,
// 16-byte aligned or not, and its largest element offset (for 32- vs 64-bit index math).
template <int N>
void note_strides(ShardContext<N>& c, const index_t* st, const void* p) {
  note_contiguity<N>(c, st);
  index_t off = 0;
  for (int k = 0; k < N; ++k) off += (c.extent[k] - 1) * (st[k] < 0 ? -st[k] : st[k]);
  if (off > c.max_offset) c.max_offset = off;
  if (reinterpret_cast<std::uintptr_t>(p) % 16 != 0) c.aligned = false;
}

// What an operand of rank M reads for an output box (origin, extent) of `shape` on device d: its own
// box (index 0 and extent 1 along dims it broadcasts), and its part on d that holds that box, halo
// cells included (null when there is none: the placement rule). Shared by the planner and the
// user kernels.
template <class T, int M>
struct OperandView {
  const Part<T, M>* part = nullptr;
  index_t lo[M > 0 ? M : 1], len[M > 0 ? M : 1];
  bool bcast[M > 0 ? M : 1];
  // The element at the box's first index, and the strides over the output's dims (0 where broadcast).
  T* start() const {
    index_t off = 0;
    for (int k = 0; k < M; ++k) off += (lo[k] - part->origin[k]) * part->stride[k];
    return part->ptr + off;
  }
  index_t stride(int k) const { return k < M && !bcast[k] ? part->stride[k] : 0; }
};

template <class T, int M, int N>
OperandView<T, M> operand_view(const Layout<T, M>& l, Device d, const Shape<N>& shape, const Shape<N>& origin,
                               const Shape<N>& extent) {
  OperandView<T, M> v;
  for (int k = 0; k < M; ++k) {
    v.bcast[k] = l.shape[k] != shape[k];  // then l.shape[k] == 1 (checked by instantiate)
    v.lo[k] = v.bcast[k] ? 0 : origin[k];
    v.len[k] = v.bcast[k] ? 1 : extent[k];
  }
  for (auto& q : l.parts) {
    if (!(q.device == d) || q.ptr == nullptr) continue;
    bool contains = true;
    for (int k = 0; k < M && contains; ++k) {
      contains = q.origin[k] - q.halo_lo[k] <= v.lo[k] && v.lo[k] + v.len[k] <= q.origin[k] + q.extent[k] + q.halo_hi[k];
    }
    if (contains) {
      v.part = &q;
      break;
    }
  }
  return v;
}

template <class T, int M, int N>
LeafEval<T, N> build(const ArrayLeaf<T, M>& leaf, ShardContext<N>& c) {
  static_assert(M <= N, "operand rank exceeds the destination rank");
  const int operand = ++c.operand;
  if (volume<N>(c.extent) == 0) return {};  // an empty box (a reduction over an empty dimension) reads nothing
  const Layout<T, M>& l = *leaf.layout;
  const auto view = operand_view<T, M, N>(l, c.device, c.shape, c.origin, c.extent);
  if (!view.part) {
    throw_operand_mismatch(c.positions ? c.positions[operand - 1] : operand, c.positions != nullptr,
                           {&l, &describe_layout<T, M>}, c.device, view.lo, view.len, M, c.what);
  }
  const Part<T, M>* found = view.part;
  LeafEval<T, N> e{};
  for (int k = 0; k < N; ++k) e.st[k] = view.stride(k);
  e.p = view.start();
  note_strides<N>(c, e.st, e.p);
  if constexpr (N > 0) {
    // vec_at reads a leaf broadcast along dim 0 one element at a time, any other leaf with 16-byte
    // vector loads: unit stride along dim 0, every other stride and the start 16-byte aligned.
    if (e.st[0] != 0 && c.extent[0] != 1) {
      bool ok = e.st[0] == 1 && reinterpret_cast<std::uintptr_t>(e.p) % 16 == 0;
      for (int k = 1; k < N && ok; ++k) ok = (e.st[k] * static_cast<index_t>(sizeof(T))) % 16 == 0;
      if (!ok) c.dim0_vectors = false;
    }
  }
  c.uses.add(found->buf.get());
  // Alias check: reading the written buffer through another mapping needs a temporary.
  if (found->buf.get() == c.out.buf) {
    bool same_map = static_cast<const void*>(e.p) == c.out.ptr;
    for (int k = 0; k < N && same_map; ++k) same_map = c.extent[k] == 1 || e.st[k] == c.out.stride[k];
    if (!same_map) {
      auto [rlo, rhi] = byte_span<N>(e.p, e.st, c.extent.data());
      if (rlo < c.out.hi && c.out.lo < rhi) c.hazard = true;
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
    const bool bcast = k >= M || leaf.dims[k] != c.shape[k];
    e.st[k] = bcast ? 0 : gst[k];
    if (!bcast) e.base += c.origin[k] * gst[k];
  }
  note_contiguity<N>(c, e.st);  // computed in 64 bits from global strides: no offset to note
  return e;
}

template <class F, class... A, int N>
NodeEval<F, eval_t<A, N>...> build(const Broadcasted<F, A...>& b, ShardContext<N>& c) {
  return std::apply([&](const auto&... a) { return NodeEval<F, eval_t<A, N>...>{b.f, {{build(a, c)}...}}; }, b.args);
}

// One shard, planned: what every task is built from.
template <class E, int N>
struct ShardPlan {
  E e;
  Extents<N> ext;
  index_t n;     // elements in the box
  path mode;
  bool wide;     // 64-bit index math: the box or an operand's offset reaches narrow_index_limit
  bool hazard;   // a read overlaps the written region through another mapping
  bool dim0_vectors;  // readable with vec_at along dim 0 (broadcast leaves allowed)
  rt::buffer_list uses;  // the buffers read and written: the job's, made resident by execute()
};

// Plans the evaluation of `node` (broadcast to `shape`) over `box`. `out`, for an assignment, is
// the written part: its layout joins the path decision, and reads are checked against it.
template <int N, class Node, class T = char>
ShardPlan<eval_t<Node, N>, N> plan_shard(const Node& node, const Shape<N>& shape,
                                         const typename Geometry<N>::Box& box, lazy_text what,
                                         const Part<T, N>* out = nullptr, const int* positions = nullptr) {
  ShardContext<N> c{
      .device = box.device, .shape = shape, .origin = box.origin, .extent = box.extent, .what = what, .positions = positions};
  if (out != nullptr) {
    auto [lo, hi] = byte_span<N>(out->ptr, out->stride.data(), out->extent.data());
    c.out = {.ptr = out->ptr, .stride = out->stride.data(), .buf = out->buf.get(), .lo = lo, .hi = hi};
    note_strides<N>(c, out->stride.data(), out->ptr);
    c.uses.add(out->buf.get());
  }
  ShardPlan<eval_t<Node, N>, N> p{.e = build(node, c), .ext = {}, .n = volume<N>(box.extent)};
  for (int k = 0; k < N; ++k) p.ext[k] = box.extent[k];
  p.mode = c.linear ? (c.aligned ? path::vector : path::linear) : path::cartesian;
  p.wide = p.n >= narrow_index_limit || c.max_offset >= narrow_index_limit;
  p.hazard = c.hazard;
  p.dim0_vectors = c.dim0_vectors;
  p.uses = std::move(c.uses);
  return p;
}

// The placement an expression takes when it has no destination: that of its first sharded
// operand (along a dimension it does not broadcast), else its first single-device operand, else
// its first replicated operand, else the default placement.
template <int R>
struct LayoutChoice {
  int priority = 0;  // 3: sharded, 2: single device, 1: replicated, 0: none yet
  Geometry<R> g;
  memory mem = memory::unified;
};

template <int R, class X>
void choose(const X&, const Shape<R>&, LayoutChoice<R>&) {}

template <int R, class T, int M>
void choose(const ArrayLeaf<T, M>& leaf, const Shape<R>& shape, LayoutChoice<R>& c) {
  const auto& l = *leaf.layout;
  // An array sharded over one device counts as sharded, so that a result takes its placement
  // (shard(d) over that device) rather than on(device), as it does over several devices.
  int priority = l.replicated ? 1 : l.shard_dim >= 0 ? 3 : 2;
  if (priority == 3 && l.shape[l.shard_dim] != shape[l.shard_dim]) priority = l.parts.size() == 1 ? 2 : 0;
  if (l.parts.empty()) priority = 0;
  if (priority <= c.priority) return;
  c.priority = priority;
  c.mem = l.mem;
  c.g = Geometry<R>{shape, priority == 3 ? l.shard_dim : -1, priority == 1, {}};
  for (auto& p : l.parts) {
    typename Geometry<R>::Box b{p.device, {}, shape};
    if (priority == 3) {
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

// The boxes chosen, or the default placement when no operand had any.
template <int R>
Geometry<R> chosen_geometry(const LayoutChoice<R>& choice, const Shape<R>& shape) {
  return choice.priority ? choice.g : geometry_from_placement<R>(shape, Placement{});
}

// The boxes (and memory kind, through `mem`) of an expression evaluated without a destination.
template <int R, class Node>
Geometry<R> placement_of(const Node& node, const Shape<R>& shape, memory* mem = nullptr) {
  LayoutChoice<R> choice;
  choose<R>(node, shape, choice);
  if (mem) *mem = choice.mem;
  return chosen_geometry(choice, shape);
}

// choose() through a pointer (materialize: the rest of its work depends on the result type only).
template <int R>
using choose_fn = void (*)(const void* node, const Shape<R>& shape, LayoutChoice<R>& c);
template <int R, class Node>
void choose_of(const void* node, const Shape<R>& shape, LayoutChoice<R>& c) {
  choose<R>(*static_cast<const Node*>(node), shape, c);
}

}  // namespace tessera::detail
