// SPDX-License-Identifier: Apache-2.0
// The rest of the elementwise library (Julia's names): asin acos atan atan2 sinh cosh asinh acosh
// atanh exp2 expm1 log2 log10 cbrt hypot rsqrt sigmoid/logistic round trunc sign abs2 mod rem
// clamp fma isnan isinf isfinite ifelse, float and double (and the integer forms), against plain
// loops in double on fresh random data over sweep_sizes() and every device set, plus edge values.
#include "test_support.hpp"

#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

using namespace tessera;
using namespace tessera_test;

namespace {

constexpr double inf = std::numeric_limits<double>::infinity();
constexpr double nan_v = std::numeric_limits<double>::quiet_NaN();

template <class T>
constexpr double tol() {
  return std::is_same_v<T, float> ? 2e-5 : 1e-12;
}

// Every real function of one argument, on values inside its domain [lo, hi].
template <class T>
void check_real_unary(const DeviceSet& ds, std::size_t n) {
  auto in = [&](double lo, double hi) { return put(random_values<T>(n, lo, hi), ds); };
  struct Case {
    const char* name;
    double lo, hi;
    double (*f)(double);
  };
  const Case cases[] = {
      {"asin", -1, 1, [](double x) { return std::asin(x); }},      {"acos", -1, 1, [](double x) { return std::acos(x); }},
      {"atan", -9, 9, [](double x) { return std::atan(x); }},      {"sinh", -5, 5, [](double x) { return std::sinh(x); }},
      {"cosh", -5, 5, [](double x) { return std::cosh(x); }},      {"asinh", -9, 9, [](double x) { return std::asinh(x); }},
      {"acosh", 1, 9, [](double x) { return std::acosh(x); }},     {"atanh", -0.99, 0.99, [](double x) { return std::atanh(x); }},
      {"exp2", -9, 9, [](double x) { return std::exp2(x); }},      {"expm1", -2, 2, [](double x) { return std::expm1(x); }},
      {"log2", 0.01, 9, [](double x) { return std::log2(x); }},    {"log10", 0.01, 9, [](double x) { return std::log10(x); }},
      {"cbrt", -9, 9, [](double x) { return std::cbrt(x); }},      {"rsqrt", 0.01, 9, [](double x) { return 1 / std::sqrt(x); }},
      {"sigmoid", -9, 9, [](double x) { return 1 / (1 + std::exp(-x)); }},
  };
  for (const auto& c : cases) {
    INFO("function " << c.name);
    Array<T, 1> x = in(c.lo, c.hi);
    const auto xv = to_host(x);
    const std::string name = c.name;
    Array<T, 1> got;
    if (name == "asin") got = asin(x);
    else if (name == "acos") got = acos(x);
    else if (name == "atan") got = atan(x);
    else if (name == "sinh") got = sinh(x);
    else if (name == "cosh") got = cosh(x);
    else if (name == "asinh") got = asinh(x);
    else if (name == "acosh") got = acosh(x);
    else if (name == "atanh") got = atanh(x);
    else if (name == "exp2") got = exp2(x);
    else if (name == "expm1") got = expm1(x);
    else if (name == "log2") got = log2(x);
    else if (name == "log10") got = log10(x);
    else if (name == "cbrt") got = cbrt(x);
    else if (name == "rsqrt") got = rsqrt(x);
    else got = sigmoid(x);
    check_values(to_host(got), map1<double>(xv, c.f), tol<T>(), 1e-6, c.name);
  }
  // Two arguments.
  Array<T, 1> y = in(-5, 5), x = in(-5, 5);
  const auto yv = to_host(y), xv = to_host(x);
  check_values(to_host(Array<T, 1>(atan2(y, x))), map2<double>(yv, xv, +[](double a, double b) { return std::atan2(a, b); }),
               tol<T>(), 1e-6, "atan2");
  check_values(to_host(Array<T, 1>(hypot(y, x))), map2<double>(yv, xv, +[](double a, double b) { return std::hypot(a, b); }),
               tol<T>(), 1e-6, "hypot");
  check_values(to_host(Array<T, 1>(fma(y, x, T(0.5)))), map2<double>(yv, xv, +[](double a, double b) { return a * b + 0.5; }),
               tol<T>(), 1e-6, "fma");
  check_values(to_host(Array<T, 1>(clamp(x, -1, 2))), map1<double>(xv, +[](double a) { return a < -1 ? -1 : a > 2 ? 2 : a; }),
               0, 0, "clamp");
  check_values(to_host(Array<T, 1>(logistic(x))), map1<double>(xv, +[](double a) { return 1 / (1 + std::exp(-a)); }),
               tol<T>(), 1e-6, "logistic");
  check_values(to_host(Array<T, 1>(abs2(x))), map1<double>(xv, +[](double a) { return a * a; }), tol<T>(), 1e-6, "abs2");
  check_values(to_host(Array<T, 1>(mod(y, x))),
               map2<double>(yv, xv, +[](double a, double b) { return a - b * std::floor(a / b); }), tol<T>(), 1e-5, "mod");
  check_values(to_host(Array<T, 1>(rem(y, x))), map2<double>(yv, xv, +[](double a, double b) { return std::fmod(a, b); }),
               tol<T>(), 1e-5, "rem");
  check_values(to_host(Array<T, 1>(ifelse(x > y, x, y))), map2<double>(xv, yv, +[](double a, double b) { return a > b ? a : b; }),
               0, 0, "ifelse");
}

}  // namespace

TEST_CASE("inverse, hyperbolic, exponential and logarithmic functions, float and double") {
  for_each_case([](const DeviceSet& ds, std::size_t n) {
    check_real_unary<float>(ds, n);
    check_real_unary<double>(ds, n);
  });
}

TEST_CASE("rounding, sign, mod/rem, predicates: edge values and integer forms") {
  RESULT_IS(round(Array<i32, 1>()), i32);
  RESULT_IS(sign(Array<i64, 1>()), i64);
  RESULT_IS(abs2(Array<i32, 1>()), i32);
  RESULT_IS(isnan(Array<float, 1>()), bool);
  RESULT_IS(mod(Array<i32, 1>(), 3), i32);
  RESULT_IS(clamp(Array<float, 1>(), 0, 1), float);
  RESULT_IS(sin(Array<i32, 1>()) + atan2(Array<float, 1>(), 1), double);
  for (const auto& ds : device_sets()) {
    const std::vector<double> v = {2.5, 3.5, -2.5, -0.5, 0.5, 1.49999, -1.7, 0.0, -0.0, inf, -inf, nan_v};
    Array<double, 1> x = put(v, ds);
    const auto r = to_host(Array<double, 1>(round(x)));  // ties to even (Julia, NumPy)
    const std::vector<double> want_round = {2, 4, -2, -0.0, 0, 1, -2, 0, -0.0, inf, -inf, nan_v};
    check_values(r, want_round, 0, 0, "round");
    CHECK(std::signbit(r[3]));
    check_values(to_host(Array<double, 1>(trunc(x))), map1<double>(v, +[](double a) { return std::trunc(a); }), 0, 0, "trunc");
    const auto s = to_host(Array<double, 1>(sign(x)));
    const std::vector<double> want_sign = {1, 1, -1, -1, 1, 1, -1, 0, -0.0, 1, -1, nan_v};
    check_values(s, want_sign, 0, 0, "sign");
    const auto nan_mask = to_host(Array<bool, 1>(isnan(x)));
    const auto inf_mask = to_host(Array<bool, 1>(isinf(x)));
    const auto fin_mask = to_host(Array<bool, 1>(isfinite(x)));
    for (std::size_t i = 0; i < v.size(); ++i) {
      CHECK(nan_mask[i] == std::isnan(v[i]));
      CHECK(inf_mask[i] == std::isinf(v[i]));
      CHECK(fin_mask[i] == std::isfinite(v[i]));
    }
    // Integers: mod takes the divisor's sign, rem the dividend's; x mod 0 gives 0.
    const std::vector<i32> a = {7, -7, 7, -7, 5, 0, -3};
    const std::vector<i32> b = {3, 3, -3, -3, 0, 4, 1};
    Array<i32, 1> ai = put(a, ds), bi = put(b, ds);
    check_values(to_host(Array<i32, 1>(mod(ai, bi))), std::vector<i32>{1, 2, -2, -1, 0, 0, 0}, 0, 0, "mod int");
    check_values(to_host(Array<i32, 1>(rem(ai, bi))), std::vector<i32>{1, -1, 1, -1, 0, 0, 0}, 0, 0, "rem int");
    check_values(to_host(Array<i32, 1>(sign(ai))), std::vector<i32>{1, -1, 1, -1, 1, 0, -1}, 0, 0, "sign int");
    check_values(to_host(Array<i32, 1>(abs2(ai))), std::vector<i32>{49, 49, 49, 49, 25, 0, 9}, 0, 0, "abs2 int");
    check_values(to_host(Array<i32, 1>(clamp(ai, -5, 5))), std::vector<i32>{5, -5, 5, -5, 5, 0, -3}, 0, 0, "clamp int");
    // Floating mod of exact multiples: zero with the divisor's sign.
    Array<double, 1> m = put(std::vector<double>{-4, 4}, ds);
    const auto mz = to_host(Array<double, 1>(mod(m, put(std::vector<double>{2, -2}, ds))));
    CHECK(mz[0] == 0);
    CHECK(!std::signbit(mz[0]));
    CHECK(std::signbit(mz[1]));
  }
}
