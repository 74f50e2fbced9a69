// SPDX-License-Identifier: Apache-2.0
// Dense solvers against plain cuSOLVER measured in the same run (issue 21, item 4):
//
//  (1) solve(A, b), A 16384 x 16384 float on one GPU, against a plain cusolverDnSgetrf +
//      cusolverDnSgetrs on the same buffers, with the copies of A and b a caller needs to keep
//      them (target >= 0.95x);
//  (2) a stack of matrices (512 x 512 x 16 per device) sharded along its last dim: solve on
//      every device against one device (report; ideal is the device count);
//  (3) cholesky, qr, eigh and svd of one matrix on one device (report: time and rate);
//  (4) solve(A, b) with A 32768 x 32768 float split by columns over every GPU (cusolverMg, A's
//      shards copied into its block-cyclic tiles) against the same solve on one GPU (report), and
//      cholesky(A) of the same split matrix (Tessera's own, split_cholesky.cpp) against one GPU's,
//      whose factor it must match (report). On host devices a split matrix is gathered on the
//      first one, so this row is GPU only.
//
// Timing: CUDA events on Tessera's streams behind a spin kernel (bench/support), medians of
// --reps samples; each call reads LAPACK's info back, so it ends with a host wait, as NumPy's and
// CuPy's do. On host devices the same program runs small sizes through LAPACKE and prints host
// figures, labelled as such.
//
//   bench_solver [--n N] [--small S] [--stack M] [--mg M] [--reps R] [--warmup W] [--spin-us S]
#include <tessera/tessera.hpp>

#include <bench/support/program.hpp>
#if defined(__CUDACC__)
#include <bench/support/solver_support.cuh>
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
  index_t n = -1, small = -1, stack = -1, mg = -1;  // -1: 16384, 4096, 512, 32768 on GPUs; smaller on host devices
  int reps = 5;
  int warmup = 1;
  double spin_us = 20000;
};

void usage(std::FILE* f) {
  std::fprintf(f,
               "usage: bench_solver [--n N] [--small S] [--stack M] [--mg M] [--reps R] [--warmup W] [--spin-us S]\n"
               "  --n N        solve's A is N x N float (default 16384 on GPUs, 1024 on host devices)\n"
               "  --small S    cholesky, qr, eigh, svd of an S x S float matrix (default 4096 / 256)\n"
               "  --stack M    the stack holds M x M matrices, 16 per device (default 512 / 64)\n"
               "  --mg M       the split solve's A is M x M float over every GPU (default 32768)\n"
               "  --reps R     timed samples per measurement (default 5)\n"
               "  --warmup W   untimed samples before timing (default 1)\n"
               "  --spin-us S  GPU spin before each timed sample (default 20000)\n");
}

std::optional<Options> parse(int argc, char** argv) {
  Options o;
  const bool ok = tb::parse_options("bench_solver", argc, argv, usage,
                                    {{"--n", 1, 1 << 17, &o.n},
                                     {"--small", 1, 1 << 16, &o.small},
                                     {"--stack", 1, 1 << 14, &o.stack},
                                     {"--mg", 1, 1 << 17, &o.mg},
                                     {"--reps", 1, 100000, &o.reps},
                                     {"--warmup", 0, 100000, &o.warmup},
                                     {"--spin-us", 0, 1000000, &o.spin_us}});
  if (!ok) return std::nullopt;
  return o;
}

void row(const char* what, const std::string& where, const tb::stats& s, double flops) {
  std::printf("  %-46s %-11s %9.3f %9.3f %10.2f GFLOP/s\n", what, where.c_str(), s.median, s.best,
              flops / (s.median * 1e-3) / 1e9);
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
    if (o.n < 0) o.n = gpu ? 16384 : 1024;
    if (o.small < 0) o.small = gpu ? 4096 : 256;
    if (o.stack < 0) o.stack = gpu ? 512 : 64;
    if (o.mg < 0) o.mg = gpu ? 32768 : 512;
    tb::print_backend(p, ", solvers through LAPACKE", "");
    std::printf("\nhost LAPACK: %s\n", detail::solver::host_lapack_name());
    std::printf("timing: %s\n", tb::timing_text(gpu, static_cast<long long>(o.spin_us), "host clock").c_str());
    tb::runner run{gpu, o.spin_us, o.warmup, o.reps};
    std::printf("\n%-48s %-11s %9s %9s %10s\n", "", "", "med ms", "best ms", "rate");
    const Device d0 = p.one[0];
    std::optional<double> solve_ratio, stack_scaling, mg_scaling, mg_chol_scaling;

    // (1) one large system on one device.
    {
      const index_t n = o.n;
      // Diagonally dominant (rand in [0, 1) plus n on the diagonal), so the solve is well posed.
      auto a = eval(rand<float>({n, n}, on(d0), memory::device) +
                    float(n) * cast<float>(iota<index_t>({n, n}, on(d0)) % (n + 1) == 0));
      auto b = rand<float>({n}, on(d0), memory::device);
      Array<float, 1> x = solve(a, b);
      const double flops = 2.0 / 3.0 * double(n) * double(n) * double(n) + 2.0 * double(n) * double(n);
      const tb::stats ours = run.time(p.one, 1, [&] { x = solve(a, b); }, tb::no_op{}, false);
      row("(1) solve(A, b), float", p.one_label, ours, flops);
#if defined(__CUDACC__)
      if (gpu) {
        tb::cuda::plain_cusolver plain(d0, static_cast<int>(n), 1);
        const float* ap = a.layout().parts[0].ptr;
        const float* bp = b.layout().parts[0].ptr;
        const tb::stats base = run.time(p.one, 1, [&] { plain.solve(ap, bp); });
        row("    plain cusolverDnSgetrf + getrs, same data", p.one_label, base, flops);
        solve_ratio = base.median / ours.median;
      }
#endif
      // The residual |A x - b| / (|A| |x|), max norms: the answer is right, not just fast.
      auto r = eval(matmul(a, x) - b);
      const double res = maximum(abs(r)) / (maximum(abs(a)) * maximum(abs(x)) * double(n));
      std::printf("  residual |A x - b| / (n |A| |x|) = %.3g\n", res);
      if (!(res < 1e-6)) {
        ++errors;
        std::printf("  WRONG RESULT: the residual of solve is %.3g\n", res);
      }
    }

    // (2) a stack of matrices sharded along its last dim: every device against one.
    {
      const index_t m = o.stack, per = 16;
      auto make = [&](const DeviceSet& ds) {
        const index_t batch = per * static_cast<index_t>(ds.size());
        auto a = eval(rand<float>({m, m, batch}, shard(2, ds), memory::device) +
                      float(m) * cast<float>(iota<index_t>({m, m, batch}, shard(2, ds)) % (m * m) % (m + 1) == 0));
        auto b = rand<float>({m, batch}, shard(1, ds), memory::device);
        return std::pair{a, b};
      };
      const double flops_one = double(per) * (2.0 / 3.0 * double(m) * m * m + 2.0 * double(m) * m);
      auto [a1, b1] = make(p.one);
      Array<float, 2> x1 = solve(a1, b1);
      const tb::stats one = run.time(p.one, 1, [&] { x1 = solve(a1, b1); }, tb::no_op{}, false);
      row("(2) solve, stack of 16 matrices per device", p.one_label, one, flops_one);
      if (G > 1) {
        auto [aa, ba] = make(p.all);
        Array<float, 2> xa = solve(aa, ba);
        const tb::stats all = run.time(p.all, 1, [&] { xa = solve(aa, ba); }, tb::no_op{}, false);
        row("    the same per device, every device", p.all_label, all, flops_one * G);
        stack_scaling = one.median / all.median * G;
      }
    }

    // (3) the other factorizations, one matrix on one device.
    {
      const index_t s = o.small;
      auto a = rand<float>({s, s}, on(d0), memory::device);
      auto spd = eval(matmul(a, transpose(a)) + float(s) * cast<float>(iota<index_t>({s, s}, on(d0)) % (s + 1) == 0));
      auto sym = eval(a + transpose(a));
      const double n3 = double(s) * double(s) * double(s);
      Array<float, 2> l = cholesky(spd);
      row("(3) cholesky(A)", p.one_label, run.time(p.one, 1, [&] { l = cholesky(spd); }, tb::no_op{}, false), n3 / 3);
      row("    qr(A)", p.one_label, run.time(p.one, 1, [&] { (void)qr(a); }, tb::no_op{}, false), 4.0 / 3.0 * n3);
      row("    eigh(A)", p.one_label, run.time(p.one, 1, [&] { (void)eigh(sym); }, tb::no_op{}, false), 4.0 / 3.0 * n3);
      row("    svd(A)", p.one_label, run.time(p.one, 1, [&] { (void)svd(a); }, tb::no_op{}, false), 4.0 * n3);
    }
    // (4) one system split by columns over every GPU, against one GPU.
    if (gpu && G > 1 && detail::solver::multi_gpu_available()) {
      const index_t n = o.mg;
      const double flops = 2.0 / 3.0 * double(n) * double(n) * double(n) + 2.0 * double(n) * double(n);
      const double flops_chol = double(n) * double(n) * double(n) / 3.0;
      tb::stats one, chol_one;
      {
        auto a = eval(rand<float>({n, n}, on(d0), memory::device) +
                      float(n) * cast<float>(iota<index_t>({n, n}, on(d0)) % (n + 1) == 0));
        auto b = rand<float>({n}, on(d0), memory::device);
        Array<float, 1> x = solve(a, b);
        one = run.time(p.one, 1, [&] { x = solve(a, b); }, tb::no_op{}, false);
        row("(4) solve(A, b), A on one GPU", p.one_label, one, flops);
        // Its lower triangle mirrored is diagonally dominant: cholesky factors it.
        Array<float, 2> l = cholesky(a);
        chol_one = run.time(p.one, 1, [&] { l = cholesky(a); }, tb::no_op{}, false);
        row("    cholesky(A), A on one GPU", p.one_label, chol_one, flops_chol);
      }
      auto a = eval(rand<float>({n, n}, shard(1, p.all), memory::device) +
                    float(n) * cast<float>(iota<index_t>({n, n}, shard(1, p.all)) % (n + 1) == 0));
      auto b = rand<float>({n}, on(d0), memory::device);
      Array<float, 1> x = solve(a, b);
      const tb::stats all = run.time(p.all, 1, [&] { x = solve(a, b); }, tb::no_op{}, false);
      row("    A split by columns (cusolverMg)", p.all_label, all, flops);
      mg_scaling = one.median / all.median;
      auto r = eval(matmul(copy(a, on(d0)), x) - b);
      const double res = maximum(abs(r)) / (maximum(abs(a)) * maximum(abs(x)) * double(n));
      std::printf("  residual of the split solve |A x - b| / (n |A| |x|) = %.3g\n", res);
      if (!(res < 1e-6)) {
        ++errors;
        std::printf("  WRONG RESULT: the residual of the split solve is %.3g\n", res);
      }
      Array<float, 2> l = cholesky(a);
      const tb::stats chol_all = run.time(p.all, 1, [&] { l = cholesky(a); }, tb::no_op{}, false);
      row("    cholesky(A), A split by columns", p.all_label, chol_all, flops_chol);
      mg_chol_scaling = chol_one.median / chol_all.median;
      // Against one GPU's factor, the strictly lower part on its own scale: with A's diagonal
      // about n, L's diagonal (about sqrt(n)) would hide errors below it.
      const Array<float, 2> l1 = cholesky(copy(a, on(d0)));
      const auto idx = iota<index_t>({n, n}, on(d0));
      // Row i = idx % n; idx / n is the true quotient j + i / n (integers divide as reals), which
      // i exceeds exactly when i > j.
      const Array<float, 2> below = cast<float>(idx % n > idx / n);
      const double diff = maximum(abs((copy(l, on(d0)) - l1) * below)) / maximum(abs(l1 * below));
      std::printf("  split cholesky against one GPU's, below the diagonal: max |L - L1| / max |L1| = %.3g\n", diff);
      if (!(diff < 1e-3)) {
        ++errors;
        std::printf("  WRONG RESULT: the split cholesky differs from one GPU's by %.3g\n", diff);
      }
    }
    tb::print_late_warning(run.late, static_cast<long long>(o.spin_us));

    std::vector<tb::summary_row> rows;
    rows.push_back({"(1) solve " + std::to_string(o.n) + "^2 float vs Sgetrf + Sgetrs", solve_ratio, 0.95, true,
                    ">= 0.95x", gpu ? "" : "GPU only"});
    rows.push_back({"(2) stack solve, " + p.all_label + " / 1 (ideal " + std::to_string(G) + ")", stack_scaling,
                    0.0, true, "report", G > 1 ? "" : "only 1 device"});
    rows.push_back({"(4) cusolverMg solve " + std::to_string(o.mg) + "^2, " + p.all_label + " / 1", mg_scaling, 0.0,
                    true, "report",
                    !gpu ? "GPU only" : G < 2 ? "only 1 GPU" : !detail::solver::multi_gpu_available() ? "no cusolverMg" : ""});
    rows.push_back({"(4) split cholesky " + std::to_string(o.mg) + "^2, " + p.all_label + " / 1", mg_chol_scaling, 0.0,
                    true, "report",
                    !gpu ? "GPU only" : G < 2 ? "only 1 GPU" : !detail::solver::multi_gpu_available() ? "no cusolverMg" : ""});
    std::printf("\n== summary: medians of %d ==\n", o.reps);
    tb::print_summary(rows, gpu, 50, 10, 12);
    if (errors) std::printf("\n%d error(s) above\n", errors);
  } catch (const std::exception& e) {
    std::printf("bench_solver: error: %s\n", e.what());
    return 1;
  }
  return errors ? 1 : 0;
}
