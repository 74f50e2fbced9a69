// SPDX-License-Identifier: Apache-2.0
// Host devices against plain loops measured in the same run (issue #13 item 7), with the host
// thread pool at 1 thread and at --threads (default: TESSERA_HOST_THREADS, else every core):
//  (1) c = a + b and (2) c = sin(a) * b + 2 * a, against the same loop written by hand over
//      std::vector, on one thread and split over the same number of threads (a persistent team,
//      one contiguous slice each, like OpenMP's schedule(static)); target: within 1.1x of both;
//  (3) s = sum(a), against hand-written loops (one accumulator, eight accumulators, eight on the
//      team) and NumPy's np.sum of the same size, timed by python3 in a child process where
//      python3 and numpy exist (target: within 1.5x of NumPy). The sum's bits must not depend on
//      the thread count (fixed chunks, backend/host/parallel.hpp).
// Best and median of --reps runs of each, after one warm-up; 2^--log2n float (default 25).
//
//   bench_host [--log2n K] [--reps R] [--devices D] [--threads T] [--numpy 0|1]
#include <tessera/tessera.hpp>

#include <backend/runtime/runtime.hpp>
#include <bench/support/program.hpp>

#include <condition_variable>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <exception>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

using namespace tessera;
namespace tb = tessera::bench;
namespace rt = tessera::detail::rt;

namespace {

struct Options {
  int log2n = 25;
  int reps = 7;
  int devices = 1;
  int threads = 0;  // 0: rt::host_threads()
  int numpy = 1;
};

void usage(std::FILE* f) {
  std::fprintf(f,
               "usage: bench_host [--log2n K] [--reps R] [--devices D] [--threads T] [--numpy 0|1]\n"
               "  --log2n K    elements = 2^K (default 25)\n"
               "  --reps R     timed runs of each measurement (default 7)\n"
               "  --devices D  host devices the arrays are sharded over (default 1)\n"
               "  --threads T  host threads of the second configuration (default: TESSERA_HOST_THREADS,\n"
               "               else every core); the first always uses 1\n"
               "  --numpy 0|1  time NumPy's np.sum through python3 (default 1)\n");
}

template <class F>
tb::stats time_ms(int reps, F&& f) {
  f();
  std::vector<double> ms;
  for (int r = 0; r < reps; ++r) {
    const double t0 = tb::host_seconds();
    f();
    ms.push_back((tb::host_seconds() - t0) * 1e3);
  }
  return tb::summarize(std::move(ms));
}

// The hand-written loops: noinline so that the compiler cannot fold repeated runs.
[[gnu::noinline]] void plain_add(const float* a, const float* b, float* c, index_t n) {
  for (index_t i = 0; i < n; ++i) c[i] = a[i] + b[i];
}
[[gnu::noinline]] void plain_sin(const float* a, const float* b, float* c, index_t n) {
  for (index_t i = 0; i < n; ++i) c[i] = ::sinf(a[i]) * b[i] + 2 * a[i];
}
[[gnu::noinline]] double plain_sum1(const float* a, index_t n) {
  double s = 0;
  for (index_t i = 0; i < n; ++i) s += a[i];
  return s;
}
[[gnu::noinline]] double plain_sum8(const float* a, index_t n) {
  double l[8] = {};
  index_t i = 0;
  for (; i + 8 <= n; i += 8)
    for (int j = 0; j < 8; ++j) l[j] += a[i + j];
  double s = 0;
  for (; i < n; ++i) s += a[i];
  for (double v : l) s += v;
  return s;
}

// The threaded baseline: t - 1 persistent threads and the caller, each running f(k) for its own k
// once per run(). Persistent, so that no run pays for starting threads (as Tessera's pool doesn't).
class team {
 public:
  explicit team(int t) : size_(t) {
    for (int k = 1; k < t; ++k) threads_.emplace_back([this, k] { loop(k); });
  }
  ~team() {
    {
      std::lock_guard<std::mutex> lock(m_);
      stop_ = true;
    }
    go_.notify_all();
    for (auto& th : threads_) th.join();
  }
  void run(const std::function<void(int)>& f) {
    {
      std::lock_guard<std::mutex> lock(m_);
      job_ = &f;
      pending_ = size_ - 1;
      ++round_;
    }
    go_.notify_all();
    f(0);
    std::unique_lock<std::mutex> lock(m_);
    done_.wait(lock, [&] { return pending_ == 0; });
  }

 private:
  void loop(int k) {
    long seen = 0;
    std::unique_lock<std::mutex> lock(m_);
    for (;;) {
      go_.wait(lock, [&] { return stop_ || round_ != seen; });
      if (stop_) return;
      seen = round_;
      const auto* f = job_;
      lock.unlock();
      (*f)(k);
      lock.lock();
      if (--pending_ == 0) done_.notify_one();
    }
  }
  int size_;
  std::vector<std::thread> threads_;
  std::mutex m_;
  std::condition_variable go_, done_;
  const std::function<void(int)>* job_ = nullptr;
  int pending_ = 0;
  long round_ = 0;
  bool stop_ = false;
};

// Slice k of t of [0, n).
index_t slice_begin(index_t n, int k, int t) { return n * k / t; }

// NumPy's np.sum of 2^log2n float32, median ms of reps runs after a warm-up, timed by python3; an
// empty result (and why in `why`) where python3 or numpy is missing.
std::optional<double> numpy_sum_ms(int log2n, int reps, std::string& why) {
  const std::string cmd =
      "python3 -c \"import numpy as np, time\n"
      "a = np.random.default_rng(1).random(1 << " + std::to_string(log2n) + ", dtype=np.float32)\n"
      "a.sum(); t = []\n"
      "for _ in range(" + std::to_string(reps) + "):\n"
      "    t0 = time.perf_counter(); a.sum(); t.append(time.perf_counter() - t0)\n"
      "t.sort(); print('%.6f' % (t[len(t) // 2] * 1e3))\" 2>&1";
  std::FILE* p = ::popen(cmd.c_str(), "r");
  if (!p) {
    why = "python3 could not be started";
    return std::nullopt;
  }
  std::string out;
  char buf[256];
  while (std::fgets(buf, sizeof buf, p)) out += buf;
  const int rc = ::pclose(p);
  char* end = nullptr;
  const double ms = std::strtod(out.c_str(), &end);
  if (rc != 0 || end == out.c_str()) {
    why = out.find("No module named") != std::string::npos ? "numpy is not installed" : "python3 with numpy is not available";
    return std::nullopt;
  }
  return ms;
}

struct config_result {
  int threads;
  tb::stats add, sin, sum;
  float s;
};

}  // namespace

int main(int argc, char** argv) {
  Options o;
  const bool ok = tb::parse_options("bench_host", argc, argv, usage,
                                    {{"--log2n", 4, 31, &o.log2n},
                                     {"--reps", 1, 100000, &o.reps},
                                     {"--devices", 1, 64, &o.devices},
                                     {"--threads", 1, rt::max_host_threads, &o.threads},
                                     {"--numpy", 0, 1, &o.numpy}});
  if (!ok) {
    usage(stderr);
    return 2;
  }
  try {
    const index_t n = index_t(1) << o.log2n;
    const int all = o.threads > 0 ? o.threads : rt::host_threads();
    const DeviceSet ds = host_devices(o.devices);
    const Placement p = o.devices == 1 ? on(ds[0]) : shard(0, ds);
    std::printf("host devices: %d, elements: 2^%d float, cores: %u, medians of %d (best in parentheses)\n", o.devices,
                o.log2n, std::thread::hardware_concurrency(), o.reps);
    auto a = rand<float>({n}, p), b = rand<float>({n}, p);
    auto c = zeros<float>({n}, p);
    const std::vector<float> av = to_host(a), bv = to_host(b);
    std::vector<float> cv(static_cast<std::size_t>(n));

    // The plain loops on one thread, measured once.
    double ps1 = 0, ps8 = 0;
    const auto p_add = time_ms(o.reps, [&] { plain_add(av.data(), bv.data(), cv.data(), n); });
    const auto p_sin = time_ms(o.reps, [&] { plain_sin(av.data(), bv.data(), cv.data(), n); });
    const auto p_sum1 = time_ms(o.reps, [&] { ps1 = plain_sum1(av.data(), n); });
    const auto p_sum8 = time_ms(o.reps, [&] { ps8 = plain_sum8(av.data(), n); });

    // The plain loops split over `all` threads.
    team tm(all);
    std::vector<double> part(static_cast<std::size_t>(all));
    double pst = 0;
    const auto t_add_team = time_ms(o.reps, [&] {
      tm.run([&](int k) {
        const index_t b0 = slice_begin(n, k, all), b1 = slice_begin(n, k + 1, all);
        plain_add(av.data() + b0, bv.data() + b0, cv.data() + b0, b1 - b0);
      });
    });
    const auto t_sin_team = time_ms(o.reps, [&] {
      tm.run([&](int k) {
        const index_t b0 = slice_begin(n, k, all), b1 = slice_begin(n, k + 1, all);
        plain_sin(av.data() + b0, bv.data() + b0, cv.data() + b0, b1 - b0);
      });
    });
    const auto t_sum_team = time_ms(o.reps, [&] {
      tm.run([&](int k) {
        const index_t b0 = slice_begin(n, k, all), b1 = slice_begin(n, k + 1, all);
        part[static_cast<std::size_t>(k)] = plain_sum8(av.data() + b0, b1 - b0);
      });
      pst = 0;
      for (double v : part) pst += v;
    });

    std::vector<config_result> runs;
    for (int t : {1, all}) {
      if (!runs.empty() && runs.back().threads == t) break;
      rt::set_host_threads(t);
      config_result r{.threads = t};
      r.add = time_ms(o.reps, [&] { c = a + b; });
      r.sin = time_ms(o.reps, [&] { c = sin(a) * b + 2 * a; });
      r.sum = time_ms(o.reps, [&] { r.s = sum(a); });
      runs.push_back(r);
    }
    rt::set_host_threads(0);

    auto line = [](const std::string& what, const tb::stats& t, const std::string& base_name, const tb::stats& base) {
      std::printf("  %-34s %8.2f ms (%.2f)   %-30s %8.2f ms (%.2f)   ratio %.3fx\n", what.c_str(), t.median, t.best,
                  base_name.c_str(), base.median, base.best, t.median / base.median);
    };
    const std::string team_name = "plain loop, " + std::to_string(all) + " threads";
    for (const auto& r : runs) {
      const std::string on_t = ", " + std::to_string(r.threads) + (r.threads == 1 ? " thread" : " threads");
      line("Tessera c = a + b" + on_t, r.add, "plain loop, 1 thread", p_add);
      if (r.threads > 1) line("Tessera c = a + b" + on_t, r.add, team_name, t_add_team);
      line("Tessera sin(a) * b + 2 * a" + on_t, r.sin, "plain loop, 1 thread", p_sin);
      if (r.threads > 1) line("Tessera sin(a) * b + 2 * a" + on_t, r.sin, team_name, t_sin_team);
      line("Tessera sum(a)" + on_t, r.sum, "plain loop, 1 accumulator", p_sum1);
      line("Tessera sum(a)" + on_t, r.sum, "plain loop, 8 accumulators", p_sum8);
      if (r.threads > 1) line("Tessera sum(a)" + on_t, r.sum, team_name + ", 8 acc.", t_sum_team);
    }
    std::string why;
    const std::optional<double> np = o.numpy ? numpy_sum_ms(o.log2n, o.reps, why) : std::nullopt;
    if (!o.numpy) why = "--numpy 0";
    if (np) std::printf("  NumPy np.sum (python3, 2^%d float32)  %8.2f ms\n", o.log2n, *np);
    else std::printf("  NumPy np.sum: unavailable (%s)\n", why.c_str());

    const config_result& one = runs.front();
    const config_result& most = runs.back();
    const bool same_bits = std::memcmp(&one.s, &most.s, sizeof(float)) == 0;
    const bool right = std::fabs(double(most.s) - ps8) <= 1e-4 * std::fabs(ps8) &&
                       std::fabs(ps1 - ps8) <= 1e-6 * std::fabs(ps8) && std::fabs(pst - ps8) <= 1e-6 * std::fabs(ps8);
    std::printf("\n== summary (host; all threads = %d: --threads, else TESSERA_HOST_THREADS, else every core) ==\n", all);
    auto target = [](const char* what, double ratio, double limit) {
      std::printf("  %-52s %.3fx   target <= %.2fx   %s\n", what, ratio, limit, ratio <= limit ? "PASS" : "MISS");
    };
    target("a + b, 1 thread / plain loop, 1 thread", one.add.median / p_add.median, 1.1);
    target("sin expr, 1 thread / plain loop, 1 thread", one.sin.median / p_sin.median, 1.1);
    if (runs.size() > 1) {
      target("a + b, all threads / plain loop, same threads", most.add.median / t_add_team.median, 1.1);
      target("sin expr, all threads / plain loop, same threads", most.sin.median / t_sin_team.median, 1.1);
    }
    if (np) {
      target("sum(a), all threads / NumPy np.sum", most.sum.median / *np, 1.5);
      if (runs.size() > 1)
        std::printf("  %-52s %.3fx   (1 thread; informational)\n", "sum(a), 1 thread / NumPy np.sum", one.sum.median / *np);
    } else {
      std::printf("  sum(a): %.2f ms; NumPy's figure is unavailable (%s)\n", most.sum.median, why.c_str());
    }
    if (runs.size() > 1) {
      std::printf("  sum(a) bits with 1 and %d threads: %s (%.9g, %.9g)\n", all, same_bits ? "identical" : "DIFFERENT",
                  double(one.s), double(most.s));
    }
    if (!right) std::printf("WRONG RESULT: sum %g, plain loops %g / %g / %g\n", double(most.s), ps1, ps8, pst);
    return right && same_bits ? 0 : 1;
  } catch (const std::exception& e) {
    std::printf("bench_host: error: %s\n", e.what());
    return 1;
  }
}
