// SPDX-License-Identifier: Apache-2.0
// Tessera: writing a matrix of values as a PNG image (save_png, dsl/tessera/png.hpp), compiled
// once into tessera_runtime: the colour maps and libpng. No libpng header here.
#pragma once
#include <cstddef>
#include <string>

namespace tessera {

/// Colour maps of save_png: `gray` (black to white), `viridis` (dark blue, green, yellow:
/// perceptually ordered, readable in grey), `diverging` (blue, white, red: for signed data, white
/// at the middle of the range).
enum class colormap { gray, viridis, diverging };

namespace detail::png {

// Whether this build has libpng (otherwise write() throws naming the package).
bool available();
// Writes `rows` x `cols` values (column-major: v[i + j * rows] is row i, column j of the image)
// mapped linearly from [lo, hi] through `map` (NaN: black) as an 8-bit RGB PNG at `path`.
void write(const std::string& path, const double* v, std::size_t rows, std::size_t cols, double lo, double hi,
           colormap map);

}  // namespace detail::png
}  // namespace tessera
