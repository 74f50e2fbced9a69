// SPDX-License-Identifier: Apache-2.0
// A sampling profiler of one thread for the GPU machines, which have no perf, gdb or Nsight
// Systems: LD_PRELOAD=sample_profile.so makes the program's main thread take a signal every
// SAMPLE_US microseconds of wall time (default 50; a CLOCK_MONOTONIC timer aimed at that thread)
// and record its call stack (glibc backtrace, SAMPLE_DEPTH frames, default 12). At exit it writes
// to $SAMPLE_OUT (default profile.txt) the functions the thread was in (leaf: self time) and the
// functions on its stack (inclusive time), each as a share of the samples, named by dladdr and
// demangled; code of a stripped library outside its exported functions shows as the library's name. What the host spends
// per launch, inside the CUDA driver or in Tessera's own code (issue #22 item 3).
// Built and run by `gpu_check.sh profile` (no Tessera):
//   g++ -O2 -shared -fPIC -o sample_profile.so sample_profile.cpp -ldl
#include <cxxabi.h>
#include <dlfcn.h>
#include <link.h>
#include <execinfo.h>
#include <signal.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <map>
#include <string>
#include <vector>

namespace {

constexpr int max_depth = 32;
constexpr std::size_t max_samples = 1 << 20;
struct sample {
  int depth;
  void* pc[max_depth];
};
sample* samples = nullptr;
std::atomic<std::size_t> taken{0};
int depth = 12;
timer_t timer{};
bool armed = false;

void on_signal(int, siginfo_t*, void*) {
  const std::size_t i = taken.load(std::memory_order_relaxed);
  if (i >= max_samples) return;
  sample& s = samples[i];
  s.depth = backtrace(s.pc, depth);
  taken.store(i + 1, std::memory_order_relaxed);
}

// Functions without a dynamic symbol (a static library linked into the program, a stripped
// library) are looked up with addr2line in the file's own symbol table, one run per file.
struct where {
  std::string file;
  std::uintptr_t offset;
};

std::string short_name(std::string s) {
  if (s.size() > 150) s = s.substr(0, 150) + "...";
  return s;
}

std::map<void*, std::string> resolve(const std::vector<void*>& pcs) {
  std::map<void*, std::string> names;
  std::map<std::string, std::vector<std::pair<void*, std::uintptr_t>>> by_file;
  for (void* pc : pcs) {
    Dl_info info{};
    void* entry = nullptr;  // the symbol's ElfW(Sym)
    if (dladdr1(pc, &info, &entry, RTLD_DL_SYMENT) == 0) {
      names[pc] = "[unknown]";
      continue;
    }
    // dladdr names the nearest exported symbol below pc: in a stripped library (libcuda) that is
    // often another function; past the symbol's size, pc is not in it.
    const auto* sym = static_cast<const ElfW(Sym)*>(entry);
    if (info.dli_sname != nullptr && sym != nullptr && sym->st_size > 0 &&
        reinterpret_cast<std::uintptr_t>(pc) - reinterpret_cast<std::uintptr_t>(info.dli_saddr) >= sym->st_size)
      info.dli_sname = nullptr;
    const std::string file = info.dli_fname != nullptr ? info.dli_fname : "?";
    std::string lib = file;
    if (const auto slash = lib.rfind('/'); slash != std::string::npos) lib = lib.substr(slash + 1);
    if (info.dli_sname != nullptr) {
      int status = 0;
      char* d = abi::__cxa_demangle(info.dli_sname, nullptr, nullptr, &status);
      names[pc] = short_name(status == 0 && d != nullptr ? d : info.dli_sname) + " [" + lib + "]";
      std::free(d);
      continue;
    }
    names[pc] = "[" + lib + "]";
    by_file[file].emplace_back(pc, reinterpret_cast<std::uintptr_t>(pc) - reinterpret_cast<std::uintptr_t>(info.dli_fbase));
  }
  for (const auto& [file, list] : by_file) {
    std::string lib = file;
    if (const auto slash = lib.rfind('/'); slash != std::string::npos) lib = lib.substr(slash + 1);
    const std::string in = "/tmp/sample_profile_" + std::to_string(getpid()) + ".txt";
    std::FILE* f = std::fopen(in.c_str(), "w");
    if (f == nullptr) continue;
    for (const auto& [pc, off] : list) std::fprintf(f, "0x%lx\n", static_cast<unsigned long>(off));
    std::fclose(f);
    const std::string cmd = "addr2line -f -C -e '" + file + "' < " + in + " 2>/dev/null";
    std::FILE* p = popen(cmd.c_str(), "r");
    if (p == nullptr) continue;
    char line[4096];
    for (const auto& [pc, off] : list) {
      if (std::fgets(line, sizeof line, p) == nullptr) break;
      std::string fn = line;
      while (!fn.empty() && (fn.back() == '\n' || fn.back() == '\r')) fn.pop_back();
      if (std::fgets(line, sizeof line, p) == nullptr) break;  // file:line
      if (!fn.empty() && fn != "??") names[pc] = short_name(fn) + " [" + lib + "]";
    }
    pclose(p);
    std::remove(in.c_str());
  }
  return names;
}

void report() {
  if (armed) timer_delete(timer);
  armed = false;
  const std::size_t n = taken.load();
  const char* path = std::getenv("SAMPLE_OUT");
  std::FILE* out = std::fopen(path != nullptr ? path : "profile.txt", "w");
  if (out == nullptr || n == 0) {
    if (out != nullptr) std::fclose(out);
    return;
  }
  // frame 0 is the signal handler, frame 1 the signal trampoline; return addresses point past
  // the call: one byte back names the calling function
  auto pc_at = [](const sample& s, int f) { return f == 2 ? s.pc[f] : static_cast<void*>(static_cast<char*>(s.pc[f]) - 1); };
  std::vector<void*> pcs;
  for (std::size_t i = 0; i < n; ++i)
    for (int f = 2; f < samples[i].depth; ++f) pcs.push_back(pc_at(samples[i], f));
  std::sort(pcs.begin(), pcs.end());
  pcs.erase(std::unique(pcs.begin(), pcs.end()), pcs.end());
  const std::map<void*, std::string> names = resolve(pcs);
  auto named = [&](void* pc) -> const std::string& { return names.at(pc); };
  std::map<std::string, std::size_t> self, incl;
  for (std::size_t i = 0; i < n; ++i) {
    const sample& s = samples[i];
    if (s.depth <= 2) continue;
    ++self[named(pc_at(s, 2))];
    std::vector<std::string> seen;
    for (int f = 2; f < s.depth; ++f) {
      const std::string& nm = named(pc_at(s, f));
      if (std::find(seen.begin(), seen.end(), nm) == seen.end()) seen.push_back(nm);
    }
    for (const auto& nm : seen) ++incl[nm];
  }
  auto print = [&](const char* title, const std::map<std::string, std::size_t>& m, int top) {
    std::vector<std::pair<std::size_t, std::string>> v;
    for (const auto& [k, c] : m) v.emplace_back(c, k);
    std::sort(v.rbegin(), v.rend());
    std::fprintf(out, "== %s (%zu samples)\n", title, n);
    for (int i = 0; i < top && i < static_cast<int>(v.size()); ++i)
      std::fprintf(out, "%6.2f%%  %s\n", 100.0 * double(v[i].first) / double(n), v[i].second.c_str());
  };
  print("self", self, 40);
  print("inclusive", incl, 60);
  std::fclose(out);
}

__attribute__((constructor)) void start() {
  unsetenv("LD_PRELOAD");  // not into the program's children, nor addr2line at exit
  if (const char* d = std::getenv("SAMPLE_DEPTH")) depth = std::clamp(std::atoi(d), 3, max_depth);
  long us = 50;
  if (const char* u = std::getenv("SAMPLE_US")) us = std::max(10L, std::atol(u));
  samples = static_cast<sample*>(std::calloc(max_samples, sizeof(sample)));
  if (samples == nullptr) return;
  void* warm[4];
  (void)backtrace(warm, 4);  // loads the unwinder outside the signal handler
  struct sigaction sa {};
  sa.sa_sigaction = on_signal;
  sa.sa_flags = SA_SIGINFO | SA_RESTART;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGPROF, &sa, nullptr);
  struct sigevent ev {};
  ev.sigev_notify = SIGEV_THREAD_ID;
  ev.sigev_signo = SIGPROF;
  ev._sigev_un._tid = static_cast<pid_t>(syscall(SYS_gettid));
  if (timer_create(CLOCK_MONOTONIC, &ev, &timer) != 0) return;
  struct itimerspec it {};
  it.it_interval.tv_nsec = us * 1000;
  it.it_value.tv_nsec = us * 1000;
  if (timer_settime(timer, 0, &it, nullptr) != 0) return;
  armed = true;
  std::atexit(report);
}

}  // namespace
