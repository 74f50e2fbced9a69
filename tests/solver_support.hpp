// SPDX-License-Identifier: Apache-2.0
// Helpers of the dense-solver tests: random matrices with known properties, host products in
// double, and the placements a matrix takes.
#pragma once
#include "test_support.hpp"

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

namespace solver_test {

using namespace tessera_test;

// A host matrix in column-major order, in double.
struct Mat {
  index_t rows = 0, cols = 0;
  std::vector<double> v;
  double& operator()(index_t i, index_t j) { return v[static_cast<std::size_t>(i + j * rows)]; }
  double operator()(index_t i, index_t j) const { return v[static_cast<std::size_t>(i + j * rows)]; }
};

inline Mat zeros_mat(index_t r, index_t c) { return {r, c, std::vector<double>(static_cast<std::size_t>(r * c), 0.0)}; }

inline Mat random_mat(index_t r, index_t c) {
  return {r, c, random_values<double>(static_cast<std::size_t>(r * c), -1.0, 1.0)};
}

inline Mat product(const Mat& a, const Mat& b) {
  Mat c = zeros_mat(a.rows, b.cols);
  for (index_t j = 0; j < b.cols; ++j)
    for (index_t p = 0; p < a.cols; ++p)
      for (index_t i = 0; i < a.rows; ++i) c(i, j) += a(i, p) * b(p, j);
  return c;
}

inline Mat transposed(const Mat& a) {
  Mat t = zeros_mat(a.cols, a.rows);
  for (index_t j = 0; j < a.cols; ++j)
    for (index_t i = 0; i < a.rows; ++i) t(j, i) = a(i, j);
  return t;
}

inline Mat identity(index_t n) {
  Mat e = zeros_mat(n, n);
  for (index_t i = 0; i < n; ++i) e(i, i) = 1.0;
  return e;
}

// Diagonally dominant: well conditioned, so residuals test the solver, not the matrix.
inline Mat well_conditioned(index_t n) {
  Mat a = random_mat(n, n);
  for (index_t i = 0; i < n; ++i) a(i, i) += static_cast<double>(n) + 1.0;
  return a;
}

// Symmetric positive definite: M M' + n I.
inline Mat spd(index_t n) {
  Mat m = random_mat(n, n);
  Mat a = product(m, transposed(m));
  for (index_t i = 0; i < n; ++i) a(i, i) += static_cast<double>(n);
  return a;
}

inline Mat symmetric(index_t n) {
  Mat m = random_mat(n, n);
  Mat a = zeros_mat(n, n);
  for (index_t j = 0; j < n; ++j)
    for (index_t i = 0; i < n; ++i) a(i, j) = m(i, j) + m(j, i);
  return a;
}

inline double max_abs(const Mat& a) {
  double m = 0;
  for (double x : a.v) m = std::max(m, std::fabs(x));
  return m;
}

// max |a - b| / max(1, max |b|): relative to the size of the expected values.
inline double rel_diff(const Mat& a, const Mat& b) {
  REQUIRE(a.rows == b.rows);
  REQUIRE(a.cols == b.cols);
  double d = 0;
  for (std::size_t i = 0; i < a.v.size(); ++i) d = std::max(d, std::fabs(a.v[i] - b.v[i]));
  return d / std::max(1.0, max_abs(b));
}

template <class T>
double tol(index_t n = 1) {
  return (std::is_same_v<T, float> ? 2e-5 : 1e-12) * static_cast<double>(std::max<index_t>(n, 8));
}

// Device arrays from a host matrix and back.
template <class T>
Array<T, 2> put_mat(const Mat& m, const Placement& p) {
  std::vector<T> v(m.v.begin(), m.v.end());
  return from_host(v, {m.rows, m.cols}, p);
}
template <class T>
Array<T, 1> put_vec(const std::vector<double>& x, const Placement& p) {
  std::vector<T> v(x.begin(), x.end());
  return from_host(v, {static_cast<index_t>(x.size())}, p);
}
template <class X>
Mat get_mat(const X& a) {
  const auto h = to_host(a);
  const auto& s = a.layout().shape;
  return {s[0], s[1], std::vector<double>(h.begin(), h.end())};
}
template <class X>
std::vector<double> get_vec(const X& a) {
  const auto h = to_host(a);
  return {h.begin(), h.end()};
}

// The placements of a whole matrix on a device set: on its last device, replicated.
inline std::vector<std::pair<std::string, Placement>> matrix_placements(const DeviceSet& ds) {
  return {{"on(last)", on(ds.back())}, {"replicate", replicate(ds)}};
}

// Sizes: empty, one, odd, powers of two +-1, and a larger one.
inline std::vector<index_t> solver_sizes() { return {0, 1, 2, 3, 7, 31, 32, 33, 130}; }

// Checks that `body` throws E whose message holds every one of `parts`.
template <class E, class F>
void check_throws_naming(F&& body, std::initializer_list<const char*> parts) {
  bool thrown = false;
  try {
    body();
  } catch (const E& e) {
    thrown = true;
    const std::string what = e.what();
    for (const char* p : parts) {
      INFO("message: " << what);
      CHECK(what.find(p) != std::string::npos);
    }
  }
  CHECK(thrown);
}

}  // namespace solver_test
