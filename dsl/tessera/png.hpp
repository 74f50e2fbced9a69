// SPDX-License-Identifier: Apache-2.0
// Tessera: save_png(a, path[, colormap]) writes a 2-d array as an image, so that a result can be
// looked at: row i of the image is a(i, _), column j is a(_, j) (matplotlib's imshow(a)), the
// values mapped linearly from their minimum to their maximum (or a given range) through a colour
// map. The values are gathered to the host (any placement); the writer is compiled into
// tessera_runtime (backend/io/png.cpp, libpng).
#pragma once
#include <tessera/transfer.hpp>

#include <backend/io/png.hpp>

#include <cmath>
#include <limits>
#include <string>
#include <type_traits>
#include <vector>

namespace tessera {

/// save_png(a, path[, map, lo, hi]): `a` (a real 2-d Array or View) as an 8-bit RGB PNG, values
/// from `lo` to `hi` (default: a's finite minimum and maximum) mapped through `map` (default
/// viridis), NaN black. Throws invalid_argument for an empty array and error when the file cannot
/// be written or the build has no libpng.
template <class X>
  requires detail::is_array_like<std::remove_cvref_t<X>>::value && (std::remove_cvref_t<X>::rank == 2) &&
           std::is_arithmetic_v<typename std::remove_cvref_t<X>::value_type>
void save_png(const X& a, const std::string& path, colormap map = colormap::viridis,
              double lo = std::numeric_limits<double>::quiet_NaN(),
              double hi = std::numeric_limits<double>::quiet_NaN()) {
  const auto& l = a.layout();
  const auto values = to_host(a);
  std::vector<double> v(values.begin(), values.end());
  if (std::isnan(lo) || std::isnan(hi)) {
    double mn = std::numeric_limits<double>::infinity(), mx = -mn;
    for (double x : v)
      if (std::isfinite(x)) mn = x < mn ? x : mn, mx = x > mx ? x : mx;
    if (std::isnan(lo)) lo = mn;
    if (std::isnan(hi)) hi = mx;
  }
  detail::png::write(path, v.data(), static_cast<std::size_t>(l.shape[0]), static_cast<std::size_t>(l.shape[1]), lo,
                     hi, map);
}

}  // namespace tessera
