// SPDX-License-Identifier: Apache-2.0
// Tessera: Array<T, N> (owning, value semantics like std::vector) and View<T, N> (a window on
// another array's storage; assigning to it writes the elements). Both share one layout type and
// one base with the accessors, indexing and compound assignment.
#pragma once
#include <tessera/expr.hpp>
#include <tessera/functional.hpp>
#include <tessera/index.hpp>
#include <tessera/policy.hpp>

#include <memory>
#include <string>
#include <type_traits>
#include <utility>

namespace tessera {
namespace detail {

// Defined in assign.hpp: the one place where expressions are materialized (`filter`: one of
// hide_communication's passes, overlap.hpp).
struct box_filter;
template <class T, int N, class Node>
void assign_node(const Layout<T, N>& dst, const Node& node, execution_policy pol, const box_filter* filter = nullptr);
template <class Node>
auto materialize(const Node& node);
template <class T, int N>
std::shared_ptr<const Layout<T, N>> clone_layout(const Layout<T, N>& src);
template <class T, int N, class U>
std::shared_ptr<const Layout<T, N>> clone_geometry(const Layout<U, N>& l);
template <class T, int N, class Node>
void assign_generated(const Layout<T, N>& dst, const Node& node);
// Defined in transfer.hpp.
template <class T, int N>
T read_element(const Layout<T, N>& l, const Shape<N>& idx);

// Fills `dst` with `x` (an operand), converting operands to nodes.
template <class T, int N, class X>
void assign_operand(const std::shared_ptr<const Layout<T, N>>& dst, X&& x, execution_policy pol) {
  if (!dst) {
    throw invalid_argument("tessera: assignment into an empty (default-constructed) view or array of unknown shape; "
                           "assign an expression to a default-constructed Array instead of a scalar");
  }
  assign_node(*dst, to_weak_node<T>(std::forward<X>(x)), pol);
}

template <class Derived, class T, int N>
class ArrayBase {
  static_assert(!is_complex_v<T> || !is_narrow_v<real_of_t<T>>,
                "TESSERA_COMPLEX_HALF_UNSUPPORTED: complex<half> and complex<bfloat16> are not element types; use "
                "complex<float>");
  static_assert(element_type<T> || (is_complex_v<T> && is_narrow_v<real_of_t<T>>),
                "TESSERA_UNSUPPORTED_ELEMENT_TYPE: Array and View hold bool, int32_t, int64_t, float, double, "
                "complex<float>, complex<double>, half or bfloat16");
  static_assert(!is_complex_v<T> || complete_type<T>,
                "TESSERA_COMPLEX_NEEDS_HEADER: arrays of complex<float> and complex<double> need "
                "#include <tessera/complex.hpp> (or <tessera/fft.hpp>): <tessera/tessera.hpp> declares complex "
                "without defining it, which saves every other program a second of compile time");
  static_assert(N >= 0, "TESSERA_NEGATIVE_RANK: the rank N of Array<T, N> must be >= 0");

 public:
  using value_type = T;
  static constexpr int rank = N;

  const Shape<N>& shape() const { return layout().shape; }
  index_t size(int dim) const {
    if (dim < 0 || dim >= N) {
      throw invalid_argument("tessera: size(" + std::to_string(dim) + ") of an array of rank " + std::to_string(N));
    }
    return shape()[dim];
  }
  index_t length() const { return l_ ? volume<N>(l_->shape) : 0; }
  bool empty() const { return length() == 0; }
  bool has_storage() const { return static_cast<bool>(l_); }
  DeviceSet devices() const { return layout().devices(); }
  int shard_dim() const { return layout().shard_dim; }
  bool is_replicated() const { return layout().replicated; }
  memory memory_kind() const { return layout().mem; }
  std::string placement_string() const { return describe_placement(layout()); }
  const Layout<T, N>& layout() const {
    if (!l_) throw invalid_argument("tessera: this array is default-constructed and has no shape yet");
    return *l_;
  }
  const std::shared_ptr<const Layout<T, N>>& layout_ptr() const { return l_; }
  ArrayLeaf<T, N> leaf() const {
    layout();
    return {l_};
  }

  // a(_, range(0, 2), k): a view; an integer drops its dimension.
  template <class... Idx>
  auto operator()(Idx... idx) const {
    static_assert(sizeof...(Idx) == N,
                  "TESSERA_WRONG_NUMBER_OF_INDICES: an array of rank N takes exactly N indices (_, range or integer)");
    static_assert((index_arg<Idx> && ...),
                  "TESSERA_BAD_INDEX: each index must be tessera::_, tessera::range(...) or an integer");
    constexpr int M = ((is_range_like<Idx> ? 1 : 0) + ... + 0);
    return View<T, M>(make_view<T, N, M>(layout(), idx...));
  }

  // Host read of one element; waits only for the owner device's queued work.
  template <class... Idx>
  T at(Idx... idx) const {
    static_assert(sizeof...(Idx) == N, "TESSERA_WRONG_NUMBER_OF_INDICES: at() takes exactly N integer indices");
    static_assert((std::is_integral_v<Idx> && ...), "TESSERA_BAD_INDEX: at() takes integer indices");
    return read_element(layout(), Shape<N>{static_cast<index_t>(idx)...});
  }

#define TESSERA_COMPOUND(OP, FN)                                                                \
  template <operand X>                                                                          \
  Derived& operator OP(X&& x) {                                                                 \
    assign_node(layout(), make_node(fn::FN{}, leaf(), std::forward<X>(x)), par);                \
    return static_cast<Derived&>(*this);                                                        \
  }
  TESSERA_COMPOUND(+=, plus)
  TESSERA_COMPOUND(-=, minus)
  TESSERA_COMPOUND(*=, multiplies)
  TESSERA_COMPOUND(/=, divides)
  TESSERA_COMPOUND(%=, modulus)
#undef TESSERA_COMPOUND

 protected:
  ArrayBase() = default;
  explicit ArrayBase(std::shared_ptr<const Layout<T, N>> l) : l_(std::move(l)) {}
  std::shared_ptr<const Layout<T, N>> l_;
};

}  // namespace detail

template <class T, int N>
class Array : public detail::ArrayBase<Array<T, N>, T, N> {
  using base = detail::ArrayBase<Array<T, N>, T, N>;
  using base::l_;

 public:
  Array() = default;
  // A zero-filled array (std::vector's value initialization).
  explicit Array(const Shape<N>& shape, const Placement& p = {}, memory m = memory::unified)
      : base(std::make_shared<const detail::Layout<T, N>>(
            detail::allocate_layout<T, N>(detail::geometry_from_placement<N>(shape, p), m))) {
    detail::assign_generated(*l_, detail::Scalar<T>{T(0)});
  }
  Array(const Shape<N>& shape, memory m) : Array(shape, Placement{}, m) {}

  // Wraps an existing layout (used by the creation functions).
  explicit Array(std::shared_ptr<const detail::Layout<T, N>> l) : base(std::move(l)) {}

  Array(const Array& o) : base(o.l_ ? detail::clone_layout(*o.l_) : nullptr) {}
  Array(Array&&) noexcept = default;
  Array& operator=(Array&&) noexcept = default;
  // Value semantics: afterwards *this equals o. Same shape and placement: copied in place;
  // otherwise *this takes o's shape and placement.
  Array& operator=(const Array& o) {
    if (this == &o) return *this;
    if (!o.l_) {
      l_.reset();
    } else if (l_ && same_geometry(*l_, *o.l_)) {
      detail::assign_generated(*l_, o.leaf());  // halo cells too
    } else {
      l_ = detail::clone_layout(*o.l_);
    }
    return *this;
  }

  // Materializes an expression into a new array with the expression's shape and placement.
  template <expression E>
    requires(!std::is_same_v<std::remove_cvref_t<E>, Array>)
  Array(E&& e) : base(materialize_as(std::forward<E>(e))) {}

  // Writes the expression into this array's storage (it must broadcast to this shape); a
  // default-constructed array takes the expression's shape and placement.
  template <expression E>
    requires(!std::is_same_v<std::remove_cvref_t<E>, Array>)
  Array& operator=(E&& e) {
    constexpr int M = detail::node_t<E>::rank;
    static_assert(M <= N, "TESSERA_RANK_MISMATCH: the expression has a higher rank than the destination");
    if (l_) {
      detail::assign_node(*l_, detail::to_node(std::forward<E>(e)), par);
    } else if constexpr (M == N) {
      l_ = materialize_as(std::forward<E>(e));
    } else {
      throw invalid_argument("tessera: a default-constructed Array of rank " + std::to_string(N) +
                             " cannot take the shape of a rank-" + std::to_string(M) +
                             " expression; construct it with a shape first");
    }
    return *this;
  }
  // Fills every element (c = 0.f).
  template <scalar_type S>
  Array& operator=(S s) {
    detail::assign_operand(l_, s, par);
    return *this;
  }

  // Direct host access to the storage of one shard (unified memory or host devices). Waits for
  // the owner device and marks the shard as touched on the host, so that it is prefetched back
  // before the next launch that uses it.
  T* host_data(int shard) const {
    auto& parts = this->layout().parts;
    if (shard < 0 || shard >= static_cast<int>(parts.size())) {
      throw out_of_bounds("tessera: host_data(" + std::to_string(shard) + ") on an array with " +
                          std::to_string(parts.size()) + " shards");
    }
    auto& part = parts[static_cast<std::size_t>(shard)];
    if (!part.buf) return nullptr;
    // The shard's first element: past the halo cells, when the array has a halo.
    return static_cast<T*>(detail::rt::host_access(*part.buf)) + (part.ptr - static_cast<T*>(part.buf->ptr));
  }

 private:
  template <class E>
  static std::shared_ptr<const detail::Layout<T, N>> materialize_as(E&& e) {
    auto node = detail::to_node(std::forward<E>(e));
    static_assert(decltype(node)::rank == N,
                  "TESSERA_RANK_MISMATCH: an Array<T, N> built from an expression needs an expression of rank N");
    using V = detail::storage_t<decltype(node)>;
    if constexpr (std::is_same_v<V, T>) {
      return detail::materialize(node).layout_ptr();
    } else {
      return detail::materialize(detail::make_node(detail::fn::cast_to<T>{}, std::move(node))).layout_ptr();
    }
  }
  static bool same_geometry(const detail::Layout<T, N>& a, const detail::Layout<T, N>& b) {
    if (a.shape != b.shape || a.parts.size() != b.parts.size() || a.halo.width != b.halo.width ||
        a.halo.bounds != b.halo.bounds) {
      return false;
    }
    for (std::size_t i = 0; i < a.parts.size(); ++i) {
      if (!(a.parts[i].device == b.parts[i].device) || a.parts[i].origin != b.parts[i].origin ||
          a.parts[i].extent != b.parts[i].extent || a.parts[i].halo_lo != b.parts[i].halo_lo ||
          a.parts[i].halo_hi != b.parts[i].halo_hi) {
        return false;
      }
    }
    return true;
  }
};

// `Array c = a + b;` materializes with the expression's element type (eval's: half op half is half)
// and rank.
template <expression E>
Array(E&&) -> Array<detail::storage_t<detail::node_t<E>>, detail::node_t<E>::rank>;

template <class T, int N>
class View : public detail::ArrayBase<View<T, N>, T, N> {
  using base = detail::ArrayBase<View<T, N>, T, N>;
  using base::l_;

 public:
  View() = default;
  explicit View(std::shared_ptr<const detail::Layout<T, N>> l) : base(std::move(l)) {}
  // Copying a view shares the window; assigning to a view writes its elements.
  View(const View&) = default;
  View(View&&) noexcept = default;
  View& operator=(const View& o) {
    detail::assign_operand(l_, o, par);
    return *this;
  }
  template <operand E>
    requires(!std::is_same_v<std::remove_cvref_t<E>, View>)
  View& operator=(E&& e) {
    detail::assign_operand(l_, std::forward<E>(e), par);
    return *this;
  }
};

}  // namespace tessera
