// SPDX-License-Identifier: Apache-2.0
// Arrays of half and bfloat16 beyond elementwise work: reductions (accumulating in float), creation,
// printing, copies, .npy and DLPack, and the element type `Array c = expr` deduces, over 1, 2, 3 and
// 8 host devices (1 and all GPUs in the CUDA variant), against plain loops.
#include "half_support.hpp"

using namespace tessera;
using namespace tessera_test;

namespace {

template <class T>
void check_reductions(const DeviceSet& ds, std::size_t n) {
  const auto av = rounded<T>(random_values<double>(n, -2.0, 2.0));
  const auto bv = rounded<T>(random_values<double>(n, 0.5, 1.5));
  const auto p = shard(0, ds);
  const Array<T, 1> a = from_host(av, {static_cast<index_t>(n)}, p), b = from_host(bv, {static_cast<index_t>(n)}, p);
  double s = 0, sa = 0, d = 0, q = 0, mx = -INFINITY, mn = INFINITY;
  for (std::size_t i = 0; i < n; ++i) {
    s += double(av[i]);
    sa += std::fabs(double(av[i]));
    d += double(av[i]) * double(bv[i]);
    q += double(av[i]) * double(av[i]);
    mx = std::max(mx, double(av[i]));
    mn = std::min(mn, double(av[i]));
  }
  const auto got_sum = sum(a);
  static_assert(std::is_same_v<decltype(got_sum), const float>, "reductions of half return float");
  static_assert(std::is_same_v<decltype(mean(a)), float> && std::is_same_v<decltype(maximum(a)), float>);
  const double tol = 1e-5 * (sa + 1) + 1e-6 * static_cast<double>(n);
  CHECK(std::fabs(got_sum - s) <= tol);
  CHECK(std::fabs(dot(a, b) - d) <= 2 * tol);
  CHECK(std::fabs(norm(a) - std::sqrt(q)) <= 1e-5 * std::sqrt(q) + 1e-6);
  CHECK(sum(a, as_array).at() == doctest::Approx(got_sum).epsilon(1e-5));
  if (n > 0) {
    CHECK(maximum(a) == mx);
    CHECK(minimum(a) == mn);
    CHECK(std::fabs(mean(a) - s / static_cast<double>(n)) <= tol / static_cast<double>(n));
    CHECK(prod(b) == doctest::Approx([&] {
            double r = 1;
            for (auto v : bv) r *= double(v);
            return r;
          }()).epsilon(1e-4));
  }
}

TEST_CASE("reductions over half and bfloat16 accumulate in float and return float") {
  for (const auto& ds : device_sets()) {
    for (index_t n : half_sizes()) {
      INFO("device set " << set_name(ds) << ", n = " << n);
      check_reductions<half>(ds, static_cast<std::size_t>(n));
      check_reductions<bfloat16>(ds, static_cast<std::size_t>(n));
    }
    // Along dims of a sharded matrix, either dimension.
    const index_t m = 37, k = 2 * static_cast<index_t>(ds.size()) + 3;
    const auto v = rounded<half>(random_values<double>(static_cast<std::size_t>(m * k)));
    const Array<half, 2> x = from_host(v, {m, k}, shard(1, ds));
    auto s0 = sum(x, dims(0));
    auto s1 = maximum(x, dims(1));
    static_assert(std::is_same_v<decltype(s0), Array<float, 2>> && std::is_same_v<decltype(s1), Array<float, 2>>);
    const auto h0 = to_host(s0), h1 = to_host(s1);
    for (index_t j = 0; j < k; ++j) {
      double w = 0;
      for (index_t i = 0; i < m; ++i) w += double(v[i + j * m]);
      CHECK(h0[j] == doctest::Approx(w).epsilon(1e-5));
    }
    for (index_t i = 0; i < m; ++i) {
      float w = -INFINITY;
      for (index_t j = 0; j < k; ++j) w = std::max(w, float(v[i + j * m]));
      CHECK(h1[i] == w);
    }
  }
}

// One device of the set, so that reproducibility is checked across placements.
Placement host_or_first(const DeviceSet& ds) { return on(ds.front()); }

template <class T>
void check_creation(const DeviceSet& ds, index_t n) {
  const auto p = shard(0, ds);
  check_bits(to_host(zeros<T>({n}, p)), std::vector<T>(n, T(0)), "zeros");
  check_bits(to_host(ones<T>({n}, p)), std::vector<T>(n, T(1)), "ones");
  check_bits(to_host(full<T>({n}, T(-0.3), p)), std::vector<T>(n, T(-0.3)), "full");
  std::vector<T> want(n);
  for (index_t i = 0; i < n; ++i) want[i] = T(2.5 + static_cast<double>(i));
  check_bits(to_host(iota<T>({n}, p, memory::unified, T(2.5))), want, "iota from 2.5");
  // rand: in [0, 1), on the grid of T's significand, and the same values on every device set.
  seed(1234);
  const auto r = to_host(rand<T>({n}, p));
  const double grid = std::ldexp(1.0, -significand_bits<T>);
  for (index_t i = 0; i < n; ++i) {
    const double x = float(r[i]);
    if (!(x >= 0 && x < 1 && std::fmod(x, grid) == 0)) {
      FAIL_CHECK("rand element " << i << " = " << x);
      break;
    }
  }
  seed(1234);
  check_bits(to_host(rand<T>({n}, host_or_first(ds))), r, "rand reproducible on another placement");
  seed(99);
  const auto g = to_host(randn<T>({n}, p));
  seed(99);
  check_bits(to_host(randn<T>({n}, host_or_first(ds))), g, "randn reproducible on another placement");
  double m = 0;
  for (auto x : g) m += float(x);
  if (n > 10000) CHECK(std::fabs(m / static_cast<double>(n)) < 0.01);
}

}  // namespace

TEST_CASE("zeros ones full iota rand randn of half and bfloat16") {
  for (const auto& ds : device_sets()) {
    for (index_t n : {index_t(0), index_t(1), index_t(17), index_t(4099)}) {
      INFO("device set " << set_name(ds) << ", n = " << n);
      check_creation<half>(ds, n);
      check_creation<bfloat16>(ds, n);
    }
    // iota past 2048 rounds each value once (2049 is a tie in half: to even, 2048).
    CHECK(iota<half>({3}, shard(0, ds), memory::unified, half(2048)).at(1).bits() == half(2048).bits());
    CHECK(iota<half>({4}, shard(0, ds), memory::unified, half(2048)).at(3).bits() == half(2052).bits());
  }
}

TEST_CASE("printing names Float16 and BFloat16 and shows the shortest digits that read back") {
  if (skip_without_gpu()) return;
  std::ostringstream os;
  os << from_host(std::vector<half>{half(0.1), half(-2.5), half(65504.0f), half(1e-7)}, {4});
  const std::string s = os.str();
  check_mentions(s, {"4-element Array{Float16, 1}", "0.1\n", "-2.5", "6.55e+04", "1e-07"});
  std::ostringstream ob;
  ob << full<bfloat16>({2, 2}, bfloat16(0.1));
  check_mentions(ob.str(), {"2×2 Array{BFloat16, 2}", "0.1"});
  CHECK(detail::format_value(half(0.1)) == "0.1");
  CHECK(detail::format_value(half::from_bits(0x3555)) == "0.3333");
  CHECK(detail::format_value(bfloat16(1.0f / 3)) == "0.334");
  CHECK(detail::format_value(bfloat16(INFINITY)) == "inf");
}

TEST_CASE("copies between placements keep every bit") {
  for (const auto& ds : device_sets()) {
    INFO(set_name(ds));
    std::vector<half> all(65536);
    for (std::uint32_t b = 0; b < 65536; ++b) all[b] = half::from_bits(static_cast<std::uint16_t>(b));
    const Array<half, 1> a = from_host(all, {65536}, shard(0, ds));
    check_bits(to_host(copy(a, replicate(ds))), all, "copy to replicated");
    check_bits(to_host(copy(a, on(ds.back()))), all, "copy to one device");
  }
}

TEST_CASE(".npy: half is '<f2' (and loads as float or double); bfloat16 has no NumPy dtype") {
  if (skip_without_gpu()) return;
  namespace fs = std::filesystem;
  const fs::path dir = fs::temp_directory_path() / ("tessera_half_" + std::to_string(rng()()));
  fs::create_directories(dir);
  for (const auto& ds : device_sets()) {
    INFO(set_name(ds));
    const index_t m = 5, n = 2 * static_cast<index_t>(ds.size()) + 1;
    const auto v = rounded<half>(random_values<double>(static_cast<std::size_t>(m * n), -100, 100));
    const Array<half, 2> a = from_host(v, {m, n}, shard(1, ds));
    save_npy(dir / "h.npy", a);
    std::string head(128, '\0');
    {
      std::FILE* f = std::fopen((dir / "h.npy").c_str(), "rb");
      REQUIRE(f != nullptr);
      head.resize(std::fread(head.data(), 1, head.size(), f));
      std::fclose(f);
    }
    CHECK(contains(head, "'descr': '<f2'"));
    check_bits(to_host(load_npy<half, 2>(dir / "h.npy", shard(0, ds))), v, "load_npy<half>");
    std::vector<float> wf(v.begin(), v.end());
    check_equal(to_host(load_npy<float, 2>(dir / "h.npy", shard(1, ds))), wf);
    check_mentions(expect_error<invalid_argument>([&] { (void)load_npy<bfloat16, 2>(dir / "h.npy"); }),
                   {"h.npy", "load_npy<bfloat16, 2>", "expected bfloat16", "found <f2 (half)", "cast<bfloat16>"});
    check_mentions(expect_error<invalid_argument>([&] { save_npy(dir / "b.npy", eval(cast<bfloat16>(a))); }),
                   {"b.npy", "no bfloat16 dtype", "found bfloat16", "cast<float>"});
    CHECK(!fs::exists(dir / "b.npy"));
    save_npy(dir / "f.npy", eval(cast<float>(a)));
    check_mentions(expect_error<invalid_argument>([&] { (void)load_npy<half, 2>(dir / "f.npy"); }),
                   {"f.npy", "<f4 (float)", "expected <f2", "cast<half>"});
  }
  std::error_code ec;
  fs::remove_all(dir, ec);
}

#if defined(TESSERA_HAS_DLPACK)
TEST_CASE("DLPack: half is kDLFloat 16, bfloat16 kDLBfloat 16; a mismatch names both") {
  for (const auto& ds : device_sets()) {
    INFO(set_name(ds));
    const auto v = rounded<bfloat16>(random_values<double>(12));
    const Array<bfloat16, 1> b = from_host(v, {12}, on(ds.front()));
    DLManagedTensor* t = to_dlpack(b);
    CHECK(t->dl_tensor.dtype.code == kDLBfloat);
    CHECK(t->dl_tensor.dtype.bits == 16);
    check_mentions(expect_error<invalid_argument>([&] { (void)from_dlpack<half, 1>(t); }),
                   {"from_dlpack<half, 1>", "expected float16", "found bfloat16"});
    check_bits(to_host(from_dlpack<bfloat16, 1>(t)), v, "from_dlpack<bfloat16>");
    const Array<half, 1> h = cast<half>(b);
    DLManagedTensor* th = to_dlpack(h);
    CHECK(th->dl_tensor.dtype.code == kDLFloat);
    CHECK(th->dl_tensor.dtype.bits == 16);
    th->deleter(th);
  }
}
#endif

TEST_CASE("Array c = expr deduces the element type; statistics, scans and sorts work on the float values") {
  for (const auto& ds : device_sets()) {
    INFO(set_name(ds));
    const index_t n = 1001;
    const auto v = rounded<half>(random_values<double>(static_cast<std::size_t>(n)));
    const Array<half, 1> a = from_host(v, {n}, shard(0, ds));
    const Array<float, 1> f = ones<float>({n}, shard(0, ds));
    Array c = a * 2;
    Array d = a + f;
    Array e = a;  // a copy, still half
    static_assert(std::is_same_v<decltype(c), Array<half, 1>> && std::is_same_v<decltype(d), Array<float, 1>> &&
                  std::is_same_v<decltype(e), Array<half, 1>>);
    check_bits(to_host(e), v, "Array e = a");
    std::vector<double> w(v.begin(), v.end());
    double mu = 0, var_ref = 0;
    for (double x : w) mu += x;
    mu /= static_cast<double>(n);
    for (double x : w) var_ref += (x - mu) * (x - mu);
    var_ref /= static_cast<double>(n - 1);
    CHECK(var(a) == doctest::Approx(var_ref).epsilon(1e-4));
    const auto [mx, at] = findmax(a);
    const auto best = std::max_element(w.begin(), w.end());
    CHECK(mx == *best);
    CHECK(at == best - w.begin());
    auto cs = cumsum(a);
    auto so = sort(a);
    static_assert(std::is_same_v<decltype(cs), Array<float, 1>> && std::is_same_v<decltype(so), Array<float, 1>>);
    std::sort(w.begin(), w.end());
    check_equal(to_host(so), std::vector<float>(w.begin(), w.end()));
    CHECK(to_host(cs).back() == doctest::Approx(mu * static_cast<double>(n)).epsilon(1e-4));
  }
}
