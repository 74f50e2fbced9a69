// SPDX-License-Identifier: Apache-2.0
// Captured loops (issue 22, item 3): the host time of a time-stepping body of ten small operations
// (2^16 floats per array), launched plainly against captured once and replayed, in the same run,
// on one device and on every device:
//
//  (1) plain: --iters bodies queued back to back; host microseconds per operation (and per shard
//      launch), the clock stopped before the final synchronize, and with it (targets: <= 4 us per
//      operation on one GPU and per shard on 4);
//  (2) captured: g = capture(body) once, then --iters replays the same way (target <= 1.5 us host
//      time per operation per replay, 1 and 4 GPUs);
//  (3) the results of both, compared bit for bit;
//  (4) an empty kernel's launch (<<<>>>, checked like Tessera's), the same number of times: the
//      machine's floor under (1);
//  (5) the same for a body of two Jacobi sweeps (5-point, 2^K floats in a square grid, columns
//      split with halo(1); u -> v, update_halo(v), v -> u, update_halo(u)): the run-time compiled
//      stencil kernels of a time-stepping loop, per sweep (with its exchange). The summary gives
//      the wall time: on one H200 a 256^2 sweep keeps the GPU busy longer than its launch keeps the
//      host, so once the launch queue fills, the host's time is the GPU's.
//
// Medians of --reps rounds. On host devices the same program prints host figures, labelled as such.
//
//   bench_capture [--log2n K] [--iters I] [--reps R]
#include <tessera/tessera.hpp>

#include <bench/support/program.hpp>

#include <algorithm>
#include <cstdio>
#include <exception>
#include <optional>
#include <string>
#include <vector>

using namespace tessera;
namespace tb = tessera::bench;

namespace {

struct Options {
  int log2n = 16;
  int iters = 500;
  int reps = 5;
};

void usage(std::FILE* f) {
  std::fprintf(f,
               "usage: bench_capture [--log2n K] [--iters I] [--reps R]\n"
               "  --log2n K   elements per array = 2^K (default 16)\n"
               "  --iters I   bodies (of 10 operations) per round (default 500)\n"
               "  --reps R    rounds; medians are printed (default 5)\n");
}

std::optional<Options> parse(int argc, char** argv) {
  Options o;
  const bool ok = tb::parse_options("bench_capture", argc, argv, usage,
                                    {{"--log2n", 4, 30, &o.log2n}, {"--iters", 1, 1000000, &o.iters},
                                     {"--reps", 1, 1000, &o.reps}});
  if (!ok) return std::nullopt;
  return o;
}

constexpr int ops = 10;
constexpr int sweeps = 2;

// A time step of ten small operations (a leapfrog-like update of u, v and a work array w).
void body(Array<float, 1>& u, Array<float, 1>& v, Array<float, 1>& w, const Array<float, 1>& k) {
  w = k * u;
  v -= 0.01f * w;
  u += 0.01f * v;
  w = sin(u) * 0.001f;
  v += w;
  w = abs(v) + 1.0f;
  u = u / w * w;
  v = where(v > 10.0f, 10.0f, v);
  u = clamp(u, -10.0f, 10.0f);
  w = u * v;
}

// Two Jacobi sweeps of the interior, u -> v -> u, each followed by its halo exchange.
void jacobi_body(Array<float, 2>& u, Array<float, 2>& v) {
  const index_t n = u.size(0);
  const auto I = range(1, n - 1), lo = range(0, n - 2), hi = range(2, n);
  v(I, I) = 0.25f * (u(lo, I) + u(hi, I) + u(I, lo) + u(I, hi));
  update_halo(v);
  u(I, I) = 0.25f * (v(lo, I) + v(hi, I) + v(I, lo) + v(I, hi));
  update_halo(u);
}

struct timing {
  double host_us = 0, wall_us = 0;  // per operation
};

template <class F>
timing per_op(int iters, int body_ops, F&& step) {
  synchronize();
  const double t0 = tb::host_seconds();
  for (int i = 0; i < iters; ++i) step();
  const double t1 = tb::host_seconds();
  synchronize();
  const double t2 = tb::host_seconds();
  return {(t1 - t0) * 1e6 / (iters * body_ops), (t2 - t0) * 1e6 / (iters * body_ops)};
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// Medians over `reps` rounds of `iters` bodies launched plainly, then replayed from a capture.
struct medians {
  double plain_host, plain_wall, captured_host, captured_wall;
};
template <class Plain, class Replay>
medians plain_and_captured(int reps, int iters, int body_ops, Plain&& plain, Replay&& replay) {
  std::vector<double> ph, pw, ch, cw;
  for (int r = 0; r < reps; ++r) {
    const timing a = per_op(iters, body_ops, plain);
    const timing b = per_op(iters, body_ops, replay);
    ph.push_back(a.host_us), pw.push_back(a.wall_us), ch.push_back(b.host_us), cw.push_back(b.wall_us);
  }
  return {median(ph), median(pw), median(ch), median(cw)};
}

}  // namespace

int main(int argc, char** argv) {
  const auto opt = parse(argc, argv);
  if (!opt) {
    usage(stderr);
    return 2;
  }
  const Options o = *opt;
  int errors = 0;
  try {
    const tb::platform p = tb::choose_platform();
    const index_t n = index_t(1) << o.log2n;
    tb::print_backend(p, "", "");
    std::printf("\nbody: 10 operations on 2^%d floats per array, %d bodies per round, medians of %d rounds\n\n",
                o.log2n, o.iters, o.reps);
    std::printf("  %-12s %-10s %14s %14s %16s %14s\n", "devices", "how", "host us/op", "wall us/op",
                "host us/launch", "bits");
    std::optional<double> plain_one, plain_all_shard, capt_one, capt_all, bare_one, bare_all;
    // The machine's floor under the plain launches: an empty kernel's launch, in the same run (the
    // figure moves by up to 1 us from one machine to the next).
    tb::runner run{p.gpu, 0, 0, 1, 0};
    std::vector<DeviceSet> sets{p.one};
    if (p.size() > 1) sets.push_back(p.all);
    for (const DeviceSet& ds : sets) {
      const std::string label = ds.size() == 1 ? p.one_label : p.all_label;
      auto make = [&](float s) { return eval(s + 0.5f * sin(iota<float>({n}, shard(0, ds)) * 0.001f)); };
      Array<float, 1> u = make(0.1f), v = make(0.2f), w = make(0.f), k = make(1.f);
      Array<float, 1> u2 = u, v2 = v, w2 = w;
      auto g = capture([&] { body(u2, v2, w2, k); });
      const medians m = plain_and_captured(o.reps, o.iters, ops, [&] { body(u, v, w, k); }, [&] { g.replay(); });
      const bool same = to_host(u) == to_host(u2) && to_host(v) == to_host(v2) && to_host(w) == to_host(w2);
      if (!same) ++errors;
      const double shards = double(ds.size());
      const double bare = run.bare_launch_us(ds, o.iters * ops);
      std::printf("  %-12s %-10s %14.3f %14.3f %16.3f %14s\n", label.c_str(), "plain", m.plain_host, m.plain_wall,
                  m.plain_host / shards, "");
      std::printf("  %-12s %-10s %14s %14s %16.3f %14s\n", label.c_str(), "bare", "", "", bare, "");
      std::printf("  %-12s %-10s %14.3f %14.3f %16s %14s\n", label.c_str(), "captured", m.captured_host, m.captured_wall, "",
                  same ? "same" : "DIFFERENT");
      if (ds.size() == 1) {
        plain_one = m.plain_host;
        capt_one = m.captured_host;
        bare_one = bare;
      } else {
        plain_all_shard = m.plain_host / shards;
        capt_all = m.captured_host;
        bare_all = bare;
      }
    }
    // (5) Jacobi sweeps on a square grid of about 2^K floats.
    const index_t side = std::max<index_t>(8, index_t(1) << (o.log2n / 2));
    std::printf("\nbody: 2 Jacobi sweeps (with update_halo) on %lld x %lld floats, %d bodies per round\n\n",
                static_cast<long long>(side), static_cast<long long>(side), o.iters);
    std::printf("  %-12s %-10s %14s %14s %16s %14s\n", "devices", "how", "host us/sweep", "wall us/sweep",
                "host us/shard", "bits");
    std::optional<double> sweep_one, sweep_one_captured, sweep_one_host;
    for (const DeviceSet& ds : sets) {
      const std::string label = ds.size() == 1 ? p.one_label : p.all_label;
      const Placement cols = shard(1, halo(1), ds);
      Array<float, 2> u = rand<float>({side, side}, cols), v = zeros<float>({side, side}, cols);
      update_halo(u);
      Array<float, 2> u2 = u, v2 = v;
      auto g = capture([&] { jacobi_body(u2, v2); });
      const medians m = plain_and_captured(o.reps, o.iters, sweeps, [&] { jacobi_body(u, v); }, [&] { g.replay(); });
      const bool same = to_host(u) == to_host(u2) && to_host(v) == to_host(v2);
      if (!same) ++errors;
      std::printf("  %-12s %-10s %14.3f %14.3f %16.3f %14s\n", label.c_str(), "plain", m.plain_host, m.plain_wall,
                  m.plain_host / double(ds.size()), "");
      std::printf("  %-12s %-10s %14.3f %14.3f %16s %14s\n", label.c_str(), "captured", m.captured_host, m.captured_wall, "",
                  same ? "same" : "DIFFERENT");
      if (ds.size() == 1) sweep_one = m.plain_wall, sweep_one_captured = m.captured_wall, sweep_one_host = m.plain_host;
    }

    std::vector<tb::summary_row> rows;
    auto bare_note = [](const std::optional<double>& b) { return b ? "bare " + tb::fixed(*b) + " us" : std::string(); };
    rows.push_back({"plain launch, host us per op, " + p.one_label, plain_one, 4.0, false, "<= 4 us",
                    bare_note(bare_one), "us"});
    rows.push_back({"plain launch, host us per shard, " + p.all_label, plain_all_shard, 4.0, false, "<= 4 us",
                    p.size() > 1 ? bare_note(bare_all) : "only 1 device", "us"});
    rows.push_back({"Jacobi sweep, wall us per sweep, " + p.one_label, sweep_one, 0.0, true, "report",
                    sweep_one ? "captured " + tb::fixed(*sweep_one_captured) + " us, host " +
                                    tb::fixed(*sweep_one_host) + " us"
                              : "",
                    "us"});
    rows.push_back({"captured replay, host us per op, " + p.one_label, capt_one, 1.5, false, "<= 1.5 us", "", "us"});
    rows.push_back({"captured replay, host us per op, " + p.all_label, capt_all, 1.5, false, "<= 1.5 us",
                    p.size() > 1 ? "" : "only 1 device", "us"});
    std::printf("\n== summary: medians of %d ==\n", o.reps);
    tb::print_summary(rows, p.gpu, 46, 10, 18);
    if (errors) std::printf("\nWRONG RESULT: the captured replays differ from the plain launches\n");
  } catch (const std::exception& e) {
    std::printf("bench_capture: error: %s\n", e.what());
    return 1;
  }
  return errors ? 1 : 0;
}
