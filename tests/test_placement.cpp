// SPDX-License-Identifier: Apache-2.0
// Placement: shard(d) for every dimension of rank 1..3 arrays, replicate(), on(device), the
// default shard(N - 1) over devices(); balanced blocks (sizes differ by at most one, empty shards
// when the extent is smaller than the device count) checked through a.layout().parts and through
// the data each part holds; operations between operands with compatible placements (same
// placement, replicated full-shape operands, replicated size-1 operands along the shard
// dimension, single-device operands on the destination's device); and the placement a
// default-constructed Array takes. Every placement_mismatch: test_placement_mismatch.cpp.
#include "test_support.hpp"

#include <algorithm>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

using namespace tessera;
using tessera_test::check_all_close;
using tessera_test::cuda_variant;
using tessera_test::device_sets;
using tessera_test::Dims;
using tessera_test::dims_string;
using tessera_test::fresh;
using tessera_test::make;
using tessera_test::part_data;
using tessera_test::set_name;
using tessera_test::to_shape;

namespace {

// The device sets whose layouts are checked: 1 to 8 host devices in the host variant, the GPU
// sets in the CUDA variant.
std::vector<DeviceSet> layout_sets() {
  if (cuda_variant()) return device_sets();
  std::vector<DeviceSet> out;
  for (int k = 1; k <= 8; ++k) out.push_back(host_devices(k));
  return out;
}

// The column-major linear index of `idx` in `shape`.
template <int N>
index_t linear(const Shape<N>& shape, const Shape<N>& idx) {
  index_t off = 0, st = 1;
  for (int k = 0; k < N; ++k) {
    off += idx[k] * st;
    st *= shape[k];
  }
  return off;
}

// Every part holds the elements of its box: its contiguous buffer (read through host_data,
// which works for host devices and unified memory) against the global host array. Exact for
// copies; `rtol` > 0 for computed values (a GPU may contract a * b + c into one FMA).
template <int N>
void check_parts_hold(const Array<float, N>& a, const std::vector<float>& global, double rtol = 0) {
  const auto& l = a.layout();
  for (int i = 0; i < static_cast<int>(l.parts.size()); ++i) {
    const auto& p = l.parts[static_cast<std::size_t>(i)];
    const index_t n = detail::volume<N>(p.extent);
    if (n == 0) {
      CHECK(a.host_data(i) == nullptr);
      continue;
    }
    const float* h = a.host_data(i);
    REQUIRE(h != nullptr);
    Shape<N> local{}, g{};
    for (index_t e = 0; e < n; ++e) {
      for (int k = 0; k < N; ++k) g[k] = p.origin[k] + local[k];
      const float want = global[static_cast<std::size_t>(linear<N>(l.shape, g))];
      const float got = h[linear<N>(p.extent, local)];
      if (rtol > 0 ? !tessera_test::close(got, want, rtol, rtol) : got != want) {
        FAIL_CHECK("part " << i << " (" << p.device.name() << ") element " << e << " holds "
                           << h[linear<N>(p.extent, local)] << ", expected " << want);
        return;
      }
      for (int k = 0; k < N; ++k) {
        if (++local[k] < p.extent[k]) break;
        local[k] = 0;
      }
    }
  }
}

// Shard d of `shape` over `ds`: one part per device in order, each full along every other
// dimension, contiguous ascending blocks along d whose sizes differ by at most one.
template <int N>
void check_sharded_layout(const Array<float, N>& a, int d, const DeviceSet& ds, const Dims& shape) {
  INFO("shape " << dims_string(shape) << ", shard(" << d << ") over " << ds.size() << " devices");
  const auto& l = a.layout();
  CHECK(l.shape == to_shape<N>(shape));
  CHECK(a.shard_dim() == d);
  CHECK_FALSE(a.is_replicated());
  CHECK(a.devices() == ds);
  REQUIRE(l.parts.size() == ds.size());
  index_t next = 0, lo = shape[static_cast<std::size_t>(d)], hi = 0, nonempty = 0;
  for (std::size_t i = 0; i < l.parts.size(); ++i) {
    const auto& p = l.parts[i];
    CAPTURE(i);
    CHECK(p.device == ds[i]);
    for (int k = 0; k < N; ++k) {
      if (k == d) continue;
      CHECK(p.origin[k] == 0);
      CHECK(p.extent[k] == shape[static_cast<std::size_t>(k)]);
    }
    CHECK(p.origin[d] == next);
    next += p.extent[d];
    lo = std::min(lo, p.extent[d]);
    hi = std::max(hi, p.extent[d]);
    if (p.extent[d] > 0) ++nonempty;
  }
  CHECK(next == shape[static_cast<std::size_t>(d)]);
  CHECK(hi - lo <= 1);
  CHECK(nonempty == std::min<index_t>(shape[static_cast<std::size_t>(d)], static_cast<index_t>(ds.size())));
}

template <int N>
void check_replicated_layout(const Array<float, N>& a, const DeviceSet& ds, const Dims& shape) {
  const auto& l = a.layout();
  CHECK(a.is_replicated());
  CHECK(a.shard_dim() == -1);
  CHECK(a.devices() == ds);
  REQUIRE(l.parts.size() == ds.size());
  for (std::size_t i = 0; i < l.parts.size(); ++i) {
    CHECK(l.parts[i].device == ds[i]);
    CHECK(l.parts[i].origin == Shape<N>{});
    CHECK(l.parts[i].extent == to_shape<N>(shape));
  }
}

template <int N>
void check_single_layout(const Array<float, N>& a, Device d, const Dims& shape) {
  const auto& l = a.layout();
  CHECK_FALSE(a.is_replicated());
  CHECK(a.shard_dim() == -1);
  REQUIRE(l.parts.size() == 1);
  CHECK(l.parts[0].device == d);
  CHECK(l.parts[0].origin == Shape<N>{});
  CHECK(l.parts[0].extent == to_shape<N>(shape));
}

// Same devices and boxes (what a result taking an operand's placement must have).
template <int N>
void check_same_geometry(const Array<float, N>& got, const Array<float, N>& want) {
  const auto& g = got.layout();
  const auto& w = want.layout();
  CHECK(g.shape == w.shape);
  // A result takes its sharded operand's shard dimension, also over a one-device set.
  CHECK(g.shard_dim == w.shard_dim);
  CHECK(g.replicated == w.replicated);
  REQUIRE(g.parts.size() == w.parts.size());
  for (std::size_t i = 0; i < g.parts.size(); ++i) {
    CHECK(g.parts[i].device == w.parts[i].device);
    CHECK(g.parts[i].origin == w.parts[i].origin);
    CHECK(g.parts[i].extent == w.parts[i].extent);
  }
}

// The shapes used for rank N with the swept extent `n` in dimension d (others small, odd).
template <int N>
Dims shape_with(int d, index_t n) {
  Dims s(static_cast<std::size_t>(N));
  for (int k = 0; k < N; ++k) s[static_cast<std::size_t>(k)] = k == d ? n : (k == 0 ? 3 : 2);
  return s;
}

std::vector<index_t> extents() { return {0, 1, 2, 3, 5, 7, 8, 9, 17, 33, 257}; }

template <int N>
void check_shard_every_dim(const DeviceSet& ds) {
  for (int d = 0; d < N; ++d) {
    for (index_t n : extents()) {
      const Dims shape = shape_with<N>(d, n);
      const auto v = fresh(shape);
      auto a = make<N>(v, shape, shard(d, ds));
      check_sharded_layout<N>(a, d, ds, shape);
      check_parts_hold<N>(a, v);
      CHECK(to_host(a) == v);
      // A zero-filled array and a generated one get the same layout.
      check_sharded_layout<N>(Array<float, N>(to_shape<N>(shape), shard(d, ds)), d, ds, shape);
      check_sharded_layout<N>(zeros<float>(to_shape<N>(shape), shard(d, ds)), d, ds, shape);
      // at() finds every element in its part.
      if (!v.empty()) {
        const Shape<N> s = to_shape<N>(shape);
        Shape<N> idx{};
        for (int k = 0; k < N; ++k) idx[k] = s[k] - 1;
        CHECK(std::apply([&](auto... i) { return a.at(i...); }, idx) == v.back());
        CHECK(std::apply([&](auto... i) { return a.at(i...); }, Shape<N>{}) == v.front());
      }
    }
  }
}

}  // namespace

TEST_CASE("placement: shard(d) splits dimension d into balanced contiguous blocks, ranks 1 to 3") {
  for (const auto& ds : layout_sets()) {
    CAPTURE(set_name(ds));
    check_shard_every_dim<1>(ds);
    check_shard_every_dim<2>(ds);
    check_shard_every_dim<3>(ds);
  }
}

TEST_CASE("placement: the block sizes, spelled out for 10 elements") {
  // Balanced: sizes differ by at most one; fewer elements than devices leaves empty shards.
  const std::vector<std::vector<index_t>> sizes_for = {{10}, {5, 5}, {4, 3, 3}, {3, 3, 2, 2}, {2, 2, 2, 2, 2},
                                                       {2, 2, 2, 2, 1, 1}, {2, 2, 2, 1, 1, 1, 1},
                                                       {2, 2, 1, 1, 1, 1, 1, 1}};
  for (const auto& ds : layout_sets()) {
    CAPTURE(set_name(ds));
    auto a = make<1>(fresh({10}), {10}, shard(0, ds));
    std::vector<index_t> got;
    for (auto& p : a.layout().parts) got.push_back(p.extent[0]);
    std::vector<index_t> sorted = got;
    std::sort(sorted.rbegin(), sorted.rend());
    if (ds.size() <= 8) CHECK(sorted == sizes_for[ds.size() - 1]);
    auto b = make<1>(fresh({3}), {3}, shard(0, ds));
    std::size_t empty = 0;
    for (auto& p : b.layout().parts) empty += p.extent[0] == 0;
    CHECK(empty == (ds.size() > 3 ? ds.size() - 3 : 0));
  }
}

TEST_CASE("placement: replicate() keeps one full copy per device") {
  for (const auto& ds : layout_sets()) {
    CAPTURE(set_name(ds));
    for (index_t n : extents()) {
      CAPTURE(n);
      const Dims s1{n}, s3{2, n, 3};
      const auto v1 = fresh(s1), v3 = fresh(s3);
      auto a = make<1>(v1, s1, replicate(ds));
      auto b = make<3>(v3, s3, replicate(ds));
      check_replicated_layout<1>(a, ds, s1);
      check_replicated_layout<3>(b, ds, s3);
      check_parts_hold<1>(a, v1);
      check_parts_hold<3>(b, v3);
      CHECK(to_host(a) == v1);
      CHECK(to_host(b) == v3);
      // A computation into a replicated destination writes every replica.
      const auto w = fresh(s1);
      const auto c = make<1>(w, s1, replicate(ds));
      Array<float, 1> r(Shape<1>{n}, replicate(ds));
      r = a * c + a;
      std::vector<float> want(v1.size());
      for (std::size_t i = 0; i < v1.size(); ++i) want[i] = v1[i] * w[i] + v1[i];
      check_parts_hold<1>(r, want, 1e-5);
    }
  }
}

TEST_CASE("placement: on(device) keeps the whole array on one device") {
  for (const auto& ds : layout_sets()) {
    CAPTURE(set_name(ds));
    for (Device d : ds) {
      CAPTURE(d.name());
      for (index_t n : {index_t(0), index_t(1), index_t(9), index_t(257)}) {
        const Dims s{n, 3};
        const auto v = fresh(s);
        auto a = make<2>(v, s, on(d));
        check_single_layout<2>(a, d, s);
        check_parts_hold<2>(a, v);
        CHECK(to_host(a) == v);
        CHECK(a.devices() == DeviceSet{d});
      }
    }
  }
}

TEST_CASE("placement: the default is shard(N - 1) over devices(); 0-d arrays are replicated") {
  if (tessera_test::skip_without_gpu()) return;
  const DeviceSet ds = devices();
  CAPTURE(set_name(ds));
  for (index_t n : {index_t(0), index_t(1), index_t(5), index_t(33)}) {
    CAPTURE(n);
    check_sharded_layout<1>(Array<float, 1>(Shape<1>{n}), 0, ds, {n});
    check_sharded_layout<2>(Array<float, 2>(Shape<2>{3, n}), 1, ds, {3, n});
    check_sharded_layout<3>(Array<float, 3>(Shape<3>{2, 3, n}), 2, ds, {2, 3, n});
    check_sharded_layout<2>(zeros<float>({4, n}), 1, ds, {4, n});
    const auto v = fresh({n, 2});
    check_sharded_layout<2>(from_host(v, {n, 2}), 1, ds, {n, 2});
    // shard(d) without devices uses the default device set.
    check_sharded_layout<2>(zeros<float>({n, 4}, shard(0)), 0, ds, {n, 4});
  }
  check_replicated_layout<1>(zeros<float>({5}, replicate()), ds, {5});
  check_replicated_layout<0>(Array<float, 0>(Shape<0>{}), ds, {});
}

TEST_CASE("placement: a shard dimension outside the rank is refused") {
  for (const auto& ds : layout_sets()) {
    CAPTURE(set_name(ds));
    for (int d : {-1, 2, 3}) {
      CAPTURE(d);
      try {
        (void)zeros<float>({3, 4}, shard(d, ds));
        FAIL_CHECK("no exception");
      } catch (const invalid_argument& e) {
        const std::string msg = e.what();
        CHECK_MESSAGE(msg.find("shard(" + std::to_string(d) + ")") != std::string::npos, msg);
        CHECK_MESSAGE(msg.find("rank 2") != std::string::npos, msg);
      }
    }
  }
}

// -- computing with compatible placements ---------------------------------------------------------

namespace {

// c = a * b + a with a, b and c all placed by `p`: values against the reference, and the result of
// eval taking that placement.
template <int N>
void check_same_placement(const Dims& shape, const Placement& p) {
  INFO("shape " << dims_string(shape));
  const auto va = fresh(shape), vb = fresh(shape);
  const auto a = make<N>(va, shape, p);
  const auto b = make<N>(vb, shape, p);
  std::vector<double> want(va.size());
  for (std::size_t i = 0; i < va.size(); ++i) want[i] = double(va[i]) * vb[i] + va[i];
  auto e = eval(a * b + a);
  check_same_geometry<N>(e, a);
  check_all_close(to_host(e), want);
  Array<float, N> c(to_shape<N>(shape), p);
  const auto before = part_data(b);
  assign(c, a * b + a, seq);
  check_all_close(to_host(c), want);
  check_parts_hold<N>(c, to_host(c));  // every replica holds what the first one holds
  CHECK(to_host(a) == va);
  CHECK(part_data(b) == before);
}

}  // namespace

TEST_CASE("placement: operands with the same placement, every shard dimension, uneven blocks") {
  for (const auto& ds : device_sets()) {
    CAPTURE(set_name(ds));
    for (index_t n : tessera_test::sweep_sizes()) {
      CAPTURE(n);
      check_same_placement<1>({n}, shard(0, ds));
      if (n > 100000) continue;  // the large size once, rank 1
      check_same_placement<1>({n}, replicate(ds));
      check_same_placement<1>({n}, on(ds.back()));
      for (int d = 0; d < 2; ++d) check_same_placement<2>(shape_with<2>(d, n), shard(d, ds));
      check_same_placement<2>({3, n}, replicate(ds));
      for (int d = 0; d < 3; ++d) check_same_placement<3>(shape_with<3>(d, n), shard(d, ds));
      check_same_placement<3>({n, 2, 3}, on(ds[0]));
    }
    // About 1e6 elements over every placement of a matrix.
    for (int d = 0; d < 2; ++d) check_same_placement<2>({1023, 1025}, shard(d, ds));
    check_same_placement<2>({1023, 1025}, replicate(ds));
  }
}

TEST_CASE("placement: a replicated operand with the full shape is read by a sharded destination") {
  for (const auto& ds : device_sets()) {
    CAPTURE(set_name(ds));
    for (index_t n : {0, 1, 2, 5, 7, 33, 257}) {
      for (int d = 0; d < 2; ++d) {
        CAPTURE(n);
        CAPTURE(d);
        const Dims s = shape_with<2>(d, n);
        const auto va = fresh(s), vr = fresh(s);
        const auto a = make<2>(va, s, shard(d, ds));
        const auto r = make<2>(vr, s, replicate(ds));
        std::vector<double> want(va.size());
        for (std::size_t i = 0; i < va.size(); ++i) want[i] = double(va[i]) + vr[i];
        auto e = eval(a + r);  // takes a's placement
        check_same_geometry<2>(e, a);
        check_all_close(to_host(e), want);
        auto e2 = eval(r + a);  // the sharded operand wins whatever its position
        check_same_geometry<2>(e2, a);
        check_all_close(to_host(e2), want);
        Array<float, 2> c(to_shape<2>(s), shard(d, ds));
        c(_, _) = r;  // a plain copy from the replicas into the shards
        check_parts_hold<2>(c, vr);
        CHECK(to_host(r) == vr);
      }
    }
  }
}

TEST_CASE("placement: a replicated operand of size 1 along the shard dimension broadcasts") {
  for (const auto& ds : device_sets()) {
    CAPTURE(set_name(ds));
    for (auto [m, n] : std::vector<std::pair<index_t, index_t>>{{0, 3}, {1, 1}, {5, 1}, {5, 2}, {7, 9}, {33, 257}}) {
      CAPTURE(m);
      CAPTURE(n);
      const Dims s{m, n};
      const auto vm = fresh(s), vv = fresh({m}), vc = fresh({m, 1});
      const auto M = make<2>(vm, s, shard(1, ds));
      const auto v = make<1>(vv, {m}, replicate(ds));     // rank 1: dimension 1 is missing (size 1)
      const auto col = make<2>(vc, {m, 1}, replicate(ds));  // explicit m×1
      std::vector<double> w1(vm.size()), w2(vm.size());
      for (index_t j = 0; j < n; ++j)
        for (index_t i = 0; i < m; ++i) {
          const auto k = static_cast<std::size_t>(i + j * m), ii = static_cast<std::size_t>(i);
          w1[k] = double(vm[k]) + vv[ii];
          w2[k] = double(vm[k]) + vc[ii];
        }
      auto e1 = eval(M + v);
      check_same_geometry<2>(e1, M);
      check_all_close(to_host(e1), w1);
      auto e2 = eval(col + M);
      check_same_geometry<2>(e2, M);
      check_all_close(to_host(e2), w2);
      // Rank 3 sharded along dim 2, a replicated matrix (missing dim 2) broadcast over it.
      const Dims s3{m, n, 5};
      const auto vt = fresh(s3);
      const auto T = make<3>(vt, s3, shard(2, ds));
      const auto Mr = make<2>(vm, s, replicate(ds));
      auto e3 = eval(T + Mr);
      std::vector<double> w3(vt.size());
      for (std::size_t i = 0; i < vt.size(); ++i) w3[i] = double(vt[i]) + vm[i % vm.size()];
      check_all_close(to_host(e3), w3);
      if (ds.size() > 1) CHECK(e3.shard_dim() == 2);
    }
  }
}

TEST_CASE("placement: single-device operands with a destination on the same device") {
  for (const auto& ds : device_sets()) {
    CAPTURE(set_name(ds));
    for (Device d : ds) {
      CAPTURE(d.name());
      for (index_t n : {0, 1, 7, 257}) {
        CAPTURE(n);
        const Dims s{n, 3};
        const auto va = fresh(s), vb = fresh(s);
        const auto a = make<2>(va, s, on(d));
        const auto b = make<2>(vb, s, on(d));
        std::vector<double> want(va.size());
        for (std::size_t i = 0; i < va.size(); ++i) want[i] = double(va[i]) + vb[i];
        auto e = eval(a + b);
        check_single_layout<2>(e, d, s);
        check_all_close(to_host(e), want);
        Array<float, 2> c(to_shape<2>(s), on(d));
        c(_, _) = a + b;
        check_all_close(to_host(c), want);
        // A one-device shard set is the same thing.
        Array<float, 2> c1(to_shape<2>(s), shard(1, DeviceSet{d}));
        c1(_, _) = a + b;
        check_all_close(to_host(c1), want);
        // A replicated operand has a copy on d.
        const auto r = make<2>(vb, s, replicate(ds));
        auto e2 = eval(a + r);
        check_single_layout<2>(e2, d, s);
        check_all_close(to_host(e2), want);
      }
    }
  }
}

TEST_CASE("placement: a default-constructed Array takes the expression's placement") {
  for (const auto& ds : device_sets()) {
    CAPTURE(set_name(ds));
    const Dims s{7, 9};
    const auto va = fresh(s), vr = fresh(s), vq = fresh(s);
    const auto r = make<2>(vr, s, replicate(ds));
    const auto q = make<2>(vq, s, replicate(ds));
    std::vector<double> want(va.size());
    for (std::size_t i = 0; i < va.size(); ++i) want[i] = double(vr[i]) + va[i];
    for (int d = 0; d < 2; ++d) {
      CAPTURE(d);
      // From the sharded operand, wherever it sits.
      const auto a = make<2>(va, s, shard(d, ds));
      Array<float, 2> c;
      c = r + a;
      check_same_geometry<2>(c, a);
      check_all_close(to_host(c), want);
      Array<float, 2> c2 = r + a;
      check_same_geometry<2>(c2, a);
      // A sharded operand over a one-device set keeps its placement (shard(d) over that device),
      // as over several devices (issue #19: CuPy's squared_diff on one GPU).
      const auto one = make<2>(va, s, shard(d, DeviceSet{ds.back()}));
      Array<float, 2> c3;
      c3 = r + one;
      check_same_geometry<2>(c3, one);
      CHECK(c3.shard_dim() == d);
      check_all_close(to_host(c3), want);
    }
    // Else from the single-device operand.
    for (Device d : ds) {
      const auto o = make<2>(va, s, on(d));
      Array<float, 2> c;
      c = r + o;
      check_single_layout<2>(c, d, s);
      check_all_close(to_host(c), want);
    }
    // Else replicated.
    Array<float, 2> c;
    c = r + q;
    check_replicated_layout<2>(c, ds, s);
    std::vector<float> wrq(vr.size());
    for (std::size_t i = 0; i < vr.size(); ++i) wrq[i] = vr[i] + vq[i];
    check_parts_hold<2>(c, wrq);
    Array<float, 1> z;
    const auto vz = fresh({3});
    z = make<1>(vz, {3}, replicate(ds)) * 2.f;
    check_replicated_layout<1>(z, ds, {3});
    check_parts_hold<1>(z, {vz[0] * 2.f, vz[1] * 2.f, vz[2] * 2.f});
  }
}
