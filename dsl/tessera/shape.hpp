// SPDX-License-Identifier: Apache-2.0
// Tessera: shapes, Julia's broadcast rule, column-major strides.
#pragma once
#include <tessera/config.hpp>
#include <tessera/error.hpp>

#include <backend/plan/plan.hpp>

#include <array>
#include <cstddef>
#include <string>

namespace tessera {

template <int N>
using Shape = std::array<index_t, static_cast<std::size_t>(N)>;

namespace detail {

template <int N>
std::string shape_string(const Shape<N>& s) {
  return shape_text(s.data(), N);
}

template <int N>
index_t volume(const Shape<N>& s) {
  index_t v = 1;
  for (int k = 0; k < N; ++k) v *= s[k];
  return v;
}

template <int N>
Shape<N> column_major_strides(const Shape<N>& s) {
  Shape<N> st{};
  index_t acc = 1;
  for (int k = 0; k < N; ++k) {
    st[k] = acc;
    acc *= s[k];
  }
  return st;
}

// Size of dimension k, with missing trailing dimensions counting as 1 (Julia).
template <int N>
index_t extent_or_one(const Shape<N>& s, int k) {
  return k < N ? s[k] : 1;
}

// Julia's combine_axes, one operand at a time: shapes align from the first dimension, a size-1
// dimension stretches, anything else is a DimensionMismatch naming both shapes and the dimension.
// Folds one more operand shape `b` into `acc`, whose first `acc_rank` dimensions are those of
// the operands folded so far; error messages print the operands' own ranks.
template <int R, int M>
Shape<R> broadcast_into(const Shape<R>& acc, int acc_rank, const Shape<M>& b) {
  Shape<R> out = acc;
  for (int k = 0; k < R; ++k) {
    const index_t x = acc[k], y = extent_or_one<M>(b, k);
    if (x == y || y == 1) continue;
    if (x == 1) {
      out[k] = y;
      continue;
    }
    throw_broadcast_mismatch(acc.data(), acc_rank, b.data(), M, k, x, y);
  }
  return out;
}

// The source of an assignment must broadcast to the destination's shape without growing it.
template <int N, int M>
void check_assignable(const Shape<N>& dst, const Shape<M>& src) {
  constexpr int R = N > M ? N : M;
  for (int k = 0; k < R; ++k) {
    const index_t d = extent_or_one<N>(dst, k), s = extent_or_one<M>(src, k);
    if (s != d && s != 1) throw_assign_mismatch(dst.data(), N, src.data(), M, k);
  }
}

}  // namespace detail
}  // namespace tessera
