// SPDX-License-Identifier: Apache-2.0
// The watchdog of collectives spanning ranks. An NCCL collective whose peer died, hangs or made
// another call never finishes: its kernel spins on the GPU and every host wait behind it
// (cudaStreamSynchronize, a host read) would block forever. NCCL reports failures only when asked
// (ncclCommGetAsyncError) and ends a stuck collective only when told (ncclCommAbort), so a thread
// asks for it, as PyTorch's and XLA's watchdogs do: every collective queued over communicators
// spanning ranks is watched until it finishes; an asynchronous error, or a collective that has run
// on this rank for longer than TESSERA_MPI_TIMEOUT, marks the rank failed (dist::fail), then aborts
// every collective in flight (a peer that failed one will serve none of the others), which lets the
// blocked waits return; they and every rank's next call then throw distributed_error.
//
// The decisions are in `watchdog::sweep`, which needs no GPU: the tests drive it with a fake
// collective and a fake clock (tests/test_distributed_watchdog.cpp). No CUDA or NCCL header here.
#pragma once
#include <cstddef>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace tessera::detail::comm {

// One collective in flight on this rank, as the watchdog sees it (nccl.cpp: events recorded
// around the NCCL group on each of this rank's devices, and its communicators).
struct inflight {
  struct state {
    bool started = false;   // it runs on this rank's devices: the work queued before it is done
    bool finished = false;  // it is done on this rank's devices
    std::string error;      // an asynchronous error of its communicators; empty when none
    // false: its communicators could not be asked this time (another thread was using them, and
    // NCCL allows one at a time), so `error` says nothing; a finished collective then stays
    // watched until they have been asked, so that no error of its slips by.
    bool checked = true;
  };
  virtual ~inflight() = default;
  // Non-blocking (never waits for a lock another thread holds); called from the watchdog's thread.
  virtual state poll() = 0;
  // Ends the collective on this rank (ncclCommAbort), so that waits behind it return. Called at
  // most once, from the watchdog's thread.
  virtual void abort() = 0;
  // "ncclAllReduce over [rank0/cuda:0, rank1/cuda:0]".
  virtual std::string name() const = 0;
};

class watchdog {
 public:
  // timeout_s: how long a collective may run on this rank once started; 0: no deadline (errors
  // are still caught). on_failure(reason), when given, runs once, on a failure, before anything is
  // aborted: a thread blocked on the aborted work wakes up as soon as it is, and its next check of
  // the rank's health must already see the failure (else it goes on and waits a whole deadline
  // for a dead peer at its next call).
  explicit watchdog(double timeout_s, std::function<void(const std::string&)> on_failure = {})
      : timeout_s_(timeout_s), on_failure_(std::move(on_failure)) {}

  // Watches `op` from now on. After a failure, aborts it at once: nothing will serve it.
  void watch(std::shared_ptr<inflight> op);

  // One pass at `now` (seconds on a monotonic clock). Drops finished collectives and starts the
  // clock of those seen started for the first time (the deadline counts the collective's own run
  // time, never the work queued before it). On an asynchronous error or a collective past its
  // deadline it hands the reason to on_failure, then aborts every collective in flight and returns
  // the reason; once, empty otherwise.
  std::string sweep(double now);

  std::size_t in_flight() const;
  bool failed() const;

 private:
  struct entry {
    std::shared_ptr<inflight> op;
    double started_at = -1;  // when a sweep first saw it started; -1: not yet
  };
  mutable std::mutex m_;  // guards the list, never held while polling or aborting
  std::vector<entry> ops_;
  double timeout_s_;
  std::function<void(const std::string&)> on_failure_;
  bool failed_ = false;
};

// The process's watchdog: its thread starts with the first collective watched, sweeps every
// millisecond while any is in flight (sleeping otherwise), with dist::timeout_seconds() as the
// deadline, and hands a failure to dist::fail.
void watch_in_background(std::shared_ptr<inflight> op);
// Starts the watchdog's thread now (idempotent): called when the first communicator across ranks
// is made, so that the process's threads do not change later (a soak counts them).
void start_watchdog();

}  // namespace tessera::detail::comm
