// SPDX-License-Identifier: Apache-2.0
// Julia's broadcast rules, checked for values against plain loops over std::vector:
//   - shapes align from the first dimension; missing trailing dimensions count as 1;
//   - a size-1 dimension stretches, in either operand, several at once;
//   - rank-1 vectors over rank-2/3 arrays, 0-d arrays and scalars;
//   - empty dimensions (size 0) broadcast with 1 and with 0;
// and every error: tessera::dimension_mismatch names both shapes and the dimension, for
// combining operands and for assigning to a destination the expression does not broadcast to,
// and leaves every array intact. Assignment broadcasts into an existing array (c = v, c = 0.f).
#include "test_support.hpp"

#include <algorithm>
#include <functional>
#include <optional>
#include <string>
#include <vector>

using namespace tessera;
using tessera_test::check_all_close;
using tessera_test::check_mentions;
using tessera_test::device_sets;
using tessera_test::Dims;
using tessera_test::dims_string;
using tessera_test::expect_error;
using tessera_test::random_values;
using tessera_test::set_name;
using tessera_test::to_shape;
using tessera_test::volume;

namespace {

// A host array: a column-major shape and fresh random values.
struct Host {
  Dims shape;
  std::vector<float> v;
};

Host random_host(const Dims& shape) { return {shape, random_values<float>(static_cast<std::size_t>(volume(shape)))}; }

// Julia's rule, written independently of the library: pad with 1s, then each pair of sizes must
// be equal or contain a 1. nullopt when the shapes do not broadcast.
std::optional<Dims> ref_shape(const Dims& a, const Dims& b) {
  const std::size_t r = std::max(a.size(), b.size());
  Dims out(r);
  for (std::size_t k = 0; k < r; ++k) {
    const index_t x = k < a.size() ? a[k] : 1, y = k < b.size() ? b[k] : 1;
    if (x == y || y == 1) out[k] = x;
    else if (x == 1) out[k] = y;
    else return std::nullopt;
  }
  return out;
}

// The element of `h` that broadcasts to the multi-index `idx` of a (possibly higher-rank) result.
double ref_at(const Host& h, const Dims& idx) {
  index_t off = 0, st = 1;
  for (std::size_t k = 0; k < h.shape.size(); ++k) {
    const index_t i = h.shape[k] == 1 ? 0 : idx[k];
    off += i * st;
    st *= h.shape[k];
  }
  return h.v[static_cast<std::size_t>(off)];
}

// f(a[idx], b[idx]) over every index of `out`, column-major, in double.
std::vector<double> ref_binary(const Host& a, const Host& b, const Dims& out,
                               const std::function<double(double, double)>& f) {
  const index_t n = volume(out);
  std::vector<double> r(static_cast<std::size_t>(n));
  Dims idx(out.size(), 0);
  for (index_t i = 0; i < n; ++i) {
    r[static_cast<std::size_t>(i)] = f(ref_at(a, idx), ref_at(b, idx));
    for (std::size_t k = 0; k < out.size(); ++k) {
      if (++idx[k] < out[k]) break;
      idx[k] = 0;
    }
  }
  return r;
}

template <int N>
Dims to_dims(const Shape<N>& s) {
  return Dims(s.begin(), s.end());
}

template <int N>
Array<float, N> make(const Host& h, const Placement& p) {
  return tessera_test::make<N>(h.v, h.shape, p);
}

// Broadcasting assignment `dst = expr` into an existing Array.
//  - An Array of the same type on the right is copy assignment (std::vector value semantics:
//    dst takes its shape and placement, see the test "copy assignment ..."), so that case goes
//    through assign(), which broadcasts.
//  - LIBRARY BUG: Array<T, N>::operator=(expression) does not compile when the expression has a
//    lower rank than N (c = v for a matrix c and a vector v): its default-constructed branch
//    instantiates materialize_as, whose TESSERA_RANK_MISMATCH static_assert fires (reproduced by
//    tests/compile_fail/ok_assign_lower_rank.cpp). Until that is fixed the lower-rank case goes
//    through assign(), which runs the same assign_node.
template <class T, int N, class E>
void set(Array<T, N>& dst, E&& e) {
  if constexpr (detail::node_t<E>::rank == N && !std::is_same_v<std::remove_cvref_t<E>, Array<T, N>>) {
    dst = std::forward<E>(e);
  } else {
    assign(dst, std::forward<E>(e));
  }
}

// Checks a - 2*b against the reference: through eval (the result takes the operands'
// placement), the constructor from an expression, and assignment into an array created with
// placement `pc`. The operands must be left untouched. (One expression type per pair of ranks
// keeps the compile time low; the tests call it with the operands in both orders.)
template <int NA, int NB>
void check_pair(const Host& ha, const Host& hb, const Placement& pa, const Placement& pb, const Placement& pc) {
  constexpr int R = NA > NB ? NA : NB;
  INFO("shapes " << dims_string(ha.shape) << " and " << dims_string(hb.shape));
  const auto want_shape = ref_shape(ha.shape, hb.shape);
  REQUIRE(want_shape.has_value());
  const auto want = ref_binary(ha, hb, *want_shape, [](double x, double y) { return x - 2 * y; });
  const auto a = make<NA>(ha, pa);
  const auto b = make<NB>(hb, pb);

  auto e = eval(a - 2.f * b);
  static_assert(decltype(e)::rank == R, "the result has the larger rank");
  static_assert(std::is_same_v<typename decltype(e)::value_type, float>, "a float scalar keeps float");
  CHECK(to_dims<R>(e.shape()) == *want_shape);
  check_all_close(to_host(e), want);

  Array<float, R> d = a - 2.f * b;  // constructor from an expression
  CHECK(to_dims<R>(d.shape()) == *want_shape);
  check_all_close(to_host(d), want);

  Array<float, R> c(to_shape<R>(*want_shape), pc);
  c = a - 2.f * b;
  check_all_close(to_host(c), want);

  CHECK(to_host(a) == ha.v);
  CHECK(to_host(b) == hb.v);
}

// Sizes (m, n) for the rank-2 sweeps: 0, 1, odd, 2^k +- 1, smaller than the device count, and one
// of about 1e6 elements.
std::vector<std::pair<index_t, index_t>> sizes2() {
  return {{0, 0}, {0, 5}, {5, 0}, {1, 1}, {1, 7}, {7, 1}, {7, 3}, {2, 31}, {33, 32}, {255, 3}, {17, 257}, {1025, 1023}};
}

std::vector<std::array<index_t, 3>> sizes3() {
  return {{0, 3, 2}, {1, 1, 1}, {3, 1, 5}, {7, 5, 3}, {2, 9, 17}, {33, 4, 9}, {101, 103, 97}};
}

}  // namespace

TEST_CASE("broadcast: same shapes, rank 1, swept sizes") {
  for (const auto& ds : device_sets()) {
    CAPTURE(set_name(ds));
    for (index_t n : tessera_test::sweep_sizes()) {
      CAPTURE(n);
      check_pair<1, 1>(random_host({n}), random_host({n}), shard(0, ds), shard(0, ds), shard(0, ds));
      check_pair<1, 1>(random_host({n}), random_host({n}), replicate(ds), shard(0, ds), shard(0, ds));
    }
  }
}

TEST_CASE("broadcast: rank-1 vector over a matrix (missing trailing dimension counts as 1)") {
  for (const auto& ds : device_sets()) {
    CAPTURE(set_name(ds));
    for (auto [m, n] : sizes2()) {
      CAPTURE(m);
      CAPTURE(n);
      const Host A = random_host({m, n}), v = random_host({m});
      // Matrix sharded by columns, vector replicated (size 1 along the shard dimension).
      check_pair<2, 1>(A, v, shard(1, ds), replicate(ds), shard(1, ds));
      check_pair<1, 2>(v, A, replicate(ds), shard(1, ds), shard(1, ds));
      // Matrix sharded by rows, vector sharded the same way.
      check_pair<2, 1>(A, v, shard(0, ds), shard(0, ds), shard(0, ds));
      check_pair<1, 2>(v, A, shard(0, ds), shard(0, ds), shard(0, ds));
    }
  }
}

TEST_CASE("broadcast: size-1 dimensions stretch in either operand") {
  for (const auto& ds : device_sets()) {
    CAPTURE(set_name(ds));
    for (auto [m, n] : sizes2()) {
      CAPTURE(m);
      CAPTURE(n);
      const Host A = random_host({m, n}), col = random_host({m, 1}), row = random_host({1, n});
      check_pair<2, 2>(A, col, shard(1, ds), replicate(ds), shard(1, ds));
      check_pair<2, 2>(col, A, shard(0, ds), shard(0, ds), shard(0, ds));
      check_pair<2, 2>(A, row, shard(1, ds), shard(1, ds), shard(1, ds));
      check_pair<2, 2>(row, A, replicate(ds), shard(0, ds), shard(0, ds));
      // Both operands stretch at once: m×1 and 1×n give m×n.
      check_pair<2, 2>(col, row, shard(0, ds), replicate(ds), shard(0, ds));
      check_pair<2, 2>(col, row, replicate(ds), shard(1, ds), shard(1, ds));
      check_pair<2, 2>(row, col, replicate(ds), replicate(ds), replicate(ds));
      // A rank-1 vector against an m×1 column: the result is m×1.
      check_pair<2, 1>(col, random_host({m}), shard(0, ds), shard(0, ds), shard(0, ds));
      // 1×1 against anything.
      check_pair<2, 2>(A, random_host({1, 1}), shard(1, ds), replicate(ds), shard(1, ds));
    }
  }
}

TEST_CASE("broadcast: rank-3 arrays, several size-1 dimensions at once, lower-rank operands") {
  for (const auto& ds : device_sets()) {
    CAPTURE(set_name(ds));
    for (auto [m, n, p] : sizes3()) {
      CAPTURE(m);
      CAPTURE(n);
      CAPTURE(p);
      const Host T = random_host({m, n, p});
      const Host v = random_host({m}), M = random_host({m, n});
      check_pair<3, 1>(T, v, shard(2, ds), replicate(ds), shard(2, ds));
      check_pair<3, 1>(T, v, shard(0, ds), shard(0, ds), shard(0, ds));
      check_pair<3, 2>(T, M, shard(2, ds), replicate(ds), shard(2, ds));
      check_pair<3, 2>(T, M, shard(1, ds), shard(1, ds), shard(1, ds));
      // m×1×p with 1×n×1: three dimensions stretch, in both operands.
      const Host X = random_host({m, 1, p}), Y = random_host({1, n, 1});
      check_pair<3, 3>(X, Y, shard(2, ds), replicate(ds), shard(2, ds));
      check_pair<3, 3>(Y, X, replicate(ds), shard(0, ds), shard(0, ds));
      check_pair<3, 3>(X, Y, replicate(ds), shard(1, ds), shard(1, ds));
      // 1×1×1 and m×n×1 against m×n×p.
      check_pair<3, 3>(T, random_host({1, 1, 1}), shard(1, ds), replicate(ds), shard(1, ds));
      check_pair<3, 3>(random_host({m, n, 1}), T, shard(0, ds), shard(0, ds), shard(0, ds));
      // A rank-3 m×n×1 against a rank-2 m×n: the missing dimension of size 1 matches.
      check_pair<3, 2>(random_host({m, n, 1}), M, shard(1, ds), shard(1, ds), shard(1, ds));
      // A rank-1 vector of size n cannot align with dimension 1: Julia aligns from the first.
      if (n != m && n != 1 && m != 1) {
        const auto a = make<3>(T, replicate(ds));
        const auto w = make<1>(random_host({n}), replicate(ds));
        const std::string msg = expect_error<dimension_mismatch>([&] { (void)eval(a - 2.f * w); });
        check_mentions(msg, {"dimension 0", std::to_string(m), std::to_string(n)});
      }
    }
  }
}

TEST_CASE("broadcast: 0-d arrays and scalars") {
  for (const auto& ds : device_sets()) {
    CAPTURE(set_name(ds));
    const Host s = random_host({}), t = random_host({});
    check_pair<0, 0>(s, t, replicate(ds), replicate(ds), replicate(ds));
    for (auto [m, n] : sizes2()) {
      CAPTURE(m);
      CAPTURE(n);
      const Host A = random_host({m, n});
      check_pair<2, 0>(A, s, shard(1, ds), replicate(ds), shard(1, ds));

      // Scalar operands (weak: a float array stays float whatever the scalar type).
      const auto a = make<2>(A, shard(1, ds));
      auto x = eval(3.f - a * 2.5 + 1);
      static_assert(std::is_same_v<typename decltype(x)::value_type, float>);
      std::vector<double> wx(A.v.size());
      for (std::size_t i = 0; i < A.v.size(); ++i) wx[i] = 3.0 - A.v[i] * 2.5 + 1;
      check_all_close(to_host(x), wx);
    }
  }
}

TEST_CASE("broadcast: empty dimensions broadcast with 1 and with 0") {
  for (const auto& ds : device_sets()) {
    CAPTURE(set_name(ds));
    check_pair<1, 1>(random_host({0}), random_host({1}), shard(0, ds), replicate(ds), shard(0, ds));
    check_pair<1, 1>(random_host({1}), random_host({0}), replicate(ds), shard(0, ds), shard(0, ds));
    check_pair<1, 1>(random_host({0}), random_host({0}), shard(0, ds), shard(0, ds), shard(0, ds));
    check_pair<2, 2>(random_host({0, 5}), random_host({1, 5}), shard(1, ds), shard(1, ds), shard(1, ds));
    check_pair<2, 2>(random_host({0, 1}), random_host({1, 5}), shard(0, ds), shard(1, ds), shard(1, ds));
    check_pair<2, 2>(random_host({3, 0}), random_host({3, 1}), shard(1, ds), replicate(ds), shard(1, ds));
    check_pair<2, 2>(random_host({3, 0}), random_host({1, 0}), shard(1, ds), shard(1, ds), shard(1, ds));
    check_pair<2, 1>(random_host({0, 4}), random_host({0}), shard(0, ds), shard(0, ds), shard(0, ds));
    check_pair<2, 1>(random_host({0, 4}), random_host({1}), shard(1, ds), replicate(ds), shard(1, ds));
    check_pair<3, 3>(random_host({2, 0, 3}), random_host({2, 1, 1}), shard(2, ds), replicate(ds), shard(2, ds));
    check_pair<2, 0>(random_host({0, 0}), random_host({}), shard(1, ds), replicate(ds), shard(1, ds));
    // 0 does not broadcast with anything but 0 and 1.
    for (index_t other : {2, 3, 7}) {
      CAPTURE(other);
      const auto a = make<1>(random_host({0}), replicate(ds));
      const auto b = make<1>(random_host({other}), replicate(ds));
      const std::string msg = expect_error<dimension_mismatch>([&] { (void)eval(a - 2.f * b); });
      check_mentions(msg, {"0-element", std::to_string(other) + "-element", "dimension 0"});
      const auto A = make<2>(random_host({4, 0}), replicate(ds));
      const auto B = make<2>(random_host({4, other}), replicate(ds));
      const std::string msg2 = expect_error<dimension_mismatch>([&] { (void)eval(A - 2.f * B); });
      check_mentions(msg2, {"4×0", "4×" + std::to_string(other), "dimension 1"});
    }
  }
}

TEST_CASE("broadcast: three operands combine pairwise") {
  for (const auto& ds : device_sets()) {
    CAPTURE(set_name(ds));
    for (auto [m, n] : sizes2()) {
      CAPTURE(m);
      CAPTURE(n);
      const Host A = random_host({m, n}), col = random_host({m, 1}), v = random_host({m}), row = random_host({1, n});
      const auto a = make<2>(A, shard(1, ds));
      const auto c = make<2>(col, replicate(ds));
      const auto w = make<1>(v, replicate(ds));
      const auto r = make<2>(row, shard(1, ds));
      auto got = eval(where(a > c, a * w, r - 1.f));
      std::vector<double> want(A.v.size());
      for (index_t j = 0; j < n; ++j)
        for (index_t i = 0; i < m; ++i) {
          const auto k = static_cast<std::size_t>(i + j * m);
          const double x = A.v[k], cx = col.v[static_cast<std::size_t>(i)];
          want[k] = x > cx ? x * v.v[static_cast<std::size_t>(i)] : row.v[static_cast<std::size_t>(j)] - 1.0;
        }
      CHECK(to_dims<2>(got.shape()) == Dims{m, n});
      check_all_close(to_host(got), want);
    }
  }
}

TEST_CASE("broadcast: assignment broadcasts into an existing array") {
  for (const auto& ds : device_sets()) {
    CAPTURE(set_name(ds));
    for (auto [m, n] : sizes2()) {
      CAPTURE(m);
      CAPTURE(n);
      const auto M = static_cast<std::size_t>(m), Nn = static_cast<std::size_t>(n);
      const Host v = random_host({m}), row = random_host({1, n}), s = random_host({});
      for (const Placement& pc : {shard(1, ds), shard(0, ds), replicate(ds), on(ds.back())}) {
        CAPTURE(static_cast<int>(pc.kind));
        CAPTURE(pc.dim);
        Array<float, 2> c(Shape<2>{m, n}, pc);
        auto want = [&](auto f) {
          std::vector<double> w(M * Nn);
          for (std::size_t j = 0; j < Nn; ++j)
            for (std::size_t i = 0; i < M; ++i) w[i + j * M] = f(i, j);
          return w;
        };
        // Every replica (or shard) must hold the values, not only the first one to_host reads.
        auto check_every_part = [&](const std::vector<double>& w) {
          check_all_close(to_host(c), w);
          for (int i = 0; i < static_cast<int>(c.layout().parts.size()); ++i) {
            const auto& p = c.layout().parts[static_cast<std::size_t>(i)];
            if (p.empty()) continue;
            const float* h = c.host_data(i);
            for (index_t jj = 0; jj < p.extent[1]; ++jj)
              for (index_t ii = 0; ii < p.extent[0]; ++ii) {
                const auto gi = static_cast<std::size_t>(ii + p.origin[0]), gj = static_cast<std::size_t>(jj + p.origin[1]);
                if (!tessera_test::close(h[ii + jj * p.extent[0]], w[gi + gj * M])) {
                  FAIL_CHECK("part " << i << " element (" << gi << "," << gj << ")");
                  return;
                }
              }
          }
        };
        c = 0.f;
        check_every_part(want([](auto, auto) { return 0.0; }));
        c = 7;  // an integer scalar fills a float array
        check_every_part(want([](auto, auto) { return 7.0; }));
        // The vector operand must live where the destination's parts are.
        const Placement pv = pc.kind == Placement::kind_t::shard && pc.dim == 0 ? shard(0, ds)
                             : pc.kind == Placement::kind_t::single            ? pc
                                                                               : replicate(ds);
        const auto vv = make<1>(v, pv);
        set(c, vv);  // each column is v
        check_every_part(want([&](std::size_t i, std::size_t) { return double(v.v[i]); }));
        c -= 2.f * vv;  // compound assignment broadcasts too
        check_every_part(want([&](std::size_t i, std::size_t) { return -1.0 * v.v[i]; }));
        const Placement pr = pc.kind == Placement::kind_t::shard && pc.dim == 1 ? shard(1, ds)
                             : pc.kind == Placement::kind_t::single            ? pc
                                                                               : replicate(ds);
        const auto rr = make<2>(row, pr);
        set(c, rr);  // each row is `row`
        check_every_part(want([&](std::size_t, std::size_t j) { return double(row.v[j]); }));
        c -= 2.f * rr;
        check_every_part(want([&](std::size_t, std::size_t j) { return -1.0 * row.v[j]; }));
        const auto ss = make<0>(s, pc.kind == Placement::kind_t::single ? pc : replicate(ds));
        set(c, ss);  // a 0-d array fills
        check_every_part(want([&](auto, auto) { return double(s.v[0]); }));
        c = vv - 2.f * rr;  // m and 1×n stretch into the destination
        check_every_part(want([&](std::size_t i, std::size_t j) { return double(v.v[i]) - 2.0 * row.v[j]; }));
        CHECK(to_host(vv) == v.v);
        CHECK(to_host(rr) == row.v);
      }
      // A rank-3 destination filled from a matrix (missing trailing dimension) and a vector.
      Array<float, 3> t(Shape<3>{m, n, 3}, shard(2, ds));
      const Host A = random_host({m, n});
      set(t, make<2>(A, replicate(ds)));
      std::vector<double> w3(M * Nn * 3);
      for (std::size_t k = 0; k < 3; ++k)
        for (std::size_t i = 0; i < M * Nn; ++i) w3[i + k * M * Nn] = A.v[i];
      check_all_close(to_host(t), w3);
      set(t, make<1>(v, replicate(ds)));
      for (std::size_t k = 0; k < Nn * 3; ++k)
        for (std::size_t i = 0; i < M; ++i) w3[i + k * M] = v.v[i];
      check_all_close(to_host(t), w3);
    }
  }
}

TEST_CASE("broadcast: assignment into views broadcasts") {
  for (const auto& ds : device_sets()) {
    CAPTURE(set_name(ds));
    for (auto [m, n] : sizes2()) {
      if (n < 2) continue;
      CAPTURE(m);
      CAPTURE(n);
      const Host A = random_host({m, n}), v = random_host({m});
      auto a = make<2>(A, shard(1, ds));
      const auto vv = make<1>(v, replicate(ds));
      a(_, range(0, n, 2)) = vv;  // every other column becomes v
      auto want = A.v;
      for (index_t j = 0; j < n; j += 2)
        for (index_t i = 0; i < m; ++i) want[static_cast<std::size_t>(i + j * m)] = v.v[static_cast<std::size_t>(i)];
      CHECK(to_host(a) == want);
      a(_, 1) = 0.f;  // column 1 is a vector view
      for (index_t i = 0; i < m; ++i) want[static_cast<std::size_t>(i + m)] = 0.f;
      CHECK(to_host(a) == want);
    }
  }
}

// -- errors ---------------------------------------------------------------------------------------

namespace {

// Combining `ha` and `hb` must throw dimension_mismatch naming both shapes and the dimension,
// whether the expression is evaluated, assigned to an existing array, or assigned to a
// default-constructed one; every array must be left as it was.
template <int NA, int NB>
void check_combine_error(const DeviceSet& ds, const Host& ha, const Host& hb, int dim, index_t x, index_t y,
                         const std::vector<std::string>& shape_strings) {
  constexpr int R = NA > NB ? NA : NB;
  INFO("shapes " << dims_string(ha.shape) << " and " << dims_string(hb.shape));
  REQUIRE_FALSE(ref_shape(ha.shape, hb.shape).has_value());
  const auto a = make<NA>(ha, replicate(ds));
  const auto b = make<NB>(hb, replicate(ds));
  auto e = a - 2.f * b;  // lazy: nothing is checked before materialization
  std::vector<std::string> parts = shape_strings;
  parts.push_back("dimension " + std::to_string(dim));
  parts.push_back("sizes " + std::to_string(x) + " and " + std::to_string(y));
  check_mentions(expect_error<dimension_mismatch>([&] { (void)eval(e); }), parts);
  // An existing destination of each operand's shape: unchanged after the error.
  Dims cshape(static_cast<std::size_t>(R), 1);
  for (std::size_t k = 0; k < ha.shape.size(); ++k) cshape[k] = ha.shape[k];
  const Host hc = random_host(cshape);
  auto c = make<R>(hc, replicate(ds));
  check_mentions(expect_error<dimension_mismatch>([&] { c = e; }), parts);
  CHECK(to_host(c) == hc.v);
  if constexpr (NA == R) {
    auto c2 = make<R>(ha, replicate(ds));
    expect_error<dimension_mismatch>([&] { c2 -= 2.f * b; });  // the same node type as e
    CHECK(to_host(c2) == ha.v);
  }
  Array<float, R> d;
  expect_error<dimension_mismatch>([&] { d = e; });
  CHECK_FALSE(d.has_storage());
  expect_error<dimension_mismatch>([&] { Array<float, R> f = e; });
  CHECK(to_host(a) == ha.v);
  CHECK(to_host(b) == hb.v);
}

}  // namespace

TEST_CASE("broadcast errors: operands that do not combine name both shapes and the dimension") {
  for (const auto& ds : device_sets()) {
    CAPTURE(set_name(ds));
    check_combine_error<2, 2>(ds, random_host({3, 4}), random_host({4, 3}), 0, 3, 4, {"3×4", "4×3"});
    check_combine_error<2, 2>(ds, random_host({3, 4}), random_host({3, 5}), 1, 4, 5, {"3×4", "3×5"});
    check_combine_error<2, 2>(ds, random_host({3, 1}), random_host({2, 5}), 0, 3, 2, {"3×1", "2×5"});
    check_combine_error<3, 3>(ds, random_host({2, 3, 4}), random_host({2, 3, 5}), 2, 4, 5, {"2×3×4", "2×3×5"});
    check_combine_error<3, 3>(ds, random_host({2, 1, 4}), random_host({1, 7, 2}), 2, 4, 2, {"2×1×4", "1×7×2"});
    check_combine_error<2, 1>(ds, random_host({4, 5}), random_host({3}), 0, 4, 3, {"4×5", "3-element"});
    // A rank-1 vector of length n against an m×n matrix aligns with dimension 0, not 1.
    check_combine_error<2, 1>(ds, random_host({3, 5}), random_host({5}), 0, 3, 5, {"3×5", "5-element"});
    check_combine_error<3, 2>(ds, random_host({2, 3, 4}), random_host({2, 4}), 1, 3, 4, {"2×3×4", "2×4"});
    check_combine_error<1, 1>(ds, random_host({1000}), random_host({999}), 0, 1000, 999,
                              {"1000-element", "999-element"});
    check_combine_error<1, 1>(ds, random_host({2}), random_host({0}), 0, 2, 0, {"2-element", "0-element"});
    // The operand of lower rank first: the message names that operand's own shape.
    check_combine_error<1, 2>(ds, random_host({3}), random_host({4, 5}), 0, 3, 4, {"3-element", "4×5"});
  }
}

TEST_CASE("broadcast errors: the mismatch is found wherever it sits in a larger tree") {
  for (const auto& ds : device_sets()) {
    CAPTURE(set_name(ds));
    const auto a = make<2>(random_host({3, 4}), replicate(ds));
    const auto col = make<2>(random_host({3, 1}), replicate(ds));
    const auto w = make<1>(random_host({3}), replicate(ds));
    const auto bad = make<2>(random_host({1, 2}), replicate(ds));
    const Host hc = random_host({3, 4});
    auto c = make<2>(hc, replicate(ds));
    // The same tree as the three-operand test, with a 1×2 operand deep inside.
    const std::string msg = expect_error<dimension_mismatch>([&] { c = where(a > col, a * w, bad - 1.f); });
    check_mentions(msg, {"3×4", "1×2", "dimension 1", "sizes 4 and 2"});
    CHECK(to_host(c) == hc.v);
    Array<float, 2> d;
    expect_error<dimension_mismatch>([&] { d = where(a > col, a * w, bad - 1.f); });
    CHECK_FALSE(d.has_storage());
    // After the errors the library keeps working.
    c = a - 2.f * a;
    CHECK(c.at(2, 3) == doctest::Approx(-a.at(2, 3)));
  }
}

namespace {

// Assigning an expression of shape `hs` to a destination of shape `dshape` must throw
// dimension_mismatch naming both shapes and the dimension, and leave the destination as it was.
template <int ND, int NS>
void check_assign_error(const DeviceSet& ds, const Dims& dshape, const Host& hs, int dim,
                        const std::vector<std::string>& shape_strings) {
  INFO("destination " << dims_string(dshape) << ", expression " << dims_string(hs.shape));
  const Host hd = random_host(dshape);
  for (const Placement& pd : {replicate(ds), shard(ND - 1, ds), on(ds[0])}) {
    auto dst = make<ND>(hd, pd);
    const auto src = make<NS>(hs, replicate(ds));
    std::vector<std::string> parts = shape_strings;
    parts.push_back("dimension " + std::to_string(dim));
    check_mentions(expect_error<dimension_mismatch>([&] { set(dst, src); }), parts);
    CHECK(to_host(dst) == hd.v);
    expect_error<dimension_mismatch>([&] { assign(dst, src, seq); });
    CHECK(to_host(dst) == hd.v);
    expect_error<dimension_mismatch>([&] { dst -= 2.f * src; });
    CHECK(to_host(dst) == hd.v);
    CHECK(to_host(src) == hs.v);
  }
}

}  // namespace

TEST_CASE("broadcast errors: assigning to a destination the expression does not broadcast to") {
  for (const auto& ds : device_sets()) {
    CAPTURE(set_name(ds));
    // Bigger than the destination along one dimension.
    check_assign_error<2, 2>(ds, {3, 4}, random_host({3, 5}), 1, {"3×5", "3×4"});
    check_assign_error<2, 2>(ds, {3, 1}, random_host({3, 4}), 1, {"3×4", "3×1"});
    check_assign_error<2, 2>(ds, {1, 4}, random_host({3, 4}), 0, {"3×4", "1×4"});
    check_assign_error<1, 1>(ds, {3}, random_host({5}), 0, {"5-element", "3-element"});
    check_assign_error<1, 1>(ds, {1}, random_host({2}), 0, {"2-element", "1-element"});
    check_assign_error<3, 2>(ds, {2, 3, 4}, random_host({2, 5}), 1, {"2×5", "2×3×4"});
    check_assign_error<3, 1>(ds, {2, 3, 4}, random_host({3}), 0, {"3-element", "2×3×4"});
    // Smaller but not of size 1: does not stretch.
    check_assign_error<2, 2>(ds, {6, 4}, random_host({3, 4}), 0, {"3×4", "6×4"});
    check_assign_error<2, 1>(ds, {4, 3}, random_host({3}), 0, {"3-element", "4×3"});
    // Empty against non-empty, both ways.
    check_assign_error<2, 2>(ds, {3, 1}, random_host({3, 0}), 1, {"3×0", "3×1"});
    check_assign_error<2, 2>(ds, {3, 0}, random_host({3, 2}), 1, {"3×2", "3×0"});
    check_assign_error<1, 1>(ds, {0}, random_host({4}), 0, {"4-element", "0-element"});
  }
}

TEST_CASE("broadcast errors: views and default-constructed destinations") {
  for (const auto& ds : device_sets()) {
    CAPTURE(set_name(ds));
    const Host hc = random_host({3, 4});
    auto c = make<2>(hc, shard(1, ds));
    const auto a = make<2>(random_host({3, 4}), replicate(ds));
    // A 3×2 window cannot take a 3×4 expression.
    const std::string msg = expect_error<dimension_mismatch>([&] { c(_, range(0, 2)) = a; });
    check_mentions(msg, {"3×4", "3×2", "dimension 1"});
    CHECK(to_host(c) == hc.v);
    // A column view (3-element) cannot take a 4-element vector.
    const auto w = make<1>(random_host({4}), replicate(ds));
    check_mentions(expect_error<dimension_mismatch>([&] { c(_, 0) = w; }), {"4-element", "3-element", "dimension 0"});
    CHECK(to_host(c) == hc.v);
    // The view keeps working.
    c(_, range(0, 2)) = a(_, range(2, 4));
    CHECK(c.at(1, 1) == a.at(1, 3));
    // An assignment that failed leaves a default-constructed array without storage.
    Array<float, 2> d;
    const auto bad = make<2>(random_host({2, 4}), replicate(ds));
    expect_error<dimension_mismatch>([&] { d = a - 2.f * bad; });
    CHECK_FALSE(d.has_storage());
    d = a - 2.f * a;
    CHECK(to_dims<2>(d.shape()) == Dims{3, 4});
  }
}

TEST_CASE("broadcast: copy-assigning an Array of the same type copies it (std::vector semantics)") {
  // `c = r` with r an Array<T, N> is the copy assignment: c takes r's shape and placement, as a
  // std::vector would. Broadcasting into c's storage is spelled assign(c, r), c(_, _) = r, or
  // any expression (c = r + 0.f). This test pins the distinction down.
  for (const auto& ds : device_sets()) {
    CAPTURE(set_name(ds));
    const index_t m = 5, n = 7;
    const Host row = random_host({1, n});
    const auto r = make<2>(row, replicate(ds));
    auto c = make<2>(random_host({m, n}), shard(1, ds));
    c = r;
    CHECK(to_dims<2>(c.shape()) == Dims{1, n});
    CHECK(c.is_replicated());
    CHECK(to_host(c) == row.v);
    c(_, _) = 0.f;  // a deep copy: r is unaffected
    CHECK(to_host(r) == row.v);

    auto d = make<2>(random_host({m, n}), shard(1, ds));
    d(_, _) = r;  // a view of the whole array broadcasts into d's storage
    CHECK(to_dims<2>(d.shape()) == Dims{m, n});
    CHECK(d.shard_dim() == (ds.size() > 1 ? 1 : d.shard_dim()));
    std::vector<float> want(static_cast<std::size_t>(m * n));
    for (index_t j = 0; j < n; ++j)
      for (index_t i = 0; i < m; ++i) want[static_cast<std::size_t>(i + j * m)] = row.v[static_cast<std::size_t>(j)];
    CHECK(to_host(d) == want);
  }
}
