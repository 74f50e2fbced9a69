// SPDX-License-Identifier: Apache-2.0
// consumer_linked's main: a target that links tessera::tessera itself (no tessera_add_program),
// so this file goes to the C++ compiler and kernel.cu to nvcc. Exits non-zero on a wrong result.
#include <tessera/tessera.hpp>

#include <cstdio>
#include <exception>

float consumer_kernel_sum(int n);  // kernel.cu
int consumer_kernel_nvcc();        // kernel.cu

int main() try {
  std::printf("consumer_linked (tessera::tessera, %s): TESSERA_HAS_CUDA=%d, linked.cpp compiled by %s, "
              "kernel.cu by %s; first device %s\n", CONSUMER_MODE, TESSERA_HAS_CUDA,
              TS_DEVICE_COMPILER ? "nvcc" : "the C++ compiler", consumer_kernel_nvcc() ? "nvcc" : "the C++ compiler",
              tessera::devices().at(0).name().c_str());
  const float t = consumer_kernel_sum(1000);
  std::printf("kernel.cu: sum(ones(1000) * 2 + ones(1000)) = %g\n", t);
  const bool ok = t == 3000.0f && !TS_DEVICE_COMPILER && consumer_kernel_nvcc() == 1;
  std::printf("%s\n", ok ? "OK" : "FAILED");
  return ok ? 0 : 1;
} catch (const std::exception& e) {
  std::printf("FAILED: %s\n", e.what());
  return 1;
}
