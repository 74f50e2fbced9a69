// SPDX-License-Identifier: Apache-2.0
// Conway's Game of Life on a torus, split along the columns over every device. The board is
// stored with one ghost cell on each side (ImplicitGlobalGrid.jl's periodic grids): halo(1,
// periodic) makes update_halo copy the opposite edge into the ghost cells, corners included, and
// refresh each shard's copy of its neighbours' columns. A step is one fused kernel per shard over
// the eight shifted views. Checked against plain host loops on the torus; exits non-zero on a
// wrong result. Runs on the GPUs, or on host devices where there is none.
#include <tessera/tessera.hpp>

#include <cstdint>
#include <cstdio>
#include <exception>
#include <random>
#include <utility>
#include <vector>

using namespace tessera;

namespace {

// One step on the b x b torus, in plain loops.
std::vector<std::int32_t> host_step(const std::vector<std::int32_t>& g, index_t b) {
  std::vector<std::int32_t> out(g.size());
  auto at = [&](index_t i, index_t j) { return g[static_cast<std::size_t>((i + b) % b + ((j + b) % b) * b)]; };
  for (index_t j = 0; j < b; ++j)
    for (index_t i = 0; i < b; ++i) {
      int live = 0;
      for (index_t dj = -1; dj <= 1; ++dj)
        for (index_t di = -1; di <= 1; ++di) live += (di || dj) ? at(i + di, j + dj) : 0;
      out[static_cast<std::size_t>(i + j * b)] = live == 3 || (live == 2 && at(i, j)) ? 1 : 0;
    }
  return out;
}

}  // namespace

int main() {
  try {
    const bool gpu = cuda_backend();
    const DeviceSet all = devices();
    const index_t b = gpu ? 2048 : 192, n = b + 2;  // the board plus a ghost cell on each side
    const int steps = 100;
    std::printf("Game of Life on a %lld x %lld torus over %zu %s\n", static_cast<long long>(b),
                static_cast<long long>(b), all.size(), gpu ? "GPU(s)" : "host device(s)");

    std::mt19937_64 rng(2026);
    std::vector<std::int32_t> board(static_cast<std::size_t>(b * b));
    for (auto& c : board) c = rng() % 4 == 0 ? 1 : 0;
    std::vector<std::int32_t> padded(static_cast<std::size_t>(n * n), 0);
    for (index_t j = 0; j < b; ++j)
      for (index_t i = 0; i < b; ++i) padded[static_cast<std::size_t>(i + 1 + (j + 1) * n)] = board[i + j * b];

    const Placement p = shard(1, halo(1, boundary::periodic), all);
    Array<std::int32_t, 2> g = from_host(padded, {n, n}, p);
    update_halo(g);  // ghost cells: the opposite edges of the board
    Array<std::int32_t, 2> next = g;
    const auto I = range(1, n - 1), lo = range(0, n - 2), hi = range(2, n);
    for (int s = 0; s < steps; ++s) {
      auto live = g(lo, lo) + g(I, lo) + g(hi, lo) + g(lo, I) + g(hi, I) + g(lo, hi) + g(I, hi) + g(hi, hi);
      next(I, I) = where(live == 3 || (live == 2 && g(I, I) == 1), 1, 0);
      update_halo(next);
      std::swap(g, next);
    }
    const std::int64_t alive = sum(g(I, I));

    for (int s = 0; s < steps; ++s) board = host_step(board, b);
    std::int64_t want_alive = 0;
    for (auto c : board) want_alive += c;
    const auto got = to_host(g);
    std::int64_t wrong = 0;
    for (index_t j = 0; j < b; ++j)
      for (index_t i = 0; i < b; ++i) wrong += got[static_cast<std::size_t>(i + 1 + (j + 1) * n)] != board[i + j * b];
    std::printf("%d steps: %lld cells alive (host loops: %lld), %lld cells differ\n", steps,
                static_cast<long long>(alive), static_cast<long long>(want_alive), static_cast<long long>(wrong));
    const bool ok = wrong == 0 && alive == want_alive;
    std::printf("%s\n", ok ? "OK: the board matches the host loops" : "FAIL: the board differs from the host loops");
    return ok ? 0 : 1;
  } catch (const std::exception& e) {
    std::printf("FAIL: %s\n", e.what());
    return 1;
  }
}
