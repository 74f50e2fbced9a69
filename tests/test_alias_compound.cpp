// SPDX-License-Identifier: Apache-2.0
// Alias-safe assignment, continued: broadcast reads of a row of the destination, reads of other
// arrays, the compound assignment operators (with scalars, other arrays, the array itself and
// overlapping views of it), and a shifted view of a sharded array crossing shard boundaries
// (placement_mismatch, the array left intact). Every result must equal a host reference computed
// through an explicit temporary (alias_reference.hpp).
#include "alias_reference.hpp"

#include <cmath>
#include <cstdint>
#include <string>
#include <type_traits>
#include <vector>

using namespace tessera;
using namespace tessera_test;

namespace {
template <class T>
void broadcast_cases() {
  for (const auto& set : device_sets()) {
    for (const std::vector<index_t>& shape :
         std::vector<std::vector<index_t>>{{1, 1}, {1, 5}, {6, 1}, {7, 5}, {3, 17}, {33, 9}, {0, 4}, {1000, 1001}}) {
      const index_t r = shape[0], c = shape[1];
      INFO("device set " << set_name(set) << ", shape " << dims_string(shape));
      const auto h = data<T>(static_cast<std::size_t>(r * c));
      const Combine<T> minus = [](T d, T s) { return static_cast<T>(d - s); };
      for (const auto& pl : placements(2, set)) {
        if (r >= 1) {
          // m(range(0, 1), _) keeps rank 2 with size 1 along dim 0: it broadcasts over the rows,
          // and row 0 itself is rewritten (to 0) while the others still read its old values.
          alias_case<T, 2>("m = m - m(range(0, 1), _)", shape, h, pl, {all(r), all(c)}, {ax(0, 1), all(c)}, minus,
                           [](Array<T, 2>& m) { m = m - m(range(0, 1), _); });
          alias_case<T, 2>("m -= m(range(0, 1), _)", shape, h, pl, {all(r), all(c)}, {ax(0, 1), all(c)}, minus,
                           [](Array<T, 2>& m) { m -= m(range(0, 1), _); });
          alias_case<T, 2>("m = m(range(r - 1, r), _) - m (the last row)", shape, h, pl, {all(r), all(c)},
                           {ax(r - 1, r), all(c)}, [](T d, T s) { return static_cast<T>(s - d); },
                           [r](Array<T, 2>& m) { m = m(range(r - 1, r), _) - m; });
        }
        if (c >= 1) {
          alias_case<T, 2>("m = m - m(_, range(c - 1, c)) (the last column)", shape, h, pl, {all(r), all(c)},
                           {all(r), ax(c - 1, c)}, minus, [c](Array<T, 2>& m) { m = m - m(_, range(c - 1, c)); });
        }
        if (c >= 1) {
          // A 1-d column aligns with dim 0 and broadcasts along dim 1.
          alias_case<T, 2>("m = m - m(_, 0) (a 1-d column)", shape, h, pl, {all(r), all(c)}, {all(r), pt(0)}, minus,
                           [](Array<T, 2>& m) { m = m - m(_, 0); });
        }
        if (r >= 1 && c >= 1) {
          alias_case<T, 2>("m -= m(r - 1, c - 1) (a rank-0 view)", shape, h, pl, {all(r), all(c)},
                           {pt(r - 1), pt(c - 1)}, minus, [r, c](Array<T, 2>& m) { m -= m(r - 1, c - 1); });
          alias_case<T, 2>("m *= m(range(0, 1), range(0, 1))", shape, h, pl, {all(r), all(c)}, {ax(0, 1), ax(0, 1)},
                           [](T d, T s) { return static_cast<T>(d * s); },
                           [](Array<T, 2>& m) { m *= m(range(0, 1), range(0, 1)); });
        }
      }
    }
    // 1-d: a = a - a(range(0, 1)).
    for (index_t n : sweep_sizes()) {
      if (n == 0) continue;
      INFO("device set " << set_name(set) << ", n = " << n);
      const auto h = data<T>(static_cast<std::size_t>(n));
      for (const auto& pl : placements(1, set)) {
        alias_case<T, 1>("a = a - a(range(0, 1))", {n}, h, pl, {all(n)}, {ax(0, 1)},
                         [](T d, T s) { return static_cast<T>(d - s); },
                         [](Array<T, 1>& a) { a = a - a(range(0, 1)); });
        alias_case<T, 1>("a = a(n / 2) * a (a rank-0 view)", {n}, h, pl, {all(n)}, {pt(n / 2)},
                         [](T d, T s) { return static_cast<T>(s * d); },
                         [n](Array<T, 1>& a) { a = a(n / 2) * a; });
      }
    }
  }
}
}  // namespace

TEST_CASE("alias: broadcast read of a row of the destination") {
  broadcast_cases<float>();
  broadcast_cases<std::int32_t>();
}

// ---------------------------------------------------------------------------------------------------
TEST_CASE("alias: reading a different array is never a hazard") {
  for (const auto& set : device_sets()) {
    for (index_t n : sweep_sizes()) {
      INFO("device set " << set_name(set) << ", n = " << n);
      const auto ha = data<float>(static_cast<std::size_t>(n));
      for (const auto& pl : placements(1, set)) {
        INFO(pl.name);
        // b holds the same values as a in other storage: writing b never changes a, and the
        // result equals the reference whatever the evaluation order.
        const auto a = make<1>(ha, {n}, pl.p);
        auto b = copy(a);
        if (n > 0) CHECK(part_pointers(b) != part_pointers(a));
        b = a + b;
        std::vector<float> ref(ha.size());
        for (std::size_t i = 0; i < ha.size(); ++i) ref[i] = ha[i] + ha[i];
        check_replicas(b, ref);
        check_replicas(a, ha);
        // Reversed and shifted reads of a into b: the placement rule is the same as for an
        // aliased read (block boundaries must match), the values are a's.
        const std::vector<Axis> rev{ax(n - 1, -1, -1)};
        if (predict_mismatch(a, {all(n)}, rev)) {
          CHECK_THROWS_AS(b = a(range(n - 1, -1, -1)), placement_mismatch);
        } else {
          b = a(range(n - 1, -1, -1));
          for (std::size_t i = 0; i < ha.size(); ++i) ref[i] = ha[ha.size() - 1 - i];
        }
        check_replicas(b, ref);
        check_replicas(a, ha);
        if (n >= 2) {
          if (predict_mismatch(a, {ax(1, n)}, {ax(0, n - 1)})) {
            CHECK_THROWS_AS(b(range(1, n)) = a(range(0, n - 1)), placement_mismatch);
          } else {
            b(range(1, n)) = a(range(0, n - 1));
            for (std::size_t i = 1; i < ha.size(); ++i) ref[i] = ha[i - 1];
          }
          check_replicas(b, ref);
          check_replicas(a, ha);
        }
      }
    }
  }
}

// ---------------------------------------------------------------------------------------------------
namespace {
// Julia's rem, with x % 0 == 0 for integers (the library's documented choice), fmod for floats.
template <class T>
T rem_ref(T x, T y) {
  if constexpr (std::is_floating_point_v<T>) {
    return static_cast<T>(std::fmod(static_cast<double>(x), static_cast<double>(y)));
  } else {
    return (y == 0 || y == -1) ? T(0) : static_cast<T>(x % y);
  }
}
// `/` is true division: an integer destination receives the double quotient converted back
// (truncation toward zero, as for any double assigned to an integer array).
template <class T>
T div_ref(T x, T y) {
  if constexpr (std::is_floating_point_v<T>) return x / y;
  else return static_cast<T>(static_cast<double>(x) / static_cast<double>(y));
}

template <class T>
void compound_cases() {
  const Combine<T> add = [](T d, T s) { return static_cast<T>(d + s); };
  const Combine<T> sub = [](T d, T s) { return static_cast<T>(d - s); };
  const Combine<T> mul = [](T d, T s) { return static_cast<T>(d * s); };
  const Combine<T> div = [](T d, T s) { return div_ref(d, s); };
  const Combine<T> mod = [](T d, T s) { return rem_ref(d, s); };
  for (const auto& set : device_sets()) {
    for (index_t n : sweep_sizes()) {
      INFO("device set " << set_name(set) << ", n = " << n);
      const std::vector<index_t> shape{n};
      const std::size_t un = static_cast<std::size_t>(n);
      // Integer divisions need nonzero divisors (the quotient of 0 by 0 has no integer value).
      const auto h = data<T>(un, std::is_integral_v<T>);
      const std::vector<Axis> id{all(n)};
      for (const auto& pl : placements(1, set)) {
        // With a scalar: the reference is computed against the scalar directly.
        {
          INFO("scalars on " << pl.name);
          auto a = make<1>(h, shape, pl.p);
          const auto ptrs = part_pointers(a);
          std::vector<T> ref = h;
          a += 3;
          for (auto& x : ref) x = static_cast<T>(x + 3);
          check_replicas(a, ref);
          a -= 5;
          for (auto& x : ref) x = static_cast<T>(x - 5);
          check_replicas(a, ref);
          a *= 3;
          for (auto& x : ref) x = static_cast<T>(x * 3);
          check_replicas(a, ref);
          a %= 7;
          for (auto& x : ref) x = rem_ref<T>(x, T(7));
          check_replicas(a, ref);
          a /= 2;
          for (auto& x : ref) x = div_ref<T>(x, T(2));
          check_replicas(a, ref);
          a %= -3;  // the sign of the dividend
          for (auto& x : ref) x = rem_ref<T>(x, T(-3));
          check_replicas(a, ref);
          CHECK(part_pointers(a) == ptrs);
        }
        // With another array of the same placement (divisors: nonzero for `/`, with zeros for `%`).
        {
          INFO("arrays on " << pl.name);
          const auto hb = data<T>(un, true);
          const auto hz = data<T>(un);
          auto a = make<1>(h, shape, pl.p);
          const auto b = make<1>(hb, shape, pl.p);
          const auto z = make<1>(hz, shape, pl.p);
          std::vector<T> ref = h;
          auto apply = [&](const Combine<T>& f, const std::vector<T>& rhs) {
            for (std::size_t i = 0; i < un; ++i) ref[i] = f(ref[i], rhs[i]);
          };
          a += b;
          apply(add, hb);
          check_replicas(a, ref);
          a -= z;
          apply(sub, hz);
          check_replicas(a, ref);
          a *= b;
          apply(mul, hb);
          check_replicas(a, ref);
          a %= z;
          apply(mod, hz);
          check_replicas(a, ref);
          a /= b;
          apply(div, hb);
          check_replicas(a, ref);
          check_replicas(b, hb);
          check_replicas(z, hz);
        }
        // With itself (in place) and with an overlapping shifted view of itself.
        alias_case<T, 1>("a += a", shape, h, pl, id, id, add, [](Array<T, 1>& a) { a += a; });
        alias_case<T, 1>("a -= a", shape, h, pl, id, id, sub, [](Array<T, 1>& a) { a -= a; });
        alias_case<T, 1>("a *= a", shape, h, pl, id, id, mul, [](Array<T, 1>& a) { a *= a; });
        alias_case<T, 1>("a /= a", shape, h, pl, id, id, div, [](Array<T, 1>& a) { a /= a; });
        alias_case<T, 1>("a %= a", shape, h, pl, id, id, mod, [](Array<T, 1>& a) { a %= a; });
        if (n >= 2) {
          const std::vector<Axis> d{ax(1, n)}, s{ax(0, n - 1)};
          alias_case<T, 1>("a(range(1, n)) += a(range(0, n - 1))", shape, h, pl, d, s, add,
                           [n](Array<T, 1>& a) { a(range(1, n)) += a(range(0, n - 1)); });
          alias_case<T, 1>("a(range(1, n)) -= a(range(0, n - 1))", shape, h, pl, d, s, sub,
                           [n](Array<T, 1>& a) { a(range(1, n)) -= a(range(0, n - 1)); });
          alias_case<T, 1>("a(range(1, n)) *= a(range(0, n - 1))", shape, h, pl, d, s, mul,
                           [n](Array<T, 1>& a) { a(range(1, n)) *= a(range(0, n - 1)); });
          alias_case<T, 1>("a(range(0, n - 1)) /= a(range(1, n))", shape, h, pl, s, d, div,
                           [n](Array<T, 1>& a) { a(range(0, n - 1)) /= a(range(1, n)); });
          alias_case<T, 1>("a(range(0, n - 1)) %= a(range(1, n))", shape, h, pl, s, d, mod,
                           [n](Array<T, 1>& a) { a(range(0, n - 1)) %= a(range(1, n)); });
          alias_case<T, 1>("a(range(n - 1, 0, -1)) += a(range(0, n - 1)) (reversed, overlapping)", shape, h, pl,
                           {ax(n - 1, 0, -1)}, s, add,
                           [n](Array<T, 1>& a) { a(range(n - 1, 0, -1)) += a(range(0, n - 1)); });
        }
      }
    }
  }
}
}  // namespace

TEST_CASE("alias: compound assignment operators on float and int arrays") {
  compound_cases<float>();
  compound_cases<std::int32_t>();
}

// ---------------------------------------------------------------------------------------------------
TEST_CASE("alias: a shifted view of a sharded array crossing shard boundaries throws placement_mismatch") {
  const auto sets = multi_device_sets();
  for (const auto& set : sets) {
    INFO("device set " << set_name(set));
    const index_t n = 10 * static_cast<index_t>(set.size()) + 3;  // uneven blocks
    const auto h = data<float>(static_cast<std::size_t>(n));
    auto a = from_host(h, {n}, shard(0, set));
    // The view a(range(0, n - 1)) keeps the destination's devices but not its boundaries: the
    // last element of each block of a(range(1, n)) lives on the next device. No data is moved.
    bool threw = false;
    try {
      a(range(1, n)) = a(range(0, n - 1));
    } catch (const placement_mismatch& e) {
      threw = true;
      const std::string msg = e.what();
      INFO("message: " << msg);
      CHECK(msg.find("placement_mismatch") != std::string::npos);
      CHECK((msg.find("host:") != std::string::npos || msg.find("cuda:") != std::string::npos));  // names a device
    }
    CHECK(threw);
    check_replicas(a, h);
    CHECK_THROWS_AS(a(range(1, n)) += a(range(0, n - 1)), placement_mismatch);
    CHECK_THROWS_AS(a = a(range(n - 1, -1, -1)), placement_mismatch);
    check_replicas(a, h);
    // The library keeps working: the same shift through a replicated copy (an explicit move of
    // data chosen by the user) then back into the sharded array.
    const auto r = make<1>(h, {n}, replicate(set));
    auto r2 = copy(r);
    r2(range(1, n)) = r2(range(0, n - 1));
    std::vector<float> ref = h;
    for (index_t i = n - 1; i >= 1; --i) ref[static_cast<std::size_t>(i)] = h[static_cast<std::size_t>(i - 1)];
    check_replicas(r2, ref);
    a(_) = r2;  // replicated source, sharded destination: every device holds what it needs
    CHECK(a.shard_dim() == 0);
    check_replicas(a, ref);
  }
}
