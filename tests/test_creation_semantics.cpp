// SPDX-License-Identifier: Apache-2.0
// Arrays as values: similar and copy (deep, of arrays and views), copy and move construction and
// assignment (std::vector semantics, a moved-from array usable again), a default-constructed array
// taking the shape and placement of an assigned expression, eval, and operator<< (a summary line
// and the values, eliding large arrays).
#include "test_support.hpp"

#include <algorithm>
#include <array>
#include <cstddef>
#include <sstream>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

using namespace tessera;
using namespace tessera_test;

namespace {

template <class A>
std::string print(const A& a) {
  std::ostringstream os;
  os << a;
  return os.str();
}

std::string first_line(const std::string& s) { return s.substr(0, s.find('\n')); }

std::size_t count_lines(const std::string& s) { return static_cast<std::size_t>(std::count(s.begin(), s.end(), '\n')); }

}  // namespace

// -- similar, copy, value semantics ---------------------------------------------------------

TEST_CASE("similar has the same shape and placement; copy is deep") {
  for (const auto& ds : device_sets()) {
    INFO("device set " << set_name(ds));
    for (const Dims& s : std::vector<Dims>{{0, 3}, {1, 1}, {7, 3}, {33, 17}, {3, 2}}) {
      for (const auto& np : placements(2, ds)) {
        INFO("shape " << dims_string(s) << ", " << np.name);
        const auto host = random_values<float>(static_cast<std::size_t>(s[0] * s[1]));
        auto a = from_host(host, {s[0], s[1]}, np.p);
        auto sim = similar(a);
        static_assert(std::is_same_v<decltype(sim), Array<float, 2>>);
        CHECK(sim.shape() == a.shape());
        CHECK(sim.devices() == a.devices());
        CHECK(sim.is_replicated() == a.is_replicated());
        CHECK(sim.shard_dim() == a.shard_dim());
        CHECK(sim.placement_string() == a.placement_string());
        CHECK(sim.memory_kind() == a.memory_kind());
        // It is usable as a destination with a's placement.
        sim = a * 2.f;
        std::vector<float> twice(host.size());
        for (std::size_t i = 0; i < host.size(); ++i) twice[i] = host[i] * 2.f;
        CHECK(to_host(sim) == twice);
        CHECK(to_host(a) == host);

        auto c = copy(a);
        static_assert(std::is_same_v<decltype(c), Array<float, 2>>);
        CHECK(c.placement_string() == a.placement_string());
        CHECK(to_host(c) == host);
        c += 1.f;
        if (s[0] > 0) c(0, _) = -5.f;  // a view write on the copy
        CHECK(to_host(a) == host);  // the original is untouched
        auto hc = to_host(c);
        for (index_t j = 0; j < s[1]; ++j)
          for (index_t i = 0; i < s[0]; ++i) {
            const auto k = static_cast<std::size_t>(i + s[0] * j);
            if (hc[k] != (i == 0 ? -5.f : host[k] + 1.f)) {
              FAIL_CHECK("copy element " << k << " = " << hc[k]);
              i = s[0], j = s[1];
            }
          }
      }
    }
    // copy / similar of a view: an owning array with the view's shape and values.
    const auto host = random_values<float>(9 * 8);
    auto a = from_host(host, {9, 8}, shard(1, ds));
    auto v = a(range(1, 9, 3), _);
    auto cv = copy(v);
    static_assert(std::is_same_v<decltype(cv), Array<float, 2>>);
    REQUIRE(cv.shape() == std::array<index_t, 2>{3, 8});
    const auto hcv = to_host(cv);
    for (index_t j = 0; j < 8; ++j)
      for (index_t i = 0; i < 3; ++i)
        CHECK(hcv[static_cast<std::size_t>(i + 3 * j)] == host[static_cast<std::size_t>(1 + 3 * i + 9 * j)]);
    cv = 0.f;
    CHECK(to_host(a) == host);
    auto sv = similar(v);
    CHECK(sv.shape() == v.shape());
    CHECK(sv.devices() == v.devices());
  }
}

TEST_CASE("Array value semantics: copy is deep, move is cheap and leaves a usable empty array") {
  for (const auto& ds : device_sets()) {
    INFO("device set " << set_name(ds));
    for (index_t n : {index_t(0), index_t(1), index_t(7), index_t(257)}) {
      INFO("n = " << n);
      const auto host = random_values<float>(static_cast<std::size_t>(n * 3));
      auto a = from_host(host, {3, n}, shard(1, ds));

      // Copy construction.
      Array<float, 2> b(a);
      CHECK(b.placement_string() == a.placement_string());
      CHECK(to_host(b) == host);
      b = 42.f;
      CHECK(to_host(a) == host);
      const auto hb = to_host(b);
      CHECK(std::all_of(hb.begin(), hb.end(), [](float x) { return x == 42.f; }));

      // Copy assignment, same shape and placement: in place (the storage stays), deep.
      float* before = n > 0 ? b.host_data(0) : nullptr;  // unified memory: a host pointer
      b = a;
      CHECK(to_host(b) == host);
      if (before) CHECK(b.host_data(0) == before);
      b += 1.f;
      CHECK(to_host(a) == host);

      // Copy assignment, different shape and placement: takes the source's.
      auto c = zeros<float>({5, 2}, replicate(ds));
      c = a;
      CHECK(c.shape() == a.shape());
      CHECK(c.placement_string() == a.placement_string());
      CHECK(to_host(c) == host);
      c += -3.f;
      CHECK(to_host(a) == host);

      // Self-assignment keeps the values.
      auto& cref = c;
      c = cref;
      CHECK(c.shape() == a.shape());

      // Assigning a default-constructed array empties the destination.
      Array<float, 2> empty;
      c = empty;
      CHECK_FALSE(c.has_storage());
      CHECK(c.length() == 0);

      // Move construction: no copy (same storage), the source is left empty.
      Array<float, 2> d(a);
      float* storage = n > 0 ? d.host_data(0) : nullptr;
      Array<float, 2> e(std::move(d));
      CHECK(to_host(e) == host);
      if (storage) CHECK(e.host_data(0) == storage);
      CHECK_FALSE(d.has_storage());  // NOLINT(bugprone-use-after-move): moved-from state is specified
      CHECK(d.length() == 0);
      CHECK(d.empty());
      CHECK(to_host(d).empty());
      // ... and usable: it takes the shape of what is assigned to it.
      d = e * 2.f;
      CHECK(d.shape() == a.shape());
      std::vector<float> twice(host.size());
      for (std::size_t i = 0; i < host.size(); ++i) twice[i] = host[i] * 2.f;
      CHECK(to_host(d) == twice);

      // Move assignment.
      Array<float, 2> f = zeros<float>({1, 1}, on(ds[0]));
      f = std::move(e);
      CHECK(to_host(f) == host);
      if (storage) CHECK(f.host_data(0) == storage);
      CHECK_FALSE(e.has_storage());  // NOLINT(bugprone-use-after-move)
      e = a;
      CHECK(to_host(e) == host);
    }
  }
}

TEST_CASE("a default-constructed array takes the shape and placement of an assigned expression; eval") {
  for (const auto& ds : device_sets()) {
    INFO("device set " << set_name(ds));
    for (const Dims& s : std::vector<Dims>{{0, 4}, {1, 1}, {7, 3}, {3, 2}, {33, 5, 13}}) {
      for (const auto& np : placements(2, ds)) {
        INFO("shape " << dims_string(s) << ", " << np.name);
        const auto ha = random_values<float>(static_cast<std::size_t>(s[0] * s[1]));
        const auto hb = random_values<float>(static_cast<std::size_t>(s[0] * s[1]));
        auto a = from_host(ha, {s[0], s[1]}, np.p);
        auto b = from_host(hb, {s[0], s[1]}, np.p);
        std::vector<double> want(ha.size());
        for (std::size_t i = 0; i < ha.size(); ++i) want[i] = double(ha[i]) * double(hb[i]) + 1.0;

        Array<float, 2> c;
        CHECK_FALSE(c.has_storage());
        c = a * b + 1.f;
        CHECK(c.shape() == Shape<2>{s[0], s[1]});
        CHECK(c.placement_string() == a.placement_string());
        check_all_close(to_host(c), want);

        Array<float, 2> c2 = a * b + 1.f;  // construction from an expression
        CHECK(c2.placement_string() == a.placement_string());
        check_all_close(to_host(c2), want);

        auto e = eval(a * b + 1.f);
        static_assert(std::is_same_v<decltype(e), Array<float, 2>>);
        CHECK(e.shape() == Shape<2>{s[0], s[1]});
        CHECK(e.placement_string() == a.placement_string());
        check_all_close(to_host(e), want);
      }
      // A replicated operand that broadcasts along the shard dimension, then a sharded operand:
      // the result takes the sharded operand's placement.
      for (int d = 0; d < 2; ++d) {
        INFO("shard dim " << d << ", shape " << dims_string(s));
        Dims rs = s;
        rs[d] = 1;
        const auto hr = random_values<float>(static_cast<std::size_t>(rs[0] * rs[1]));
        const auto hs = random_values<float>(static_cast<std::size_t>(s[0] * s[1]));
        auto r = from_host(hr, {rs[0], rs[1]}, replicate(ds));
        auto sh = from_host(hs, {s[0], s[1]}, shard(d, ds));
        Array<float, 2> out;
        out = r * sh + 1.f;
        CHECK(out.shape() == Shape<2>{s[0], s[1]});
        CHECK(out.placement_string() == sh.placement_string());
        std::vector<double> want(hs.size());
        for (index_t j = 0; j < s[1]; ++j)
          for (index_t i = 0; i < s[0]; ++i) {
            const index_t ri = rs[0] == 1 ? 0 : i, rj = rs[1] == 1 ? 0 : j;
            want[static_cast<std::size_t>(i + s[0] * j)] =
                double(hr[static_cast<std::size_t>(ri + rs[0] * rj)]) * hs[static_cast<std::size_t>(i + s[0] * j)] + 1;
          }
        check_all_close(to_host(out), want);
      }
    }
  }
}

// -- printing ---------------------------------------------------------------------------------

TEST_CASE("operator<< prints a summary line and the values, eliding large arrays") {
  for (const auto& ds : device_sets()) {
    INFO("device set " << set_name(ds));
    for (const auto& np : placements(2, ds)) {
      INFO(np.name);
      std::vector<float> one_to_12(12);
      for (int i = 0; i < 12; ++i) one_to_12[static_cast<std::size_t>(i)] = float(i + 1);
      auto a = from_host(one_to_12, {3, 4}, np.p);
      const std::string out = print(a);
      INFO(out);
      const std::string head = first_line(out);
      CHECK(contains(head, "3×4"));
      CHECK(contains(head, "Array{Float32, 2}"));
      CHECK(contains(head, a.placement_string()));
      if (np.p.kind == Placement::kind_t::single) CHECK(contains(head, ds.back().name()));
      // Every value is shown, row by row: row 0 holds 1 4 7 10 (column-major).
      for (int v = 1; v <= 12; ++v) CHECK(contains(out, std::to_string(v)));
      CHECK(count_lines(out) == 4);  // header + 3 rows
      std::istringstream rows(out);
      std::string line;
      std::getline(rows, line);
      std::getline(rows, line);
      std::istringstream row0(line);
      std::vector<std::string> cells;
      for (std::string c; row0 >> c;) cells.push_back(c);
      CHECK(cells == std::vector<std::string>{"1", "4", "7", "10"});
      CHECK_FALSE(contains(out, "…"));
      CHECK_FALSE(contains(out, "⋮"));
    }
    // Element type names and 1-d headers.
    CHECK(contains(first_line(print(from_host(std::vector<float>(5, 1), {5}, shard(0, ds)))), "5-element Array{Float32, 1}"));
    CHECK(contains(first_line(print(from_host(std::vector<std::int64_t>(2, 1), {2, 1, 1}, shard(0, ds)))), "2×1×1 Array{Int64, 3}"));
    CHECK(contains(first_line(print(ones<double>({2, 2, 2}, shard(2, ds)))), "2×2×2 Array{Float64, 3}"));
    CHECK(contains(first_line(print(from_host(std::vector<bool>(3, false), {1, 3, 1}, replicate(ds)))), "1×3×1 Array{Bool, 3}"));
    CHECK(contains(first_line(print(zeros<float>({0, 3}, shard(1, ds)))), "0×3 Array{Float32, 2}"));
    // Large arrays: elided, and the output stays short.
    {
      auto big = zeros<float>({1000, 1000}, shard(1, ds));
      const std::string out = print(big);
      INFO(out);
      CHECK(contains(first_line(out), "1000×1000"));
      CHECK(contains(out, "…"));
      CHECK(contains(out, "⋮"));
      CHECK(out.size() < 2000);
      CHECK(count_lines(out) < 20);
    }
    {
      std::vector<float> h(1 << 20);
      for (std::size_t i = 0; i < h.size(); ++i) h[i] = float(i);
      auto big = from_host(h, {1 << 20}, shard(0, ds));
      const std::string out = print(big);
      INFO(out);
      CHECK(contains(out, "⋮"));
      CHECK(contains(out, "1048575"));  // the last element is shown
      CHECK(out.size() < 1000);
      CHECK(count_lines(out) < 20);
    }
    {
      auto big = iota<std::int32_t>({4, 5, 100}, shard(2, ds));
      const std::string out = print(big);
      INFO(out);
      CHECK(contains(out, "…"));
      CHECK(contains(out, "1999"));  // the last slice is shown
      CHECK(contains(first_line(out), "4×5×100 Array{Int32, 3}"));
      CHECK(contains(out, "[:, :, 99] ="));
      CHECK(out.size() < 3000);
      CHECK(count_lines(out) < 60);
    }
    // A view prints like an array of its shape.
    {
      std::vector<float> h(20);
      for (std::size_t i = 0; i < h.size(); ++i) h[i] = float(i);
      auto a = from_host(h, {5, 4}, shard(1, ds));
      const std::string out = print(a(range(0, 2), _));
      INFO(out);
      CHECK(contains(first_line(out), "2×4"));
      CHECK(contains(first_line(out), "Array{Float32, 2}"));
      CHECK(contains(out, "15"));  // a(0, 3)
      CHECK_FALSE(contains(out, "19"));  // a(4, 3) is outside the view
    }
  }
  Array<float, 2> none;
  const std::string out = print(none);
  CHECK(contains(out, "Array{Float32, 2}"));
}
