// SPDX-License-Identifier: Apache-2.0
// hide_communication(u, body) (tessera/overlap.hpp): the body's assignments computed boundary
// cells first, update_halo(u)'s copies started, the rest computed while they run. On 1, 2, 3 and 8
// host devices (one and every GPU in the CUDA variant), shard dims 0 and 1, widths 1-3, uneven
// blocks, 2-d and 3-d: Jacobi iterations and multi-assignment bodies must equal body() followed
// by update_halo(u), bit for bit (the same operations in the same order per element), halo cells
// included; the host-loop reference checks the first. Bodies that cannot be replayed are refused
// with a named error and leave every array intact; periodic halos fall back to the plain order.
#include "test_support.hpp"

#include <vector>

using namespace tessera_test;

namespace {

bool fits(index_t n, std::size_t parts, index_t w) { return n / static_cast<index_t>(parts) >= w; }

// One weighted 5-point sweep of width w from u into v's interior (exact in float for the small
// integers used below, so GPU FMA contraction cannot change a bit).
void sweep(Array<float, 2>& v, const Array<float, 2>& u, index_t w) {
  const index_t m = u.size(0), n = u.size(1);
  const auto I = range(w, m - w), J = range(w, n - w);
  v(I, J) = u(range(0, m - 2 * w), J) + u(range(2 * w, m), J) + 2.f * u(I, range(0, n - 2 * w)) +
            u(I, range(2 * w, n)) - u(I, J);
}

// The same on the host, with fixed boundary cells kept.
std::vector<float> sweep_reference(const std::vector<float>& u, index_t m, index_t n, index_t w) {
  std::vector<float> v = u;
  auto at = [&](index_t i, index_t j) { return u[static_cast<std::size_t>(i + j * m)]; };
  for (index_t j = w; j < n - w; ++j)
    for (index_t i = w; i < m - w; ++i)
      v[static_cast<std::size_t>(i + j * m)] = at(i - w, j) + at(i + w, j) + 2.f * at(i, j - w) + at(i, j + w) - at(i, j);
  return v;
}

// Every cell of out read through u's halo: the sum of the four neighbours at distance w, which is
// wrong wherever a halo cell is stale.
std::vector<float> halo_probe(const Array<float, 2>& u, index_t w, const Placement& p) {
  const index_t m = u.size(0), n = u.size(1);
  Array<float, 2> out = zeros<float>({m, n}, p);
  const auto I = range(w, m - w), J = range(w, n - w);
  out(I, J) = u(range(0, m - 2 * w), J) + u(range(2 * w, m), J) + u(I, range(0, n - 2 * w)) + u(I, range(2 * w, n));
  return to_host(out);
}

std::vector<float> small_integers(std::size_t n) {
  auto v = random_values<float>(n, -4.0, 4.0);
  for (auto& x : v) x = static_cast<float>(static_cast<int>(x));
  return v;
}

}  // namespace

TEST_CASE("Jacobi with hide_communication equals sweep + update_halo, halo cells included") {
  for (const auto& ds : device_sets()) {
    for (int dim : {1, 0}) {
      for (index_t w : {1, 2, 3}) {
        for (auto [m, n] : {std::pair<index_t, index_t>{7, 33}, {16, 17}, {33, 64}, {9, 1000}, {1025, 31}}) {
          const index_t along = dim == 0 ? m : n;
          if (m < 2 * w + 1 || n < 2 * w + 1 || !fits(along, ds.size(), w)) continue;
          INFO(set_name(ds) << ", shape " << m << "x" << n << ", shard(" << dim << ", halo(" << w << "))");
          const auto v0 = small_integers(static_cast<std::size_t>(m * n));
          const Placement p = shard(dim, halo(w), ds);
          Array<float, 2> a = from_host(v0, {m, n}, p), b = from_host(v0, {m, n}, p);  // hidden
          Array<float, 2> c = from_host(v0, {m, n}, p), d = from_host(v0, {m, n}, p);  // plain
          for (int it = 0; it < 4; ++it) {
            hide_communication(b, [&] { sweep(b, a, w); });
            sweep(d, c, w);
            update_halo(d);
            if (it == 0) check_equal(to_host(b), sweep_reference(v0, m, n, w));
            std::swap(a, b);
            std::swap(c, d);
          }
          check_equal(to_host(a), to_host(c));
          check_equal(halo_probe(a, w, p), halo_probe(c, w, p));
        }
      }
    }
  }
}

TEST_CASE("bodies of several assignments: boundary rows, other arrays, a 3-d array") {
  for (const auto& ds : device_sets()) {
    INFO(set_name(ds));
    const index_t m = 37, n = 3 * static_cast<index_t>(ds.size()) + 8;
    const Placement p = shard(1, halo(1), ds);
    const auto v0 = small_integers(static_cast<std::size_t>(m * n));
    Array<float, 2> u = from_host(v0, {m, n}, p), v = zeros<float>({m, n}, p), side = zeros<float>({m, n}, p);
    Array<float, 2> u2 = from_host(v0, {m, n}, p), v2 = zeros<float>({m, n}, p), side2 = zeros<float>({m, n}, p);
    // A row of v across every shard, another array, and a column of a third (one device: all
    // of it in the first pass).
    Array<float, 2> col = zeros<float>({m, n}, p), col2 = zeros<float>({m, n}, p);
    auto body = [&](Array<float, 2>& out, Array<float, 2>& extra, Array<float, 2>& third, const Array<float, 2>& in) {
      out(range(1, 2), _) = in(range(0, 1), _) * 3.f + in(range(2, 3), _);
      extra = in * 2.f + 1.f;
      third(_, range(n / 2, n / 2 + 1)) = in(_, range(n / 2 - 1, n / 2)) - 5.f;
    };
    hide_communication(v, [&] { body(v, side, col, u); });
    body(v2, side2, col2, u2);
    update_halo(v2);
    check_equal(to_host(v), to_host(v2));
    check_equal(to_host(side), to_host(side2));
    check_equal(to_host(col), to_host(col2));
    check_equal(halo_probe(v, 1, p), halo_probe(v2, 1, p));
  }
  for (const auto& ds : device_sets()) {
    INFO("3-d, " << set_name(ds));
    const index_t a = 5, b = 6, c = 2 * static_cast<index_t>(ds.size()) + 3;
    for (int dim : {2, 1}) {
      if (!fits(dim == 2 ? c : b, ds.size(), 1)) continue;
      const Placement p = shard(dim, halo(1), ds);
      const auto v0 = small_integers(static_cast<std::size_t>(a * b * c));
      Array<float, 3> u = from_host(v0, {a, b, c}, p), v = zeros<float>({a, b, c}, p);
      Array<float, 3> v2 = zeros<float>({a, b, c}, p);
      auto body = [&](Array<float, 3>& out) {
        const auto K = range(1, c - 1), J = range(1, b - 1);
        out(_, J, K) = u(_, range(0, b - 2), K) + u(_, range(2, b), K) + u(_, J, range(0, c - 2)) - u(_, J, range(2, c));
      };
      hide_communication(v, [&] { body(v); });
      body(v2);
      update_halo(v2);
      check_equal(to_host(v), to_host(v2));
      // The halo cells: a shifted copy through them.
      Array<float, 3> r = zeros<float>({a, b, c}, p), r2 = zeros<float>({a, b, c}, p);
      r(_, range(1, b - 1), range(1, c - 1)) = v(_, range(0, b - 2), range(0, c - 2)) + v(_, range(2, b), range(2, c));
      r2(_, range(1, b - 1), range(1, c - 1)) = v2(_, range(0, b - 2), range(0, c - 2)) + v2(_, range(2, b), range(2, c));
      check_equal(to_host(r), to_host(r2));
    }
  }
}

TEST_CASE("periodic halos and arrays without a halo run the body, then update_halo") {
  for (const auto& ds : device_sets()) {
    INFO(set_name(ds));
    const index_t m = 12, n = 4 * static_cast<index_t>(ds.size()) + 3;
    const Placement p = shard(1, halo(1, boundary::periodic), ds);
    const auto v0 = small_integers(static_cast<std::size_t>(m * n));
    Array<float, 2> u = from_host(v0, {m, n}, p), v = zeros<float>({m, n}, p), v2 = zeros<float>({m, n}, p);
    hide_communication(v, [&] { sweep(v, u, 1); });
    sweep(v2, u, 1);
    update_halo(v2);
    check_equal(to_host(v), to_host(v2));
    check_equal(halo_probe(v, 1, p), halo_probe(v2, 1, p));
    Array<float, 1> plain = zeros<float>({n}, shard(0, ds));
    hide_communication(plain, [&] { plain = plain + 3.f; });
    check_equal(to_host(plain), std::vector<float>(static_cast<std::size_t>(n), 3.f));
  }
}

TEST_CASE("bodies that cannot be replayed are refused by name, arrays intact, the library still works") {
  for (const auto& ds : device_sets()) {
    if (ds.size() < 2) continue;
    INFO(set_name(ds));
    const index_t m = 10, n = 4 * static_cast<index_t>(ds.size());
    const Placement p = shard(1, halo(1), ds);
    const auto v0 = small_integers(static_cast<std::size_t>(m * n));
    Array<float, 2> u = from_host(v0, {m, n}, p), v = from_host(v0, {m, n}, p), t = from_host(v0, {m, n}, p);
    Array<float, 2> single = zeros<float>({m, n}, on(ds[1]));
    auto intact = [&] {
      check_equal(to_host(u), v0);
      check_equal(to_host(v), v0);
      check_equal(to_host(t), v0);
    };
    auto refused = [&](auto&& body, const char* fragment) {
      try {
        hide_communication(v, body);
        FAIL("expected invalid_argument containing \"" << fragment << "\"");
      } catch (const invalid_argument& e) {
        CHECK_MESSAGE(std::string(e.what()).find(fragment) != std::string::npos, std::string(e.what()));
      }
      intact();
    };
    refused([&] { sweep(v, v, 1); }, "reads u");
    refused([&] { t = u + 1.f; v = t * 2.f; }, "reads an array that an earlier assignment of the body writes");
    refused([&] { t(range(1, m), _) = t(range(0, m - 1), _); }, "reads its destination at another offset");
    refused([&] { t = u + 1.f; (void)sum(t); }, "may only assign");
    refused([&] { v = u + 1.f; (void)to_host(u); }, "may only assign");
    refused([&] { copyto(single, u); }, "may only assign");
    refused([&] { sweep(v, u, 1); v(_, 0) = 1.f; }, "writes an array that an earlier assignment of the body writes");
    refused([&] { hide_communication(t, [&] { t = u; }); }, "inside the body of another hide_communication");
    // Still working: the recording ended with the error.
    hide_communication(v, [&] { sweep(v, u, 1); });
    CHECK(sum(u) == doctest::Approx(sum(t)));
  }
}

// A GPU beside a host device: the halo copies go through host memory (staged transfers), which
// must follow the boundary pass on the GPU's side stream, in both directions.
TEST_CASE("hide_communication over a GPU and a host device equals sweep + update_halo") {
  if (!cuda_variant() || gpus().empty()) {
    MESSAGE("SKIPPED: needs a GPU (CUDA variant)");
    return;
  }
  const Device g = gpus()[0], h = host_devices(1)[0];
  for (const DeviceSet& ds : {DeviceSet{g, h}, DeviceSet{h, g}}) {
    for (auto [m, n] : {std::pair<index_t, index_t>{4099, 37}, {513, 1031}}) {
      INFO(ds[0].name() << " + " << ds[1].name() << ", shape " << m << "x" << n);
      const auto v0 = small_integers(static_cast<std::size_t>(m * n));
      const Placement p = shard(1, halo(1), ds);
      Array<float, 2> a = from_host(v0, {m, n}, p), b = from_host(v0, {m, n}, p);
      Array<float, 2> c = from_host(v0, {m, n}, p), d = from_host(v0, {m, n}, p);
      for (int it = 0; it < 6; ++it) {
        hide_communication(b, [&] { sweep(b, a, 1); });
        sweep(d, c, 1);
        update_halo(d);
        std::swap(a, b);
        std::swap(c, d);
      }
      check_equal(to_host(a), to_host(c));
      check_equal(halo_probe(a, 1, p), halo_probe(c, 1, p));
    }
  }
}
