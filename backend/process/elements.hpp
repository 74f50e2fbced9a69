// SPDX-License-Identifier: Apache-2.0
// Tessera: the element types and reduction operators that move between devices and processes:
// the vocabulary of the collectives (backend/comm/comm.hpp) and of the process layer
// (backend/process/mpi.hpp), which lies under both.
#pragma once
#include <cstdint>
#include <type_traits>

namespace tessera::detail::comm {

enum class dtype { u8, i32, i64, f32, f64 };
enum class op { sum, prod, max, min };

template <class T>
constexpr dtype dtype_of() {
  if constexpr (std::is_same_v<T, bool> || std::is_same_v<T, unsigned char>) return dtype::u8;
  else if constexpr (std::is_same_v<T, std::int32_t>) return dtype::i32;
  else if constexpr (std::is_same_v<T, std::int64_t>) return dtype::i64;
  else if constexpr (std::is_same_v<T, float>) return dtype::f32;
  else {
    static_assert(std::is_same_v<T, double>, "TESSERA_UNSUPPORTED_ELEMENT_TYPE for a collective");
    return dtype::f64;
  }
}

}  // namespace tessera::detail::comm
