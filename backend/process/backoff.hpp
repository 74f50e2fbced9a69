// SPDX-License-Identifier: Apache-2.0
// How a wait for peer ranks spends its time between polls (an MPI request in mpi.cpp, a
// non-blocking NCCL call in nccl.cpp). It spins first, yielding the core, for the first
// `spin_for` of the wait (dist::spin_time(): 2 ms where the rank has a core to spare, 0 on an
// oversubscribed node), and only then sleeps. Why: a sleep is never short. sleep_for(10 us) takes
// 60-100 us (the kernel's 50 us timer slack, a VM's timer), so a rank whose peers arrived a few
// microseconds after its own first polls slept a whole tick, on every exchange: the 30 us against
// 100 us split of issue 20's 30M-float sum to the host across ranks (and 95 us per sum when
// elementwise work left the ranks out of step), against 35 us in one process. A host result
// needs one or two such exchanges, each normally complete within a few microseconds of the last
// rank's arrival. Yielding keeps a spinning rank from starving a peer that shares its core
// (mpirun --oversubscribe). Past `spin_for` the peer is late anyway: sleeps of 50 us, then 500 us.
#pragma once
#include <chrono>
#include <thread>

namespace tessera::detail::comm {

class backoff {
 public:
  using clock = std::chrono::steady_clock;
  explicit backoff(std::chrono::microseconds spin_for) : start_(clock::now()), spin_for_(spin_for) {}

  // Between two polls.
  void pause() {
    ++polls_;
    if (polls_ <= 64) return;  // the first polls: back to back
    const auto waited = clock::now() - start_;
    if (waited < spin_for_) {
      std::this_thread::yield();
      return;
    }
    std::this_thread::sleep_for(waited < std::chrono::milliseconds(100) ? std::chrono::microseconds(50)
                                                                        : std::chrono::microseconds(500));
  }

 private:
  clock::time_point start_;
  std::chrono::microseconds spin_for_;
  unsigned long polls_ = 0;
};

}  // namespace tessera::detail::comm
