// SPDX-License-Identifier: Apache-2.0
// Tessera: the executors of a KernelTask (user kernels, dsl/tessera/kernel_task.hpp), compiled once
// here rather than in every program: the grid of each kind of kernel, the host entry points of
// generated kernels, a ReductionKernel's scratch and result slots, and its last step.
#include <backend/rtc/rtc.hpp>
#include <backend/runtime/runtime.hpp>

#include <tessera/error.hpp>

#include <cstdint>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

namespace tessera::detail {

void ArgPack::add_bytes(const void* v, std::size_t size, std::size_t align) {
  // One allocation each for a launch's usual arguments (a few arrays' pointers and strides, the
  // box), not one per growth: the user kernels' launch is a few microseconds in all.
  if (offsets_.empty()) {
    bytes_.reserve(256);
    offsets_.reserve(8);
  }
  const std::size_t at = (bytes_.size() + align - 1) / align * align;
  bytes_.resize(at + size);
  std::memcpy(bytes_.data() + at, v, size);
  offsets_.push_back(at);
}

std::vector<void*> ArgPack::pointers() const {
  std::vector<void*> p;
  p.reserve(offsets_.size() + 1);
  for (auto o : offsets_) p.push_back(const_cast<unsigned char*>(bytes_.data()) + o);
  return p;
}

namespace rtc {

struct program::found {
  std::mutex m;
  std::vector<std::vector<void*>> gpu_fn;  // by device id, then entry
  std::map<std::string, void*> host_fn;
};

program::program(source gpu, std::string host_code)
    : gpu_(std::move(gpu)), host_code_(std::move(host_code)), found_(std::make_unique<found>()) {}
program::~program() = default;

void* program::gpu_function(int device, int entry) {
  std::lock_guard<std::mutex> g(found_->m);
  auto& gpu_fn = found_->gpu_fn;
  if (static_cast<int>(gpu_fn.size()) <= device) gpu_fn.resize(static_cast<std::size_t>(device) + 1);
  auto& fns = gpu_fn[static_cast<std::size_t>(device)];
  if (fns.empty()) fns.assign(gpu_.also.size() + 1, nullptr);
  void*& f = fns.at(static_cast<std::size_t>(entry));
  if (!f) f = gpu_kernel(gpu_, device, entry);
  return f;
}

void* program::host_function(const std::string& symbol) {
  std::lock_guard<std::mutex> g(found_->m);
  void*& f = found_->host_fn[symbol];
  if (!f) f = host_symbol(host_code_, symbol, name());
  return f;
}

}  // namespace rtc

namespace {

index_t sm_count(int device) {
  const int sms = rt::info(device).sm_count;
  return sms > 0 ? sms : 1;
}

// Blocks of `block` threads for `work` items, at least one, at most `cap`.
unsigned blocks_for(index_t work, unsigned block, index_t cap) {
  index_t b = (work + block - 1) / block;
  b = b < 1 ? 1 : b > cap ? cap : b;
  return static_cast<unsigned>(b);
}

// As a kept graph from the shape's second launch on; `pack`: the arguments' pack when `args` are
// exactly its pointers (then unchanged parameters are not set again), else null.
void launch_1d(void* fn, int device, int shard, unsigned grid, unsigned block, std::size_t shared, void** args,
               const std::string& name, const ArgPack* pack) {
  const unsigned g3[3] = {grid, 1, 1}, b3[3] = {block, 1, 1};
  rtc::launch(fn, device, shard, g3, b3, shared, args, name, pack ? pack->bytes() : nullptr,
              pack ? pack->size_bytes() : 0);
}

}  // namespace

namespace host {

void run(const KernelTask& t) {
  auto args = t.args.pointers();
  switch (t.kind) {
    case kernel_kind::raw:
      throw invalid_argument("tessera: kernel '" + t.name + "' was launched on " + rt::info(t.device).name +
                             ", which is not a GPU: RawKernel runs on GPUs only (ElementwiseKernel and "
                             "ReductionKernel also run on host devices)");
    case kernel_kind::compiled:
      throw invalid_argument("tessera: for_each_shard(kernel, ...) launched the __global__ function '" + t.name +
                             "' on " + rt::info(t.device).name + ", which is not a GPU; on host devices pass a functor");
    case kernel_kind::elementwise:
      reinterpret_cast<void (*)(void**)>(t.program->host_function("tessera_elementwise_host"))(args.data());
      return;
    case kernel_kind::reduction:
      reinterpret_cast<void (*)(void**, void*)>(t.program->host_function("tessera_reduction_host"))(
          args.data(), rt::mapped_result(t.device).host);
      return;
  }
}

}  // namespace host

namespace cuda {

void run(const KernelTask& t, int device, int shard) {
  auto args = t.args.pointers();
  switch (t.kind) {
    case kernel_kind::raw:
    case kernel_kind::compiled: {
      void* fn = t.kind == kernel_kind::compiled ? const_cast<void*>(t.compiled) : t.program->gpu_function(device);
      // Grid 0: one thread per element, capped at 32 blocks per SM (kernels loop grid-stride).
      const unsigned grid = t.cfg.grid ? t.cfg.grid : blocks_for(t.n, t.cfg.block, sm_count(device) * 32);
      launch_1d(fn, device, shard, grid, t.cfg.block, t.cfg.shared_bytes, args.data(), t.name, &t.args);
      return;
    }
    case kernel_kind::elementwise: {
      // The vector path takes two 4-element vectors per thread in one pass; the others loop
      // grid-stride over at most 64 blocks per SM.
      const index_t work = t.vector ? (t.n / 4 + 1) / 2 : t.n;
      const index_t cap = t.vector ? index_t(0x7fffffff) : sm_count(device) * 64;
      launch_1d(t.program->gpu_function(device), device, shard, blocks_for(work, 256, cap), 256, 0, args.data(),
                t.name, &t.args);
      return;
    }
    case kernel_kind::reduction: {
      // Block partials in the runtime's per-device scratch (read before this reduction returns),
      // then one block folds them into the device's mapped result slot.
      const unsigned blocks = blocks_for(t.n, 256, sm_count(device) * 4);
      void* partials = rt::scratch(device, static_cast<std::size_t>(blocks) * t.value_bytes);
      args.push_back(&partials);
      launch_1d(t.program->gpu_function(device, 0), device, shard, blocks, 256, 0, args.data(), t.name, nullptr);
      const void* parts = partials;
      long long count = blocks;
      void* result = rt::mapped_result(device).device;
      void* fin[3] = {&parts, &count, &result};
      launch_1d(t.program->gpu_function(device, 1), device, shard, 1, 256, 0, fin, t.name, nullptr);
      return;
    }
  }
}

}  // namespace cuda

namespace rtc {

void finish_reduction(program& p, const int* devices, std::size_t n, const int* candidates, std::size_t n_candidates,
                      std::size_t value_bytes, void* out, std::size_t out_bytes) {
  rt::device_restorer restore;
  std::vector<unsigned char> values(n * value_bytes);
  if (n > 0) rt::read_results(devices, n, values.data(), value_bytes);
  int post_gpu = -1;
  for (std::size_t i = 0; i < n_candidates && post_gpu < 0; ++i)
    if (rt::info(candidates[i]).kind == device_kind::cuda) post_gpu = candidates[i];
  const long long nv = static_cast<long long>(n);
  if (post_gpu < 0) {
    using post_fn = void (*)(const void*, long long, void*);
    reinterpret_cast<post_fn>(p.host_function("tessera_reduction_host_post"))(values.data(), nv, out);
    return;
  }
  // On post_gpu's rank (the same device on every rank), then shared like the partials.
  if (!rt::is_remote(post_gpu)) {
    auto buf = std::make_shared<rt::buffer>(post_gpu, values.size() + 16, memory::device);
    void* vals = buf->ptr;
    if (!values.empty()) rt::copy_from_host(post_gpu, vals, values.size(), values.data(), values.size(), values.size(), 1);
    const void* cvals = vals;
    void* result = rt::mapped_result(post_gpu).device;
    void* args[3] = {&cvals, const_cast<long long*>(&nv), &result};
    launch_1d(p.gpu_function(post_gpu, 2), post_gpu, 0, 1, 1, 0, args, p.name(), nullptr);
  }
  rt::read_results(&post_gpu, 1, out, out_bytes);
}

}  // namespace rtc
}  // namespace tessera::detail
