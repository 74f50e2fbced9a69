// SPDX-License-Identifier: Apache-2.0
// Issue 20: a long random mix of operations across ranks, each result compared with one process's
// run of the same work. Every rank draws the same sequence (SPMD: one seed, printed) of operations
// on sizes drawn at random (0, 1, 2, small odd, medium odd, large = 2^k + odd): elementwise work
// (1-d and 2-d, sharded along either dim, float and integers, pitched views, at()), full reductions
// to the host and as arrays, reductions along dims, collectives (bursts of up to 8 allreduces
// queued back to back before one read: the many NCCL groups in flight that the watchdog polls,
// which crashed 4 ranks x 1 GPU), broadcast_from, allgather, reduce_scatter, copies and copyto
// of shifted views between ranks, update_halo (Jacobi with halo(1)), matmul, user kernels
// (ElementwiseKernel, ReductionKernel; RawKernel on GPUs), cumsum, sort and sortperm.
//
// The reference is one process: the same operation, same shapes and placements, on as many
// rank-private host devices (host_devices beyond this rank's own; docs/distributed.md), which have
// the same blocks and order of operations. On host devices the results must be the same bits
// (docs/distributed.md promises one process's bits); on GPUs floating results must agree within a
// tolerance taken from the magnitudes involved (sin's ulps, FMA, NCCL's order of operations),
// integers, copies, sorts and exactly representable stencils exactly.
//
//   mpirun -np 4 test_mpi_stress [--ops N] [--seed S] [--max-log2 K] [--verbose]
//
// Every rank prints one summary line; the exit status is 0 only when every comparison on this
// rank held and nothing threw (77: skipped, on GPUs with fewer GPUs than ranks). ctest runs it on host
// devices (test_distributed.stress, 4 ranks x 2,000 operations) and on GPUs (.mpi4.cuda);
// on the GPU machine: TESSERA_BACKEND=cuda mpirun -np 4 test_mpi_stress --ops 2000 (docs/distributed.md).
#include <tessera/collective.hpp>
#include <tessera/distributed.hpp>
#include <tessera/kernel.hpp>  // the umbrella header and the user kernels (RawKernel)

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <filesystem>
#include <system_error>
#include <functional>
#include <map>
#include <numeric>
#include <random>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

using namespace tessera;

namespace {

struct options {
  long long ops = 300;
  std::uint64_t seed = 1;
  int max_log2 = -1;  // the largest sizes: 2^K + odd (K >= 8); default 21 on GPUs, 14 on host devices
  bool verbose = false;
};

options parse(int argc, char** argv) {
  options o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto next = [&]() -> const char* {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "test_mpi_stress: %s needs a value\n", a.c_str());
        std::exit(2);
      }
      return argv[++i];
    };
    if (a == "--ops") o.ops = std::atoll(next());
    else if (a == "--seed") o.seed = std::strtoull(next(), nullptr, 10);
    else if (a == "--max-log2") o.max_log2 = std::max(8, std::atoi(next()));
    else if (a == "--verbose") o.verbose = true;
    else {
      std::fprintf(stderr, "usage: test_mpi_stress [--ops N] [--seed S] [--max-log2 K] [--verbose]\n");
      std::exit(2);
    }
  }
  return o;
}

// This rank's shards (or replicas) of x, read in place (host devices, unified memory).
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

class stress {
 public:
  stress(const options& o, DeviceSet d, DeviceSet r)
      : o_(o), D_(std::move(d)), R_(std::move(r)), gpu_(D_.front().kind() == device_kind::cuda), g_(o.seed) {
    max_log2_ = o.max_log2 > 0 ? o.max_log2 : gpu_ ? 21 : 14;
  }

  // Runs every operation; returns the number of failed comparisons on this rank.
  long long run() {
    using op_fn = void (stress::*)();
    const std::vector<std::pair<const char*, op_fn>> table{
        {"elementwise 1-d", &stress::elementwise_1d},   {"elementwise 2-d", &stress::elementwise_2d},
        {"full reductions", &stress::full_reductions}, {"reductions along dims", &stress::dims_reductions},
        {"allreduce burst", &stress::allreduce_burst}, {"broadcast/allgather/reduce_scatter", &stress::collectives},
        {"copies between ranks", &stress::copies},     {"update_halo", &stress::halo_sweeps},
        {"matmul", &stress::products},                 {"user kernels", &stress::user_kernels},
        {"sort, sortperm, cumsum", &stress::sorts},
    };
    for (op_ = 0; op_ < o_.ops; ++op_) {
      const std::size_t k = pick(table.size());
      what_ = table[k].first;
      ++count_[what_];
      if (o_.verbose && distributed::rank() == 0) std::printf("op %lld: %s\n", op_, what_), std::fflush(stdout);
      try {
        (this->*table[k].second)();
      } catch (const std::exception& e) {
        std::printf("rank %d: op %lld (%s) threw: %s\n", distributed::rank(), op_, what_, e.what());
        throw;
      }
    }
    return failures_;
  }

  long long checks() const { return checks_; }
  const std::map<std::string, long long>& counts() const { return count_; }

 private:
  // -- draws (the same on every rank: one generator, one seed) ----------------------------------
  std::size_t pick(std::size_t n) { return std::uniform_int_distribution<std::size_t>(0, n - 1)(g_); }
  index_t between(index_t lo, index_t hi) { return std::uniform_int_distribution<index_t>(lo, hi)(g_); }
  index_t odd(index_t lo, index_t hi) { return between(lo / 2, (hi - 1) / 2) * 2 + 1; }
  // 0, 1, 2, small odd, medium odd, or large (2^k + odd), capped at `cap` elements.
  index_t size(index_t cap = -1) {
    const int c = static_cast<int>(pick(100));
    index_t n;
    if (c < 8) n = 0;
    else if (c < 16) n = 1;
    else if (c < 20) n = 2;
    else if (c < 50) n = odd(3, 99);
    else if (c < 85) n = odd(101, std::min<index_t>(65535, index_t(1) << max_log2_));
    else n = (index_t(1) << between(std::min(16, max_log2_), max_log2_)) + odd(1, 999);
    return cap >= 0 ? std::min(n, cap) : n;
  }
  std::uint64_t seed() { return g_(); }

  template <class T>
  static std::vector<T> values(std::size_t n, std::uint64_t seed, double lo, double hi, bool integral) {
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
  template <class T>
  std::vector<T> values(std::size_t n, double lo, double hi, bool integral = std::is_integral_v<T>) {
    return values<T>(n, seed(), lo, hi, integral);
  }

  // -- comparisons ------------------------------------------------------------------------------
  void report(const std::string& detail) {
    ++failures_;
    if (failures_ <= 20) {
      std::printf("rank %d: MISMATCH at op %lld (%s): %s\n", distributed::rank(), op_, what_, detail.c_str());
      std::fflush(stdout);
    }
  }

  // got (over D) against want (the one-process run over R): the same bits on host devices and
  // for integers; within atol + rtol * |want| on GPUs.
  template <class T>
  void same(const char* what, const std::vector<T>& got, const std::vector<T>& want, double rtol = 0,
            double atol = 0) {
    ++checks_;
    if (got.size() != want.size()) {
      report(std::string(what) + ": " + std::to_string(got.size()) + " elements, expected " +
             std::to_string(want.size()));
      return;
    }
    const bool bits = !gpu_ || std::is_integral_v<T> || (rtol == 0 && atol == 0);
    for (std::size_t i = 0; i < got.size(); ++i) {
      bool ok;
      if (bits) ok = std::memcmp(&got[i], &want[i], sizeof(T)) == 0;
      else {
        const double g = static_cast<double>(got[i]), w = static_cast<double>(want[i]);
        ok = (std::isnan(g) && std::isnan(w)) || std::fabs(g - w) <= atol + rtol * std::fabs(w);
      }
      if (!ok) {
        char b[256];
        std::snprintf(b, sizeof b, "%s: element %zu of %zu: got %.9g, one process %.9g", what, i, got.size(),
                      static_cast<double>(got[i]), static_cast<double>(want[i]));
        report(b);
        return;
      }
    }
  }
  template <class T>
  void same(const char* what, T got, T want, double tol = 0) {
    same<T>(what, std::vector<T>{got}, std::vector<T>{want}, 0, tol);
  }

  static double abs_sum(const std::vector<float>& v) {
    double s = 0;
    for (float x : v) s += std::fabs(x);
    return s;
  }

  // -- operations -------------------------------------------------------------------------------

  void elementwise_1d() {
    const index_t n = size();
    const auto N = static_cast<std::size_t>(n);
    const auto va = values<float>(N, -2, 2), vb = values<float>(N, -2, 2);
    const auto ka = values<std::int32_t>(N, -1000, 1000), kb = values<std::int32_t>(N, -1000, 1000);
    auto run = [&](const DeviceSet& S) {
      const Array<float, 1> a = from_host(va, {n}, shard(0, S)), b = from_host(vb, {n}, shard(0, S));
      const Array<float, 1> c = sin(a) * b + 2.f * a;
      const Array<std::int32_t, 1> ia = from_host(ka, {n}, shard(0, S)), ib = from_host(kb, {n}, shard(0, S));
      const Array<std::int64_t, 1> l = cast<std::int64_t>(ia) * std::int64_t(100003) - ib;
      std::vector<float> at;
      if (n > 0) at = {c.at(0), c.at(n / 2), c.at(n - 1)};
      return std::tuple(to_host(c), to_host(l), at);
    };
    const auto [c, l, at] = run(D_);
    const auto [rc, rl, rat] = run(R_);
    same("sin(a) * b + 2 * a", c, rc, 1e-5, 1e-5);
    same("cast<int64>(ia) * 100003 - ib", l, rl);
    same("c.at(0, n / 2, n - 1)", at, rat, 1e-5, 1e-5);
  }

  void elementwise_2d() {
    const index_t m = pick(4) == 0 ? between(0, 2) : between(1, 300);
    const index_t n = std::max<index_t>(0, std::min<index_t>(size(1 << 12), (index_t(1) << max_log2_) / std::max<index_t>(m, 1)));
    const int d = static_cast<int>(pick(2));
    const auto M = static_cast<std::size_t>(m), N = static_cast<std::size_t>(n);
    const auto vx = values<float>(M * N, -2, 2), vy = values<float>(M * N, -2, 2);
    const auto vl = values<std::int64_t>(M * N, -1e12, 1e12);
    auto run = [&](const DeviceSet& S) {
      const Array<float, 2> x = from_host(vx, {m, n}, shard(d, S)), y = from_host(vy, {m, n}, shard(d, S));
      const Array<float, 2> c = exp(-abs(x)) * y - x / 3.f;
      const Array<std::int64_t, 2> l = from_host(vl, {m, n}, shard(d, S));
      std::vector<float> rows;
      if (m > 1) rows = to_host(c(range(1, m), _));  // pitched rows of every part
      return std::tuple(to_host(c), to_host(eval(l * std::int64_t(3) + l)), rows);
    };
    const auto [c, l, rows] = run(D_);
    const auto [rc, rl, rrows] = run(R_);
    same("exp(-|x|) * y - x / 3", c, rc, 1e-5, 1e-6);
    same("l * 3 + l (int64)", l, rl);
    same("c(range(1, m), _)", rows, rrows, 1e-5, 1e-6);
  }

  void full_reductions() {
    const index_t n = size();
    const auto N = static_cast<std::size_t>(n);
    const auto va = values<float>(N, -2, 2), vb = values<float>(N, -2, 2);
    const auto vk = values<std::int64_t>(N, -1e12, 1e12);
    const double tol = 1e-5 * abs_sum(va) + 1e-5 * N + 1e-6;
    struct result {
      double s, d, nrm, as_array;
      float mx, mn;
      std::int64_t k, cnt;
    };
    auto run = [&](const DeviceSet& S) {
      const Array<float, 1> a = from_host(va, {n}, shard(0, S)), b = from_host(vb, {n}, shard(0, S));
      const Array<std::int64_t, 1> k = from_host(vk, {n}, shard(0, S));
      result r{};
      r.s = sum(a);
      r.d = dot(a, b);
      r.nrm = norm(a);
      r.as_array = sum(a, as_array).at();
      r.k = sum(k);
      r.cnt = count(a > 0.f);
      if (n > 0) {
        r.mx = maximum(a);
        r.mn = minimum(a * b);
      }
      return r;
    };
    const result g = run(D_), w = run(R_);
    same("sum(a)", g.s, w.s, tol);
    same("dot(a, b)", g.d, w.d, 2 * tol);
    same("norm(a)", g.nrm, w.nrm, 1e-5 * w.nrm + 1e-6);
    same("sum(a, as_array)", g.as_array, w.as_array, tol);
    same("sum(k) (int64)", g.k, w.k);
    same("count(a > 0)", g.cnt, w.cnt);
    same("maximum(a)", g.mx, w.mx);
    same("minimum(a * b)", g.mn, w.mn, 1e-6f);
  }

  void dims_reductions() {
    const index_t m = between(0, 200);
    const index_t n = std::min<index_t>(size(1 << 12), (index_t(1) << max_log2_) / std::max<index_t>(m, 1));
    const int d = static_cast<int>(pick(2));
    const auto M = static_cast<std::size_t>(m), N = static_cast<std::size_t>(n);
    const auto v = values<float>(M * N, -2, 2);
    const auto vk = values<std::int32_t>(M * N, -1000, 1000);
    auto run = [&](const DeviceSet& S) {
      const Array<float, 2> x = from_host(v, {m, n}, shard(d, S));
      const Array<std::int32_t, 2> k = from_host(vk, {m, n}, shard(d, S));
      std::vector<float> mx, mn;  // min and max of nothing throw: only on non-empty arrays
      if (m * n > 0) {
        mx = to_host(maximum(x, dims(0, 1)));
        mn = to_host(minimum(x, dims(d)));
      }
      return std::tuple(to_host(sum(x, dims(0))), to_host(sum(x, dims(1))), to_host(mean(x, dims(1))), mn,
                        to_host(sum(k, dims(1 - d))), mx);
    };
    const auto [c, r, mr, mn, k, mx] = run(D_);
    const auto [rc, rr, rmr, rmn, rk, rmx] = run(R_);
    const double tol = 1e-5 * 2 * static_cast<double>(std::max(m, n)) + 1e-6;
    same("sum(x, dims(0))", c, rc, 1e-5, tol);
    same("sum(x, dims(1))", r, rr, 1e-5, tol);
    same("mean(x, dims(1))", mr, rmr, 1e-5, tol / static_cast<double>(std::max<index_t>(n, 1)));
    same("minimum(x, dims(d))", mn, rmn);
    same("sum(k, dims(1 - d)) (int32)", k, rk);
    same("maximum(x, dims(0, 1))", mx, rmx);
  }

  // A replicated array over S whose replica s holds parts[s] (each rank writes its own devices').
  template <class T>
  static Array<T, 1> replicas(const DeviceSet& S, const std::vector<std::vector<T>>& parts) {
    Array<T, 1> x = zeros<T>({static_cast<index_t>(parts[0].size())}, replicate(S));
    for (std::size_t s = 0; s < S.size(); ++s)
      if (distributed::is_local(S[s]) && !parts[s].empty())
        std::copy(parts[s].begin(), parts[s].end(), x.host_data(static_cast<int>(s)));
    return x;
  }

  template <class T>
  struct burst_item {
    reduce_op op;
    std::vector<std::vector<T>> parts;
  };

  template <class T>
  void allreduce_items(std::vector<burst_item<T>>& items) {
    // All of them queued back to back over D (several NCCL groups in flight at once on GPUs),
    // then read.
    std::vector<Array<T, 1>> xs, rs;
    for (auto& it : items) xs.push_back(replicas(D_, it.parts));
    for (std::size_t i = 0; i < items.size(); ++i) allreduce(xs[i], items[i].op);
    for (auto& it : items) rs.push_back(replicas(R_, it.parts));
    for (std::size_t i = 0; i < items.size(); ++i) allreduce(rs[i], items[i].op);
    for (std::size_t i = 0; i < items.size(); ++i) {
      const auto want = to_host(rs[i]);
      double mag = 1;
      for (const auto& p : items[i].parts)
        for (T x : p) mag = std::max(mag, std::fabs(static_cast<double>(x)));
      const double tol = std::is_integral_v<T> ? 0 : 1e-5 * mag * static_cast<double>(D_.size());
      same("allreduce (to_host)", to_host(xs[i]), want, 1e-5, tol);
      for (const auto& p : local_parts(xs[i])) same("allreduce (a replica on this rank)", p, want, 1e-5, tol);
    }
  }

  void allreduce_burst() {
    const std::size_t k = 1 + pick(8);
    const int type = static_cast<int>(pick(3));
    const index_t n = std::max<index_t>(1, size(1 << 18));  // a replica per device: kept moderate
    const auto N = static_cast<std::size_t>(n);
    auto draw = [&]<class T>(std::vector<burst_item<T>>& items, double lo, double hi) {
      for (std::size_t i = 0; i < k; ++i) {
        burst_item<T> it{static_cast<reduce_op>(pick(4)), {}};
        const bool p = it.op == reduce_op::prod;  // small values: products of up to 8 stay exact
        for (std::size_t s = 0; s < D_.size(); ++s)
          it.parts.push_back(values<T>(N, p ? (std::is_integral_v<T> ? -3 : 0.5) : lo, p ? 3 : hi,
                                       std::is_integral_v<T>));
        items.push_back(std::move(it));
      }
    };
    if (type == 0) {
      std::vector<burst_item<float>> items;
      draw(items, -2.0, 2.0);
      allreduce_items(items);
    } else if (type == 1) {
      std::vector<burst_item<std::int32_t>> items;
      draw(items, -1e8, 1e8);
      allreduce_items(items);
    } else {
      std::vector<burst_item<std::int64_t>> items;
      draw(items, -1e14, 1e14);
      allreduce_items(items);
    }
  }

  void collectives() {
    const index_t n = std::max<index_t>(1, size(1 << 18));
    const auto N = static_cast<std::size_t>(n);
    const std::size_t root = pick(D_.size());
    std::vector<std::vector<float>> parts;
    for (std::size_t s = 0; s < D_.size(); ++s) parts.push_back(values<float>(N, -2, 2));
    const auto v = values<float>(N, -2, 2);
    const auto w = values<std::int32_t>(N * 3, -1000, 1000);
    auto run = [&](const DeviceSet& S) {
      Array<float, 1> r = replicas(S, parts);
      broadcast_from(r, S[root]);
      std::vector<float> b = to_host(r);
      r = replicas(S, parts);
      const Array<float, 1> rs = reduce_scatter(r);
      const Array<float, 1> ag = allgather(from_host(v, {n}, shard(0, S)));
      const Array<std::int32_t, 2> ag2 = allgather(from_host(w, {3, n}, shard(1, S)));
      return std::tuple(b, to_host(rs), to_host(ag), to_host(ag2), local_parts(ag));
    };
    const auto [b, rs, ag, ag2, parts_ag] = run(D_);
    const auto [rb, rrs, rag, rag2, rparts] = run(R_);
    same("broadcast_from", b, rb);
    same("reduce_scatter", rs, rrs, 1e-5, 1e-5 * static_cast<double>(D_.size()));
    same("allgather (1-d)", ag, rag);
    same("allgather (2-d, shard(1))", ag2, rag2);
    for (const auto& p : parts_ag) same("allgather (a replica on this rank)", p, v);
  }

  void copies() {
    const index_t m = between(1, 40);
    const index_t n = std::min<index_t>(size(1 << 12), (index_t(1) << max_log2_) / m);
    const auto M = static_cast<std::size_t>(m), N = static_cast<std::size_t>(n);
    const auto v = values<float>(M * N, -2, 2);
    const auto vl = values<std::int64_t>(M * N, -1e15, 1e15);
    const std::size_t dev = pick(D_.size());
    auto run = [&](const DeviceSet& S) {
      const Array<float, 2> x = from_host(v, {m, n}, shard(0, S));
      std::vector<std::vector<float>> out;
      out.push_back(to_host(copy(x, shard(1, S))));
      out.push_back(to_host(copy(x, on(S[dev]))));
      out.push_back(to_host(copy(x, replicate(S))));
      Array<float, 2> y = zeros<float>({m, n}, shard(1, S));
      copyto(y, x);
      out.push_back(to_host(y));
      if (m > 1 && n > 1) {  // shifted views: every block boundary crosses devices
        Array<float, 2> z = zeros<float>({m, n}, shard(1, S));
        copyto(z(range(1, m), range(0, n - 1)), y(range(0, m - 1), range(1, n)));
        out.push_back(to_host(z));
      }
      const Array<std::int64_t, 2> l = from_host(vl, {m, n}, shard(1, S));
      return std::pair(out, to_host(copy(l, shard(0, S))));
    };
    const auto [c, l] = run(D_);
    const auto [rc, rl] = run(R_);
    for (std::size_t i = 0; i < c.size() && i < rc.size(); ++i) same("copy / copyto", c[i], rc[i]);
    same("copy(int64 shard(1) -> shard(0))", l, rl);
    same("copy(x, shard(1)) against the input", c[0], v);
  }

  void halo_sweeps() {
    // Small integers: every sum below and its quarter are exact in float, in any order.
    const index_t m = between(3, 40);
    const index_t n = between(static_cast<index_t>(3 * D_.size()), 3 * static_cast<index_t>(D_.size()) + 200);
    const int sweeps = 1 + static_cast<int>(pick(3));
    const auto h = values<float>(static_cast<std::size_t>(m * n), -8, 8, true);
    auto run = [&](const DeviceSet& S) {
      Array<float, 2> u = from_host(h, {m, n}, shard(1, halo(1), S));
      Array<float, 2> v = u;
      const auto I = range(1, m - 1), J = range(1, n - 1);
      for (int it = 0; it < sweeps; ++it) {
        v(I, J) = 0.25f * (u(range(0, m - 2), J) + u(range(2, m), J) + u(I, range(0, n - 2)) + u(I, range(2, n)));
        update_halo(v);
        std::swap(u, v);
      }
      return to_host(u);
    };
    same("Jacobi sweeps with update_halo", run(D_), run(R_));
  }

  void products() {
    const index_t n = std::max<index_t>(1, size(1 << 16));
    const index_t k = between(1, 9);
    const auto N = static_cast<std::size_t>(n), K = static_cast<std::size_t>(k);
    const auto a = values<float>(N * K, -2, 2), b = values<float>(K * N, -2, 2);
    const auto p = values<float>(K, -2, 2), q = values<float>(N, -2, 2);
    auto run = [&](const DeviceSet& S) {
      const Array<float, 2> A = from_host(a, {n, k}, shard(0, S)), B = from_host(b, {k, n}, shard(1, S));
      const Array<float, 1> Ap = matmul(A, from_host(p, {k}, replicate(S)));
      const Array<float, 1> Bq = matmul(B, from_host(q, {n}, shard(0, S)));  // partials summed across devices
      return std::tuple(to_host(Ap), to_host(Bq), local_parts(Bq));
    };
    const auto [ap, bq, parts] = run(D_);
    const auto [rap, rbq, rparts] = run(R_);
    same("matmul(A (rows split), p)", ap, rap, 1e-5, 1e-5 * 4 * static_cast<double>(k));
    const double tol = 1e-5 * 4 * static_cast<double>(n);
    same("matmul(B (inner dim split), q)", bq, rbq, 1e-5, tol);
    for (const auto& r : parts) same("matmul: a replica of the result on this rank", r, rbq, 1e-5, tol);
  }

  void user_kernels() {
    static const ElementwiseKernel mix("float32 x, float32 y", "float32 z", "z = sin(x) * y + 2 * x", "stress_mix");
    static const ReductionKernel l2("T x", "T y", "x * x", "a + b", "y = sqrt(a)", "0", "stress_l2");
    const index_t n = size();
    const auto N = static_cast<std::size_t>(n);
    const auto vx = values<float>(N, -2, 2), vy = values<float>(N, -2, 2);
    const auto vd = values<double>(N, -2, 2);
    auto run = [&](const DeviceSet& S) {
      const Array<float, 1> x = from_host(vx, {n}, shard(0, S)), y = from_host(vy, {n}, shard(0, S));
      const Array<float, 1> z = mix(x, y);
      const double r = l2(from_host(vd, {n}, shard(0, S)));
      return std::pair(to_host(z), r);
    };
    const auto [z, r] = run(D_);
    const auto [rz, rr] = run(R_);
    same("ElementwiseKernel sin(x) * y + 2 * x", z, rz, 1e-5, 1e-5);
    same("ReductionKernel l2 norm", r, rr, 1e-12 * (1 + rr * rr));
    if (!gpu_) return;
    // RawKernel runs on GPUs only: against exact host values (halves of small integers).
    static const RawKernel scale(R"(
extern "C" __global__ void stress_scale(tessera::shard<float, 1> x, float by) {
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < x.size; i += gridDim.x * (long long)blockDim.x)
    x(i) = x(i) * by + 1.0f;
}
)",
                                 "stress_scale");
    auto vs = values<float>(N, -8, 8, true);
    Array<float, 1> s = from_host(vs, {n}, shard(0, D_));
    scale(s, 0.5f);
    for (auto& e : vs) e = e * 0.5f + 1.0f;
    same("RawKernel x * 0.5 + 1", to_host(s), vs);
  }

  void sorts() {
    const index_t n = size(65537);
    const auto N = static_cast<std::size_t>(n);
    const auto v = values<float>(N, -2, 2);
    const auto t = values<float>(N, -50, 50, true);  // many ties: sortperm must be stable
    const auto l = values<std::int64_t>(N, -1e15, 1e15);
    const bool rev = pick(2) == 1;
    auto run = [&](const DeviceSet& S) {
      const Array<float, 1> x = from_host(v, {n}, shard(0, S));
      const Array<float, 1> y = from_host(t, {n}, shard(0, S));
      const Array<std::int64_t, 1> z = from_host(l, {n}, shard(0, S));
      return std::tuple(to_host(cumsum(x)), to_host(sort(y, {.rev = rev})), to_host(sortperm(y, {.rev = rev})),
                        to_host(sort(z)));
    };
    const auto [c, s, p, z] = run(D_);
    const auto [rc, rs, rp, rz] = run(R_);
    same("cumsum", c, rc, 1e-5, 1e-5 * 2 * static_cast<double>(n) + 1e-6);
    same("sort (float, ties)", s, rs);
    same("sortperm (stable)", p, rp);
    same("sort (int64)", z, rz);
  }

  options o_;
  DeviceSet D_, R_;
  bool gpu_;
  int max_log2_;
  std::mt19937_64 g_;
  long long op_ = 0, failures_ = 0, checks_ = 0;
  const char* what_ = "";
  std::map<std::string, long long> count_;
};

// The GPUs of this node as init counts them before giving each rank its share
// (CUDA_VISIBLE_DEVICES's entries, else the driver's list).
int node_gpus() {
  int n = 0;
  if (const char* v = std::getenv("CUDA_VISIBLE_DEVICES")) {
    for (const char* p = v; *p != '\0';) {
      const char* e = std::strchr(p, ',');
      n += (e ? e : p + std::strlen(p)) > p;
      p = e ? e + 1 : p + std::strlen(p);
    }
    return n;
  }
  std::error_code ec;
  for (auto it = std::filesystem::directory_iterator("/proc/driver/nvidia/gpus", ec);
       !ec && it != std::filesystem::directory_iterator(); it.increment(ec))
    ++n;
  return n;
}

constexpr int skipped = 77;  // ctest's SKIP_RETURN_CODE for this program

}  // namespace

int main(int argc, char** argv) {
  const int gpus_on_node = node_gpus();  // before init, which narrows CUDA_VISIBLE_DEVICES
  distributed::init(argc, argv);
  const options o = parse(argc, argv);
  const int me = distributed::rank();
  // On GPUs every rank needs its own (NCCL cannot span two ranks on one GPU): skip, by name.
  const char* backend = std::getenv("TESSERA_BACKEND");
  if (backend != nullptr && std::strcmp(backend, "cuda") == 0 &&
      (gpus().empty() || (distributed::size() > 1 && gpus_on_node < distributed::local_size()))) {
    if (me == 0)
      std::printf("test_mpi_stress: SKIPPED: %d rank(s) on this node need a GPU each, %d visible\n",
                  distributed::local_size(), gpus_on_node);
    distributed::finalize();
    return skipped;
  }
  const auto t0 = std::chrono::steady_clock::now();
  long long failures = 0, checks = 0;
  std::string counts;
  int status = 0;
  try {
    const DeviceSet D = devices();
    // One process's run: as many host devices as D holds, private to this rank (after its own).
    const std::size_t mine = distributed::local_devices().size();
    const DeviceSet h = host_devices(static_cast<int>(mine + D.size()));
    const DeviceSet R(h.begin() + static_cast<std::ptrdiff_t>(mine), h.end());
    if (me == 0) {
      std::printf("test_mpi_stress: %d rank(s), %zu device(s) (%s ...), %lld operations, seed %llu\n",
                  distributed::size(), D.size(), D.front().name().c_str(), o.ops,
                  static_cast<unsigned long long>(o.seed));
      std::fflush(stdout);
    }
    stress s(o, D, R);
    failures = s.run();
    checks = s.checks();
    for (const auto& [k, v] : s.counts()) counts += (counts.empty() ? "" : ", ") + k + " " + std::to_string(v);
    synchronize();
    status = failures == 0 ? 0 : 1;
  } catch (const std::exception& e) {
    std::printf("rank %d: FAILED with an exception: %s\n", me, e.what());
    status = 2;
  }
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::printf("rank %d: %s: %lld comparisons, %lld mismatches, %.1f s%s%s\n", me, status == 0 ? "PASS" : "FAIL",
              checks, failures, s, me == 0 ? "; operations: " : "", me == 0 ? counts.c_str() : "");
  std::fflush(stdout);
  if (status != 0) std::exit(status);  // finalize() at exit ends the job (MPI_Abort) after a failure
  distributed::finalize();
  return 0;
}
