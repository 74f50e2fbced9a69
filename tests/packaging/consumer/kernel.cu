// SPDX-License-Identifier: Apache-2.0
// The consumer's .cu source: compiled by nvcc when Tessera has CUDA (by the C++ compiler in a
// host-only Tessera, through tessera_add_program), with the C++20 flag Tessera asks for.
#include <tessera/tessera.hpp>

// 3 * n, computed by Tessera: a fused kernel per shard, then a reduction.
float consumer_kernel_sum(int n) {
  auto a = tessera::ones<float>({n});
  return tessera::sum(a * 2 + a);
}

// 1 when this file was compiled by nvcc (device code available), 0 otherwise.
int consumer_kernel_nvcc() { return TS_DEVICE_COMPILER; }
