// SPDX-License-Identifier: Apache-2.0
// Operators: + - * / % unary -, == != < <= > >=, && || ! on array-array, array-scalar and
// scalar-array operands for bool, int32, int64, float and double; their result element types
// (weak scalars, C++ promotion between arrays); Julia's `/` (true division) and rem (`%`, sign of
// the dividend, integer x % 0 == 0); fused multi-term expressions; shape and placement errors.
// Every result is checked against a plain loop over std::vector on fresh random data, over
// tessera_test::sweep_sizes() and every device set.
#include "test_support.hpp"

#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <type_traits>
#include <vector>

using namespace tessera;
using namespace tessera_test;

namespace {

template <class T>
constexpr double default_rtol() {
  if constexpr (std::is_same_v<T, float>) return 3e-7;    // ~2 ulp: one correctly rounded op
  else if constexpr (std::is_same_v<T, double>) return 5e-16;
  else return 0.0;
}

// EXPECT_EXPR checks an expression's element type and values (test_support.hpp): integers and
// bools exactly (as int64, no detour through double), floating results within default_rtol, NaN
// matching NaN and infinities matching exactly. The plain-loop references are map1 and map2 there,
// and map1s here.
#define EXPECT_EXPR(Want, expr, want) EXPECT_EXPR_TOL(Want, expr, want, default_rtol<Want>(), 0.0)

// f(a[i], s) for every i.
template <class R, class A, class S>
[[gnu::noipa]] std::vector<R> map1s(const std::vector<A>& a, std::type_identity_t<S> s, R (*f)(A, S)) {
  std::vector<R> out(a.size());
  for (std::size_t i = 0; i < a.size(); ++i) out[i] = f(static_cast<A>(a[i]), s);
  return out;
}

// Julia's rem for integers: the sign of the dividend; x % 0 == 0 (the kernel cannot trap), and
// typemin % -1 == 0 (the mathematical value; C++ leaves it undefined).
template <class T>
T int_rem(T x, T y) {
  if (y == 0 || y == T(-1)) return T(0);
  return static_cast<T>(static_cast<long long>(x) % static_cast<long long>(y));
}
// Julia's rem for floating point: fmod, computed in double (fmod is exact).
template <class T>
T float_rem(T x, T y) {
  return static_cast<T>(std::fmod(static_cast<double>(x), static_cast<double>(y)));
}

// Data: numerators cover a wide range; divisors are small and include 0 and -1 (integers) or
// exact zeros of both signs (floating point).
template <class T>
std::vector<T> numerators(std::size_t n) {
  if constexpr (std::is_same_v<T, i32>) return random_values<T>(n, -2000.0, 2000.0);  // [-20000, 20000]
  else if constexpr (std::is_same_v<T, i64>) return random_values<T>(n, -1e8, 1e8);   // [-1e9, 1e9]
  else if constexpr (std::is_same_v<T, bool>) return random_values<T>(n);
  else return random_values<T>(n, -4.0, 4.0);
}
template <class T>
std::vector<T> divisors(std::size_t n) {
  if constexpr (std::is_integral_v<T> && !std::is_same_v<T, bool>) {
    return random_values<T>(n, -2.0, 2.0);  // [-20, 20]
  } else if constexpr (std::is_same_v<T, bool>) {
    return random_values<T>(n);
  } else {
    auto v = random_values<T>(n, -2.0, 2.0);
    std::uniform_int_distribution<int> pick(0, 15);
    for (auto& x : v) {
      const int k = pick(rng());
      if (k == 0) x = T(0);
      if (k == 1) x = -T(0);
    }
    return v;
  }
}
// A copy of `a` with about half of its elements replaced by fresh values: comparisons see ties.
template <class T>
std::vector<T> with_ties(const std::vector<T>& a) {
  auto fresh = numerators<T>(a.size());
  std::bernoulli_distribution coin(0.5);
  std::vector<T> b(a.begin(), a.end());
  for (std::size_t i = 0; i < b.size(); ++i)
    if (coin(rng())) b[i] = fresh[i];
  return b;
}

// The literal a user would write next to an array of T: a weak scalar.
template <class T>
using literal_t = std::conditional_t<std::is_floating_point_v<T>, double,
                                     std::conditional_t<std::is_same_v<T, i64>, i64,
                                                        std::conditional_t<std::is_same_v<T, bool>, bool, int>>>;

// A random scalar: one of the array's own values when there are any (so that comparisons tie).
template <class T>
literal_t<T> scalar_from(const std::vector<T>& v) {
  if (v.empty()) return static_cast<literal_t<T>>(numerators<T>(1)[0]);
  std::uniform_int_distribution<std::size_t> pick(0, v.size() - 1);
  return static_cast<literal_t<T>>(v[pick(rng())]);
}
template <class T>
literal_t<T> small_scalar() {
  return static_cast<literal_t<T>>(divisors<T>(1)[0]);
}

// -- arithmetic -----------------------------------------------------------------------------------
// Compile-time budget: every distinct expression type that is evaluated instantiates the whole
// materialization path (~0.5 s of g++ -O3, more under nvcc), so the operator x element type x
// operand form matrix (~270 types) is not evaluated in full. Every operator is evaluated
// array-array on the element types where it is meaningful, array-scalar and scalar-array on the
// types where a different code path or promotion rule applies; the result element types of the
// whole matrix are checked at compile time below (g++ emits no code for those; nvcc still compiles
// their kernels, ~0.2 s each).

TEST_CASE("arithmetic operators: int32 (true division, rem, x / 0, x % 0)") {
  for_each_case([](const DeviceSet& ds, std::size_t n) {
    const auto av = numerators<i32>(n), bv = divisors<i32>(n);
    const auto a = put(av, ds), b = put(bv, ds);
    EXPECT_EXPR(i32, a + b, map2(av, bv, +[](i32 x, i32 y) { return x + y; }));
    EXPECT_EXPR(i32, a - b, map2(av, bv, +[](i32 x, i32 y) { return x - y; }));
    EXPECT_EXPR(i32, a * b, map2(av, bv, +[](i32 x, i32 y) { return x * y; }));
    EXPECT_EXPR(double, a / b, map2(av, bv, +[](i32 x, i32 y) { return double(x) / double(y); }));
    EXPECT_EXPR(i32, a % b, map2(av, bv, +[](i32 x, i32 y) { return int_rem(x, y); }));
    EXPECT_EXPR(i32, -a, map1(av, +[](i32 x) { return -x; }));
    const int s = small_scalar<i32>(), t = scalar_from(av);  // s is now and then 0 or -1
    CAPTURE(s);
    CAPTURE(t);
    EXPECT_EXPR(double, a / s, map1s(av, s, +[](i32 x, int y) { return double(x) / double(y); }));
    EXPECT_EXPR(i32, a % s, map1s(av, s, +[](i32 x, int y) { return int_rem(x, y); }));
    EXPECT_EXPR(double, t / b, map1s(bv, t, +[](i32 y, int x) { return double(x) / double(y); }));
    EXPECT_EXPR(i32, t % b, map1s(bv, t, +[](i32 y, int x) { return int_rem(x, y); }));
  });
}

TEST_CASE("arithmetic operators: int64 (values beyond 32 bits)") {
  for_each_case([](const DeviceSet& ds, std::size_t n) {
    const auto av = random_values<i64>(n, -1e11, 1e11), bv = divisors<i64>(n);  // |a| up to 1e12
    const auto a = put(av, ds), b = put(bv, ds);
    EXPECT_EXPR(i64, a * b, map2(av, bv, +[](i64 x, i64 y) { return x * y; }));
    EXPECT_EXPR(double, a / b, map2(av, bv, +[](i64 x, i64 y) { return double(x) / double(y); }));
    EXPECT_EXPR(i64, a % b, map2(av, bv, +[](i64 x, i64 y) { return int_rem(x, y); }));
    const i64 s = small_scalar<i64>();
    CAPTURE(s);
    EXPECT_EXPR(i64, a % s, map1s(av, s, +[](i64 x, i64 y) { return int_rem(x, y); }));
  });
}

TEST_CASE("arithmetic operators: float (weak double scalars round to float)") {
  for_each_case([](const DeviceSet& ds, std::size_t n) {
    const auto av = numerators<float>(n), bv = divisors<float>(n);  // b holds zeros of both signs
    const auto a = put(av, ds), b = put(bv, ds);
    // float op float is one correctly rounded operation: the double reference rounded to float.
    EXPECT_EXPR(float, a + b, map2(av, bv, +[](float x, float y) { return float(double(x) + y); }));
    EXPECT_EXPR(float, a - b, map2(av, bv, +[](float x, float y) { return float(double(x) - y); }));
    EXPECT_EXPR(float, a * b, map2(av, bv, +[](float x, float y) { return float(double(x) * y); }));
    EXPECT_EXPR(float, a / b, map2(av, bv, +[](float x, float y) { return float(double(x) / y); }));
    EXPECT_EXPR(float, a % b, map2(av, bv, +[](float x, float y) { return float_rem(x, y); }));
    EXPECT_EXPR(float, -a, map1(av, +[](float x) { return -x; }));
    const double s = 0.1 + 1.9 * std::uniform_real_distribution<double>(0, 1)(rng()), t = scalar_from(av);
    CAPTURE(s);
    CAPTURE(t);
    EXPECT_EXPR(float, a * s, map1s(av, float(s), +[](float x, float y) { return float(double(x) * y); }));
    EXPECT_EXPR(float, a % s, map1s(av, float(s), +[](float x, float y) { return float_rem(x, y); }));
    EXPECT_EXPR(float, t - b, map1s(bv, float(t), +[](float y, float x) { return float(double(x) - y); }));
  });
}

TEST_CASE("arithmetic operators: double") {
  for_each_case([](const DeviceSet& ds, std::size_t n) {
    const auto av = numerators<double>(n), bv = divisors<double>(n);
    const auto a = put(av, ds), b = put(bv, ds);
    EXPECT_EXPR(double, a + b, map2(av, bv, +[](double x, double y) { return x + y; }));
    EXPECT_EXPR(double, a / b, map2(av, bv, +[](double x, double y) { return x / y; }));
    EXPECT_EXPR(double, a % b, map2(av, bv, +[](double x, double y) { return std::fmod(x, y); }));
    const double s = 0.1 + 1.9 * std::uniform_real_distribution<double>(0, 1)(rng());
    CAPTURE(s);
    EXPECT_EXPR(double, a * s, map1s(av, s, +[](double x, double y) { return x * y; }));
  });
}

TEST_CASE("arithmetic operators: bool (0/1 integers: + gives int32, / gives double)") {
  for_each_case([](const DeviceSet& ds, std::size_t n) {
    const auto av = random_values<bool>(n), bv = random_values<bool>(n);
    const auto a = put(av, ds), b = put(bv, ds);
    EXPECT_EXPR(i32, a + b, map2(av, bv, +[](bool x, bool y) { return int(x) + int(y); }));
    EXPECT_EXPR(double, a / b, map2(av, bv, +[](bool x, bool y) { return double(x) / double(y); }));
    EXPECT_EXPR(i32, -a, map1(av, +[](bool x) { return -int(x); }));
  });
}

// -- comparisons ----------------------------------------------------------------------------------
TEST_CASE("comparison operators: float (all six; a weak double scalar rounds to float)") {
  for_each_case([](const DeviceSet& ds, std::size_t n) {
    const auto av = numerators<float>(n);
    const auto bv = with_ties(av);
    const auto a = put(av, ds), b = put(bv, ds);
    EXPECT_EXPR(bool, a == b, map2(av, bv, +[](float x, float y) { return x == y; }));
    EXPECT_EXPR(bool, a != b, map2(av, bv, +[](float x, float y) { return x != y; }));
    EXPECT_EXPR(bool, a < b, map2(av, bv, +[](float x, float y) { return x < y; }));
    EXPECT_EXPR(bool, a <= b, map2(av, bv, +[](float x, float y) { return x <= y; }));
    EXPECT_EXPR(bool, a > b, map2(av, bv, +[](float x, float y) { return x > y; }));
    EXPECT_EXPR(bool, a >= b, map2(av, bv, +[](float x, float y) { return x >= y; }));
    const double s = scalar_from(av);  // one of a's values: ties
    CAPTURE(s);
    EXPECT_EXPR(bool, a == s, map1s(av, float(s), +[](float x, float y) { return x == y; }));
    EXPECT_EXPR(bool, s > b, map1s(bv, float(s), +[](float y, float x) { return x > y; }));
  });
}

TEST_CASE("comparison operators: int32, int64, double, bool") {
  for_each_case([](const DeviceSet& ds, std::size_t n) {
    const auto iv = numerators<i32>(n), jv = with_ties(iv);
    const auto i = put(iv, ds), j = put(jv, ds);
    const int s = scalar_from(iv);
    CAPTURE(s);
    EXPECT_EXPR(bool, i < j, map2(iv, jv, +[](i32 x, i32 y) { return x < y; }));
    EXPECT_EXPR(bool, i != s, map1s(iv, s, +[](i32 x, int y) { return x != y; }));
    EXPECT_EXPR(bool, s <= j, map1s(jv, s, +[](i32 y, int x) { return x <= y; }));

    const auto lv = random_values<i64>(n, -1e11, 1e11);
    const i64 t = scalar_from(lv);
    CAPTURE(t);
    EXPECT_EXPR(bool, put(lv, ds) >= t, map1s(lv, t, +[](i64 x, i64 y) { return x >= y; }));

    const auto dv = numerators<double>(n), ev = with_ties(dv);
    const auto d = put(dv, ds), e = put(ev, ds);
    const double u = scalar_from(dv);
    CAPTURE(u);
    EXPECT_EXPR(bool, d == e, map2(dv, ev, +[](double x, double y) { return x == y; }));
    EXPECT_EXPR(bool, d < u, map1s(dv, u, +[](double x, double y) { return x < y; }));

    const auto pv = random_values<bool>(n), qv = random_values<bool>(n);
    EXPECT_EXPR(bool, put(pv, ds) == put(qv, ds), map2(pv, qv, +[](bool x, bool y) { return x == y; }));
  });
}

// -- logical operators ----------------------------------------------------------------------------
// Truthiness data: many zeros (of both signs for floating point) and, for floating point, NaN
// (which is true, as in C++ and Julia's x != 0).
template <class T>
std::vector<T> truth_values(std::size_t n) {
  auto v = random_values<T>(n, -0.2, 0.2);  // integers in [-2, 2]
  std::uniform_int_distribution<int> pick(0, 7);
  for (auto& x : v) {
    const int k = pick(rng());
    if (k == 0) x = T(0);
    if constexpr (std::is_floating_point_v<T>) {
      if (k == 1) x = -T(0);
      if (k == 2) x = std::numeric_limits<T>::quiet_NaN();
    }
  }
  return v;
}

TEST_CASE("logical operators: bool, and the truthiness of float (NaN is true, -0 false)") {
  for_each_case([](const DeviceSet& ds, std::size_t n) {
    const auto av = random_values<bool>(n), bv = random_values<bool>(n);
    const auto a = put(av, ds), b = put(bv, ds);
    EXPECT_EXPR(bool, a && b, map2(av, bv, +[](bool x, bool y) { return x && y; }));
    EXPECT_EXPR(bool, a || b, map2(av, bv, +[](bool x, bool y) { return x || y; }));
    EXPECT_EXPR(bool, !a, map1(av, +[](bool x) { return !x; }));
    EXPECT_EXPR(bool, a && true, av);
    EXPECT_EXPR(bool, false || b, bv);
    const auto fv = truth_values<float>(n), gv = truth_values<float>(n);
    const auto f = put(fv, ds), g = put(gv, ds);
    EXPECT_EXPR(bool, f && g, map2(fv, gv, +[](float x, float y) { return x != 0 && y != 0; }));
    EXPECT_EXPR(bool, !f, map1(fv, +[](float x) { return x == 0; }));  // !NaN is false
  });
}

// -- result element types -------------------------------------------------------------------------
TEST_CASE("result element types: weak scalars and C++ promotion between arrays") {
  Array<bool, 1> m;
  Array<i32, 1> i;
  Array<i64, 1> l;
  Array<float, 1> f;
  Array<double, 1> d;
  // Weak scalars (NumPy 2): the array's element type wins...
  RESULT_IS(f + true, float);
  RESULT_IS(f * 2, float);
  RESULT_IS(f * i64(2), float);
  RESULT_IS(f * 2.0f, float);
  RESULT_IS(f * 2.0, float);
  RESULT_IS(d + true, double);
  RESULT_IS(d * 2, double);
  RESULT_IS(d * 2.0f, double);
  RESULT_IS(d * 2.0, double);
  RESULT_IS(i + true, i32);
  RESULT_IS(i + 2, i32);
  RESULT_IS(i + i64(2), i32);
  RESULT_IS(i + std::int16_t(2), i32);
  RESULT_IS(l + true, i64);
  RESULT_IS(l + 2, i64);
  RESULT_IS(l + i64(2), i64);
  // ...except that a floating scalar makes an integer or bool array double, and an integer scalar
  // makes a bool array integer (bool + bool is an int, as in C++ and Julia).
  RESULT_IS(i * 2.5, double);
  RESULT_IS(i * 2.5f, double);
  RESULT_IS(l - 0.5, double);
  RESULT_IS(l - 0.5f, double);
  RESULT_IS(m * 2.5, double);
  RESULT_IS(m + 1, i32);
  RESULT_IS(1 - m, i32);
  RESULT_IS(m + i64(1), i64);
  RESULT_IS(m + true, i32);
  // Scalar on the left: the same rules.
  RESULT_IS(2.0 * f, float);
  RESULT_IS(2.5 * i, double);
  RESULT_IS(2 - l, i64);
  // Arrays of different element types promote as C++ does.
  RESULT_IS(f + d, double);
  RESULT_IS(i + l, i64);
  RESULT_IS(l + i, i64);
  RESULT_IS(i * f, float);
  RESULT_IS(l * f, float);
  RESULT_IS(i * d, double);
  RESULT_IS(m + m, i32);
  RESULT_IS(m + i, i32);
  RESULT_IS(m + l, i64);
  RESULT_IS(m + f, float);
  RESULT_IS(-m, i32);
  RESULT_IS(-f, float);
  // Division is true division: integers and bools give double, floating types keep theirs.
  RESULT_IS(i / i, double);
  RESULT_IS(l / l, double);
  RESULT_IS(i / l, double);
  RESULT_IS(m / m, double);
  RESULT_IS(i / 2, double);
  RESULT_IS(2 / i, double);
  RESULT_IS(f / 2, float);
  RESULT_IS(f / i, float);
  RESULT_IS(d / i, double);
  // rem keeps the promoted type.
  RESULT_IS(i % 3, i32);
  RESULT_IS(i % l, i64);
  RESULT_IS(i % 2.5, double);
  RESULT_IS(f % 2.5, float);
  RESULT_IS(f % d, double);
  // Comparisons and logical operators give bool, whatever their operands.
  RESULT_IS(i < 2.5, bool);
  RESULT_IS(2.5 > i, bool);
  RESULT_IS(f == d, bool);
  RESULT_IS(l != i, bool);
  RESULT_IS(m <= m, bool);
  RESULT_IS(d >= 0, bool);
  RESULT_IS(i || f, bool);
  RESULT_IS(m && true, bool);
  RESULT_IS(!d, bool);
  RESULT_IS(!l, bool);
  // A float scalar next to a bool array keeps float (Julia: Bool .* 2.5f0 is Float32; NumPy:
  // bool * float32 is float32), while next to an integer array it gives double (above).
  RESULT_IS(m * 2.5f, float);
  RESULT_IS(m + 0.5f, float);
}

TEST_CASE("mixed element types and weak scalars: values") {
  for_each_case([](const DeviceSet& ds, std::size_t n) {
    const auto mv = random_values<bool>(n);
    const auto iv = numerators<i32>(n);
    const auto lv = random_values<i64>(n, -1e11, 1e11);
    const auto fv = numerators<float>(n);
    const auto dv = divisors<double>(n);
    const auto m = put(mv, ds);
    const auto i = put(iv, ds);
    const auto l = put(lv, ds);
    const auto f = put(fv, ds);
    const auto d = put(dv, ds);
    // weak scalars (the first two evaluate types already tested above, with literal values)
    EXPECT_EXPR(float, f * 0.1, map1(fv, +[](float x) { return float(double(x) * double(0.1f)); }));
    EXPECT_EXPR(double, d * 0.1f, map1(dv, +[](double x) { return x * double(0.1f); }));  // the float literal's value
    EXPECT_EXPR(double, i * 2.5, map1(iv, +[](i32 x) { return x * 2.5; }));
    EXPECT_EXPR(double, i * 0.1f, map1(iv, +[](i32 x) { return x * double(0.1f); }));
    EXPECT_EXPR(i32, m + 1, map1(mv, +[](bool x) { return int(x) + 1; }));
    EXPECT_EXPR(double, m * 2.5, map1(mv, +[](bool x) { return x * 2.5; }));
    EXPECT_EXPR(double, i % 2.5, map1(iv, +[](i32 x) { return std::fmod(double(x), 2.5); }));
    EXPECT_EXPR(bool, i < 2.5, map1(iv, +[](i32 x) { return double(x) < 2.5; }));
    // array-array promotion
    EXPECT_EXPR(double, f + d, map2(fv, dv, +[](float x, double y) { return double(x) + y; }));
    EXPECT_EXPR(i64, i + l, map2(iv, lv, +[](i32 x, i64 y) { return i64(x) + y; }));
    EXPECT_EXPR(float, i * f, map2(iv, fv, +[](i32 x, float y) { return float(double(x) * y); }));
    EXPECT_EXPR(bool, f == d, map2(fv, dv, +[](float x, double y) { return double(x) == y; }));
  });
}

// -- Julia semantics at the edges -----------------------------------------------------------------
TEST_CASE("integer division is true division; x / 0 gives inf or NaN") {
  const double inf = std::numeric_limits<double>::infinity();
  for (const auto& ds : device_sets()) {
    INFO("device set " << set_name(ds));
    const std::vector<i32> xv{7, -7, 0, 1, -1, std::numeric_limits<i32>::min(), 6, 5};
    const std::vector<i32> yv{2, 2, 0, 0, 0, -1, -3, 0};
    const auto x = put(xv, ds), y = put(yv, ds);
    const auto q = to_host(eval(x / y));
    check_values(q, std::vector<double>{3.5, -3.5, std::nan(""), inf, -inf, 2147483648.0, -2.0, inf}, 0.0, 0.0);
    EXPECT_EXPR(double, x / 0, map1s(xv, 0, +[](i32 v, int z) { return double(v) / double(z); }));
    EXPECT_EXPR(double, 0 / y, map1(yv, +[](i32 v) { return 0.0 / double(v); }));
    const std::vector<i64> lv{std::numeric_limits<i64>::min(), -9, 9, 0, (i64(1) << 53) + 1};
    const std::vector<i64> mv{-1, 0, 0, 0, 1};
    const auto lq = to_host(eval(put(lv, ds) / put(mv, ds)));
    check_values(lq, std::vector<double>{9223372036854775808.0, -inf, inf, std::nan(""), 9007199254740992.0}, 0.0,
                 0.0);
    // Booleans divide as numbers too.
    const std::vector<bool> bv{true, true, false, false}, cv{true, false, true, false};
    check_values(to_host(eval(put(bv, ds) / put(cv, ds))), std::vector<double>{1.0, inf, 0.0, std::nan("")}, 0.0,
                 0.0);
  }
}

TEST_CASE("% is Julia's rem: the sign of the dividend; integer x % 0 == 0") {
  for (const auto& ds : device_sets()) {
    INFO("device set " << set_name(ds));
    const i32 imin = std::numeric_limits<i32>::min();
    const std::vector<i32> xv{7, -7, 7, -7, 6, -6, 5, -5, 0, imin, imin, std::numeric_limits<i32>::max()};
    const std::vector<i32> yv{3, 3, -3, -3, 3, -3, 0, 0, 0, -1, 7, -1};
    const auto x = put(xv, ds), y = put(yv, ds);
    EXPECT_EXPR(i32, x % y, (std::vector<i32>{1, -1, 1, -1, 0, 0, 0, 0, 0, 0, -2, 0}));
    EXPECT_EXPR(i32, x % 0, std::vector<i32>(xv.size(), 0));
    EXPECT_EXPR(i32, x % -1, std::vector<i32>(xv.size(), 0));
    EXPECT_EXPR(i32, -7 % y, (std::vector<i32>{-1, -1, -1, -1, -1, -1, 0, 0, 0, 0, 0, 0}));
    const i64 lmin = std::numeric_limits<i64>::min();
    const std::vector<i64> lv{lmin, lmin, -9, 9, 1000000000007LL};
    const std::vector<i64> mv{-1, 10, 0, -4, 1000000000LL};
    EXPECT_EXPR(i64, put(lv, ds) % put(mv, ds), (std::vector<i64>{0, -8, 0, 1, 7}));

    const double inf = std::numeric_limits<double>::infinity(), nan = std::numeric_limits<double>::quiet_NaN();
    const std::vector<double> fxv{7.5, -7.5, 7.5, -7.5, -4.0, 4.0, 3.0, 3.0, inf, nan, -0.0, 1e300};
    const std::vector<double> fyv{2.0, 2.0, -2.0, -2.0, 2.0, -2.0, 0.0, -inf, 2.0, 2.0, 5.0, 7.0};
    const auto r = to_host(eval(put(fxv, ds) % put(fyv, ds)));
    const std::vector<double> want{1.5, -1.5, 1.5, -1.5, -0.0, 0.0, nan, 3.0, nan, nan, -0.0, std::fmod(1e300, 7.0)};
    check_values(r, want, 0.0, 0.0);
    CHECK(std::signbit(r[4]));   // -4 rem 2 == -0.0: the sign of the dividend
    CHECK(!std::signbit(r[5]));  // 4 rem -2 == +0.0
    CHECK(std::signbit(r[10]));
    // float: the same through fmodf, and with a weak double scalar rounded to float
    const std::vector<float> gxv(fxv.begin(), fxv.end() - 1), gyv(fyv.begin(), fyv.end() - 1);
    const auto gx = put(gxv, ds), gy = put(gyv, ds);
    const auto g = to_host(eval(gx % gy));
    for (std::size_t k = 0; k + 1 < want.size(); ++k) {
      CAPTURE(k);
      if (std::isnan(want[k])) {
        CHECK(std::isnan(g[k]));
      } else {
        CHECK(g[k] == float(want[k]));
        CHECK(std::signbit(g[k]) == std::signbit(want[k]));
      }
    }
    EXPECT_EXPR(float, gx % 0.1, map1(gxv, +[](float v) { return float_rem<float>(v, 0.1f); }));
  }
}

TEST_CASE("operators at the edges: signed zeros, infinities, NaN, exact int64, bool") {
  const double inf = std::numeric_limits<double>::infinity(), nan = std::numeric_limits<double>::quiet_NaN();
  const float finf = std::numeric_limits<float>::infinity(), fnan = std::numeric_limits<float>::quiet_NaN();
  for (const auto& ds : device_sets()) {
    INFO("device set " << set_name(ds));
    const std::vector<double> xv{1.0, -1.0, 1.0, 0.0, inf, inf, nan, 0.0, -0.0, 2.0};
    const std::vector<double> yv{0.0, 0.0, -0.0, 0.0, inf, -inf, 1.0, -0.0, -0.0, nan};
    const auto x = put(xv, ds), y = put(yv, ds);
    check_values(to_host(eval(x / y)), std::vector<double>{inf, -inf, -inf, nan, nan, nan, nan, nan, nan, nan}, 0.0,
                 0.0);
    const auto s = to_host(eval(x + y));
    check_values(s, std::vector<double>{1.0, -1.0, 1.0, 0.0, inf, nan, nan, 0.0, -0.0, nan}, 0.0, 0.0);
    CHECK(std::signbit(s[8]));   // -0 + -0 == -0
    CHECK(!std::signbit(s[7]));  // 0 + -0 == +0
    // float: negation flips the sign of zero; every comparison with NaN is false except !=.
    const std::vector<float> fv{1.0f, -1.0f, 1.0f, 0.0f, finf, finf, fnan, 0.0f, -0.0f, 2.0f};
    const std::vector<float> gv{0.0f, 0.0f, -0.0f, 0.0f, finf, -finf, 1.0f, -0.0f, -0.0f, fnan};
    const auto f = put(fv, ds), g = put(gv, ds);
    const auto neg = to_host(eval(-f));
    CHECK(std::signbit(neg[3]));  // -(+0) == -0
    CHECK(!std::signbit(neg[8]));
    CHECK(neg[4] == -finf);
    CHECK(std::isnan(neg[6]));
    const auto eq = to_host(eval(f == g)), ne = to_host(eval(f != g)), lt = to_host(eval(f < g)),
               le = to_host(eval(f <= g)), gt = to_host(eval(f > g)), ge = to_host(eval(f >= g));
    for (std::size_t k = 0; k < fv.size(); ++k) {
      CAPTURE(k);
      CHECK(eq[k] == (fv[k] == gv[k]));
      CHECK(ne[k] == (fv[k] != gv[k]));
      CHECK(lt[k] == (fv[k] < gv[k]));
      CHECK(le[k] == (fv[k] <= gv[k]));
      CHECK(gt[k] == (fv[k] > gv[k]));
      CHECK(ge[k] == (fv[k] >= gv[k]));
    }
    CHECK(eq[7]);  // 0 == -0
    CHECK(eq[4]);  // inf == inf
    CHECK(!eq[6]);
    CHECK(ne[6]);  // NaN != 1
    // A weak double scalar rounds to float before the operation (NumPy 2).
    const std::vector<float> hv{0.1f, 0.2f, 1.0f / 3.0f, fnan};
    const auto h = put(hv, ds);
    check_values(to_host(eval(h == 0.1)), std::vector<bool>{true, false, false, false}, 0.0, 0.0);
    check_values(to_host(eval(h * 2.0)), std::vector<float>{0.2f, 0.4f, 2.0f / 3.0f, fnan}, 0.0, 0.0);
    // Integer arrays against a fractional scalar compare in double.
    const std::vector<i32> iv{2, 3, -3, 0};
    const auto i = put(iv, ds);
    check_values(to_host(eval(i < 2.5)), std::vector<bool>{true, false, true, true}, 0.0, 0.0);
    check_values(to_host(eval(i != 3)), std::vector<bool>{true, false, true, true}, 0.0, 0.0);
    // int64 values beyond 2^53 compare exactly (as doubles 2^53 + 1 and 2^53 are equal).
    const i64 big = (i64(1) << 53) + 1;
    const auto l = put(std::vector<i64>{big, big - 1, -big}, ds);
    check_values(to_host(eval(l >= big)), std::vector<bool>{true, false, false}, 0.0, 0.0);
    check_values(to_host(eval(l % 2)), std::vector<i64>{1, 0, -1}, 0.0, 0.0);
    // Booleans: arithmetic as 0/1 integers.
    const auto b = put(std::vector<bool>{true, false, true, false}, ds);
    check_values(to_host(eval(-b)), std::vector<i32>{-1, 0, -1, 0}, 0.0, 0.0);
    check_values(to_host(eval(b + b)), std::vector<i32>{2, 0, 2, 0}, 0.0, 0.0);
    // Truthiness: NaN and infinities are true, zeros of both signs false.
    const auto t = put(std::vector<float>{fnan, 0.0f, -0.0f, finf}, ds);
    check_values(to_host(eval(!t)), std::vector<bool>{false, true, true, false}, 0.0, 0.0);
    check_values(to_host(eval(t && t)), std::vector<bool>{true, false, false, true}, 0.0, 0.0);
  }
}

// -- fused expressions ----------------------------------------------------------------------------
TEST_CASE("fused multi-term expressions equal the reference") {
  for_each_case([](const DeviceSet& ds, std::size_t n) {
    const auto av = random_values<float>(n), bv = random_values<float>(n), cv = random_values<float>(n, 0.5, 3.0);
    const auto dv = random_values<double>(n);
    const auto iv = numerators<i32>(n), jv = divisors<i32>(n);
    const auto a = put(av, ds), b = put(bv, ds), c = put(cv, ds);
    const auto d = put(dv, ds);
    const auto i = put(iv, ds), j = put(jv, ds);
    std::vector<double> want(n);
    // The headline expression, in float, against a double reference.
    for (std::size_t k = 0; k < n; ++k) want[k] = std::sin(double(av[k])) * bv[k] + 2.0 * av[k];
    EXPECT_EXPR_TOL(float, sin(a) * b + 2 * a, want, 1e-5, 1e-5);
    // Mixed element types: int32 * float is float, then double.
    for (std::size_t k = 0; k < n; ++k) want[k] = double(float(iv[k]) * av[k]) + dv[k] / 4.0 - 1.0;
    EXPECT_EXPR_TOL(double, i * a + d / 4 - 1, want, 1e-12, 1e-12);
    // Comparisons and logic across four arrays of three element types.
    std::vector<bool> wb(n);
    for (std::size_t k = 0; k < n; ++k)
      wb[k] = ((av[k] < bv[k]) && (cv[k] >= 1.5f)) || !(dv[k] > double(av[k])) || (jv[k] == 0);
    EXPECT_EXPR(bool, ((a < b) && (c >= 1.5)) || !(d > a) || (j == 0), wb);
    // A tree built in steps from `auto` sub-expressions whose operands' names go out of scope.
    auto make = [&] {
      auto ta = put(av, ds);
      auto tb = put(bv, ds);
      auto e1 = ta * tb;
      auto e2 = e1 - 0.25 * ta;
      return e2 * e2 + tb;  // the tree shares the storage of ta and tb
    };
    auto e = make();
    for (std::size_t k = 0; k < n; ++k) {
      const double t = double(av[k]) * bv[k] - 0.25 * av[k];
      want[k] = t * t + bv[k];
    }
    EXPECT_EXPR_TOL(float, e, want, 1e-5, 1e-5);
    // The same expression assigned into an existing array, through both policies.
    Array<float, 1> out = put(std::vector<float>(n, -1.0f), ds);
    assign(out, e, seq);
    check_values(to_host(out), want, 1e-5, 1e-5);
    out = 0.f;
    out = e;
    check_values(to_host(out), want, 1e-5, 1e-5);
    // The operands read unchanged.
    check_values(to_host(a), av, 0.0, 0.0);
    check_values(to_host(j), jv, 0.0, 0.0);
  });
}

// Long contiguous operands take the staged vector path on Hopper GPUs (backend/cuda/executor.cuh:
// each block's tile of every operand copied into shared memory by one bulk copy, an operand
// repeated in the expression copied once); sizes around its thresholds and tiles (64 tiles of 768
// floats, of 512 doubles), partial last tiles and lengths that are no multiple of the vector width.
TEST_CASE("long contiguous expressions: every tile, repeated operands, mixed element sizes") {
  for (const auto& ds : device_sets()) {
    for (std::size_t n : {std::size_t{49151}, std::size_t{49152}, std::size_t{49153}, std::size_t{(1 << 20) + 3},
                          std::size_t{3000001}}) {
      INFO("device set " << set_name(ds) << ", n = " << n);
      const auto av = random_values<float>(n), bv = random_values<float>(n);
      const auto dv = random_values<double>(n), ev = random_values<double>(n);
      const auto a = put(av, ds), b = put(bv, ds);
      const auto d = put(dv, ds), e = put(ev, ds);
      std::vector<double> want(n);
      for (std::size_t k = 0; k < n; ++k) want[k] = double(av[k] + bv[k]);
      EXPECT_EXPR_TOL(float, a + b, want, 0.0, 0.0);
      for (std::size_t k = 0; k < n; ++k) want[k] = std::sin(double(av[k])) * bv[k] + 2.0 * av[k] - av[k] * av[k];
      EXPECT_EXPR_TOL(float, sin(a) * b + 2 * a - a * a, want, 1e-5, 1e-5);
      for (std::size_t k = 0; k < n; ++k) want[k] = dv[k] * ev[k] + dv[k];
      EXPECT_EXPR_TOL(double, d * e + d, want, 1e-15, 1e-15);
      for (std::size_t k = 0; k < n; ++k) want[k] = double(av[k]) * dv[k] - double(bv[k]);
      EXPECT_EXPR_TOL(double, a * d - b, want, 1e-12, 1e-12);
      check_values(to_host(a), av, 0.0, 0.0);
      check_values(to_host(d), dv, 0.0, 0.0);
    }
  }
}

TEST_CASE("fused expression on a sharded matrix with a replicated column") {
  for (const auto& ds : device_sets()) {
    for (index_t cols : sweep_sizes()) {
      if (cols > 400000) cols = 400000;  // 3 x 400000 elements: still large, every shard busy
      INFO("device set " << set_name(ds) << ", 3 x " << cols);
      const index_t rows = 3;
      const auto mv = random_values<float>(static_cast<std::size_t>(rows * cols));
      const auto vv = random_values<float>(static_cast<std::size_t>(rows));
      const auto m = from_host(mv, {rows, cols}, shard(1, ds));  // uneven shards along the columns
      const auto v = from_host(vv, {rows}, replicate(ds));      // broadcast along the columns
      std::vector<double> want(mv.size());
      for (index_t c = 0; c < cols; ++c)
        for (index_t r = 0; r < rows; ++r) {
          const double x = mv[static_cast<std::size_t>(r + rows * c)];
          want[static_cast<std::size_t>(r + rows * c)] = x * vv[static_cast<std::size_t>(r)] + 2.0 * x - 1.0;
        }
      auto res = eval(m * v + 2 * m - 1);
      static_assert(std::is_same_v<decltype(res), Array<float, 2>>);
      CHECK(res.shape() == Shape<2>{rows, cols});
      check_values(to_host(res), want, 1e-5, 1e-5);
    }
  }
}

// -- bad operands ---------------------------------------------------------------------------------
TEST_CASE("operators on shapes that do not broadcast throw and leave every array intact") {
  for (const auto& ds : device_sets()) {
    INFO("device set " << set_name(ds));
    const auto av = random_values<float>(10), bv = random_values<float>(11), cv = random_values<float>(10);
    const auto a = put(av, ds), b = put(bv, ds);
    auto c = put(cv, ds);
    check_mentions(expect_error<dimension_mismatch>([&] { c = a + b; }), {"10-element", "11-element", "dimension 0"});
    CHECK_THROWS_AS((void)eval(a + b), dimension_mismatch);
    CHECK_THROWS_AS((void)eval(a == b), dimension_mismatch);
    check_values(to_host(a), av, 0.0, 0.0);
    check_values(to_host(b), bv, 0.0, 0.0);
    check_values(to_host(c), cv, 0.0, 0.0);
  }
}

TEST_CASE("operators on arrays placed differently throw placement_mismatch and leave every array intact") {
  for (const auto& ds : multi_device_sets()) {
    INFO("device set " << set_name(ds));
    const std::size_t n = 1000;
    const auto av = random_values<float>(n), bv = random_values<float>(n), cv = random_values<float>(n);
    const auto a = put(av, ds);
    const auto b = from_host(bv, {static_cast<index_t>(n)}, on(ds[0]));
    auto c = put(cv, ds);
    check_mentions(expect_error<placement_mismatch>([&] { c = a + b; }), {"operand #2", ds[1].name()});
    CHECK_THROWS_AS((void)eval(a + b), placement_mismatch);
    check_values(to_host(a), av, 0.0, 0.0);
    check_values(to_host(b), bv, 0.0, 0.0);
    check_values(to_host(c), cv, 0.0, 0.0);
  }
}

}  // namespace
