// SPDX-License-Identifier: Apache-2.0
// One program across processes ("one GPU per process", the set-up the CUDA.jl multi-GPU page
// starts with): started N times by mpirun, each rank takes its share of its node's GPUs (or its
// host devices), prints them, and then the ranks work on arrays sharded over all of their
// devices: the 30M-element sum of the DESIGN targets, computed shard by shard where each shard
// lives, its partials combined across ranks, the same value on every rank.
//
//   mpirun -np 4 ./distributed                  # 4 ranks (add --oversubscribe beyond the cores)
//   TESSERA_HOST_DEVICES=2 mpirun -np 2 ./distributed   # 2 ranks of 2 host devices
//   ./distributed                               # one rank: the same program, no MPI involved
//
// Under mpirun as root (containers) OpenMPI also needs OMPI_ALLOW_RUN_AS_ROOT=1 and
// OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1. See docs/distributed.md.
#include <tessera/distributed.hpp>
#include <tessera/tessera.hpp>

#include <chrono>
#include <cstdint>
#include <exception>
#include <iostream>
#include <sstream>

using namespace tessera;

int main(int argc, char** argv) {
  try {
    distributed::session mpi(argc, argv);  // first: the device table spans the ranks
    const int me = distributed::rank(), ranks = distributed::size();
    const bool speaker = me == 0;  // every rank computes; one prints the shared results

    std::ostringstream line;
    line << "rank " << me << " of " << ranks << " (node-local " << distributed::local_rank() << " of "
         << distributed::local_size() << "): computes on";
    for (Device d : distributed::local_devices()) line << ' ' << d.name();
    std::cout << line.str() + "\n" << std::flush;

    const DeviceSet all = devices();
    if (speaker) {
      std::cout << "devices(): " << all.size() << " device(s) over " << ranks << " rank(s):";
      for (Device d : all) std::cout << ' ' << d.name();
      std::cout << '\n';
    }

    // 30M floats, sharded over every device of every rank; each rank fills and sums its shards.
    const index_t n = 30'000'000;
    const Array<float, 1> x = rand<float>({n});
    const Array<std::int64_t, 1> k = iota<std::int64_t>({n});
    const double s = sum(x);  // warm-up: scratch buffers, result slots, the first exchange
    constexpr int reps = 20;
    const auto t0 = std::chrono::steady_clock::now();
    double total = 0;
    for (int r = 0; r < reps; ++r) total += sum(x);
    const double ms =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count() / reps;

    // Exact checks: integer sums do not depend on the order of the partials.
    const std::int64_t ks = sum(k);
    const bool ok = ks == n * (n - 1) / 2 && total == reps * s && sum(ones<float>({n})) == static_cast<float>(n);
    if (speaker) {
      std::cout << "sum of " << n << " rand floats = " << s << " (the same on every rank), " << ms << " ms per sum over "
                << all.size() << " device(s) on " << ranks << " rank(s)\n";
      std::cout << "sum(iota) = " << ks << (ok ? "  ok" : "  WRONG") << '\n';
    }
    return ok ? 0 : 1;
  } catch (const std::exception& e) {
    std::cerr << "distributed: error: " << e.what() << '\n';
    return 2;
  }
}
