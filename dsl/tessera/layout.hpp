// SPDX-License-Identifier: Apache-2.0
// Tessera: the distributed layout shared by arrays and views. A layout is the global shape plus
// one part per shard: a strided box of the global index space living on one device. Arrays own
// contiguous parts; views reuse the parts' buffers with offsets and strides.
#pragma once
#include <backend/runtime/runtime.hpp>
#include <tessera/placement.hpp>
#include <tessera/shape.hpp>

#include <limits>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace tessera::detail {

template <class T, int N>
struct Part {
  Device device;
  std::shared_ptr<rt::buffer> buf;  // keeps the storage alive; null for an empty part
  T* ptr = nullptr;                 // element at `origin`
  Shape<N> extent{};                // size of the box
  Shape<N> stride{};                // element strides in the buffer
  Shape<N> origin{};                // global index of the box's first element
  // Cells readable beyond the box on each side (a halo, see update_halo): they belong to other
  // parts and are written only by the halo exchange. Zero unless the array has a halo.
  Shape<N> halo_lo{}, halo_hi{};

  bool empty() const { return volume<N>(extent) == 0; }
  bool contiguous() const {
    index_t acc = 1;
    for (int k = 0; k < N; ++k) {
      if (extent[k] != 1 && stride[k] != acc) return false;
      acc *= extent[k];
    }
    return true;
  }
};

// The layout of an array or a view. Invariant: each part is full along every dimension except
// `shard_dim` (which is -1 when the object is replicated or lives on one device).
template <class T, int N>
struct Layout {
  Shape<N> shape{};
  std::vector<Part<T, N>> parts;
  int shard_dim = -1;
  bool replicated = false;
  memory mem = memory::unified;
  Halo halo{};  // an Array's halo request (width 0: none); views keep only the parts' halo cells

  DeviceSet devices() const {
    DeviceSet d;
    for (auto& p : parts) d.push_back(p.device);
    return d;
  }
};

template <class T, int N>
std::string describe_placement(const Layout<T, N>& l) {
  std::vector<Device> devs;
  std::vector<index_t> lo, hi;
  const int d = l.shard_dim;
  for (auto& p : l.parts) {
    devs.push_back(p.device);
    lo.push_back(d >= 0 ? p.origin[d] : 0);
    hi.push_back(d >= 0 ? p.origin[d] + p.extent[d] : 0);
  }
  return placement_text(l.replicated, d, devs.data(), lo.data(), hi.data(), devs.size());
}

// "3×4, sharded along dim 1 over [...] with blocks ...": a Layout<T, N> behind `l`, for lazy_text.
template <class T, int N>
std::string describe_layout(const void* l) {
  const auto& d = *static_cast<const Layout<T, N>*>(l);
  return shape_string<N>(d.shape) + ", " + describe_placement(d);
}

// The devices and boxes of a layout, without storage: what a new array needs to mirror another.
template <int N>
struct Geometry {
  Shape<N> shape{};
  int shard_dim = -1;
  bool replicated = false;
  struct Box {
    Device device;
    Shape<N> origin{}, extent{};
  };
  std::vector<Box> boxes;
  Halo halo{};
};

template <class T, int N>
Geometry<N> geometry_of(const Layout<T, N>& l) {
  Geometry<N> g{l.shape, l.shard_dim, l.replicated, {}, l.halo};
  for (auto& p : l.parts) g.boxes.push_back({p.device, p.origin, p.extent});
  return g;
}

// The boxes of a new array of `shape` placed by `p` (plan.cpp: the checks and the balanced blocks).
template <int N>
Geometry<N> geometry_from_placement(const Shape<N>& shape, const Placement& p) {
  const placed_boxes pb = place(shape.data(), N, p);
  Geometry<N> g{shape, pb.shard_dim, pb.replicated, {}};
  g.boxes.reserve(pb.devices.size());
  for (std::size_t i = 0; i < pb.devices.size(); ++i) {
    typename Geometry<N>::Box b{pb.devices[i], {}, shape};
    if (pb.shard_dim >= 0) {
      b.origin[pb.shard_dim] = pb.lo[i];
      b.extent[pb.shard_dim] = pb.hi[i] - pb.lo[i];
    }
    g.boxes.push_back(b);
  }
  g.halo = p.halo;
  return g;
}

// The cells of box `i` of `g` that its storage holds beyond the box on each side: the halo width
// along the shard dimension between neighbouring blocks, nothing elsewhere.
template <int N>
std::pair<index_t, index_t> storage_halo(const Geometry<N>& g, std::size_t i) {
  if (g.halo.width == 0 || g.shard_dim < 0 || g.boxes.size() < 2) return {0, 0};
  return {i > 0 ? g.halo.width : 0, i + 1 < g.boxes.size() ? g.halo.width : 0};
}

// Allocates contiguous column-major storage for every box. The free-memory guard runs for every
// device before anything is allocated, so a refused request leaves nothing behind.
template <class T, int N>
Layout<T, N> allocate_layout(const Geometry<N>& g, memory mem) {
  // Each box's storage: the box plus its halo cells along the shard dimension.
  auto storage = [&](std::size_t i) {
    Shape<N> ext = g.boxes[i].extent;
    auto [lo, hi] = storage_halo<N>(g, i);
    if (lo + hi > 0) ext[g.shard_dim] += lo + hi;
    return ext;
  };
  for (std::size_t i = 0; i < g.boxes.size(); ++i) {
    const auto n = static_cast<std::size_t>(volume<N>(g.boxes[i].extent) > 0 ? volume<N>(storage(i)) : 0);
    const std::size_t max_n = std::numeric_limits<std::size_t>::max() / sizeof(T);
    if (n > 0) {
      rt::check_free(g.boxes[i].device.id(), n > max_n ? std::numeric_limits<std::size_t>::max() : n * sizeof(T));
    }
  }
  Layout<T, N> l;
  l.shape = g.shape;
  l.shard_dim = g.shard_dim;
  l.replicated = g.replicated;
  l.mem = mem;
  l.halo = g.halo;
  l.parts.reserve(g.boxes.size());
  for (std::size_t i = 0; i < g.boxes.size(); ++i) {
    const auto& b = g.boxes[i];
    const Shape<N> ext = storage(i);
    Part<T, N> p;
    p.device = b.device;
    p.extent = b.extent;
    p.origin = b.origin;
    p.stride = column_major_strides<N>(ext);
    if (volume<N>(b.extent) > 0) {
      auto [lo, hi] = storage_halo<N>(g, i);
      if (lo + hi > 0) {
        p.halo_lo[g.shard_dim] = lo;
        p.halo_hi[g.shard_dim] = hi;
      }
      p.buf = std::make_shared<rt::buffer>(b.device.id(), static_cast<std::size_t>(volume<N>(ext)) * sizeof(T), mem);
      p.ptr = static_cast<T*>(p.buf->ptr) + (g.shard_dim >= 0 ? lo * p.stride[g.shard_dim] : 0);
    }
    l.parts.push_back(std::move(p));
  }
  return l;
}

// Sorts the part indices `idx` by the parts' origins along `d` (a reversed view's parts run
// backwards). Parts are few: an insertion sort, so that programs need no <algorithm> for it.
template <class T, int N>
void order_along(std::vector<std::size_t>& idx, const Layout<T, N>& l, int d) {
  for (std::size_t i = 1; i < idx.size(); ++i)
    for (std::size_t j = i; j > 0 && l.parts[idx[j]].origin[d] < l.parts[idx[j - 1]].origin[d]; --j)
      std::swap(idx[j], idx[j - 1]);
}

// Whether any part of `l` holds halo cells.
template <class T, int N>
bool has_halo_cells(const Layout<T, N>& l) {
  for (auto& p : l.parts)
    for (int k = 0; k < N; ++k)
      if (p.halo_lo[k] + p.halo_hi[k] > 0) return true;
  return false;
}

// `l` with each part's box grown over its halo cells. Writing anything defined by global index
// through it (a fill, a generator, host values, another array with the same halos) sets the halo
// cells to the values their owners get, without an exchange.
template <class T, int N>
Layout<T, N> including_halo(const Layout<T, N>& l) {
  Layout<T, N> o = l;
  for (auto& p : o.parts) {
    for (int k = 0; k < N; ++k) {
      if (p.halo_lo[k] + p.halo_hi[k] == 0) continue;
      p.ptr -= p.halo_lo[k] * p.stride[k];
      p.origin[k] -= p.halo_lo[k];
      p.extent[k] += p.halo_lo[k] + p.halo_hi[k];
      p.halo_lo[k] = p.halo_hi[k] = 0;
    }
  }
  o.halo = {};
  return o;
}

}  // namespace tessera::detail
