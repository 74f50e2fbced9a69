// SPDX-License-Identifier: Apache-2.0
// Tessera: stencil kernels generated and compiled at run time (NVRTC), one per expression and
// row-tile plan (dsl/tessera/row_tiles.hpp). The plan is known only on the host, per shard: which
// operands are views of one array a row and an element apart. A kernel compiled ahead of time
// must pick each operand's register at run time, which costs more than the reuse saves (0.79x
// memcpy on Jacobi against 0.835x for the row kernels, docs/performance.md); here each member's row
// and shift are constants of the source, as in the hand-written kernel that reaches 0.974x.
//
// The source is made from a description (below) built by backend/cuda/stencil_jit.cuh from the
// expression's evaluator type; the kernel's one parameter is an array of 64-bit words (pointers,
// strides, extents, scalars' bits) in the order the description gives. This header includes no
// CUDA header.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace tessera::detail::rtc {

struct stencil_desc {
  std::string type;              // the element type of the output and of every operand: float or double
  int k = 0;                     // elements per 16-byte chunk
  int rows = 4;                  // rows along dim 1 per thread
  int n = 0;                     // rank of the box
  int head = 0;                  // elements before a row's first 16-byte aligned output
  // The expression, C++ over `L<i>` (operand i's element) and `S<i>` (scalar i), e.g.
  // "(S0 * (((L0 + L1) + L2) + L3))"; every operand and scalar keeps its own type, as in the
  // functors of the compiled path.
  std::string expr;
  std::vector<std::string> scalar_types;  // float, double, int or long long
  struct operand {
    int member = 0;  // 1: served from the anchor's rows, with dy and s
    int dy = 0, s = 0;
    // Otherwise: 0 a 16-byte chunk at the output's alignment, 1 two chunks shifted by m, 2 one
    // element broadcast along dim 0, 3 K elements one by one (rows of other alignments).
    int mode = 3, m = 0;
  };
  std::vector<operand> operands;
  int lo = 0, hi = 0, left_dy = 0, right_dy = 0;  // as in tile_plan
  bool group = false;                              // some operand is a member
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
// Launches the kernel of `d` on the device's stream over `grid` x 128 threads; `words` is its
// parameter (stencil_words(d) of them). The kernel is generated and compiled on first use and
// kept by a short key of the description (the source is written only then; the compiled code is
// also cached on disk, rtc.cpp).
void launch_stencil(const stencil_desc& d, const std::uint64_t* words, int device, int shard, unsigned grid_x,
                    unsigned grid_y);
// Compiles `code` for compute capability `arch` without a GPU (tests): throws compile_error.
void compile_stencil(const std::string& code, int arch);

}  // namespace tessera::detail::rtc
