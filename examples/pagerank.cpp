// SPDX-License-Identifier: Apache-2.0
// PageRank on a generated power-law graph: every node links to a number of others drawn from a
// Zipf-like law (a few hubs, many nodes with one or two links), the targets skewed towards low
// node numbers, so in-degrees follow a power law too. The transition matrix M (M[j, i] = 1 /
// outdeg(i) for a link i -> j) is a SparseMatrix sharded by rows over every device; each power
// iteration is pr = d (M pr + dangling / n) + (1 - d) / n, with the rank of nodes without links
// spread evenly. The result is checked against the same iteration done by plain host loops over
// the edge list. Runs on the GPUs (2^22 nodes), or on host devices where there is none (2^14).
// Usage: pagerank [log2 nodes]
#include <tessera/tessera.hpp>
#include <tessera/sparse.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <numeric>
#include <random>
#include <vector>

using namespace tessera;

int main(int argc, char** argv) {
  try {
    const bool gpu = cuda_backend();
    const DeviceSet all = devices();
    const int log2n = argc > 1 ? std::atoi(argv[1]) : gpu ? 22 : 14;
    const index_t n = index_t(1) << log2n;
    const double d = 0.85;
    const int iters = 50;

    // The graph: out-degree k with probability ~ 1 / k^2.1 (capped), targets j = n u^3.
    std::mt19937_64 g(20261126);
    std::uniform_real_distribution<double> u(0.0, 1.0);
    std::vector<std::int64_t> src, dst;
    std::vector<index_t> outdeg(static_cast<std::size_t>(n), 0);
    for (index_t i = 0; i < n; ++i) {
      if (u(g) < 0.05) continue;  // a dangling node
      const auto k = std::min<index_t>(index_t(std::floor(std::pow(1.0 - u(g), -1.0 / 1.1))), 1000);
      for (index_t e = 0; e < k; ++e) {
        src.push_back(i);
        dst.push_back(std::min<index_t>(n - 1, index_t(double(n) * std::pow(u(g), 3.0))));
      }
      outdeg[static_cast<std::size_t>(i)] = k;
    }
    std::vector<double> w(src.size());
    for (std::size_t e = 0; e < src.size(); ++e) w[e] = 1.0 / double(outdeg[static_cast<std::size_t>(src[e])]);
    std::vector<double> dangling(static_cast<std::size_t>(n));
    for (index_t i = 0; i < n; ++i) dangling[i] = outdeg[static_cast<std::size_t>(i)] == 0 ? 1.0 : 0.0;

    const auto M = sparse<double>(dst, src, w, n, n, shard(0, all));  // duplicates (repeated links) summed
    const auto per = M.nnz_per_shard();
    const double mean = double(M.nnz()) / double(per.size());
    std::printf("PageRank: %lld nodes, %lld links (%lld stored entries), sharded by rows over %zu %s; entries per "
                "shard: max %.2fx the mean\n",
                static_cast<long long>(n), static_cast<long long>(src.size()), static_cast<long long>(M.nnz()),
                all.size(), gpu ? "GPU(s)" : "host device(s)",
                double(*std::max_element(per.begin(), per.end())) / mean);

    auto dang = from_host(std::span<const double>(dangling), {n}, shard(0, all));
    Array<double, 1> pr = full<double>({n}, 1.0 / double(n), shard(0, all));
    for (int it = 0; it < iters; ++it) {
      const double lost = sum(pr * dang);
      pr = d * (matmul(M, pr) + lost / double(n)) + (1.0 - d) / double(n);
    }
    const auto got = to_host(pr);

    // The same iteration by host loops over the edge list.
    std::vector<double> ref(static_cast<std::size_t>(n), 1.0 / double(n)), next(static_cast<std::size_t>(n));
    for (int it = 0; it < iters; ++it) {
      double lost = 0;
      for (index_t i = 0; i < n; ++i) lost += ref[i] * dangling[i];
      std::fill(next.begin(), next.end(), 0.0);
      for (std::size_t e = 0; e < src.size(); ++e) next[static_cast<std::size_t>(dst[e])] += w[e] * ref[src[e]];
      for (index_t i = 0; i < n; ++i) next[i] = d * (next[i] + lost / double(n)) + (1.0 - d) / double(n);
      std::swap(ref, next);
    }
    double worst = 0, total = 0;
    for (index_t i = 0; i < n; ++i) worst = std::max(worst, std::fabs(got[i] - ref[i]) / ref[i]), total += got[i];
    std::vector<index_t> order(static_cast<std::size_t>(n));
    std::iota(order.begin(), order.end(), index_t(0));
    std::partial_sort(order.begin(), order.begin() + 5, order.end(), [&](index_t a, index_t b) { return got[a] > got[b]; });
    std::printf("after %d iterations: sum of ranks %.12f, top nodes", iters, total);
    for (int k = 0; k < 5; ++k) std::printf(" %lld (%.3g)", static_cast<long long>(order[k]), got[order[k]]);
    std::printf("\nlargest relative difference from the host loops: %.3g\n", worst);
    const bool ok = worst < 1e-10 && std::fabs(total - 1.0) < 1e-9;
    std::printf("%s\n", ok ? "OK: PageRank matches the host loops" : "FAIL: PageRank differs from the host loops");
    return ok ? 0 : 1;
  } catch (const std::exception& e) {
    std::printf("FAIL: %s\n", e.what());
    return 1;
  }
}
