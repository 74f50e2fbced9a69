// SPDX-License-Identifier: Apache-2.0
// A least-squares polynomial fit (NumPy's polyfit through lstsq): samples of a cubic with a little
// deterministic noise, the Vandermonde matrix built by broadcasting (x .^ p), the coefficients from
// lstsq (an SVD on the device), checked against the known ones; then a stack of 64 independent
// fits, sharded over every device along its last dim, solved through the normal equations
// (cholesky, then solve), each device fitting its own. The fitted curve and the samples are drawn
// into least_squares.png (save_png). Runs on the GPUs, or on host devices where there is none
// (TESSERA_HOST_DEVICES=4 to try several).
#include <tessera/tessera.hpp>

#include <cmath>
#include <cstdio>
#include <exception>
#include <string>
#include <vector>

using namespace tessera;

namespace {

constexpr int degree = 3;
const double coefficients[degree + 1] = {0.5, -1.25, 0.75, 2.0};  // c0 + c1 x + c2 x^2 + c3 x^3

// The Vandermonde matrix of the points x (m x 1): column p is x .^ p.
Array<double, 2> vandermonde(const Array<double, 2>& x, const Placement& where) {
  auto powers = iota<double>({1, degree + 1}, where);
  return eval(pow(x, powers));
}

// The cubic at x plus noise of amplitude `noise` (a fixed sine, so the run is reproducible).
Array<double, 2> samples(const Array<double, 2>& x, double noise) {
  return eval(coefficients[0] + x * (coefficients[1] + x * (coefficients[2] + x * coefficients[3])) +
              noise * sin(37.0 * x));
}

// The fit drawn as an image: rows are y from top to bottom, columns x from left to right; the
// curve is a bright ridge, the samples the dots around it.
void draw(const Array<double, 1>& c, const Array<double, 2>& x, const Array<double, 2>& y, const Device d) {
  const index_t h = 240, w = 320;
  auto col = eval(-1.0 + 2.0 * iota<double>({1, w}, on(d)) / double(w - 1));             // x of each column
  auto row = eval(3.5 - 6.0 * iota<double>({h, 1}, on(d)) / double(h - 1));             // y of each row
  auto ch = to_host(c);
  auto fit = eval(ch[0] + col * (ch[1] + col * (ch[2] + col * ch[3])));                 // 1 x w
  Array<double, 2> image = exp(-pow((row - fit) / 0.04, 2.0));                           // h x w
  // Each sample: a dot where its column and row are.
  const auto xs = to_host(x), ys = to_host(y);
  std::vector<double> pixels = to_host(image);
  for (std::size_t k = 0; k < xs.size(); k += 4) {
    const auto j = static_cast<index_t>(std::lround((xs[k] + 1.0) / 2.0 * double(w - 1)));
    const auto i = static_cast<index_t>(std::lround((3.5 - ys[k]) / 6.0 * double(h - 1)));
    if (i >= 0 && i < h && j >= 0 && j < w) pixels[static_cast<std::size_t>(i + j * h)] = 0.5;
  }
  save_png(from_host(pixels, {h, w}, on(d)), "least_squares.png", colormap::viridis);
  std::printf("wrote least_squares.png (%lld x %lld): the fitted cubic and every 4th sample\n",
              static_cast<long long>(h), static_cast<long long>(w));
}

}  // namespace

int main() {
  try {
    const bool gpu = cuda_backend();
    const DeviceSet all = devices();
    const Device d = all[0];
    std::printf("least squares on %zu %s\n", all.size(), gpu ? "GPU(s)" : "host device(s)");

    // One fit: 2000 points on [-1, 1].
    const index_t m = 2000;
    auto x = eval(-1.0 + 2.0 * iota<double>({m, 1}, on(d)) / double(m - 1));
    auto y = samples(x, 1e-3);
    auto a = vandermonde(x, on(d));
    auto fit = lstsq(a, y);  // {x: (degree + 1) x 1, rank, singular values}
    const auto got = to_host(fit.x);
    double err = 0;
    for (int p = 0; p <= degree; ++p) err = std::fmax(err, std::fabs(got[p] - coefficients[p]));
    std::printf("lstsq fit of a cubic, %lld points: rank %lld, coefficients", static_cast<long long>(m),
                static_cast<long long>(fit.rank));
    for (double v : got) std::printf(" %.5f", v);
    std::printf(", max error %.2e\n", err);

    // 64 fits at once: a stack (degree + 1) x (degree + 1) x 64 of normal matrices A'A, sharded
    // along the stack, each device solving its own through cholesky + solve. Fit k sees the same
    // cubic plus k-dependent noise, so every fit must land near the coefficients.
    const index_t fits = 64;
    std::vector<double> ata, atb;
    const auto av = to_host(a);
    for (index_t k = 0; k < fits; ++k) {
      const auto yk = to_host(samples(x, 1e-3 * double(k % 5)));
      for (int j = 0; j <= degree; ++j)
        for (int i = 0; i <= degree; ++i) {
          double s = 0;
          for (index_t r = 0; r < m; ++r) s += av[r + i * m] * av[r + j * m];
          ata.push_back(s);
        }
      for (int i = 0; i <= degree; ++i) {
        double s = 0;
        for (index_t r = 0; r < m; ++r) s += av[r + i * m] * yk[r];
        atb.push_back(s);
      }
    }
    auto G = from_host(ata, {degree + 1, degree + 1, fits}, shard(2, all));
    auto rhs = from_host(atb, {degree + 1, fits}, shard(1, all));
    auto L = cholesky(G);  // each device: the Cholesky factors of its normal matrices
    auto coef = solve(G, rhs);
    const auto cs = to_host(coef);
    double stack_err = 0;
    for (index_t k = 0; k < fits; ++k)
      for (int p = 0; p <= degree; ++p)
        stack_err = std::fmax(stack_err, std::fabs(cs[static_cast<std::size_t>(p + k * (degree + 1))] - coefficients[p]));
    std::printf("%lld fits as a stack over %zu device(s) (L %s): max coefficient error %.2e\n",
                static_cast<long long>(fits), all.size(), L.placement_string().c_str(), stack_err);

    draw(Array<double, 1>(fit.x(_, 0)), x, y, d);
    const bool ok = err < 1e-2 && stack_err < 1e-2 && fit.rank == degree + 1;
    std::printf("%s\n", ok ? "OK: the fitted coefficients match the known cubic"
                           : "FAIL: a fitted coefficient is off the known cubic");
    return ok ? 0 : 1;
  } catch (const std::exception& e) {
    std::printf("FAIL: %s\n", e.what());
    return 1;
  }
}
