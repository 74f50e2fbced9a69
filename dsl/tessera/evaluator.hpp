// SPDX-License-Identifier: Apache-2.0
// Tessera: per-shard evaluators. An evaluator mirrors an expression tree with everything a device
// needs and nothing else: raw pointers of one shard, strides (0 on broadcast dimensions), scalar
// values. It is trivially copyable so that it can be passed by value as a kernel parameter, and
// offers three access paths: linear (contiguous operands), vectorized linear (K elements from
// 16-byte aligned loads) and cartesian (an N-d index and strides).
#pragma once
#include <tessera/load.hpp>
#include <tessera/expr.hpp>

#include <cstddef>
#include <type_traits>
#include <utility>

namespace tessera::detail {

// A trivially copyable tuple (std::tuple is not guaranteed to be), built from indexed bases.
template <std::size_t I, class T>
struct tuple_leaf {
  T value;
};
template <class Seq, class... T>
struct tuple_impl;
template <std::size_t... I, class... T>
struct tuple_impl<std::index_sequence<I...>, T...> : tuple_leaf<I, T>... {};
template <class... T>
using ev_tuple = tuple_impl<std::index_sequence_for<T...>, T...>;
template <std::size_t I, class T>
TS_HD const T& ev_get(const tuple_leaf<I, T>& l) {
  return l.value;
}
template <std::size_t I, class T>
TS_HD T& ev_get(tuple_leaf<I, T>& l) {
  return l.value;
}

// K elements loaded or stored with one (or, past 16 bytes, several) vector instructions.
template <class T, int K>
struct alignas(K * sizeof(T) >= 16 ? 16 : K * sizeof(T)) vec_t {
  T v[K];
};

// Vectors along dim 0 on a run of a leaf (the N-d vector paths of reductions along dims, which
// allow leaves broadcast along dim 0): vector q holds the K elements at p + q * step, or, for a
// leaf broadcast along dim 0, the element there repeated. The planner allows it only where every
// such vector is 16-byte aligned (ShardPlan::dim0_vectors).
template <class T>
struct LeafRun;

template <class T, int N>
struct LeafEval;
template <class F, class... E>
struct NodeEval;
// Array leaves of an evaluator (its operands read from memory), numbered depth first from 0: the
// generated stencil kernels (backend/rtc/stencil.hpp) number operands that way.
template <class E>
struct leaf_count : std::integral_constant<int, 0> {};
template <class T, int N>
struct leaf_count<LeafEval<T, N>> : std::integral_constant<int, 1> {};
template <class F, class... E>
struct leaf_count<NodeEval<F, E...>> : std::integral_constant<int, (0 + ... + leaf_count<E>::value)> {};

// A leaf of element type T yields compute_t<T>: T itself, or float for half and bfloat16, which are
// converted as they are loaded (storage computing in float).
template <class T, int N>
struct LeafEval {
  using value_type = compute_t<T>;
  const T* p;
  index_t st[N > 0 ? N : 1];

  template <class I>
  TS_HD value_type linear(I i) const {
    return static_cast<value_type>(p[i]);
  }
  template <class I>
  TS_HD value_type at(const I* idx) const {
    I off = 0;
    for (int k = 0; k < N; ++k) off += idx[k] * static_cast<I>(st[k]);
#if defined(__CUDA_ARCH__) && !defined(TESSERA_NO_LDG)
    // Through the read-only data cache with an L2 prefetch hint (load.hpp): strided reads that
    // overlap (a stencil's shifted views) hit in it more often: 2-D Jacobi 16384^2 on an H200,
    // 0.666x -> 0.722x memcpy with __ldg, 0.78x with the hint.
    if constexpr (std::is_arithmetic_v<T> && !std::is_same_v<T, bool>) return load_read_only(p + off);
    if constexpr (is_narrow_v<T>) return T::from_bits(__ldg(reinterpret_cast<const unsigned short*>(p + off)));
#endif
    return static_cast<value_type>(p[off]);
  }
  template <int K, class I>
  TS_HD void vec(I chunk, value_type (&out)[K]) const {
    const vec_t<T, K> v = reinterpret_cast<const vec_t<T, K>*>(p)[chunk];
#pragma unroll
    for (int j = 0; j < K; ++j) out[j] = static_cast<value_type>(v.v[j]);
  }
  // Whether row_vec may read this leaf: contiguous or broadcast along dim 0.
  bool dim0_unit() const { return st[0] == 0 || st[0] == 1; }
  // K = 16 / sizeof(T) elements along dim 0 from idx (the row-vector path of stencils,
  // backend/cuda/executor.cuh): a shifted view is rarely 16-byte aligned, so the vector is taken
  // from the one or two aligned 16-byte chunks that hold it. Both chunks hold an element of the
  // view, so no byte outside the allocation is read; the neighbouring threads read the same
  // chunks, which come from L1.
  template <int K, class I>
  TS_HD void row_vec(const I* idx, value_type (&out)[K]) const {
    I off = 0;
    for (int k = 0; k < N; ++k) off += idx[k] * static_cast<I>(st[k]);
#if defined(__CUDA_ARCH__)
    static_assert(K * sizeof(T) == 16, "row_vec: one 16-byte chunk holds K elements");
    if (st[0] == 0) {
      const value_type v = at(idx);
#pragma unroll
      for (int j = 0; j < K; ++j) out[j] = v;
      return;
    }
    const T* a = p + off;
    const int m = static_cast<int>((reinterpret_cast<std::uintptr_t>(a) / sizeof(T)) % K);
    const T* base = a - m;
    vec_t<T, K> w[2];
    const uint4 c0 = load16_read_only(base);
    __builtin_memcpy(&w[0], &c0, 16);
    if (m != 0) {
      const uint4 c1 = load16_read_only(base + K);
      __builtin_memcpy(&w[1], &c1, 16);
    }
    shifted<1>(m, w, out);
#else
    for (int j = 0; j < K; ++j) out[j] = static_cast<value_type>(p[off + j]);
#endif
  }
  // out[j] = element m + j of the chunk pair, for the run-time m taken as a constant (a register
  // array indexed at run time would go to local memory).
  template <int M, int K>
  TS_HD static void shifted(int m, const vec_t<T, K> (&w)[2], value_type (&out)[K]) {
    if constexpr (M == K) {
#pragma unroll
      for (int j = 0; j < K; ++j) out[j] = static_cast<value_type>(w[0].v[j]);
    } else {
      if (m == M) {
#pragma unroll
        for (int j = 0; j < K; ++j) out[j] = static_cast<value_type>(j + M < K ? w[0].v[j + M] : w[1].v[j + M - K]);
      } else {
        shifted<M + 1>(m, w, out);
      }
    }
  }
  // A cursor on a run of vectors starting at idx (idx[0] a multiple of K), vector q being K
  // elements along dim 0 at q * step(d) elements from the start: see LeafRun.
  template <class I>
  TS_HD LeafRun<T> run(const I* idx, int d, index_t mult) const {
    index_t off = 0;  // 64-bit: the indices fit 32 bits, a broadcast operand's offsets may not
    for (int k = 0; k < N; ++k) off += static_cast<index_t>(idx[k]) * st[k];
    return {p + off, st[d] * mult, st[0] == 0};
  }
};

template <class T>
struct LeafRun {
  using value_type = compute_t<T>;
  const T* p;
  index_t step;
  bool bcast;
  template <int K, class I>
  TS_HD void vec(I q, value_type (&out)[K]) const {
    const T* a = p + static_cast<index_t>(q) * step;
    if (bcast) {
      const value_type v = static_cast<value_type>(*a);
#pragma unroll
      for (int j = 0; j < K; ++j) out[j] = v;
    } else {
      const vec_t<T, K> v = *reinterpret_cast<const vec_t<T, K>*>(a);
#pragma unroll
      for (int j = 0; j < K; ++j) out[j] = static_cast<value_type>(v.v[j]);
    }
  }
};

template <class T>
struct ScalarEval {
  using value_type = T;
  T value;
  template <class I>
  TS_HD T linear(I) const {
    return value;
  }
  template <class I>
  TS_HD T at(const I*) const {
    return value;
  }
  template <int K, class I>
  TS_HD void vec(I, T (&out)[K]) const {
#pragma unroll
    for (int j = 0; j < K; ++j) out[j] = value;
  }
  template <class I>
  TS_HD ScalarEval run(const I*, int, index_t) const {
    return *this;
  }
  bool dim0_unit() const { return true; }
  template <int K, class I>
  TS_HD void row_vec(const I*, T (&out)[K]) const {
#pragma unroll
    for (int j = 0; j < K; ++j) out[j] = value;
  }
};

template <int N>
struct IndexEval {
  using value_type = index_t;
  index_t base;
  index_t st[N > 0 ? N : 1];
  template <class I>
  TS_HD index_t linear(I i) const {
    return base + static_cast<index_t>(i);
  }
  template <class I>
  TS_HD index_t at(const I* idx) const {
    index_t off = base;
    for (int k = 0; k < N; ++k) off += static_cast<index_t>(idx[k]) * st[k];
    return off;
  }
  template <int K, class I>
  TS_HD void vec(I chunk, index_t (&out)[K]) const {
#pragma unroll
    for (int j = 0; j < K; ++j) out[j] = base + static_cast<index_t>(chunk) * K + j;
  }
  struct Run {
    using value_type = index_t;
    index_t first, step, st0;
    template <int K, class I>
    TS_HD void vec(I q, index_t (&out)[K]) const {
#pragma unroll
      for (int j = 0; j < K; ++j) out[j] = first + static_cast<index_t>(q) * step + j * st0;
    }
  };
  template <class I>
  TS_HD Run run(const I* idx, int d, index_t mult) const {
    return {at(idx), st[d] * mult, st[0]};
  }
  bool dim0_unit() const { return true; }
  template <int K, class I>
  TS_HD void row_vec(const I* idx, index_t (&out)[K]) const {
    const index_t first = at(idx);
#pragma unroll
    for (int j = 0; j < K; ++j) out[j] = first + j * st[0];
  }
};

template <class F, class... E>
struct NodeEval {
  using value_type = std::invoke_result_t<const F&, typename E::value_type...>;
  F f;
  ev_tuple<E...> a;

  template <class I>
  TS_HD value_type linear(I i) const {
    return linear_impl(i, std::index_sequence_for<E...>{});
  }
  template <class I>
  TS_HD value_type at(const I* idx) const {
    return at_impl(idx, std::index_sequence_for<E...>{});
  }
  template <int K, class I>
  TS_HD void vec(I chunk, value_type (&out)[K]) const {
    vec_impl<K>(chunk, out, std::index_sequence_for<E...>{});
  }
  template <class I>
  TS_HD auto run(const I* idx, int d, index_t mult) const {
    return run_impl(idx, d, mult, std::index_sequence_for<E...>{});
  }
  bool dim0_unit() const { return dim0_unit_impl(std::index_sequence_for<E...>{}); }
  template <int K, class I>
  TS_HD void row_vec(const I* idx, value_type (&out)[K]) const {
    row_vec_impl<K>(idx, out, std::index_sequence_for<E...>{});
  }

 private:
  template <class I, std::size_t... S>
  TS_HD value_type linear_impl(I i, std::index_sequence<S...>) const {
    return f(ev_get<S>(a).linear(i)...);
  }
  template <class I, std::size_t... S>
  TS_HD value_type at_impl(const I* idx, std::index_sequence<S...>) const {
    return f(ev_get<S>(a).at(idx)...);
  }
  template <class V, int K>
  struct lane {
    V v[K];
  };
  template <int K, class I, std::size_t... S>
  TS_HD void vec_impl(I chunk, value_type (&out)[K], std::index_sequence<S...>) const {
    ev_tuple<lane<typename E::value_type, K>...> in;
    (ev_get<S>(a).template vec<K>(chunk, ev_get<S>(in).v), ...);
#pragma unroll
    for (int j = 0; j < K; ++j) out[j] = f(ev_get<S>(in).v[j]...);
  }
  template <std::size_t... S>
  bool dim0_unit_impl(std::index_sequence<S...>) const {
    return (true && ... && ev_get<S>(a).dim0_unit());
  }
  template <int K, class I, std::size_t... S>
  TS_HD void row_vec_impl(const I* idx, value_type (&out)[K], std::index_sequence<S...>) const {
    ev_tuple<lane<typename E::value_type, K>...> in;
    (ev_get<S>(a).template row_vec<K>(idx, ev_get<S>(in).v), ...);
#pragma unroll
    for (int j = 0; j < K; ++j) out[j] = f(ev_get<S>(in).v[j]...);
  }
  template <class I, std::size_t... S>
  TS_HD auto run_impl(const I* idx, int d, index_t mult, std::index_sequence<S...>) const {
    using R = NodeEval<F, decltype(ev_get<S>(a).run(idx, d, mult))...>;
    return R{f, {{ev_get<S>(a).run(idx, d, mult)}...}};
  }
};

// The destination of one shard.
template <class T, int N>
struct OutEval {
  using value_type = T;
  T* p;
  index_t st[N > 0 ? N : 1];
  template <class I, class V>
  TS_HD void store_linear(I i, V v) const {
    p[i] = static_cast<T>(v);
  }
  template <class I, class V>
  TS_HD void store_at(const I* idx, V v) const {
    I off = 0;
    for (int k = 0; k < N; ++k) off += idx[k] * static_cast<I>(st[k]);
    p[off] = static_cast<T>(v);
  }
  // Elements before the first 16-byte aligned one of the row at idx (idx[0] = 0), for row vectors.
  template <int K, class I>
  TS_HD int row_head(const I* idx) const {
    I off = 0;
    for (int k = 1; k < N; ++k) off += idx[k] * static_cast<I>(st[k]);
    const int m = static_cast<int>((reinterpret_cast<std::uintptr_t>(p + off) / sizeof(T)) % K);
    return (K - m) % K;
  }
  template <int K, class I, class V>
  TS_HD void store_row_vec(const I* idx, const V (&v)[K]) const {
    I off = 0;
    for (int k = 0; k < N; ++k) off += idx[k] * static_cast<I>(st[k]);
    vec_t<T, K> w;
#pragma unroll
    for (int j = 0; j < K; ++j) w.v[j] = static_cast<T>(v[j]);
    *reinterpret_cast<vec_t<T, K>*>(p + off) = w;
  }
  template <int K, class I, class V>
  TS_HD void store_vec(I chunk, const V (&v)[K]) const {
    vec_t<T, K> w;
#pragma unroll
    for (int j = 0; j < K; ++j) w.v[j] = static_cast<T>(v[j]);
    reinterpret_cast<vec_t<T, K>*>(p)[chunk] = w;
  }
};

// Evaluator type of a node for an output of rank N.
template <class Node, int N>
struct eval_of;
template <class T, int M, int N>
struct eval_of<ArrayLeaf<T, M>, N> {
  using type = LeafEval<T, N>;
};
template <class T, int N>
struct eval_of<Scalar<T>, N> {
  using type = ScalarEval<T>;
};
template <int M, int N>
struct eval_of<IndexLeaf<M>, N> {
  using type = IndexEval<N>;
};
template <class F, class... A, int N>
struct eval_of<Broadcasted<F, A...>, N> {
  using type = NodeEval<F, typename eval_of<A, N>::type...>;
};
template <class Node, int N>
using eval_t = typename eval_of<Node, N>::type;

// Smallest element among the leaves: decides how many elements one thread loads at once.
template <class E>
struct min_leaf_size {
  static constexpr std::size_t value = 16;
};
template <class T, int N>
struct min_leaf_size<LeafEval<T, N>> {
  static constexpr std::size_t value = sizeof(T);
};
template <class F, class... E>
struct min_leaf_size<NodeEval<F, E...>> {
  static constexpr std::size_t value = [] {
    std::size_t m = 16;
    ((m = min_leaf_size<E>::value < m ? min_leaf_size<E>::value : m), ...);
    return m;
  }();
};

// Largest element among the leaves (1 without leaves): with min_leaf_size, whether every leaf
// has one element size, which the row-vector path needs.
template <class E>
struct max_leaf_size {
  static constexpr std::size_t value = 1;
};
template <class T, int N>
struct max_leaf_size<LeafEval<T, N>> {
  static constexpr std::size_t value = sizeof(T);
};
template <class F, class... E>
struct max_leaf_size<NodeEval<F, E...>> {
  static constexpr std::size_t value = [] {
    std::size_t m = 1;
    ((m = max_leaf_size<E>::value > m ? max_leaf_size<E>::value : m), ...);
    return m;
  }();
};

// Elements per vector load: 16 bytes of the narrowest operand (the evaluator's leaves and, for a
// store, the output element), at most 8 elements.
template <class E, std::size_t OutBytes = 16>
inline constexpr int vector_width = [] {
  const std::size_t m = min_leaf_size<E>::value < OutBytes ? min_leaf_size<E>::value : OutBytes;
  const std::size_t k = 16 / m;
  return static_cast<int>(k > 8 ? 8 : k < 1 ? 1 : k);
}();

// How a shard's operands are laid out over its box: vector (contiguous, shaped like the box and
// 16-byte aligned), linear (contiguous, unaligned) or cartesian (anything else: N-d index).
enum class path : int { vector = 0, linear = 1, cartesian = 2 };

// The extents of a shard's box, as a kernel parameter.
template <int N>
struct Extents {
  index_t v[N > 0 ? N : 1];
  TS_HD index_t operator[](int k) const { return v[k]; }
  TS_HD index_t& operator[](int k) { return v[k]; }
};

// The column-major N-d index of element i of a box (the cartesian path's decode).
template <int N, class I>
TS_HD void box_index(I i, const Extents<N>& ext, I* idx) {
#pragma unroll
  for (int k = 0; k < N; ++k) {
    const I e = static_cast<I>(ext[k]);
    if (k + 1 < N) {
      idx[k] = i % e;
      i /= e;
    } else {
      idx[k] = i;
    }
  }
}

// What one shard of an assignment hands to its executor (a kernel parameter): the destination,
// the expression's evaluator, the box, the path and whether 64-bit index math is needed.
template <class Out, class E, int N>
struct ShardTask {
  Out out;
  E e;
  Extents<N> ext;
  index_t n;
  path mode;
  bool wide;
  static constexpr int K = vector_width<E, sizeof(typename Out::value_type)>;
  static constexpr bool capturable = true;  // pure device work (capture.hpp)
  static constexpr bool parallel_launch = true;  // backend/execute.hpp
};

// for_each_shard's task: f(i, args...) for i < n, the args being a shard's descriptions
// (tessera::shard) and values.
template <class F, class... A>
struct ForEachTask {
  static constexpr bool capturable = true;
  F f;
  ev_tuple<A...> args;
  index_t n;
  template <class I>
  TS_HD void operator()(I i) const {
    call(i, std::index_sequence_for<A...>{});
  }

 private:
  template <class I, std::size_t... S>
  TS_HD void call(I i, std::index_sequence<S...>) const {
    f(static_cast<index_t>(i), ev_get<S>(args)...);
  }
};

// Evaluators are trivially copyable, except that a node's functor may be an nvcc extended lambda.
template <class T>
struct device_copyable : std::is_trivially_copyable<T> {};
template <class F, class... E>
struct device_copyable<NodeEval<F, E...>>
    : std::bool_constant<device_copyable_functor_v<F> && (device_copyable<E>::value && ...)> {};
template <class F, class... A>
struct device_copyable<ForEachTask<F, A...>>
    : std::bool_constant<device_copyable_functor_v<F> && (std::is_trivially_copyable_v<A> && ...)> {};
template <class Out, class E, int N>
struct device_copyable<ShardTask<Out, E, N>>
    : std::bool_constant<std::is_trivially_copyable_v<Out> && device_copyable<E>::value> {};

}  // namespace tessera::detail
