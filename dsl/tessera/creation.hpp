// SPDX-License-Identifier: Apache-2.0
// Tessera: creation functions. Fills and generators are expressions like any other (a scalar,
// or a functor of the global index), so they run on every device through the same executors,
// and rand/randn give the same values whatever the placement: each element's value depends on
// the seed and its global index only (a counter-based generator).
#pragma once
#include <tessera/assign.hpp>

#include <cstdint>

namespace tessera {
namespace detail {

TS_HD inline std::uint64_t mix64(std::uint64_t z) {
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

namespace fn {
template <class T>
struct uniform01 {
  std::uint64_t seed;
  TS_HD T operator()(index_t i) const {
    const std::uint64_t h = mix64(seed + mix64(static_cast<std::uint64_t>(i)));
    // As many random bits as T has significand bits, so that every value is exact in T and below 1
    // (a float in [0, 1) rounded to half could round up to 1).
    if constexpr (std::is_same_v<T, half>) return T(static_cast<float>(h >> 53) * 0x1.0p-11f);
    else if constexpr (std::is_same_v<T, bfloat16>) return T(static_cast<float>(h >> 56) * 0x1.0p-8f);
    else if constexpr (std::is_same_v<T, float>) return static_cast<float>(h >> 40) * 0x1.0p-24f;
    else return static_cast<double>(h >> 11) * 0x1.0p-53;
  }
};
template <class T>
struct normal01 {
  std::uint64_t seed;
  TS_HD T operator()(index_t i) const {
    const std::uint64_t h1 = mix64(seed + mix64(2 * static_cast<std::uint64_t>(i)));
    const std::uint64_t h2 = mix64(seed + mix64(2 * static_cast<std::uint64_t>(i) + 1));
    const double u1 = (static_cast<double>(h1 >> 11) + 1.0) * 0x1.0p-53;  // (0, 1]
    const double u2 = static_cast<double>(h2 >> 11) * 0x1.0p-53;
    return static_cast<T>(::sqrt(-2.0 * ::log(u1)) * ::cos(6.283185307179586 * u2));
  }
};
template <class T>
struct offset_index {
  T start;
  TS_HD T operator()(index_t i) const {
    // A narrow type adds in double and rounds once (start + i in half would round i first).
    if constexpr (is_narrow_v<T>) return T(static_cast<double>(start) + static_cast<double>(i));
    else return static_cast<T>(start + static_cast<T>(i));
  }
};
}  // namespace fn

// Each call draws a fresh stream: the global seed advanced by one (rt::advance_seed).
inline std::uint64_t next_seed() { return mix64(rt::advance_seed()); }

// The element types rand and randn fill: float, double, half and bfloat16.
template <class T>
concept random_floating = std::floating_point<T> || is_narrow_v<T>;

template <class T, int N>
Array<T, N> uninitialized(const Shape<N>& shape, const Placement& p, memory m) {
  return Array<T, N>(std::make_shared<const Layout<T, N>>(allocate_layout<T, N>(geometry_from_placement<N>(shape, p), m)));
}

template <class T, int N, class Node>
Array<T, N> generate(const Shape<N>& shape, const Placement& p, memory m, const Node& node) {
  auto a = uninitialized<T, N>(shape, p, m);
  assign_generated(a.layout(), node);
  return a;
}

template <std::size_t N>
std::array<index_t, N> to_shape(const index_t (&d)[N]) {
  std::array<index_t, N> s;
  for (std::size_t k = 0; k < N; ++k) s[k] = d[k];
  return s;
}

}  // namespace detail

// Sets the seed of rand and randn (the sequence of calls after it is reproducible).
inline void seed(std::uint64_t s) { detail::rt::set_seed(s); }

// Each creation function takes a shape as std::array or a braced list ({3, 4, 2}), then an
// optional placement and memory kind. The macro writes the braced-list overload.
#define TESSERA_SHAPE_OVERLOAD(NAME, CONSTRAINT)                                                              \
  template <CONSTRAINT T, std::size_t N, class... Rest>                                                       \
  auto NAME(const index_t (&dims)[N], Rest&&... rest) {                                                       \
    return NAME<T, N>(detail::to_shape<N>(dims), std::forward<Rest>(rest)...);                                \
  }

template <element_type T, std::size_t N>
Array<T, int(N)> zeros(const std::array<index_t, N>& s, const Placement& p = {}, memory m = memory::unified) {
  return detail::generate<T, int(N)>(s, p, m, detail::Scalar<T>{T(0)});
}
TESSERA_SHAPE_OVERLOAD(zeros, element_type)

template <element_type T, std::size_t N>
Array<T, int(N)> ones(const std::array<index_t, N>& s, const Placement& p = {}, memory m = memory::unified) {
  return detail::generate<T, int(N)>(s, p, m, detail::Scalar<T>{T(1)});
}
TESSERA_SHAPE_OVERLOAD(ones, element_type)

template <element_type T, std::size_t N>
Array<T, int(N)> full(const std::array<index_t, N>& s, T value, const Placement& p = {}, memory m = memory::unified) {
  return detail::generate<T, int(N)>(s, p, m, detail::Scalar<T>{value});
}
TESSERA_SHAPE_OVERLOAD(full, element_type)

// Uniform on [0, 1) (half: multiples of 2^-11, bfloat16: of 2^-8, so that none rounds to 1).
template <detail::random_floating T, std::size_t N>
Array<T, int(N)> rand(const std::array<index_t, N>& s, const Placement& p = {}, memory m = memory::unified) {
  return detail::generate<T, int(N)>(
      s, p, m, detail::Broadcasted<detail::fn::uniform01<T>, detail::IndexLeaf<int(N)>>{{detail::next_seed()}, {{s}}});
}
TESSERA_SHAPE_OVERLOAD(rand, detail::random_floating)

// Standard normal (computed in double, rounded once to T).
template <detail::random_floating T, std::size_t N>
Array<T, int(N)> randn(const std::array<index_t, N>& s, const Placement& p = {}, memory m = memory::unified) {
  return detail::generate<T, int(N)>(
      s, p, m, detail::Broadcasted<detail::fn::normal01<T>, detail::IndexLeaf<int(N)>>{{detail::next_seed()}, {{s}}});
}
TESSERA_SHAPE_OVERLOAD(randn, detail::random_floating)

// The column-major linear index of each element, plus `start` (NumPy's arange reshaped).
template <element_type T, std::size_t N>
Array<T, int(N)> iota(const std::array<index_t, N>& s, const Placement& p = {}, memory m = memory::unified,
                      T start = T(0)) {
  return detail::generate<T, int(N)>(
      s, p, m, detail::Broadcasted<detail::fn::offset_index<T>, detail::IndexLeaf<int(N)>>{{start}, {{s}}});
}
TESSERA_SHAPE_OVERLOAD(iota, element_type)
#undef TESSERA_SHAPE_OVERLOAD

// similar(a): an uninitialized array with a's element type, shape and placement (Julia).
template <expression A>
  requires detail::is_array_like<std::remove_cvref_t<A>>::value
auto similar(const A& a) {
  using T = typename std::remove_cvref_t<A>::value_type;
  constexpr int N = std::remove_cvref_t<A>::rank;
  return Array<T, N>(detail::clone_geometry<T, N>(a.layout()));
}

// copy(a): a new array with a's values, shape and placement (a view becomes an owning array).
template <expression A>
  requires detail::is_array_like<std::remove_cvref_t<A>>::value
auto copy(const A& a) {
  using T = typename std::remove_cvref_t<A>::value_type;
  constexpr int N = std::remove_cvref_t<A>::rank;
  return Array<T, N>(detail::clone_layout(a.layout()));
}

}  // namespace tessera
