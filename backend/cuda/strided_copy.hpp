// SPDX-License-Identifier: Apache-2.0
// Tessera: a strided copy on one GPU, compiled once into tessera_runtime (strided_copy.cu) for the
// backend libraries that need their operands laid out otherwise than the user's arrays are (the
// FFT's real passes over strided data). No CUDA header: plain C++ callers include it.
#pragma once
#include <cstddef>
#include <cstdint>

namespace tessera::detail::cuda {

// Copies the `nd` (1..3) dimensional box of extents `ext` from `src` (element strides `src_st`) to
// `dst` (strides `dst_st`), elements of `elem_bytes` (4, 8 or 16), on the device's stream.
void strided_copy(int device, const void* src, const std::int64_t* src_st, void* dst, const std::int64_t* dst_st,
                  const std::int64_t* ext, int nd, int elem_bytes);

// Copies `height` rows of `width` bytes (`src_pitch` / `dst_pitch` bytes apart) with a kernel on
// `device`, queued on `stream` (a cudaStream_t of that device), where src may lie on another GPU
// that the device has peer access to: the rows are read over NVLink by the device's SMs instead of
// its copy engines (TESSERA_PEER_KERNEL, backend/runtime/copy.cpp). Returns false, queuing
// nothing, when the sizes and addresses are not multiples of 4. `blocks_per_sm` caps its grid (in
// blocks of 256 threads per SM): a copy queued beside a kernel that still has to start leaves it room.
bool pitched_copy(int device, void* stream, void* dst, std::size_t dst_pitch, const void* src, std::size_t src_pitch,
                  std::size_t width, std::size_t height, int blocks_per_sm = 16);

// One destination's pieces of a batch of copies between GPUs (rt::gathers_between_gpus): `height` rows
// of `width` bytes each, read over NVLink (or locally) by the destination's SMs.
struct gather_piece {
  const void* src;
  void* dst;
  std::size_t src_pitch, dst_pitch, width, height;
};
inline constexpr int gather_max_pieces = 16;
// Copies every piece with one kernel on `device`, queued on `stream`, its blocks spread over the
// pieces (every source read at once) instead of one copy after another; more than
// gather_max_pieces pieces take one kernel per group of them. Loads are 16, 8, 4, 2 or 1 bytes
// wide, the widest that every size, pitch and address allows. Its blocks loop over the work, at most
// `blocks_per_sm` (1 to 8, and no more than an SM holds at once) per SM: fewer leave room for a
// kernel of another stream to run beside it.
void gather_rows(int device, void* stream, const gather_piece* pieces, int n, int blocks_per_sm = 8);

// gather_rows in chunks that the kernel itself signals to other GPUs, one kernel for all of them (a
// copy between ranks, backend/comm/ipc_exchange.cpp): chunk j is pieces [first[j], first[j + 1]),
// copied before chunk j + 1's; once every write of chunk j is visible system-wide, the kernel writes
// `value` to flags[f][j] for each f (flags on other GPUs, mapped). `counters`: chunks zeroed 32-bit
// words in device memory, left zeroed for the next call (calls that share them run in stream
// order). Returns false, queuing nothing, past signal_max_chunks chunks, signal_max_pieces pieces
// or signal_max_flags flags.
inline constexpr int signal_max_chunks = 16, signal_max_pieces = 48, signal_max_flags = 16;
bool gather_rows_signalled(int device, void* stream, const gather_piece* pieces, const int* first, int chunks,
                           std::uint32_t* const* flags, int nflags, std::uint32_t value, std::uint32_t* counters,
                           int blocks_per_sm);

// The other side of it: gather_rows in groups, group g (pieces [first[g], first[g + 1])) copied
// once the flag waits[g], in this GPU's memory and written by another GPU after the group's bytes
// landed there, reaches `value` (cyclically), one kernel for all groups instead of a stream wait
// and a kernel per group. lane[g] (0 to await_max_lanes - 1) names the group's source: each lane
// has its own share of the blocks and takes its groups in order. Every block stays resident while
// it waits, so the grid is at most `blocks_per_sm` (1 to 8) per SM. Returns false, queuing
// nothing, past await_max_groups groups or await_max_pieces pieces.
inline constexpr int await_max_groups = 48, await_max_pieces = 48, await_max_lanes = 64;
bool gather_rows_awaited(int device, void* stream, const gather_piece* pieces, const int* first, const int* lane,
                         int groups, const std::uint32_t* const* waits, std::uint32_t value, int blocks_per_sm);

}  // namespace tessera::detail::cuda
