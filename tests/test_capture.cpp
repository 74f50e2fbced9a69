// SPDX-License-Identifier: Apache-2.0
// Captured loops (tessera/capture.hpp): a body of ten operations captured once and replayed gives
// the same bits as the same operations launched plainly, on 1, 2, 3 and 8 host devices and on one
// and every GPU, for sizes 0, 1, odd, 2^16 and 2^20 + 1; capture records without running; the
// body's temporaries survive for the replays; copies between devices and halo exchanges replay;
// what would wait for the host is refused by name and leaves every array intact.
#include "test_support.hpp"

#include <memory>
#include <string>
#include <vector>

using namespace tessera_test;

namespace {

// Ten operations on a, b (read) and c, d, e (read and written), with a temporary.
void step(const Array<float, 1>& a, const Array<float, 1>& b, Array<float, 1>& c, Array<float, 1>& d,
          Array<float, 1>& e) {
  c = a + b;
  d = sin(c) * a + 2.0f * b;
  e = where(d > 0.0f, d, -d);
  c += 0.5f * e;
  Array<float, 1> t = c * d - a;  // freed at the end of the body
  d = t / (1.0f + abs(t));
  e = max(e, d) + cos(b);
  c = fma(c, 0.25f, e);
  d -= c;
  e = sqrt(abs(d)) + t;
}

}  // namespace

TEST_CASE("capture and replay equal plain launches, bit for bit") {
  for (const auto& ds : device_sets()) {
    for (index_t n : {index_t(0), index_t(1), index_t(7), index_t(1) << 16, (index_t(1) << 20) + 1}) {
      for (const Placement& p : {shard(0, ds), replicate(ds), on(ds[0])}) {
        INFO(set_name(ds) << ", n = " << n);
        const auto av = random_values<float>(static_cast<std::size_t>(n)),
                   bv = random_values<float>(static_cast<std::size_t>(n));
        const auto a = from_host(std::span<const float>(av), {n}, p), b = from_host(std::span<const float>(bv), {n}, p);
        Array<float, 1> c = zeros<float>({n}, p), d = zeros<float>({n}, p), e = zeros<float>({n}, p);
        Array<float, 1> c2 = zeros<float>({n}, p), d2 = zeros<float>({n}, p), e2 = zeros<float>({n}, p);
        auto g = capture([&] { step(a, b, c, d, e); });
        // Recorded, not run.
        CHECK(to_host(c) == std::vector<float>(static_cast<std::size_t>(n), 0.0f));
        for (int it = 0; it < 3; ++it) {
          g.replay();
          step(a, b, c2, d2, e2);
        }
        CHECK(to_host(c) == to_host(c2));
        CHECK(to_host(d) == to_host(d2));
        CHECK(to_host(e) == to_host(e2));
        g.replay(2);
        step(a, b, c2, d2, e2);
        step(a, b, c2, d2, e2);
        CHECK(to_host(e) == to_host(e2));
      }
    }
  }
}

TEST_CASE("copies between devices and halo exchanges replay") {
  for (const auto& ds : device_sets()) {
    INFO(set_name(ds));
    const index_t m = 33, n = 64;
    const auto v0 = random_values<float>(static_cast<std::size_t>(m * n));
    const Placement hp = shard(1, halo(1), ds);
    Array<float, 2> u = from_host(std::span<const float>(v0), {m, n}, hp), w = from_host(std::span<const float>(v0), {m, n}, hp);
    Array<float, 2> u2 = from_host(std::span<const float>(v0), {m, n}, hp), w2 = from_host(std::span<const float>(v0), {m, n}, hp);
    Array<float, 2> rows = zeros<float>({m, n}, shard(0, ds)), rows2 = zeros<float>({m, n}, shard(0, ds));
    auto body = [](Array<float, 2>& src, Array<float, 2>& dst, Array<float, 2>& r) {
      const index_t M = src.shape()[0], N = src.shape()[1];
      // A Jacobi sweep of the interior, then the halo exchange, then a re-sharding copy.
      dst(range(1, M - 1), range(1, N - 1)) =
          0.25f * (src(range(0, M - 2), range(1, N - 1)) + src(range(2, M), range(1, N - 1)) +
                   src(range(1, M - 1), range(0, N - 2)) + src(range(1, M - 1), range(2, N)));
      update_halo(dst);
      copyto(r, dst);
      src = dst + 0.0f;
    };
    auto g = capture([&] { body(u, w, rows); });
    for (int it = 0; it < 5; ++it) {
      g.replay();
      body(u2, w2, rows2);
    }
    CHECK(to_host(u) == to_host(u2));
    CHECK(to_host(rows) == to_host(rows2));
  }
}

TEST_CASE("an array made in the body may escape it; its storage stays the graph's") {
  for (const auto& ds : device_sets()) {
    INFO(set_name(ds));
    const auto av = random_values<float>(1000);
    const auto a = from_host(std::span<const float>(av), {1000}, shard(0, ds));
    Array<float, 1> y;  // no storage yet: the body gives it some
    auto g = capture([&] { y = Array<float, 1>(a + 1.0f); });
    g.replay();
    std::vector<float> want(av);
    for (auto& w : want) w += 1.0f;
    CHECK(to_host(y) == want);
    y = zeros<float>({1000}, shard(0, ds));  // the graph keeps the old storage and still writes it
    g.replay(3);
    CHECK(to_host(y) == std::vector<float>(1000, 0.0f));
    CHECK(to_host(a) == av);
    // A graph destroyed inside another capture's body: its blocks go to that capture.
    auto inner = std::make_unique<CapturedGraph>(capture([&] { y = a * 3.0f; }));
    inner->replay();
    auto outer = capture([&] {
      inner.reset();
      y = a * 2.0f;
    });
    outer.replay();
    std::vector<float> twice(av);
    for (auto& w : twice) w *= 2.0f;
    CHECK(to_host(y) == twice);
  }
}

TEST_CASE("a body that waits for the host is refused by name, and nothing changes") {
  for (const auto& ds : device_sets()) {
    INFO(set_name(ds));
    const auto av = random_values<float>(100);
    auto a = from_host(std::span<const float>(av), {100}, shard(0, ds));
    Array<float, 1> c = zeros<float>({100}, shard(0, ds));
    check_mentions(expect_error<invalid_argument>([&] { capture([&] { c = a + 1.0f; (void)to_host(c); }); }),
                   {"capture", "host read"});
    check_mentions(expect_error<invalid_argument>([&] { capture([&] { (void)sum(a); }); }), {"capture", "reduction"});
    check_mentions(expect_error<invalid_argument>([&] { capture([&] { synchronize(); }); }), {"capture", "wait"});
    check_mentions(expect_error<invalid_argument>([&] { capture([&] { capture([] {}); }); }),
                   {"capture inside another capture"});
    check_mentions(expect_error<invalid_argument>([&] { capture([&] { c = cumsum(a, 0); }); }), {"capture"});
    if (ds.size() > 1) {
      Array<float, 1> r = ones<float>({8}, replicate(ds));
      check_mentions(expect_error<invalid_argument>([&] { capture([&] { allreduce(r); }); }), {"capture"});
    }
    // Nothing ran and the runtime still works.
    CHECK(to_host(c) == std::vector<float>(100, 0.0f));
    CHECK(to_host(a) == av);
    c = a * 2.0f;
    CHECK(to_host(c)[5] == av[5] * 2.0f);
    // Re-binding an array from outside to a new array would leave the replays on its old storage.
    Array<float, 1> v = ones<float>({100}, shard(0, ds));
    check_mentions(expect_error<invalid_argument>([&] { capture([&] { v = Array<float, 1>(v * 2.0f); }); }),
                   {"capture", "re-bound", "copyto"});
    CapturedGraph empty;
    check_mentions(expect_error<invalid_argument>([&] { empty.replay(); }), {"empty CapturedGraph"});
    auto g = capture([] {});
    g.replay();  // nothing recorded: a no-op
    CapturedGraph moved = std::move(g);
    CHECK(g.empty());
    moved.replay();
  }
}
