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
