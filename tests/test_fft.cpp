// SPDX-License-Identifier: Apache-2.0
// The fft family on vectors (docs/semantics.md, "FFT"): fft, ifft, rfft, irfft against a naive DFT
// for small sizes (0, 1, odd, primes, powers of two +- 1), Parseval, round trips, the three norms,
// fftfreq, rfftfreq, fftshift, ifftshift, and bad input. Every device set of device_sets(): a
// vector sharded over several devices is transformed through its first device.
#include "fft_reference.hpp"

using namespace tessera_test;

namespace {

const std::vector<index_t> sizes = {0, 1, 2, 3, 5, 7, 8, 13, 15, 16, 17, 31, 32, 33, 97, 127, 128, 129, 255};

template <class T>
void vector_transforms(const DeviceSet& devs) {
  using R = tessera::detail::real_of_t<T>;
  using C = complex<R>;
  for (index_t n : sizes) {
    const auto host = random_input<T>(static_cast<std::size_t>(n));
    const auto want = dft(as_cd(host), -1);
    const std::string what = "n = " + std::to_string(n) + " on " + set_name(devs);
    auto x = from_host(std::span<const T>(host), {n}, shard(0, devs));
    Array<C, 1> X = fft(x);
    CHECK(X.layout().shard_dim == x.layout().shard_dim);
    CHECK(X.layout().devices() == x.layout().devices());
    check_spectrum(to_host(X), want, eps_of<T>(), "fft, " + what);
    // The inverse: unscaled DFT with the + sign, divided by n.
    std::vector<cd> inv = dft(as_cd(to_host(X)), +1);
    for (auto& v : inv) v /= double(n);
    check_spectrum(to_host(ifft(X)), inv, eps_of<T>(), "ifft, " + what);
    check_spectrum(to_host(ifft(X)), as_cd(host), eps_of<T>(), "ifft(fft(x)) == x, " + what);
    check_spectrum(to_host(x), as_cd(host), 0, "the input is unchanged, " + what);
  }
}

}  // namespace

TEST_CASE("fft and ifft of vectors equal a naive DFT, for every element type and device set") {
  for (const auto& devs : device_sets()) {
    vector_transforms<float>(devs);
    vector_transforms<double>(devs);
    vector_transforms<complex<float>>(devs);
    vector_transforms<complex<double>>(devs);
  }
}

TEST_CASE("norms: ortho keeps Parseval's identity, forward scales the forward transform") {
  for (const auto& devs : device_sets()) {
    for (index_t n : {1, 6, 17, 64, 1000}) {
      const auto host = random_input<complex<double>>(static_cast<std::size_t>(n));
      auto x = from_host(std::span<const complex<double>>(host), {n}, shard(0, devs));
      const auto X = to_host(fft(x, fft_norm::ortho));
      double ex = 0, eX = 0;
      for (auto& v : host) ex += std::norm(cd(v.real(), v.imag()));
      for (auto& v : X) eX += std::norm(cd(v.real(), v.imag()));
      CHECK(std::abs(ex - eX) <= 1e-12 * ex);
      auto want = dft(as_cd(host));
      for (auto& v : want) v /= double(n);
      check_spectrum(to_host(fft(x, fft_norm::forward)), want, 1e-15, "forward norm");
      check_spectrum(to_host(ifft(fft(x, fft_norm::ortho), fft_norm::ortho)), as_cd(host), 1e-15, "ortho round trip");
      check_spectrum(to_host(ifft(fft(x, fft_norm::forward), fft_norm::forward)), as_cd(host), 1e-15,
                     "forward round trip");
      // Unscaled inverse under norm "forward".
      std::vector<cd> inv = dft(as_cd(host), +1);
      check_spectrum(to_host(ifft(x, fft_norm::forward)), inv, 1e-15, "ifft with norm forward is unscaled");
    }
  }
}

TEST_CASE("rfft and irfft of vectors, odd and even n") {
  for (const auto& devs : device_sets()) {
    for (index_t n : {1, 2, 3, 4, 5, 8, 9, 16, 17, 31, 100, 127}) {
      const auto host = random_values<double>(static_cast<std::size_t>(n));
      const auto full = dft(as_cd(host));
      const std::vector<cd> want(full.begin(), full.begin() + (n / 2 + 1));
      auto x = from_host(std::span<const double>(host), {n}, shard(0, devs));
      auto X = rfft(x);
      static_assert(std::is_same_v<decltype(X), Array<complex<double>, 1>>);
      REQUIRE(X.shape()[0] == n / 2 + 1);
      check_spectrum(to_host(X), want, 1e-15, "rfft, n = " + std::to_string(n));
      auto y = irfft(X, n);
      static_assert(std::is_same_v<decltype(y), Array<double, 1>>);
      check_spectrum(to_host(y), as_cd(host), 1e-15, "irfft(rfft(x), n), n = " + std::to_string(n));
      // float input gives complex<float>
      std::vector<float> hf(host.begin(), host.end());
      auto xf = from_host(std::span<const float>(hf), {n}, shard(0, devs));
      check_spectrum(to_host(rfft(xf)), want, 2e-7, "rfft of float, n = " + std::to_string(n));
      check_spectrum(to_host(irfft(rfft(xf, fft_norm::ortho), n, fft_norm::ortho)), as_cd(host), 2e-7,
                     "float ortho round trip");
    }
  }
}

TEST_CASE("irfft ignores the imaginary parts a real signal's transform cannot have") {
  for (const auto& devs : device_sets()) {
    const index_t n = 8;
    std::vector<complex<double>> h(n / 2 + 1);
    for (std::size_t i = 0; i < h.size(); ++i) h[i] = complex<double>(double(i + 1), 0.5 * double(i));
    auto X = from_host(std::span<const complex<double>>(h), {n / 2 + 1}, shard(0, devs));
    std::vector<cd> full(n);
    for (index_t k = 0; k <= n / 2; ++k) full[k] = cd(h[k].real(), (k == 0 || k == n / 2) ? 0.0 : h[k].imag());
    for (index_t k = n / 2 + 1; k < n; ++k) full[k] = std::conj(full[n - k]);
    auto want = dft(full, +1);
    for (auto& v : want) v = cd(v.real() / double(n), 0.0);
    check_spectrum(to_host(irfft(X, n)), want, 1e-15, "irfft of a non-Hermitian DC and Nyquist");
  }
}

TEST_CASE("fftfreq and rfftfreq follow NumPy") {
  if (skip_without_gpu()) return;
  for (index_t n : {1, 2, 5, 8}) {
    const auto f = to_host(fftfreq(n, 0.5));
    REQUIRE(f.size() == std::size_t(n));
    for (index_t i = 0; i < n; ++i) {
      const index_t k = i < (n - 1) / 2 + 1 ? i : i - n;
      CHECK(f[i] == doctest::Approx(double(k) / (0.5 * double(n))));
    }
    const auto r = to_host(rfftfreq<float>(n));
    REQUIRE(r.size() == std::size_t(n / 2 + 1));
    for (index_t i = 0; i <= n / 2; ++i) CHECK(r[i] == doctest::Approx(double(i) / double(n)));
  }
  CHECK(to_host(fftfreq(4)) == std::vector<double>{0, 0.25, -0.5, -0.25});
  CHECK(to_host(fftfreq(5)) == std::vector<double>{0, 0.2, 0.4, -0.4, -0.2});
  CHECK(fftfreq(0).shape()[0] == 0);
  check_mentions(expect_error<invalid_argument>([] { (void)fftfreq(-1); }), {"fftfreq", "n >= 0"});
  check_mentions(expect_error<invalid_argument>([] { (void)fftfreq(4, 0.0); }), {"spacing"});
  check_mentions(expect_error<invalid_argument>([] { (void)rfftfreq(0); }), {"rfftfreq", "n >= 1"});
}

TEST_CASE("fftshift and ifftshift of vectors, sharded") {
  if (skip_without_gpu()) return;
  for (const auto& devs : device_sets()) {
    for (index_t n : {0, 1, 2, 5, 6, 11}) {
      std::vector<std::int32_t> h(static_cast<std::size_t>(n));
      for (index_t i = 0; i < n; ++i) h[i] = std::int32_t(i);
      auto x = from_host(std::span<const std::int32_t>(h), {n}, shard(0, devs));
      std::vector<std::int32_t> want(h.size()), back(h.size());
      for (index_t i = 0; i < n; ++i) want[(i + n / 2) % n] = h[i];  // NumPy's roll by n // 2
      CHECK(to_host(fftshift(x)) == want);
      CHECK(to_host(ifftshift(fftshift(x))) == h);
      CHECK(fftshift(x).layout().devices() == x.layout().devices());
    }
  }
  CHECK(to_host(fftshift(fftfreq(5))) == std::vector<double>{-0.4, -0.2, 0, 0.2, 0.4});
}

TEST_CASE("bad input throws named errors and leaves the arrays intact") {
  for (const auto& devs : device_sets()) {
    const auto h = random_values<float>(12);
    auto x = from_host(std::span<const float>(h), {3, 4}, shard(1, devs));
    check_mentions(expect_error<invalid_argument>([&] { (void)fft(x, dims(2)); }),
                   {"fft(x, dims(...))", "rank 2", "dimension 2", "outside"});
    check_mentions(expect_error<invalid_argument>([&] { (void)ifft(x, dims(0, 0)); }), {"ifft", "listed twice"});
    check_mentions(expect_error<invalid_argument>([&] { (void)rfft(x, dims(-1)); }), {"rfft", "dimension -1"});
    check_mentions(expect_error<invalid_argument>([&] { (void)fftshift(x, dims(5)); }), {"fftshift"});
    auto X = rfft(x, dims(0));  // 2 x 4
    const auto Xh = to_host(X);
    check_mentions(expect_error<dimension_mismatch>([&] { (void)irfft(X, 5, dims(0)); }),
                   {"irfft", "n = 5", "n/2 + 1 = 3", "found 2", "dim 0"});
    check_mentions(expect_error<invalid_argument>([&] { (void)irfft(X, 0, dims(0)); }), {"irfft", ">= 1"});
    auto empty = from_host(std::span<const float>(), {0}, shard(0, devs));
    check_mentions(expect_error<invalid_argument>([&] { (void)rfft(empty); }), {"rfft", "found 0"});
    CHECK(to_host(x) == h);
    CHECK(to_host(X) == Xh);
    // The library keeps working.
    check_spectrum(to_host(irfft(X, 3, dims(0))), as_cd(h), 2e-7, "after the errors");
    Array<float, 2> none;
    CHECK_THROWS_AS((void)fft(none, dims(0)), tessera::error);
  }
}
