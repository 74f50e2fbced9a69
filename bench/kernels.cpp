// SPDX-License-Identifier: Apache-2.0
// User kernels (ElementwiseKernel, compiled at run time) against the fused DSL doing the same
// work, measured in the same run:
//
//  (1) first-call latency of an ElementwiseKernel with a cold kernel cache (NVRTC on GPUs, the
//      system C++ compiler on host devices; TESSERA_KERNEL_CACHE is pointed at a fresh temporary
//      directory, removed at exit), then the first call of a new kernel object with the same
//      source once the memory cache is emptied (a disk-cache hit), and without emptying it (a
//      memory-cache hit): informational;
//  (2) host microseconds per shard launch of a tiny ElementwiseKernel (z = x * y + 1 on 1024 float
//      per device), --launches calls queued without synchronizing, against the fused DSL
//      c = a * b + 1 measured the same way, alternately, median of 5 rounds (target <= 1.2x);
//  (3) bandwidth of the ElementwiseKernel z = sin(x) * y + 2 * x at 2^28 float per GPU over every
//      GPU against the fused DSL c = sin(a) * b + 2 * a (target >= 0.98x); the better median of
//      two alternating rounds each.
//
// Timing: CUDA events on Tessera's streams behind a spin kernel, --batch calls per sample,
// medians of --reps samples (bench/support). On host devices the same program runs 2^20 float
// per device and prints host figures, labelled as such. The summary prints PASS/MISS per target
// and never fails on a MISS; the exit status is non-zero only for an error or a wrong result.
//
//   bench_kernels [--log2n K] [--reps R] [--warmup W] [--batch B] [--launches N] [--spin-us S]
#include <tessera/kernel.hpp>  // the umbrella header and the user kernels

#include <bench/support/program.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

using namespace tessera;
namespace tb = tessera::bench;
namespace rtc = tessera::detail::rtc;
using tb::gbps;
using tb::pow2;

namespace {

struct Options {
  int log2n = -1;  // elements per device = 2^log2n; -1: 28 on GPUs, 20 on host devices
  int reps = 20;
  int warmup = 3;
  int batch = 5;
  int launches = 10000;
  double spin_us = 2000;
};

constexpr index_t tiny_n = 1024;  // elements per device of the launch-overhead test
constexpr int launch_rounds = 5;  // alternating DSL / kernel rounds of the launch-overhead test

void usage(std::FILE* f) {
  std::fprintf(f,
               "usage: bench_kernels [--log2n K] [--reps R] [--warmup W] [--batch B] [--launches N] [--spin-us S]\n"
               "  --log2n K     elements per device of the bandwidth test = 2^K (default 28 on GPUs, 20 on host "
               "devices)\n"
               "  --reps R      timed samples per measurement (default 20)\n"
               "  --warmup W    untimed samples before timing (default 3)\n"
               "  --batch B     calls queued back to back in each sample, time divided by B (default 5)\n"
               "  --launches N  calls queued per round of the launch-overhead test (default 10000)\n"
               "  --spin-us S   GPU spin before each timed sample (default 2000)\n");
}

std::optional<Options> parse(int argc, char** argv) {
  Options o;
  const bool ok = tb::parse_options("bench_kernels", argc, argv, usage,
                                    {{"--log2n", 4, 34, &o.log2n},
                                     {"--reps", 1, 100000, &o.reps},
                                     {"--warmup", 0, 100000, &o.warmup},
                                     {"--batch", 1, 1000, &o.batch},
                                     {"--launches", 1, 100000000, &o.launches},
                                     {"--spin-us", 0, 1000000, &o.spin_us}});
  if (!ok) return std::nullopt;
  return o;
}

// A fresh kernel cache directory for this run (so that the first call compiles), removed at exit.
struct FreshCache {
  std::string path;
  FreshCache() {
    char tmpl[] = "/tmp/tessera-bench-kernels-XXXXXX";
    if (!mkdtemp(tmpl)) throw backend_error("bench_kernels: could not create a temporary kernel cache directory");
    path = tmpl;
    setenv("TESSERA_KERNEL_CACHE", path.c_str(), 1);
  }
  ~FreshCache() {
    std::error_code ec;
    std::filesystem::remove_all(path, ec);
  }
};

// (1) The first call of `work` (a kernel's first use: compile or cache look-up, then the launch),
// until every device is idle, and what the caches did meanwhile.
struct FirstCall {
  double ms = 0;
  rtc::cache_stats delta;
};
template <class F>
FirstCall first_call(F&& work) {
  synchronize();
  const rtc::cache_stats before = rtc::stats();
  const double t0 = tb::host_seconds();
  work();
  synchronize();
  FirstCall r;
  r.ms = (tb::host_seconds() - t0) * 1e3;
  const rtc::cache_stats after = rtc::stats();
  r.delta = {after.compiled - before.compiled, after.disk_hits - before.disk_hits,
             after.memory_hits - before.memory_hits};
  return r;
}

void print_first_call(const char* what, const FirstCall& f) {
  std::printf("  %-58s %10.2f ms   (compiled %+d, disk hits %+d, memory hits %+d)\n", what, f.ms, f.delta.compiled,
              f.delta.disk_hits, f.delta.memory_hits);
}

// (2) Host microseconds per shard launch of `work` (one call over `devs`): n calls queued back
// to back, no synchronization inside the loop; the clock stops before the final synchronize.
template <class F>
double launch_us(const DeviceSet& devs, int n, F&& work) {
  for (int i = 0; i < 200; ++i) work();
  synchronize();
  const double t0 = tb::host_seconds();
  for (int i = 0; i < n; ++i) work();
  const double t1 = tb::host_seconds();
  synchronize();
  return (t1 - t0) * 1e6 / (double(n) * double(devs.size()));
}

double median(std::vector<double> v) { return tb::summarize(std::move(v)).median; }

// The largest difference between got and want, relative to max(1, |want|).
double max_rel_diff(const std::vector<float>& got, const std::vector<double>& want) {
  double worst = got.size() == want.size() ? 0 : INFINITY;
  for (std::size_t i = 0; i < got.size() && i < want.size(); ++i) {
    const double d = std::fabs(double(got[i]) - want[i]) / std::max(1.0, std::fabs(want[i]));
    worst = std::isnan(d) ? INFINITY : std::max(worst, d);
  }
  return worst;
}

void row(const char* what, const std::string& where, const tb::stats& s, double bytes) {
  std::printf("  %-44s %-12s", what, where.c_str());
  tb::print_stats_columns(s, bytes);
  std::printf("\n");
}

}  // namespace

int main(int argc, char** argv) {
  const auto parsed = parse(argc, argv);
  if (!parsed) {
    usage(stderr);
    return 2;
  }
  Options o = *parsed;
  int errors = 0;
  try {
    const FreshCache cache;  // before any kernel is compiled
    const tb::platform p = tb::choose_platform();
    const bool gpu = p.gpu;
    const int G = p.size();
    if (o.log2n < 0) o.log2n = gpu ? 28 : 20;
    const index_t n = index_t(1) << o.log2n;
    const char* kind = gpu ? "GPU" : "host device";
    tb::runner run{gpu, o.spin_us, o.warmup, o.reps};

    std::printf("Tessera user-kernel benchmark: ElementwiseKernel against the fused DSL\n");
    tb::print_backend(p, "", "");
    const int nv = rtc::nvrtc_version();
    std::printf("\ncompiler: %s\nkernel cache: %s (fresh, removed at exit)\ntiming: %s\n",
                gpu ? ("NVRTC " + std::to_string(nv / 1000) + "." + std::to_string(nv % 1000 / 10)).c_str()
                    : "the system C++ compiler ($TESSERA_CXX, else $CXX, else c++)",
                rtc::cache_dir().c_str(),
                tb::timing_text(gpu, static_cast<long long>(o.spin_us), "host clock (host devices run synchronously)")
                    .c_str());

    const auto tiny = [&](const DeviceSet& devs) {
      return devs.size() == 1 ? on(devs[0]) : shard(0, devs);
    };
    const ElementwiseKernel fma_kernel("float32 x, float32 y", "float32 z", "z = x * y + 1", "bench_fma");
    const ElementwiseKernel mix_kernel("float32 x, float32 y", "float32 z", "z = sin(x) * y + 2 * x", "bench_mix");

    // (1) compile latency, cold and cached.
    std::printf("\n(1) first call of an ElementwiseKernel on %lld float per %s over %s, until the devices are idle "
                "(informational)\n",
                static_cast<long long>(tiny_n), kind, p.all_label.c_str());
    std::optional<double> cold_ms, disk_ms, memory_ms;
    try {
      const index_t m = tiny_n * G;
      auto a = rand<float>({m}, tiny(p.all));
      auto b = rand<float>({m}, tiny(p.all));
      auto c = zeros<float>({m}, tiny(p.all));
      const FirstCall cold = first_call([&] { fma_kernel(a, b, c); });
      print_first_call("cold cache: z = x * y + 1 (the process's first compile)", cold);
      const FirstCall second = first_call([&] { mix_kernel(a, b, c); });
      print_first_call("cold cache: z = sin(x) * y + 2 * x (a second kernel)", second);
      rtc::forget_memory_cache();
      const FirstCall disk = first_call([&] {
        ElementwiseKernel again("float32 x, float32 y", "float32 z", "z = x * y + 1", "bench_fma");
        again(a, b, c);
      });
      print_first_call("disk-cache hit: a new kernel object, same source", disk);
      const FirstCall memory = first_call([&] {
        ElementwiseKernel again("float32 x, float32 y", "float32 z", "z = x * y + 1", "bench_fma");
        again(a, b, c);
      });
      print_first_call("memory-cache hit: a new kernel object, same source", memory);
      if (cold.delta.compiled < 1 || disk.delta.disk_hits < 1 || disk.delta.compiled != 0 ||
          memory.delta.compiled != 0 || memory.delta.disk_hits != 0)
        std::printf("  note: the cache counts above are not the expected ones (compiled, then a disk hit, then "
                    "memory hits only)\n");
      cold_ms = cold.ms, disk_ms = disk.ms, memory_ms = memory.ms;
    } catch (const std::exception& e) {
      ++errors;
      std::printf("  ERROR: %s\n", e.what());
    }

    // (2) host launch overhead.
    std::printf("\n(2) host us per shard launch, %lld float per %s, %d calls queued without synchronizing, "
                "median of %d alternating rounds\n",
                static_cast<long long>(tiny_n), kind, o.launches, launch_rounds);
    std::optional<double> launch_ratio_one, launch_ratio_all;
    for (int variant = 0; variant < (G > 1 ? 2 : 1); ++variant) {
      const DeviceSet& devs = variant == 0 ? p.one : p.all;
      const std::string& where = variant == 0 ? p.one_label : p.all_label;
      try {
        const index_t m = tiny_n * static_cast<index_t>(devs.size());
        auto a = rand<float>({m}, tiny(devs));
        auto b = rand<float>({m}, tiny(devs));
        auto c = zeros<float>({m}, tiny(devs));
        auto z = zeros<float>({m}, tiny(devs));
        std::vector<double> dsl, kernel;
        for (int round = 0; round < launch_rounds; ++round) {
          dsl.push_back(launch_us(devs, o.launches, [&] { c = a * b + 1; }));
          kernel.push_back(launch_us(devs, o.launches, [&] { fma_kernel(a, b, z); }));
        }
        const double d = median(dsl), k = median(kernel);
        const double bare = run.bare_launch_us(devs, o.launches);
        const auto ah = to_host(a), bh = to_host(b);
        std::vector<double> want(ah.size());
        for (std::size_t i = 0; i < ah.size(); ++i) want[i] = double(ah[i]) * double(bh[i]) + 1.0;
        const double diff = std::max(max_rel_diff(to_host(c), want), max_rel_diff(to_host(z), want));
        if (!(diff <= 1e-6)) {
          ++errors;
          std::printf("  WRONG RESULT on %s: c = a * b + 1 or the kernel differs from the host by %.3g (relative)\n",
                      where.c_str(), diff);
          continue;
        }
        std::printf("  %-12s fused DSL c = a * b + 1 %7.3f us; ElementwiseKernel %7.3f us; ratio %.3fx (bare %s "
                    "%.3f us)\n",
                    where.c_str(), d, k, d > 0 ? k / d : 0.0, gpu ? "launch" : "call", bare);
        (variant == 0 ? launch_ratio_one : launch_ratio_all) = d > 0 ? k / d : 0.0;
      } catch (const std::exception& e) {
        ++errors;
        std::printf("  ERROR on %s: %s\n", where.c_str(), e.what());
      }
    }

    // (3) bandwidth over every device.
    const index_t total = n * G;
    const double bytes = 3.0 * 4.0 * double(total);
    std::printf("\n(3) z = sin(x) * y + 2 * x, %s float per %s (%.3f GiB per array per device), sharded over %s; "
                "bandwidth counts 3 arrays x 4 bytes x n; better median of 2 alternating rounds\n",
                pow2(o.log2n).c_str(), kind, double(n) * 4.0 / double(1 << 30), p.all_label.c_str());
    std::printf("  %-44s %-12s", "", "");
    tb::print_stats_headings();
    std::printf("\n");
    std::optional<double> bw_ratio;
    try {
      const Placement place = G == 1 ? on(p.all[0]) : shard(0, p.all);
      auto a = rand<float>({total}, place);
      auto b = rand<float>({total}, place);
      auto c = zeros<float>({total}, place);
      auto z = zeros<float>({total}, place);
      std::optional<tb::stats> dsl, kernel;
      for (int round = 0; round < 2; ++round) {
        const tb::stats d = run.time(p.all, o.batch, [&] { c = sin(a) * b + 2 * a; });
        const tb::stats k = run.time(p.all, o.batch, [&] { mix_kernel(a, b, z); });
        if (!dsl || d.median < dsl->median) dsl = d;
        if (!kernel || k.median < kernel->median) kernel = k;
      }
      row("fused DSL  c = sin(a) * b + 2 * a", p.all_label, *dsl, bytes);
      row("ElementwiseKernel  z = sin(x) * y + 2 * x", p.all_label, *kernel, bytes);
      // Spot checks: the ends and the middle of every shard.
      double worst = 0;
      for (index_t g = 0; g < G; ++g) {
        const index_t lo = g * n;
        for (index_t i : {lo, lo + 1, lo + n / 2, lo + n - 2, lo + n - 1}) {
          const double x = a.at(i), y = b.at(i), want = std::sin(x) * y + 2.0 * x;
          for (float got : {c.at(i), z.at(i)})
            worst = std::max(worst, std::fabs(double(got) - want) / std::max(1.0, std::fabs(want)));
        }
      }
      if (!(worst <= 1e-5)) {
        ++errors;
        std::printf("  WRONG RESULT: sin(x) * y + 2 * x differs from the host by %.3g (relative)\n", worst);
      } else {
        bw_ratio = dsl->median / kernel->median;
        std::printf("  ratio ElementwiseKernel / fused DSL bandwidth: %.3fx (medians), %.3fx (best)\n", *bw_ratio,
                    dsl->best / kernel->best);
      }
    } catch (const std::exception& e) {
      ++errors;
      std::printf("  ERROR: %s\n", e.what());
    }
    tb::print_late_warning(run.late, static_cast<long long>(o.spin_us));

    std::vector<tb::summary_row> rows;
    rows.push_back({"(2) host us per launch, kernel / DSL, " + p.one_label, launch_ratio_one, 1.2, false,
                    "<= 1.20x", ""});
    if (G > 1)
      rows.push_back({"(2) host us per shard launch, kernel / DSL, " + p.all_label, launch_ratio_all, 1.2,
                      false, "<= 1.20x", ""});
    rows.push_back({"(3) sin(x) * y + 2 * x, kernel / DSL GB/s, " + p.all_label, bw_ratio, 0.98, true, ">= 0.98x",
                    ""});
    std::printf("\n== summary: medians of %d, %s float per %s ==\n", o.reps, pow2(o.log2n).c_str(), kind);
    tb::print_summary(rows, gpu, 56, 10, 18);
    if (cold_ms)
      std::printf("  (1) first call, informational: cold cache %.1f ms, disk-cache hit %.2f ms, memory-cache hit "
                  "%.3f ms\n",
                  *cold_ms, *disk_ms, *memory_ms);
    if (errors) std::printf("\n%d error(s) above: the affected rows are not measured\n", errors);
  } catch (const std::exception& e) {
    std::printf("bench_kernels: error: %s\n", e.what());
    return 1;
  }
  return errors ? 1 : 0;
}
