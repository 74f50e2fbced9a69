// SPDX-License-Identifier: Apache-2.0
// Tessera: collectives on arrays (MPI / NCCL vocabulary): allreduce, broadcast_from, allgather and
// reduce_scatter. They move data between the devices of one array explicitly, which the
// elementwise layer never does. GPUs go through NCCL, host devices through in-process copies
// (backend/comm); this header only plans which buffers take part and rearranges blocks with
// ordinary Tessera assignments, so it makes no CUDA call.
//
// Ordering: an array's pending kernels are queued on each device's stream and the collective is
// queued on the same streams, so it sees their results and the next expression sees its own; the
// host does not wait (host devices finish before returning).
#pragma once
#include <tessera/assign.hpp>

#include <backend/comm/comm.hpp>

#include <memory>
#include <string>
#include <type_traits>
#include <vector>

namespace tessera {

// The reduction of allreduce and reduce_scatter. On bool arrays sum and max are a logical or,
// prod and min a logical and.
enum class reduce_op { sum, prod, max, min };

namespace detail {

// bool is one byte holding 0 or 1: or is max and and is min, which keep it 0 or 1 (a wrapping
// byte sum would not).
template <class T>
comm::op comm_op(reduce_op o) {
  constexpr bool logical = std::is_same_v<T, bool>;
  switch (o) {
    case reduce_op::sum: return logical ? comm::op::max : comm::op::sum;
    case reduce_op::prod: return logical ? comm::op::min : comm::op::prod;
    case reduce_op::max: return comm::op::max;
    case reduce_op::min: return comm::op::min;
  }
  throw invalid_argument("tessera: unknown reduce_op " + std::to_string(static_cast<int>(o)) +
                         "; expected reduce_op::sum, prod, max or min");
}

template <class T, int N>
std::vector<int> device_ids(const Layout<T, N>& l) {
  std::vector<int> ids;
  ids.reserve(l.parts.size());
  for (auto& p : l.parts) ids.push_back(p.device.id());
  return ids;
}

// A replicated array, or one living on one device (the one-device case of replication).
template <class T, int N>
void require_replicated(const Layout<T, N>& l, const char* what, const char* fix) {
  if (l.replicated || l.parts.size() == 1) return;
  throw placement_mismatch(std::string("tessera::placement_mismatch: ") + what +
                           " needs a replicated array (one full copy per device, each holding that device's "
                           "values), found " +
                           shape_string<N>(l.shape) + ", " + describe_placement(l) + ". " + fix);
}

// The buffers of the layouts a collective reads or writes: the collective makes them resident on
// their owners first (comm.hpp), as execute() does for a task's.
template <class T, int N, class... L>
rt::buffer_list buffers_of_layouts(const Layout<T, N>& l, const L&... more) {
  rt::buffer_list uses;
  for (auto& p : l.parts) uses.add(p.buf.get());
  ((void)[&] {
    for (auto& p : more.parts) uses.add(p.buf.get());
  }(), ...);
  return uses;
}

// The arguments of an in-place collective over every part of a layout (made resident first).
struct in_place_args {
  std::vector<int> ids;
  std::vector<const void*> send;
  std::vector<void*> recv;
  rt::buffer_list uses;
};
template <class T, int N>
in_place_args in_place_buffers(const Layout<T, N>& l) {
  in_place_args a{device_ids(l), {}, {}, buffers_of_layouts(l)};
  for (auto& p : l.parts) {
    a.send.push_back(p.ptr);
    a.recv.push_back(p.ptr);
  }
  return a;
}

inline std::string device_name_or_id(Device d) {
  try {
    return d.name();
  } catch (const error&) {
    return "device id " + std::to_string(d.id());
  }
}

// A layout built by hand over existing buffers (blocks of temporaries or of a result), to move
// blocks with an ordinary assignment.
template <class T, int N>
std::shared_ptr<Layout<T, N>> blank_layout(const Shape<N>& shape, int shard_dim, memory mem) {
  auto l = std::make_shared<Layout<T, N>>();
  l->shape = shape;
  l->shard_dim = shard_dim;
  l->mem = mem;
  return l;
}

template <class T, int N>
void add_part(Layout<T, N>& l, Device d, std::shared_ptr<rt::buffer> buf, T* ptr, const Shape<N>& origin,
              const Shape<N>& extent, const Shape<N>& stride) {
  Part<T, N> p;
  p.device = d;
  p.buf = std::move(buf);
  p.ptr = ptr;
  p.origin = origin;
  p.extent = extent;
  p.stride = stride;
  l.parts.push_back(std::move(p));
}

// One scratch buffer of `count` elements on each device (device memory: never touched by the host).
template <class T>
std::vector<std::shared_ptr<rt::buffer>> scratch_buffers(const std::vector<int>& ids, index_t count) {
  for (int id : ids) rt::check_free(id, static_cast<std::size_t>(count) * sizeof(T));
  std::vector<std::shared_ptr<rt::buffer>> out;
  for (int id : ids) out.push_back(std::make_shared<rt::buffer>(id, static_cast<std::size_t>(count) * sizeof(T),
                                                                memory::device));
  return out;
}

// allgather of an array sharded along d over n >= 2 devices into `out` (replicated, same devices).
template <class T, int N>
void gather_blocks(const Layout<T, N>& l, const Layout<T, N>& out, const std::vector<int>& ids) {
  const std::size_t n = ids.size();
  const auto uses = buffers_of_layouts(l, out);
  // Block q holds indices [o_q, o_q + b_q) of dimension d: a contiguous run of inner * b_q * outer
  // elements. Concatenated in rank order the blocks are in the column-major order of the whole
  // array only when no dimension after d is longer than 1 (outer == 1).
  const int d = l.shard_dim;
  index_t inner = 1, outer = 1;
  for (int k = 0; k < d; ++k) inner *= l.shape[k];
  for (int k = d + 1; k < N; ++k) outer *= l.shape[k];
  std::vector<index_t> offset(n), elems(n);
  bool equal = true;
  for (std::size_t q = 0; q < n; ++q) {
    const auto& p = l.parts[q];
    const index_t expected = q ? l.parts[q - 1].origin[d] + l.parts[q - 1].extent[d] : 0;
    if (p.origin[d] != expected || (!p.empty() && !p.contiguous()))
      throw error("tessera: internal error: allgather expects contiguous blocks in rank order, found " +
                  describe_placement(l));
    offset[q] = inner * p.origin[d] * outer;
    elems[q] = inner * p.extent[d] * outer;
    equal = equal && p.extent[d] == l.parts[0].extent[d];
  }
  // Gather straight into the result when the blocks land in order, else into scratch buffers
  // (blocks one after another), rearranged below.
  const bool in_order = outer == 1;
  std::vector<std::shared_ptr<rt::buffer>> scratch;
  if (!in_order) scratch = scratch_buffers<T>(ids, volume<N>(l.shape));
  std::vector<T*> target(n);
  for (std::size_t r = 0; r < n; ++r) target[r] = in_order ? out.parts[r].ptr : static_cast<T*>(scratch[r]->ptr);
  std::vector<const void*> send(n);
  std::vector<void*> recv(n);
  if (equal) {
    for (std::size_t r = 0; r < n; ++r) {
      send[r] = l.parts[r].ptr;
      recv[r] = target[r];
    }
    comm::allgather(ids.data(), static_cast<int>(n), send.data(), recv.data(),
                    static_cast<std::size_t>(elems[0]) * sizeof(T), &uses);
  } else {
    // Uneven blocks: NCCL's allgather moves equal blocks only, so each block is broadcast from its
    // owner into its place (the bytes of an allgather, no padding).
    for (std::size_t q = 0; q < n; ++q) {
      if (elems[q] == 0) continue;
      for (std::size_t r = 0; r < n; ++r) {
        recv[r] = target[r] + offset[q];
        send[r] = r == q ? static_cast<const void*>(l.parts[q].ptr) : recv[r];
      }
      comm::broadcast(ids.data(), static_cast<int>(n), static_cast<int>(q), send.data(), recv.data(),
                      static_cast<std::size_t>(elems[q]) * sizeof(T), &uses);
    }
  }
  if (!in_order) {
    // One assignment copies every block of scratch buffer r into its box of replica r (n x n
    // shards, each queued on its device's stream after the gather).
    auto dst = blank_layout<T, N>(l.shape, d, l.mem);
    auto src = blank_layout<T, N>(l.shape, d, l.mem);
    const Shape<N> full_stride = column_major_strides<N>(l.shape);
    for (std::size_t r = 0; r < n; ++r) {
      const auto& o = out.parts[r];
      for (std::size_t q = 0; q < n; ++q) {
        const auto& p = l.parts[q];
        if (p.empty()) continue;
        add_part(*dst, o.device, o.buf, o.ptr + p.origin[d] * full_stride[d], p.origin, p.extent, full_stride);
        add_part(*src, o.device, scratch[r], static_cast<T*>(scratch[r]->ptr) + offset[q], p.origin, p.extent,
                 column_major_strides<N>(p.extent));
      }
    }
    assign_node(*dst, ArrayLeaf<T, N>{std::shared_ptr<const Layout<T, N>>(std::move(src))}, par);
  }
  // The scratch buffers die here: their blocks go back to the memory cache, reused only after
  // the work queued on them (stream order, backend/runtime/pool.cpp).
}

// reduce_scatter of a replicated array into `out` (sharded along N - 1 over the same devices).
template <class T, int N>
void scatter_blocks(const Layout<T, N>& l, const Layout<T, N>& out, const std::vector<int>& ids, comm::op o) {
  const std::size_t n = ids.size();
  const auto uses = buffers_of_layouts(l, out);
  // Block r of the result holds indices [o_r, o_r + b_r) of the last dimension: a contiguous run of
  // inner * b_r elements at offset inner * o_r of every replica.
  index_t inner = 1, widest = 0;
  for (int k = 0; k < N - 1; ++k) inner *= l.shape[k];
  bool equal = true;
  for (auto& p : out.parts) {
    widest = p.extent[N - 1] > widest ? p.extent[N - 1] : widest;
    equal = equal && p.extent[N - 1] == out.parts[0].extent[N - 1];
  }
  std::vector<const void*> send(n);
  std::vector<void*> recv(n);
  if (equal) {
    for (std::size_t r = 0; r < n; ++r) {
      send[r] = l.parts[r].ptr;
      recv[r] = out.parts[r].ptr;
    }
    comm::reduce_scatter(ids.data(), static_cast<int>(n), send.data(), recv.data(),
                         static_cast<std::size_t>(inner * widest), comm::dtype_of<T>(), o, &uses);
    return;
  }
  // Uneven blocks: NCCL scatters equal blocks only. Each replica is copied into n slots of the
  // widest block's size (the narrower blocks padded with zeros), the slots are reduce-scattered,
  // and the narrower ranks' results are copied out of their slot. In a virtual shape whose last
  // dimension is n * widest, slot q covers [q * widest, (q + 1) * widest).
  const index_t slot = inner * widest;
  Shape<N> vshape = l.shape;
  vshape[N - 1] = static_cast<index_t>(n) * widest;
  const Shape<N> vstride = column_major_strides<N>(vshape);  // equal to the replicas' strides
  auto packed = scratch_buffers<T>(ids, slot * static_cast<index_t>(n));
  auto pack_dst = blank_layout<T, N>(vshape, N - 1, l.mem);
  auto pack_src = blank_layout<T, N>(vshape, N - 1, l.mem);
  auto pad = blank_layout<T, N>(vshape, N - 1, l.mem);
  for (std::size_t r = 0; r < n; ++r) {
    const auto& rep = l.parts[r];
    T* base = static_cast<T*>(packed[r]->ptr);
    for (std::size_t q = 0; q < n; ++q) {
      const index_t b = out.parts[q].extent[N - 1], first = static_cast<index_t>(q) * widest;
      Shape<N> origin{}, extent = l.shape;
      origin[N - 1] = first;
      extent[N - 1] = b;
      if (b > 0) {
        add_part(*pack_dst, rep.device, packed[r], base + first * inner, origin, extent, vstride);
        add_part(*pack_src, rep.device, rep.buf, rep.ptr + out.parts[q].origin[N - 1] * inner, origin, extent, vstride);
      }
      if (b < widest) {
        origin[N - 1] = first + b;
        extent[N - 1] = widest - b;
        add_part(*pad, rep.device, packed[r], base + (first + b) * inner, origin, extent, vstride);
      }
    }
  }
  assign_node(*pack_dst, ArrayLeaf<T, N>{std::shared_ptr<const Layout<T, N>>(std::move(pack_src))}, par);
  assign_node(*pad, Scalar<T>{T(0)}, par);
  // Full-width ranks receive straight into the result, narrower ones into a scratch slot.
  std::vector<std::shared_ptr<rt::buffer>> narrow(n);
  auto unpack_dst = blank_layout<T, N>(l.shape, N - 1, l.mem);
  auto unpack_src = blank_layout<T, N>(l.shape, N - 1, l.mem);
  for (std::size_t r = 0; r < n; ++r) {
    const auto& blk = out.parts[r];
    send[r] = packed[r]->ptr;
    if (blk.extent[N - 1] == widest) {
      recv[r] = blk.ptr;
      continue;
    }
    narrow[r] = std::make_shared<rt::buffer>(ids[r], static_cast<std::size_t>(slot) * sizeof(T), memory::device);
    recv[r] = narrow[r]->ptr;
    if (blk.empty()) continue;
    add_part(*unpack_dst, blk.device, blk.buf, blk.ptr, blk.origin, blk.extent, blk.stride);
    add_part(*unpack_src, blk.device, narrow[r], static_cast<T*>(narrow[r]->ptr), blk.origin, blk.extent,
             column_major_strides<N>(blk.extent));
  }
  comm::reduce_scatter(ids.data(), static_cast<int>(n), send.data(), recv.data(), static_cast<std::size_t>(slot),
                       comm::dtype_of<T>(), o, &uses);
  if (!unpack_dst->parts.empty())
    assign_node(*unpack_dst, ArrayLeaf<T, N>{std::shared_ptr<const Layout<T, N>>(std::move(unpack_src))}, par);
  // The scratch buffers die here: their blocks go back to the memory cache, reused only after
  // the work queued on them (stream order, backend/runtime/pool.cpp).
}

}  // namespace detail

/// allreduce(x, op): x is replicated over its devices, each replica holding that device's partial
/// values; afterwards every replica holds the elementwise `op` over all replicas (MPI_Allreduce,
/// in place). An array on one device is left as it is. Throws placement_mismatch for a sharded
/// array, leaving it intact.
template <class T, int N>
void allreduce(Array<T, N>& x, reduce_op op = reduce_op::sum) {
  const auto& l = x.layout();
  detail::require_replicated(l, "allreduce(x)",
                             "Fix: create the partials with replicate(devices) (each device writing its own "
                             "replica), or use allgather(x) to replicate a sharded array.");
  const detail::comm::op o = detail::comm_op<T>(op);
  const index_t count = detail::volume<N>(l.shape);
  if (count == 0 || l.parts.size() == 1) return;  // one device: the op over one replica
  const auto b = detail::in_place_buffers(l);
  detail::comm::allreduce(b.ids.data(), static_cast<int>(b.ids.size()), b.send.data(), b.recv.data(),
                          static_cast<std::size_t>(count), detail::comm::dtype_of<T>(), o, &b.uses);
}

/// broadcast_from(x, root): x is replicated; root's replica is copied into every other replica
/// (MPI_Bcast, in place). Throws placement_mismatch for a sharded array and invalid_argument when
/// `root` is not one of x's devices, leaving x intact. (Not `broadcast`: that is the elementwise
/// broadcast(f, xs...).)
template <class T, int N>
void broadcast_from(Array<T, N>& x, Device root) {
  const auto& l = x.layout();
  detail::require_replicated(l, "broadcast_from(x, root)",
                             "Fix: create it with replicate(devices), or use allgather(x) to replicate a sharded "
                             "array.");
  int rank = -1;
  for (std::size_t r = 0; r < l.parts.size(); ++r)
    if (l.parts[r].device == root) rank = static_cast<int>(r);
  if (rank < 0) {
    throw invalid_argument("tessera: broadcast_from(x, " + detail::device_name_or_id(root) +
                           "): the root is not one of x's devices; x (" + detail::shape_string<N>(l.shape) + ") is " +
                           detail::describe_placement(l) + ". Pass one of them as the root.");
  }
  const index_t count = detail::volume<N>(l.shape);
  if (count == 0 || l.parts.size() == 1) return;
  const auto b = detail::in_place_buffers(l);
  detail::comm::broadcast(b.ids.data(), static_cast<int>(b.ids.size()), rank, b.send.data(), b.recv.data(),
                          static_cast<std::size_t>(count) * sizeof(T), &b.uses);
}

/// allgather(x): a new array replicated over x's devices holding x's values (MPI_Allgather). x
/// may be sharded along any dimension, with uneven blocks, or live on one device; a replicated x
/// is simply copied. The result has x's memory kind.
template <class T, int N>
Array<T, N> allgather(const Array<T, N>& x) {
  using namespace detail;
  const auto& l = x.layout();
  if (l.replicated) return Array<T, N>(x);  // every replica already holds every value
  const DeviceSet devs = l.devices();
  const int n = static_cast<int>(devs.size());
  std::shared_ptr<const Layout<T, N>> out = std::make_shared<const Layout<T, N>>(
      allocate_layout<T, N>(geometry_from_placement<N>(l.shape, replicate(devs)), l.mem));
  const index_t total = volume<N>(l.shape);
  if (total == 0) return Array<T, N>(out);
  const std::vector<int> ids = device_ids(l);
  if (n == 1 || N == 0) {  // one device (a 0-d array is never sharded)
    const void* send = l.parts[0].ptr;
    void* recv = out->parts[0].ptr;
    const auto uses = buffers_of_layouts(l, *out);
    comm::allgather(ids.data(), 1, &send, &recv, static_cast<std::size_t>(total) * sizeof(T), &uses);
    return Array<T, N>(out);
  }
  if constexpr (N > 0) gather_blocks<T, N>(l, *out, ids);
  return Array<T, N>(out);
}

/// reduce_scatter(x, op): x is replicated, each replica holding that device's partial values; the
/// result is a new array sharded along its last dimension over x's devices (balanced blocks, as
/// shard(N - 1, devices)) whose elements are the `op` over all replicas (MPI_Reduce_scatter). A
/// 0-d array gives a replicated result. Throws placement_mismatch for a sharded x.
template <class T, int N>
Array<T, N> reduce_scatter(const Array<T, N>& x, reduce_op op = reduce_op::sum) {
  using namespace detail;
  const auto& l = x.layout();
  require_replicated(l, "reduce_scatter(x)",
                     "Fix: create the partials with replicate(devices) (each device writing its own replica); a "
                     "sharded array needs no reduce_scatter.");
  if constexpr (N == 0) {
    Array<T, N> out(x);
    allreduce(out, op);
    return out;
  } else {
    const comm::op o = comm_op<T>(op);  // checked before anything is allocated or moved
    const DeviceSet devs = l.devices();
    std::shared_ptr<const Layout<T, N>> out = std::make_shared<const Layout<T, N>>(
        allocate_layout<T, N>(geometry_from_placement<N>(l.shape, shard(N - 1, devs)), l.mem));
    const index_t total = volume<N>(l.shape);
    if (total == 0) return Array<T, N>(out);
    const std::vector<int> ids = device_ids(l);
    scatter_blocks<T, N>(l, *out, ids, o);
    return Array<T, N>(out);
  }
}

}  // namespace tessera
