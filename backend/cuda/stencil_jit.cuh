// SPDX-License-Identifier: Apache-2.0
// Tessera: the run-time compiled stencil path of the CUDA executor (backend/rtc/stencil.hpp). An
// expression whose evaluator can be written out as C++ (float or double operands of the output's
// type, float, double or integer scalars, + - * / and negation) and whose shard has a row-tile
// plan (two or more operands that are views of one array within a row and an element of each
// other) runs as a kernel generated for that plan: the source names each member's register by
// constant indices. TESSERA_JIT_STENCIL=0 turns the path off (the row kernels then run).
// Included by executor.cuh only.
#pragma once
#include <backend/rtc/stencil.hpp>
#include <tessera/evaluator.hpp>
#include <tessera/functional.hpp>
#include <tessera/row_tiles.hpp>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>
#include <type_traits>
#include <vector>

namespace tessera::detail::cuda {

// How an evaluator is written in the generated source: `ok` when it can be; text() appends it,
// numbering operands (L<i>) and scalars (S<i>) depth first.
template <class E>
struct jit_spell {
  static constexpr bool ok = false;
};
template <class T>
inline constexpr bool jit_operand_type = std::is_same_v<T, float> || std::is_same_v<T, double>;
template <class T>
inline constexpr const char* jit_scalar_type = std::is_same_v<T, float>    ? "float"
                                               : std::is_same_v<T, double> ? "double"
                                               : std::is_same_v<T, int>    ? "int"
                                               : (std::is_integral_v<T> && std::is_signed_v<T> && sizeof(T) == 8)
                                                   ? "long long"
                                                   : nullptr;
template <class T, int N>
struct jit_spell<LeafEval<T, N>> {
  static constexpr bool ok = jit_operand_type<T>;
  static void text(std::string& s, int& leaf, std::vector<std::string>&) { s += "L" + std::to_string(leaf++); }
};
template <class T>
struct jit_spell<ScalarEval<T>> {
  static constexpr bool ok = jit_scalar_type<T> != nullptr;
  static void text(std::string& s, int&, std::vector<std::string>& scalars) {
    s += "S" + std::to_string(scalars.size());
    scalars.emplace_back(jit_scalar_type<T>);
  }
};
template <class F>
inline constexpr const char* jit_binary = std::is_same_v<F, fn::plus>         ? " + "
                                          : std::is_same_v<F, fn::minus>      ? " - "
                                          : std::is_same_v<F, fn::multiplies> ? " * "
                                                                              : nullptr;
template <class F, class A, class B>
struct jit_spell<NodeEval<F, A, B>> {
  // Division only between floating-point operands: two integers divide as doubles in fn::divides.
  static constexpr bool is_div =
      std::is_same_v<F, fn::divides> &&
      (std::is_floating_point_v<typename A::value_type> || std::is_floating_point_v<typename B::value_type>);
  static constexpr bool ok = (jit_binary<F> != nullptr || is_div) && jit_spell<A>::ok && jit_spell<B>::ok;
  static void text(std::string& s, int& leaf, std::vector<std::string>& scalars) {
    s += "(";
    jit_spell<A>::text(s, leaf, scalars);
    s += is_div ? " / " : jit_binary<F>;
    jit_spell<B>::text(s, leaf, scalars);
    s += ")";
  }
};
template <class A>
struct jit_spell<NodeEval<fn::negate, A>> {
  static constexpr bool ok = jit_spell<A>::ok;
  static void text(std::string& s, int& leaf, std::vector<std::string>& scalars) {
    s += "(-";
    jit_spell<A>::text(s, leaf, scalars);
    s += ")";
  }
};

// Whether an expression may take the path: every operand of the output's type (float or double),
// so that the generated source reads each as T and computes in the same types as the functors.
template <class Out, class E>
inline constexpr bool jit_stencil_candidate =
    jit_operand_type<typename Out::value_type> && jit_spell<E>::ok && leaf_count<E>::value >= 2 &&
    min_leaf_size<E>::value == sizeof(typename Out::value_type) &&
    max_leaf_size<E>::value == sizeof(typename Out::value_type);

// Rows along dim 1 per thread (TESSERA_JIT_STENCIL_ROWS, 1 to 16, default 4: the hand-written
// Jacobi reached 0.925x memcpy with 2, 0.974x with 4 to 16; a 3-D diffusion in double with 4 rows
// keeps 128 registers).
inline int jit_stencil_rows() {
  static const int rows = [] {
    const char* v = std::getenv("TESSERA_JIT_STENCIL_ROWS");
    const int r = v ? std::atoi(v) : 4;
    return r >= 1 && r <= 16 ? r : 4;
  }();
  return rows;
}

inline bool jit_stencil_enabled() {
  static const bool on = [] {
    const char* v = std::getenv("TESSERA_JIT_STENCIL");
    return !(v && std::strcmp(v, "0") == 0);
  }();
  return on;
}

// The generated kernel's description for a shard with plan `pl`, and its parameter words.
template <class T, int N, class E>
rtc::stencil_desc jit_stencil_desc(const OutEval<T, N>& out, const E& e, const tile_plan<leaf_count<E>::value, N>& pl,
                                   std::vector<std::uint64_t>& words) {
  constexpr int K = static_cast<int>(16 / sizeof(T)), L = leaf_count<E>::value;
  rtc::stencil_desc d;
  d.type = std::is_same_v<T, float> ? "float" : "double";
  d.k = K;
  d.n = N;
  d.head = pl.head;
  d.rows = jit_stencil_rows();
  int leaf = 0;
  jit_spell<E>::text(d.expr, leaf, d.scalar_types);
  d.operands.resize(L);
  d.lo = pl.lo, d.hi = pl.hi, d.left_dy = pl.left_dy, d.right_dy = pl.right_dy;
  d.group = pl.valid;
  auto word = [](index_t v) { return static_cast<std::uint64_t>(v); };
  words.clear();
  words.push_back(reinterpret_cast<std::uintptr_t>(out.p));
  for (int k = 0; k < N; ++k) words.push_back(word(out.st[k]));
  words.resize(words.size() + N + 1);  // extents and count: filled by the caller
  words.push_back(pl.anchor);
  for (int k = 0; k < N; ++k) words.push_back(word(pl.st[k]));
  std::vector<std::uint64_t> scalar_words;  // after every operand's words, in the scalars' order
  for_each_operand<0>(
      e,
      [&](auto l, const auto& lf) {
        constexpr int i = decltype(l)::value;
        auto& o = d.operands[i];
        if (pl.valid && pl.member[i]) {
          o.member = 1, o.dy = pl.dy[i], o.s = pl.s[i];
        } else if (lf.st[0] == 0) {
          o.mode = 2;
        } else {
          bool rows_aligned = lf.st[0] == 1 && reinterpret_cast<std::uintptr_t>(lf.p) % sizeof(T) == 0;
          for (int k = 1; k < N; ++k) rows_aligned = rows_aligned && lf.st[k] % K == 0;
          if (rows_aligned) {
            o.m = static_cast<int>((reinterpret_cast<std::uintptr_t>(lf.p) / sizeof(T) + pl.head) % K);
            o.mode = o.m == 0 ? 0 : 1;
          }
        }
        words.push_back(reinterpret_cast<std::uintptr_t>(lf.p));
        for (int k = 0; k < N; ++k) words.push_back(word(lf.st[k]));
      },
      [&](const auto& sc) {
        std::uint64_t bits = 0;
        std::memcpy(&bits, &sc.value, sizeof(sc.value));
        if constexpr (std::is_integral_v<std::decay_t<decltype(sc.value)>> && sizeof(sc.value) < 8)
          bits = static_cast<std::uint64_t>(static_cast<std::int64_t>(sc.value));
        scalar_words.push_back(bits);
      });
  words.insert(words.end(), scalar_words.begin(), scalar_words.end());
  (void)L;
  return d;
}

// Runs the shard through a generated kernel when it has a row-tile plan; false otherwise.
template <class Out, class E, int N>
bool run_jit_stencil(const ShardTask<Out, E, N>& t, int device, int shard) {
  using T = typename Out::value_type;
  constexpr int K = static_cast<int>(16 / sizeof(T));
  const auto pl = make_tile_plan<K>(t.out, t.e);
  if (!pl.valid) return false;
  std::vector<std::uint64_t> words;
  rtc::stencil_desc d = jit_stencil_desc(t.out, t.e, pl, words);
  for (int k = 0; k < N; ++k) words[static_cast<std::size_t>(1 + N + k)] = static_cast<std::uint64_t>(t.ext[k]);
  words[static_cast<std::size_t>(1 + 2 * N)] = static_cast<std::uint64_t>(t.n);
  const index_t tiles = (t.ext[1] + d.rows - 1) / d.rows * (t.n / (t.ext[0] * t.ext[1]));
  const index_t x = (t.ext[0] - pl.head + index_t{128} * K - 1) / (index_t{128} * K);
  rtc::launch_stencil(d, words.data(), device, shard, static_cast<unsigned>(x),
                      static_cast<unsigned>(tiles < 65535 ? tiles : 65535));
  return true;
}

}  // namespace tessera::detail::cuda
