// SPDX-License-Identifier: Apache-2.0
// Sparse products against plain cuSPARSE measured in the same run (issue 23, item 4):
//
//  (1) matmul(S, x), S the 2-D 5-point Laplacian of 2^26 rows (8192 x 8192 grid, float) on one GPU,
//      against a plain cusparseSpMV on the same CSR arrays and vectors, with its handle,
//      descriptors and workspace made once outside the timing (target >= 0.95x);
//  (2) the same product with S sharded by rows over every GPU and x sharded like S's rows (the
//      gather plan exchanges the ghost rows each call) against one GPU (target >= 3.6x on 4);
//  (3) conjugate gradients on the 2-D Poisson matrix of a 4096 x 4096 grid: iterations per second
//      on one GPU and on every GPU (report). Each iteration is one SpMV, two dot products read to
//      the host and three vector updates, as a CG written with Tessera's operations is.
//
// Timing: CUDA events on Tessera's streams behind a spin kernel (bench/support), medians of
// --reps samples. On host devices the same program runs small grids through the host loops and
// prints host figures, labelled as such.
//
//   bench_sparse [--grid G] [--cg-grid C] [--cg-iters I] [--reps R] [--warmup W] [--spin-us S]
#include <tessera/tessera.hpp>
#include <tessera/sparse.hpp>

#include <bench/support/program.hpp>
#if defined(__CUDACC__)
#include <bench/support/sparse_support.cuh>
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
  index_t grid = -1, cg_grid = -1;  // -1: 8192 and 4096 on GPUs, 1024 and 256 on host devices
  int cg_iters = 50;
  int reps = 10;
  int warmup = 2;
  double spin_us = 5000;
};

void usage(std::FILE* f) {
  std::fprintf(f,
               "usage: bench_sparse [--grid G] [--cg-grid C] [--cg-iters I] [--reps R] [--warmup W] [--spin-us S]\n"
               "  --grid G      SpMV on the Laplacian of a G x G grid (default 8192: 2^26 rows; 1024 on host devices)\n"
               "  --cg-grid C   CG on a C x C grid (default 4096; 256 on host devices)\n"
               "  --cg-iters I  CG iterations per timed sample (default 50)\n"
               "  --reps R      timed samples per measurement (default 10)\n"
               "  --warmup W    untimed samples before timing (default 2)\n"
               "  --spin-us S   GPU spin before each timed sample (default 5000)\n");
}

std::optional<Options> parse(int argc, char** argv) {
  Options o;
  const bool ok = tb::parse_options("bench_sparse", argc, argv, usage,
                                    {{"--grid", 1, 1 << 16, &o.grid},
                                     {"--cg-grid", 1, 1 << 15, &o.cg_grid},
                                     {"--cg-iters", 1, 100000, &o.cg_iters},
                                     {"--reps", 1, 100000, &o.reps},
                                     {"--warmup", 0, 100000, &o.warmup},
                                     {"--spin-us", 0, 1000000, &o.spin_us}});
  if (!ok) return std::nullopt;
  return o;
}

void row(const char* what, const std::string& where, const tb::stats& s, double bytes) {
  std::printf("  %-52s %-11s", what, where.c_str());
  tb::print_stats_columns(s, bytes);
  std::printf("\n");
}

// CG iterations on S x = b from x = 0 (no convergence test: a fixed count, the work of a solve).
template <class T>
double cg_iterations(const SparseMatrix<T>& S, const Array<T, 1>& b, int iters) {
  Array<T, 1> x = zeros<T>({S.rows()}, shard(0, S.devices()));
  Array<T, 1> r = b;
  Array<T, 1> p = r;
  T rs = sum(r * r);
  for (int k = 0; k < iters; ++k) {
    auto Ap = matmul(S, p);
    const T alpha = rs / sum(p * Ap);
    x += alpha * p;
    r -= alpha * Ap;
    const T next = sum(r * r);
    p = r + (next / rs) * p;
    rs = next;
  }
  return std::sqrt(double(rs));
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
    if (o.grid < 0) o.grid = gpu ? 8192 : 1024;
    if (o.cg_grid < 0) o.cg_grid = gpu ? 4096 : 256;
    tb::print_backend(p, ", sparse products through host loops", "");
    std::printf("\ntiming: %s\n", tb::timing_text(gpu, static_cast<long long>(o.spin_us), "host clock").c_str());
    tb::runner run{gpu, o.spin_us, o.warmup, o.reps};
    std::printf("\n%-54s %-11s", "", "");
    tb::print_stats_headings();
    std::printf("\n");
    const Device d0 = p.one[0];
    const index_t g = o.grid, rows = g * g;
    std::optional<double> spmv_ratio, spmv_scaling;
    // Bytes one SpMV moves at least: values and column indices, row offsets, x and y.
    auto traffic = [](index_t m, index_t nnz) { return double(nnz) * 8 + double(m) * 4 + double(m) * 8; };

    // (1) one GPU, against plain cusparseSpMV.
    tb::stats one;
    auto S1 = laplacian_2d<float>(g, g, on(d0));
    {
      const auto& S = S1;
      auto x = rand<float>({rows}, on(d0), memory::device);
      Array<float, 1> y = matmul(S, x);
      const double bytes = traffic(rows, S.nnz());
      one = run.time(p.one, 1, [&] { y = matmul(S, x); });
      row(("(1) matmul(S, x), 2-D Laplacian " + std::to_string(rows) + " rows").c_str(), p.one_label, one, bytes);
#if defined(__CUDACC__)
      if (gpu) {
        const auto& s = S.s();
        Array<float, 1> yb = zeros<float>({rows}, on(d0), memory::device);
        tb::cuda::plain_cusparse plain(d0, rows, rows, S.nnz(), s.rowptr.layout().parts[0].ptr,
                                       s.col.layout().parts[0].ptr, S.values().layout().parts[0].ptr,
                                       x.layout().parts[0].ptr, yb.layout().parts[0].ptr);
        const tb::stats base = run.time(p.one, 1, [&] { plain.spmv(); });
        row("    plain cusparseSpMV, same arrays", p.one_label, base, bytes);
        spmv_ratio = base.median / one.median;
        const double diff = maximum(abs(y - yb));
        std::printf("  max |ours - cusparseSpMV| = %.3g\n", diff);
        if (!(diff <= 1e-5)) {
          ++errors;
          std::printf("  WRONG RESULT: matmul(S, x) differs from cusparseSpMV by %.3g\n", diff);
        }
      }
#endif
    }
    // (2) sharded over every device, x sharded like S's rows.
    if (G > 1) {
      auto S = laplacian_2d<float>(g, g, shard(0, p.all));
      auto x = rand<float>({rows}, shard(0, p.all), memory::device);
      Array<float, 1> y = matmul(S, x);
      const tb::stats all = run.time(p.all, 1, [&] { y = matmul(S, x); });
      row("(2) the same, S and x sharded by rows", p.all_label, all, traffic(rows, S.nnz()));
      spmv_scaling = one.median / all.median;
      // The sharded product against the one-device product of the same x.
      auto x1 = copy(x, on(d0));
      const double diff = maximum(abs(copy(y, on(d0)) - matmul(S1, x1)));
      std::printf("  max |sharded - one device| = %.3g\n", diff);
      if (!(diff <= 1e-5)) {
        ++errors;
        std::printf("  WRONG RESULT: the sharded product differs from one device's by %.3g\n", diff);
      }
    }
    // (3) CG iterations per second.
    std::optional<double> cg_one, cg_all;
    {
      const index_t c = o.cg_grid;
      auto run_cg = [&](const DeviceSet& ds, const std::string& label) {
        auto S = laplacian_2d<float>(c, c, shard(0, ds));
        auto b = ones<float>({c * c}, shard(0, ds), memory::device);
        double res = cg_iterations(S, b, 2);
        const tb::stats s = run.time(ds, 1, [&] { res = cg_iterations(S, b, o.cg_iters); }, tb::no_op{}, false);
        const double its = o.cg_iters / (s.median * 1e-3);
        std::printf("  (3) CG on a %lld^2 grid, %d iterations %-14s %-11s %9.3f ms  %10.1f iterations/s  |r| %.3g\n",
                    static_cast<long long>(c), o.cg_iters, "", label.c_str(), s.median, its, res);
        if (!std::isfinite(res)) {
          ++errors;
          std::printf("  WRONG RESULT: the CG residual is not finite\n");
        }
        return its;
      };
      cg_one = run_cg(p.one, p.one_label);
      if (G > 1) cg_all = run_cg(p.all, p.all_label);
    }
    tb::print_late_warning(run.late, static_cast<long long>(o.spin_us));

    std::vector<tb::summary_row> rows_out;
    rows_out.push_back({"(1) SpMV " + std::to_string(rows) + " rows vs cusparseSpMV", spmv_ratio, 0.95, true,
                        ">= 0.95x", gpu ? "" : "GPU only"});
    rows_out.push_back({"(2) SpMV, " + p.all_label + " / 1", spmv_scaling, G >= 4 ? 3.6 : 0.9 * G, true,
                        G >= 4 ? ">= 3.6x (4 GPUs)" : ">= 0.9 x devices", G > 1 ? "" : "only 1 device"});
    rows_out.push_back({"(3) CG iterations/s, 1 device", cg_one, 0.0, true, "report", "", "it/s"});
    rows_out.push_back({"(3) CG iterations/s, " + p.all_label, cg_all, 0.0, true, "report",
                        G > 1 ? "" : "only 1 device", "it/s"});
    std::printf("\n== summary: medians of %d ==\n", o.reps);
    tb::print_summary(rows_out, gpu, 50, 12, 18);
    if (errors) std::printf("\n%d error(s) above\n", errors);
  } catch (const std::exception& e) {
    std::printf("bench_sparse: error: %s\n", e.what());
    return 1;
  }
  return errors ? 1 : 0;
}
