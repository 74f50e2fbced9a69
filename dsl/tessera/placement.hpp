// SPDX-License-Identifier: Apache-2.0
// Tessera: where an array's shards live: shard(dim), replicate(), on(device).
#pragma once
#include <tessera/config.hpp>
#include <tessera/device.hpp>
#include <tessera/error.hpp>

#include <string>
#include <utility>

namespace tessera {

// A placement request given at construction. `devices` empty means the default device set.
struct Placement {
  enum class kind_t { default_shard, shard, replicate, single };
  kind_t kind = kind_t::default_shard;
  int dim = -1;
  DeviceSet devices{};
};

// Splits `dim` into contiguous balanced blocks, one per device (sizes differ by at most one).
inline Placement shard(int dim, DeviceSet devs = {}) {
  return {Placement::kind_t::shard, dim, std::move(devs)};
}
// One full copy per device.
inline Placement replicate(DeviceSet devs = {}) {
  return {Placement::kind_t::replicate, -1, std::move(devs)};
}
// The whole array on one device.
inline Placement on(Device d) { return {Placement::kind_t::single, -1, DeviceSet{d}}; }

namespace detail {

// Block `i` of `n` elements split over `parts` devices: the first n % parts blocks get one more.
inline std::pair<index_t, index_t> balanced_block(index_t n, int parts, int i) {
  const index_t base = n / parts, rem = n % parts;
  const index_t lo = i * base + (i < rem ? i : rem);
  return {lo, lo + base + (i < rem ? 1 : 0)};
}

inline std::string device_list(const DeviceSet& ds) {
  std::string s = "[";
  for (std::size_t i = 0; i < ds.size(); ++i) s += (i ? ", " : "") + ds[i].name();
  return s + "]";
}

}  // namespace detail
}  // namespace tessera
