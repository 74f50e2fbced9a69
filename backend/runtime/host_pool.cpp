// SPDX-License-Identifier: Apache-2.0
// Tessera runtime: the host thread pool. Host devices are plain CPU memory, and one thread per
// shard would leave every core but one idle on a single host device, so large host shards are
// split into chunks (backend/host/parallel.hpp) that run here. One pool serves every shard and
// every caller: run_shards hands the large host shards of an operation to it too, and each shard
// hands it its chunks, so several host devices at once still use about one thread per core.
//
// A job is one parallel_for: the caller publishes it, idle workers claim indices from it with an
// atomic counter, and the caller claims them too, so nothing waits for a worker to wake up before
// work starts. The caller then waits for the indices other threads still hold. Waits only ever go
// to work nested deeper (a chunk inside the shard that waits for it), so nested parallel_for calls
// cannot deadlock, whatever the number of workers.
#include <backend/runtime/runtime.hpp>

#include <pthread.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstdlib>
#include <exception>
#include <list>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace tessera::detail::rt {
namespace {

struct job {
  void (*body)(const void* ctx, std::int64_t i);
  const void* ctx;
  std::int64_t count;
  std::atomic<std::int64_t> next{0};
  std::atomic<bool> failed{false};  // bodies not yet started are skipped
  int users = 0;                    // workers holding a pointer to this job (under the pool's mutex)
  std::mutex error_mutex;
  std::int64_t error_index = -1;    // the lowest index whose body threw
  std::exception_ptr error;

  bool has_work() const { return next.load(std::memory_order_relaxed) < count; }

  // Claims and runs indices until none is left.
  void work() {
    for (;;) {
      const std::int64_t i = next.fetch_add(1, std::memory_order_relaxed);
      if (i >= count) return;
      if (failed.load(std::memory_order_relaxed)) continue;
      try {
        body(ctx, i);
      } catch (...) {
        std::lock_guard<std::mutex> lock(error_mutex);
        if (error_index < 0 || i < error_index) {
          error_index = i;
          error = std::current_exception();
        }
        failed.store(true, std::memory_order_relaxed);
      }
    }
  }
};

int default_threads() {
  if (const char* v = std::getenv("TESSERA_HOST_THREADS"); v != nullptr && *v != '\0') {
    char* end = nullptr;
    const long parsed = std::strtol(v, &end, 10);
    if (*end != '\0' || parsed < 1 || parsed > max_host_threads) {
      throw invalid_argument(std::string("tessera: TESSERA_HOST_THREADS=") + v +
                             " is not a thread count; expected an integer from 1 to " + std::to_string(max_host_threads));
    }
    return static_cast<int>(parsed);
  }
  const unsigned hw = std::thread::hardware_concurrency();
  return hw == 0 ? 1 : static_cast<int>(std::min<unsigned>(hw, max_host_threads));
}

class pool {
 public:
  // At exit: joins the workers; work that still arrives (a static destructor's) runs inline.
  void close() {
    stop_workers();
    std::lock_guard<std::mutex> lock(mutex_);
    closed_ = true;
  }

  int threads() {
    std::lock_guard<std::mutex> lock(mutex_);
    return threads_locked();
  }

  void set_threads(int n) {
    if (n > max_host_threads) {
      throw invalid_argument("tessera: set_host_threads(" + std::to_string(n) + "): expected at most " +
                             std::to_string(max_host_threads) + " threads (0 for the default)");
    }
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (!jobs_.empty()) {
        throw invalid_argument("tessera: set_host_threads() was called while host work runs; call it between operations");
      }
    }
    stop_workers();
    std::lock_guard<std::mutex> lock(mutex_);
    threads_ = n > 0 ? n : 0;
  }

  void run(std::int64_t count, void (*body)(const void*, std::int64_t), const void* ctx) {
    if (count <= 0) return;
    job j;
    j.body = body;
    j.ctx = ctx;
    j.count = count;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      const int t = closed_ ? 1 : threads_locked();
      if (t <= 1 || count == 1) {
        lock.unlock();
        for (std::int64_t i = 0; i < count; ++i) body(ctx, i);  // the first error propagates as is
        return;
      }
      start_workers_locked(t - 1);
      jobs_.push_back(&j);
    }
    work_cv_.notify_all();
    j.work();
    {
      // No new worker can pick the job once it leaves the list; those holding it finish the
      // indices they claimed, then let go.
      std::unique_lock<std::mutex> lock(mutex_);
      jobs_.remove(&j);
      done_cv_.wait(lock, [&] { return j.users == 0; });
    }
    if (j.error) std::rethrow_exception(j.error);
  }

 private:
  int threads_locked() {
    if (threads_ == 0) threads_ = default_threads();
    return threads_;
  }

  void start_workers_locked(int n) {
    while (static_cast<int>(workers_.size()) < n) {
      workers_.emplace_back([this] {
        pthread_setname_np(pthread_self(), "tessera-pool");  // named in ps, top and debuggers
        worker();
      });
    }
  }

  void stop_workers() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      stop_ = true;
    }
    work_cv_.notify_all();
    for (auto& w : workers_) w.join();
    std::lock_guard<std::mutex> lock(mutex_);
    workers_.clear();
    stop_ = false;
  }

  job* find_work_locked() {
    for (job* j : jobs_)
      if (j->has_work()) return j;
    return nullptr;
  }

  void worker() {
    std::unique_lock<std::mutex> lock(mutex_);
    for (;;) {
      job* j = nullptr;
      work_cv_.wait(lock, [&] { return stop_ || (j = find_work_locked()) != nullptr; });
      if (stop_) return;
      ++j->users;
      lock.unlock();
      j->work();
      lock.lock();
      if (--j->users == 0) done_cv_.notify_all();
    }
  }

  std::mutex mutex_;
  std::condition_variable work_cv_;  // a job was published, or the workers must stop
  std::condition_variable done_cv_;  // a worker let go of a job
  std::list<job*> jobs_;             // published jobs, oldest first: workers serve the oldest
  std::vector<std::thread> workers_;
  int threads_ = 0;  // 0: not chosen yet (the environment is read on first use)
  bool stop_ = false;
  bool closed_ = false;
};

// Created on first use and never destroyed, so that a static destructor running after the
// workers were joined still finds a pool (which then runs its work inline).
pool& the_pool() {
  static pool* const p = new pool;
  static const struct closer {
    ~closer() { p->close(); }
  } at_exit;
  return *p;
}

}  // namespace

int host_threads() { return the_pool().threads(); }

void set_host_threads(int n) { the_pool().set_threads(n); }

void parallel_for(std::int64_t count, void (*body)(const void* ctx, std::int64_t i), const void* ctx) {
  the_pool().run(count, body, ctx);
}

}  // namespace tessera::detail::rt
