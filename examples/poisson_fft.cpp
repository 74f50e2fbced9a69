// SPDX-License-Identifier: Apache-2.0
// A spectral Poisson solver on a periodic 2-d grid, sharded over every device: laplacian(u) = f on
// [0, 2 pi)^2 is diagonal in Fourier space, so u = ifft2(fft2(f) / -|k|^2) (the k = 0 mode, the
// mean, set to 0), with k = 2 pi fftfreq(n, h). The result is checked against the analytic solution
// and written as poisson_fft.png (save_png) in the working directory. Runs on the GPUs, or on host
// devices where there is none (TESSERA_HOST_DEVICES=4 to try several).
#include <tessera/fft.hpp>  // the FFT and complex numbers, with the umbrella header

#include <cmath>
#include <cstdio>
#include <exception>
#include <numbers>
#include <vector>

using namespace tessera;

int main() {
  try {
    const bool gpu = cuda_backend();
    const DeviceSet all = devices();
    const index_t n = gpu ? 2048 : 256;
    const double two_pi = 2 * std::numbers::pi, h = two_pi / double(n);
    std::printf("spectral Poisson solver, %lld x %lld periodic grid sharded along dim 1 over %zu %s\n",
                static_cast<long long>(n), static_cast<long long>(n), all.size(), gpu ? "GPU(s)" : "host device(s)");

    // Grid coordinates as a column (n x 1) and a row (1 x n), replicated: they broadcast against
    // the sharded grid without moving anything.
    std::vector<double> coord(static_cast<std::size_t>(n));
    for (index_t i = 0; i < n; ++i) coord[i] = double(i) * h;
    auto xs = from_host(std::span<const double>(coord), {n, 1}, replicate(all));
    auto ys = from_host(std::span<const double>(coord), {1, n}, replicate(all));

    // u = sin(x) cos(2y) + 0.3 cos(3x + 4y), so f = laplacian(u) = -5 sin(x) cos(2y) - 7.5 cos(3x + 4y).
    Array<double, 2> f({n, n}, shard(1, all));
    f = -5.0 * sin(xs) * cos(2.0 * ys) - 7.5 * cos(3.0 * xs + 4.0 * ys);

    // Angular wavenumbers of the fft2 output, as a column and a row.
    auto kx = reshape(fftfreq(n, h / two_pi, replicate(all)), n, 1);
    auto ky = reshape(fftfreq(n, h / two_pi, replicate(all)), 1, n);

    Array<complex<double>, 2> fh = fft2(f);  // sharded along dim 1, like f
    fh = fh * where(kx * kx + ky * ky > 0.0, -1.0 / (kx * kx + ky * ky), 0.0);
    Array<double, 2> u = real(ifft2(fh));

    const double err = maximum(abs(u - (sin(xs) * cos(2.0 * ys) + 0.3 * cos(3.0 * xs + 4.0 * ys))));
    std::printf("u: %s; max |u - u_exact| = %.3e\n", u.placement_string().c_str(), err);
    try {
      save_png(u, "poisson_fft.png", colormap::diverging);
      std::printf("wrote poisson_fft.png (%lld x %lld)\n", static_cast<long long>(n), static_cast<long long>(n));
    } catch (const tessera::error& e) {  // a build without libpng: the solve still counts
      std::printf("no image: %s\n", e.what());
    }
    const bool ok = err < 1e-9;
    std::printf("%s\n", ok ? "OK: the spectral solution matches the analytic one"
                           : "FAIL: the spectral solution differs from the analytic one");
    return ok ? 0 : 1;
  } catch (const std::exception& e) {
    std::printf("FAIL: %s\n", e.what());
    return 1;
  }
}
