// SPDX-License-Identifier: Apache-2.0
// User kernels and matrix products as tasks of the one planner and executor (issue #19): an
// ElementwiseKernel output that overlaps an input at another offset goes through a temporary like
// an assignment; a ReductionKernel compiles once per signature; a user kernel's or an
// expression's result on one device is placed like its first sharded input; host ReductionKernel
// and host matmul over several host devices (run on the host pool) against plain loops; a
// unified array touched on the host is read correctly by every kind of task afterwards.
#include "test_support.hpp"

#include <tessera/kernel.hpp>  // user kernels: not in the umbrella header

#include <cstdlib>
#include <string>
#include <vector>

using namespace tessera_test;
namespace rtc = tessera::detail::rtc;

namespace {

// A private kernel cache directory per test process, so the counts below are this run's own.
PrivateKernelCache cache_dir;

}  // namespace

TEST_CASE("an ElementwiseKernel output overlapping an input at another offset goes through a temporary") {
  ElementwiseKernel twice("float32 x", "float32 z", "z = 2 * x", "twice_shift");
  ElementwiseKernel add("float32 x, float32 y", "float32 z", "z = x + y", "add_shift");
  for (const auto& ds : device_sets()) {
    for (index_t n : {index_t(2), index_t(9), index_t(257), index_t(1) << 16}) {
      INFO("device set " << set_name(ds) << ", n = " << n);
      const auto v = random_values<float>(static_cast<std::size_t>(n));
      // Within one device, so that the shifted views line up with the output's parts.
      Array<float, 1> x = from_host(v, {n}, on(ds[0]));
      twice(x(range(0, n - 1)), x(range(1, n)));  // reads x[i - 1] for x[i]: forward overlap
      std::vector<float> want = v;
      for (index_t i = 1; i < n; ++i) want[static_cast<std::size_t>(i)] = 2 * v[static_cast<std::size_t>(i - 1)];
      check_equal(to_host(x), want);
      // The same through the DSL's assignment gives the same bits.
      Array<float, 1> y = from_host(v, {n}, on(ds[0]));
      y(range(1, n)) = 2 * y(range(0, n - 1));
      check_equal(to_host(y), want);
      // Backward overlap, two inputs, one of them the output itself at the same offset.
      Array<float, 1> w = from_host(v, {n}, on(ds[0]));
      add(w(range(1, n)), w(range(0, n - 1)), w(range(0, n - 1)));
      std::vector<float> want2 = v;
      for (index_t i = 0; i + 1 < n; ++i)
        want2[static_cast<std::size_t>(i)] = v[static_cast<std::size_t>(i + 1)] + v[static_cast<std::size_t>(i)];
      check_equal(to_host(w), want2);
    }
  }
}

TEST_CASE("a ReductionKernel compiles once per signature, however many kernels and calls") {
  const auto sets = device_sets();
  if (sets.empty()) return;
  const DeviceSet ds = sets.back();
  // GPU kernels need NVRTC: in a build without CUDA only host devices compile.
  if (cuda_variant() && rtc::nvrtc_version() == 0) return;
  ReductionKernel sq("T x", "T y", "x * x", "a + b", "y = sqrt(a)", "0", "sq_once");
  const auto v = random_values<double>(10007);
  Array<double, 1> x = put(v, ds);
  double ss = 0;
  for (double e : v) ss += e * e;
  const int before = rtc::stats().compiled;
  CHECK(sq(x) == doctest::Approx(std::sqrt(ss)).epsilon(1e-12));
  // GPUs: the block, final and post kernels in one NVRTC run; host devices: one host compile.
  CHECK(rtc::stats().compiled == before + 1);
  for (int rep = 0; rep < 3; ++rep) CHECK(sq(x) == doctest::Approx(std::sqrt(ss)).epsilon(1e-12));
  CHECK(rtc::stats().compiled == before + 1);
  // Another signature (float) is another program, compiled once.
  Array<float, 1> f = put(random_values<float>(100), ds);
  (void)sq(f);
  (void)sq(f);
  CHECK(rtc::stats().compiled == before + 2);
}

TEST_CASE("results on one device are placed like their first sharded input (user kernels, expressions)") {
  ElementwiseKernel sd("T x, T y", "T z", "z = (x - y) * (x - y)", "squared_diff");  // CuPy's example
  for (const auto& ds : device_sets()) {
    for (const DeviceSet one : {DeviceSet{ds[0]}, ds}) {
      INFO("device set " << set_name(one));
      Array<float, 2> x = from_host(random_values<float>(5 * 6), {5, 6}, shard(1, one));
      Array<float, 1> y = from_host(random_values<float>(5), {5}, replicate(one));
      const auto z = sd(x, y);
      const auto e = eval(x + y);
      for (const auto* l : {&z.layout(), &e.layout()}) {
        CHECK(l->shard_dim == 1);
        CHECK(!l->replicated);
        CHECK(detail::describe_placement(*l) == detail::describe_placement(x.layout()));
        REQUIRE(l->parts.size() == x.layout().parts.size());
        for (std::size_t s = 0; s < l->parts.size(); ++s) {
          CHECK(l->parts[s].device == x.layout().parts[s].device);
          CHECK(l->parts[s].origin == x.layout().parts[s].origin);
          CHECK(l->parts[s].extent == x.layout().parts[s].extent);
        }
      }
      // Only single-device operands: the result lives on that device.
      Array<float, 1> a = from_host(random_values<float>(7), {7}, on(one[0]));
      const auto b = sd(a, a);
      CHECK(b.layout().shard_dim == -1);
      CHECK(b.layout().parts.size() == 1);
      CHECK(b.layout().parts[0].device == one[0]);
    }
  }
}

TEST_CASE("host ReductionKernel and matmul over several host devices match plain loops") {
  if (cuda_variant()) {
    MESSAGE("SKIPPED: host devices only (the CUDA variant runs them in test_kernels and test_linalg)");
    return;
  }
  ReductionKernel l1("float64 x", "float64 y", "x < 0 ? -x : x", "a + b", "y = a", "0", "l1_host");
  for (int nd : {1, 4, 5}) {
    const DeviceSet ds = host_devices(nd);
    for (index_t n : {index_t(0), index_t(1), index_t(255), index_t(257), index_t(1) << 18}) {
      INFO(nd << " host devices, n = " << n);
      const auto v = random_values<double>(static_cast<std::size_t>(n));
      double want = 0;
      for (double e : v) want += e < 0 ? -e : e;
      CHECK(l1(put(v, ds)) == doctest::Approx(want).epsilon(1e-12));
    }
    // A product large enough that each device's part runs on the host pool.
    const index_t m = 161, k = 97, nn = 53;
    const auto av = random_values<double>(static_cast<std::size_t>(m * k));
    const auto bv = random_values<double>(static_cast<std::size_t>(k * nn));
    for (int variant = 0; variant < 3; ++variant) {
      INFO(nd << " host devices, variant " << variant);
      Array<double, 2> a = from_host(av, {m, k}, variant == 1 ? replicate(ds) : variant == 2 ? shard(1, ds) : shard(0, ds));
      Array<double, 2> b = from_host(bv, {k, nn}, variant == 1 ? shard(1, ds) : variant == 2 ? shard(0, ds) : replicate(ds));
      const auto c = to_host(matmul(a, b));
      std::vector<double> want(static_cast<std::size_t>(m * nn), 0.0);
      for (index_t j = 0; j < nn; ++j)
        for (index_t p = 0; p < k; ++p)
          for (index_t i = 0; i < m; ++i)
            want[static_cast<std::size_t>(i + j * m)] +=
                av[static_cast<std::size_t>(i + p * m)] * bv[static_cast<std::size_t>(p + j * k)];
      check_all_close(c, want, 1e-12, 1e-12);
    }
  }
}

TEST_CASE("arrays touched on the host are read right by user kernels, products and collectives") {
  if (skip_without_gpu()) return;
  ElementwiseKernel inc("float32 x", "float32 z", "z = x + 1", "inc_touched");
  ReductionKernel total("float32 x", "float32 y", "x", "a + b", "y = a", "0", "total_touched");
  for (const auto& ds : device_sets()) {
    const index_t n = 4099;
    const auto v = random_values<float>(static_cast<std::size_t>(n));
    Array<float, 1> x = put(v, ds);
    // Host reads pull unified pages to the host; the next task must see the values as they are.
    (void)x.at(0), (void)x.at(n - 1);
    std::vector<float> plus1 = v;
    for (auto& e : plus1) e += 1.f;
    check_equal(to_host(inc(x)), plus1);
    (void)x.at(1);
    double want = 0;
    for (float e : v) want += e;
    CHECK(total(x) == doctest::Approx(want).epsilon(1e-4));
    Array<float, 1> r = from_host(v, {n}, replicate(ds));
    (void)r.at(5);
    allreduce(r, reduce_op::max);
    check_equal(to_host(r), v);
    Array<float, 2> m = from_host(v, {n, 1}, replicate(ds));
    (void)m.at(3, 0);
    Array<float, 1> one = from_host(std::vector<float>{2.f}, {1}, replicate(ds));
    std::vector<float> twice = v;
    for (auto& e : twice) e *= 2;
    check_equal(to_host(matmul(m, one)), twice);
  }
}
