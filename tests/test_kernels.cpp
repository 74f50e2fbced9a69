// SPDX-License-Identifier: Apache-2.0
// User kernels: NVRTC compilation and its caches (no GPU needed), compile errors with the user's
// line numbers, ElementwiseKernel on every device set against plain loops (placeholders, scalars,
// broadcasting, views, given outputs), RawKernel launches per shard on GPUs.
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

bool have_nvrtc() { return rtc::nvrtc_version() > 0; }

const char* scale_source = R"(
extern "C" __global__ void scale(tessera::shard<float, 1> x, float by) {
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < x.size; i += gridDim.x * (long long)blockDim.x)
    x(i) *= by;
}
)";

}  // namespace

TEST_CASE("RawKernel compiles through NVRTC without a GPU, with memory and disk caches") {
  if (!have_nvrtc()) {
    MESSAGE("SKIPPED: built without CUDA (no NVRTC)");
    return;
  }
  CHECK(rtc::cache_dir() == cache_dir.path);
  RawKernel k(scale_source, "scale");
  const auto before = rtc::stats();
  k.compile(90);
  const auto after_first = rtc::stats();
  CHECK(after_first.compiled == before.compiled + 1);
  k.compile(90);
  CHECK(rtc::stats().memory_hits == after_first.memory_hits + 1);
  rtc::forget_memory_cache();
  k.compile(90);
  CHECK(rtc::stats().disk_hits == after_first.disk_hits + 1);
  CHECK(rtc::stats().compiled == after_first.compiled);
  // Another architecture or other options are other entries.
  k.compile(80);
  RawKernel fast(scale_source, "scale", {"-use_fast_math"});
  fast.compile(90);
  CHECK(rtc::stats().compiled == after_first.compiled + 2);
}

TEST_CASE("a kernel that does not compile throws compile_error with the line of the user's source") {
  if (have_nvrtc()) {
    RawKernel bad("extern \"C\" __global__ void broken(float* p) {\n  p[0] = 1;\n  p[1] = undefined_name;\n}\n",
                  "broken");
    const std::string msg = expect_error<compile_error>([&] { bad.compile(90); });
    check_mentions(msg, {"broken", "undefined_name", "broken(3)"});
  }
  ElementwiseKernel bad_body("float32 x", "float32 z", "z = x +* ;", "bad_body");
  if (cuda_variant() && gpus().empty()) return;
  const auto ds = device_sets().front();
  Array<float, 1> x = from_host(random_values<float>(10), {10}, shard(0, ds));
  const std::string msg = expect_error<compile_error>([&] { (void)bad_body(x); });
  check_mentions(msg, {"bad_body", "1"});
  check_equal(to_host(x), to_host(x));  // the input is intact and readable
}

TEST_CASE("ElementwiseKernel matches the fused DSL and plain loops on every device set") {
  ElementwiseKernel mix("float32 x, float32 y", "float32 z", "z = sin(x) * y + 2 * x", "mix");
  ElementwiseKernel affine("T x, T a, T b", "T z", "z = a * x + b", "affine");
  for_each_case([&](const DeviceSet& ds, std::size_t n) {
    const auto xv = random_values<float>(n), yv = random_values<float>(n);
    Array<float, 1> x = put(xv, ds), y = put(yv, ds);
    Array<float, 1> z = mix(x, y);
    std::vector<double> want(n);
    for (std::size_t i = 0; i < n; ++i) want[i] = std::sin(double(xv[i])) * yv[i] + 2.0 * xv[i];
    check_all_close(to_host(z), want, 1e-5, 1e-5);
    // A placeholder bound by the first array; scalars converted to it.
    const auto dv = random_values<double>(n);
    Array<double, 1> d = put(dv, ds);
    Array<double, 1> r = affine(d, 3, 0.5f);
    std::vector<double> want_r(n);
    for (std::size_t i = 0; i < n; ++i) want_r[i] = 3.0 * dv[i] + 0.5;
    check_all_close(to_host(r), want_r, 1e-12, 1e-12);
    // A given output is written and returned, sharing its storage.
    Array<float, 1> out = zeros<float>({static_cast<index_t>(n)}, shard(0, ds));
    Array<float, 1> same = mix(x, y, out);
    check_all_close(to_host(out), want, 1e-5, 1e-5);
    if (n > 0) CHECK(same.layout().parts[0].ptr == out.layout().parts[0].ptr);
  });
}

TEST_CASE("ElementwiseKernel broadcasts, reads views and writes bool and integer outputs") {
  ElementwiseKernel add("T x, T y", "T z", "z = x + y", "add");
  ElementwiseKernel positive("float64 x", "bool z", "z = x > 0", "positive");
  ElementwiseKernel index_of("int32 x", "int64 z", "z = (long long)x * 1000 + i", "index_of");
  for (const auto& ds : device_sets()) {
    const index_t m = 37, n = 19;
    const auto av = random_values<double>(static_cast<std::size_t>(m * n));
    const auto rv = random_values<double>(static_cast<std::size_t>(n));
    Array<double, 2> a = from_host(av, {m, n}, shard(1, ds));
    Array<double, 2> row = from_host(rv, {1, n}, shard(1, ds));
    Array<double, 2> s = add(a, row);  // a row broadcast down the columns
    std::vector<double> want(av.size());
    for (index_t j = 0; j < n; ++j)
      for (index_t i = 0; i < m; ++i) want[i + j * m] = av[i + j * m] + rv[j];
    check_all_close(to_host(s), want, 1e-12, 1e-12);
    // A strided view (cartesian path).
    auto v = a(range(1, m, 3), _);
    const auto vv = to_host(v);
    Array<double, 2> twice = add(v, v);
    std::vector<double> want_v(vv.size());
    for (std::size_t i = 0; i < vv.size(); ++i) want_v[i] = 2 * vv[i];
    check_all_close(to_host(twice), want_v, 1e-12, 1e-12);
    Array<bool, 2> pos = positive.call<bool>(a);
    const auto pv = to_host(pos);
    for (std::size_t i = 0; i < av.size(); ++i) CHECK(pv[i] == (av[i] > 0));
    // i is the element's index within its shard.
    const auto iv = random_values<std::int32_t>(40);
    Array<std::int32_t, 1> xi = put(iv, ds);
    Array<std::int64_t, 1> got = index_of.call<std::int64_t>(xi);
    const auto gv = to_host(got);
    for (const auto& p : xi.layout().parts)
      for (index_t k = 0; k < p.extent[0]; ++k)
        CHECK(gv[static_cast<std::size_t>(p.origin[0] + k)] == std::int64_t(iv[static_cast<std::size_t>(p.origin[0] + k)]) * 1000 + k);
  }
}

TEST_CASE("ElementwiseKernel refuses bad calls with named errors") {
  ElementwiseKernel mix("float32 x, float32 y", "float32 z", "z = x * y", "mulf");
  for (const auto& ds : device_sets()) {
    Array<float, 1> x = from_host(random_values<float>(8), {8}, shard(0, ds));
    Array<double, 1> d = from_host(random_values<double>(8), {8}, shard(0, ds));
    check_mentions(expect_error<invalid_argument>([&] { (void)mix(x); }), {"mulf", "2 inputs", "1 arguments"});
    check_mentions(expect_error<invalid_argument>([&] { (void)mix(x, d); }), {"argument #2", "float", "double"});
    Array<float, 1> y9 = from_host(random_values<float>(9), {9}, shard(0, ds));
    (void)expect_error<dimension_mismatch>([&] { (void)mix(x, y9); });
    if (ds.size() > 1) {
      Array<float, 1> other = from_host(random_values<float>(8), {8}, on(ds[1]));
      check_mentions(expect_error<placement_mismatch>([&] { (void)mix(x, other); }), {"mulf", "argument #2", "Fix"});
    }
  }
  CHECK_THROWS_AS(ElementwiseKernel("float32", "float32 z", "z = 1", "noname"), invalid_argument);
}

TEST_CASE("RawKernel runs once per shard on GPUs, with per-shard arguments") {
  if (!cuda_variant()) {
    RawKernel k(scale_source, "scale");
    Array<float, 1> x = zeros<float>({8}, shard(0, host_devices(2)));
    check_mentions(expect_error<invalid_argument>([&] { k(x, 2.f); }), {"scale", "not a GPU"});
    return;
  }
  for (const auto& ds : device_sets()) {
    RawKernel k(scale_source, "scale");
    for (index_t n : {index_t(1), index_t(1000), index_t(1) << 20}) {
      const auto xv = random_values<float>(static_cast<std::size_t>(n));
      Array<float, 1> x = put(xv, ds);
      k(x, 2.f);
      std::vector<double> want(xv.begin(), xv.end());
      for (auto& w : want) w *= 2;
      check_all_close(to_host(x), want, 0, 0);
      // A value per shard: shard s adds s + 1.
      RawKernel add(R"(extern "C" __global__ void add_own(tessera::shard<float, 1> x, float v) {
        for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < x.size; i += gridDim.x * (long long)blockDim.x)
          x(i) += v * (x.index + 1) + 0 * x.count;
      })", "add_own");
      std::vector<float> per(ds.size(), 1.f);
      add(LaunchConfig{64, 128}, x, per_shard(per));
      const auto got = to_host(x);
      for (const auto& p : x.layout().parts)
        for (index_t i = 0; i < p.extent[0]; ++i) {
          const auto g = static_cast<std::size_t>(p.origin[0] + i);
          CHECK(got[g] == doctest::Approx(want[g] + double(&p - x.layout().parts.data() + 1)));
        }
    }
  }
}

TEST_CASE("the generated elementwise source compiles for sm_90 (checked without a GPU)") {
  if (!have_nvrtc()) {
    MESSAGE("SKIPPED: built without CUDA (no NVRTC)");
    return;
  }
  using tessera::detail::GenArg;
  for (int rank : {1, 3}) {
    const std::string code = tessera::detail::elementwise_source({{"float", "x", true}, {"double", "c", false}},
                                                                  {{"float", "z", true}}, rank, "z = x * c", "", "gen");
    CHECK_NOTHROW((void)rtc::cubin({code, "tessera_elementwise", {}, "gen"}, 90));
    const std::string red = tessera::detail::reduction_source({{"float", "x", true}}, {"double", "y", true}, "double",
                                                              rank, "x * x", "a + b", "y = sqrt(a)", "0", "", "red");
    for (const char* k : {"tessera_reduction", "tessera_reduction_final", "tessera_reduction_post"})
      CHECK_NOTHROW((void)rtc::cubin({red, k, {}, "red"}, 90));
  }
}

TEST_CASE("ReductionKernel folds every shard and combines them like the built-in reductions") {
  ReductionKernel l2norm("T x", "T y", "x * x", "a + b", "y = sqrt(a)", "0", "l2norm");
  ReductionKernel dotk("float32 x, float32 w", "float64 y", "(double)x * w", "a + b", "y = a", "0", "dotk");
  ReductionKernel count_pos("float64 x", "int64 y", "x > 0 ? 1 : 0", "a + b", "y = a", "0", "count_pos");
  ReductionKernel maxk("T x", "T y", "x", "a > b ? a : b", "y = a", "-1e300", "maxk");
  for_each_case([&](const DeviceSet& ds, std::size_t n) {
    const auto xv = random_values<double>(n);
    Array<double, 1> x = put(xv, ds);
    double ss = 0, mx = -1e300;
    std::int64_t pos = 0;
    for (double v : xv) ss += v * v, pos += v > 0, mx = std::max(mx, v);
    CHECK(l2norm(x) == doctest::Approx(std::sqrt(ss)).epsilon(1e-12));
    CHECK(count_pos.call<std::int64_t>(x) == pos);
    CHECK(maxk(x) == mx);
    // Broadcast inputs: a vector against a scalar weight and a float array.
    const auto fv = random_values<float>(n);
    Array<float, 1> f = put(fv, ds);
    double d = 0;
    for (std::size_t i = 0; i < n; ++i) d += double(fv[i]) * 0.5f;
    CHECK(dotk.call<double>(f, 0.5f) == doctest::Approx(d).epsilon(1e-9).scale(1));
  });
  // A matrix view, reduced over its (cartesian) elements.
  for (const auto& ds : device_sets()) {
    const auto av = random_values<double>(30 * 11);
    Array<double, 2> a = from_host(av, {30, 11}, shard(1, ds));
    const auto vv = to_host(a(range(1, 30, 4), _));
    double ss = 0;
    for (double v : vv) ss += v * v;
    CHECK(l2norm(a(range(1, 30, 4), _)) == doctest::Approx(std::sqrt(ss)).epsilon(1e-12));
  }
}

namespace {
// f(i, x, y, by): y = x * by + the shard's index, for every element of the shard.
struct scale_add {
  TS_HD void operator()(tessera::index_t i, tessera::Shard<float, 1> x, tessera::Shard<float, 1> y, float by) const {
    y(i) = x(i) * by + static_cast<float>(x.index);
  }
};
}  // namespace

TEST_CASE("for_each_shard runs a compiled functor on every shard, host devices and GPUs alike") {
  for_each_case([&](const DeviceSet& ds, std::size_t n) {
    const auto xv = random_values<float>(n);
    Array<float, 1> x = put(xv, ds);
    Array<float, 1> y = zeros<float>({static_cast<index_t>(n)}, shard(0, ds));
    // by = 2: x * 2 is exact, so a GPU's fused multiply-add rounds like the host's two operations.
    for_each_shard(scale_add{}, x, y, 2.f);
    const auto got = to_host(y);
    std::size_t wrong = 0;
    for (const auto& p : x.layout().parts)
      for (index_t i = 0; i < p.extent[0]; ++i) {
        const auto g = static_cast<std::size_t>(p.origin[0] + i);
        wrong += got[g] != xv[g] * 2.f + static_cast<float>(&p - x.layout().parts.data());
      }
    CHECK(wrong == 0);
  });
}

TEST_CASE("per_shard values reach ElementwiseKernel and ReductionKernel shard by shard") {
  ElementwiseKernel addv("float32 x, float32 v", "float32 z", "z = x + v", "addv");
  ReductionKernel sumv("float32 x, float32 v", "float32 y", "x + v", "a + b", "y = a", "0", "sumv");
  for (const auto& ds : device_sets()) {
    const auto xv = random_values<float>(1001);
    Array<float, 1> x = put(xv, ds);
    std::vector<float> per;
    for (std::size_t s = 0; s < ds.size(); ++s) per.push_back(100.f * float(s + 1));
    const auto got = to_host(addv(x, per_shard(per)));
    double want_sum = 0;
    for (std::size_t s = 0; s < x.layout().parts.size(); ++s) {
      const auto& p = x.layout().parts[s];
      for (index_t i = 0; i < p.extent[0]; ++i) {
        const auto g = static_cast<std::size_t>(p.origin[0] + i);
        CHECK(got[g] == xv[g] + per[s]);
        want_sum += double(xv[g]) + per[s];
      }
    }
    CHECK(sumv(x, per_shard(per)) == doctest::Approx(want_sum).epsilon(1e-5));
    check_mentions(expect_error<invalid_argument>([&] { (void)addv(x, per_shard(std::vector<float>(ds.size() + 1))); }),
                   {"addv", "per_shard", "one per shard"});
  }
}

#if TS_DEVICE_COMPILER
namespace {
__global__ void aot_scale(tessera::Shard<float, 1> x, float by) {
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < x.size; i += gridDim.x * (long long)blockDim.x)
    x(i) *= by + static_cast<float>(x.index);
}
}  // namespace
#endif

TEST_CASE("for_each_shard launches a compiled __global__ function on every GPU shard") {
#if TS_DEVICE_COMPILER
  if (!cuda_variant()) {
    Array<float, 1> x = zeros<float>({8}, shard(0, host_devices(2)));
    check_mentions(expect_error<invalid_argument>([&] { for_each_shard(&aot_scale, LaunchConfig{}, x, 2.f); }),
                   {"not a GPU", "functor"});
    return;
  }
  for (const auto& ds : device_sets()) {
    const auto xv = random_values<float>(100003);
    Array<float, 1> x = put(xv, ds);
    for_each_shard(&aot_scale, LaunchConfig{64, 256}, x, 2.f);
    const auto got = to_host(x);
    std::size_t wrong = 0;
    for (std::size_t s = 0; s < x.layout().parts.size(); ++s) {
      const auto& p = x.layout().parts[s];
      for (index_t i = 0; i < p.extent[0]; ++i) {
        const auto g = static_cast<std::size_t>(p.origin[0] + i);
        wrong += got[g] != xv[g] * (2.f + float(s));
      }
    }
    CHECK(wrong == 0);
  }
#else
  MESSAGE("SKIPPED: __global__ functions need a translation unit compiled by nvcc");
#endif
}

TEST_CASE("kernel calls with other argument kinds, bad types and bad launch shapes (review regressions)") {
  ElementwiseKernel add("T x, T y", "T z", "z = x + y", "add_any");
  ReductionKernel sumv("float32 x, float32 v", "float32 y", "x + v", "a + b", "y = a", "0", "sumv2");
  for (const auto& ds : device_sets()) {
    Array<float, 1> x = put(std::vector<float>{1, 2, 3}, ds), y = put(std::vector<float>{10, 20, 30}, ds);
    Array<float, 1> z = zeros<float>({3}, shard(0, ds));
    check_all_close(to_host(add(x, y)), std::vector<double>{11, 22, 33}, 0, 0);
    add(2.f, x, z);  // a scalar first: another binding than (array, array)
    check_all_close(to_host(z), std::vector<double>{3, 4, 5}, 0, 0);
    check_all_close(to_host(add(x, 0.5f)), std::vector<double>{1.5, 2.5, 3.5}, 0, 0);
    // per_shard values follow the parts, empty ones included.
    Array<float, 1> two = put(std::vector<float>{1, 2}, ds);
    std::vector<float> per(ds.size(), 0.f);
    per[0] = 100.f;
    double want = 1 + 2 + 100.0 * double(two.layout().parts[0].extent[0]);
    CHECK(sumv(two, per_shard(per)) == doctest::Approx(want));
  }
  CHECK_THROWS_AS(ElementwiseKernel("uint32 x", "float32 z", "z = x", "unsigned_in"), invalid_argument);
  CHECK_THROWS_AS(ElementwiseKernel("float32 x", "float z, float w", "z = x", "two_out"), invalid_argument);
  ReductionKernel odd("float32 x", "float32 y", "x", "a + b", "y = a", "0", "odd", "unsigned long long");
  if (!device_sets().empty()) {
    Array<float, 1> x = put(std::vector<float>{1, 2}, device_sets().front());
    check_mentions(expect_error<invalid_argument>([&] { (void)odd(x); }), {"reduce_type", "unsigned long long"});
    RawKernel k(scale_source, "scale");
    check_mentions(expect_error<invalid_argument>([&] { k(LaunchConfig{1, 0}, x, 2.f); }), {"block 0"});
  }
}
