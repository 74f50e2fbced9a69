// SPDX-License-Identifier: Apache-2.0
// The plain-loop reference for reductions along dims, shared by the dims test files.
#pragma once
#include "test_support.hpp"

#include <array>
#include <vector>

namespace tessera_test {

// Reference: folds `f(value)` of a column-major rank-R array over the masked dims, in double.
template <int R, class T, class F, class Op>
std::vector<double> fold(const std::vector<T>& v, const tessera::Shape<R>& s, const std::array<bool, R>& mask, double init, F f,
                         Op op) {
  tessera::Shape<R> o = s;
  for (int k = 0; k < R; ++k)
    if (mask[k]) o[k] = 1;
  tessera::index_t on = 1;
  for (int k = 0; k < R; ++k) on *= o[k];
  std::vector<double> out(static_cast<std::size_t>(on), init);
  tessera::index_t n = 1;
  for (int k = 0; k < R; ++k) n *= s[k];
  for (tessera::index_t i = 0; i < n; ++i) {
    tessera::index_t r = i, oi = 0, stride = 1;
    for (int k = 0; k < R; ++k) {
      const tessera::index_t ik = r % s[k];
      r /= s[k];
      oi += (mask[k] ? 0 : ik) * stride;
      stride *= o[k];
    }
    out[static_cast<std::size_t>(oi)] = op(out[static_cast<std::size_t>(oi)], f(static_cast<double>(v[static_cast<std::size_t>(i)])));
  }
  return out;
}

template <int R>
tessera::ReduceDims to_dims(const std::array<bool, R>& m) {
  tessera::ReduceDims d{{}, 0};
  for (int k = 0; k < R; ++k)
    if (m[k]) d.d[d.count++] = k;
  return d;
}

}  // namespace tessera_test
