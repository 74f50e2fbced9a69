// SPDX-License-Identifier: Apache-2.0
// Creation and host transfer: zeros / ones / full / rand / randn / iota, from_host / to_host round
// trips for every element type and placement, at(), similar, copy, Array value semantics,
// default-constructed arrays taking an expression's shape and placement, eval, and printing.
//
// Compile time: every distinct (element type, rank, expression) costs a host executor
// instantiation, so the per-type sweeps use ranks 1 and 3 only, and the templates over the
// element type do the Tessera calls only; the doctest checks live in plain functions.
#include "test_support.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <sstream>
#include <string>
#include <type_traits>
#include <vector>

using namespace tessera;
using namespace tessera_test;

namespace {

struct NamedPlacement {
  std::string name;
  Placement p;
};

// Every placement of a rank-`rank` array over `ds`: shard along each dimension, replicate, and on
// one device (the last of the set, so that it is not always the first device).
std::vector<NamedPlacement> placements(const DeviceSet& ds, int rank) {
  std::vector<NamedPlacement> out;
  for (int d = 0; d < rank; ++d) out.push_back({"shard(" + std::to_string(d) + ")", shard(d, ds)});
  out.push_back({"replicate", replicate(ds)});
  out.push_back({"on(" + ds.back().name() + ")", on(ds.back())});
  return out;
}

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

using dims_t = std::vector<index_t>;

std::string shape_str(const dims_t& s) {
  std::string r = "{";
  for (std::size_t k = 0; k < s.size(); ++k) r += (k ? ", " : "") + std::to_string(s[k]);
  return r + "}";
}

index_t volume_of(const dims_t& s) {
  index_t v = 1;
  for (auto x : s) v *= x;
  return v;
}

template <std::size_t N>
std::array<index_t, N> to_array(const dims_t& s) {
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
using CreateFn = Outcome (*)(const dims_t&, const Placement&, memory);

template <class T, std::size_t N>
Array<T, int(N)> make_from_host(const std::vector<T>& host, const dims_t& s, const Placement& p, memory m) {
  if constexpr (N == 1) return from_host(host, {s[0]}, p, m);
  else return from_host(host, {s[0], s[1], s[2]}, p, m);
}

template <class T, std::size_t N, class A>
Outcome outcome_of(const A& a, const dims_t& s, memory m) {
  return {props(a), a.shape() == to_array<N>(s) && a.length() == volume_of(s) && a.memory_kind() == m, {}};
}

// from_host then to_host (twice: reading consumes nothing), and at() on a few elements.
template <class T, std::size_t N>
Outcome round_trip_one(const dims_t& s, const Placement& p, memory m) {
  const auto host = random_values<T>(static_cast<std::size_t>(volume_of(s)));
  const auto a = make_from_host<T, N>(host, s, p, m);
  Outcome o = outcome_of<T, N>(a, s, m);
  if (to_host(a) != host) o.bad = "to_host(from_host(v)) != v";
  else if (to_host(a) != host) o.bad = "a second to_host differs";
  else o.bad = at_mismatch<T, N>(a, host, to_array<N>(s));
  return o;
}

// zeros, ones and full (value -3, true for bool).
template <class T, std::size_t N>
Outcome fills_one(const dims_t& s, const Placement& p, memory m) {
  const T v = std::is_same_v<T, bool> ? T(true) : T(-3);
  const auto sh = to_array<N>(s);
  const auto z = zeros<T, N>(sh, p, m), o = ones<T, N>(sh, p, m), f = full<T, N>(sh, v, p, m);
  Outcome out = outcome_of<T, N>(f, s, m);
  out.geometry_ok = out.geometry_ok && z.shape() == sh && o.shape() == sh && z.memory_kind() == m;
  const auto hz = to_host(z), ho = to_host(o), hf = to_host(f);
  const auto n = static_cast<std::size_t>(volume_of(s));
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
Outcome iota_one(const dims_t& s, const Placement& p, memory m) {
  const T start = N == 1 ? T(5) : T(-7);
  const auto sh = to_array<N>(s);
  const auto a = iota<T, N>(sh, p, m);
  const auto b = iota<T, N>(sh, p, m, start);
  Outcome out = outcome_of<T, N>(b, s, m);
  const auto ha = to_host(a), hb = to_host(b);
  const index_t n = volume_of(s);
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
void sweep(const char* what, CreateFn one, CreateFn three, const std::vector<dims_t>& shapes3,
           index_t device_memory_below) {
  INFO(what);
  for (const auto& ds : device_sets()) {
    INFO("device set " << set_name(ds));
    auto run = [&](CreateFn f, const dims_t& s) {
      for (const auto& np : placements(ds, static_cast<int>(s.size()))) {
        for (memory m : {memory::unified, memory::device}) {
          if (m == memory::device && volume_of(s) >= device_memory_below) continue;
          INFO("shape " << shape_str(s) << ", " << np.name << ", memory " << (m == memory::unified ? "unified" : "device"));
          check_outcome(f(s, np.p, m), np, ds);
        }
      }
    };
    for (index_t n : sweep_sizes()) {
      if (one) run(one, {n});
      for (int d = 0; d < 3; ++d) {
        if (n >= (1 << 20) && d == 1) continue;  // the large size along the first and last only
        dims_t s{1, 1, 1};
        s[static_cast<std::size_t>(d)] = n;
        run(three, s);
      }
    }
    for (const auto& s : shapes3) run(three, s);
  }
}

const std::vector<dims_t> round_trip_shapes{{0, 2, 3}, {5, 0, 1}, {2, 3, 4}, {5, 1, 9}, {3, 2, 1},
                                            {17, 3, 8}, {33, 31, 2}, {1023, 3, 341}};
const std::vector<dims_t> small_shapes{{0, 2, 3}, {3, 2, 1}, {5, 1, 9}, {7, 3, 2}, {33, 65, 2}};

template <class A>
std::string print(const A& a) {
  std::ostringstream os;
  os << a;
  return os.str();
}

std::string first_line(const std::string& s) { return s.substr(0, s.find('\n')); }

std::size_t count_lines(const std::string& s) { return static_cast<std::size_t>(std::count(s.begin(), s.end(), '\n')); }

bool contains(const std::string& s, const std::string& what) { return s.find(what) != std::string::npos; }

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
    for (const dims_t& s : std::vector<dims_t>{{5, 7, 3}, {1, 2, 9}, {4, 3, 2}}) {
      for (const auto& np : placements(ds, 3)) {
        INFO("shape " << shape_str(s) << ", " << np.name);
        const auto host = random_values<double>(static_cast<std::size_t>(volume_of(s)));
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

// -- rand / randn ---------------------------------------------------------------------------

struct Moments {
  bool in_range = true, finite = true;
  double mean = 0, var = 0, lag1 = 0;
  std::vector<double> bins;  // rand: fraction in each tenth of [0, 1)
  double within1 = 0, within2 = 0;  // randn: fraction with |x| < 1 and < 2
  double distinct = 0;
};

Moments moments(const std::vector<double>& a, bool uniform) {
  Moments m;
  const double n = static_cast<double>(a.size());
  double sum = 0, sq = 0;
  m.bins.assign(10, 0);
  for (double x : a) {
    if (uniform && !(x >= 0 && x < 1)) m.in_range = false;
    if (!std::isfinite(x)) m.finite = false;
    sum += x;
    sq += x * x;
    if (uniform) m.bins[std::min<std::size_t>(9, static_cast<std::size_t>(x * 10))] += 1 / n;
    m.within1 += (std::fabs(x) < 1) / n;
    m.within2 += (std::fabs(x) < 2) / n;
  }
  m.mean = sum / n;
  m.var = sq / n - m.mean * m.mean;
  double cov = 0;
  for (std::size_t i = 0; i + 1 < a.size(); ++i) cov += (a[i] - m.mean) * (a[i + 1] - m.mean);
  m.lag1 = cov / (n - 1) / m.var;
  auto sorted = a;
  std::sort(sorted.begin(), sorted.end());
  m.distinct = static_cast<double>(std::unique(sorted.begin(), sorted.end()) - sorted.begin()) / n;
  return m;
}

template <class T>
std::vector<double> as_double(const std::vector<T>& v) {
  return {v.begin(), v.end()};
}

void check_rand_statistics(bool single) {
  INFO("element type " << (single ? "float" : "double"));
  const index_t n = 1 << 20;
  for (const auto& ds : device_sets()) {
    INFO("device set " << set_name(ds));
    const auto u = moments(single ? as_double(to_host(rand<float>({n, 1, 1}, shard(0, ds))))
                                  : as_double(to_host(rand<double>({n, 1, 1}, shard(0, ds)))),
                           true);
    CHECK_MESSAGE(u.in_range, "rand produced a value outside [0, 1)");
    // Standard error of the mean: sqrt(1/12/n) = 2.8e-4; the bounds are ~18 standard errors.
    CHECK(std::fabs(u.mean - 0.5) < 0.005);
    CHECK(std::fabs(u.var - 1.0 / 12) < 0.003);
    for (int b = 0; b < 10; ++b) {
      INFO("bin " << b);
      CHECK(std::fabs(u.bins[static_cast<std::size_t>(b)] - 0.1) < 0.005);
    }
    CHECK(std::fabs(u.lag1) < 0.01);  // neighbours are not correlated
    CHECK(u.distinct > 0.9);          // not many repeated values

    const auto g = moments(single ? as_double(to_host(randn<float>({1, n, 1}, replicate(ds))))
                                  : as_double(to_host(randn<double>({1, n, 1}, replicate(ds)))),
                           false);
    CHECK(g.finite);
    CHECK(std::fabs(g.mean) < 0.01);      // standard error 1e-3
    CHECK(std::fabs(g.var - 1) < 0.015);  // standard error 1.4e-3
    CHECK(std::fabs(g.within1 - 0.682689) < 0.005);
    CHECK(std::fabs(g.within2 - 0.954500) < 0.003);
    CHECK(std::fabs(g.lag1) < 0.01);
  }
}

TEST_CASE("rand and randn statistics: float") { check_rand_statistics(true); }
TEST_CASE("rand and randn statistics: double") { check_rand_statistics(false); }

TEST_CASE("rand / randn: same seed, same values, whatever the placement and device count") {
  const std::uint64_t s = std::uniform_int_distribution<std::uint64_t>()(rng());
  CAPTURE(s);
  const auto sets = device_sets();
  if (sets.empty()) return;
  // The reference: one host device.
  const DeviceSet h1 = host_devices(1);
  seed(s);
  const auto ref_u = to_host(rand<float>({33, 5, 13}, shard(1, h1)));
  const auto ref_n = to_host(randn<double>({33, 5, 13}, shard(1, h1)));
  const auto ref_u2 = to_host(rand<float>({33, 5, 13}, shard(1, h1)));
  CHECK(ref_u != ref_u2);  // consecutive calls differ
  for (const auto& ds : sets) {
    INFO("device set " << set_name(ds));
    for (const auto& np : placements(ds, 3)) {
      for (memory m : {memory::unified, memory::device}) {
        INFO(np.name << (m == memory::device ? ", memory::device" : ""));
        seed(s);
        const auto u = to_host(rand<float>({33, 5, 13}, np.p, m));
        const auto g = to_host(randn<double>({33, 5, 13}, np.p, m));
        const auto u2 = to_host(rand<float>({33, 5, 13}, np.p, m));
        CHECK(u == ref_u);
        CHECK(u2 == ref_u2);
        // randn goes through log and cos: bit-identical on host devices, within a few ulps on GPUs.
        if (ds[0].is_host()) CHECK(g == ref_n);
        else check_all_close(g, ref_n, 1e-12, 1e-12);
      }
    }
    // Large and 1-d, uneven shards.
    seed(s + 1);
    const auto big_ref = to_host(rand<double>({1, 1, (1 << 20) + 1}, on(h1[0])));
    seed(s + 1);
    const auto big = to_host(rand<double>({1, 1, (1 << 20) + 1}, shard(2, ds)));
    CHECK(big == big_ref);
  }
  // A different seed gives different values; two calls after one seed differ from each other.
  seed(s + 2);
  const auto other = to_host(rand<float>({33, 5, 13}, shard(1, h1)));
  std::size_t equal = 0;
  for (std::size_t i = 0; i < other.size(); ++i) equal += other[i] == ref_u[i];
  CHECK(equal < other.size() / 100 + 2);
  equal = 0;
  for (std::size_t i = 0; i < ref_u.size(); ++i) equal += ref_u2[i] == ref_u[i];
  CHECK(equal < ref_u.size() / 100 + 2);
}

TEST_CASE("rand / randn on empty and tiny shapes") {
  for (const auto& ds : device_sets()) {
    INFO("device set " << set_name(ds));
    for (index_t n : {index_t(0), index_t(1), index_t(2), index_t(7)}) {
      INFO("n = " << n);
      auto u = rand<float>({n, 3, 1}, shard(0, ds));
      auto g = randn<double>({3, 1, n}, shard(2, ds));
      CHECK(u.shape() == std::array<index_t, 3>{n, 3, 1});
      CHECK(g.shape() == std::array<index_t, 3>{3, 1, n});
      const auto hu = to_host(u);
      const auto hg = to_host(g);
      CHECK(hu.size() == static_cast<std::size_t>(3 * n));
      CHECK(hg.size() == static_cast<std::size_t>(3 * n));
      CHECK(std::all_of(hu.begin(), hu.end(), [](float x) { return x >= 0.f && x < 1.f; }));
      CHECK(std::all_of(hg.begin(), hg.end(), [](double x) { return std::isfinite(x); }));
    }
  }
}

// -- similar, copy, value semantics ---------------------------------------------------------

TEST_CASE("similar has the same shape and placement; copy is deep") {
  for (const auto& ds : device_sets()) {
    INFO("device set " << set_name(ds));
    for (const dims_t& s : std::vector<dims_t>{{0, 3}, {1, 1}, {7, 3}, {33, 17}, {3, 2}}) {
      for (const auto& np : placements(ds, 2)) {
        INFO("shape " << shape_str(s) << ", " << np.name);
        const auto host = random_values<float>(static_cast<std::size_t>(s[0] * s[1]));
        auto a = from_host(host, {s[0], s[1]}, np.p);
        auto sim = similar(a);
        static_assert(std::is_same_v<decltype(sim), Array<float, 2>>);
        CHECK(sim.shape() == a.shape());
        CHECK(sim.devices() == a.devices());
        CHECK(sim.is_replicated() == a.is_replicated());
        CHECK(sim.shard_dim() == a.shard_dim());
        CHECK(sim.placement_string() == a.placement_string());
        CHECK(sim.memory_kind() == a.memory_kind());
        // It is usable as a destination with a's placement.
        sim = a * 2.f;
        std::vector<float> twice(host.size());
        for (std::size_t i = 0; i < host.size(); ++i) twice[i] = host[i] * 2.f;
        CHECK(to_host(sim) == twice);
        CHECK(to_host(a) == host);

        auto c = copy(a);
        static_assert(std::is_same_v<decltype(c), Array<float, 2>>);
        CHECK(c.placement_string() == a.placement_string());
        CHECK(to_host(c) == host);
        c += 1.f;
        if (s[0] > 0) c(0, _) = -5.f;  // a view write on the copy
        CHECK(to_host(a) == host);  // the original is untouched
        auto hc = to_host(c);
        for (index_t j = 0; j < s[1]; ++j)
          for (index_t i = 0; i < s[0]; ++i) {
            const auto k = static_cast<std::size_t>(i + s[0] * j);
            if (hc[k] != (i == 0 ? -5.f : host[k] + 1.f)) {
              FAIL_CHECK("copy element " << k << " = " << hc[k]);
              i = s[0], j = s[1];
            }
          }
      }
    }
    // copy / similar of a view: an owning array with the view's shape and values.
    const auto host = random_values<float>(9 * 8);
    auto a = from_host(host, {9, 8}, shard(1, ds));
    auto v = a(range(1, 9, 3), _);
    auto cv = copy(v);
    static_assert(std::is_same_v<decltype(cv), Array<float, 2>>);
    REQUIRE(cv.shape() == std::array<index_t, 2>{3, 8});
    const auto hcv = to_host(cv);
    for (index_t j = 0; j < 8; ++j)
      for (index_t i = 0; i < 3; ++i)
        CHECK(hcv[static_cast<std::size_t>(i + 3 * j)] == host[static_cast<std::size_t>(1 + 3 * i + 9 * j)]);
    cv = 0.f;
    CHECK(to_host(a) == host);
    auto sv = similar(v);
    CHECK(sv.shape() == v.shape());
    CHECK(sv.devices() == v.devices());
  }
}

TEST_CASE("Array value semantics: copy is deep, move is cheap and leaves a usable empty array") {
  for (const auto& ds : device_sets()) {
    INFO("device set " << set_name(ds));
    for (index_t n : {index_t(0), index_t(1), index_t(7), index_t(257)}) {
      INFO("n = " << n);
      const auto host = random_values<float>(static_cast<std::size_t>(n * 3));
      auto a = from_host(host, {3, n}, shard(1, ds));

      // Copy construction.
      Array<float, 2> b(a);
      CHECK(b.placement_string() == a.placement_string());
      CHECK(to_host(b) == host);
      b = 42.f;
      CHECK(to_host(a) == host);
      const auto hb = to_host(b);
      CHECK(std::all_of(hb.begin(), hb.end(), [](float x) { return x == 42.f; }));

      // Copy assignment, same shape and placement: in place (the storage stays), deep.
      float* before = n > 0 ? b.host_data(0) : nullptr;  // unified memory: a host pointer
      b = a;
      CHECK(to_host(b) == host);
      if (before) CHECK(b.host_data(0) == before);
      b += 1.f;
      CHECK(to_host(a) == host);

      // Copy assignment, different shape and placement: takes the source's.
      auto c = zeros<float>({5, 2}, replicate(ds));
      c = a;
      CHECK(c.shape() == a.shape());
      CHECK(c.placement_string() == a.placement_string());
      CHECK(to_host(c) == host);
      c += -3.f;
      CHECK(to_host(a) == host);

      // Self-assignment keeps the values.
      auto& cref = c;
      c = cref;
      CHECK(c.shape() == a.shape());

      // Assigning a default-constructed array empties the destination.
      Array<float, 2> empty;
      c = empty;
      CHECK_FALSE(c.has_storage());
      CHECK(c.length() == 0);

      // Move construction: no copy (same storage), the source is left empty.
      Array<float, 2> d(a);
      float* storage = n > 0 ? d.host_data(0) : nullptr;
      Array<float, 2> e(std::move(d));
      CHECK(to_host(e) == host);
      if (storage) CHECK(e.host_data(0) == storage);
      CHECK_FALSE(d.has_storage());  // NOLINT(bugprone-use-after-move): moved-from state is specified
      CHECK(d.length() == 0);
      CHECK(d.empty());
      CHECK(to_host(d).empty());
      // ... and usable: it takes the shape of what is assigned to it.
      d = e * 2.f;
      CHECK(d.shape() == a.shape());
      std::vector<float> twice(host.size());
      for (std::size_t i = 0; i < host.size(); ++i) twice[i] = host[i] * 2.f;
      CHECK(to_host(d) == twice);

      // Move assignment.
      Array<float, 2> f = zeros<float>({1, 1}, on(ds[0]));
      f = std::move(e);
      CHECK(to_host(f) == host);
      if (storage) CHECK(f.host_data(0) == storage);
      CHECK_FALSE(e.has_storage());  // NOLINT(bugprone-use-after-move)
      e = a;
      CHECK(to_host(e) == host);
    }
  }
}

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
    for (const auto& np : placements(ds, 3)) {
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

TEST_CASE("a default-constructed array takes the shape and placement of an assigned expression; eval") {
  for (const auto& ds : device_sets()) {
    INFO("device set " << set_name(ds));
    for (const dims_t& s : std::vector<dims_t>{{0, 4}, {1, 1}, {7, 3}, {3, 2}, {33, 5, 13}}) {
      for (const auto& np : placements(ds, 2)) {
        INFO("shape " << shape_str(s) << ", " << np.name);
        const auto ha = random_values<float>(static_cast<std::size_t>(s[0] * s[1]));
        const auto hb = random_values<float>(static_cast<std::size_t>(s[0] * s[1]));
        auto a = from_host(ha, {s[0], s[1]}, np.p);
        auto b = from_host(hb, {s[0], s[1]}, np.p);
        std::vector<double> want(ha.size());
        for (std::size_t i = 0; i < ha.size(); ++i) want[i] = double(ha[i]) * double(hb[i]) + 1.0;

        Array<float, 2> c;
        CHECK_FALSE(c.has_storage());
        c = a * b + 1.f;
        CHECK(c.shape() == to_array<2>(s));
        CHECK(c.placement_string() == a.placement_string());
        check_all_close(to_host(c), want);

        Array<float, 2> c2 = a * b + 1.f;  // construction from an expression
        CHECK(c2.placement_string() == a.placement_string());
        check_all_close(to_host(c2), want);

        auto e = eval(a * b + 1.f);
        static_assert(std::is_same_v<decltype(e), Array<float, 2>>);
        CHECK(e.shape() == to_array<2>(s));
        CHECK(e.placement_string() == a.placement_string());
        check_all_close(to_host(e), want);
      }
      // A replicated operand that broadcasts along the shard dimension, then a sharded operand:
      // the result takes the sharded operand's placement.
      for (int d = 0; d < 2; ++d) {
        INFO("shard dim " << d << ", shape " << shape_str(s));
        dims_t rs = s;
        rs[d] = 1;
        const auto hr = random_values<float>(static_cast<std::size_t>(rs[0] * rs[1]));
        const auto hs = random_values<float>(static_cast<std::size_t>(s[0] * s[1]));
        auto r = from_host(hr, {rs[0], rs[1]}, replicate(ds));
        auto sh = from_host(hs, {s[0], s[1]}, shard(d, ds));
        Array<float, 2> out;
        out = r * sh + 1.f;
        CHECK(out.shape() == to_array<2>(s));
        CHECK(out.placement_string() == sh.placement_string());
        std::vector<double> want(hs.size());
        for (index_t j = 0; j < s[1]; ++j)
          for (index_t i = 0; i < s[0]; ++i) {
            const index_t ri = rs[0] == 1 ? 0 : i, rj = rs[1] == 1 ? 0 : j;
            want[static_cast<std::size_t>(i + s[0] * j)] =
                double(hr[static_cast<std::size_t>(ri + rs[0] * rj)]) * hs[static_cast<std::size_t>(i + s[0] * j)] + 1;
          }
        check_all_close(to_host(out), want);
      }
    }
  }
}

// -- printing ---------------------------------------------------------------------------------

TEST_CASE("operator<< prints a summary line and the values, eliding large arrays") {
  for (const auto& ds : device_sets()) {
    INFO("device set " << set_name(ds));
    for (const auto& np : placements(ds, 2)) {
      INFO(np.name);
      std::vector<float> one_to_12(12);
      for (int i = 0; i < 12; ++i) one_to_12[static_cast<std::size_t>(i)] = float(i + 1);
      auto a = from_host(one_to_12, {3, 4}, np.p);
      const std::string out = print(a);
      INFO(out);
      const std::string head = first_line(out);
      CHECK(contains(head, "3×4"));
      CHECK(contains(head, "Array{Float32, 2}"));
      CHECK(contains(head, a.placement_string()));
      if (np.p.kind == Placement::kind_t::single) CHECK(contains(head, ds.back().name()));
      // Every value is shown, row by row: row 0 holds 1 4 7 10 (column-major).
      for (int v = 1; v <= 12; ++v) CHECK(contains(out, std::to_string(v)));
      CHECK(count_lines(out) == 4);  // header + 3 rows
      std::istringstream rows(out);
      std::string line;
      std::getline(rows, line);
      std::getline(rows, line);
      std::istringstream row0(line);
      std::vector<std::string> cells;
      for (std::string c; row0 >> c;) cells.push_back(c);
      CHECK(cells == std::vector<std::string>{"1", "4", "7", "10"});
      CHECK_FALSE(contains(out, "…"));
      CHECK_FALSE(contains(out, "⋮"));
    }
    // Element type names and 1-d headers.
    CHECK(contains(first_line(print(from_host(std::vector<float>(5, 1), {5}, shard(0, ds)))), "5-element Array{Float32, 1}"));
    CHECK(contains(first_line(print(from_host(std::vector<std::int64_t>(2, 1), {2, 1, 1}, shard(0, ds)))), "2×1×1 Array{Int64, 3}"));
    CHECK(contains(first_line(print(ones<double>({2, 2, 2}, shard(2, ds)))), "2×2×2 Array{Float64, 3}"));
    CHECK(contains(first_line(print(from_host(std::vector<bool>(3, false), {1, 3, 1}, replicate(ds)))), "1×3×1 Array{Bool, 3}"));
    CHECK(contains(first_line(print(zeros<float>({0, 3}, shard(1, ds)))), "0×3 Array{Float32, 2}"));
    // Large arrays: elided, and the output stays short.
    {
      auto big = zeros<float>({1000, 1000}, shard(1, ds));
      const std::string out = print(big);
      INFO(out);
      CHECK(contains(first_line(out), "1000×1000"));
      CHECK(contains(out, "…"));
      CHECK(contains(out, "⋮"));
      CHECK(out.size() < 2000);
      CHECK(count_lines(out) < 20);
    }
    {
      std::vector<float> h(1 << 20);
      for (std::size_t i = 0; i < h.size(); ++i) h[i] = float(i);
      auto big = from_host(h, {1 << 20}, shard(0, ds));
      const std::string out = print(big);
      INFO(out);
      CHECK(contains(out, "⋮"));
      CHECK(contains(out, "1048575"));  // the last element is shown
      CHECK(out.size() < 1000);
      CHECK(count_lines(out) < 20);
    }
    {
      auto big = iota<std::int32_t>({4, 5, 100}, shard(2, ds));
      const std::string out = print(big);
      INFO(out);
      CHECK(contains(out, "…"));
      CHECK(contains(out, "1999"));  // the last slice is shown
      CHECK(contains(first_line(out), "4×5×100 Array{Int32, 3}"));
      CHECK(contains(out, "[:, :, 99] ="));
      CHECK(out.size() < 3000);
      CHECK(count_lines(out) < 60);
    }
    // A view prints like an array of its shape.
    {
      std::vector<float> h(20);
      for (std::size_t i = 0; i < h.size(); ++i) h[i] = float(i);
      auto a = from_host(h, {5, 4}, shard(1, ds));
      const std::string out = print(a(range(0, 2), _));
      INFO(out);
      CHECK(contains(first_line(out), "2×4"));
      CHECK(contains(first_line(out), "Array{Float32, 2}"));
      CHECK(contains(out, "15"));  // a(0, 3)
      CHECK_FALSE(contains(out, "19"));  // a(4, 3) is outside the view
    }
  }
  Array<float, 2> none;
  const std::string out = print(none);
  CHECK(contains(out, "Array{Float32, 2}"));
}
