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
// kernel so that it holds GPU time only (backend/cuda/bench_support.cuh); best and median of
// --reps samples after --warmup untimed runs. The summary prints PASS/MISS per target and never
// fails on a MISS; the exit status is non-zero only for an error or a wrong result.
//
// Without a GPU (or with TESSERA_BACKEND=host) the same program runs on host devices with 2^20
// elements per device and prints host figures, labelled as such, against std::memcpy.
//
//   bench_elementwise [--log2n K] [--reps R] [--warmup W] [--launches N] [--tiny-n T]
//                     [--memory unified|device|both] [--spin-us S]
#include <tessera/tessera.hpp>

#include <backend/host/bench_support.hpp>
#if defined(__CUDACC__)
#include <backend/cuda/bench_support.cuh>
#endif

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <iostream>
#include <optional>
#include <string>
#include <vector>

using namespace tessera;
namespace tb = tessera::bench;

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
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i], value;
    if (arg == "-h" || arg == "--help") {
      usage(stdout);
      std::exit(0);
    }
    if (const auto eq = arg.find('='); eq != std::string::npos) {
      value = arg.substr(eq + 1);
      arg = arg.substr(0, eq);
    } else if (i + 1 < argc) {
      value = argv[++i];
    } else {
      std::fprintf(stderr, "bench_elementwise: %s needs a value\n", arg.c_str());
      return std::nullopt;
    }
    auto integer = [&](long long lo, long long hi, long long& out) {
      char* end = nullptr;
      const long long v = std::strtoll(value.c_str(), &end, 10);
      if (value.empty() || *end != '\0' || v < lo || v > hi) {
        std::fprintf(stderr, "bench_elementwise: %s expects an integer in [%lld, %lld], got '%s'\n", arg.c_str(), lo,
                     hi, value.c_str());
        return false;
      }
      out = v;
      return true;
    };
    long long v = 0;
    if (arg == "--log2n") {
      if (!integer(4, 34, v)) return std::nullopt;
      o.log2n = static_cast<int>(v);
    } else if (arg == "--reps") {
      if (!integer(1, 100000, v)) return std::nullopt;
      o.reps = static_cast<int>(v);
    } else if (arg == "--warmup") {
      if (!integer(0, 100000, v)) return std::nullopt;
      o.warmup = static_cast<int>(v);
    } else if (arg == "--batch") {
      if (!integer(1, 1000, v)) return std::nullopt;
      o.batch = static_cast<int>(v);
    } else if (arg == "--launches") {
      if (!integer(1, 100000000, v)) return std::nullopt;
      o.launches = static_cast<int>(v);
    } else if (arg == "--tiny-n") {
      if (!integer(1, 1 << 24, v)) return std::nullopt;
      o.tiny_n = v;
    } else if (arg == "--spin-us") {
      if (!integer(0, 1000000, v)) return std::nullopt;
      o.spin_us = double(v);
    } else if (arg == "--memory") {
      if (value != "unified" && value != "device" && value != "both") {
        std::fprintf(stderr, "bench_elementwise: --memory expects unified, device or both, got '%s'\n", value.c_str());
        return std::nullopt;
      }
      o.memory = value;
    } else {
      std::fprintf(stderr, "bench_elementwise: unknown option '%s'\n", arg.c_str());
      return std::nullopt;
    }
  }
  return o;
}

// -- the backend: CUDA events on GPUs, the host clock on host devices ---------------------------

struct Runner {
  bool gpu = false;
  double spin_us = 0;
  int batch = 1;
  int late = 0;  // GPU samples whose spin ran out before the host had queued the work

  // ms per call of `work`: each sample runs it `batch` times back to back.
  template <class F>
  tb::stats time(const DeviceSet& devs, int warmup, int reps, F&& work) {
    auto batched = [&] {
      for (int k = 0; k < batch; ++k) work();
    };
    std::vector<double> ms;
#if defined(__CUDACC__)
    if (gpu) {
      int l = 0;
      ms = tb::cuda::time_ms(devs, warmup, reps, batched, spin_us, &l);
      late += l;
    }
#endif
    if (!gpu) ms = tb::host::time_ms(devs, warmup, reps, batched);
    for (auto& m : ms) m /= batch;
    return tb::summarize(std::move(ms));
  }

  tb::stats memcpy(Device d, std::size_t bytes, int warmup, int reps) {
#if defined(__CUDACC__)
    if (gpu) {
      int l = 0;
      auto ms = tb::cuda::memcpy_ms(d, bytes, warmup, reps, batch, spin_us, &l);
      late += l;
      return tb::summarize(std::move(ms));
    }
#endif
    return tb::summarize(tb::host::memcpy_ms(d, bytes, warmup, reps, batch));
  }

  // Host microseconds per bare launch (an empty kernel, or an empty call on host devices).
  double bare_launch_us(const DeviceSet& devs, int n) {
#if defined(__CUDACC__)
    if (gpu) return tb::cuda::empty_launch_us(devs, n);
#endif
    (void)devs;
    return tb::host::empty_call_us(n);
  }
};

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

double gbps(double bytes, double ms) { return ms > 0 ? bytes / (ms * 1e-3) / 1e9 : 0.0; }

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
Elementwise measure_elementwise(Runner& run, const DeviceSet& devs, index_t n_per_device, memory mem,
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
    r.add = run.time(devs, o.warmup, o.reps, [&] { c1 = a + b; });
    r.sinx = run.time(devs, o.warmup, o.reps, [&] { c2 = sin(a) * b + 2 * a; });
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

std::string pow2(int k) { return "2^" + std::to_string(k); }

void print_stats_row(const char* what, const char* where, const char* mem, const tb::stats& s, double bytes,
                     const tb::stats* base, double base_bytes) {
  const double bw_med = gbps(bytes, s.median), bw_best = gbps(bytes, s.best);
  std::printf("  %-30s %-14s %-8s %9.4f %9.4f %10.1f %10.1f", what, where, mem, s.median, s.best, bw_med, bw_best);
  if (base) {
    const double b_med = gbps(base_bytes, base->median), b_best = gbps(base_bytes, base->best);
    std::printf("  %6.3fx  %6.3fx", b_med > 0 ? bw_med / b_med : 0.0, b_best > 0 ? bw_best / b_best : 0.0);
  }
  std::printf("\n");
}

// -- the summary table ----------------------------------------------------------------------------

struct Row {
  std::string metric;
  std::optional<double> value;  // nullopt: not measured
  std::string unit;             // "x" or "us"
  double target;
  bool at_least;  // true: value >= target passes; false: value <= target passes
  std::string target_text, note;
};

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
    Runner run;
    DeviceSet all = devices();
    run.gpu = cuda_backend();
#if !defined(__CUDACC__)
    if (run.gpu) {
      std::printf("note: this program was compiled without nvcc, so it cannot launch on GPUs; running on one host "
                  "device instead (build with CUDA, or set TESSERA_BACKEND=host)\n");
      run.gpu = false;
      all = host_devices(1);
    }
#endif
    run.spin_us = o.spin_us;
    run.batch = o.batch;
    const bool gpu = run.gpu;
    const int G = static_cast<int>(all.size());
    const DeviceSet one{all[0]};
    if (o.log2n < 0) o.log2n = gpu ? 28 : 20;
    if (o.memory.empty()) o.memory = gpu ? "both" : "unified";
    const index_t n = index_t(1) << o.log2n;
    const char* kind = gpu ? "GPU" : "host device";
    const std::string one_label = gpu ? "1 GPU" : "1 host dev";
    const std::string all_label = std::to_string(G) + (gpu ? " GPUs" : " host devs");

    std::printf("Tessera elementwise benchmark\n");
    if (gpu) {
      std::printf("backend: CUDA, %d GPU(s):", G);
    } else {
      std::printf("backend: HOST DEVICES (no GPU in use: %s) -- host figures, small sizes; the DESIGN targets are for "
                  "GPUs\n%d host device(s):",
                  gpus().empty() ? "none visible" : "TESSERA_BACKEND=host", G);
    }
    for (auto d : all) std::printf(" %s", d.name().c_str());
    std::printf("\n\n");
    std::fflush(stdout);
    print_topology(std::cout);
    std::cout.flush();
    std::printf("\nsizes: %s = %lld float per %s (%.3f GiB per array per device); %d samples (median and best) of "
                "%d back-to-back operations each, after %d warm-up samples; %s\n",
                pow2(o.log2n).c_str(), static_cast<long long>(n), kind, double(n) * 4.0 / double(1 << 30), o.reps,
                o.batch, o.warmup,
                gpu ? ("CUDA events on Tessera's streams, each sample behind a " + std::to_string(int(o.spin_us)) +
                       " us spin kernel")
                          .c_str()
                    : "host clock (host devices run synchronously)");

    std::vector<memory> mems;
    if (o.memory == "unified" || o.memory == "both") mems.push_back(memory::unified);
    if (o.memory == "device" || o.memory == "both") mems.push_back(memory::device);

    // (a) the memcpy baseline on one device.
    const std::size_t copy_bytes = static_cast<std::size_t>(n) * sizeof(float);
    std::optional<tb::stats> memcpy_stats;
    std::printf("\n(a) baseline: %s of %s float (%.3f GiB) on %s; bandwidth counts bytes read + written\n",
                gpu ? "cudaMemcpyAsync device to device (cudaMalloc buffers)" : "std::memcpy host to host",
                pow2(o.log2n).c_str(), double(copy_bytes) / double(1 << 30), all[0].name().c_str());
    std::printf("  %-30s %-14s %-8s %9s %9s %10s %10s\n", "operation", "devices", "memory", "med ms", "best ms",
                "med GB/s", "best GB/s");
    try {
      memcpy_stats = run.memcpy(all[0], copy_bytes, o.warmup, o.reps);
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
    std::printf("  %-30s %-14s %-8s %9s %9s %10s %10s  %7s  %7s\n", "expression", "devices", "memory", "med ms",
                "best ms", "med GB/s", "best GB/s", "med", "best");
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

    if (run.late > 0) {
      std::printf("\nwarning: in %d timed sample(s) the GPU had finished the %d us spin before the host finished "
                  "queuing the work, so they include host gaps; rerun with a larger --spin-us\n",
                  run.late, int(o.spin_us));
    }

    // The summary, on unified memory (the product default).
    const Result* uni = nullptr;
    for (auto& r : results)
      if (r.mem == memory::unified) uni = &r;
    if (!uni && !results.empty()) uni = &results.front();
    std::vector<Row> rows;
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
                    uni ? ratio(uni->one, &Elementwise::add) : std::nullopt, "x", 1.03, true, ">= 1.03x", ""});
    rows.push_back({"sin(a) * b + 2 * a vs memcpy, " + one_label + ", " + mem_label,
                    uni ? ratio(uni->one, &Elementwise::sinx) : std::nullopt, "x", 1.00, true, ">= 1.00x", ""});
    if (G > 1) {
      rows.push_back({"c = a + b scaling, " + all_label + " / 1", scaling(&Elementwise::add), "x", scale_target, true,
                      scale_text, ""});
      rows.push_back({"sin(a) * b + 2 * a scaling, " + all_label + " / 1", scaling(&Elementwise::sinx), "x",
                      scale_target, true, scale_text, ""});
    } else {
      rows.push_back({"scaling over GPUs", std::nullopt, "x", 3.85, true, ">= 3.85x on 4", "only 1 device"});
    }
    rows.push_back({"host us per launch, c = a * b + 1, " + one_label, launch_one, "us", 5.0, false, "<= 5 us",
                    bare_one ? "bare " + std::to_string(*bare_one).substr(0, 5) + " us" : ""});
    if (G > 1)
      rows.push_back({"host us per shard launch, " + all_label, launch_all, "us", 5.0, false, "<= 5 us",
                      bare_all ? "bare " + std::to_string(*bare_all).substr(0, 5) + " us" : ""});

    std::printf("\n== summary: medians of %d, %s memory (the product default), %s float per %s ==\n", o.reps,
                mem_label.c_str(), pow2(o.log2n).c_str(), kind);
    if (!gpu) std::printf("   HOST run: the targets are GPU targets, shown for reference only\n");
    std::printf("  %-52s %10s  %-34s %s\n", "metric", "measured", "target (DESIGN.md)", "result");
    for (auto& r : rows) {
      char value[32] = "--";
      if (r.value) std::snprintf(value, sizeof value, r.unit == "x" ? "%.3fx" : "%.3f us", *r.value);
      std::string result;
      if (!r.value) result = r.note.empty() ? "not measured" : "n/a (" + r.note + ")";
      else if (!gpu) result = "host (n/a)";
      else result = (r.at_least ? *r.value >= r.target : *r.value <= r.target) ? "PASS" : "MISS";
      if (r.value && !r.note.empty()) result += "  [" + r.note + "]";
      std::printf("  %-52s %10s  %-34s %s\n", r.metric.c_str(), value, r.target_text.c_str(), result.c_str());
    }
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
