// SPDX-License-Identifier: Apache-2.0
// Host <-> device transfers of 2-D pitched regions. GPUs go through two pinned staging chunks
// per device (the DMA engine only reaches full speed from pinned memory, and user buffers are
// pageable), double-buffered so host-side packing overlaps the copy engine.
#include <backend/process/mpi.hpp>
#include <backend/runtime/state.hpp>

#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

namespace tessera::detail::rt {
namespace {

// One staged piece of a transfer: `rows` rows from `row`, bytes [col, col + bytes) of each.
struct piece {
  std::size_t row, rows, col, bytes;
};

// Whole rows per piece when a row fits a chunk, else slices of one row.
template <class F>
void for_each_piece(std::size_t width, std::size_t height, F&& f) {
  constexpr std::size_t cap = staging_chunk_bytes;
  if (width <= cap) {
    const std::size_t per = cap / width;
    for (std::size_t r = 0; r < height; r += per) f(piece{r, std::min(per, height - r), 0, width});
  } else {
    for (std::size_t r = 0; r < height; ++r)
      for (std::size_t c = 0; c < width; c += cap) f(piece{r, 1, c, std::min(cap, width - c)});
  }
}

// Validates the region and folds a fully contiguous one into a single row, so that a copy of
// many narrow rows does not become a slow many-row 2-D DMA.
bool normalize(const char* what, int device_id, std::size_t& dst_pitch, std::size_t& src_pitch, std::size_t& width,
               std::size_t& height) {
  (void)info(device_id);
  if (width == 0 || height == 0) return false;
  if (height > 1 && (dst_pitch < width || src_pitch < width))
    throw invalid_argument(std::string("tessera: ") + what + ": a pitch (dst " + std::to_string(dst_pitch) + ", src " +
                           std::to_string(src_pitch) + " bytes) is smaller than the row width (" +
                           std::to_string(width) + " bytes)");
  if (height == 1 || (dst_pitch == width && src_pitch == width)) {
    width *= height;
    height = 1;
    dst_pitch = src_pitch = width;
  }
  return true;
}

void host_copy(char* dst, std::size_t dst_pitch, const char* src, std::size_t src_pitch, std::size_t width,
               std::size_t height) {
  for (std::size_t r = 0; r < height; ++r) std::memcpy(dst + r * dst_pitch, src + r * src_pitch, width);
}

#if TESSERA_HAS_CUDA
// Locks the device's staging chunks, allocating them and their events on first use.
std::unique_lock<std::mutex> lock_staging(int d) {
  gpu_state& g = gpu(d);
  std::unique_lock<std::mutex> lock(g.staging_mutex);
  if (g.staging == nullptr) {
    device_guard guard(d);
    void* p = nullptr;
    cuda_check(cudaHostAlloc(&p, 2 * staging_chunk_bytes, cudaHostAllocPortable), "cudaHostAlloc", d);
    for (cudaEvent_t& e : g.chunk_done) {
      if (e == nullptr) cuda_check(cudaEventCreateWithFlags(&e, cudaEventDisableTiming), "cudaEventCreateWithFlags", d);
    }
    g.staging = static_cast<char*>(p);
  }
  return lock;
}

// Device side of one piece; a 1-D copy whenever the device rows of the piece are contiguous.
void device_copy(int d, void* dst, std::size_t dpitch, const void* src, std::size_t spitch, const piece& p,
                 cudaStream_t s) {
  if (p.rows == 1 || (dpitch == p.bytes && spitch == p.bytes)) {
    cuda_check(cudaMemcpyAsync(dst, src, p.bytes * p.rows, cudaMemcpyDefault, s), "cudaMemcpyAsync", d);
  } else {
    cuda_check(cudaMemcpy2DAsync(dst, dpitch, src, spitch, p.bytes, p.rows, cudaMemcpyDefault, s),
               "cudaMemcpy2DAsync", d);
  }
}

void gpu_to_host(int d, char* dst, std::size_t dst_pitch, const char* src, std::size_t src_pitch, std::size_t width,
                 std::size_t height) {
  auto lock = lock_staging(d);
  device_guard guard(d);
  gpu_state& g = gpu(d);
  // stream(): inside a side_stream_scope (hide_communication's halo copies to a host device or
  // another rank) the side stream, behind the boundary pass that wrote the source.
  const auto on = static_cast<cudaStream_t>(stream(d));
  // Copy piece k into chunk k % 2 while the host unpacks piece k - 1 from the other chunk.
  std::size_t k = 0;
  piece prev{};
  auto unpack = [&](const piece& p, std::size_t chunk) {
    cuda_check(cudaEventSynchronize(g.chunk_done[chunk]), "cudaEventSynchronize", d);
    const char* stage = g.staging + chunk * staging_chunk_bytes;
    host_copy(dst + p.row * dst_pitch + p.col, dst_pitch, stage, p.bytes, p.bytes, p.rows);
  };
  for_each_piece(width, height, [&](const piece& p) {
    const std::size_t chunk = k % 2;
    char* stage = g.staging + chunk * staging_chunk_bytes;
    device_copy(d, stage, p.bytes, src + p.row * src_pitch + p.col, src_pitch, p, on);
    cuda_check(cudaEventRecord(g.chunk_done[chunk], on), "cudaEventRecord", d);
    if (k > 0) unpack(prev, (k - 1) % 2);
    prev = p;
    ++k;
  });
  unpack(prev, (k - 1) % 2);
}

void host_to_gpu(int d, char* dst, std::size_t dst_pitch, const char* src, std::size_t src_pitch, std::size_t width,
                 std::size_t height) {
  auto lock = lock_staging(d);
  device_guard guard(d);
  gpu_state& g = gpu(d);
  const auto on = static_cast<cudaStream_t>(stream(d));  // as in gpu_to_host
  std::size_t k = 0;
  // Pack piece k into chunk k % 2 while piece k - 1 is copied out of the other chunk; the
  // chunk's event says when the copy of piece k - 2 no longer reads it.
  for_each_piece(width, height, [&](const piece& p) {
    const std::size_t chunk = k % 2;
    char* stage = g.staging + chunk * staging_chunk_bytes;
    cuda_check(cudaEventSynchronize(g.chunk_done[chunk]), "cudaEventSynchronize", d);
    host_copy(stage, p.bytes, src + p.row * src_pitch + p.col, src_pitch, p.bytes, p.rows);
    device_copy(d, dst + p.row * dst_pitch + p.col, dst_pitch, stage, p.bytes, p, on);
    cuda_check(cudaEventRecord(g.chunk_done[chunk], on), "cudaEventRecord", d);
    ++k;
  });
  cuda_check(cudaStreamSynchronize(on), "cudaStreamSynchronize", d);
}
#endif

}  // namespace

void local_copy_to_host(int device_id, void* dst, std::size_t dst_pitch, const void* src, std::size_t src_pitch,
                        std::size_t width, std::size_t height) {
  if (!normalize("copy_to_host", device_id, dst_pitch, src_pitch, width, height)) return;
#if TESSERA_HAS_CUDA
  if (is_gpu(get(), device_id))
    return gpu_to_host(device_id, static_cast<char*>(dst), dst_pitch, static_cast<const char*>(src), src_pitch, width,
                       height);
#endif
  host_copy(static_cast<char*>(dst), dst_pitch, static_cast<const char*>(src), src_pitch, width, height);
}

void local_copy_from_host(int device_id, void* dst, std::size_t dst_pitch, const void* src, std::size_t src_pitch,
                          std::size_t width, std::size_t height) {
  if (!normalize("copy_from_host", device_id, dst_pitch, src_pitch, width, height)) return;
#if TESSERA_HAS_CUDA
  if (is_gpu(get(), device_id))
    return host_to_gpu(device_id, static_cast<char*>(dst), dst_pitch, static_cast<const char*>(src), src_pitch, width,
                       height);
#endif
  host_copy(static_cast<char*>(dst), dst_pitch, static_cast<const char*>(src), src_pitch, width, height);
}

void copy_regions_to_host(const host_region* regions, std::size_t n) {
  refuse_while_recording("a host read (to_host, at, printing)");
  refuse_while_capturing("a host read (to_host, at, printing)");
  std::vector<int> ids(n);
  for (std::size_t i = 0; i < n; ++i) ids[i] = regions[i].device;
  if (!crosses_ranks(ids.data(), n, "a host read")) {
    for (std::size_t i = 0; i < n; ++i) {
      const host_region& r = regions[i];
      local_copy_to_host(r.device, r.dst, r.dst_pitch, r.src, r.src_pitch, r.width, r.height);
    }
    return;
  }
  // Each rank reads its own regions into place; then every region's rows travel packed (a region
  // that is one contiguous run travels from and to its place directly) in one exchange.
  std::vector<host_region> norm(regions, regions + n);
  std::vector<std::vector<char>> packed(n);
  std::vector<void*> blocks(n, nullptr);
  std::vector<std::size_t> sizes(n, 0);
  std::vector<int> owner(n);
  for (std::size_t i = 0; i < n; ++i) {
    host_region& r = norm[i];
    owner[i] = info(r.device).rank;
    if (!normalize("copy_to_host", r.device, r.dst_pitch, r.src_pitch, r.width, r.height)) continue;
    sizes[i] = r.width * r.height;
    const bool mine = !is_remote(r.device);
    if (mine) local_copy_to_host(r.device, r.dst, r.dst_pitch, r.src, r.src_pitch, r.width, r.height);
    if (r.height == 1) {
      blocks[i] = r.dst;
      continue;
    }
    packed[i].resize(sizes[i]);
    blocks[i] = packed[i].data();
    if (mine) host_copy(packed[i].data(), r.width, static_cast<const char*>(r.dst), r.dst_pitch, r.width, r.height);
  }
  dist::share(blocks.data(), sizes.data(), owner.data(), n, "a host read (to_host, at)");
  for (std::size_t i = 0; i < n; ++i) {
    const host_region& r = norm[i];
    if (sizes[i] != 0 && r.height > 1 && is_remote(r.device))
      host_copy(static_cast<char*>(r.dst), r.dst_pitch, packed[i].data(), r.width, r.width, r.height);
  }
}

void copy_to_host(int device_id, void* dst, std::size_t dst_pitch, const void* src, std::size_t src_pitch,
                  std::size_t width, std::size_t height) {
  const host_region r{device_id, dst, dst_pitch, src, src_pitch, width, height};
  copy_regions_to_host(&r, 1);
}

void copy_from_host(int device_id, void* dst, std::size_t dst_pitch, const void* src, std::size_t src_pitch,
                    std::size_t width, std::size_t height) {
  refuse_while_recording("a host write (from_host)");
  refuse_while_capturing("a host write (from_host)");
  if (is_remote(device_id)) return;  // its rank writes it, from its own host values
  local_copy_from_host(device_id, dst, dst_pitch, src, src_pitch, width, height);
}

}  // namespace tessera::detail::rt
