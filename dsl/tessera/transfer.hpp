// SPDX-License-Identifier: Apache-2.0
// Tessera: data in and out of arrays. Host transfers go through the runtime's pinned staging
// buffers; each part of a layout is one pitched copy (full along every dimension but the shard
// dimension, so its rows are contiguous runs of the column-major host array).
#pragma once
#include <tessera/assign.hpp>

#include <span>
#include <string>
#include <vector>

namespace tessera::detail {

// Rows of one part inside the column-major host array of the whole shape: `height` runs of
// `width` elements, `host_pitch` apart in the host array and `part_pitch` apart in the part (more
// than `width` when the part's storage holds halo cells along a shard dimension other than the
// last).
struct PartRows {
  std::size_t host_offset, width, height, host_pitch, part_pitch;  // in elements
};

template <class T, int N>
PartRows part_rows(const Layout<T, N>& l, const Part<T, N>& p) {
  const int d = l.shard_dim;
  if (d < 0) {
    const auto n = static_cast<std::size_t>(volume<N>(p.extent));
    return {0, n, 1, n, n};
  }
  index_t inner = 1, outer = 1;
  for (int k = 0; k < d; ++k) inner *= l.shape[k];
  for (int k = d + 1; k < N; ++k) outer *= l.shape[k];
  const index_t width = inner * p.extent[d];
  return {static_cast<std::size_t>(p.origin[d] * inner), static_cast<std::size_t>(width),
          static_cast<std::size_t>(outer), static_cast<std::size_t>(inner * l.shape[d]),
          static_cast<std::size_t>(d + 1 < N ? p.stride[d + 1] : width)};
}

// Whether a part is stored as part_rows describes: column-major, each row contiguous, rows
// evenly spaced (every allocated part is; views may not be).
template <class T, int N>
bool stored_as_rows(const Layout<T, N>& l, const Part<T, N>& p) {
  if (p.empty()) return true;
  const int d = l.shard_dim;
  if (d < 0) return p.contiguous();
  index_t acc = 1;
  for (int k = 0; k < N; ++k) {
    if (p.extent[k] != 1 && p.stride[k] != acc) return false;
    acc = k == d && d + 1 < N ? p.stride[d + 1] : acc * p.extent[k];
  }
  return true;
}

template <class T, int N>
bool all_parts_contiguous(const Layout<T, N>& l) {
  for (auto& p : l.parts) {
    if (!stored_as_rows(l, p)) return false;
  }
  return true;
}

template <class T, int N>
void layout_to_host(const Layout<T, N>& l, T* host) {
  if (!all_parts_contiguous(l)) {
    auto tmp = clone_layout(l);  // a strided view: gather it on its devices first
    layout_to_host(*tmp, host);
    return;
  }
  // One call for all parts: across processes it is one exchange, not one per part.
  std::vector<rt::host_region> regions;
  for (auto& p : l.parts) {
    if (p.empty()) continue;
    const PartRows r = part_rows(l, p);
    regions.push_back({.device = p.device.id(),
                       .dst = host + r.host_offset,
                       .dst_pitch = r.host_pitch * sizeof(T),
                       .src = p.ptr,
                       .src_pitch = r.part_pitch * sizeof(T),
                       .width = r.width * sizeof(T),
                       .height = r.height});
    if (l.replicated) break;  // every replica holds the same values
  }
  rt::copy_regions_to_host(regions.data(), regions.size());
}

template <class T, int N>
void layout_from_host(const Layout<T, N>& l, const T* host) {
  for (auto& p : l.parts) {
    if (p.empty()) continue;
    const PartRows r = part_rows(l, p);
    rt::copy_from_host(p.device.id(), p.ptr, r.part_pitch * sizeof(T), host + r.host_offset, r.host_pitch * sizeof(T),
                       r.width * sizeof(T), r.height);
  }
}

template <class T, int N>
T read_element(const Layout<T, N>& l, const Shape<N>& idx) {
  for (int k = 0; k < N; ++k) {
    if (idx[k] < 0 || idx[k] >= l.shape[k]) {
      throw out_of_bounds("tessera: at() index " + std::to_string(idx[k]) + " in dimension " + std::to_string(k) +
                          " is outside [0, " + std::to_string(l.shape[k]) + ")");
    }
  }
  for (auto& p : l.parts) {
    bool inside = !p.empty();
    index_t off = 0;
    for (int k = 0; k < N && inside; ++k) {
      inside = p.origin[k] <= idx[k] && idx[k] < p.origin[k] + p.extent[k];
      off += (idx[k] - p.origin[k]) * p.stride[k];
    }
    if (!inside) continue;
    T v{};
    rt::copy_to_host(p.device.id(), &v, sizeof(T), p.ptr + off, sizeof(T), sizeof(T), 1);
    return v;
  }
  throw error("tessera: internal error: no part holds the element");
}

}  // namespace tessera::detail

namespace tessera {

// to_host(a): the elements in column-major order (waits for the devices that hold them).
template <expression A>
  requires detail::is_array_like<std::remove_cvref_t<A>>::value
auto to_host(const A& a) {
  using T = typename std::remove_cvref_t<A>::value_type;
  std::vector<T> out(static_cast<std::size_t>(a.length()));
  if (a.has_storage() && !out.empty()) {
    if constexpr (std::is_same_v<T, bool>) {
      // std::vector<bool> is packed: stage through bytes.
      std::vector<unsigned char> bytes(out.size());
      detail::layout_to_host(a.layout(), reinterpret_cast<bool*>(bytes.data()));
      for (std::size_t i = 0; i < out.size(); ++i) out[i] = bytes[i] != 0;
    } else {
      detail::layout_to_host(a.layout(), out.data());
    }
  }
  return out;
}

// from_host(values, shape, placement): an array holding `values` (column-major).
template <element_type T, std::size_t N>
Array<T, static_cast<int>(N)> from_host(std::span<const T> values, const std::array<index_t, N>& shape,
                                        const Placement& p = {}, memory m = memory::unified) {
  constexpr int R = static_cast<int>(N);
  const index_t n = detail::volume<R>(shape);
  if (static_cast<index_t>(values.size()) != n) {
    throw invalid_argument("tessera: from_host got " + std::to_string(values.size()) + " values for shape " +
                           detail::shape_string<R>(shape) + ", which holds " + std::to_string(n));
  }
  auto l = std::make_shared<const detail::Layout<T, R>>(
      detail::allocate_layout<T, R>(detail::geometry_from_placement<R>(shape, p), m));
  // Halo cells included: they get the values of the cells they mirror.
  detail::layout_from_host(detail::has_halo_cells(*l) ? detail::including_halo(*l) : *l, values.data());
  return Array<T, R>(std::move(l));
}
template <element_type T, std::size_t N>
Array<T, static_cast<int>(N)> from_host(std::span<const T> values, const index_t (&shape)[N], const Placement& p = {},
                                        memory m = memory::unified) {
  std::array<index_t, N> s;
  for (std::size_t k = 0; k < N; ++k) s[k] = shape[k];
  return from_host<T, N>(values, s, p, m);
}
template <element_type T, std::size_t N>
Array<T, static_cast<int>(N)> from_host(const std::vector<T>& values, const std::array<index_t, N>& shape,
                                        const Placement& p = {}, memory m = memory::unified) {
  if constexpr (std::is_same_v<T, bool>) {
    std::vector<unsigned char> bytes(values.begin(), values.end());  // std::vector<bool> is packed
    return from_host<T, N>(std::span<const bool>(reinterpret_cast<const bool*>(bytes.data()), bytes.size()), shape, p,
                           m);
  } else {
    return from_host<T, N>(std::span<const T>(values), shape, p, m);
  }
}
template <element_type T, std::size_t N>
Array<T, static_cast<int>(N)> from_host(const std::vector<T>& values, const index_t (&shape)[N],
                                        const Placement& p = {}, memory m = memory::unified) {
  std::array<index_t, N> s;
  for (std::size_t k = 0; k < N; ++k) s[k] = shape[k];
  return from_host<T, N>(values, s, p, m);
}

}  // namespace tessera
