// SPDX-License-Identifier: Apache-2.0
// Tessera: the one place where a task meets its executor. dsl/ plans a task per shard (ShardTask,
// FullTask, DimsTask) and calls execute(); each task runs on the host executor (backend/host) on
// a host device and on the CUDA executor (backend/cuda) on a GPU. The CUDA executor exists only
// in translation units compiled by nvcc: this header is the one switch on that.
#pragma once
#include <backend/host/executor.hpp>
#include <backend/host/reduce.hpp>
#include <backend/host/scan.hpp>
#include <backend/fft/fft.hpp>
#include <backend/linalg/blas.hpp>
#include <backend/rtc/rtc.hpp>
#include <backend/runtime/runtime.hpp>
#include <backend/solver/solver.hpp>
#include <backend/sparse/sparse.hpp>
#include <tessera/device.hpp>
#if TS_DEVICE_COMPILER
#include <backend/cuda/executor.cuh>
#include <backend/cuda/reduce.cuh>
#include <backend/cuda/scan.cuh>  // declarations only: the CUB code is in tessera_runtime
#endif

#include <string>
#include <type_traits>
#include <vector>

namespace tessera::detail {

// A task and the shard it computes.
template <class Task>
struct Job {
  Task task;
  Device device;
  int shard;   // index of the part, named in launch errors
  index_t n;   // elements: large host shards run on their own thread
  rt::buffer_list uses = {};  // what the task reads and writes: made resident before it runs
};

// One task on its device's executor. rt::run_shards calls it through a pointer, so the dispatch
// loop, with its threads and error handling, is compiled once rather than per task type.
template <class Task>
void run_task(const void* task, int device, int shard, bool host) {
  const Task& t = *static_cast<const Task*>(task);
  if (host) {
    host::run(t);
    return;
  }
  if constexpr (requires { Task::in_library; }) {
    // Runtime-compiled kernels and library calls: their GPU side is compiled into tessera_runtime,
    // so any translation unit may queue them.
    cuda::run(t, device, shard);
  } else {
#if TS_DEVICE_COMPILER
    cuda::run(t, device, shard);
#else
    (void)t, (void)shard;
    throw error("tessera: work was queued on " + Device(device).name() +
                " from a translation unit compiled without nvcc; compile it as CUDA (tessera_add_program in "
                "CMake) or run on host devices (TESSERA_BACKEND=host)");
#endif
  }
}

// Tasks whose GPU executor may run on a launcher thread (rt::launch_in_parallel): it touches only
// the runtime's thread-safe state (streams, scratch, result slots, launch()).
template <class Task>
inline constexpr bool parallel_task = requires { Task::parallel_launch; };

template <class Task>
void* clone_task(const void* task) {
  return new Task(*static_cast<const Task*>(task));
}
template <class Task>
void destroy_task(void* task) {
  delete static_cast<Task*>(task);
}

template <class Task>
void destroy_task_in_place(void* task) {
  static_cast<Task*>(task)->~Task();
}
// A task type for rt::job_list (assignments): its typed run, copy and deletion.
template <class Task>
inline constexpr rt::task_type task_type_of{
    .size = sizeof(Task),
    .run = &run_task<Task>,
    .clone = &clone_task<Task>,
    .destroy = &destroy_task<Task>,
    .destroy_in_place = std::is_trivially_destructible_v<Task> ? nullptr : &destroy_task_in_place<Task>,
    .parallel = parallel_task<Task>};

// Runs every job (GPU jobs queued on their streams first, then host jobs; `sequential` waits for
// each). The caller's current CUDA device is restored, and the first error rethrown once every
// started job has finished.
// Tasks whose results stay on the devices (assignments, user kernels, products) may be captured
// (capture.hpp); the others are followed by host work that reads what they computed (reductions,
// scans, sorts, solvers' info, FFT plans) and are refused while capturing.
template <class Task>
inline constexpr bool capturable_task = requires { Task::capturable; };

template <class Task>
void execute(const std::vector<Job<Task>>& jobs, bool sequential = false) {
  if constexpr (!capturable_task<Task>) {
    rt::refuse_while_capturing("a reduction, scan, sort, FFT or solver (their results are read back by the host)");
  } else if constexpr (requires(const Task& t) { t.kind; t.value_bytes; }) {
    // A ReductionKernel folds into its device's result slot, read by the host afterwards.
    if (rt::capturing()) {
      for (const auto& j : jobs)
        if (j.task.kind == kernel_kind::reduction) rt::refuse_while_capturing("a ReductionKernel (a reduction)");
    }
  }
  std::vector<rt::shard_launch> launches;
  launches.reserve(jobs.size());
  for (const auto& j : jobs) {
    launches.push_back({.device = j.device.id(),
                        .shard = j.shard,
                        .host = j.device.is_host(),
                        .n = j.n,
                        .run = &run_task<Task>,
                        .task = &j.task,
                        .uses = &j.uses,
                        .parallel = parallel_task<Task>,
                        .clone = &clone_task<Task>,
                        .destroy = &destroy_task<Task>});
  }
  rt::run_shards(launches.data(), launches.size(), sequential);
}

}  // namespace tessera::detail
