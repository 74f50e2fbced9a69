// SPDX-License-Identifier: Apache-2.0
// Data movement and stencils against baselines measured in the same run (issue: "Data movement
// between devices: copies, re-sharding, halos and stencils"):
//
//  (1) peer copies: copyto(y, x) from an array on GPU a to one on GPU b, for every ordered pair,
//      against the bare copy on the same buffers: rt::copy_between, one cudaMemcpyPeerAsync on the
//      destination's stream between two stream-ordering events, without copyto's planning
//      (target >= 0.95x);
//  (2) re-sharding: copyto(y, x) of a 1 GiB float matrix sharded along dim 1 into one sharded
//      along dim 0 over every device, in GB/s moved between devices against (1)'s peer figure,
//      beside the same all-to-all in plain CUDA (one stream per pair, strided and contiguous
//      reads) and as grouped NCCL send/recv of contiguous pieces;
//  (3) 2-D Jacobi, 16384^2 float, columns split with halo(1): one sweep (a fused kernel over the
//      shifted views) plus update_halo, in iterations per second on one device and on every
//      device, one after the other and with the exchange hidden behind the sweep's interior
//      (hide_communication; target >= 0.95x of linear at 16384^2 and at 20480^2, --n2), weak
//      scaling with a 16384^2 tile per device (16384 x 16384 G over G devices against one tile on
//      one; target >= 0.97x), and in bytes per second (one read and one write of the grid per
//      sweep) against the cudaMemcpy bandwidth on one GPU (target >= 0.93x, issue 22);
//  (4) 3-D 7-point diffusion on one device, float and double (T2 = T + c Ci lap(T) over the
//      interior of an N^3 grid, ParallelStencil's diffusion3D): T_eff = A_eff / t, A_eff = 3 N^3
//      elements (T read, Ci read, T2 written), against the memcpy bandwidth (target >= 0.93x).
//
// Timing: CUDA events on Tessera's streams behind a spin kernel, --batch calls per sample,
// medians of --reps samples (bench/support). On host devices the same program runs small sizes
// and prints host figures, labelled as such, against std::memcpy.
//
//   bench_stencil [--n N] [--n2 N2] [--n3 N3] [--peer-mib M] [--reshard-mib R] [--reps R] [--warmup W] [--batch B]
//                 [--spin-us S]
#include <tessera/tessera.hpp>

#include <bench/support/program.hpp>

#include <algorithm>
#include <cstdio>
#include <exception>
#include <optional>
#include <string>
#include <utility>
#include <vector>

using namespace tessera;
namespace tb = tessera::bench;
using tb::gbps;

namespace {

struct Options {
  index_t n = -1;             // Jacobi grid: 16384 on GPUs, 1024 on host devices
  index_t n2 = -1;            // second strong-scaling grid: 20480 on GPUs, 1280 on host devices
  index_t n3 = -1;            // 3-D diffusion grid: 512^3 on GPUs, 64^3 on host devices
  index_t peer_mib = -1;      // 256 on GPUs, 16 on host devices
  index_t reshard_mib = -1;   // 1024 on GPUs, 64 on host devices
  int reps = 10;
  int warmup = 2;
  int batch = 5;
  double spin_us = 5000;
};

void usage(std::FILE* f) {
  std::fprintf(f,
               "usage: bench_stencil [--n N] [--peer-mib M] [--reshard-mib R] [--reps R] [--warmup W] [--batch B] "
               "[--spin-us S]\n"
               "  --n N            the Jacobi grid is N x N float (default 16384 on GPUs); weak scaling: N x N\n"
               "                   per device\n"
               "  --n2 N2          the second strong-scaling Jacobi grid (default 20480 on GPUs)\n"
               "  --n3 N3          the 3-D diffusion grid is N3^3 (default 512 on GPUs, 64 on host devices)\n"
               "  --peer-mib M     bytes of each peer copy, in MiB (default 256 on GPUs)\n"
               "  --reshard-mib R  size of the re-sharded matrix, in MiB (default 1024 on GPUs)\n"
               "  --reps R         timed samples per measurement (default 10)\n"
               "  --warmup W       untimed samples before timing (default 2)\n"
               "  --batch B        calls queued back to back in each sample, time divided by B (default 5)\n"
               "  --spin-us S      GPU spin before each timed sample (default 5000)\n");
}

std::optional<Options> parse(int argc, char** argv) {
  Options o;
  const bool ok = tb::parse_options("bench_stencil", argc, argv, usage,
                                    {{"--n", 8, index_t(1) << 17, &o.n},
                                     {"--n2", 8, index_t(1) << 17, &o.n2},
                                     {"--n3", 8, index_t(1) << 11, &o.n3},
                                     {"--peer-mib", 1, index_t(1) << 16, &o.peer_mib},
                                     {"--reshard-mib", 1, index_t(1) << 16, &o.reshard_mib},
                                     {"--reps", 1, 100000, &o.reps},
                                     {"--warmup", 0, 100000, &o.warmup},
                                     {"--batch", 1, 1000, &o.batch},
                                     {"--spin-us", 0, 1000000, &o.spin_us}});
  if (!ok) return std::nullopt;
  return o;
}

void row(const std::string& what, const std::string& where, const tb::stats& s, double bytes) {
  std::printf("  %-46s %-11s", what.c_str(), where.c_str());
  tb::print_stats_columns(s, bytes);
  std::printf("\n");
}

#if defined(__CUDACC__)
// The plain CUDA baseline: the textbook 5-point kernel, one thread per interior point.
__global__ void plain_jacobi(const float* u, float* v, int n) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x + 1;
  const int j = blockIdx.y + 1;
  if (i >= n - 1) return;
  const long long c = i + static_cast<long long>(j) * n;
  v[c] = 0.25f * (u[c - 1] + u[c + 1] + u[c - n] + u[c + n]);
}
#endif

// One Jacobi sweep from u into v, then v's halo exchange: one after the other, or with the
// exchange hidden behind the sweep's interior (hide_communication, examples/jacobi.cpp).
void sweep(Array<float, 2>& v, const Array<float, 2>& u, bool hidden) {
  const index_t m = u.size(0), n = u.size(1);
  const auto I = range(1, m - 1), J = range(1, n - 1);
  auto body = [&] {
    v(I, J) = 0.25f * (u(range(0, m - 2), J) + u(range(2, m), J) + u(I, range(0, n - 2)) + u(I, range(2, n)));
  };
  if (hidden) {
    hide_communication(v, body);
  } else {
    body();
    update_halo(v);
  }
}

// One step of 3-D diffusion from u into v over the interior (ParallelStencil's diffusion3D, with
// lam * dt / h^2 folded into 0.1).
template <class T>
void diffuse(Array<T, 3>& v, const Array<T, 3>& u, const Array<T, 3>& ci) {
  const index_t n = u.size(0);
  const auto I = range(1, n - 1), L = range(0, n - 2), R = range(2, n);
  v(I, I, I) = u(I, I, I) + T(0.1) * ci(I, I, I) *
                                (u(L, I, I) + u(R, I, I) + u(I, L, I) + u(I, R, I) + u(I, I, L) + u(I, I, R) -
                                 T(6) * u(I, I, I));
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
    if (o.n2 < 0) o.n2 = gpu ? 20480 : 1280;
    if (o.n3 < 0) o.n3 = gpu ? 512 : 64;
    if (o.peer_mib < 0) o.peer_mib = gpu ? 256 : 16;
    if (o.reshard_mib < 0) o.reshard_mib = gpu ? 1024 : 64;
    tb::print_backend(p, ", against std::memcpy", "");
    std::printf("\ntiming: %s\n", tb::timing_text(gpu, static_cast<long long>(o.spin_us), "host clock").c_str());
    tb::runner run{gpu, o.spin_us, o.warmup, o.reps};
    std::printf("\n%-48s %-11s", "", "");
    tb::print_stats_headings();
    std::printf("\n");
    std::optional<double> peer_ratio, reshard_of_peer, reshard_of_plain, scaling, scaling2, weak, hbm_ratio;
    double worst_peer = 0, peer_gbps = 0;

    // (1) every ordered pair of devices.
    const index_t pn = o.peer_mib * (index_t(1) << 20) / 4;
    for (int a = 0; a < G; ++a) {
      for (int b = 0; b < G; ++b) {
        if (a == b) continue;
        const Device da = p.all[a], db = p.all[b];
        auto x = rand<float>({pn}, on(da), memory::device);
        auto y = zeros<float>({pn}, on(db), memory::device);
        const DeviceSet pair{da, db};
        const std::string where = da.name() + "->" + db.name();
        const tb::stats t = run.time(pair, o.batch, [&] { copyto(y, x); });
        row("(1) copyto(y on b, x on a)", where, t, 4.0 * double(pn));
        float* yp = y.layout().parts[0].ptr;
        const float* xp = x.layout().parts[0].ptr;
        const tb::stats plain = run.time(pair, o.batch, [&] {
          detail::rt::copy_between(db.id(), yp, da.id(), xp, static_cast<std::size_t>(pn) * 4);
        });
        row("    bare cudaMemcpyPeerAsync (rt::copy_between)", where, plain, 4.0 * double(pn));
        if (to_host(y(range(pn - 4, pn))) != to_host(x(range(pn - 4, pn)))) {
          ++errors;
          std::printf("  WRONG RESULT: the copy from %s differs from its source\n", where.c_str());
        }
        const double r = plain.median / t.median;
        worst_peer = peer_ratio ? std::min(worst_peer, r) : r;
        peer_ratio = worst_peer;
        peer_gbps = std::max(peer_gbps, gbps(4.0 * double(pn), plain.median));
      }
    }
    if (G < 2) std::printf("  (1) peer copies: skipped, one device\n");

    // (2) re-sharding a matrix from dim 1 to dim 0.
    if (G > 1) {
      index_t rows = 1;
      while (rows * rows * 4 < o.reshard_mib * (index_t(1) << 20)) rows *= 2;
      auto x = rand<float>({rows, rows}, shard(1, p.all), memory::device);
      auto y = zeros<float>({rows, rows}, shard(0, p.all), memory::device);
      const tb::stats t = run.time(p.all, 1, [&] { copyto(y, x); });
      const double bytes = 4.0 * double(rows) * double(rows);
      const double moved = bytes * double(G - 1) / double(G);  // what leaves its device
      row("(2) copyto: shard(1) -> shard(0), " + std::to_string(rows) + "^2", p.all_label, t, bytes);
      std::printf("      %.1f GB/s moved between devices (each device sends (G-1)/G of its block), %.1f GB/s per "
                  "device; peer copy of one pair in (1): %.1f GB/s\n",
                  gbps(moved, t.median), gbps(moved / G, t.median), peer_gbps);
      if (peer_gbps > 0) reshard_of_peer = gbps(moved / G, t.median) / peer_gbps;
#if defined(__CUDACC__)
      // What plain CUDA reaches with the same pattern: Tessera's batch against the machine.
      if (gpu) {
        for (const bool pitched : {true, false}) {
          try {
            const tb::stats a = tb::summarize(
                tb::cuda::alltoall_ms(p.all, static_cast<std::size_t>(rows), pitched, o.warmup, o.reps, o.spin_us));
            row(std::string("    plain CUDA all-to-all, one stream per pair, ") +
                    (pitched ? "strided reads (as the re-shard)" : "contiguous reads"),
                p.all_label, a, bytes);
            std::printf("      %.1f GB/s per device (%.3fx of one pair's peer copy)\n", gbps(moved / G, a.median),
                        peer_gbps > 0 ? gbps(moved / G, a.median) / peer_gbps : 0.0);
            if (pitched) reshard_of_plain = a.median / t.median;
          } catch (const std::exception& e) {
            std::printf("  plain CUDA all-to-all failed: %s\n", e.what());
          }
        }
        try {
          const tb::stats a = tb::summarize(
              tb::cuda::nccl_alltoall_ms(p.all, static_cast<std::size_t>(rows), o.warmup, o.reps, o.spin_us));
          row("    NCCL all-to-all, grouped send/recv, contiguous pieces", p.all_label, a, bytes);
          std::printf("      %.1f GB/s per device (%.3fx of one pair's peer copy)\n", gbps(moved / G, a.median),
                      peer_gbps > 0 ? gbps(moved / G, a.median) / peer_gbps : 0.0);
        } catch (const std::exception& e) {
          std::printf("  NCCL all-to-all failed: %s\n", e.what());
        }
      }
#endif
      if (to_host(y(range(0, 3), range(rows - 3, rows))) != to_host(x(range(0, 3), range(rows - 3, rows)))) {
        ++errors;
        std::printf("  WRONG RESULT: the re-sharded matrix differs from its source\n");
      }
    }

    // (3) Jacobi on one device and on every device.
    const index_t n = o.n;
    const double grid_bytes = 4.0 * double(n) * double(n);
    // An m x c grid, columns split over devs with halo(1).
    auto jacobi = [&](const DeviceSet& devs, const std::string& label, bool hidden, index_t m, index_t c) {
      Array<float, 2> u = zeros<float>({m, c}, shard(1, halo(1), devs), memory::device);
      u(_, 0) = 1.f;
      update_halo(u);
      Array<float, 2> v = u;
      const tb::stats t = run.time(devs, o.batch, [&] {
        sweep(v, u, hidden);
        std::swap(u, v);
      });
      row(std::string(hidden ? "(3) Jacobi, hide_communication, " : "(3) Jacobi sweep + update_halo, ") +
              (m == c ? std::to_string(m) + "^2" : std::to_string(m) + "x" + std::to_string(c)),
          label, t, 2.0 * 4.0 * double(m) * double(c));
      std::printf("      %.1f iterations/s\n", 1e3 / t.median);
      return t;
    };
    // Diagnostics of the scaling rows (printed, no target): the sweep with no exchange at all (what
    // the shards' kernels cost side by side), and the hidden sweep captured (two sweeps per graph,
    // u -> v -> u, replayed: no host launch cost per sweep).
    auto jacobi_alone = [&](const DeviceSet& devs, const std::string& label, index_t m, index_t c) {
      Array<float, 2> u = zeros<float>({m, c}, shard(1, halo(1), devs), memory::device);
      Array<float, 2> v = u;
      const auto I = range(1, m - 1), J = range(1, c - 1);
      const tb::stats t = run.time(devs, o.batch, [&] {
        v(I, J) = 0.25f * (u(range(0, m - 2), J) + u(range(2, m), J) + u(I, range(0, c - 2)) + u(I, range(2, c)));
        std::swap(u, v);
      });
      row("    sweep alone (no exchange), " + std::to_string(m) + "x" + std::to_string(c), label, t,
          2.0 * 4.0 * double(m) * double(c));
      return t;
    };
    auto jacobi_captured = [&](const DeviceSet& devs, const std::string& label, index_t m, index_t c) {
      Array<float, 2> u = zeros<float>({m, c}, shard(1, halo(1), devs), memory::device);
      u(_, 0) = 1.f;
      update_halo(u);
      Array<float, 2> v = u;
      auto g = capture([&] {
        sweep(v, u, true);
        sweep(u, v, true);
      });
      tb::stats t = run.time(devs, o.batch, [&] { g.replay(); });
      t.best /= 2, t.median /= 2, t.worst /= 2;
      row("    hide_communication, captured, " + std::to_string(m) + "x" + std::to_string(c), label, t,
          2.0 * 4.0 * double(m) * double(c));
      return t;
    };
    const tb::stats j1 = jacobi(p.one, p.one_label, false, n, n);
#if defined(__CUDACC__)
    if (gpu && n - 2 <= 65535) {
      const Device d0 = p.one[0];
      auto u = zeros<float>({n, n}, on(d0), memory::device);
      auto v = zeros<float>({n, n}, on(d0), memory::device);
      float* up = u.layout().parts[0].ptr;
      float* vp = v.layout().parts[0].ptr;
      const auto s0 = static_cast<cudaStream_t>(detail::rt::stream(d0.id()));
      const dim3 grid(static_cast<unsigned>((n - 2 + 255) / 256), static_cast<unsigned>(n - 2));
      const tb::stats plain = run.time(p.one, o.batch, [&] {
        plain_jacobi<<<grid, 256, 0, s0>>>(up, vp, static_cast<int>(n));
        std::swap(up, vp);
      });
      row("    plain CUDA 5-point kernel, one thread/point", p.one_label, plain, 2.0 * grid_bytes);
    }
#endif
    const tb::stats copy = run.memcpy(p.one[0], static_cast<std::size_t>(grid_bytes), o.batch);
    row("    memcpy of the grid (read + write)", p.one_label, copy, 2.0 * grid_bytes);
    hbm_ratio = gbps(2.0 * grid_bytes, j1.median) / gbps(2.0 * grid_bytes, copy.median);
    std::optional<double> plain_scaling;
    if (G > 1) {
      const tb::stats jg = jacobi(p.all, p.all_label, false, n, n);
      plain_scaling = j1.median / jg.median / double(G);
      const tb::stats jh = jacobi(p.all, p.all_label, true, n, n);
      scaling = j1.median / jh.median / double(G);
      const tb::stats ja = jacobi_alone(p.all, p.all_label, n, n);
      const tb::stats js = jacobi_alone(p.one, p.one_label, n, (n + G - 1) / G);  // one shard's shape
      const tb::stats jc = jacobi_captured(p.all, p.all_label, n, n);
      std::printf("      1 GPU / (G x time): sweep alone %.3fx, one shard's shape alone on 1 GPU %.3fx, hidden and "
                  "captured %.3fx (hidden: %.3fx)\n",
                  j1.median / ja.median / double(G), j1.median / js.median / double(G),
                  j1.median / jc.median / double(G), *scaling);
      // Strong scaling at the second size (NVIDIA's multi-GPU Jacobi samples use both).
      const tb::stats k1 = jacobi(p.one, p.one_label, false, o.n2, o.n2);
      const tb::stats kh = jacobi(p.all, p.all_label, true, o.n2, o.n2);
      scaling2 = k1.median / kh.median / double(G);
      const tb::stats kc = jacobi_captured(p.all, p.all_label, o.n2, o.n2);
      std::printf("      1 GPU / (G x time): hidden and captured %.3fx (hidden: %.3fx)\n",
                  k1.median / kc.median / double(G), *scaling2);
      // Weak scaling: an n x n tile per device, n x (G n) over G devices, against one tile on one.
      const tb::stats wg = jacobi(p.all, p.all_label, true, n, n * G);
      weak = j1.median / wg.median;
      const tb::stats wa = jacobi_alone(p.all, p.all_label, n, n * G);
      const tb::stats wc = jacobi_captured(p.all, p.all_label, n, n * G);
      std::printf("      1 GPU / time: sweep alone %.3fx, hidden and captured %.3fx (hidden: %.3fx)\n",
                  j1.median / wa.median, j1.median / wc.median, *weak);
    }
    // (4) 3-D diffusion on one device, float and double, against memcpy of the same grid.
    std::optional<double> diffusion_f, diffusion_d;
    auto diffusion = [&]<class T>(T) -> double {
      const index_t m = o.n3;
      Array<T, 3> u = zeros<T>({m, m, m}, on(p.one[0]), memory::device);
      u(_, _, 0) = T(1);
      Array<T, 3> ci = ones<T>({m, m, m}, on(p.one[0]), memory::device);
      Array<T, 3> v = u;
      const double cells = double(m) * double(m) * double(m);
      const double a_eff = 3.0 * cells * sizeof(T);
      const tb::stats t = run.time(p.one, o.batch, [&] {
        diffuse(v, u, ci);
        std::swap(u, v);
      });
      const std::string what = "(4) 3-D diffusion " + std::to_string(m) + "^3, " + (sizeof(T) == 4 ? "float" : "double") +
                               ", T_eff";
      row(what, p.one_label, t, a_eff);
      const tb::stats c = run.memcpy(p.one[0], static_cast<std::size_t>(cells * sizeof(T)), o.batch);
      row("    memcpy of the grid (read + write)", p.one_label, c, 2.0 * cells * sizeof(T));
      return gbps(a_eff, t.median) / gbps(2.0 * cells * sizeof(T), c.median);
    };
    diffusion_f = diffusion(0.0f);
    diffusion_d = diffusion(0.0);
    tb::print_late_warning(run.late, static_cast<long long>(o.spin_us));

    std::vector<tb::summary_row> rows;
    rows.push_back({"(1) peer copy vs cudaMemcpyPeerAsync, worst pair", peer_ratio, 0.95, true, ">= 0.95x",
                    G > 1 ? "" : "only 1 device"});
    rows.push_back({"(2) re-shard GB/s per device / peer GB/s", reshard_of_peer, G > 2 ? 0.75 : 0, true,
                    G > 2 ? ">= 0.75x" : "report", G > 1 ? "" : "only 1 device"});
    rows.push_back({"(2) re-shard vs plain CUDA all-to-all (strided)", reshard_of_plain, 0, true, "report",
                    gpu && G > 1 ? "" : "GPUs only"});
    rows.push_back({"(3) Jacobi scaling, hidden, " + std::to_string(n) + "^2, " + p.all_label,
                    scaling, 0.95, true, ">= 0.95x", G > 1 ? "" : "only 1 device"});
    rows.push_back({"(3) Jacobi scaling, hidden, " + std::to_string(o.n2) + "^2, " + p.all_label,
                    scaling2, 0.95, true, ">= 0.95x", G > 1 ? "" : "only 1 device"});
    rows.push_back({"(3) Jacobi weak scaling, " + std::to_string(n) + "^2 each, " + p.all_label, weak, 0.97,
                    true, ">= 0.97x", G > 1 ? "" : "only 1 device"});
    rows.push_back({"(3) Jacobi scaling / ideal, sweep + update_halo", plain_scaling, 0, true, "report",
                    G > 1 ? "" : "only 1 device"});
    rows.push_back({"(3) Jacobi bytes/s vs memcpy, " + p.one_label, hbm_ratio, 0.93, true, ">= 0.93x", ""});
    rows.push_back({"(4) 3-D diffusion T_eff vs memcpy, float, " + p.one_label, diffusion_f, 0.93, true, ">= 0.93x", ""});
    rows.push_back({"(4) 3-D diffusion T_eff vs memcpy, double, " + p.one_label, diffusion_d, 0.93, true, ">= 0.93x",
                    ""});
    std::printf("\n== summary: medians of %d ==\n", o.reps);
    tb::print_summary(rows, gpu, 62, 10, 12);
    if (errors) std::printf("\n%d error(s) above\n", errors);
  } catch (const std::exception& e) {
    std::printf("bench_stencil: error: %s\n", e.what());
    return 1;
  }
  return errors ? 1 : 0;
}
