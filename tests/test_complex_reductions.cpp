// SPDX-License-Identifier: Apache-2.0
// Reductions of complex<float> and complex<double> arrays against std::complex plain loops on fresh
// random data: full and dims reductions (sum, mean, prod, norm, dot, count), var and std, every
// placement, 1 to 8 host devices (1 and all GPUs in the CUDA variant); and the MatX#1242 case
// sum(abs2(d), dims(2)).
#include "complex_support.hpp"

using namespace tessera;
using namespace tessera_test;

TEST_CASE_TEMPLATE("complex full reductions: sum, mean, prod, norm, dot, count", T, float, double) {
  using C = complex<T>;
  for (const auto& ds : device_sets()) {
    for (index_t cols : {index_t(0), index_t(1), index_t(7), index_t(33), index_t(257), index_t(1025)}) {
      const index_t rows = cols >= 257 ? 129 : 3;
      for (const auto& np : placements(2, ds)) {
        INFO("device set " << set_name(ds) << ", shape " << rows << "x" << cols << ", " << np.name);
        const auto n = static_cast<std::size_t>(rows * cols);
        const auto av = random_complex<T>(n), bv = random_complex<T>(n);
        const auto a = from_host(av, {rows, cols}, np.p), b = from_host(bv, {rows, cols}, np.p);
        sc<double> s = 0, sab = 0, dotab = 0;
        double sq = 0;
        for (std::size_t i = 0; i < n; ++i) {
          const sc<double> x(ref(av[i])), y(ref(bv[i]));
          s += x;
          sab += x * y;
          dotab += std::conj(x) * y;
          sq += std::norm(x);
        }
        const double t = (std::is_same_v<T, float> ? 1e-5 : 1e-12) * (1 + std::sqrt(double(n)));
        static_assert(std::is_same_v<decltype(sum(a)), C>);
        static_assert(std::is_same_v<decltype(mean(a)), C>);
        static_assert(std::is_same_v<decltype(norm(a)), T>);
        CHECK(close_c(sum(a), s, 1e-5, t));
        CHECK(close_c(sum(a * b), sab, 1e-5, t));
        CHECK(close_c(dot(a, b), dotab, 1e-5, t));  // conjugates the first argument (Julia)
        CHECK(close(norm(a), std::sqrt(sq), 1e-5, 1e-5));
        CHECK(close(sum(abs2(a)), sq, 1e-5, t));
        CHECK(count(a != C(0)) == static_cast<std::int64_t>(n));
        if (n > 0) {
          CHECK(close_c(mean(a), s / double(n), 1e-5, 1e-6));
        } else {
          const C m = mean(a);
          CHECK(std::isnan(double(m.real())));
        }
        // as a replicated 0-d array, usable in later expressions
        const auto sa = sum(a, as_array);
        static_assert(std::is_same_v<typename decltype(sa)::value_type, C>);
        CHECK(close_c(to_host(sa)[0], s, 1e-5, t));
        // prod over values on the unit circle stays finite: the product of e^{i theta_k}
        if (n <= 4096) {
          std::vector<C> uv(n);
          sc<double> pw = 1;
          for (std::size_t i = 0; i < n; ++i) {
            uv[i] = C(std::polar(T(1), T(av[i].real())));
            pw *= sc<double>(ref(uv[i]));
          }
          const auto u = from_host(uv, {rows, cols}, np.p);
          CHECK(close_c(prod(u), pw, 1e-4, std::is_same_v<T, float> ? 1e-3 : 1e-10));
        }
      }
    }
  }
}

TEST_CASE_TEMPLATE("complex reductions along dims: sum, mean, prod, norm", T, float, double) {
  using C = complex<T>;
  for (const auto& ds : device_sets()) {
    for (const Dims shape : {Dims{4, 0, 3}, Dims{1, 1, 1}, Dims{7, 5, 3}, Dims{33, 17, 9}, Dims{257, 3, 5}}) {
      for (const auto& np : placements(3, ds)) {
        const auto n = static_cast<std::size_t>(volume(shape));
        const auto av = random_complex<T>(n);
        const auto a = make<3>(av, shape, np.p);
        for (int d = 0; d < 3; ++d) {
          INFO("device set " << set_name(ds) << ", shape " << dims_string(shape) << ", " << np.name << ", dim " << d);
          Dims out = shape;
          out[static_cast<std::size_t>(d)] = 1;
          const auto m = static_cast<std::size_t>(volume(out));
          std::vector<sc<double>> s(m, 0.0);
          std::vector<double> sq(m, 0.0);
          for (index_t k = 0; k < shape[2]; ++k)
            for (index_t j = 0; j < shape[1]; ++j)
              for (index_t i = 0; i < shape[0]; ++i) {
                index_t o[3] = {i, j, k};
                o[d] = 0;
                const auto oi = static_cast<std::size_t>(o[0] + out[0] * (o[1] + out[1] * o[2]));
                const sc<double> x(ref(av[static_cast<std::size_t>(i + shape[0] * (j + shape[1] * k))]));
                s[oi] += x;
                sq[oi] += std::norm(x);
              }
          const double t = (std::is_same_v<T, float> ? 1e-5 : 1e-12) * (1 + std::sqrt(double(shape[static_cast<std::size_t>(d)])));
          const auto sd = sum(a, dims(d));
          static_assert(std::is_same_v<decltype(sd), const Array<C, 3>>);
          check_c(to_host(sd), s, 1e-5, t, "sum(a, dims(d))");
          const auto red = double(shape[static_cast<std::size_t>(d)]);
          if (red > 0) {
            std::vector<sc<double>> mw(m);
            for (std::size_t i = 0; i < m; ++i) mw[i] = s[i] / red;
            check_c(to_host(mean(a, dims(d))), mw, 1e-5, 1e-6, "mean(a, dims(d))");
          }
          check_c(to_host(sum(abs2(a), dims(d))), sq, 1e-5, t, "sum(abs2(a), dims(d))");
          std::vector<double> nw(m);
          for (std::size_t i = 0; i < m; ++i) nw[i] = std::sqrt(sq[i]);
          check_c(to_host(norm(a, dims(d))), nw, 1e-5, 1e-5, "norm(a, dims(d))");
          // two dims at once
          if (d == 0) {
            const auto s02 = to_host(sum(a, dims(0, 2)));
            REQUIRE(s02.size() == static_cast<std::size_t>(shape[1]));
            for (index_t j = 0; j < shape[1]; ++j) {
              sc<double> w = 0;
              for (index_t k = 0; k < shape[2]; ++k)
                for (index_t i = 0; i < shape[0]; ++i)
                  w += sc<double>(ref(av[static_cast<std::size_t>(i + shape[0] * (j + shape[1] * k))]));
              CHECK(close_c(s02[static_cast<std::size_t>(j)], w, 1e-5, 1e-4));
            }
          }
        }
      }
    }
  }
}

TEST_CASE_TEMPLATE("complex var and std: the mean of |x - mean|^2, real, whole and along dims", T, float, double) {
  for (const auto& ds : device_sets()) {
    for (auto [m, k] : {std::pair<index_t, index_t>{1, 1}, {7, 3}, {257, 5}, {1000, 33}}) {
      INFO(set_name(ds) << ", " << m << " x " << k);
      const auto n = static_cast<std::size_t>(m * k);
      const auto v = random_complex<T>(n);
      const Array<complex<T>, 2> a = from_host(v, {m, k}, shard(1, ds));
      // Whole array.
      sc<double> mean = 0;
      for (const auto& z : v) mean += sc<double>(ref(z));
      mean /= double(n);
      double ss = 0;
      for (const auto& z : v) ss += std::norm(sc<double>(ref(z)) - mean);
      const auto whole = var(a);
      static_assert(std::is_same_v<decltype(whole), const T>);
      if (n > 1) {
        CHECK(double(whole) == doctest::Approx(ss / double(n - 1)).epsilon(1e-5));
      } else {
        CHECK(std::isnan(double(whole)));
      }
      CHECK(double(var(a, false)) == doctest::Approx(ss / double(n)).epsilon(1e-5));
      CHECK(double(stddev(a, false)) == doctest::Approx(std::sqrt(ss / double(n))).epsilon(1e-5));
      // Along dims(0): one variance per column.
      const Array<T, 2> cols = var(a, dims(0), false);
      std::vector<double> want(static_cast<std::size_t>(k));
      for (index_t j = 0; j < k; ++j) {
        sc<double> cm = 0;
        for (index_t i = 0; i < m; ++i) cm += sc<double>(ref(v[static_cast<std::size_t>(i + j * m)]));
        cm /= double(m);
        double cs = 0;
        for (index_t i = 0; i < m; ++i) cs += std::norm(sc<double>(ref(v[static_cast<std::size_t>(i + j * m)])) - cm);
        want[static_cast<std::size_t>(j)] = cs / double(m);
      }
      check_values(to_host(cols), want, 1e-5, 1e-6, "var(a, dims(0), false)");
    }
  }
}

// NVIDIA/MatX#1242: sum(abs2(d), dims(2)) of a 5000 x 400 x 5 complex<float> array. abs2 gives
// float, so this is a real reduction over the last (shard) dim; full size on GPUs, a tenth of each
// of the first two dims on host devices.
TEST_CASE("MatX#1242: sum(abs2(d), dims(2)) of a complex<float> array") {
  const bool gpu = cuda_variant();
  const index_t n0 = gpu ? 5000 : 500, n1 = gpu ? 400 : 40, n2 = 5;
  for (const auto& ds : device_sets()) {
    const auto n = static_cast<std::size_t>(n0 * n1 * n2);
    const auto dv = random_complex<float>(n);
    std::vector<double> want(static_cast<std::size_t>(n0 * n1), 0.0);
    for (index_t k = 0; k < n2; ++k)
      for (std::size_t o = 0; o < want.size(); ++o) want[o] += std::norm(sc<double>(ref(dv[o + want.size() * static_cast<std::size_t>(k)])));
    for (const auto& p : {shard(2, ds), shard(0, ds), on(ds.back())}) {
      INFO("device set " << set_name(ds) << ", " << n0 << "x" << n1 << "x" << n2);
      const auto d = from_host(dv, {n0, n1, n2}, p);
      const auto s = sum(abs2(d), dims(2));
      static_assert(std::is_same_v<decltype(s), const Array<float, 3>>);
      CHECK(s.shape() == Shape<3>{n0, n1, 1});
      check_c(to_host(s), want, 1e-5, 1e-5, "sum(abs2(d), dims(2))");
    }
  }
}
