// SPDX-License-Identifier: Apache-2.0
// The reference for alias-safe assignment, shared by the alias test files: views as data (Axis),
// dst-view = f(dst-view, src-view) computed through an explicit temporary, the placement model that
// predicts placement_mismatch, and alias_case, which runs one assignment and checks it.
#pragma once
#include "test_support.hpp"

#include <cstddef>
#include <exception>
#include <functional>
#include <string>
#include <utility>
#include <vector>

namespace tessera_test {

// -- the reference --------------------------------------------------------------------------------
// One index of a view, as data: positions first + j * step for j in [0, count); `drop` for an
// integer index (the dimension disappears from the view).
struct Axis {
  index_t first, step, count;
  bool drop = false;
};
// range(f, l, s) as an axis (the count by a plain loop).
inline Axis ax(index_t f, index_t l, index_t s = 1) {
  index_t c = 0;
  for (index_t i = f; s > 0 ? i < l : i > l; i += s) ++c;
  return {f, s, c, false};
}
inline Axis all(index_t n) { return {0, 1, n, false}; }
inline Axis pt(index_t k) { return {k, 1, 1, true}; }  // an integer index

inline std::string axes_string(const std::vector<Axis>& a) {
  std::string s = "(";
  for (std::size_t k = 0; k < a.size(); ++k) {
    s += k ? ", " : "";
    s += a[k].drop ? std::to_string(a[k].first)
                   : std::to_string(a[k].first) + ":" + std::to_string(a[k].step) + "x" + std::to_string(a[k].count);
  }
  return s + ")";
}

// The array dimensions that a view keeps, in order.
inline std::vector<std::size_t> kept(const std::vector<Axis>& v) {
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
template <class T, int N>
std::vector<const void*> part_pointers(const Array<T, N>& a) {
  std::vector<const void*> out;
  for (auto& p : a.layout().parts) out.push_back(p.ptr);
  return out;
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
  Array<T, N> a = make<N>(host, shape, pl.p);
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
    check_replicas(a, host);  // nothing moved, nothing written
  } else {
    INFO("expected success; got: " << error);
    CHECK_FALSE(threw_mismatch);
    check_replicas(a, reference(host, shape, dst, src, f));
  }
  CHECK(part_pointers(a) == before);  // the array keeps its storage
}

}  // namespace tessera_test
