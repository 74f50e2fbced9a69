// SPDX-License-Identifier: Apache-2.0
// Tessera: user kernels on every shard. RawKernel(source, name, options) is CuPy's RawKernel: CUDA
// C++ compiled at run time by NVRTC for each GPU's architecture (cached in memory and on disk,
// backend/rtc), launched once per shard of its array arguments on the shard's device and stream,
// ordered with the DSL's work. Calling convention (docs/semantics.md, "User kernels"): an
// Array<T, N> or View<T, N> argument arrives as `tessera::shard<T, N>` (the shard's pointer,
// extents, strides, global origin and shape, its element count, the shard's index and count); a
// scalar as itself; per_shard(values) as values[shard index].
#pragma once
#include <tessera/array.hpp>
#include <tessera/layout.hpp>

#include <backend/rtc/rtc.hpp>

#include <array>
#include <cstdint>
#include <cstring>
#include <memory>
#include <mutex>
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

/// Grid and block of a launch; grid 0 covers the shard's elements with one thread each (capped at
/// 32 blocks per SM: kernels should loop grid-stride).
struct LaunchConfig {
  unsigned grid = 0;
  unsigned block = 256;
  std::size_t shared_bytes = 0;
};

namespace detail {

// Declarations every user kernel sees (prepended to its source): the shard description. The
// host mirror below has the same layout.
inline const char* kernel_preamble() {
  return R"(namespace tessera {
template <class T, int N>
struct shard {
  T* data;
  long long extent[N];  // of this shard
  long long stride[N];  // in elements
  long long origin[N];  // global index of the shard's first element
  long long shape[N];   // of the whole array
  long long size;       // elements in this shard
  int index, count;     // this shard and the number of shards
#ifdef __CUDACC_RTC__
  __device__
#endif
  T& operator()(long long i) const {  // element i of the shard in column-major order
    long long off = 0;
    for (int k = 0; k < N; ++k) {
      const long long e = extent[k];
      off += (k + 1 < N ? i % e : i) * stride[k];
      i = k + 1 < N ? i / e : 0;
    }
    return data[off];
  }
};
template <class T, int N>
using Shard = shard<T, N>;
}  // namespace tessera
)";
}

}  // namespace detail

/// One shard of an array as a kernel sees it: for_each_shard's functors receive it; RawKernel
/// kernels receive the same layout as `tessera::shard<T, N>` (also `tessera::Shard<T, N>` there;
/// `shard` is the placement function here).
template <class T, int N>
struct Shard {
  T* data;
  long long extent[N];  // of this shard
  long long stride[N];  // in elements
  long long origin[N];  // global index of the shard's first element
  long long shape[N];   // of the whole array
  long long size;       // elements in this shard
  int index, count;     // this shard and the number of shards
  // Element i of the shard in column-major order.
  TS_HD T& operator()(long long i) const {
    long long off = 0;
    for (int k = 0; k < N; ++k) {
      const long long e = extent[k];
      off += (k + 1 < N ? i % e : i) * stride[k];
      i = k + 1 < N ? i / e : 0;
    }
    return data[off];
  }
};

namespace detail {

template <class T, int N>
using ShardArg = Shard<T, N>;

// The box of shard s: the driver's part s (the first array argument).
struct ShardBox {
  Device device;
  int index, count;
  std::vector<index_t> origin, extent;
};

// The part of `l` that shard b reads on `d`: the one with b's box, or the whole array on that device
// (replicated or single-device operands, or operands of another rank). Null when there is none.
template <class T, int N>
const Part<T, N>* matching_part(const Layout<T, N>& l, Device d, const ShardBox& b) {
  const Part<T, N>* whole = nullptr;
  const bool same_rank = static_cast<int>(b.origin.size()) == N;
  for (auto& p : l.parts) {
    if (!(p.device == d)) continue;
    bool same_box = same_rank;
    for (int k = 0; k < N && same_box; ++k) same_box = p.origin[k] == b.origin[k] && p.extent[k] == b.extent[k];
    if (same_box) return &p;
    if (!whole && volume<N>(p.extent) == volume<N>(l.shape)) whole = &p;
  }
  return whole;
}


// Arguments packed for cuLaunchKernel: each value in an aligned slot, and a pointer to each.
class ArgPack {
 public:
  template <class V>
  void add(const V& v) {
    static_assert(std::is_trivially_copyable_v<V>);
    std::size_t at = (bytes_.size() + alignof(V) - 1) / alignof(V) * alignof(V);
    bytes_.resize(at + sizeof(V));
    std::memcpy(bytes_.data() + at, &v, sizeof(V));
    offsets_.push_back(at);
  }
  void** pointers() {
    ptrs_.clear();
    for (auto o : offsets_) ptrs_.push_back(bytes_.data() + o);
    return ptrs_.data();
  }

 private:
  std::vector<unsigned char> bytes_;  // 16-byte aligned storage is not needed: memcpy'd by the driver
  std::vector<std::size_t> offsets_;
  std::vector<void*> ptrs_;
};

template <class X>
struct is_per_shard : std::false_type {};
template <class T>
struct is_per_shard<PerShard<T>> : std::true_type {};

template <class X>
concept kernel_arg = is_array_like<std::remove_cvref_t<X>>::value || std::is_arithmetic_v<std::remove_cvref_t<X>> ||
                     is_per_shard<std::remove_cvref_t<X>>::value;

template <class T, int N>
ShardArg<T, N> shard_arg(const Layout<T, N>& l, const ShardBox& b, const char* kernel, int position) {
  static_assert(N >= 1, "TESSERA_KERNEL_ARG_RANK: kernel array arguments have rank >= 1");
  const Part<T, N>* p = matching_part(l, b.device, b);
  if (!p) {
    throw placement_mismatch("tessera::placement_mismatch: kernel '" + std::string(kernel) + "', argument #" +
                             std::to_string(position) + " (" + shape_string<N>(l.shape) + ", " +
                             describe_placement(l) + ") has no part on " + b.device.name() +
                             " with the first array argument's box there, nor a whole copy. Fix: give it the first "
                             "array argument's placement, or replicate() it.");
  }
  if (p->buf) rt::make_resident(*p->buf);
  ShardArg<T, N> a{};
  a.data = p->ptr;
  for (int k = 0; k < N; ++k) {
    a.extent[k] = p->extent[k];
    a.stride[k] = p->stride[k];
    a.origin[k] = p->origin[k];
    a.shape[k] = l.shape[k];
  }
  a.size = volume<N>(p->extent);
  a.index = b.index;
  a.count = b.count;
  return a;
}

// Appends one argument's value for shard b.
template <class X>
void pack_arg(ArgPack& pack, const X& x, const ShardBox& b, const char* kernel, int position) {
  using V = std::remove_cvref_t<X>;
  if constexpr (is_array_like<V>::value) {
    pack.add(shard_arg(x.layout(), b, kernel, position));
  } else if constexpr (is_per_shard<V>::value) {
    if (static_cast<int>(x.values.size()) != b.count) {
      throw invalid_argument("tessera: kernel '" + std::string(kernel) + "', argument #" + std::to_string(position) +
                             ": per_shard(values) has " + std::to_string(x.values.size()) +
                             " values; expected one per shard, " + std::to_string(b.count));
    }
    pack.add(x.values[static_cast<std::size_t>(b.index)]);
  } else {
    pack.add(x);
  }
}

// The shards of a launch: the parts of the first array argument.
template <class X>
void add_boxes(std::vector<ShardBox>& out, const X& x) {
  using V = std::remove_cvref_t<X>;
  if constexpr (is_array_like<V>::value) {
    if (!out.empty()) return;
    const auto& l = x.layout();
    const int count = static_cast<int>(l.parts.size());
    for (int s = 0; s < count; ++s) {
      const auto& p = l.parts[static_cast<std::size_t>(s)];
      ShardBox b{p.device, s, count, {}, {}};
      for (int k = 0; k < V::rank; ++k) b.origin.push_back(p.origin[k]), b.extent.push_back(p.extent[k]);
      out.push_back(std::move(b));
    }
  }
}

inline index_t box_volume(const ShardBox& b) {
  index_t n = 1;
  for (auto e : b.extent) n *= e;
  return n;
}

// A compiled kernel's per-device functions, shared by copies of the kernel object.
struct KernelState {
  rtc::source src;
  std::mutex m;
  std::vector<void*> fn;  // by device id

  void* function(int device) {
    std::lock_guard<std::mutex> g(m);
    if (static_cast<int>(fn.size()) <= device) fn.resize(static_cast<std::size_t>(device) + 1, nullptr);
    void*& f = fn[static_cast<std::size_t>(device)];
    if (!f) f = rtc::gpu_kernel(src, device);
    return f;
  }
};

// Launches `state`'s kernel (or, when `fixed` is set, that compiled __global__ function) once per
// shard (the first array argument's parts) with `args`.
template <class... A>
void launch_per_shard_fn(KernelState& state, const void* fixed, const LaunchConfig& cfg, const A&... args) {
  if (cfg.block == 0 || cfg.block > 1024) {
    throw invalid_argument("tessera: kernel '" + state.src.name + "': LaunchConfig block " + std::to_string(cfg.block) +
                           "; expected 1 to 1024 threads");
  }
  std::vector<ShardBox> boxes;
  (add_boxes(boxes, args), ...);
  if (boxes.empty()) {
    throw invalid_argument("tessera: kernel '" + state.src.name +
                           "' was called without an array argument; expected at least one Array or View, whose "
                           "shards the kernel runs on");
  }
  // Pack every shard's arguments (placement errors surface here), then launch.
  std::vector<ArgPack> packs(boxes.size());
  for (std::size_t s = 0; s < boxes.size(); ++s) {
    int position = 0;
    (pack_arg(packs[s], args, boxes[s], state.src.name.c_str(), ++position), ...);
  }
  rt::device_restorer restore;
  for (std::size_t s = 0; s < boxes.size(); ++s) {
    const ShardBox& b = boxes[s];
    const index_t n = box_volume(b);
    if (n == 0 && cfg.grid == 0) continue;
    const int id = b.device.id();
    if (fixed && b.device.is_host()) {
      throw invalid_argument("tessera: for_each_shard(kernel, ...) launched the __global__ function '" + state.src.name +
                             "' on " + b.device.name() + ", which is not a GPU; on host devices pass a functor");
    }
    if (rt::is_remote(id)) continue;  // its rank launches it (every rank packed every shard: the same errors)
    void* fn = fixed ? const_cast<void*>(fixed) : state.function(id);
    unsigned grid = cfg.grid;
    if (grid == 0) {
      const index_t cap = static_cast<index_t>(rt::info(id).sm_count > 0 ? rt::info(id).sm_count : 1) * 32;
      const index_t want = (n + cfg.block - 1) / cfg.block;
      grid = static_cast<unsigned>(want < cap ? want : cap);
    }
    const unsigned g3[3] = {grid, 1, 1}, b3[3] = {cfg.block, 1, 1};
    rtc::launch(fn, id, static_cast<int>(s), g3, b3, cfg.shared_bytes, packs[s].pointers(), state.src.name);
  }
}

template <class... A>
void launch_per_shard(KernelState& state, const LaunchConfig& cfg, const A&... args) {
  launch_per_shard_fn(state, nullptr, cfg, args...);
}

}  // namespace detail

/// RawKernel(source, name, options): a CUDA C++ kernel compiled by NVRTC at run time (once per GPU
/// architecture, cached in memory and on disk) and launched on every shard of its array arguments.
/// `name` is the __global__ function (extern "C", or a C++ name such as a template instance).
class RawKernel {
 public:
  RawKernel(std::string source, std::string name, std::vector<std::string> options = {})
      : state_(std::make_shared<detail::KernelState>()) {
    state_->src = {std::string(detail::kernel_preamble()) + "#line 1 \"" + name + "\"\n" + source, name,
                   std::move(options), name};
  }

  /// k(args...): one launch per shard, grid covering the shard's elements (block 256).
  template <detail::kernel_arg... A>
  void operator()(const A&... args) const {
    detail::launch_per_shard(*state_, LaunchConfig{}, args...);
  }
  /// k(config, args...): with the grid, block and dynamic shared memory given.
  template <detail::kernel_arg... A>
  void operator()(const LaunchConfig& cfg, const A&... args) const {
    detail::launch_per_shard(*state_, cfg, args...);
  }

  /// Compiles for compute capability `arch` (e.g. 90) without launching (needs no GPU); throws
  /// compile_error with NVRTC's log.
  void compile(int arch) const { (void)detail::rtc::cubin(state_->src, arch); }
  // Scalars are passed as the C++ type given: pass exactly the type the kernel declares (2.f for a
  // float parameter, std::int64_t{n} for a long long one); a narrower argument is read past.
  const std::string& name() const { return state_->src.name; }

 private:
  std::shared_ptr<detail::KernelState> state_;
};

}  // namespace tessera
