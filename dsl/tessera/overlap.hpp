// SPDX-License-Identifier: Apache-2.0
// Tessera: hide_communication(u, body), ImplicitGlobalGrid.jl's @hide_communication. The body's
// assignments are recorded (planned, not run), then replayed twice: first over the cells of each
// shard that its neighbours keep as halo cells (the w cells at each inner face along the shard
// dimension), then update_halo(u)'s copies start, both on the GPUs' side streams, and the
// assignments are replayed over the remaining cells on the main streams while those run. The result equals
//   body(); update_halo(u);
// with the exchange hidden behind the interior's work. See docs/semantics.md, "Halos and stencils".
#pragma once
#include <tessera/halo.hpp>

#include <concepts>
#include <string>
#include <utility>
#include <vector>

namespace tessera {
namespace detail {

// The body's assignments, each checked as it is recorded: the replays compute the boundary cells
// of every destination before the interior, so no assignment may read what the body writes (it
// would read half-updated values), nor `u` (its halo and boundary cells move while the interior
// pass runs), nor its own destination at another offset; and each array is written by one
// assignment (two that write one cell might then run in the other order: the passes are cut
// along each destination's own shard faces).
class overlap_recorder final : public assignment_recorder {
 public:
  explicit overlap_recorder(std::vector<const rt::buffer*> exchanged) : exchanged_(std::move(exchanged)) {}
  void record(const std::vector<const rt::buffer*>& writes, const std::vector<const rt::buffer*>& reads,
              bool shifted_self_read, replay_fn replay) override {
    check_recorded(written_, exchanged_, writes, reads, shifted_self_read, work.size() + 1);
    work.push_back(std::move(replay));
  }
  std::vector<replay_fn> work;

 private:
  std::vector<const rt::buffer*> exchanged_, written_;
};

// Sets the recorder for the body, and puts everything back however the body ends.
class recording_scope {
 public:
  explicit recording_scope(assignment_recorder& r) {
    active_recorder = &r;
    rt::set_recording(true);
  }
  ~recording_scope() {
    active_recorder = nullptr;
    rt::set_recording(false);
  }
  recording_scope(const recording_scope&) = delete;
  recording_scope& operator=(const recording_scope&) = delete;
};

// Whether the exchange of u can be hidden: a halo along the shard dimension only (a periodic
// dimension's ghost cells would need the interior first), at most one part per device.
template <class T, int N>
bool overlappable(const Layout<T, N>& l) {
  if (l.halo.width == 0 || l.shard_dim < 0 || !has_halo_cells(l)) return false;
  for (int k = 0; k < N; ++k)
    if (l.halo.along(k) != boundary::fixed) return false;
  for (std::size_t i = 0; i < l.parts.size(); ++i)
    for (std::size_t j = 0; j < i; ++j)
      if (l.parts[i].device == l.parts[j].device) return false;
  return true;
}

}  // namespace detail

/// hide_communication(u, body): runs `body` (a function of no arguments that assigns to arrays and
/// views) and then update_halo(u), with the halo exchange hidden behind the body's work: the
/// body's assignments are computed first over the cells that u's neighbours need, then the
/// exchange starts (on the GPUs' copy streams), then the rest is computed while it runs.
/// The body may only assign (reductions, copies and host reads inside it are refused), each array
/// once; it must not read u, nor read an array that it writes (each is computed in two passes),
/// nor read its destination at another offset. A halo along a periodic dimension, or no halo, runs the body
/// and then update_halo(u) one after the other. ImplicitGlobalGrid.jl's @hide_communication.
template <class T, int N, class F>
  requires std::invocable<F&>
void hide_communication(const Array<T, N>& u, F&& body) {
  const detail::Layout<T, N>& l = u.layout();
  if (detail::active_recorder != nullptr) {
    throw invalid_argument("tessera: hide_communication(u, body) inside the body of another hide_communication");
  }
  if (!detail::overlappable(l)) {
    body();
    update_halo(u);
    return;
  }
  const auto mine = detail::buffers_of(l);
  detail::overlap_recorder rec(mine);
  {
    detail::recording_scope scope(rec);
    body();
  }
  const detail::box_filter boundary{true, l.halo.width, &mine}, interior{false, l.halo.width, &mine};
  detail::rt::copy_ticket ticket;
  // On GPUs the boundary pass and the copies go on the side streams (highest priority), behind
  // the work queued so far, and the interior pass on the main streams beside them: the interior
  // does not wait for the boundary kernels, which then cost no time of their own. Both passes
  // read what the step before wrote, which the fork orders; they write disjoint cells. The
  // sources' waits for the copies that read them go on the side streams too, before the interior
  // is queued: each main stream then waits once, at the join, for an event of its own GPU. On
  // the main streams each wait for another GPU's event cost about 3.5 us between two interior
  // kernels even when long complete (4 H200s, a CUPTI timeline: 7-11 us between the interiors
  // of two sweeps with them there, 1.5-3 us without, 1.4-1.6 us between two plain sweeps).
  // Without side streams (inside a capture) those waits would hold the interior back: they
  // come after it.
  detail::rt::side_stream_scope side;
  for (auto& w : rec.work) w(&boundary);
  detail::copy_into(detail::halo_cells(l), l, &ticket);
  if (detail::rt::on_side_stream()) detail::rt::finish_copies(ticket);
  side.end();
  for (auto& w : rec.work) w(&interior);
  detail::rt::finish_copies(ticket);  // nothing left to join if done above
  side.join();
}

}  // namespace tessera
