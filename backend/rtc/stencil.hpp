// SPDX-License-Identifier: Apache-2.0
// Tessera: stencil kernels generated and compiled at run time (NVRTC), one per expression and
// row-tile plan (make_tile_plan below). The plan is known only on the host, per shard: which
// operands are views of one array a row and an element apart. A kernel compiled ahead of time
// must pick each operand's register at run time, which costs more than the reuse saves (0.79x
// memcpy on Jacobi against 0.835x for the row kernels, docs/performance.md); here each member's row
// and shift are constants of the source, as in the hand-written kernel that reaches 0.974x.
//
// The executor (backend/cuda/stencil_jit.cuh) flattens a shard of a candidate expression into a
// stencil_call (below); everything else is compiled here, once: the plan, the description of the
// kernel, its source, its cache and its launch. The kernel's one parameter is an array of 64-bit
// words (pointers, strides, extents, scalars' bits) in the order stencil_words gives. This header
// includes no CUDA header.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace tessera::detail::rtc {

// One shard of a candidate expression, flattened by the executor (backend/cuda/stencil_jit.cuh):
// the output and every operand (array leaf) by address and strides in elements, the expression
// written out over L<i> and S<i>, and each scalar's C type and bits. Nothing is copied: a launch
// allocates nothing here.
struct stencil_call {
  const char* type = "";              // float or double: the output's and every operand's
  int elem = 0;                       // its size in bytes
  int n = 0;                          // rank
  const std::int64_t* ext = nullptr;  // the box, n extents
  std::int64_t count = 0;             // elements of the box
  std::uintptr_t out = 0;
  const std::int64_t* out_st = nullptr;
  std::size_t operands = 0;
  const std::uintptr_t* op = nullptr;   // operands' addresses
  const std::int64_t* op_st = nullptr;  // operands' strides, n each
  // The expression and its scalars' C types: the executor's one copy per expression type
  // (jit_text), so that calls of one expression point at the same text.
  const std::string* expr = nullptr;
  const std::vector<std::string>* scalar_types = nullptr;
  const std::uint64_t* scalar_bits = nullptr;  // one per scalar type
};

// Which operands are views of one array a row, a plane and an element apart.
struct tile_plan {
  bool valid = false;  // a group of two or more members was found
  int members = 0;
  int k = 0;                       // elements per chunk: 16 bytes' worth, or 1 (make_tile_plan)
  int head = 0;                    // elements before a row's first 16-byte aligned output
  int lo = 0, hi = 0;              // the members' least and greatest dy: rows lo .. U - 1 + hi are loaded
  int zlo = 0, zhi = 0;            // and dz (planes along dim 2; both 0 in a plan of rank 2)
  // Bit 3 (dz + 1) + dy + 1: a member at that dz and dy has s = -1 (left: reads the element before
  // a chunk), or s = 1 (right: the element after).
  int left = 0, right = 0;
  std::vector<int> member, dy, dz, s;  // per operand; dy, dz and s: -1, 0 or 1
  std::uintptr_t anchor = 0;       // address of the anchor's element (0, ..., 0), may lie outside it
  std::vector<std::int64_t> st;    // the anchor's strides, in elements
};
// The plan of a shard (K elements per 16-byte chunk): a member has unit stride along dim 0 and
// exactly the anchor's strides, whose dims 1.. are multiples of K, so that every row of a thread
// keeps one alignment; the output's dims 1.. too. A member lies dy rows (dim 1), dz planes (dim 2,
// rank 3 and more) and s elements from the anchor. Every member element the kernel reads is an
// element of that member, and every chunk it loads lies between two of them (rows lo .. count - 1
// + hi, the member of least dy giving the first, the one of greatest dy the last; the marching
// kernel loads a row of a plane only for a member that reads it), so no byte outside an
// allocation is read.
// scalar: chunks of one element (K = 1: a thread takes one element per row, as the hand-written
// march of bench/support/stencil_probe.cu that reached 0.99x memcpy for the double diffusion).
tile_plan make_tile_plan(const stencil_call& c, bool scalar = false);

struct stencil_desc {
  std::string type;  // the element type of the output and of every operand: float or double
  int k = 0;         // elements per chunk: of 16 bytes, or 1 (tile_plan::k)
  int rows = 4;      // rows along dim 1 per thread
  int n = 0;         // rank of the box
  int head = 0;      // elements before a row's first 16-byte aligned output
  // The expression, C++ over `L<i>` (operand i's element) and `S<i>` (scalar i), e.g.
  // "(S0 * (((L0 + L1) + L2) + L3))"; every operand and scalar keeps its own type, as in the
  // functors of the compiled path.
  std::string expr;
  std::vector<std::string> scalar_types;  // float, double, int or long long
  struct operand {
    int member = 0;  // 1: served from the anchor's rows, with dy, dz and s
    int dy = 0, dz = 0, s = 0;
    // Otherwise: 0 a 16-byte chunk at the output's alignment, 1 two chunks shifted by m, 2 one
    // element broadcast along dim 0, 3 K elements one by one (rows of other alignments).
    int mode = 3, m = 0;
  };
  std::vector<operand> operands;
  int lo = 0, hi = 0, zlo = 0, zhi = 0, left = 0, right = 0;  // as in tile_plan
  bool group = false;                                         // some operand is a member
  // Some member lies in another plane (zlo < 0 or zhi > 0): the kernel marches along dim 2, `planes`
  // output planes per thread, keeping the anchor's rows of the planes z - 1, z and z + 1 in
  // registers (3-D stencils; otherwise each thread takes `rows` rows of one plane).
  bool march = false;
  int planes = 32;
  int warps = 4;  // a marching block's warps, each U rows (4, 8 or 16); a tile kernel's block is 4 warps
  // Marching: chunks before the first whole one whose output lies on a 128-byte line, so that each
  // warp's loads and stores start on a line (lanes before the head idle; on an H200 a hand-written
  // march offset by one element ran at 0.855x memcpy instead of 0.99x); and whether a block takes
  // one tile (grid y and z) rather than striding over them (a grid-stride loop costs the march 8
  // registers).
  int shift = 0;
  bool one_tile = false;
  // Marching with vector chunks: the chunks that straddle the box's first or last element are
  // loaded whole and stored element by element, by the same threads (no kernel for the elements
  // outside whole chunks), where each such chunk holds an element some member or operand reads
  // (partial_ok).
  bool partial = false;
  int threads() const { return 32 * (march ? warps : 4); }
  // A marching kernel of vector chunks that leaves the elements outside whole chunks to a kernel of
  // their own (tessera_stencil_edges, launched after it: stencil_edge_blocks).
  bool edge_kernel() const { return march && k > 1 && !partial; }
  // For tests: a host translation unit instead (extern "C" tessera_stencil_host(const P*, grid x,
  // grid y) runs every thread of the grid in turn, reading the elements beside a chunk from memory
  // rather than from the lanes beside it), so that the kernel's indexing, rows, members and edges
  // are checked against loops on a machine without a GPU.
  bool emulate = false;
};

// The kernel's source (extern "C" tessera_stencil), from the description.
std::string stencil_source(const stencil_desc& d);
// Words of the kernel's parameter: [0] the output's address, [1, 1 + n) its strides, [1 + n,
// 1 + 2n) the box's extents, [1 + 2n] its element count, [2 + 2n] the anchor's address, then its n
// strides, then each operand's address and n strides, then each scalar's bits.
inline std::size_t stencil_words(const stencil_desc& d) {
  return static_cast<std::size_t>(3 + 3 * d.n) + d.operands.size() * static_cast<std::size_t>(1 + d.n) +
         d.scalar_types.size();
}
// The description and parameter words of the kernel of `c` with plan `pl` (rows: rows per thread;
// planes: output planes per thread of a marching kernel).
stencil_desc describe_stencil(const stencil_call& c, const tile_plan& pl, int rows, std::vector<std::uint64_t>& words,
                              int planes = 32, int warps = 4);
// The kernel's grid for `c` (blocks of d.threads()): chunks of 128 K elements along dim 0 (32 K when
// it marches, from the line of `shift`), then row tiles (of planes chunks when it marches): up to
// 65535 along y, which the kernel strides over, or, for a march of one tile per block, the rest
// along z.
void stencil_grid(const stencil_call& c, const stencil_desc& d, unsigned (&grid)[3]);
// The edge kernel's blocks (of stencil_edge_threads rows of one element outside whole chunks, over
// stencil_edge_planes planes; striding past 2^20 blocks) for `c`: 0 when d.edge_kernel() is false
// or there is no such element.
// Its source: tessera_stencil_edges in stencil_source(d), and, emulated, tessera_stencil_edges_host
// (const P*, grid x).
constexpr int stencil_edge_threads = 128, stencil_edge_planes = 8;
unsigned stencil_edge_blocks(const stencil_call& c, const stencil_desc& d);
// Runs the shard through its generated kernel on the device's stream when it has a plan, and
// returns whether it did. The kernel is generated and compiled on first use and kept by a short
// key of its description (the source is written only then; the compiled code is also cached on
// disk, rtc.cpp). Rows per thread: TESSERA_JIT_STENCIL_ROWS (1 to 16; default 8 for a plane's kernel:
// Jacobi 16384^2 float on an H200 reached 0.887x memcpy with 2, 0.960x with 4, 0.971x with 8; 1 for
// a marching one); planes per thread: TESSERA_JIT_STENCIL_PLANES (1 to 4096, default 4 for 16-byte
// chunks, 8 for single elements: the 3-D diffusion 512^3 reached 0.930x float with 4 on an H200,
// 0.901x with 8; double 0.963x with 4 on an H200 and 1.00x on an H100, 0.979x and 0.931x with 8);
// TESSERA_JIT_STENCIL_SCALAR=1: a marching kernel takes one element per thread and row (chunks of
// K = 1; 0.706x float, 0.866x double, session 36) instead of 16 bytes; TESSERA_JIT_STENCIL_WARPS (4,
// 8 or 16, default 4): a marching block's warps (8: 0.910x float, 0.915x double, session 36).
bool run_stencil(const stencil_call& c, int device, int shard);
// What run_stencil launches for `c`: the description of its kernel, from this thread's last 8
// calls when one had the same shape (expression, element size, strides, addresses modulo 128 bytes,
// the operands' distances from the first; planned and described otherwise), and its parameter
// words; nullptr when `c` has no plan. The description lives until 8 other shapes have been seen.
const stencil_desc* prepare_stencil(const stencil_call& c, std::vector<std::uint64_t>& words);
// Compiles `code` for compute capability `arch` without a GPU (tests): throws compile_error.
void compile_stencil(const std::string& code, int arch);

}  // namespace tessera::detail::rtc
