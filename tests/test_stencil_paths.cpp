// SPDX-License-Identifier: Apache-2.0
// Stencils over shifted views: every alignment of the output and of each operand along the
// contiguous dim, rows long enough for the row kernels of backend/cuda/executor.cuh (128 elements
// and more; the row-vector kernel reads each operand as 16-byte chunks and does the unaligned ends
// one by one; the marching kernel walks the last dim in chunks), element types of 2, 4 and 8
// bytes, 2-D and 3-D, operands broadcast along either
// dim, and the halo'd Jacobi sweep over every device. Every result is compared with plain loops on
// the host, on fresh random data.
#include "half_support.hpp"

#include <algorithm>
#include <cstdint>
#include <vector>

using namespace tessera;
using namespace tessera_test;

namespace {

template <class T>
double tolerance() {
  if constexpr (std::is_same_v<T, half>) return 4e-3;
  if constexpr (std::is_same_v<T, float>) return 1e-5;
  return 1e-12;
}

template <class T>
std::vector<T> values(std::size_t n) {
  std::vector<T> v(n);
  const auto d = random_values<double>(n, -2.0, 2.0);
  for (std::size_t i = 0; i < n; ++i) v[i] = static_cast<T>(std::is_integral_v<T> ? std::round(d[i] * 8) : d[i]);
  return v;
}

// out(o + i, j + 1) = 0.5 u(s1 + i, j) + u(s2 + i, j + 1) - u(s3 + i, j + 2) + u(s4 + i, j + 1)
// + w(i) + z(j) for i < m, j < c - 2: four shifted views of one array (every s from 0 to 4 for some
// case), a column w (contiguous along dim 0) and a row z (broadcast along dim 0): six operands,
// which takes the row-vector kernel on GPUs. Elements of out outside the written window keep
// their values.
template <class T>
void check_shifts(const DeviceSet& ds, const Placement& p, index_t r, index_t c, int o, int s1, int s2, int s3, int s4) {
  INFO("shape " << r << " x " << c << ", output offset " << o << ", shifts " << s1 << " " << s2 << " " << s3 << " "
                << s4);
  const index_t m = r - 4;
  const auto hu = values<T>(static_cast<std::size_t>(r * c));
  const auto hout = values<T>(static_cast<std::size_t>(r * c));
  const auto hw = values<T>(static_cast<std::size_t>(m));
  const auto hz = values<T>(static_cast<std::size_t>(c - 2));
  auto u = from_host(hu, {r, c}, p);
  auto out = from_host(hout, {r, c}, p);
  auto w = from_host(hw, {m, index_t(1)}, p.kind == Placement::kind_t::shard ? replicate(ds) : p);
  auto z = from_host(hz, {index_t(1), c - 2}, p.kind == Placement::kind_t::shard ? replicate(ds) : p);
  const auto I = [&](int s) { return range(s, s + m); };
  out(I(o), range(1, c - 1)) = T(0.5) * u(I(s1), range(0, c - 2)) + u(I(s2), range(1, c - 1)) -
                               u(I(s3), range(2, c)) + u(I(s4), range(1, c - 1)) + w + z;
  std::vector<double> want(hout.begin(), hout.end());
  auto at = [&](const std::vector<T>& v, index_t i, index_t j) { return static_cast<double>(v[static_cast<std::size_t>(i + r * j)]); };
  for (index_t j = 0; j < c - 2; ++j) {
    for (index_t i = 0; i < m; ++i) {
      // The same operations in the same order as the device, in the compute type.
      using C = std::conditional_t<std::is_same_v<T, half>, float, T>;
      const C v = static_cast<C>(C(0.5) * static_cast<C>(at(hu, s1 + i, j))) + static_cast<C>(at(hu, s2 + i, j + 1)) -
                  static_cast<C>(at(hu, s3 + i, j + 2)) + static_cast<C>(at(hu, s4 + i, j + 1)) +
                  static_cast<C>(static_cast<double>(hw[i])) +
                  static_cast<C>(static_cast<double>(hz[j]));
      want[static_cast<std::size_t>(o + i + r * (j + 1))] = static_cast<double>(static_cast<T>(v));
    }
  }
  const auto got = to_host(out);
  check_all_close(std::vector<double>(got.begin(), got.end()), want, tolerance<T>(), tolerance<T>());
}

template <class T>
void shifts_for_type() {
  for (const auto& ds : device_sets()) {
    INFO("device set " << set_name(ds));
    for (const Placement& p : {on(ds.back()), replicate(ds)}) {
      for (index_t r : {index_t(131), index_t(132), index_t(133), index_t(134), index_t(261), index_t(1031)}) {
        // Every output offset with every operand shift at least once, both in step and apart.
        for (int o = 0; o < 5; ++o) check_shifts<T>(ds, p, r, 5, o, (o + 1) % 5, (o + 2) % 5, (o + 3) % 5, (o + 4) % 5);
        check_shifts<T>(ds, p, r, 4, 0, 0, 0, 0, 0);
        check_shifts<T>(ds, p, r, 6, 3, 1, 4, 2, 0);
      }
      check_shifts<T>(ds, p, 2052, 9, 1, 0, 2, 3, 4);
      // More columns than one block of the marching kernel walks (16), the last chunk partial.
      check_shifts<T>(ds, p, 261, 71, 2, 1, 3, 0, 4);
    }
  }
}

}  // namespace

TEST_CASE("stencils: shifted views at every alignment, float") { shifts_for_type<float>(); }
TEST_CASE("stencils: shifted views at every alignment, double") { shifts_for_type<double>(); }
TEST_CASE("stencils: shifted views at every alignment, half") { shifts_for_type<half>(); }
TEST_CASE("stencils: shifted views at every alignment, int32") { shifts_for_type<std::int32_t>(); }

TEST_CASE("stencils: 3-D 7-point diffusion against loops") {
  for (const auto& ds : device_sets()) {
    for (const auto& [n, ny] : {std::pair<index_t, index_t>{3, 5}, {130, 5}, {133, 5}, {133, 37}}) {
      // Every device holds at least one plane (the halo's width); 41 planes: more than one block
      // of the marching kernel walks (16), the last chunk partial.
      const index_t g = static_cast<index_t>(ds.size());
      for (index_t nz : {std::max<index_t>(3, g), 2 * g + 1, index_t(41)}) {
        INFO("device set " << set_name(ds) << ", grid " << n << " x " << ny << " x " << nz);
        const auto hu = values<double>(static_cast<std::size_t>(n * ny * nz));
        const auto hc = values<double>(static_cast<std::size_t>(n * ny * nz));
        auto u = from_host(hu, {n, ny, nz}, shard(2, halo(1), ds));
        auto ci = from_host(hc, {n, ny, nz}, shard(2, halo(1), ds));
        auto v = zeros<double>({n, ny, nz}, shard(2, halo(1), ds));
        const auto I = range(1, n - 1), J = range(1, ny - 1), K = range(1, nz - 1);
        v(I, J, K) = u(I, J, K) + 0.1 * ci(I, J, K) *
                                      (u(range(0, n - 2), J, K) + u(range(2, n), J, K) + u(I, range(0, ny - 2), K) +
                                       u(I, range(2, ny), K) + u(I, J, range(0, nz - 2)) + u(I, J, range(2, nz)) -
                                       6.0 * u(I, J, K));
        std::vector<double> want(static_cast<std::size_t>(n * ny * nz), 0.0);
        auto id = [&](index_t i, index_t j, index_t k) { return static_cast<std::size_t>(i + n * (j + ny * k)); };
        for (index_t k = 1; k < nz - 1; ++k)
          for (index_t j = 1; j < ny - 1; ++j)
            for (index_t i = 1; i < n - 1; ++i)
              want[id(i, j, k)] = hu[id(i, j, k)] + 0.1 * hc[id(i, j, k)] *
                                                        (hu[id(i - 1, j, k)] + hu[id(i + 1, j, k)] + hu[id(i, j - 1, k)] +
                                                         hu[id(i, j + 1, k)] + hu[id(i, j, k - 1)] + hu[id(i, j, k + 1)] -
                                                         6.0 * hu[id(i, j, k)]);
        check_all_close(to_host(v), want, 1e-12, 1e-12);
      }
    }
  }
}

TEST_CASE("stencils: Jacobi sweeps with halos against loops") {
  for (const auto& ds : device_sets()) {
    for (index_t n : {index_t(129), index_t(256), index_t(301)}) {
      INFO("device set " << set_name(ds) << ", n = " << n);
      auto h = values<float>(static_cast<std::size_t>(n * n));
      auto u = from_host(h, {n, n}, shard(1, halo(1), ds));
      Array<float, 2> v = u;
      const auto I = range(1, n - 1);
      for (int it = 0; it < 3; ++it) {
        v(I, I) = 0.25f * (u(range(0, n - 2), I) + u(range(2, n), I) + u(I, range(0, n - 2)) + u(I, range(2, n)));
        update_halo(v);
        std::swap(u, v);
        std::vector<float> next = h;
        auto at = [&](index_t i, index_t j) { return h[static_cast<std::size_t>(i + n * j)]; };
        for (index_t j = 1; j < n - 1; ++j)
          for (index_t i = 1; i < n - 1; ++i)
            next[static_cast<std::size_t>(i + n * j)] = 0.25f * (at(i - 1, j) + at(i + 1, j) + at(i, j - 1) + at(i, j + 1));
        // v (now u) started as a copy of the first u: its border keeps the initial values.
        h = next;
        check_all_close(to_host(u), h, 1e-6, 1e-6);
      }
    }
  }
}
