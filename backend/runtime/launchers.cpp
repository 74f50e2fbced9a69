// SPDX-License-Identifier: Apache-2.0
// Tessera runtime: one launcher thread per GPU, so that an operation over several GPUs queues its
// shards on all of them at once. A kernel launch costs the host 3.5-5 us on the machines we
// measure (most of it in the driver), so one thread queueing four shards starts the last GPU
// 12-15 us after the first: a 30M-float sum to the host on 4 GPUs spent most of its 28 us waiting
// for launches, and the host time per operation of a loop grew with the GPU count.
//
// A launcher that ran recently spins on its mailbox (for spin_window; `pause` in the loop), so a
// hand-off costs well under a microsecond. One that has been idle longer sleeps on a futex; waking
// it would take longer than the launch itself, so the caller queues that GPU's shards itself and
// wakes the launcher afterwards, while the GPUs work, for the operations that follow.
// The caller always waits until every launcher has queued its shards: the streams then hold the
// work in the order the program gave it, whatever thread queues the next operation.
#include <backend/runtime/state.hpp>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <pthread.h>

namespace tessera::detail::rt {
namespace {

// TESSERA_PARALLEL_LAUNCH and TESSERA_LAUNCH_SPIN_US (how long an idle launcher keeps spinning
// before it sleeps), read on the first operation's thread: an invalid value is named by every
// operation that asks, never thrown on a launcher thread.
struct launch_settings {
  bool on = true;
  std::chrono::nanoseconds spin{500'000};
};
const launch_settings& settings() {
  static const launch_settings s = [] {
    launch_settings out;
    const char* p = std::getenv("TESSERA_PARALLEL_LAUNCH");
    out.on = p == nullptr || std::strcmp(p, "0") != 0;
    if (const char* v = std::getenv("TESSERA_LAUNCH_SPIN_US"); v != nullptr && *v != '\0') {
      char* end = nullptr;
      const long parsed = std::strtol(v, &end, 10);
      if (*end != '\0' || parsed < 0 || parsed > 1000000) {
        throw invalid_argument(std::string("tessera: TESSERA_LAUNCH_SPIN_US=") + v +
                               " is not a time; expected microseconds from 0 to 1000000");
      }
      out.spin = std::chrono::microseconds(parsed);
    }
    return out;
  }();
  return s;
}

// Groups handed to a launcher so far (tests check that the launchers are used).
std::atomic<std::uint64_t> handoffs{0};

class launcher {
 public:
  explicit launcher(std::chrono::nanoseconds spin) : spin_(spin), thread_([this] { loop(); }) {}
  launcher(const launcher&) = delete;
  launcher& operator=(const launcher&) = delete;

  // Idle, and spinning: a hand-off is picked up at once.
  bool hot() const { return idle() && !asleep_.load(std::memory_order_seq_cst); }
  // Hands over shards to queue in order; only when idle. The caller keeps them alive until wait()
  // returns.
  void post(const shard_launch* const* shards, std::size_t count) {
    shards_ = shards;
    count_ = count;
    failed_at_ = -1;
    error_ = nullptr;
    posted_.fetch_add(1, std::memory_order_seq_cst);
    // Seen asleep after the post: it may have gone to sleep before the post (it checks the mailbox
    // after saying so, so one of the two sees the other).
    if (asleep_.load(std::memory_order_seq_cst)) posted_.notify_one();
  }
  // Wakes a sleeping, idle launcher with an empty hand-off, for the operations that follow.
  void wake() {
    if (idle() && asleep_.load(std::memory_order_seq_cst)) post(nullptr, 0);
  }
  // Waits until the shards posted last are queued; the position (in that post) of the shard that
  // threw (-1: none) and its exception.
  std::ptrdiff_t wait(std::exception_ptr& error) const {
    // The launcher may have lost its core (fewer cores than spinning threads): yield now and then.
    for (unsigned k = 1; !idle(); ++k) {
      spin_pause();
      if (k % 4096 == 0) std::this_thread::yield();
    }
    error = error_;
    return failed_at_;
  }

 private:
  bool idle() const {
    return done_.load(std::memory_order_acquire) == posted_.load(std::memory_order_relaxed);
  }
  void loop() {
    pthread_setname_np(pthread_self(), "tessera-launch");  // named in ps, top, debuggers and the soak's report
    unsigned seen = 0;
    for (;;) {
      const auto idle_since = std::chrono::steady_clock::now();
      unsigned p = posted_.load(std::memory_order_acquire);
      for (std::uint32_t k = 0; p == seen; ++k) {
        spin_pause();
        if ((k & 255u) == 255u && std::chrono::steady_clock::now() - idle_since > spin_) {
          asleep_.store(true, std::memory_order_seq_cst);
          if (posted_.load(std::memory_order_seq_cst) == seen) posted_.wait(seen, std::memory_order_seq_cst);
          asleep_.store(false, std::memory_order_seq_cst);
          k = 0;
        }
        p = posted_.load(std::memory_order_acquire);
      }
      seen = p;
      for (std::size_t i = 0; i < count_; ++i) {
        const shard_launch& s = *shards_[i];
        try {
          s.run(s.task, s.device, s.shard, false);
        } catch (...) {
          error_ = std::current_exception();
          failed_at_ = static_cast<std::ptrdiff_t>(i);
          break;  // as on the calling thread: the rest of the operation is not queued
        }
      }
      done_.store(seen, std::memory_order_release);
    }
  }

  // The mailbox: written by the caller before posted_ is bumped, read by the launcher after; the
  // results written by the launcher before done_ catches up, read by the caller after.
  const shard_launch* const* shards_ = nullptr;
  std::size_t count_ = 0;
  std::ptrdiff_t failed_at_ = -1;
  std::exception_ptr error_;
  std::atomic<unsigned> posted_{0}, done_{0};
  std::atomic<bool> asleep_{false};
  const std::chrono::nanoseconds spin_;
  std::thread thread_;  // last: it starts once the members above exist
};

// Created on first use and never destroyed: an idle launcher holds nothing, and a program's static
// destructors may still launch work after ours would have run. Throws when the thread cannot start.
launcher& launcher_of(int device) {
  static std::mutex m;
  static launcher* of[64] = {};
  std::lock_guard<std::mutex> lock(m);
  if (!of[device]) of[device] = new launcher(settings().spin);
  return *of[device];
}

// One operation at a time goes through the launchers: another thread of the program launching
// meanwhile queues its own shards.
std::atomic<bool> in_use{false};

}  // namespace

bool parallel_launch_enabled() { return settings().on; }

std::uint64_t launcher_handoffs() { return handoffs.load(std::memory_order_relaxed); }

bool launch_in_parallel(const shard_launch* const* shards, std::size_t count) {
  // The shards grouped by GPU, in order; the first GPU's stay on this thread.
  int devices[64];
  std::size_t groups = 0;
  for (std::size_t i = 0; i < count; ++i) {
    const int d = shards[i]->device;
    if (d < 0 || d >= 64) return false;
    bool known = false;
    for (std::size_t g = 0; g < groups; ++g) known = known || devices[g] == d;
    if (!known) devices[groups++] = d;
  }
  // Every launcher spins while it works: without a core for each and one for this thread they
  // would take turns with the caller.
  static const unsigned cores = std::thread::hardware_concurrency();  // a system call each time
  if (groups < 2 || cores < groups + 1) return false;
  bool expected = false;
  if (!in_use.compare_exchange_strong(expected, true, std::memory_order_acquire)) return false;
  struct release {
    ~release() { in_use.store(false, std::memory_order_release); }
  } release_in_use;
  // All launchers exist before anything is handed over (one that cannot start leaves the whole
  // operation to this thread).
  std::vector<launcher*> launchers(groups, nullptr);
  try {
    for (std::size_t g = 1; g < groups; ++g) launchers[g] = &launcher_of(devices[g]);
  } catch (...) {
    return false;
  }

  std::vector<const shard_launch*> order;  // grouped
  std::vector<std::size_t> origin;         // each one's index in `shards`
  std::vector<std::size_t> begin(groups + 1);
  order.reserve(count);
  origin.reserve(count);
  for (std::size_t g = 0; g < groups; ++g) {
    begin[g] = order.size();
    for (std::size_t i = 0; i < count; ++i) {
      if (shards[i]->device != devices[g]) continue;
      order.push_back(shards[i]);
      origin.push_back(i);
    }
  }
  begin[groups] = count;
  // Hot launchers get their groups first; this thread queues the others, then wakes the sleepers.
  std::vector<launcher*> helper(groups, nullptr);
  for (std::size_t g = 1; g < groups; ++g) {
    if (launchers[g]->hot()) {
      launchers[g]->post(order.data() + begin[g], begin[g + 1] - begin[g]);
      helper[g] = launchers[g];
      handoffs.fetch_add(1, std::memory_order_relaxed);
    }
  }
  std::exception_ptr error;
  std::size_t error_at = count;  // index in `shards` of the first shard that threw
  for (std::size_t g = 0; g < groups && !error; ++g) {
    if (helper[g]) continue;
    for (std::size_t i = begin[g]; i < begin[g + 1]; ++i) {
      try {
        order[i]->run(order[i]->task, order[i]->device, order[i]->shard, false);
      } catch (...) {
        error = std::current_exception();
        error_at = origin[i];
        break;
      }
    }
  }
  for (std::size_t g = 1; g < groups; ++g)
    if (!helper[g]) launchers[g]->wake();
  // Every hand-off is finished before this returns (the shards live in the caller's frame). Of the
  // errors, the first shard's in the operation's order.
  for (std::size_t g = 1; g < groups; ++g) {
    if (!helper[g]) continue;
    std::exception_ptr e;
    const std::ptrdiff_t at = helper[g]->wait(e);
    if (e && origin[begin[g] + static_cast<std::size_t>(at)] < error_at) {
      error = e;
      error_at = origin[begin[g] + static_cast<std::size_t>(at)];
    }
  }
  if (error) std::rethrow_exception(error);
  return true;
}

}  // namespace tessera::detail::rt
