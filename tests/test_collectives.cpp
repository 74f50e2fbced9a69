// SPDX-License-Identifier: Apache-2.0
// Collectives: allreduce, broadcast_from, allgather and reduce_scatter on arrays against plain
// loops over fresh random data (every op and element type, ranks 0 to 3, shard dims first,
// middle and last, uneven and empty blocks), the allgather -> reduce_scatter round trip, ordering
// after pending work, memory::device arrays, errors that leave arrays intact, and the comm layer's
// in-place and aliasing cases on host devices.
//
// Compile time: each (element type, rank) costs two copy/fill kernels, so the type sweeps are at
// rank 1 and ranks 0, 2, 3 use one or two types each.
#include "test_support.hpp"

#include <backend/comm/comm.hpp>

#include <array>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <type_traits>
#include <vector>

using namespace tessera;
using namespace tessera_test;

namespace {

const std::vector<reduce_op> all_ops{reduce_op::sum, reduce_op::prod, reduce_op::max, reduce_op::min};

// Calls f.template operator()<T>() for every element type: bool, int32, int64, float, double.
template <class F>
void for_each_type(F&& f) {
  f.template operator()<bool>();
  f.template operator()<std::int32_t>();
  f.template operator()<std::int64_t>();
  f.template operator()<float>();
  f.template operator()<double>();
}

const char* op_name(reduce_op o) {
  switch (o) {
    case reduce_op::sum: return "sum";
    case reduce_op::prod: return "prod";
    case reduce_op::max: return "max";
    case reduce_op::min: return "min";
  }
  return "?";
}

// The reference: NCCL's arithmetic (integers wrap, floating max/min are fmax/fmin), bool as
// or (sum, max) and and (prod, min).
template <class T>
T ref_op(reduce_op o, T a, T b) {
  if constexpr (std::is_same_v<T, bool>) {
    return o == reduce_op::sum || o == reduce_op::max ? (a || b) : (a && b);
  } else if constexpr (std::is_floating_point_v<T>) {
    switch (o) {
      case reduce_op::sum: return a + b;
      case reduce_op::prod: return a * b;
      case reduce_op::max: return std::fmax(a, b);
      case reduce_op::min: return std::fmin(a, b);
    }
  } else {
    using U = std::make_unsigned_t<T>;
    switch (o) {
      case reduce_op::sum: return static_cast<T>(static_cast<U>(static_cast<U>(a) + static_cast<U>(b)));
      case reduce_op::prod: return static_cast<T>(static_cast<U>(static_cast<U>(a) * static_cast<U>(b)));
      case reduce_op::max: return a < b ? b : a;
      case reduce_op::min: return b < a ? b : a;
    }
  }
  return a;
}

template <class T>
std::vector<T> ref_reduce(const std::vector<std::vector<T>>& reps, reduce_op o) {
  std::vector<T> acc = reps[0];
  for (std::size_t r = 1; r < reps.size(); ++r)
    for (std::size_t i = 0; i < acc.size(); ++i) acc[i] = ref_op<T>(o, acc[i], reps[r][i]);
  return acc;
}

// Floating results may be combined in another order by NCCL (ring): a little slack.
template <class T>
double atol_of() {
  return std::is_same_v<T, float> ? 1e-5 : 1e-9;
}

template <class T>
std::vector<std::vector<T>> random_replicas(std::size_t n, std::size_t len) {
  std::vector<std::vector<T>> reps;
  for (std::size_t r = 0; r < n; ++r) reps.push_back(random_values<T>(len));
  return reps;
}

// A replicated array whose replica r holds reps[r] (written through host_data, which also
// exercises the prefetch back to the owner on GPUs).
template <class T, int N>
Array<T, N> make_replicas(const std::vector<std::vector<T>>& reps, const Shape<N>& shape, const DeviceSet& ds) {
  Array<T, N> a = from_host(reps[0], shape, replicate(ds));
  for (std::size_t r = 1; r < reps.size(); ++r) {
    T* p = a.host_data(static_cast<int>(r));
    for (std::size_t i = 0; i < reps[r].size(); ++i) p[i] = reps[r][i];
  }
  return a;
}

// Replica (or shard) r of an array, read directly.
template <class T, int N>
std::vector<T> part_values(const Array<T, N>& a, int r) {
  std::vector<T> v;
  const T* p = a.host_data(r);
  const auto& part = a.layout().parts[static_cast<std::size_t>(r)];
  const index_t n = part.empty() ? 0 : detail::volume<N>(part.extent);
  for (index_t i = 0; i < n; ++i) v.push_back(p[i]);
  return v;
}

template <class T, int N>
void check_every_replica(const Array<T, N>& a, const DeviceSet& ds, const std::vector<T>& want, const char* what) {
  INFO(what << " on " << a.placement_string());
  CHECK(a.devices() == ds);
  CHECK((a.is_replicated() || ds.size() == 1));
  for (std::size_t r = 0; r < ds.size(); ++r) {
    INFO("replica " << r << " on " << ds[r].name());
    check_values(part_values(a, static_cast<int>(r)), want, 1e-5, atol_of<T>(), what);
  }
}

// The placement reduce_scatter promises: that of an array created with shard(N - 1, ds).
template <class T, int N>
void check_scattered_placement(const Array<T, N>& a, const DeviceSet& ds) {
  const Array<T, N> like(a.shape(), shard(N - 1, ds));
  INFO("result " << a.placement_string() << ", expected " << like.placement_string());
  CHECK(a.placement_string() == like.placement_string());
  CHECK(a.devices() == ds);
  CHECK_FALSE(a.is_replicated());
}

template <std::size_t N>
index_t volume_of(const std::array<index_t, N>& s) {
  index_t v = 1;
  for (auto x : s) v *= x;
  return v;
}

// -- bodies over the element type ------------------------------------------------------------

template <class T>
void allreduce_case(const DeviceSet& ds, std::size_t len, reduce_op o) {
  INFO("allreduce " << op_name(o) << " of " << len << " elements");
  const auto reps = random_replicas<T>(ds.size(), len);
  auto a = make_replicas<T, 1>(reps, {static_cast<index_t>(len)}, ds);
  allreduce(a, o);
  check_every_replica(a, ds, ref_reduce(reps, o), "allreduce");
}

template <class T>
void reduce_scatter_case(const DeviceSet& ds, std::size_t len, reduce_op o) {
  INFO("reduce_scatter " << op_name(o) << " of " << len << " elements");
  const auto reps = random_replicas<T>(ds.size(), len);
  const auto a = make_replicas<T, 1>(reps, {static_cast<index_t>(len)}, ds);
  const auto b = reduce_scatter(a, o);
  check_scattered_placement(b, ds);
  check_values(to_host(b), ref_reduce(reps, o), 1e-5, atol_of<T>(), "reduce_scatter");
  // The input is left as it was.
  check_values(part_values(a, static_cast<int>(ds.size() - 1)), reps.back(), 0, 0, "reduce_scatter input");
}

template <class T>
void broadcast_case(const DeviceSet& ds, std::size_t len) {
  const auto reps = random_replicas<T>(ds.size(), len);
  for (std::size_t root = 0; root < ds.size(); ++root) {
    INFO("broadcast_from " << ds[root].name() << " of " << len << " elements");
    auto a = make_replicas<T, 1>(reps, {static_cast<index_t>(len)}, ds);
    broadcast_from(a, ds[root]);
    check_every_replica(a, ds, reps[root], "broadcast_from");
  }
}

template <class T>
void allgather_case(const DeviceSet& ds, std::size_t len) {
  INFO("allgather of " << len << " elements");
  const auto v = random_values<T>(len);
  const auto a = from_host(v, {static_cast<index_t>(len)}, shard(0, ds));
  check_every_replica(allgather(a), ds, v, "allgather");
}

// x sharded along `dim`: allgather gives x everywhere, and reduce_scatter(sum) of that gives back
// x times the device count (x itself for bool, whose sum is an or).
template <class T, std::size_t N>
void round_trip_case(const DeviceSet& ds, const std::array<index_t, N>& shape, int dim) {
  INFO("round trip of shape " << detail::shape_string<int(N)>(shape) << " sharded along " << dim);
  const auto v = random_values<T>(static_cast<std::size_t>(volume_of(shape)));
  const auto x = from_host(v, shape, shard(dim, ds));
  const auto g = allgather(x);
  check_every_replica(g, ds, v, "allgather");
  const auto y = reduce_scatter(g);
  check_scattered_placement(y, ds);
  std::vector<T> want = v;
  if constexpr (!std::is_same_v<T, bool>)
    for (auto& w : want) w = static_cast<T>(w * static_cast<T>(ds.size()));
  check_values(to_host(y), want, 1e-5, atol_of<T>(), "reduce_scatter(allgather(x))");
}

}  // namespace

TEST_CASE("allreduce: every op and element type, against plain loops") {
  for (const auto& ds : device_sets()) {
    for (index_t n : sweep_sizes()) {
      INFO("device set " << set_name(ds));
      const auto len = static_cast<std::size_t>(n);
      if (n > 4096) {  // the large size once per type family
        allreduce_case<float>(ds, len, reduce_op::sum);
        allreduce_case<std::int64_t>(ds, len, reduce_op::max);
        continue;
      }
      for (reduce_op o : all_ops) for_each_type([&]<class T>() { allreduce_case<T>(ds, len, o); });
    }
  }
}

TEST_CASE("allreduce: ranks 2 and 3, and a 0-d array") {
  for (const auto& ds : device_sets()) {
    INFO("device set " << set_name(ds));
    {
      const auto reps = random_replicas<float>(ds.size(), 7 * 33);
      auto a = make_replicas<float, 2>(reps, {7, 33}, ds);
      allreduce(a, reduce_op::sum);
      check_every_replica(a, ds, ref_reduce(reps, reduce_op::sum), "allreduce rank 2");
    }
    {
      const auto reps = random_replicas<double>(ds.size(), 3 * 5 * 9);
      auto a = make_replicas<double, 3>(reps, {3, 5, 9}, ds);
      allreduce(a, reduce_op::min);
      check_every_replica(a, ds, ref_reduce(reps, reduce_op::min), "allreduce rank 3");
    }
    {
      const auto reps = random_replicas<float>(ds.size(), 1);
      auto a = make_replicas<float, 0>(reps, {}, ds);
      allreduce(a, reduce_op::prod);
      check_every_replica(a, ds, ref_reduce(reps, reduce_op::prod), "allreduce 0-d");
      const auto b = reduce_scatter(a, reduce_op::max);  // 0-d: replicated, like allreduce
      check_every_replica(b, ds, ref_reduce(reps, reduce_op::prod), "reduce_scatter 0-d");
    }
  }
}

TEST_CASE("allreduce: an array on one device is left as it is") {
  for (const auto& ds : device_sets()) {
    const auto v = random_values<std::int32_t>(33);
    auto a = from_host(v, {33}, on(ds.back()));
    allreduce(a, reduce_op::sum);
    CHECK(to_host(a) == v);
  }
}

TEST_CASE("broadcast_from: every root, element types and ranks") {
  for (const auto& ds : device_sets()) {
    for (index_t n : {0, 1, 31, 257, 1 << 20}) {
      INFO("device set " << set_name(ds));
      broadcast_case<std::int32_t>(ds, static_cast<std::size_t>(n));
      if (n < 4096) {
        broadcast_case<bool>(ds, static_cast<std::size_t>(n));
        broadcast_case<double>(ds, static_cast<std::size_t>(n));
      }
    }
    const auto reps = random_replicas<double>(ds.size(), 4 * 3 * 5);
    auto a = make_replicas<double, 3>(reps, {4, 3, 5}, ds);
    broadcast_from(a, ds.back());
    check_every_replica(a, ds, reps.back(), "broadcast_from rank 3");
  }
}

TEST_CASE("allgather: rank 1, every element type and size") {
  for (const auto& ds : device_sets()) {
    for (index_t n : sweep_sizes()) {
      INFO("device set " << set_name(ds));
      const auto len = static_cast<std::size_t>(n);
      allgather_case<float>(ds, len);
      if (n > 4096) continue;
      allgather_case<bool>(ds, len);
      allgather_case<std::int32_t>(ds, len);
      allgather_case<std::int64_t>(ds, len);
      allgather_case<double>(ds, len);
    }
  }
}

TEST_CASE("allgather: shard dims first, middle and last, uneven and empty blocks") {
  const std::vector<std::array<index_t, 3>> shapes{{5, 7, 3}, {4, 4, 16}, {1, 9, 2}, {3, 2, 1}, {0, 3, 4}, {2, 1, 1025}};
  for (const auto& ds : device_sets()) {
    for (const auto& s : shapes) {
      for (int dim = 0; dim < 3; ++dim) {
        INFO("device set " << set_name(ds) << ", shape " << detail::shape_string<3>(s) << ", shard(" << dim << ")");
        const auto v = random_values<float>(static_cast<std::size_t>(volume_of(s)));
        const auto a = from_host(v, s, shard(dim, ds));
        check_every_replica(allgather(a), ds, v, "allgather rank 3");
      }
    }
    for (int dim = 0; dim < 2; ++dim) {  // dim 0 is an inner dimension: blocks are rearranged
      INFO("device set " << set_name(ds) << ", shape {33, 31}, shard(" << dim << ")");
      const auto v = random_values<std::int32_t>(33 * 31);
      const auto a = from_host(v, {33, 31}, shard(dim, ds));
      check_every_replica(allgather(a), ds, v, "allgather rank 2");
    }
  }
}

TEST_CASE("allgather: one device and replicated inputs") {
  for (const auto& ds : device_sets()) {
    const auto v = random_values<double>(257);
    const auto a = from_host(v, {257}, on(ds.back()));
    check_every_replica(allgather(a), DeviceSet{ds.back()}, v, "allgather of on(device)");
    const auto r = from_host(v, {257}, replicate(ds));
    check_every_replica(allgather(r), ds, v, "allgather of a replicated array");
  }
}

TEST_CASE("reduce_scatter: every op and element type, against plain loops") {
  for (const auto& ds : device_sets()) {
    for (index_t n : sweep_sizes()) {
      INFO("device set " << set_name(ds));
      const auto len = static_cast<std::size_t>(n);
      if (n > 4096) {
        reduce_scatter_case<double>(ds, len, reduce_op::sum);
        reduce_scatter_case<std::int32_t>(ds, len, reduce_op::min);
        continue;
      }
      for (reduce_op o : all_ops) for_each_type([&]<class T>() { reduce_scatter_case<T>(ds, len, o); });
    }
  }
}

TEST_CASE("reduce_scatter: ranks 2 and 3, uneven and empty blocks") {
  for (const auto& ds : device_sets()) {
    for (index_t last : {1, 2, 5, 8, 9, 17}) {
      INFO("device set " << set_name(ds) << ", last dimension " << last);
      const Shape<3> s{3, 4, last};
      const auto reps = random_replicas<float>(ds.size(), static_cast<std::size_t>(12 * last));
      const auto a = make_replicas<float, 3>(reps, s, ds);
      const auto b = reduce_scatter(a, reduce_op::sum);
      check_scattered_placement(b, ds);
      check_values(to_host(b), ref_reduce(reps, reduce_op::sum), 1e-5, 1e-5, "reduce_scatter rank 3");
      const auto reps2 = random_replicas<std::int64_t>(ds.size(), static_cast<std::size_t>(7 * last));
      const auto c = make_replicas<std::int64_t, 2>(reps2, {7, last}, ds);
      const auto d = reduce_scatter(c, reduce_op::prod);
      check_scattered_placement(d, ds);
      check_values(to_host(d), ref_reduce(reps2, reduce_op::prod), 0, 0, "reduce_scatter rank 2");
    }
    // An empty array keeps its shape.
    const auto e = reduce_scatter(Array<float, 3>({4, 0, 3}, replicate(ds)));
    CHECK(e.shape() == Shape<3>{4, 0, 3});
    CHECK(e.empty());
  }
}

TEST_CASE("round trip: reduce_scatter(allgather(x)) is x times the device count") {
  for (const auto& ds : device_sets()) {
    INFO("device set " << set_name(ds));
    for (index_t n : {0, 1, 7, 33, 1000}) {
      round_trip_case<std::int32_t, 1>(ds, {n}, 0);
      round_trip_case<bool, 1>(ds, {n}, 0);
      round_trip_case<double, 1>(ds, {n}, 0);
    }
    for (int dim = 0; dim < 3; ++dim) {
      round_trip_case<float, 3>(ds, {5, 3, 7}, dim);
      round_trip_case<float, 3>(ds, {2, 9, 4}, dim);
    }
  }
}

TEST_CASE("collectives are ordered after pending work and before the next expression") {
  for (const auto& ds : device_sets()) {
    INFO("device set " << set_name(ds));
    const std::size_t len = 100000;
    const auto reps = random_replicas<float>(ds.size(), len);
    auto a = make_replicas<float, 1>(reps, {static_cast<index_t>(len)}, ds);
    a = a * 2.f + 1.f;  // queued on every device, then reduced
    allreduce(a);
    a = a - 1.f;  // queued after the allreduce
    std::vector<std::vector<float>> want_reps = reps;
    for (auto& rep : want_reps)
      for (auto& x : rep) x = x * 2.f + 1.f;
    auto want = ref_reduce(want_reps, reduce_op::sum);
    for (auto& x : want) x -= 1.f;
    check_every_replica(a, ds, want, "allreduce between expressions");
  }
}

TEST_CASE("memory::device arrays") {
  for (const auto& ds : device_sets()) {
    INFO("device set " << set_name(ds));
    const auto v = random_values<float>(1001);
    const auto x = from_host(v, {1001}, shard(0, ds), memory::device);
    const auto g = allgather(x);
    CHECK(g.memory_kind() == memory::device);
    // Every replica equals v exactly when the max and the min over replicas both do.
    check_values(to_host(reduce_scatter(g, reduce_op::max)), v, 0, 0, "max over the replicas of allgather(x)");
    check_values(to_host(reduce_scatter(g, reduce_op::min)), v, 0, 0, "min over the replicas of allgather(x)");
    auto r = from_host(v, {1001}, replicate(ds), memory::device);
    allreduce(r, reduce_op::sum);
    std::vector<float> want = v;
    for (auto& w : want) w *= static_cast<float>(ds.size());
    check_values(to_host(r), want, 1e-5, 1e-5, "allreduce of memory::device replicas");
  }
}

TEST_CASE("errors name what was expected and leave the arrays intact") {
  for (const auto& ds : device_sets()) {
    INFO("device set " << set_name(ds));
    auto empty = Array<float, 1>();
    CHECK_THROWS_AS(allreduce(empty), invalid_argument);
    CHECK_THROWS_AS((void)allgather(empty), invalid_argument);
    const auto v = random_values<float>(37);
    if (ds.size() > 1) {
      auto s = from_host(v, {37}, shard(0, ds));
      try {
        allreduce(s);
        FAIL_CHECK("allreduce of a sharded array did not throw");
      } catch (const placement_mismatch& e) {
        const std::string m = e.what();
        CHECK(m.find("allreduce") != std::string::npos);
        CHECK(m.find("replicated") != std::string::npos);
        CHECK(m.find("sharded along dim 0") != std::string::npos);
      }
      CHECK_THROWS_AS((void)reduce_scatter(s), placement_mismatch);
      CHECK_THROWS_AS(broadcast_from(s, ds[0]), placement_mismatch);
      CHECK(to_host(s) == v);
    }
    auto r = make_replicas<float, 1>(random_replicas<float>(ds.size(), 37), {37}, ds);
    std::vector<std::vector<float>> before;
    for (std::size_t q = 0; q < ds.size(); ++q) before.push_back(part_values(r, static_cast<int>(q)));
    const Device outsider = host_devices(static_cast<int>(ds.size()) + 1).back();
    try {
      broadcast_from(r, outsider);
      FAIL_CHECK("broadcast_from a device outside the array did not throw");
    } catch (const invalid_argument& e) {
      const std::string m = e.what();
      CHECK(m.find(outsider.name()) != std::string::npos);
      CHECK(m.find("not one of x's devices") != std::string::npos);
    }
    CHECK_THROWS_AS(broadcast_from(r, Device{}), invalid_argument);
    CHECK_THROWS_AS(allreduce(r, static_cast<reduce_op>(42)), invalid_argument);
    CHECK_THROWS_AS((void)reduce_scatter(r, static_cast<reduce_op>(42)), invalid_argument);
    for (std::size_t q = 0; q < ds.size(); ++q) CHECK(part_values(r, static_cast<int>(q)) == before[q]);
  }
}

TEST_CASE("errors: a device listed twice, and GPUs mixed with host devices") {
  if (skip_without_gpu()) return;
  const Device h = host_devices(1)[0];
  auto twice = from_host(random_values<double>(5), {5}, replicate({h, h}));
  try {
    allreduce(twice);
    FAIL_CHECK("allreduce over a device listed twice did not throw");
  } catch (const invalid_argument& e) {
    CHECK(std::string(e.what()).find("listed twice") != std::string::npos);
  }
  if (!gpus().empty()) {
    const Device g = gpus()[0];
    auto mixed = from_host(random_values<double>(5), {5}, replicate({g, h}));
    const auto before = to_host(mixed);
    try {
      allreduce(mixed);
      FAIL_CHECK("allreduce over a GPU and a host device did not throw");
    } catch (const invalid_argument& e) {
      const std::string m = e.what();
      CHECK(m.find(g.name()) != std::string::npos);
      CHECK(m.find(h.name()) != std::string::npos);
      CHECK(m.find("mixes GPUs and host devices") != std::string::npos);
    }
    CHECK(to_host(mixed) == before);
  }
}

// The comm layer itself on host devices (always available): in-place forms, aliasing, NCCL's
// arithmetic, and argument checks.
TEST_CASE("comm on host devices: in place, aliasing, arithmetic and argument checks") {
  namespace comm = tessera::detail::comm;
  const DeviceSet hs = host_devices(3);
  const int ids[3] = {hs[0].id(), hs[1].id(), hs[2].id()};
  const std::size_t k = 5;

  SUBCASE("allgather in place") {
    std::vector<std::vector<std::int32_t>> buf(3, std::vector<std::int32_t>(3 * k, -1));
    for (std::size_t r = 0; r < 3; ++r)
      for (std::size_t i = 0; i < k; ++i) buf[r][r * k + i] = static_cast<std::int32_t>(100 * r + i);
    const void* send[3];
    void* recv[3];
    for (std::size_t r = 0; r < 3; ++r) {
      send[r] = buf[r].data() + r * k;
      recv[r] = buf[r].data();
    }
    comm::allgather(ids, 3, send, recv, k * sizeof(std::int32_t));
    for (std::size_t r = 0; r < 3; ++r)
      for (std::size_t q = 0; q < 3; ++q)
        for (std::size_t i = 0; i < k; ++i) CHECK(buf[r][q * k + i] == static_cast<std::int32_t>(100 * q + i));
  }
  SUBCASE("allgather whose send buffer overlaps another rank's receive buffer") {
    std::vector<std::int32_t> big(3 * 3 * k + k);
    for (std::size_t i = 0; i < big.size(); ++i) big[i] = static_cast<std::int32_t>(i);
    const std::vector<std::int32_t> orig = big;
    const void* send[3] = {big.data() + 3 * k, big.data(), big.data() + 7 * k};  // inside recv[1] and recv[0]
    void* recv[3] = {big.data(), big.data() + 3 * k, big.data() + 6 * k + k};
    comm::allgather(ids, 3, send, recv, k * sizeof(std::int32_t));
    for (std::size_t r = 0; r < 3; ++r)
      for (std::size_t q = 0; q < 3; ++q)
        for (std::size_t i = 0; i < k; ++i) {
          const std::int32_t want = orig[static_cast<std::size_t>(static_cast<const std::int32_t*>(send[q]) - big.data()) + i];
          CHECK(static_cast<std::int32_t*>(recv[r])[q * k + i] == want);
        }
  }
  SUBCASE("allreduce in place and out of place, u8 wraps") {
    std::vector<std::vector<std::uint8_t>> in{{200, 1, 7}, {100, 2, 9}, {0, 3, 250}};
    std::vector<std::vector<std::uint8_t>> out(3, std::vector<std::uint8_t>(3));
    const void* send[3] = {in[0].data(), in[1].data(), in[2].data()};
    void* recv[3] = {out[0].data(), out[1].data(), out[2].data()};
    comm::allreduce(ids, 3, send, recv, 3, comm::dtype::u8, comm::op::sum);
    for (auto& o : out) CHECK(o == std::vector<std::uint8_t>{44, 6, 10});
    void* inplace[3] = {in[0].data(), in[1].data(), in[2].data()};
    comm::allreduce(ids, 3, send, inplace, 3, comm::dtype::u8, comm::op::max);
    for (auto& o : in) CHECK(o == std::vector<std::uint8_t>{200, 3, 250});
  }
  SUBCASE("floating max and min follow NCCL (fmax/fmin: a NaN loses against a number)") {
    const double nan = std::numeric_limits<double>::quiet_NaN();
    std::vector<std::vector<double>> in{{nan, 1.0, nan}, {2.0, nan, nan}, {-1.0, 0.5, nan}};
    const void* send[3] = {in[0].data(), in[1].data(), in[2].data()};
    void* recv[3] = {in[0].data(), in[1].data(), in[2].data()};
    comm::allreduce(ids, 3, send, recv, 3, comm::dtype::f64, comm::op::max);
    for (auto& o : in) {
      CHECK(o[0] == 2.0);
      CHECK(o[1] == 1.0);
      CHECK(std::isnan(o[2]));
    }
  }
  SUBCASE("broadcast in place") {
    std::vector<std::vector<std::int64_t>> b{{1, 2}, {3, 4}, {5, 6}};
    const void* send[3] = {b[0].data(), b[1].data(), b[2].data()};
    void* recv[3] = {b[0].data(), b[1].data(), b[2].data()};
    comm::broadcast(ids, 3, 1, send, recv, 2 * sizeof(std::int64_t));
    for (auto& o : b) CHECK(o == std::vector<std::int64_t>{3, 4});
  }
  SUBCASE("reduce_scatter in place") {
    std::vector<std::vector<float>> b(3, std::vector<float>(3 * k));
    for (std::size_t r = 0; r < 3; ++r)
      for (std::size_t i = 0; i < 3 * k; ++i) b[r][i] = static_cast<float>(r * 1000 + i);
    const auto orig = b;
    const void* send[3] = {b[0].data(), b[1].data(), b[2].data()};
    void* recv[3] = {b[0].data(), b[1].data() + k, b[2].data() + 2 * k};
    comm::reduce_scatter(ids, 3, send, recv, k, comm::dtype::f32, comm::op::sum);
    for (std::size_t r = 0; r < 3; ++r)
      for (std::size_t i = 0; i < k; ++i)
        CHECK(static_cast<float*>(recv[r])[i] == orig[0][r * k + i] + orig[1][r * k + i] + orig[2][r * k + i]);
  }
  SUBCASE("argument checks") {
    int x = 0;
    const void* send[3] = {&x, &x, &x};
    void* recv[3] = {&x, &x, &x};
    CHECK_THROWS_AS(comm::allreduce(ids, 0, send, recv, 1, comm::dtype::i32, comm::op::sum), invalid_argument);
    CHECK_THROWS_AS(comm::broadcast(ids, 3, 3, send, recv, 4), invalid_argument);
    CHECK_THROWS_AS(comm::broadcast(ids, 3, -1, send, recv, 4), invalid_argument);
    const int bad[2] = {ids[0], -5};
    CHECK_THROWS_AS(comm::allgather(bad, 2, send, recv, 4), invalid_argument);
    const int dup[2] = {ids[1], ids[1]};
    CHECK_THROWS_AS(comm::reduce_scatter(dup, 2, send, recv, 1, comm::dtype::i32, comm::op::sum), invalid_argument);
    const void* null_send[3] = {&x, nullptr, &x};
    CHECK_THROWS_AS(comm::allreduce(ids, 3, null_send, recv, 1, comm::dtype::i32, comm::op::sum), invalid_argument);
    // Nothing to move: checked, then nothing happens.
    comm::allreduce(ids, 3, null_send, recv, 0, comm::dtype::i32, comm::op::sum);
  }
}
