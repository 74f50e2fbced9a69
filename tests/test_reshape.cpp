// SPDX-License-Identifier: Apache-2.0
// reshape, vec and permutedims: values against plain host loops on fresh random data, every
// placement and device set, sizes 0, 1, odd, powers of two +-1 and large, uneven shards, views as
// inputs; which reshapes share storage (and that writes through them reach the source) and which
// copy (and where the copy lives); every permutation of rank 3; errors that name both shapes and
// leave the source intact.
#include "shape_reference.hpp"

#include <array>
#include <cstdint>
#include <vector>

using namespace tessera_test;

namespace {

// Checks reshape(a, to): shape, values (column-major order kept), replicas; then writes through
// it and checks the source changed exactly when the result shares its storage.
template <int N, int M>
void check_reshape(Array<float, N>& a, const std::vector<float>& v, const Placement& placement, const Shape<M>& to) {
  INFO("reshape of " << detail::shape_string<N>(a.shape()) << ", " << a.placement_string() << " to "
                     << detail::shape_string<M>(to));
  auto r = reshape(a, to);
  CHECK(r.shape() == to);
  check_equal(to_host(r), v);
  CHECK(r.is_replicated() == a.is_replicated());
  if (a.is_replicated()) check_replicas(Array<float, M>(r), v);
  const bool shared = shares_storage(r, a);
  // Whole arrays on one device, and replicas, are contiguous: always views.
  if (a.devices().size() == 1 || a.is_replicated()) CHECK((shared || v.empty()));
  r *= 2.f;
  std::vector<float> want = v;
  if (shared)
    for (auto& x : want) x *= 2.f;
  check_equal(to_host(a), want);
  a = from_host(v, a.shape(), placement);
}

}  // namespace

TEST_CASE("reshape keeps the column-major order, sharing storage where the layout allows") {
  for (const auto& ds : device_sets()) {
    for (const Dims& dims : {Dims{5, 7, 3}, Dims{1, 9, 11}, Dims{4, 0, 2}, Dims{2, 3, 8}, Dims{1, 1, 1}}) {
      const auto v = fresh(dims);
      const index_t n = volume(dims), s0 = dims[0], s1 = dims[1], s2 = dims[2];
      for (const auto& np : placements(3, ds)) {
        INFO("device set " << set_name(ds) << ", " << np.name);
        Array<float, 3> a = make<3>(v, dims, np.p);
        check_reshape<3, 1>(a, v, np.p, {n});
        check_reshape<3, 2>(a, v, np.p, {s0 * s1, s2});
        check_reshape<3, 2>(a, v, np.p, {s0, s1 * s2});
        check_reshape<3, 3>(a, v, np.p, {s2, s1, s0});
        check_reshape<3, 4>(a, v, np.p, {s0, 1, s1, s2});
        check_reshape<3, 2>(a, v, np.p, {n, 1});
      }
    }
  }
}

TEST_CASE("reshape of sharded arrays: views along a new shard dim, copies sharded along the last dim") {
  if (skip_without_gpu()) return;
  for (const auto& ds : multi_device_sets()) {
    const int nd = static_cast<int>(ds.size());
    INFO("device set " << set_name(ds));
    // 4 x 6nd, sharded along columns: blocks of 6 columns are runs of 24 elements.
    const index_t c = 6 * nd;
    const auto v = fresh({4, c});
    const Array<float, 2> a = make<2>(v, {4, c}, shard(1, ds));
    auto flat = reshape(a, {4 * c});
    CHECK(shares_storage(flat, a));
    CHECK(flat.shard_dim() == 0);
    CHECK(flat.placement_string() == placement_of_new<1>({4 * c}, shard(0, ds)));
    auto split = reshape(a, 4, 2, 3 * nd);  // column j = j1 + 2 j2: a block of 6 is 3 whole j2
    CHECK(shares_storage(split, a));
    CHECK(split.shard_dim() == 2);
    CHECK(split.placement_string() == placement_of_new<3>({4, 2, 3 * nd}, shard(2, ds)));
    check_equal(to_host(split), v);
    auto mixed = reshape(a, 4, 3 * nd, 2);  // j = j1 + 3nd j2: a block of 6 is a box only for nd = 2
    CHECK(shares_storage(mixed, a) == (nd == 2));
    CHECK(mixed.placement_string() == placement_of_new<3>({4, 3 * nd, 2}, shard(2, ds)));
    check_equal(to_host(mixed), v);
    check_equal(to_host(split), v);
    // Sharded along rows: a block is a strided set of rows, not a run; splitting dim 0 keeps views.
    const auto w = fresh({2 * nd, 5});
    const Array<float, 2> b = make<2>(w, {2 * nd, 5}, shard(0, ds));
    auto rows = reshape(b, {2, nd, 5});
    CHECK(shares_storage(rows, b));
    CHECK(rows.shard_dim() == 1);
    check_equal(to_host(rows), w);
    auto copied = reshape(b, {10 * nd});
    CHECK_FALSE(shares_storage(copied, b));
    CHECK(copied.placement_string() == placement_of_new<1>({10 * nd}, shard(0, ds)));
    check_equal(to_host(copied), w);
    // Uneven blocks of a vector: 1000 over the devices.
    const auto u = fresh({1000});
    const Array<float, 1> x = make<1>(u, {1000}, shard(0, ds));
    auto m = reshape(x, {10, 100});
    // A view when every block is whole columns of 10; otherwise a copy, balanced along dim 1.
    CHECK(shares_storage(m, x) == (1000 % nd == 0 && (1000 / nd) % 10 == 0));
    CHECK(m.placement_string() == placement_of_new<2>({10, 100}, shard(1, ds)));
    check_equal(to_host(m), u);
  }
}

TEST_CASE("reshape over the sweep sizes, there and back, any element type") {
  for_each_case([](const DeviceSet& ds, std::size_t n) {
    const auto v = random_values<std::int32_t>(n);
    const Array<std::int32_t, 1> a = put(v, ds);
    index_t p = 1;
    for (index_t d = 2; d * d <= static_cast<index_t>(n); ++d)
      if (n % static_cast<std::size_t>(d) == 0) p = d;
    const index_t q = p ? static_cast<index_t>(n) / p : 0;
    auto m = reshape(a, {p, q});
    CHECK(m.shape() == Shape<2>{p, q});
    check_equal(to_host(m), v);
    check_equal(to_host(reshape(m, {static_cast<index_t>(n)})), v);
    check_equal(to_host(reshape(a, 1, _)), v);
    check_equal(to_host(vec(permutedims(reshape(a, {q, p}), {1, 0}))), permute_ref(v, {q, p}, {1, 0}));
  });
  for (const auto& ds : device_sets()) {
    const auto vd = random_values<double>(60);
    const auto vl = random_values<std::int64_t>(60);
    const std::vector<bool> vb = random_values<bool>(60);
    check_equal(to_host(reshape(make<2>(vd, {6, 10}, shard(0, ds)), {4, 15})), vd);
    check_equal(to_host(reshape(make<2>(vl, {6, 10}, shard(1, ds)), {3, 20})), vl);
    const auto rb = to_host(reshape(from_host(vb, {6, 10}, shard(0, ds)), {60}));
    CHECK(rb == vb);
    check_equal(to_host(permutedims(make<2>(vl, {6, 10}, shard(1, ds)))), permute_ref(vl, {6, 10}, {1, 0}));
  }
}

TEST_CASE("reshape of views: strided, reversed and permuted inputs") {
  for (const auto& ds : device_sets()) {
    const index_t m = 9, n = 8;
    const auto v = fresh({m, n});
    for (const auto& np : placements(2, ds)) {
      INFO("device set " << set_name(ds) << ", " << np.name);
      Array<float, 2> a = make<2>(v, {m, n}, np.p);
      // Every other row, columns 1..7, as a plain loop.
      std::vector<float> want;
      for (index_t j = 1; j < n; ++j)
        for (index_t i = 0; i < m; i += 2) want.push_back(v[static_cast<std::size_t>(i + m * j)]);
      auto view = a(range(0, m, 2), range(1, n));
      check_equal(to_host(reshape(view, {5 * 7})), want);
      check_equal(to_host(reshape(view, {5, 7, 1})), want);
      check_equal(to_host(reshape(view, _, 5)), want);
      // Reversed columns (negative strides) and the transpose.
      std::vector<float> rev;
      for (index_t j = n - 1; j >= 0; --j)
        for (index_t i = 0; i < m; ++i) rev.push_back(v[static_cast<std::size_t>(i + m * j)]);
      check_equal(to_host(reshape(reverse(a, 1), {m * n})), rev);
      check_equal(to_host(reshape(reverse(a, 1), {m, 2, 4})), rev);
      const auto t = permute_ref(v, {m, n}, {1, 0});
      check_equal(to_host(reshape(permutedims(a, {1, 0}), {n * m})), t);
      check_equal(to_host(reshape(permutedims(a, {1, 0}), {4, 2, m})), t);
      // Writing through the reshape of a contiguous view reaches the source.
      auto col = reshape(a(_, 3), {m, 1});
      col = 0.f;
      auto after = v;
      for (index_t i = 0; i < m; ++i) after[static_cast<std::size_t>(i + m * 3)] = 0.f;
      check_equal(to_host(a), after);
    }
  }
}

TEST_CASE("reshape: inferred extents, errors name both shapes and leave the array intact") {
  if (skip_without_gpu()) return;
  const DeviceSet ds = device_sets().back();
  const auto v = fresh({3, 4});
  const Array<float, 2> a = make<2>(v, {3, 4}, shard(1, ds));
  CHECK(reshape(a, {-1, 6}).shape() == Shape<2>{2, 6});
  CHECK(reshape(a, _, 2, 3).shape() == Shape<3>{2, 2, 3});
  CHECK(reshape(a, 12).shape() == Shape<1>{12});
  check_mentions(expect_error<invalid_argument>([&] { (void)reshape(a, {5, 2}); }), {"3×4", "5×2", "12", "10"});
  check_mentions(expect_error<invalid_argument>([&] { (void)reshape(a, {-1, -1}); }), {"3×4", "only one"});
  check_mentions(expect_error<invalid_argument>([&] { (void)reshape(a, _, 5); }), {"3×4", "5"});
  check_mentions(expect_error<invalid_argument>([&] { (void)reshape(a, {-2, -6}); }), {"3×4", ">= 0"});
  check_mentions(expect_error<invalid_argument>([&] { (void)reshape(Array<float, 1>(), {1}); }),
                 {"default-constructed"});
  check_equal(to_host(a), v);
  // A 0-d result and a 0-d source.
  const Array<float, 1> one = make<1>(std::vector<float>{2.5f}, {1}, shard(0, ds));
  CHECK(reshape(one, std::array<index_t, 0>{}).at() == 2.5f);
  CHECK(reshape(reshape(one, std::array<index_t, 0>{}), {1, 1}).at(0, 0) == 2.5f);
}

TEST_CASE("permutedims: every permutation of rank 3 is a view; the shard dim moves with its data") {
  const std::vector<std::array<int, 3>> perms = {{0, 1, 2}, {0, 2, 1}, {1, 0, 2}, {1, 2, 0}, {2, 0, 1}, {2, 1, 0}};
  for (const auto& ds : device_sets()) {
    for (const Dims& dims : {Dims{5, 7, 3}, Dims{1, 8, 9}, Dims{4, 0, 2}, Dims{31, 2, 33}}) {
      const auto v = fresh(dims);
      for (const auto& np : placements(3, ds)) {
        Array<float, 3> a = make<3>(v, dims, np.p);
        for (const auto& perm : perms) {
          const std::vector<int> pv(perm.begin(), perm.end());
          INFO("device set " << set_name(ds) << ", " << dims_string(dims) << ", " << np.name << ", perm "
                             << perm_string(pv));
          auto p = permutedims(a, perm);
          const auto want = permute_ref(v, dims, pv);
          Dims pd(3);
          for (int j = 0; j < 3; ++j) pd[static_cast<std::size_t>(j)] = dims[static_cast<std::size_t>(perm[j])];
          CHECK(p.shape() == to_shape<3>(pd));
          check_equal(to_host(p), want);
          CHECK((shares_storage(p, a) || v.empty()));
          CHECK(p.devices() == a.devices());
          if (a.shard_dim() >= 0) CHECK(perm[static_cast<std::size_t>(p.shard_dim())] == a.shard_dim());
          // Expressions on the view keep its placement; copy(p, shard(d)) makes it contiguous.
          const Array<float, 3> e = eval(p * 2.f);
          if (!a.is_replicated() && a.devices().size() > 1) CHECK(e.shard_dim() == p.shard_dim());
          const Array<float, 3> c = copy(p, shard(2, ds));
          check_equal(to_host(c), want);
          // Writes through the view land in a at the permuted positions.
          p = p + 1.f;
          std::vector<float> plus = v;
          for (auto& x : plus) x += 1.f;
          check_equal(to_host(a), plus);
          a = make<3>(v, dims, np.p);
        }
      }
    }
  }
}

TEST_CASE("permutedims of rank 4, matrices and vectors; bad permutations") {
  for (const auto& ds : device_sets()) {
    const Dims dims{3, 4, 5, 2};
    const auto v = fresh(dims);
    const Array<float, 4> a = make<4>(v, dims, shard(2, ds));
    for (const auto& perm : std::vector<std::array<int, 4>>{{3, 2, 1, 0}, {1, 2, 3, 0}, {2, 0, 3, 1}}) {
      const std::vector<int> pv(perm.begin(), perm.end());
      INFO("perm " << perm_string(pv));
      check_equal(to_host(permutedims(a, perm)), permute_ref(v, dims, pv));
    }
    const auto w = fresh({6, 7});
    const Array<float, 2> m = make<2>(w, {6, 7}, shard(0, ds));
    check_equal(to_host(permutedims(m)), to_host(transpose(m)));
    CHECK(permutedims(m).shard_dim() == 1);
    const Array<float, 1> x = make<1>(w, {42}, shard(0, ds));
    CHECK(permutedims(x).shape() == Shape<2>{1, 42});
    check_equal(to_host(permutedims(x)), w);
    check_mentions(expect_error<invalid_argument>([&] { (void)permutedims(a, {0, 1, 1, 3}); }),
                   {"{0,1,1,3}", "permutation", "1 twice"});
    check_mentions(expect_error<invalid_argument>([&] { (void)permutedims(a, {0, 1, 2, 4}); }), {"4, outside [0, 4)"});
    check_equal(to_host(a), v);
  }
}

TEST_CASE("reshape and permutedims of large arrays") {
  for (const auto& ds : device_sets()) {
    INFO("device set " << set_name(ds));
    const index_t n = index_t(1) << 20;
    const auto v = fresh({n});
    const Array<float, 1> a = make<1>(v, {n}, shard(0, ds));
    auto m = reshape(a, {1024, 1024});
    CHECK(shares_storage(m, a) == ((1024 % static_cast<index_t>(ds.size())) == 0));
    check_equal(to_host(m), v);
    const auto t = permute_ref(v, {1024, 1024}, {1, 0});
    check_equal(to_host(vec(permutedims(m, {1, 0}))), t);
    check_equal(to_host(reshape(permutedims(m, {1, 0}), 256, 4, 1024)), t);
  }
}
