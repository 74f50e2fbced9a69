// SPDX-License-Identifier: Apache-2.0
// Views as destinations and values: the assignment forms (=, +=, *= with views, expressions,
// scalars and broadcast rows) leaving the neighbours untouched, eval/copy of a view giving owning
// arrays, out-of-bounds indices and ranges (errors that leave the array intact), views keeping the
// storage alive after the array is gone, and views of bool arrays. Every result is compared
// against a plain-loop host reference on fresh random data.
#include "views_reference.hpp"

#include <functional>
#include <string>
#include <vector>

using namespace tessera;
using namespace tessera_test;

namespace {

// Runs f, expects out_of_bounds whose message contains every one of `words`, and checks that
// `a` still holds `h`.
template <class A>
void check_oob(const std::function<void()>& f, const std::vector<std::string>& words, const A& a,
               const std::vector<float>& h) {
  check_mentions(expect_error<out_of_bounds>(f), words);
  check_equal(to_host(a), h);
}

Array<float, 2> make_matrix(const std::vector<float>& h, index_t r, index_t c, const DeviceSet& set) {
  return from_host(h, {r, c}, shard(1, set));
}

}  // namespace

TEST_CASE("views: assignment forms and untouched neighbours") {
  for (const auto& set : device_sets()) {
    for (index_t r : {index_t(1), index_t(6), index_t(33)}) {
      for (index_t cols : {index_t(1), index_t(5), index_t(17)}) {
        INFO("device set " << set_name(set) << ", shape " << r << "x" << cols);
        const std::size_t n = static_cast<std::size_t>(r * cols);
        const auto ha = random_values<float>(n), hb = random_values<float>(n);
        for (const auto& pl : placements(2, set)) {
          INFO(pl.name);
          auto a = make<2>(ha, {r, cols}, pl.p);
          const auto b = make<2>(hb, {r, cols}, pl.p);
          std::vector<float> ref = ha;
          auto at = [&](index_t i, index_t j) -> float& { return ref[static_cast<std::size_t>(i + r * j)]; };
          const bool rows_sharded = pl.p.kind == Placement::kind_t::shard && pl.p.dim == 0 && set.size() > 1;
          // v = another view (of another array with the same placement): writes, does not rebind.
          // Reversed along the dimension that is not sharded, so that the blocks match.
          if (rows_sharded) {
            auto v = a(_, range(cols - 1, -1, -1));
            v = b(_, _);
            for (index_t j = 0; j < cols; ++j)
              for (index_t i = 0; i < r; ++i) at(i, cols - 1 - j) = hb[static_cast<std::size_t>(i + r * j)];
          } else {
            auto v = a(range(r - 1, -1, -1), _);
            v = b(_, _);
            for (index_t j = 0; j < cols; ++j)
              for (index_t i = 0; i < r; ++i) at(r - 1 - i, j) = hb[static_cast<std::size_t>(i + r * j)];
          }
          check_equal(to_host(a), ref);
          auto v = a(range(r - 1, -1, -1), range(cols - 1, -1, -1));
          check_equal(to_host(b), hb);
          // A copy of a view shares its window.
          View<float, 2> v2 = v;
          v2 = 0.5f;
          for (auto& x : ref) x = 0.5f;
          check_equal(to_host(a), ref);
          a = make<2>(ha, {r, cols}, pl.p);
          ref = ha;
          // Every other column, every other row from the second.
          auto s = a(range(1, r, 2), range(0, cols, 2));
          s += b(range(1, r, 2), range(0, cols, 2)) * 3;
          for (index_t j = 0; j < cols; j += 2)
            for (index_t i = 1; i < r; i += 2) at(i, j) += hb[static_cast<std::size_t>(i + r * j)] * 3;
          check_all_close(to_host(a), ref);
          s *= s;
          for (index_t j = 0; j < cols; j += 2)
            for (index_t i = 1; i < r; i += 2) at(i, j) *= at(i, j);
          check_all_close(to_host(a), ref);
          // A rank-0 view (one element) assigned a scalar and an expression.
          a(r - 1, cols - 1) = 42;
          at(r - 1, cols - 1) = 42;
          a(0, 0) = a(0, 0) + b(0, 0);
          at(0, 0) += hb[0];
          check_all_close(to_host(a), ref);
          // A row (size 1 along dim 0, rank 2) broadcast into a block of rows.
          if (r >= 3 && rows_sharded) {
            // Row 0 of b lives on the first device only: the other devices cannot read it.
            const auto before = to_host(a);
            CHECK_THROWS_AS(a(range(1, r), _) = b(range(0, 1), _), placement_mismatch);
            check_equal(to_host(a), before);
          } else if (r >= 3) {
            a(range(1, r), _) = b(range(0, 1), _);
            for (index_t j = 0; j < cols; ++j)
              for (index_t i = 1; i < r; ++i) at(i, j) = hb[static_cast<std::size_t>(r * j)];
            check_all_close(to_host(a), ref);
          }
          // Shape mismatch: dimension_mismatch, nothing written.
          if (r >= 2) {
            const auto before = to_host(a);
            CHECK_THROWS_AS(a(range(0, r - 1), _) = b, dimension_mismatch);
            check_equal(to_host(a), before);
          }
        }
      }
    }
  }
}

TEST_CASE("views: eval(view) and copy(view) give owning arrays") {
  for (const auto& set : device_sets()) {
    for (index_t n : sweep_sizes()) {
      INFO("device set " << set_name(set) << ", n = " << n);
      const auto h = random_values<float>(static_cast<std::size_t>(2 * n));
      for (const auto& pl : placements(2, set)) {
        INFO(pl.name);
        auto a = make<2>(h, {2, n}, pl.p);
        const std::vector<Spec> s{{K::integer, 1}, {K::rng, n - 1, -1, -1}};
        const Mapping m = map_view({2, n}, s);
        const std::vector<float> want = gather(h, m);
        auto v = a(1, range(n - 1, -1, -1));
        Array<float, 1> e = eval(v);
        Array<float, 1> c = copy(v);
        Array<float, 1> f = v;  // an Array constructed from a view is owning too
        for (auto* x : {&e, &c, &f}) {
          check_equal(to_host(*x), want);
          if (n > 0) CHECK(x->devices() == v.devices());
          CHECK(x->is_replicated() == v.is_replicated());
        }
        // Owning: writing the array leaves the copies alone and the other way round.
        a = 7.f;
        for (auto* x : {&e, &c, &f}) check_equal(to_host(*x), want);
        e += e;
        c = 0.f;
        check_equal(to_host(a), std::vector<float>(h.size(), 7.f));
      }
    }
  }
}

TEST_CASE("views: out-of-bounds indices and ranges throw and leave the array intact") {
  for (const auto& set : device_sets()) {
    INFO("device set " << set_name(set));
    const index_t n = 10;
    const auto h = random_values<float>(static_cast<std::size_t>(n));
    auto a = from_host(h, {n}, shard(0, set));
    auto expect_oob = [&](const std::function<void()>& f, const std::vector<std::string>& words) {
      check_oob(f, words, a, h);
    };
    expect_oob([&] { (void)a(n); }, {"10", "dimension 0", "[0, 10)"});
    expect_oob([&] { (void)a(-1); }, {"-1", "dimension 0", "[0, 10)"});
    expect_oob([&] { (void)a(std::size_t(-1)); }, {"dimension 0", "[0, 10)"});
    expect_oob([&] { (void)a(range(0, n + 1)); }, {"range(0, 11", "dimension 0", "10", "[0, 10)"});
    expect_oob([&] { (void)a(range(-1, 5)); }, {"range(-1, 5", "dimension 0", "-1", "[0, 10)"});
    expect_oob([&] { (void)a(range(n - 1, -2, -1)); }, {"range(9, -2, -1)", "-1", "[0, 10)"});
    expect_oob([&] { (void)a(range(0, 20, 3)); }, {"range(0, 20, 3)", "18", "[0, 10)"});
    expect_oob([&] { (void)a(range(12, 20)); }, {"12", "[0, 10)"});
    expect_oob([&] { (void)a.at(n); }, {"10", "dimension 0", "[0, 10)"});
    expect_oob([&] { (void)a(range(2, 6)).at(4); }, {"4", "[0, 4)"});
    expect_oob([&] { (void)a(range(2, 6))(range(0, 5)); }, {"dimension 0", "[0, 4)"});
    expect_oob([&] { a(range(5, 11)) = 1.f; }, {"dimension 0", "[0, 10)"});
    // Assigning to a default-constructed view (no window) is an invalid argument.
    View<float, 1> none;
    CHECK_THROWS_AS(none = 1.f, invalid_argument);
    // A step of 0 is an invalid argument.
    CHECK_THROWS_AS((void)range(0, 5, 0), invalid_argument);
    try {
      (void)range(0, 5, 0);
    } catch (const invalid_argument& e) {
      CHECK(contains(e.what(), "step"));
    }
    // Valid edges: a last past the end whose elements stay inside, empty ranges anywhere.
    check_view(a(range(0, n + 1, 3)), h, map_view({n}, {{K::rng, 0, n + 1, 3}}));
    check_view(a(range(n - 1, -1, -1)), h, map_view({n}, {{K::rng, n - 1, -1, -1}}));
    check_view(a(range(n - 1, -1, -2)), h, map_view({n}, {{K::rng, n - 1, -1, -2}}));
    expect_oob([&] { (void)a(range(n - 1, -2, -2)); }, {"range(9, -2, -2)", "-1", "[0, 10)"});  // 9, 7, ..., 1, -1
    CHECK(a(range(5, 5)).length() == 0);
    CHECK(a(range(7, 3)).length() == 0);
    CHECK(to_host(a(range(3, 7, -1))).empty());
    // Rank 3: names the dimension.
    const auto h3 = random_values<float>(24);
    auto b = from_host(h3, {2, 3, 4}, shard(2, set));
    auto expect_oob3 = [&](const std::function<void()>& f, const std::vector<std::string>& words) {
      check_oob(f, words, b, h3);
    };
    expect_oob3([&] { (void)b(_, 3, 0); }, {"index 3", "dimension 1", "[0, 3)"});
    expect_oob3([&] { (void)b(0, _, range(1, 5)); }, {"dimension 2", "[0, 4)"});
    expect_oob3([&] { (void)b(range(0, 3), _, 1); }, {"dimension 0", "[0, 2)"});
    expect_oob3([&] { (void)b.at(0, 0, 4); }, {"dimension 2", "[0, 4)"});
    expect_oob3([&] { (void)b(_, _, 1)(_, 3); }, {"dimension 1", "[0, 3)"});
    // The array still works afterwards.
    b(_, _, 1) = 5.f;
    std::vector<float> ref = h3;
    for (int i = 6; i < 12; ++i) ref[i] = 5.f;
    check_equal(to_host(b), ref);
  }
}


TEST_CASE("views keep the storage alive after the array is gone") {
  for (const auto& set : device_sets()) {
    for (index_t c : {index_t(1), index_t(3), index_t(17), index_t(1000)}) {
      INFO("device set " << set_name(set) << ", columns " << c);
      const index_t r = 9;
      const auto h = random_values<float>(static_cast<std::size_t>(r * c));
      auto col = make_matrix(h, r, c, set)(_, c / 2);  // the array temporary dies here
      auto row = make_matrix(h, r, c, set)(range(r - 1, -1, -4), _)(1, _);
      auto expr = make_matrix(h, r, c, set)(range(0, r, 2), _) + make_matrix(h, r, c, set)(range(0, r, 2), _);
      {
        std::vector<float> want(h.begin() + r * (c / 2), h.begin() + r * (c / 2 + 1));
        check_equal(to_host(col), want);
        std::vector<float> wr;
        for (index_t j = 0; j < c; ++j) wr.push_back(h[static_cast<std::size_t>(r - 5 + r * j)]);
        check_equal(to_host(row), wr);
        CHECK(row.at(c - 1) == wr.back());
        std::vector<float> we;
        for (index_t j = 0; j < c; ++j)
          for (index_t i = 0; i < r; i += 2) we.push_back(h[static_cast<std::size_t>(i + r * j)] * 2.f);  // x + x
        check_equal(to_host(eval(expr)), we);
      }
      // Writing through the orphaned view still works.
      col += col;
      std::vector<float> want(h.begin() + r * (c / 2), h.begin() + r * (c / 2 + 1));
      for (auto& x : want) x += x;
      check_equal(to_host(col), want);
    }
  }
}

TEST_CASE("views of bool arrays") {
  for (const auto& set : device_sets()) {
    for (index_t n : {index_t(0), index_t(1), index_t(33), index_t(257)}) {
      INFO("device set " << set_name(set) << ", n = " << n);
      const auto h = random_values<bool>(static_cast<std::size_t>(n));
      auto a = from_host(h, {n}, shard(0, set));
      std::vector<bool> want;
      for (index_t i = 1; i < n; i += 2) want.push_back(h[static_cast<std::size_t>(i)]);
      CHECK(to_host(a(range(1, n, 2))) == want);
      a(range(1, n, 2)) = true;
      std::vector<bool> ref = h;
      for (index_t i = 1; i < n; i += 2) ref[static_cast<std::size_t>(i)] = true;
      CHECK(to_host(a) == ref);
    }
  }
}
