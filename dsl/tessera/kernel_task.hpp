// SPDX-License-Identifier: Apache-2.0
// Tessera: the task of one shard of a user kernel (RawKernel, ElementwiseKernel, ReductionKernel,
// for_each_shard of a __global__ function). Unlike the DSL's tasks it carries no evaluator: its
// arguments are packed bytes, as cudaLaunchKernel takes them, and its kernel is compiled at run
// time (backend/rtc), so both of its executors are compiled once into tessera_runtime
// (backend/rtc/run.cpp): grid sizing, the host call and the reduction's scratch live there.
#pragma once
#include <tessera/config.hpp>

#include <cstddef>
#include <string>
#include <type_traits>
#include <vector>

namespace tessera {

/// Grid and block of a launch; grid 0 covers the shard's elements with one thread each (capped at
/// 32 blocks per SM: kernels should loop grid-stride).
struct LaunchConfig {
  unsigned grid = 0;
  unsigned block = 256;
  std::size_t shared_bytes = 0;
};

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

namespace rtc {
class program;
}

// Arguments packed for cudaLaunchKernel (and the host entry points, which take the same pointers):
// each value in an aligned slot.
class ArgPack {
 public:
  template <class V>
  void add(const V& v) {
    static_assert(std::is_trivially_copyable_v<V>);
    add_bytes(&v, sizeof(V), alignof(V));
  }
  // A pointer to each argument (into this pack: valid while it lives unchanged).
  std::vector<void*> pointers() const;
  // Every argument's bytes, the padding between them zero: equal packs launch the same kernel
  // parameters (a kept graph's are then not set again, backend/runtime/kept_graphs.cpp).
  const unsigned char* bytes() const { return bytes_.data(); }
  std::size_t size_bytes() const { return bytes_.size(); }

 private:
  // Both in backend/rtc/run.cpp: compiled once, not per argument type in every program.
  void add_bytes(const void* v, std::size_t size, std::size_t align);

  std::vector<unsigned char> bytes_;  // no 16-byte alignment needed: the launch copies the values
  std::vector<std::size_t> offsets_;
};

enum class kernel_kind : unsigned char {
  raw,          // RawKernel: the program's kernel; LaunchConfig's grid, or one covering the shard
  compiled,     // for_each_shard(kernel, ...): a __global__ function of the caller's nvcc translation unit
  elementwise,  // ElementwiseKernel: the generated kernel (vector, linear or cartesian path)
  reduction,    // ReductionKernel: the shard folded into its device's result slot
};

struct KernelTask {
  static constexpr bool in_library = true;  // both executors are in tessera_runtime (execute.hpp)
  static constexpr bool capturable = true;  // but not kernel_kind::reduction (execute.hpp refuses it)
  kernel_kind kind;
  rtc::program* program = nullptr;  // null for `compiled`
  const void* compiled = nullptr;   // the __global__ function of `compiled`
  std::string name;                 // the user's kernel name, in launch errors
  ArgPack args;
  index_t n = 0;                // elements of the shard
  LaunchConfig cfg = {};        // raw and compiled kernels
  bool vector = false;          // elementwise: the 4-vector path
  std::size_t value_bytes = 0;  // reduction: the size of the folded type
  int device = -1;              // the shard's device (the host run needs it for its result slot and errors)
};

}  // namespace detail
}  // namespace tessera
