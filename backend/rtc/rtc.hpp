// SPDX-License-Identifier: Apache-2.0
// Tessera run-time compilation of user kernels. GPUs: NVRTC compiles CUDA C++ to a CUBIN for the
// device's architecture; the CUBIN is cached in memory and on disk (keyed by the source, the
// options, the architecture and NVRTC's version) and loaded once per device. Host devices: the
// system C++ compiler builds a shared library (cached on disk the same way) that is dlopen'ed.
// This header includes no CUDA header, so dsl/ may include it.
//
// The disk cache lives in $TESSERA_KERNEL_CACHE, else $XDG_CACHE_HOME/tessera/kernels, else
// ~/.cache/tessera/kernels; TESSERA_KERNEL_CACHE=0 (or off) disables it. The host compiler is
// $TESSERA_CXX, else $CXX, else c++.
#pragma once
#include <tessera/kernel_task.hpp>

#include <cstddef>
#include <memory>
#include <string>
#include <vector>

namespace tessera::detail::rtc {

struct source {
  std::string code;                  // the whole translation unit
  std::string name;                  // the kernel (a __global__ function, extern "C" or not)
  std::vector<std::string> options;  // NVRTC options, e.g. -DN=4 or -use_fast_math
  std::string display_name;          // the file name compile errors cite (the user's kernel name)
  std::vector<std::string> also;     // further kernels of the same source, compiled in the same NVRTC run
};

// The CUBIN of `s` for compute capability `arch` (e.g. 90), from the memory cache, the disk cache
// or NVRTC. Throws compile_error with NVRTC's log. Needs no GPU.
std::string cubin(const source& s, int arch);
// The kernel of `s` for GPU `device` (compiled for its architecture on first use and loaded
// through the context-independent library API, once per architecture): an opaque cudaKernel_t.
// `entry` 0 is s.name, entry k the kernel s.also[k - 1].
void* gpu_kernel(const source& s, int device, int entry = 0);
// Launches a kernel from gpu_kernel on the device's stream; `args` points to each argument
// (cudaLaunchKernel's args); from the shape's second launch on, as a kept one-node graph
// (rt::graph_launch), as the library's own kernels launch. `bytes` (`size`): all the arguments'
// bytes, if known, so that unchanged parameters are not set again. Errors name the kernel, device
// and shard.
void launch(void* kernel, int device, int shard, const unsigned (&grid)[3], const unsigned (&block)[3],
            std::size_t shared_bytes, void** args, const std::string& name, const void* bytes = nullptr,
            std::size_t size = 0);
// The compute capability of a GPU as major * 10 + minor.
int arch_of(int device);
// The address of extern "C" `symbol` in `code` compiled for the host into a shared library
// (cached in memory and on disk). Throws compile_error with the compiler's output.
void* host_symbol(const std::string& code, const std::string& symbol, const std::string& display_name);

// The disk cache directory ("" when disabled) and NVRTC's version (major * 1000 + minor * 10; 0
// without CUDA).
std::string cache_dir();
int nvrtc_version();
// What the caches did since the process started (for tests and benchmarks).
struct cache_stats {
  int compiled = 0;     // NVRTC or host compiler runs
  int disk_hits = 0;    // loaded from the disk cache
  int memory_hits = 0;  // found in memory
};
cache_stats stats();
// Empties the in-memory caches (the next use reads the disk cache or compiles): for tests.
void forget_memory_cache();

// A runtime-compiled program as the kernel tasks run it: its GPU source with its entry points,
// the host translation unit (host devices; "" for a GPU-only kernel), and the functions found so
// far (per device and entry, per host symbol), so a repeated call looks nothing up twice.
class program {
 public:
  program(source gpu, std::string host_code);
  ~program();
  const source& gpu_source() const { return gpu_; }
  const std::string& name() const { return gpu_.display_name.empty() ? gpu_.name : gpu_.display_name; }
  void* gpu_function(int device, int entry = 0);
  void* host_function(const std::string& symbol);

 private:
  source gpu_;
  std::string host_code_;
  // The functions found so far and their mutex (run.cpp): out of line, so that every program that
  // includes this header compiles no std::map or std::mutex.
  struct found;
  std::unique_ptr<found> found_;
};

// ReductionKernel's last step: reads the values the shards of `devices` left in their result
// slots (KernelTask of kind reduction; one exchange across processes), folds them in order and
// applies the post map (the program's entry 2) on the first GPU of `candidates` (the devices of
// the whole reduction, empty shards included), or on the host when there is none. Writes
// `out_bytes` into `out`: the same value on every rank.
void finish_reduction(program& p, const int* devices, std::size_t n, const int* candidates, std::size_t n_candidates,
                      std::size_t value_bytes, void* out, std::size_t out_bytes);

}  // namespace tessera::detail::rtc

// The executors of a KernelTask (backend/rtc/run.cpp): grid sizing, the reduction's scratch, the
// host entry points.
namespace tessera::detail::host {
void run(const KernelTask& t);
}
namespace tessera::detail::cuda {
void run(const KernelTask& t, int device, int shard);
}
