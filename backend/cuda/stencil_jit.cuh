// SPDX-License-Identifier: Apache-2.0
// Tessera: the run-time compiled stencil path of the CUDA executor (backend/rtc/stencil.hpp). An
// expression whose evaluator can be written out as C++ (float or double operands of the output's
// type, float, double or integer scalars, + - * / and negation) and whose shard has a row-tile
// plan (two or more operands that are views of one array within a row and an element of each
// other) runs as a kernel generated for that plan: the source names each member's register by
// constant indices. On by default (Jacobi 16384^2 float on an H200: 0.960x memcpy against 0.835x
// for the row kernels); TESSERA_JIT_STENCIL=0 turns it off (the row kernels run then).
// Only the flattening of a shard is compiled per expression here; the plan, the source, the cache
// and the launch are compiled once (backend/rtc/stencil.cpp, the source stencil_source.cpp). Included
// by executor.cuh only.
#pragma once
#include <backend/rtc/stencil.hpp>
#include <tessera/evaluator.hpp>
#include <tessera/functional.hpp>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>
#include <type_traits>
#include <utility>
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
  static constexpr bool is_div = std::is_same_v<F, fn::divides> && (std::is_floating_point_v<typename A::value_type> ||
                                                                    std::is_floating_point_v<typename B::value_type>);
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

// On unless TESSERA_JIT_STENCIL=0.
inline bool jit_stencil_enabled() {
  static const bool on = [] {
    const char* v = std::getenv("TESSERA_JIT_STENCIL");
    return !(v && std::strcmp(v, "0") == 0);
  }();
  return on;
}

// Operands (array leaves) and scalars of an evaluator, depth first: f(leaf) and g(scalar).
template <class T, int N, class F, class G>
void for_each_operand(const LeafEval<T, N>& e, F& f, G&) {
  f(e);
}
template <class T, class F, class G>
void for_each_operand(const ScalarEval<T>& e, F&, G& g) {
  g(e);
}
template <class Fn, class... E, class F, class G>
void for_each_operand(const NodeEval<Fn, E...>& e, F& f, G& g);
template <class Fn, class... E, class F, class G, std::size_t... S>
void for_each_operand_of(const NodeEval<Fn, E...>& e, F& f, G& g, std::index_sequence<S...>) {
  (for_each_operand(ev_get<S>(e.a), f, g), ...);
}
template <class Fn, class... E, class F, class G>
void for_each_operand(const NodeEval<Fn, E...>& e, F& f, G& g) {
  for_each_operand_of(e, f, g, std::index_sequence_for<E...>{});
}

// The expression written out (L<i>, S<i>) and its scalars' C types, once per expression type.
template <class E>
const std::pair<std::string, std::vector<std::string>>& jit_text() {
  static const std::pair<std::string, std::vector<std::string>> text = [] {
    std::pair<std::string, std::vector<std::string>> t;
    int leaf = 0;
    jit_spell<E>::text(t.first, leaf, t.second);
    return t;
  }();
  return text;
}

// Scalars of an evaluator (the arrays below need one element at least).
template <class E>
struct jit_scalar_count : std::integral_constant<int, 0> {};
template <class T>
struct jit_scalar_count<ScalarEval<T>> : std::integral_constant<int, 1> {};
template <class F, class... E>
struct jit_scalar_count<NodeEval<F, E...>> : std::integral_constant<int, (0 + ... + jit_scalar_count<E>::value)> {};
template <class E>
inline constexpr int jit_scalars = jit_scalar_count<E>::value > 0 ? jit_scalar_count<E>::value : 1;

// A shard of a candidate expression, flattened for rtc::run_stencil (which plans, generates,
// compiles and launches, compiled once in tessera_runtime), into the caller's arrays.
template <class Out, class E, int N>
rtc::stencil_call jit_stencil_call(const ShardTask<Out, E, N>& t, std::int64_t (&ext)[N], std::int64_t (&out_st)[N],
                                   std::uintptr_t (&op)[leaf_count<E>::value],
                                   std::int64_t (&op_st)[leaf_count<E>::value * N],
                                   std::uint64_t (&bits)[jit_scalars<E>]) {
  using T = typename Out::value_type;
  rtc::stencil_call c;
  c.type = std::is_same_v<T, float> ? "float" : "double";
  c.elem = static_cast<int>(sizeof(T));
  c.n = N;
  for (int k = 0; k < N; ++k) ext[k] = t.ext[k], out_st[k] = t.out.st[k];
  c.ext = ext;
  c.count = t.n;
  c.out = reinterpret_cast<std::uintptr_t>(t.out.p);
  c.out_st = out_st;
  c.operands = leaf_count<E>::value;
  c.op = op;
  c.op_st = op_st;
  const auto& text = jit_text<E>();
  c.expr = &text.first;
  c.scalar_types = &text.second;
  c.scalar_bits = bits;
  int i = 0, j = 0;
  auto leaf = [&](const auto& lf) {
    op[i] = reinterpret_cast<std::uintptr_t>(lf.p);
    for (int k = 0; k < N; ++k) op_st[i * N + k] = lf.st[k];
    ++i;
  };
  auto scalar = [&](const auto& sc) {
    using S = std::decay_t<decltype(sc.value)>;
    std::uint64_t b = 0;
    if constexpr (std::is_integral_v<S>)
      b = static_cast<std::uint64_t>(static_cast<std::int64_t>(sc.value));
    else
      std::memcpy(&b, &sc.value, sizeof(S));
    bits[j++] = b;
  };
  for_each_operand(t.e, leaf, scalar);
  return c;
}

// Runs the shard through its generated kernel; false when it has no plan (the row kernels then run).
template <class Out, class E, int N>
bool run_jit_stencil(const ShardTask<Out, E, N>& t, int device, int shard) {
  constexpr int L = leaf_count<E>::value;
  std::int64_t ext[N], out_st[N], op_st[L * N];
  std::uintptr_t op[L];
  std::uint64_t bits[jit_scalars<E>];
  return rtc::run_stencil(jit_stencil_call(t, ext, out_st, op, op_st, bits), device, shard);
}

}  // namespace tessera::detail::cuda
