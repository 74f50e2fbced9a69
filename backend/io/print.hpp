// SPDX-License-Identifier: Apache-2.0
// Tessera: the layout of printed arrays (dsl/tessera/io.hpp), compiled once into tessera_runtime
// (print.cpp): which rows and columns are shown and how the cells align depend on no element type;
// only formatting one value does, through the function pointer the caller passes.
#pragma once
#include <tessera/config.hpp>

#include <iosfwd>
#include <string>
#include <vector>

namespace tessera::detail {

// Positions to show along a dimension of size n: all when small, else the first and last `keep`
// with -1 (an ellipsis) between them.
std::vector<index_t> shown(index_t n, index_t keep);

// Prints one 2-d slice (rows x cols) of a host copy, starting at element `base`, with column stride
// `cs`: `format(values, i)` formats element i, right-aligned per column, large slices elided.
void print_matrix(std::ostream& os, const void* values, std::string (*format)(const void*, index_t), index_t base,
                  index_t rows, index_t cols, index_t cs);

}  // namespace tessera::detail
