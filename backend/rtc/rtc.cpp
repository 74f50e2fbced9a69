// SPDX-License-Identifier: Apache-2.0
// Run-time compilation (rtc.hpp): NVRTC to CUBIN, per-device modules through the driver API, the
// system C++ compiler and dlopen for host devices, and the memory and disk caches of both.
#include <backend/rtc/rtc.hpp>
#include <backend/runtime/runtime.hpp>

#include <atomic>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <mutex>
#include <sstream>
#include <string>

#include <dlfcn.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <unistd.h>

#if TESSERA_HAS_CUDA
#include <cuda_runtime.h>
#include <nvrtc.h>
#endif

namespace tessera::detail::rtc {
namespace {

std::mutex& lock() {
  static std::mutex m;
  return m;
}
cache_stats& counters() {
  static cache_stats s;
  return s;
}

// FNV-1a, 64 bits: a stable key across runs and builds (std::hash is not).
std::uint64_t fnv(const std::string& s, std::uint64_t h = 1469598103934665603ull) {
  for (unsigned char c : s) h = (h ^ c) * 1099511628211ull;
  return h;
}

std::string hex(std::uint64_t v) {
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(v));
  return buf;
}

bool make_dirs(const std::string& path) {
  std::string cur;
  std::stringstream ss(path);
  std::string part;
  if (!path.empty() && path[0] == '/') cur = "/";
  while (std::getline(ss, part, '/')) {
    if (part.empty()) continue;
    cur += part + "/";
    if (mkdir(cur.c_str(), 0755) != 0 && errno != EEXIST) return false;
  }
  return true;
}

bool read_file(const std::string& path, std::string& out) {
  std::ifstream f(path, std::ios::binary);
  if (!f) return false;
  std::ostringstream ss;
  ss << f.rdbuf();
  out = ss.str();
  return !out.empty();
}

// A name no other thread or process uses at the same time, for temporary files.
std::string unique_suffix() {
  static std::atomic<unsigned> counter{0};
  return "." + std::to_string(getpid()) + "." + std::to_string(counter.fetch_add(1));
}

// Written to a temporary name first and renamed: a concurrent reader never sees half a file, and
// a failed write (a full disk) leaves nothing.
void write_file(const std::string& path, const std::string& data) {
  const std::string tmp = path + ".tmp" + unique_suffix();
  bool ok = false;
  {
    std::ofstream f(tmp, std::ios::binary);
    if (!f) return;  // a cache that cannot be written is only a slower cache
    f.write(data.data(), static_cast<std::streamsize>(data.size()));
    f.flush();
    ok = static_cast<bool>(f);
  }
  if (!ok || std::rename(tmp.c_str(), path.c_str()) != 0) std::remove(tmp.c_str());
}

[[maybe_unused]] std::string key_of(const source& s, const std::string& what) {
  std::uint64_t h = fnv(s.code);
  h = fnv(std::string(1, '\0') + s.name, h);
  for (auto& a : s.also) h = fnv(std::string(1, '\1') + a, h);
  for (auto& o : s.options) h = fnv(std::string(1, '\0') + o, h);
  return hex(fnv(what, h));
}

#if TESSERA_HAS_CUDA
void check_nvrtc(nvrtcResult r, const char* call, const std::string& name) {
  if (r == NVRTC_SUCCESS) return;
  throw backend_error(std::string("tessera: ") + call + " failed for kernel '" + name + "': " + nvrtcGetErrorString(r));
}

std::string nvrtc_compile(const source& s, int arch) {
  nvrtcProgram prog = nullptr;
  const std::string file = (s.display_name.empty() ? s.name : s.display_name) + ".cu";
  check_nvrtc(nvrtcCreateProgram(&prog, s.code.c_str(), file.c_str(), 0, nullptr, nullptr), "nvrtcCreateProgram",
              s.name);
  std::vector<std::string> opts = {"--gpu-architecture=sm_" + std::to_string(arch), "-std=c++17"};
  for (auto& o : s.options) opts.push_back(o);
  std::vector<const char*> argv;
  for (auto& o : opts) argv.push_back(o.c_str());
  std::vector<std::string> names = {s.name};
  names.insert(names.end(), s.also.begin(), s.also.end());
  for (auto& n : names) (void)nvrtcAddNameExpression(prog, n.c_str());
  const nvrtcResult r = nvrtcCompileProgram(prog, static_cast<int>(argv.size()), argv.data());
  std::size_t log_size = 0;
  nvrtcGetProgramLogSize(prog, &log_size);
  std::string log(log_size, '\0');
  if (log_size > 1) nvrtcGetProgramLog(prog, log.data());
  while (!log.empty() && (log.back() == '\0' || log.back() == '\n')) log.pop_back();
  if (r != NVRTC_SUCCESS) {
    nvrtcDestroyProgram(&prog);
    throw compile_error("tessera::compile_error: kernel '" + s.name + "' does not compile for sm_" +
                            std::to_string(arch) + " (NVRTC " + std::to_string(nvrtc_version() / 1000) + "." +
                            std::to_string(nvrtc_version() % 1000 / 10) + "; line numbers are those of your source):\n" +
                            log,
                        log);
  }
  std::size_t size = 0;
  nvrtcResult got = nvrtcGetCUBINSize(prog, &size);
  std::string bin(got == NVRTC_SUCCESS ? size : 0, '\0');
  if (got == NVRTC_SUCCESS) got = nvrtcGetCUBIN(prog, bin.data());
  if (got != NVRTC_SUCCESS) nvrtcDestroyProgram(&prog);
  check_nvrtc(got, "nvrtcGetCUBIN", s.name);
  // The lowered (mangled) names travel with the binary: "<name>\n<name>...\0<cubin>".
  std::string lowered_names;
  for (auto& n : names) {
    const char* lowered = nullptr;
    const bool got_name = nvrtcGetLoweredName(prog, n.c_str(), &lowered) == NVRTC_SUCCESS && lowered;
    lowered_names += (lowered_names.empty() ? "" : "\n") + (got_name ? std::string(lowered) : n);
  }
  nvrtcDestroyProgram(&prog);
  return lowered_names + std::string(1, '\0') + bin;
}
#endif

std::map<std::string, std::string>& cubins() {
  static std::map<std::string, std::string> m;
  return m;
}
std::map<std::string, void*>& host_libs() {
  static std::map<std::string, void*> m;
  return m;
}

}  // namespace

std::string cache_dir() {
  const char* env = std::getenv("TESSERA_KERNEL_CACHE");
  if (env) {
    const std::string v = env;
    if (v.empty() || v == "0" || v == "off" || v == "OFF") return "";
    return v;
  }
  if (const char* xdg = std::getenv("XDG_CACHE_HOME"); xdg && *xdg) return std::string(xdg) + "/tessera/kernels";
  if (const char* home = std::getenv("HOME"); home && *home) return std::string(home) + "/.cache/tessera/kernels";
  return "";
}

int nvrtc_version() {
#if TESSERA_HAS_CUDA
  int major = 0, minor = 0;
  if (nvrtcVersion(&major, &minor) != NVRTC_SUCCESS) return 0;
  return major * 1000 + minor * 10;
#else
  return 0;
#endif
}

cache_stats stats() {
  std::lock_guard<std::mutex> g(lock());
  return counters();
}

void forget_memory_cache() {
  std::lock_guard<std::mutex> g(lock());
  cubins().clear();
  host_libs().clear();  // the libraries stay loaded; the next use dlopens the disk copy again
}

// The stored entry is "<lowered name>\0<cubin>"; cubin() returns it whole (gpu_kernel splits it).
std::string cubin(const source& s, int arch) {
#if TESSERA_HAS_CUDA
  const std::string key = key_of(s, "sm_" + std::to_string(arch) + " nvrtc " + std::to_string(nvrtc_version()));
  {
    std::lock_guard<std::mutex> g(lock());
    auto it = cubins().find(key);
    if (it != cubins().end()) {
      ++counters().memory_hits;
      return it->second;
    }
  }
  const std::string dir = cache_dir();
  const std::string path = dir.empty() ? "" : dir + "/" + key + ".cubin";
  std::string bin;
  bool from_disk = !path.empty() && read_file(path, bin) && bin.find('\0') != std::string::npos;
  if (!from_disk) {
    bin = nvrtc_compile(s, arch);
    if (!dir.empty() && make_dirs(dir)) write_file(path, bin);
  }
  std::lock_guard<std::mutex> g(lock());
  ++(from_disk ? counters().disk_hits : counters().compiled);
  return cubins().emplace(key, std::move(bin)).first->second;
#else
  (void)s, (void)arch;
  throw error("tessera: this build has no CUDA, so NVRTC cannot compile kernel '" + s.name + "'");
#endif
}

int arch_of(int device) {
#if TESSERA_HAS_CUDA
  rt::device_restorer restore;
  rt::set_device(device);
  int major = 0, minor = 0;
  rt::check_cuda(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device),
                 "cudaDeviceGetAttribute", device);
  rt::check_cuda(cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, device),
                 "cudaDeviceGetAttribute", device);
  return major * 10 + minor;
#else
  (void)device;
  return 0;
#endif
}

void* gpu_kernel(const source& s, int device, int entry) {
  if (!rt::is_gpu(device)) {
    throw invalid_argument("tessera: kernel '" + s.name + "' was launched on " + rt::info(device).name +
                           ", which is not a GPU: RawKernel runs on GPUs only (ElementwiseKernel and ReductionKernel "
                           "also run on host devices)");
  }
#if TESSERA_HAS_CUDA
  const int arch = arch_of(device);
  const std::string bin = cubin(s, arch);
  // The context-independent library API: one load per architecture serves every device.
  static std::map<std::pair<std::string, int>, std::vector<cudaKernel_t>> loaded;
  if (entry < 0 || entry > static_cast<int>(s.also.size())) {
    throw invalid_argument("tessera: kernel '" + s.name + "' has no entry point " + std::to_string(entry));
  }
  std::lock_guard<std::mutex> g(lock());
  const auto key = std::make_pair(key_of(s, "lib"), arch);
  if (auto it = loaded.find(key); it != loaded.end()) return reinterpret_cast<void*>(it->second[entry]);
  rt::device_restorer restore;
  rt::set_device(device);
  const std::size_t cut = bin.find('\0');
  cudaLibrary_t lib = nullptr;
  rt::check_cuda(cudaLibraryLoadData(&lib, bin.data() + cut + 1, nullptr, nullptr, 0, nullptr, nullptr, 0),
                 "cudaLibraryLoadData", device);
  std::vector<cudaKernel_t> kernels;
  std::stringstream names(bin.substr(0, cut));
  for (std::string lowered; std::getline(names, lowered, '\n');) {
    cudaKernel_t k = nullptr;
    rt::check_cuda(cudaLibraryGetKernel(&k, lib, lowered.c_str()), "cudaLibraryGetKernel", device);
    kernels.push_back(k);
  }
  // Libraries live as long as the process, like the runtime's state.
  return reinterpret_cast<void*>(loaded.emplace(key, std::move(kernels)).first->second[entry]);
#else
  (void)device, (void)entry;
  throw error("tessera: this build has no CUDA, so kernel '" + s.name + "' cannot run on a GPU");
#endif
}

void launch(void* kernel, int device, int shard, const unsigned (&grid)[3], const unsigned (&block)[3],
            std::size_t shared_bytes, void** args, const std::string& name, const void* bytes, std::size_t size) {
#if TESSERA_HAS_CUDA
  rt::set_device(device);
  if (rt::graph_launch(kernel, grid, block, shared_bytes, args, bytes, size, rt::stream(device), device, shard,
                       name.c_str())) {
    rt::check_launch(device, shard, name.c_str(), /*by_driver=*/true);
    return;
  }
  const cudaError_t r = cudaLaunchKernel(static_cast<const void*>(kernel), dim3(grid[0], grid[1], grid[2]),
                                         dim3(block[0], block[1], block[2]), args, shared_bytes,
                                         static_cast<cudaStream_t>(rt::stream(device)));
  if (r != cudaSuccess) {
    (void)cudaGetLastError();
    throw backend_error("tessera: launch of kernel '" + name + "' failed on " + rt::info(device).name + " (shard " +
                        std::to_string(shard) + ", grid " + std::to_string(grid[0]) + ", block " +
                        std::to_string(block[0]) + "): " + cudaGetErrorString(r));
  }
  rt::check_launch(device, shard, name.c_str());
#else
  (void)kernel, (void)device, (void)shard, (void)grid, (void)block, (void)shared_bytes, (void)args, (void)bytes,
      (void)size;
  throw error("tessera: this build has no CUDA, so kernel '" + name + "' cannot run on a GPU");
#endif
}

void* host_symbol(const std::string& code, const std::string& symbol, const std::string& display_name) {
  const char* cxx_env = std::getenv("TESSERA_CXX");
  if (!cxx_env || !*cxx_env) cxx_env = std::getenv("CXX");
  const std::string cxx = cxx_env && *cxx_env ? cxx_env : "c++";
  const std::string flags = "-std=c++17 -O3 -shared -fPIC";
  // The key holds the machine type too: a cache directory shared by x86-64 and aarch64 nodes.
  struct utsname un {};
  (void)uname(&un);
  const std::string key = hex(fnv(cxx + " " + flags + " " + un.machine + "\n" + code));
  auto& libs = host_libs();
  {
    std::lock_guard<std::mutex> g(lock());
    if (auto it = libs.find(key); it != libs.end()) {
      ++counters().memory_hits;
      void* f = dlsym(it->second, symbol.c_str());
      if (f) return f;
    }
  }
  std::string dir = cache_dir();
  bool cached = !dir.empty() && make_dirs(dir);
  if (!cached) {  // without a cache directory, a private temporary one
    char tmpl[] = "/tmp/tessera-kernels-XXXXXX";
    if (!mkdtemp(tmpl)) throw backend_error("tessera: could not create a directory to compile kernel '" + display_name + "'");
    dir = tmpl;
  }
  const std::string lib = dir + "/" + key + ".so";
  bool from_disk = cached && access(lib.c_str(), R_OK) == 0;
  void* handle = from_disk ? dlopen(lib.c_str(), RTLD_NOW | RTLD_LOCAL) : nullptr;
  if (from_disk && !handle) {  // a cached library that does not load (another machine's?): rebuild it
    std::remove(lib.c_str());
    from_disk = false;
  }
  if (!from_disk) {
    const std::string tag = unique_suffix();
    const std::string src = dir + "/" + key + tag + ".cpp";
    const std::string out = lib + ".tmp" + tag;
    const std::string log = src + ".log";
    write_file(src, code);
    const std::string cmd = cxx + " " + flags + " -o '" + out + "' '" + src + "' > '" + log + "' 2>&1";
    const int rc = std::system(cmd.c_str());
    std::string text;
    read_file(log, text);
    std::remove(log.c_str());
    std::remove(src.c_str());
    if (rc != 0) {
      std::remove(out.c_str());
      throw compile_error("tessera::compile_error: kernel '" + display_name + "' does not compile for host devices (" +
                              cxx + " " + flags + "; line numbers are those of your source):\n" + text,
                          text);
    }
    if (std::rename(out.c_str(), lib.c_str()) != 0) std::remove(out.c_str());
    handle = dlopen(lib.c_str(), RTLD_NOW | RTLD_LOCAL);
  }
  if (!cached) {  // the loaded library stays mapped; its private directory goes
    std::remove(lib.c_str());
    rmdir(dir.c_str());
  }
  if (!handle) throw backend_error("tessera: dlopen of kernel '" + display_name + "' failed: " + dlerror());
  void* f = dlsym(handle, symbol.c_str());
  if (!f) throw backend_error("tessera: kernel '" + display_name + "' has no symbol " + symbol);
  std::lock_guard<std::mutex> g(lock());
  ++(from_disk ? counters().disk_hits : counters().compiled);
  libs[key] = handle;
  return f;
}

}  // namespace tessera::detail::rtc
