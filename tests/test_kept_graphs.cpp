// SPDX-License-Identifier: Apache-2.0
// Kernels launched as kept one-node CUDA graphs (backend/runtime/kept_graphs.cpp): from a launch
// shape's second launch on, its kernel runs as a graph kept for it, whose parameters are set again
// only when they change. These tests check, against plain loops on the host, what could go wrong
// with that: one shape launched over changing arrays, scalars and sizes (parameters set again or
// not), more shapes than are kept (graphs given up and made again), reductions to the host and
// along dims (arrays are column-major, as from_host reads them), a capture between plain launches
// (a capture records plain launches, and the kept graphs go on after it), user kernels
// (compiled by NVRTC, compared by their argument pack's bytes) in a loop, and Jacobi sweeps (the
// run-time compiled stencils, two graphs per shape for the two arrays). On host devices the same
// programs check the results; the `.driver` variant runs them with TESSERA_GRAPH_LAUNCH=0 (every
// launch through cuLaunchKernel).
#include "test_support.hpp"
#include <backend/runtime/runtime.hpp>  // rt::graph_launches
#include <tessera/kernel.hpp>           // user kernels: not in the umbrella header

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <vector>

using namespace tessera;
using namespace tessera_test;

namespace {

// Whether this run should launch kept graphs: the CUDA variant with TESSERA_GRAPH_LAUNCH not 0.
bool graphs_expected() {
  const char* v = std::getenv("TESSERA_GRAPH_LAUNCH");
  return cuda_variant() && !(v != nullptr && std::atoi(v) == 0);
}

// The check that the tests went through the path they are about: graphs were launched, or none
// where they are off.
void check_graph_launches(std::uint64_t before) {
  if (graphs_expected()) CHECK(detail::rt::graph_launches() > before);
  else CHECK(detail::rt::graph_launches() == before);
}

// `count` arrays of n fresh random floats sharded along dim 0 over ds, and their host values.
struct random_arrays {
  std::vector<std::vector<float>> values;
  std::vector<Array<float, 1>> arrays;
  random_arrays(int count, index_t n, const DeviceSet& ds) {
    for (int i = 0; i < count; ++i) {
      values.push_back(random_values<float>(static_cast<std::size_t>(n)));
      arrays.push_back(from_host(values.back(), {n}, shard(0, ds)));
    }
  }
};

double host_sum(const std::vector<float>& v) {
  double s = 0;
  for (float x : v) s += x;
  return s;
}

}  // namespace

TEST_CASE("one launch shape over changing arrays and scalars") {
  if (skip_without_gpu()) return;
  const std::uint64_t before = detail::rt::graph_launches();
  for (const auto& ds : device_sets()) {
    for (index_t n : {index_t(1), index_t(7), index_t(1023), index_t(1025), index_t(1) << 16, (index_t(1) << 20) + 1}) {
      INFO(set_name(ds) << ", n = " << n);
      const auto bv = random_values<float>(static_cast<std::size_t>(n));
      const auto b = from_host(bv, {n}, shard(0, ds));
      random_arrays r(3, n, ds);
      const auto& avs = r.values;
      const auto& as = r.arrays;
      auto c = zeros<float>({n}, shard(0, ds));
      std::vector<float> want(static_cast<std::size_t>(n));
      // Rounds over the arrays, then the same arrays again (parameters unchanged), each with its
      // own scalar (parameters changed).
      for (int round = 0; round < 3; ++round) {
        for (int i = 0; i < 3; ++i) {
          const int pick = round == 2 ? 1 : i;
          const float s = 0.5f + static_cast<float>(round * 3 + i);
          c = as[static_cast<std::size_t>(pick)] * s - b;
          for (std::size_t k = 0; k < want.size(); ++k) want[k] = avs[static_cast<std::size_t>(pick)][k] * s - bv[k];
          INFO("round " << round << ", array " << pick);
          check_all_close(to_host(c), want);
          const double got = sum(as[static_cast<std::size_t>(pick)]);
          CHECK(close(got, host_sum(avs[static_cast<std::size_t>(pick)]), 1e-5, 1e-4 * (1 + std::sqrt(double(n)))));
        }
      }
    }
  }
  check_graph_launches(before);
}

TEST_CASE("more launch shapes than are kept, several times over") {
  if (skip_without_gpu()) return;
  const std::uint64_t before = detail::rt::graph_launches();
  for (const auto& ds : device_sets()) {
    // 90 sizes from 1 element to about 2.9M: many grids (and, between them, sizes that share one).
    std::vector<index_t> sizes;
    for (index_t k = 0; k < 90; ++k) sizes.push_back(1 + k * k * 359);
    std::vector<std::vector<float>> avs;
    std::vector<Array<float, 1>> as;
    for (index_t n : sizes) {
      avs.push_back(random_values<float>(static_cast<std::size_t>(n)));
      as.push_back(from_host(avs.back(), {n}, shard(0, ds)));
    }
    for (int round = 0; round < 3; ++round) {
      for (std::size_t i = 0; i < sizes.size(); ++i) {
        INFO(set_name(ds) << ", n = " << sizes[i] << ", round " << round);
        const float s = 1.0f + static_cast<float>(round);
        as[i] = as[i] * s + 1.0f;
        for (float& x : avs[i]) x = x * s + 1.0f;
        if (round == 2 || i % 7 == 0) check_all_close(to_host(as[i]), avs[i]);
      }
    }
    for (std::size_t i = 0; i < sizes.size(); ++i) check_all_close(to_host(as[i]), avs[i]);
  }
  check_graph_launches(before);
}

TEST_CASE("sums along dims and to the host, repeated over changing matrices") {
  for (const auto& ds : device_sets()) {
    for (const Dims& shape : {Dims{1, 1}, Dims{3, 257}, Dims{255, 33}, Dims{1024, 1025}}) {
      INFO(set_name(ds) << ", " << dims_string(shape));
      const index_t rows = shape[0], cols = shape[1];
      for (int i = 0; i < 3; ++i) {
        const auto mv = random_values<float>(static_cast<std::size_t>(rows * cols));
        const auto m = from_host(mv, {rows, cols}, shard(0, ds));
        std::vector<float> by_row(static_cast<std::size_t>(rows), 0.0f);
        double all = 0;
        for (index_t r = 0; r < rows; ++r)
          for (index_t q = 0; q < cols; ++q) {
            by_row[static_cast<std::size_t>(r)] += mv[static_cast<std::size_t>(r + q * rows)];
            all += mv[static_cast<std::size_t>(r + q * rows)];
          }
        for (int again = 0; again < 2; ++again) {
          check_all_close(to_host(sum(m, dims(1))), by_row, 1e-4, 1e-4 * std::sqrt(double(cols)));
          const double got = sum(m);
          CHECK(close(got, all, 1e-5, 1e-4 * (1 + std::sqrt(double(rows * cols)))));
        }
      }
    }
  }
}

TEST_CASE("a capture between plain launches of the same operations") {
  if (skip_without_gpu()) return;
  const std::uint64_t before = detail::rt::graph_launches();
  for (const auto& ds : device_sets()) {
    for (index_t n : {index_t(1), index_t(1025), (index_t(1) << 18) - 1}) {
      INFO(set_name(ds) << ", n = " << n);
      const auto av = random_values<float>(static_cast<std::size_t>(n));
      const auto a = from_host(av, {n}, shard(0, ds));
      auto b = zeros<float>({n}, shard(0, ds)), b2 = zeros<float>({n}, shard(0, ds));
      auto body = [&](Array<float, 1>& x) {
        x = 0.5f * x + a;
        x = sin(x) - 0.25f * a;
      };
      // Plain launches keep the shapes' graphs; the capture records the same shapes; plain again.
      body(b2);
      body(b2);
      body(b);
      body(b);
      auto g = capture([&] { body(b); });
      g.replay(2);
      body(b2);
      body(b2);
      CHECK(to_host(b) == to_host(b2));
      body(b);
      g.replay();
      body(b2);
      body(b2);
      CHECK(to_host(b) == to_host(b2));
      std::vector<float> want(static_cast<std::size_t>(n), 0.0f);
      for (int k = 0; k < 6; ++k)
        for (std::size_t i = 0; i < want.size(); ++i) {
          want[i] = 0.5f * want[i] + av[i];
          want[i] = std::sin(want[i]) - 0.25f * av[i];
        }
      check_all_close(to_host(b), want, 1e-4, 1e-4);
    }
  }
  check_graph_launches(before);
}

TEST_CASE("user kernels in a loop over changing arrays and scalars") {
  if (skip_without_gpu()) return;
  const std::uint64_t before = detail::rt::graph_launches();
  ElementwiseKernel affine("float32 x, float32 a, float32 b", "float32 z", "z = a * x + b", "kept_affine");
  ReductionKernel sumsq("float64 x", "float64 y", "x * x", "a + b", "y = a", "0", "kept_sumsq");
  for (const auto& ds : device_sets()) {
    for (index_t n : {index_t(1), index_t(4097), (index_t(1) << 20) + 1}) {
      INFO(set_name(ds) << ", n = " << n);
      random_arrays r(2, n, ds);
      const auto& xvs = r.values;
      auto& xs = r.arrays;
      auto z = zeros<float>({n}, shard(0, ds));
      for (int k = 0; k < 6; ++k) {
        const auto& xv = xvs[static_cast<std::size_t>(k % 2)];
        const float a = 0.25f * static_cast<float>(k + 1), b = static_cast<float>(k) - 2.0f;
        affine(xs[static_cast<std::size_t>(k % 2)], a, b, z);
        std::vector<float> want(xv.size());
        for (std::size_t i = 0; i < want.size(); ++i) want[i] = a * xv[i] + b;
        INFO("step " << k);
        check_all_close(to_host(z), want, 1e-6, 1e-6);
        const auto dv = random_values<double>(static_cast<std::size_t>(n));
        const auto d = from_host(dv, {n}, shard(0, ds));
        double want_sq = 0;
        for (double e : dv) want_sq += e * e;
        CHECK(close(sumsq(d), want_sq, 1e-12, 1e-9));
      }
    }
  }
  check_graph_launches(before);
}

TEST_CASE("Jacobi sweeps in a loop (the run-time compiled stencils)") {
  // u -> v -> u over a square grid, columns split with halo(1): on GPUs the sweeps are the run-time
  // compiled stencil kernels, whose graphs alternate between two sets of parameter words.
  for (const auto& ds : device_sets()) {
    for (index_t n : {index_t(9), index_t(64), index_t(127), index_t(257), index_t(2049)}) {
      INFO(set_name(ds) << ", n = " << n);
      const auto uv = random_values<float>(static_cast<std::size_t>(n * n));
      auto u = from_host(uv, {n, n}, shard(1, halo(1), ds));
      auto v = zeros<float>({n, n}, shard(1, halo(1), ds));
      update_halo(u);
      const auto I = range(1, n - 1), lo = range(0, n - 2), hi = range(2, n);
      constexpr int sweeps = 16;
      const std::uint64_t before = detail::rt::graph_launches(), sets_before = detail::rt::graph_parameter_sets();
      for (int k = 0; k < sweeps / 2; ++k) {
        v(I, I) = 0.25f * (u(lo, I) + u(hi, I) + u(I, lo) + u(I, hi));
        update_halo(v);
        u(I, I) = 0.25f * (v(lo, I) + v(hi, I) + v(I, lo) + v(I, hi));
        update_halo(u);
      }
      // On one GPU a sweep is one kernel (and its edges'): its first launch goes directly, the
      // second makes its graph, the third sets the other array's parameters, the fourth (the
      // first set again) goes directly and makes the second graph; from then on each set of
      // parameters has its graph, launched without setting them.
      if (ds.size() == 1 && graphs_expected()) {
        CHECK(detail::rt::graph_launches() - before >= sweeps - 2);
        CHECK(detail::rt::graph_parameter_sets() - sets_before <= 2);
      } else if (!graphs_expected()) {
        CHECK(detail::rt::graph_launches() == before);
      }
      std::vector<float> hu = uv, hv(uv.size(), 0.0f);
      const auto at = [n](std::vector<float>& a, index_t i, index_t j) -> float& {
        return a[static_cast<std::size_t>(i + j * n)];
      };
      for (int k = 0; k < sweeps; ++k) {
        std::vector<float>& from = k % 2 ? hv : hu;
        std::vector<float>& to = k % 2 ? hu : hv;
        for (index_t j = 1; j < n - 1; ++j)
          for (index_t i = 1; i < n - 1; ++i)
            at(to, i, j) = 0.25f * (((at(from, i - 1, j) + at(from, i + 1, j)) + at(from, i, j - 1)) + at(from, i, j + 1));
      }
      check_all_close(to_host(u), hu, 1e-5, 1e-6);
      check_all_close(to_host(v), hv, 1e-5, 1e-6);
    }
  }
}
