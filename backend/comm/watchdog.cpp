// SPDX-License-Identifier: Apache-2.0
// The watchdog of collectives spanning ranks (watchdog.hpp). No CUDA, NCCL or MPI call here: the
// collectives bring their own poll and abort, the layer its deadline and its failure state.
#include <backend/comm/watchdog.hpp>
#include <backend/process/mpi.hpp>

#include <pthread.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <thread>

namespace tessera::detail::comm {

void watchdog::watch(std::shared_ptr<inflight> op) {
  {
    std::lock_guard<std::mutex> lock(m_);
    if (!failed_) {
      ops_.push_back({std::move(op), -1});
      return;
    }
  }
  op->abort();  // queued after a failure: its peers are gone or aborted too
}

std::string watchdog::sweep(double now) {
  std::vector<entry> seen;
  {
    std::lock_guard<std::mutex> lock(m_);
    if (failed_) return {};
    seen = ops_;
  }
  // Polled without the lock: poll() queries the driver, and watch() must never wait for that.
  std::string reason;
  std::vector<const inflight*> finished, started;
  for (const entry& e : seen) {
    const inflight::state s = e.op->poll();
    if (!s.error.empty()) {
      // The cause first: the other ranks receive the reason cut to the consistency check's record.
      reason = "NCCL error on this rank: " + s.error + " (in " + e.op->name() + ")";
      break;
    }
    if (s.finished) {
      if (s.checked) finished.push_back(e.op.get());  // else asked again next sweep, no deadline
      continue;
    }
    if (!s.started) continue;
    if (e.started_at < 0) started.push_back(e.op.get());
    const double since = e.started_at < 0 ? now : e.started_at;
    if (timeout_s_ > 0 && now - since > timeout_s_) {
      reason = "NCCL work did not finish within " + std::to_string(static_cast<long long>(timeout_s_)) +
               " s of starting on this rank (" + e.op->name() +
               "): a peer rank died, hangs, or made a different call (every rank must make the same Tessera calls "
               "in the same order); TESSERA_MPI_TIMEOUT sets the limit";
      break;
    }
  }
  std::vector<entry> doomed;
  {
    std::lock_guard<std::mutex> lock(m_);
    if (reason.empty()) {
      auto among = [](const std::vector<const inflight*>& v, const inflight* p) {
        return std::find(v.begin(), v.end(), p) != v.end();
      };
      std::erase_if(ops_, [&](const entry& e) { return among(finished, e.op.get()); });
      for (entry& e : ops_)
        if (e.started_at < 0 && among(started, e.op.get())) e.started_at = now;
      return {};
    }
    failed_ = true;
    doomed.swap(ops_);
  }
  reason += "; the collectives in flight were aborted (ncclCommAbort)";
  if (on_failure_) on_failure_(reason);  // first: the aborts below wake the waits that check it
  for (entry& e : doomed) e.op->abort();
  return reason;
}

std::size_t watchdog::in_flight() const {
  std::lock_guard<std::mutex> lock(m_);
  return ops_.size();
}

bool watchdog::failed() const {
  std::lock_guard<std::mutex> lock(m_);
  return failed_;
}

namespace {

struct background {
  std::mutex m;
  std::condition_variable wake;
  std::unique_ptr<watchdog> dog;
};

background& bg() {
  static background* b = new background();  // leaked like the runtime's state: the thread outlives main
  return *b;
}

[[noreturn]] void sweep_forever(background* b) {
  pthread_setname_np(pthread_self(), "tessera-watch");  // named in ps, top and debuggers
  constexpr auto period = std::chrono::milliseconds(1);  // the deadline's resolution; a query is ~1 us
  for (;;) {
    {
      std::unique_lock<std::mutex> lock(b->m);
      b->wake.wait_for(lock, std::chrono::milliseconds(100), [&] { return b->dog->in_flight() > 0; });
    }
    const double now = std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
    (void)b->dog->sweep(now);  // a failure reaches dist::fail through the watchdog's on_failure
    std::this_thread::sleep_for(period);
  }
}

}  // namespace

void start_watchdog() {
  background& b = bg();
  std::lock_guard<std::mutex> lock(b.m);
  if (!b.dog) {
    b.dog = std::make_unique<watchdog>(dist::timeout_seconds(), [](const std::string& why) { dist::fail(why); });
    std::thread(sweep_forever, &b).detach();
  }
}

void watch_in_background(std::shared_ptr<inflight> op) {
  start_watchdog();
  background& b = bg();
  b.dog->watch(std::move(op));
  { std::lock_guard<std::mutex> lock(b.m); }  // the thread is now waiting or will see the collective
  b.wake.notify_one();
}

}  // namespace tessera::detail::comm
