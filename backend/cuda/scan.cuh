// SPDX-License-Identifier: Apache-2.0
// Tessera CUDA executor for scans and sorts. The work is CUB's (DeviceScan, DeviceRadixSort,
// DeviceMerge, DeviceSelect), compiled once into tessera_runtime by backend/cuda/scan.cu for the
// element types a task can carry; this header declares those entry points and routes each task to
// them, so a program that includes tessera.hpp pays nothing for CUB's headers (see
// dsl/tessera/scan_task.hpp). Each call queues its work on the device's stream, takes CUB's
// temporary storage from the device's scratch buffer and does not wait.
// Included only by translation units compiled with nvcc (backend/execute.hpp's switch).
#pragma once
#include <tessera/scan_task.hpp>

#include <cstdint>

namespace tessera::detail::cuda {

#define TESSERA_SCAN_ENTRY(T)                                                                           \
  void scan_lines(const T* in, T* out, index_t inner, index_t len, index_t outer, scan_kind op, int device, \
                  int shard);
TESSERA_SCAN_ENTRY(std::int32_t)
TESSERA_SCAN_ENTRY(std::int64_t)
TESSERA_SCAN_ENTRY(float)
TESSERA_SCAN_ENTRY(double)
#undef TESSERA_SCAN_ENTRY

#define TESSERA_SORT_ENTRIES(K)                                                                                    \
  void sort_run(const K* keys_in, K* keys_out, const std::int64_t* idx_in, std::int64_t* idx_out, index_t n,      \
                bool descending, int device, int shard);                                                           \
  void merge_runs(const K* a, const std::int64_t* ia, index_t na, const K* b, const std::int64_t* ib, index_t nb, \
                  K* out, std::int64_t* iout, bool descending, int device, int shard);                             \
  void unique_run(const K* in, K* out, index_t n, std::int64_t* count, int device, int shard);
TESSERA_SORT_ENTRIES(std::int32_t)
TESSERA_SORT_ENTRIES(std::int64_t)
#undef TESSERA_SORT_ENTRIES

template <class T>
void run(const ScanTask<T>& t, int device, int shard) {
  scan_lines(t.in, t.out, t.inner, t.len, t.outer, t.op, device, shard);
}
template <class K>
void run(const SortTask<K>& t, int device, int shard) {
  sort_run(t.keys_in, t.keys_out, t.idx_in, t.idx_out, t.n, t.descending, device, shard);
}
template <class K>
void run(const MergeTask<K>& t, int device, int shard) {
  merge_runs(t.a, t.ia, t.na, t.b, t.ib, t.nb, t.out, t.iout, t.descending, device, shard);
}
template <class K>
void run(const UniqueTask<K>& t, int device, int shard) {
  unique_run(t.in, t.out, t.n, t.count, device, shard);
}

}  // namespace tessera::detail::cuda
