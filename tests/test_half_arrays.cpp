// SPDX-License-Identifier: Apache-2.0
// Elementwise work on arrays of half and bfloat16 (storage computing in float): result types and
// values, unaligned views and 2-d broadcasting, over 1, 2, 3 and 8 host devices (1 and all GPUs in
// the CUDA variant) and sizes 0, 1, odd, 2^k +- 1 and 2^20 + 3, against plain loops converting
// with the types' own conversions (test_half.cpp checks those against an independent reference).
#include "half_support.hpp"

using namespace tessera;
using namespace tessera_test;

namespace {

template <class T>
void check_elementwise(const DeviceSet& ds, std::size_t n) {
  using U = std::conditional_t<std::is_same_v<T, half>, bfloat16, half>;  // the other narrow type
  const auto av = rounded<T>(random_values<double>(n)), bv = rounded<T>(random_values<double>(n, 0.5, 3.0));
  const auto fv = random_values<float>(n);
  const auto iv = random_values<i32>(n);
  const auto uv = rounded<U>(random_values<double>(n));
  const index_t len = static_cast<index_t>(n);
  const auto p = shard(0, ds);
  const Array<T, 1> a = from_host(av, {len}, p), b = from_host(bv, {len}, p);
  const Array<float, 1> f = from_host(fv, {len}, p);
  const Array<i32, 1> k = from_host(iv, {len}, p);
  const Array<U, 1> u = from_host(uv, {len}, p);
  check_bits(to_host(a), av, "from_host then to_host");
  if (n > 0) CHECK(a.at(len - 1).bits() == av[n - 1].bits());

  // half op half stays half, rounded once from the float result (exact ops: no FMA contraction).
  auto ab = eval(a + b);
  static_assert(std::is_same_v<decltype(ab), Array<T, 1>>);
  std::vector<T> want(n);
  for (std::size_t i = 0; i < n; ++i) want[i] = T(float(av[i]) + float(bv[i]));
  check_bits(to_host(ab), want, "a + b");
  for (std::size_t i = 0; i < n; ++i) want[i] = T(float(av[i]) * float(bv[i]));
  check_bits(to_host(eval(a * b)), want, "a * b");
  for (std::size_t i = 0; i < n; ++i) want[i] = T(float(av[i]) / float(bv[i]));
  check_bits(to_host(eval(a / b)), want, "a / b");
  // Chains compute in float and round once at the end; functions too.
  std::vector<double> exact(n);
  auto chain = eval(a * b - a / 3 + 1.5);
  static_assert(std::is_same_v<decltype(chain), Array<T, 1>>);
  for (std::size_t i = 0; i < n; ++i) exact[i] = double(av[i]) * double(bv[i]) - double(av[i]) / 3 + 1.5;
  check_one_ulp(to_host(chain), exact, "a * b - a / 3 + 1.5");
  auto fun = eval(sqrt(b) + sin(a) * abs(a));
  static_assert(std::is_same_v<decltype(fun), Array<T, 1>>);
  for (std::size_t i = 0; i < n; ++i) exact[i] = std::sqrt(double(bv[i])) + std::sin(double(av[i])) * std::fabs(double(av[i]));
  check_one_ulp(to_host(fun), exact, "sqrt(b) + sin(a) * abs(a)");

  // Mixed: with float, int32 or the other narrow type the result is float (computed in float).
  auto mf = eval(a + f);
  static_assert(std::is_same_v<decltype(mf), Array<float, 1>>);
  auto mi = eval(k * a);
  static_assert(std::is_same_v<decltype(mi), Array<float, 1>>);
  auto mu = eval(a - u);
  static_assert(std::is_same_v<decltype(mu), Array<float, 1>>);
  static_assert(std::is_same_v<decltype(eval(a * 2.0)), Array<T, 1>>);  // weak scalars keep T
  static_assert(std::is_same_v<decltype(eval(cast<double>(a) + 1)), Array<double, 1>>);
  const auto hf = to_host(mf), hi = to_host(mi), hu = to_host(mu);
  std::vector<float> wf(n), wi(n), wu(n);
  for (std::size_t i = 0; i < n; ++i) {
    wf[i] = float(av[i]) + fv[i];
    wi[i] = float(iv[i]) * float(av[i]);
    wu[i] = float(av[i]) - float(uv[i]);
  }
  check_equal(hf, wf);
  check_equal(hi, wi);
  check_equal(hu, wu);

  // Comparisons and where: float compares; where of two T operands is T.
  auto lt = eval(a < b);
  static_assert(std::is_same_v<decltype(lt), Array<bool, 1>>);
  auto mx = eval(where(a > b, a, b));
  static_assert(std::is_same_v<decltype(mx), Array<T, 1>>);
  const auto hl = to_host(lt);
  for (std::size_t i = 0; i < n; ++i) want[i] = float(av[i]) > float(bv[i]) ? av[i] : bv[i];
  check_bits(to_host(mx), want, "where(a > b, a, b)");
  for (std::size_t i = 0; i < n; ++i) {
    if (hl[i] != (float(av[i]) < float(bv[i]))) {
      FAIL_CHECK("a < b, element " << i);
      break;
    }
  }

  // Stores into T round once: a float expression, a double array, a fill, compound assignment.
  Array<T, 1> c(Shape<1>{len}, p);
  c = f * 3.0f;
  for (std::size_t i = 0; i < n; ++i) want[i] = T(fv[i] * 3.0f);
  check_bits(to_host(c), want, "c = f * 3");
  const auto dv = random_values<double>(n, -1e3, 1e3);
  c = from_host(dv, {len}, p);
  check_bits(to_host(c), rounded<T>(dv), "c = double array");
  c = 0.1;
  check_bits(to_host(c), std::vector<T>(n, T(0.1)), "c = 0.1");
  c += a;
  for (std::size_t i = 0; i < n; ++i) want[i] = T(float(T(0.1)) + float(av[i]));
  check_bits(to_host(c), want, "c += a");
  const Array<T, 1> cd = cast<T>(from_host(dv, {len}, p));
  check_bits(to_host(cd), rounded<T>(dv), "cast<T>(double array)");
}

TEST_CASE("elementwise expressions compute in float: half op half is half, mixed is float") {
  for (const auto& ds : device_sets()) {
    for (index_t n : half_sizes()) {
      INFO("device set " << set_name(ds) << ", n = " << n);
      check_elementwise<half>(ds, static_cast<std::size_t>(n));
      check_elementwise<bfloat16>(ds, static_cast<std::size_t>(n));
    }
  }
}

// A view starting one element in: its data is not 16-byte aligned, so GPUs take the scalar path.
TEST_CASE("unaligned views and 2-d broadcasting over half arrays") {
  for (const auto& ds : device_sets()) {
    INFO(set_name(ds));
    const index_t n = 1027;
    const auto av = rounded<half>(random_values<double>(n));
    Array<half, 1> a = from_host(av, {n}, on(ds.back()));
    a(range(1, n)) = a(range(1, n)) * 2;
    auto h = to_host(a);
    for (index_t i = 1; i < n; ++i) CHECK_MESSAGE(h[i].bits() == half(float(av[i]) * 2).bits(), "element " << i);
    const index_t m = 33, k = 3 * static_cast<index_t>(ds.size()) + 1;
    const auto mv = rounded<bfloat16>(random_values<double>(static_cast<std::size_t>(m * k)));
    const auto rv = rounded<bfloat16>(random_values<double>(static_cast<std::size_t>(m)));
    const Array<bfloat16, 2> x = from_host(mv, {m, k}, shard(1, ds));
    const Array<bfloat16, 1> r = from_host(rv, {m}, replicate(ds));
    const Array<bfloat16, 2> y = x * r;  // r broadcasts along dim 1
    const auto hy = to_host(y);
    int bad = 0;
    for (index_t j = 0; j < k; ++j)
      for (index_t i = 0; i < m; ++i) {
        const auto w = bfloat16(float(mv[i + j * m]) * float(rv[i]));
        if (hy[i + j * m].bits() != w.bits() && bad++ < 3) FAIL_CHECK("x * r at " << i << ", " << j);
      }
  }
}

}  // namespace
