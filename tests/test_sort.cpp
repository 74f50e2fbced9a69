// SPDX-License-Identifier: Apache-2.0
// sort, sortperm and unique against std::stable_sort with Julia's isless: every sweep size over
// every device set, four element types, both orders, NaN and signed zeros, heavy duplicates
// (stability), views, uneven and empty blocks, replicated and single-device inputs, bad ranks.
#include "test_support.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <numeric>

using namespace tessera_test;

namespace {

// Julia's isless: NaN after everything, -0.0 before 0.0.
template <class T>
bool isless(T a, T b) {
  if constexpr (std::is_floating_point_v<T>) {
    if (std::isnan(a) || std::isnan(b)) return !std::isnan(a) && std::isnan(b);
    if (a == b) return std::signbit(a) && !std::signbit(b);
  }
  return a < b;
}

// Julia's isequal, bitwise for the values the sort writes: NaN equals NaN, -0.0 differs from 0.0.
template <class T>
bool same(T a, T b) {
  if constexpr (std::is_floating_point_v<T>) {
    if (std::isnan(a) || std::isnan(b)) return std::isnan(a) && std::isnan(b);
    return a == b && std::signbit(a) == std::signbit(b);
  }
  return a == b;
}

template <class T>
[[gnu::noipa]] std::vector<std::int64_t> ref_perm(const std::vector<T>& v, bool rev) {
  std::vector<std::int64_t> p(v.size());
  std::iota(p.begin(), p.end(), std::int64_t(0));
  std::stable_sort(p.begin(), p.end(), [&](std::int64_t a, std::int64_t b) {
    const auto i = static_cast<std::size_t>(a), j = static_cast<std::size_t>(b);
    return rev ? isless(v[j], v[i]) : isless(v[i], v[j]);
  });
  return p;
}

template <class T>
void check_same_values(const std::vector<T>& got, const std::vector<T>& want) {
  REQUIRE(got.size() == want.size());
  for (std::size_t i = 0; i < got.size(); ++i) {
    if (!same(got[i], want[i])) {
      FAIL_CHECK("element " << i << ": got " << static_cast<double>(got[i]) << ", expected "
                            << static_cast<double>(want[i]));
      return;
    }
  }
}

template <class T, class X>
void check_sorts(const X& x, const std::vector<T>& v) {
  for (bool rev : {false, true}) {
    INFO("rev = " << rev);
    const auto p = ref_perm(v, rev);
    std::vector<T> want(v.size());
    for (std::size_t i = 0; i < v.size(); ++i) want[i] = v[static_cast<std::size_t>(p[i])];
    const Array<T, 1> s = sort(x, {.rev = rev});
    check_same_values(to_host(s), want);
    CHECK(s.devices() == x.devices());
    for (std::size_t k = 0; k < s.layout().parts.size(); ++k)  // the input's blocks
      CHECK(s.layout().parts[k].extent[0] == x.layout().parts[k].extent[0]);
    const Array<std::int64_t, 1> sp = sortperm(x, {.rev = rev});
    check_equal(to_host(sp), p);
    CHECK(sp.devices() == x.devices());
  }
}

template <class T>
[[gnu::noipa]] std::vector<T> ref_unique(std::vector<T> v) {
  std::stable_sort(v.begin(), v.end(), [](T a, T b) { return isless(a, b); });
  v.erase(std::unique(v.begin(), v.end(), [](T a, T b) { return same(a, b); }), v.end());
  return v;
}

// Few distinct values (ties everywhere), with NaNs and signed zeros among the floating ones.
template <class T>
std::vector<T> tied_values(std::size_t n) {
  auto v = random_values<T>(n, -0.3, 0.3);  // integers -3 .. 3; floating values below
  if constexpr (std::is_floating_point_v<T>) {
    const T pool[] = {T(-1.5), T(-0.0), T(0.0), T(2), std::numeric_limits<T>::infinity(),
                      -std::numeric_limits<T>::infinity(), std::numeric_limits<T>::quiet_NaN(),
                      -std::numeric_limits<T>::quiet_NaN(), T(7)};
    const auto idx = random_values<std::int32_t>(n, 0, 0.8);  // 0 .. 8
    for (std::size_t i = 0; i < n; ++i) v[i] = pool[idx[i]];
  }
  return v;
}

template <class T>
void sort_case(const DeviceSet& ds, std::size_t n) {
  const auto v = random_values<T>(n, -1e3, 1e3);
  check_sorts<T>(put(v, ds), v);
  if (n > 100000) return;  // ties at that size: the large-vector case below
  const auto t = tied_values<T>(n);
  const Array<T, 1> xt = put(t, ds);
  check_sorts<T>(xt, t);
  const Array<T, 1> u = unique(xt);
  check_same_values(to_host(u), ref_unique(t));
  CHECK(u.devices() == ds);
  check_same_values(to_host(xt), t);  // the input is untouched
}

}  // namespace

TEST_CASE("sort, sortperm, unique of float and int32 vectors: every size, every device set") {
  for_each_case([](const DeviceSet& ds, std::size_t n) {
    sort_case<float>(ds, n);
    sort_case<std::int32_t>(ds, n);
  });
}

TEST_CASE("sort, sortperm, unique of double and int64 vectors: every size, every device set") {
  for_each_case([](const DeviceSet& ds, std::size_t n) {
    sort_case<double>(ds, n);
    sort_case<std::int64_t>(ds, n);
  });
}

TEST_CASE("NaN last (first with rev), -0.0 before 0.0, the quiet NaN written") {
  const float nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
  for (const auto& ds : device_sets()) {
    const std::vector<float> v{3.f, -nan, 0.f, -inf, nan, -0.f, 1.f, inf, -2.f};
    const auto x = put(v, ds);
    const auto s = to_host(sort(x));
    REQUIRE(s.size() == 9);
    CHECK(s[0] == -inf);
    CHECK((s[2] == 0.f && std::signbit(s[2]) && s[3] == 0.f && !std::signbit(s[3])));
    CHECK(s[6] == inf);
    CHECK((std::isnan(s[7]) && std::isnan(s[8])));
    check_equal(to_host(sortperm(x)), std::vector<std::int64_t>{3, 8, 5, 2, 6, 0, 7, 1, 4});
    check_equal(to_host(sortperm(x, {.rev = true})), std::vector<std::int64_t>{1, 4, 7, 0, 6, 2, 5, 8, 3});
    const auto u = to_host(unique(x));
    REQUIRE(u.size() == 8);  // both NaNs are one value; the zeros are two
    CHECK(std::isnan(u[7]));
  }
}

TEST_CASE("views, replicated and single-device inputs keep their placement") {
  for (const auto& ds : device_sets()) {
    INFO(set_name(ds));
    const auto f = random_values<float>(60, -10, 10);
    const auto x = put(f, ds);
    // A window with uneven blocks (some empty), a strided and a reversed view.
    auto w = x(range(7, 53));
    check_sorts<float>(w, std::vector<float>(f.begin() + 7, f.begin() + 53));
    auto st = x(range(1, 60, 3));
    check_sorts<float>(st, to_host(eval(st)));
    auto rv = reverse(x, 0);
    check_sorts<float>(rv, std::vector<float>(f.rbegin(), f.rend()));
    check_same_values(to_host(unique(rv)), ref_unique(f));
    // A column of a matrix sharded along rows; a row across the shards of shard(1).
    const auto m = make<2>(f, {6, 10}, shard(0, ds));
    check_sorts<float>(m(_, 3), std::vector<float>(f.begin() + 18, f.begin() + 24));
    const auto mr = make<2>(f, {6, 10}, shard(1, ds));
    check_sorts<float>(mr(2, _), to_host(eval(mr(2, _))));
    // Replicated and on one device: every replica holds the result.
    const auto r = from_host(f, {60}, replicate(ds));
    const Array<float, 1> sr = sort(r);
    CHECK(sr.is_replicated());
    auto want = f;
    std::sort(want.begin(), want.end());
    check_replicas(sr, want);
    check_replicas(sortperm(r), ref_perm(f, false));
    const Array<float, 1> ur = unique(r);
    CHECK(ur.is_replicated());
    check_replicas(ur, ref_unique(f));
    const auto o = from_host(f, {60}, on(ds.back()));
    const Array<float, 1> so = sort(o * 2.f);  // an expression
    CHECK(so.devices() == DeviceSet{ds.back()});
    for (auto& e : want) e *= 2.f;
    check_equal(to_host(so), want);
    CHECK(unique(o).devices() == DeviceSet{ds.back()});
  }
}

TEST_CASE("a large vector with heavy ties: stable sortperm across shards") {
  for (const auto& ds : device_sets()) {
    const std::size_t n = (1 << 20) + 3;
    auto v = random_values<std::int32_t>(n, -0.5, 0.5);  // -5 .. 5
    const auto x = put(v, ds);
    check_equal(to_host(sortperm(x)), ref_perm(v, false));
    check_equal(to_host(sortperm(x, {.rev = true})), ref_perm(v, true));
    check_equal(to_host(unique(x)), ref_unique(v));
  }
}

TEST_CASE("sort of a matrix throws invalid_argument naming the rank and shape, array intact") {
  for (const auto& ds : device_sets()) {
    const auto f = random_values<float>(12);
    const auto a = make<2>(f, {3, 4}, shard(1, ds));
    auto msg = expect_error<invalid_argument>([&] { (void)sort(a); });
    check_mentions(msg, {"sort(v)", "vector (rank 1)", "rank 2", "3×4"});
    msg = expect_error<invalid_argument>([&] { (void)sortperm(a, {.rev = true}); });
    check_mentions(msg, {"sortperm", "rank 2"});
    msg = expect_error<invalid_argument>([&] { (void)unique(a + 1.f); });
    check_mentions(msg, {"unique", "rank 2"});
    check_equal(to_host(a), f);
  }
}
