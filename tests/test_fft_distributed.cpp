// SPDX-License-Identifier: Apache-2.0
// The fft family across processes (tessera/distributed.hpp): the same transforms as test_fft_nd.cpp
// over devices() when those span MPI ranks (ctest .mpi2 and .mpi3 on host devices, .mpi2.cuda on
// GPUs), against the naive DFT that every rank computes alike from fixed seeds. The transform along
// the shard dim re-shards through copies between ranks; a sharded vector gathers on one rank's
// device. In one process (.host, .cuda) it runs over the default devices.
#include "fft_reference.hpp"

#include <tessera/distributed.hpp>

#include <random>

using namespace tessera_test;

namespace {

// Before any other Tessera call (doctest's main makes none): the device table spans the ranks.
const bool initialized = [] {
  distributed::init();
  return true;
}();

std::vector<complex<double>> seeded(std::size_t n, std::uint64_t seed) {
  std::mt19937_64 g(seed);
  std::uniform_real_distribution<double> d(-1, 1);
  std::vector<complex<double>> v(n);
  for (auto& x : v) x = complex<double>(d(g), d(g));
  return v;
}

}  // namespace

TEST_CASE("fft2, fft along the shard dim, rfft/irfft and a sharded vector across ranks") {
  if (skip_without_gpu()) return;
  REQUIRE(initialized);
  const DeviceSet D = devices();
  const index_t m = 12, n = 10;
  const auto host = seeded(std::size_t(m * n), 21);
  const auto want = dft_along(dft_along(as_cd(host), {m, n}, 0, -1), {m, n}, 1, -1);
  for (int sd = 0; sd < 2; ++sd) {
    auto x = from_host(std::span<const complex<double>>(host), {m, n}, shard(sd, D));
    check_spectrum(to_host(fft2(x)), want, 1e-15, "fft2 sharded along " + std::to_string(sd));
    check_spectrum(to_host(ifft2(fft2(x))), as_cd(host), 1e-15, "round trip");
    check_spectrum(to_host(fft(x, dims(sd))), dft_along(as_cd(host), {m, n}, sd, -1), 1e-15, "along the shard dim");
    // rfft along the shard dim of the real parts, and back.
    std::vector<double> re(host.size());
    for (std::size_t i = 0; i < host.size(); ++i) re[i] = host[i].real();
    auto r = from_host(std::span<const double>(re), {m, n}, shard(sd, D));
    auto R = rfft(r, dims(sd));
    CHECK(R.layout().shard_dim == r.layout().shard_dim);
    check_spectrum(to_host(irfft(R, sd == 0 ? m : n, dims(sd))), as_cd(re), 1e-15, "irfft(rfft) along the shard dim");
  }
  const auto v = seeded(97, 5);
  auto x = from_host(std::span<const complex<double>>(v), {97}, shard(0, D));
  check_spectrum(to_host(fft(x)), dft(as_cd(v)), 1e-15, "a sharded vector");
}
