// SPDX-License-Identifier: Apache-2.0
// Reductions along dims on each GPU strategy of backend/cuda/reduce.cuh (choose_access, spread): lanes per
// output, chunked partials, the vector-load paths; against plain loops. Host devices run the
// same shapes through their own loop.
#include "dims_reference.hpp"

#include <cmath>
#include <limits>

using namespace tessera;
using namespace tessera_test;

namespace {

template <int R>
std::string mask_string(const std::array<bool, R>& m) {
  std::string s;
  for (bool b : m) s += b ? '1' : '0';
  return s;
}

// Sum, maximum and a fused sum along each mask, on three placements, against plain loops.
template <class T, int R>
void check_vec_paths(const DeviceSet& ds, const Shape<R>& s, const std::vector<std::array<bool, R>>& masks) {
  auto add = [](double x, double y) { return x + y; };
  auto id = [](double x) { return x; };
  auto maxf = [](double x, double y) { return x != x || y != y ? NAN : x > y ? x : y; };
  auto v = random_values<T>(static_cast<std::size_t>(detail::volume<R>(s)));
  if constexpr (std::is_floating_point_v<T>) v[v.size() / 2 + 1] = std::numeric_limits<T>::quiet_NaN();
  std::vector<Placement> ps{on(ds[0]), shard(R - 1, ds), shard(0, ds)};
  for (std::size_t pi = 0; pi < ps.size(); ++pi) {
    const auto a = from_host(v, s, ps[pi]);
    for (const auto& mask : masks) {
      INFO("device set " << set_name(ds) << ", shape " << detail::shape_string<R>(s) << ", placement #" << pi
                         << ", element bytes " << sizeof(T) << ", mask " << mask_string<R>(mask));
      const ReduceDims d = to_dims<R>(mask);
      const auto want = fold<R>(v, s, mask, 0.0, id, add);
      check_all_close(to_host(maximum(a, d)), fold<R>(v, s, mask, -INFINITY, id, maxf), 0, 0);
      if constexpr (std::is_floating_point_v<T>) {
        // A float sum of many terms errs by a few ulps of the terms' magnitude, not of the sum: a
        // slice whose sum cancels to near 0 needs an absolute tolerance scaled by sum |x|.
        double mag = 0;
        for (double x : fold<R>(v, s, mask, 0.0, [](double x) { return x == x ? std::fabs(x) : 0.0; }, add))
          mag = std::fmax(mag, x);
        const double atol = std::fmax(1e-4, 2e-7 * mag);
        check_all_close(to_host(sum(a, d)), want, 1e-5, atol);  // NaN where its slice has it
        check_all_close(to_host(sum(a * T(2), d)), fold<R>(v, s, mask, 0.0, [](double x) { return 2 * x; }, add),
                        1e-5, 2 * atol);
      } else {
        const auto got = to_host(sum(a, d));
        static_assert(std::is_same_v<typename decltype(got)::value_type, std::int64_t>);
        check_all_close(got, want, 0, 0);
      }
    }
  }
}

}  // namespace

// Shapes whose contiguous extent is a multiple of the vector width, which GPUs read with 16-byte
// loads: lanes share an output's runs (contiguous dim reduced) or one thread folds neighbouring
// outputs (contiguous dim kept); float, int32, double and bool (4, 4, 2 and 8 per load); runs that carry
// into an outer reduced dim; chunks; a contiguous view that starts one column in; shards along
// the contiguous dim whose extents break the multiple (those shards take the scalar path).
TEST_CASE("reductions along dims on the vector-load paths") {
  for (const auto& ds : device_sets()) {
    check_vec_paths<float, 2>(ds, {4096, 300}, {{true, false}, {false, true}, {true, true}});
    check_vec_paths<float, 2>(ds, {64, 37}, {{true, false}, {false, true}});
    check_vec_paths<float, 3>(ds, {8, 3, 20001}, {{true, false, true}, {false, true, true}, {false, false, true}});
    check_vec_paths<double, 2>(ds, {6, 1001}, {{true, false}, {false, true}});
    check_vec_paths<double, 2>(ds, {2048, 129}, {{true, false}, {false, true}});
    check_vec_paths<bool, 2>(ds, {16, 999}, {{true, false}, {false, true}});
    // Neighbouring dims of one kind merge (5 x 400 kept is 2000 contiguous outputs); dims of
    // extent 1 drop out; reduced runs carry into an outer reduced dim.
    check_vec_paths<float, 3>(ds, {5, 400, 61}, {{false, false, true}, {true, true, false}, {true, false, true}});
    check_vec_paths<float, 4>(ds, {3, 4, 7, 2}, {{true, true, false, true}, {false, false, true, false}});
    check_vec_paths<float, 4>(ds, {1, 8, 1, 33}, {{false, false, true, true}, {true, false, true, false}});
    check_vec_paths<std::int32_t, 3>(ds, {12, 5, 103}, {{true, false, true}, {false, true, false}});
    // A contiguous view one column in: every column still starts at a multiple of 16 bytes.
    const index_t m = 128, n = 301;
    const auto v = random_values<float>(static_cast<std::size_t>(m * n));
    const std::vector<float> tail(v.begin() + m, v.end());
    for (const auto& p : {on(ds[0]), shard(1, ds)}) {
      INFO("device set " << set_name(ds) << ", view of a matrix one column in");
      const auto a = from_host(v, {m, n}, p);
      for (const auto& mask : {std::array<bool, 2>{true, false}, std::array<bool, 2>{false, true}}) {
        check_all_close(to_host(sum(a(_, range(1, n)), to_dims<2>(mask))),
                        fold<2>(tail, Shape<2>{m, n - 1}, mask, 0.0, [](double x) { return x; },
                                [](double x, double y) { return x + y; }),
                        1e-5, 1e-4);
      }
    }
  }
}

// Shapes that take each GPU strategy: 256 or 32 lanes per output (contiguous dim reduced), one
// thread per output (outer dims reduced), chunked partials when the outputs alone cannot fill the
// GPU, chunks that end inside a run of the first reduced dim. Host devices fold them directly.
TEST_CASE("large reductions along dims: cooperative lanes and chunked partials") {
  for (const auto& ds : device_sets()) {
    auto check2 = [&](const Shape<2>& s, std::array<bool, 2> mask) {
      const auto v = random_values<float>(static_cast<std::size_t>(detail::volume<2>(s)));
      for (const auto& p : {on(ds[0]), shard(1, ds)}) {
        INFO("device set " << set_name(ds) << ", shape " << detail::shape_string<2>(s) << ", mask " << mask[0]
                           << mask[1]);
        const auto a = from_host(v, s, p);
        auto add = [](double x, double y) { return x + y; };
        const auto want = fold<2>(v, s, mask, 0.0, [](double x) { return x * x; }, add);
        check_all_close(to_host(sum(a * a, to_dims<2>(mask))), want, 1e-5, 1e-4);
        const auto want_max = fold<2>(v, s, mask, -INFINITY, [](double x) { return x; },
                                      [](double x, double y) { return x > y ? x : y; });
        check_all_close(to_host(maximum(a, to_dims<2>(mask))), want_max, 0, 0);
      }
    };
    check2({2049, 33}, {true, false});
    check2({40000, 2}, {true, false});
    check2({100, 50}, {true, false});
    check2({3, 5000}, {false, true});
    check2({1 << 12, 1 << 9}, {false, true});
    auto check3 = [&](const Shape<3>& s, std::array<bool, 3> mask) {
      const auto v = random_values<double>(static_cast<std::size_t>(detail::volume<3>(s)));
      for (const auto& p : {on(ds[0]), shard(2, ds), shard(1, ds)}) {
        INFO("device set " << set_name(ds) << ", shape " << detail::shape_string<3>(s));
        const auto a = from_host(v, s, p);
        auto add = [](double x, double y) { return x + y; };
        const auto want = fold<3>(v, s, mask, 0.0, [](double x) { return std::fabs(x) * x; }, add);
        check_all_close(to_host(sum(abs(a) * a, to_dims<3>(mask))), want, 1e-9, 1e-9);
      }
    };
    check3({37, 5, 41}, {true, false, true});
    check3({3, 70, 80}, {false, true, true});
    check3({5, 400, 50}, {false, false, true});
  }
}

// A broadcast operand (stride 0) in a fused dims reduction: sum(W .* x_row, dims(1)) is the
// matrix-vector product in broadcast form. GPUs read such shards with vector loads along dim 0
// (the broadcast leaf one element per vector); odd extents and unaligned views take the scalar path.
TEST_CASE("reductions along dims of expressions with broadcast operands") {
  for (const auto& ds : device_sets()) {
    for (auto [m, n] : {std::pair<index_t, index_t>{4096, 301}, {64, 20001}, {10, 7}, {1, 9}, {33, 64}}) {
      const auto wv = random_values<float>(static_cast<std::size_t>(m * n));
      const auto rv = random_values<float>(static_cast<std::size_t>(n));
      const auto cv = random_values<float>(static_cast<std::size_t>(m));
      for (const auto& p : {on(ds[0]), shard(1, ds), shard(0, ds)}) {
        INFO("device set " << set_name(ds) << ", W " << m << "x" << n);
        const auto w = from_host(wv, {m, n}, p);
        // The row is replicated (its shard dimension would have size 1 where W is sharded along 0).
        const auto row = from_host(rv, {1, n}, p.kind == Placement::kind_t::shard && p.dim == 1 ? shard(1, ds) : replicate(ds));
        const auto col = from_host(cv, {m, 1}, p.kind == Placement::kind_t::shard && p.dim == 0 ? shard(0, ds) : replicate(ds));
        std::vector<double> prod_row(wv.size()), prod_col(wv.size());
        for (index_t j = 0; j < n; ++j)
          for (index_t i = 0; i < m; ++i) {
            prod_row[i + j * m] = double(wv[i + j * m]) * rv[j];
            prod_col[i + j * m] = double(wv[i + j * m]) * cv[i];
          }
        auto id = [](double x) { return x; };
        auto add = [](double x, double y) { return x + y; };
        for (const auto& mask : {std::array<bool, 2>{false, true}, std::array<bool, 2>{true, false}}) {
          const double atol = 1e-4 * std::sqrt(double(m * n));
          check_all_close(to_host(sum(w * row, to_dims<2>(mask))), fold<2>(prod_row, Shape<2>{m, n}, mask, 0.0, id, add),
                          1e-5, atol);
          check_all_close(to_host(sum(w * col, to_dims<2>(mask))), fold<2>(prod_col, Shape<2>{m, n}, mask, 0.0, id, add),
                          1e-5, atol);
        }
      }
    }
  }
}
