// SPDX-License-Identifier: Apache-2.0
// Tessera: the functor structs and the operators and math functions built on them. Every
// overload is a two-line wrapper over detail::make_node; adding an operator means adding one
// functor and one macro line (docs/architecture.md, "how to add an operator").
#pragma once
#include <tessera/expr.hpp>

#include <cmath>
#include <math.h>
#include <type_traits>

// The complex functions, called unqualified so that argument-dependent lookup finds them where the
// complex type lives (cuda::std or std) when a functor is instantiated: the umbrella header has only
// complex's declaration (config.hpp), the definitions come with <tessera/complex.hpp>. Outside
// namespace tessera, whose functor structs of the same names would hide them.
namespace tessera_complex_calls {
#define TESSERA_COMPLEX_CALL(NAME) \
  template <class C>               \
  TS_HD auto call_##NAME(const C& a) { return NAME(a); }
TESSERA_COMPLEX_CALL(exp)
TESSERA_COMPLEX_CALL(log)
TESSERA_COMPLEX_CALL(sqrt)
TESSERA_COMPLEX_CALL(abs)
TESSERA_COMPLEX_CALL(arg)
#undef TESSERA_COMPLEX_CALL
}  // namespace tessera_complex_calls

namespace tessera {
namespace detail::fn {

template <class A>
using real_t = std::conditional_t<std::is_same_v<A, float>, float, double>;  // ints go to double
template <class A>
inline constexpr bool is_int_v = std::is_integral_v<A>;  // bool included
template <class A, class B>
using arith_t = decltype(std::declval<A>() + std::declval<B>());

template <class A, class B>
inline constexpr bool any_complex_v = is_complex_v<A> || is_complex_v<B>;
// An operand in the precision R of a mixed complex operation: complex values become complex<R>,
// real ones R (complex<R> op R is cheaper than complex<R> op complex<R>, and exact).
template <class R, class A>
TS_HD auto cx_as(A a) {
  if constexpr (is_complex_v<A>) return complex<R>(a);
  else return static_cast<R>(a);
}
template <class A, class B>
using cx_real_t = real_of_t<promote_t<A, B>>;

// Functions that have no complex meaning (ordering, rounding, integer arithmetic) stop at compile
// time with this, rather than with an overload-resolution trace.
#define TESSERA_NO_COMPLEX(A, WHAT)                                                                \
  static_assert(!is_complex_v<A>, "TESSERA_COMPLEX_UNSUPPORTED: " WHAT " is not defined for complex " \
                                  "numbers (complex supports + - * / == != abs abs2 conj real imag angle exp log sqrt)")

struct plus {
  template <class A, class B>
  TS_HD auto operator()(A a, B b) const {
    if constexpr (any_complex_v<A, B>) return cx_as<cx_real_t<A, B>>(a) + cx_as<cx_real_t<A, B>>(b);
    else return a + b;
  }
};
struct minus {
  template <class A, class B>
  TS_HD auto operator()(A a, B b) const {
    if constexpr (any_complex_v<A, B>) return cx_as<cx_real_t<A, B>>(a) - cx_as<cx_real_t<A, B>>(b);
    else return a - b;
  }
};
struct multiplies {
  template <class A, class B>
  TS_HD auto operator()(A a, B b) const {
    if constexpr (any_complex_v<A, B>) return cx_as<cx_real_t<A, B>>(a) * cx_as<cx_real_t<A, B>>(b);
    else return a * b;
  }
};
// Julia's `/` and NumPy's true division: two integers divide as doubles.
struct divides {
  template <class A, class B>
  TS_HD auto operator()(A a, B b) const {
    if constexpr (any_complex_v<A, B>) return cx_as<cx_real_t<A, B>>(a) / cx_as<cx_real_t<A, B>>(b);
    else if constexpr (is_int_v<A> && is_int_v<B>) return double(a) / double(b);
    else return a / b;
  }
};
// Julia's rem (`%`): the sign of the dividend. Integer x % 0 gives 0 instead of trapping.
struct modulus {
  template <class A, class B>
  TS_HD auto operator()(A a, B b) const {
    TESSERA_NO_COMPLEX(A, "% (rem)");
    TESSERA_NO_COMPLEX(B, "% (rem)");
    using C = arith_t<A, B>;
    if constexpr (std::is_floating_point_v<C>) {
      if constexpr (std::is_same_v<C, float>) return ::fmodf(a, b);
      else return ::fmod(double(a), double(b));
    } else {
      const C x = a, y = b;
      return (y == 0 || y == C(-1)) ? C(0) : C(x % y);
    }
  }
};
struct negate {
  template <class A>
  TS_HD auto operator()(A a) const { return -a; }
};
struct logical_not {
  template <class A>
  TS_HD auto operator()(A a) const {
    TESSERA_NO_COMPLEX(A, "!");
    return bool(!a);
  }
};
struct logical_and {
  template <class A, class B>
  TS_HD auto operator()(A a, B b) const {
    TESSERA_NO_COMPLEX(A, "&&");
    TESSERA_NO_COMPLEX(B, "&&");
    return bool(a) && bool(b);
  }
};
struct logical_or {
  template <class A, class B>
  TS_HD auto operator()(A a, B b) const {
    TESSERA_NO_COMPLEX(A, "||");
    TESSERA_NO_COMPLEX(B, "||");
    return bool(a) || bool(b);
  }
};

// == and != compare complex numbers in their promoted type; the orderings have no complex meaning.
#define TESSERA_COMPARISON(NAME, OP, ORDERED)                                                         \
  struct NAME {                                                                                        \
    template <class A, class B>                                                                        \
    TS_HD auto operator()(A a, B b) const { /* auto: the static_assert fires when the tree is built */ \
      if constexpr (any_complex_v<A, B>) {                                                             \
        static_assert(!ORDERED || !any_complex_v<A, B>, "TESSERA_COMPLEX_UNORDERED: " #OP " is not defined for complex numbers; " \
                                "compare real(z), imag(z) or abs(z)");                                 \
        return bool(complex<cx_real_t<A, B>>(cx_as<cx_real_t<A, B>>(a)) OP                             \
                    complex<cx_real_t<A, B>>(cx_as<cx_real_t<A, B>>(b)));                              \
      } else {                                                                                         \
        using C = arith_t<A, B>;                                                                       \
        return bool(static_cast<C>(a) OP static_cast<C>(b));                                           \
      }                                                                                                \
    }                                                                                                  \
  };
TESSERA_COMPARISON(equal_to, ==, false)
TESSERA_COMPARISON(not_equal_to, !=, false)
TESSERA_COMPARISON(less, <, true)
TESSERA_COMPARISON(less_equal, <=, true)
TESSERA_COMPARISON(greater, >, true)
TESSERA_COMPARISON(greater_equal, >=, true)
#undef TESSERA_COMPARISON

// Real functions: float stays float, integers and bool compute in double (Julia's sin(1)).
#define TESSERA_REAL_FUNCTION(NAME, FLOAT_FN, DOUBLE_FN)                         \
  struct NAME {                                                                   \
    template <class A>                                                            \
    TS_HD auto operator()(A a) const {                                            \
      TESSERA_NO_COMPLEX(A, #NAME);                                               \
      if constexpr (std::is_same_v<real_t<A>, float>) return ::FLOAT_FN(a);       \
      else return ::DOUBLE_FN(double(a));                                         \
    }                                                                             \
  };
// The same, also defined on complex numbers (libcu++'s or the standard library's complex function).
#define TESSERA_REAL_COMPLEX_FUNCTION(NAME, FLOAT_FN, DOUBLE_FN)                  \
  struct NAME {                                                                   \
    template <class A>                                                            \
    TS_HD auto operator()(A a) const {                                            \
      if constexpr (is_complex_v<A>) return ::tessera_complex_calls::call_##NAME(a); \
      else if constexpr (std::is_same_v<real_t<A>, float>) return ::FLOAT_FN(a); \
      else return ::DOUBLE_FN(double(a));                                         \
    }                                                                             \
  };
TESSERA_REAL_FUNCTION(sin, sinf, sin)
TESSERA_REAL_FUNCTION(cos, cosf, cos)
TESSERA_REAL_FUNCTION(tan, tanf, tan)
TESSERA_REAL_COMPLEX_FUNCTION(exp, expf, exp)
TESSERA_REAL_COMPLEX_FUNCTION(log, logf, log)
TESSERA_REAL_FUNCTION(log1p, log1pf, log1p)
TESSERA_REAL_COMPLEX_FUNCTION(sqrt, sqrtf, sqrt)
TESSERA_REAL_FUNCTION(tanh, tanhf, tanh)
TESSERA_REAL_FUNCTION(erf, erff, erf)
TESSERA_REAL_FUNCTION(asin, asinf, asin)
TESSERA_REAL_FUNCTION(acos, acosf, acos)
TESSERA_REAL_FUNCTION(atan, atanf, atan)
TESSERA_REAL_FUNCTION(sinh, sinhf, sinh)
TESSERA_REAL_FUNCTION(cosh, coshf, cosh)
TESSERA_REAL_FUNCTION(asinh, asinhf, asinh)
TESSERA_REAL_FUNCTION(acosh, acoshf, acosh)
TESSERA_REAL_FUNCTION(atanh, atanhf, atanh)
TESSERA_REAL_FUNCTION(exp2, exp2f, exp2)
TESSERA_REAL_FUNCTION(expm1, expm1f, expm1)
TESSERA_REAL_FUNCTION(log2, log2f, log2)
TESSERA_REAL_FUNCTION(log10, log10f, log10)
TESSERA_REAL_FUNCTION(cbrt, cbrtf, cbrt)
#undef TESSERA_REAL_FUNCTION
#undef TESSERA_REAL_COMPLEX_FUNCTION

// Real binary functions: float when both are float (or a weak scalar), double otherwise.
#define TESSERA_REAL_FUNCTION2(NAME, FLOAT_FN, DOUBLE_FN)                                         \
  struct NAME {                                                                                    \
    template <class A, class B>                                                                    \
    TS_HD auto operator()(A a, B b) const {                                                        \
      TESSERA_NO_COMPLEX(A, #NAME);                                                                \
      TESSERA_NO_COMPLEX(B, #NAME);                                                                \
      if constexpr (std::is_same_v<real_t<arith_t<A, B>>, float>) return ::FLOAT_FN(float(a), float(b)); \
      else return ::DOUBLE_FN(double(a), double(b));                                               \
    }                                                                                              \
  };
TESSERA_REAL_FUNCTION2(atan2, atan2f, atan2)
TESSERA_REAL_FUNCTION2(hypot, hypotf, hypot)
#undef TESSERA_REAL_FUNCTION2

struct rsqrt {  // 1 / sqrt(x), correctly rounded sqrt first (CUDA's rsqrtf is 2 ulp)
  template <class A>
  TS_HD auto operator()(A a) const {
    TESSERA_NO_COMPLEX(A, "rsqrt");
    if constexpr (std::is_same_v<real_t<A>, float>) return 1.0f / ::sqrtf(a);
    else return 1.0 / ::sqrt(double(a));
  }
};
struct sigmoid {  // the logistic function 1 / (1 + exp(-x))
  template <class A>
  TS_HD auto operator()(A a) const {
    TESSERA_NO_COMPLEX(A, "sigmoid");
    if constexpr (std::is_same_v<real_t<A>, float>) return 1.0f / (1.0f + ::expf(-a));
    else return 1.0 / (1.0 + ::exp(-double(a)));
  }
};
// Rounding keeps integers as they are; round is Julia's and NumPy's: ties to even.
struct round {
  template <class A>
  TS_HD auto operator()(A a) const {
    TESSERA_NO_COMPLEX(A, "round");
    if constexpr (is_int_v<A>) return a;
    else if constexpr (std::is_same_v<A, float>) return ::rintf(a);
    else return ::rint(a);
  }
};
struct trunc {
  template <class A>
  TS_HD auto operator()(A a) const {
    TESSERA_NO_COMPLEX(A, "trunc");
    if constexpr (is_int_v<A>) return a;
    else if constexpr (std::is_same_v<A, float>) return ::truncf(a);
    else return ::trunc(a);
  }
};
// sign(x): -1, 0 or 1 in x's type; NaN stays NaN (Julia).
struct sign {
  template <class A>
  TS_HD A operator()(A a) const {
    TESSERA_NO_COMPLEX(A, "sign");
    if constexpr (std::is_same_v<A, bool>) return a;
    else return a > A(0) ? A(1) : a < A(0) ? A(-1) : a;
  }
};
// abs2 of a complex number is real: re^2 + im^2 (no square root, no scaling).
struct abs2 {
  template <class A>
  TS_HD auto operator()(A a) const {
    if constexpr (is_complex_v<A>) return a.real() * a.real() + a.imag() * a.imag();
    else if constexpr (std::is_same_v<A, bool>) return a;
    else return a * a;
  }
};
// Julia's mod: the result has the sign of the divisor (Python's %); integer x mod 0 gives 0.
struct mod {
  template <class A, class B>
  TS_HD auto operator()(A a, B b) const {
    TESSERA_NO_COMPLEX(A, "mod");
    TESSERA_NO_COMPLEX(B, "mod");
    using C = arith_t<A, B>;
    const C y = b;
    C r = modulus{}(a, b);
    if constexpr (std::is_floating_point_v<C>) {
      if (r != C(0) && ((r < C(0)) != (y < C(0)))) r += y;
      else if (r == C(0)) r = y < C(0) ? -C(0) : C(0);
    } else {
      if (r != C(0) && ((r < C(0)) != (y < C(0)))) r += y;
    }
    return r;
  }
};
// On complex numbers: either part NaN / either part infinite / both parts finite (Julia).
struct is_nan {
  template <class A>
  TS_HD bool operator()(A a) const {
    if constexpr (is_complex_v<A>) return (*this)(a.real()) || (*this)(a.imag());
    else if constexpr (std::is_floating_point_v<A>) return a != a;
    else return false;
  }
};
struct is_inf {
  template <class A>
  TS_HD bool operator()(A a) const {
    if constexpr (is_complex_v<A>) return (*this)(a.real()) || (*this)(a.imag());
    else if constexpr (std::is_floating_point_v<A>) return a == a && a - a != a - a;
    else return false;
  }
};
struct is_finite {
  template <class A>
  TS_HD bool operator()(A a) const {
    if constexpr (is_complex_v<A>) return (*this)(a.real()) && (*this)(a.imag());
    else if constexpr (std::is_floating_point_v<A>) return a - a == a - a;
    else return true;
  }
};
// clamp(x, lo, hi): lo below lo, hi above hi, x otherwise (NaN stays NaN, as in Julia).
struct clamp {
  template <class A, class B, class C>
  TS_HD auto operator()(A a, B lo, C hi) const {
    TESSERA_NO_COMPLEX(A, "clamp");
    using D = arith_t<arith_t<A, B>, C>;
    const D x = a, l = lo, h = hi;
    return x > h ? h : x < l ? l : x;
  }
};
struct fma {
  template <class A, class B, class C>
  TS_HD auto operator()(A a, B b, C c) const {
    TESSERA_NO_COMPLEX(A, "fma");
    TESSERA_NO_COMPLEX(B, "fma");
    TESSERA_NO_COMPLEX(C, "fma");
    using D = arith_t<arith_t<A, B>, C>;
    if constexpr (std::is_same_v<D, float>) return ::fmaf(a, b, c);
    else if constexpr (std::is_floating_point_v<D>) return ::fma(double(a), double(b), double(c));
    else return D(D(a) * D(b) + D(c));
  }
};

// floor/ceil keep integers as they are (Julia: floor(3) == 3).
struct floor {
  template <class A>
  TS_HD auto operator()(A a) const {
    TESSERA_NO_COMPLEX(A, "floor");
    if constexpr (is_int_v<A>) return a;
    else if constexpr (std::is_same_v<A, float>) return ::floorf(a);
    else return ::floor(a);
  }
};
struct ceil {
  template <class A>
  TS_HD auto operator()(A a) const {
    TESSERA_NO_COMPLEX(A, "ceil");
    if constexpr (is_int_v<A>) return a;
    else if constexpr (std::is_same_v<A, float>) return ::ceilf(a);
    else return ::ceil(a);
  }
};
struct abs {
  template <class A>
  TS_HD auto operator()(A a) const {
    if constexpr (is_complex_v<A>) return ::tessera_complex_calls::call_abs(a);  // the modulus, real
    else if constexpr (std::is_same_v<A, bool>) return a;
    else if constexpr (std::is_same_v<A, float>) return ::fabsf(a);
    else if constexpr (std::is_same_v<A, double>) return ::fabs(a);
    else return a < A(0) ? A(-a) : a;
  }
};

// min and max propagate NaN wherever it sits (Julia's min/max); two bools give a bool.
template <bool IsMax>
struct min_max {
  template <class A, class B>
  TS_HD auto operator()(A a, B b) const {
    TESSERA_NO_COMPLEX(A, "min, max, minimum and maximum");
    TESSERA_NO_COMPLEX(B, "min, max, minimum and maximum");
    using C = std::conditional_t<std::is_same_v<A, bool> && std::is_same_v<B, bool>, bool, arith_t<A, B>>;
    const C x = a, y = b;
    if constexpr (std::is_floating_point_v<C>) {
      if (x != x) return x;
      if (y != y) return y;
    }
    return (IsMax ? x < y : y < x) ? y : x;
  }
};
using min = min_max<false>;
using max = min_max<true>;

// conj, real, imag and angle (Julia's names; angle is C++'s arg): defined on real numbers too,
// where conj(x) == real(x) == x, imag(x) == 0 and angle(x) is 0 or pi (NaN stays NaN).
struct conj {
  template <class A>
  TS_HD A operator()(A a) const {
    if constexpr (is_complex_v<A>) return A(a.real(), -a.imag());
    else return a;
  }
};
struct real_part {
  template <class A>
  TS_HD auto operator()(A a) const {
    if constexpr (is_complex_v<A>) return a.real();
    else return a;
  }
};
struct imag_part {
  template <class A>
  TS_HD auto operator()(A a) const {
    if constexpr (is_complex_v<A>) return a.imag();
    else return A(0);
  }
};
struct angle {
  template <class A>
  TS_HD auto operator()(A a) const {
    if constexpr (is_complex_v<A>) return ::tessera_complex_calls::call_arg(a);
    else if constexpr (std::is_same_v<real_t<A>, float>) return ::atan2f(0.0f, a);
    else return ::atan2(0.0, double(a));
  }
};

// Integer powers stay integer (Julia's 2^3 == 8); a negative exponent gives 0 unless the base
// is 1 or -1 (Julia throws a DomainError, which a kernel cannot).
struct pow {
  template <class A, class B>
  TS_HD auto operator()(A a, B b) const {
    TESSERA_NO_COMPLEX(A, "pow");
    TESSERA_NO_COMPLEX(B, "pow");
    using C = arith_t<A, B>;
    if constexpr (std::is_integral_v<C>) {
      C base = a, e = b, r = 1;
      if (e < 0) return base == 1 ? C(1) : base == C(-1) ? ((e & 1) ? C(-1) : C(1)) : C(0);
      while (e > 0) {  // square only while bits remain, so no intermediate overflows
        if (e & 1) r *= base;
        e >>= 1;
        if (e) base *= base;
      }
      return r;
    } else if constexpr (std::is_same_v<C, float>) {
      return ::powf(a, b);
    } else {
      return ::pow(double(a), double(b));
    }
  }
};

struct select {
  template <class Cnd, class A, class B>
  TS_HD auto operator()(Cnd c, A a, B b) const {
    using C = promote_t<A, B>;
    return c ? C(a) : C(b);
  }
};

// cast<half>(x) and cast<bfloat16>(x) round to the narrow type, then go on as the float they
// compute in (storage_of gives the narrow type back when the node is materialized).
template <class T>
struct cast_to {
  template <class A>
  TS_HD compute_t<T> operator()(A a) const {
    static_assert(!is_complex_v<A> || is_complex_v<T> || std::is_same_v<T, bool>,
                  "TESSERA_COMPLEX_TO_REAL: cast<T> of a complex value would drop its imaginary part; use real(z), "
                  "imag(z) or abs(z)");
    if constexpr (std::is_same_v<T, bool>) return a != A(0);
    else if constexpr (is_narrow_v<T>) return static_cast<float>(T(a));
    else return static_cast<T>(a);
  }
};

}  // namespace detail::fn

// -- operators --------------------------------------------------------------------------------
// Each binary overload needs at least one expression so that plain scalar arithmetic is untouched.
#define TESSERA_BINARY_OPERATOR(OP, FN)                                                     \
  template <operand A, operand B>                                                           \
    requires(expression<A> || expression<B>)                                                \
  auto operator OP(A&& a, B&& b) {                                                          \
    return detail::make_node(detail::fn::FN{}, std::forward<A>(a), std::forward<B>(b));     \
  }
TESSERA_BINARY_OPERATOR(+, plus)
TESSERA_BINARY_OPERATOR(-, minus)
TESSERA_BINARY_OPERATOR(*, multiplies)
TESSERA_BINARY_OPERATOR(/, divides)
TESSERA_BINARY_OPERATOR(%, modulus)
TESSERA_BINARY_OPERATOR(==, equal_to)
TESSERA_BINARY_OPERATOR(!=, not_equal_to)
TESSERA_BINARY_OPERATOR(<, less)
TESSERA_BINARY_OPERATOR(<=, less_equal)
TESSERA_BINARY_OPERATOR(>, greater)
TESSERA_BINARY_OPERATOR(>=, greater_equal)
TESSERA_BINARY_OPERATOR(&&, logical_and)
TESSERA_BINARY_OPERATOR(||, logical_or)
#undef TESSERA_BINARY_OPERATOR

template <expression A>
auto operator-(A&& a) {
  return detail::make_node(detail::fn::negate{}, std::forward<A>(a));
}
template <expression A>
auto operator!(A&& a) {
  return detail::make_node(detail::fn::logical_not{}, std::forward<A>(a));
}

// -- functions --------------------------------------------------------------------------------
#define TESSERA_UNARY_FUNCTION(NAME)                                      \
  template <expression A>                                                 \
  auto NAME(A&& a) {                                                      \
    return detail::make_node(detail::fn::NAME{}, std::forward<A>(a));     \
  }
TESSERA_UNARY_FUNCTION(sin)
TESSERA_UNARY_FUNCTION(cos)
TESSERA_UNARY_FUNCTION(tan)
TESSERA_UNARY_FUNCTION(exp)
TESSERA_UNARY_FUNCTION(log)
TESSERA_UNARY_FUNCTION(log1p)
TESSERA_UNARY_FUNCTION(sqrt)
TESSERA_UNARY_FUNCTION(tanh)
TESSERA_UNARY_FUNCTION(erf)
TESSERA_UNARY_FUNCTION(floor)
TESSERA_UNARY_FUNCTION(ceil)
TESSERA_UNARY_FUNCTION(abs)
TESSERA_UNARY_FUNCTION(asin)
TESSERA_UNARY_FUNCTION(acos)
TESSERA_UNARY_FUNCTION(atan)
TESSERA_UNARY_FUNCTION(sinh)
TESSERA_UNARY_FUNCTION(cosh)
TESSERA_UNARY_FUNCTION(asinh)
TESSERA_UNARY_FUNCTION(acosh)
TESSERA_UNARY_FUNCTION(atanh)
TESSERA_UNARY_FUNCTION(exp2)
TESSERA_UNARY_FUNCTION(expm1)
TESSERA_UNARY_FUNCTION(log2)
TESSERA_UNARY_FUNCTION(log10)
TESSERA_UNARY_FUNCTION(cbrt)
TESSERA_UNARY_FUNCTION(rsqrt)
TESSERA_UNARY_FUNCTION(sigmoid)
TESSERA_UNARY_FUNCTION(round)
TESSERA_UNARY_FUNCTION(trunc)
TESSERA_UNARY_FUNCTION(sign)
TESSERA_UNARY_FUNCTION(abs2)
TESSERA_UNARY_FUNCTION(conj)
TESSERA_UNARY_FUNCTION(angle)
#undef TESSERA_UNARY_FUNCTION

// real(z), imag(z): the parts of a complex expression (real results); arg(z) is angle(z).
template <expression A>
auto real(A&& a) {
  return detail::make_node(detail::fn::real_part{}, std::forward<A>(a));
}
template <expression A>
auto imag(A&& a) {
  return detail::make_node(detail::fn::imag_part{}, std::forward<A>(a));
}
template <expression A>
auto arg(A&& a) {
  return angle(std::forward<A>(a));
}

// Julia's names for predicates (the functors avoid the C macros isnan/isinf/isfinite).
template <expression A>
auto isnan(A&& a) {
  return detail::make_node(detail::fn::is_nan{}, std::forward<A>(a));
}
template <expression A>
auto isinf(A&& a) {
  return detail::make_node(detail::fn::is_inf{}, std::forward<A>(a));
}
template <expression A>
auto isfinite(A&& a) {
  return detail::make_node(detail::fn::is_finite{}, std::forward<A>(a));
}
// logistic(x): Julia's name for sigmoid.
template <expression A>
auto logistic(A&& a) {
  return sigmoid(std::forward<A>(a));
}

#define TESSERA_BINARY_FUNCTION(NAME)                                                          \
  template <operand A, operand B>                                                              \
    requires(expression<A> || expression<B>)                                                   \
  auto NAME(A&& a, B&& b) {                                                                    \
    return detail::make_node(detail::fn::NAME{}, std::forward<A>(a), std::forward<B>(b));      \
  }
TESSERA_BINARY_FUNCTION(pow)
TESSERA_BINARY_FUNCTION(min)
TESSERA_BINARY_FUNCTION(max)
TESSERA_BINARY_FUNCTION(atan2)
TESSERA_BINARY_FUNCTION(hypot)
TESSERA_BINARY_FUNCTION(mod)
#undef TESSERA_BINARY_FUNCTION

// rem(x, y): Julia's rem, the sign of the dividend (the `%` operator).
template <operand A, operand B>
  requires(expression<A> || expression<B>)
auto rem(A&& a, B&& b) {
  return detail::make_node(detail::fn::modulus{}, std::forward<A>(a), std::forward<B>(b));
}

// clamp(x, lo, hi) and fma(a, b, c) (a * b + c rounded once).
#define TESSERA_TERNARY_FUNCTION(NAME)                                                                    \
  template <operand A, operand B, operand C>                                                              \
    requires(expression<A> || expression<B> || expression<C>)                                             \
  auto NAME(A&& a, B&& b, C&& c) {                                                                        \
    return detail::make_node(detail::fn::NAME{}, std::forward<A>(a), std::forward<B>(b), std::forward<C>(c)); \
  }
TESSERA_TERNARY_FUNCTION(clamp)
TESSERA_TERNARY_FUNCTION(fma)
#undef TESSERA_TERNARY_FUNCTION

// where(c, x, y): x where c holds, else y (NumPy's where, Julia's ifelse.(c, x, y)).
template <operand C, operand A, operand B>
  requires(expression<C> || expression<A> || expression<B>)
auto where(C&& c, A&& a, B&& b) {
  using Strong = typename detail::strong_type<std::remove_cvref_t<A>, std::remove_cvref_t<B>>::type;
  return detail::Broadcasted<detail::fn::select, detail::node_t<C>,
                             decltype(detail::to_weak_node<Strong>(std::forward<A>(a))),
                             decltype(detail::to_weak_node<Strong>(std::forward<B>(b)))>{
      {},
      {detail::to_node(std::forward<C>(c)), detail::to_weak_node<Strong>(std::forward<A>(a)),
       detail::to_weak_node<Strong>(std::forward<B>(b))}};
}

// ifelse(c, x, y): Julia's name for where.
template <operand C, operand A, operand B>
  requires(expression<C> || expression<A> || expression<B>)
auto ifelse(C&& c, A&& a, B&& b) {
  return where(std::forward<C>(c), std::forward<A>(a), std::forward<B>(b));
}

// cast<T>(x): converts elementwise (bool: x != 0).
template <element_type T, expression A>
auto cast(A&& a) {
  return detail::make_node(detail::fn::cast_to<T>{}, std::forward<A>(a));
}

// broadcast(f, xs...): applies a user __host__ __device__ functor or lambda elementwise (Julia's
// f.(xs...)). Scalars are passed with their own (normalized) type.
template <class F, operand... X>
  requires((expression<X> || ...) && std::is_invocable_v<const F&, typename detail::node_t<X>::value_type...>)
auto broadcast(F f, X&&... xs) {
  return detail::Broadcasted<F, detail::node_t<X>...>{f, {detail::to_node(std::forward<X>(xs))...}};
}

}  // namespace tessera
