// SPDX-License-Identifier: Apache-2.0
// Captured loops (tessera::capture, dsl/tessera/capture.hpp): while a body runs, the work it
// queues is recorded instead of run, then replayed as often as asked.
//  * GPUs: each GPU's stream captured into a graph of its own (a replay is one launch per GPU, no
//    cross-device wait). Work that links two GPUs (a peer copy) marks the session instead of
//    being queued, and tessera::capture records the body again as one joint capture: the first
//    GPU's stream begins it, every other GPU's stream joins it by waiting for an event recorded
//    there (and leaves it the same way before the end). Relaxed mode: the runtime may still
//    allocate (cudaMalloc) while capturing.
//  * Host devices: each operation's shards (their tasks cloned) and each copy between host
//    devices, in order, replayed through the same dispatch loop.
// Every block allocated while capturing belongs to the graph until it is released, whatever
// happens to the array that held it, since the graph reads and writes it at every replay; nothing
// the body allocates is reused by the body itself. Work that waits for the host (reads to the
// host, collectives, reductions and scans, which need the runtime's grow-only scratch) is refused
// by name.
#include <backend/process/mpi.hpp>
#include <backend/runtime/state.hpp>

#include <atomic>
#include <iterator>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

namespace tessera::detail::rt {

struct capture_session {
  struct kept_block {
    int device;
    void* p;
    std::size_t bytes;
    memory kind;
    bool host_touched;
  };
  // One recorded host operation: its launches, whose tasks are clones owned here.
  struct host_step {
    std::vector<shard_launch> launches;  // their tasks are clones owned here
    std::vector<copy_region> copies;     // or a batch of copies between host devices
    bool sequential = false;
    host_step() = default;
    host_step(host_step&& o) noexcept
        : launches(std::move(o.launches)), copies(std::move(o.copies)), sequential(o.sequential) {
      o.launches.clear();
    }
    host_step& operator=(host_step&&) = delete;
    ~host_step() {
      for (auto& l : launches)
        if (l.destroy && l.task) l.destroy(const_cast<void*>(l.task));
    }
  };
  std::vector<int> gpus;  // this process's GPUs; gpus[0] begins a joint capture
  bool joint = false;
  bool needs_joint = false;      // an independent capture met work linking two GPUs: record again
  std::string released_outer;    // storage made before the capture that the body let go (see below)
  std::vector<host_step> steps;
  std::vector<kept_block> kept;
  bool gpu_work = false, host_work = false;
#if TESSERA_HAS_CUDA
  std::vector<cudaEvent_t> events;  // joint: fork, then one join per other GPU; reused by replay
  cudaGraph_t graph = nullptr;      // joint
  cudaGraphExec_t exec = nullptr;
  std::vector<cudaGraph_t> graphs;  // independent: one per GPU (null: nothing recorded there)
  std::vector<cudaGraphExec_t> execs;
#endif
  ~capture_session() {
#if TESSERA_HAS_CUDA
    for (auto e : events)
      if (e) (void)cudaEventDestroy(e);
#endif
  }
};

namespace {
thread_local capture_session* active = nullptr;

// Blocks allocated while a capture records belong to its graph: the replays write them whatever
// happens to the arrays that held them (an array made in the body may escape it and be dropped or
// re-bound later), so their release waits for the graph's (release_capture). Process-wide, since
// an escaped array may die on any thread.
struct owned_blocks {
  std::mutex m;
  std::unordered_map<const void*, capture_session*> owner;
  std::atomic<std::size_t> count{0};
};
owned_blocks& owned() {
  static owned_blocks* o = new owned_blocks();  // leaked: frees may run during static destruction
  return *o;
}

[[noreturn]] void fail(const std::string& what) { throw invalid_argument("tessera: capture: " + what); }
}  // namespace

bool capturing() { return active != nullptr; }

void refuse_while_capturing(const char* what) {
  if (active == nullptr) return;
  fail(std::string("the body may only queue device work (assignments, copies between GPUs or between host "
                   "devices, update_halo, matmul, user kernels), found ") +
       what + "; do it before or after the capture, or between replays");
}

bool capture_links_devices() {
  if (active == nullptr || active->joint || active->gpus.size() < 2) return false;
  active->needs_joint = true;  // the body goes on; tessera::capture records it again, jointly
  return true;
}

bool capture_needs_joint(const capture_session* s) { return s->needs_joint; }

void capture_note_allocation(void* p) {
  if (active == nullptr || p == nullptr) return;
  owned_blocks& o = owned();
  std::lock_guard<std::mutex> lock(o.m);
  o.owner[p] = active;
  o.count.store(o.owner.size(), std::memory_order_release);
}

bool capture_defer_free(int device_id, void* p, std::size_t bytes, memory kind, bool host_touched) {
  if (p == nullptr) return false;
  capture_session* to = nullptr;
  owned_blocks& o = owned();
  if (o.count.load(std::memory_order_acquire) > 0) {
    std::lock_guard<std::mutex> lock(o.m);
    if (auto it = o.owner.find(p); it != o.owner.end()) {
      to = it->second;
      o.owner.erase(it);
      o.count.store(o.owner.size(), std::memory_order_release);
    }
  }
  if (to == nullptr && active != nullptr) {
    // Storage made before the capture, let go by the body: an array from outside re-bound to a
    // new one (`a = matmul(S, a)`). The recorded work keeps reading and writing the old storage,
    // so the replays would not follow the array: refused at the end of the capture.
    to = active;
    if (to->released_outer.empty()) {
      to->released_outer = "the body released storage made before the capture (" + std::to_string(bytes) +
                           " bytes on " + info(device_id).name + ")";
    }
  }
  if (to == nullptr) return false;
  std::lock_guard<std::mutex> lock(owned().m);  // kept lists may grow from several threads
  to->kept.push_back({device_id, p, bytes, kind, host_touched});
  return true;
}

bool capture_host_launches(const shard_launch* shards, std::size_t count, bool sequential) {
  if (active == nullptr) return false;
  capture_session::host_step step;
  step.sequential = sequential;
  for (std::size_t i = 0; i < count; ++i) {
    const shard_launch& s = shards[i];
    if (!s.host) {
      active->gpu_work = true;
      continue;
    }
    if (s.clone == nullptr) fail("internal: a host task without a copy function");
    shard_launch c = s;
    c.uses = nullptr;  // host devices need no residency; the buffers may be the body's temporaries
    step.launches.push_back(c);
    step.launches.back().task = nullptr;
    step.launches.back().task = s.clone(s.task);  // owned by the step from here (its destructor)
  }
  if (!step.launches.empty()) {
    active->host_work = true;
    active->steps.push_back(std::move(step));
  }
  // GPU shards of the same operation still run (into the stream capture); the caller skips the
  // host ones.
  return true;
}

bool capture_host_copies(const copy_region* regions, std::size_t n) {
  if (active == nullptr) return false;
  capture_session::host_step step;
  for (std::size_t i = 0; i < n; ++i) {
    copy_region r = regions[i];
    r.dst_buf = r.src_buf = nullptr;
    step.copies.push_back(r);
  }
  active->host_work = true;
  active->steps.push_back(std::move(step));
  return true;
}

namespace {
#if TESSERA_HAS_CUDA
cudaGraph_t end_stream_capture(capture_session& s, cudaError_t& err);
#endif
}  // namespace

capture_session* begin_capture(bool joint) {
  if (active != nullptr) fail("a capture inside another capture's body");
  if (recording()) fail("a capture inside hide_communication's body");
  if (dist::spans_processes()) {
    fail("the devices span several processes (MPI ranks); captured replays run in one process only");
  }
  auto s = std::make_unique<capture_session>();
  s->joint = joint;
  const state& st = get();
  for (int d = 0; d < st.gpu_count; ++d) s->gpus.push_back(d);
#if TESSERA_HAS_CUDA
  if (!s->gpus.empty()) {
    // Everything queued before is finished: the memory cache's blocks are then free of earlier
    // work (pool_take need not wait for events recorded outside the capture).
    for (int d : s->gpus) synchronize_device(d);
    if (!joint) {
      s->graphs.assign(s->gpus.size(), nullptr);
      s->execs.assign(s->gpus.size(), nullptr);
      for (std::size_t i = 0; i < s->gpus.size(); ++i) {
        const int d = s->gpus[i];
        device_guard guard(d);
        const cudaError_t e = cudaStreamBeginCapture(gpu(d).stream, cudaStreamCaptureModeRelaxed);
        if (e != cudaSuccess) {
          for (std::size_t j = 0; j < i; ++j) {  // end the captures already begun
            device_guard g(s->gpus[j]);
            cudaGraph_t dropped = nullptr;
            if (cudaStreamEndCapture(gpu(s->gpus[j]).stream, &dropped) == cudaSuccess && dropped)
              (void)cudaGraphDestroy(dropped);
          }
          cuda_check(e, "cudaStreamBeginCapture", d);
        }
      }
      active = s.get();
      return s.release();
    }
    s->events.assign(s->gpus.size(), nullptr);
    for (std::size_t i = 0; i < s->gpus.size(); ++i) {
      device_guard guard(s->gpus[i]);
      cuda_check(cudaEventCreateWithFlags(&s->events[i], cudaEventDisableTiming), "cudaEventCreateWithFlags",
                 s->gpus[i]);
    }
    const int o = s->gpus[0];
    device_guard guard(o);
    cuda_check(cudaStreamBeginCapture(gpu(o).stream, cudaStreamCaptureModeRelaxed), "cudaStreamBeginCapture", o);
    try {
      cuda_check(cudaEventRecord(s->events[0], gpu(o).stream), "cudaEventRecord", o);
      for (std::size_t i = 1; i < s->gpus.size(); ++i) {
        const int d = s->gpus[i];
        device_guard g(d);
        cuda_check(cudaStreamWaitEvent(gpu(d).stream, s->events[0], 0), "cudaStreamWaitEvent", d);
      }
    } catch (...) {
      // No stream may stay in capture mode: end it (joining what joined) and drop the graph.
      cudaError_t err = cudaSuccess;
      if (cudaGraph_t g = end_stream_capture(*s, err)) (void)cudaGraphDestroy(g);
      throw;
    }
  }
#endif
  active = s.get();
  return s.release();
}

namespace {
#if TESSERA_HAS_CUDA
// Joins every GPU's stream back into the first's and ends the capture; the graph, or null.
cudaGraph_t end_stream_capture(capture_session& s, cudaError_t& err) {
  const int o = s.gpus[0];
  err = cudaSuccess;
  for (std::size_t i = 1; i < s.gpus.size() && err == cudaSuccess; ++i) {
    const int d = s.gpus[i];
    device_guard g(d);
    err = cudaEventRecord(s.events[i], gpu(d).stream);
    if (err == cudaSuccess) err = cudaStreamWaitEvent(gpu(o).stream, s.events[i], 0);
  }
  device_guard guard(o);
  cudaGraph_t graph = nullptr;
  const cudaError_t e = cudaStreamEndCapture(gpu(o).stream, &graph);
  if (err == cudaSuccess) err = e;
  (void)cudaGetLastError();
  if (err != cudaSuccess && graph) {
    (void)cudaGraphDestroy(graph);
    graph = nullptr;
  }
  return graph;
}
#endif
}  // namespace

#if TESSERA_HAS_CUDA
// Ends every GPU's own capture (independent mode); the first error, the graphs kept in `s`.
cudaError_t end_independent(capture_session& s) {
  cudaError_t err = cudaSuccess;
  for (std::size_t i = 0; i < s.gpus.size(); ++i) {
    const int d = s.gpus[i];
    device_guard guard(d);
    cudaGraph_t g = nullptr;
    const cudaError_t e = cudaStreamEndCapture(gpu(d).stream, &g);
    (void)cudaGetLastError();
    if (e != cudaSuccess) {
      if (err == cudaSuccess) err = e;
      if (g) (void)cudaGraphDestroy(g);
      continue;
    }
    std::size_t nodes = 0;
    if (g && cudaGraphGetNodes(g, nullptr, &nodes) == cudaSuccess && nodes == 0) {
      (void)cudaGraphDestroy(g);  // nothing ran on this GPU: no launch at replay
      g = nullptr;
    }
    s.graphs[i] = g;
  }
  return err;
}
#endif

void end_capture(capture_session* s) {
  active = nullptr;
#if TESSERA_HAS_CUDA
  if (!s->gpus.empty() && !s->joint) {
    const cudaError_t err = end_independent(*s);
    if (err != cudaSuccess) {
      throw backend_error(std::string("tessera: capture: the body's GPU work could not be captured (") +
                          cudaGetErrorName(err) + ": " + cudaGetErrorString(err) +
                          "); a body may not wait for a GPU (host reads, synchronize) or leave copies unfinished");
    }
    for (std::size_t i = 0; i < s->gpus.size(); ++i) {
      if (!s->graphs[i]) continue;
      device_guard guard(s->gpus[i]);
      cuda_check(cudaGraphInstantiate(&s->execs[i], s->graphs[i], 0), "cudaGraphInstantiate", s->gpus[i]);
    }
  } else if (!s->gpus.empty()) {
    cudaError_t err = cudaSuccess;
    s->graph = end_stream_capture(*s, err);
    if (err != cudaSuccess) {
      throw backend_error(std::string("tessera: capture: the body's GPU work could not be captured (") +
                          cudaGetErrorName(err) + ": " + cudaGetErrorString(err) +
                          "); a body may not wait for a GPU (host reads, synchronize) or leave copies unfinished");
    }
    const int o = s->gpus[0];
    device_guard guard(o);
    cuda_check(cudaGraphInstantiate(&s->exec, s->graph, 0), "cudaGraphInstantiate", o);
  }
#endif
  if (s->gpu_work && s->host_work) {
    fail("the body queued work on GPUs and on host devices; capture one kind per body");
  }
  if (!s->released_outer.empty()) {
    fail(s->released_outer + ": an array from outside the body was re-bound to a new array (`a = matmul(S, a)`, "
         "`a = Array(...)`), so the replays would keep using its old storage. Assign in place instead: "
         "copyto(a, matmul(S, a)) or a(_) = ...");
  }
}

void abort_capture(capture_session* s) noexcept {
  if (active == s) active = nullptr;
#if TESSERA_HAS_CUDA
  if (!s->gpus.empty() && !s->joint) {  // the body threw: its captures are still open
    (void)end_independent(*s);
  } else if (!s->gpus.empty() && s->joint && s->graph == nullptr) {
    cudaError_t err = cudaSuccess;
    if (cudaGraph_t g = end_stream_capture(*s, err)) (void)cudaGraphDestroy(g);
  }
#endif
  release_capture(s);
}

void replay(capture_session* s) {
  if (active != nullptr) fail("replay() inside a capture's body");
  refuse_while_recording("a replay of a captured graph");
#if TESSERA_HAS_CUDA
  for (std::size_t i = 0; i < s->execs.size(); ++i) {
    if (!s->execs[i]) continue;
    const int d = s->gpus[i];
    device_guard guard(d);
    const cudaError_t e = cudaGraphLaunch(s->execs[i], gpu(d).stream);
    if (e != cudaSuccess) {
      (void)cudaGetLastError();
      throw backend_error(std::string("tessera: capture: replay failed on cuda:") + std::to_string(d) + ": " +
                          cudaGetErrorName(e) + " (" + cudaGetErrorString(e) + ")");
    }
  }
  if (s->exec) {
    const int o = s->gpus[0];
    // The graph starts after the work already queued on every GPU, and the work queued after it
    // on any GPU waits for the whole graph (it ends on the first GPU's stream).
    for (std::size_t i = 1; i < s->gpus.size(); ++i) {
      const int d = s->gpus[i];
      device_guard g(d);
      cuda_check(cudaEventRecord(s->events[i], gpu(d).stream), "cudaEventRecord", d);
      cuda_check(cudaStreamWaitEvent(gpu(o).stream, s->events[i], 0), "cudaStreamWaitEvent", o);
    }
    {
      device_guard guard(o);
      const cudaError_t e = cudaGraphLaunch(s->exec, gpu(o).stream);
      if (e != cudaSuccess) {
        (void)cudaGetLastError();
        throw backend_error(std::string("tessera: capture: replay failed on cuda:") + std::to_string(o) + ": " +
                            cudaGetErrorName(e) + " (" + cudaGetErrorString(e) + ")");
      }
      if (s->gpus.size() > 1) cuda_check(cudaEventRecord(s->events[0], gpu(o).stream), "cudaEventRecord", o);
    }
    for (std::size_t i = 1; i < s->gpus.size(); ++i) {
      const int d = s->gpus[i];
      device_guard g(d);
      cuda_check(cudaStreamWaitEvent(gpu(d).stream, s->events[0], 0), "cudaStreamWaitEvent", d);
    }
  }
#endif
  for (const auto& st : s->steps) {
    if (!st.copies.empty()) copy_between_many(st.copies.data(), st.copies.size());
    if (!st.launches.empty()) run_shards(st.launches.data(), st.launches.size(), st.sequential);
  }
}

void release_capture(capture_session* s) noexcept {
  if (s == nullptr) return;
  if (active == s) active = nullptr;
  {
    // Blocks of this graph still held by arrays go back to the normal path when those die.
    owned_blocks& o = owned();
    std::lock_guard<std::mutex> lock(o.m);
    for (auto it = o.owner.begin(); it != o.owner.end();) it = it->second == s ? o.owner.erase(it) : std::next(it);
    o.count.store(o.owner.size(), std::memory_order_release);
  }
#if TESSERA_HAS_CUDA
  // A replay may still run; inside another capture's body nothing runs (begin_capture waited),
  // and a wait would break that capture.
  if (active == nullptr) {
    for (int d : s->gpus) {
      device_guard g(d);
      (void)cudaStreamSynchronize(gpu(d).stream);
    }
  }
  if (s->exec) (void)cudaGraphExecDestroy(s->exec);
  if (s->graph) (void)cudaGraphDestroy(s->graph);
  for (auto e : s->execs)
    if (e) (void)cudaGraphExecDestroy(e);
  for (auto g : s->graphs)
    if (g) (void)cudaGraphDestroy(g);
  (void)cudaGetLastError();
#endif
  if (active != nullptr && active != s) {
    // Released inside another capture's body: that capture keeps the blocks (deallocate would
    // take them for storage its body let go of, and refuse it).
    std::lock_guard<std::mutex> lock(owned().m);
    active->kept.insert(active->kept.end(), s->kept.begin(), s->kept.end());
  } else {
    for (const auto& k : s->kept) deallocate(k.device, k.p, k.bytes, k.kind, k.host_touched);
  }
  delete s;
}

}  // namespace tessera::detail::rt
