// SPDX-License-Identifier: Apache-2.0
// save_png's writer (png.hpp): the colour maps and the libpng calls.
#include <backend/io/png.hpp>

#include <tessera/error.hpp>

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <vector>

#ifndef TESSERA_HAS_PNG
#define TESSERA_HAS_PNG 0
#endif
#if TESSERA_HAS_PNG
#include <png.h>
#endif

namespace tessera::detail::png {
namespace {

struct rgb {
  double r, g, b;
};

// Anchors of each map at evenly spaced positions in [0, 1], interpolated linearly between them.
// viridis: eleven samples of the published map (van der Walt and Smith, 2015), enough for a smooth
// ramp at 8 bits.
const std::vector<rgb>& anchors(colormap m) {
  static const std::vector<rgb> gray = {{0, 0, 0}, {1, 1, 1}};
  static const std::vector<rgb> viridis = {{0.267, 0.005, 0.329}, {0.283, 0.141, 0.458}, {0.254, 0.265, 0.530},
                                           {0.207, 0.372, 0.553}, {0.164, 0.471, 0.558}, {0.128, 0.567, 0.551},
                                           {0.135, 0.659, 0.518}, {0.267, 0.749, 0.441}, {0.478, 0.821, 0.318},
                                           {0.741, 0.873, 0.150}, {0.993, 0.906, 0.144}};
  static const std::vector<rgb> diverging = {{0.230, 0.299, 0.754}, {0.865, 0.865, 0.865}, {0.706, 0.016, 0.150}};
  switch (m) {
    case colormap::gray: return gray;
    case colormap::viridis: return viridis;
    default: return diverging;
  }
}

void colour(colormap m, double t, unsigned char* out) {
  const auto& a = anchors(m);
  t = t < 0 ? 0 : t > 1 ? 1 : t;
  const double x = t * static_cast<double>(a.size() - 1);
  const std::size_t i = static_cast<std::size_t>(x) < a.size() - 1 ? static_cast<std::size_t>(x) : a.size() - 2;
  const double f = x - static_cast<double>(i);
  const rgb c{a[i].r + f * (a[i + 1].r - a[i].r), a[i].g + f * (a[i + 1].g - a[i].g), a[i].b + f * (a[i + 1].b - a[i].b)};
  out[0] = static_cast<unsigned char>(std::lround(c.r * 255));
  out[1] = static_cast<unsigned char>(std::lround(c.g * 255));
  out[2] = static_cast<unsigned char>(std::lround(c.b * 255));
}

#if TESSERA_HAS_PNG
// The libpng calls, apart: libpng reports errors by longjmp to here, so this frame holds nothing
// that a jump could leave half-updated. False when libpng failed.
bool write_rows(std::FILE* f, const unsigned char* image, std::size_t rows, std::size_t cols) {
  png_structp png = png_create_write_struct(PNG_LIBPNG_VER_STRING, nullptr, nullptr, nullptr);
  png_infop info = png ? png_create_info_struct(png) : nullptr;
  if (!png || !info || setjmp(png_jmpbuf(png))) {
    png_destroy_write_struct(&png, info ? &info : nullptr);
    return false;
  }
  png_init_io(png, f);
  png_set_IHDR(png, info, static_cast<png_uint_32>(cols), static_cast<png_uint_32>(rows), 8, PNG_COLOR_TYPE_RGB,
               PNG_INTERLACE_NONE, PNG_COMPRESSION_TYPE_DEFAULT, PNG_FILTER_TYPE_DEFAULT);
  png_write_info(png, info);
  for (std::size_t i = 0; i < rows; ++i) png_write_row(png, const_cast<unsigned char*>(image + i * cols * 3));
  png_write_end(png, nullptr);
  png_destroy_write_struct(&png, &info);
  return true;
}
#endif

}  // namespace

bool available() { return TESSERA_HAS_PNG != 0; }

void write(const std::string& path, const double* v, std::size_t rows, std::size_t cols, double lo, double hi,
           colormap map) {
#if TESSERA_HAS_PNG
  if (rows == 0 || cols == 0) {
    throw invalid_argument("tessera: save_png(a, \"" + path + "\"): the array is " + std::to_string(rows) + "×" +
                           std::to_string(cols) + "; a PNG needs at least one row and one column");
  }
  if (rows > 0x7fffffff || cols > 0x7fffffff) {
    throw invalid_argument("tessera: save_png(a, \"" + path + "\"): " + std::to_string(rows) + "×" +
                           std::to_string(cols) + " is larger than a PNG can hold (2^31 - 1 per side)");
  }
  std::vector<unsigned char> image(rows * cols * 3);
  const double span = hi > lo ? hi - lo : 1.0;
  for (std::size_t i = 0; i < rows; ++i) {
    for (std::size_t j = 0; j < cols; ++j) {
      const double x = v[i + j * rows];
      unsigned char* px = &image[(i * cols + j) * 3];
      if (std::isnan(x)) {
        px[0] = px[1] = px[2] = 0;
      } else {
        colour(map, hi > lo ? (x - lo) / span : 0.5, px);
      }
    }
  }
  std::FILE* f = std::fopen(path.c_str(), "wb");
  if (!f) {
    throw error("tessera: save_png: cannot open \"" + path + "\" for writing: " + std::strerror(errno));
  }
  if (!write_rows(f, image.data(), rows, cols)) {
    std::fclose(f);
    throw error("tessera: save_png: libpng failed writing \"" + path + "\"");
  }
  if (std::fclose(f) != 0) throw error("tessera: save_png: writing \"" + path + "\" failed: " + std::strerror(errno));
#else
  (void)v, (void)rows, (void)cols, (void)lo, (void)hi, (void)map;
  throw error("tessera: save_png(a, \"" + path + "\"): this build has no libpng; install libpng-dev (the set-up "
              "scripts do) and rebuild");
#endif
}

}  // namespace tessera::detail::png
