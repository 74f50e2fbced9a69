// SPDX-License-Identifier: Apache-2.0
// The collectives of comm.hpp: one public definition each. The arguments are checked here; GPUs
// then go to NCCL (nccl.cpp), host devices are served in process by copies and loops, finished
// when the call returns.
//
// Host devices follow NCCL's arithmetic so that a program gives the same answers on both:
// integers wrap (u8 too), max/min of floating values are IEEE maxNum/minNum (fmax/fmin: a NaN
// loses against a number), and values are combined in rank order.
//
// Across processes (devices of several ranks), host devices first gather every send block they
// need onto every rank (one MPI exchange, backend/process/mpi.cpp), then run the same in-process
// loops, writing only their own receive buffers: the same order of operations as one process, so
// the same bits. Integer and byte allreduces, exact in any order, are one MPI_Allreduce instead.
// GPUs go to NCCL with communicators spanning the ranks.
#include <backend/comm/comm.hpp>
#include <backend/comm/nccl.hpp>
#include <backend/process/mpi.hpp>
#include <backend/runtime/runtime.hpp>
#include <tessera/device.hpp>
#include <tessera/error.hpp>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <memory>
#include <string>
#include <type_traits>
#include <vector>

#ifndef TESSERA_HAS_CUDA
#define TESSERA_HAS_CUDA 0
#endif

namespace tessera::detail::comm {


namespace {

std::size_t size_of(dtype t) {
  switch (t) {
    case dtype::u8: return 1;
    case dtype::i32: return 4;
    case dtype::i64: return 8;
    case dtype::f32: return 4;
    case dtype::f64: return 8;
  }
  throw invalid_argument("tessera: comm: unknown element type " + std::to_string(static_cast<int>(t)));
}

void check_op(const char* what, op o) {
  if (o != op::sum && o != op::prod && o != op::max && o != op::min)
    throw invalid_argument(std::string("tessera: comm::") + what + ": unknown reduction operator " +
                           std::to_string(static_cast<int>(o)) + "; expected sum, prod, max or min");
}

std::string device_list(const int* devices, int n) {
  std::string s = "[";
  for (int r = 0; r < n; ++r) s += (r ? ", " : "") + Device(devices[r]).name();
  return s + "]";
}

// Checks the device list of a collective; returns true when its devices are GPUs.
bool check_devices(const char* what, const int* devices, int n) {
  rt::refuse_while_recording(what);
  rt::refuse_while_capturing(what);
  if (n < 1 || devices == nullptr) {
    throw invalid_argument(std::string("tessera: comm::") + what + " needs at least one device, found " +
                           std::to_string(devices == nullptr ? 0 : n));
  }
  int gpus = 0;
  for (int r = 0; r < n; ++r) {
    const rt::device_info& d = rt::info(devices[r]);  // throws invalid_argument for an unknown id
    gpus += d.kind == device_kind::cuda ? 1 : 0;
    for (int q = 0; q < r; ++q) {
      if (devices[q] == devices[r]) {
        throw invalid_argument(std::string("tessera: comm::") + what + " over " + device_list(devices, n) +
                               ": device " + Device(devices[r]).name() + " is listed twice (ranks " +
                               std::to_string(q) + " and " + std::to_string(r) +
                               "); every rank needs a device of its own");
      }
    }
  }
  if (gpus != 0 && gpus != n) {
    throw invalid_argument(std::string("tessera: comm::") + what + " over " + device_list(devices, n) +
                           " mixes GPUs and host devices; a collective runs over GPUs only (NCCL) or over host "
                           "devices only (in process)");
  }
  return gpus == n;
}

// Every buffer a rank uses must exist once there is something to move.
void check_buffers(const char* what, const char* role, const void* const* bufs, int n, int only_rank = -1) {
  if (bufs == nullptr) throw invalid_argument(std::string("tessera: comm::") + what + ": the " + role + " list is null");
  for (int r = 0; r < n; ++r) {
    if ((only_rank < 0 || r == only_rank) && bufs[r] == nullptr) {
      throw invalid_argument(std::string("tessera: comm::") + what + ": " + role + " buffer of rank " +
                             std::to_string(r) + " is null");
    }
  }
}

bool overlap(const void* a, std::size_t an, const void* b, std::size_t bn) {
  const auto pa = reinterpret_cast<std::uintptr_t>(a), pb = reinterpret_cast<std::uintptr_t>(b);
  return an != 0 && bn != 0 && pa < pb + bn && pb < pa + an;
}

// -- element arithmetic with NCCL's rules -----------------------------------------------------

template <class T>
T combine(op o, T a, T b) {
  if constexpr (std::is_floating_point_v<T>) {
    switch (o) {
      case op::sum: return a + b;
      case op::prod: return a * b;
      case op::max: return std::fmax(a, b);
      case op::min: return std::fmin(a, b);
    }
  } else {
    using U = std::make_unsigned_t<T>;  // two's-complement wrap, no signed overflow
    switch (o) {
      case op::sum: return static_cast<T>(static_cast<U>(static_cast<U>(a) + static_cast<U>(b)));
      case op::prod: return static_cast<T>(static_cast<U>(static_cast<U>(a) * static_cast<U>(b)));
      case op::max: return a < b ? b : a;
      case op::min: return b < a ? b : a;
    }
  }
  return a;
}

// acc[i] = acc[i] op x[i]; the switch is outside the loop so each loop is a plain one.
template <class T>
void fold(op o, T* acc, const T* x, std::size_t count) {
  switch (o) {
    case op::sum:
      for (std::size_t i = 0; i < count; ++i) acc[i] = combine(op::sum, acc[i], x[i]);
      break;
    case op::prod:
      for (std::size_t i = 0; i < count; ++i) acc[i] = combine(op::prod, acc[i], x[i]);
      break;
    case op::max:
      for (std::size_t i = 0; i < count; ++i) acc[i] = combine(op::max, acc[i], x[i]);
      break;
    case op::min:
      for (std::size_t i = 0; i < count; ++i) acc[i] = combine(op::min, acc[i], x[i]);
      break;
  }
}

// out[i] = op over q of send[q][offset + i], in rank order.
template <class T>
void reduce_into(T* out, int n, const void* const* send, std::size_t offset, std::size_t count, op o) {
  std::memcpy(out, static_cast<const T*>(send[0]) + offset, count * sizeof(T));
  for (int q = 1; q < n; ++q) fold(o, out, static_cast<const T*>(send[q]) + offset, count);
}

template <class F>
void with_type(dtype t, F&& f) {
  switch (t) {
    case dtype::u8: f(std::uint8_t{}); return;
    case dtype::i32: f(std::int32_t{}); return;
    case dtype::i64: f(std::int64_t{}); return;
    case dtype::f32: f(float{}); return;
    case dtype::f64: f(double{}); return;
  }
}

// -- host devices: in process -----------------------------------------------------------------

void host_allgather(int n, const void* const* send, void* const* recv, std::size_t bytes) {
  // Direct copies are safe unless a send buffer overlaps a receive buffer anywhere but at its own
  // in-place position (send[r] == recv[r] + r * bytes); otherwise the blocks are staged first.
  bool direct = true;
  for (int q = 0; q < n && direct; ++q) {
    for (int r = 0; r < n && direct; ++r) {
      if (!overlap(send[q], bytes, recv[r], bytes * static_cast<std::size_t>(n))) continue;
      direct = r == q && send[q] == static_cast<const char*>(recv[q]) + static_cast<std::size_t>(q) * bytes;
    }
  }
  std::unique_ptr<char[]> staged;
  const void* const* src = send;
  std::vector<const void*> staged_ptrs;
  if (!direct) {
    staged.reset(new char[bytes * static_cast<std::size_t>(n)]);
    for (int q = 0; q < n; ++q) {
      staged_ptrs.push_back(staged.get() + static_cast<std::size_t>(q) * bytes);
      std::memcpy(staged.get() + static_cast<std::size_t>(q) * bytes, send[q], bytes);
    }
    src = staged_ptrs.data();
  }
  for (int r = 0; r < n; ++r) {
    for (int q = 0; q < n; ++q) {
      char* dst = static_cast<char*>(recv[r]) + static_cast<std::size_t>(q) * bytes;
      if (dst != src[q]) std::memcpy(dst, src[q], bytes);
    }
  }
}

void host_allreduce(int n, const void* const* send, void* const* recv, std::size_t count, dtype t, op o) {
  with_type(t, [&](auto tag) {
    using T = decltype(tag);
    // Into a temporary first: every receive buffer may be one of the send buffers (in place).
    std::unique_ptr<T[]> acc(new T[count]);
    reduce_into<T>(acc.get(), n, send, 0, count, o);
    for (int r = 0; r < n; ++r)
      if (recv[r] != nullptr) std::memcpy(recv[r], acc.get(), count * sizeof(T));  // null: another rank's
  });
}

void host_broadcast(int n, int root, const void* const* send, void* const* recv, std::size_t bytes) {
  const void* src = send[root];
  std::unique_ptr<char[]> staged;
  for (int r = 0; r < n; ++r) {
    if (recv[r] != src && overlap(recv[r], bytes, src, bytes)) {  // writing would clobber the source
      staged.reset(new char[bytes]);
      std::memcpy(staged.get(), src, bytes);
      src = staged.get();
      break;
    }
  }
  for (int r = 0; r < n; ++r) {
    if (recv[r] != src) std::memcpy(recv[r], src, bytes);
  }
}

void host_reduce_scatter(int n, const void* const* send, void* const* recv, std::size_t count, dtype t, op o) {
  with_type(t, [&](auto tag) {
    using T = decltype(tag);
    // Every rank's block is computed before any is written: a receive buffer may lie inside a send
    // buffer (in place: recv[r] == send[r] + r * count).
    std::unique_ptr<T[]> acc(new T[count * static_cast<std::size_t>(n)]);
    for (int r = 0; r < n; ++r) {
      if (recv[r] == nullptr) continue;  // another rank's block
      reduce_into<T>(acc.get() + static_cast<std::size_t>(r) * count, n, send, static_cast<std::size_t>(r) * count,
                     count, o);
    }
    for (int r = 0; r < n; ++r) {
      if (recv[r] != nullptr) std::memcpy(recv[r], acc.get() + static_cast<std::size_t>(r) * count, count * sizeof(T));
    }
  });
}

// -- host devices across processes ------------------------------------------------------------

// Every rank's send block (`block` bytes from send[r]) in list order, on every rank.
std::vector<char> gather_sends(const int* devices, int n, const void* const* send, std::size_t block, const char* what) {
  std::vector<char> all(block * static_cast<std::size_t>(n));
  std::vector<int> owner(static_cast<std::size_t>(n));
  for (int r = 0; r < n; ++r) {
    owner[static_cast<std::size_t>(r)] = rt::info(devices[r]).rank;
    if (!rt::is_remote(devices[r])) std::memcpy(all.data() + static_cast<std::size_t>(r) * block, send[r], block);
  }
  dist::share_blocks(all.data(), static_cast<std::size_t>(n), block, owner.data(), what);
  return all;
}

std::vector<const void*> blocks_of(const std::vector<char>& all, int n, std::size_t block) {
  std::vector<const void*> p(static_cast<std::size_t>(n));
  for (int r = 0; r < n; ++r) p[static_cast<std::size_t>(r)] = all.data() + static_cast<std::size_t>(r) * block;
  return p;
}

// This rank's receive buffers; null for the other ranks' (the in-process loops skip them).
std::vector<void*> local_recv(const int* devices, int n, void* const* recv) {
  std::vector<void*> out(static_cast<std::size_t>(n), nullptr);
  for (int r = 0; r < n; ++r)
    if (!rt::is_remote(devices[r])) out[static_cast<std::size_t>(r)] = recv[r];
  return out;
}

void ranks_allgather(const int* devices, int n, const void* const* send, void* const* recv, std::size_t bytes) {
  const std::vector<char> all = gather_sends(devices, n, send, bytes, "allgather");
  for (int r = 0; r < n; ++r)
    if (!rt::is_remote(devices[r])) std::memcpy(recv[r], all.data(), all.size());
}

// The element that leaves every other unchanged under `o` (what a rank without devices in the
// list contributes).
template <class T>
T identity(op o) {
  switch (o) {
    case op::sum: return T(0);
    case op::prod: return T(1);
    case op::max: return std::numeric_limits<T>::lowest();
    case op::min: return std::numeric_limits<T>::max();
  }
  return T(0);
}

void ranks_allreduce(const int* devices, int n, const void* const* send, void* const* recv, std::size_t count,
                     dtype t, op o) {
  if (t == dtype::u8 || t == dtype::i32 || t == dtype::i64) {
    // Wrapping sums and products, max and min of integers give the same bits in any order: each
    // rank folds its own devices' blocks, and one MPI_Allreduce moves count elements per rank
    // instead of every rank's blocks to every rank.
    with_type(t, [&](auto tag) {
      using T = decltype(tag);
      std::vector<T> acc(count, identity<T>(o));
      for (int r = 0; r < n; ++r)
        if (!rt::is_remote(devices[r])) fold(o, acc.data(), static_cast<const T*>(send[r]), count);
      dist::allreduce(acc.data(), count, t, o, "allreduce");
      for (int r = 0; r < n; ++r)
        if (!rt::is_remote(devices[r])) std::memcpy(recv[r], acc.data(), count * sizeof(T));
    });
    return;
  }
  // Floating values: every block to every rank, folded in list order, for one process's bits.
  const std::size_t block = count * size_of(t);
  const std::vector<char> all = gather_sends(devices, n, send, block, "allreduce");
  host_allreduce(n, blocks_of(all, n, block).data(), local_recv(devices, n, recv).data(), count, t, o);
}

void ranks_broadcast(const int* devices, int n, int root, const void* const* send, void* const* recv,
                     std::size_t bytes) {
  std::vector<char> value(bytes);
  if (!rt::is_remote(devices[root])) std::memcpy(value.data(), send[root], bytes);
  dist::broadcast(value.data(), bytes, rt::info(devices[root]).rank, "broadcast");
  for (int r = 0; r < n; ++r)
    if (!rt::is_remote(devices[r])) std::memcpy(recv[r], value.data(), bytes);
}

void ranks_reduce_scatter(const int* devices, int n, const void* const* send, void* const* recv, std::size_t count,
                          dtype t, op o) {
  const std::size_t block = count * static_cast<std::size_t>(n) * size_of(t);
  const std::vector<char> all = gather_sends(devices, n, send, block, "reduce_scatter");
  host_reduce_scatter(n, blocks_of(all, n, block).data(), local_recv(devices, n, recv).data(), count, t, o);
}

// Whether a collective spans ranks; a list of one device of another rank has nothing to do here.
enum class reach { local, across, elsewhere };
reach reach_of(const char* what, const int* devices, int n) {
  if (!rt::crosses_ranks(devices, static_cast<std::size_t>(n), what)) return reach::local;
  if (n == 1) return rt::is_remote(devices[0]) ? reach::elsewhere : reach::local;
  return reach::across;
}

}  // namespace

void allgather(const int* devices, int n, const void* const* send, void* const* recv, std::size_t bytes,
               const rt::buffer_list* uses) {
  const bool gpus = check_devices("allgather", devices, n);
  if (bytes == 0) return;
  check_buffers("allgather", "send", send, n);
  check_buffers("allgather", "receive", recv, n);
  const reach where = reach_of("allgather", devices, n);
  if (where == reach::elsewhere) return;
  if (uses) rt::make_resident(*uses);
#if TESSERA_HAS_CUDA
  if (gpus) return nccl::allgather(devices, n, send, recv, bytes);
#endif
  (void)gpus;
  if (where == reach::across) return ranks_allgather(devices, n, send, recv, bytes);
  host_allgather(n, send, recv, bytes);
}

void allreduce(const int* devices, int n, const void* const* send, void* const* recv, std::size_t count, dtype t,
               op o, const rt::buffer_list* uses) {
  const bool gpus = check_devices("allreduce", devices, n);
  (void)size_of(t);
  check_op("allreduce", o);
  if (count == 0) return;
  check_buffers("allreduce", "send", send, n);
  check_buffers("allreduce", "receive", recv, n);
  const reach where = reach_of("allreduce", devices, n);
  if (where == reach::elsewhere) return;
  if (uses) rt::make_resident(*uses);
#if TESSERA_HAS_CUDA
  if (gpus) return nccl::allreduce(devices, n, send, recv, count, t, o);
#endif
  (void)gpus;
  if (where == reach::across) return ranks_allreduce(devices, n, send, recv, count, t, o);
  host_allreduce(n, send, recv, count, t, o);
}

void broadcast(const int* devices, int n, int root, const void* const* send, void* const* recv, std::size_t bytes,
               const rt::buffer_list* uses) {
  const bool gpus = check_devices("broadcast", devices, n);
  if (root < 0 || root >= n) {
    throw invalid_argument("tessera: comm::broadcast over " + device_list(devices, n) + ": root rank " +
                           std::to_string(root) + " is outside [0, " + std::to_string(n) + ")");
  }
  if (bytes == 0) return;
  check_buffers("broadcast", "send", send, n, root);  // only the root's is read
  check_buffers("broadcast", "receive", recv, n);
  const reach where = reach_of("broadcast", devices, n);
  if (where == reach::elsewhere) return;
  if (uses) rt::make_resident(*uses);
#if TESSERA_HAS_CUDA
  if (gpus) return nccl::broadcast(devices, n, root, send, recv, bytes);
#endif
  (void)gpus;
  if (where == reach::across) return ranks_broadcast(devices, n, root, send, recv, bytes);
  host_broadcast(n, root, send, recv, bytes);
}

void reduce_scatter(const int* devices, int n, const void* const* send, void* const* recv, std::size_t count,
                    dtype t, op o, const rt::buffer_list* uses) {
  const bool gpus = check_devices("reduce_scatter", devices, n);
  (void)size_of(t);
  check_op("reduce_scatter", o);
  if (count == 0) return;
  check_buffers("reduce_scatter", "send", send, n);
  check_buffers("reduce_scatter", "receive", recv, n);
  const reach where = reach_of("reduce_scatter", devices, n);
  if (where == reach::elsewhere) return;
  if (uses) rt::make_resident(*uses);
#if TESSERA_HAS_CUDA
  if (gpus) return nccl::reduce_scatter(devices, n, send, recv, count, t, o);
#endif
  (void)gpus;
  if (where == reach::across) return ranks_reduce_scatter(devices, n, send, recv, count, t, o);
  host_reduce_scatter(n, send, recv, count, t, o);
}

bool exchange(const rt::copy_region* regions, std::size_t n) {
#if TESSERA_HAS_CUDA
  return nccl::exchange(regions, n);
#else
  (void)regions, (void)n;
  return false;
#endif
}

}  // namespace tessera::detail::comm
