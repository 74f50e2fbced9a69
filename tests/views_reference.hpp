// SPDX-License-Identifier: Apache-2.0
// The plain-loop reference for views, shared by the views test files: an index as data (Spec),
// the source elements a view reads (Mapping), what a test observes of a view (Seen), views built
// from data at compile-time-known index kinds, and the devices a view must live on.
#pragma once
#include "test_support.hpp"

#include <algorithm>
#include <array>
#include <cstddef>
#include <random>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

namespace tessera_test {

// -- host reference ----------------------------------------------------------------------------
enum class K { all, rng, integer };

// One index of a view, as data: `_`, range(first, last, step) or the integer `first`.
struct Spec {
  K kind = K::all;
  index_t first = 0, last = 0, step = 1;
};

inline std::string spec_string(const std::vector<Spec>& s) {
  std::string out = "(";
  for (std::size_t k = 0; k < s.size(); ++k) {
    if (k) out += ", ";
    if (s[k].kind == K::all) out += "_";
    else if (s[k].kind == K::integer) out += std::to_string(s[k].first);
    else out += "range(" + std::to_string(s[k].first) + "," + std::to_string(s[k].last) + "," + std::to_string(s[k].step) + ")";
  }
  return out + ")";
}

// The source positions one index selects along a dimension of size n (plain loop).
inline std::vector<index_t> positions(const Spec& s, index_t n) {
  std::vector<index_t> p;
  if (s.kind == K::all) {
    for (index_t i = 0; i < n; ++i) p.push_back(i);
  } else if (s.kind == K::integer) {
    p.push_back(s.first);
  } else if (s.step > 0) {
    for (index_t i = s.first; i < s.last; i += s.step) p.push_back(i);
  } else {
    for (index_t i = s.first; i > s.last; i += s.step) p.push_back(i);
  }
  return p;
}

// What a view reads: its shape (dropped dimensions removed) and, for each of its elements in
// column-major order, the column-major linear index of the source element.
struct Mapping {
  std::vector<index_t> shape;
  std::vector<index_t> src;
};

inline Mapping map_view(const std::vector<index_t>& shape, const std::vector<Spec>& specs) {
  const std::size_t n = shape.size();
  std::vector<std::vector<index_t>> pos(n);
  std::vector<index_t> stride(n);
  Mapping m;
  index_t total = 1, acc = 1;
  for (std::size_t k = 0; k < n; ++k) {
    pos[k] = positions(specs[k], shape[k]);
    stride[k] = acc;
    acc *= shape[k];
    total *= static_cast<index_t>(pos[k].size());
    if (specs[k].kind != K::integer) m.shape.push_back(static_cast<index_t>(pos[k].size()));
  }
  m.src.reserve(static_cast<std::size_t>(total));
  if (total == 0) return m;
  std::vector<std::size_t> c(n, 0);
  for (index_t i = 0; i < total; ++i) {
    index_t lin = 0;
    for (std::size_t k = 0; k < n; ++k) lin += pos[k][c[k]] * stride[k];
    m.src.push_back(lin);
    for (std::size_t k = 0; k < n; ++k) {
      if (++c[k] < pos[k].size()) break;
      c[k] = 0;
    }
  }
  return m;
}

// A view of a view: `outer` selects elements of the view described by `inner`.
inline Mapping compose(const Mapping& inner, const Mapping& outer) {
  Mapping m{outer.shape, {}};
  m.src.reserve(outer.src.size());
  for (index_t j : outer.src) m.src.push_back(inner.src[static_cast<std::size_t>(j)]);
  return m;
}

template <class T>
std::vector<T> gather(const std::vector<T>& src, const Mapping& m) {
  std::vector<T> out;
  out.reserve(m.src.size());
  for (index_t j : m.src) out.push_back(src[static_cast<std::size_t>(j)]);
  return out;
}

// What a test observes of an array or a view, with the element type kept and the rank erased,
// so that the checks are compiled once per element type rather than once per view type.
template <class T>
struct Seen {
  std::vector<index_t> shape;
  std::vector<T> values;            // to_host
  std::vector<std::size_t> at_lin;  // sampled column-major positions...
  std::vector<T> at_values;         // ...and what at() returned there
  DeviceSet devices;
  int shard_dim = -1;
  bool replicated = false;
  index_t length = 0;
};

template <class V>
Seen<typename V::value_type> see(const V& v) {
  constexpr int M = V::rank;
  Seen<typename V::value_type> s;
  s.shape.assign(v.shape().begin(), v.shape().end());
  s.values = to_host(v);
  s.devices = v.devices();
  s.shard_dim = v.shard_dim();
  s.replicated = v.is_replicated();
  s.length = v.length();
  const std::size_t n = s.values.size();
  if (n == 0) return s;
  s.at_lin = {0, n - 1};
  std::uniform_int_distribution<std::size_t> pick(0, n - 1);
  for (int i = 0; i < 6; ++i) s.at_lin.push_back(pick(rng()));
  for (std::size_t lin : s.at_lin) {
    std::array<index_t, static_cast<std::size_t>(M)> idx{};
    std::size_t r = lin;
    for (int k = 0; k < M; ++k) {
      idx[static_cast<std::size_t>(k)] = static_cast<index_t>(r % static_cast<std::size_t>(s.shape[k]));
      r /= static_cast<std::size_t>(s.shape[static_cast<std::size_t>(k)]);
    }
    s.at_values.push_back(std::apply([&](auto... i) { return v.at(i...); }, idx));
  }
  return s;
}

// Checks a view's shape, its elements through to_host and a sample of them through at().
template <class T>
void check_seen(const Seen<T>& s, const std::vector<T>& src, const Mapping& m) {
  CHECK(s.shape == m.shape);
  CHECK(s.length == static_cast<index_t>(m.src.size()));
  const std::vector<T> want = gather(src, m);
  check_equal(s.values, want);
  for (std::size_t i = 0; i < s.at_lin.size() && !want.empty(); ++i) {
    INFO("at() of view element " << s.at_lin[i]);
    CHECK(static_cast<double>(s.at_values[i]) == static_cast<double>(want[s.at_lin[i]]));
  }
}

template <class V, class T>
void check_view(const V& v, const std::vector<T>& src, const Mapping& m) {
  check_seen(see(v), src, m);
}

// A random index of the given kind for a dimension of size n.
inline Spec random_spec(K kind, index_t n) {
  auto& g = rng();
  auto uni = [&](index_t lo, index_t hi) { return std::uniform_int_distribution<index_t>(lo, hi)(g); };
  if (kind == K::all) return {K::all};
  if (kind == K::integer) return {K::integer, n > 0 ? uni(0, n - 1) : 0, 0, 1};
  switch (uni(0, 6)) {
    case 0:
      return {K::rng, 0, n, 1};  // the full range
    case 1: {
      const index_t f = uni(0, n), l = uni(f, n);
      return {K::rng, f, l, 1};
    }
    case 2: {
      const index_t f = uni(0, n), l = uni(f, n);
      return {K::rng, f, l, uni(2, 5)};
    }
    case 3: {
      if (n == 0) return {K::rng, 0, 0, -1};
      const index_t f = uni(0, n - 1), l = uni(-1, f);
      return {K::rng, f, l, -1};
    }
    case 4: {
      if (n == 0) return {K::rng, 0, 0, -2};
      const index_t f = uni(0, n - 1), l = uni(-1, f);
      return {K::rng, f, l, -uni(2, 4)};
    }
    case 5: {
      return {K::rng, n - 1, -1, -1};  // the full range reversed (range(-1, -1, -1) when n == 0)
    }
    default: {
      // Empty: first == last, or first past last for a positive step (and the reverse).
      const index_t f = uni(0, n), l = uni(0, f);
      return uni(0, 1) ? Spec{K::rng, l, f, -1} : Spec{K::rng, f, l, uni(1, 3)};
    }
  }
}

// -- building views from data at compile-time-known index kinds ---------------------------------
template <K k>
auto make_index(const Spec& s) {
  if constexpr (k == K::all) return _;
  else if constexpr (k == K::rng) return range(s.first, s.last, s.step);
  else return s.first;
}

template <K... ks, class A, std::size_t... I>
auto apply_view(const A& a, const std::vector<Spec>& s, std::index_sequence<I...>) {
  return a(make_index<ks>(s[I])...);
}

template <K... ks, class A>
auto view_of(const A& a, const std::vector<Spec>& s) {
  return apply_view<ks...>(a, s, std::index_sequence_for<decltype(ks)...>{});
}

// Calls f.template operator()<ks...>() for every one of the 3^N index-kind patterns.
template <int N, K... ks, class F>
void for_each_pattern(F&& f) {
  if constexpr (static_cast<int>(sizeof...(ks)) == N) {
    f.template operator()<ks...>();
  } else {
    for_each_pattern<N, ks..., K::all>(f);
    for_each_pattern<N, ks..., K::rng>(f);
    for_each_pattern<N, ks..., K::integer>(f);
  }
}

// The devices a view must live on: those whose block of the source's shard dimension holds one
// of the view's positions (in device-set order); every device for a replicated source.
template <class A>
DeviceSet expected_devices(const A& a, const std::vector<Spec>& specs) {
  const auto& l = a.layout();
  if (l.replicated || l.shard_dim < 0) return a.devices();
  const int d = l.shard_dim;
  const auto pos = positions(specs[static_cast<std::size_t>(d)], l.shape[d]);
  DeviceSet out;
  for (auto& p : l.parts) {
    const index_t lo = p.origin[d], hi = lo + p.extent[d];
    if (std::any_of(pos.begin(), pos.end(), [&](index_t i) { return lo <= i && i < hi; })) out.push_back(p.device);
  }
  return out;
}

// The view of one index pattern, built from data (the only code instantiated per pattern).
template <class T, int N, int M, class Src = Array<T, N>>
using view_fn = View<T, M> (*)(const Src&, const std::vector<Spec>&);

}  // namespace tessera_test
