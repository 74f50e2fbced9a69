// SPDX-License-Identifier: Apache-2.0
// Tessera runtime: the shard dispatch loop shared by every operation (assignments, full
// reductions, reductions along dims), compiled once instead of once per expression type. Across
// processes every rank plans every shard (so plans and errors agree) and runs only its own.
#include <backend/runtime/state.hpp>

#include <string>
#include <vector>

namespace tessera::detail::rt {

namespace {
thread_local bool recording_body = false;
}  // namespace

void set_recording(bool on) { recording_body = on; }
bool recording() { return recording_body; }
void refuse_while_recording(const char* what) {
  if (!recording_body) return;
  throw invalid_argument(std::string("tessera: hide_communication(a, body): the body may only assign to arrays and "
                                     "views (it is replayed twice, boundary cells first), found ") +
                         what + "; do it before or after hide_communication");
}

struct job_storage {
  std::vector<std::max_align_t> tasks;
  std::vector<buffer_list> uses;
  std::vector<shard_launch> launches;
};

namespace {
// The storage of finished job lists, kept with its capacity for the thread's next operations, so
// that an operation allocates nothing here (it made three allocations and frees each time: host
// time on every plain launch, issue #22 item 3). Nested operations take their own from the stack.
struct storage_cache {
  std::vector<job_storage*> free;
  storage_cache() { free.reserve(kept); }
  ~storage_cache() {
    for (job_storage* s : free) delete s;
  }
  static constexpr std::size_t kept = 4;
};
thread_local storage_cache tl_storage;

job_storage* take_storage() {
  if (tl_storage.free.empty()) return new job_storage;
  job_storage* s = tl_storage.free.back();
  tl_storage.free.pop_back();
  return s;
}

void give_back(job_storage* s) {
  s->uses.clear();
  s->launches.clear();
  if (tl_storage.free.size() < storage_cache::kept && s->tasks.capacity() <= (std::size_t{1} << 12)) {
    tl_storage.free.push_back(s);  // reserved: no allocation
  } else {
    delete s;
  }
}
}  // namespace

job_list::job_list(const task_type& type, std::size_t capacity)
    : type_(&type), slots_((type.size + sizeof(std::max_align_t) - 1) / sizeof(std::max_align_t)), s_(take_storage()) {
  try {
    s_->tasks.assign(slots_ * capacity, std::max_align_t{});
    s_->uses.reserve(capacity);
    s_->launches.reserve(capacity);
  } catch (...) {
    give_back(s_);
    throw;
  }
}

job_list::~job_list() {
  if (type_->destroy_in_place != nullptr) {
    for (std::size_t i = 0; i < s_->launches.size(); ++i) type_->destroy_in_place(s_->tasks.data() + slots_ * i);
  }
  give_back(s_);
}

void* job_list::add(int device, int shard, std::int64_t n, buffer_list&& uses) {
  std::vector<shard_launch>& launches = s_->launches;
  // The capacity asked for (tasks sized for it; a reused storage may have reserved more launches).
  if ((launches.size() + 1) * slots_ > s_->tasks.size())
    throw error("tessera: internal error: job_list::add past its capacity");
  void* task = s_->tasks.data() + slots_ * launches.size();
  s_->uses.push_back(std::move(uses));
  launches.push_back({.device = device,
                      .shard = shard,
                      .host = info(device).kind == device_kind::host,
                      .n = n,
                      .run = type_->run,
                      .task = task,
                      .uses = &s_->uses.back(),
                      .parallel = type_->parallel,
                      .clone = type_->clone,
                      .destroy = type_->destroy});
  return task;
}

void job_list::run(bool sequential) const { run_shards(s_->launches.data(), s_->launches.size(), sequential); }

void run_shards(const shard_launch* shards, std::size_t count, bool sequential) {
  refuse_while_recording("an operation that launches work other than an assignment (a reduction, scan, sort, "
                         "fill or user kernel)");
  // A capture records the host shards (capture.cpp); the GPU shards run into the stream capture.
  const bool host_recorded = capture_host_launches(shards, count, sequential);
  auto pooled = [&](const shard_launch& s) {
    return !sequential && s.host && s.n >= host_parallel_threshold && !is_remote(s.device);
  };
  std::size_t n_pooled = 0;
  for (std::size_t i = 0; i < count; ++i) n_pooled += pooled(shards[i]) ? 1 : 0;
  // A single large host shard runs inline: its chunks still spread over the pool.
  const bool use_pool = n_pooled >= 2;
  std::vector<const shard_launch*> large, gpus;
  // GPU shards of tasks that allow it go through the launcher threads when they are on two or more
  // GPUs of this rank; not into a capture or a side stream (both belong to this thread), nor one
  // at a time. (A one-GPU operation takes the plain loop: nothing collected, nothing allocated.)
  int first_gpu = -1;
  bool several_gpus = false;
  for (std::size_t i = 0; i < count && !several_gpus; ++i) {
    const shard_launch& s = shards[i];
    if (s.host || !s.parallel || is_remote(s.device)) continue;
    if (first_gpu < 0) first_gpu = s.device;
    else several_gpus = s.device != first_gpu;
  }
  // (parallel_launch_enabled first: an invalid setting is named by every operation, as documented.)
  const bool parallel =
      !sequential && parallel_launch_enabled() && several_gpus && !capturing() && !on_side_stream();
  device_restorer restore;
  // Two passes: GPU shards are queued first, so a host shard never delays a GPU's start.
  for (const bool host_pass : {false, true}) {
    for (std::size_t i = 0; i < count; ++i) {
      const shard_launch& s = shards[i];
      if (s.host != host_pass || (host_pass && host_recorded)) continue;
      if (is_remote(s.device)) continue;  // another rank computes it (docs/distributed.md)
      if (s.uses) make_resident(*s.uses);
      if (use_pool && pooled(s)) {
        large.push_back(&s);
        continue;
      }
      if (!host_pass && parallel && s.parallel) {
        gpus.push_back(&s);
        continue;
      }
      s.run(s.task, s.device, s.shard, s.host);
      if (sequential && !host_recorded) synchronize_device(s.device);
    }
    if (!host_pass && !gpus.empty() && !launch_in_parallel(gpus.data(), gpus.size())) {
      for (const shard_launch* s : gpus) s->run(s->task, s->device, s->shard, false);
    }
  }
  // The large host shards share the pool with their own chunks: a shard's thread takes part in
  // its chunks, so several host devices at once still use one thread per core.
  if (!large.empty()) {
    parallel_for(
        static_cast<std::int64_t>(large.size()),
        [](const void* ctx, std::int64_t k) {
          const shard_launch& s = *static_cast<const shard_launch* const*>(ctx)[k];
          s.run(s.task, s.device, s.shard, true);
        },
        large.data());
  }
}

}  // namespace tessera::detail::rt
