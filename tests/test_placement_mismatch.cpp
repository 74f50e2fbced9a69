// SPDX-License-Identifier: Apache-2.0
// placement_mismatch: every combination of placements that Tessera refuses rather than moving data
// between devices behind the user's back (different shard dimensions, device sets or block
// boundaries, a sharded operand read by a replicated destination, a sharded size-1 operand), with
// a message that names the operand and the fix, leaving every array intact (every part, every
// replica). Compatible placements and layouts: test_placement.cpp.
#include "test_support.hpp"

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

using namespace tessera;
using tessera_test::check_mentions;
using tessera_test::device_sets;
using tessera_test::Dims;
using tessera_test::expect_error;
using tessera_test::fresh;
using tessera_test::make;
using tessera_test::multi_device_sets;
using tessera_test::part_data;
using tessera_test::set_name;

namespace {

DeviceSet prefix(const DeviceSet& ds, std::size_t n) { return DeviceSet(ds.begin(), ds.begin() + static_cast<long>(n)); }

// Runs f, expects placement_mismatch whose message mentions every string of `parts` (the operand,
// its placement, the destination and the fix); returns the message.
template <class F>
std::string expect_mismatch(F&& f, const std::vector<std::string>& parts) {
  const std::string msg = expect_error<placement_mismatch>(std::forward<F>(f));
  check_mentions(msg, parts);
  return msg;
}

const std::vector<std::string> fix_words = {"tessera::placement_mismatch", "Fix:", "replicate()"};

std::vector<std::string> with_fix(std::vector<std::string> v) {
  v.insert(v.end(), fix_words.begin(), fix_words.end());
  return v;
}

// dst = a + b must throw placement_mismatch naming operand #bad (1 or 2) and leave dst, a and b
// exactly as they were (every part, every replica). So must eval(a + b) and the assignment to a
// default-constructed array, which then still has no storage.
void check_mismatch(Array<float, 2>& dst, const Array<float, 2>& a, const Array<float, 2>& b, int bad,
                    const std::vector<std::string>& extra, bool eval_throws = true) {
  const auto sd = part_data(dst), sa = part_data(a), sb = part_data(b);
  std::vector<std::string> parts = with_fix(extra);
  parts.push_back("operand #" + std::to_string(bad));
  expect_mismatch([&] { dst(_, _) = a + b; }, parts);
  CHECK(part_data(dst) == sd);
  expect_mismatch([&] { assign(dst, a + b, seq); }, parts);
  CHECK(part_data(dst) == sd);
  if (eval_throws) {
    expect_mismatch([&] { (void)eval(a + b); }, with_fix({}));
    Array<float, 2> fresh_dst;
    expect_mismatch([&] { fresh_dst = a + b; }, with_fix({}));
    CHECK_FALSE(fresh_dst.has_storage());
  }
  CHECK(part_data(a) == sa);
  CHECK(part_data(b) == sb);
  // The library keeps working after the error.
  dst(_, _) = 1.f;
  const auto h = to_host(dst);
  CHECK(std::all_of(h.begin(), h.end(), [](float x) { return x == 1.f; }));
}

}  // namespace

TEST_CASE("placement_mismatch: different shard dimensions") {
  for (const auto& ds : multi_device_sets()) {
    CAPTURE(set_name(ds));
    const auto k = static_cast<index_t>(ds.size());
    const Dims s{2 * k + 1, 3 * k + 2};
    auto a = make<2>(fresh(s), s, shard(0, ds));
    auto b = make<2>(fresh(s), s, shard(1, ds));
    auto c = make<2>(fresh(s), s, shard(0, ds));
    check_mismatch(c, a, b, 2, {"sharded along dim 1", "sharded along dim 0"});
    auto c1 = make<2>(fresh(s), s, shard(1, ds));
    check_mismatch(c1, a, b, 1, {"sharded along dim 0", "sharded along dim 1"});
    // Compound assignment: c (operand #1) is fine, b (#2) is not.
    const auto sc = part_data(c);
    expect_mismatch([&] { c += b; }, with_fix({"operand #2"}));
    CHECK(part_data(c) == sc);
    // A rank-1 vector sharded along dim 0 cannot serve a matrix sharded along dim 1.
    const auto v = make<1>(fresh({s[0]}), {s[0]}, shard(0, ds));
    expect_mismatch([&] { c1(_, _) = c1 + v; }, with_fix({"operand #2", "-element"}));
    CHECK(part_data(c) == sc);
  }
}

TEST_CASE("placement_mismatch: different device sets") {
  for (const auto& ds : multi_device_sets()) {
    CAPTURE(set_name(ds));
    const auto k = static_cast<index_t>(ds.size());
    const Dims s{3, 2 * k + 1};
    DeviceSet rev(ds.rbegin(), ds.rend());
    auto a = make<2>(fresh(s), s, shard(1, ds));
    auto b = make<2>(fresh(s), s, shard(1, rev));  // same blocks, devices in the other order
    auto c = make<2>(fresh(s), s, shard(1, ds));
    check_mismatch(c, a, b, 2, {"operand #2", ds[0].name(), ds[1].name()});
    // The whole operand on one device of the set.
    auto o = make<2>(fresh(s), s, on(ds[1]));
    check_mismatch(c, a, o, 2, {"on " + ds[1].name()}, /*eval_throws=*/true);
    // Replicated over a smaller set than the destination's.
    auto r = make<2>(fresh(s), s, replicate(prefix(ds, ds.size() - 1)));
    check_mismatch(c, a, r, 2, {"replicated over"});
    // Disjoint halves.
    if (ds.size() >= 4) {
      const DeviceSet lo = prefix(ds, ds.size() / 2), hi(ds.begin() + static_cast<long>(ds.size() / 2), ds.end());
      auto x = make<2>(fresh(s), s, shard(1, lo));
      auto y = make<2>(fresh(s), s, shard(1, hi));
      auto cx = make<2>(fresh(s), s, shard(1, lo));
      check_mismatch(cx, x, y, 2, {});
    }
  }
  // A destination on one device and an operand on another (a GPU and a host device in the CUDA
  // variant: this also runs with a single GPU).
  for (const auto& ds : device_sets()) {
    CAPTURE(set_name(ds));
    const Device other = ds[0].is_host() ? host_devices(2)[1] : host_devices(1)[0];
    const Dims s{4, 5};
    auto a = make<2>(fresh(s), s, on(ds[0]));
    auto b = make<2>(fresh(s), s, on(other));
    auto c = make<2>(fresh(s), s, on(ds[0]));
    check_mismatch(c, a, b, 2, {"on " + other.name(), ds[0].name()});
  }
}

TEST_CASE("placement_mismatch: different block boundaries") {
  // shard(0) over 2 versus 3 host devices: the blocks of 9 rows are [0,5) [5,9) and
  // [0,3) [3,6) [6,9). Always available, whatever the backend.
  {
    const Dims s{9, 4};
    auto a2 = make<2>(fresh(s), s, shard(0, host_devices(2)));
    auto a3 = make<2>(fresh(s), s, shard(0, host_devices(3)));
    auto c2 = make<2>(fresh(s), s, shard(0, host_devices(2)));
    auto c3 = make<2>(fresh(s), s, shard(0, host_devices(3)));
    check_mismatch(c2, a2, a3, 2, {"[0,3)", "[3,6)", "[6,9)"});
    check_mismatch(c3, a3, a2, 2, {"[0,5)", "[5,9)"});
  }
  for (const auto& ds : multi_device_sets()) {
    CAPTURE(set_name(ds));
    if (ds.size() >= 3) {
      const Dims s{5, 7};
      auto a2 = make<2>(fresh(s), s, shard(1, prefix(ds, 2)));
      auto a3 = make<2>(fresh(s), s, shard(1, prefix(ds, 3)));
      auto c3 = make<2>(fresh(s), s, shard(1, prefix(ds, 3)));
      check_mismatch(c3, a3, a2, 2, {});
    }
    // Same devices, shifted blocks: a window a(_, range(1, n + 1)) of a sharded (n + 1)-column
    // array against an n-column array. Works exactly when the blocks happen to coincide.
    for (index_t n : {index_t(ds.size()), index_t(2 * ds.size() + 1), index_t(10), index_t(33)}) {
      CAPTURE(n);
      const Dims sb{3, n + 1}, s{3, n};
      const auto vb = fresh(sb), vc = fresh(s);
      auto big = make<2>(vb, sb, shard(1, ds));
      auto c = make<2>(vc, s, shard(1, ds));
      auto w = big(_, range(1, n + 1));
      bool same = w.layout().parts.size() == c.layout().parts.size();
      for (std::size_t i = 0; same && i < c.layout().parts.size(); ++i) {
        const auto &pw = w.layout().parts[i], &pc = c.layout().parts[i];
        same = pw.device == pc.device && pw.origin == pc.origin && pw.extent == pc.extent;
      }
      CAPTURE(same);
      const auto sc = part_data(c);
      if (same) {
        c(_, _) = c + w;
        std::vector<float> want(vc.size());
        for (index_t j = 0; j < n; ++j)
          for (index_t i = 0; i < 3; ++i) {
            const auto kk = static_cast<std::size_t>(i + 3 * j);
            want[kk] = vc[kk] + vb[static_cast<std::size_t>(i + 3 * (j + 1))];
          }
        CHECK(to_host(c) == want);
      } else {
        expect_mismatch([&] { c(_, _) = c + w; }, with_fix({"operand #2"}));
        CHECK(part_data(c) == sc);
        CHECK(to_host(big) == vb);
      }
    }
  }
}

TEST_CASE("placement_mismatch: a sharded operand read by a replicated destination") {
  for (const auto& ds : multi_device_sets()) {
    CAPTURE(set_name(ds));
    const auto k = static_cast<index_t>(ds.size());
    for (index_t n : {index_t(2), k, 2 * k + 1}) {
      CAPTURE(n);
      const Dims s{3, n};
      auto a = make<2>(fresh(s), s, shard(1, ds));
      auto r = make<2>(fresh(s), s, replicate(ds));
      auto c = make<2>(fresh(s), s, replicate(ds));
      // The destination is replicated: every device computes everything.
      check_mismatch(c, r, a, 2, {"replicated over", "sharded along dim 1"}, /*eval_throws=*/false);
      // The result of eval(r + a) takes a's placement, so that one works.
      auto e = eval(r + a);
      CHECK(e.shard_dim() == 1);
    }
  }
}

TEST_CASE("placement_mismatch: an operand of size 1 along the shard dimension must be replicated") {
  for (const auto& ds : multi_device_sets()) {
    CAPTURE(set_name(ds));
    const auto k = static_cast<index_t>(ds.size());
    const Dims s{5, 2 * k + 1};
    auto M = make<2>(fresh(s), s, shard(1, ds));
    auto c = make<2>(fresh(s), s, shard(1, ds));
    // 5×1 sharded along dim 1: only the first device holds its column.
    auto col = make<2>(fresh({5, 1}), {5, 1}, shard(1, ds));
    check_mismatch(c, M, col, 2, {"5×1", "sharded along dim 1"}, /*eval_throws=*/true);
    // The same operand replicated works.
    const auto vc = to_host(col);
    auto colr = make<2>(vc, {5, 1}, replicate(ds));
    c(_, _) = M + colr;
    const auto vm = to_host(M);
    std::vector<float> want(vm.size());
    for (std::size_t i = 0; i < vm.size(); ++i) want[i] = vm[i] + vc[i % 5];
    CHECK(to_host(c) == want);
  }
}
