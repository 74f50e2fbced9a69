// SPDX-License-Identifier: Apache-2.0
// Reductions and the allreduce collective against plain CUDA baselines measured in the same run
// (DESIGN.md, "Targets"):
//
//  (1) s = sum(a), 2^28 float on one GPU, against plain cub::DeviceReduce::Sum on the same buffer;
//  (2) dot(a, b), 2^28 float each, in bytes per second (8 bytes per element) against the plain
//      CUB sum's bytes per second (4 bytes per element);
//  (3) sum(x, dims(0)) and sum(x, dims(1)) of a 2^14 x 2^14 float matrix on one GPU against the
//      cudaMemcpy bandwidth (bytes read + written on both sides);
//  (4) sum(abs(x) * x, dims(2)) of a 5 x 400 x 5000 float array, fused and through a temporary;
//  (5) a 30M-float sum with the result on the host, host wall time per call: on one GPU and
//      sharded over every GPU, next to the plain CUDA paths (a copy per GPU, NCCL then a copy,
//      CUB writing into mapped pinned host memory);
//  (6) in-place allreduce of 2^28 float per GPU (a replicated array) against raw ncclAllReduce.
//
// Timing. Work that stays on the GPU (3, 4, 6 and CUB alone) is timed with CUDA events on
// Tessera's per-device streams behind a spin kernel, --batch operations per sample. A call that
// returns a host scalar (1, 2) cannot be batched: one call per sample behind the spin, the stop
// event recorded once the host holds the value; its CUB baseline (CUB, copy of the result, stream
// synchronize) is timed the same way, so the host's wake-up counts on both sides and the host's
// launch latency on neither. (5) is host wall time per call (std::chrono) including the
// synchronization, median of --calls calls: there the host's launches are the point. Results are
// spot-checked after the timings. The summary prints PASS/MISS per target and never fails on a
// MISS; the exit status is non-zero only for an error or a wrong result. A case that does not fit
// in the free memory is skipped with a message.
//
// Without a GPU (or with TESSERA_BACKEND=host) the same program runs on host devices with small
// sizes and prints host figures, labelled as such; the CUDA baselines are left out.
//
//   bench_reduce [--cases 123456] [--log2n K] [--log2m K] [--n5 N] [--log2ar K] [--reps R]
//                [--warmup W] [--batch B] [--calls C] [--memory unified|device] [--spin-us S]
#include <tessera/tessera.hpp>
#include <tessera/collective.hpp>

#include <bench/support/program.hpp>
#if defined(__CUDACC__)
#include <bench/support/reduce_support.cuh>
#endif

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

using namespace tessera;
namespace tb = tessera::bench;
using tb::fixed;
using tb::gbps;
using tb::pow2;

namespace {

// -- options ----------------------------------------------------------------------------------

struct Options {
  std::string cases = "123456";
  long long log2n = -1;   // (1), (2): 2^K float; default 28 on GPUs, 20 on host devices
  long long log2m = -1;   // (3): a 2^K x 2^K matrix; default 14 on GPUs, 10 on host devices
  long long n5 = -1;      // (5): elements; default 30'000'000 on GPUs, 1'000'000 on host devices
  long long log2ar = -1;  // (6): 2^K float per device; default 28 on GPUs, 20 on host devices
  long long reps = 20, warmup = 3, batch = 5, calls = -1, spin_us = 2000;
  memory mem = memory::unified;
};

void usage(std::FILE* f) {
  std::fprintf(f,
               "usage: bench_reduce [--cases 123456] [--log2n K] [--log2m K] [--n5 N] [--log2ar K] [--reps R]\n"
               "                    [--warmup W] [--batch B] [--calls C] [--memory unified|device] [--spin-us S]\n"
               "  --cases S     which measurements to run, digits 1-6 (default all)\n"
               "  --log2n K     (1) sum and (2) dot over 2^K float (default 28 on GPUs, 20 on host devices)\n"
               "  --log2m K     (3) dim reductions of a 2^K x 2^K matrix (default 14 on GPUs, 10 on host)\n"
               "  --n5 N        (5) elements of the host-result sum (default 30000000 on GPUs, 1000000 on host)\n"
               "  --log2ar K    (6) allreduce of 2^K float per device (default 28 on GPUs, 20 on host)\n"
               "  --reps R      timed samples per event-timed measurement (default 20)\n"
               "  --warmup W    untimed samples before timing (default 3)\n"
               "  --batch B     operations queued back to back per sample for GPU-side work (default 5)\n"
               "  --calls C     timed calls of each (5) path, host wall clock (default 1000 on GPUs, 200 on host)\n"
               "  --memory M    memory kind of Tessera's arrays (default unified, the product default)\n"
               "  --spin-us S   GPU spin before each timed sample, so that host launch latency stays out of\n"
               "                the GPU timing (default 2000)\n");
}

std::optional<Options> parse(int argc, char** argv) {
  Options o;
  const bool ok = tb::parse_options(
      "bench_reduce", argc, argv, usage,
      {{"--log2n", 4, 34, &o.log2n},   {"--log2m", 2, 17, &o.log2m},        {"--n5", 1, 1LL << 34, &o.n5},
       {"--log2ar", 2, 34, &o.log2ar}, {"--reps", 1, 100000, &o.reps},      {"--warmup", 0, 100000, &o.warmup},
       {"--batch", 1, 1000, &o.batch}, {"--calls", 1, 10000000, &o.calls}, {"--spin-us", 0, 1000000, &o.spin_us}},
      [&](const std::string& arg, const std::string& value) {
        if (arg == "--memory" && (value == "unified" || value == "device")) {
          o.mem = value == "unified" ? memory::unified : memory::device;
        } else if (arg == "--cases" && !value.empty() && value.find_first_not_of("123456") == std::string::npos) {
          o.cases = value;
        } else {
          std::fprintf(stderr, "bench_reduce: unknown option or bad value: %s %s\n", arg.c_str(), value.c_str());
          return false;
        }
        return true;
      });
  if (!ok) return std::nullopt;
  return o;
}

// -- host wall time ------------------------------------------------------------------------------

// Host wall time per call in microseconds, the clock around each call (which waits for its
// result), after `warmup` untimed calls.
template <class F>
tb::stats wall_us(int warmup, int calls, F&& call) {
  for (int i = 0; i < warmup; ++i) call();
  std::vector<double> us;
  us.reserve(static_cast<std::size_t>(calls));
  for (int i = 0; i < calls; ++i) {
    const double t0 = tb::host_seconds();
    call();
    us.push_back((tb::host_seconds() - t0) * 1e6);
  }
  return tb::summarize(std::move(us));
}

// |got - want| within `sd` standard deviations of the data's randomness plus float rounding.
bool agrees(double got, double want, double sd = 0) {
  return std::fabs(got - want) <= 6.0 * sd + 1e-4 * std::fabs(want) + 1e-6;
}

// -- the measurements -----------------------------------------------------------------------------

// The devices (tb::platform: gpu, all, one and their labels) and what the cases share.
struct Bench : tb::platform {
  Options o;
  tb::runner run;
  int errors = 0;
  std::vector<tb::summary_row> rows;

  void wrong(const std::string& what, double got, double want) {
    ++errors;
    std::printf("  WRONG RESULT: %s gave %.9g, want %.9g\n", what.c_str(), got, want);
  }
  // Runs one case; a refused allocation skips it, any other failure is an error.
  void guarded(const char* name, const std::function<void()>& body) {
    try {
      body();
    } catch (const out_of_memory& e) {
      std::printf("  SKIPPED %s: does not fit in the free memory (%s)\n", name, e.what());
    } catch (const std::exception& e) {
      ++errors;
      std::printf("  ERROR in %s: %s\n", name, e.what());
    }
  }
  void row(const char* what, const char* where, const tb::stats& s, double bytes, const std::string& extra = "") {
    std::printf("  %-44s %-12s", what, where);
    tb::print_stats_columns(s, bytes);
    std::printf("  %s\n", extra.c_str());
  }
  void header(const char* first) {
    std::printf("  %-44s %-12s", first, "devices");
    tb::print_stats_headings();
    std::printf("\n");
  }

  // (1) and (2): full reductions to a host scalar, against plain CUB on the same buffer.
  void full() {
    const index_t n = index_t(1) << o.log2n;
    std::printf("\n(1) s = sum(a) and (2) d = dot(a, b), %s float each on %s (%.3f GiB per array); result on the "
                "host;\n    sum counts 4 bytes per element, dot 8 (both inputs read once)\n",
                pow2(o.log2n).c_str(), all[0].name().c_str(), double(n) * 4 / double(1 << 30));
    header("operation");
    auto a = rand<float>({n}, on(all[0]), o.mem);
    auto b = rand<float>({n}, on(all[0]), o.mem);
    float s = 0, d = 0;
    const tb::stats ts = run.time_sync(one, [&] { s = sum(a); });
    const tb::stats td = run.time_sync(one, [&] { d = dot(a, b); });
    std::optional<tb::stats> cub_host, cub_kernels;
    float cub_value = 0;
#if defined(__CUDACC__)
    if (gpu) {
      const tb::cuda::float_slice slice{all[0], a.layout().parts[0].ptr, static_cast<std::size_t>(n)};
      cub_host = tb::summarize(tb::cuda::cub_sum_to_host_ms(slice, o.warmup, o.reps, o.spin_us, &cub_value));
      int l = 0;
      cub_kernels = tb::summarize(tb::cuda::cub_sum_ms(slice, o.warmup, o.reps, o.batch, o.spin_us, &l));
      run.late += l;
    }
#endif
    const double bs = 4.0 * double(n), bd = 8.0 * double(n);
    auto vs = [&](const tb::stats& t, double bytes) {
      if (!cub_host) return std::string("(no CUB baseline on host devices)");
      return "vs CUB + result copy " + fixed(gbps(bytes, t.median) / gbps(bs, cub_host->median)) +
             "x, vs CUB kernels alone " + fixed(gbps(bytes, t.median) / gbps(bs, cub_kernels->median)) + "x";
    };
    row("Tessera s = sum(a)", one_label.c_str(), ts, bs, vs(ts, bs));
    row("Tessera d = dot(a, b)", one_label.c_str(), td, bd, vs(td, bd));
    if (cub_host) {
      row("plain CUB Sum + copy to host + sync", one_label.c_str(), *cub_host, bs, "(baseline of the summary)");
      row("plain CUB Sum, kernels alone (batched)", one_label.c_str(), *cub_kernels, bs, "(reference)");
    }
    // Checks: a and b are uniform on [0, 1), so sum ~ n/2 (sd sqrt(n/12)), dot ~ n/4 (sd sqrt(7n/144)).
    const double nn = double(n);
    bool ok = true;
    if (!agrees(s, nn / 2, std::sqrt(nn / 12))) ok = false, wrong("sum(a)", s, nn / 2);
    if (!agrees(d, nn / 4, std::sqrt(7 * nn / 144))) ok = false, wrong("dot(a, b)", d, nn / 4);
    if (cub_host && !agrees(s, cub_value)) ok = false, wrong("sum(a) against CUB", s, cub_value);
    std::optional<double> r1, r2;
    if (ok && cub_host) {
      r1 = cub_host->median / ts.median;
      r2 = gbps(bd, td.median) / gbps(bs, cub_host->median);
    } else if (ok && !gpu) {
      r2 = gbps(bd, td.median) / gbps(bs, ts.median);  // a host figure: against Tessera's own sum
    }
    const std::string k1 = cub_kernels ? "vs CUB kernels alone: " + fixed(cub_kernels->median / ts.median) + "x" : "";
    const std::string k2 =
        cub_kernels ? "vs CUB kernels alone: " + fixed(gbps(bd, td.median) / gbps(bs, cub_kernels->median)) + "x" : "";
    rows.push_back({"(1) sum(a) vs CUB Sum (+ result copy), " + one_label, r1, 0.98, true,
                    ">= 0.98x", gpu ? k1 : "no CUB on host devices"});
    rows.push_back({"(2) dot(a, b) B/s vs CUB Sum B/s, " + one_label, r2, 0.95, true, ">= 0.95x",
                    gpu ? k2 : "host: vs Tessera's own sum"});
  }

  // (3): sum(x, dims(0)) and sum(x, dims(1)) against the memcpy bandwidth.
  void along_dims() {
    const index_t m = index_t(1) << o.log2m;
    const double in_bytes = 4.0 * double(m) * double(m), out_bytes = 4.0 * double(m);
    std::printf("\n(3) sum(x, dims(k)) of a %s x %s float matrix on %s (%.3f GiB); bandwidth counts bytes read + "
                "written;\n    baseline: %s of the same size (read + write)\n",
                pow2(o.log2m).c_str(), pow2(o.log2m).c_str(), all[0].name().c_str(), in_bytes / double(1 << 30),
                gpu ? "cudaMemcpyAsync device to device (cudaMalloc buffers)" : "std::memcpy");
    header("operation");
    const tb::stats copy = run.memcpy(all[0], static_cast<std::size_t>(in_bytes), static_cast<int>(o.batch));
    row(gpu ? "cudaMemcpy D2D" : "std::memcpy", one_label.c_str(), copy, 2 * in_bytes);
    auto x = rand<float>({m, m}, on(all[0]), o.mem);
    const float total = sum(x);
    for (int dim = 0; dim < 2; ++dim) {
      std::vector<Array<float, 2>> keep;  // results die after each sample, outside the timing
      const tb::stats t = run.time(one, static_cast<int>(o.batch), [&] { keep.push_back(sum(x, dims(dim))); },
                                   [&] { keep.clear(); });
      const double ratio = gbps(in_bytes + out_bytes, t.median) / gbps(2 * in_bytes, copy.median);
      const std::string what = "sum(x, dims(" + std::to_string(dim) + "))";
      row(what.c_str(), one_label.c_str(), t, in_bytes + out_bytes, "vs memcpy " + fixed(ratio) + "x");
      const float check = sum(sum(x, dims(dim)));
      const bool ok = agrees(check, total);
      if (!ok) wrong("sum(sum(x, dims(" + std::to_string(dim) + "))) against sum(x)", check, total);
      rows.push_back({"(3) " + what + " vs memcpy, " + one_label, ok ? std::optional<double>(ratio) : std::nullopt,
                      0.80, true, ">= 0.80x", ""});
    }
  }

  // (4): a fused dim reduction against the same through a temporary.
  void fused_vs_temporary() {
    const index_t n2 = gpu ? 5000 : 500;
    std::printf("\n(4) sum(abs(x) * x, dims(2)) of a 5 x 400 x %lld float array on %s: fused, and through a "
                "temporary\n    (Array<float,3> t = abs(x) * x; sum(t, dims(2)) -- both statements timed); ms per "
                "evaluation\n",
                static_cast<long long>(n2), all[0].name().c_str());
    header("operation");
    auto x = rand<float>({5, 400, n2}, on(all[0]), o.mem);
    x -= 0.5f;  // both signs, so that abs matters
    std::vector<Array<float, 3>> keep, temps;
    const int batch = static_cast<int>(o.batch);
    const double bytes = 4.0 * 5 * 400 * double(n2);
    const tb::stats fused =
        run.time(one, batch, [&] { keep.push_back(sum(abs(x) * x, dims(2))); }, [&] { keep.clear(); });
    const tb::stats temp = run.time(
        one, batch,
        [&] {
          Array<float, 3> t = abs(x) * x;
          keep.push_back(sum(t, dims(2)));
          temps.push_back(std::move(t));  // freed after the sample (see tb::runner::time)
        },
        [&] {
          keep.clear();
          temps.clear();
        });
    row("fused sum(abs(x) * x, dims(2))", one_label.c_str(), fused, bytes, "(GB/s: input bytes read once)");
    row("temporary t = abs(x) * x; sum(t, dims(2))", one_label.c_str(), temp, bytes,
        "fused / temporary time " + fixed(fused.median / temp.median) + "x");
    // Both results, summed, against the fused full sum; float rounding scales with sum(x * x).
    const double want = sum(abs(x) * x), scale = sum(x * x);
    const double f = sum(sum(abs(x) * x, dims(2)));
    Array<float, 3> t = abs(x) * x;
    const double g = sum(sum(t, dims(2)));
    const bool ok = std::fabs(f - want) <= 1e-4 * scale && std::fabs(g - want) <= 1e-4 * scale;
    if (std::fabs(f - want) > 1e-4 * scale) wrong("sum of the fused dims(2) result", f, want);
    if (std::fabs(g - want) > 1e-4 * scale) wrong("sum of the temporary's dims(2) result", g, want);
    rows.push_back({"(4) fused / temporary time, 5x400x" + std::to_string(n2) + ", " + one_label,
                    ok ? std::optional<double>(fused.median / temp.median) : std::nullopt, 1.0, false,
                    "<= 1.00x (fused no slower)", ""});
  }

  // (5): host wall time of a sum whose result the host needs, 1 device vs all.
  void host_result() {
    const index_t n = o.n5;
    const int G = static_cast<int>(all.size());
    const int calls = static_cast<int>(o.calls), warm = std::max(20, calls / 10);
    std::printf("\n(5) float s = sum(a) of %lld float, result on the host: host wall time per call including the "
                "synchronization,\n    median of %d calls after %d untimed; ratios are times (lower is faster)\n",
                static_cast<long long>(n), calls, warm);
    std::printf("  %-44s %-12s %9s %9s  %s\n", "path", "devices", "med us", "best us", "ratios");
    auto a1 = rand<float>({n}, on(all[0]), o.mem);
    std::optional<Array<float, 1>> aG;
    if (G > 1) aG = rand<float>({n}, shard(0, all), o.mem);
    float s1 = 0, sG = 0;
    const tb::stats t1 = wall_us(warm, calls, [&] { s1 = sum(a1); });
    std::optional<tb::stats> tG;
    if (aG) tG = wall_us(warm, calls, [&] { sG = sum(*aG); });
    auto line = [&](const std::string& what, const std::string& where, const tb::stats& t, const std::string& r) {
      std::printf("  %-44s %-12s %9.2f %9.2f  %s\n", what.c_str(), where.c_str(), t.median, t.best, r.c_str());
    };
    line("Tessera float s = sum(a)", one_label, t1, "");
    if (tG) line("Tessera float s = sum(a), sharded", all_label, *tG, "/ Tessera 1: " + fixed(tG->median / t1.median) + "x");
    if (!agrees(s1, double(n) / 2, std::sqrt(double(n) / 12))) wrong("sum(a) on one device", s1, double(n) / 2);
    if (aG && !agrees(sG, double(n) / 2, std::sqrt(double(n) / 12))) wrong("sum(a) sharded", sG, double(n) / 2);
    std::string note;
#if defined(__CUDACC__)
    if (gpu) {
      namespace tc = tb::cuda;
      std::vector<tc::float_slice> s_one{{all[0], a1.layout().parts[0].ptr, static_cast<std::size_t>(n)}}, s_all;
      if (aG)
        for (auto& p : aG->layout().parts) s_all.push_back({p.device, p.ptr, static_cast<std::size_t>(p.extent[0])});
      std::optional<double> plain1;
      auto plain = [&](const std::vector<tc::float_slice>& slices, tc::host_sum_path path, const std::string& where) {
        guarded(tc::host_sum_path_name(path), [&] {
          if (path == tc::host_sum_path::nccl_allreduce && !comms) comms = std::make_unique<tc::nccl_comms>(all);
          tc::plain_host_sum f(slices, path, comms.get());
          float v = 0;
          const tb::stats t = wall_us(warm, calls, [&] { v = f(); });
          if (path == tc::host_sum_path::copy_each && slices.size() == 1) plain1 = t.median;
          std::string ratios = "/ Tessera 1: " + fixed(t.median / t1.median) + "x";
          if (plain1) ratios += ", / plain 1 GPU: " + fixed(t.median / *plain1) + "x";
          line(std::string("plain ") + tc::host_sum_path_name(path), where, t, ratios);
          // The sharded array holds other random values than the one-device array: compare each
          // plain path with Tessera's sum of the same data.
          const double want = slices.size() == 1 ? double(s1) : double(sG);
          if (!agrees(v, want)) wrong(std::string("plain ") + tc::host_sum_path_name(path), v, want);
          if (path == tc::host_sum_path::nccl_allreduce && plain1)
            note = "plain CUB+NCCL+copy / plain 1 GPU: " + fixed(t.median / *plain1) + "x";
        });
      };
      plain(s_one, tc::host_sum_path::copy_each, one_label);  // first: the "plain 1 GPU" reference
      plain(s_one, tc::host_sum_path::mapped, one_label);
      if (aG) {
        plain(s_all, tc::host_sum_path::copy_each, all_label);
        plain(s_all, tc::host_sum_path::nccl_allreduce, all_label);
        plain(s_all, tc::host_sum_path::mapped, all_label);
      }
    }
#endif
    // Issue #22 item 5's absolute targets, for the default 30M floats on GPUs.
    if (gpu && n == 30000000) {
      rows.push_back({"(5) sum of 30M float to host, host us, " + one_label, t1.median, 36.0, false, "<= 36 us (#22)",
                      "", "us"});
      if (tG) {
        rows.push_back({"(5) sum of 30M float to host, host us, " + all_label, tG->median, G >= 4 ? 20.0 : 36.0, false,
                        G >= 4 ? "<= 20 us on 4 (#22)" : "<= 36 us (#22: 20 on 4)", "", "us"});
      }
    }
    rows.push_back({"(5) sum of " + std::to_string(n) + " float to host, " + all_label + " / " + one_label + " time",
                    tG ? std::optional<double>(tG->median / t1.median) : std::nullopt, 1.0, false,
                    "<= 1.00x (multi no slower)", G > 1 ? note : "only 1 device"});
  }

  // (6): in-place allreduce of a replicated array against raw ncclAllReduce.
  void allreduce_case() {
    const index_t n = index_t(1) << o.log2ar;
    const int G = static_cast<int>(all.size());
    const double bytes = 4.0 * double(n);
    std::printf("\n(6) tessera::allreduce(x) in place, x replicated over %s, %s float (%.3f GiB) per device;\n"
                "    algbw = bytes per device / time, busbw = algbw x 2(G-1)/G (NCCL's convention)\n",
                all_label.c_str(), pow2(o.log2ar).c_str(), bytes / double(1 << 30));
    header("operation");
    auto x = ones<float>({n}, replicate(all), o.mem);
    tessera::allreduce(x);
    // Check every replica: the ends and the middle hold G.
    for (auto& p : x.layout().parts) {
      for (index_t i : {index_t(0), n / 2, n - 1}) {
        float v = 0;
        detail::rt::copy_to_host(p.device.id(), &v, sizeof v, p.ptr + i, sizeof v, sizeof v, 1);
        if (v != float(G)) wrong("allreduce(ones) on " + p.device.name() + " at " + std::to_string(i), v, G);
      }
    }
    x = 0.0f;  // sums of zeros stay finite however often the timing repeats them
    const int batch = static_cast<int>(o.batch);
    const tb::stats t = run.time(all, batch, [&] { tessera::allreduce(x); });
    const double bus = G > 1 ? 2.0 * (G - 1) / G : 1.0;
    auto bw = [&](const tb::stats& s) {
      return "algbw " + fixed(gbps(bytes, s.median), 1) + " GB/s, busbw " + fixed(gbps(bytes, s.median) * bus, 1) +
             " GB/s";
    };
    row("Tessera allreduce(x)", all_label.c_str(), t, bytes, bw(t));
    std::optional<double> ratio;
    std::string note = G > 1 ? "" : "only 1 device";
#if defined(__CUDACC__)
    if (gpu) {
      guarded("raw ncclAllReduce", [&] {
        if (!comms) comms = std::make_unique<tb::cuda::nccl_comms>(all);
        std::vector<float*> mine;
        for (auto& p : x.layout().parts) mine.push_back(p.ptr);
        int l = 0;
        const tb::stats same = tb::summarize(
            tb::cuda::nccl_allreduce_ms(*comms, mine, static_cast<std::size_t>(n), o.warmup, o.reps, batch, o.spin_us, &l));
        run.late += l;
        row("raw ncclAllReduce, Tessera's buffers", all_label.c_str(), same, bytes,
            bw(same) + "; raw / Tessera " + fixed(same.median / t.median) + "x");
        std::optional<tb::stats> own;
        guarded("raw ncclAllReduce on cudaMalloc buffers", [&] {
          tb::cuda::device_floats buffers(all, static_cast<std::size_t>(n));
          own = tb::summarize(tb::cuda::nccl_allreduce_ms(*comms, buffers.pointers(), static_cast<std::size_t>(n),
                                                          o.warmup, o.reps, batch, o.spin_us, &l));
          run.late += l;
          row("raw ncclAllReduce, cudaMalloc buffers", all_label.c_str(), *own, bytes,
              bw(*own) + "; raw / Tessera " + fixed(own->median / t.median) + "x");
        });
        const tb::stats& base = own ? *own : same;
        if (G > 1) ratio = base.median / t.median;
        if (G > 1 && !own) note = "baseline on Tessera's buffers (cudaMalloc ones did not fit)";
        if (G == 1) note = "only 1 device (raw / Tessera " + fixed(base.median / t.median) + "x)";
      });
    }
#endif
    rows.push_back({"(6) allreduce " + pow2(o.log2ar) + " float/dev vs raw NCCL, " + all_label, ratio, 0.95, true,
                    ">= 0.95x", gpu ? note : "no NCCL on host devices"});
  }

#if defined(__CUDACC__)
  std::unique_ptr<tb::cuda::nccl_comms> comms;  // over `all`, made on first use, shared by (5) and (6)
#endif
};

}  // namespace

int main(int argc, char** argv) {
  const auto parsed = parse(argc, argv);
  if (!parsed) {
    usage(stderr);
    return 2;
  }
  ::setenv("NCCL_NVLS_ENABLE", "0", 0);  // before Tessera or the baselines make a communicator
  Bench b;
  b.o = *parsed;
  Options& o = b.o;
  try {
    static_cast<tb::platform&>(b) = tb::choose_platform();  // the devices, `gpu` and the labels
    const bool gpu = b.gpu;
    if (o.log2n < 0) o.log2n = gpu ? 28 : 20;
    if (o.log2m < 0) o.log2m = gpu ? 14 : 10;
    if (o.n5 < 0) o.n5 = gpu ? 30'000'000 : 1'000'000;
    if (o.log2ar < 0) o.log2ar = gpu ? 28 : 20;
    if (o.calls < 0) o.calls = gpu ? 1000 : 200;
    b.run = tb::runner{gpu, double(o.spin_us), static_cast<int>(o.warmup), static_cast<int>(o.reps), 0};

    std::printf("Tessera reduction benchmark\n");
    tb::print_backend(b, ", no CUDA baselines", " (TESSERA_HOST_DEVICES)");
    std::printf("\nmemory of Tessera's arrays: %s; %lld samples (median and best) after %lld warm-up samples, %lld "
                "back-to-back operations per sample for work that stays on the device; %s\n",
                o.mem == memory::unified ? "unified" : "device", o.reps, o.warmup, o.batch,
                tb::timing_text(gpu, o.spin_us, "host clock").c_str());

    auto wants = [&](char c) { return o.cases.find(c) != std::string::npos; };
    if (wants('1') || wants('2')) b.guarded("(1)/(2) full reductions", [&] { b.full(); });
    if (wants('3')) b.guarded("(3) reductions along dims", [&] { b.along_dims(); });
    if (wants('4')) b.guarded("(4) fused vs temporary", [&] { b.fused_vs_temporary(); });
    if (wants('5')) b.guarded("(5) sum to host", [&] { b.host_result(); });
    if (wants('6')) b.guarded("(6) allreduce", [&] { b.allreduce_case(); });

    tb::print_late_warning(b.run.late, o.spin_us);
    std::printf("\n== summary: medians, %s memory ==\n", o.mem == memory::unified ? "unified" : "device");
    tb::print_summary(b.rows, gpu, 62, 9, 28);
    if (b.errors) std::printf("\n%d error(s) above: the affected rows are not measured\n", b.errors);
  } catch (const std::exception& e) {
    std::printf("bench_reduce: error: %s\n", e.what());
    return 1;
  }
  return b.errors ? 1 : 0;
}
