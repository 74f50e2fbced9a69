// SPDX-License-Identifier: Apache-2.0
// complex<float> and complex<double> arrays against std::complex plain loops on fresh random data:
// creation and transfer, views, elementwise arithmetic (mixed with real arrays and scalars) and the
// complex functions, every placement, 1 to 8 host devices (1 and all GPUs in the CUDA variant).
// Reductions: test_complex_reductions.cpp.
#include "complex_support.hpp"

using namespace tessera;
using namespace tessera_test;

TEST_CASE_TEMPLATE("complex arrays: creation, transfer, at, views, copy, printing", T, float, double) {
  using C = complex<T>;
  static_assert(element_type<C> && sizeof(C) == 2 * sizeof(T));
  for (const auto& ds : device_sets()) {
    for (index_t cols : {index_t(0), index_t(1), index_t(7), index_t(33), index_t(257)}) {
      const index_t rows = 5;
      for (const auto& np : placements(2, ds)) {
        INFO("device set " << set_name(ds) << ", cols " << cols << ", " << np.name);
        const auto v = random_complex<T>(static_cast<std::size_t>(rows * cols));
        const auto a = from_host(v, {rows, cols}, np.p);
        CHECK(to_host(a) == v);
        if (cols > 0) {
          CHECK(a.at(3, cols - 1) == v[static_cast<std::size_t>(3 + rows * (cols - 1))]);
          // a view: row 2, and a column range
          Array<C, 1> row = a(2, _);
          std::vector<C> want;
          for (index_t j = 0; j < cols; ++j) want.push_back(v[static_cast<std::size_t>(2 + rows * j)]);
          CHECK(to_host(row) == want);
        }
        const auto c = copy(a);
        CHECK(to_host(c) == v);
        const auto z = zeros<C>({rows, cols}, np.p);
        const auto o = ones<C>({rows, cols}, np.p);
        const auto f = full<C>({rows, cols}, C(T(1.5), T(-2)), np.p);
        for (auto x : to_host(z)) CHECK(x == C(0));
        for (auto x : to_host(o)) CHECK(x == C(1));
        for (auto x : to_host(f)) CHECK(x == C(T(1.5), T(-2)));
        Array<C, 2> g = a;
        g = C(T(0), T(3));  // fill with a complex scalar
        for (auto x : to_host(g)) CHECK(x == C(T(0), T(3)));
        g(_, range(0, cols / 2)) = a(_, range(0, cols / 2)) * T(2);  // a view assigned
        const auto gh = to_host(g);
        for (index_t j = 0; j < cols; ++j) {
          for (index_t i = 0; i < rows; ++i) {
            const auto k = static_cast<std::size_t>(i + rows * j);
            CHECK(gh[k] == (j < cols / 2 ? v[k] * T(2) : C(T(0), T(3))));
          }
        }
      }
    }
  }
  if (skip_without_gpu()) return;  // the default devices below need one in the CUDA variant
  const auto p = from_host(std::vector<C>{C(T(1.5), T(-2)), C(T(0), T(1))}, {2});
  std::ostringstream os;
  os << p;
  CHECK(contains(os.str(), std::is_same_v<T, float> ? "ComplexF32" : "ComplexF64"));
  CHECK(contains(os.str(), "1.5 - 2im"));
  CHECK(contains(os.str(), "0 + 1im"));
}

TEST_CASE_TEMPLATE("complex elementwise: arithmetic with complex and real operands, functions, ==", T, float, double) {
  using C = complex<T>;
  for (const auto& ds : device_sets()) {
    for (index_t n : {index_t(0), index_t(1), index_t(7), index_t(255), index_t(257), index_t(1000), index_t(1 << 16) + 1}) {
      INFO("device set " << set_name(ds) << ", n = " << n);
      const auto sn = static_cast<std::size_t>(n);
      const auto av = random_complex<T>(sn), bv = random_complex<T>(sn);
      const auto rv = random_values<T>(sn);
      const auto iv = random_values<std::int32_t>(sn);
      auto bnz = bv;
      for (auto& x : bnz)
        if (std::abs(ref(x)) < 0.1) x = C(T(0.5), T(0.25));
      const auto a = put(av, ds), b = put(bv, ds), bd = put(bnz, ds);
      const auto r = put(rv, ds);
      const auto ia = put(iv, ds);
      auto want = [&](auto f) {
        std::vector<decltype(f(std::size_t(0)))> w(sn);
        for (std::size_t i = 0; i < sn; ++i) w[i] = f(i);
        return w;
      };
      const double rt = tol<T>(), at = tol<T>();
      // complex op complex
      static_assert(std::is_same_v<typename decltype(eval(a + b))::value_type, C>);
      check_c(to_host(eval(a + b)), want([&](auto i) { return ref(av[i]) + ref(bv[i]); }), rt, at, "a + b");
      check_c(to_host(eval(a - b)), want([&](auto i) { return ref(av[i]) - ref(bv[i]); }), rt, at, "a - b");
      check_c(to_host(eval(a * b)), want([&](auto i) { return ref(av[i]) * ref(bv[i]); }), rt, at, "a * b");
      check_c(to_host(eval(a / bd)), want([&](auto i) { return ref(av[i]) / ref(bnz[i]); }), 10 * rt, 10 * at, "a / b");
      // complex op real array (result complex), both orders
      static_assert(std::is_same_v<typename decltype(eval(a * r))::value_type, C>);
      check_c(to_host(eval(a * r)), want([&](auto i) { return ref(av[i]) * rv[i]; }), rt, at, "a * r");
      check_c(to_host(eval(r - a)), want([&](auto i) { return rv[i] - ref(av[i]); }), rt, at, "r - a");
      check_c(to_host(eval(a + ia)), want([&](auto i) { return ref(av[i]) + T(iv[i]); }), rt, at, "a + int32 array");
      // scalars: real scalars stay weak, complex scalars take the array's precision
      static_assert(std::is_same_v<typename decltype(eval(a * 2.0))::value_type, C>);
      check_c(to_host(eval(a * 2.0 + 1)), want([&](auto i) { return ref(av[i]) * T(2) + T(1); }), rt, at, "a * 2.0 + 1");
      check_c(to_host(eval(a / 4.0f)), want([&](auto i) { return ref(av[i]) / T(4); }), rt, at, "a / 4");
      const complex<double> s(0.5, -1.25);
      static_assert(std::is_same_v<typename decltype(eval(a * s))::value_type, C>);
      check_c(to_host(eval(a * s)), want([&](auto i) { return ref(av[i]) * sc<T>(T(0.5), T(-1.25)); }), rt, at, "a * s");
      static_assert(std::is_same_v<typename decltype(eval(r + s))::value_type, C>);  // a real array and a complex scalar
      check_c(to_host(eval(r + s)), want([&](auto i) { return rv[i] + sc<T>(T(0.5), T(-1.25)); }), rt, at, "r + s");
      // mixed precision promotes: complex<float> + double array is complex<double>
      const auto dv = random_values<double>(sn);
      const auto d = put(dv, ds);
      static_assert(std::is_same_v<typename decltype(eval(a + d))::value_type, complex<double>>);
      check_c(to_host(eval(a + d)), want([&](auto i) { return sc<double>(ref(av[i])) + dv[i]; }), rt, at, "a + double");
      // functions
      static_assert(std::is_same_v<typename decltype(eval(abs(a)))::value_type, T>);
      static_assert(std::is_same_v<typename decltype(eval(abs2(a)))::value_type, T>);
      static_assert(std::is_same_v<typename decltype(eval(real(a)))::value_type, T>);
      static_assert(std::is_same_v<typename decltype(eval(angle(a)))::value_type, T>);
      check_c(to_host(eval(abs(a))), want([&](auto i) { return std::abs(ref(av[i])); }), rt, at, "abs");
      check_c(to_host(eval(abs2(a))), want([&](auto i) { return std::norm(ref(av[i])); }), rt, at, "abs2");
      check_c(to_host(eval(conj(a))), want([&](auto i) { return std::conj(ref(av[i])); }), 0, 0, "conj");
      check_c(to_host(eval(real(a))), want([&](auto i) { return av[i].real(); }), 0, 0, "real");
      check_c(to_host(eval(imag(a))), want([&](auto i) { return av[i].imag(); }), 0, 0, "imag");
      check_c(to_host(eval(angle(a))), want([&](auto i) { return std::arg(ref(av[i])); }), rt, at, "angle");
      check_c(to_host(eval(arg(a))), want([&](auto i) { return std::arg(ref(av[i])); }), rt, at, "arg");
      check_c(to_host(eval(exp(a))), want([&](auto i) { return std::exp(ref(av[i])); }), 4 * rt, 4 * at, "exp");
      check_c(to_host(eval(log(bd))), want([&](auto i) { return std::log(ref(bnz[i])); }), 4 * rt, 4 * at, "log");
      check_c(to_host(eval(sqrt(a))), want([&](auto i) { return std::sqrt(ref(av[i])); }), 4 * rt, 4 * at, "sqrt");
      check_c(to_host(eval(-a + conj(b) * a)), want([&](auto i) { return -ref(av[i]) + std::conj(ref(bv[i])) * ref(av[i]); }),
              rt, at, "-a + conj(b) * a");
      // on real operands: real(x) == x, imag(x) == 0, angle is 0 or pi
      check_c(to_host(eval(imag(r))), want([&](auto) { return T(0); }), 0, 0, "imag(real array)");
      check_c(to_host(eval(angle(r))), want([&](auto i) { return std::arg(rv[i]); }), rt, at, "angle(real array)");
      // == and != (complex, and complex against real)
      auto eq = av;
      for (std::size_t i = 0; i < sn; i += 3) eq[i] = bv[i];
      const auto e = put(eq, ds);
      const auto eqh = to_host(eval(e == b)), neh = to_host(eval(e != b));
      for (std::size_t i = 0; i < sn; ++i) {
        CHECK(eqh[i] == (eq[i] == bv[i]));
        CHECK(neh[i] == (eq[i] != bv[i]));
      }
      const auto re_only = to_host(eval(real(a) == a));  // true where imag is 0 (never, for random data)
      for (std::size_t i = 0; i < sn; ++i) CHECK(re_only[i] == (av[i].imag() == T(0)));
      // cast between precisions, and a real array cast to complex
      static_assert(std::is_same_v<typename decltype(eval(cast<complex<double>>(a)))::value_type, complex<double>>);
      check_c(to_host(eval(cast<complex<double>>(a))), want([&](auto i) { return sc<double>(ref(av[i])); }), 0, 0,
              "cast<complex<double>>");
      check_c(to_host(eval(cast<C>(r))), want([&](auto i) { return sc<T>(rv[i]); }), 0, 0, "cast<complex>(real)");
      // compound assignment
      Array<C, 1> acc = a;
      acc += b * T(2);
      check_c(to_host(acc), want([&](auto i) { return ref(av[i]) + ref(bv[i]) * T(2); }), rt, at, "acc += b * 2");
    }
  }
}
