// SPDX-License-Identifier: Apache-2.0
// Plain-loop references for the shape functions (test_reshape.cpp, test_concat.cpp): column-major
// index arithmetic on shapes given as data, permuted, concatenated and tiled host vectors.
#pragma once
#include "test_support.hpp"

#include <string>
#include <vector>

namespace tessera_test {

inline Dims unravel(index_t i, const Dims& shape) {
  Dims idx(shape.size());
  for (std::size_t k = 0; k < shape.size(); ++k) {
    idx[k] = i % shape[k];
    i /= shape[k];
  }
  return idx;
}

inline index_t ravel(const Dims& idx, const Dims& shape) {
  index_t i = 0, acc = 1;
  for (std::size_t k = 0; k < shape.size(); ++k) {
    i += idx[k] * acc;
    acc *= shape[k];
  }
  return i;
}

inline std::string perm_string(const std::vector<int>& p) {
  std::string s = "{";
  for (std::size_t k = 0; k < p.size(); ++k) s += (k ? "," : "") + std::to_string(p[k]);
  return s + "}";
}

// out[j...] = v[i...] with i[perm[j]] = j-th index (Julia's permutedims).
template <class T>
std::vector<T> permute_ref(const std::vector<T>& v, const Dims& shape, const std::vector<int>& perm) {
  Dims out_shape(perm.size());
  for (std::size_t j = 0; j < perm.size(); ++j) out_shape[j] = shape[static_cast<std::size_t>(perm[j])];
  std::vector<T> out(v.size());
  Dims src(shape.size());
  for (index_t i = 0; i < static_cast<index_t>(v.size()); ++i) {
    const Dims idx = unravel(i, out_shape);
    for (std::size_t j = 0; j < perm.size(); ++j) src[static_cast<std::size_t>(perm[j])] = idx[j];
    out[static_cast<std::size_t>(i)] = v[static_cast<std::size_t>(ravel(src, shape))];
  }
  return out;
}

// Operands (values, shape of the result's rank) concatenated along dim; `shape` gets the result's.
template <class T>
std::vector<T> cat_ref(const std::vector<std::vector<T>>& vs, const std::vector<Dims>& shapes, std::size_t dim,
                       Dims& shape) {
  shape = shapes[0];
  shape[dim] = 0;
  for (auto& s : shapes) shape[dim] += s[dim];
  std::vector<T> out(static_cast<std::size_t>(volume(shape)));
  for (index_t i = 0; i < static_cast<index_t>(out.size()); ++i) {
    Dims idx = unravel(i, shape);
    std::size_t op = 0;
    while (idx[dim] >= shapes[op][dim]) idx[dim] -= shapes[op++][dim];
    out[static_cast<std::size_t>(i)] = vs[op][static_cast<std::size_t>(ravel(idx, shapes[op]))];
  }
  return out;
}

// v (of `shape`, padded with 1s to the rank of counts) tiled counts[k] times along each dim.
template <class T>
std::vector<T> repeat_ref(const std::vector<T>& v, Dims shape, const Dims& counts, Dims& out_shape) {
  shape.resize(std::max(shape.size(), counts.size()), 1);
  out_shape = shape;
  for (std::size_t k = 0; k < counts.size(); ++k) out_shape[k] *= counts[k];
  std::vector<T> out(static_cast<std::size_t>(volume(out_shape)));
  for (index_t i = 0; i < static_cast<index_t>(out.size()); ++i) {
    Dims idx = unravel(i, out_shape);
    for (std::size_t k = 0; k < idx.size(); ++k) idx[k] %= shape[k];
    out[static_cast<std::size_t>(i)] = v[static_cast<std::size_t>(ravel(idx, shape))];
  }
  return out;
}

// The placement string a new array of `shape` gets from placement p (what "follows the first
// operand" promises).
template <int N>
std::string placement_of_new(const Shape<N>& shape, const Placement& p) {
  return Array<float, N>(shape, p).placement_string();
}

}  // namespace tessera_test
