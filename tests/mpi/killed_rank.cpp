// SPDX-License-Identifier: Apache-2.0
// Issue 20, item 3: a rank killed (SIGKILL) in the middle of an operation. Every rank loops over
// one operation over devices(): `allreduce` (an allreduce of a replicated array, then a wait on
// the devices: on GPUs NCCL across ranks, on host devices the MPI gathering path), `halo` (a
// Jacobi sweep and update_halo, halo(1) along the shard dimension: point-to-point exchanges
// between ranks), `read` (to_host of a sharded array: every rank's parts gathered on every
// rank) or `reshard` (a 2-D re-shard there and back: on GPUs through CUDA IPC). A thread of the victim (rank 1) kills its own process with SIGKILL 0.4 to 0.8 s into the
// loop, so that the kill lands inside an operation, after writing the time of the kill (the
// system-wide monotonic clock) to <dir>/killed.
//
// Every other rank must get a distributed_error naming what failed within TESSERA_MPI_TIMEOUT + 5 s
// of the kill, then exit non-zero: no hang, no segmentation fault. Each survivor prints one line,
//   rank R: distributed_error 5.01 s after rank 1 was killed (allreduce): <what>
// marks <dir>/reported.R, waits (at most 20 s) until every survivor has, so that the job's end
// cuts no report short, and ends through distributed::finalize(), which aborts the job after a
// failure (MPI_Abort: status 1). tests/mpi/killed_rank.sh runs it under mpirun and checks every
// rank's line and exit status.
//
//   mpirun -np 4 test_mpi_killed_rank allreduce|halo|read|reshard <dir>
#include <tessera/collective.hpp>
#include <tessera/distributed.hpp>
#include <tessera/tessera.hpp>

#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <exception>
#include <filesystem>
#include <fstream>
#include <functional>
#include <random>
#include <string>
#include <thread>

using namespace tessera;

namespace {

constexpr int victim = 1;

// CLOCK_MONOTONIC: one clock for every process of the node, so the survivors can compare their
// time of the error with the victim's time of the kill.
double monotonic_s() {
  timespec t{};
  clock_gettime(CLOCK_MONOTONIC, &t);
  return static_cast<double>(t.tv_sec) + 1e-9 * static_cast<double>(t.tv_nsec);
}

void kill_me_soon(const std::filesystem::path& dir) {
  std::thread([dir] {
    std::mt19937 g(std::random_device{}());
    std::this_thread::sleep_for(std::chrono::milliseconds(400 + g() % 400));
    {
      std::ofstream f(dir / "killed.tmp");
      f.precision(17);
      f << monotonic_s() << '\n';
    }
    std::filesystem::rename(dir / "killed.tmp", dir / "killed");
    std::raise(SIGKILL);
  }).detach();
}

// The victim's time of death, waiting up to 2 s for the file (its thread writes it just before).
double killed_at(const std::filesystem::path& dir) {
  for (int i = 0; i < 200; ++i) {
    std::ifstream f(dir / "killed");
    double t = 0;
    if (f >> t) return t;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return -1;
}

}  // namespace

int main(int argc, char** argv) {
  distributed::init(argc, argv);
  if (argc != 3) {
    std::fprintf(stderr, "usage: test_mpi_killed_rank allreduce|halo|read|reshard <dir>\n");
    return 2;
  }
  const std::string what = argv[1];
  const std::filesystem::path dir = argv[2];
  const int me = distributed::rank(), P = distributed::size();
  if (P < 3) {
    std::printf("rank %d: needs 3 ranks or more (the victim is rank %d)\n", me, victim);
    return 2;
  }
  const DeviceSet D = devices();
  const bool gpu = D.front().kind() == device_kind::cuda;
  const index_t n = gpu ? index_t(1) << 24 : index_t(1) << 18;
  std::function<void()> step;
  Array<float, 1> x;
  Array<float, 2> u, v;
  if (what == "allreduce") {
    x = ones<float>({n}, replicate(D));
    step = [&] {
      allreduce(x);
      synchronize();  // a host wait behind the collective
    };
  } else if (what == "halo") {
    const index_t m = 256, cols = 64 * P;
    u = zeros<float>({m, cols}, shard(1, halo(1), D));
    v = u;
    step = [&] {
      const auto I = range(1, m - 1), J = range(1, cols - 1);
      v(I, J) = 0.25f * (u(range(0, m - 2), J) + u(range(2, m), J) + u(I, range(0, cols - 2)) + u(I, range(2, cols)));
      update_halo(v);
      std::swap(u, v);
    };
  } else if (what == "read") {
    x = rand<float>({n});
    step = [&] { (void)to_host(x); };
  } else if (what == "reshard") {
    // 64 MiB from shard(1) to shard(0) and back: on GPUs through CUDA IPC, each chunk copied into
    // place by a kernel that waits for the chunk's flag itself (the watchdog must release it).
    const index_t m = gpu ? 4096 : 256;
    u = rand<float>({m, m}, shard(1, D));
    v = zeros<float>({m, m}, shard(0, D));
    step = [&] {
      copyto(v, u);
      copyto(u, v);
      synchronize();
    };
  } else {
    std::fprintf(stderr, "test_mpi_killed_rank: unknown operation '%s' (allreduce, halo, read, reshard)\n",
                 what.c_str());
    return 2;
  }
  step();  // every rank connected and running before the clock starts
  if (me == victim) kill_me_soon(dir);
  const char* env = std::getenv("TESSERA_MPI_TIMEOUT");
  const double timeout = env != nullptr && *env != '\0' ? std::atof(env) : 300.0;
  const double start = monotonic_s();
  try {
    for (;;) {
      step();
      if (monotonic_s() - start > timeout + 60) {
        std::printf("rank %d: no error %.0f s into the loop (%s): the failure was missed\n", me, monotonic_s() - start,
                    what.c_str());
        std::fflush(stdout);
        return 5;
      }
    }
  } catch (const distributed_error& e) {
    const double now = monotonic_s(), k = killed_at(dir);
    std::printf("rank %d: distributed_error %.2f s after rank %d was killed (%s): %s\n", me, k < 0 ? -1.0 : now - k,
                victim, what.c_str(), e.what());
    std::fflush(stdout);
  } catch (const std::exception& e) {
    std::printf("rank %d: not a distributed_error (%s): %s\n", me, what.c_str(), e.what());
    std::fflush(stdout);
    return 4;
  }
  std::ofstream(dir / ("reported." + std::to_string(me))) << "1\n";
  // Every survivor reports before the job ends: finalize() aborts it (MPI_Abort ends every rank).
  for (int i = 0; i < 2000; ++i) {
    int reported = 0;
    for (int r = 0; r < P; ++r) reported += r != victim && std::filesystem::exists(dir / ("reported." + std::to_string(r)));
    if (reported == P - 1) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  distributed::finalize();  // after a failure: MPI_Abort, status 1
  std::printf("rank %d: finalize() returned after a failure (expected MPI_Abort)\n", me);
  return 1;
}
