// SPDX-License-Identifier: Apache-2.0
// Host devices against plain loops measured in the same run (issue "What notebooks use", item 7):
//  (1) c = a + b and (2) c = sin(a) * b + 2 * a on one host device, against the same loop written
//      by hand over std::vector (target: Tessera within 1.1x of the loop's time);
//  (3) s = sum(a), against a hand-written loop with one accumulator and with eight (NumPy's
//      pairwise sum keeps eight), reported in ms; compare with NumPy's a.sum() on the same machine
//      (target: within 1.5x of NumPy; NumPy is not run by this program: quote its figure, e.g.
//      python3 -c "import numpy as np,timeit; a=np.random.rand(1<<25).astype(np.float32);
//      print(timeit.timeit(a.sum, number=20)/20*1e3, 'ms')").
// Best and median of --reps runs of each, after one warm-up; 2^--log2n float (default 25).
//
//   bench_host [--log2n K] [--reps R] [--devices D]
#include <tessera/tessera.hpp>

#include <bench/support/program.hpp>

#include <cmath>
#include <cstdio>
#include <exception>
#include <optional>
#include <string>
#include <vector>

using namespace tessera;
namespace tb = tessera::bench;

namespace {

struct Options {
  int log2n = 25;
  int reps = 7;
  int devices = 1;
};

void usage(std::FILE* f) {
  std::fprintf(f,
               "usage: bench_host [--log2n K] [--reps R] [--devices D]\n"
               "  --log2n K    elements = 2^K (default 25)\n"
               "  --reps R     timed runs of each measurement (default 7)\n"
               "  --devices D  host devices the arrays are sharded over (default 1)\n");
}

template <class F>
tb::stats time_ms(int reps, F&& f) {
  f();
  std::vector<double> ms;
  for (int r = 0; r < reps; ++r) {
    const double t0 = tb::host_seconds();
    f();
    ms.push_back((tb::host_seconds() - t0) * 1e3);
  }
  return tb::summarize(std::move(ms));
}

// The hand-written loops: noinline so that the compiler cannot fold repeated runs.
[[gnu::noinline]] void plain_add(const float* a, const float* b, float* c, index_t n) {
  for (index_t i = 0; i < n; ++i) c[i] = a[i] + b[i];
}
[[gnu::noinline]] void plain_sin(const float* a, const float* b, float* c, index_t n) {
  for (index_t i = 0; i < n; ++i) c[i] = ::sinf(a[i]) * b[i] + 2 * a[i];
}
[[gnu::noinline]] double plain_sum1(const float* a, index_t n) {
  double s = 0;
  for (index_t i = 0; i < n; ++i) s += a[i];
  return s;
}
[[gnu::noinline]] double plain_sum8(const float* a, index_t n) {
  double l[8] = {};
  index_t i = 0;
  for (; i + 8 <= n; i += 8)
    for (int j = 0; j < 8; ++j) l[j] += a[i + j];
  double s = 0;
  for (; i < n; ++i) s += a[i];
  for (double v : l) s += v;
  return s;
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  const bool ok = tb::parse_options("bench_host", argc, argv, usage,
                                    {{"--log2n", 4, 31, &o.log2n}, {"--reps", 1, 100000, &o.reps}, {"--devices", 1, 64, &o.devices}},
                                    [](const std::string& arg, const std::string&) {
                                      std::fprintf(stderr, "bench_host: unknown option '%s'\n", arg.c_str());
                                      return false;
                                    });
  if (!ok) {
    usage(stderr);
    return 2;
  }
  try {
    const index_t n = index_t(1) << o.log2n;
    const DeviceSet ds = host_devices(o.devices);
    const Placement p = o.devices == 1 ? on(ds[0]) : shard(0, ds);
    std::printf("host devices: %d, elements: 2^%d float, medians of %d (best in parentheses)\n", o.devices, o.log2n,
                o.reps);
    auto a = rand<float>({n}, p), b = rand<float>({n}, p);
    auto c = zeros<float>({n}, p);
    const std::vector<float> av = to_host(a), bv = to_host(b);
    std::vector<float> cv(static_cast<std::size_t>(n));
    const auto t_add = time_ms(o.reps, [&] { c = a + b; });
    const auto p_add = time_ms(o.reps, [&] { plain_add(av.data(), bv.data(), cv.data(), n); });
    const auto t_sin = time_ms(o.reps, [&] { c = sin(a) * b + 2 * a; });
    const auto p_sin = time_ms(o.reps, [&] { plain_sin(av.data(), bv.data(), cv.data(), n); });
    float s = 0;
    double ps1 = 0, ps8 = 0;
    const auto t_sum = time_ms(o.reps, [&] { s = sum(a); });
    const auto p_sum1 = time_ms(o.reps, [&] { ps1 = plain_sum1(av.data(), n); });
    const auto p_sum8 = time_ms(o.reps, [&] { ps8 = plain_sum8(av.data(), n); });
    auto line = [](const char* what, const tb::stats& t, const tb::stats& base, const char* base_name) {
      std::printf("  %-28s %8.2f ms (%.2f)   %-28s %8.2f ms (%.2f)   ratio %.3fx\n", what, t.median, t.best, base_name,
                  base.median, base.best, t.median / base.median);
    };
    line("Tessera c = a + b", t_add, p_add, "plain loop");
    line("Tessera sin(a) * b + 2 * a", t_sin, p_sin, "plain loop");
    line("Tessera sum(a)", t_sum, p_sum1, "plain loop, 1 accumulator");
    line("Tessera sum(a)", t_sum, p_sum8, "plain loop, 8 accumulators");
    const bool right = std::fabs(double(s) - ps8) <= 1e-4 * std::fabs(ps8) && std::fabs(ps1 - ps8) <= 1e-6 * std::fabs(ps8);
    std::printf("\n== summary (host) ==\n");
    std::printf("  elementwise a + b / plain loop         %.3fx   target <= 1.10x   %s\n", t_add.median / p_add.median,
                t_add.median <= 1.1 * p_add.median ? "PASS" : "MISS");
    std::printf("  elementwise sin expr / plain loop      %.3fx   target <= 1.10x   %s\n", t_sin.median / p_sin.median,
                t_sin.median <= 1.1 * p_sin.median ? "PASS" : "MISS");
    std::printf("  sum(a): %.2f ms; compare with NumPy's a.sum() on this machine (target <= 1.5x of it)\n",
                t_sum.median);
    if (!right) std::printf("WRONG RESULT: sum %g, plain loops %g / %g\n", double(s), ps1, ps8);
    return right ? 0 : 1;
  } catch (const std::exception& e) {
    std::printf("bench_host: error: %s\n", e.what());
    return 1;
  }
}
