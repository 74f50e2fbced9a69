// SPDX-License-Identifier: Apache-2.0
// Tessera: printing in Julia's style: a summary line (shape, element type, placement), then the
// values, as 2-d slices for rank >= 3, with rows, columns and slices elided when large.
#pragma once
#include <tessera/transfer.hpp>

#include <backend/io/print.hpp>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <ostream>
#include <sstream>
#include <string>
#include <vector>

namespace tessera {
namespace detail {

template <class T>
constexpr const char* julia_type_name() {
  if constexpr (std::is_same_v<T, bool>) return "Bool";
  else if constexpr (std::is_same_v<T, std::int32_t>) return "Int32";
  else if constexpr (std::is_same_v<T, std::int64_t>) return "Int64";
  else if constexpr (std::is_same_v<T, float>) return "Float32";
  else if constexpr (std::is_same_v<T, complex<float>>) return "ComplexF32";
  else if constexpr (std::is_same_v<T, complex<double>>) return "ComplexF64";
  else if constexpr (std::is_same_v<T, half>) return "Float16";
  else if constexpr (std::is_same_v<T, bfloat16>) return "BFloat16";  // BFloat16s.jl
  else return "Float64";
}

template <class T>
std::string format_value(T v) {
  if constexpr (std::is_same_v<T, bool>) {
    return v ? "1" : "0";
  } else if constexpr (std::is_integral_v<T>) {
    return std::to_string(v);
  } else if constexpr (is_complex_v<T>) {  // Julia's 1.5 - 2.0im
    using R = real_of_t<T>;
    const R im = v.imag();
    const bool minus = im < R(0) || (im == R(0) && std::signbit(im));
    return format_value<R>(v.real()) + (minus ? " - " : " + ") + format_value<R>(minus ? -im : im) + "im";
  } else if constexpr (is_narrow_v<T>) {
    // The shortest decimal that reads back as the same value (Julia prints Float16(0.1) as 0.1, not
    // 0.09997559): half needs at most 5 significant digits, bfloat16 4.
    char buf[32];
    const float x = static_cast<float>(v);
    for (int digits = 1; digits <= 9; ++digits) {
      std::snprintf(buf, sizeof buf, "%.*g", digits, static_cast<double>(x));
      const float back = static_cast<float>(T(std::strtod(buf, nullptr)));
      if (back == x || x != x) break;
    }
    return buf;
  } else {
    char buf[32];
    std::snprintf(buf, sizeof buf, std::is_same_v<T, float> ? "%.7g" : "%.15g", static_cast<double>(v));
    return buf;
  }
}

// Element i of a host copy (a std::vector<T>) as print_matrix shows it (backend/io/print.cpp).
template <class T>
std::string format_element(const void* values, index_t i) {
  return format_value<T>((*static_cast<const std::vector<T>*>(values))[static_cast<std::size_t>(i)]);
}

template <class A>
void print_array(std::ostream& os, const A& a) {
  using T = typename A::value_type;
  constexpr int N = A::rank;
  if (!a.has_storage()) {
    os << "Array{" << julia_type_name<T>() << ", " << N << "} (default-constructed, no shape)";
    return;
  }
  os << shape_string<N>(a.shape()) << " Array{" << julia_type_name<T>() << ", " << N << "} "
     << a.placement_string() << ":\n";
  if (a.empty()) return;
  const auto h = to_host(a);
  if constexpr (N == 0) {
    os << "  " << format_value<T>(h[0]) << '\n';
  } else if constexpr (N == 1) {
    print_matrix(os, &h, &format_element<T>, 0, a.shape()[0], 1, 0);
  } else {
    const index_t rows = a.shape()[0], cols = a.shape()[1], slice = rows * cols;
    const index_t slices = static_cast<index_t>(h.size()) / (slice ? slice : 1);
    const auto ss = shown(slices, 2);
    for (auto s : ss) {
      if constexpr (N > 2) {
        if (s < 0) {
          os << "\n;;; …\n\n";
          continue;
        }
        os << "[:, :";
        index_t rest = s;
        for (int k = 2; k < N; ++k) {
          os << ", " << rest % a.shape()[k];
          rest /= a.shape()[k];
        }
        os << "] =\n";
      }
      print_matrix(os, &h, &format_element<T>, s * slice, rows, cols, rows);
      if constexpr (N > 2) os << '\n';
    }
  }
}

}  // namespace detail

template <class T, int N>
std::ostream& operator<<(std::ostream& os, const Array<T, N>& a) {
  detail::print_array(os, a);
  return os;
}
template <class T, int N>
std::ostream& operator<<(std::ostream& os, const View<T, N>& a) {
  detail::print_array(os, a);
  return os;
}

}  // namespace tessera
