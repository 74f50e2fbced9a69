// SPDX-License-Identifier: Apache-2.0
// Tessera: the plan of the row-tile path of stencils (backend/cuda/executor.cuh, tile_kernel).
//
// A stencil's operands are views of one array at small offsets: Jacobi's u(i-1, j), u(i+1, j),
// u(i, j-1), u(i, j+1). The row-tile kernel has each thread take K = 16 / element size outputs
// along dim 0 in each of U consecutive rows along dim 1; it loads the 16-byte chunks of that array
// once, over rows -1 .. U, and serves every such view (a "member") from them: a view one row up or
// down from a neighbouring row, a view shifted along dim 0 from the thread's chunk and one element
// of the next or previous lane's (a warp shuffle). Other operands read their own chunks
// (LeafEval::row_vec). On an H200 the hand-written kernel of this scheme reaches 0.974x memcpy for
// the 2-D Jacobi where one load per operand reaches 0.83x (bench/support/stencil_probe.cu).
//
// On this branch the kernel is generated and compiled at run time (backend/cuda/stencil_jit.cuh):
// each member's row and shift are constants in its source, so a member's elements are registers
// named at compile time, as in the hand-written kernel.
//
// The plan is made on the host for each shard from the evaluator's pointers and strides: which
// array (the "anchor", a 16-byte aligned address for every thread's chunk), which leaves are its
// members, each member's row (dy: -1, 0, 1) and where its K elements start in the chunks of the
// previous, own and next lane (s: -1, 0, 1: a stencil of radius 1; more cases cost compile time,
// each being unrolled for every member in every row). Members have the output's element type, unit
// stride along dim 0 and exactly the anchor's strides, whose dims 1.. are multiples of K (so every
// row of a thread keeps one alignment); every member element the kernel reads is an element of
// that member, and every chunk it loads lies between two of them (rows lo .. count - 1 + hi, the
// member of least dy giving the first, the one of greatest dy the last), so no byte outside an
// allocation is read.
#pragma once
#include <tessera/evaluator.hpp>

#include <cstdint>
#include <type_traits>

namespace tessera::detail {

// f(integral_constant<int, number>, leaf) for every array leaf of an evaluator, numbered depth
// first from L0; g(scalar) for every scalar, in the same order (host side).
template <int L0, class T, int N, class F, class G>
void for_each_operand(const LeafEval<T, N>& e, F&& f, G&&) {
  f(std::integral_constant<int, L0>{}, e);
}
template <int L0, class T, class F, class G>
void for_each_operand(const ScalarEval<T>& e, F&&, G&& g) {
  g(e);
}
template <int L0, int N, class F, class G>
void for_each_operand(const IndexEval<N>&, F&&, G&&) {}
template <int L0, class Fn, class... E, class F, class G>
void for_each_operand(const NodeEval<Fn, E...>& e, F&& f, G&& g);
template <int L0, class Fn, class... E, class F, class G, std::size_t... S>
void for_each_operand_of(const NodeEval<Fn, E...>& e, F& f, G& g, std::index_sequence<S...>) {
  constexpr int counts[] = {leaf_count<E>::value..., 0};
  constexpr auto offset = [](std::size_t k) {
    int o = 0;
    for (std::size_t i = 0; i < k; ++i) o += counts[i];
    return o;
  };
  (for_each_operand<L0 + offset(S)>(ev_get<S>(e.a), f, g), ...);
}
template <int L0, class Fn, class... E, class F, class G>
void for_each_operand(const NodeEval<Fn, E...>& e, F&& f, G&& g) {
  for_each_operand_of<L0>(e, f, g, std::index_sequence_for<E...>{});
}

template <int L, int N>
struct tile_plan {
  bool valid = false;               // a group of two or more members was found
  int members = 0;
  int head = 0;                     // elements before a row's first 16-byte aligned output
  std::int8_t lo = 0, hi = 0;       // the members' least and greatest dy: rows lo .. U - 1 + hi are loaded
  std::int8_t left_dy = 0;          // bit dy + 1: a member of that dy has s = -1 (reads the element before a chunk)
  std::int8_t right_dy = 0;         // bit dy + 1: a member of that dy has s = 1 (the element after)
  std::int8_t member[L > 0 ? L : 1] = {};
  std::int8_t dy[L > 0 ? L : 1] = {};
  std::int8_t s[L > 0 ? L : 1] = {};      // -1, 0 or 1
  std::uintptr_t anchor = 0;        // address of the anchor's element (0, ..., 0), may lie outside it
  index_t st[N > 0 ? N : 1] = {};  // the anchor's strides, in elements
};

// The plan for one shard writing `out` from `e`, K elements per 16-byte chunk.
template <int K, class T, int N, class E>
tile_plan<leaf_count<E>::value, N> make_tile_plan(const OutEval<T, N>& out, const E& e) {
  constexpr int L = leaf_count<E>::value;
  tile_plan<L, N> pl;
  if constexpr (N >= 2 && L >= 2) {
    static_assert(K * sizeof(T) == 16, "make_tile_plan: one 16-byte chunk holds K elements");
    for (int k = 1; k < N; ++k)
      if (out.st[k] % K != 0) return pl;
    const auto elem = [](const T* p) { return static_cast<index_t>(reinterpret_cast<std::uintptr_t>(p) / sizeof(T)); };
    pl.head = static_cast<int>((K - elem(out.p) % K) % K);
    // The candidates: leaves of the output's element type, unit stride along dim 0, rows aligned alike.
    const T* ptr[L] = {};
    const index_t* st[L] = {};
    for_each_operand<0>(e, [&](auto l, const auto& leaf) {
      if constexpr (std::is_same_v<std::decay_t<decltype(leaf)>, LeafEval<T, N>>) {
        bool ok = leaf.st[0] == 1 && reinterpret_cast<std::uintptr_t>(leaf.p) % sizeof(T) == 0;
        for (int k = 1; k < N; ++k) ok = ok && leaf.st[k] % K == 0;
        if (ok) ptr[decltype(l)::value] = leaf.p, st[decltype(l)::value] = leaf.st;
      }
    }, [](const auto&) {});
    const auto same_strides = [&](int a, int b) {
      for (int k = 0; k < N; ++k)
        if (st[a][k] != st[b][k]) return false;
      return true;
    };
    // Where leaf l sits against candidate anchor r moved by c elements (a multiple of K): its row
    // and window start, or false when it is not a member.
    const auto place = [&](int r, index_t c, int l, int& dy, int& s) {
      if (!ptr[l] || !same_strides(r, l)) return false;
      const index_t row = st[r][1];
      if (row < 4 * K && row > -4 * K) return false;  // a shift along dim 0 must not pass for a row
      const index_t d = elem(ptr[l]) - elem(ptr[r]);
      const index_t m = (elem(ptr[r]) + pl.head) % K;  // r's element at an aligned output, in its chunk
      for (int y = -1; y <= 1; ++y) {
        const index_t w = d - y * row + m - c;
        if (w >= -1 && w <= 1) {
          dy = y, s = static_cast<int>(w);
          return true;
        }
      }
      return false;
    };
    int best = 0, best_r = -1;
    index_t best_c = 0;
    for (int r = 0; r < L; ++r) {
      if (!ptr[r]) continue;
      for (index_t c : {index_t(0), index_t(K), index_t(-K), index_t(2 * K), index_t(-2 * K)}) {
        int count = 0, dy = 0, s = 0;
        for (int l = 0; l < L; ++l) count += place(r, c, l, dy, s) ? 1 : 0;
        if (count > best) best = count, best_r = r, best_c = c;
      }
    }
    if (best < 2) return pl;
    pl.valid = true;
    pl.members = best;
    const index_t m = (elem(ptr[best_r]) + pl.head) % K;
    pl.anchor = reinterpret_cast<std::uintptr_t>(ptr[best_r]) +
                static_cast<std::uintptr_t>((best_c - m) * static_cast<index_t>(sizeof(T)));
    for (int k = 0; k < N; ++k) pl.st[k] = st[best_r][k];
    pl.lo = 1, pl.hi = -1;
    for (int l = 0; l < L; ++l) {
      int dy = 0, s = 0;
      if (!place(best_r, best_c, l, dy, s)) continue;
      pl.member[l] = 1;
      pl.dy[l] = static_cast<std::int8_t>(dy);
      pl.s[l] = static_cast<std::int8_t>(s);
      if (s < 0) pl.left_dy = static_cast<std::int8_t>(pl.left_dy | 1 << (dy + 1));
      if (s > 0) pl.right_dy = static_cast<std::int8_t>(pl.right_dy | 1 << (dy + 1));
      if (dy < pl.lo) pl.lo = static_cast<std::int8_t>(dy);
      if (dy > pl.hi) pl.hi = static_cast<std::int8_t>(dy);
    }
  }
  return pl;
}

}  // namespace tessera::detail
