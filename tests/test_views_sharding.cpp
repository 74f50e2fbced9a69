// SPDX-License-Identifier: Apache-2.0
// Views of sharded arrays (crossing shard boundaries, inside one shard, dropping the shard
// dimension), of replicated and single-device arrays, views of views, and the CUDA.jl multi-GPU
// pattern c(_, _, g) = a(_, _, g) + b(_, _, g). Every result is compared against the plain-loop
// host reference of views_reference.hpp on fresh random data.
#include "views_reference.hpp"

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

using namespace tessera;
using namespace tessera_test;

namespace {

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

}  // namespace

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
      const auto a = make<3>(h, shape, shard(1, set));
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
      auto a = make<2>(h, shape, replicate(set));
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
      const auto b = make<2>(h, shape, on(set.back()));
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
        auto a = make<3>(h, shape, pl.p);
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
