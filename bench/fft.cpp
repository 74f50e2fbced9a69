// SPDX-License-Identifier: Apache-2.0
// The fft family against plain library calls measured in the same run (issue 21, item 4):
//
//  (1) 1-D C2C, 2^28 complex<float>, one GPU: fft(x) against a plain cufftExecC2C (out of place,
//      same input, cuFFT's own plan) on the same stream (target >= 0.97x);
//  (2) 2-D C2C, 16384^2 complex<float>: fft2 sharded along dim 1 over every GPU (local transform
//      along dim 0, re-shard, transform along dim 1, re-shard back) against fft2 on one GPU (report);
//  (3) host fft, 2^22 complex<double> on one host device (FFTW3 or the built-in transforms)
//      against numpy.fft.fft in python3 on this machine (report; skipped without python3/numpy).
//
// Timing: CUDA events on Tessera's streams behind a spin kernel, --batch calls per sample, medians
// of --reps samples (bench/support); host figures on the host clock. On host devices (1) and (2)
// run small sizes (2^20, 1024^2) and print host figures, labelled as such.
//
//   bench_fft [--log-n K] [--n2 M] [--host-log-n H] [--reps R] [--warmup W] [--batch B] [--spin-us S]
#include <tessera/fft.hpp>

#include <bench/support/program.hpp>
#if defined(__CUDACC__)
#include <bench/support/fft_support.cuh>
#endif

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
  index_t log_n = -1, n2 = -1;  // -1: 28 and 16384 on GPUs; 20 and 1024 on host devices
  index_t host_log_n = 22;
  int reps = 10;
  int warmup = 2;
  int batch = 3;
  double spin_us = 5000;
};

void usage(std::FILE* f) {
  std::fprintf(f,
               "usage: bench_fft [--log-n K] [--n2 M] [--host-log-n H] [--reps R] [--warmup W] [--batch B] "
               "[--spin-us S]\n"
               "  --log-n K       (1) transforms 2^K complex<float> (default 28 on GPUs)\n"
               "  --n2 M          (2) transforms an M x M complex<float> matrix (default 16384 on GPUs)\n"
               "  --host-log-n H  (3) transforms 2^H complex<double> on one host device (default 22)\n"
               "  --reps R        timed samples per measurement (default 10)\n"
               "  --warmup W      untimed samples before timing (default 2)\n"
               "  --batch B       calls queued back to back in each sample, time divided by B (default 3)\n"
               "  --spin-us S     GPU spin before each timed sample (default 5000)\n");
}

std::optional<Options> parse(int argc, char** argv) {
  Options o;
  const bool ok = tb::parse_options("bench_fft", argc, argv, usage,
                                    {{"--log-n", 1, 31, &o.log_n},
                                     {"--n2", 1, 1 << 17, &o.n2},
                                     {"--host-log-n", 1, 28, &o.host_log_n},
                                     {"--reps", 1, 100000, &o.reps},
                                     {"--warmup", 0, 100000, &o.warmup},
                                     {"--batch", 1, 1000, &o.batch},
                                     {"--spin-us", 0, 1000000, &o.spin_us}});
  if (!ok) return std::nullopt;
  return o;
}

// Bytes an FFT pass "moves": one read and one write of the data (GB/s columns for comparison only).
double fft_bytes(double elements, double element_bytes) { return 2.0 * elements * element_bytes; }

void row(const char* what, const std::string& where, const tb::stats& s, double bytes) {
  std::printf("  %-44s %-11s", what, where.c_str());
  tb::print_stats_columns(s, bytes);
  std::printf("\n");
}

// numpy.fft.fft of 2^k complex128 values: the median of `reps` calls in ms, or nullopt (with the
// reason printed) when python3 or numpy is missing.
std::optional<double> numpy_fft_ms(index_t k, int reps) {
  const std::string cmd =
      "python3 -c \"import numpy as np, timeit; x = np.random.rand(" + std::to_string(index_t(1) << k) +
      ") + 1j * np.random.rand(" + std::to_string(index_t(1) << k) +
      "); np.fft.fft(x); t = sorted(timeit.repeat(lambda: np.fft.fft(x), number=1, repeat=" + std::to_string(reps) +
      ")); print(t[len(t) // 2] * 1e3)\" 2>/dev/null";
  std::FILE* p = popen(cmd.c_str(), "r");
  if (p == nullptr) return std::nullopt;
  double ms = -1;
  const int got = std::fscanf(p, "%lf", &ms);
  const int rc = pclose(p);
  if (got != 1 || rc != 0 || !(ms > 0)) return std::nullopt;
  return ms;
}

double max_rel_diff(const std::vector<complex<float>>& a, const std::vector<complex<float>>& b) {
  double worst = 0, scale = 1e-30;
  for (auto v : b) scale = std::fmax(scale, std::hypot(double(v.real()), double(v.imag())));
  for (std::size_t i = 0; i < a.size() && i < b.size(); ++i)
    worst = std::fmax(worst, std::hypot(double(a[i].real() - b[i].real()), double(a[i].imag() - b[i].imag())) / scale);
  return worst;
}

}  // namespace

int main(int argc, char** argv) {
  const auto opt = parse(argc, argv);
  if (!opt) {
    usage(stderr);
    return 2;
  }
  Options o = *opt;
  int errors = 0;
  try {
    const tb::platform p = tb::choose_platform();
    const bool gpu = p.gpu;
    const int G = p.size();
    if (o.log_n < 0) o.log_n = gpu ? 28 : 20;
    if (o.n2 < 0) o.n2 = gpu ? 16384 : 1024;
    tb::print_backend(p, ", transforms through the host FFT", "");
    std::printf("\nhost FFT: %s\n", detail::fft::host_fft_name());
    std::printf("timing: %s\n", tb::timing_text(gpu, static_cast<long long>(o.spin_us), "host clock").c_str());
    tb::runner run{gpu, o.spin_us, o.warmup, o.reps};
    std::vector<tb::summary_row> rows;
    std::printf("\n%-46s %-11s", "", "");
    tb::print_stats_headings();
    std::printf("\n");
    const Device d0 = p.one[0];

    // (1) 1-D C2C on one device, against the plain library call on the same input.
    std::optional<double> c2c_ratio, scaling, numpy_ratio;
    {
      const index_t n = index_t(1) << o.log_n;
      auto re = rand<float>({n}, on(d0), memory::device);
      auto im = rand<float>({n}, on(d0), memory::device);
      Array<complex<float>, 1> x({n}, on(d0), memory::device);
      x = re + complex<float>(0, 1) * im;
      Array<complex<float>, 1> X = fft(x);
      const tb::stats ours = run.time(p.one, o.batch, [&] { X = fft(x); });
      row("(1) fft(x), complex<float>", p.one_label, ours, fft_bytes(double(n), 8));
#if defined(__CUDACC__)
      if (gpu) {
        tb::cuda::plain_cufft_c2c plan(d0, n);
        auto Y = zeros<complex<float>>({n}, on(d0), memory::device);
        const void* xp = x.layout().parts[0].ptr;
        void* yp = Y.layout().parts[0].ptr;
        const tb::stats plain = run.time(p.one, o.batch, [&] { plan.forward(xp, yp); });
        row("    plain cufftExecC2C, same input", p.one_label, plain, fft_bytes(double(n), 8));
        c2c_ratio = plain.median / ours.median;
        const index_t k = n < 65536 ? n : 65536;
        const double diff = max_rel_diff(to_host(X(range(0, k))), to_host(Y(range(0, k))));
        if (diff > 1e-5) {
          ++errors;
          std::printf("  WRONG RESULT: fft(x) differs from cufftExecC2C by %.3g (relative)\n", diff);
        }
      }
#endif
    }

    // (2) 2-D C2C, sharded along dim 1 over every device against one device.
    {
      const index_t m = o.n2;
      const double bytes = fft_bytes(double(m) * double(m), 8);
      auto a1 = rand<float>({m, m}, on(d0), memory::device);
      Array<complex<float>, 2> x1({m, m}, on(d0), memory::device);
      x1 = a1 + complex<float>(0, 1) * a1 * a1;
      a1 = Array<float, 2>();
      Array<complex<float>, 2> X1 = fft2(x1);
      const tb::stats one = run.time(p.one, 1, [&] { X1 = fft2(x1); });
      row("(2) fft2(x), complex<float>", p.one_label, one, bytes);
      if (G > 1) {
        Array<complex<float>, 2> xs = copy(x1, shard(1, p.all), memory::device);
        Array<complex<float>, 2> Xs = fft2(xs);
        const tb::stats all = run.time(p.all, 1, [&] { Xs = fft2(xs); });
        row("    fft2(x), x shard(1)", p.all_label, all, bytes);
        scaling = one.median / all.median;
        const index_t k = m < 256 ? m : 256;
        const auto a = to_host(X1(range(0, k), range(0, k)));
        const double diff = max_rel_diff(to_host(Xs(range(0, k), range(0, k))), a);
        if (diff > 1e-4) {
          ++errors;
          std::printf("  WRONG RESULT: sharded fft2 differs from one device's by %.3g (relative)\n", diff);
        }
      }
    }

    // (3) the host FFT against NumPy on this machine.
    {
      const index_t n = index_t(1) << o.host_log_n;
      const DeviceSet h1 = host_devices(1);
      tb::runner host_run{false, 0, o.warmup, o.reps};
      auto re = rand<double>({n}, on(h1[0]));
      Array<complex<double>, 1> x({n}, on(h1[0]));
      x = re + complex<double>(0, 1) * re;
      Array<complex<double>, 1> X = fft(x);
      const tb::stats ours = host_run.time(h1, 1, [&] { X = fft(x); });
      row("(3) fft(x), complex<double>", "1 host dev", ours, fft_bytes(double(n), 16));
      if (const auto np = numpy_fft_ms(o.host_log_n, o.reps)) {
        std::printf("  %-44s %-11s %9.4f\n", "    numpy.fft.fft (python3), same size", "host", *np);
        numpy_ratio = *np / ours.median;
      } else {
        std::printf("  %-44s skipped: python3 with numpy not found\n", "    numpy.fft.fft");
      }
    }
    tb::print_late_warning(run.late, static_cast<long long>(o.spin_us));

    rows.push_back({"(1) C2C " + tb::pow2(o.log_n) + " complex<float> vs cufftExecC2C", c2c_ratio, 0.97, true,
                    ">= 0.97x", gpu ? "" : "GPU only"});
    rows.push_back({"(2) fft2 " + std::to_string(o.n2) + "^2 " + p.all_label + " vs " + p.one_label, scaling, 2.5, true,
                    "report (aim >= 2.5x on 4)", G > 1 ? "" : "only 1 device"});
    rows.push_back({"(3) host fft " + tb::pow2(o.host_log_n) + " vs numpy.fft (numpy ms / ours)", numpy_ratio, 1.0,
                    true, "report", numpy_ratio ? "" : "no numpy"});
    std::printf("\n== summary: medians of %d ==\n", o.reps);
    tb::print_summary(rows, gpu, 56, 10, 26);
    if (errors) std::printf("\n%d error(s) above\n", errors);
  } catch (const std::exception& e) {
    std::printf("bench_fft: error: %s\n", e.what());
    return 1;
  }
  return errors ? 1 : 0;
}
