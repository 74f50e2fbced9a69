// SPDX-License-Identifier: Apache-2.0
// Benchmark support for host devices, and the statistics shared with the CUDA variant
// (bench/support/cuda_support.cuh). Host devices run their work synchronously on the calling
// thread, so the host clock around a call is the time of the work itself.
#pragma once
#include <backend/runtime/runtime.hpp>
#include <tessera/device.hpp>

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstring>
#include <memory>
#include <vector>

namespace tessera::bench {

// Best, median and worst of a set of samples.
struct stats {
  double best = 0, median = 0, worst = 0;
  int samples = 0;
};

inline stats summarize(std::vector<double> v) {
  stats s;
  if (v.empty()) return s;
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  s.best = v.front();
  s.worst = v.back();
  s.median = n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
  s.samples = static_cast<int>(n);
  return s;
}

// The default `between` of the timing loops: nothing to do between samples.
struct no_op {
  void operator()() const {}
};

// Seconds on the host's monotonic clock.
inline double host_seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

namespace host {

// Milliseconds of `work()` per call: `warmup` untimed calls, then `reps` timed ones. The
// synchronize() keeps the timing honest should `devs` ever hold queued work. `between` runs
// after every call, warm-up ones included, outside the timing.
template <class F, class B = no_op>
std::vector<double> time_ms(const DeviceSet& devs, int warmup, int reps, F&& work, B&& between = B{}) {
  for (int i = 0; i < warmup; ++i) {
    work();
    between();
  }
  for (auto d : devs) synchronize(d);
  std::vector<double> ms;
  ms.reserve(static_cast<std::size_t>(reps));
  for (int i = 0; i < reps; ++i) {
    const double t0 = host_seconds();
    work();
    for (auto d : devs) synchronize(d);
    ms.push_back((host_seconds() - t0) * 1e3);
    between();
  }
  return ms;
}

// The baseline of host devices: std::memcpy of `bytes` between two host buffers, in ms per copy
// (each sample times `batch` copies). Both buffers are written first, so that page faults stay
// out of the timing. Throws out_of_memory (through the runtime's guard) when 2 * bytes exceed
// the free memory.
inline std::vector<double> memcpy_ms(Device d, std::size_t bytes, int warmup, int reps, int batch) {
  detail::rt::check_free(d.id(), 2 * bytes);
  std::unique_ptr<char[]> src(new char[bytes ? bytes : 1]), dst(new char[bytes ? bytes : 1]);
  std::memset(src.get(), 1, bytes);
  std::memset(dst.get(), 0, bytes);
  auto ms = time_ms(DeviceSet{d}, warmup, reps, [&] {
    for (int k = 0; k < batch; ++k) std::memcpy(dst.get(), src.get(), bytes);
  });
  volatile char sink = dst[bytes ? bytes - 1 : 0];  // the copies are observable
  (void)sink;
  for (auto& m : ms) m /= batch;
  return ms;
}

namespace detail_ {
inline void empty_function() {}
}  // namespace detail_

// The host analogue of a bare kernel launch: microseconds per call of an empty function
// through a pointer the compiler cannot see through.
inline double empty_call_us(int n) {
  void (*volatile f)() = &detail_::empty_function;
  for (int i = 0; i < 100; ++i) f();
  const double t0 = host_seconds();
  for (int i = 0; i < n; ++i) f();
  return (host_seconds() - t0) * 1e6 / (n > 0 ? n : 1);
}

}  // namespace host
}  // namespace tessera::bench
