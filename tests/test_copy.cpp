// SPDX-License-Identifier: Apache-2.0
// copy(a, placement): every placement to every other (sharded along each dim, replicated, on one
// device), uneven blocks, strided views as the source, memory kinds, and host devices <-> GPUs,
// checked element by element against the source's host copy; the source stays intact.
#include "test_support.hpp"

#include <vector>

using namespace tessera_test;

namespace {

std::vector<Placement> all_placements(const DeviceSet& ds) {
  std::vector<Placement> p = {shard(0, ds), shard(1, ds), shard(2, ds), replicate(ds)};
  for (Device d : ds) p.push_back(on(d));
  return p;
}

}  // namespace

TEST_CASE("copy moves an array between every pair of placements") {
  for (const auto& ds : device_sets()) {
    for (const Shape<3>& s : {Shape<3>{5, 7, 3}, Shape<3>{1, 9, 11}, Shape<3>{4, 0, 2}}) {
      const auto v = random_values<float>(static_cast<std::size_t>(detail::volume<3>(s)));
      for (const auto& from : all_placements(ds)) {
        const Array<float, 3> a = from_host(v, s, from);
        for (const auto& to : all_placements(ds)) {
          INFO("device set " << set_name(ds) << ", shape " << detail::shape_string<3>(s) << ", from "
                             << a.placement_string());
          const Array<float, 3> b = copy(a, to);
          CHECK(b.shape() == s);
          check_equal(to_host(b), v);
          if (to.kind == Placement::kind_t::replicate) check_replicas(b, v);
        }
        check_equal(to_host(a), v);  // intact
      }
    }
  }
}

TEST_CASE("copy of strided views and into device memory") {
  for (const auto& ds : device_sets()) {
    const index_t m = 13, n = 10;
    const auto v = random_values<double>(static_cast<std::size_t>(m * n));
    const Array<double, 2> a = from_host(v, {m, n}, shard(1, ds));
    auto view = a(range(m - 1, -1, -2), range(1, n));  // reversed and stepped rows, a column in
    const auto want = to_host(view);
    for (const auto& to : {shard(0, ds), shard(1, ds), replicate(ds), on(ds.back())}) {
      const Array<double, 2> b = copy(view, to, memory::device);
      CHECK(b.memory_kind() == memory::device);
      check_equal(to_host(copy(b, on(ds.front()), memory::unified)), want);
    }
  }
}

TEST_CASE("copy between host devices and GPUs") {
  if (!cuda_variant() || gpus().empty()) {
    MESSAGE("SKIPPED: needs a GPU (CUDA variant)");
    return;
  }
  const DeviceSet g = gpus(), h = host_devices(2);
  const auto v = random_values<float>(100001);
  const Array<float, 1> a = from_host(v, {100001}, shard(0, g));
  const Array<float, 1> on_host = copy(a, shard(0, h));
  CHECK(on_host.devices() == h);
  check_equal(to_host(on_host), v);
  const Array<float, 1> back = copy(on_host, replicate(g));
  check_replicas(back, v);
}

TEST_CASE("copy and copyto to an unknown device are named errors and leave the source intact") {
  for (const auto& ds : device_sets()) {
    const auto v = random_values<float>(37);
    const Array<float, 1> a = from_host(v, {37}, shard(0, ds));
    for (int id : {1000, -5}) {
      check_mentions(expect_error<invalid_argument>([&] { (void)copy(a, on(Device(id))); }),
                     {"no device with id " + std::to_string(id)});
      check_mentions(expect_error<invalid_argument>([&] { (void)copy(a, shard(0, DeviceSet{ds[0], Device(id)})); }),
                     {"no device with id " + std::to_string(id)});
    }
    check_equal(to_host(a), v);
  }
}

// Large enough (over 32 MiB crossing between GPUs) that on 3 or more GPUs the re-shard goes to one
// gather kernel per destination by default (rt::gathers_between_gpus), and from a stepped view.
// The `.nccl` ctest variant sends every batch through NCCL (comm::exchange) in 1 MiB chunks, so
// every size here runs in several chunks: pieces packed on the sources (columns -> rows),
// unpacked on the destinations (rows -> columns).
TEST_CASE("large re-shards between every split match the source element by element") {
  for (const auto& ds : device_sets()) {
    const index_t m = 4097, n = 4099;  // odd: uneven blocks and 4-byte rows
    const auto v = random_values<float>(static_cast<std::size_t>(m * n));
    const Array<float, 2> cols = from_host(v, {m, n}, shard(1, ds));
    INFO("device set " << set_name(ds));
    const Array<float, 2> rows = copy(cols, shard(0, ds));
    check_equal(to_host(rows), v);
    check_equal(to_host(copy(rows, shard(1, ds))), v);
    auto stepped = cols(range(0, m, 2), range(n - 1, -1, -1));  // every other row, columns reversed
    const auto want = to_host(stepped);
    check_equal(to_host(copy(stepped, shard(0, ds))), want);
    check_equal(to_host(cols), v);  // intact
    const auto w = random_values<double>(static_cast<std::size_t>(2049 * 2051));
    const Array<double, 2> d = from_host(w, {2049, 2051}, shard(0, ds));
    check_equal(to_host(copy(d, shard(1, ds))), w);
  }
}
