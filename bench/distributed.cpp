// SPDX-License-Identifier: Apache-2.0
// One program across processes against one process (issue #14, DESIGN.md "Targets"):
//
//  (1) c = a + b and (2) c = sin(a) * b + 2 * a, 2^K float per device, sharded over devices();
//  (3) float s = sum(x) of 30M float sharded over devices(), result on the host (every rank): in a
//      tight loop, and (3b) alternating with z = 2 * x + sin(y) (issue 20: 95 us against 35 us in
//      one process), timing the step (z, then the sum), each --runs times: every run's median is
//      printed, the worst one is the figure;
//  (4) tessera::allreduce(x) in place, 2^K float per device, x replicated over devices(), against
//      raw ncclAllReduce on the same buffers and streams (communicators made with
//      ncclCommInitRank across processes, ncclCommInitAll in one): measured in the same run;
//  (5) copyto(y, x) of a 16384^2 float matrix from shard(1) to shard(0) over devices(): within one
//      process the kernels' all-to-all, across processes NCCL sends and receives; across processes
//      also GB/s per device against one pair's peer copy, measured by the 1-process run (issue 22
//      item 2: >= 0.75x on 4 GPUs).
//
// (1)-(3) and (5) compare N processes x 1 GPU with 1 process x N GPUs, which cannot share one run: a rank
// sees only its own GPUs. So the program measures whatever configuration it runs in, and
//
//   bench_distributed --save base.txt                 # 1 process x N GPUs: writes its figures
//   mpirun -np N bench_distributed --against base.txt # N processes x 1 GPU: prints the ratios
//
// (scripts/bench_distributed.sh N runs both and prints the summary). A ratio is the one-process
// time over the N-process time (>= 0.95x: across processes at most 5% slower); (4) is raw NCCL's
// time over Tessera's (>= 0.95x) in each configuration.
//
// Timing. Each rank times its own devices: work that stays on the GPU with CUDA events behind a
// spin kernel (--batch operations per sample), the host-result sum with the host clock around each
// call (median of --calls). Across processes each figure is the slowest rank's median (the job is
// done when its last rank is). Results are spot-checked. The summary prints PASS/MISS per target
// and never fails on a MISS.
//
// Without a GPU (or with TESSERA_BACKEND=host) the same program runs on host devices, in one
// process or under mpirun, with small sizes, and prints host figures labelled as such.
//
//   bench_distributed [--log2n K] [--nsum N] [--log2ar K] [--reps R] [--warmup W] [--batch B]
//                     [--calls C] [--runs R] [--spin-us S] [--save FILE] [--against FILE]
#include <tessera/collective.hpp>
#include <tessera/distributed.hpp>
#include <tessera/tessera.hpp>

#include <backend/process/mpi.hpp>
#include <bench/support/program.hpp>
#if defined(__CUDACC__)
#include <bench/support/nccl_ranks.cuh>
#endif

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <exception>
#include <fstream>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

using namespace tessera;
namespace tb = tessera::bench;
using tb::fixed;

namespace {

struct Options {
  long long log2n = -1;   // (1), (2): 2^K float per device; default 28 on GPUs, 18 on host devices
  long long nsum = -1;    // (3): elements; default 30'000'000 on GPUs, 1'000'000 on host devices
  long long log2ar = -1;  // (4): 2^K float per device; default 28 on GPUs, 18 on host devices
  long long reps = 20, warmup = 3, batch = 5, calls = -1, spin_us = 2000, runs = 5;
  std::string save, against;
};

void usage(std::FILE* f) {
  std::fprintf(f,
               "usage: bench_distributed [--log2n K] [--nsum N] [--log2ar K] [--reps R] [--warmup W] [--batch B]\n"
               "                         [--calls C] [--runs R] [--spin-us S] [--save FILE] [--against FILE]\n"
               "  --log2n K       (1), (2) elementwise over 2^K float per device (default 28 on GPUs, 18 on host)\n"
               "  --nsum N        (3) elements of the host-result sum (default 30000000 on GPUs, 1000000 on host)\n"
               "  --log2ar K      (4) allreduce of 2^K float per device (default 28 on GPUs, 18 on host)\n"
               "  --reps R        timed samples per measurement (default 20)\n"
               "  --warmup W      untimed samples first (default 3)\n"
               "  --batch B       operations per sample for work that stays on the devices (default 5)\n"
               "  --calls C       timed calls of (3), host clock (default 500 on GPUs, 100 on host)\n"
               "  --runs R        runs of each loop of (3); the worst run's median is the figure (default 5)\n"
               "  --spin-us S     GPU spin before each timed sample (default 2000)\n"
               "  --save FILE     write this run's figures (the baseline: run it as 1 process x N devices)\n"
               "  --against FILE  print ratios against a baseline written by --save (run it under mpirun)\n");
}

std::optional<Options> parse(int argc, char** argv) {
  Options o;
  const bool ok = tb::parse_options(
      "bench_distributed", argc, argv, usage,
      {{"--log2n", 4, 32, &o.log2n}, {"--nsum", 1, 1LL << 34, &o.nsum}, {"--log2ar", 2, 32, &o.log2ar},
       {"--reps", 1, 100000, &o.reps}, {"--warmup", 0, 100000, &o.warmup}, {"--batch", 1, 1000, &o.batch},
       {"--calls", 1, 10000000, &o.calls}, {"--runs", 1, 1000, &o.runs}, {"--spin-us", 0, 1000000, &o.spin_us}},
      [&](const std::string& arg, const std::string& value) {
        if (arg == "--save" && !value.empty()) o.save = value;
        else if (arg == "--against" && !value.empty()) o.against = value;
        else {
          std::fprintf(stderr, "bench_distributed: unknown option or bad value: %s %s\n", arg.c_str(), value.c_str());
          return false;
        }
        return true;
      });
  if (!ok) return std::nullopt;
  return o;
}

// The slowest rank's value (every rank gets it): a job step ends when its last rank is done.
double slowest(double mine) {
  const int P = distributed::size();
  std::vector<double> all(static_cast<std::size_t>(P), 0.0);
  std::vector<int> owner(static_cast<std::size_t>(P));
  for (int q = 0; q < P; ++q) owner[static_cast<std::size_t>(q)] = q;
  all[static_cast<std::size_t>(distributed::rank())] = mine;
  detail::dist::share_blocks(all.data(), all.size(), sizeof(double), owner.data(), "bench: the timings");
  return *std::max_element(all.begin(), all.end());
}

// Figures of a run, by key, as --save writes them and --against reads them.
using figures = std::map<std::string, double>;

figures read_figures(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw invalid_argument("bench_distributed: cannot read the baseline " + path + " (written by --save)");
  figures f;
  std::string key;
  double value = 0;
  while (in >> key >> value) f[key] = value;
  return f;
}

struct Bench : tb::platform {
  Options o;
  tb::runner run;
  DeviceSet local;  // this rank's devices: each rank times only these
  int ranks = 1, errors = 0;
  bool speaker = true;  // rank 0 prints
  figures mine;
  std::vector<tb::summary_row> rows;

  template <class... A>
  void say(const char* fmt, A... a) {
    if (speaker) std::printf(fmt, a...);
  }
  void wrong(const std::string& what, double got, double want) {
    ++errors;
    say("  WRONG RESULT: %s gave %.9g, want %.9g\n", what.c_str(), got, want);
  }
  std::string where() const {
    return ranks == 1 ? all_label + " in 1 process"
                      : std::to_string(ranks) + " processes x " + std::to_string(local.size()) +
                            (gpu ? " GPU" : " host dev");
  }
  void row(const char* what, double ms, double bytes, const std::string& extra) {
    say("  %-40s %10.4f %10.1f  %s\n", what, ms, tb::gbps(bytes, ms), extra.c_str());
  }

  // (1), (2): fused elementwise work, sharded over every device of every rank.
  void elementwise() {
    const index_t per = index_t(1) << o.log2n, n = per * static_cast<index_t>(all.size());
    say("\n(1), (2) elementwise over %s float per device (%lld in all), slowest rank's median ms per operation;\n"
        "    GB/s over all devices (3 arrays of 4 bytes per element)\n",
        tb::pow2(o.log2n).c_str(), static_cast<long long>(n));
    say("  %-40s %10s %10s\n", "operation", "med ms", "GB/s");
    const Array<float, 1> a = rand<float>({n}), b = rand<float>({n});
    Array<float, 1> c = zeros<float>({n});
    const int batch = static_cast<int>(o.batch);
    const double add = slowest(run.time(local, batch, [&] { c = a + b; }).median);
    const float c0 = c.at(n / 2), want0 = a.at(n / 2) + b.at(n / 2);
    const double fused = slowest(run.time(local, batch, [&] { c = sin(a) * b + 2.f * a; }).median);
    const float c1 = c.at(n - 1), a1 = a.at(n - 1), want1 = std::sin(a1) * b.at(n - 1) + 2.f * a1;
    if (c0 != want0) wrong("c = a + b at n/2", c0, want0);
    if (std::fabs(c1 - want1) > 1e-5f) wrong("c = sin(a) * b + 2a at n-1", c1, want1);
    const double bytes = 12.0 * double(n);
    row("c = a + b", add, bytes, where());
    row("c = sin(a) * b + 2 * a", fused, bytes, where());
    mine["elementwise_add_ms"] = add;
    mine["elementwise_fused_ms"] = fused;
  }

  // (3): the DESIGN's 30M sum, result on every rank's host: (3) in a tight loop, (3b) each sum
  // after an elementwise assignment (z = 2 * x + sin(y)) queued on the same devices, timing the
  // sum call only (it waits for the assignment first, in one process as across processes). Each
  // loop --runs times; the worst run's median (slowest rank) is the figure.
  void host_sum() {
    const index_t n = o.nsum;
    const int calls = static_cast<int>(o.calls), warm = std::max(10, calls / 10), runs = static_cast<int>(o.runs);
    say("\n(3) float s = sum(x) of %lld float over every device, result on the host: wall time per call "
        "including\n    the synchronization (and, across processes, the exchange of the partials); slowest "
        "rank's median of %d calls,\n    %d runs of each loop; (3b): z = 2 * x + sin(y), then the sum, timed "
        "together\n",
        static_cast<long long>(n), calls, runs);
    const Array<float, 1> x = rand<float>({n}), y = rand<float>({n});
    Array<float, 1> z = zeros<float>({n});
    float s = 0;
    for (int i = 0; i < warm; ++i) s = sum(x);
    // (3b) times the whole step, assignment and sum: timing the sum alone charged each
    // configuration with whatever of z's kernel its host had not yet waited for, and one process
    // queues z on N GPUs (N launches) before starting the clock where a rank queues one, so the
    // N-process run was charged about one launch (~5 us) more of z's kernel per step.
    // The sum call alone is timed as well, and printed (the figure of the issue).
    double sum_only = 0;
    auto loop = [&](bool interleaved) {
      std::vector<double> us, alone;
      for (int i = 0; i < calls; ++i) {
        const double t0 = tb::host_seconds();
        if (interleaved) z = 2.f * x + sin(y);
        const double t1 = tb::host_seconds();
        s = sum(x);
        const double t2 = tb::host_seconds();
        us.push_back((t2 - t0) * 1e6);
        alone.push_back((t2 - t1) * 1e6);
      }
      sum_only = std::max(sum_only, slowest(tb::summarize(std::move(alone)).median));
      return slowest(tb::summarize(std::move(us)).median);
    };
    for (bool interleaved : {false, true}) {
      std::string each;
      double worst = 0;
      sum_only = 0;
      for (int r = 0; r < runs; ++r) {
        const double med = loop(interleaved);
        worst = std::max(worst, med);
        each += (r ? " " : "") + fixed(med, 1);
      }
      if (std::fabs(s - double(n) / 2) > 6 * std::sqrt(double(n) / 12) + 1e-4 * double(n)) wrong("sum(x)", s, n / 2.0);
      say("  %-40s %10.2f us  worst of %d runs (%s us), %s\n",
          interleaved ? "(3b) z = 2x + sin(y); s = sum(x)" : "float s = sum(x)", worst, runs, each.c_str(),
          where().c_str());
      if (interleaved) say("      of which the sum call alone: %.2f us (worst run's median)\n", sum_only);
      mine[interleaved ? "sum_interleaved_us" : "sum_us"] = worst;
    }
  }

  // (5): re-sharding a 16384^2 float matrix (1024^2 on host devices) from dim 1 to dim 0 over
  // every device: each device sends (G-1)/G of its block to the others (issue 22 item 2: across
  // ranks as within a process).
  void reshard() {
    const index_t m = gpu ? 16384 : 1024;
    const double G = double(all.size());
    say("\n(5) copyto(y, x): x shard(1) -> y shard(0), %lldx%lld float over %s; slowest rank's median ms; "
        "GB/s per device\n    = bytes each device sends to the others / time\n",
        static_cast<long long>(m), static_cast<long long>(m), all_label.c_str());
    const Array<float, 2> x = rand<float>({m, m}, shard(1));
    Array<float, 2> y = zeros<float>({m, m}, shard(0));
    copyto(y, x);
    const index_t i = m - 3, j = 5;
    if (y.at(i, j) != x.at(i, j)) wrong("re-shard y(m - 3, 5)", y.at(i, j), x.at(i, j));
    const int late_before = run.late;
    const double t = slowest(run.time(local, static_cast<int>(o.batch), [&] { copyto(y, x); }).median);
    const int late = run.late - late_before;
    const double per_device = 4.0 * double(m) * double(m) / G * (G - 1) / G;
    row("copyto(y shard(0), x shard(1))", t, per_device, where());
    // The host's own time to queue one copy (no wait for the devices), the slowest rank's median
    // of --reps: where it nears the GPU time, the figure above is the host's, not the transport's.
    {
      std::vector<double> us;
      for (long long r = 0; r < o.reps; ++r) {
        synchronize();
        (void)slowest(0.0);  // every rank starts together: a rank's wait for a late peer is not its own
        const auto t0 = std::chrono::steady_clock::now();
        copyto(y, x);
        us.push_back(std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count());
      }
      synchronize();
      std::sort(us.begin(), us.end());
      const double q = slowest(us[us.size() / 2]);
      say("      host time to queue one copy: %s us (median of %lld)%s\n", fixed(q, 1).c_str(), o.reps,
          late > 0 ? (", " + std::to_string(late) + " of the timed samples ran late (host gaps)").c_str() : "");
      mine["reshard_queue_us"] = q;
    }
    mine["reshard_ms"] = t;
    mine["reshard_device_gbps"] = tb::gbps(per_device, t);
    // The same between memory::device arrays, which across ranks the sources write in place
    // (CUDA IPC exports cudaMalloc blocks; managed memory cannot be mapped by another process).
    if (gpu) {
      const Array<float, 2> xd = copy(x, shard(1), memory::device);
      Array<float, 2> yd = zeros<float>({m, m}, shard(0), memory::device);
      copyto(yd, xd);
      if (yd.at(i, j) != x.at(i, j)) wrong("re-shard yd(m - 3, 5)", yd.at(i, j), x.at(i, j));
      const double td = slowest(run.time(local, static_cast<int>(o.batch), [&] { copyto(yd, xd); }).median);
      row("copyto, memory::device arrays", td, per_device, where());
      mine["reshard_device_ms"] = td;
      mine["reshard_device_mem_gbps"] = tb::gbps(per_device, td);
    }
    // The across-ranks target's baseline (issue 22 item 2: GB/s per device >= 0.75x of one pair's
    // peer copy): a rank sees only its own GPU, so the 1-process run, which sees them all,
    // measures one pair's copy and --save keeps it for the run across processes.
    if (gpu && ranks == 1 && all.size() >= 2) {
      const index_t pn = index_t(64) << 20;  // 256 MiB of float
      const Array<float, 1> a = rand<float>({pn}, on(all[0]), memory::device);
      Array<float, 1> z = zeros<float>({pn}, on(all[1]), memory::device);
      const double tp = run.time(DeviceSet{all[0], all[1]}, static_cast<int>(o.batch), [&] { copyto(z, a); }).median;
      if (z.at(pn - 1) != a.at(pn - 1)) wrong("peer copy z(n - 1)", z.at(pn - 1), a.at(pn - 1));
      row("copyto, 256 MiB, one pair", tp, 4.0 * double(pn),
          all[0].name() + " -> " + all[1].name() + " (the across-ranks baseline)");
      mine["peer_gbps"] = tb::gbps(4.0 * double(pn), tp);
    }
  }

  // (4): Tessera's allreduce against raw NCCL on the same buffers.
  void allreduce_case() {
    const index_t n = index_t(1) << o.log2ar;
    const double bytes = 4.0 * double(n);
    const int batch = static_cast<int>(o.batch);
    say("\n(4) tessera::allreduce(x) in place, x replicated over %s, %s float per device; slowest rank's "
        "median\n    ms; algbw = bytes per device / time\n",
        all_label.c_str(), tb::pow2(o.log2ar).c_str());
    say("  %-40s %10s %10s\n", "operation", "med ms", "algbw GB/s");
    Array<float, 1> x = ones<float>({n}, replicate());
    tessera::allreduce(x);
    const float got = x.at(n / 2);
    if (got != float(all.size())) wrong("allreduce(ones)", got, double(all.size()));
    x = 0.0f;  // sums of zeros stay finite however often the timing repeats them
    const double t = slowest(run.time(local, batch, [&] { tessera::allreduce(x); }).median);
    row("Tessera allreduce(x)", t, bytes, where());
    mine["allreduce_ms"] = t;
    std::optional<double> ratio;
    std::string note = gpu ? "" : "no NCCL on host devices";
#if defined(__CUDACC__)
    if (gpu) {
      tb::cuda::raw_nccl raw(all);
      std::vector<float*> buffers;
      for (auto& p : x.layout().parts)
        if (distributed::is_local(p.device)) buffers.push_back(p.ptr);
      const double r = slowest(run.time(local, batch, [&] { raw.allreduce(buffers, static_cast<std::size_t>(n)); }).median);
      row(ranks > 1 ? "raw ncclAllReduce (ncclCommInitRank)" : "raw ncclAllReduce (ncclCommInitAll)", r, bytes,
          "same buffers and streams; raw / Tessera " + fixed(r / t) + "x");
      ratio = r / t;
      mine["raw_allreduce_ms"] = r;
    }
#endif
    rows.push_back({"(4) allreduce " + tb::pow2(o.log2ar) + " float/dev vs raw NCCL, " + where(), ratio, 0.95, true,
                    ">= 0.95x", note});
  }

  // Ratios against the one-process baseline (--against), or how to get them.
  void compare() {
    if (o.against.empty()) {
      const std::string how = ranks > 1 ? "needs --against FILE from a 1-process run with --save FILE"
                                         : "1 process: run scripts/bench_distributed.sh N for the ratio";
      std::vector<tb::summary_row> front;
      for (const char* m : {"(1) c = a + b", "(2) c = sin(a) * b + 2 * a", "(3) sum to host",
                            "(3b) sum after elementwise", "(5) re-shard"})
        front.push_back({std::string(m) + ", N procs vs 1 proc", std::nullopt, 0.95, true, ">= 0.95x", how});
      front.push_back(
          {"(5) re-shard across ranks, GB/s per device / pair's", std::nullopt, 0.75, true, ">= 0.75x", how});
      front.push_back({"(5) same, memory::device arrays", std::nullopt, 0.75, true, ">= 0.75x", how});
      rows.insert(rows.begin(), front.begin(), front.end());
      return;
    }
    const figures base = read_figures(o.against);
    const double base_devices = base.count("devices") ? base.at("devices") : 0;
    std::string note = "baseline: " + fixed(base_devices, 0) + " devices in 1 process";
    if (base_devices != double(all.size())) note += " (DIFFERENT device count: " + std::to_string(all.size()) + " here)";
    auto ratio = [&](const char* key) -> std::optional<double> {
      if (!base.count(key) || !mine.count(key) || mine.at(key) <= 0) return std::nullopt;
      return base.at(key) / mine.at(key);
    };
    std::vector<tb::summary_row> front{
        {"(1) c = a + b, " + where() + " vs 1 proc", ratio("elementwise_add_ms"), 0.95, true, ">= 0.95x", note},
        {"(2) c = sin(a) * b + 2 * a, " + where() + " vs 1 proc", ratio("elementwise_fused_ms"), 0.95, true,
         ">= 0.95x", note},
        {"(3) sum to host, " + where() + " vs 1 proc", ratio("sum_us"), 0.95, true, ">= 0.95x", note},
        {"(3b) sum after elementwise, " + where() + " vs 1 proc", ratio("sum_interleaved_us"), 0.95, true, ">= 0.95x",
         note},
        {"(5) re-shard, " + where() + " vs 1 proc", ratio("reshard_ms"), 0.95, true, ">= 0.95x", note}};
    // Per device against one pair's peer copy of the 1-process run (GPUs only; the target is set
    // for 4 GPUs, where each sends to three at once).
    std::optional<double> of_pair;
    if (base.count("peer_gbps") && mine.count("reshard_device_gbps") && base.at("peer_gbps") > 0)
      of_pair = mine.at("reshard_device_gbps") / base.at("peer_gbps");
    const bool four = all.size() >= 4;
    front.push_back({"(5) re-shard across ranks, GB/s per device / pair's", of_pair, four ? 0.75 : 0, true,
                     four ? ">= 0.75x" : "report",
                     of_pair ? "pair: " + fixed(base.at("peer_gbps"), 1) + " GB/s in the 1-process run"
                             : "GPUs only (the 1-process run measures the pair)"});
    std::optional<double> dev_of_pair;
    if (base.count("peer_gbps") && mine.count("reshard_device_mem_gbps") && base.at("peer_gbps") > 0)
      dev_of_pair = mine.at("reshard_device_mem_gbps") / base.at("peer_gbps");
    front.push_back({"(5) same, memory::device arrays", dev_of_pair, four ? 0.75 : 0, true,
                     four ? ">= 0.75x" : "report", "written in place through CUDA IPC"});
    rows.insert(rows.begin(), front.begin(), front.end());
    if (base.count("allreduce_ms") && base.count("raw_allreduce_ms"))
      say("\n1-process baseline: allreduce raw / Tessera %sx\n", fixed(base.at("raw_allreduce_ms") / base.at("allreduce_ms")).c_str());
  }

  void save() {
    if (o.save.empty() || !speaker) return;
    std::ofstream out(o.save);
    out << "devices " << all.size() << "\nranks " << ranks << '\n';
    for (auto& [k, v] : mine) out << k << ' ' << v << '\n';
    if (!out) throw invalid_argument("bench_distributed: cannot write " + o.save);
    std::printf("\nfigures written to %s (compare with: mpirun -np %zu bench_distributed --against %s)\n",
                o.save.c_str(), all.size(), o.save.c_str());
  }
};

}  // namespace

int main(int argc, char** argv) {
  ::setenv("NCCL_NVLS_ENABLE", "0", 0);  // before Tessera or the baseline make a communicator
  distributed::session mpi(argc, argv);   // first: devices() spans the ranks
  const auto parsed = parse(argc, argv);
  if (!parsed) {
    if (distributed::rank() == 0) usage(stderr);
    return 2;
  }
  Bench b;
  b.o = *parsed;
  Options& o = b.o;
  try {
    static_cast<tb::platform&>(b) = tb::choose_platform();
    b.ranks = distributed::size();
    b.speaker = distributed::rank() == 0;
    b.local = distributed::local_devices();
    if (b.local.empty()) b.local = b.all;  // the host-device fallback of a build without nvcc
    const bool gpu = b.gpu;
    if (o.log2n < 0) o.log2n = gpu ? 28 : 18;
    if (o.nsum < 0) o.nsum = gpu ? 30'000'000 : 1'000'000;
    if (o.log2ar < 0) o.log2ar = gpu ? 28 : 18;
    if (o.calls < 0) o.calls = gpu ? 500 : 100;
    b.run = tb::runner{gpu, double(o.spin_us), static_cast<int>(o.warmup), static_cast<int>(o.reps), 0};
    if (b.speaker) {
      std::printf("Tessera across processes: %d process(es), %zu device(s) in all\n", b.ranks, b.all.size());
      tb::print_backend(b, "", " (TESSERA_HOST_DEVICES per process)");
      std::printf("\n%lld samples after %lld warm-up, %lld operations per sample on the devices; %s\n", o.reps,
                  o.warmup, o.batch, tb::timing_text(gpu, o.spin_us, "host clock").c_str());
    }
    b.elementwise();
    b.host_sum();
    b.allreduce_case();
    b.reshard();
    b.compare();
    if (b.speaker) {
      tb::print_late_warning(b.run.late, o.spin_us);
      std::printf("\n== summary: slowest rank's medians ==\n");
      tb::print_summary(b.rows, gpu, 66, 9, 20);
      if (b.errors) std::printf("\n%d wrong result(s) above\n", b.errors);
    }
    b.save();
  } catch (const std::exception& e) {
    std::printf("bench_distributed (rank %d): error: %s\n", distributed::rank(), e.what());
    return 1;
  }
  return b.errors ? 1 : 0;
}
