// SPDX-License-Identifier: Apache-2.0
// The fft family on matrices and 3-d arrays (docs/semantics.md, "FFT"): along each dim and sets of
// dims against a naive DFT applied dim by dim, fft2/fftn against compositions of 1-d transforms,
// rfft/irfft along dims (the halved dim sharded too), and every placement (sharded along each dim,
// replicated, on one device, strided views, half input) equal to the single-device result.
#include "fft_reference.hpp"

using namespace tessera_test;

namespace {

// The naive transform of `v` (shape `shape`) along every dim listed.
std::vector<cd> dft_dims(std::vector<cd> v, const std::vector<index_t>& shape, const std::vector<int>& ds, int sign) {
  for (int d : ds) v = dft_along(v, shape, d, sign);
  return v;
}

std::vector<index_t> as_vec(const Shape<3>& s) { return {s[0], s[1], s[2]}; }

}  // namespace

TEST_CASE("fft along each dim and sets of dims of a 3-d array, sharded along each dim") {
  const Shape<3> shape{6, 5, 7};
  const auto host = random_input<complex<double>>(6 * 5 * 7);
  const std::vector<std::vector<int>> sets = {{0}, {1}, {2}, {0, 1}, {1, 2}, {0, 2}, {0, 1, 2}};
  for (const auto& devs : device_sets()) {
    for (int sd = 0; sd < 3; ++sd) {
      auto x = from_host(std::span<const complex<double>>(host), shape, shard(sd, devs));
      for (const auto& ds : sets) {
        std::string what = "dims {";
        for (int k : ds) what += std::to_string(k) + " ";
        what += "}, sharded along " + std::to_string(sd) + " over " + set_name(devs);
        ReduceDims d{{}, int(ds.size())};
        for (std::size_t i = 0; i < ds.size(); ++i) d.d[i] = ds[i];
        auto X = fft(x, d);
        CHECK(X.layout().shard_dim == x.layout().shard_dim);
        const auto want = dft_dims(as_cd(host), as_vec(shape), ds, -1);
        check_spectrum(to_host(X), want, 1e-15, "fft, " + what);
        auto back = dft_dims(as_cd(to_host(X)), as_vec(shape), ds, +1);
        double n = 1;
        for (int k : ds) n *= double(shape[k]);
        for (auto& v : back) v /= n;
        check_spectrum(to_host(ifft(X, d)), back, 1e-15, "ifft, " + what);
        check_spectrum(to_host(ifft(X, d)), as_cd(host), 1e-15, "round trip, " + what);
      }
      check_spectrum(to_host(fftn(x)), dft_dims(as_cd(host), as_vec(shape), {0, 1, 2}, -1), 1e-15, "fftn");
      check_spectrum(to_host(fft2(x)), dft_dims(as_cd(host), as_vec(shape), {0, 1}, -1), 1e-15, "fft2 of a batch");
      check_spectrum(to_host(ifftn(fftn(x))), as_cd(host), 1e-15, "ifftn(fftn(x))");
    }
  }
}

TEST_CASE("fft2 of float matrices equals the composition of 1-d transforms, sharded equals single-device") {
  for (const auto& devs : device_sets()) {
    for (auto [m, n] : {std::pair<index_t, index_t>{16, 16}, {17, 9}, {1, 8}, {8, 1}, {0, 4}, {31, 64}}) {
      const auto host = random_values<float>(static_cast<std::size_t>(m * n));
      auto one = from_host(std::span<const float>(host), {m, n}, on(devs[0]));
      const auto ref = to_host(fft2(one));
      check_spectrum(ref, dft_dims(as_cd(host), {m, n}, {0, 1}, -1), 2e-7, "fft2 on one device");
      for (int sd = 0; sd < 2; ++sd) {
        auto x = from_host(std::span<const float>(host), {m, n}, shard(sd, devs));
        auto X = fft2(x);
        static_assert(std::is_same_v<decltype(X), Array<complex<float>, 2>>);
        check_spectrum(to_host(X), as_cd(ref), 2e-7, "sharded along " + std::to_string(sd) + " vs one device");
        check_spectrum(to_host(fft(fft(x, dims(0)), dims(1))), as_cd(ref), 2e-7, "fft along 0 then 1");
        check_spectrum(to_host(ifft2(X)), as_cd(host), 2e-7, "ifft2(fft2(x))");
      }
    }
  }
}

TEST_CASE("rfft and irfft along dims, the halved dim sharded or not") {
  const index_t m = 9, n = 10;
  const auto host = random_values<double>(static_cast<std::size_t>(m * n));
  for (const auto& devs : device_sets()) {
    for (int sd = 0; sd < 2; ++sd) {
      auto x = from_host(std::span<const double>(host), {m, n}, shard(sd, devs));
      for (int f = 0; f < 2; ++f) {
        const std::string what = "halving dim " + std::to_string(f) + ", sharded along " + std::to_string(sd) +
                                 " over " + set_name(devs);
        const int g = 1 - f;
        // rfft along f alone, then along both (f first listed: Julia's rfft(A, dims)).
        for (bool both : {false, true}) {
          auto X = both ? rfft(x, dims(f, g)) : rfft(x, dims(f));
          const index_t len_f = f == 0 ? m : n, h = len_f / 2 + 1;
          const std::vector<index_t> hs = f == 0 ? std::vector<index_t>{h, n} : std::vector<index_t>{m, h};
          REQUIRE(X.shape()[f] == h);
          CHECK(X.layout().shard_dim == x.layout().shard_dim);
          auto full = dft_dims(as_cd(host), {m, n}, both ? std::vector<int>{f, g} : std::vector<int>{f}, -1);
          std::vector<cd> want(static_cast<std::size_t>(hs[0] * hs[1]));
          for (index_t j = 0; j < hs[1]; ++j)
            for (index_t i = 0; i < hs[0]; ++i) want[i + hs[0] * j] = full[i + m * j];
          const std::string call = both ? "rfft(x, dims(f, g)), " : "rfft(x, dims(f)), ";
          check_spectrum(to_host(X), want, 1e-15, call + what);
          auto y = both ? irfft(X, len_f, dims(f, g)) : irfft(X, len_f, dims(f));
          CHECK(y.layout().shard_dim == x.layout().shard_dim);
          check_spectrum(to_host(y), as_cd(host), 1e-15, "irfft round trip, " + what);
        }
      }
    }
  }
}

TEST_CASE("replicated, single-device, strided-view and half inputs") {
  const auto host = random_values<float>(8 * 6);
  for (const auto& devs : device_sets()) {
    auto one = from_host(std::span<const float>(host), {8, 6}, on(devs[0]));
    const auto ref = to_host(fft(one, dims(0)));
    auto r = from_host(std::span<const float>(host), {8, 6}, replicate(devs));
    auto R = fft(r, dims(0));
    CHECK(R.layout().replicated == r.layout().replicated);
    using CL = tessera::detail::Layout<complex<float>, 2>;
    for (std::size_t p = 0; p < R.layout().parts.size(); ++p) {
      // Every replica holds the whole transform: read each one alone.
      auto single = std::make_shared<CL>(R.layout());
      single->parts = {R.layout().parts[p]};
      single->replicated = false;
      const Array<complex<float>, 2> replica(std::shared_ptr<const CL>(std::move(single)));
      check_spectrum(to_host(replica), as_cd(ref), 2e-7, "replica " + std::to_string(p));
    }
    // A strided view (every other row, columns reversed) of a sharded array.
    auto s = from_host(std::span<const float>(host), {8, 6}, shard(1, devs));
    auto v = s(range(0, 8, 2), range(5, -1, -1));
    std::vector<cd> vh(4 * 6);
    for (index_t j = 0; j < 6; ++j)
      for (index_t i = 0; i < 4; ++i) vh[i + 4 * j] = cd(host[2 * i + 8 * (5 - j)], 0);
    check_spectrum(to_host(fft(v, dims(0, 1))), dft_dims(vh, {4, 6}, {0, 1}, -1), 2e-7, "fft of a strided view");
    // half computes in complex<float>.
    std::vector<half> hh(host.size());
    for (std::size_t i = 0; i < host.size(); ++i) hh[i] = half(host[i]);
    auto xh = from_host(std::span<const half>(hh), {8, 6}, shard(1, devs));
    auto Xh = fft(xh, dims(0));
    static_assert(std::is_same_v<decltype(Xh), Array<complex<float>, 2>>);
    std::vector<cd> hv(hh.size());
    for (std::size_t i = 0; i < hh.size(); ++i) hv[i] = cd(float(hh[i]), 0);
    check_spectrum(to_host(Xh), dft_dims(hv, {8, 6}, {0}, -1), 2e-7, "fft of half");
    // fftshift along one dim of a matrix sharded along it.
    auto sh = to_host(fftshift(s, dims(1)));
    for (index_t j = 0; j < 6; ++j)
      for (index_t i = 0; i < 8; ++i) CHECK(sh[i + 8 * ((j + 3) % 6)] == host[i + 8 * j]);
  }
}

TEST_CASE("a larger 2-d transform sharded over the devices equals the single-device one") {
  const index_t m = 256, n = 96;
  const auto host = random_input<complex<float>>(static_cast<std::size_t>(m * n));
  for (const auto& devs : device_sets()) {
    auto one = from_host(std::span<const complex<float>>(host), {m, n}, on(devs[0]));
    const auto ref = as_cd(to_host(fft2(one)));
    for (int sd = 0; sd < 2; ++sd) {
      auto x = from_host(std::span<const complex<float>>(host), {m, n}, shard(sd, devs));
      check_spectrum(to_host(fft2(x)), ref, 2e-7, "sharded along " + std::to_string(sd) + " on " + set_name(devs));
      check_spectrum(to_host(ifft2(fft2(x))), as_cd(host), 2e-7, "round trip");
    }
  }
}

TEST_CASE("batched host passes cut over the host threads give the same transform") {
  // 512 x 101 = 51712 elements: with 3 host threads a pass is cut into 3 uneven pieces (34, 34, 33
  // columns along dim 0; 171, 171, 170 rows along dim 1). GPUs ignore the setting.
  const int saved = tessera::detail::rt::host_threads();
  tessera::detail::rt::set_host_threads(3);
  const index_t m = 512, n = 101;
  const auto host = random_input<complex<double>>(static_cast<std::size_t>(m * n));
  for (const auto& devs : device_sets()) {
    auto x = from_host(std::span<const complex<double>>(host), {m, n}, on(devs[0]));
    for (int d = 0; d < 2; ++d) {
      check_spectrum(to_host(fft(x, dims(d))), dft_along(as_cd(host), {m, n}, d, -1), 1e-15,
                     "along dim " + std::to_string(d) + " on " + set_name(devs));
    }
    break;  // one device set: the cut is per device
  }
  tessera::detail::rt::set_host_threads(saved);
}

TEST_CASE("rfft/irfft of a 3-d array along three dims with norms, half input, real input to irfft") {
  const Shape<3> shape{5, 8, 6};
  const auto host = random_values<double>(5 * 8 * 6);
  const auto full = dft_dims(as_cd(host), as_vec(shape), {1, 0, 2}, -1);
  const index_t h = 8 / 2 + 1;
  std::vector<cd> want(static_cast<std::size_t>(5 * h * 6));
  for (index_t k = 0; k < 6; ++k)
    for (index_t j = 0; j < h; ++j)
      for (index_t i = 0; i < 5; ++i) want[i + 5 * (j + h * k)] = full[i + 5 * (j + 8 * k)] / double(5 * 8 * 6);
  for (const auto& devs : device_sets()) {
    for (int sd = 0; sd < 3; ++sd) {
      const std::string what = "sharded along " + std::to_string(sd) + " over " + set_name(devs);
      auto x = from_host(std::span<const double>(host), shape, shard(sd, devs));
      auto X = rfft(x, dims(1, 0, 2), fft_norm::forward);  // dim 1 halved
      REQUIRE(X.shape() == Shape<3>{5, h, 6});
      check_spectrum(to_host(X), want, 1e-15, "rfft, norm forward, " + what);
      check_spectrum(to_host(irfft(X, 8, dims(1, 0, 2), fft_norm::forward)), as_cd(host), 1e-15,
                     "irfft, norm forward, " + what);
    }
    // half input computes in float; a real array given to irfft is a spectrum with zero imaginary parts.
    std::vector<half> hh(8);
    std::vector<double> hv(8);
    for (int i = 0; i < 8; ++i) hh[i] = half(float(i) - 3.5f), hv[i] = double(float(hh[i]));
    auto xh = from_host(std::span<const half>(hh), {8}, shard(0, devs));
    auto Xh = rfft(xh);
    static_assert(std::is_same_v<decltype(Xh), Array<complex<float>, 1>>);
    const auto fh = dft(as_cd(hv));
    check_spectrum(to_host(Xh), std::vector<cd>(fh.begin(), fh.begin() + 5), 2e-7, "rfft of half");
    std::vector<double> spec = {4, 1, 0, 2, 3};
    auto s = from_host(std::span<const double>(spec), {5}, shard(0, devs));
    std::vector<cd> herm(8);
    for (int k = 0; k < 5; ++k) herm[k] = spec[k];
    for (int k = 5; k < 8; ++k) herm[k] = spec[8 - k];
    auto back = dft(herm, +1);
    for (auto& v : back) v /= 8.0;
    auto y = irfft(s, 8);
    static_assert(std::is_same_v<decltype(y), Array<double, 1>>);
    check_spectrum(to_host(y), back, 1e-15, "irfft of a real array");
  }
}
