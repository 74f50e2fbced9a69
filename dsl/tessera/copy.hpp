// SPDX-License-Identifier: Apache-2.0
// Tessera: explicit data movement. copy(a, placement[, memory]) makes a new array with a's shape
// and values and the given placement: any placement from any other (one device to another,
// sharded to replicated, shard dim A to shard dim B, uneven blocks, views). For each part of the
// result and each part of `a` (one replica of a replicated `a`, preferring the same device) whose
// boxes overlap, the overlap moves: on one device by an ordinary assignment of views; between
// devices as a contiguous block (packed by an assignment on the source's device where the piece is
// strided, copied by rt::copy_between, unpacked on the destination's device). Nothing else in the
// library moves data between devices.
#pragma once
#include <backend/comm/comm.hpp>
#include <tessera/assign.hpp>

#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace tessera {
namespace detail {

// A layout of one part: `box` (global origin and extent) of `p`, as a view of its storage.
template <class T, int N>
std::shared_ptr<Layout<T, N>> piece_of(const Layout<T, N>& l, const Part<T, N>& p, const Shape<N>& origin,
                                       const Shape<N>& extent) {
  auto out = std::make_shared<Layout<T, N>>();
  out->shape = l.shape;
  out->mem = l.mem;
  Part<T, N> q;
  q.device = p.device;
  q.buf = p.buf;
  index_t off = 0;
  for (int k = 0; k < N; ++k) off += (origin[k] - p.origin[k]) * p.stride[k];
  q.ptr = p.ptr + off;
  q.origin = origin;
  q.extent = extent;
  q.stride = p.stride;
  out->parts.push_back(std::move(q));
  return out;
}

// Whether two layouts share a buffer (then a copy between them may read what it wrote).
template <class T, int N>
bool same_buffers(const Layout<T, N>& a, const Layout<T, N>& b) {
  for (auto& p : a.parts)
    for (auto& q : b.parts)
      if (p.buf && p.buf == q.buf) return true;
  return false;
}

// Contiguous storage for a box on a device, as a one-part layout.
template <class T, int N>
std::shared_ptr<Layout<T, N>> contiguous_piece(const Shape<N>& shape, Device d, const Shape<N>& origin,
                                               const Shape<N>& extent) {
  Geometry<N> g{shape, -1, false, {{d, origin, extent}}};
  return std::make_shared<Layout<T, N>>(allocate_layout<T, N>(g, memory::device));
}

// A piece as rows: `height` runs of `width` contiguous elements, `pitch` elements apart (its dims
// contiguous up to some dimension, then at most one more dimension longer than 1).
struct PieceRows {
  index_t width = 0, height = 0, pitch = 0;
  bool ok = false;
};
template <class T, int N>
PieceRows rows_of(const Part<T, N>& p) {
  index_t acc = 1;
  int k = 0;
  for (; k < N && (p.extent[k] == 1 || p.stride[k] == acc); ++k) acc *= p.extent[k];
  if (k == N) return {acc, 1, acc, true};
  int outer = -1;
  for (int j = k; j < N; ++j) {
    if (p.extent[j] == 1) continue;
    if (outer >= 0) return {};
    outer = j;
  }
  return {acc, p.extent[outer], p.stride[outer], p.stride[outer] >= acc};
}

// The same box as rows on both sides: a contiguous side (one row) is cut into the other side's
// rows (the box's elements lie in the same order in both). False when the rows differ.
inline bool same_rows(PieceRows& a, PieceRows& b) {
  if (!a.ok || !b.ok) return false;
  if (a.height == 1 && b.height > 1 && a.width == b.width * b.height) a = {b.width, b.height, b.width, true};
  if (b.height == 1 && a.height > 1 && b.width == a.width * a.height) b = {a.width, a.height, a.width, true};
  return a.width == b.width && a.height == b.height && a.height > 1;
}

// Moves the values of src's piece (a one-part layout) into dst's piece (same box, maybe another
// device). A copy between devices that needs no packing goes into `batch`, for copy_into to issue
// with the others at once; a pitched piece that stays on its device goes into `local` (copy_into
// decides how it moves: beside the batch, where the runtime copies it, or by a kernel).
template <class T, int N>
void move_piece(const std::shared_ptr<Layout<T, N>>& dst, const std::shared_ptr<Layout<T, N>>& src,
                std::vector<rt::copy_region>& batch, std::vector<rt::copy_region>& local) {
  const Part<T, N>& d = dst->parts[0];
  const Part<T, N>& s = src->parts[0];
  PieceRows dr = rows_of(d), sr = rows_of(s);
  const auto elem = sizeof(T);
  const bool rows = same_rows(dr, sr);
  if (d.device == s.device) {
    // (Within one buffer, a kernel: an assignment checks for overlap, a copy engine would not.)
    if (rows && d.buf != s.buf) {
      local.push_back({d.device.id(), d.ptr, static_cast<std::size_t>(dr.pitch) * elem, s.device.id(), s.ptr,
                       static_cast<std::size_t>(sr.pitch) * elem, static_cast<std::size_t>(dr.width) * elem,
                       static_cast<std::size_t>(dr.height), d.buf.get(), s.buf.get()});
    } else {
      assign_node(*dst, ArrayLeaf<T, N>{src}, par);
    }
    return;
  }
  // Between devices: rows at a pitch on either side (a block of a matrix) in one 2-D copy (across
  // ranks: one message, backend/runtime/copy.cpp); otherwise contiguous blocks, packed and
  // unpacked on their own devices.
  if (rows) {
    batch.push_back({d.device.id(), d.ptr, static_cast<std::size_t>(dr.pitch) * elem, s.device.id(), s.ptr,
                     static_cast<std::size_t>(sr.pitch) * elem, static_cast<std::size_t>(dr.width) * elem,
                     static_cast<std::size_t>(dr.height), d.buf.get(), s.buf.get()});
    return;
  }
  const auto bytes = static_cast<std::size_t>(volume<N>(s.extent)) * sizeof(T);
  if (s.contiguous() && d.contiguous()) {
    batch.push_back({d.device.id(), d.ptr, bytes, s.device.id(), s.ptr, bytes, bytes, 1, d.buf.get(), s.buf.get()});
    return;
  }
  auto packed = s.contiguous() ? src : contiguous_piece<T, N>(src->shape, s.device, s.origin, s.extent);
  if (packed != src) assign_node(*packed, ArrayLeaf<T, N>{src}, par);
  auto landing = d.contiguous() ? dst : contiguous_piece<T, N>(dst->shape, d.device, d.origin, d.extent);
  rt::copy_between(d.device.id(), landing->parts[0].ptr, s.device.id(), packed->parts[0].ptr, bytes,
                   landing->parts[0].buf.get(), packed->parts[0].buf.get());
  if (landing != dst) assign_node(*dst, ArrayLeaf<T, N>{landing}, par);
  // The temporaries die here; their blocks return to the memory cache in stream order.
}

// Writes src's values into dst (same shape, any placements): for every part of dst and every
// overlapping part of src (one replica of a replicated src, the one on the same device when there
// is one), the overlap moves with move_piece. With `async` (hide_communication) the direct copies
// between GPUs are only started, on the copy streams: rt::finish_copies joins them.
template <class T, int N>
void copy_into(const Layout<T, N>& dst, const Layout<T, N>& src, rt::copy_ticket* async = nullptr) {
  std::vector<rt::copy_region> batch, local;
  std::vector<std::pair<std::shared_ptr<Layout<T, N>>, std::shared_ptr<Layout<T, N>>>> local_pieces;
  for (const auto& q : dst.parts) {
    if (q.empty()) continue;
    std::vector<const Part<T, N>*> from;
    if (src.replicated) {
      const Part<T, N>* pick = nullptr;
      for (auto& s : src.parts)
        if (!s.empty() && (!pick || s.device == q.device)) pick = &s;
      if (pick) from.push_back(pick);
    } else {
      for (auto& s : src.parts)
        if (!s.empty()) from.push_back(&s);
    }
    for (const Part<T, N>* s : from) {
      Shape<N> lo{}, ext{};
      bool overlap = true;
      for (int k = 0; k < N && overlap; ++k) {
        const index_t q_hi = q.origin[k] + q.extent[k], s_hi = s->origin[k] + s->extent[k];
        lo[k] = q.origin[k] > s->origin[k] ? q.origin[k] : s->origin[k];
        const index_t hi = q_hi < s_hi ? q_hi : s_hi;
        ext[k] = hi - lo[k];
        overlap = ext[k] > 0;
      }
      if (!overlap) continue;
      auto dp = piece_of<T, N>(dst, q, lo, ext), sp = piece_of<T, N>(src, *s, lo, ext);
      const std::size_t before = local.size();
      move_piece<T, N>(dp, sp, batch, local);
      if (local.size() > before) local_pieces.emplace_back(std::move(dp), std::move(sp));
    }
  }
  // A pitched piece that stays on its GPU rides with copies between GPUs, on the GPU's copy
  // stream beside them (a re-shard's diagonal blocks: 1.81 -> 0.71 ms measured in plain CUDA,
  // docs/performance.md); otherwise a kernel copies it, which is faster than a copy engine when
  // nothing else moves.
  bool peers = false;
  for (const auto& r : batch) peers = peers || r.dst_device != r.src_device;
  if (peers && !async) {
    batch.insert(batch.end(), local.begin(), local.end());
  } else {
    for (auto& [dp, sp] : local_pieces) assign_node(*dp, ArrayLeaf<T, N>{sp}, par);
  }
  // The pieces' destinations are disjoint: the direct copies may run at once (a halo exchange's
  // copies in both directions together) and in any order against the packed ones above.
  if (async) {
    rt::start_copies(batch.data(), batch.size(), *async);
  } else if (!comm::exchange(batch.data(), batch.size())) {  // NCCL, where gather kernels cannot
    rt::copy_between_many(batch.data(), batch.size());
  }
}

// Defined in halo.hpp: refreshes the halo cells between the shards of an array.
template <class T, int N>
void exchange_halo_cells(const Layout<T, N>& l);

}  // namespace detail

/// copy(a, placement[, memory]): a new array with a's values and the given placement (and memory
/// kind, a's by default). See the header comment; docs/semantics.md, "Data movement".
template <class X>
  requires detail::is_array_like<std::remove_cvref_t<X>>::value
auto copy(const X& a, const Placement& placement, memory mem) {
  using V = std::remove_cvref_t<X>;
  using T = typename V::value_type;
  constexpr int N = V::rank;
  using namespace detail;
  const Layout<T, N>& src = a.layout();
  auto out = std::make_shared<const Layout<T, N>>(allocate_layout<T, N>(geometry_from_placement<N>(src.shape, placement), mem));
  copy_into(*out, src);
  if (has_halo_cells(*out)) exchange_halo_cells(*out);
  return Array<T, N>(std::move(out));
}
// Two overloads rather than a std::optional<memory>: <optional> stays out of the umbrella header.
template <class X>
  requires detail::is_array_like<std::remove_cvref_t<X>>::value
auto copy(const X& a, const Placement& placement) {
  return copy(a, placement, a.layout().mem);
}

/// copyto(dst, src): dst's elements take src's values, whatever the two placements (Julia's
/// copyto!, PyTorch's copy_). The one assignment that moves data between devices; shapes must be
/// equal. Halo cells of dst are not refreshed (update_halo does that).
template <class D, class S>
  requires detail::is_array_like<std::remove_cvref_t<D>>::value && detail::is_array_like<std::remove_cvref_t<S>>::value &&
           std::is_same_v<typename std::remove_cvref_t<D>::value_type, typename std::remove_cvref_t<S>::value_type> &&
           (std::remove_cvref_t<D>::rank == std::remove_cvref_t<S>::rank)
void copyto(D&& dst, const S& src) {
  using T = typename std::remove_cvref_t<D>::value_type;
  constexpr int N = std::remove_cvref_t<D>::rank;
  const auto& d = dst.layout();
  const auto& s = src.layout();
  if (d.shape != s.shape) {
    throw invalid_argument("tessera: copyto(dst, src) needs equal shapes, found dst " + detail::shape_string<N>(d.shape) +
                           " and src " + detail::shape_string<N>(s.shape));
  }
  if (detail::same_buffers(d, s)) {
    // Overlapping storage (dst and src views of one array): through a temporary, like an assignment.
    auto tmp = detail::clone_layout<T, N>(s);
    detail::copy_into(d, *tmp);
    return;
  }
  detail::copy_into(d, s);
}

}  // namespace tessera
