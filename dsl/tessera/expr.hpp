// SPDX-License-Identifier: Apache-2.0
// Tessera: the lazy expression tree. One generic n-ary node, Broadcasted<F, Args...> (Julia's
// Base.Broadcast.Broadcasted, xtensor's xfunction), over three kinds of leaves: array leaves
// (shared ownership of a layout, never a reference to a host object), scalars, and the index
// leaf used by iota and the random generators. Nodes describe; evaluators (evaluator.hpp) execute.
#pragma once
#include <tessera/layout.hpp>

#include <memory>
#include <tuple>
#include <type_traits>
#include <utility>

namespace tessera {

template <class T, int N>
class Array;
template <class T, int N>
class View;

namespace detail {

// -- leaves -----------------------------------------------------------------------------------
template <class T, int N>
struct ArrayLeaf {
  using value_type = compute_t<T>;  // half and bfloat16 load as float (storage_t keeps T)
  static constexpr int rank = N;
  std::shared_ptr<const Layout<T, N>> layout;
  Shape<N> shape() const { return layout->shape; }
};

template <class T>
struct Scalar {
  using value_type = T;
  static constexpr int rank = 0;
  T value;
  Shape<0> shape() const { return {}; }
};

// The global column-major linear index of each element of an array of shape `dims`.
template <int N>
struct IndexLeaf {
  using value_type = index_t;
  static constexpr int rank = N;
  Shape<N> dims;
  Shape<N> shape() const { return dims; }
};

template <class... A>
constexpr int max_rank() {
  int r = 0;
  ((r = A::rank > r ? A::rank : r), ...);
  return r;
}

// -- the node ---------------------------------------------------------------------------------
template <class F, class... Args>
struct Broadcasted {
  static_assert(device_copyable_functor_v<F>,
                "TESSERA_FUNCTOR_NOT_TRIVIALLY_COPYABLE: functors are copied to every device; they must "
                "not own resources or capture by reference");
  using value_type = std::invoke_result_t<const F&, typename Args::value_type...>;
  static constexpr int rank = max_rank<Args...>();
  F f;
  std::tuple<Args...> args;

  // Julia's combine_axes over the children, checked once per materialization.
  Shape<rank> shape() const {
    return std::apply(
        [](const auto&... a) {
          Shape<rank> s;
          s.fill(1);
          int r = 0;
          ((s = broadcast_into<rank, std::decay_t<decltype(a)>::rank>(s, r, a.shape()),
            r = r > std::decay_t<decltype(a)>::rank ? r : std::decay_t<decltype(a)>::rank),
           ...);
          return s;
        },
        args);
  }
};

// -- traits and concepts ----------------------------------------------------------------------
template <class X>
struct is_node : std::false_type {};
template <class T, int N>
struct is_node<ArrayLeaf<T, N>> : std::true_type {};
template <class T>
struct is_node<Scalar<T>> : std::true_type {};
template <int N>
struct is_node<IndexLeaf<N>> : std::true_type {};
template <class F, class... A>
struct is_node<Broadcasted<F, A...>> : std::true_type {};

template <class X>
struct is_array_like : std::false_type {};
template <class T, int N>
struct is_array_like<Array<T, N>> : std::true_type {};
template <class T, int N>
struct is_array_like<View<T, N>> : std::true_type {};

// Scalars are normalized to an element type before they enter a tree (complex ones are already;
// half and bfloat16 enter as the float they compute in).
template <class S>
using scalar_norm_t = std::conditional_t<
    is_complex_v<S>, S, std::conditional_t<is_narrow_v<S>, float, std::conditional_t<
    std::is_same_v<S, bool>, bool,
    std::conditional_t<std::is_floating_point_v<S>, std::conditional_t<std::is_same_v<S, float>, float, double>,
                       std::conditional_t<(sizeof(S) < 4 || (sizeof(S) == 4 && std::is_signed_v<S>)),
                                          std::int32_t, std::int64_t>>>>>;

// The type two operands promote to: C++'s rule for reals; with a complex operand, complex of the
// parts' promoted type (int32 + complex<float> is complex<float>, complex<float> + double is
// complex<double>, Julia's rule).
template <class A, class B, bool = is_complex_v<A> || is_complex_v<B>>
struct promote {
  using type = std::common_type_t<A, B>;
};
template <class A, class B>
struct promote<A, B, true> {
  using R = std::common_type_t<real_of_t<A>, real_of_t<B>>;
  using type = complex<std::conditional_t<std::is_floating_point_v<R>, R, double>>;
};
template <class A, class B>
using promote_t = typename promote<A, B>::type;

// NumPy 2 / JAX weak scalars: the array's type wins, except that a floating scalar makes an
// integer array double, and a bool array takes the scalar's (normalized) type.
// With complex: a real scalar stays real against a complex array (complex<float> * 2.0 multiplies
// by the float 2, as Julia does), a complex scalar takes the array's precision.
template <class V, class S>
using weak_real_t = std::conditional_t<
    std::is_floating_point_v<V>, V,
    std::conditional_t<std::is_same_v<V, bool>, S,
                       std::conditional_t<std::is_floating_point_v<S>, double,
                                          std::conditional_t<std::is_integral_v<V>, V, std::common_type_t<V, S>>>>>;
template <class V, class S>
using weak_t = std::conditional_t<
    is_complex_v<V>, std::conditional_t<is_complex_v<S>, V, real_of_t<V>>,
    std::conditional_t<is_complex_v<S>, complex<std::conditional_t<std::is_floating_point_v<V>, V, double>>,
                       weak_real_t<V, S>>>;

}  // namespace detail

// Anything that evaluates elementwise: arrays, views and lazy nodes.
template <class X>
concept expression = detail::is_node<std::remove_cvref_t<X>>::value ||
                     detail::is_array_like<std::remove_cvref_t<X>>::value;

// An expression or a plain arithmetic scalar.
template <class X>
concept operand = expression<X> || scalar_type<X>;

namespace detail {

template <class X>
auto to_node(X&& x) {
  using D = std::remove_cvref_t<X>;
  if constexpr (is_array_like<D>::value) {
    return x.leaf();
  } else if constexpr (is_node<D>::value) {
    return D(std::forward<X>(x));
  } else {
    static_assert(scalar_type<D>, "TESSERA_NOT_AN_OPERAND: expected an array, a view, an expression, an arithmetic "
                                  "scalar or a tessera::complex<float/double>");
    return Scalar<scalar_norm_t<D>>{static_cast<scalar_norm_t<D>>(x)};
  }
}

template <class X>
using node_t = decltype(to_node(std::declval<X>()));

template <class A, class B>
struct combine_strong {
  using type = promote_t<A, B>;
};
template <class A>
struct combine_strong<A, void> {
  using type = A;
};
template <class B>
struct combine_strong<void, B> {
  using type = B;
};
template <>
struct combine_strong<void, void> {
  using type = void;
};

// The type that strong (non-scalar) operands agree on; void when all operands are scalars.
template <class... X>
struct strong_type {
  using type = void;
};
template <class X, class... Rest>
struct strong_type<X, Rest...> {
  using rest = typename strong_type<Rest...>::type;
  using mine = std::conditional_t<expression<X>, typename node_t<X>::value_type, void>;
  using type = typename combine_strong<mine, rest>::type;
};

// Converts one operand to a node; a scalar becomes weak against `Strong`.
template <class Strong, class X>
auto to_weak_node(X&& x) {
  if constexpr (scalar_type<X> && is_narrow_v<Strong>) {
    // Filling a half or bfloat16 destination (c = 0.1): the scalar rounds once, from its own type.
    return Scalar<Strong>{static_cast<Strong>(x)};
  } else if constexpr (scalar_type<X> && !std::is_void_v<Strong>) {
    using S = scalar_norm_t<std::remove_cvref_t<X>>;
    using W = weak_t<Strong, S>;
    return Scalar<W>{static_cast<W>(x)};
  } else {
    return to_node(std::forward<X>(x));
  }
}

template <class F, class... X>
auto make_node(F f, X&&... xs) {
  using Strong = typename strong_type<std::remove_cvref_t<X>...>::type;
  return Broadcasted<F, decltype(to_weak_node<Strong>(std::forward<X>(xs)))...>{
      f, {to_weak_node<Strong>(std::forward<X>(xs))...}};
}

// -- the element type of a fresh array made from a node (eval, `Array c = expr`) -------------------
// Usually the node's value type. But half and bfloat16 leaves load as float and every library
// function computes on them in float, so the value type of `a + b` over half arrays is float;
// materialized, it is half again (Julia's and NumPy's float16 + float16), rounded once on store.
// Rule: a library functor (detail::fn) whose value is float gives the narrow type that its
// operands agree on. Each operand votes: its own storage type if narrow, nothing if it is a scalar
// (weak) or bool (NumPy: bool + float16 is float16), float otherwise; two different votes give float
// (half + bfloat16, half + float32, half + int32 are float). cast<T> gives T. A user functor
// (broadcast(f, ...)) is called with float and keeps the type it returns.
template <class Node>
struct storage_of {
  using type = typename Node::value_type;
};
template <class Node>
using storage_t = typename storage_of<Node>::type;
template <class T, int N>
struct storage_of<ArrayLeaf<T, N>> {
  using type = T;
};

template <class Node>
struct narrow_vote {
  using S = storage_t<Node>;
  using type = std::conditional_t<is_narrow_v<S>, S, std::conditional_t<std::is_same_v<S, bool>, void, float>>;
};
template <class T>
struct narrow_vote<Scalar<T>> {
  using type = void;
};
template <class A, class B>
struct narrow_join {
  using type = float;
};
template <class A>
struct narrow_join<A, A> {
  using type = A;
};
template <class A>
struct narrow_join<void, A> {
  using type = A;
};
template <class A>
struct narrow_join<A, void> {
  using type = A;
};
template <>
struct narrow_join<void, void> {
  using type = void;
};
template <class... V>
struct narrow_all {
  using type = void;
};
template <class V, class... Rest>
struct narrow_all<V, Rest...> {
  using type = typename narrow_join<V, typename narrow_all<Rest...>::type>::type;
};

namespace fn {
template <class T>
struct cast_to;
// Found by argument-dependent lookup for the functors of this namespace only: what tells a library
// function (which narrows) from a user's functor (which does not). Never defined: unevaluated only.
template <class F>
void library_functor_tag(const F*);
}  // namespace fn
template <class F>
concept library_functor = requires(const F* f) { library_functor_tag(f); };

template <class F, class... A>
struct storage_of<Broadcasted<F, A...>> {
  using V = typename Broadcasted<F, A...>::value_type;
  using N = typename narrow_all<typename narrow_vote<A>::type...>::type;
  using type = std::conditional_t<library_functor<F> && std::is_same_v<V, float> && is_narrow_v<N>, N, V>;
};
template <class T, class A>
struct storage_of<Broadcasted<fn::cast_to<T>, A>> {
  using type = T;
};

}  // namespace detail
}  // namespace tessera
