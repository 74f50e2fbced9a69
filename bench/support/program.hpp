// SPDX-License-Identifier: Apache-2.0
// What the benchmark programs in bench/ share: command-line options, the choice of devices
// (GPUs, or host devices), the runner that times work on either, and the printing of the
// stats rows and of the PASS/MISS summary. The CUDA half of the runner is compiled only where
// nvcc compiles the including program; the program needs no CUDA call of its own for it.
#pragma once
#include <bench/support/bench_support.hpp>
#if defined(__CUDACC__)
#include <bench/support/cuda_support.cuh>
#endif
#include <tessera/device.hpp>

#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace tessera::bench {

// -- numbers and their text -------------------------------------------------------------------

// GB/s of `bytes` moved in `ms` milliseconds (0 for a time of 0).
inline double gbps(double bytes, double ms) { return ms > 0 ? bytes / (ms * 1e-3) / 1e9 : 0.0; }

inline std::string pow2(long long k) { return "2^" + std::to_string(k); }

inline std::string fixed(double v, int digits = 3) {
  char b[32];
  std::snprintf(b, sizeof b, "%.*f", digits, v);
  return b;
}

// -- command-line options ---------------------------------------------------------------------

// An integer option `--name K`, lo <= K <= hi, stored into *dst (converted to its type).
struct int_option {
  template <class T>
  int_option(const char* name_, long long lo_, long long hi_, T* dst)
      : name(name_), lo(lo_), hi(hi_), set([dst](long long v) { *dst = static_cast<T>(v); }) {}
  const char* name;
  long long lo, hi;
  std::function<void(long long)> set;
};

// Reads the options of `argv`, each as "--name value" or "--name=value"; "-h" or "--help"
// prints usage(stdout) and exits with status 0. The options named in `ints` take a range-checked
// integer; any other goes to `other(name, value)`, which returns false to reject it (after
// printing its own message). Returns false after an error, which is printed to stderr prefixed by
// "<program>: ": the caller then prints usage(stderr) and exits with status 2.
inline bool parse_options(const char* program, int argc, char** argv, void (*usage)(std::FILE*),
                          const std::vector<int_option>& ints,
                          const std::function<bool(const std::string& name, const std::string& value)>& other) {
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
      std::fprintf(stderr, "%s: %s needs a value\n", program, arg.c_str());
      return false;
    }
    const int_option* opt = nullptr;
    for (auto& o : ints)
      if (arg == o.name) opt = &o;
    if (!opt) {
      if (!other(arg, value)) return false;
      continue;
    }
    char* end = nullptr;
    const long long v = std::strtoll(value.c_str(), &end, 10);
    if (value.empty() || *end != '\0' || v < opt->lo || v > opt->hi) {
      std::fprintf(stderr, "%s: %s expects an integer in [%lld, %lld], got '%s'\n", program, opt->name, opt->lo,
                   opt->hi, value.c_str());
      return false;
    }
    opt->set(v);
  }
  return true;
}

// The same, where every option is one of `ints`: any other is rejected as
// "<program>: unknown option '<name>'".
inline bool parse_options(const char* program, int argc, char** argv, void (*usage)(std::FILE*),
                          const std::vector<int_option>& ints) {
  return parse_options(program, argc, argv, usage, ints, [program](const std::string& name, const std::string&) {
    std::fprintf(stderr, "%s: unknown option '%s'\n", program, name.c_str());
    return false;
  });
}

// -- the devices ------------------------------------------------------------------------------

// The devices a benchmark runs on, and their labels in the tables.
struct platform {
  bool gpu = false;       // GPUs (timed with CUDA events) or host devices (the host clock)
  DeviceSet all, one;     // every device in use; all[0] alone
  std::string one_label;  // "1 GPU" or "1 host dev"
  std::string all_label;  // "4 GPUs" or "4 host devs"; one_label for one device
  int size() const { return static_cast<int>(all.size()); }
};

// Every device (tessera::devices()), GPUs under the CUDA backend. A program compiled without
// nvcc cannot launch on GPUs: it says so and runs on one host device instead.
inline platform choose_platform() {
  platform p;
  p.all = devices();
  p.gpu = cuda_backend();
#if !defined(__CUDACC__)
  if (p.gpu) {
    std::printf("note: this program was compiled without nvcc, so it cannot launch on GPUs; running on one host "
                "device instead (build with CUDA, or set TESSERA_BACKEND=host)\n");
    p.gpu = false;
    p.all = host_devices(1);
  }
#endif
  p.one = DeviceSet{p.all[0]};
  const int G = p.size();
  p.one_label = p.gpu ? "1 GPU" : "1 host dev";
  p.all_label = G == 1 ? p.one_label : std::to_string(G) + (p.gpu ? " GPUs" : " host devs");
  return p;
}

// "backend: CUDA, <G> GPU(s): <names>" or, on host devices, the line that says the figures are
// host figures and the targets GPU targets; `host_what` goes after "host figures, small sizes",
// `host_count_note` after "<G> host device(s)". Ends without a newline.
inline void print_backend(const platform& p, const char* host_what, const char* host_count_note) {
  if (p.gpu) {
    std::printf("backend: CUDA, %d GPU(s):", p.size());
  } else {
    std::printf("backend: HOST DEVICES (no GPU in use: %s) -- host figures, small sizes%s; the DESIGN targets are "
                "for GPUs\n%d host device(s)%s:",
                gpus().empty() ? "none visible" : "TESSERA_BACKEND=host", host_what, p.size(), host_count_note);
  }
  for (auto d : p.all) std::printf(" %s", d.name().c_str());
}

// How the samples are timed, for the header: `host_text` on host devices.
inline std::string timing_text(bool gpu, long long spin_us, const char* host_text) {
  return gpu ? "CUDA events on Tessera's streams, each sample behind a " + std::to_string(spin_us) + " us spin kernel"
             : std::string(host_text);
}

// -- the runner: CUDA events on GPUs, the host clock on host devices ---------------------------

struct runner {
  bool gpu = false;
  double spin_us = 0;
  int warmup = 0, reps = 1;
  int late = 0;  // GPU samples whose spin ran out before the host had queued the work

  // ms per call of `work`, `batch` calls back to back per sample, after `warmup` untimed
  // samples. `between` runs after each sample, outside the timing: it frees what the sample
  // allocated (freeing device memory waits for the GPU, so it must not happen while a spin kernel
  // holds the stream). `count_late`: false for work that waits for its result on the host, where
  // the spin always runs out by design.
  template <class F, class B = no_op>
  stats time(const DeviceSet& devs, int batch, F&& work, B&& between = B{}, bool count_late = true) {
    auto batched = [&] {
      for (int k = 0; k < batch; ++k) work();
    };
    std::vector<double> ms;
#if defined(__CUDACC__)
    if (gpu) {
      int l = 0;
      ms = cuda::time_ms(devs, warmup, reps, batched, spin_us, &l, between);
      if (count_late) late += l;
    }
#endif
    (void)count_late;  // host devices: no spin, nothing runs late
    if (!gpu) ms = host::time_ms(devs, warmup, reps, batched, between);
    for (auto& m : ms) m /= batch;
    return summarize(std::move(ms));
  }

  // A call that returns a host scalar: one per sample.
  template <class F>
  stats time_sync(const DeviceSet& devs, F&& work) {
    return time(devs, 1, work, no_op{}, false);
  }

  // The memcpy baseline on one device: cudaMemcpyAsync device to device on GPUs, std::memcpy on
  // host devices; ms per copy of `bytes`, `batch` copies per sample.
  stats memcpy(Device d, std::size_t bytes, int batch) {
#if defined(__CUDACC__)
    if (gpu) {
      int l = 0;
      auto ms = cuda::memcpy_ms(d, bytes, warmup, reps, batch, spin_us, &l);
      late += l;
      return summarize(std::move(ms));
    }
#endif
    return summarize(host::memcpy_ms(d, bytes, warmup, reps, batch));
  }

  // Host microseconds per bare launch (an empty kernel, or an empty call on host devices).
  double bare_launch_us(const DeviceSet& devs, int n) {
#if defined(__CUDACC__)
    if (gpu) return cuda::empty_launch_us(devs, n);
#endif
    (void)devs;
    return host::empty_call_us(n);
  }
};

// The warning after a GPU run in which `late` samples included host gaps.
inline void print_late_warning(int late, long long spin_us) {
  if (late > 0) {
    std::printf("\nwarning: in %d timed sample(s) the GPU had finished the %lld us spin before the host finished "
                "queuing the work, so they include host gaps; rerun with a larger --spin-us\n",
                late, spin_us);
  }
}

// -- stats rows -------------------------------------------------------------------------------

// The columns every timing row has after its labels: median and best ms, then median and best
// GB/s for `bytes` per call; and their headings.
inline void print_stats_columns(const stats& s, double bytes) {
  std::printf(" %9.4f %9.4f %10.1f %10.1f", s.median, s.best, gbps(bytes, s.median), gbps(bytes, s.best));
}
inline void print_stats_headings() { std::printf(" %9s %9s %10s %10s", "med ms", "best ms", "med GB/s", "best GB/s"); }

// -- the summary ------------------------------------------------------------------------------

struct summary_row {
  std::string metric;
  std::optional<double> value;  // nullopt: not measured
  double target;
  bool at_least;  // true: value >= target passes; false: value <= target passes
  std::string target_text, note;
  std::string unit = "x";  // "x" (printed 1.234x) or "us" (printed 1.234 us)
};

// The summary table: metric, measured value, target and PASS/MISS (on GPUs; on host devices the
// targets are shown for reference only), in columns of the given widths.
inline void print_summary(const std::vector<summary_row>& rows, bool gpu, int metric_width, int value_width,
                          int target_width) {
  if (!gpu) std::printf("   HOST run: the targets are GPU targets, shown for reference only\n");
  std::printf("  %-*s %*s  %-*s %s\n", metric_width, "metric", value_width, "measured", target_width,
              "target (DESIGN.md)", "result");
  for (auto& r : rows) {
    std::string value = "--", result;
    if (r.value) value = fixed(*r.value) + (r.unit == "x" ? "x" : " " + r.unit);
    if (!r.value) result = r.note.empty() ? "not measured" : "n/a (" + r.note + ")";
    else if (!gpu) result = "host (n/a)";
    else result = (r.at_least ? *r.value >= r.target : *r.value <= r.target) ? "PASS" : "MISS";
    if (r.value && !r.note.empty()) result += "  [" + r.note + "]";
    std::printf("  %-*s %*s  %-*s %s\n", metric_width, r.metric.c_str(), value_width, value.c_str(), target_width,
                r.target_text.c_str(), result.c_str());
  }
}

}  // namespace tessera::bench
