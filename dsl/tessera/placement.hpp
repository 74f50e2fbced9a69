// SPDX-License-Identifier: Apache-2.0
// Tessera: where an array's shards live: shard(dim), replicate(), on(device).
#pragma once
#include <tessera/config.hpp>
#include <tessera/device.hpp>
#include <tessera/error.hpp>

#include <initializer_list>
#include <string>
#include <utility>
#include <vector>

namespace tessera {

// What update_halo writes into the outermost `width` cells of a dimension: `fixed` leaves them to
// the user (Dirichlet values, part of the array); `periodic` copies the opposite interior cells
// into them (ImplicitGlobalGrid.jl's periodic grids).
enum class boundary { fixed, periodic };

// A halo request: `width` cells of each neighbouring shard that a shard can read after
// update_halo, and the boundary of each dimension (one entry for all, or one per dimension).
// See docs/semantics.md, "Halos and stencils".
struct Halo {
  index_t width = 0;
  std::vector<boundary> bounds{};
  boundary along(int dim) const {
    if (bounds.empty()) return boundary::fixed;
    return bounds.size() == 1 ? bounds[0] : bounds[static_cast<std::size_t>(dim)];
  }
};
inline Halo halo(index_t width, boundary b = boundary::fixed) { return {width, {b}}; }
inline Halo halo(index_t width, std::initializer_list<boundary> per_dim) { return {width, per_dim}; }

// A placement request given at construction. `devices` empty means the default device set.
struct Placement {
  enum class kind_t { default_shard, shard, replicate, single };
  kind_t kind = kind_t::default_shard;
  int dim = -1;
  DeviceSet devices{};
  Halo halo{};
};

// Splits `dim` into contiguous balanced blocks, one per device (sizes differ by at most one).
inline Placement shard(int dim, DeviceSet devs = {}) {
  return {Placement::kind_t::shard, dim, std::move(devs)};
}
// The same, each shard also holding `h.width` cells of each neighbour along `dim` (update_halo).
inline Placement shard(int dim, Halo h, DeviceSet devs = {}) {
  return {Placement::kind_t::shard, dim, std::move(devs), std::move(h)};
}
// One full copy per device.
inline Placement replicate(DeviceSet devs = {}) {
  return {Placement::kind_t::replicate, -1, std::move(devs)};
}
// The whole array on one device.
inline Placement on(Device d) { return {Placement::kind_t::single, -1, DeviceSet{d}}; }
// The whole array on one device, with periodic boundaries kept by update_halo.
inline Placement on(Device d, Halo h) { return {Placement::kind_t::single, -1, DeviceSet{d}, std::move(h)}; }

namespace detail {

// Block `i` of `n` elements split over `parts` devices: the first n % parts blocks get one more.
inline std::pair<index_t, index_t> balanced_block(index_t n, int parts, int i) {
  const index_t base = n / parts, rem = n % parts;
  const index_t lo = i * base + (i < rem ? i : rem);
  return {lo, lo + base + (i < rem ? 1 : 0)};
}

}  // namespace detail
}  // namespace tessera
