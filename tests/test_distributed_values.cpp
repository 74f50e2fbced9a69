// SPDX-License-Identifier: Apache-2.0
// Tessera across processes against plain host loops (tessera/distributed.hpp). test_distributed.cpp
// compares with the same work on rank-private host devices (bit for bit, host devices only); here
// every reference is computed in loops over host values that every rank builds alike from fixed
// seeds (SPMD), so GPUs across ranks are checked too: one process (.host, .cuda: the ordinary
// multi-device path) and mpirun (.mpi2, .mpi3 on host devices; .mpi1.cuda, .mpi2.cuda, .mpi4.cuda on GPUs).
// Floating results within a tolerance (FMA contraction, sin's ulps, NCCL's order of operations);
// integers, copies, sorts and exactly representable stencils exactly. Over devices() (and, in one
// process on host devices, 3 host devices): elementwise work and host reads (1-d, 2-d sharded
// along either dim, uneven and empty blocks, views, at()); full reductions (to the host, as arrays,
// a 30M-float sum on GPUs); reductions along dims; allreduce (every op), broadcast_from, allgather,
// reduce_scatter; copy/copyto across ranks; update_halo with halo(1) (Jacobi) and halo(2, periodic);
// cumsum, sort, sortperm, matmul. Ranks sharing a GPU (mpirun -np 2 on one GPU) run everything but
// what needs NCCL across ranks, which NCCL refuses there ("Duplicate GPU detected").
#include "test_support.hpp"

#include <tessera/kernel.hpp>  // user kernels: not in the umbrella header

#include <tessera/distributed.hpp>
#include <backend/runtime/runtime.hpp>  // rt::retired_blocks

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <numeric>
#include <sstream>
#include <string>
#include <system_error>
#include <utility>
#include <vector>

using namespace tessera_test;

namespace {

// The GPUs of this node as init counts them before giving each rank its share
// (CUDA_VISIBLE_DEVICES's entries, else the driver's list).
int node_gpus() {
  int n = 0;
  if (const char* v = std::getenv("CUDA_VISIBLE_DEVICES")) {
    std::istringstream in(v);
    for (std::string e; std::getline(in, e, ',');) n += !e.empty();
    return n;
  }
  std::error_code ec;
  for (auto it = std::filesystem::directory_iterator("/proc/driver/nvidia/gpus", ec);
       !ec && it != std::filesystem::directory_iterator(); it.increment(ec))
    ++n;
  return n;
}

// Before any other Tessera call (doctest's main makes none): the device table spans the ranks.
const int gpus_on_node = [] {
  const int g = node_gpus();
  distributed::init();
  return g;
}();

// Ranks share a GPU when the node has fewer GPUs than ranks (init gives rank l GPU l % G). NCCL
// cannot span them ("Duplicate GPU detected"), so what needs NCCL across ranks is left out there.
bool gpus_shared(const DeviceSet& D) {
  return D.front().kind() == device_kind::cuda && distributed::size() > 1 && gpus_on_node < distributed::local_size();
}

// n values from a fixed seed, the same on every rank: uniform reals in [lo, hi), or integers in
// [lo, hi] (`integral`: also integer-valued floats, for exactly representable arithmetic).
template <class T>
std::vector<T> values(std::size_t n, std::uint64_t seed, double lo, double hi, bool integral = std::is_integral_v<T>) {
  std::mt19937_64 g(seed);
  std::vector<T> v(n);
  if (integral) {
    std::uniform_int_distribution<long long> d(static_cast<long long>(lo), static_cast<long long>(hi));
    for (auto& x : v) x = static_cast<T>(d(g));
  } else {
    std::uniform_real_distribution<double> d(lo, hi);
    for (auto& x : v) x = static_cast<T>(d(g));
  }
  return v;
}

// The device sets a case runs on: devices() (every rank's devices); in one process on host
// devices also 3 host devices (uneven blocks). Empty, after a visible skip, without a GPU in the
// CUDA variant (devices() would throw), and for a case that needs NCCL across ranks sharing GPUs.
std::vector<DeviceSet> sets(bool needs_nccl = false) {
  if (skip_without_gpu()) return {};
  std::vector<DeviceSet> out{devices()};
  if (needs_nccl && gpus_shared(out[0])) {
    MESSAGE("SKIPPED: " << distributed::local_size() << " ranks share " << gpus_on_node
                        << " GPU(s) on this node: NCCL cannot span ranks on one GPU");
    return {};
  }
  if (distributed::size() == 1 && devices().front().kind() == device_kind::host && devices().size() != 3)
    out.push_back(host_devices(3));
  return out;
}

bool on_gpus(const DeviceSet& D) { return D.front().kind() == device_kind::cuda; }

const std::vector<index_t> lengths{0, 1, 2, 7, 31, 33, 255, 257, 65535, 65537, (index_t(1) << 22) + 3};
const std::vector<std::pair<index_t, index_t>> shapes{{37, 11}, {2, 5}, {1001, 3}, {5, 1}, {64, 1000}, {0, 4}};

#define CHECK_NEAR(got, want, tol)                                                                   \
  do {                                                                                               \
    const double g_ = static_cast<double>(got), w_ = (want), t_ = (tol);                             \
    CHECK_MESSAGE(std::fabs(g_ - w_) <= t_, #got << ": got " << g_ << ", expected " << w_ << " +- " << t_); \
  } while (0)

// Element i within tol[i] of want[i].
template <class T>
void check_within(const std::vector<T>& got, const std::vector<double>& want, const std::vector<double>& tol) {
  REQUIRE(got.size() == want.size());
  for (std::size_t i = 0; i < got.size(); ++i) {
    if (!(std::fabs(static_cast<double>(got[i]) - want[i]) <= tol[i])) {
      FAIL_CHECK("element " << i << ": got " << double(got[i]) << ", expected " << want[i] << " +- " << tol[i]);
      return;
    }
  }
}

// This rank's replicas (or shards) of x, read through host_data (host devices, unified memory).
template <class T, int N>
std::vector<std::vector<T>> local_parts(const Array<T, N>& x) {
  std::vector<std::vector<T>> out;
  const auto& l = x.layout();
  for (std::size_t s = 0; s < l.parts.size(); ++s) {
    if (!distributed::is_local(l.parts[s].device)) continue;
    const auto n = static_cast<std::size_t>(detail::volume<N>(l.parts[s].extent));
    const T* h = n ? x.host_data(static_cast<int>(s)) : nullptr;
    out.emplace_back(h, h + n);
  }
  return out;
}

// x is replicated (or on one device), and to_host(x) and every replica on this rank hold `want`.
template <class T, int N>
void check_replicated(const Array<T, N>& x, const std::vector<T>& want) {
  CHECK((x.is_replicated() || x.layout().parts.size() == 1));
  check_values(to_host(x), want, 0, 0, "to_host");
  for (const auto& p : local_parts(x)) check_values(p, want, 0, 0, "a replica on this rank");
}

// A replicated array over D whose replica s holds parts[s]: each rank writes its own devices'.
template <class T>
Array<T, 1> replicas(const DeviceSet& D, const std::vector<std::vector<T>>& parts) {
  Array<T, 1> x = zeros<T>({static_cast<index_t>(parts[0].size())}, replicate(D));
  for (std::size_t s = 0; s < D.size(); ++s)
    if (distributed::is_local(D[s])) std::copy(parts[s].begin(), parts[s].end(), x.host_data(static_cast<int>(s)));
  return x;
}

// Running sums of a column-major array with m rows along dim 0 (down each column) or dim 1 (along
// each row), and a tolerance for each from the running sum of |v|.
std::pair<std::vector<double>, std::vector<double>> running_sums(const std::vector<float>& v, std::size_t m, int dim) {
  std::vector<double> s(v.size()), tol(v.size());
  for (std::size_t e = 0; e < v.size(); ++e) {
    const bool first = dim == 0 ? e % m == 0 : e < m;
    const std::size_t before = first ? e : dim == 0 ? e - 1 : e - m;
    s[e] = v[e] + (first ? 0.0 : s[before]);
    tol[e] = 1e-5 * std::fabs(v[e]) + (first ? 1e-5 : tol[before]);
  }
  return {s, tol};
}

// A x for a column-major r x c matrix, and a tolerance for each element from the sum of |a x|.
std::pair<std::vector<double>, std::vector<double>> matvec(const std::vector<float>& a, std::size_t r,
                                                           std::size_t c, const std::vector<float>& x) {
  std::vector<double> y(r, 0.0), tol(r, 1e-6);
  for (std::size_t j = 0; j < c; ++j)
    for (std::size_t i = 0; i < r; ++i) {
      y[i] += double(a[i + j * r]) * x[j];
      tol[i] += 1e-5 * std::fabs(double(a[i + j * r]) * x[j]);
    }
  return {y, tol};
}

}  // namespace

TEST_CASE("elementwise expressions and host reads over every rank's devices") {
  for (const DeviceSet& D : sets()) {
    for (index_t n : lengths) {
      INFO(set_name(D) << ", n = " << n);
      const auto N = static_cast<std::size_t>(n);
      const auto va = values<float>(N, 1, -2, 2), vb = values<float>(N, 2, -2, 2);
      const Array<float, 1> a = from_host(va, {n}, shard(0, D)), b = from_host(vb, {n}, shard(0, D));
      const Array<float, 1> c = sin(a) * b + 2.f * a;
      std::vector<double> want(N);
      for (std::size_t i = 0; i < N; ++i) want[i] = std::sin(double(va[i])) * vb[i] + 2.0 * va[i];
      check_values(to_host(c), want, 1e-5, 1e-5, "sin(a) * b + 2 * a");
      check_values(to_host(a), va, 0, 0, "to_host(a)");
      for (index_t i : {index_t(0), n / 2, n - 1}) {
        if (i < 0 || i >= n) continue;
        const double w = want[static_cast<std::size_t>(i)];
        CHECK_NEAR(c.at(i), w, 1e-5 + 1e-5 * std::fabs(w));
      }
      // Integers: exact.
      const auto ka = values<std::int32_t>(N, 3, -1000, 1000), kb = values<std::int32_t>(N, 4, -1000, 1000);
      const Array<std::int32_t, 1> ia = from_host(ka, {n}, shard(0, D)), ib = from_host(kb, {n}, shard(0, D));
      std::vector<std::int32_t> iwant(N);
      for (std::size_t i = 0; i < N; ++i) iwant[i] = ka[i] * kb[i] + 3 * ka[i] - kb[i];
      check_values(to_host(eval(ia * ib + 3 * ia - ib)), iwant, 0, 0, "ia * ib + 3 * ia - ib");
      const auto la = values<std::int64_t>(N, 5, -1e12, 1e12), lb = values<std::int64_t>(N, 6, -1e12, 1e12);
      const Array<std::int64_t, 1> xa = from_host(la, {n}, shard(0, D)), xb = from_host(lb, {n}, shard(0, D));
      const Array<std::int64_t, 1> lc = xa * std::int64_t(3) + xb;
      std::vector<std::int64_t> lwant(N);
      for (std::size_t i = 0; i < N; ++i) lwant[i] = la[i] * 3 + lb[i];
      check_values(to_host(lc), lwant, 0, 0, "xa * 3 + xb (int64)");
      if (n > 0) CHECK(lc.at(n - 1) == lwant[N - 1]);
    }
    // 2-d, sharded along either dimension (uneven blocks; {2, 5} and {0, 4} leave some empty).
    for (auto [m, n] : shapes) {
      for (int d : {0, 1}) {
        INFO(set_name(D) << ", shape " << m << "x" << n << ", shard(" << d << ")");
        const auto M = static_cast<std::size_t>(m), N = static_cast<std::size_t>(n);
        const auto vx = values<float>(M * N, 7, -2, 2), vy = values<float>(M * N, 8, -2, 2);
        const Array<float, 2> x = from_host(vx, {m, n}, shard(d, D)), y = from_host(vy, {m, n}, shard(d, D));
        const Array<float, 2> c = sin(x) * y + 2.f * x;
        std::vector<double> want(M * N);
        for (std::size_t i = 0; i < M * N; ++i) want[i] = std::sin(double(vx[i])) * vy[i] + 2.0 * vx[i];
        check_values(to_host(c), want, 1e-5, 1e-5, "sin(x) * y + 2 * x");
        if (m > 1) {
          std::vector<float> rows;  // x(range(1, m), _): pitched rows of every part
          for (std::size_t j = 0; j < N; ++j)
            for (std::size_t i = 1; i < M; ++i) rows.push_back(vx[i + j * M]);
          check_values(to_host(x(range(1, m), _)), rows, 0, 0, "x(range(1, m), _)");
        }
        if (m * n > 0) CHECK_NEAR(c.at(m - 1, n - 1), want.back(), 1e-5 + 1e-5 * std::fabs(want.back()));
      }
    }
  }
}

TEST_CASE("full reductions over every rank's devices") {
  for (const DeviceSet& D : sets()) {
    for (index_t n : lengths) {
      INFO(set_name(D) << ", n = " << n);
      const auto N = static_cast<std::size_t>(n);
      const auto va = values<float>(N, 21, -2, 2), vb = values<float>(N, 22, -2, 2);
      const auto vk = values<std::int32_t>(N, 23, -1000, 1000);
      const auto vl = values<std::int64_t>(N, 24, -1e12, 1e12);
      const Array<float, 1> a = from_host(va, {n}, shard(0, D)), b = from_host(vb, {n}, shard(0, D));
      const Array<std::int32_t, 1> k = from_host(vk, {n}, shard(0, D));
      const Array<std::int64_t, 1> l = from_host(vl, {n}, shard(0, D));
      double s = 0, sabs = 0, d = 0, dabs = 0, sq = 0;
      std::int64_t sk = 0, sl = 0, positive = 0;
      for (std::size_t i = 0; i < N; ++i) {
        s += va[i];
        sabs += std::fabs(va[i]);
        d += double(va[i]) * vb[i];
        dabs += std::fabs(double(va[i]) * vb[i]);
        sq += double(va[i]) * va[i];
        sk += vk[i];
        sl += vl[i];
        positive += va[i] > 0.f;
      }
      const double tol = 1e-5 * sabs + 1e-6;
      CHECK_NEAR(sum(a), s, tol);
      if (!gpus_shared(D)) CHECK_NEAR(sum(a, as_array).at(), s, tol);  // partials through NCCL
      CHECK_NEAR(dot(a, b), d, 1e-5 * dabs + 1e-6);
      CHECK_NEAR(norm(a), std::sqrt(sq), 1e-5 * std::sqrt(sq) + 1e-6);
      CHECK(sum(k) == sk);
      CHECK(sum(l) == sl);
      CHECK(count(a > 0.f) == positive);
      if (n == 0) {
        CHECK(std::isnan(mean(a)));
        CHECK_THROWS_AS(maximum(a), invalid_argument);
        CHECK_THROWS_AS(minimum(k), invalid_argument);
      } else {
        CHECK_NEAR(mean(a), s / double(n), tol / double(n));
        CHECK(maximum(a) == *std::max_element(va.begin(), va.end()));
        CHECK(minimum(a) == *std::min_element(va.begin(), va.end()));
        CHECK(maximum(k) == *std::max_element(vk.begin(), vk.end()));
        CHECK(minimum(k) == *std::min_element(vk.begin(), vk.end()));
        if (!gpus_shared(D)) CHECK(maximum(l, as_array).at() == *std::max_element(vl.begin(), vl.end()));
      }
      if (n <= 257) {  // products of few values: float near 1, and int32 (in int64) without overflow
        const auto vp = values<float>(N, 25, 0.9, 1.1);
        double p = 1;
        for (float x : vp) p *= x;
        CHECK_NEAR(prod(from_host(vp, {n}, shard(0, D))), p, 1e-4 * p);
      }
      if (n <= 33) {
        auto vi = values<std::int32_t>(N, 26, 1, 3);
        std::int64_t p = 1;
        for (std::size_t i = 0; i < N; ++i) p *= (vi[i] = i % 3 == 0 ? -vi[i] : vi[i]);
        CHECK(prod(from_host(vi, {n}, shard(0, D))) == p);
      }
    }
  }
}

TEST_CASE("a large float sum to the host (30M floats on GPUs, 2^22 on host devices)") {
  for (const DeviceSet& D : sets()) {
    const index_t n = on_gpus(D) ? 30'000'000 : index_t(1) << 22;
    INFO(set_name(D) << ", n = " << n);
    const auto v = values<float>(static_cast<std::size_t>(n), 31, 0, 1);  // rand<float>'s range
    double s = 0, sq = 0;
    for (float x : v) {
      s += x;
      sq += double(x) * x;
    }
    const Array<float, 1> a = from_host(v, {n}, shard(0, D));
    CHECK_NEAR(sum(a), s, 1e-5 * s);
    CHECK_NEAR(sum(a * a), sq, 1e-5 * s);
  }
}

TEST_CASE("a user ReductionKernel over every rank's devices (one exchange of the shards' values)") {
  // Host devices compile it with the system compiler, GPUs with NVRTC; the post map runs on the
  // first GPU's rank and its value reaches every rank.
  ReductionKernel l2norm("T x", "T y", "x * x", "a + b", "y = sqrt(a)", "0", "dv_l2norm");
  ReductionKernel count_pos("float64 x", "int64 y", "x > 0 ? 1 : 0", "a + b", "y = a", "0", "dv_count_pos");
  for (const DeviceSet& D : sets()) {
    for (index_t n : {index_t(0), index_t(1), index_t(257), index_t(65537)}) {
      INFO(set_name(D) << ", n = " << n);
      const auto v = values<double>(static_cast<std::size_t>(n), 77, -2, 2);
      double sq = 0;
      std::int64_t pos = 0;
      for (double x : v) {
        sq += x * x;
        pos += x > 0 ? 1 : 0;
      }
      const Array<double, 1> a = from_host(v, {n}, shard(0, D));
      CHECK_NEAR(l2norm(a), std::sqrt(sq), 1e-12 * (1 + sq));
      CHECK(count_pos.call<std::int64_t>(a) == pos);
    }
  }
}

TEST_CASE("a RawKernel launches each rank's own shards (GPUs)") {
  for (const DeviceSet& D : sets()) {
    if (!on_gpus(D)) {
      MESSAGE("SKIPPED: RawKernel runs on GPUs (" << set_name(D) << ")");
      continue;
    }
    RawKernel scale(R"(
extern "C" __global__ void dv_scale(tessera::shard<float, 1> x, float by) {
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < x.size; i += gridDim.x * (long long)blockDim.x)
    x(i) = x(i) * by + 1.0f;
}
)",
                    "dv_scale");
    for (index_t n : {index_t(1), index_t(1000), index_t(65537)}) {
      INFO(set_name(D) << ", n = " << n);
      auto v = values<float>(static_cast<std::size_t>(n), 91, -8, 8, true);
      Array<float, 1> x = from_host(v, {n}, shard(0, D));
      scale(x, 0.5f);
      for (auto& e : v) e = e * 0.5f + 1.0f;  // exact: halves of small integers
      CHECK(to_host(x) == v);
    }
  }
}

TEST_CASE("reductions along dims over every rank's devices") {
  for (const DeviceSet& D : sets(true)) {
    for (auto [m, n] : shapes) {
      for (int d : {0, 1}) {
        INFO(set_name(D) << ", shape " << m << "x" << n << ", shard(" << d << ")");
        const auto M = static_cast<std::size_t>(m), N = static_cast<std::size_t>(n);
        const auto v = values<float>(M * N, 41, -2, 2);
        const auto vk = values<std::int32_t>(M * N, 42, -1000, 1000);
        const Array<float, 2> x = from_host(v, {m, n}, shard(d, D));
        const Array<std::int32_t, 2> k = from_host(vk, {m, n}, shard(d, D));
        std::vector<double> col(N, 0.0), colabs(N, 0.0), row(M, 0.0), rowabs(M, 0.0);
        std::vector<float> rowmin(M, INFINITY);
        std::vector<std::int64_t> kcol(N, 0);
        for (std::size_t j = 0; j < N; ++j)
          for (std::size_t i = 0; i < M; ++i) {
            const float e = v[i + j * M];
            col[j] += e;
            colabs[j] += std::fabs(e);
            row[i] += e;
            rowabs[i] += std::fabs(e);
            rowmin[i] = std::min(rowmin[i], e);
            kcol[j] += vk[i + j * M];
          }
        auto tols = [](const std::vector<double>& abs, double scale) {
          std::vector<double> t;
          for (double a : abs) t.push_back((1e-5 * a + 1e-6) * scale);
          return t;
        };
        check_within(to_host(sum(x, dims(0))), col, tols(colabs, 1));
        check_within(to_host(sum(x, dims(1))), row, tols(rowabs, 1));
        std::vector<double> rowmean(M);
        for (std::size_t i = 0; i < M; ++i) rowmean[i] = row[i] / double(n);
        check_within(to_host(mean(x, dims(1))), rowmean, tols(rowabs, 1.0 / double(n)));
        check_values(to_host(minimum(x, dims(1))), rowmin, 0, 0, "minimum(x, dims(1))");
        check_values(to_host(sum(k, dims(0))), kcol, 0, 0, "sum(k, dims(0))");
        if (m * n == 0) {
          CHECK_THROWS_AS(maximum(x, dims(0, 1)), invalid_argument);
        } else {
          const std::vector<float> mx{*std::max_element(v.begin(), v.end())};
          check_values(to_host(maximum(x, dims(0, 1))), mx, 0, 0, "maximum(x, dims(0, 1))");
        }
      }
    }
  }
}

TEST_CASE("ranks sharing a GPU: NCCL across them is refused by name on every rank, the rest works") {
  if (skip_without_gpu()) return;
  const DeviceSet D = devices();
  if (!gpus_shared(D)) {
    MESSAGE("SKIPPED: no two ranks share a GPU here (" << distributed::size() << " rank(s), " << gpus_on_node
                                                         << " GPU(s) on the node)");
    return;
  }
  const index_t n = 1000;
  const auto v = values<float>(static_cast<std::size_t>(n), 5, -4, 4, true);
  Array<float, 1> x = from_host(v, {n}, replicate(D));
  try {
    allreduce(x);
    FAIL("expected distributed_error: NCCL across ranks on one GPU");
  } catch (const distributed_error& e) {
    const std::string what = e.what();
    CHECK_MESSAGE(what.find("are the same GPU") != std::string::npos, what);
  }
  check_values(to_host(x), v, 0, 0, "x after the refused allreduce");  // intact
  // Work without NCCL goes on.
  const Array<float, 1> y = from_host(v, {n}, shard(0, D));
  double s = 0;
  for (float e : v) s += e;
  CHECK_NEAR(sum(y), s, 0);
}

// allreduce(op) of replicas parts[s] (seeded by s) on devices E, against the fold in host loops.
template <class T>
void check_allreduce(const DeviceSet& E, reduce_op op, std::uint64_t seed, double lo, double hi) {
  const std::size_t k = 1001;
  std::vector<std::vector<T>> parts;
  for (std::size_t s = 0; s < E.size(); ++s) parts.push_back(values<T>(k, seed + s, lo, hi));
  std::vector<double> want(parts[0].begin(), parts[0].end()), mag(k);
  for (std::size_t i = 0; i < k; ++i) mag[i] = std::fabs(want[i]);
  for (std::size_t s = 1; s < parts.size(); ++s)
    for (std::size_t i = 0; i < k; ++i) {
      const double x = parts[s][i];
      mag[i] = op == reduce_op::prod ? mag[i] * std::fabs(x) : mag[i] + std::fabs(x);
      want[i] = op == reduce_op::sum ? want[i] + x : op == reduce_op::prod ? want[i] * x
              : op == reduce_op::max ? std::max(want[i], x) : std::min(want[i], x);
    }
  Array<T, 1> x = replicas(E, parts);
  allreduce(x, op);
  INFO("allreduce, op " << static_cast<int>(op) << " over " << E.size() << " devices");
  // Integers exactly (their values keep every result exact in double), max and min too.
  std::vector<double> tol(k, 0.0);
  if (!std::is_integral_v<T> && (op == reduce_op::sum || op == reduce_op::prod))
    for (std::size_t i = 0; i < k; ++i) tol[i] = 1e-5 * mag[i];
  check_within(to_host(x), want, tol);
  for (const auto& p : local_parts(x)) check_within(p, want, tol);
}

TEST_CASE("collectives across ranks: allreduce, broadcast_from, allgather, reduce_scatter") {
  for (const DeviceSet& D : sets(true)) {
    INFO(set_name(D));
    const std::size_t P = D.size();
    for (reduce_op op : {reduce_op::sum, reduce_op::prod, reduce_op::max, reduce_op::min}) {
      const bool p = op == reduce_op::prod;  // small values: products of up to 8 stay exact
      check_allreduce<float>(D, op, 50, p ? 0.5 : -2, 2);
      check_allreduce<std::int32_t>(D, op, 60, p ? -12 : -1e8, p ? 12 : 1e8);
      check_allreduce<std::int64_t>(D, op, 70, p ? -12 : -1e14, p ? 12 : 1e14);
      if (P > 2) {  // over the first and last device: ranks between take part with nothing
        check_allreduce<float>(DeviceSet{D.front(), D.back()}, op, 80, p ? 0.5 : -2, 2);
        check_allreduce<std::int32_t>(DeviceSet{D.front(), D.back()}, op, 90, p ? -12 : -1e8, p ? 12 : 1e8);
      }
    }
    // broadcast_from: every replica takes the root's values.
    std::vector<std::vector<float>> parts;
    for (std::size_t s = 0; s < P; ++s) parts.push_back(values<float>(1001, 100 + s, -2, 2));
    Array<float, 1> r = replicas(D, parts);
    broadcast_from(r, D.back());
    check_replicated(r, parts.back());
    r = replicas(D, parts);
    broadcast_from(r, D.front());
    check_replicated(r, parts.front());
    // Small replicas (up to 256 bytes ride along with the consistency check on host devices) and
    // the sizes around that bound.
    for (std::size_t n : {0, 1, 7, 63, 64, 65}) {
      std::vector<std::vector<float>> small;
      for (std::size_t s = 0; s < P; ++s) small.push_back(values<float>(n, 300 + 7 * n + s, -2, 2));
      Array<float, 1> q = replicas(D, small);
      broadcast_from(q, D[P / 2]);
      check_replicated(q, small[P / 2]);
    }
    // reduce_scatter: the sum over replicas, sharded along the last dim (every rank its block).
    r = replicas(D, parts);
    std::vector<double> want(1001, 0.0), tol(1001, 1e-6);
    for (const auto& q : parts)
      for (std::size_t i = 0; i < q.size(); ++i) {
        want[i] += q[i];
        tol[i] += 1e-5 * std::fabs(q[i]);
      }
    const Array<float, 1> rs = reduce_scatter(r);
    CHECK(!rs.is_replicated());
    check_within(to_host(rs), want, tol);
    // allgather: sharded (uneven blocks, in order or not) to replicated on every device.
    const auto v = values<float>(1001, 110, -2, 2);
    check_replicated(allgather(from_host(v, {1001}, shard(0, D))), v);
    const auto w = values<std::int32_t>(35, 111, -1000, 1000);
    check_replicated(allgather(from_host(w, {5, 7}, shard(1, D))), w);
    check_replicated(allgather(from_host(w, {7, 5}, shard(0, D))), w);
  }
}

TEST_CASE("copies between placements that cross ranks") {
  for (const DeviceSet& D : sets()) {
    for (auto [m, n] : shapes) {
      INFO(set_name(D) << ", shape " << m << "x" << n);
      const auto M = static_cast<std::size_t>(m), N = static_cast<std::size_t>(n);
      const auto v = values<float>(M * N, 120, -2, 2);
      const Array<float, 2> x = from_host(v, {m, n}, shard(0, D));
      check_values(to_host(copy(x, shard(1, D))), v, 0, 0, "copy(shard(0) -> shard(1))");
      check_values(to_host(copy(x, on(D.back()))), v, 0, 0, "copy(shard(0) -> on(last device))");
      check_replicated(copy(x, replicate(D)), v);
      Array<float, 2> y = zeros<float>({m, n}, shard(1, D));
      copyto(y, x);
      check_values(to_host(y), v, 0, 0, "copyto(shard(1) <- shard(0))");
      // Shifted views: every block boundary along the shard dimension crosses devices.
      if (m > 1 && n > 1) {
        Array<float, 2> z = zeros<float>({m, n}, shard(1, D));
        copyto(z(range(1, m), range(0, n - 1)), y(range(0, m - 1), range(1, n)));
        std::vector<float> want(M * N, 0.f);
        for (std::size_t j = 0; j + 1 < N; ++j)
          for (std::size_t i = 1; i < M; ++i) want[i + j * M] = v[(i - 1) + (j + 1) * M];
        check_values(to_host(z), want, 0, 0, "copyto of shifted views");
      }
      const auto vl = values<std::int64_t>(M * N, 121, -1e15, 1e15);
      const Array<std::int64_t, 2> l = from_host(vl, {m, n}, shard(1, D));
      check_values(to_host(copy(l, on(D.front()))), vl, 0, 0, "copy(int64 shard(1) -> on(first device))");
      check_values(to_host(copy(l, shard(0, D))), vl, 0, 0, "copy(int64 shard(1) -> shard(0))");
    }
  }
}

// On GPUs of several ranks a re-shard moving 32 MiB or more between devices goes through CUDA IPC
// when every rank holds one of the GPUs (pushed into receive buffers the destinations lend, then
// copied into place; ipc_exchange.cpp), else through NCCL (pieces packed on their sources, unpacked
// on their destinations; the .nccl ctest variant forces it); ranks sharing a GPU keep host staging
// and MPI. Odd sizes (uneven blocks, 4-byte rows), both directions, a block of a view, and a larger
// re-shard last (the receive buffers grow).
TEST_CASE("large re-shards across ranks") {
  for (const DeviceSet& D : sets()) {
    const bool big = on_gpus(D);
    const index_t m = big ? 4097 : 515, n = big ? 4201 : 333;
    INFO(set_name(D) << ", shape " << m << "x" << n);
    const auto M = static_cast<std::size_t>(m), N = static_cast<std::size_t>(n);
    const auto v = values<float>(M * N, 130, -2, 2);
    const Array<float, 2> x = from_host(v, {m, n}, shard(1, D));
    const Array<float, 2> rows = copy(x, shard(0, D));
    check_values(to_host(rows), v, 0, 0, "copy(shard(1) -> shard(0))");
    const Array<float, 2> cols = copy(rows, shard(1, D));
    check_values(to_host(cols), v, 0, 0, "copy(shard(0) -> shard(1))");
    Array<float, 2> z = zeros<float>({m - 2, n - 3}, shard(0, D));
    copyto(z, cols(range(1, m - 1), range(2, n - 1)));
    std::vector<float> want((M - 2) * (N - 3));
    for (std::size_t j = 0; j + 3 < N; ++j)
      for (std::size_t i = 0; i + 2 < M; ++i) want[i + j * (M - 2)] = v[(i + 1) + (j + 2) * M];
    check_values(to_host(z), want, 0, 0, "copyto(shard(0) <- a window of shard(1))");
    check_values(to_host(x), v, 0, 0, "the source after the copies");
    const index_t m2 = m + (big ? 512 : 18);
    const auto v2 = values<float>(static_cast<std::size_t>(m2) * N, 132, -2, 2);
    const Array<float, 2> x2 = from_host(v2, {m2, n}, shard(1, D));
    check_values(to_host(copy(x2, shard(0, D))), v2, 0, 0, "copy(shard(1) -> shard(0)), a larger matrix");
    // Re-shards back to back with elementwise work between them and no host read: each copy must
    // see the product queued just before it, and a receive buffer is reused while the GPUs still
    // run the calls before (on GPUs the pushes wait there for the copies out of it).
    Array<float, 2> a = copy(x, shard(0, D));
    for (int r = 0; r < 5; ++r) {
      const Array<float, 2> t = copy(a, shard(1, D));
      const Array<float, 2> u = 2.0f * t;
      a = copy(u, shard(0, D));
    }
    std::vector<float> v32(v.size());
    for (std::size_t i = 0; i < v.size(); ++i) v32[i] = 32.0f * v[i];
    check_values(to_host(a), v32, 0, 0, "ten re-shards back to back, doubling between them");
  }
}

// Into memory::device arrays the sources write in place through CUDA IPC (no receive buffer, no
// copy into place; TESSERA_PEER_IPC_DIRECT=0 keeps the buffers): pitched windows, an array read
// between two writes into it (the sources must wait for the reader), and more live destination
// arrays than a rank keeps mapped (older mappings are closed, new blocks get new ids), dead arrays'
// blocks freed while peers map them.
TEST_CASE("large re-shards across ranks into memory::device arrays") {
  for (const DeviceSet& D : sets()) {
    const bool big = on_gpus(D);
    const index_t m = big ? 4099 : 517, n = big ? 4103 : 335;
    INFO(set_name(D) << ", shape " << m << "x" << n);
    const auto M = static_cast<std::size_t>(m), N = static_cast<std::size_t>(n);
    const auto v = values<float>(M * N, 140, -2, 2);
    const Array<float, 2> x = from_host(v, {m, n}, shard(1, D));
    const Array<float, 2> rows = copy(x, shard(0, D), memory::device);
    check_values(to_host(rows), v, 0, 0, "copy(unified shard(1) -> device shard(0))");
    const Array<float, 2> cols = copy(rows, shard(1, D), memory::device);
    check_values(to_host(cols), v, 0, 0, "copy(device shard(0) -> device shard(1))");
    Array<float, 2> z = zeros<float>({m - 2, n - 3}, shard(0, D), memory::device);
    copyto(z, cols(range(1, m - 1), range(2, n - 1)));
    std::vector<float> want((M - 2) * (N - 3));
    for (std::size_t j = 0; j + 3 < N; ++j)
      for (std::size_t i = 0; i + 2 < M; ++i) want[i + j * (M - 2)] = v[(i + 1) + (j + 2) * M];
    check_values(to_host(z), want, 0, 0, "copyto(device shard(0) <- a window of shard(1))");
    Array<float, 2> w = zeros<float>({m, n}, shard(1, D), memory::device);
    copyto(w(range(3, m - 1), range(1, n - 2)), rows(range(3, m - 1), range(1, n - 2)));
    std::vector<float> want_w(M * N, 0.0f);
    for (std::size_t j = 1; j + 2 < N; ++j)
      for (std::size_t i = 3; i + 1 < M; ++i) want_w[i + j * M] = v[i + j * M];
    check_values(to_host(w), want_w, 0, 0, "copyto(a window of device shard(1) <- a window of shard(0))");

    // d is read (acc + d) right before the next copy overwrites it: no host read in between.
    Array<float, 2> d = zeros<float>({m, n}, shard(0, D), memory::device);
    Array<float, 2> acc = zeros<float>({m, n}, shard(0, D), memory::device);
    std::vector<float> want_acc(v.size(), 0.0f);
    for (int r = 1; r <= 5; ++r) {
      const Array<float, 2> t = x * float(r);
      copyto(d, t);
      acc = acc + d;
      for (std::size_t i = 0; i < v.size(); ++i) want_acc[i] = want_acc[i] + v[i] * float(r);
    }
    check_values(to_host(acc), want_acc, 0, 0, "five copies into one device array, each read before the next");

    // Seven destination arrays alive at once, then seven new ones: each rank keeps 4 mapped per peer.
    // reclaim() between the rounds frees the dead ones' blocks: mapped by peers, they are retired,
    // and freed only once each peer has closed them, in the next copy.
    for (int round = 0; round < 3; ++round) {
      if (round > 0) reclaim();
      std::vector<Array<float, 2>> many;
      for (int r = 0; r < 7; ++r) {
        const Array<float, 2> t = x * float(r + round);
        many.push_back(copy(t, shard(0, D), memory::device));
      }
      for (int r = 0; r < 7; ++r) {
        std::vector<float> e(v.size());
        for (std::size_t i = 0; i < v.size(); ++i) e[i] = v[i] * float(r + round);
        check_values(to_host(many[static_cast<std::size_t>(r)]), e, 0, 0, "one of seven device arrays");
      }
    }
    // The blocks retired by the last reclaim() were freed in the next copy (every peer had closed
    // them by then): none is left waiting.
    for (const Device& g : D)
      if (!detail::rt::is_remote(g.id())) CHECK(detail::rt::retired_blocks(g.id(), 64).empty());
    check_values(to_host(x), v, 0, 0, "the source after the copies");
  }
}

namespace {

// Periodic ghost cells of a column-major m x n host array (docs/semantics.md): rows first, then
// columns (whole columns, ghost rows included).
void fill_periodic(std::vector<float>& a, std::size_t m, std::size_t n, std::size_t w) {
  for (std::size_t j = 0; j < n; ++j)
    for (std::size_t i = 0; i < w; ++i) {
      a[i + j * m] = a[(m - 2 * w + i) + j * m];
      a[(m - w + i) + j * m] = a[(w + i) + j * m];
    }
  for (std::size_t j = 0; j < w; ++j)
    for (std::size_t i = 0; i < m; ++i) {
      a[i + j * m] = a[i + (n - 2 * w + j) * m];
      a[i + (n - w + j) * m] = a[i + (w + j) * m];
    }
}

}  // namespace

TEST_CASE("update_halo across ranks: Jacobi sweeps with halo(1), a wide stencil with halo(2, periodic)") {
  // Small integers: every sum below and its quarter are exact in float, in any order.
  for (const DeviceSet& D : sets()) {
    INFO(set_name(D));
    {
      const index_t m = 12, n = 41;
      const auto M = static_cast<std::size_t>(m), N = static_cast<std::size_t>(n);
      std::vector<float> h = values<float>(M * N, 130, -8, 8, true);
      Array<float, 2> u = from_host(h, {m, n}, shard(1, halo(1), D));
      Array<float, 2> v = u;  // halo cells included
      const auto I = range(1, m - 1), J = range(1, n - 1);
      for (int it = 0; it < 3; ++it) {
        v(I, J) = 0.25f * (u(range(0, m - 2), J) + u(range(2, m), J) + u(I, range(0, n - 2)) + u(I, range(2, n)));
        update_halo(v);
        std::swap(u, v);
        std::vector<float> g = h;
        for (std::size_t j = 1; j + 1 < N; ++j)
          for (std::size_t i = 1; i + 1 < M; ++i)
            g[i + j * M] = 0.25f * (h[i - 1 + j * M] + h[i + 1 + j * M] + h[i + (j - 1) * M] + h[i + (j + 1) * M]);
        h = g;
        INFO("sweep " << it);
        check_values(to_host(u), h, 0, 0, "Jacobi sweep, halo(1)");
      }
    }
    {
      const index_t m = 9, n = 43, w = 2;
      const auto M = static_cast<std::size_t>(m), N = static_cast<std::size_t>(n);
      std::vector<float> h = values<float>(M * N, 131, -8, 8, true);
      Array<float, 2> u = from_host(h, {m, n}, shard(1, halo(w, boundary::periodic), D));
      update_halo(u);
      fill_periodic(h, M, N, 2);
      check_values(to_host(u), h, 0, 0, "update_halo, periodic ghost cells");
      Array<float, 2> v = u;
      const auto I = range(w, m - w), J = range(w, n - w);
      for (int it = 0; it < 2; ++it) {
        v(I, J) = 0.25f * (u(range(w - 1, m - w - 1), J) + u(range(w + 1, m - w + 1), J) + u(I, range(0, n - 2 * w)) +
                           u(I, range(2 * w, n)));
        update_halo(v);
        std::swap(u, v);
        std::vector<float> g = h;
        for (std::size_t j = 2; j + 2 < N; ++j)
          for (std::size_t i = 2; i + 2 < M; ++i)
            g[i + j * M] = 0.25f * (h[i - 1 + j * M] + h[i + 1 + j * M] + h[i + (j - 2) * M] + h[i + (j + 2) * M]);
        fill_periodic(g, M, N, 2);
        h = g;
        INFO("sweep " << it);
        check_values(to_host(u), h, 0, 0, "stencil of width 2, halo(2, periodic)");
      }
    }
  }
}

TEST_CASE("cumsum, sort, sortperm and matmul across ranks") {
  for (const DeviceSet& D : sets(true)) {
    for (index_t n : {index_t(0), index_t(1), index_t(7), index_t(257), index_t(65537), (index_t(1) << 20) + 1}) {
      INFO(set_name(D) << ", n = " << n);
      const auto N = static_cast<std::size_t>(n);
      const auto v = values<float>(N, 140, -2, 2);
      const Array<float, 1> x = from_host(v, {n}, shard(0, D));
      const auto [want, tol] = running_sums(v, N, 0);
      check_within(to_host(cumsum(x)), want, tol);
      if (n > 65537) continue;
      // Many ties (integer values): sortperm must be stable, in either direction.
      const auto t = values<float>(N, 141, -50, 50, true);
      const Array<float, 1> y = from_host(t, {n}, shard(0, D));
      for (bool rev : {false, true}) {
        INFO("rev = " << rev);
        std::vector<std::int64_t> idx(N);
        std::iota(idx.begin(), idx.end(), 0);
        std::stable_sort(idx.begin(), idx.end(), [&](std::int64_t i, std::int64_t j) {
          const float ti = t[static_cast<std::size_t>(i)], tj = t[static_cast<std::size_t>(j)];
          return rev ? ti > tj : ti < tj;
        });
        std::vector<float> sorted(N);
        for (std::size_t i = 0; i < N; ++i) sorted[i] = t[static_cast<std::size_t>(idx[i])];
        check_values(to_host(sort(y, {.rev = rev})), sorted, 0, 0, "sort");
        check_values(to_host(sortperm(y, {.rev = rev})), idx, 0, 0, "sortperm");
      }
      auto l = values<std::int64_t>(N, 142, -1e15, 1e15);
      const Array<std::int64_t, 1> z = from_host(l, {n}, shard(0, D));
      std::sort(l.begin(), l.end());
      check_values(to_host(sort(z)), l, 0, 0, "sort (int64)");
      if (n == 0) continue;
      // matmul: rows split (no communication) and the inner dimension split (partials summed
      // across devices, the result replicated).
      const auto a = values<float>(N * 7, 143, -2, 2), b = values<float>(7 * N, 144, -2, 2);
      const auto p = values<float>(7, 145, -2, 2), q = values<float>(N, 146, -2, 2);
      const Array<float, 2> A = from_host(a, {n, 7}, shard(0, D)), B = from_host(b, {7, n}, shard(1, D));
      const auto [ap, aptol] = matvec(a, N, 7, p);
      const auto [bq, bqtol] = matvec(b, 7, N, q);
      check_within(to_host(matmul(A, from_host(p, {7}, replicate(D)))), ap, aptol);
      const Array<float, 1> Bq = matmul(B, from_host(q, {n}, shard(0, D)));
      check_within(to_host(Bq), bq, bqtol);
      for (const auto& r : local_parts(Bq)) check_within(r, bq, bqtol);
    }
    // Along the shard dimension of a 2-d array: the carries cross ranks.
    const index_t m = 7, n = 45;
    const auto v = values<float>(static_cast<std::size_t>(m * n), 147, -2, 2);
    const Array<float, 2> X = from_host(v, {m, n}, shard(1, D));
    for (int d : {0, 1}) {
      const auto [want, tol] = running_sums(v, static_cast<std::size_t>(m), d);
      check_within(to_host(cumsum(X, d)), want, tol);
    }
  }
}
