// SPDX-License-Identifier: Apache-2.0
// Tessera: the planner's code that depends on no element type and no rank, compiled once into
// tessera_runtime (plan.cpp) rather than in every program's templates: placements resolved to
// boxes, the extent and halo checks, and the text of shapes, boxes and placements in error messages
// (cold paths, but string building is much host code at -O3). The DSL's templates (shape.hpp,
// layout.hpp, instantiate.hpp) are thin wrappers over these. This header includes no CUDA header,
// so dsl/ may include it.
#pragma once
#include <tessera/config.hpp>
#include <tessera/device.hpp>

#include <cstddef>
#include <string>
#include <vector>

namespace tessera {
struct Halo;
struct Placement;
namespace detail::rt {
struct buffer;
}
}  // namespace tessera

namespace tessera::detail {

// Names an object in an error message, made only when an error needs it (string building costs
// more than a launch): text(object), or "the result".
struct lazy_text {
  const void* object = nullptr;
  std::string (*text)(const void*) = nullptr;
  std::string str() const { return text ? text(object) : std::string("the result"); }
};

// "3×4", "5-element", "0-dimensional": a shape of rank n as messages print it.
std::string shape_text(const index_t* s, int n);
// "[0,4)×[2,3)": a box of rank n.
std::string box_string(const index_t* lo, const index_t* ext, int n);
// "[cuda:0, cuda:1]".
std::string device_list(const DeviceSet& ds);

// Throws dimension_mismatch: `acc` (the first acc_rank dims of the operands folded so far) and
// operand `b` differ at dim k (sizes x and y), neither being 1.
[[noreturn]] void throw_broadcast_mismatch(const index_t* acc, int acc_rank, const index_t* b, int b_rank, int k,
                                           index_t x, index_t y);
// Throws dimension_mismatch: an expression of shape `src` cannot be assigned to `dst` (dim k).
[[noreturn]] void throw_assign_mismatch(const index_t* dst, int dst_rank, const index_t* src, int src_rank, int k);

// Throws placement_mismatch: operand #`position` (argument #`position` of a user kernel when
// `argument`), described by `operand`, has no part on `device` holding the box [lo, lo + len) of
// rank m, which the destination (`what`) computes there.
[[noreturn]] void throw_operand_mismatch(int position, bool argument, const lazy_text& operand, Device device,
                                         const index_t* lo, const index_t* len, int m, const lazy_text& what);

// A placement resolved for a shape of rank n: the devices, and per device the block [lo, hi) along
// shard_dim when sharded (every box is whole along the other dims). Checks the extents (>= 0, the
// element count within index_t), the placement (devices, dim) and its halo.
struct placed_boxes {
  int shard_dim = -1;
  bool replicated = false;
  DeviceSet devices;
  std::vector<index_t> lo, hi;  // empty unless sharded
};
placed_boxes place(const index_t* shape, int n, const Placement& p);

// A halo must fit: every block at least as wide as the halo, and a periodic dimension at least
// 3 * width long. Box i lives on devices[i] and spans [lo[i], lo[i] + ext[i]) along shard_dim.
void check_halo(const index_t* shape, int n, int shard_dim, const Device* devices, const index_t* lo,
                const index_t* ext, std::size_t boxes, const Halo& h);

// "replicated over [...]", "sharded along dim d over [...] with blocks [a,b) ...", "on cuda:0", "on
// no device (empty)": parts i < n on devices[i], spanning [lo[i], hi[i]) along shard_dim.
std::string placement_text(bool replicated, int shard_dim, const Device* devices, const index_t* lo,
                           const index_t* hi, std::size_t n);

// hide_communication's checks of its body's assignment #`index` (dsl/tessera/overlap.hpp), which
// writes `writes` and reads `reads`: no array written twice, no read of u (`exchanged`) or of an
// array written before, no read of its own destination at another offset. Then `written` gains
// `writes`.
void check_recorded(std::vector<const rt::buffer*>& written, const std::vector<const rt::buffer*>& exchanged,
                    const std::vector<const rt::buffer*>& writes, const std::vector<const rt::buffer*>& reads,
                    bool shifted_self_read, std::size_t index);

}  // namespace tessera::detail
