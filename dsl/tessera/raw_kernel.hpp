// SPDX-License-Identifier: Apache-2.0
// Tessera: user kernels on every shard. RawKernel(source, name, options) is CuPy's RawKernel: CUDA
// C++ compiled at run time by NVRTC for each GPU's architecture (cached in memory and on disk,
// backend/rtc), launched once per shard of its array arguments on the shard's device and stream,
// ordered with the DSL's work. Calling convention (docs/semantics.md, "User kernels"): an
// Array<T, N> or View<T, N> argument arrives as `tessera::shard<T, N>` (the shard's pointer,
// extents, strides, global origin and shape, its element count, the shard's index and count); a
// scalar as itself; per_shard(values) as values[shard index].
//
// A call is planned like every operation: one task per part of the first array argument (the
// shards), each argument's part found by the one placement rule (operand_view: the part on the
// shard's device that holds the shard's box; for an argument of another shape, the whole array on
// that device, i.e. a replicated or single-device operand), then execute().
#pragma once
#include <tessera/array.hpp>
#include <tessera/instantiate.hpp>
#include <tessera/kernel_task.hpp>

#include <backend/execute.hpp>
#include <backend/rtc/codegen.hpp>
#include <backend/rtc/rtc.hpp>

#include <memory>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

namespace tessera {

/// per_shard(values): a kernel argument that takes values[s] on shard s (per-GPU seeds, offsets).
template <class T>
struct PerShard {
  std::vector<T> values;
};
template <class T>
  requires std::is_arithmetic_v<T>
PerShard<T> per_shard(std::vector<T> values) {
  return {std::move(values)};
}

namespace detail {

template <class T, int N>
using ShardArg = Shard<T, N>;

template <class X>
struct is_per_shard : std::false_type {};
template <class T>
struct is_per_shard<PerShard<T>> : std::true_type {};

template <class X>
concept kernel_arg = is_array_like<std::remove_cvref_t<X>>::value || std::is_arithmetic_v<std::remove_cvref_t<X>> ||
                     is_per_shard<std::remove_cvref_t<X>>::value;

// One shard of a user kernel: a part of its first array argument.
struct ShardBox {
  Device device;
  int index, count;
  int rank;               // of the first array argument
  const index_t* shape;   // its shape, and the part's box
  const index_t* origin;
  const index_t* extent;
  index_t n;
};

// The shards of a call: the parts of the first array argument (none: no array argument).
template <class X>
void add_boxes(std::vector<ShardBox>& out, const X& x) {
  using V = std::remove_cvref_t<X>;
  if constexpr (is_array_like<V>::value) {
    if (!out.empty()) return;
    const auto& l = x.layout();
    const int count = static_cast<int>(l.parts.size());
    for (int s = 0; s < count; ++s) {
      const auto& p = l.parts[static_cast<std::size_t>(s)];
      out.push_back({.device = p.device, .index = s, .count = count, .rank = V::rank, .shape = l.shape.data(),
                     .origin = p.origin.data(), .extent = p.extent.data(), .n = volume<V::rank>(p.extent)});
    }
  }
}

template <int N>
bool same_shape(const Shape<N>& shape, const ShardBox& b) {
  bool same = b.rank == N;
  for (int k = 0; k < N && same; ++k) same = shape[k] == b.shape[k];
  return same;
}

// Shard b of an argument: the part of `l` the placement rule (operand_view) finds on b's device
// holding b's box when `l` has the first array argument's shape, else the whole of `l` there (a
// replicated or single-device operand). An empty shard reads nothing: its box without data.
template <class T, int N>
ShardArg<T, N> shard_arg(const Layout<T, N>& l, const ShardBox& b, const std::string& kernel, int position,
                         rt::buffer_list& uses) {
  static_assert(N >= 1, "TESSERA_KERNEL_ARG_RANK: kernel array arguments have rank >= 1");
  ShardArg<T, N> a{};
  a.index = b.index;
  a.count = b.count;
  for (int k = 0; k < N; ++k) a.shape[k] = l.shape[k];
  Shape<N> origin{}, extent = l.shape;
  const bool same = same_shape<N>(l.shape, b);
  if (same) {
    for (int k = 0; k < N; ++k) origin[k] = b.origin[k], extent[k] = b.extent[k];
    if (b.n == 0) {
      const Shape<N> st = column_major_strides<N>(extent);
      for (int k = 0; k < N; ++k) a.extent[k] = extent[k], a.stride[k] = st[k], a.origin[k] = origin[k];
      return a;
    }
  }
  const Part<T, N>* p = operand_view<T, N, N>(l, b.device, l.shape, origin, extent).part;
  if (!p) {
    throw placement_mismatch("tessera::placement_mismatch: kernel '" + kernel + "', argument #" +
                             std::to_string(position) + " (" + shape_string<N>(l.shape) + ", " +
                             describe_placement(l) + ") has no part on " + b.device.name() + " holding " +
                             (same ? "the first array argument's box there" : "all of it") +
                             ". Fix: give it the first array argument's placement, or replicate() it.");
  }
  uses.add(p->buf.get());
  a.data = p->ptr;
  for (int k = 0; k < N; ++k) {
    a.extent[k] = p->extent[k];
    a.stride[k] = p->stride[k];
    a.origin[k] = p->origin[k];
  }
  a.size = volume<N>(p->extent);
  return a;
}

// per_shard(values)'s value for shard s of `count`.
template <class T>
T per_shard_value(const PerShard<T>& x, int s, int count, const std::string& kernel, std::size_t position) {
  if (static_cast<int>(x.values.size()) != count) {
    throw invalid_argument("tessera: kernel '" + kernel + "', argument #" + std::to_string(position) +
                           ": per_shard(values) has " + std::to_string(x.values.size()) +
                           " values; expected one per shard, " + std::to_string(count));
  }
  return x.values[static_cast<std::size_t>(s)];
}

// What an argument becomes on shard b: a Shard for an array, values[s] for per_shard, the value.
template <class X>
auto shard_value_of(const X& x, const ShardBox& b, const std::string& kernel, int position, rt::buffer_list& uses) {
  using V = std::remove_cvref_t<X>;
  if constexpr (is_array_like<V>::value) {
    return shard_arg(x.layout(), b, kernel, position, uses);
  } else if constexpr (is_per_shard<V>::value) {
    return per_shard_value(x, b.index, b.count, kernel, static_cast<std::size_t>(position));
  } else {
    return x;
  }
}
template <class X>
using shard_value_t = decltype(shard_value_of(std::declval<const X&>(), std::declval<const ShardBox&>(),
                                              std::declval<const std::string&>(), 0,
                                              std::declval<rt::buffer_list&>()));

inline void check_launch_config(const LaunchConfig& cfg, const std::string& kernel) {
  if (cfg.block == 0 || cfg.block > 1024) {
    throw invalid_argument("tessera: kernel '" + kernel + "': LaunchConfig block " + std::to_string(cfg.block) +
                           "; expected 1 to 1024 threads");
  }
}

template <class... A>
std::vector<ShardBox> kernel_boxes(const std::string& kernel, const A&... args) {
  std::vector<ShardBox> boxes;
  (add_boxes(boxes, args), ...);
  if (boxes.empty()) {
    throw invalid_argument("tessera: kernel '" + kernel +
                           "' was called without an array argument; expected at least one Array or View, whose "
                           "shards the kernel runs on");
  }
  return boxes;
}

// One KernelTask per shard of a RawKernel or a compiled __global__ function, every shard planned
// (placement errors surface here, before anything runs), then executed.
template <class... A>
void launch_per_shard(kernel_kind kind, rtc::program* prog, const void* compiled, const std::string& name,
                      const LaunchConfig& cfg, const A&... args) {
  check_launch_config(cfg, name);
  const auto boxes = kernel_boxes(name, args...);
  std::vector<Job<KernelTask>> jobs;
  jobs.reserve(boxes.size());
  for (const ShardBox& b : boxes) {
    Job<KernelTask> j{.task = {.kind = kind, .program = prog, .compiled = compiled, .name = name},
                      .device = b.device,
                      .shard = b.index,
                      .n = b.n};
    int position = 0;
    (j.task.args.add(shard_value_of(args, b, name, ++position, j.uses)), ...);
    j.task.n = b.n;
    j.task.cfg = cfg;
    j.task.device = b.device.id();
    if (b.n == 0 && cfg.grid == 0) continue;
    jobs.push_back(std::move(j));
  }
  execute(jobs);
}

}  // namespace detail

/// RawKernel(source, name, options): a CUDA C++ kernel compiled by NVRTC at run time (once per GPU
/// architecture, cached in memory and on disk) and launched on every shard of its array arguments.
/// `name` is the __global__ function (extern "C", or a C++ name such as a template instance).
class RawKernel {
 public:
  RawKernel(std::string source, std::string name, std::vector<std::string> options = {})
      : prog_(std::make_shared<detail::rtc::program>(
            detail::rtc::source{std::string(detail::kernel_preamble()) + "#line 1 \"" + name + "\"\n" + source, name,
                                std::move(options), name},
            "")) {}

  /// k(args...): one launch per shard, grid covering the shard's elements (block 256).
  template <detail::kernel_arg... A>
  void operator()(const A&... args) const {
    detail::launch_per_shard(detail::kernel_kind::raw, prog_.get(), nullptr, name(), LaunchConfig{}, args...);
  }
  /// k(config, args...): with the grid, block and dynamic shared memory given.
  template <detail::kernel_arg... A>
  void operator()(const LaunchConfig& cfg, const A&... args) const {
    detail::launch_per_shard(detail::kernel_kind::raw, prog_.get(), nullptr, name(), cfg, args...);
  }

  /// Compiles for compute capability `arch` (e.g. 90) without launching (needs no GPU); throws
  /// compile_error with NVRTC's log.
  void compile(int arch) const { (void)detail::rtc::cubin(prog_->gpu_source(), arch); }
  // Scalars are passed as the C++ type given: pass exactly the type the kernel declares (2.f for a
  // float parameter, std::int64_t{n} for a long long one); a narrower argument is read past.
  const std::string& name() const { return prog_->gpu_source().name; }

 private:
  std::shared_ptr<detail::rtc::program> prog_;
};

}  // namespace tessera
