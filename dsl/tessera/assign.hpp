// SPDX-License-Identifier: Apache-2.0
// Tessera: materialization. Julia's instantiate + copyto!: combine shapes once, plan every shard
// (instantiate.hpp: placement match, evaluator, path, alias check), build one ShardTask per shard,
// then hand them to the executors (backend/execute.hpp).
#pragma once
#include <tessera/array.hpp>
#include <tessera/instantiate.hpp>

#include <backend/execute.hpp>

#include <cstddef>
#include <memory>
#include <new>
#include <string>
#include <tuple>
#include <vector>

namespace tessera::detail {

// One of hide_communication's two passes over an assignment (overlap.hpp): the cells of each
// destination part within `width` of a face it shares with another part of its layout, along the
// shard dimension (what neighbours keep as halo cells), or the rest. A part without such faces
// goes whole into the first pass when it is storage of the exchanged array (a write there must
// precede the copies), else into the second.
struct box_filter {
  bool boundary;  // the first pass
  index_t width;
  const std::vector<const rt::buffer*>* exchanged;
};

// The intervals along dst.shard_dim of part p that pass f computes, as out[0..2m) (m <= 3), or -1
// for the whole part.
template <class T, int N>
int pass_intervals(const box_filter& f, const Layout<T, N>& dst, const Part<T, N>& p, index_t* out) {
  const int d = dst.shard_dim;
  int parts = 0;
  for (const auto& q : dst.parts) parts += q.empty() ? 0 : 1;
  if (d < 0 || parts < 2) {
    bool mine = false;
    for (const rt::buffer* b : *f.exchanged) mine = mine || (p.buf && b == p.buf.get());
    return mine == f.boundary ? -1 : 0;
  }
  const index_t lo = p.origin[d], end = lo + p.extent[d];
  index_t face[4] = {};  // (read only below nf; initialised for nvcc's warning #549)
  int nf = 0;
  auto add = [&](index_t a, index_t b) {
    if (nf > 0 && a <= face[2 * nf - 1]) {  // a part as thin as 2 * width: one face
      if (b > face[2 * nf - 1]) face[2 * nf - 1] = b;
      return;
    }
    face[2 * nf] = a;
    face[2 * nf + 1] = b;
    ++nf;
  };
  if (lo > 0) add(lo, end < lo + f.width ? end : lo + f.width);
  if (end < dst.shape[d]) add(lo > end - f.width ? lo : end - f.width, end);
  int m = 0;
  auto put = [&](index_t a, index_t b) {
    if (a >= b) return;
    out[2 * m] = a;
    out[2 * m + 1] = b;
    ++m;
  };
  if (f.boundary) {
    for (int i = 0; i < nf; ++i) put(face[2 * i], face[2 * i + 1]);
  } else {
    index_t at = lo;
    for (int i = 0; i < nf; ++i) {
      put(at, face[2 * i]);
      at = face[2 * i + 1];
    }
    put(at, end);
  }
  return m;
}

// A recorded assignment, run again over part of each shard: a move-only closure behind a function
// pointer (as run_task is), so that assign.hpp, in every program, needs no <functional>.
class replay_fn {
 public:
  replay_fn() = default;
  template <class F>
  explicit replay_fn(F f)
      : obj_(new F(std::move(f)), [](void* p) { delete static_cast<F*>(p); }),
        call_([](void* p, const box_filter* b) { (*static_cast<F*>(p))(b); }) {}
  void operator()(const box_filter* b) const { call_(obj_.get(), b); }

 private:
  std::unique_ptr<void, void (*)(void*)> obj_{nullptr, nullptr};
  void (*call_)(void*, const box_filter*) = nullptr;
};

// What hide_communication's recording receives: the assignment, to check and replay. Set for the
// duration of the body on the recording thread.
struct assignment_recorder {
  virtual ~assignment_recorder() = default;
  // Throws if the assignment may not be replayed (see overlap.hpp): `shifted_self_read`, it reads
  // its destination at another offset. `replay` runs it over part of each shard.
  virtual void record(const std::vector<const rt::buffer*>& writes, const std::vector<const rt::buffer*>& reads,
                      bool shifted_self_read, replay_fn replay) = 0;
};
inline thread_local assignment_recorder* active_recorder = nullptr;

template <class T, int N>
std::vector<const rt::buffer*> buffers_of(const Layout<T, N>& l) {
  std::vector<const rt::buffer*> out;
  for (const auto& p : l.parts)
    if (p.buf) out.push_back(p.buf.get());
  return out;
}
template <class T, int N>
void add_reads(const ArrayLeaf<T, N>& a, std::vector<const rt::buffer*>& out) {
  for (const auto& p : a.layout->parts)
    if (p.buf) out.push_back(p.buf.get());
}
template <class T>
void add_reads(const Scalar<T>&, std::vector<const rt::buffer*>&) {}
template <int N>
void add_reads(const IndexLeaf<N>&, std::vector<const rt::buffer*>&) {}
template <class F, class... A>
void add_reads(const Broadcasted<F, A...>& b, std::vector<const rt::buffer*>& out) {
  std::apply([&](const auto&... a) { (add_reads(a, out), ...); }, b.args);
}

// What the assignment driver (assign_parts) needs from one expression type: how to plan a box
// into a job, which buffers the expression reads, and a replayable copy of the assignment. The
// driver itself depends only on the destination's type, so one instance serves every expression
// assigned to, say, an Array<float, 1>, and the job list is compiled once in tessera_runtime: per
// expression only the plan and the task are compiled (docs/performance.md, "Compile time").
template <class T, int N>
struct assign_ops {
  const void* node;
  const rt::task_type* task;
  // Plans the box of part p (of shard s) into one job; returns whether a read overlaps the
  // written region at another offset (then the driver goes through a temporary).
  bool (*plan)(const void* node, const Layout<T, N>& dst, const Part<T, N>& p, int s, rt::job_list& jobs);
  void (*add_reads)(const void* node, std::vector<const rt::buffer*>& out);
  replay_fn (*replay)(const void* node, const Layout<T, N>& dst, execution_policy pol);
};

template <class T, int N, class Node>
struct assign_planner {
  using Task = ShardTask<OutEval<T, N>, eval_t<Node, N>, N>;
  static_assert(alignof(Task) <= alignof(std::max_align_t), "a task is stored in rt::job_list");
  static bool plan(const void* node, const Layout<T, N>& dst, const Part<T, N>& p, int s, rt::job_list& jobs) {
    auto plan = plan_shard<N>(*static_cast<const Node*>(node), dst.shape, {p.device, p.origin, p.extent},
                              {&dst, &describe_layout<T, N>}, &p);
    void* at = jobs.add(p.device.id(), s, plan.n, std::move(plan.uses));
    Task* t = ::new (at) Task{.out = {p.ptr, {}}, .e = plan.e, .ext = plan.ext, .n = plan.n, .mode = plan.mode, .wide = plan.wide};
    for (int k = 0; k < N; ++k) t->out.st[k] = p.stride[k];
    return plan.hazard;
  }
  static void reads(const void* node, std::vector<const rt::buffer*>& out) {
    add_reads(*static_cast<const Node*>(node), out);
  }
  static replay_fn replay(const void* expr, const Layout<T, N>& dst, execution_policy pol) {
    return replay_fn([dst, node = *static_cast<const Node*>(expr), pol](const box_filter* f) {
      assign_node(dst, node, pol, f);
    });
  }
};

template <class T, int N, class Node>
assign_ops<T, N> ops_for(const Node& node) {
  using P = assign_planner<T, N, Node>;
  return {.node = &node, .task = &task_type_of<typename P::Task>, .plan = &P::plan, .add_reads = &P::reads,
          .replay = &P::replay};
}

template <class T, int N>
void assign_parts(const Layout<T, N>& dst, const assign_ops<T, N>& ops, execution_policy pol,
                  const box_filter* filter) {
  // Every shard is planned before anything runs: a placement error leaves every array intact.
  // A filter splits a part into at most 3 intervals (pass_intervals).
  rt::job_list jobs(*ops.task, dst.parts.size() * (filter ? 3 : 1));
  bool hazard = false;
  for (std::size_t s = 0; s < dst.parts.size(); ++s) {
    const Part<T, N>& p = dst.parts[s];
    if (p.empty()) continue;
    index_t iv[6];
    const int m = filter ? pass_intervals(*filter, dst, p, iv) : -1;
    if (m < 0) {
      hazard = ops.plan(ops.node, dst, p, static_cast<int>(s), jobs) || hazard;
      continue;
    }
    const int d = dst.shard_dim;
    for (int i = 0; i < m; ++i) {
      Part<T, N> q = p;  // the interval's cells of the part
      q.ptr = p.ptr + (iv[2 * i] - p.origin[d]) * p.stride[d];
      q.origin[d] = iv[2 * i];
      q.extent[d] = iv[2 * i + 1] - iv[2 * i];
      hazard = ops.plan(ops.node, dst, q, static_cast<int>(s), jobs) || hazard;
    }
  }
  if (filter == nullptr && active_recorder != nullptr) {
    // In hide_communication's body: planned above (errors come now, before anything runs), run
    // later, twice.
    std::vector<const rt::buffer*> reads;
    ops.add_reads(ops.node, reads);
    active_recorder->record(buffers_of(dst), reads, hazard, ops.replay(ops.node, dst, pol));
    return;
  }
  if (hazard) {
    // A read overlaps the written region at another offset: evaluate into a temporary first.
    auto tmp = clone_geometry<T, N>(dst);
    assign_parts(*tmp, ops, pol, filter);
    assign_node(dst, ArrayLeaf<T, N>{tmp}, pol, filter);
    return;
  }
  jobs.run(pol.sequential);
}

template <class T, int N, class Node>
void assign_node(const Layout<T, N>& dst, const Node& node, execution_policy pol, const box_filter* filter) {
  // Instantiate: the expression's shape must broadcast to the destination's.
  check_assignable<N, Node::rank>(dst.shape, node.shape());
  // Unlike Julia, an expression of higher rank than its destination is a compile error even when
  // its extra dimensions have size 1: take a view that drops them instead.
  static_assert(Node::rank <= N, "TESSERA_RANK_MISMATCH: the expression has a higher rank than the destination");
  assign_parts<T, N>(dst, ops_for<T, N>(node), pol, filter);
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

// A new array for an expression without a destination: its placement (placement_of, through
// the expression's leaf walk `choose`) and the assignment, both driven per result type.
template <class V, int R>
std::shared_ptr<const Layout<V, R>> materialize_parts(const Shape<R>& shape, choose_fn<R> choose,
                                                      const assign_ops<V, R>& ops) {
  LayoutChoice<R> choice;
  choose(ops.node, shape, choice);
  auto out = std::make_shared<const Layout<V, R>>(allocate_layout<V, R>(chosen_geometry(choice, shape), choice.mem));
  assign_parts<V, R>(*out, ops, par, nullptr);
  return out;
}

template <class Node>
auto materialize(const Node& node) {
  constexpr int R = Node::rank;
  using V = storage_t<Node>;  // the value type, except that half op half stays half (expr.hpp)
  static_assert(element_type<V>,
                "TESSERA_UNSUPPORTED_RESULT_TYPE: an expression materializes into bool, int32_t, int64_t, float, "
                "double, complex, half or bfloat16; wrap it in cast<T>(...)");
  return Array<V, R>(materialize_parts<V, R>(node.shape(), &choose_of<R, Node>, ops_for<V, R>(node)));
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
