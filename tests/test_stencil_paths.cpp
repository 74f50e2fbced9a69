// SPDX-License-Identifier: Apache-2.0
// Stencils over shifted views: every alignment of the output and of each operand along the
// contiguous dim, rows long enough for the row kernels of backend/cuda/executor.cuh (128 elements
// and more; the row-vector kernel reads each operand as 16-byte chunks and does the unaligned ends
// one by one; float and double stencils with views of one array a row and an element apart run
// as kernels generated and compiled at run time, backend/rtc/stencil.cpp), element types of 2, 4
// and 8 bytes, 2-D and 3-D, operands broadcast along either dim, and the halo'd Jacobi sweep over
// every device. Every result is compared with plain loops on the host, on fresh random data. The
// row-tile plan and the generated source are checked on their own, on the host: the source
// compiled by NVRTC where the build has CUDA, and run on the host against loops in an emulation
// of the kernel (every thread in turn, the neighbours of a chunk read from memory instead of the
// lanes beside it) everywhere.
#include "half_support.hpp"

#include <backend/cuda/stencil_jit.cuh>

#include <algorithm>
#include <array>
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
      // Rows of a multiple of 16 bytes for every element type (float and double take the kernels
      // compiled at run time, backend/rtc/stencil.cpp): views one element apart (served from the
      // chunks), two and more apart (read on their own), one row (a tile of one row) to tiles of 4
      // rows and a partial one, every output alignment.
      for (index_t r : {index_t(136), index_t(264), index_t(1032)}) {
        for (index_t c : {index_t(3), index_t(4), index_t(6), index_t(7), index_t(11)}) {
          for (int o = 0; o < 5; ++o) check_shifts<T>(ds, p, r, c, o, o, (o + 1) % 5, std::max(o - 1, 0), (o + 2) % 5);
          check_shifts<T>(ds, p, r, c, 1, 0, 2, 1, 1);
          check_shifts<T>(ds, p, r, c, 2, 2, 2, 2, 2);
        }
      }
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

namespace {
// The functor of a plan test's expression: any arity, the plan only reads the leaves.
struct sum_all {
  template <class... A>
  float operator()(A... a) const {
    return (0.0f + ... + static_cast<float>(a));
  }
};
using detail::LeafEval;
using detail::NodeEval;
using detail::OutEval;
using detail::ScalarEval;
// a + b as the DSL builds it (fn::plus), for the generated kernels' tests.
template <class A, class B>
NodeEval<detail::fn::plus, A, B> add(A a, B b) {
  return {detail::fn::plus{}, {{a}, {b}}};
}
template <class A, class B>
NodeEval<detail::fn::multiplies, A, B> mul(A a, B b) {
  return {detail::fn::multiplies{}, {{a}, {b}}};
}
// (((a + b) + c) + ...): operands numbered in order.
template <class A, class B, class... R>
auto node(A a, B b, R... r) {
  if constexpr (sizeof...(R) == 0) return add(a, b);
  else return node(add(a, b), r...);
}
// A shard writing `out` from `e` over `box` (empty: the plan does not read it), flattened as the
// executor flattens it (`call` points into the arrays beside it, so the object stays put).
template <class T, int N, class E>
struct flat_shard {
  static constexpr int L = detail::leaf_count<E>::value;
  std::int64_t ext[N], ost[N], opst[L * N];
  std::uintptr_t op[L];
  std::uint64_t bits[detail::cuda::jit_scalars<E>];
  detail::rtc::stencil_call call;
  flat_shard(const OutEval<T, N>& out, const E& e, const detail::Extents<N>& box = {}, index_t count = 0)
      : call(detail::cuda::jit_stencil_call(
            detail::ShardTask<OutEval<T, N>, E, N>{out, e, box, count, detail::path::cartesian, false}, ext, ost, op,
            opst, bits)) {}
  flat_shard(const flat_shard&) = delete;
  flat_shard& operator=(const flat_shard&) = delete;
};
// Jacobi's sweep of u into v, n x n float: the output (its first column `o` elements into row 1)
// and 0.25 (u(i - 1, j) + u(i + 1, j) + u(i, j - 1) + u(i, j + 1)).
inline auto jacobi(float* u, float* v, index_t n, index_t o) {
  using L2 = LeafEval<float, 2>;
  const auto at = [&](float* a, index_t i, index_t j) { return a + i + n * j; };
  return std::pair{OutEval<float, 2>{at(v, o, 1), {1, n}},
                   mul(ScalarEval<float>{0.25f}, node(L2{at(u, 0, 1), {1, n}}, L2{at(u, 2, 1), {1, n}},
                                                      L2{at(u, 1, 0), {1, n}}, L2{at(u, 1, 2), {1, n}}))};
}
// The plan of a shard writing `out` from `e`.
template <class T, int N, class E>
detail::rtc::tile_plan plan_of(const OutEval<T, N>& out, const E& e) {
  return detail::rtc::make_tile_plan(flat_shard<T, N, E>(out, e).call);
}
// The generated kernel's description for that shard (4 rows per thread) and its parameter words.
template <class T, int N, class E>
detail::rtc::stencil_desc desc_of(const OutEval<T, N>& out, const E& e, std::vector<std::uint64_t>& words) {
  const flat_shard<T, N, E> f(out, e);
  return detail::rtc::describe_stencil(f.call, detail::rtc::make_tile_plan(f.call), 4, words);
}
}  // namespace

TEST_CASE("stencils: the row-tile plan of Jacobi's views, on the host") {
  alignas(16) static float u[64 * 64], v[64 * 64];
  const index_t n = 64;
  const auto at = [&](float* a, index_t i, index_t j) { return a + i + n * j; };
  using L2 = LeafEval<float, 2>;
  // u(0.., 1..), u(2.., 1..), u(1.., 0..), u(1.., 2..): the output's aligned element is i = 3.
  const auto [out, e] = jacobi(u, v, n, 1);
  const auto pl = plan_of(out, e);
  REQUIRE(pl.valid);
  CHECK(pl.members == 4);
  CHECK(pl.head == 3);
  // The anchor's chunk for output i = 3 in row j holds u(i - 1 .. i + 2, j + 1) = u(4..7, j + 1).
  CHECK(pl.anchor == reinterpret_cast<std::uintptr_t>(at(u, 1, 1)));
  CHECK(pl.st[0] == 1);
  CHECK(pl.st[1] == n);
  const int dy[] = {0, 0, -1, 1}, s[] = {-1, 1, 0, 0};
  for (int l = 0; l < 4; ++l) {
    INFO("leaf " << l);
    CHECK(pl.member[l] == 1);
    CHECK(pl.dy[l] == dy[l]);
    CHECK(pl.s[l] == s[l]);
  }
  CHECK(pl.lo == -1);
  CHECK(pl.hi == 1);
  CHECK(pl.left == 1 << 4);   // u(0.., 1..): dz 0, dy 0, reads the element before a chunk
  CHECK(pl.right == 1 << 4);  // u(2.., 1..)

  SUBCASE("views two rows apart, or K elements apart, or of another array, read on their own") {
    static float w[64 * 64];
    const auto f = node(L2{at(u, 1, 1), {1, n}}, L2{at(u, 1, 3), {1, n}}, L2{at(u, 6, 1), {1, n}}, L2{at(w, 1, 1), {1, n}},
                        L2{at(u, 2, 1), {1, n}});
    const auto q = plan_of(out, f);
    REQUIRE(q.valid);
    CHECK(q.members == 2);
    const int member[] = {1, 0, 0, 0, 1};
    for (int l = 0; l < 5; ++l) CHECK(q.member[l] == member[l]);
    CHECK(q.lo == 0);
    CHECK(q.hi == 0);
  }
  SUBCASE("no plan: one member, rows not a multiple of 16 bytes, a broadcast or strided view") {
    static float w[64 * 64];
    CHECK_FALSE(plan_of(out, node(L2{at(u, 1, 1), {1, n}}, L2{at(w, 1, 1), {1, n}})).valid);
    const OutEval<float, 2> odd{v + 1, {1, 63}};
    CHECK_FALSE(plan_of(odd, node(L2{u, {1, 63}}, L2{u + 1, {1, 63}})).valid);
    CHECK_FALSE(plan_of(out, node(L2{u, {0, n}}, L2{u + n, {0, n}})).valid);
    CHECK_FALSE(plan_of(out, node(L2{u, {2, n}}, L2{u + 1, {2, n}})).valid);
    // Rows shorter than 4 chunks: a shift along dim 0 could pass for one along dim 1.
    const OutEval<float, 2> narrow{v + 1, {1, 8}};
    CHECK_FALSE(plan_of(narrow, node(L2{u, {1, 8}}, L2{u + 1, {1, 8}})).valid);
  }
  SUBCASE("3-D diffusion: every view of t is a member, the neighbouring planes' at dz -+1; ci is not") {
    using L3 = LeafEval<double, 3>;
    alignas(16) static double t[16 * 16 * 4], c[16 * 16 * 4], o[16 * 16 * 4];
    const index_t m = 16, p = 16 * 16;
    const auto a3 = [&](double* a, index_t i, index_t j, index_t k) { return a + i + m * j + p * k; };
    const index_t st[3] = {1, m, p};
    const auto leaf = [&](double* a, index_t i, index_t j, index_t k) { return L3{a3(a, i, j, k), {st[0], st[1], st[2]}}; };
    const OutEval<double, 3> o3{a3(o, 1, 1, 1), {1, m, p}};
    const auto d = node(leaf(t, 1, 1, 1), leaf(c, 1, 1, 1), leaf(t, 0, 1, 1), leaf(t, 2, 1, 1), leaf(t, 1, 0, 1),
                        leaf(t, 1, 2, 1), leaf(t, 1, 1, 0), leaf(t, 1, 1, 2), leaf(t, 1, 1, 1));
    const auto q = plan_of(o3, d);
    REQUIRE(q.valid);
    CHECK(q.members == 8);
    const int member[] = {1, 0, 1, 1, 1, 1, 1, 1, 1};
    for (int l = 0; l < 9; ++l) {
      INFO("leaf " << l);
      CHECK(q.member[l] == member[l]);
    }
    CHECK(q.head == 1);
    CHECK(q.s[0] == 0);
    CHECK(q.s[2] == -1);
    CHECK(q.s[3] == 1);
    CHECK(q.dy[4] == -1);
    CHECK(q.dy[5] == 1);
    CHECK(q.dz[6] == -1);
    CHECK(q.dz[7] == 1);
    CHECK(q.dy[6] == 0);
    CHECK(q.zlo == -1);
    CHECK(q.zhi == 1);
    CHECK(q.left == 1 << 4);
    CHECK(q.right == 1 << 4);
  }
}


TEST_CASE("stencils: the generated kernel of Jacobi's plan, written and compiled on the host") {
  alignas(16) static float u[64 * 64], v[64 * 64];
  using L2 = LeafEval<float, 2>;
  const auto [out, e] = jacobi(u, v, 64, 1);
  static_assert(detail::cuda::jit_stencil_candidate<OutEval<float, 2>, std::decay_t<decltype(e)>>);
  // Not with an operand of another type (the source reads every operand as the output's type).
  static_assert(!detail::cuda::jit_stencil_candidate<
                OutEval<float, 2>, NodeEval<detail::fn::plus, L2, LeafEval<double, 2>>>);
  static_assert(!detail::cuda::jit_stencil_candidate<OutEval<float, 2>, NodeEval<sum_all, L2, L2>>);
  const auto pl = plan_of(out, e);
  REQUIRE(pl.valid);
  std::vector<std::uint64_t> words;
  const auto d = desc_of(out, e, words);
  CHECK(d.expr == "(S0 * (((L0 + L1) + L2) + L3))");
  CHECK(words.size() == detail::rtc::stencil_words(d));
  float quarter = 0;
  std::memcpy(&quarter, &words.back(), sizeof quarter);
  CHECK(quarter == 0.25f);
  const std::string code = detail::rtc::stencil_source(d);
  // u(i - 1, j): the element before the chunk in row j; u(i + 1, j): the one after; u(i, j -+ 1):
  // the chunk of the row above and below, all by constant indices.
  CHECK(code.find("L0[0] = lf[u + 1];") != std::string::npos);
  CHECK(code.find("L0[1] = r[u + 1][0];") != std::string::npos);
  CHECK(code.find("L1[3] = rt[u + 1];") != std::string::npos);
  CHECK(code.find("L2[2] = r[u + 0][2];") != std::string::npos);
  CHECK(code.find("L3[2] = r[u + 2][2];") != std::string::npos);
#if TESSERA_HAS_CUDA
  CHECK_NOTHROW(detail::rtc::compile_stencil(code, 90));
#else
  MESSAGE("not compiled with NVRTC: this build has no CUDA");
#endif

  SUBCASE("a 3-D diffusion in double with an operand of another array, compiled too") {
    using L3 = LeafEval<double, 3>;
    alignas(16) static double t[16 * 16 * 4], c[16 * 16 * 4], o[16 * 16 * 4];
    const index_t m = 16, q = 16 * 16;
    const auto leaf = [&](double* a, index_t i, index_t j, index_t k) { return L3{a + i + m * j + q * k, {1, m, q}}; };
    const OutEval<double, 3> o3{o + 1 + m + q, {1, m, q}};
    const auto lap = add(add(add(leaf(t, 0, 1, 1), leaf(t, 2, 1, 1)), add(leaf(t, 1, 0, 1), leaf(t, 1, 2, 1))),
                         add(leaf(t, 1, 1, 0), leaf(t, 1, 1, 2)));
    const auto f = add(leaf(t, 1, 1, 1), mul(mul(ScalarEval<double>{0.1}, leaf(c, 1, 1, 1)), lap));
    const auto p3 = plan_of(o3, f);
    REQUIRE(p3.valid);
    std::vector<std::uint64_t> w3;
    const auto d3 = desc_of(o3, f, w3);
    CHECK(d3.operands[1].member == 0);  // ci
    CHECK(d3.operands[1].mode == 0);     // at the output's alignment: one chunk
    CHECK(d3.operands[6].member == 1);  // the plane below, from the registers of the march
    CHECK(d3.operands[6].dz == -1);
    CHECK(d3.march);
    const std::string code3 = detail::rtc::stencil_source(d3);
    // Double chunks, the output one element past a 16-byte line: the march takes the chunks that
    // straddle the box's ends, no kernel of edges.
    CHECK(d3.partial);
    CHECK_FALSE(d3.edge_kernel());
    CHECK(code3.find("tessera_stencil_edges") == std::string::npos);
#if TESSERA_HAS_CUDA
    CHECK_NOTHROW(detail::rtc::compile_stencil(code3, 90));
#endif
  }
  SUBCASE("a 27-point stencil: the edge kernel keeps each member's element in one register") {
    using L3 = LeafEval<double, 3>;
    alignas(16) static double t[16 * 16 * 4], o[16 * 16 * 4];
    const index_t m = 16, q = 16 * 16;
    const auto at = [&](int i, int j, int k) { return L3{t + i + m * j + q * k, {1, m, q}}; };
    const auto plane = [&](int k) {
      return node(at(0, 0, k), at(1, 0, k), at(2, 0, k), at(0, 1, k), at(1, 1, k), at(2, 1, k), at(0, 2, k),
                  at(1, 2, k), at(2, 2, k));
    };
    const auto f = add(add(plane(0), plane(1)), plane(2));
    std::vector<std::uint64_t> w;
    auto d = desc_of(OutEval<double, 3>{o + 1 + m + q, {1, m, q}}, f, w);
    int members = 0;
    for (const auto& op : d.operands) members += op.member;
    CHECK(members == 27);
    CHECK(d.partial);
    d.partial = false;  // as where a straddling chunk may hold no element that is read
    REQUIRE(d.edge_kernel());
    const std::string code = detail::rtc::stencil_source(d);
    CHECK(code.find("    T v000, v001, v002, v010, ") != std::string::npos);
    d.emulate = true;  // its host translation unit compiles too
    CHECK_NOTHROW(detail::rtc::host_symbol(detail::rtc::stencil_source(d), "tessera_stencil_edges_host", "stencil_27"));
#if TESSERA_HAS_CUDA
    CHECK_NOTHROW(detail::rtc::compile_stencil(code, 90));
#endif
  }
}

namespace {
template <class A, class B>
NodeEval<detail::fn::minus, A, B> sub(A a, B b) {
  return {detail::fn::minus{}, {{a}, {b}}};
}
// Runs the generated kernel of `out = e` over `box` on the host: the source compiled by the system
// compiler with the host's stand-ins for CUDA, every thread of the grid in turn (rows: rows per
// thread; planes: output planes per thread of a marching kernel; scalar: chunks of one element;
// warps: a marching block's; grid_y: a marching grid of so many blocks along y, the rest of the
// tiles along z, or, with `stride`, blocks striding over the tiles as past 65535^2 of them).
// Checks that the shard has a plan; returns whether its kernel marched.
template <class T, int N, class E, std::size_t M>
bool run_emulated(const OutEval<T, N>& out, const E& e, const std::array<index_t, M>& box, int rows, int planes = 32,
                  bool scalar = false, int warps = 4, unsigned grid_y = 0, bool stride = false) {
  static_assert(M == static_cast<std::size_t>(N), "run_emulated: one extent per dim");
  detail::Extents<N> ext;
  index_t count = 1;
  for (int k = 0; k < N; ++k) ext[k] = box[static_cast<std::size_t>(k)], count *= ext[k];
  const flat_shard<T, N, E> f(out, e, ext, count);
  const detail::rtc::stencil_call& c = f.call;
  const auto pl = detail::rtc::make_tile_plan(c, scalar);
  REQUIRE(pl.valid);
  CHECK(pl.k == (scalar ? 1 : 16 / int(sizeof(T))));
  std::vector<std::uint64_t> words;
  auto d = detail::rtc::describe_stencil(c, pl, rows, words, planes, warps);
  d.emulate = true;
  if (stride) d.one_tile = false;
  using run_fn = void (*)(const void*, unsigned, unsigned, unsigned);
  const auto run = reinterpret_cast<run_fn>(
      detail::rtc::host_symbol(detail::rtc::stencil_source(d), "tessera_stencil_host", "stencil_emulated"));
  unsigned grid[3];
  detail::rtc::stencil_grid(c, d, grid);
  if (grid_y > 0 && d.march) {
    const unsigned tiles = grid[1];  // fewer than 65535 here
    grid[1] = std::min(grid_y, tiles);
    grid[2] = d.one_tile ? (tiles + grid[1] - 1) / grid[1] : 1;
  }
  run(words.data(), grid[0], grid[1], grid[2]);
  // A march's elements outside whole chunks: its edge kernel, over exactly its grid.
  const unsigned edges = detail::rtc::stencil_edge_blocks(c, d);
  const index_t inner = box[0], hd = d.head, K = d.k;
  const bool outside = inner > 0 && (std::min(inner, hd) > 0 || (inner > hd && (inner - hd) % K != 0));
  CHECK((edges > 0) == (d.edge_kernel() && outside));
  if (edges > 0) {
    using edges_fn = void (*)(const void*, unsigned);
    reinterpret_cast<edges_fn>(detail::rtc::host_symbol(detail::rtc::stencil_source(d), "tessera_stencil_edges_host",
                                                        "stencil_emulated"))(words.data(), edges);
  }
  return d.march;
}
// 3-D diffusion (T2 = T + 0.1 Ci lap(T)) over the interior of an n x ny x nz grid through the
// emulated kernel, against loops.
template <class T>
void diffusion_emulated(index_t n, index_t ny, index_t nz, int rows, int planes, bool scalar = false, int warps = 4,
                        index_t off = 0, unsigned grid_y = 0, bool stride = false) {
  // off: the arrays start so many elements into their vectors (the march's lines: d.shift).
  const auto t = values<T>(static_cast<std::size_t>(n * ny * nz + off));
  const auto ci = values<T>(static_cast<std::size_t>(n * ny * nz + off));
  auto v = values<T>(static_cast<std::size_t>(n * ny * nz + off));
  auto want = v;
  const auto id = [&](index_t i, index_t j, index_t k) { return static_cast<std::size_t>(off + i + n * (j + ny * k)); };
  for (index_t k = 1; k < nz - 1; ++k)
    for (index_t j = 1; j < ny - 1; ++j)
      for (index_t i = 1; i < n - 1; ++i)
        want[id(i, j, k)] =
            t[id(i, j, k)] +
            (T(0.1) * ci[id(i, j, k)]) * ((((((t[id(i - 1, j, k)] + t[id(i + 1, j, k)]) + t[id(i, j - 1, k)]) +
                                            t[id(i, j + 1, k)]) +
                                           t[id(i, j, k - 1)]) +
                                          t[id(i, j, k + 1)]) -
                                         T(6) * t[id(i, j, k)]);
  using L3 = LeafEval<T, 3>;
  const auto T3 = [&](const std::vector<T>& a, index_t i, index_t j, index_t k) {
    return L3{a.data() + id(i, j, k), {1, n, n * ny}};
  };
  const auto lap = sub(node(T3(t, 0, 1, 1), T3(t, 2, 1, 1), T3(t, 1, 0, 1), T3(t, 1, 2, 1), T3(t, 1, 1, 0), T3(t, 1, 1, 2)),
                       mul(ScalarEval<T>{T(6)}, T3(t, 1, 1, 1)));
  const auto e = add(T3(t, 1, 1, 1), mul(mul(ScalarEval<T>{T(0.1)}, T3(ci, 1, 1, 1)), lap));
  const OutEval<T, 3> out{v.data() + id(1, 1, 1), {1, n, n * ny}};
  // The march takes the chunks straddling the box's ends (describe_stencil). Rows of other lengths
  // have no plan of 16-byte chunks.
  std::vector<std::uint64_t> w;
  const auto d = desc_of(out, e, w);
  CHECK(d.march == (n % (16 / index_t(sizeof(T))) == 0));
  CHECK(d.partial == d.march);
  run_emulated(out, e, std::array<index_t, 3>{n - 2, ny - 2, nz - 2}, rows, planes, scalar, warps, grid_y, stride);
  CHECK(v == want);
}
}  // namespace

namespace {
// out(o + i, j, k) = t(i + di, j + dj, k + dk) summed over the offsets below - 2 g(i, j, k), over the
// interior, with the output's offset o moving the head, through the emulated kernel, against loops.
template <class T>
void members_everywhere() {
  const index_t n = 140, ny = 7, nz = 6;
  const int off[][3] = {{-1, -1, -1}, {1, 1, 1}, {0, 1, -1}, {1, -1, 0}, {-1, 0, 1}, {0, 0, 1}, {0, -1, 0}, {1, 0, -1}};
  for (int o = 0; o < 4; ++o)
    for (const index_t m : {n - 2, index_t(1), index_t(2), index_t(7)})
      for (const auto& [rows, planes, scalar] :
           {std::array<int, 3>{4, 32, 0}, std::array<int, 3>{3, 2, 0}, std::array<int, 3>{1, 3, 1}}) {
        INFO("output offset " << o << ", " << m << " columns, rows " << rows << ", planes " << planes
                              << (scalar ? ", one element per thread" : ""));
        const auto id = [&](index_t i, index_t j, index_t k) { return static_cast<std::size_t>(i + n * (j + ny * k)); };
        const auto t = values<T>(static_cast<std::size_t>(n * ny * nz));
        const auto g = values<T>(static_cast<std::size_t>(n * ny * nz));
        auto v = values<T>(static_cast<std::size_t>(n * ny * nz));
        auto want = v;
        for (index_t k = 1; k < nz - 1; ++k)
          for (index_t j = 1; j < ny - 1; ++j)
            for (index_t i = 1; i < 1 + m; ++i) {
              T sum = 0;
              for (int q = 0; q < 8; ++q) {
                const T x = t[id(i + off[q][0], j + off[q][1], k + off[q][2])];
                sum = q == 0 ? x : sum + x;
              }
              want[id(i - 1 + o, j, k)] = sum - T(2) * g[id(i, j, k)];
            }
        using L3 = LeafEval<T, 3>;
        const auto T3 = [&](const std::vector<T>& a, int q) {
          return L3{a.data() + id(1 + off[q][0], 1 + off[q][1], 1 + off[q][2]), {1, n, n * ny}};
        };
        const auto e = sub(node(T3(t, 0), T3(t, 1), T3(t, 2), T3(t, 3), T3(t, 4), T3(t, 5), T3(t, 6), T3(t, 7)),
                           mul(ScalarEval<T>{T(2)}, L3{g.data() + id(1, 1, 1), {1, n, n * ny}}));
        const OutEval<T, 3> out{v.data() + id(o, 1, 1), {1, n, n * ny}};
        // Rows read by one member each (t(i - 1, j - 1, k - 1)): a chunk straddling the box's last
        // element may hold no element read, so the edges take a kernel of their own.
        std::vector<std::uint64_t> w;
        const auto d = desc_of(out, e, w);
        CHECK_FALSE(d.partial);
        CHECK(d.edge_kernel());
#if TESSERA_HAS_CUDA
        if (o == 1 && m == n - 2 && rows == 4)  // the edge kernel through NVRTC too
          CHECK_NOTHROW(detail::rtc::compile_stencil(detail::rtc::stencil_source(d), 90));
#endif
        run_emulated(out, e, std::array<index_t, 3>{m, ny - 2, nz - 2}, rows, planes, scalar != 0);
        CHECK(v == want);
      }
}
}  // namespace

TEST_CASE("stencils: the generated kernel, run on the host against loops") {
  SUBCASE("Jacobi, float: every row count per thread, partial tiles, heads and tails") {
    for (index_t n : {index_t(132), index_t(136), index_t(200), index_t(264)}) {
      for (int rows : {1, 3, 4}) {
        INFO("n = " << n << ", rows per thread " << rows);
        const auto u = values<float>(static_cast<std::size_t>(n * n));
        auto v = values<float>(static_cast<std::size_t>(n * n));
        auto want = v;
        const auto at = [&](index_t i, index_t j) { return static_cast<std::size_t>(i + n * j); };
        for (index_t j = 1; j < n - 1; ++j)
          for (index_t i = 1; i < n - 1; ++i)
            want[at(i, j)] = 0.25f * (((u[at(i - 1, j)] + u[at(i + 1, j)]) + u[at(i, j - 1)]) + u[at(i, j + 1)]);
        using L2 = LeafEval<float, 2>;
        const auto p = [&](index_t i, index_t j) { return u.data() + at(i, j); };
        const OutEval<float, 2> out{v.data() + at(1, 1), {1, n}};
        run_emulated(out,
                     mul(ScalarEval<float>{0.25f}, node(L2{p(0, 1), {1, n}}, L2{p(2, 1), {1, n}}, L2{p(1, 0), {1, n}},
                                                        L2{p(1, 2), {1, n}})),
                     std::array<index_t, 2>{n - 2, n - 2}, rows);
        CHECK(v == want);
      }
    }
  }
  SUBCASE("views at every shift, other arrays read as chunks, as shifted chunks, broadcast and strided") {
    // out(o + i, j + 1) = 0.5 u(s1 + i, j) + u(s2 + i, j + 1) - u(s3 + i, j + 2) + u(s4 + i, j + 1)
    //                     + h(i + 2, j + 1) + g(i, j) + w(i) + z(j)
    // h: another array, two elements over (a shifted chunk); g: rows of r + 1 (one by one); w: a
    // column broadcast along dim 1; z: a row broadcast along dim 0.
    const index_t r = 264, c = 9, m = r - 4;
    for (int o = 1; o < 4; ++o) {
      INFO("output offset " << o);
      const int s1 = o - 1, s2 = o, s3 = o + 1, s4 = o;
      const auto u = values<double>(static_cast<std::size_t>(r * c));
      const auto h = values<double>(static_cast<std::size_t>(r * c));
      const auto g = values<double>(static_cast<std::size_t>((r + 1) * c));
      const auto w = values<double>(static_cast<std::size_t>(m));
      const auto z = values<double>(static_cast<std::size_t>(c));
      auto v = values<double>(static_cast<std::size_t>(r * c));
      auto want = v;
      for (index_t j = 0; j < c - 2; ++j)
        for (index_t i = 0; i < m; ++i)
          want[static_cast<std::size_t>(o + i + r * (j + 1))] =
              ((((((0.5 * u[static_cast<std::size_t>(s1 + i + r * j)] + u[static_cast<std::size_t>(s2 + i + r * (j + 1))]) -
                   u[static_cast<std::size_t>(s3 + i + r * (j + 2))]) +
                  u[static_cast<std::size_t>(s4 + i + r * (j + 1))]) +
                 h[static_cast<std::size_t>(i + 2 + r * (j + 1))]) +
                g[static_cast<std::size_t>(i + (r + 1) * j)]) +
               w[static_cast<std::size_t>(i)]) +
              z[static_cast<std::size_t>(j)];
      using L2 = LeafEval<double, 2>;
      const auto U2 = [&](int sh, index_t j) { return L2{u.data() + sh + r * j, {1, r}}; };
      const auto e = add(add(add(add(add(sub(add(mul(ScalarEval<double>{0.5}, U2(s1, 0)), U2(s2, 1)), U2(s3, 2)), U2(s4, 1)),
                                     L2{h.data() + 2 + r, {1, r}}),
                                 L2{g.data(), {1, r + 1}}),
                             L2{w.data(), {1, 0}}),
                         L2{z.data(), {0, 1}});
      const OutEval<double, 2> out{v.data() + o + r, {1, r}};
      run_emulated(out, e, std::array<index_t, 2>{m, c - 2}, 4);
      CHECK(v == want);
    }
  }
  SUBCASE("3-D diffusion, marching along dim 2: rows and planes per thread, partial tiles and chunks of planes") {
    // Rows of 130 doubles: a whole number of 16-byte chunks, not of floats.
    for (const auto& [n, ny, nz] :
         {std::array<index_t, 3>{136, 6, 5}, std::array<index_t, 3>{132, 11, 4}, std::array<index_t, 3>{130, 9, 7}})
      for (const auto& [rows, planes] : {std::array<int, 2>{4, 32}, std::array<int, 2>{1, 1}, std::array<int, 2>{3, 2}}) {
        INFO("grid " << n << " x " << ny << " x " << nz << ", rows " << rows << ", planes " << planes);
        diffusion_emulated<double>(n, ny, nz, rows, planes);
        if (n % 4 == 0) diffusion_emulated<float>(n, ny, nz, rows, planes);
        // One element per thread and row (TESSERA_JIT_STENCIL_SCALAR=1): any row length.
        diffusion_emulated<double>(n, ny, nz, rows, planes, true);
        diffusion_emulated<float>(n, ny, nz, rows, planes, true);
        // Blocks of 8 and 16 warps (TESSERA_JIT_STENCIL_WARPS): more rows per tile than the grid has.
        diffusion_emulated<float>(n, ny, nz, rows, planes, true, 8);
        diffusion_emulated<double>(n, ny, nz, rows, planes, false, 16);
      }
  }
  SUBCASE("3-D diffusion, marching: warps from a 128-byte line, lanes before the head idle; grids along z, strides") {
    // Arrays from 0 .. 19 elements into their vectors: the first whole chunk at every place of a
    // line (d.shift), and lanes before it that load and store nothing.
    for (index_t off = 0; off < 20; off += 3)
      for (const auto& [rows, planes] : {std::array<int, 2>{1, 2}, std::array<int, 2>{2, 3}}) {
        INFO("offset " << off << ", rows " << rows << ", planes " << planes);
        diffusion_emulated<float>(136, 7, 6, rows, planes, false, 4, off);
        diffusion_emulated<double>(130, 7, 6, rows, planes, false, 4, off);
        diffusion_emulated<float>(133, 7, 6, rows, planes, true, 4, off);
        diffusion_emulated<double>(131, 7, 6, rows, planes, true, 4, off);
        // 3 blocks along y, the other tiles along z (one tile per block), and blocks that stride.
        diffusion_emulated<float>(136, 9, 6, rows, planes, false, 4, off, 3);
        diffusion_emulated<double>(131, 9, 6, rows, planes, true, 4, off, 3, true);
      }
  }
  SUBCASE("rank 4: a 3-D stencil over each of 3 slices along dim 3, marching and in row tiles") {
    // out(i, j, k, l) = the 6 neighbours of t(i, j, k, l) - 2 g(i, j, k, l); and the same without the
    // planes' neighbours (a plane's stencil on a 4-D array: row tiles over dims 2 and 3).
    const index_t n = 136, ny = 6, nz = 5, nw = 3;
    const auto id = [&](index_t i, index_t j, index_t k, index_t l) {
      return static_cast<std::size_t>(i + n * (j + ny * (k + nz * l)));
    };
    const auto t = values<double>(static_cast<std::size_t>(n * ny * nz * nw));
    const auto g = values<double>(static_cast<std::size_t>(n * ny * nz * nw));
    using L4 = LeafEval<double, 4>;
    const auto T4 = [&](const std::vector<double>& a, index_t i, index_t j, index_t k) {
      return L4{a.data() + id(i, j, k, 0), {1, n, n * ny, n * ny * nz}};
    };
    using offsets = std::vector<std::array<int, 3>>;
    // v with out(i, j, k, l) = the sum of t at `off` from (i, j, k, l), in order, - 2 g(i, j, k, l) over
    // the interior of every slice.
    const auto expected = [&](std::vector<double> v, const offsets& off) {
      for (index_t l = 0; l < nw; ++l)
        for (index_t k = 1; k < nz - 1; ++k)
          for (index_t j = 1; j < ny - 1; ++j)
            for (index_t i = 1; i < n - 1; ++i) {
              double x = 0;
              for (std::size_t q = 0; q < off.size(); ++q) {
                const double y = t[id(i + off[q][0], j + off[q][1], k + off[q][2], l)];
                x = q == 0 ? y : x + y;
              }
              v[id(i, j, k, l)] = x - 2.0 * g[id(i, j, k, l)];
            }
      return v;
    };
    for (const bool planes : {true, false})
      for (const auto& [rows, per, warps] : {std::array<int, 3>{1, 8, 4}, std::array<int, 3>{3, 2, 8}}) {
        INFO((planes ? "7-point" : "5-point") << ", rows " << rows << ", planes " << per << ", warps " << warps);
        auto v = values<double>(static_cast<std::size_t>(n * ny * nz * nw));
        offsets off{{-1, 0, 0}, {1, 0, 0}, {0, -1, 0}, {0, 1, 0}};
        if (planes) off.insert(off.end(), {{0, 0, -1}, {0, 0, 1}});
        const auto want = expected(v, off);
        const OutEval<double, 4> out{v.data() + id(1, 1, 1, 0), {1, n, n * ny, n * ny * nz}};
        const std::array<index_t, 4> box{n - 2, ny - 2, nz - 2, nw};
        const auto minus_g = mul(ScalarEval<double>{2.0}, T4(g, 1, 1, 1));
        if (planes)
          CHECK(run_emulated(out,
                             sub(node(T4(t, 0, 1, 1), T4(t, 2, 1, 1), T4(t, 1, 0, 1), T4(t, 1, 2, 1), T4(t, 1, 1, 0),
                                      T4(t, 1, 1, 2)),
                                 minus_g),
                             box, rows, per, false, warps));
        else
          CHECK_FALSE(run_emulated(out, sub(node(T4(t, 0, 1, 1), T4(t, 2, 1, 1), T4(t, 1, 0, 1), T4(t, 1, 2, 1)), minus_g),
                                   box, rows, per, false, warps));
        CHECK(v == want);
      }
    // Members at skewed offsets (members_everywhere's): a march with an edge kernel, over the slices.
    const offsets off{{-1, -1, -1}, {1, 1, 1}, {0, 1, -1}, {1, -1, 0}, {-1, 0, 1}, {0, 0, 1}, {0, -1, 0}, {1, 0, -1}};
    auto v = values<double>(static_cast<std::size_t>(n * ny * nz * nw));
    const auto want = expected(v, off);
    const auto S4 = [&](int q) {
      const auto& o = off[static_cast<std::size_t>(q)];
      return T4(t, 1 + o[0], 1 + o[1], 1 + o[2]);
    };
    const auto e = sub(node(S4(0), S4(1), S4(2), S4(3), S4(4), S4(5), S4(6), S4(7)),
                       mul(ScalarEval<double>{2.0}, T4(g, 1, 1, 1)));
    const OutEval<double, 4> out{v.data() + id(1, 1, 1, 0), {1, n, n * ny, n * ny * nz}};
    std::vector<std::uint64_t> w;
    CHECK(desc_of(out, e, w).edge_kernel());
    CHECK(run_emulated(out, e, std::array<index_t, 4>{n - 2, ny - 2, nz - 2, nw}, 1, 2));
    CHECK(v == want);
  }
  SUBCASE("3-D: members at every dz, dy and s, another array, narrow boxes") {
    members_everywhere<float>();
    members_everywhere<double>();
  }
}

TEST_CASE("stencils: a launch's description comes from the recent calls of its shape") {
  using L2 = LeafEval<float, 2>;
  using E = decltype(jacobi(nullptr, nullptr, 0, 0).second);
  // The words a fresh plan and description give, to compare with the recent call's.
  const auto fresh = [](const detail::rtc::stencil_call& c, const detail::rtc::stencil_desc& d) {
    std::vector<std::uint64_t> w;
    const auto f = detail::rtc::describe_stencil(c, detail::rtc::make_tile_plan(c), d.rows, w, d.planes);
    CHECK(f.head == d.head);
    return w;
  };
  alignas(16) static float u1[80 * 80], v1[80 * 80], u2[80 * 80], v2[80 * 80];
  const detail::Extents<2> box{60, 60};
  std::vector<std::uint64_t> w1, w2;
  const auto [o1, e1] = jacobi(u1, v1, 64, 1);
  const flat_shard<float, 2, E> f1(o1, e1, box, 3600);
  const auto* d1 = detail::rtc::prepare_stencil(f1.call, w1);
  REQUIRE(d1 != nullptr);
  CHECK(w1 == fresh(f1.call, *d1));
  // Other arrays, the same shape: the same description, the new addresses.
  const auto [o2, e2] = jacobi(u2, v2, 64, 1);
  const flat_shard<float, 2, E> f2(o2, e2, box, 3600);
  CHECK(detail::rtc::prepare_stencil(f2.call, w2) == d1);
  CHECK(w2 == fresh(f2.call, *d1));
  CHECK(w2 != w1);
  // The output an element over: another head, another description.
  const auto [o3, e3] = jacobi(u1, v1, 64, 2);
  const flat_shard<float, 2, E> f3(o3, e3, box, 3600);
  const auto* d3 = detail::rtc::prepare_stencil(f3.call, w2);
  REQUIRE(d3 != nullptr);
  CHECK(d3 != d1);
  CHECK(d3->head != d1->head);
  CHECK(w2 == fresh(f3.call, *d3));
  // No plan, twice (the second from the recent calls).
  const auto lone = node(L2{u1 + 1, {1, 64}}, L2{u2 + 1, {1, 64}});
  const flat_shard<float, 2, std::decay_t<decltype(lone)>> f4(o1, lone, box, 3600);
  CHECK(detail::rtc::prepare_stencil(f4.call, w2) == nullptr);
  CHECK(detail::rtc::prepare_stencil(f4.call, w2) == nullptr);
  // Nine other row lengths push the first shape out; it is described again, as before.
  for (index_t n = 68; n <= 68 + 8 * 4; n += 4) {
    const auto [o, e] = jacobi(u2, v2, n, 1);
    const flat_shard<float, 2, E> f(o, e, box, 3600);
    const auto* d = detail::rtc::prepare_stencil(f.call, w2);
    REQUIRE(d != nullptr);
    CHECK(w2 == fresh(f.call, *d));
  }
  const auto* again = detail::rtc::prepare_stencil(f1.call, w2);
  REQUIRE(again != nullptr);
  CHECK(w2 == w1);
  CHECK(again->head == 3);
}

// f(n, ny, nz, hu, hc, u, c, v) on every device set and size (n x ny, with nz from planes(g), g the
// set's size): u and c from fresh host values hu and hc, v zeros, each sharded along dim 2 with a
// halo of 1.
template <class T, class P, class F>
void on_grids(std::initializer_list<std::pair<index_t, index_t>> sizes, P planes, F f) {
  for (const auto& ds : device_sets())
    for (const auto& [n, ny] : sizes)
      for (const index_t nz : planes(static_cast<index_t>(ds.size()))) {
        INFO("device set " << set_name(ds) << ", grid " << n << " x " << ny << " x " << nz);
        const auto hu = values<T>(static_cast<std::size_t>(n * ny * nz));
        const auto hc = values<T>(static_cast<std::size_t>(n * ny * nz));
        auto u = from_host(hu, {n, ny, nz}, shard(2, halo(1), ds));
        auto c = from_host(hc, {n, ny, nz}, shard(2, halo(1), ds));
        auto v = zeros<T>({n, ny, nz}, shard(2, halo(1), ds));
        f(n, ny, nz, hu, hc, u, c, v);
      }
}

// The 3-D diffusion over every device set (GPUs: the marching kernels, each shard at its own
// alignment; rows of 16-byte chunks take the straddling chunks).
template <class T>
void diffusion_on_devices(std::initializer_list<std::pair<index_t, index_t>> sizes, double tol) {
  // Every device holds at least one plane (the halo's width); 41 planes: more than one block of the
  // marching kernel walks, the last chunk partial.
  const auto planes = [](index_t g) { return std::vector<index_t>{std::max<index_t>(3, g), 2 * g + 1, 41}; };
  on_grids<T>(sizes, planes, [&](index_t n, index_t ny, index_t nz, const auto& hu, const auto& hc, auto& u, auto& ci,
                                 auto& v) {
    const auto I = range(1, n - 1), J = range(1, ny - 1), K = range(1, nz - 1);
    v(I, J, K) = u(I, J, K) + T(0.1) * ci(I, J, K) *
                                  (u(range(0, n - 2), J, K) + u(range(2, n), J, K) + u(I, range(0, ny - 2), K) +
                                   u(I, range(2, ny), K) + u(I, J, range(0, nz - 2)) + u(I, J, range(2, nz)) -
                                   T(6) * u(I, J, K));
    std::vector<T> want(static_cast<std::size_t>(n * ny * nz), T(0));
    auto id = [&](index_t i, index_t j, index_t k) { return static_cast<std::size_t>(i + n * (j + ny * k)); };
    for (index_t k = 1; k < nz - 1; ++k)
      for (index_t j = 1; j < ny - 1; ++j)
        for (index_t i = 1; i < n - 1; ++i)
          want[id(i, j, k)] = hu[id(i, j, k)] + T(0.1) * hc[id(i, j, k)] *
                                                    (hu[id(i - 1, j, k)] + hu[id(i + 1, j, k)] + hu[id(i, j - 1, k)] +
                                                     hu[id(i, j + 1, k)] + hu[id(i, j, k - 1)] + hu[id(i, j, k + 1)] -
                                                     T(6) * hu[id(i, j, k)]);
    check_all_close(to_host(v), want, tol, tol);
  });
}

TEST_CASE("stencils: 3-D 7-point diffusion against loops") {
  diffusion_on_devices<double>({{3, 5}, {130, 5}, {133, 5}, {133, 37}, {136, 6}}, 1e-12);
  // Float: rows of 4k elements (16-byte chunks, the straddling ones at both ends) and others.
  diffusion_on_devices<float>({{4, 5}, {132, 7}, {136, 37}, {140, 5}, {133, 6}}, 1e-5);
}

// Members at skewed offsets, some rows read by one member only (GPUs: a march whose straddling
// chunks may hold no element read, so the elements outside whole chunks take the edge kernel),
// over every device set, against loops.
template <class T>
void skewed_on_devices(std::initializer_list<std::pair<index_t, index_t>> sizes, double tol) {
  const int off[][3] = {{-1, -1, -1}, {1, 1, 1}, {0, 1, -1}, {1, -1, 0}, {-1, 0, 1}, {0, 0, 1}, {0, -1, 0}, {1, 0, -1}};
  const auto planes = [](index_t g) { return std::vector<index_t>{std::max<index_t>(3, g), 21}; };
  on_grids<T>(sizes, planes, [&](index_t n, index_t ny, index_t nz, const auto& hu, const auto& hg, auto& u, auto& gr,
                                 auto& v) {
    const auto R = [](index_t e, int d) { return range(1 + d, e - 1 + d); };
    const auto U = [&](int q) { return u(R(n, off[q][0]), R(ny, off[q][1]), R(nz, off[q][2])); };
    v(R(n, 0), R(ny, 0), R(nz, 0)) =
        U(0) + U(1) + U(2) + U(3) + U(4) + U(5) + U(6) + U(7) - T(2) * gr(R(n, 0), R(ny, 0), R(nz, 0));
    std::vector<T> want(static_cast<std::size_t>(n * ny * nz), T(0));
    auto id = [&](index_t i, index_t j, index_t k) { return static_cast<std::size_t>(i + n * (j + ny * k)); };
    for (index_t k = 1; k < nz - 1; ++k)
      for (index_t j = 1; j < ny - 1; ++j)
        for (index_t i = 1; i < n - 1; ++i) {
          T sum = 0;
          for (const auto& o : off) sum += hu[id(i + o[0], j + o[1], k + o[2])];
          want[id(i, j, k)] = sum - T(2) * hg[id(i, j, k)];
        }
    check_all_close(to_host(v), want, tol, tol);
  });
}

TEST_CASE("stencils: 3-D members at skewed offsets against loops") {
  skewed_on_devices<double>({{3, 5}, {130, 5}, {133, 7}}, 1e-12);
  skewed_on_devices<float>({{4, 5}, {132, 7}, {137, 6}}, 1e-5);
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
