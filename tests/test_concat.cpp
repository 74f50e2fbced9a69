// SPDX-License-Identifier: Apache-2.0
// cat, vcat, hcat, stack and repeat: values against plain host loops on fresh random data, operands
// of every placement (mixed within one call), every device set, extents 0, 1, odd and large,
// uneven shards, views as operands; the result's placement (it follows the first operand, with
// balanced blocks); Julia's dimension conventions; errors that name both shapes and leave every
// operand intact.
#include "shape_reference.hpp"

#include <cstdint>
#include <vector>

using namespace tessera_test;

namespace {

// The placement the result of cat/stack/repeat promises: the first operand's, balanced.
Placement follow(const Placement& first, int shard_dim_of_result) {
  if (first.kind == Placement::kind_t::shard) return shard(shard_dim_of_result, first.devices);
  return first;
}

template <int N>
Shape<N> shape_of(const Dims& d) {
  return to_shape<N>(d);
}

}  // namespace

TEST_CASE("cat along every dim of operands with mixed placements") {
  for (const auto& ds : device_sets()) {
    const auto ps = placements(3, ds);
    for (std::size_t dim = 0; dim < 3; ++dim) {
      for (const Dims& base : {Dims{5, 4, 3}, Dims{1, 7, 2}, Dims{3, 0, 4}}) {
        // Three operands, the extent along dim 0, 1, odd or larger; placements rotate through ps.
        for (std::size_t first = 0; first < ps.size(); ++first) {
          std::vector<Dims> shapes(3, base);
          shapes[0][dim] = 3, shapes[1][dim] = 0, shapes[2][dim] = 9;
          if (first % 2) shapes[1][dim] = 1;
          std::vector<std::vector<float>> vs;
          for (auto& s : shapes) vs.push_back(fresh(s));
          INFO("device set " << set_name(ds) << ", dim " << dim << ", base " << dims_string(base) << ", first "
                             << ps[first].name);
          const Array<float, 3> a = make<3>(vs[0], shapes[0], ps[first].p);
          const Array<float, 3> b = make<3>(vs[1], shapes[1], ps[(first + 1) % ps.size()].p);
          const Array<float, 3> c = make<3>(vs[2], shapes[2], ps[(first + 2) % ps.size()].p);
          Dims want_shape;
          const auto want = cat_ref(vs, shapes, dim, want_shape);
          const Array<float, 3> r = cat(static_cast<int>(dim), a, b, c);
          CHECK(r.shape() == to_shape<3>(want_shape));
          check_equal(to_host(r), want);
          if (r.is_replicated()) check_replicas(r, want);
          CHECK(r.placement_string() ==
                placement_of_new<3>(r.shape(), follow(ps[first].p, ps[first].p.dim)));
          check_equal(to_host(a), vs[0]);  // intact
        }
      }
    }
  }
}

TEST_CASE("vcat and hcat follow Julia: vcat along dim 0, hcat along dim 1, vectors as columns") {
  for (const auto& ds : device_sets()) {
    INFO("device set " << set_name(ds));
    for (index_t n : sweep_sizes()) {
      if (n > 1000) continue;
      INFO("n = " << n);
      const auto u = fresh({n}), w = fresh({n});
      const Array<float, 1> x = make<1>(u, {n}, shard(0, ds)), y = make<1>(w, {n}, replicate(ds));
      Dims s;
      const Array<float, 1> v = vcat(x, y);
      check_equal(to_host(v), cat_ref<float>({u, w}, {{n}, {n}}, 0, s));
      const Array<float, 2> h = hcat(x, y, x);
      CHECK(h.shape() == Shape<2>{n, 3});
      check_equal(to_host(h), cat_ref<float>({u, w, u}, {{n, 1}, {n, 1}, {n, 1}}, 1, s));
      CHECK(h.shard_dim() == (ds.size() > 1 ? 0 : -1));
    }
    // hcat(A, b) appends a column; vcat(A, B) stacks rows; 0-d arrays become 1 x k or k.
    const auto va = fresh({4, 3}), vb = fresh({4}), vc = fresh({2, 3});
    const Array<float, 2> A = make<2>(va, {4, 3}, shard(1, ds));
    const Array<float, 1> b = make<1>(vb, {4}, on(ds.back()));
    const Array<float, 2> C = make<2>(vc, {2, 3}, replicate(ds));
    Dims s;
    check_equal(to_host(hcat(A, b)), cat_ref<float>({va, vb}, {{4, 3}, {4, 1}}, 1, s));
    check_equal(to_host(vcat(A, C)), cat_ref<float>({va, vc}, {{4, 3}, {2, 3}}, 0, s));
    const Array<float, 0> one = full<float>(std::array<index_t, 0>{}, 1.5f, replicate(ds));
    const Array<float, 0> two = full<float>(std::array<index_t, 0>{}, 2.5f, on(ds[0]));
    CHECK(hcat(one, two).shape() == Shape<2>{1, 2});
    check_equal(to_host(hcat(one, two)), std::vector<float>{1.5f, 2.5f});
    check_equal(to_host(vcat(two, one, two)), std::vector<float>{2.5f, 1.5f, 2.5f});
  }
}

TEST_CASE("stack adds a dimension at any position; vectors of arrays") {
  for (const auto& ds : device_sets()) {
    const Dims sh{5, 3};
    const auto u = fresh(sh), w = fresh(sh);
    for (const auto& np : placements(2, ds)) {
      INFO("device set " << set_name(ds) << ", " << np.name);
      const Array<float, 2> a = make<2>(u, sh, np.p);
      const Array<float, 2> b = make<2>(w, sh, shard(0, ds));
      for (int dim = 0; dim <= 2; ++dim) {
        INFO("dim " << dim);
        Dims g = sh;
        g.insert(g.begin() + dim, 1);
        Dims s;
        const auto want = cat_ref<float>({u, w, u}, {g, g, g}, static_cast<std::size_t>(dim), s);
        const Array<float, 3> r = stack(a, b, a, dim);
        CHECK(r.shape() == to_shape<3>(s));
        check_equal(to_host(r), want);
        check_equal(to_host(stack(std::vector<Array<float, 2>>{a, b, a}, dim)), want);
        const int moved = np.p.dim >= dim ? np.p.dim + 1 : np.p.dim;
        CHECK(r.placement_string() == placement_of_new<3>(r.shape(), follow(np.p, moved)));
      }
      // The default: a new last dim (Julia's stack).
      Dims s;
      check_equal(to_host(stack(a, b)), cat_ref<float>({u, w}, {{5, 3, 1}, {5, 3, 1}}, 2, s));
      check_equal(to_host(cat(1, std::vector<Array<float, 2>>{b, a, b})),
                  cat_ref<float>({w, u, w}, {sh, sh, sh}, 1, s));
    }
  }
}

TEST_CASE("repeat tiles along each dim, adds dims, and takes counts of 0") {
  for (const auto& ds : device_sets()) {
    const Dims sh{3, 4};
    const auto u = fresh(sh);
    for (const auto& np : placements(2, ds)) {
      INFO("device set " << set_name(ds) << ", " << np.name);
      const Array<float, 2> a = make<2>(u, sh, np.p);
      Dims s;
      const Array<float, 2> r1 = repeat(a, 3);
      check_equal(to_host(r1), repeat_ref(u, sh, {3}, s));
      CHECK(r1.placement_string() == placement_of_new<2>(r1.shape(), follow(np.p, np.p.dim)));
      const Array<float, 2> r2 = repeat(a, 2, 5);
      CHECK(r2.shape() == Shape<2>{6, 20});
      check_equal(to_host(r2), repeat_ref(u, sh, {2, 5}, s));
      if (r2.is_replicated()) check_replicas(r2, repeat_ref(u, sh, {2, 5}, s));
      const Array<float, 3> r3 = repeat(a, 1, 3, 2);
      CHECK(r3.shape() == Shape<3>{3, 12, 2});
      check_equal(to_host(r3), repeat_ref(u, sh, {1, 3, 2}, s));
      CHECK(repeat(a, 0, 7).shape() == Shape<2>{0, 28});
      check_equal(to_host(repeat(a, 1, 1)), u);
    }
    // Uneven blocks and a long vector: 257 elements, tiled 33 times.
    const auto v = random_values<std::int32_t>(257);
    const Array<std::int32_t, 1> x = make<1>(v, {257}, shard(0, ds));
    Dims s;
    check_equal(to_host(repeat(x, 33)), repeat_ref(v, {257}, {33}, s));
    check_equal(to_host(repeat(x, 2, 3)), repeat_ref(v, {257}, {2, 3}, s));
  }
}

TEST_CASE("views as operands: strided, reversed, permuted and reshaped") {
  for (const auto& ds : device_sets()) {
    INFO("device set " << set_name(ds));
    const index_t m = 7, n = 6;
    const auto u = fresh({m, n});
    const Array<float, 2> a = make<2>(u, {m, n}, shard(1, ds));
    const Array<float, 2> b = make<2>(u, {m, n}, shard(0, ds));
    auto stepped = a(range(0, m, 2), _);                 // 4 x 6
    auto flipped = reverse(b, 0)(range(0, 4), _);        // 4 x 6
    auto turned = permutedims(a, {1, 0})(_, range(1, 5));  // 6 x 4 -> need 4 x 6:
    auto turned_back = permutedims(turned, {1, 0});      // 4 x 6
    std::vector<float> vs, vf, vt;
    for (index_t j = 0; j < n; ++j) {
      for (index_t i = 0; i < m; i += 2) vs.push_back(u[static_cast<std::size_t>(i + m * j)]);
      for (index_t i = 0; i < 4; ++i) vf.push_back(u[static_cast<std::size_t>(m - 1 - i + m * j)]);
      for (index_t i = 1; i < 5; ++i) vt.push_back(u[static_cast<std::size_t>(i + m * j)]);
    }
    Dims s;
    check_equal(to_host(cat(0, stepped, flipped, turned_back)),
                cat_ref<float>({vs, vf, vt}, {{4, n}, {4, n}, {4, n}}, 0, s));
    check_equal(to_host(hcat(turned_back, stepped)), cat_ref<float>({vt, vs}, {{4, n}, {4, n}}, 1, s));
    check_equal(to_host(stack(flipped, stepped, 1)),
                cat_ref<float>({vf, vs}, {{4, 1, n}, {4, 1, n}}, 1, s));
    check_equal(to_host(repeat(flipped, 2, 2)), repeat_ref(vf, {4, n}, {2, 2}, s));
    check_equal(to_host(vcat(vec(stepped), reshape(flipped, {4 * n}))),
                cat_ref<float>({vs, vf}, {{4 * n}, {4 * n}}, 0, s));
  }
}

TEST_CASE("element types and large operands") {
  for (const auto& ds : device_sets()) {
    INFO("device set " << set_name(ds));
    const auto l = random_values<std::int64_t>(100), r = random_values<std::int64_t>(55);
    Dims s;
    check_equal(to_host(vcat(make<1>(l, {100}, shard(0, ds)), make<1>(r, {55}, replicate(ds)))),
                cat_ref<std::int64_t>({l, r}, {{100}, {55}}, 0, s));
    const auto d = random_values<double>(12);
    check_equal(to_host(repeat(make<2>(d, {3, 4}, shard(1, ds)), 2, 2)), repeat_ref(d, {3, 4}, {2, 2}, s));
    const std::vector<bool> bl = random_values<bool>(31);
    const auto bs = to_host(hcat(from_host(bl, {31}, shard(0, ds)), from_host(bl, {31}, on(ds[0]))));
    std::vector<bool> bw = bl;
    bw.insert(bw.end(), bl.begin(), bl.end());
    CHECK(bs == bw);
    // 2^20 + 1 elements each, uneven blocks, the second on one device.
    const index_t n = (index_t(1) << 20) + 1;
    const auto u = fresh({n}), w = fresh({n});
    const Array<float, 1> x = make<1>(u, {n}, shard(0, ds)), y = make<1>(w, {n}, on(ds.back()));
    const Array<float, 2> h = hcat(x, y);
    check_equal(to_host(h), cat_ref<float>({u, w}, {{n, 1}, {n, 1}}, 1, s));
    check_equal(to_host(vcat(y, x)), cat_ref<float>({w, u}, {{n}, {n}}, 0, s));
    check_equal(to_host(repeat(reshape(x(range(0, 1 << 10)), {32, 32}), 4, 8)),
                repeat_ref(std::vector<float>(u.begin(), u.begin() + 1024), {32, 32}, {4, 8}, s));
  }
}

TEST_CASE("errors name both shapes and leave every operand intact") {
  if (skip_without_gpu()) return;
  const DeviceSet ds = device_sets().back();
  const auto u = fresh({3, 4}), w = fresh({3, 5});
  const Array<float, 2> a = make<2>(u, {3, 4}, shard(1, ds));
  const Array<float, 2> b = make<2>(w, {3, 5}, shard(0, ds));
  const Array<float, 1> v = make<1>(u, {12}, shard(0, ds));
  check_mentions(expect_error<dimension_mismatch>([&] { (void)cat(0, a, b); }),
                 {"3×4", "3×5", "operand #2", "dimension 1"});
  check_mentions(expect_error<dimension_mismatch>([&] { (void)vcat(a, b); }), {"vcat", "3×4", "3×5"});
  check_mentions(expect_error<dimension_mismatch>([&] { (void)hcat(a, v); }), {"hcat", "3×4", "12-element"});
  check_mentions(expect_error<invalid_argument>([&] { (void)cat(2, a, b); }), {"dimension 2", "[0, 2)", "stack"});
  check_mentions(expect_error<invalid_argument>([&] { (void)cat(-1, a, a); }), {"dimension -1"});
  check_mentions(expect_error<dimension_mismatch>([&] { (void)stack(a, b); }), {"stack", "3×4", "3×5"});
  check_mentions(expect_error<invalid_argument>([&] { (void)stack(a, a, 3); }), {"dimension 3", "[0, 2]"});
  check_mentions(expect_error<invalid_argument>([&] { (void)stack(std::vector<Array<float, 2>>{}); }), {"no arrays"});
  check_mentions(expect_error<invalid_argument>([&] { (void)repeat(a, 2, -1); }), {"repeat(a, 2, -1)", "3×4", ">= 0"});
  check_equal(to_host(a), u);
  check_equal(to_host(b), w);
  check_equal(to_host(v), u);
}
