// SPDX-License-Identifier: Apache-2.0
// Fused elementwise throughput and host launch overhead, against baselines measured in the
// same run (DESIGN.md, "Targets"):
//
//  (a) cudaMemcpy device to device on one GPU (bytes read + written): the bandwidth baseline;
//  (b) c = a + b and (c) c = sin(a) * b + 2 * a, 2^28 float per device, on one GPU and sharded
//      over every GPU (2^28 per device): GB/s (3 arrays x 4 bytes x n), the ratio to memcpy and
//      the multi-GPU scaling (all-GPU throughput / one-GPU throughput);
//  (d) host time per launch of a tiny fused expression (c = a * b + 1 on 1024 floats), queued
//      N times without synchronizing, against a bare empty-kernel launch measured the same way.
//
// Timing: CUDA events on Tessera's per-device streams, each sample queued behind a short spin
// kernel so that it holds GPU time only (bench/support/cuda_support.cuh); best and median of
// --reps samples after --warmup untimed runs. The summary prints PASS/MISS per target and never
// fails on a MISS; the exit status is non-zero only for an error or a wrong result.
//
// Without a GPU (or with TESSERA_BACKEND=host) the same program runs on host devices with 2^20
// elements per device and prints host figures, labelled as such, against std::memcpy.
//
//   bench_elementwise [--log2n K] [--reps R] [--warmup W] [--launches N] [--tiny-n T]
//                     [--memory unified|device|both] [--spin-us S]
#include <tessera/tessera.hpp>

#include <bench/support/program.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <exception>
#include <iostream>
#include <optional>
#include <string>
#include <vector>

using namespace tessera;
namespace tb = tessera::bench;
using tb::gbps;
using tb::pow2;

namespace {

// -- options ----------------------------------------------------------------------------------

struct Options {
  int log2n = -1;  // elements per device = 2^log2n; -1: 28 on GPUs, 20 on host devices
  int reps = 20;
  int warmup = 3;
  int batch = 5;  // operations queued back to back per timed sample
  int launches = 10000;
  index_t tiny_n = 1024;
  std::string memory;  // unified | device | both; empty: both on GPUs, unified on host devices
  double spin_us = 2000;
};

void usage(std::FILE* f) {
  std::fprintf(f,
               "usage: bench_elementwise [--log2n K] [--reps R] [--warmup W] [--batch B] [--launches N]\n"
               "                         [--tiny-n T] [--memory unified|device|both] [--spin-us S]\n"
               "  --log2n K     elements per device = 2^K (default 28 on GPUs, 20 on host devices; 4..34)\n"
               "  --reps R      timed samples per measurement (default 20)\n"
               "  --warmup W    untimed samples before timing (default 3)\n"
               "  --batch B     operations queued back to back in each sample, time divided by B (default 5)\n"
               "  --launches N  assignments queued for the launch-overhead test (default 10000)\n"
               "  --tiny-n T    elements per device of the launch-overhead test (default 1024)\n"
               "  --memory M    memory kind of the bandwidth arrays (default: both on GPUs, unified on host)\n"
               "  --spin-us S   GPU spin before each timed sample, so that host launch latency stays out of\n"
               "                the GPU timing (default 2000)\n");
}

std::optional<Options> parse(int argc, char** argv) {
  Options o;
  const bool ok = tb::parse_options(
      "bench_elementwise", argc, argv, usage,
      {{"--log2n", 4, 34, &o.log2n},
       {"--reps", 1, 100000, &o.reps},
       {"--warmup", 0, 100000, &o.warmup},
       {"--batch", 1, 1000, &o.batch},
       {"--launches", 1, 100000000, &o.launches},
       {"--tiny-n", 1, 1 << 24, &o.tiny_n},
       {"--spin-us", 0, 1000000, &o.spin_us}},
      [&](const std::string& arg, const std::string& value) {
        if (arg != "--memory") {
          std::fprintf(stderr, "bench_elementwise: unknown option '%s'\n", arg.c_str());
          return false;
        }
        if (value != "unified" && value != "device" && value != "both") {
          std::fprintf(stderr, "bench_elementwise: --memory expects unified, device or both, got '%s'\n",
                       value.c_str());
          return false;
        }
        o.memory = value;
        return true;
      });
  if (!ok) return std::nullopt;
  return o;
}

// -- host launch overhead -----------------------------------------------------------------------

// Host microseconds per shard launch of `work` (one assignment over `devs`): n assignments
// queued back to back, no synchronization inside the loop; the clock stops before the final
// synchronize. Also returns, through `with_sync_us`, the time per launch including it.
template <class F>
double launch_us(const DeviceSet& devs, int n, F&& work, double& with_sync_us) {
  for (int i = 0; i < 200; ++i) work();
  synchronize();
  const double t0 = tb::host_seconds();
  for (int i = 0; i < n; ++i) work();
  const double t1 = tb::host_seconds();
  synchronize();
  const double t2 = tb::host_seconds();
  const double launches = double(n) * double(devs.size());
  with_sync_us = (t2 - t0) * 1e6 / launches;
  return (t1 - t0) * 1e6 / launches;
}

// -- measurements -------------------------------------------------------------------------------

const char* memory_name(memory m) { return m == memory::unified ? "unified" : "device"; }

struct Elementwise {
  bool valid = false;       // measured (false: skipped or failed, see `error`)
  bool correct = true;      // the spot checks agreed with the host
  tb::stats add, sinx;      // ms per assignment
  double bytes = 0;         // bytes per assignment (3 arrays x 4 bytes x total elements)
  std::string error;
};

// c1 = a + b and c2 = sin(a) * b + 2 * a over `devs` with n elements per device. The arrays are
// on(devs[0]) for one device and shard(0, devs) otherwise. Results are spot-checked after the
// timings (host reads stay out of the timed region).
Elementwise measure_elementwise(tb::runner& run, const DeviceSet& devs, index_t n_per_device, memory mem,
                                const Options& o) {
  Elementwise r;
  const auto G = static_cast<index_t>(devs.size());
  const index_t total = n_per_device * G;
  const Placement place = G == 1 ? on(devs[0]) : shard(0, devs);
  r.bytes = 3.0 * 4.0 * double(total);
  try {
    auto a = rand<float>({total}, place, mem);
    auto b = rand<float>({total}, place, mem);
    auto c1 = zeros<float>({total}, place, mem);
    auto c2 = zeros<float>({total}, place, mem);
    r.add = run.time(devs, o.batch, [&] { c1 = a + b; });
    r.sinx = run.time(devs, o.batch, [&] { c2 = sin(a) * b + 2 * a; });
    synchronize();
    // Spot checks: the ends and the middle of every shard.
    std::vector<index_t> idx;
    for (index_t g = 0; g < G; ++g) {
      const index_t lo = g * n_per_device, hi = lo + n_per_device;
      for (index_t i : {lo, lo + 1, lo + n_per_device / 2, hi - 2, hi - 1})
        if (i >= lo && i < hi) idx.push_back(i);
    }
    for (index_t i : idx) {
      const float x = a.at(i), y = b.at(i);
      const float want1 = x + y;
      const double want2 = std::sin(double(x)) * double(y) + 2.0 * double(x);
      const float got1 = c1.at(i), got2 = c2.at(i);
      if (got1 != want1 || !(std::fabs(double(got2) - want2) <= 1e-5 * std::max(1.0, std::fabs(want2)))) {
        if (r.correct)
          std::printf("  WRONG RESULT at index %lld: a + b gave %.9g (want %.9g), sin(a) * b + 2 * a gave %.9g "
                      "(want %.9g)\n",
                      static_cast<long long>(i), double(got1), double(want1), double(got2), want2);
        r.correct = false;
      }
    }
    r.valid = true;
  } catch (const std::exception& e) {
    r.error = e.what();
  }
  return r;
}

void print_stats_row(const char* what, const char* where, const char* mem, const tb::stats& s, double bytes,
                     const tb::stats* base, double base_bytes) {
  std::printf("  %-30s %-14s %-8s", what, where, mem);
  tb::print_stats_columns(s, bytes);
  if (base) {
    const double bw_med = gbps(bytes, s.median), bw_best = gbps(bytes, s.best);
    const double b_med = gbps(base_bytes, base->median), b_best = gbps(base_bytes, base->best);
    std::printf("  %6.3fx  %6.3fx", b_med > 0 ? bw_med / b_med : 0.0, b_best > 0 ? bw_best / b_best : 0.0);
  }
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
    const tb::platform p = tb::choose_platform();
    const bool gpu = p.gpu;
    const DeviceSet &all = p.all, &one = p.one;
    const std::string &one_label = p.one_label, &all_label = p.all_label;
    const int G = p.size();
    tb::runner run{gpu, o.spin_us, o.warmup, o.reps, 0};
    if (o.log2n < 0) o.log2n = gpu ? 28 : 20;
    if (o.memory.empty()) o.memory = gpu ? "both" : "unified";
    const index_t n = index_t(1) << o.log2n;
    const char* kind = gpu ? "GPU" : "host device";

    std::printf("Tessera elementwise benchmark\n");
    tb::print_backend(p, "", "");
    std::printf("\n\n");
    std::fflush(stdout);
    print_topology(std::cout);
    std::cout.flush();
    std::printf("\nsizes: %s = %lld float per %s (%.3f GiB per array per device); %d samples (median and best) of "
                "%d back-to-back operations each, after %d warm-up samples; %s\n",
                pow2(o.log2n).c_str(), static_cast<long long>(n), kind, double(n) * 4.0 / double(1 << 30), o.reps,
                o.batch, o.warmup,
                tb::timing_text(gpu, int(o.spin_us), "host clock (host devices run synchronously)").c_str());

    std::vector<memory> mems;
    if (o.memory == "unified" || o.memory == "both") mems.push_back(memory::unified);
    if (o.memory == "device" || o.memory == "both") mems.push_back(memory::device);

    // (a) the memcpy baseline on one device.
    const std::size_t copy_bytes = static_cast<std::size_t>(n) * sizeof(float);
    std::optional<tb::stats> memcpy_stats;
    std::printf("\n(a) baseline: %s of %s float (%.3f GiB) on %s; bandwidth counts bytes read + written\n",
                gpu ? "cudaMemcpyAsync device to device (cudaMalloc buffers)" : "std::memcpy host to host",
                pow2(o.log2n).c_str(), double(copy_bytes) / double(1 << 30), all[0].name().c_str());
    std::printf("  %-30s %-14s %-8s", "operation", "devices", "memory");
    tb::print_stats_headings();
    std::printf("\n");
    try {
      memcpy_stats = run.memcpy(all[0], copy_bytes, o.batch);
      print_stats_row(gpu ? "cudaMemcpy D2D" : "std::memcpy", one_label.c_str(), gpu ? "device" : "host",
                      *memcpy_stats, 2.0 * double(copy_bytes), nullptr, 0);
    } catch (const std::exception& e) {
      ++errors;
      std::printf("  ERROR: the memcpy baseline failed: %s\n", e.what());
    }
    const tb::stats* base = memcpy_stats ? &*memcpy_stats : nullptr;
    const double base_bytes = 2.0 * double(copy_bytes);

    // (b), (c) fused elementwise on one device and on all devices.
    std::printf("\n(b) c = a + b  and  (c) c = sin(a) * b + 2 * a, %s float per %s; bandwidth counts 3 arrays x 4 "
                "bytes x n;\n    'x memcpy' compares bandwidth (for all devices: per-device bandwidth) with (a)\n",
                pow2(o.log2n).c_str(), kind);
    std::printf("  %-30s %-14s %-8s", "expression", "devices", "memory");
    tb::print_stats_headings();
    std::printf("  %7s  %7s\n", "med", "best");
    struct Result {
      memory mem;
      Elementwise one, all;
    };
    std::vector<Result> results;
    for (memory m : mems) {
      Result res{m, {}, {}};
      res.one = measure_elementwise(run, one, n, m, o);
      if (G > 1) res.all = measure_elementwise(run, all, n, m, o);
      for (const Elementwise* e : {&res.one, &res.all}) {
        if (e == &res.all && G == 1) continue;
        const std::string& where = e == &res.one ? one_label : all_label;
        const int devs_used = e == &res.one ? 1 : G;
        if (!e->valid) {
          ++errors;
          std::printf("  ERROR on %s, %s memory: %s\n", where.c_str(), memory_name(m), e->error.c_str());
          continue;
        }
        if (!e->correct) ++errors;
        // Per-device bandwidth against the one-device memcpy baseline.
        print_stats_row("c = a + b", where.c_str(), memory_name(m), e->add, e->bytes / devs_used, base, base_bytes);
        print_stats_row("c = sin(a) * b + 2 * a", where.c_str(), memory_name(m), e->sinx, e->bytes / devs_used, base,
                        base_bytes);
        if (devs_used > 1) {
          std::printf("  %-30s %-14s %-8s total: c = a + b %.1f GB/s (median), sin expression %.1f GB/s\n", "",
                      where.c_str(), memory_name(m), gbps(e->bytes, e->add.median), gbps(e->bytes, e->sinx.median));
        }
      }
      if (G > 1 && res.one.valid && res.all.valid) {
        // Throughput ratio: (G * n elements / t_all) / (n / t_one).
        const double s_add = double(G) * res.one.add.median / res.all.add.median;
        const double s_sin = double(G) * res.one.sinx.median / res.all.sinx.median;
        std::printf("  scaling %s vs %s (%s memory, medians): c = a + b %.3fx, sin expression %.3fx (ideal %dx)\n",
                    all_label.c_str(), one_label.c_str(), memory_name(m), s_add, s_sin, G);
      }
      results.push_back(std::move(res));
    }

    std::string reference_note;  // for the summary: what plain CUDA reaches against memcpy
#if defined(__CUDACC__)
    // References (not Tessera): what plain CUDA reaches on the same GPU with cudaMalloc buffers.
    if (gpu) {
      std::printf("  references, plain CUDA on %s (cudaMalloc; not Tessera, not in the summary):\n",
                  all[0].name().c_str());
      for (auto which : {tb::cuda::reference::cub_add, tb::cuda::reference::cub_sin_expr,
                         tb::cuda::reference::float4_add}) {
        try {
          int l = 0;
          auto ms = tb::cuda::reference_ms(all[0], static_cast<std::size_t>(n), which, o.warmup, o.reps, o.batch,
                                           o.spin_us, &l);
          run.late += l;
          const tb::stats st = tb::summarize(std::move(ms));
          print_stats_row(tb::cuda::reference_name(which), one_label.c_str(), "device", st, 12.0 * double(n), base,
                          base_bytes);
          if (base) {
            char buf[96];
            const double r = gbps(12.0 * double(n), st.median) / gbps(base_bytes, base->median);
            std::snprintf(buf, sizeof buf, "%s%s %.3fx", reference_note.empty() ? "" : ", ",
                          tb::cuda::reference_name(which), r);
            reference_note += buf;
          }
        } catch (const std::exception& e) {
          std::printf("  reference %s failed: %s\n", tb::cuda::reference_name(which), e.what());
        }
      }
    }
#endif

    // (d) host overhead per launch of a tiny fused expression.
    std::printf("\n(d) host time per launch: c = a * b + 1 on %lld float per %s, %d assignments queued without "
                "synchronizing\n    (clock stopped before the final synchronize), against a bare %s measured the "
                "same way\n",
                static_cast<long long>(o.tiny_n), kind, o.launches,
                gpu ? "empty kernel <<<1, 1>>> launch (checked with cudaGetLastError)" : "empty function call");
    std::optional<double> launch_one, launch_all, bare_one, bare_all;
    for (int variant = 0; variant < (G > 1 ? 2 : 1); ++variant) {
      const DeviceSet& devs = variant == 0 ? one : all;
      const std::string& where = variant == 0 ? one_label : all_label;
      try {
        const auto D = static_cast<index_t>(devs.size());
        const Placement place = D == 1 ? on(devs[0]) : shard(0, devs);
        auto a = rand<float>({o.tiny_n * D}, place);
        auto b = rand<float>({o.tiny_n * D}, place);
        auto c = zeros<float>({o.tiny_n * D}, place);
        double with_sync = 0;
        const double us = launch_us(devs, o.launches, [&] { c = a * b + 1; }, with_sync);
        const double bare = run.bare_launch_us(devs, o.launches);
        const float x = a.at(o.tiny_n * D - 1), y = b.at(o.tiny_n * D - 1), got = c.at(o.tiny_n * D - 1);
        const bool ok = std::fabs(double(got) - (double(x) * double(y) + 1.0)) <= 1e-6 * 2.0;
        if (!ok) {
          ++errors;
          std::printf("  WRONG RESULT: c = a * b + 1 gave %.9g, want %.9g\n", double(got), double(x) * y + 1.0);
        }
        std::printf("  %-14s Tessera %7.3f us per %slaunch (%.3f us including the final sync); bare %7.3f us per "
                    "launch; ratio %.2fx\n",
                    where.c_str(), us, D > 1 ? "shard " : "", with_sync, bare, bare > 0 ? us / bare : 0.0);
        (variant == 0 ? launch_one : launch_all) = us;
        (variant == 0 ? bare_one : bare_all) = bare;
      } catch (const std::exception& e) {
        ++errors;
        std::printf("  ERROR on %s: %s\n", where.c_str(), e.what());
      }
    }

    tb::print_late_warning(run.late, int(o.spin_us));

    // The summary, on unified memory (the product default).
    const Result* uni = nullptr;
    for (auto& r : results)
      if (r.mem == memory::unified) uni = &r;
    if (!uni && !results.empty()) uni = &results.front();
    std::vector<tb::summary_row> rows;
    auto ratio = [&](const Elementwise& e, const tb::stats Elementwise::*field) -> std::optional<double> {
      if (!e.valid || !e.correct || !base) return std::nullopt;
      return gbps(e.bytes, (e.*field).median) / gbps(base_bytes, base->median);
    };
    auto scaling = [&](const tb::stats Elementwise::*field) -> std::optional<double> {
      if (!uni || G < 2 || !uni->one.valid || !uni->all.valid || !uni->one.correct || !uni->all.correct)
        return std::nullopt;
      return double(G) * (uni->one.*field).median / (uni->all.*field).median;
    };
    const std::string mem_label = uni ? memory_name(uni->mem) : "unified";
    const double scale_target = 3.85 * double(G) / 4.0;
    const std::string scale_text =
        G == 4 ? ">= 3.85x" : ">= " + std::to_string(scale_target).substr(0, 4) + "x (3.85x on 4, prorated)";
    rows.push_back({"c = a + b vs memcpy, " + one_label + ", " + mem_label,
                    uni ? ratio(uni->one, &Elementwise::add) : std::nullopt, 1.03, true, ">= 1.03x", ""});
    rows.push_back({"sin(a) * b + 2 * a vs memcpy, " + one_label + ", " + mem_label,
                    uni ? ratio(uni->one, &Elementwise::sinx) : std::nullopt, 1.00, true, ">= 1.00x", ""});
    if (G > 1) {
      rows.push_back({"c = a + b scaling, " + all_label + " / 1", scaling(&Elementwise::add), scale_target, true,
                      scale_text, ""});
      rows.push_back({"sin(a) * b + 2 * a scaling, " + all_label + " / 1", scaling(&Elementwise::sinx), scale_target,
                      true, scale_text, ""});
    } else {
      rows.push_back({"scaling over GPUs", std::nullopt, 3.85, true, ">= 3.85x on 4", "only 1 device"});
    }
    rows.push_back({"host us per launch, c = a * b + 1, " + one_label, launch_one, 5.0, false, "<= 5 us",
                    bare_one ? "bare " + std::to_string(*bare_one).substr(0, 5) + " us" : "", "us"});
    if (G > 1)
      rows.push_back({"host us per shard launch, " + all_label, launch_all, 5.0, false, "<= 5 us",
                      bare_all ? "bare " + std::to_string(*bare_all).substr(0, 5) + " us" : "", "us"});

    std::printf("\n== summary: medians of %d, %s memory (the product default), %s float per %s ==\n", o.reps,
                mem_label.c_str(), pow2(o.log2n).c_str(), kind);
    tb::print_summary(rows, gpu, 52, 10, 34);
    if (!reference_note.empty())
      std::printf("  plain-CUDA references vs memcpy on %s (not Tessera): %s\n", all[0].name().c_str(),
                  reference_note.c_str());
    if (errors) std::printf("\n%d error(s) above: the affected rows are not measured\n", errors);
  } catch (const std::exception& e) {
    std::printf("bench_elementwise: error: %s\n", e.what());
    return 1;
  }
  return errors ? 1 : 0;
}
