// SPDX-License-Identifier: Apache-2.0
// matmul and transpose: every supported sharding combination against double host loops, on fresh
// random data, odd and empty shapes and uneven shards; bad shapes and placements throw named
// errors and leave the operands intact.
#include "test_support.hpp"

#include <string>
#include <vector>

using namespace tessera_test;

namespace {

// C = A * B in double, column-major; B is k x n (n == 1 for a vector).
std::vector<double> ref_product(const std::vector<double>& a, const std::vector<double>& b, index_t m, index_t k,
                                index_t n) {
  std::vector<double> c(static_cast<std::size_t>(m * n), 0.0);
  for (index_t j = 0; j < n; ++j)
    for (index_t p = 0; p < k; ++p)
      for (index_t i = 0; i < m; ++i) c[i + j * m] += a[i + p * m] * b[p + j * k];
  return c;
}

template <class T>
std::vector<double> widen(const std::vector<T>& v) {
  return {v.begin(), v.end()};
}

template <class T>
double tol() {
  return std::is_same_v<T, float> ? 1e-4 : 1e-11;
}

// The placements a product's operands take in one combination.
struct Combo {
  const char* name;
  Placement a, b;
  Placement result;  // default: the natural one
};

std::vector<Combo> combos(const DeviceSet& ds, bool matrix_b) {
  std::vector<Combo> c = {
      {"A rows, B replicated", shard(0, ds), replicate(ds), {}},
      {"A columns, B rows (allreduce)", shard(1, ds), shard(0, ds), {}},
      {"A columns, B rows (reduce_scatter)", shard(1, ds), shard(0, ds), shard(matrix_b ? 1 : 0, ds)},
      {"A columns, B rows (to one device)", shard(1, ds), shard(0, ds), on(ds.back())},
      {"A columns, B replicated", shard(1, ds), replicate(ds), {}},
      {"A replicated, B rows", replicate(ds), shard(0, ds), {}},
      {"both replicated", replicate(ds), replicate(ds), {}},
      {"both on one device", on(ds.back()), on(ds.back()), {}},
  };
  if (matrix_b) c.push_back({"A replicated, B columns", replicate(ds), shard(1, ds), {}});
  return c;
}

template <class T>
void check_products(const DeviceSet& ds, index_t m, index_t k, index_t n) {
  const auto av = random_values<T>(static_cast<std::size_t>(m * k));
  const auto bv = random_values<T>(static_cast<std::size_t>(k * n));
  const auto xv = random_values<T>(static_cast<std::size_t>(k));
  const auto want_c = ref_product(widen(av), widen(bv), m, k, n);
  const auto want_y = ref_product(widen(av), widen(xv), m, k, 1);
  for (bool matrix_b : {false, true}) {
    for (const auto& c : combos(ds, matrix_b)) {
      INFO(set_name(ds) << ", " << std::string(c.name) << ", A " << m << "x" << k << (matrix_b ? ", B matrix" : ", x vector"));
      Array<T, 2> a = from_host(av, {m, k}, c.a);
      if (matrix_b) {
        Array<T, 2> b = from_host(bv, {k, n}, c.b);
        Array<T, 2> got = matmul(a, b, c.result);
        CHECK(got.shape() == Shape<2>{m, n});
        if (c.result.kind == Placement::kind_t::single) CHECK(got.devices() == DeviceSet{ds.back()});
        check_all_close(to_host(got), want_c, tol<T>(), tol<T>());
      } else {
        Array<T, 1> x = from_host(xv, {k}, c.b);
        Array<T, 1> got = matmul(a, x, c.result);
        CHECK(got.shape() == Shape<1>{m});
        if (c.result.kind == Placement::kind_t::single) CHECK(got.devices() == DeviceSet{ds.back()});
        check_all_close(to_host(got), want_y, tol<T>(), tol<T>());
      }
    }
  }
}

}  // namespace

TEST_CASE("matmul and matvec match double loops for every supported sharding") {
  const std::vector<std::array<index_t, 3>> shapes = {{1, 1, 1}, {7, 5, 3}, {33, 31, 17}, {64, 129, 9},
                                                      {0, 4, 3},  {5, 0, 3}, {4, 3, 0},    {257, 255, 2}};
  for (const auto& ds : device_sets()) {
    for (auto [m, k, n] : shapes) {
      check_products<float>(ds, m, k, n);
      check_products<double>(ds, m, k, n);
    }
  }
}

TEST_CASE("a large matvec with the inner dimension split") {
  for (const auto& ds : device_sets()) {
    const index_t m = 300, k = 20011;
    const auto av = random_values<float>(static_cast<std::size_t>(m * k));
    const auto xv = random_values<float>(static_cast<std::size_t>(k));
    const auto want = ref_product(widen(av), widen(xv), m, k, 1);
    Array<float, 2> w = from_host(av, {m, k}, shard(1, ds));
    Array<float, 1> x = from_host(xv, {k}, shard(0, ds));
    Array<float, 1> y = matmul(w, x);
    CHECK(y.is_replicated() == (ds.size() > 1));
    check_all_close(to_host(y), want, 1e-4, 1e-3);
  }
}

TEST_CASE("transpose is a view, sharded along the other dimension, usable in products") {
  for (const auto& ds : device_sets()) {
    const index_t m = 13, k = 9;
    const auto av = random_values<double>(static_cast<std::size_t>(m * k));
    Array<double, 2> a = from_host(av, {m, k}, shard(1, ds));
    auto at = transpose(a);
    CHECK(at.shape() == Shape<2>{k, m});
    if (ds.size() > 1) CHECK(at.shard_dim() == 0);
    std::vector<double> want(static_cast<std::size_t>(m * k));
    for (index_t i = 0; i < m; ++i)
      for (index_t j = 0; j < k; ++j) want[j + i * k] = av[i + j * m];
    check_all_close(to_host(at), want, 0, 0);
    // A^T (k x m, rows sharded) times x replicated.
    const auto xv = random_values<double>(static_cast<std::size_t>(m));
    Array<double, 1> x = from_host(xv, {m}, replicate(ds));
    check_all_close(to_host(matmul(at, x)), ref_product(want, xv, k, m, 1), 1e-11, 1e-11);
    // A row of a vector: 1 x m.
    auto row = transpose(x);
    CHECK(row.shape() == Shape<2>{1, m});
    check_all_close(to_host(row), xv, 0, 0);
    // A strided view operand is copied to contiguous storage first.
    Array<double, 2> big = from_host(random_values<double>(static_cast<std::size_t>(2 * m * k)), {2 * m, k},
                                     replicate(ds));
    auto every_other = big(range(0, 2 * m, 2), _);
    const auto ev = to_host(every_other);
    const auto yv = random_values<double>(static_cast<std::size_t>(k));
    Array<double, 1> y = from_host(yv, {k}, replicate(ds));
    check_all_close(to_host(matmul(every_other, y)), ref_product(ev, yv, m, k, 1), 1e-11, 1e-11);
    // Elementwise * is unchanged: a matrix times a column broadcasts.
    Array<double, 2> scaled = a * transpose(transpose(a));
    std::vector<double> sq(av.size());
    for (std::size_t i = 0; i < av.size(); ++i) sq[i] = av[i] * av[i];
    check_all_close(to_host(scaled), sq, 1e-12, 0);
  }
}

TEST_CASE("matmul refuses mismatched shapes and placements, leaving operands intact") {
  for (const auto& ds : device_sets()) {
    const auto av = random_values<float>(12);
    Array<float, 2> a = from_host(av, {3, 4}, shard(0, ds));
    Array<float, 2> b = from_host(random_values<float>(10), {5, 2}, replicate(ds));
    const std::string msg = expect_error<dimension_mismatch>([&] { (void)matmul(a, b); });
    check_mentions(msg, {"3×4", "5×2", "4 columns", "5 rows"});
    if (ds.size() > 1) {
      Array<float, 2> bc = from_host(random_values<float>(8), {4, 2}, shard(1, ds));
      const std::string pm = expect_error<placement_mismatch>([&] { (void)matmul(a, bc); });
      check_mentions(pm, {"sharded along rows", "Fix"});
      Array<float, 1> x = from_host(random_values<float>(4), {4}, replicate(ds));
      const std::string rp = expect_error<invalid_argument>([&] { (void)matmul(a, x, replicate(ds)); });
      check_mentions(rp, {"sharded along dim 0", "Leave the placement out"});
      CHECK(matmul(a, x, shard(0, ds)).shard_dim() == 0);
      // The inner dimension split over ds: the sum lands on one of ds, not elsewhere.
      Array<float, 2> ak = from_host(random_values<float>(12), {3, 4}, shard(1, ds));
      Array<float, 1> xk = from_host(random_values<float>(4), {4}, shard(0, ds));
      const Device outside = ds[0].is_host() ? host_devices(static_cast<int>(ds.size()) + 1).back() : Device(-1);
      if (outside.id() >= 0) {
        check_mentions(expect_error<invalid_argument>([&] { (void)matmul(ak, xk, on(outside)); }),
                       {"partial products live on", "copy(c, on(device))"});
      }
    }
    check_equal(to_host(a), av);
  }
}

TEST_CASE("a reduce-scattered product keeps A's memory kind") {
  for (const auto& ds : device_sets()) {
    if (ds.size() < 2) continue;
    Array<float, 2> a = from_host(random_values<float>(6 * 9), {6, 9}, shard(1, ds));
    Array<float, 1> x = from_host(random_values<float>(9), {9}, shard(0, ds));
    CHECK(matmul(a, x, shard(0, ds)).memory_kind() == a.memory_kind());
    CHECK(matmul(a, x).memory_kind() == a.memory_kind());
  }
}

TEST_CASE("reverse is a view of any dimension, sharded or not") {
  for (const auto& ds : device_sets()) {
    for (index_t n : {index_t(0), index_t(1), index_t(7), index_t(1000)}) {
      const auto v = random_values<float>(static_cast<std::size_t>(n));
      Array<float, 1> x = put(v, ds);
      std::vector<double> want(v.rbegin(), v.rend());
      check_all_close(to_host(reverse(x)), want, 0, 0);
      Array<float, 1> y = reverse(x) * 2.f;  // usable in expressions
      for (auto& w : want) w *= 2;
      check_all_close(to_host(y), want, 0, 0);
    }
    const auto m = random_values<double>(5 * 6);
    Array<double, 2> a = from_host(m, {5, 6}, shard(1, ds));
    std::vector<double> want(m.size());
    for (index_t j = 0; j < 6; ++j)
      for (index_t i = 0; i < 5; ++i) want[static_cast<std::size_t>(i + j * 5)] = m[static_cast<std::size_t>(i + (5 - j) * 5)];
    check_all_close(to_host(reverse(a, 1)), want, 0, 0);
    (void)expect_error<invalid_argument>([&] { (void)reverse(a, 2); });
  }
}
