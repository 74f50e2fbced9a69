// SPDX-License-Identifier: Apache-2.0
// User kernels and matrix products on host devices as tasks of the one executor (issue #19): the
// shards of several host devices run at once on the host thread pool, as assignments and the
// built-in reductions do. Times, on D host devices (default 4) and on one host device (same total
// size, same run):
//  (1) C = matmul(A, B), N x N float (default 2048), A shard(0), B replicated: one host BLAS call
//      per device;
//  (2) a ReductionKernel (sum of squares) over 2^--log2n doubles (default 25), sharded;
//  (3) an ElementwiseKernel z = x * y + 1 over the same size.
// Prints medians of --reps runs and the D-device speed-up; run it before and after a change with
// scripts/bench_ab.sh (BENCHES=host_tasks). Works only on host devices (TESSERA_BACKEND=host is set).
//
//   bench_host_tasks [--n N] [--log2n K] [--devices D] [--reps R]
#include <tessera/kernel.hpp>  // the umbrella header and the user kernels

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <functional>
#include <string>
#include <vector>

using namespace tessera;

namespace {

double median_ms(int reps, const std::function<void()>& f) {
  f();  // warm-up: compiles the kernels, fills the memory cache
  std::vector<double> t;
  for (int r = 0; r < reps; ++r) {
    const auto t0 = std::chrono::steady_clock::now();
    f();
    synchronize();
    t.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
  }
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

void report(const char* what, double one, double many, int d) {
  std::printf("%-44s 1 device %9.2f ms   %d devices %9.2f ms   speed-up %5.2fx\n", what, one, d, many, one / many);
  std::printf("RESULT %s: %d devices %.2f ms (%.2fx of 1 device)\n", what, d, many, one / many);
}

}  // namespace

int main(int argc, char** argv) {
  setenv("TESSERA_BACKEND", "host", 0);
  index_t n = 2048;
  int log2n = 25, d = 4, reps = 5;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string a = argv[i];
    const long v = std::strtol(argv[i + 1], nullptr, 10);
    if (a == "--n") n = v;
    else if (a == "--log2n") log2n = static_cast<int>(v);
    else if (a == "--devices") d = static_cast<int>(v);
    else if (a == "--reps") reps = static_cast<int>(v);
    else {
      std::fprintf(stderr, "usage: bench_host_tasks [--n N] [--log2n K] [--devices D] [--reps R]\n");
      return 2;
    }
  }
  try {
    const DeviceSet one = host_devices(1), many = host_devices(d);
    std::printf("host devices: %d; host threads: TESSERA_HOST_THREADS=%s\n", d,
                std::getenv("TESSERA_HOST_THREADS") ? std::getenv("TESSERA_HOST_THREADS") : "(cores)");
    {
      auto run = [&](const DeviceSet& ds) {
        auto a = rand<float>({n, n}, shard(0, ds));
        auto b = rand<float>({n, n}, replicate(ds));
        Array<float, 2> c = matmul(a, b);
        return median_ms(reps, [&] { c = matmul(a, b); });
      };
      const std::string what = "(1) matmul " + std::to_string(n) + "^2 float, A shard(0)";
      report(what.c_str(), run(one), run(many), d);
    }
    const index_t len = index_t(1) << log2n;
    {
      ReductionKernel sq("float64 x", "float64 y", "x * x", "a + b", "y = a", "0", "bench_sq");
      auto run = [&](const DeviceSet& ds) {
        auto x = rand<double>({len}, shard(0, ds));
        return median_ms(reps, [&] { (void)sq(x); });
      };
      const std::string what = "(2) ReductionKernel 2^" + std::to_string(log2n) + " double";
      report(what.c_str(), run(one), run(many), d);
    }
    {
      ElementwiseKernel fma1("float64 x, float64 y", "float64 z", "z = x * y + 1", "bench_fma1");
      auto run = [&](const DeviceSet& ds) {
        auto x = rand<double>({len}, shard(0, ds));
        auto y = rand<double>({len}, shard(0, ds));
        auto z = zeros<double>({len}, shard(0, ds));
        return median_ms(reps, [&] { fma1(x, y, z); });
      };
      const std::string what = "(3) ElementwiseKernel 2^" + std::to_string(log2n) + " double";
      report(what.c_str(), run(one), run(many), d);
    }
  } catch (const std::exception& e) {
    std::printf("bench_host_tasks: error: %s\n", e.what());
    return 1;
  }
  return 0;
}
