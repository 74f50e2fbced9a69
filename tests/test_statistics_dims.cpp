// SPDX-License-Identifier: Apache-2.0
// findmax, findmin, argmax and argmin along dims against a plain first-wins loop: every element
// type, every dim and pair of dims of 3-d arrays (and all three), every placement, 1 to 8 devices,
// uneven and empty shards, views and expressions, ties, NaN and infinities; errors leave arrays
// intact.
#include "dims_reference.hpp"

#include <array>
#include <cmath>
#include <limits>
#include <string>
#include <utility>
#include <vector>

using namespace tessera_test;

namespace {

template <class T>
bool is_nan(T x) {
  if constexpr (std::is_floating_point_v<T>) return std::isnan(x);
  else return false;
}

template <class T>
struct Found {
  std::vector<T> value;
  std::vector<i64> index;  // column-major linear index into the input
};

// Julia's findmax/findmin along dims, as a loop: elements visited in increasing linear index, the
// first one kept unless a later one is strictly better; a NaN is better than anything and nothing
// is better than a NaN.
template <class T>
Found<T> reference(const std::vector<T>& v, const Dims& s, const std::array<bool, 3>& mask, bool is_max) {
  Dims o = s;
  for (int k = 0; k < 3; ++k)
    if (mask[static_cast<std::size_t>(k)]) o[static_cast<std::size_t>(k)] = 1;
  const auto on = static_cast<std::size_t>(volume(o));
  Found<T> f{std::vector<T>(on), std::vector<i64>(on, -1)};
  for (std::size_t i = 0; i < v.size(); ++i) {
    index_t r = static_cast<index_t>(i), oi = 0, stride = 1;
    for (std::size_t k = 0; k < 3; ++k) {
      oi += (mask[k] ? 0 : r % s[k]) * stride;
      r /= s[k];
      stride *= o[k];
    }
    const auto q = static_cast<std::size_t>(oi);
    const T x = v[i];
    bool take = f.index[q] < 0;
    if (!take && !is_nan(f.value[q])) take = is_nan(x) || (is_max ? f.value[q] < x : x < f.value[q]);
    if (take) {
      f.value[q] = x;
      f.index[q] = static_cast<i64>(i);
    }
  }
  return f;
}

// Random values with many ties (a few distinct values), some NaN and infinities for floating
// types, and the extremes of integer types (which equal the fold's initial value).
template <class T>
std::vector<T> tricky(std::size_t n) {
  auto v = random_values<T>(n);
  std::uniform_int_distribution<int> pick(0, 99);
  for (auto&& x : v) {
    const int p = pick(rng());
    if constexpr (std::is_floating_point_v<T>) {
      x = std::round(x * 2) / 2;  // 9 distinct values: ties everywhere
      if (p < 4) x = std::numeric_limits<T>::quiet_NaN();
      else if (p < 6) x = std::numeric_limits<T>::infinity();
      else if (p < 8) x = -std::numeric_limits<T>::infinity();
    } else if constexpr (!std::is_same_v<T, bool>) {
      if (p < 3) x = std::numeric_limits<T>::lowest();
      else if (p < 6) x = std::numeric_limits<T>::max();
    }
  }
  return v;
}

const std::vector<std::array<bool, 3>> masks{{true, false, false}, {false, true, false}, {false, false, true},
                                             {true, true, false},  {true, false, true},  {false, true, true},
                                             {true, true, true}};

std::string mask_string(const std::array<bool, 3>& m) {
  std::string s = "dims(";
  for (int k = 0; k < 3; ++k)
    if (m[static_cast<std::size_t>(k)]) s += (s.size() > 5 ? "," : "") + std::to_string(k);
  return s + ")";
}

// The four functions on x (an array, a view or an expression whose values are `v`, of shape `s`)
// against the reference, with the result shape and the placement of sum(x, dims(...)).
template <class T, class X>
void check_all(const X& x, const std::vector<T>& v, const Dims& s, const std::array<bool, 3>& mask) {
  INFO(mask_string(mask));
  const ReduceDims d = to_dims<3>(mask);
  const auto fmax = findmax(x, d);
  const auto fmin = findmin(x, d);
  static_assert(std::is_same_v<std::remove_cvref_t<decltype(fmax)>, std::pair<Array<T, 3>, Array<i64, 3>>>);
  static_assert(std::is_same_v<decltype(argmax(x, d)), Array<i64, 3>>);
  const auto like = sum(x, d);  // the placement every dims reduction gives
  for (const auto* r : {&fmax, &fmin}) {
    for (int k = 0; k < 3; ++k) CHECK(r->second.shape()[k] == (mask[static_cast<std::size_t>(k)] ? 1 : s[static_cast<std::size_t>(k)]));
    CHECK(r->first.shape() == like.shape());
    CHECK(detail::describe_placement(r->first.layout()) == detail::describe_placement(like.layout()));
    CHECK(detail::describe_placement(r->second.layout()) == detail::describe_placement(like.layout()));
  }
  const auto wmax = reference(v, s, mask, true);
  const auto wmin = reference(v, s, mask, false);
  check_replicas(fmax.first, wmax.value);
  check_replicas(fmax.second, wmax.index);
  check_replicas(fmin.first, wmin.value);
  check_replicas(fmin.second, wmin.index);
  check_replicas(argmax(x, d), wmax.index);
  check_replicas(argmin(x, d), wmin.index);
}

template <class T>
void check_shape(const DeviceSet& ds, const Dims& s, bool all_placements = true) {
  const auto v = tricky<T>(static_cast<std::size_t>(volume(s)));
  for (const auto& p : placements(3, ds, all_placements)) {
    INFO("device set " << set_name(ds) << ", shape " << dims_string(s) << ", " << p.name);
    const auto a = from_host(v, to_shape<3>(s), p.p);
    for (const auto& m : masks) {
      index_t reduced = 1, kept = 1;
      for (std::size_t k = 0; k < 3; ++k) (m[k] ? reduced : kept) *= s[k];
      if (reduced == 0 && kept > 0) continue;  // throws: the error test
      check_all(a, v, s, m);
    }
  }
}

// 1 to 8 host devices in the host variant; the GPU sets in the CUDA variant.
std::vector<DeviceSet> one_to_eight() {
  if (cuda_variant()) return device_sets();
  std::vector<DeviceSet> out;
  for (int k = 1; k <= 8; ++k) out.push_back(host_devices(k));
  return out;
}

}  // namespace

TEST_CASE_TEMPLATE("findmax/findmin/argmax/argmin along every dim and pair of dims", T, bool, i32, i64, float, double) {
  for (const auto& ds : device_sets()) {
    const index_t p = static_cast<index_t>(ds.size());
    check_shape<T>(ds, {1, 1, 1});
    check_shape<T>(ds, {7, 5, 3});          // odd; fewer elements than devices along some dims
    check_shape<T>(ds, {33, 3, 2 * p + 1});  // 2^k + 1, uneven shards
    check_shape<T>(ds, {31, 17, 2});         // 2^k - 1
    check_shape<T>(ds, {3, 0, 4});           // an empty dim: empty results where it is kept
  }
}

TEST_CASE("along dims over 1 to 8 devices, long slices and a large array (float)") {
  for (const auto& ds : one_to_eight()) check_shape<float>(ds, {13, 6, 11});
  for (const auto& ds : device_sets()) {
    // Long reduced runs: GPU lanes cooperating on one output and chunks of the reduced range.
    check_shape<float>(ds, {4099, 2, 3}, false);
    check_shape<double>(ds, {3, 2, 20001}, false);
    check_shape<float>(ds, {257, 65, 63}, ds.size() < 3);  // about 2^20 elements
  }
}

TEST_CASE("along dims of views and expressions: indices into the view or expression") {
  for (const auto& ds : device_sets()) {
    const Dims s{17, 6, 9};
    const auto v = tricky<float>(static_cast<std::size_t>(volume(s)));
    for (const auto& p : placements(3, ds)) {
      INFO("device set " << set_name(ds) << ", " << p.name);
      const auto a = from_host(v, to_shape<3>(s), p.p);
      // a(range(2, 15, 3), _, range(1, 9)): 5 x 6 x 8, offset and strided.
      const auto view = a(range(2, 15, 3), _, range(1, 9));
      const Dims vs{5, 6, 8};
      std::vector<float> vv;
      for (index_t k = 1; k < 9; ++k)
        for (index_t j = 0; j < 6; ++j)
          for (index_t i = 2; i < 15; i += 3) vv.push_back(v[static_cast<std::size_t>(i + 17 * (j + 6 * k))]);
      std::vector<float> twice(v.size());
      for (std::size_t i = 0; i < v.size(); ++i) twice[i] = 2.f * v[i];
      for (const auto& m : masks) {
        check_all(view, vv, vs, m);
        check_all(a * 2.f, twice, s, m);
      }
    }
  }
}

TEST_CASE("NaN and ties along dims, as Julia: findmax([1, NaN, 3]) == (NaN, 2) (1-based)") {
  for (const auto& ds : device_sets()) {
    const float nan = std::numeric_limits<float>::quiet_NaN();
    // Columns: [1, NaN, 3], [NaN, 5, NaN], [2, 2, 1], [-inf, -inf, -inf].
    const std::vector<float> v{1, nan, 3, nan, 5, nan, 2, 2, 1, -INFINITY, -INFINITY, -INFINITY};
    for (const auto& p : {shard(0, ds), shard(1, ds), replicate(ds)}) {
      const auto a = from_host(v, Shape<2>{3, 4}, p);
      const auto [mv, mi] = findmax(a, dims(0));
      const auto [nv, ni] = findmin(a, dims(0));
      check_equal(to_host(mv), std::vector<float>{nan, nan, 2, -INFINITY});
      check_equal(to_host(mi), std::vector<i64>{1, 3, 6, 9});
      check_equal(to_host(nv), std::vector<float>{nan, nan, 1, -INFINITY});
      check_equal(to_host(ni), std::vector<i64>{1, 3, 8, 9});
      check_equal(to_host(argmax(a, dims(1))), std::vector<i64>{3, 1, 5});
      check_equal(to_host(argmin(a, dims(0, 1))), std::vector<i64>{1});
    }
  }
}

TEST_CASE("errors along dims are named and leave the arrays intact") {
  for (const auto& ds : device_sets()) {
    const auto v = random_values<float>(4 * 5);
    // An empty reduced dim with a non-empty result: no value to return (Julia: slices must be
    // non-empty).
    const auto e = make<3>(std::vector<float>{}, {0, 4, 5}, shard(2, ds));
    check_mentions(expect_error<invalid_argument>([&] { (void)findmax(e, dims(0)); }),
                   {"findmax", "empty dimension", "0×4×5", "at least one element"});
    check_mentions(expect_error<invalid_argument>([&] { (void)argmin(e, dims(0, 2)); }), {"argmin", "at least one element"});
    CHECK(findmin(e, dims(1)).first.shape() == Shape<3>{0, 1, 5});  // nothing to fold, nothing to return
    // Bad dims.
    const auto a = make<3>(v, {4, 5, 1}, shard(1, ds));
    check_mentions(expect_error<invalid_argument>([&] { (void)argmax(a, dims(3)); }),
                   {"argmax", "dimension 3", "outside"});
    check_mentions(expect_error<invalid_argument>([&] { (void)findmin(a, dims(1, 1)); }),
                   {"findmin", "listed twice"});
    // Operands on different placements.
    if (ds.size() > 1) {
      const auto b = make<3>(v, {4, 5, 1}, shard(0, ds));
      check_mentions(expect_error<placement_mismatch>([&] { (void)findmax(a + b, dims(0)); }), {"dims"});
      check_equal(to_host(b), v);
    }
    check_equal(to_host(a), v);
    check_equal(to_host(e), std::vector<float>{});
    // The library keeps working.
    check_equal(to_host(argmax(a, dims(0, 1))), std::vector<i64>{argmax(a)});
  }
}
