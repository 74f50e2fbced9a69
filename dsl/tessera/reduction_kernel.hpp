// SPDX-License-Identifier: Apache-2.0
// Tessera: CuPy's ReductionKernel over sharded arrays. map_expr turns each element (of the
// broadcast inputs) into a value, reduce_expr folds two values `a` and `b`, post_map_expr writes the
// output from the folded value `a`, identity is the fold's neutral element. Each shard folds its
// elements into its device's result slot (a KernelTask: on GPUs block partials in the runtime's
// scratch, then one block; on host devices a loop compiled by the system C++ compiler, the shards
// of several host devices at once on the host pool); the shards' values then fold in shard order
// and the post map runs once, on the first GPU of the reduction or on the host
// (rtc::finish_reduction). The result is a host value. One NVRTC run per signature and
// architecture compiles all three GPU kernels.
#pragma once
#include <tessera/elementwise_kernel.hpp>

namespace tessera {

/// ReductionKernel(in_params, out_params, map_expr, reduce_expr, post_map_expr, identity, name
/// [, reduce_type, preamble, options]): CuPy's ReductionKernel, reducing every element of its
/// (broadcast) inputs into one host value. k(x, y) returns it as the first array argument's
/// element type, or Out in k.call<Out>(x, y). reduce_type (default: the output's type) is the type
/// of `a` and `b` in reduce_expr.
class ReductionKernel {
 public:
  ReductionKernel(std::string in_params, std::string out_params, std::string map_expr, std::string reduce_expr,
                  std::string post_map_expr, std::string identity, std::string name, std::string reduce_type = "",
                  std::string preamble = "", std::vector<std::string> options = {})
      : s_(std::make_shared<shared>(in_params, out_params, std::move(name), std::move(preamble), std::move(options),
                                    "ReductionKernel")) {
    s_->map = std::move(map_expr);
    s_->reduce = std::move(reduce_expr);
    s_->post = std::move(post_map_expr);
    s_->identity = std::move(identity);
    s_->reduce_type = std::move(reduce_type);
  }

  template <detail::kernel_arg... A>
  auto operator()(const A&... args) const {
    return call<void>(args...);
  }
  template <class Out, detail::kernel_arg... A>
  auto call(const A&... args) const;

 private:
  struct shared : detail::KernelSignature {
    using KernelSignature::KernelSignature;
    std::string map, reduce, post, identity, reduce_type;
  };
  std::shared_ptr<shared> s_;
};

template <class Out, detail::kernel_arg... A>
auto ReductionKernel::call(const A&... args) const {
  using namespace detail;
  using T0 = typename first_array_value<A...>::type;
  using OutT = std::conditional_t<std::is_void_v<Out>, T0, Out>;
  constexpr int R = max_arg_rank<A...>;
  static_assert(R >= 1, "TESSERA_KERNEL_NEEDS_AN_ARRAY: pass at least one Array or View to a ReductionKernel");
  const std::string& kname = s_->name;
  const std::size_t n_in = s_->in.size();
  if (sizeof...(A) != n_in) {
    throw invalid_argument("tessera: ReductionKernel '" + kname + "' takes " + std::to_string(n_in) + " inputs; found " +
                           std::to_string(sizeof...(A)) + " arguments");
  }
  static constexpr bool is_array[] = {is_array_like<std::remove_cvref_t<A>>::value..., false};
  // The types and the generated program of this signature (made once per argument types).
  const auto binding = s_->bound<OutT, A...>([&](KernelSignature::Bound& b) {
    std::string rtype = s_->reduce_type.empty() ? b.types[n_in] : c_type_of(s_->reduce_type);
    if (rtype.empty()) rtype = placeholder_type(b.placeholders, s_->reduce_type);
    if (rtype.empty()) {
      throw invalid_argument("tessera: ReductionKernel '" + kname + "': reduce_type '" + s_->reduce_type +
                             "' is not one of float32, float64, int32, int64, bool (or their C names), nor a placeholder "
                             "of the parameters");
    }
    std::vector<GenArg> in;
    for (std::size_t k = 0; k < n_in; ++k) in.push_back({b.types[k], s_->in[k].name, is_array[k]});
    const std::string code = reduction_source(in, {b.types[n_in], s_->out[0].name, true}, rtype, R, s_->map,
                                              s_->reduce, s_->post, s_->identity, s_->preamble, kname);
    b.program = std::make_shared<rtc::program>(
        rtc::source{code, "tessera_reduction", s_->options, kname, {"tessera_reduction_final", "tessera_reduction_post"}},
        code);
    b.value_bytes = c_type_size(rtype);
  });
  const std::vector<std::string>& types = binding->types;
  const std::size_t rbytes = binding->value_bytes;
  if (rbytes > rt::result_slot_bytes || sizeof(OutT) > rt::result_slot_bytes) {
    throw invalid_argument("tessera: ReductionKernel '" + kname + "': its reduce and output types take " +
                           std::to_string(rbytes) + " and " + std::to_string(sizeof(OutT)) + " bytes; at most " +
                           std::to_string(rt::result_slot_bytes) + " fit a result slot");
  }
  // The boxes: the inputs' broadcast shape, split like the first sharded input (one replica of a
  // replicated input), as for any expression without a destination (placement_of).
  const auto node = kernel_node(args...);
  static const std::vector<int> positions = array_positions<A...>();
  Shape<R> shape;
  shape.fill(1);
  shape = broadcast_into<R, decltype(node)::rank>(shape, R, node.shape());
  const Geometry<R> g = placement_of<R>(node, shape);
  // per_shard values are counted and indexed by the parts before any is dropped (a replicated
  // input folds its first replica, with the first value); empty shards add the identity and take
  // no part, but their devices may run the post map.
  const int part_count = static_cast<int>(g.boxes.size());
  std::vector<int> candidates;
  for (const auto& b : g.boxes) {
    candidates.push_back(b.device.id());
    if (g.replicated) break;
  }
  std::vector<Job<KernelTask>> jobs;
  std::vector<int> ids;
  for (std::size_t s = 0; s < g.boxes.size() && !(g.replicated && s > 0); ++s) {
    const auto& box = g.boxes[s];
    if (volume<R>(box.extent) == 0) continue;
    auto plan = plan_shard<R>(node, shape, box, {&kname, &kernel_text}, static_cast<const Part<char, R>*>(nullptr),
                              positions.data());
    Job<KernelTask> j{.task = {.kind = kernel_kind::reduction, .program = binding->program.get(), .name = kname},
                      .device = box.device,
                      .shard = static_cast<int>(s),
                      .n = plan.n,
                      .uses = std::move(plan.uses)};
    KernelTask& t = j.task;
    [&]<std::size_t... K>(std::index_sequence<K...>) {
      (pack_input<R>(t.args, ev_get<K>(plan.e.a), args, types[K], static_cast<int>(s), part_count, kname, K + 1), ...);
    }(std::index_sequence_for<A...>{});
    BoxArg<R> b{};
    for (int k = 0; k < R; ++k) b.ext[k] = box.extent[k];
    b.n = plan.n;
    b.path = plan.mode == path::cartesian ? 2 : 1;
    t.args.add(b);
    t.n = plan.n;
    t.value_bytes = rbytes;
    t.device = box.device.id();
    ids.push_back(box.device.id());
    jobs.push_back(std::move(j));
  }
  // Every device is busy before the host waits for the first value.
  execute(jobs);
  OutT y{};
  rtc::finish_reduction(*binding->program, ids.data(), ids.size(), candidates.data(), candidates.size(), rbytes, &y,
                        sizeof(OutT));
  return y;
}

}  // namespace tessera
