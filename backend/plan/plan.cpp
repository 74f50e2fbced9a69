// SPDX-License-Identifier: Apache-2.0
// Tessera: the planner's rank- and type-independent code (plan.hpp), compiled once here.
#include <backend/plan/plan.hpp>
#include <backend/runtime/runtime.hpp>

#include <tessera/error.hpp>
#include <tessera/placement.hpp>

#include <limits>
#include <string>
#include <vector>

namespace tessera::detail {

std::string shape_text(const index_t* s, int n) {
  if (n == 0) return "0-dimensional";
  std::string out;
  for (int k = 0; k < n; ++k) {
    if (k) out += "×";
    out += std::to_string(s[k]);
  }
  if (n == 1) out += "-element";
  return out;
}

std::string box_string(const index_t* lo, const index_t* ext, int n) {
  std::string s;
  for (int k = 0; k < n; ++k) {
    s += (k ? "×[" : "[") + std::to_string(lo[k]) + "," + std::to_string(lo[k] + ext[k]) + ")";
  }
  return n ? s : "[]";
}

std::string device_list(const DeviceSet& ds) {
  std::string s = "[";
  for (std::size_t i = 0; i < ds.size(); ++i) s += (i ? ", " : "") + ds[i].name();
  return s + "]";
}

void throw_broadcast_mismatch(const index_t* acc, int acc_rank, const index_t* b, int b_rank, int k, index_t x,
                              index_t y) {
  throw dimension_mismatch("tessera::dimension_mismatch: cannot broadcast shapes " + shape_text(acc, acc_rank) +
                           " and " + shape_text(b, b_rank) + ": dimension " + std::to_string(k) + " has sizes " +
                           std::to_string(x) + " and " + std::to_string(y) + " (each must equal the other or be 1)");
}

void throw_assign_mismatch(const index_t* dst, int dst_rank, const index_t* src, int src_rank, int k) {
  const index_t d = k < dst_rank ? dst[k] : 1, s = k < src_rank ? src[k] : 1;
  throw dimension_mismatch("tessera::dimension_mismatch: cannot assign an expression of shape " +
                           shape_text(src, src_rank) + " to an array of shape " + shape_text(dst, dst_rank) +
                           ": dimension " + std::to_string(k) + " has size " + std::to_string(s) +
                           " in the expression and " + std::to_string(d) + " in the destination (it must be equal or 1)");
}

void throw_operand_mismatch(int position, bool argument, const lazy_text& operand, Device device,
                            const index_t* lo, const index_t* len, int m, const lazy_text& what) {
  throw placement_mismatch(
      "tessera::placement_mismatch: " + std::string(argument ? "argument #" : "operand #") + std::to_string(position) +
      " (" + operand.str() + ") has no part on " + device.name() + " holding indices " + box_string(lo, len, m) +
      ", which the destination (" + what.str() + ") computes there. Operands must share the destination's shard "
      "dimension and block boundaries, be replicated, or be replicated with size 1 along the shard dimension; nothing "
      "is moved between devices implicitly. Fix: create the operand with the destination's placement, or replicate() "
      "it; for a stencil, create it with shard(dim, halo(width)) and call update_halo.");
}

placed_boxes place(const index_t* shape, int n, const Placement& p) {
  for (int k = 0; k < n; ++k) {
    if (shape[k] < 0) {
      throw invalid_argument("tessera: array extents must be >= 0, found " + std::to_string(shape[k]) +
                             " in dimension " + std::to_string(k));
    }
  }
  // An element count beyond index_t would wrap the byte count and slip past the memory guard.
  bool has_zero = false;
  for (int k = 0; k < n; ++k) has_zero = has_zero || shape[k] == 0;
  if (!has_zero) {
    index_t count = 1;
    for (int k = 0; k < n; ++k) {
      if (count > std::numeric_limits<index_t>::max() / shape[k]) {
        throw invalid_argument("tessera: the shape " + shape_text(shape, n) +
                               " has more elements than a 64-bit index can count");
      }
      count *= shape[k];
    }
  }
  placed_boxes g;
  using K = Placement::kind_t;
  K kind = p.kind;
  int dim = p.dim;
  if (kind == K::default_shard && p.devices.empty() && rt::scoped_device() >= 0) {
    // Inside a DeviceScope a new array lives on the scope's device (PyTorch, CuPy, CUDA.jl).
    kind = K::single;
    g.devices = DeviceSet{Device(rt::scoped_device())};
  } else {
    g.devices = p.devices.empty() ? devices() : p.devices;
  }
  const DeviceSet& devs = g.devices;
  if (devs.empty()) throw invalid_argument("tessera: a placement needs at least one device, found none");
  if (kind == K::default_shard) {
    if (n == 0) {
      kind = K::replicate;
    } else {
      kind = K::shard;
      dim = n - 1;
    }
  }
  if (kind == K::shard) {
    if (dim < 0 || dim >= n) {
      throw invalid_argument("tessera: shard(" + std::to_string(dim) + ") on an array of rank " + std::to_string(n) +
                             ": the dimension must be in [0, " + std::to_string(n) + ")");
    }
    g.shard_dim = dim;
    for (int i = 0; i < static_cast<int>(devs.size()); ++i) {
      auto [lo, hi] = balanced_block(shape[dim], static_cast<int>(devs.size()), i);
      g.lo.push_back(lo);
      g.hi.push_back(hi);
    }
  } else {
    if (kind == K::single && devs.size() != 1) {
      throw invalid_argument("tessera: on(device) takes one device, found " + std::to_string(devs.size()));
    }
    g.replicated = kind == K::replicate;
  }
  if (p.halo.width != 0 || !p.halo.bounds.empty()) {
    std::vector<index_t> ext(g.lo.size());
    for (std::size_t i = 0; i < ext.size(); ++i) ext[i] = g.hi[i] - g.lo[i];
    check_halo(shape, n, g.shard_dim, devs.data(), g.lo.data(), ext.data(), g.lo.size(), p.halo);
  }
  return g;
}

void check_halo(const index_t* shape, int n, int shard_dim, const Device* devices, const index_t* lo,
                const index_t* ext, std::size_t boxes, const Halo& h) {
  const std::string what = "tessera: halo(" + std::to_string(h.width) + ")";
  if (h.width < 0) throw invalid_argument(what + ": the width must be >= 0");
  if (h.bounds.size() > 1 && h.bounds.size() != static_cast<std::size_t>(n)) {
    throw invalid_argument(what + " lists " + std::to_string(h.bounds.size()) + " boundaries for an array of rank " +
                           std::to_string(n) + ": give one for all dimensions or one per dimension");
  }
  for (int k = 0; k < n; ++k) {
    if (h.along(k) == boundary::periodic && shape[k] > 0 && shape[k] < 3 * h.width) {
      throw invalid_argument(what + " periodic along dim " + std::to_string(k) + " needs at least " +
                             std::to_string(3 * h.width) + " elements there (ghost cells on both sides and the "
                             "interior cells they copy), found " + std::to_string(shape[k]));
    }
  }
  if (shard_dim < 0 || boxes < 2 || shape[shard_dim] == 0) return;
  for (std::size_t i = 0; i < boxes; ++i) {
    if (ext[i] < h.width) {
      throw invalid_argument(what + " is wider than block " + std::to_string(i) + " [" + std::to_string(lo[i]) + "," +
                             std::to_string(lo[i] + ext[i]) + ") on " + devices[i].name() + " along dim " +
                             std::to_string(shard_dim) + " (" + std::to_string(ext[i]) +
                             " elements): shard over fewer devices or use a narrower halo");
    }
  }
}

std::string placement_text(bool replicated, int shard_dim, const Device* devices, const index_t* lo,
                           const index_t* hi, std::size_t n) {
  if (replicated) return "replicated over " + device_list(DeviceSet(devices, devices + n));
  if (shard_dim >= 0 && n > 1) {
    std::string s = "sharded along dim " + std::to_string(shard_dim) + " over " +
                    device_list(DeviceSet(devices, devices + n)) + " with blocks";
    for (std::size_t i = 0; i < n; ++i) s += " [" + std::to_string(lo[i]) + "," + std::to_string(hi[i]) + ")";
    return s;
  }
  return n == 0 ? std::string("on no device (empty)") : "on " + devices[0].name();
}

void check_recorded(std::vector<const rt::buffer*>& written, const std::vector<const rt::buffer*>& exchanged,
                    const std::vector<const rt::buffer*>& writes, const std::vector<const rt::buffer*>& reads,
                    bool shifted_self_read, std::size_t index) {
  auto has = [](const std::vector<const rt::buffer*>& v, const rt::buffer* b) {
    for (const rt::buffer* x : v)
      if (x == b) return true;
    return false;
  };
  const std::string where = "tessera: hide_communication(u, body): assignment #" + std::to_string(index);
  for (const rt::buffer* b : writes) {
    if (has(written, b)) {
      throw invalid_argument(where + " writes an array that an earlier assignment of the body writes; write each "
                                     "array once in the body (set fixed boundary cells before it)");
    }
  }
  for (const rt::buffer* r : reads) {
    if (has(exchanged, r)) {
      throw invalid_argument(where + " reads u, whose halo and boundary cells are copied while the body's interior "
                                     "pass runs: read the previous array (a Jacobi step writes v from u)");
    }
    if (has(written, r)) {
      throw invalid_argument(where + " reads an array that an earlier assignment of the body writes; the body is "
                                     "replayed boundary cells first, so it would read values not computed yet");
    }
  }
  if (shifted_self_read) {
    throw invalid_argument(where + " reads its destination at another offset; the body is replayed boundary cells "
                                   "first, so it would read updated values: assign into another array");
  }
  written.insert(written.end(), writes.begin(), writes.end());
}

}  // namespace tessera::detail
