// SPDX-License-Identifier: Apache-2.0
// Tessera runtime: the shard dispatch loop shared by every operation (assignments, full
// reductions, reductions along dims), compiled once instead of once per expression type. Across
// processes every rank plans every shard (so plans and errors agree) and runs only its own.
#include <backend/runtime/runtime.hpp>

#include <exception>
#include <thread>
#include <vector>

namespace tessera::detail::rt {

void run_shards(const shard_launch* shards, std::size_t count, bool sequential) {
  auto threaded = [&](const shard_launch& s) { return !sequential && s.host && s.n >= host_parallel_threshold; };
  std::size_t n_threaded = 0;
  for (std::size_t i = 0; i < count; ++i) n_threaded += threaded(shards[i]) ? 1 : 0;
  const bool use_threads = n_threaded >= 2;  // a single large host shard runs inline
  std::vector<std::thread> workers;
  std::vector<std::exception_ptr> errors(use_threads ? count : 0);
  std::exception_ptr first;
  device_restorer restore;
  try {
    // Two passes: GPU shards are queued first, so a host shard never delays a GPU's start.
    for (const bool host_pass : {false, true}) {
      for (std::size_t i = 0; i < count; ++i) {
        const shard_launch& s = shards[i];
        if (s.host != host_pass) continue;
        if (is_remote(s.device)) continue;  // another rank computes it (docs/distributed.md)
        if (use_threads && threaded(s)) {
          workers.emplace_back([&s, &errors, i] {
            try {
              s.run(s.task, s.device, s.shard, true);
            } catch (...) {
              errors[i] = std::current_exception();
            }
          });
          continue;
        }
        s.run(s.task, s.device, s.shard, s.host);
        if (sequential) synchronize_device(s.device);
      }
    }
  } catch (...) {
    first = std::current_exception();
  }
  for (auto& w : workers) w.join();
  for (auto& e : errors)
    if (!first && e) first = e;
  if (first) std::rethrow_exception(first);
}

}  // namespace tessera::detail::rt
