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
  if (l.replicated) return "replicated over " + device_list(l.devices());
  if (l.shard_dim >= 0 && l.parts.size() > 1) {
    std::string s = "sharded along dim " + std::to_string(l.shard_dim) + " over " + device_list(l.devices()) +
                    " with blocks";
    for (auto& p : l.parts) {
      s += " [" + std::to_string(p.origin[l.shard_dim]) + "," +
           std::to_string(p.origin[l.shard_dim] + p.extent[l.shard_dim]) + ")";
    }
    return s;
  }
  return l.parts.empty() ? std::string("on no device (empty)") : "on " + l.parts[0].device.name();
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

// A halo must fit: every block at least as wide as the halo (a shard sends its neighbour
// `width` cells it owns), and a periodic dimension at least 3 * width long (ghost cells on both
// sides and the interior cells they copy).
template <int N>
void check_halo(const Geometry<N>& g, const Halo& h) {
  const std::string what = "tessera: halo(" + std::to_string(h.width) + ")";
  if (h.width < 0) throw invalid_argument(what + ": the width must be >= 0");
  if (h.bounds.size() > 1 && h.bounds.size() != static_cast<std::size_t>(N)) {
    throw invalid_argument(what + " lists " + std::to_string(h.bounds.size()) + " boundaries for an array of rank " +
                           std::to_string(N) + ": give one for all dimensions or one per dimension");
  }
  for (int k = 0; k < N; ++k) {
    if (h.along(k) == boundary::periodic && g.shape[k] > 0 && g.shape[k] < 3 * h.width) {
      throw invalid_argument(what + " periodic along dim " + std::to_string(k) + " needs at least " +
                             std::to_string(3 * h.width) + " elements there (ghost cells on both sides and the "
                             "interior cells they copy), found " + std::to_string(g.shape[k]));
    }
  }
  if (g.shard_dim < 0 || g.boxes.size() < 2 || g.shape[g.shard_dim] == 0) return;
  for (std::size_t i = 0; i < g.boxes.size(); ++i) {
    const auto& b = g.boxes[i];
    if (b.extent[g.shard_dim] < h.width) {
      throw invalid_argument(what + " is wider than block " + std::to_string(i) + " [" +
                             std::to_string(b.origin[g.shard_dim]) + "," +
                             std::to_string(b.origin[g.shard_dim] + b.extent[g.shard_dim]) + ") on " +
                             b.device.name() + " along dim " + std::to_string(g.shard_dim) + " (" +
                             std::to_string(b.extent[g.shard_dim]) + " elements): shard over fewer devices or use "
                             "a narrower halo");
    }
  }
}

template <int N>
Geometry<N> geometry_from_placement(const Shape<N>& shape, const Placement& p) {
  for (int k = 0; k < N; ++k) {
    if (shape[k] < 0) {
      throw invalid_argument("tessera: array extents must be >= 0, found " + std::to_string(shape[k]) +
                             " in dimension " + std::to_string(k));
    }
  }
  // An element count beyond index_t would wrap the byte count and slip past the memory guard.
  bool has_zero = false;
  for (int k = 0; k < N; ++k) has_zero = has_zero || shape[k] == 0;
  if (!has_zero) {
    index_t count = 1;
    for (int k = 0; k < N; ++k) {
      if (count > std::numeric_limits<index_t>::max() / shape[k]) {
        throw invalid_argument("tessera: the shape " + shape_string<N>(shape) +
                               " has more elements than a 64-bit index can count");
      }
      count *= shape[k];
    }
  }
  Geometry<N> g{shape, -1, false, {}};
  using K = Placement::kind_t;
  K kind = p.kind;
  int dim = p.dim;
  DeviceSet devs;
  if (kind == K::default_shard && p.devices.empty() && rt::scoped_device() >= 0) {
    // Inside a DeviceScope a new array lives on the scope's device (PyTorch, CuPy, CUDA.jl).
    kind = K::single;
    devs = DeviceSet{Device(rt::scoped_device())};
  } else {
    devs = p.devices.empty() ? devices() : p.devices;
  }
  if (devs.empty()) throw invalid_argument("tessera: a placement needs at least one device, found none");
  if (kind == K::default_shard) {
    if constexpr (N == 0) {
      kind = K::replicate;
    } else {
      kind = K::shard;
      dim = N - 1;
    }
  }
  if (kind == K::shard) {
    if (dim < 0 || dim >= N) {
      throw invalid_argument("tessera: shard(" + std::to_string(dim) + ") on an array of rank " +
                             std::to_string(N) + ": the dimension must be in [0, " + std::to_string(N) + ")");
    }
    g.shard_dim = dim;
    for (int i = 0; i < static_cast<int>(devs.size()); ++i) {
      auto [lo, hi] = balanced_block(shape[dim], static_cast<int>(devs.size()), i);
      typename Geometry<N>::Box b{devs[i], {}, shape};
      b.origin[dim] = lo;
      b.extent[dim] = hi - lo;
      g.boxes.push_back(b);
    }
  } else {
    if (kind == K::single && devs.size() != 1) {
      throw invalid_argument("tessera: on(device) takes one device, found " + std::to_string(devs.size()));
    }
    g.replicated = kind == K::replicate;
    for (auto d : devs) g.boxes.push_back({d, {}, shape});
  }
  if (p.halo.width != 0 || !p.halo.bounds.empty()) check_halo<N>(g, p.halo);
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
