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
#include <cstddef>
#include <string>
#include <vector>

namespace tessera::detail::rtc {

struct source {
  std::string code;                  // the whole translation unit
  std::string name;                  // the kernel (a __global__ function, extern "C" or not)
  std::vector<std::string> options;  // NVRTC options, e.g. -DN=4 or -use_fast_math
  std::string display_name;          // the file name compile errors cite (the user's kernel name)
};

// The CUBIN of `s` for compute capability `arch` (e.g. 90), from the memory cache, the disk cache
// or NVRTC. Throws compile_error with NVRTC's log. Needs no GPU.
std::string cubin(const source& s, int arch);
// The kernel of `s` for GPU `device` (compiled for its architecture on first use and loaded
// through the context-independent library API, once per architecture): an opaque cudaKernel_t.
void* gpu_kernel(const source& s, int device);
// Launches a kernel from gpu_kernel on the device's stream; `args` points to each argument
// (cudaLaunchKernel's args). Errors name the kernel, device and shard.
void launch(void* kernel, int device, int shard, const unsigned (&grid)[3], const unsigned (&block)[3],
            std::size_t shared_bytes, void** args, const std::string& name);
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

}  // namespace tessera::detail::rtc
