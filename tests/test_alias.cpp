// SPDX-License-Identifier: Apache-2.0
// Alias-safe assignment: in place (a = a + 1, a = a * a, a += a, a(_, k) = a(_, k) * 2), and reads
// that overlap the written region at another offset (shifts, reversals, strided and 2-d views,
// aliasing through different view objects). Every result must equal a host reference computed
// through an explicit temporary (alias_reference.hpp). On sharded arrays, a shifted view has other
// block boundaries than the destination: the assignment must throw placement_mismatch (and leave
// the array intact) exactly when some device would need elements that another device holds.
// Broadcast reads of the destination, reads of other arrays and the compound assignment
// operators: test_alias_compound.cpp.
#include "alias_reference.hpp"

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

using namespace tessera;
using namespace tessera_test;

// ---------------------------------------------------------------------------------------------------
namespace {
template <class T>
void in_place_cases() {
  for (const auto& set : device_sets()) {
    for (index_t n : sweep_sizes()) {
      INFO("device set " << set_name(set) << ", n = " << n);
      const std::vector<index_t> shape{n};
      const auto h = data<T>(static_cast<std::size_t>(n));
      const std::vector<Axis> id{all(n)};
      for (const auto& pl : placements(1, set)) {
        alias_case<T, 1>("a = a + 1", shape, h, pl, id, id, [](T, T s) { return static_cast<T>(s + 1); },
                         [](Array<T, 1>& a) { a = a + 1; });
        alias_case<T, 1>("a = a * a", shape, h, pl, id, id, [](T, T s) { return static_cast<T>(s * s); },
                         [](Array<T, 1>& a) { a = a * a; });
        alias_case<T, 1>("a += a", shape, h, pl, id, id, [](T d, T s) { return static_cast<T>(d + s); },
                         [](Array<T, 1>& a) { a += a; });
        alias_case<T, 1>("a(_) = a(_) * a", shape, h, pl, id, id, [](T, T s) { return static_cast<T>(s * s); },
                         [](Array<T, 1>& a) { a(_) = a(_) * a; });
      }
    }
    // Columns of a matrix, each in place: a(_, k) = a(_, k) * 2.
    for (const std::vector<index_t>& shape : std::vector<std::vector<index_t>>{{0, 3}, {1, 4}, {7, 5}, {33, 9}, {257, 3}, {1000, 1000}}) {
      INFO("device set " << set_name(set) << ", shape " << dims_string(shape));
      const auto h = data<T>(static_cast<std::size_t>(volume(shape)));
      for (const auto& pl : placements(2, set)) {
        for (index_t k : {index_t(0), shape[1] / 2, shape[1] - 1}) {
          const std::vector<Axis> col{all(shape[0]), pt(k)};
          alias_case<T, 2>("a(_, k) = a(_, k) * 2", shape, h, pl, col, col, [](T, T s) { return static_cast<T>(s * 2); },
                           [k](Array<T, 2>& a) { a(_, k) = a(_, k) * 2; });
        }
      }
    }
  }
}
}  // namespace

TEST_CASE("alias: in place, a = a + 1, a = a * a, a += a, a(_, k) = a(_, k) * 2") {
  in_place_cases<float>();
  in_place_cases<std::int32_t>();
}

// ---------------------------------------------------------------------------------------------------
namespace {
template <class T>
void shift_cases() {
  const Combine<T> copy_src = [](T, T s) { return s; };
  for (const auto& set : device_sets()) {
    for (index_t n : sweep_sizes()) {
      INFO("device set " << set_name(set) << ", n = " << n);
      const std::vector<index_t> shape{n};
      const auto h = data<T>(static_cast<std::size_t>(n));
      for (const auto& pl : placements(1, set)) {
        for (index_t s : {index_t(1), index_t(2), index_t(7)}) {
          if (s > n) continue;
          // Shift right: every element must be the pre-shift value, as if through a temporary
          // (in place, a forward loop would smear a[0] over the whole array).
          alias_case<T, 1>("shift right a(range(s, n)) = a(range(0, n - s)), s = " + std::to_string(s), shape, h, pl,
                           {ax(s, n)}, {ax(0, n - s)}, copy_src,
                           [s, n](Array<T, 1>& a) { a(range(s, n)) = a(range(0, n - s)); });
          alias_case<T, 1>("shift left a(range(0, n - s)) = a(range(s, n)), s = " + std::to_string(s), shape, h, pl,
                           {ax(0, n - s)}, {ax(s, n)}, copy_src,
                           [s, n](Array<T, 1>& a) { a(range(0, n - s)) = a(range(s, n)); });
        }
        alias_case<T, 1>("reverse a = a(range(n - 1, -1, -1))", shape, h, pl, {all(n)}, {ax(n - 1, -1, -1)}, copy_src,
                         [n](Array<T, 1>& a) { a = a(range(n - 1, -1, -1)); });
        if (n >= 1) {
          alias_case<T, 1>("a(range(0, n - 1)) = a(range(n - 1, 0, -1))", shape, h, pl, {ax(0, n - 1)},
                           {ax(n - 1, 0, -1)}, copy_src,
                           [n](Array<T, 1>& a) { a(range(0, n - 1)) = a(range(n - 1, 0, -1)); });
          alias_case<T, 1>("a(range(n - 1, -1, -1)) = a + a(range(n - 1, -1, -1))", shape, h, pl,
                           {ax(n - 1, -1, -1)}, {ax(n - 1, -1, -1)}, [](T d, T s) { return static_cast<T>(d + s); },
                           [n](Array<T, 1>& a) { a(range(n - 1, -1, -1)) = a(range(n - 1, -1, -1)) + a(range(n - 1, -1, -1)); });
        }
        if (n >= 2) {
          // Strided: even positions shifted by one even slot, and odd positions gathered to the front.
          alias_case<T, 1>("a(range(2, n, 2)) = a(range(0, n - 2, 2))", shape, h, pl, {ax(2, n, 2)},
                           {ax(0, n - 2, 2)}, copy_src,
                           [n](Array<T, 1>& a) { a(range(2, n, 2)) = a(range(0, n - 2, 2)); });
          alias_case<T, 1>("a(range(0, n / 2)) = a(range(1, n, 2))", shape, h, pl, {ax(0, n / 2)}, {ax(1, n, 2)},
                           copy_src, [n](Array<T, 1>& a) { a(range(0, n / 2)) = a(range(1, n, 2)); });
          // A prefix-sum hazard: in place this would accumulate.
          alias_case<T, 1>("a(range(1, n)) += a(range(0, n - 1))", shape, h, pl, {ax(1, n)}, {ax(0, n - 1)},
                           [](T d, T s) { return static_cast<T>(d + s); },
                           [n](Array<T, 1>& a) { a(range(1, n)) += a(range(0, n - 1)); });
          // The same through assign() with the sequential policy.
          alias_case<T, 1>("assign(a(range(1, n)), a(range(0, n - 1)), seq)", shape, h, pl, {ax(1, n)}, {ax(0, n - 1)},
                           copy_src, [n](Array<T, 1>& a) { assign(a(range(1, n)), a(range(0, n - 1)), seq); });
          // Through two view objects of the same array.
          alias_case<T, 1>("w = v, views of the same array", shape, h, pl, {ax(1, n)}, {ax(0, n - 1)}, copy_src,
                           [n](Array<T, 1>& a) {
                             auto v = a(range(0, n - 1));
                             auto w = a(range(1, n));
                             w = v;
                           });
        }
      }
    }
  }
}
}  // namespace

TEST_CASE("alias: overlap at another offset, 1-d shifts, reversals and strides") {
  shift_cases<float>();
  shift_cases<std::int32_t>();
}

// ---------------------------------------------------------------------------------------------------
TEST_CASE("alias: overlapping 2-d views (flips, diagonal shifts, strided rows)") {
  using T = float;
  const Combine<T> copy_src = [](T, T s) { return s; };
  for (const auto& set : device_sets()) {
    for (const std::vector<index_t>& shape :
         std::vector<std::vector<index_t>>{{1, 1}, {5, 7}, {8, 3}, {2, 9}, {33, 17}, {1023, 1025}}) {
      const index_t r = shape[0], c = shape[1];
      INFO("device set " << set_name(set) << ", shape " << dims_string(shape));
      const auto h = data<T>(static_cast<std::size_t>(r * c));
      for (const auto& pl : placements(2, set)) {
        alias_case<T, 2>("flip rows m = m(range(r - 1, -1, -1), _)", shape, h, pl, {all(r), all(c)},
                         {ax(r - 1, -1, -1), all(c)}, copy_src,
                         [r](Array<T, 2>& m) { m = m(range(r - 1, -1, -1), _); });
        alias_case<T, 2>("flip columns m = m(_, range(c - 1, -1, -1))", shape, h, pl, {all(r), all(c)},
                         {all(r), ax(c - 1, -1, -1)}, copy_src,
                         [c](Array<T, 2>& m) { m = m(_, range(c - 1, -1, -1)); });
        alias_case<T, 2>("rotate m = m(range(r - 1, -1, -1), range(c - 1, -1, -1))", shape, h, pl, {all(r), all(c)},
                         {ax(r - 1, -1, -1), ax(c - 1, -1, -1)}, copy_src,
                         [r, c](Array<T, 2>& m) { m = m(range(r - 1, -1, -1), range(c - 1, -1, -1)); });
        alias_case<T, 2>("diagonal shift m(range(1, r), range(1, c)) = m(range(0, r - 1), range(0, c - 1))", shape, h,
                         pl, {ax(1, r), ax(1, c)}, {ax(0, r - 1), ax(0, c - 1)}, copy_src,
                         [r, c](Array<T, 2>& m) { m(range(1, r), range(1, c)) = m(range(0, r - 1), range(0, c - 1)); });
        alias_case<T, 2>("anti-diagonal m(range(0, r - 1), range(1, c)) = m(range(1, r), range(0, c - 1))", shape, h,
                         pl, {ax(0, r - 1), ax(1, c)}, {ax(1, r), ax(0, c - 1)}, copy_src,
                         [r, c](Array<T, 2>& m) { m(range(0, r - 1), range(1, c)) = m(range(1, r), range(0, c - 1)); });
        alias_case<T, 2>("row shift m(range(1, r), _) = m(range(0, r - 1), _)", shape, h, pl, {ax(1, r), all(c)},
                         {ax(0, r - 1), all(c)}, copy_src,
                         [r](Array<T, 2>& m) { m(range(1, r), _) = m(range(0, r - 1), _); });
        alias_case<T, 2>("column shift m(_, range(0, c - 1)) = m(_, range(1, c))", shape, h, pl, {all(r), ax(0, c - 1)},
                         {all(r), ax(1, c)}, copy_src,
                         [c](Array<T, 2>& m) { m(_, range(0, c - 1)) = m(_, range(1, c)); });
        alias_case<T, 2>("strided rows m(range(0, (r + 1) / 2), _) = m(range(r - 1, -1, -2), _)", shape, h, pl,
                         {ax(0, (r + 1) / 2), all(c)}, {ax(r - 1, -1, -2), all(c)}, copy_src,
                         [r](Array<T, 2>& m) { m(range(0, (r + 1) / 2), _) = m(range(r - 1, -1, -2), _); });
        if (r == c || (r > 1 && c > 1)) {
          // A column written from a row that crosses it ("transposed-like": the read walks memory
          // with stride r where the write walks with stride 1).
          const index_t k = std::min(r, c);
          alias_case<T, 2>("m(range(0, k), 0) = m(0, range(0, k))", shape, h, pl, {ax(0, k), pt(0)},
                           {pt(0), ax(0, k)}, copy_src, [k](Array<T, 2>& m) {
                             auto col = m(range(0, k), 0);
                             col = m(0, range(0, k));
                           });
        }
      }
    }
  }
}
