// SPDX-License-Identifier: Apache-2.0
// Tessera: sort(v), sortperm(v) and unique(v) of vectors, Julia's names and order. Values become
// integer keys ordered as Julia's isless (scan_task.hpp: NaN last, -0.0 before 0.0). Each shard
// sorts its block on its own device (a stable radix sort on GPUs, CUB's DeviceRadixSort;
// std::stable_sort on host devices); the sorted blocks are then copied to the first device holding
// any (the root), merged there pairwise, in shard order (cub::DeviceMerge on a GPU), and the result
// is copied back out in the input's blocks, so it has the input's placement. The root therefore
// holds the whole vector twice while merging: a distributed (sample) sort would not, and is left for
// later. A replicated input is sorted once, on its first device, and copied to every replica.
#pragma once
#include <tessera/assign.hpp>
#include <tessera/scan_task.hpp>
#include <tessera/transfer.hpp>

#include <backend/execute.hpp>

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace tessera {

/// Options of sort and sortperm: sort(v, {.rev = true}) sorts in descending order (Julia's rev=true:
/// NaN first, equal elements still in their original order).
struct sort_options {
  bool rev = false;
};

namespace detail {

template <class Node>
[[noreturn]] void not_a_vector(const Node& node, const char* what) {
  throw invalid_argument(std::string("tessera: ") + what + "(v) takes a vector (rank 1), found an array of rank " +
                         std::to_string(Node::rank) + " and shape " + shape_string<Node::rank>(node.shape()) +
                         "; take a view such as a(_, j) first");
}

// A vector in one piece on one device: a one-part layout of shape {n}.
template <class T>
std::shared_ptr<const Layout<T, 1>> whole_on(Device d, index_t n, memory mem = memory::device) {
  Geometry<1> g{{n}, -1, false, {{d, {0}, {n}}}};
  return std::make_shared<const Layout<T, 1>>(allocate_layout<T, 1>(g, mem));
}

// The sorted keys (and indices) of a vector, in one piece on the root device.
template <class K>
struct sorted_run {
  std::shared_ptr<const Layout<K, 1>> keys;
  std::shared_ptr<const Layout<std::int64_t, 1>> idx;  // null unless asked for
  Geometry<1> g;                                       // the input's placement
  memory mem = memory::unified;
  Device root;
};

// Merges the runs [starts[r], starts[r + 1]) of src into dst, pairwise, until one is left; returns
// where the result is (src or dst).
template <class K>
int merge_rounds(K* keys[2], std::int64_t* idx[2], std::vector<index_t> starts, Device root, bool desc) {
  int from = 0;
  while (starts.size() > 2) {
    std::vector<Job<MergeTask<K>>> jobs;
    std::vector<index_t> next;
    for (std::size_t r = 0; r + 1 < starts.size(); r += 2) {
      const index_t s0 = starts[r], s1 = starts[r + 1], s2 = r + 2 < starts.size() ? starts[r + 2] : s1;
      next.push_back(s0);
      const bool pi = idx[0] != nullptr;
      jobs.push_back({.task = {.a = keys[from] + s0, .ia = pi ? idx[from] + s0 : nullptr, .na = s1 - s0,
                               .b = keys[from] + s1, .ib = pi ? idx[from] + s1 : nullptr, .nb = s2 - s1,
                               .out = keys[1 - from] + s0, .iout = pi ? idx[1 - from] + s0 : nullptr,
                               .descending = desc},
                      .device = root,
                      .shard = static_cast<int>(r),
                      .n = s2 - s0});
    }
    next.push_back(starts.back());
    execute(jobs);
    starts = std::move(next);
    from = 1 - from;
  }
  return from;
}

template <class K, class Node>
sorted_run<K> sort_to_root(const Node& node, bool with_idx, bool desc) {
  sorted_run<K> out;
  const Shape<1> shape = node.shape();
  out.g = placement_of<1>(node, shape, &out.mem);
  // One run per non-empty block; a replicated input is sorted once, from its first replica.
  Geometry<1> rg = out.g;
  if (rg.replicated) {
    rg.replicated = false;
    rg.boxes.resize(1);
  }
  out.root = rg.boxes[0].device;
  if (shape[0] == 0) return out;
  auto keys = std::make_shared<const Layout<K, 1>>(allocate_layout<K, 1>(rg, memory::device));
  auto sorted = std::make_shared<const Layout<K, 1>>(allocate_layout<K, 1>(rg, memory::device));
  assign_node(*keys, make_node(to_sort_key{}, node), par);
  std::shared_ptr<const Layout<std::int64_t, 1>> idx, sidx;
  if (with_idx) {
    idx = std::make_shared<const Layout<std::int64_t, 1>>(allocate_layout<std::int64_t, 1>(rg, memory::device));
    sidx = std::make_shared<const Layout<std::int64_t, 1>>(allocate_layout<std::int64_t, 1>(rg, memory::device));
    assign_node(*idx, IndexLeaf<1>{shape}, par);
  }
  std::vector<Job<SortTask<K>>> jobs;
  std::vector<std::size_t> live;
  for (std::size_t s = 0; s < rg.boxes.size(); ++s) {
    const auto& p = keys->parts[s];
    if (p.empty()) continue;
    live.push_back(s);
    jobs.push_back({.task = {.keys_in = p.ptr, .keys_out = sorted->parts[s].ptr,
                             .idx_in = with_idx ? idx->parts[s].ptr : nullptr,
                             .idx_out = with_idx ? sidx->parts[s].ptr : nullptr, .n = volume<1>(p.extent),
                             .descending = desc},
                    .device = p.device,
                    .shard = static_cast<int>(s),
                    .n = volume<1>(p.extent)});
    jobs.back().uses.add(p.buf.get());
  }
  execute(jobs);
  out.root = rg.boxes[live[0]].device;
  if (live.size() == 1) {  // already whole (relabeled as a one-part layout of the root)
    const auto& p = sorted->parts[live[0]];
    Layout<K, 1> k{.shape = shape, .parts = {p}, .mem = memory::device};
    out.keys = std::make_shared<const Layout<K, 1>>(std::move(k));
    if (with_idx) {
      Layout<std::int64_t, 1> i{.shape = shape, .parts = {sidx->parts[live[0]]}, .mem = memory::device};
      out.idx = std::make_shared<const Layout<std::int64_t, 1>>(std::move(i));
    }
    return out;
  }
  // Gather the runs on the root, one after another in shard order, then merge them there.
  const index_t n = shape[0];
  std::shared_ptr<const Layout<K, 1>> kb[2] = {whole_on<K>(out.root, n), whole_on<K>(out.root, n)};
  std::shared_ptr<const Layout<std::int64_t, 1>> ib[2];
  if (with_idx) ib[0] = whole_on<std::int64_t>(out.root, n), ib[1] = whole_on<std::int64_t>(out.root, n);
  // In the order of their indices (a reversed view's blocks run backwards).
  order_along(live, *sorted, 0);
  std::vector<index_t> starts;
  for (std::size_t s : live) {
    const auto& p = sorted->parts[s];
    const index_t at = p.origin[0], len = p.extent[0];
    starts.push_back(at);
    rt::copy_between(out.root.id(), kb[0]->parts[0].ptr + at, p.device.id(), p.ptr, static_cast<std::size_t>(len) * sizeof(K));
    if (with_idx) {
      rt::copy_between(out.root.id(), ib[0]->parts[0].ptr + at, p.device.id(), sidx->parts[s].ptr,
                       static_cast<std::size_t>(len) * sizeof(std::int64_t));
    }
  }
  starts.push_back(n);
  K* kp[2] = {kb[0]->parts[0].ptr, kb[1]->parts[0].ptr};
  std::int64_t* ip[2] = {with_idx ? ib[0]->parts[0].ptr : nullptr, with_idx ? ib[1]->parts[0].ptr : nullptr};
  const int at = merge_rounds<K>(kp, ip, starts, out.root, desc);
  out.keys = kb[at];
  if (with_idx) out.idx = ib[at];
  return out;
}

// A new array with geometry g (memory kind mem) holding `whole`, a one-part vector on `root`:
// every part copies its block (a replica: all of it) from there.
template <class T>
Array<T, 1> spread_from(const std::shared_ptr<const Layout<T, 1>>& whole, const Geometry<1>& g, memory mem) {
  auto out = std::make_shared<const Layout<T, 1>>(allocate_layout<T, 1>(g, mem));
  const Part<T, 1>& w = whole->parts[0];
  for (const auto& q : out->parts) {
    if (q.empty()) continue;
    rt::copy_between(q.device.id(), q.ptr, w.device.id(), w.ptr + q.origin[0],
                     static_cast<std::size_t>(q.extent[0]) * sizeof(T), q.buf.get(), w.buf.get());
  }
  return Array<T, 1>(std::move(out));
}

// The values of the sorted keys `k` (one part on its root) laid out as g.
template <class T, class K>
Array<T, 1> decode_keys(const std::shared_ptr<const Layout<K, 1>>& k, const Geometry<1>& g, memory mem) {
  const Device root = k->parts[0].device;
  const index_t n = k->shape[0];
  if (g.boxes.size() == 1 && g.boxes[0].device == root) {  // decode straight into the result
    auto out = std::make_shared<const Layout<T, 1>>(allocate_layout<T, 1>(g, mem));
    assign_node(*out, make_node(from_sort_key<T>{}, ArrayLeaf<K, 1>{k}), par);
    return Array<T, 1>(std::move(out));
  }
  auto values = whole_on<T>(root, n);
  assign_node(*values, make_node(from_sort_key<T>{}, ArrayLeaf<K, 1>{k}), par);
  return spread_from<T>(values, g, mem);
}

template <class Node>
auto sort_node(const Node& node, sort_options o, const char* what) -> Array<typename Node::value_type, 1> {
  using T = typename Node::value_type;
  if constexpr (Node::rank != 1) {
    not_a_vector(node, what);
  } else {
    auto s = sort_to_root<sort_key_t<T>>(node, false, o.rev);
    if (!s.keys) return Array<T, 1>(std::make_shared<const Layout<T, 1>>(allocate_layout<T, 1>(s.g, s.mem)));
    return decode_keys<T>(s.keys, s.g, s.mem);
  }
}

}  // namespace detail

/// sort(v[, {.rev = true}]): a new vector with v's values in ascending (descending) order, Julia's
/// isless: -0.0 before 0.0, NaN last (first with rev), every NaN written as the quiet NaN. Stable.
/// The result has v's placement (the same blocks). v is a vector or any rank-1 expression; another
/// rank throws invalid_argument.
template <expression X>
auto sort(X&& v, sort_options o = {}) {
  return detail::sort_node(detail::to_node(std::forward<X>(v)), o, "sort");
}

/// sortperm(v[, {.rev = true}]): the permutation that sorts v, as 0-based global indices
/// (Array<int64_t, 1>, C++ indexing, unlike Julia's 1-based): v[p[0]], v[p[1]], ... is sort(v).
/// Stable: equal values keep their index order. The result has v's placement.
template <expression X>
Array<std::int64_t, 1> sortperm(X&& v, sort_options o = {}) {
  auto node = detail::to_node(std::forward<X>(v));
  using T = typename decltype(node)::value_type;
  if constexpr (decltype(node)::rank != 1) {
    detail::not_a_vector(node, "sortperm");
  } else {
    auto s = detail::sort_to_root<detail::sort_key_t<T>>(node, true, o.rev);
    if (!s.idx) {
      return Array<std::int64_t, 1>(
          std::make_shared<const detail::Layout<std::int64_t, 1>>(detail::allocate_layout<std::int64_t, 1>(s.g, s.mem)));
    }
    return detail::spread_from<std::int64_t>(s.idx, s.g, s.mem);
  }
}

/// unique(v): the distinct values of v in ascending order (Julia's sort(unique(v)), NumPy's
/// np.unique), equal as Julia's isequal: all NaNs are one value (last), -0.0 and 0.0 are two. The
/// length is known only once the devices are done, so the call waits for the root device. The
/// result is sharded in balanced blocks over v's devices when v is sharded, else placed like v.
template <expression X>
auto unique(X&& v) {
  auto node = detail::to_node(std::forward<X>(v));
  using T = typename decltype(node)::value_type;
  using K = detail::sort_key_t<T>;
  using namespace detail;
  if constexpr (decltype(node)::rank != 1) {
    not_a_vector(node, "unique");
  } else {
    auto s = sort_to_root<K>(node, false, false);
    index_t m = 0;
    std::shared_ptr<const Layout<K, 1>> u;
    if (s.keys) {
      const index_t n = s.keys->shape[0];
      auto count = whole_on<std::int64_t>(s.root, 1);
      auto dst = whole_on<K>(s.root, n);
      std::vector<Job<UniqueTask<K>>> jobs{{.task = {.in = s.keys->parts[0].ptr, .out = dst->parts[0].ptr, .n = n,
                                                     .count = count->parts[0].ptr},
                                            .device = s.root,
                                            .shard = 0,
                                            .n = n}};
      execute(jobs);
      m = read_element(*count, Shape<1>{0});
      Layout<K, 1> first_m{.shape = {m}, .parts = {dst->parts[0]}, .mem = memory::device};
      first_m.parts[0].extent = {m};
      u = std::make_shared<const Layout<K, 1>>(std::move(first_m));
    }
    DeviceSet devs;
    for (auto& b : s.g.boxes) devs.push_back(b.device);
    const Placement p = s.g.replicated ? replicate(devs) : (devs.size() == 1 ? on(devs[0]) : shard(0, devs));
    const Geometry<1> g = geometry_from_placement<1>(Shape<1>{m}, p);
    if (!u) return Array<T, 1>(std::make_shared<const Layout<T, 1>>(allocate_layout<T, 1>(g, s.mem)));
    return decode_keys<T>(u, g, s.mem);
  }
}

}  // namespace tessera
