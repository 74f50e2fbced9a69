// SPDX-License-Identifier: Apache-2.0
// Tessera: CuPy's ElementwiseKernel over sharded arrays. The parameter lists ("float32 x, T y")
// and bodies are CuPy's; the inputs broadcast by the DSL's (Julia's) rules; a kernel is generated
// per signature (element types, rank: backend/rtc/codegen.cpp) and compiled by NVRTC for GPUs or by
// the system C++ compiler for host devices (backend/rtc), then runs once per shard.
//
// A call is planned like an assignment: the inputs become the leaves of one expression, which
// plan_shard walks per part of the output (placement, strides, the vector / linear / cartesian
// path, the alias check against the output), each shard becomes a KernelTask, and execute() runs
// them. An output that overlaps an input at another offset is computed through a temporary.
#pragma once
#include <tessera/assign.hpp>
#include <tessera/kernel.hpp>

#include <backend/rtc/codegen.hpp>

#include <map>
#include <mutex>
#include <string>
#include <tuple>
#include <vector>

namespace tessera {
namespace detail {

template <class T>
std::string c_type() {
  if constexpr (std::is_same_v<T, float>) return "float";
  else if constexpr (std::is_same_v<T, double>) return "double";
  else if constexpr (std::is_same_v<T, std::int32_t>) return "int";
  else if constexpr (std::is_same_v<T, std::int64_t> || std::is_same_v<T, long long>) return "long long";
  else if constexpr (std::is_same_v<T, bool>) return "bool";
  else return "";
}

// Per-shard description of one operand as the generated kernels read it: a pointer and strides
// over the shard's box (stride 0 on broadcast dims), and the box.
template <int R>
struct OperandArg {
  void* p;
  long long st[R];
};
template <int R>
struct BoxArg {
  long long ext[R];
  long long n;
  int path;  // 0: vector, 1: linear, 2: cartesian
};

// The element type of the first Array or View among A (float when there is none).
template <class... A>
struct first_array_value {
  using type = float;
};
template <class F, class... A>
struct first_array_value<F, A...> {
  template <class V, bool IsArray = is_array_like<V>::value>
  struct pick {
    using type = typename first_array_value<A...>::type;
  };
  template <class V>
  struct pick<V, true> {
    using type = typename V::value_type;
  };
  using type = typename pick<std::remove_cvref_t<F>>::type;
};

template <class X>
constexpr int rank_of() {
  using V = std::remove_cvref_t<X>;
  if constexpr (is_array_like<V>::value) return V::rank;
  else return 0;
}

// The largest rank among a call's arguments (scalars count 0): the rank of the generated kernel.
template <class... A>
inline constexpr int max_arg_rank = [] {
  int r = 0;
  ((r = rank_of<A>() > r ? rank_of<A>() : r), ...);
  return r;
}();

template <class X>
std::string type_of_arg() {
  using V = std::remove_cvref_t<X>;
  if constexpr (is_array_like<V>::value) return c_type<typename V::value_type>();
  else if constexpr (is_per_shard<V>::value) return c_type<typename decltype(V::values)::value_type>();
  else return c_type<V>();
}

// Adds a scalar argument as the C type the kernel declares for it.
template <class V>
void pack_scalar(ArgPack& pack, V v, const std::string& type) {
  if (type == "float") pack.add(static_cast<float>(v));
  else if (type == "double") pack.add(static_cast<double>(v));
  else if (type == "int") pack.add(static_cast<std::int32_t>(v));
  else if (type == "long long") pack.add(static_cast<std::int64_t>(v));
  else pack.add(static_cast<bool>(v));
}

// The functor of the expression that stands for a user kernel's inputs: the planner walks it like
// any expression; nothing evaluates it.
struct kernel_inputs {
  template <class... X>
  TS_HD int operator()(const X&...) const {
    return 0;
  }
};

// An argument as a leaf of that expression: arrays as themselves, scalars as scalars (per_shard
// values are substituted shard by shard when the task is packed).
template <class X>
auto kernel_leaf(const X& x) {
  using V = std::remove_cvref_t<X>;
  if constexpr (is_array_like<V>::value) return x.leaf();
  else if constexpr (is_per_shard<V>::value) return Scalar<typename decltype(V::values)::value_type>{{}};
  else return Scalar<V>{x};
}
template <class... In>
auto kernel_node(const In&... in) {
  return Broadcasted<kernel_inputs, decltype(kernel_leaf(in))...>{{}, {kernel_leaf(in)...}};
}

// The argument positions (1-based) of the array inputs, for placement errors.
template <class... In>
std::vector<int> array_positions() {
  std::vector<int> out;
  int k = 0;
  ((++k, is_array_like<std::remove_cvref_t<In>>::value ? out.push_back(k) : void()), ...);
  return out;
}

inline std::string kernel_text(const void* name) { return "kernel '" + *static_cast<const std::string*>(name) + "'"; }

// Packs input k of shard s: the operand from the plan's leaf evaluator, or the scalar's value.
template <int R, class Eval, class X>
void pack_input(ArgPack& pack, const Eval& e, const X& x, const std::string& type, int s, int count,
                const std::string& kernel, std::size_t position) {
  using V = std::remove_cvref_t<X>;
  if constexpr (is_array_like<V>::value) {
    OperandArg<R> a{};
    a.p = const_cast<void*>(static_cast<const void*>(e.p));
    for (int k = 0; k < R; ++k) a.st[k] = e.st[k];
    pack.add(a);
  } else if constexpr (is_per_shard<V>::value) {
    pack_scalar(pack, per_shard_value(x, s, count, kernel, position), type);
  } else {
    pack_scalar(pack, x, type);
  }
}

// A key per list of argument types: the address of a variable template instance.
template <class... A>
inline const char type_list_key = 0;

// What ElementwiseKernel and ReductionKernel share: the parameter lists (one output), the name,
// preamble and options, and the binding of the parameters' types to a call's arguments.
struct KernelSignature {
  std::vector<KParam> in, out;
  std::string name, preamble;
  std::vector<std::string> options;
  std::string kind;  // "ElementwiseKernel" or "ReductionKernel", in messages

  KernelSignature(const std::string& in_params, const std::string& out_params, std::string kernel_name,
                  std::string pre, std::vector<std::string> opts, std::string what)
      : in(parse_params(in_params, kernel_name, "input")),
        out(parse_params(out_params, kernel_name, "output")),
        name(std::move(kernel_name)),
        preamble(std::move(pre)),
        options(std::move(opts)),
        kind(std::move(what)) {
    if (out.size() != 1) {
      throw invalid_argument("tessera: " + kind + " '" + name + "': expected one output parameter, found " +
                             std::to_string(out.size()));
    }
  }

  // Per (output type, argument types) of a call, which fix everything above: the types and the
  // generated program are made once (one NVRTC run per architecture), so that a repeated call
  // builds no string. An entry is stored complete (a failed binding stores nothing, throws again).
  struct Bound {
    std::vector<std::string> types;
    std::map<std::string, std::string> placeholders;
    std::shared_ptr<rtc::program> program;
    std::size_t value_bytes = 0;  // reductions: the size of the folded type
  };
  std::mutex cache_m;
  std::map<const void*, std::shared_ptr<const Bound>> cache;

  template <class OutT, class... A, class Make>
  std::shared_ptr<const Bound> bound(Make&& make) {
    const void* key = &type_list_key<OutT, A...>;
    {
      std::lock_guard<std::mutex> g(cache_m);
      if (auto it = cache.find(key); it != cache.end()) return it->second;
    }
    auto b = std::make_shared<Bound>();
    b->types = bind_types(in, out[0], name, kind, {type_of_arg<A>()...}, {is_array_like<std::remove_cvref_t<A>>::value...},
                          c_type<OutT>(), b->placeholders);
    make(*b);
    std::lock_guard<std::mutex> g(cache_m);
    return cache.emplace(key, std::move(b)).first->second;  // a racing first call keeps the first entry
  }
};

// Runs a generated elementwise kernel over the inputs `in` into `out` (see the header comment).
template <class OutT, int R, class... In>
void run_elementwise(rtc::program& prog, const std::string& kname, const std::vector<std::string>& types,
                     const Layout<OutT, R>& out, const In&... in) {
  const auto node = kernel_node(in...);
  static const std::vector<int> positions = array_positions<In...>();
  // The vector path loads 4 elements at once: every array 4 or 8 bytes wide keeps them 16-byte aligned.
  constexpr bool in_array[] = {is_array_like<std::remove_cvref_t<In>>::value..., true};  // the output last
  bool wide_enough = true;
  for (std::size_t k = 0; k < types.size() && k <= sizeof...(In); ++k) {
    const bool array = in_array[k];
    const std::string& t = types[k];
    if (array && !(t == "float" || t == "int" || t == "double" || t == "long long")) wide_enough = false;
  }
  const int count = static_cast<int>(out.parts.size());
  std::vector<Job<KernelTask>> jobs;
  bool hazard = false;
  for (std::size_t s = 0; s < out.parts.size(); ++s) {
    const Part<OutT, R>& p = out.parts[s];
    if (p.empty()) continue;
    auto plan = plan_shard<R>(node, out.shape, {p.device, p.origin, p.extent}, {&kname, &kernel_text}, &p,
                              positions.data());
    hazard = hazard || plan.hazard;
    Job<KernelTask> j{.task = {.kind = kernel_kind::elementwise, .program = &prog, .name = kname},
                      .device = p.device,
                      .shard = static_cast<int>(s),
                      .n = plan.n,
                      .uses = std::move(plan.uses)};
    KernelTask& t = j.task;
    [&]<std::size_t... K>(std::index_sequence<K...>) {
      (pack_input<R>(t.args, ev_get<K>(plan.e.a), in, types[K], static_cast<int>(s), count, kname, K + 1), ...);
    }(std::index_sequence_for<In...>{});
    OperandArg<R> o{};
    o.p = p.ptr;
    for (int k = 0; k < R; ++k) o.st[k] = p.stride[k];
    t.args.add(o);
    BoxArg<R> b{};
    for (int k = 0; k < R; ++k) b.ext[k] = p.extent[k];
    b.n = plan.n;
    b.path = plan.mode == path::cartesian ? 2 : plan.mode == path::vector && wide_enough ? 0 : 1;
    t.args.add(b);
    t.n = plan.n;
    t.vector = b.path == 0;
    t.device = p.device.id();
    jobs.push_back(std::move(j));
  }
  if (hazard) {
    // An input overlaps the output at another offset: compute into a temporary, then copy.
    auto tmp = clone_geometry<OutT, R>(out);
    run_elementwise<OutT, R>(prog, kname, types, *tmp, in...);
    assign_node(out, ArrayLeaf<OutT, R>{tmp}, par);
    return;
  }
  execute(jobs);
}

}  // namespace detail

/// ElementwiseKernel(in_params, out_params, operation, name[, preamble, options]): CuPy's
/// ElementwiseKernel. `in_params`/`out_params` list "<type> <name>" (float32, float64, int32, int64,
/// bool, their C names, or a placeholder such as T bound by the arguments); `operation` is C++ over
/// those names (and `i`, the element's index in its shard). Inputs may be arrays or scalars and
/// broadcast by the DSL's rules. k(x, y) allocates the output (the first sharded input's placement;
/// its element type is the first array argument's, or Out in k.call<Out>(x, y)); k(x, y, z) writes
/// z and returns it (sharing its storage). Runs on GPUs (NVRTC) and on host devices (the system
/// C++ compiler), once per shard.
class ElementwiseKernel {
 public:
  ElementwiseKernel(std::string in_params, std::string out_params, std::string operation, std::string name,
                    std::string preamble = "", std::vector<std::string> options = {})
      : s_(std::make_shared<shared>(in_params, out_params, std::move(name), std::move(preamble), std::move(options),
                                    "ElementwiseKernel")) {
    s_->body = std::move(operation);
  }

  template <detail::kernel_arg... A>
  auto operator()(const A&... args) const {
    return call<void>(args...);
  }

  template <class Out, detail::kernel_arg... A>
  auto call(const A&... args) const;

  const std::string& name() const { return s_->name; }

 private:
  struct shared : detail::KernelSignature {
    using KernelSignature::KernelSignature;
    std::string body;
  };
  std::shared_ptr<shared> s_;
};

template <class Out, detail::kernel_arg... A>
auto ElementwiseKernel::call(const A&... args) const {
  using namespace detail;
  using T0 = typename first_array_value<A...>::type;
  using OutT = std::conditional_t<std::is_void_v<Out>, T0, Out>;
  constexpr int R = max_arg_rank<A...>;
  static_assert(R >= 1, "TESSERA_KERNEL_NEEDS_AN_ARRAY: pass at least one Array or View to an ElementwiseKernel");
  const std::string& kname = s_->name;
  const std::size_t n_in = s_->in.size(), n = sizeof...(A);
  if (n != n_in && n != n_in + 1) {
    throw invalid_argument("tessera: ElementwiseKernel '" + kname + "' takes " + std::to_string(n_in) + " inputs (and " +
                           "optionally its output); found " + std::to_string(n) + " arguments");
  }
  static constexpr bool is_array[] = {is_array_like<std::remove_cvref_t<A>>::value..., false};
  // The types and the generated program of this signature (made once per argument types).
  const auto binding = s_->bound<OutT, A...>([&](KernelSignature::Bound& b) {
    std::vector<GenArg> in, out{{b.types[n_in], s_->out[0].name, true}};
    for (std::size_t k = 0; k < n_in; ++k) in.push_back({b.types[k], s_->in[k].name, is_array[k]});
    const std::string code = elementwise_source(in, out, R, s_->body, s_->preamble, kname);
    b.program = std::make_shared<rtc::program>(rtc::source{code, "tessera_elementwise", s_->options, kname}, code);
  });
  rtc::program& prog = *binding->program;
  const std::vector<std::string>& types = binding->types;
  if (n == n_in) {
    // A new output with the inputs' broadcast shape and placement (that of the first sharded one).
    const auto node = kernel_node(args...);
    Shape<R> shape;
    shape.fill(1);
    shape = broadcast_into<R, decltype(node)::rank>(shape, R, node.shape());
    memory mem = memory::unified;
    const Geometry<R> g = placement_of<R>(node, shape, &mem);
    auto out = std::make_shared<const Layout<OutT, R>>(allocate_layout<OutT, R>(g, mem));
    run_elementwise<OutT, R>(prog, kname, types, *out, args...);
    return Array<OutT, R>(std::move(out));
  }
  // The output given last: its shape must take the inputs' broadcast shape; the result shares it
  // (CuPy returns the output array itself).
  return [&]<std::size_t... K>(std::index_sequence<K...>) {
    const auto all = std::forward_as_tuple(args...);
    const auto& last = std::get<sizeof...(A) - 1>(all);
    using L = std::remove_cvref_t<decltype(last)>;
    if constexpr (is_array_like<L>::value) {
      if constexpr (std::is_same_v<typename L::value_type, OutT> && L::rank == R) {
        const auto node = kernel_node(std::get<K>(all)...);
        check_assignable<R, decltype(node)::rank>(last.layout().shape, node.shape());
        run_elementwise<OutT, R>(prog, kname, types, last.layout(), std::get<K>(all)...);
        return Array<OutT, R>(last.layout_ptr());
      } else {
        throw invalid_argument("tessera: ElementwiseKernel '" + kname + "': the output must be an array of rank " +
                               std::to_string(R));
        return Array<OutT, R>();
      }
    } else {
      throw invalid_argument("tessera: ElementwiseKernel '" + kname + "': the output must be an array, found a scalar");
      return Array<OutT, R>();
    }
  }(std::make_index_sequence<sizeof...(A) - 1>{});
}

}  // namespace tessera
