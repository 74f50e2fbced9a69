// SPDX-License-Identifier: Apache-2.0
// Operations over several GPUs queue their shards from one launcher thread per GPU
// (backend/runtime/launchers.cpp), and a full reduction to the host waits for each GPU's signal in
// mapped memory. These tests run loops of assignments and reductions against plain loops on the
// host: back to back (the launchers spinning: the hand-offs are counted), with pauses longer than
// their spin window (asleep, then woken), assignments from two program threads at once, and sums
// between reduction kernels (whose result slot has no signal). On host devices the same programs
// check the results without launchers. The `.badspin` variant runs the last case alone, with
// TESSERA_LAUNCH_SPIN_US=abc.
#include "test_support.hpp"
#include <backend/runtime/runtime.hpp>  // rt::launcher_handoffs
#include <tessera/kernel.hpp>           // ReductionKernel: not in the umbrella header

#include <chrono>
#include <cstdlib>
#include <cstring>
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

// Whether this process hands shards to launchers: several GPUs, the launchers on, enough cores.
bool launchers_expected(const DeviceSet& ds) {
  const char* off = std::getenv("TESSERA_PARALLEL_LAUNCH");
  return cuda_variant() && ds.size() > 1 && !(off != nullptr && std::strcmp(off, "0") == 0) &&
         std::thread::hardware_concurrency() >= ds.size() + 1;
}

}  // namespace

TEST_CASE("loops of assignments and sums over several devices, back to back") {
  for (const auto& ds : multi_device_sets()) {
    const std::uint64_t before = detail::rt::launcher_handoffs();
    for (index_t n : {index_t(1), index_t(3), index_t(1023), index_t(1025), index_t(1) << 20})
      run_steps(ds, n, 12, 0, 0);
    // Empty arrays: nothing to launch, every sum 0.
    auto e = zeros<float>({0}, shard(0, ds));
    e = 2.0f * e + 1.0f;
    CHECK(sum(e) == 0.0f);
    if (launchers_expected(ds)) CHECK(detail::rt::launcher_handoffs() > before);
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

TEST_CASE("sums between reduction kernels on the same devices give their own results") {
  // A sum's slot is armed for its signal, a ReductionKernel's is not: each read must wait for its
  // own kernel, whichever came before.
  ReductionKernel sumsq("float64 x", "float64 y", "x * x", "a + b", "y = a", "0", "launchers_sumsq");
  for (const auto& ds : device_sets()) {
    INFO("device set " << set_name(ds));
    for (index_t n : {index_t(1), index_t(4097), index_t(1) << 20}) {
      const auto v = random_values<double>(static_cast<std::size_t>(n));
      const auto x = from_host(v, {n}, shard(0, ds));
      double want = 0, want_sq = 0;
      for (double e : v) want += e, want_sq += e * e;
      for (int k = 0; k < 3; ++k) {
        CHECK(close(sum(x), want, 1e-12, 1e-9));
        CHECK(close(sumsq(x), want_sq, 1e-12, 1e-9));
        CHECK(close(sum(x * x), want_sq, 1e-12, 1e-9));
      }
    }
  }
}

TEST_CASE("an invalid TESSERA_LAUNCH_SPIN_US is named, and the arrays stay intact") {
  const char* spin = std::getenv("TESSERA_LAUNCH_SPIN_US");
  if (spin == nullptr || std::strcmp(spin, "abc") != 0) {
    MESSAGE("SKIPPED: runs in the .badspin variant (TESSERA_LAUNCH_SPIN_US=abc)");
    return;
  }
  const DeviceSet ds = cuda_variant() ? gpus() : host_devices(2);
  if (ds.empty()) {
    MESSAGE("SKIPPED: no GPU visible (TESSERA_BACKEND=cuda)");
    return;
  }
  auto v = random_values<float>(1000);
  auto a = from_host(v, {1000}, shard(0, ds));
  const std::string msg = expect_error<invalid_argument>([&] { a = a + 1.0f; });
  check_mentions(msg, {"TESSERA_LAUNCH_SPIN_US=abc", "microseconds"});
  CHECK(to_host(a) == v);
  // seq does not ask for the launchers.
  assign(a, a + 1.0f, seq);
  for (auto& x : v) x += 1.0f;
  CHECK(to_host(a) == v);
}
