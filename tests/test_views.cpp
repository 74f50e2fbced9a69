// SPDX-License-Identifier: Apache-2.0
// Views: every index form (_, range(first, last), range(first, last, step) with positive and
// negative steps, empty ranges, integers) on ranks 1..4, rank dropping, views of sharded,
// replicated and single-device arrays (crossing shard boundaries, inside one shard, dropping the
// shard dimension), views of views, assignment into views, views as operands, eval/copy of views,
// out-of-bounds errors, and views keeping storage alive. Every result is compared against a
// plain-loop host reference on fresh random data.
#include "test_support.hpp"

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <numeric>
#include <random>
#include <span>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

using namespace tessera;
using namespace tessera_test;

namespace {

// -- host reference ----------------------------------------------------------------------------
enum class K { all, rng, integer };

// One index of a view, as data: `_`, range(first, last, step) or the integer `first`.
struct Spec {
  K kind = K::all;
  index_t first = 0, last = 0, step = 1;
};

std::string spec_string(const std::vector<Spec>& s) {
  std::string out = "(";
  for (std::size_t k = 0; k < s.size(); ++k) {
    if (k) out += ", ";
    if (s[k].kind == K::all) out += "_";
    else if (s[k].kind == K::integer) out += std::to_string(s[k].first);
    else out += "range(" + std::to_string(s[k].first) + "," + std::to_string(s[k].last) + "," + std::to_string(s[k].step) + ")";
  }
  return out + ")";
}

std::string dims_string(const std::vector<index_t>& s) {
  std::string out = "{";
  for (std::size_t k = 0; k < s.size(); ++k) out += (k ? "," : "") + std::to_string(s[k]);
  return out + "}";
}

// The source positions one index selects along a dimension of size n (plain loop).
std::vector<index_t> positions(const Spec& s, index_t n) {
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

Mapping map_view(const std::vector<index_t>& shape, const std::vector<Spec>& specs) {
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
Mapping compose(const Mapping& inner, const Mapping& outer) {
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

// Exact comparison (views copy elements: no rounding), reporting the first mismatch.
template <class T>
void check_equal(const std::vector<T>& got, const std::vector<T>& want) {
  REQUIRE(got.size() == want.size());
  for (std::size_t i = 0; i < got.size(); ++i) {
    if (!(got[i] == want[i])) {
      FAIL_CHECK("element " << i << ": got " << static_cast<double>(got[i]) << ", expected "
                            << static_cast<double>(want[i]));
      return;
    }
  }
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
Spec random_spec(K kind, index_t n) {
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

// The patterns a test of rank N runs: all 3^N up to rank 3; on rank 4, an orthogonal array L9(3^4)
// (every pair of dimensions sees every pair of index kinds) plus all ranges and all integers.
template <int N, class F>
void patterns(F&& f) {
  if constexpr (N < 4) {
    for_each_pattern<N>(f);
  } else {
    static_assert(N == 4);
    constexpr K A = K::all, R = K::rng, I = K::integer;
    f.template operator()<A, A, A, A>();
    f.template operator()<A, R, R, R>();
    f.template operator()<A, I, I, I>();
    f.template operator()<R, A, R, I>();
    f.template operator()<R, R, I, A>();
    f.template operator()<R, I, A, R>();
    f.template operator()<I, A, I, R>();
    f.template operator()<I, R, A, I>();
    f.template operator()<I, I, R, A>();
    f.template operator()<R, R, R, R>();
    f.template operator()<I, I, I, I>();
  }
}

template <class T, int N>
Array<T, N> make(const std::vector<T>& v, const std::vector<index_t>& shape, const Placement& p) {
  Shape<N> s{};
  for (int k = 0; k < N; ++k) s[k] = shape[k];
  return from_host<T, static_cast<std::size_t>(N)>(std::span<const T>(v), s, p);
}

struct NamedPlacement {
  std::string name;
  Placement p;
};

std::vector<NamedPlacement> placements(int rank, const DeviceSet& set, bool all = true) {
  std::vector<NamedPlacement> out;
  for (int d = all ? 0 : rank - 1; d < rank; ++d) out.push_back({"shard(" + std::to_string(d) + ")", shard(d, set)});
  if (all) {
    out.push_back({"replicate", replicate(set)});
    out.push_back({"on(" + set.back().name() + ")", on(set.back())});
  }
  return out;
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

// The blocks of a sharded array must be contiguous, balanced, in device order and cover it.
template <class A>
void check_balanced_blocks(const A& a, const DeviceSet& set) {
  const auto& l = a.layout();
  REQUIRE(l.shard_dim >= 0);
  REQUIRE(l.parts.size() == set.size());
  const index_t n = l.shape[l.shard_dim];
  index_t next = 0, mn = n, mx = 0;
  for (std::size_t i = 0; i < set.size(); ++i) {
    CHECK(l.parts[i].device == set[i]);
    CHECK(l.parts[i].origin[l.shard_dim] == next);
    next += l.parts[i].extent[l.shard_dim];
    mn = std::min(mn, l.parts[i].extent[l.shard_dim]);
    mx = std::max(mx, l.parts[i].extent[l.shard_dim]);
  }
  CHECK(next == n);
  CHECK(mx - mn <= 1);
}

// The values of an array: to_host, then (replicated) every replica read through host_data, as
// to_host reads only one of them.
template <class T, int N>
std::vector<std::vector<T>> snapshot(const Array<T, N>& a) {
  std::vector<std::vector<T>> out{to_host(a)};
  const std::size_t n = out[0].size();
  if (!a.is_replicated() || n == 0) return out;
  for (int s = 0; s < static_cast<int>(a.layout().parts.size()); ++s) {
    const T* p = a.host_data(s);
    out.push_back(p ? std::vector<T>(p, p + n) : std::vector<T>{});
  }
  return out;
}

template <class T>
void check_snapshot(const std::vector<std::vector<T>>& snap, const std::vector<T>& want) {
  for (std::size_t s = 0; s < snap.size(); ++s) {
    INFO((s == 0 ? std::string("to_host") : "replica " + std::to_string(s - 1)));
    check_equal(snap[s], want);
  }
}

template <class T, int N>
void check_replicas(const Array<T, N>& a, const std::vector<T>& want) {
  check_snapshot(snapshot(a), want);
}

bool throws_out_of_bounds(const std::function<void()>& f) {
  try {
    f();
  } catch (const out_of_bounds&) {
    return true;
  } catch (...) {
    return false;
  }
  return false;
}

// The placement an owning array of the view's shape needs to be combined with the view, when
// one exists with balanced blocks: replicated, single device, or sharded along a `_` dimension.
bool matching_placement(const DeviceSet& devs, bool replicated, int shard_dim, K shard_kind, Placement& out) {
  if (replicated) {
    out = replicate(devs);
    return true;
  }
  if (shard_dim < 0) {
    if (devs.size() != 1) return false;
    out = on(devs[0]);
    return true;
  }
  if (shard_kind != K::all) return false;
  out = shard(shard_dim, devs);
  return true;
}

// The view of one index pattern, built from data (the only code instantiated per pattern).
template <class T, int N, int M, class Src = Array<T, N>>
using view_fn = View<T, M> (*)(const Src&, const std::vector<Spec>&);

template <class T, int N>
struct PatternData {
  std::vector<index_t> shape;
  std::vector<T> ha, hb;
  Array<T, N> a, b;
  int draws;
  bool writes;
};

// Checks of the values and placement of one view against the reference (once per T).
template <class T>
void check_read(const Seen<T>& seen, const std::vector<T>& ha, const Mapping& m, const DeviceSet& want_devs,
                bool src_replicated, int want_shard_dim) {
  check_seen(seen, ha, m);
  if (m.src.empty()) return;
  CHECK(seen.devices == want_devs);
  CHECK(seen.replicated == src_replicated);
  CHECK(seen.shard_dim == (src_replicated || want_devs.size() <= 1 ? -1 : want_shard_dim));
}

// The writes of one pattern, recorded as snapshots of the destination array after each step.
template <class T>
struct WriteLog {
  std::vector<std::vector<T>> after_copy, after_sum, after_mix, after_fill;
  std::vector<T> mixed, hw;  // eval(view + w) and w's values, when a matching placement exists
  std::string w_placement;
  DeviceSet mixed_devices;
};

template <class T>
void check_writes(const WriteLog<T>& log, const std::vector<T>& ha, const std::vector<T>& hb, const Mapping& m,
                  const DeviceSet& view_devices, const std::vector<T>& a_after) {
  std::vector<T> ref = ha;
  for (index_t j : m.src) ref[j] = hb[j];
  {
    INFO("after c(...) = b(...)");
    check_snapshot(log.after_copy, ref);
  }
  for (index_t j : m.src) ref[j] = static_cast<T>(static_cast<T>(hb[j] + hb[j]) + hb[j]);
  {
    INFO("after c(...) = b(...) + b(...); c(...) += b(...)");
    check_snapshot(log.after_sum, ref);
  }
  if (!log.hw.empty()) {
    INFO("view mixed with an array of placement " << log.w_placement);
    std::vector<T> rw(m.src.size());
    for (std::size_t i = 0; i < rw.size(); ++i) rw[i] = static_cast<T>(ref[m.src[i]] + log.hw[i]);
    check_equal(log.mixed, rw);
    CHECK(log.mixed_devices == view_devices);  // eval(view + w) takes the view's placement
    for (std::size_t i = 0; i < m.src.size(); ++i) ref[m.src[i]] = rw[i];
    check_snapshot(log.after_mix, ref);
  }
  for (index_t j : m.src) ref[j] = T(3);
  {
    INFO("after c(...) = 3");
    check_snapshot(log.after_fill, ref);
  }
  check_equal(a_after, ha);  // the source of the copy is untouched
}

// One pattern, instantiated per (T, N, M) only. Every expression written here has the same few
// node types (a leaf, a sum of two leaves, a scalar), shared by all patterns of a rank.
template <class T, int N, int M>
void pattern_body(const PatternData<T, N>& d, const std::vector<K>& kinds, view_fn<T, N, M> view) {
  for (int draw = 0; draw < d.draws; ++draw) {
    std::vector<Spec> specs;
    bool impossible = false;
    for (std::size_t k = 0; k < kinds.size(); ++k) {
      specs.push_back(random_spec(kinds[k], d.shape[k]));
      impossible = impossible || (kinds[k] == K::integer && d.shape[k] == 0);
    }
    INFO("view a" << spec_string(specs));
    if (impossible) {
      // An integer index into an empty dimension is out of bounds.
      CHECK(throws_out_of_bounds([&] { (void)view(d.a, specs); }));
      return;
    }
    const Mapping m = map_view(d.shape, specs);
    int vshard = -1;  // the source's shard dimension in the view (-1: dropped, or none)
    K shard_kind = K::all;
    if (d.a.shard_dim() >= 0) {
      shard_kind = specs[static_cast<std::size_t>(d.a.shard_dim())].kind;
      vshard = 0;
      for (int k = 0; k < d.a.shard_dim(); ++k) vshard += specs[static_cast<std::size_t>(k)].kind != K::integer;
      if (shard_kind == K::integer) vshard = -1;
    }
    const auto v = view(d.a, specs);
    check_read(see(v), d.ha, m, expected_devices(d.a, specs), d.a.is_replicated(), vshard);
    if (!d.writes) continue;
    // Writes into a view of a copy c of a: v = another view, v = expr, v += view, v += owning
    // array of matching placement, v = scalar. Elements outside the view must be untouched.
    Array<T, N> c = d.a;
    auto cv = view(c, specs);
    const auto bv = view(d.b, specs);
    WriteLog<T> log;
    cv = bv;
    log.after_copy = snapshot(c);
    cv = bv + bv;
    cv += bv;
    log.after_sum = snapshot(c);
    Placement mp;
    if (!m.src.empty() && matching_placement(cv.devices(), cv.is_replicated(), cv.shard_dim(), shard_kind, mp)) {
      log.hw = random_values<T>(m.src.size());
      const Array<T, M> w = from_host<T, static_cast<std::size_t>(M)>(std::span<const T>(log.hw), cv.shape(), mp);
      log.w_placement = w.placement_string();
      const Array<T, M> r = eval(cv + w);
      log.mixed = to_host(r);
      log.mixed_devices = r.devices();
      cv += w;
      log.after_mix = snapshot(c);
    }
    cv = 3;
    log.after_fill = snapshot(c);
    check_writes(log, d.ha, d.hb, m, cv.devices(), to_host(d.a));
  }
}

// Reads, writes and mixes every index pattern of rank N on one array shape and placement.
template <class T, int N>
void run_patterns(const std::vector<index_t>& shape, const DeviceSet& set, const NamedPlacement& pl, int draws,
                  bool writes) {
  const std::size_t n = static_cast<std::size_t>(std::accumulate(shape.begin(), shape.end(), index_t(1),
                                                                 [](index_t x, index_t y) { return x * y; }));
  INFO("device set " << set_name(set) << ", " << pl.name << ", shape " << dims_string(shape));
  PatternData<T, N> d{shape, random_values<T>(n), random_values<T>(n), {}, {}, draws, writes};
  d.a = make<T, N>(d.ha, shape, pl.p);
  d.b = make<T, N>(d.hb, shape, pl.p);
  patterns<N>([&]<K... ks>() {
    constexpr int M = ((ks != K::integer ? 1 : 0) + ... + 0);
    static_assert(std::is_same_v<decltype(view_of<ks...>(d.a, {})), View<T, M>>, "an integer index drops its dimension");
    pattern_body<T, N, M>(d, {ks...}, [](const Array<T, N>& x, const std::vector<Spec>& s) { return view_of<ks...>(x, s); });
  });
}

template <int N>
std::vector<std::vector<index_t>> small_shapes();
template <>
std::vector<std::vector<index_t>> small_shapes<1>() {
  std::vector<std::vector<index_t>> out;
  for (index_t n : sweep_sizes())
    if (n < 100000) out.push_back({n});
  return out;
}
template <>
std::vector<std::vector<index_t>> small_shapes<2>() {
  return {{0, 3}, {1, 1}, {7, 5}, {5, 33}, {32, 3}, {3, 17}, {2, 0}};
}
template <>
std::vector<std::vector<index_t>> small_shapes<3>() {
  return {{3, 4, 5}, {2, 0, 3}, {7, 5, 9}, {1, 9, 2}, {4, 1, 3}};
}
template <>
std::vector<std::vector<index_t>> small_shapes<4>() {
  return {{2, 3, 4, 5}, {3, 1, 2, 7}, {0, 2, 2, 2}, {5, 4, 3, 9}};
}
template <int N>
std::vector<index_t> large_shape();
template <>
std::vector<index_t> large_shape<1>() {
  return {index_t(1) << 20};
}
template <>
std::vector<index_t> large_shape<2>() {
  return {1023, 1025};
}
template <>
std::vector<index_t> large_shape<3>() {
  return {101, 103, 97};
}
template <>
std::vector<index_t> large_shape<4>() {
  return {33, 31, 32, 31};
}

template <class T, int N>
void run_rank(int draws) {
  for (const auto& set : device_sets()) {
    for (const auto& shape : small_shapes<N>())
      for (const auto& pl : placements(N, set)) run_patterns<T, N>(shape, set, pl, draws, true);
    // One large array per device set, sharded along its last dimension; reads only.
    for (const auto& pl : placements(N, set, false)) run_patterns<T, N>(large_shape<N>(), set, pl, 1, N <= 2);
  }
}

}  // namespace

// -----------------------------------------------------------------------------------------------
// Element types other than float: views of int64 (replicated), bool and float arrays below.
TEST_CASE("views: every index form on rank 1") { run_rank<float, 1>(8); }
TEST_CASE("views: every index form on rank 2") { run_rank<float, 2>(5); }
TEST_CASE("views: every index form on rank 3") { run_rank<float, 3>(3); }
TEST_CASE("views: every index form on rank 4") { run_rank<float, 4>(4); }

TEST_CASE("views: an integer index drops its dimension") {
  using A3 = Array<float, 3>;
  const A3 a{};  // only used in unevaluated operands
  static_assert(std::is_same_v<decltype(a(_, _, 1)), View<float, 2>>);
  static_assert(std::is_same_v<decltype(a(_, 0, _)), View<float, 2>>);
  static_assert(std::is_same_v<decltype(a(1, _, 1)), View<float, 1>>);
  static_assert(std::is_same_v<decltype(a(1, 2, 1)), View<float, 0>>);
  static_assert(std::is_same_v<decltype(a(range(0, 1), _, range(2, 0, -1))), View<float, 3>>);
  static_assert(std::is_same_v<decltype(a(_, _, 1)(range(0, 2), 0)), View<float, 1>>);
  static_assert(std::is_same_v<decltype(Array<std::int64_t, 4>{}(_, 1, _, 2)), View<std::int64_t, 2>>);
  static_assert(std::is_same_v<decltype(eval(a(_, _, 1))), Array<float, 2>>);
  static_assert(std::is_same_v<decltype(copy(a(1, _, _))), Array<float, 2>>);

  for (const auto& set : device_sets()) {
    INFO("device set " << set_name(set));
    const index_t g = static_cast<index_t>(set.size());
    const auto h = random_values<float>(static_cast<std::size_t>(3 * 4 * (2 * g + 1)));
    const auto a3 = from_host(h, {3, 4, 2 * g + 1}, shard(2, set));
    for (index_t k = 0; k < 2 * g + 1; ++k) {
      auto v = a3(_, _, k);
      CHECK(v.shape() == Shape<2>{3, 4});
      CHECK(v.rank == 2);
      std::vector<float> want(h.begin() + 12 * k, h.begin() + 12 * (k + 1));
      check_equal(to_host(v), want);
      // A view that dropped the shard dimension lives on the device owning that slice.
      REQUIRE(v.devices().size() == 1);
      CHECK(v.shard_dim() == -1);
      CHECK_FALSE(v.is_replicated());
      CHECK(v.devices() == expected_devices(a3, {{K::all}, {K::all}, {K::integer, k}}));
    }
    // Integer indices of several integral types.
    CHECK(a3(1, 2, 0).at() == h[1 + 3 * 2]);
    CHECK(a3(short(1), std::uint8_t(2), 0L).at() == h[1 + 3 * 2]);
    CHECK(a3(std::size_t(2), 3u, std::int64_t(2 * g)).at() == h[2 + 3 * 3 + 12 * 2 * g]);
    CHECK(to_host(a3(1u, _, 1LL)) == std::vector<float>{h[12 + 1], h[12 + 4], h[12 + 7], h[12 + 10]});
  }
}

TEST_CASE("views of sharded arrays: crossing shard boundaries, inside one shard, dropping the shard dim") {
  for (const auto& set : device_sets()) {
    for (index_t n : sweep_sizes()) {
      INFO("device set " << set_name(set) << ", n = " << n);
      const auto h = random_values<float>(static_cast<std::size_t>(n));
      const auto a = from_host(h, {n}, shard(0, set));
      check_balanced_blocks(a, set);
      const auto& parts = a.layout().parts;
      // Crossing: drop a few elements at both ends.
      if (n >= 4) {
        const std::vector<Spec> s{{K::rng, 1, n - 2, 1}};
        auto v = a(range(1, n - 2));
        check_view(v, h, map_view({n}, s));
        CHECK(v.devices() == expected_devices(a, s));
        const std::vector<Spec> r{{K::rng, n - 2, 0, -3}};
        auto w = a(range(n - 2, 0, -3));
        check_view(w, h, map_view({n}, r));
        CHECK(w.devices() == expected_devices(a, r));
      }
      // Inside one shard (each shard in turn): on that device only.
      for (std::size_t i = 0; i < parts.size(); ++i) {
        const index_t lo = parts[i].origin[0], hi = lo + parts[i].extent[0];
        if (hi - lo < 1) continue;
        const index_t f = lo + (hi - lo > 2 ? 1 : 0);
        const std::vector<Spec> s{{K::rng, f, hi, 1}};
        auto v = a(range(f, hi));
        check_view(v, h, map_view({n}, s));
        CHECK(v.devices() == DeviceSet{set[i]});
        CHECK(v.shard_dim() == -1);
        // Its rank-0 view: the element `lo` on that device.
        auto e = a(lo);
        CHECK(e.devices() == DeviceSet{set[i]});
        CHECK(e.at() == h[static_cast<std::size_t>(lo)]);
        CHECK(to_host(e) == std::vector<float>{h[static_cast<std::size_t>(lo)]});
      }
      // Writing through a crossing view leaves the ends alone.
      if (n >= 3) {
        auto c = a;
        c(range(1, n - 1)) = c(range(1, n - 1)) + c(range(1, n - 1));
        std::vector<float> ref = h;
        for (index_t i = 1; i < n - 1; ++i) ref[i] = h[i] + h[i];
        check_equal(to_host(c), ref);
      }
    }
    // Rank 3: sharded along dim 1, views that keep, cut or drop dim 1.
    for (const std::vector<index_t>& shape : std::vector<std::vector<index_t>>{{3, 10, 4}, {2, 5, 3}, {4, 2, 2}}) {
      INFO("device set " << set_name(set) << ", shape " << dims_string(shape));
      const std::size_t n = static_cast<std::size_t>(shape[0] * shape[1] * shape[2]);
      const auto h = random_values<float>(n);
      const auto a = make<float, 3>(h, shape, shard(1, set));
      check_balanced_blocks(a, set);
      for (index_t j = 0; j < shape[1]; ++j) {
        const std::vector<Spec> s{{K::all}, {K::integer, j}, {K::rng, shape[2] - 1, -1, -1}};
        auto v = a(_, j, range(shape[2] - 1, -1, -1));
        check_view(v, h, map_view(shape, s));
        CHECK(v.devices() == expected_devices(a, s));
        CHECK(v.devices().size() == 1);
        CHECK(v.shard_dim() == -1);
      }
      const std::vector<Spec> s{{K::integer, 1}, {K::rng, 1, shape[1], 1}, {K::all}};
      auto v = a(1, range(1, shape[1]), _);
      check_view(v, h, map_view(shape, s));
      CHECK(v.devices() == expected_devices(a, s));
      CHECK(v.shard_dim() == (v.devices().size() > 1 ? 0 : -1));
    }
  }
}

TEST_CASE("views of replicated and single-device arrays") {
  for (const auto& set : device_sets()) {
    for (index_t n : {index_t(0), index_t(1), index_t(7), index_t(33), index_t(257)}) {
      INFO("device set " << set_name(set) << ", n = " << n);
      const std::vector<index_t> shape{n, 3};
      const auto h = random_values<std::int64_t>(static_cast<std::size_t>(3 * n));
      auto a = make<std::int64_t, 2>(h, shape, replicate(set));
      const std::vector<Spec> s{{K::rng, n - 1, -1, -2}, {K::integer, 2}};
      auto v = a(range(n - 1, -1, -2), 2);
      check_view(v, h, map_view(shape, s));
      CHECK(v.is_replicated());
      CHECK(v.devices() == set);
      // Writing into a view of a replicated array updates every replica.
      v = v + v;
      std::vector<std::int64_t> ref = h;
      for (index_t j : map_view(shape, s).src) ref[j] = h[j] + h[j];
      check_equal(to_host(a), ref);
      check_replicas(a, ref);
      // Single device.
      const auto b = make<std::int64_t, 2>(h, shape, on(set.back()));
      auto w = b(range(n - 1, -1, -2), 2);
      check_view(w, h, map_view(shape, s));
      CHECK(w.devices() == DeviceSet{set.back()});
      CHECK_FALSE(w.is_replicated());
    }
  }
}

namespace {
// One second-level pattern of the views-of-views test (instantiated per result rank M).
template <int M>
void view_of_view_body(const std::vector<float>& h, const Array<float, 3>& a, Array<float, 3>& c,
                       const View<float, 3>& v, const View<float, 3>& cv, const Mapping& m1, const std::vector<K>& kinds,
                       view_fn<float, 3, M, View<float, 3>> view) {
  std::vector<Spec> s2;
  for (int k = 0; k < 3; ++k) {
    if (kinds[static_cast<std::size_t>(k)] == K::integer && m1.shape[static_cast<std::size_t>(k)] == 0) return;
    s2.push_back(random_spec(kinds[static_cast<std::size_t>(k)], m1.shape[static_cast<std::size_t>(k)]));
  }
  INFO("w = v" << spec_string(s2));
  auto w = view(v, s2);
  const Mapping m = compose(m1, map_view(m1.shape, s2));
  check_view(w, h, m);
  // A view of a view writes into the original array.
  c = a;
  auto cw = view(cv, s2);
  cw = cw + cw;
  std::vector<float> ref = h;
  for (index_t j : m.src) ref[j] = h[j] + h[j];
  check_equal(to_host(c), ref);
  check_equal(to_host(a), h);
}
}  // namespace

TEST_CASE("views of views") {
  for (const auto& set : device_sets()) {
    for (const std::vector<index_t>& shape :
         std::vector<std::vector<index_t>>{{6, 7, 8}, {5, 1, 9}, {3, 4, 0}, {64, 33, 17}}) {
      for (const auto& pl : placements(3, set)) {
        INFO("device set " << set_name(set) << ", " << pl.name << ", shape " << dims_string(shape));
        const std::size_t n = static_cast<std::size_t>(shape[0] * shape[1] * shape[2]);
        const auto h = random_values<float>(n);
        auto a = make<float, 3>(h, shape, pl.p);
        // First level: three ranges (random forms); second level: every pattern of rank 3.
        std::vector<Spec> s1;
        for (int k = 0; k < 3; ++k) s1.push_back(random_spec(K::rng, shape[k]));
        auto v = a(range(s1[0].first, s1[0].last, s1[0].step), range(s1[1].first, s1[1].last, s1[1].step),
                   range(s1[2].first, s1[2].last, s1[2].step));
        const Mapping m1 = map_view(shape, s1);
        INFO("v = a" << spec_string(s1));
        check_view(v, h, m1);
        auto c = a;
        auto cv = c(range(s1[0].first, s1[0].last, s1[0].step), range(s1[1].first, s1[1].last, s1[1].step),
                    range(s1[2].first, s1[2].last, s1[2].step));
        for_each_pattern<3>([&]<K... ks>() {
          constexpr int M = ((ks != K::integer ? 1 : 0) + ... + 0);
          view_of_view_body<M>(h, a, c, v, cv, m1, {ks...},
                               [](const View<float, 3>& x, const std::vector<Spec>& s) { return view_of<ks...>(x, s); });
        });
        // A view that dropped a dimension, viewed again.
        if (shape[1] > 2 && shape[0] > 0) {
          auto d = a(_, 2, _);
          const Mapping md = map_view(shape, {{K::all}, {K::integer, 2}, {K::all}});
          const std::vector<Spec> s3{{K::rng, shape[0] - 1, -1, -1}, {K::integer, shape[2] / 2}};
          if (shape[2] > 0) check_view(d(range(shape[0] - 1, -1, -1), shape[2] / 2), h, compose(md, map_view(md.shape, s3)));
        }
      }
    }
  }
}

TEST_CASE("views: the CUDA.jl multi-GPU pattern c(_, _, g) = a(_, _, g) + b(_, _, g)") {
  for (const auto& set : device_sets()) {
    for (index_t per : {index_t(1), index_t(2)}) {
      const index_t g = static_cast<index_t>(set.size()) * per + (per == 2 ? 1 : 0);  // also uneven
      INFO("device set " << set_name(set) << ", dims (3, 4, " << g << ")");
      const std::size_t n = static_cast<std::size_t>(12 * g);
      const auto ha = random_values<float>(n), hb = random_values<float>(n);
      const auto a = from_host(ha, {3, 4, g}, shard(2, set));
      const auto b = from_host(hb, {3, 4, g}, shard(2, set));
      auto c = zeros<float>({3, 4, g}, shard(2, set));
      for (index_t k = 0; k < g; ++k) {
        INFO("slice " << k);
        auto ck = c(_, _, k);
        REQUIRE(ck.devices().size() == 1);
        CHECK(ck.devices() == a(_, _, k).devices());
        if (per == 1) CHECK(ck.devices() == DeviceSet{set[static_cast<std::size_t>(k)]});
        c(_, _, k) = a(_, _, k) + b(_, _, k);
        std::vector<float> ref(n, 0.f);
        for (std::size_t i = 0; i < static_cast<std::size_t>(12 * (k + 1)); ++i) ref[i] = ha[i] + hb[i];
        check_equal(to_host(c), ref);
      }
      // Mixing a slice with an owning array on the slice's device.
      for (index_t k = 0; k < g; ++k) {
        const auto hw = random_values<float>(12);
        const auto w = from_host(hw, {3, 4}, on(c(_, _, k).devices()[0]));
        c(_, _, k) += w;
        for (std::size_t i = 0; i < 12; ++i) {
          const std::size_t j = static_cast<std::size_t>(12 * k) + i;
          CHECK(c.at(static_cast<index_t>(i % 3), static_cast<index_t>(i / 3), k) == (ha[j] + hb[j]) + hw[i]);
        }
      }
      // An owning array on another device does not match a slice: placement_mismatch, nothing written.
      if (set.size() > 1) {
        const auto before = to_host(c);
        const auto w = from_host(random_values<float>(12), {3, 4}, on(set[1]));
        CHECK_THROWS_AS(c(_, _, 0) = w, placement_mismatch);
        CHECK_THROWS_AS(c(_, _, 0) += w, placement_mismatch);
        check_equal(to_host(c), before);
      }
    }
  }
}

TEST_CASE("views: assignment forms and untouched neighbours") {
  for (const auto& set : device_sets()) {
    for (index_t r : {index_t(1), index_t(6), index_t(33)}) {
      for (index_t cols : {index_t(1), index_t(5), index_t(17)}) {
        INFO("device set " << set_name(set) << ", shape " << r << "x" << cols);
        const std::size_t n = static_cast<std::size_t>(r * cols);
        const auto ha = random_values<float>(n), hb = random_values<float>(n);
        for (const auto& pl : placements(2, set)) {
          INFO(pl.name);
          auto a = make<float, 2>(ha, {r, cols}, pl.p);
          const auto b = make<float, 2>(hb, {r, cols}, pl.p);
          std::vector<float> ref = ha;
          auto at = [&](index_t i, index_t j) -> float& { return ref[static_cast<std::size_t>(i + r * j)]; };
          const bool rows_sharded = pl.p.kind == Placement::kind_t::shard && pl.p.dim == 0 && set.size() > 1;
          // v = another view (of another array with the same placement): writes, does not rebind.
          // Reversed along the dimension that is not sharded, so that the blocks match.
          if (rows_sharded) {
            auto v = a(_, range(cols - 1, -1, -1));
            v = b(_, _);
            for (index_t j = 0; j < cols; ++j)
              for (index_t i = 0; i < r; ++i) at(i, cols - 1 - j) = hb[static_cast<std::size_t>(i + r * j)];
          } else {
            auto v = a(range(r - 1, -1, -1), _);
            v = b(_, _);
            for (index_t j = 0; j < cols; ++j)
              for (index_t i = 0; i < r; ++i) at(r - 1 - i, j) = hb[static_cast<std::size_t>(i + r * j)];
          }
          check_equal(to_host(a), ref);
          auto v = a(range(r - 1, -1, -1), range(cols - 1, -1, -1));
          check_equal(to_host(b), hb);
          // A copy of a view shares its window.
          View<float, 2> v2 = v;
          v2 = 0.5f;
          for (auto& x : ref) x = 0.5f;
          check_equal(to_host(a), ref);
          a = make<float, 2>(ha, {r, cols}, pl.p);
          ref = ha;
          // Every other column, every other row from the second.
          auto s = a(range(1, r, 2), range(0, cols, 2));
          s += b(range(1, r, 2), range(0, cols, 2)) * 3;
          for (index_t j = 0; j < cols; j += 2)
            for (index_t i = 1; i < r; i += 2) at(i, j) += hb[static_cast<std::size_t>(i + r * j)] * 3;
          check_all_close(to_host(a), ref);
          s *= s;
          for (index_t j = 0; j < cols; j += 2)
            for (index_t i = 1; i < r; i += 2) at(i, j) *= at(i, j);
          check_all_close(to_host(a), ref);
          // A rank-0 view (one element) assigned a scalar and an expression.
          a(r - 1, cols - 1) = 42;
          at(r - 1, cols - 1) = 42;
          a(0, 0) = a(0, 0) + b(0, 0);
          at(0, 0) += hb[0];
          check_all_close(to_host(a), ref);
          // A row (size 1 along dim 0, rank 2) broadcast into a block of rows.
          if (r >= 3 && rows_sharded) {
            // Row 0 of b lives on the first device only: the other devices cannot read it.
            const auto before = to_host(a);
            CHECK_THROWS_AS(a(range(1, r), _) = b(range(0, 1), _), placement_mismatch);
            check_equal(to_host(a), before);
          } else if (r >= 3) {
            a(range(1, r), _) = b(range(0, 1), _);
            for (index_t j = 0; j < cols; ++j)
              for (index_t i = 1; i < r; ++i) at(i, j) = hb[static_cast<std::size_t>(r * j)];
            check_all_close(to_host(a), ref);
          }
          // Shape mismatch: dimension_mismatch, nothing written.
          if (r >= 2) {
            const auto before = to_host(a);
            CHECK_THROWS_AS(a(range(0, r - 1), _) = b, dimension_mismatch);
            check_equal(to_host(a), before);
          }
        }
      }
    }
  }
}

TEST_CASE("views: eval(view) and copy(view) give owning arrays") {
  for (const auto& set : device_sets()) {
    for (index_t n : sweep_sizes()) {
      INFO("device set " << set_name(set) << ", n = " << n);
      const auto h = random_values<float>(static_cast<std::size_t>(2 * n));
      for (const auto& pl : placements(2, set)) {
        INFO(pl.name);
        auto a = make<float, 2>(h, {2, n}, pl.p);
        const std::vector<Spec> s{{K::integer, 1}, {K::rng, n - 1, -1, -1}};
        const Mapping m = map_view({2, n}, s);
        const std::vector<float> want = gather(h, m);
        auto v = a(1, range(n - 1, -1, -1));
        Array<float, 1> e = eval(v);
        Array<float, 1> c = copy(v);
        Array<float, 1> f = v;  // an Array constructed from a view is owning too
        for (auto* x : {&e, &c, &f}) {
          check_equal(to_host(*x), want);
          if (n > 0) CHECK(x->devices() == v.devices());
          CHECK(x->is_replicated() == v.is_replicated());
        }
        // Owning: writing the array leaves the copies alone and the other way round.
        a = 7.f;
        for (auto* x : {&e, &c, &f}) check_equal(to_host(*x), want);
        e += e;
        c = 0.f;
        check_equal(to_host(a), std::vector<float>(h.size(), 7.f));
      }
    }
  }
}

TEST_CASE("views: out-of-bounds indices and ranges throw and leave the array intact") {
  auto contains = [](const std::string& s, const std::string& what) { return s.find(what) != std::string::npos; };
  for (const auto& set : device_sets()) {
    INFO("device set " << set_name(set));
    const index_t n = 10;
    const auto h = random_values<float>(static_cast<std::size_t>(n));
    auto a = from_host(h, {n}, shard(0, set));
    auto expect_oob = [&](const std::function<void()>& f, const std::vector<std::string>& words) {
      bool thrown = false;
      try {
        f();
      } catch (const out_of_bounds& e) {
        thrown = true;
        for (auto& w : words) {
          INFO("message: " << e.what() << " should contain " << w);
          CHECK(contains(e.what(), w));
        }
      }
      CHECK(thrown);
      check_equal(to_host(a), h);
    };
    expect_oob([&] { (void)a(n); }, {"10", "dimension 0", "[0, 10)"});
    expect_oob([&] { (void)a(-1); }, {"-1", "dimension 0", "[0, 10)"});
    expect_oob([&] { (void)a(std::size_t(-1)); }, {"dimension 0", "[0, 10)"});
    expect_oob([&] { (void)a(range(0, n + 1)); }, {"range(0, 11", "dimension 0", "10", "[0, 10)"});
    expect_oob([&] { (void)a(range(-1, 5)); }, {"range(-1, 5", "dimension 0", "-1", "[0, 10)"});
    expect_oob([&] { (void)a(range(n - 1, -2, -1)); }, {"range(9, -2, -1)", "-1", "[0, 10)"});
    expect_oob([&] { (void)a(range(0, 20, 3)); }, {"range(0, 20, 3)", "18", "[0, 10)"});
    expect_oob([&] { (void)a(range(12, 20)); }, {"12", "[0, 10)"});
    expect_oob([&] { (void)a.at(n); }, {"10", "dimension 0", "[0, 10)"});
    expect_oob([&] { (void)a(range(2, 6)).at(4); }, {"4", "[0, 4)"});
    expect_oob([&] { (void)a(range(2, 6))(range(0, 5)); }, {"dimension 0", "[0, 4)"});
    expect_oob([&] { a(range(5, 11)) = 1.f; }, {"dimension 0", "[0, 10)"});
    // Assigning to a default-constructed view (no window) is an invalid argument.
    View<float, 1> none;
    CHECK_THROWS_AS(none = 1.f, invalid_argument);
    // A step of 0 is an invalid argument.
    CHECK_THROWS_AS((void)range(0, 5, 0), invalid_argument);
    try {
      (void)range(0, 5, 0);
    } catch (const invalid_argument& e) {
      CHECK(contains(e.what(), "step"));
    }
    // Valid edges: a last past the end whose elements stay inside, empty ranges anywhere.
    check_view(a(range(0, n + 1, 3)), h, map_view({n}, {{K::rng, 0, n + 1, 3}}));
    check_view(a(range(n - 1, -1, -1)), h, map_view({n}, {{K::rng, n - 1, -1, -1}}));
    check_view(a(range(n - 1, -1, -2)), h, map_view({n}, {{K::rng, n - 1, -1, -2}}));
    expect_oob([&] { (void)a(range(n - 1, -2, -2)); }, {"range(9, -2, -2)", "-1", "[0, 10)"});  // 9, 7, ..., 1, -1
    CHECK(a(range(5, 5)).length() == 0);
    CHECK(a(range(7, 3)).length() == 0);
    CHECK(to_host(a(range(3, 7, -1))).empty());
    // Rank 3: names the dimension.
    const auto h3 = random_values<float>(24);
    auto b = from_host(h3, {2, 3, 4}, shard(2, set));
    auto expect_oob3 = [&](const std::function<void()>& f, const std::vector<std::string>& words) {
      bool thrown = false;
      try {
        f();
      } catch (const out_of_bounds& e) {
        thrown = true;
        for (auto& w : words) {
          INFO("message: " << e.what() << " should contain " << w);
          CHECK(contains(e.what(), w));
        }
      }
      CHECK(thrown);
      check_equal(to_host(b), h3);
    };
    expect_oob3([&] { (void)b(_, 3, 0); }, {"index 3", "dimension 1", "[0, 3)"});
    expect_oob3([&] { (void)b(0, _, range(1, 5)); }, {"dimension 2", "[0, 4)"});
    expect_oob3([&] { (void)b(range(0, 3), _, 1); }, {"dimension 0", "[0, 2)"});
    expect_oob3([&] { (void)b.at(0, 0, 4); }, {"dimension 2", "[0, 4)"});
    expect_oob3([&] { (void)b(_, _, 1)(_, 3); }, {"dimension 1", "[0, 3)"});
    // The array still works afterwards.
    b(_, _, 1) = 5.f;
    std::vector<float> ref = h3;
    for (int i = 6; i < 12; ++i) ref[i] = 5.f;
    check_equal(to_host(b), ref);
  }
}

namespace {
Array<float, 2> make_matrix(const std::vector<float>& h, index_t r, index_t c, const DeviceSet& set) {
  return from_host(h, {r, c}, shard(1, set));
}
}  // namespace

TEST_CASE("views keep the storage alive after the array is gone") {
  for (const auto& set : device_sets()) {
    for (index_t c : {index_t(1), index_t(3), index_t(17), index_t(1000)}) {
      INFO("device set " << set_name(set) << ", columns " << c);
      const index_t r = 9;
      const auto h = random_values<float>(static_cast<std::size_t>(r * c));
      auto col = make_matrix(h, r, c, set)(_, c / 2);  // the array temporary dies here
      auto row = make_matrix(h, r, c, set)(range(r - 1, -1, -4), _)(1, _);
      auto expr = make_matrix(h, r, c, set)(range(0, r, 2), _) + make_matrix(h, r, c, set)(range(0, r, 2), _);
      {
        std::vector<float> want(h.begin() + r * (c / 2), h.begin() + r * (c / 2 + 1));
        check_equal(to_host(col), want);
        std::vector<float> wr;
        for (index_t j = 0; j < c; ++j) wr.push_back(h[static_cast<std::size_t>(r - 5 + r * j)]);
        check_equal(to_host(row), wr);
        CHECK(row.at(c - 1) == wr.back());
        std::vector<float> we;
        for (index_t j = 0; j < c; ++j)
          for (index_t i = 0; i < r; i += 2) we.push_back(h[static_cast<std::size_t>(i + r * j)] * 2.f);  // x + x
        check_equal(to_host(eval(expr)), we);
      }
      // Writing through the orphaned view still works.
      col += col;
      std::vector<float> want(h.begin() + r * (c / 2), h.begin() + r * (c / 2 + 1));
      for (auto& x : want) x += x;
      check_equal(to_host(col), want);
    }
  }
}

TEST_CASE("views of bool arrays") {
  for (const auto& set : device_sets()) {
    for (index_t n : {index_t(0), index_t(1), index_t(33), index_t(257)}) {
      INFO("device set " << set_name(set) << ", n = " << n);
      const auto h = random_values<bool>(static_cast<std::size_t>(n));
      auto a = from_host(h, {n}, shard(0, set));
      std::vector<bool> want;
      for (index_t i = 1; i < n; i += 2) want.push_back(h[static_cast<std::size_t>(i)]);
      CHECK(to_host(a(range(1, n, 2))) == want);
      a(range(1, n, 2)) = true;
      std::vector<bool> ref = h;
      for (index_t i = 1; i < n; i += 2) ref[static_cast<std::size_t>(i)] = true;
      CHECK(to_host(a) == ref);
    }
  }
}
