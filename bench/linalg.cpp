// SPDX-License-Identifier: Apache-2.0
// Sharded linear algebra against plain cuBLAS measured in the same run (issue: "Sharded linear
// algebra through cuBLAS and NCCL"):
//
//  (1) the CUDA.jl seed: y = W * x, W 10000 x 300000 float, on one GPU: matmul(W, x) against a
//      plain cublasSgemv on the same buffers (target >= 0.97x);
//  (2) the same product with W split along columns over every GPU (x split alike, the partials
//      allreduced): one-GPU time / all-GPU time against ideal scaling (target >= 0.95x);
//  (3) C = A * B, 8192^3 float, on one GPU: matmul(A, B) against a plain cublasSgemm (>= 0.97x);
//  (4) the broadcast form sum(W .* x_row, dims(1)) on one GPU, in bytes read per second against
//      the cudaMemcpy bandwidth (>= 0.8x).
//
// Timing: CUDA events on Tessera's streams behind a spin kernel, --batch calls per sample,
// medians of --reps samples (bench/support). On host devices the same program runs small sizes
// and prints host figures, labelled as such, against the same product through the host BLAS.
//
//   bench_linalg [--m M] [--n N] [--gemm G] [--reps R] [--warmup W] [--batch B] [--spin-us S]
#include <tessera/tessera.hpp>

#include <bench/support/program.hpp>
#if defined(__CUDACC__)
#include <bench/support/blas_support.cuh>
#endif

#include <cmath>
#include <cstdio>
#include <exception>
#include <optional>
#include <string>
#include <vector>

using namespace tessera;
namespace tb = tessera::bench;
using tb::gbps;

namespace {

struct Options {
  index_t m = -1, n = -1, gemm = -1;  // -1: 10000, 300000, 8192 on GPUs; small on host devices
  int reps = 10;
  int warmup = 2;
  int batch = 3;
  double spin_us = 5000;
};

void usage(std::FILE* f) {
  std::fprintf(f,
               "usage: bench_linalg [--m M] [--n N] [--gemm G] [--reps R] [--warmup W] [--batch B] [--spin-us S]\n"
               "  --m M, --n N  the matrix-vector product's W is M x N (default 10000 x 300000 on GPUs)\n"
               "  --gemm G      the matrix product is G x G times G x G (default 8192 on GPUs)\n"
               "  --reps R      timed samples per measurement (default 10)\n"
               "  --warmup W    untimed samples before timing (default 2)\n"
               "  --batch B     calls queued back to back in each sample, time divided by B (default 3)\n"
               "  --spin-us S   GPU spin before each timed sample (default 5000)\n");
}

std::optional<Options> parse(int argc, char** argv) {
  Options o;
  const bool ok = tb::parse_options("bench_linalg", argc, argv, usage,
                                    {{"--m", 1, index_t(1) << 20, &o.m},
                                     {"--n", 1, index_t(1) << 30, &o.n},
                                     {"--gemm", 1, 1 << 16, &o.gemm},
                                     {"--reps", 1, 100000, &o.reps},
                                     {"--warmup", 0, 100000, &o.warmup},
                                     {"--batch", 1, 1000, &o.batch},
                                     {"--spin-us", 0, 1000000, &o.spin_us}});
  if (!ok) return std::nullopt;
  return o;
}

void row(const char* what, const std::string& where, const tb::stats& s, double bytes) {
  std::printf("  %-44s %-11s", what, where.c_str());
  tb::print_stats_columns(s, bytes);
  std::printf("\n");
}

// The largest relative difference between two host vectors (spot check of results).
double max_rel_diff(const std::vector<float>& a, const std::vector<float>& b) {
  double worst = 0, scale = 1e-30;
  for (float v : b) scale = std::fmax(scale, std::fabs(double(v)));
  for (std::size_t i = 0; i < a.size() && i < b.size(); ++i)
    worst = std::fmax(worst, std::fabs(double(a[i]) - double(b[i])) / scale);
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
    if (o.m < 0) o.m = gpu ? 10000 : 500;
    if (o.n < 0) o.n = gpu ? 300000 : 6000;
    if (o.gemm < 0) o.gemm = gpu ? 8192 : 256;
    tb::print_backend(p, ", products through the host BLAS", "");
    std::printf("\nhost BLAS: %s\n", detail::blas::host_blas_name());
    std::printf("timing: %s\n", tb::timing_text(gpu, static_cast<long long>(o.spin_us), "host clock").c_str());
    tb::runner run{gpu, o.spin_us, o.warmup, o.reps};
    std::vector<tb::summary_row> rows;
    const double mv_bytes = 4.0 * (double(o.m) * double(o.n) + double(o.n) + double(o.m));
    std::printf("\n%-46s %-11s", "", "");
    tb::print_stats_headings();
    std::printf("\n");

    // (1) one device: matmul against the plain library call on the same buffers.
    const Device d0 = p.one[0];
    std::optional<double> mv_ratio, gemm_ratio, scaling, bcast_ratio;
    tb::stats mv_one;
    {
      auto w = rand<float>({o.m, o.n}, on(d0), memory::device);
      auto x = rand<float>({o.n}, on(d0), memory::device);
      Array<float, 1> y = matmul(w, x);
      mv_one = run.time(p.one, o.batch, [&] { y = matmul(w, x); });
      row("(1) matmul(W, x)", p.one_label, mv_one, mv_bytes);
#if defined(__CUDACC__)
      if (gpu) {
        tb::cuda::plain_cublas blas(d0);
        auto yb = zeros<float>({o.m}, on(d0), memory::device);
        const float* wp = w.layout().parts[0].ptr;
        const float* xp = x.layout().parts[0].ptr;
        float* yp = yb.layout().parts[0].ptr;
        const tb::stats plain = run.time(p.one, o.batch, [&] { blas.sgemv(o.m, o.n, wp, xp, yp); });
        row("    plain cublasSgemv, same buffers", p.one_label, plain, mv_bytes);
        mv_ratio = plain.median / mv_one.median;
        const double diff = max_rel_diff(to_host(y), to_host(yb));
        if (diff > 1e-5) {
          ++errors;
          std::printf("  WRONG RESULT: matmul(W, x) differs from cublasSgemv by %.3g (relative)\n", diff);
        }
      }
#endif
      // (4) the broadcast-multiply-then-reduce form, against the memcpy bandwidth.
      auto x_row = rand<float>({1, o.n}, on(d0), memory::device);
      Array<float, 2> s = sum(w * x_row, dims(1));
      const tb::stats red = run.time(p.one, o.batch, [&] { s = sum(w * x_row, dims(1)); });
      row("(4) sum(W .* x_row, dims(1))", p.one_label, red, mv_bytes);
      const tb::stats copy = run.memcpy(d0, static_cast<std::size_t>(o.m * o.n) * 4, o.batch);
      row("    memcpy of W's bytes (read + write)", p.one_label, copy, 8.0 * double(o.m) * double(o.n));
      bcast_ratio = gbps(mv_bytes, red.median) / gbps(8.0 * double(o.m) * double(o.n), copy.median);
    }

    // (2) W split along columns over every device.
    if (G > 1) {
      auto w = rand<float>({o.m, o.n}, shard(1, p.all), memory::device);
      auto x = rand<float>({o.n}, shard(0, p.all), memory::device);
      Array<float, 1> y = matmul(w, x);
      const tb::stats all = run.time(p.all, o.batch, [&] { y = matmul(w, x); });
      row("(2) matmul(W, x), W shard(1), x shard(0)", p.all_label, all, mv_bytes);
      scaling = mv_one.median / all.median / double(G);
    }

    // (3) the matrix product.
    {
      const index_t g = o.gemm;
      auto a = rand<float>({g, g}, on(d0), memory::device);
      auto b = rand<float>({g, g}, on(d0), memory::device);
      Array<float, 2> c = matmul(a, b);
      const tb::stats mm = run.time(p.one, 1, [&] { c = matmul(a, b); });
      const double flops = 2.0 * double(g) * double(g) * double(g);
      std::printf("  %-44s %-11s %9.4f %9.4f %10.2f TFLOP/s\n", "(3) matmul(A, B)", p.one_label.c_str(), mm.median,
                  mm.best, flops / (mm.median * 1e-3) / 1e12);
#if defined(__CUDACC__)
      if (gpu) {
        tb::cuda::plain_cublas blas(d0);
        auto cb = zeros<float>({g, g}, on(d0), memory::device);
        const float* ap = a.layout().parts[0].ptr;
        const float* bp = b.layout().parts[0].ptr;
        float* cp = cb.layout().parts[0].ptr;
        const tb::stats plain = run.time(p.one, 1, [&] { blas.sgemm(g, g, g, ap, bp, cp); });
        std::printf("  %-44s %-11s %9.4f %9.4f %10.2f TFLOP/s\n", "    plain cublasSgemm, same buffers",
                    p.one_label.c_str(), plain.median, plain.best, flops / (plain.median * 1e-3) / 1e12);
        gemm_ratio = plain.median / mm.median;
        const double diff = max_rel_diff(to_host(c(range(0, 64), _)), to_host(cb(range(0, 64), _)));
        if (diff > 1e-4) {
          ++errors;
          std::printf("  WRONG RESULT: matmul(A, B) differs from cublasSgemm by %.3g (relative)\n", diff);
        }
      }
#endif
    }
    tb::print_late_warning(run.late, static_cast<long long>(o.spin_us));

    const std::string seed = std::to_string(o.m) + " x " + std::to_string(o.n);
    rows.push_back({"(1) matvec " + seed + " vs cublasSgemv, " + p.one_label, mv_ratio, 0.97, true, ">= 0.97x",
                    gpu ? "" : "GPU only"});
    rows.push_back({"(2) matvec scaling / ideal, " + p.all_label, scaling, 0.95, true, ">= 0.95x",
                    G > 1 ? "" : "only 1 device"});
    rows.push_back({"(3) sgemm " + std::to_string(o.gemm) + "^3 vs cublasSgemm", gemm_ratio, 0.97, true, ">= 0.97x",
                    gpu ? "" : "GPU only"});
    rows.push_back({"(4) sum(W .* x_row, dims(1)) vs memcpy", bcast_ratio, 0.8, true, ">= 0.80x", ""});
    std::printf("\n== summary: medians of %d ==\n", o.reps);
    tb::print_summary(rows, gpu, 48, 10, 12);
    if (errors) std::printf("\n%d error(s) above\n", errors);
  } catch (const std::exception& e) {
    std::printf("bench_linalg: error: %s\n", e.what());
    return 1;
  }
  return errors ? 1 : 0;
}
