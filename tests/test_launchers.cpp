// SPDX-License-Identifier: Apache-2.0
// Operations over several GPUs queue their shards from one launcher thread per GPU
// (backend/runtime/launchers.cpp), and a full reduction to the host waits for each GPU's signal in
// mapped memory. These tests run loops of assignments and reductions against plain loops on the
// host: back to back (the launchers spinning), with pauses longer than their spin window (asleep,
// then woken), assignments from two program threads at once, and with a reduction's result read after other
// work. On host devices the same programs check the results without launchers.
#include "test_support.hpp"

#include <chrono>
#include <cmath>
#include <thread>
#include <vector>

using namespace tessera;
using namespace tessera_test;

namespace {

// A time step of a loop of small operations: b = 0.5 * b + a, c = b * b - a, then sum(c), each
// checked against the same steps on the host. Pauses (in microseconds) come after the steps listed.
void run_steps(const DeviceSet& ds, index_t n, int steps, int pause_every, int pause_us) {
  INFO("device set " << set_name(ds) << ", n " << n << ", pause every " << pause_every << " steps");
  const auto av = random_values<float>(static_cast<std::size_t>(n));
  auto bv = random_values<float>(static_cast<std::size_t>(n));
  std::vector<float> cv(bv.size());
  const auto a = from_host(av, {n}, shard(0, ds));
  auto b = from_host(bv, {n}, shard(0, ds));
  auto c = zeros<float>({n}, shard(0, ds));
  for (int k = 0; k < steps; ++k) {
    b = 0.5f * b + a;
    c = b * b - a;
    double want = 0;
    for (std::size_t i = 0; i < bv.size(); ++i) {
      bv[i] = 0.5f * bv[i] + av[i];
      cv[i] = bv[i] * bv[i] - av[i];
      want += cv[i];
    }
    const double got = sum(c);
    CHECK_MESSAGE(close(got, want, 1e-5, 1e-4 * (1 + std::sqrt(double(n)))), "step " << k);
    if (pause_every > 0 && (k + 1) % pause_every == 0)
      std::this_thread::sleep_for(std::chrono::microseconds(pause_us));
  }
  check_all_close(to_host(c), cv);
}

}  // namespace

TEST_CASE("loops of assignments and sums over several devices, back to back") {
  for (const auto& ds : multi_device_sets()) {
    for (index_t n : {index_t(0), index_t(1), index_t(3), index_t(1023), index_t(1025), index_t(1) << 20})
      run_steps(ds, n, 12, 0, 0);
  }
}

TEST_CASE("with pauses longer than the launchers' spin window, they sleep and wake") {
  // The default window is 500 us: 3 ms pauses put every launcher to sleep, and the step after a
  // pause queues all shards from this thread while it wakes them.
  for (const auto& ds : multi_device_sets()) {
    for (index_t n : {index_t(5), index_t(65537)}) run_steps(ds, n, 9, 2, 3000);
  }
}

TEST_CASE("two program threads run assignments over all devices at once") {
  // One thread gets the launchers, the other queues its own shards (reductions from two threads
  // onto one device are not supported: docs/semantics.md).
  for (const auto& ds : multi_device_sets()) {
    const index_t n = 100003;
    std::vector<std::vector<float>> inputs(2), results(2);
    for (int t = 0; t < 2; ++t) inputs[t] = random_values<float>(static_cast<std::size_t>(n));
    std::vector<std::thread> threads;
    for (int t = 0; t < 2; ++t) {
      // Each thread owns its arrays; doctest's checks are not thread-safe, so the results come back
      // to this one.
      threads.emplace_back([&, t] {
        auto x = from_host(inputs[t], {n}, shard(0, ds));
        auto y = zeros<float>({n}, shard(0, ds));
        for (int k = 0; k < 40; ++k) {
          x = x * 0.75f + 1.0f;
          y = y + x;
        }
        results[t] = to_host(y);
      });
    }
    for (auto& th : threads) th.join();
    for (int t = 0; t < 2; ++t) {
      std::vector<float> x = inputs[t], y(x.size(), 0.0f);
      for (int k = 0; k < 40; ++k) {
        for (std::size_t i = 0; i < x.size(); ++i) {
          x[i] = x[i] * 0.75f + 1.0f;
          y[i] = y[i] + x[i];
        }
      }
      INFO("thread " << t << ", device set " << set_name(ds));
      // GPUs contract x * 0.75f + 1 into one fma: compared with a tolerance.
      check_all_close(results[t], y, 1e-5, 1e-4);
    }
  }
}

TEST_CASE("a reduction's host result after other work on the same devices") {
  // The signal is per device: work queued after the reduction does not delay its read, and a
  // reduction along dims (no signal) between two full ones reads its result after its stream.
  for (const auto& ds : device_sets()) {
    const index_t rows = 257, cols = 1031;
    INFO("device set " << set_name(ds));
    const auto v = random_values<double>(static_cast<std::size_t>(rows * cols));
    const auto x = from_host(v, {rows, cols}, shard(1, ds));
    double want = 0, want_sq = 0;
    for (double e : v) want += e, want_sq += e * e;
    const double s1 = sum(x);
    const auto cols_sum = sum(x, dims(0));
    const double s2 = sum(x * x);
    CHECK(close(s1, want, 1e-12, 1e-9));
    CHECK(close(s2, want_sq, 1e-12, 1e-9));
    const auto cs = to_host(cols_sum);
    REQUIRE(cs.size() == static_cast<std::size_t>(cols));
    for (index_t j = 0; j < cols; j += 103) {
      double w = 0;
      for (index_t i = 0; i < rows; ++i) w += v[static_cast<std::size_t>(i + j * rows)];
      CHECK(close(cs[static_cast<std::size_t>(j)], w, 1e-12, 1e-10));
    }
  }
}
