// SPDX-License-Identifier: Apache-2.0
// Creation and host transfer: zeros / ones / full / iota, from_host / to_host round trips for
// every element type and placement, at(), and zero-filled Array(shape, placement). rand / randn:
// test_creation_random.cpp; similar, copy, value semantics, eval and printing:
// test_creation_semantics.cpp.
//
// Compile time: every distinct (element type, rank, expression) costs a host executor
// instantiation, so the per-type sweeps use ranks 1 and 3 only, and the templates over the
// element type do the Tessera calls only; the doctest checks live in plain functions.
#include "test_support.hpp"

#include <algorithm>
#include <array>
#include <cstdint>
#include <random>
#include <string>
#include <type_traits>
#include <vector>

using namespace tessera;
using namespace tessera_test;

namespace {

// What an array reports about its placement.
struct Props {
  DeviceSet devices;
  bool replicated = false;
  int shard_dim = -1;
  std::string placement;
};
template <class A>
Props props(const A& a) {
  return {a.devices(), a.is_replicated(), a.shard_dim(), a.placement_string()};
}

// The placement an array reports matches what was asked for.
void check_placement(const Props& a, const NamedPlacement& np, const DeviceSet& ds) {
  INFO("placement " << np.name << " reported as " << a.placement);
  if (np.p.kind == Placement::kind_t::shard) {
    CHECK(a.devices == ds);
    CHECK_FALSE(a.replicated);
    if (ds.size() > 1) CHECK(a.shard_dim == np.p.dim);
  } else if (np.p.kind == Placement::kind_t::replicate) {
    CHECK(a.devices == ds);
    CHECK(a.replicated);
  } else {
    CHECK(a.devices == DeviceSet{np.p.devices[0]});
    CHECK_FALSE(a.replicated);
  }
}
template <std::size_t N>
std::array<index_t, N> to_array(const Dims& s) {
  std::array<index_t, N> a{};
  for (std::size_t k = 0; k < N; ++k) a[k] = s[k];
  return a;
}

template <std::size_t N>
std::array<index_t, N> cartesian_of(const std::array<index_t, N>& s, index_t lin) {
  std::array<index_t, N> idx{};
  for (std::size_t k = 0; k < N; ++k) {
    idx[k] = lin % s[k];
    lin /= s[k];
  }
  return idx;
}

template <class A, std::size_t N>
auto at_index(const A& a, const std::array<index_t, N>& i) {
  if constexpr (N == 1) return a.at(i[0]);
  else if constexpr (N == 2) return a.at(i[0], i[1]);
  else return a.at(i[0], i[1], i[2]);
}

template <class T>
std::string str(T v) {
  if constexpr (std::is_same_v<T, bool>) return v ? "true" : "false";
  else return std::to_string(v);
}

// A few elements read with at() (each is a host round trip), always the first and the last.
// Returns a description of the first mismatch, empty when all agree.
template <class T, std::size_t N, class A>
std::string at_mismatch(const A& a, const std::vector<T>& host, const std::array<index_t, N>& s) {
  index_t n = 1;
  for (auto x : s) n *= x;
  if (n == 0) return {};
  std::vector<index_t> picks{0, n - 1, n / 2};
  std::uniform_int_distribution<index_t> d(0, n - 1);
  for (int r = 0; r < 5; ++r) picks.push_back(d(rng()));
  for (index_t lin : picks) {
    const T got = at_index<A, N>(a, cartesian_of<N>(s, lin)), want = host[static_cast<std::size_t>(lin)];
    if (got != want) return "at() of linear index " + std::to_string(lin) + " gave " + str(got) + ", expected " + str(want);
  }
  return {};
}

// The outcome of one creation call, computed by a template over the element type and checked by
// plain code.
struct Outcome {
  Props props;
  bool geometry_ok = false;  // shape, length, memory kind
  std::string bad;           // first wrong value, empty when all are right
};
using CreateFn = Outcome (*)(const Dims&, const Placement&, memory);

template <class T, std::size_t N>
Array<T, int(N)> make_from_host(const std::vector<T>& host, const Dims& s, const Placement& p, memory m) {
  if constexpr (N == 1) return from_host(host, {s[0]}, p, m);
  else return from_host(host, {s[0], s[1], s[2]}, p, m);
}

template <class T, std::size_t N, class A>
Outcome outcome_of(const A& a, const Dims& s, memory m) {
  return {props(a), a.shape() == to_array<N>(s) && a.length() == volume(s) && a.memory_kind() == m, {}};
}

// from_host then to_host (twice: reading consumes nothing), and at() on a few elements.
template <class T, std::size_t N>
Outcome round_trip_one(const Dims& s, const Placement& p, memory m) {
  const auto host = random_values<T>(static_cast<std::size_t>(volume(s)));
  const auto a = make_from_host<T, N>(host, s, p, m);
  Outcome o = outcome_of<T, N>(a, s, m);
  if (to_host(a) != host) o.bad = "to_host(from_host(v)) != v";
  else if (to_host(a) != host) o.bad = "a second to_host differs";
  else o.bad = at_mismatch<T, N>(a, host, to_array<N>(s));
  return o;
}

// zeros, ones and full (value -3, true for bool).
template <class T, std::size_t N>
Outcome fills_one(const Dims& s, const Placement& p, memory m) {
  const T v = std::is_same_v<T, bool> ? T(true) : T(-3);
  const auto sh = to_array<N>(s);
  const auto z = zeros<T, N>(sh, p, m), o = ones<T, N>(sh, p, m), f = full<T, N>(sh, v, p, m);
  Outcome out = outcome_of<T, N>(f, s, m);
  out.geometry_ok = out.geometry_ok && z.shape() == sh && o.shape() == sh && z.memory_kind() == m;
  const auto hz = to_host(z), ho = to_host(o), hf = to_host(f);
  const auto n = static_cast<std::size_t>(volume(s));
  if (hz.size() != n || ho.size() != n || hf.size() != n) out.bad = "to_host returned a wrong number of elements";
  for (std::size_t i = 0; i < n && out.bad.empty(); ++i) {
    if (hz[i] != T(0) || ho[i] != T(1) || hf[i] != v) {
      out.bad = "element " + std::to_string(i) + ": zeros " + str(T(hz[i])) + ", ones " + str(T(ho[i])) + ", full " +
                str(T(hf[i]));
    }
  }
  return out;
}

// iota with and without a start value: the column-major linear index (+ start).
template <class T, std::size_t N>
Outcome iota_one(const Dims& s, const Placement& p, memory m) {
  const T start = N == 1 ? T(5) : T(-7);
  const auto sh = to_array<N>(s);
  const auto a = iota<T, N>(sh, p, m);
  const auto b = iota<T, N>(sh, p, m, start);
  Outcome out = outcome_of<T, N>(b, s, m);
  const auto ha = to_host(a), hb = to_host(b);
  const index_t n = volume(s);
  if (ha.size() != std::size_t(n) || hb.size() != std::size_t(n)) out.bad = "to_host returned a wrong number of elements";
  for (index_t i = 0; i < n && out.bad.empty(); ++i) {
    if (ha[static_cast<std::size_t>(i)] != T(i) || hb[static_cast<std::size_t>(i)] != T(start + T(i))) {
      out.bad = "element " + std::to_string(i) + ": iota gave " + str(ha[static_cast<std::size_t>(i)]) +
                " and, with start " + str(start) + ", " + str(hb[static_cast<std::size_t>(i)]);
    }
  }
  // The linear index is the column-major one: check through at() too.
  if (out.bad.empty() && n > 0 && at_index(a, cartesian_of<N>(sh, n - 1)) != T(n - 1)) out.bad = "at(last) of iota";
  return out;
}

void check_outcome(const Outcome& o, const NamedPlacement& np, const DeviceSet& ds) {
  CHECK_MESSAGE(o.geometry_ok, "shape, length or memory kind differ from the request");
  CHECK_MESSAGE(o.bad.empty(), o.bad);
  check_placement(o.props, np, ds);
}

// Runs `three` (rank 3) on every device set, placement and memory kind, over the size sweep laid
// along each dimension in turn ({n, 1, 1}, {1, n, 1}, {1, 1, n}) and over `shapes3`; and `one`
// (rank 1, when given) over the size sweep. Rank 3 alone covers sharding along a leading, middle
// and trailing dimension with empty, size-1, fewer-than-devices, odd and large extents.
void sweep(const char* what, CreateFn one, CreateFn three, const std::vector<Dims>& shapes3,
           index_t device_memory_below) {
  INFO(what);
  for (const auto& ds : device_sets()) {
    INFO("device set " << set_name(ds));
    auto run = [&](CreateFn f, const Dims& s) {
      for (const auto& np : placements(static_cast<int>(s.size()), ds)) {
        for (memory m : {memory::unified, memory::device}) {
          if (m == memory::device && volume(s) >= device_memory_below) continue;
          INFO("shape " << dims_string(s) << ", " << np.name << ", memory " << (m == memory::unified ? "unified" : "device"));
          check_outcome(f(s, np.p, m), np, ds);
        }
      }
    };
    for (index_t n : sweep_sizes()) {
      if (one) run(one, {n});
      for (int d = 0; d < 3; ++d) {
        if (n >= (1 << 20) && d == 1) continue;  // the large size along the first and last only
        Dims s{1, 1, 1};
        s[static_cast<std::size_t>(d)] = n;
        run(three, s);
      }
    }
    for (const auto& s : shapes3) run(three, s);
  }
}

const std::vector<Dims> round_trip_shapes{{0, 2, 3}, {5, 0, 1}, {2, 3, 4}, {5, 1, 9}, {3, 2, 1},
                                            {17, 3, 8}, {33, 31, 2}, {1023, 3, 341}};
const std::vector<Dims> small_shapes{{0, 2, 3}, {3, 2, 1}, {5, 1, 9}, {7, 3, 2}, {33, 65, 2}};

template <class T>
bool all_equal(const std::vector<T>& v, T x) {
  return std::all_of(v.begin(), v.end(), [x](T y) { return y == x; });
}

}  // namespace

// -- from_host / to_host ------------------------------------------------------------------------

TEST_CASE("from_host / to_host round trip: bool") {
  sweep("bool", nullptr, round_trip_one<bool, 3>, round_trip_shapes, 10000);
}
TEST_CASE("from_host / to_host round trip: int32") {
  sweep("int32", nullptr, round_trip_one<std::int32_t, 3>, round_trip_shapes, 10000);
}
TEST_CASE("from_host / to_host round trip: int64") {
  sweep("int64", nullptr, round_trip_one<std::int64_t, 3>, round_trip_shapes, 10000);
}
TEST_CASE("from_host / to_host round trip: float") {
  sweep("float", round_trip_one<float, 1>, round_trip_one<float, 3>, round_trip_shapes, 10000);
}
TEST_CASE("from_host / to_host round trip: double") {
  sweep("double", nullptr, round_trip_one<double, 3>, round_trip_shapes, 10000);
}

TEST_CASE("from_host with a wrong number of values throws invalid_argument naming both counts") {
  for (const auto& ds : device_sets()) {
    INFO("device set " << set_name(ds));
    const std::vector<float> v17(17, 1.f);
    CHECK_THROWS_AS(from_host(v17, {4, 5, 1}, shard(1, ds)), invalid_argument);
    try {
      (void)from_host(v17, {4, 5, 1}, shard(1, ds));
    } catch (const invalid_argument& e) {
      const std::string msg = e.what();
      INFO(msg);
      CHECK(contains(msg, "17"));
      CHECK(contains(msg, "20"));
      CHECK(contains(msg, "4×5×1"));
    }
    // Too many values, bool (staged through bytes), and an empty shape given one value.
    const std::vector<bool> b3(3, true);
    CHECK_THROWS_AS(from_host(b3, {2}, replicate(ds)), invalid_argument);
    try {
      (void)from_host(b3, {2}, replicate(ds));
    } catch (const invalid_argument& e) {
      INFO(e.what());
      CHECK(contains(e.what(), "3"));
      CHECK(contains(e.what(), "2"));
    }
    const std::vector<std::int64_t> one(1, 7);
    CHECK_THROWS_AS(from_host(one, {0, 4, 1}, shard(0, ds)), invalid_argument);
    // The library still works afterwards.
    auto ok = from_host(v17, {17}, shard(0, ds));
    CHECK(to_host(ok) == v17);
  }
}

TEST_CASE("at() reads elements of arrays and views; out of bounds throws out_of_bounds") {
  for (const auto& ds : device_sets()) {
    INFO("device set " << set_name(ds));
    for (const Dims& s : std::vector<Dims>{{5, 7, 3}, {1, 2, 9}, {4, 3, 2}}) {
      for (const auto& np : placements(3, ds)) {
        INFO("shape " << dims_string(s) << ", " << np.name);
        const auto host = random_values<double>(static_cast<std::size_t>(volume(s)));
        auto a = from_host(host, {s[0], s[1], s[2]}, np.p);
        // Every element (these arrays are small).
        std::string bad;
        for (index_t k = 0; k < s[2]; ++k)
          for (index_t j = 0; j < s[1]; ++j)
            for (index_t i = 0; i < s[0]; ++i) {
              const double want = host[static_cast<std::size_t>(i + s[0] * (j + s[1] * k))];
              if (bad.empty() && a.at(i, j, k) != want) {
                bad = "at(" + std::to_string(i) + ", " + std::to_string(j) + ", " + std::to_string(k) + ")";
              }
            }
        CHECK_MESSAGE(bad.empty(), bad);
        // A reversed view with a dropped dimension: v(i, k) = a(s0-1-i, 1, k).
        if (s[1] > 1) {
          auto v = a(range(s[0] - 1, -1, -1), 1, _);
          REQUIRE(v.shape() == std::array<index_t, 2>{s[0], s[2]});
          for (index_t k = 0; k < s[2]; ++k)
            for (index_t i = 0; i < s[0]; ++i)
              CHECK(v.at(i, k) == host[static_cast<std::size_t>((s[0] - 1 - i) + s[0] * (1 + s[1] * k))]);
          CHECK_THROWS_AS(v.at(s[0], 0), out_of_bounds);
          CHECK_THROWS_AS(v.at(0, -1), out_of_bounds);
        }
        // Out of bounds, in every dimension, both sides.
        CHECK_THROWS_AS(a.at(s[0], 0, 0), out_of_bounds);
        CHECK_THROWS_AS(a.at(0, s[1], 0), out_of_bounds);
        CHECK_THROWS_AS(a.at(0, 0, s[2]), out_of_bounds);
        CHECK_THROWS_AS(a.at(-1, 0, 0), out_of_bounds);
        CHECK_THROWS_AS(a.at(0, 0, -1), out_of_bounds);
        try {
          (void)a.at(0, s[1] + 3, 0);
          FAIL("no exception");
        } catch (const out_of_bounds& e) {
          INFO(e.what());
          CHECK(contains(e.what(), std::to_string(s[1] + 3)));
          CHECK(contains(e.what(), std::to_string(s[1])));
        }
        CHECK(to_host(a) == host);  // intact
      }
    }
    // 1-d over sizes 1 and odd.
    for (index_t n : {index_t(1), index_t(7), index_t(33)}) {
      const auto host = random_values<float>(static_cast<std::size_t>(n));
      auto a = from_host(host, {n}, shard(0, ds));
      for (index_t i = 0; i < n; ++i) CHECK(a.at(i) == host[static_cast<std::size_t>(i)]);
      CHECK_THROWS_AS(a.at(n), out_of_bounds);
      CHECK_THROWS_AS(a.at(-1), out_of_bounds);
    }
    // An empty array has no valid index.
    auto e = zeros<double>({0, 3, 2}, shard(1, ds));
    CHECK_THROWS_AS(e.at(0, 0, 0), out_of_bounds);
  }
}

// -- fills and iota -----------------------------------------------------------------------------

TEST_CASE("zeros / ones / full: bool") { sweep("bool", nullptr, fills_one<bool, 3>, small_shapes, 1000); }
TEST_CASE("zeros / ones / full: int32") {
  sweep("int32", nullptr, fills_one<std::int32_t, 3>, small_shapes, 1000);
}
TEST_CASE("zeros / ones / full: int64") {
  sweep("int64", nullptr, fills_one<std::int64_t, 3>, small_shapes, 1000);
}
TEST_CASE("zeros / ones / full: float") { sweep("float", fills_one<float, 1>, fills_one<float, 3>, small_shapes, 1000); }
TEST_CASE("zeros / ones / full: double") {
  sweep("double", nullptr, fills_one<double, 3>, small_shapes, 1000);
}

TEST_CASE("full keeps extreme and inexact values exactly") {
  for (const auto& ds : device_sets()) {
    INFO("device set " << set_name(ds));
    CHECK(all_equal(to_host(full<float>({33}, 0.1f, shard(0, ds))), 0.1f));
    CHECK(all_equal(to_host(full<double>({5, 9, 1}, -1e300, shard(1, ds))), -1e300));
    CHECK(all_equal(to_host(full<std::int64_t>({17, 1, 1}, std::int64_t(1) << 40, replicate(ds))), std::int64_t(1) << 40));
    CHECK(all_equal(to_host(full<std::int32_t>({4, 1, 1}, -2147483647 - 1, on(ds.back()))), -2147483647 - 1));
  }
}

TEST_CASE("iota: int32") { sweep("int32", nullptr, iota_one<std::int32_t, 3>, small_shapes, 1000); }
TEST_CASE("iota: int64") { sweep("int64", nullptr, iota_one<std::int64_t, 3>, small_shapes, 1000); }
TEST_CASE("iota: float") { sweep("float", iota_one<float, 1>, iota_one<float, 3>, small_shapes, 1000); }
TEST_CASE("iota: double") { sweep("double", nullptr, iota_one<double, 3>, small_shapes, 1000); }

TEST_CASE("Array(shape, placement) is zero-filled") {
  for (const auto& ds : device_sets()) {
    INFO("device set " << set_name(ds));
    for (index_t n : sweep_sizes()) {
      INFO("n = " << n);
      Array<float, 1> a({n}, shard(0, ds));
      CHECK(a.shape() == std::array<index_t, 1>{n});
      CHECK(a.devices() == ds);
      const auto h = to_host(a);
      CHECK(h.size() == static_cast<std::size_t>(n));
      CHECK(std::all_of(h.begin(), h.end(), [](float x) { return x == 0.f; }));
    }
    for (const auto& np : placements(3, ds)) {
      INFO(np.name);
      Array<std::int64_t, 3> a({3, 5, 7}, np.p);
      check_placement(props(a), np, ds);
      const auto h = to_host(a);
      CHECK(h.size() == 105);
      CHECK(std::all_of(h.begin(), h.end(), [](std::int64_t x) { return x == 0; }));
      Array<bool, 3> b({2, 1, 3}, np.p, memory::device);
      CHECK(b.memory_kind() == memory::device);
      const auto hb = to_host(b);
      CHECK(std::none_of(hb.begin(), hb.end(), [](bool x) { return x; }));
      Array<double, 3> c({4, 1, 4}, np.p);
      const auto hc = to_host(c);
      CHECK(std::all_of(hc.begin(), hc.end(), [](double x) { return x == 0.0; }));
    }
  }
  // The default placement: shard along the last dimension over the default device set.
  if (!device_sets().empty()) {
    Array<float, 2> d({4, 9});
    CHECK(d.devices() == devices());
    if (devices().size() > 1) CHECK(d.shard_dim() == 1);
    Array<float, 2> m({4, 9}, memory::device);
    CHECK(m.memory_kind() == memory::device);
    CHECK(to_host(m) == std::vector<float>(36, 0.f));
  }
}
