// SPDX-License-Identifier: Apache-2.0
// Threads within one host shard (issue #13 item 7): shards above rt::host_chunk_elements run in
// chunks on the host thread pool. Results against plain loops for sizes around the chunk size,
// 1 to 3 host devices and several thread counts (rt::set_host_threads stands in for
// TESSERA_HOST_THREADS, which is read once); full sums with the same bits whatever the thread
// count; errors from a chunk arriving unchanged with nothing left running; and the pool itself:
// concurrency, nesting, no more threads than host_threads() with several host devices.
// These run on host devices in both ctest variants: the host executor is what they test.
#include "test_support.hpp"

#include <backend/runtime/runtime.hpp>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <mutex>
#include <set>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

using namespace tessera;
using namespace tessera_test;
namespace rt = tessera::detail::rt;

namespace {

constexpr index_t chunk = rt::host_chunk_elements;

// Uses n host threads for the scope, then the default again.
struct host_threads_scope {
  explicit host_threads_scope(int n) { rt::set_host_threads(n); }
  ~host_threads_scope() { rt::set_host_threads(0); }
  host_threads_scope(const host_threads_scope&) = delete;
  host_threads_scope& operator=(const host_threads_scope&) = delete;
};

const std::vector<int> thread_counts = {1, 2, 3, 5};

// Elements per shard around the chunk size, and odd large ones.
const std::vector<index_t> shard_sizes = {chunk - 1, chunk, chunk + 1, 3 * chunk + 12345, (index_t(1) << 20) + 3};

// What an error thrown inside a chunk must arrive as: its own type, not a wrapper.
struct chunk_failure : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// Host-side bookkeeping of the functors below (host code only: the device pass never reads it).
std::atomic<int> active{0};          // calls in progress
std::atomic<std::int64_t> calls{0};  // calls started
std::atomic<int> generation{0};      // a new set of threads to record
std::mutex ids_mutex;
std::set<std::thread::id> thread_ids;

#if !TS_ON_DEVICE
struct active_call {
  active_call() {
    active.fetch_add(1, std::memory_order_relaxed);
    calls.fetch_add(1, std::memory_order_relaxed);
  }
  ~active_call() { active.fetch_sub(1, std::memory_order_relaxed); }
};
void note_thread() {
  thread_local int seen = -1;
  const int g = generation.load(std::memory_order_relaxed);
  if (seen == g) return;
  seen = g;
  std::lock_guard<std::mutex> lock(ids_mutex);
  thread_ids.insert(std::this_thread::get_id());
}
#endif

// Throws chunk_failure on a negative element (on the host; a kernel cannot throw).
struct fail_on_negative {
  TS_HD float operator()(float x) const {
#if !TS_ON_DEVICE
    active_call guard;
    if (x < 0) throw chunk_failure("negative element " + std::to_string(x));
#endif
    return x + 1;
  }
};

// Records which threads evaluate elements.
struct record_thread {
  TS_HD float operator()(float x) const {
#if !TS_ON_DEVICE
    note_thread();
#endif
    return 2 * x;
  }
};

std::vector<float> positive_values(std::size_t n) { return random_values<float>(n, 0.5, 2.0); }

}  // namespace

TEST_CASE("elementwise on large host shards equals a plain loop, for every thread count") {
  for (int ndev = 1; ndev <= 3; ++ndev) {
    const DeviceSet ds = host_devices(ndev);
    for (index_t per : shard_sizes) {
      const auto n = static_cast<std::size_t>(per * ndev);
      const auto av = random_values<float>(n), bv = random_values<float>(n);
      const auto xv = random_values<std::int64_t>(n, -1000, 1000), yv = random_values<std::int64_t>(n, -1000, 1000);
      std::vector<float> want(n);
      std::vector<std::int64_t> want_i(n);
      for (std::size_t i = 0; i < n; ++i) {
        want[i] = av[i] * bv[i] + 2.0f * av[i];
        want_i[i] = xv[i] * 3 - yv[i];
      }
      const auto a = put(av, ds), b = put(bv, ds);
      const auto x = put(xv, ds), y = put(yv, ds);
      for (int t : thread_counts) {
        INFO(ndev << " host devices, " << per << " elements per shard, " << t << " threads");
        host_threads_scope threads(t);
        auto c = zeros<float>({static_cast<index_t>(n)}, shard(0, ds));
        c = a * b + 2 * a;  // the linear path, into an existing array
        check_values(to_host(c), want, 1e-6, 1e-6, "a * b + 2 * a");
        check_values(to_host(eval(x * 3 - y)), want_i, 0, 0, "x * 3 - y");
      }
    }
  }
}

TEST_CASE("cartesian assignments through views on large host shards equal a plain loop") {
  // Rows of 255 put chunk boundaries inside rows: each chunk decodes its first index, then carries.
  for (int ndev = 1; ndev <= 3; ++ndev) {
    const DeviceSet ds = host_devices(ndev);
    for (index_t rows : {index_t(255), index_t(256)}) {
      for (index_t cols_per : {index_t(255), index_t(256), index_t(257), index_t(1001)}) {
        const index_t m = rows + 2, cols = cols_per * ndev;
        const Dims shape{m, cols};
        const auto av = fresh(shape), bv = fresh(shape);
        const auto a = make<2>(av, shape, shard(1, ds)), b = make<2>(bv, shape, shard(1, ds));
        auto at = [m](const std::vector<float>& v, index_t i, index_t j) { return v[static_cast<std::size_t>(i + m * j)]; };
        std::vector<float> want(static_cast<std::size_t>(m * cols), 0.0f);
        for (index_t j = 0; j < cols; ++j)
          for (index_t i = 0; i < rows; ++i) want[static_cast<std::size_t>(i + m * j)] = at(av, i + 1, j) * 2 + at(bv, i + 2, j);
        const index_t half = (m + 1) / 2;  // a(range(0, m, 2), _): every other row
        std::vector<float> want_step(static_cast<std::size_t>(half * cols));
        for (index_t j = 0; j < cols; ++j)
          for (index_t i = 0; i < half; ++i) want_step[static_cast<std::size_t>(i + half * j)] = at(av, 2 * i, j) - 1;
        for (int t : thread_counts) {
          INFO(ndev << " host devices, " << rows << " x " << cols_per << " per shard, " << t << " threads");
          host_threads_scope threads(t);
          auto c = zeros<float>({m, cols}, shard(1, ds));
          c(range(0, rows), _) = a(range(1, m - 1), _) * 2 + b(range(2, m), _);
          check_values(to_host(c), want, 1e-6, 1e-6, "c(0:rows, :) = a(1:m-1, :) * 2 + b(2:m, :)");
          check_values(to_host(eval(a(range(0, m, 2), _) - 1)), want_step, 1e-6, 1e-6, "a(0:2:m, :) - 1");
        }
      }
    }
  }
}

TEST_CASE("full reductions of large host shards: the same bits for every thread count, close to a plain loop") {
  for (int ndev = 1; ndev <= 3; ++ndev) {
    const DeviceSet ds = host_devices(ndev);
    for (index_t per : shard_sizes) {
      const auto n = static_cast<std::size_t>(per * ndev);
      const auto av = random_values<float>(n), bv = random_values<float>(n);
      const auto kv = random_values<std::int32_t>(n, -1000, 1000);
      double want = 0, want_dot = 0;
      std::int64_t want_k = 0, want_pos = 0;
      float want_max = av[0];
      for (std::size_t i = 0; i < n; ++i) {
        want += av[i];
        want_dot += double(av[i]) * double(bv[i]);
        want_k += kv[i];
        want_pos += av[i] > 0 ? 1 : 0;
        want_max = std::max(want_max, av[i]);
      }
      const auto a = put(av, ds), b = put(bv, ds);
      const auto k = put(kv, ds);
      std::vector<float> sums, dots;
      for (int t : thread_counts) {
        INFO(ndev << " host devices, " << per << " elements per shard, " << t << " threads");
        host_threads_scope threads(t);
        sums.push_back(sum(a));
        dots.push_back(sum(a * b));
        CHECK(close(sums.back(), want, 1e-5, 1e-3));
        CHECK(close(dots.back(), want_dot, 1e-5, 1e-3));
        CHECK(sum(k) == want_k);
        CHECK(count(a > 0) == want_pos);
        CHECK(maximum(a) == want_max);
        CHECK(float(sum(a, as_array).at()) == sums.back());
      }
      INFO(ndev << " host devices, " << per << " elements per shard");
      for (std::size_t i = 1; i < sums.size(); ++i) {
        CHECK(sums[i] == sums[0]);
        CHECK(dots[i] == dots[0]);
      }
    }
  }
}

TEST_CASE("a full sum over a strided view of large host shards: the same bits for every thread count") {
  for (int ndev = 1; ndev <= 3; ++ndev) {
    const DeviceSet ds = host_devices(ndev);
    const index_t m = 301, cols = 700 * ndev;
    const Dims shape{m, cols};
    const auto av = fresh(shape);
    const auto a = make<2>(av, shape, shard(1, ds));
    double want = 0;
    for (index_t j = 0; j < cols; ++j)
      for (index_t i = 1; i < m - 1; ++i) want += av[static_cast<std::size_t>(i + m * j)];
    std::vector<float> got;
    for (int t : thread_counts) {
      INFO(ndev << " host devices, " << t << " threads");
      host_threads_scope threads(t);
      got.push_back(sum(a(range(1, m - 1), _)));
      CHECK(close(got.back(), want, 1e-5, 1e-3));
    }
    for (std::size_t i = 1; i < got.size(); ++i) CHECK(got[i] == got[0]);
  }
}

TEST_CASE("reductions along dims of large host shards, outputs spread over threads, equal a plain loop") {
  for (int ndev = 1; ndev <= 3; ++ndev) {
    const DeviceSet ds = host_devices(ndev);
    const index_t m = 300, cols = 701 * ndev;
    const Dims shape{m, cols};
    const auto av = fresh(shape);
    const auto a = make<2>(av, shape, shard(1, ds));
    std::vector<double> want0(static_cast<std::size_t>(cols), 0.0), want1(static_cast<std::size_t>(m), 0.0);
    for (index_t j = 0; j < cols; ++j) {
      for (index_t i = 0; i < m; ++i) {
        const float v = av[static_cast<std::size_t>(i + m * j)];
        want0[static_cast<std::size_t>(j)] += v;
        want1[static_cast<std::size_t>(i)] += v;
      }
    }
    std::vector<std::vector<float>> got0, got1;
    for (int t : thread_counts) {
      INFO(ndev << " host devices, " << t << " threads");
      host_threads_scope threads(t);
      got0.push_back(to_host(sum(a, dims(0))));
      got1.push_back(to_host(sum(a, dims(1))));
      check_values(got0.back(), want0, 1e-5, 1e-4, "sum(a, dims(0))");
      check_values(got1.back(), want1, 1e-5, 1e-3, "sum(a, dims(1))");
    }
    for (std::size_t i = 1; i < got0.size(); ++i) {
      check_equal(got0[i], got0[0]);
      check_equal(got1[i], got1[0]);
    }
  }
}

TEST_CASE("an exception inside a chunk arrives with its type and message, with nothing left running") {
  for (int ndev = 1; ndev <= 3; ++ndev) {
    const DeviceSet ds = host_devices(ndev);
    const index_t per = 4 * chunk + 7;
    const auto n = static_cast<std::size_t>(per * ndev);
    auto av = positive_values(n);
    av[static_cast<std::size_t>(3 * chunk + 5)] = -3.0f;  // in the fourth chunk of the first shard
    const auto a = put(av, ds);
    for (int t : thread_counts) {
      INFO(ndev << " host devices, " << t << " threads");
      host_threads_scope threads(t);
      auto c = zeros<float>({static_cast<index_t>(n)}, shard(0, ds));
      auto check_stopped = [] {
        CHECK(active.load() == 0);
        const std::int64_t before = calls.load();
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
        CHECK(calls.load() == before);
      };
      check_mentions(expect_error<chunk_failure>([&] { c = broadcast(fail_on_negative{}, a); }), {"negative element -3"});
      check_stopped();
      check_mentions(expect_error<chunk_failure>([&] { (void)sum(broadcast(fail_on_negative{}, a)); }),
                     {"negative element -3"});
      check_stopped();
      // The library keeps working, on the same threads.
      check_values(to_host(eval(a * 2)), [&] {
        std::vector<float> w(n);
        for (std::size_t i = 0; i < n; ++i) w[i] = av[i] * 2;
        return w;
      }(), 0, 0, "a * 2 after the error");
    }
  }
}

TEST_CASE("several large host shards share the pool: no more threads than host_threads()") {
  const DeviceSet ds = host_devices(3);
  const index_t per = 8 * chunk + 3;
  const auto n = static_cast<std::size_t>(per * 3);
  const auto a = put(positive_values(n), ds);
  for (int t : {1, 2, 3}) {
    INFO(t << " threads");
    host_threads_scope threads(t);
    {
      std::lock_guard<std::mutex> lock(ids_mutex);
      thread_ids.clear();
    }
    generation.fetch_add(1);
    const auto c = eval(broadcast(record_thread{}, a));
    std::lock_guard<std::mutex> lock(ids_mutex);
    CHECK(!thread_ids.empty());
    CHECK(thread_ids.size() <= static_cast<std::size_t>(t));
  }
}

TEST_CASE("the host pool: concurrent bodies, nested calls, every index once, the lowest failing index") {
  SUBCASE("two threads run two bodies at the same time") {
    host_threads_scope threads(2);
    std::atomic<int> arrived{0};
    std::atomic<bool> met{true};
    struct ctx_t {
      std::atomic<int>* arrived;
      std::atomic<bool>* met;
    } ctx{&arrived, &met};
    rt::parallel_for(
        2,
        [](const void* p, std::int64_t) {
          const auto& c = *static_cast<const ctx_t*>(p);
          c.arrived->fetch_add(1);
          const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
          while (c.arrived->load() < 2)
            if (std::chrono::steady_clock::now() > deadline) {
              c.met->store(false);
              return;
            }
        },
        &ctx);
    CHECK(met.load());
  }
  SUBCASE("nested calls finish and run every index exactly once") {
    for (int t : {1, 2, 3, 8}) {
      INFO(t << " threads");
      host_threads_scope threads(t);
      std::vector<std::atomic<int>> hits(5 * 7);
      rt::parallel_for(
          5,
          [](const void* p, std::int64_t i) {
            struct inner_t {
              std::vector<std::atomic<int>>* hits;
              std::int64_t row;
            } inner{static_cast<std::vector<std::atomic<int>>*>(const_cast<void*>(p)), i};
            rt::parallel_for(
                7,
                [](const void* q, std::int64_t j) {
                  const auto& x = *static_cast<const inner_t*>(q);
                  (*x.hits)[static_cast<std::size_t>(x.row * 7 + j)].fetch_add(1);
                },
                &inner);
          },
          &hits);
      for (auto& h : hits) CHECK(h.load() == 1);
    }
  }
  SUBCASE("the exception of a failing index, after every started body has returned") {
    for (int t : {1, 2, 3}) {
      INFO(t << " threads");
      host_threads_scope threads(t);
      std::atomic<int> running{0};
      const std::string msg = expect_error<chunk_failure>([&] {
        rt::parallel_for(
            64,
            [](const void* p, std::int64_t i) {
              auto& r = *static_cast<std::atomic<int>*>(const_cast<void*>(p));
              r.fetch_add(1);
              std::this_thread::sleep_for(std::chrono::microseconds(200));
              r.fetch_sub(1);
              if (i == 9) throw chunk_failure("index 9 failed");
            },
            &running);
      });
      CHECK(msg == "index 9 failed");
      CHECK(running.load() == 0);
    }
  }
}

TEST_CASE("TESSERA_HOST_THREADS chooses the thread count; an invalid value is named") {
  const char* old = std::getenv("TESSERA_HOST_THREADS");
  const std::string saved = old ? old : "";
  ::setenv("TESSERA_HOST_THREADS", "3", 1);
  rt::set_host_threads(0);  // read the environment again
  CHECK(rt::host_threads() == 3);
  ::setenv("TESSERA_HOST_THREADS", "many", 1);
  rt::set_host_threads(0);
  check_mentions(expect_error<invalid_argument>([] { (void)rt::host_threads(); }), {"TESSERA_HOST_THREADS=many"});
  ::unsetenv("TESSERA_HOST_THREADS");
  rt::set_host_threads(0);
  const unsigned hw = std::thread::hardware_concurrency();
  CHECK(rt::host_threads() == static_cast<int>(hw == 0 ? 1 : hw));
  if (old) ::setenv("TESSERA_HOST_THREADS", saved.c_str(), 1);
  rt::set_host_threads(0);
  CHECK_THROWS_AS(rt::set_host_threads(rt::max_host_threads + 1), invalid_argument);
}
