// SPDX-License-Identifier: Apache-2.0
// Views, every index form: _, range(first, last), range(first, last, step) with positive and
// negative steps, empty ranges and integers, in every combination on ranks 1..4, on sharded,
// replicated and single-device arrays; reads (to_host, at(), shape, devices), writes into a view
// (another view, an expression, an owning array of matching placement, a scalar) that must leave
// the elements outside it untouched, and rank dropping. Every result is compared against a
// plain-loop host reference (views_reference.hpp) on fresh random data. Views of sharded and
// replicated arrays in particular, and views of views: test_views_sharding.cpp; assignment forms,
// eval/copy, errors and lifetime: test_views_assign.cpp.
#include "views_reference.hpp"

#include <cstdint>
#include <functional>
#include <numeric>
#include <span>
#include <string>
#include <type_traits>
#include <vector>

using namespace tessera;
using namespace tessera_test;

namespace {

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
  d.a = make<N>(d.ha, shape, pl.p);
  d.b = make<N>(d.hb, shape, pl.p);
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
// Element types other than float: views of int64 (replicated) in test_views_sharding.cpp, of bool
// in test_views_assign.cpp.
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

