// SPDX-License-Identifier: Apache-2.0
// Tessera: captured loops. `auto g = capture([&] { ...assignments... }); g.replay();` runs the body
// once to record the work it queues, without running it: planning, placement, shape and alias
// checks happen then, once; each replay() runs the recorded work again, on GPUs as one CUDA graph
// per GPU (one launch instead of one per operation and shard; a body that moves data between GPUs
// is recorded a second time as one graph over all of them, so its host code may run twice), on
// host devices as the recorded list of tasks. For time-stepping loops of small operations, whose cost is the host's
// launches (CUDA.jl's and PyTorch's CUDA graphs, JAX's jit). The body may queue device work only:
// what waits for the host (to_host, reductions to the host, collectives, synchronize) throws a
// named error. docs/semantics.md, "Captured loops", gives the rules (what the body may do, the
// lifetime of the arrays it uses).
#pragma once
#include <backend/runtime/runtime.hpp>
#include <tessera/error.hpp>

#include <concepts>
#include <utility>

namespace tessera {

/// The recorded work of a capture (move-only). replay() runs it again; destroying it waits for
/// its replays and frees what the body allocated.
class CapturedGraph {
 public:
  CapturedGraph() = default;
  explicit CapturedGraph(detail::rt::capture_session* s) : s_(s) {}
  CapturedGraph(CapturedGraph&& o) noexcept : s_(std::exchange(o.s_, nullptr)) {}
  CapturedGraph& operator=(CapturedGraph&& o) noexcept {
    if (this != &o) {
      detail::rt::release_capture(s_);
      s_ = std::exchange(o.s_, nullptr);
    }
    return *this;
  }
  CapturedGraph(const CapturedGraph&) = delete;
  CapturedGraph& operator=(const CapturedGraph&) = delete;
  ~CapturedGraph() { detail::rt::release_capture(s_); }

  /// Runs the recorded work once (queued: like any operation, it does not wait for the devices).
  void replay() {
    if (s_ == nullptr) throw invalid_argument("tessera: replay() of an empty CapturedGraph (moved from or default)");
    detail::rt::replay(s_);
  }
  /// replay() n times.
  void replay(int n) {
    for (int i = 0; i < n; ++i) replay();
  }
  bool empty() const { return s_ == nullptr; }

 private:
  detail::rt::capture_session* s_ = nullptr;
};

/// capture(body): records the device work of body() (see the header comment).
template <class F>
  requires std::invocable<F&>
CapturedGraph capture(F&& body) {
  // First each GPU's stream on its own (a replay is then one launch per GPU, no cross-device
  // wait); a body that moves data between GPUs is recorded again over all of them at once.
  detail::rt::capture_session* s = detail::rt::begin_capture(false);
  try {
    body();
  } catch (...) {
    detail::rt::abort_capture(s);
    throw;
  }
  if (detail::rt::capture_needs_joint(s)) {
    detail::rt::abort_capture(s);
    s = detail::rt::begin_capture(true);
    try {
      body();
    } catch (...) {
      detail::rt::abort_capture(s);
      throw;
    }
  }
  try {
    detail::rt::end_capture(s);
  } catch (...) {
    detail::rt::release_capture(s);
    throw;
  }
  return CapturedGraph(s);
}

}  // namespace tessera
