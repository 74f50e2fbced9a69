// SPDX-License-Identifier: Apache-2.0
// A collective that fails on one rank is reported on every rank, at once, with the failing rank's
// reason. Rank 1 hands the process's watchdog (backend/comm/watchdog.hpp) a collective that
// reports an asynchronous error after half a second, as NCCL does when a peer's connection breaks;
// the watchdog aborts it and marks the rank failed. Then both ranks make the same reduction: its
// consistency check carries rank 1's failure, so both throw distributed_error naming it, well
// before TESSERA_MPI_TIMEOUT (30 s here). ctest (mpi label) runs it with 2 ranks and passes on the
// lines below; finalize() then ends the job (MPI_Abort), as after any failure.
#include <backend/process/mpi.hpp>
#include <backend/comm/watchdog.hpp>
#include <tessera/distributed.hpp>
#include <tessera/tessera.hpp>

#include <atomic>
#include <chrono>
#include <iostream>
#include <memory>
#include <string>
#include <thread>

namespace {

using clock_type = std::chrono::steady_clock;

struct failing_collective final : tessera::detail::comm::inflight {
  clock_type::time_point t0 = clock_type::now();
  std::atomic<int> aborts{0};
  state poll() override {
    state s;
    s.started = true;
    if (clock_type::now() - t0 > std::chrono::milliseconds(500))
      s.error = "simulated NCCL error (remote process exited or there was a network error)";
    return s;
  }
  void abort() override { ++aborts; }
  std::string name() const override { return "ncclAllReduce over [rank0/host:0, rank1/host:0]"; }
};

double seconds_since(clock_type::time_point t) { return std::chrono::duration<double>(clock_type::now() - t).count(); }

}  // namespace

int main(int argc, char** argv) {
  using namespace tessera;
  distributed::init(argc, argv);
  const int me = distributed::rank();
  const Array<float, 1> a = ones<float>({1000});
  const bool healthy = sum(a) == 1000.f;
  if (me == 1) {
    auto c = std::make_shared<failing_collective>();
    detail::comm::watch_in_background(c);
    while (c->aborts == 0 && seconds_since(c->t0) < 10) std::this_thread::sleep_for(std::chrono::milliseconds(5));
    std::cout << "rank 1: watchdog aborted the collective " << c->aborts << " time(s)\n" << std::flush;
  }
  const auto t0 = clock_type::now();
  try {
    (void)sum(a);
    std::cout << "rank " << me << ": no error (wrong)\n" << std::flush;
  } catch (const distributed_error& e) {
    std::cout << "rank " << me << ": distributed_error after " << static_cast<int>(seconds_since(t0)) << " s"
              << (healthy ? "" : " (first sum wrong)") << ": " << e.what() << '\n'
              << std::flush;
  }
  try {
    (void)to_host(a);
    std::cout << "rank " << me << ": second call ran (wrong)\n" << std::flush;
  } catch (const distributed_error& e) {
    std::cout << "rank " << me << ": next call refused too\n" << std::flush;
  }
  // Every rank has printed before any passes this check (failed ranks still take part in it), so
  // that the abort in finalize() cuts no output short.
  try {
    (void)sum(a);
  } catch (const distributed_error&) {
  }
  distributed::finalize();
  return 0;
}
