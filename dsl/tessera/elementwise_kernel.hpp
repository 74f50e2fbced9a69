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
#include <tessera/kernel_signature.hpp>

#include <string>
#include <tuple>
#include <utility>
#include <vector>

namespace tessera {
namespace detail {

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
