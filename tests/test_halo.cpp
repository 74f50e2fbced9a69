// SPDX-License-Identifier: Apache-2.0
// Halos and stencils: arrays created with shard(dim, halo(w)) on 1, 2, 3 and 8 host devices (one
// and every GPU in the CUDA variant), uneven blocks, widths 1-3, sharded along each dimension;
// shifted views evaluated in one assignment against plain host loops, before and after
// update_halo; periodic ghost cells and corners; copies, clones and copyto; bad input named and
// arrays left intact.
#include "test_support.hpp"

#include <vector>

using namespace tessera_test;

namespace {

// out(i, j) = u(i-w, j) + 2 u(i+w, j) + 3 u(i, j-w) + 4 u(i, j+w) - u(i, j) on the interior, 0 on
// the w-wide boundary: plain loops over the column-major host copy.
std::vector<float> stencil_reference(const std::vector<float>& u, index_t m, index_t n, index_t w) {
  std::vector<float> out(u.size(), 0.f);
  auto at = [&](index_t i, index_t j) { return u[static_cast<std::size_t>(i + j * m)]; };
  for (index_t j = w; j < n - w; ++j)
    for (index_t i = w; i < m - w; ++i)
      out[static_cast<std::size_t>(i + j * m)] =
          at(i - w, j) + 2.f * at(i + w, j) + 3.f * at(i, j - w) + 4.f * at(i, j + w) - at(i, j);
  return out;
}

// The same stencil written with shifted views, in one assignment.
void stencil(Array<float, 2>& out, const Array<float, 2>& u, index_t w) {
  const index_t m = u.size(0), n = u.size(1);
  const auto I = range(w, m - w), J = range(w, n - w);
  out(I, J) = u(range(0, m - 2 * w), J) + 2.f * u(range(2 * w, m), J) + 3.f * u(I, range(0, n - 2 * w)) +
              4.f * u(I, range(2 * w, n)) - u(I, J);
}

// Whether every block of n elements over `parts` devices holds at least w elements.
bool fits(index_t n, std::size_t parts, index_t w) { return n / static_cast<index_t>(parts) >= w; }

}  // namespace

TEST_CASE("shifted views over a halo'd array evaluate per shard, before and after update_halo") {
  for (const auto& ds : device_sets()) {
    for (int dim : {1, 0}) {
      for (index_t w : {1, 2, 3}) {
        for (auto [m, n] : {std::pair<index_t, index_t>{7, 33}, {16, 17}, {33, 64}, {9, 1000}}) {
          const index_t along = dim == 0 ? m : n;
          if (m < 2 * w + 1 || n < 2 * w + 1 || !fits(along, ds.size(), w)) continue;
          INFO(set_name(ds) << ", shape " << m << "x" << n << ", shard(" << dim << ", halo(" << w << "))");
          auto v = random_values<float>(static_cast<std::size_t>(m * n));
          const Placement p = shard(dim, halo(w), ds);
          Array<float, 2> u = from_host(v, {m, n}, p);
          CHECK(halo_width(u) == w);
          Array<float, 2> out = zeros<float>({m, n}, p);
          stencil(out, u, w);  // halo cells written at creation
          check_all_close(to_host(out), stencil_reference(v, m, n, w), 1e-5, 1e-5);
          check_equal(to_host(u), v);  // intact, halo storage invisible to reads of the array

          // New values in the blocks; update_halo carries them into the neighbours' halo cells.
          u = u * 2.f + 1.f;
          for (auto& x : v) x = x * 2.f + 1.f;
          update_halo(u);
          stencil(out, u, w);
          check_all_close(to_host(out), stencil_reference(v, m, n, w), 1e-5, 1e-5);

          // A clone and a copy keep the halo cells; host_data points at each shard's first element.
          const Array<float, 2> c = u;
          Array<float, 2> out2 = zeros<float>({m, n}, p);
          stencil(out2, c, w);
          check_equal(to_host(out2), to_host(out));
          const Array<float, 2> moved = copy(from_host(v, {m, n}, shard(1 - dim, ds)), p);
          stencil(out2, moved, w);
          check_equal(to_host(out2), to_host(out));
          const auto parts = part_data(u);
          for (std::size_t s = 0; s < parts.size(); ++s) {
            const auto& q = u.layout().parts[s];
            if (q.empty()) continue;
            const index_t i0 = q.origin[0], j0 = q.origin[1];
            CHECK(parts[s].front() == v[static_cast<std::size_t>(i0 + j0 * m)]);
          }
        }
      }
    }
  }
}

TEST_CASE("a 3-d array with a halo along its last dimension and rand/iota creation") {
  for (const auto& ds : device_sets()) {
    const index_t a = 5, b = 4, c = 3 * static_cast<index_t>(ds.size()) + 2;
    auto u = iota<double>({a, b, c}, shard(2, halo(1), ds));
    Array<double, 3> out = zeros<double>({a, b, c}, shard(2, ds));
    out(_, _, range(1, c - 1)) = u(_, _, range(0, c - 2)) - u(_, _, range(2, c));
    const auto got = to_host(out);
    for (index_t k = 0; k < c; ++k)
      for (index_t j = 0; j < b; ++j)
        for (index_t i = 0; i < a; ++i) {
          const double want = k == 0 || k == c - 1 ? 0.0 : -2.0 * a * b;
          CHECK(got[static_cast<std::size_t>(i + a * (j + b * k))] == want);
        }
    const auto r = rand<float>({3, c}, shard(1, halo(1), ds));
    auto d = eval(r(_, range(1, c)) - r(_, range(0, c - 1)));
    const auto rv = to_host(r), dv = to_host(d);
    for (index_t j = 0; j + 1 < c; ++j)
      for (index_t i = 0; i < 3; ++i)
        CHECK(dv[static_cast<std::size_t>(i + 3 * j)] == rv[static_cast<std::size_t>(i + 3 * (j + 1))] -
                                                             rv[static_cast<std::size_t>(i + 3 * j)]);
  }
}

TEST_CASE("periodic boundaries: ghost cells take the opposite interior, corners included") {
  for (const auto& ds : device_sets()) {
    for (index_t w : {1, 2}) {
      for (index_t board : {3, 8, 21}) {
        const index_t n = board + 2 * w, m = board + 2 * w + 1;
        if (!fits(n, ds.size(), w)) continue;
        INFO(set_name(ds) << ", " << m << "x" << n << ", w " << w);
        const auto v = random_values<float>(static_cast<std::size_t>(m * n));
        // Periodic along both dims, and along dim 0 only (dim 1's ghost cells stay the user's).
        for (bool both : {true, false}) {
          const Halo h = both ? halo(w, boundary::periodic) : halo(w, {boundary::periodic, boundary::fixed});
          Array<float, 2> u = from_host(v, {m, n}, shard(1, h, ds));
          update_halo(u);
          auto want = v;
          auto src = [&](index_t i, index_t len) { return i < w ? i + len - 2 * w : i >= len - w ? i - len + 2 * w : i; };
          for (index_t j = 0; j < n; ++j)
            for (index_t i = 0; i < m; ++i) {
              const index_t sj = both ? src(j, n) : j;
              want[static_cast<std::size_t>(i + j * m)] = v[static_cast<std::size_t>(src(i, m) + sj * m)];
            }
          check_equal(to_host(u), want);
          // The neighbours' halo cells hold the new ghost values too: a 9-point sum reads them.
          Array<float, 2> s = zeros<float>({m, n}, shard(1, ds));
          const auto I = range(w, m - w), J = range(w, n - w);
          s(I, J) = u(range(0, m - 2 * w), range(0, n - 2 * w)) + u(range(2 * w, m), range(2 * w, n)) +
                    u(range(0, m - 2 * w), range(2 * w, n)) + u(range(2 * w, m), range(0, n - 2 * w));
          const auto got = to_host(s);
          for (index_t j = w; j < n - w; ++j)
            for (index_t i = w; i < m - w; ++i) {
              auto at = [&](index_t a, index_t b) { return want[static_cast<std::size_t>(a + b * m)]; };
              const float e = at(i - w, j - w) + at(i + w, j + w) + at(i - w, j + w) + at(i + w, j - w);
              CHECK(got[static_cast<std::size_t>(i + j * m)] == e);
            }
        }
      }
    }
    // One device: on(d, halo(...)) keeps periodic ghost cells without shards.
    Array<int, 1> g = from_host(std::vector<int>{0, 1, 2, 3, 4, 5}, {6}, on(ds[0], halo(1, boundary::periodic)));
    update_halo(g);
    check_equal(to_host(g), std::vector<int>{4, 1, 2, 3, 4, 1});
  }
}

TEST_CASE("copyto moves values between any two placements") {
  for (const auto& ds : device_sets()) {
    const index_t m = 6, n = 11;
    const auto v = random_values<double>(static_cast<std::size_t>(m * n));
    const Array<double, 2> a = from_host(v, {m, n}, shard(0, ds));
    for (const Placement& to : {shard(1, ds), replicate(ds), on(ds.back())}) {
      Array<double, 2> b = zeros<double>({m, n}, to);
      copyto(b, a);
      check_equal(to_host(b), v);
      if (to.kind == Placement::kind_t::replicate) check_replicas(b, v);
    }
    // Into a view, from an overlapping view of the same array.
    Array<double, 2> c = from_host(v, {m, n}, shard(1, ds));
    copyto(c(_, range(1, n)), c(_, range(0, n - 1)));
    auto want = v;
    for (index_t j = n - 1; j >= 1; --j)
      for (index_t i = 0; i < m; ++i) want[static_cast<std::size_t>(i + j * m)] = v[static_cast<std::size_t>(i + (j - 1) * m)];
    check_equal(to_host(c), want);
    check_mentions(expect_error<invalid_argument>([&] { copyto(c, a(_, range(0, 3))); }),
                   {"copyto", "6×11", "6×3"});
  }
}

TEST_CASE("halo errors name what was expected and leave arrays intact") {
  if (skip_without_gpu()) return;
  const DeviceSet three = host_devices(3);
  check_mentions(expect_error<invalid_argument>([&] { (void)zeros<float>({4, 5}, shard(1, halo(2), three)); }),
                 {"halo(2)", "wider than block 2", "[4,5)", "1 elements"});
  check_mentions(expect_error<invalid_argument>([&] { (void)zeros<float>({5, 30}, shard(1, halo(2, boundary::periodic))); }),
                 {"periodic along dim 0", "at least 6", "found 5"});
  check_mentions(expect_error<invalid_argument>([&] {
                   (void)zeros<float>({8, 9}, shard(1, halo(1, {boundary::periodic, boundary::fixed, boundary::fixed})));
                 }),
                 {"3 boundaries", "rank 2"});
  check_mentions(expect_error<invalid_argument>([&] { (void)zeros<float>({8, 9}, shard(1, halo(-1))); }), {">= 0"});
  // Reading beyond the halo is the placement rule's error; the destination stays intact.
  for (const auto& ds : multi_device_sets()) {
    const index_t n = 8 * static_cast<index_t>(ds.size());
    const auto v = random_values<float>(static_cast<std::size_t>(n));
    const Array<float, 1> u = from_host(v, {n}, shard(0, halo(1), ds));
    Array<float, 1> out = from_host(v, {n}, shard(0, ds));
    check_mentions(expect_error<placement_mismatch>([&] { out(range(2, n)) = u(range(0, n - 2)); }),
                   {"placement_mismatch", "halo"});
    check_equal(to_host(out), v);
    out(range(1, n)) = u(range(0, n - 1));  // within the halo: fine
    CHECK(out.at(n / 2) == v[static_cast<std::size_t>(n / 2 - 1)]);
  }
}
