// SPDX-License-Identifier: Apache-2.0
// Functions: sin cos tan exp log log1p sqrt abs pow min max floor ceil tanh erf (float and double,
// and the integer forms), where(c, x, y) with scalars in either branch, cast<T> between every pair
// of element types, broadcast(f, xs...) with a user functor and a TS_HD lambda, NaN propagation in
// min/max, and each function's edge values. Every result is checked against a plain loop over
// std::vector computed in double, on fresh random data, over sweep_sizes() and every device set.
#include "test_support.hpp"

#include <tessera/config.hpp>

#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <type_traits>
#include <vector>

using namespace tessera;
using namespace tessera_test;

// User functors for broadcast(): plain __host__ __device__ structs (TS_HD), trivially copyable.
struct axpy {
  float alpha;
  TS_HD float operator()(float x, float y) const { return alpha * x + y; }
};
// A generic functor: its result type follows its arguments (int32 and double give double).
struct sum_of_squares {
  template <class A, class B>
  TS_HD auto operator()(A x, B y) const {
    return x * x + y * y;
  }
};
// Three arguments of three types, with a branch.
struct clamp_scale {
  TS_HD double operator()(double x, std::int32_t lo, float scale) const { return (x < lo ? double(lo) : x) * scale; }
};

namespace {

constexpr double inf = std::numeric_limits<double>::infinity();
constexpr double nan_v = std::numeric_limits<double>::quiet_NaN();

// Tolerances against a double reference: float within 1e-5 relative, double within 1e-12;
// integers and bools exactly.
template <class T>
constexpr double fn_rtol() {
  return std::is_same_v<T, float> ? 1e-5 : std::is_same_v<T, double> ? 1e-12 : 0.0;
}
template <class T>
constexpr double fn_atol() {
  return std::is_same_v<T, float> ? 1e-37 : std::is_same_v<T, double> ? 1e-300 : 0.0;
}

// EXPECT_EXPR checks an expression's element type and values (test_support.hpp) with the
// tolerances above; the plain-loop references are map1 and map2 there.
#define EXPECT_EXPR(Want, expr, want) EXPECT_EXPR_TOL(Want, expr, want, fn_rtol<Want>(), fn_atol<Want>())

template <class T>
std::vector<T> uniform(std::size_t n, double lo, double hi) {
  return random_values<T>(n, lo, hi);
}
// Values spread over many orders of magnitude in [lo, hi] (lo > 0).
template <class T>
std::vector<T> log_uniform(std::size_t n, double lo, double hi) {
  std::uniform_real_distribution<double> d(std::log(lo), std::log(hi));
  std::vector<T> v(n);
  for (auto& x : v) x = static_cast<T>(std::exp(d(rng())));
  return v;
}
// Writes each edge value at a random position (edges land on different shards), when it fits.
template <class T>
void sprinkle(std::vector<T>& v, std::initializer_list<double> edges) {
  if (v.size() < edges.size()) return;
  std::uniform_int_distribution<std::size_t> pick(0, v.size() - 1);
  for (double e : edges) v[pick(rng())] = static_cast<T>(e);
}

// -- real functions -------------------------------------------------------------------------------
template <class T>
void real_functions() {
  static_assert(std::is_floating_point_v<T>);
  for_each_case([](const DeviceSet& ds, std::size_t n) {
    // sin cos tanh erf abs floor ceil: the whole real line, plus zeros of both signs, infinities
    // and NaN.
    auto xv = uniform<T>(n, -10.0, 10.0);
    sprinkle(xv, {0.0, -0.0, inf, -inf, nan_v, -0.5, 0.5, 1e-30});
    const auto x = put(xv, ds);
    EXPECT_EXPR(T, sin(x), map1(xv, +[](double v) { return std::sin(v); }));
    EXPECT_EXPR(T, cos(x), map1(xv, +[](double v) { return std::cos(v); }));
    EXPECT_EXPR(T, tanh(x), map1(xv, +[](double v) { return std::tanh(v); }));
    EXPECT_EXPR(T, erf(x), map1(xv, +[](double v) { return std::erf(v); }));
    EXPECT_EXPR_TOL(T, abs(x), map1(xv, +[](double v) { return std::fabs(v); }), 0.0, 0.0);
    EXPECT_EXPR_TOL(T, floor(x), map1(xv, +[](double v) { return std::floor(v); }), 0.0, 0.0);
    EXPECT_EXPR_TOL(T, ceil(x), map1(xv, +[](double v) { return std::ceil(v); }), 0.0, 0.0);
    // tan away from its poles (pi/2 = 1.5708...).
    auto tv = uniform<T>(n, -1.4, 1.4);
    sprinkle(tv, {0.0, -0.0, nan_v});
    EXPECT_EXPR(T, tan(put(tv, ds)), map1(tv, +[](double v) { return std::tan(v); }));
    // exp without overflow in float, and exp(+-inf), exp(-0).
    auto ev = uniform<T>(n, -80.0, 80.0);
    sprinkle(ev, {0.0, -0.0, inf, -inf, nan_v});
    EXPECT_EXPR(T, exp(put(ev, ds)), map1(ev, +[](double v) { return std::exp(v); }));
    // log and sqrt on positive values over many magnitudes; 0 and -0 give -inf (log) and +-0
    // (sqrt), negative values NaN.
    auto lv = log_uniform<T>(n, 1e-30, 1e30);
    sprinkle(lv, {0.0, -0.0, 1.0, inf, nan_v, -1.0});
    const auto l = put(lv, ds);
    EXPECT_EXPR(T, log(l), map1(lv, +[](double v) { return std::log(v); }));
    EXPECT_EXPR(T, sqrt(l), map1(lv, +[](double v) { return std::sqrt(v); }));
    // log1p on (-1, 1e3], including tiny arguments where log(1 + x) would lose every digit.
    auto pv = uniform<T>(n, -0.999, 1000.0);
    sprinkle(pv, {1e-10, -1e-10, 1e-20, -1.0, 0.0, -0.0, inf, nan_v});
    EXPECT_EXPR(T, log1p(put(pv, ds)), map1(pv, +[](double v) { return std::log1p(v); }));
  });
}

TEST_CASE("real functions: float (within 1e-5 of a double reference)") { real_functions<float>(); }
TEST_CASE("real functions: double (within 1e-12)") { real_functions<double>(); }

TEST_CASE("real functions at the edges: exact values and signs of zero") {
  for (const auto& ds : device_sets()) {
    INFO("device set " << set_name(ds));
    const std::vector<double> z{0.0, -0.0, inf, -inf, -0.5, 0.5, -2.5, 2.0};
    const auto x = put(z, ds);
    const auto s = to_host(eval(sin(x))), c = to_host(eval(cos(x))), th = to_host(eval(tanh(x))),
               er = to_host(eval(erf(x))), ab = to_host(eval(abs(x))), fl = to_host(eval(floor(x))),
               ce = to_host(eval(ceil(x))), sq = to_host(eval(sqrt(x))), lg = to_host(eval(log(x))),
               ex = to_host(eval(exp(x))), l1 = to_host(eval(log1p(x))), tn = to_host(eval(tan(x)));
    CHECK(s[0] == 0.0);
    CHECK(std::signbit(s[1]));  // sin(-0) == -0
    CHECK(std::isnan(s[2]));
    CHECK(std::isnan(c[3]));
    CHECK(c[1] == 1.0);
    CHECK(std::signbit(tn[1]));
    CHECK(th[2] == 1.0);
    CHECK(th[3] == -1.0);
    CHECK(std::signbit(th[1]));
    CHECK(er[2] == 1.0);
    CHECK(er[3] == -1.0);
    CHECK(std::signbit(er[1]));
    CHECK(!std::signbit(ab[1]));  // abs(-0) == +0
    CHECK(ab[3] == inf);
    CHECK(ab[6] == 2.5);
    CHECK(fl[4] == -1.0);
    CHECK(fl[6] == -3.0);
    CHECK(std::signbit(fl[1]));
    CHECK(ce[4] == 0.0);
    CHECK(std::signbit(ce[4]));  // ceil(-0.5) == -0
    CHECK(ce[6] == -2.0);
    CHECK(ce[5] == 1.0);
    CHECK(std::signbit(sq[1]));  // sqrt(-0) == -0
    CHECK(sq[2] == inf);
    CHECK(std::isnan(sq[4]));  // sqrt of a negative: NaN (Julia throws a DomainError)
    CHECK(lg[0] == -inf);
    CHECK(lg[1] == -inf);
    CHECK(lg[2] == inf);
    CHECK(std::isnan(lg[4]));
    CHECK(ex[0] == 1.0);
    CHECK(ex[1] == 1.0);
    CHECK(ex[2] == inf);
    CHECK(ex[3] == 0.0);
    CHECK(std::signbit(l1[1]));  // log1p(-0) == -0
    CHECK(l1[2] == inf);
    CHECK(std::isnan(l1[3]));
    // log1p keeps every digit of a tiny argument.
    const std::vector<float> tiny{1e-10f, -1e-10f, 1e-30f};
    const auto t = to_host(eval(log1p(put(tiny, ds))));
    for (std::size_t k = 0; k < tiny.size(); ++k) CHECK(std::fabs(t[k] - tiny[k]) <= 1e-6 * std::fabs(tiny[k]));
    // float exp overflows to inf, as a float computation must.
    const auto fe = to_host(eval(exp(put(std::vector<float>{100.0f, -110.0f}, ds))));
    CHECK(fe[0] == std::numeric_limits<float>::infinity());
    CHECK(fe[1] == 0.0f);
  }
}

// -- integer inputs -------------------------------------------------------------------------------
TEST_CASE("functions of integer arrays: abs floor ceil min max pow keep integers, sin gives double") {
  for_each_case([](const DeviceSet& ds, std::size_t n) {
    const auto iv = uniform<i32>(n, -2000.0, 2000.0), jv = uniform<i32>(n, -2000.0, 2000.0);
    const auto lv = random_values<i64>(n, -1e11, 1e11), mv = random_values<i64>(n, -1e11, 1e11);
    const auto i = put(iv, ds), j = put(jv, ds);
    const auto l = put(lv, ds), m = put(mv, ds);
    EXPECT_EXPR(i32, abs(i), map1(iv, +[](i64 x) { return x < 0 ? -x : x; }));
    EXPECT_EXPR(i32, floor(i), iv);
    EXPECT_EXPR(i64, ceil(l), lv);
    EXPECT_EXPR(i32, min(i, j), map2(iv, jv, +[](i64 x, i64 y) { return x < y ? x : y; }));
    EXPECT_EXPR(i64, max(l, m), map2(lv, mv, +[](i64 x, i64 y) { return x < y ? y : x; }));
    EXPECT_EXPR(double, sin(i), map1(iv, +[](double x) { return std::sin(x); }));
    // Integer powers are exact integers (bases and exponents small enough not to overflow).
    const auto bv = uniform<i32>(n, -0.9, 0.9), ev = uniform<i32>(n, 0.0, 0.9);  // [-9, 9], [0, 9]
    auto pw = +[](i64 b, i64 e) {
      i64 r = 1;
      for (i64 k = 0; k < e; ++k) r *= b;
      return r;
    };
    EXPECT_EXPR(i32, pow(put(bv, ds), put(ev, ds)), map2(bv, ev, pw));
    const auto cv = random_values<i64>(n, -1e5, 1e5);  // |x|^3 < 1e18
    EXPECT_EXPR(i64, pow(put(cv, ds), 3), map1(cv, +[](i64 x) { return x * x * x; }));
  });
}

TEST_CASE("integer pow at the edges: zero and negative exponents") {
  for (const auto& ds : device_sets()) {
    INFO("device set " << set_name(ds));
    // Julia: 0^0 == 1; a negative exponent is a DomainError except for bases 1 and -1, which a
    // kernel cannot throw: those elements are 0 (documented in functional.hpp).
    const std::vector<i32> b{0, 5, 1, -1, -1, 2, -2, 0, 3, -3, 7, 46340};
    const std::vector<i32> e{0, 0, -5, -3, -2, -1, -1, 3, 19, 19, 1, 2};
    EXPECT_EXPR(i32, pow(put(b, ds), put(e, ds)),
                (std::vector<i32>{1, 1, 1, -1, 1, 0, 0, 0, 1162261467, -1162261467, 7, 2147395600}));
    // int64 powers beyond 2^53 are exact.
    const auto big = to_host(eval(pow(put(std::vector<i64>{3, -3, 2}, ds), 3)));
    CHECK(big == std::vector<i64>{27, -27, 8});
    const auto lb = put(std::vector<i64>{3, 2, -2, 1, -1}, ds);
    CHECK(to_host(eval(pow(lb, 39))) ==
          std::vector<i64>{4052555153018976267LL, i64(1) << 39, -(i64(1) << 39), 1, -1});
    CHECK(to_host(eval(pow(put(std::vector<i64>{2, -2}, ds), 62))) == std::vector<i64>{i64(1) << 62, i64(1) << 62});
    CHECK(to_host(eval(pow(put(std::vector<i64>{-2}, ds), 63))) == std::vector<i64>{std::numeric_limits<i64>::min()});
  }
}

// -- pow, min, max on floating point --------------------------------------------------------------
TEST_CASE("pow on float and double, with weak scalar exponents and bases") {
  for_each_case([](const DeviceSet& ds, std::size_t n) {
    // Bases of both signs (negative bases get integer exponents half of the time), zero bases.
    auto av = uniform<float>(n, -4.0, 4.0), bv = uniform<float>(n, -3.0, 3.0);
    std::bernoulli_distribution coin(0.5);
    for (std::size_t k = 0; k < n; ++k)
      if (coin(rng())) bv[k] = std::round(bv[k]);
    sprinkle(av, {0.0, -0.0, 1.0, nan_v, inf});
    sprinkle(bv, {0.0, -1.0, nan_v, 0.5});
    const auto a = put(av, ds), b = put(bv, ds);
    EXPECT_EXPR(float, pow(a, b), map2(av, bv, +[](double x, double y) { return std::pow(x, y); }));
    EXPECT_EXPR(float, pow(a, 2.0), map1(av, +[](double x) { return std::pow(double(float(x)), 2.0); }));
    const auto dv = uniform<double>(n, -3.0, 3.0), ev = uniform<double>(n, 0.01, 10.0);
    const auto d = put(dv, ds), e = put(ev, ds);
    EXPECT_EXPR(double, pow(e, d), map2(ev, dv, +[](double x, double y) { return std::pow(x, y); }));
    EXPECT_EXPR(double, pow(2.0, d), map1(dv, +[](double y) { return std::pow(2.0, y); }));
  });
}

// NaN at about one position in eight, independently in each operand: a NaN first, second or in
// both.
template <class T>
std::vector<T> with_nans(std::vector<T> v) {
  std::uniform_int_distribution<int> pick(0, 7);
  for (auto& x : v)
    if (pick(rng()) == 0) x = std::numeric_limits<T>::quiet_NaN();
  return v;
}
double nan_min(double x, double y) { return (std::isnan(x) || std::isnan(y)) ? nan_v : std::min(x, y); }
double nan_max(double x, double y) { return (std::isnan(x) || std::isnan(y)) ? nan_v : std::max(x, y); }

TEST_CASE("min and max propagate NaN wherever it sits") {
  for_each_case([](const DeviceSet& ds, std::size_t n) {
    auto fv = with_nans(uniform<float>(n, -2.0, 2.0)), gv = with_nans(uniform<float>(n, -2.0, 2.0));
    sprinkle(fv, {inf, -inf, 0.0});
    sprinkle(gv, {-inf, inf, -0.0});
    const auto f = put(fv, ds), g = put(gv, ds);
    EXPECT_EXPR(float, min(f, g), map2(fv, gv, &nan_min));
    EXPECT_EXPR(float, max(f, g), map2(fv, gv, &nan_max));
    const auto dv = with_nans(uniform<double>(n, -2.0, 2.0)), ev = with_nans(uniform<double>(n, -2.0, 2.0));
    const auto d = put(dv, ds), e = put(ev, ds);
    EXPECT_EXPR(double, min(d, e), map2(dv, ev, &nan_min));
    EXPECT_EXPR(double, max(d, e), map2(dv, ev, &nan_max));
    // With a scalar on either side (weak: max(f, 0.0) stays float), NaN scalars included.
    EXPECT_EXPR(float, max(f, 0.0), map1(fv, +[](double x) { return nan_max(x, 0.0); }));
    EXPECT_EXPR(double, min(0.5, d), map1(dv, +[](double y) { return nan_min(0.5, y); }));
    EXPECT_EXPR(float, max(f, nan_v), std::vector<double>(n, nan_v));
    EXPECT_EXPR(double, min(nan_v, d), std::vector<double>(n, nan_v));
  });
}

// -- where ----------------------------------------------------------------------------------------
TEST_CASE("where(c, x, y) with arrays and scalars in either branch (weak promotion)") {
  for_each_case([](const DeviceSet& ds, std::size_t n) {
    const auto cv = random_values<bool>(n);
    const auto av = uniform<float>(n, -2.0, 2.0), bv = uniform<float>(n, -2.0, 2.0);
    const auto iv = uniform<i32>(n, -2000.0, 2000.0);
    const auto lv = random_values<i64>(n, -1e11, 1e11);
    const auto c = put(cv, ds);
    const auto a = put(av, ds), b = put(bv, ds);
    const auto i = put(iv, ds);
    const auto l = put(lv, ds);
    std::vector<double> want(n);
    for (std::size_t k = 0; k < n; ++k) want[k] = cv[k] ? av[k] : bv[k];
    EXPECT_EXPR(float, where(c, a, b), want);
    for (std::size_t k = 0; k < n; ++k) want[k] = cv[k] ? av[k] : 0.1f;  // the weak scalar becomes 0.1f
    EXPECT_EXPR_TOL(float, where(c, a, 0.1), want, 0.0, 0.0);
    for (std::size_t k = 0; k < n; ++k) want[k] = cv[k] ? 0.5 : double(iv[k]);
    EXPECT_EXPR(double, where(c, 0.5, i), want);  // an int32 array against a double scalar: double
    for (std::size_t k = 0; k < n; ++k) want[k] = cv[k] ? 1.0 : 2.5;
    EXPECT_EXPR(double, where(c, 1, 2.5), want);  // scalars in both branches
    std::vector<i64> wl(n);
    for (std::size_t k = 0; k < n; ++k) wl[k] = iv[k] > 0 ? i64(iv[k]) : lv[k];
    EXPECT_EXPR(i64, where(i > 0, i, l), wl);  // the condition is itself an expression
  });
}

TEST_CASE("where with shapes that do not broadcast throws and leaves every array intact") {
  for (const auto& ds : device_sets()) {
    INFO("device set " << set_name(ds));
    const auto cv = random_values<bool>(10);
    const auto av = random_values<float>(10), bv = random_values<float>(9), ov = random_values<float>(10);
    const auto c = put(cv, ds);
    const auto a = put(av, ds), b = put(bv, ds);
    auto out = put(ov, ds);
    try {
      out = where(c, a, b);
      FAIL_CHECK("where(c, a, b) with a 9-element b did not throw");
    } catch (const dimension_mismatch& e) {
      const std::string msg = e.what();
      CAPTURE(msg);
      CHECK(msg.find("10-element") != std::string::npos);
      CHECK(msg.find("9-element") != std::string::npos);
    }
    CHECK(to_host(c) == cv);
    CHECK(to_host(a) == av);
    CHECK(to_host(b) == bv);
    CHECK(to_host(out) == ov);
  }
}

// -- cast -----------------------------------------------------------------------------------------
template <class T>
const char* type_name() {
  if constexpr (std::is_same_v<T, bool>) return "bool";
  else if constexpr (std::is_same_v<T, i32>) return "int32";
  else if constexpr (std::is_same_v<T, i64>) return "int64";
  else if constexpr (std::is_same_v<T, float>) return "float";
  else return "double";
}

template <class To, class From>
void check_cast(const Array<From, 1>& x, const std::vector<From>& v) {
  INFO("cast<" << type_name<To>() << "> of " << type_name<From>());
  std::vector<To> want(v.size());
  for (std::size_t k = 0; k < v.size(); ++k) {
    const From f = v[k];
    if constexpr (std::is_same_v<To, bool>) want[k] = f != From(0);  // NaN is true, -0 false
    else want[k] = static_cast<To>(f);
  }
  auto r = eval(cast<To>(x));
  static_assert(std::is_same_v<typename decltype(r)::value_type, To>);
  const auto got = to_host(r);
  REQUIRE(got.size() == want.size());
  for (std::size_t k = 0; k < got.size(); ++k) {
    const bool same = (got[k] == want[k]) || (std::is_floating_point_v<To> && got[k] != got[k] && want[k] != want[k]);
    if (!same) {
      FAIL_CHECK("element " << k << ": cast of " << static_cast<double>(v[k]) << " gave " << static_cast<double>(got[k])
                            << ", expected " << static_cast<double>(want[k]));
      return;
    }
  }
}

template <class From>
void casts_from(const DeviceSet& ds, const std::vector<From>& v) {
  const auto x = put(v, ds);
  if constexpr (!std::is_same_v<From, bool>) check_cast<bool>(x, v);
  if constexpr (!std::is_same_v<From, i32>) check_cast<i32>(x, v);
  if constexpr (!std::is_same_v<From, i64>) check_cast<i64>(x, v);
  if constexpr (!std::is_same_v<From, float>) check_cast<float>(x, v);
  if constexpr (!std::is_same_v<From, double>) check_cast<double>(x, v);
}

TEST_CASE("cast<T> between every pair of element types (bool: x != 0; floats truncate toward zero)") {
  for_each_case([](const DeviceSet& ds, std::size_t n) {
    casts_from(ds, random_values<bool>(n));
    auto iv = uniform<i32>(n, -2000.0, 2000.0);
    sprinkle(iv, {0.0, -1.0, double(std::numeric_limits<i32>::max()), double(std::numeric_limits<i32>::min()),
                  16777217.0});  // INT_MAX and 2^24 + 1 round in float
    casts_from(ds, iv);
    auto lv = random_values<i64>(n, -1e11, 1e11);
    sprinkle(lv, {0.0, 4294967301.0 /* 2^32 + 5 -> 5 */, 2147483648.0 /* 2^31 -> INT_MIN */, -9.2e18});
    if (n >= 3) {
      lv[0] = std::numeric_limits<i64>::max();  // int32: -1; float and double: 2^63
      lv[1] = (i64(1) << 53) + 1;               // double: 2^53
      lv[2] = -(i64(1) << 53) - 3;              // double: -(2^53 + 4)
    }
    casts_from(ds, lv);
    // Floating sources in the range of int32 (other values are undefined behavior to convert).
    auto fv = uniform<float>(n, -1e4, 1e4);
    sprinkle(fv, {0.0, -0.0, 0.5, -0.5, 2.5, -2.5, 0.999, -0.999, 2e9, -2e9, 1e-40 /* subnormal */});
    casts_from(ds, fv);
    auto dv = uniform<double>(n, -1e4, 1e4);
    sprinkle(dv, {0.0, -0.0, 0.5, -0.5, -2.5, 0.1, 2147483647.9, -2147483648.9, 1e-310, 16777217.0});
    casts_from(ds, dv);
  });
}

TEST_CASE("cast<bool> of NaN, infinities and signed zeros") {
  for (const auto& ds : device_sets()) {
    INFO("device set " << set_name(ds));
    const float finf = std::numeric_limits<float>::infinity();
    const std::vector<float> f{std::numeric_limits<float>::quiet_NaN(), -0.0f, 0.0f, finf, -finf, 1e-45f};
    CHECK(to_host(eval(cast<bool>(put(f, ds)))) == std::vector<bool>{true, false, false, true, true, true});
    const std::vector<double> d{nan_v, -0.0, 0.0, inf, -inf, 5e-324};
    CHECK(to_host(eval(cast<bool>(put(d, ds)))) == std::vector<bool>{true, false, false, true, true, true});
    // double -> float rounds to nearest; int64 -> double rounds to nearest (even).
    CHECK(to_host(eval(cast<float>(put(std::vector<double>{0.1, 16777217.0, 1e300 * 0.0}, ds)))) ==
          std::vector<float>{0.1f, 16777216.0f, 0.0f});
    CHECK(to_host(eval(cast<double>(put(std::vector<i64>{(i64(1) << 53) + 1, (i64(1) << 53) + 3}, ds)))) ==
          std::vector<double>{9007199254740992.0, 9007199254740996.0});
  }
}

// -- broadcast(f, xs...) --------------------------------------------------------------------------
// A capturing TS_HD lambda. With g++ it is a plain lambda. Under nvcc --extended-lambda the host
// side sees it as __nv_hdl_wrapper_t, which is not trivially copyable once the lambda captures
// anything; the library accepts it as an extended lambda (device_copyable_functor_v). The branch
// keeps a visible failure should that acceptance ever regress.
template <class F>
void check_capturing_lambda(F lam, float captured) {
  if constexpr (tessera::device_copyable_functor_v<F>) {
    for_each_case([&](const DeviceSet& ds, std::size_t n) {
      const auto av = uniform<float>(n, -2.0, 2.0), bv = uniform<float>(n, -2.0, 2.0);
      std::vector<double> want(n);
      for (std::size_t k = 0; k < n; ++k) want[k] = double(av[k]) * bv[k] - captured;
      EXPECT_EXPR_TOL(float, broadcast(lam, put(av, ds), put(bv, ds)), want, 1e-6, 1e-6);
    });
  } else {
    (void)lam;
    (void)captured;
    FAIL_CHECK("a capturing TS_HD lambda is not trivially copyable under nvcc (__nv_hdl_wrapper_t), so "
               "broadcast() rejects it");
  }
}

TEST_CASE("broadcast with a TS_HD lambda that captures by value") {
  const float k3 = 3.0f;
  check_capturing_lambda([k3] TS_HD(float x, float y) { return x * y - k3; }, k3);
}

TEST_CASE("broadcast with a user functor, a capture-less TS_HD lambda, a generic functor and scalar arguments") {
  // A lambda must be marked TS_HD to run on GPUs: nvcc --extended-lambda then makes it a
  // __host__ __device__ extended lambda (with g++, TS_HD is empty and it is a plain lambda). A
  // plain lambda without TS_HD does not compile under nvcc, even with --expt-relaxed-constexpr:
  // its closure type cannot be a template argument of the __global__ kernel.
  for_each_case([](const DeviceSet& ds, std::size_t n) {
    const auto av = uniform<float>(n, -2.0, 2.0), bv = uniform<float>(n, -2.0, 2.0);
    const auto iv = uniform<i32>(n, -2000.0, 2000.0);
    const auto dv = uniform<double>(n, -10.0, 10.0);
    const auto a = put(av, ds), b = put(bv, ds);
    const auto i = put(iv, ds);
    const auto d = put(dv, ds);
    std::vector<double> want(n);

    // A functor struct with state.
    for (std::size_t k = 0; k < n; ++k) want[k] = 2.5 * av[k] + bv[k];
    EXPECT_EXPR_TOL(float, broadcast(axpy{2.5f}, a, b), want, 1e-6, 1e-6);
    // The same functor with a scalar argument (passed with its own type, converted by the call).
    for (std::size_t k = 0; k < n; ++k) want[k] = -1.0 * av[k] + 0.5;
    EXPECT_EXPR_TOL(float, broadcast(axpy{-1.0f}, a, 0.5f), want, 1e-6, 1e-6);
    // A capture-less TS_HD lambda with a scalar first argument, inside a larger fused expression.
    auto sq = [] TS_HD(float s, float x) { return s * x * x; };
    for (std::size_t k = 0; k < n; ++k) want[k] = 0.5 * av[k] * av[k] + 2.0 * av[k];
    EXPECT_EXPR_TOL(float, broadcast(sq, 0.5f, a) + 2 * a, want, 1e-5, 1e-5);
    // A generic functor over int32 and double arrays: its own result type (double).
    for (std::size_t k = 0; k < n; ++k) want[k] = double(iv[k]) * iv[k] + dv[k] * dv[k];
    EXPECT_EXPR(double, broadcast(sum_of_squares{}, i, d), want);
    // Three arguments of three types, two of them scalars.
    for (std::size_t k = 0; k < n; ++k) want[k] = (dv[k] < -1 ? -1.0 : dv[k]) * double(0.25f);
    EXPECT_EXPR(double, broadcast(clamp_scale{}, d, -1, 0.25f), want);
  });
}

// -- result element types -------------------------------------------------------------------------
TEST_CASE("function result element types") {
  Array<bool, 1> m;
  Array<i32, 1> i;
  Array<i64, 1> l;
  Array<float, 1> f;
  Array<double, 1> d;
  // Real functions: float stays float; integers and bools compute in double (Julia's sin(1)).
  RESULT_IS(sin(f), float);
  RESULT_IS(sin(d), double);
  RESULT_IS(sin(i), double);
  RESULT_IS(exp(l), double);
  RESULT_IS(sqrt(m), double);
  RESULT_IS(log(i), double);
  RESULT_IS(erf(f), float);
  // abs, floor and ceil keep the element type (Julia: floor(3) == 3, abs(true) == true).
  RESULT_IS(abs(i), i32);
  RESULT_IS(abs(l), i64);
  RESULT_IS(abs(m), bool);
  RESULT_IS(abs(f), float);
  RESULT_IS(floor(i), i32);
  RESULT_IS(ceil(l), i64);
  RESULT_IS(floor(f), float);
  RESULT_IS(ceil(d), double);
  // pow, min and max promote like arithmetic, with weak scalars.
  RESULT_IS(pow(i, 2), i32);
  RESULT_IS(pow(i, l), i64);
  RESULT_IS(pow(i, 0.5), double);
  RESULT_IS(pow(f, 2), float);
  RESULT_IS(pow(f, 2.0), float);
  RESULT_IS(pow(2.0, f), float);
  RESULT_IS(pow(f, d), double);
  RESULT_IS(min(i, i), i32);
  RESULT_IS(min(i, l), i64);
  RESULT_IS(min(i, 2.5), double);
  RESULT_IS(max(f, 0.0), float);
  RESULT_IS(max(f, d), double);
  RESULT_IS(max(0, l), i64);
  // where: the branches promote (weak scalars); the condition does not take part.
  RESULT_IS(where(m, f, f), float);
  RESULT_IS(where(m, i, 0.5), double);
  RESULT_IS(where(m, f, 0.5), float);
  RESULT_IS(where(m, 0.5, f), float);
  RESULT_IS(where(m, f, 2), float);
  RESULT_IS(where(m, i, 2), i32);
  RESULT_IS(where(m, i, l), i64);
  RESULT_IS(where(m, f, d), double);
  RESULT_IS(where(m, 1, 2), i32);
  RESULT_IS(where(m, 1, 2.5), double);
  RESULT_IS(where(i > 0, l, 0), i64);
  RESULT_IS(where(d, f, f), float);
  // cast<T> gives T; broadcast gives what the functor returns.
  RESULT_IS(cast<bool>(d), bool);
  RESULT_IS(cast<i64>(m), i64);
  RESULT_IS(cast<float>(l), float);
  RESULT_IS(broadcast(axpy{1.0f}, f, f), float);
  RESULT_IS(broadcast(sum_of_squares{}, i, i), i32);
  RESULT_IS(broadcast(sum_of_squares{}, i, 2.0), double);
  RESULT_IS(broadcast(clamp_scale{}, f, 0, 1.0f), double);
  // min/max of two bool arrays: bool, as in Julia (min(true, false) === false) and NumPy
  // (np.minimum of bool arrays is bool). Checked on the node at run time so that a failure does
  // not stop the file from compiling.
  CHECK(std::is_same_v<decltype(min(m, m))::value_type, bool>);
  CHECK(std::is_same_v<decltype(max(m, m))::value_type, bool>);
}

}  // namespace
