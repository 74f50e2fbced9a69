// SPDX-License-Identifier: Apache-2.0
// Alias-safe assignment: in place (a = a + 1, a = a * a, a += a, a(_, k) = a(_, k) * 2), reads
// that overlap the written region at another offset (shifts, reversals, strided and 2-d views),
// broadcast reads of a row of the destination, aliasing through different view objects, reads of
// other arrays, and the compound assignment operators. Every result must equal a host reference
// computed through an explicit temporary. On sharded arrays, a shifted view has other block
// boundaries than the destination: the assignment must throw placement_mismatch (and leave the
// array intact) exactly when some device would need elements that another device holds.
#include "test_support.hpp"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <utility>
#include <vector>

using namespace tessera;
using namespace tessera_test;

namespace {

// -- the reference --------------------------------------------------------------------------------
// One index of a view, as data: positions first + j * step for j in [0, count); `drop` for an
// integer index (the dimension disappears from the view).
struct Axis {
  index_t first, step, count;
  bool drop = false;
};
// range(f, l, s) as an axis (the count by a plain loop).
Axis ax(index_t f, index_t l, index_t s = 1) {
  index_t c = 0;
  for (index_t i = f; s > 0 ? i < l : i > l; i += s) ++c;
  return {f, s, c, false};
}
Axis all(index_t n) { return {0, 1, n, false}; }
Axis pt(index_t k) { return {k, 1, 1, true}; }  // an integer index

std::string axes_string(const std::vector<Axis>& a) {
  std::string s = "(";
  for (std::size_t k = 0; k < a.size(); ++k) {
    s += k ? ", " : "";
    s += a[k].drop ? std::to_string(a[k].first)
                   : std::to_string(a[k].first) + ":" + std::to_string(a[k].step) + "x" + std::to_string(a[k].count);
  }
  return s + ")";
}

// The array dimensions that a view keeps, in order.
std::vector<std::size_t> kept(const std::vector<Axis>& v) {
  std::vector<std::size_t> out;
  for (std::size_t k = 0; k < v.size(); ++k)
    if (!v[k].drop) out.push_back(k);
  return out;
}

template <class T>
using Combine = std::function<T(T old_dst, T src)>;

// dst-view = f(dst-view, src-view) evaluated through an explicit temporary: every right-hand
// side is read from the old values before anything is written. Views align dimension by
// dimension (after integer indices drop theirs); a source dimension of size 1 against a longer
// destination dimension broadcasts.
template <class T>
std::vector<T> reference(const std::vector<T>& old, const std::vector<index_t>& shape, const std::vector<Axis>& dst,
                         const std::vector<Axis>& src, const Combine<T>& f) {
  const std::size_t n = shape.size();
  const auto dk = kept(dst), sk = kept(src);
  REQUIRE(sk.size() <= dk.size());  // missing trailing source dimensions broadcast (Julia)
  const std::size_t m = dk.size();
  std::vector<index_t> stride(n);
  index_t acc = 1, total = 1;
  for (std::size_t k = 0; k < n; ++k) {
    stride[k] = acc;
    acc *= shape[k];
  }
  for (std::size_t v = 0; v < m; ++v) total *= dst[dk[v]].count;
  // Per view dimension, the offset of each position in the destination and in the source.
  index_t d0 = 0, s0 = 0;
  for (std::size_t k = 0; k < n; ++k) {
    if (dst[k].drop) d0 += dst[k].first * stride[k];
    if (src[k].drop) s0 += src[k].first * stride[k];
  }
  std::vector<std::vector<index_t>> doff(m), soff(m);
  for (std::size_t v = 0; v < m; ++v) {
    const Axis& da = dst[dk[v]];
    const bool missing = v >= sk.size();
    const Axis sa = missing ? Axis{0, 1, 1} : src[sk[v]];
    const bool bcast = sa.count == 1 && da.count != 1;
    for (index_t j = 0; j < da.count; ++j) {
      doff[v].push_back((da.first + j * da.step) * stride[dk[v]]);
      soff[v].push_back(missing ? 0 : (sa.first + (bcast ? 0 : j) * sa.step) * stride[sk[v]]);
    }
  }
  std::vector<index_t> dlin, slin;
  dlin.reserve(static_cast<std::size_t>(total));
  slin.reserve(static_cast<std::size_t>(total));
  std::vector<std::size_t> j(m, 0);
  for (index_t e = 0; e < total; ++e) {
    index_t d = d0, s = s0;
    for (std::size_t v = 0; v < m; ++v) {
      d += doff[v][j[v]];
      s += soff[v][j[v]];
    }
    dlin.push_back(d);
    slin.push_back(s);
    for (std::size_t v = 0; v < m; ++v) {
      if (++j[v] < doff[v].size()) break;
      j[v] = 0;
    }
  }
  std::vector<T> tmp(dlin.size());
  for (std::size_t i = 0; i < dlin.size(); ++i) tmp[i] = f(old[dlin[i]], old[slin[i]]);  // the temporary
  std::vector<T> out = old;
  for (std::size_t i = 0; i < dlin.size(); ++i) out[dlin[i]] = tmp[i];
  return out;
}

// -- the placement model ---------------------------------------------------------------------------
// What part i of the source array contributes to a view: whether it holds any of it (an integer
// index outside its block means no), and per view dimension the [lo, hi) of view positions it
// holds (by brute force: independent of the library's window arithmetic).
struct Held {
  bool exists = true;
  std::vector<std::pair<index_t, index_t>> box;
};

template <class A>
std::vector<Held> held(const A& a, const std::vector<Axis>& view) {
  const auto& parts = a.layout().parts;
  std::vector<Held> out(parts.size());
  for (std::size_t i = 0; i < parts.size(); ++i) {
    for (std::size_t k = 0; k < view.size(); ++k) {
      const index_t lo = parts[i].origin[k], hi = lo + parts[i].extent[k];
      const Axis& x = view[k];
      // Positions are monotonic in j, so the j with p(j) in [lo, hi) are contiguous: between the
      // first j whose position has passed one bound and the first that has passed the other.
      auto passed = [&](index_t b) {
        index_t l = 0, h = x.count;  // first j where the predicate holds
        while (l < h) {
          const index_t mid = l + (h - l) / 2;
          const index_t p = x.first + mid * x.step;
          const bool pred = x.step > 0 ? p >= b : p < b;
          if (pred) h = mid;
          else l = mid + 1;
        }
        return l;
      };
      const index_t jlo = x.step > 0 ? passed(lo) : passed(hi);
      const index_t jhi = x.step > 0 ? passed(hi) : passed(lo);
      const bool any = jlo < jhi;
      if (x.count > 0 && !any) out[i].exists = false;
      if (!x.drop) out[i].box.push_back(any ? std::pair{jlo, jhi} : std::pair<index_t, index_t>{0, 0});
    }
  }
  return out;
}

// True when the assignment dst-view = f(dst-view, src-view) of array `a` needs, on some device,
// source elements that this device does not hold: Tessera then throws placement_mismatch
// instead of moving data between devices behind the user's back.
template <class A>
bool predict_mismatch(const A& a, const std::vector<Axis>& dst, const std::vector<Axis>& src) {
  const auto hd = held(a, dst), hs = held(a, src);
  const auto dk = kept(dst), sk = kept(src);
  for (std::size_t i = 0; i < hd.size(); ++i) {
    bool computes = hd[i].exists;
    for (auto& b : hd[i].box) computes = computes && b.second > b.first;
    if (!computes) continue;
    if (!hs[i].exists) return true;
    for (std::size_t v = 0; v < sk.size(); ++v) {  // dimensions the source lacks need nothing
      const bool bcast = src[sk[v]].count == 1 && dst[dk[v]].count != 1;
      const auto need = bcast ? std::pair<index_t, index_t>{0, 1} : hd[i].box[v];
      const auto have = hs[i].box[v];
      if (!(have.first <= need.first && need.second <= have.second)) return true;
    }
  }
  return false;
}

// -- helpers ---------------------------------------------------------------------------------------
template <class T>
void check_equal(const std::vector<T>& got, const std::vector<T>& want) {
  REQUIRE(got.size() == want.size());
  for (std::size_t i = 0; i < got.size(); ++i) {
    const bool same = got[i] == want[i] || (std::isnan(static_cast<double>(got[i])) && std::isnan(static_cast<double>(want[i])));
    if (!same) {
      FAIL_CHECK("element " << i << ": got " << static_cast<double>(got[i]) << ", expected "
                            << static_cast<double>(want[i]));
      return;
    }
  }
}

// Every replica of a replicated array (to_host reads one of them), read through host_data.
template <class T, int N>
void check_values(const Array<T, N>& a, const std::vector<T>& want) {
  check_equal(to_host(a), want);
  if (!a.is_replicated() || want.empty()) return;
  for (int s = 0; s < static_cast<int>(a.layout().parts.size()); ++s) {
    INFO("replica " << s);
    const T* p = a.host_data(s);
    REQUIRE(p != nullptr);
    check_equal(std::vector<T>(p, p + want.size()), want);
  }
}

template <class T, int N>
std::vector<const void*> part_pointers(const Array<T, N>& a) {
  std::vector<const void*> out;
  for (auto& p : a.layout().parts) out.push_back(p.ptr);
  return out;
}

template <class T, int N>
Array<T, N> make(const std::vector<T>& v, const std::vector<index_t>& shape, const Placement& p) {
  Shape<N> s{};
  for (int k = 0; k < N; ++k) s[k] = shape[static_cast<std::size_t>(k)];
  return from_host<T, static_cast<std::size_t>(N)>(std::span<const T>(v), s, p);
}

struct NamedPlacement {
  std::string name;
  Placement p;
};

std::vector<NamedPlacement> placements(int rank, const DeviceSet& set) {
  std::vector<NamedPlacement> out;
  for (int d = 0; d < rank; ++d) out.push_back({"shard(" + std::to_string(d) + ")", shard(d, set)});
  out.push_back({"replicate", replicate(set)});
  out.push_back({"on(" + set.back().name() + ")", on(set.back())});
  return out;
}

std::string dims_string(const std::vector<index_t>& s) {
  std::string out = "{";
  for (std::size_t k = 0; k < s.size(); ++k) out += (k ? "," : "") + std::to_string(s[k]);
  return out + "}";
}

index_t volume(const std::vector<index_t>& s) {
  index_t v = 1;
  for (index_t x : s) v *= x;
  return v;
}

// Random data; `nonzero` replaces zeros (integer divisors).
template <class T>
std::vector<T> data(std::size_t n, bool nonzero = false) {
  auto v = random_values<T>(n);
  if (nonzero)
    for (auto& x : v)
      if (x == T(0)) x = T(1);
  return v;
}

// One aliasing case: runs `op` on a fresh array holding `host`, and checks either the reference
// (dst = f(dst, src) through a temporary, in the array's own storage), or, where the placement
// model says some device lacks the source elements, placement_mismatch with the array intact.
template <class T, int N>
void alias_case(const std::string& what, const std::vector<index_t>& shape, const std::vector<T>& host,
                const NamedPlacement& pl, const std::vector<Axis>& dst, const std::vector<Axis>& src,
                const Combine<T>& f, const std::function<void(Array<T, N>&)>& op) {
  INFO(what << " on " << pl.name << ", shape " << dims_string(shape) << ", dst " << axes_string(dst) << ", src "
            << axes_string(src));
  Array<T, N> a = make<T, N>(host, shape, pl.p);
  const bool mismatch = predict_mismatch(a, dst, src);
  const auto before = part_pointers(a);
  std::string error;
  bool threw_mismatch = false;
  try {
    op(a);
  } catch (const placement_mismatch& e) {
    threw_mismatch = true;
    error = e.what();
  } catch (const std::exception& e) {
    error = e.what();
    FAIL_CHECK("unexpected exception: " << error);
  }
  if (mismatch) {
    INFO("expected placement_mismatch (a shifted view has other block boundaries than the destination)");
    CHECK(threw_mismatch);
    CHECK(error.find("placement") != std::string::npos);
    check_values(a, host);  // nothing moved, nothing written
  } else {
    INFO("expected success; got: " << error);
    CHECK_FALSE(threw_mismatch);
    check_values(a, reference(host, shape, dst, src, f));
  }
  CHECK(part_pointers(a) == before);  // the array keeps its storage
}

}  // namespace

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

// ---------------------------------------------------------------------------------------------------
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
        const auto a = make<float, 1>(ha, {n}, pl.p);
        auto b = copy(a);
        if (n > 0) CHECK(part_pointers(b) != part_pointers(a));
        b = a + b;
        std::vector<float> ref(ha.size());
        for (std::size_t i = 0; i < ha.size(); ++i) ref[i] = ha[i] + ha[i];
        check_values(b, ref);
        check_values(a, ha);
        // Reversed and shifted reads of a into b: the placement rule is the same as for an
        // aliased read (block boundaries must match), the values are a's.
        const std::vector<Axis> rev{ax(n - 1, -1, -1)};
        if (predict_mismatch(a, {all(n)}, rev)) {
          CHECK_THROWS_AS(b = a(range(n - 1, -1, -1)), placement_mismatch);
        } else {
          b = a(range(n - 1, -1, -1));
          for (std::size_t i = 0; i < ha.size(); ++i) ref[i] = ha[ha.size() - 1 - i];
        }
        check_values(b, ref);
        check_values(a, ha);
        if (n >= 2) {
          if (predict_mismatch(a, {ax(1, n)}, {ax(0, n - 1)})) {
            CHECK_THROWS_AS(b(range(1, n)) = a(range(0, n - 1)), placement_mismatch);
          } else {
            b(range(1, n)) = a(range(0, n - 1));
            for (std::size_t i = 1; i < ha.size(); ++i) ref[i] = ha[i - 1];
          }
          check_values(b, ref);
          check_values(a, ha);
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
          auto a = make<T, 1>(h, shape, pl.p);
          const auto ptrs = part_pointers(a);
          std::vector<T> ref = h;
          a += 3;
          for (auto& x : ref) x = static_cast<T>(x + 3);
          check_values(a, ref);
          a -= 5;
          for (auto& x : ref) x = static_cast<T>(x - 5);
          check_values(a, ref);
          a *= 3;
          for (auto& x : ref) x = static_cast<T>(x * 3);
          check_values(a, ref);
          a %= 7;
          for (auto& x : ref) x = rem_ref<T>(x, T(7));
          check_values(a, ref);
          a /= 2;
          for (auto& x : ref) x = div_ref<T>(x, T(2));
          check_values(a, ref);
          a %= -3;  // the sign of the dividend
          for (auto& x : ref) x = rem_ref<T>(x, T(-3));
          check_values(a, ref);
          CHECK(part_pointers(a) == ptrs);
        }
        // With another array of the same placement (divisors: nonzero for `/`, with zeros for `%`).
        {
          INFO("arrays on " << pl.name);
          const auto hb = data<T>(un, true);
          const auto hz = data<T>(un);
          auto a = make<T, 1>(h, shape, pl.p);
          const auto b = make<T, 1>(hb, shape, pl.p);
          const auto z = make<T, 1>(hz, shape, pl.p);
          std::vector<T> ref = h;
          auto apply = [&](const Combine<T>& f, const std::vector<T>& rhs) {
            for (std::size_t i = 0; i < un; ++i) ref[i] = f(ref[i], rhs[i]);
          };
          a += b;
          apply(add, hb);
          check_values(a, ref);
          a -= z;
          apply(sub, hz);
          check_values(a, ref);
          a *= b;
          apply(mul, hb);
          check_values(a, ref);
          a %= z;
          apply(mod, hz);
          check_values(a, ref);
          a /= b;
          apply(div, hb);
          check_values(a, ref);
          check_values(b, hb);
          check_values(z, hz);
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
    check_values(a, h);
    CHECK_THROWS_AS(a(range(1, n)) += a(range(0, n - 1)), placement_mismatch);
    CHECK_THROWS_AS(a = a(range(n - 1, -1, -1)), placement_mismatch);
    check_values(a, h);
    // The library keeps working: the same shift through a replicated copy (an explicit move of
    // data chosen by the user) then back into the sharded array.
    const auto r = make<float, 1>(h, {n}, replicate(set));
    auto r2 = copy(r);
    r2(range(1, n)) = r2(range(0, n - 1));
    std::vector<float> ref = h;
    for (index_t i = n - 1; i >= 1; --i) ref[static_cast<std::size_t>(i)] = h[static_cast<std::size_t>(i - 1)];
    check_values(r2, ref);
    a(_) = r2;  // replicated source, sharded destination: every device holds what it needs
    CHECK(a.shard_dim() == 0);
    check_values(a, ref);
  }
}
