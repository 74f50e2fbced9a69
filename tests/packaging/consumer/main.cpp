// SPDX-License-Identifier: Apache-2.0
// A tiny program using Tessera from another CMake project (tests/packaging/check.sh builds it
// through add_subdirectory and through find_package). Exits non-zero on a wrong result.
#include <tessera/tessera.hpp>

#include <cstdio>
#include <exception>

float consumer_kernel_sum(int n);  // kernel.cu
int consumer_kernel_nvcc();        // kernel.cu

int main() try {
  int failures = 0;
  const auto devs = tessera::devices();
  std::printf("consumer (tessera_add_program, %s): TESSERA_HAS_CUDA=%d, main.cpp compiled by %s, kernel.cu by %s; "
              "%zu device(s), first %s\n", CONSUMER_MODE, TESSERA_HAS_CUDA, TS_DEVICE_COMPILER ? "nvcc" : "the C++ compiler",
              consumer_kernel_nvcc() ? "nvcc" : "the C++ compiler", devs.size(), devs.at(0).name().c_str());
  // Through tessera_add_program, every source is compiled by nvcc exactly when Tessera has CUDA.
  if (consumer_kernel_nvcc() != TESSERA_HAS_CUDA || TS_DEVICE_COMPILER != TESSERA_HAS_CUDA) {
    std::printf("FAILED: compiled by the wrong compiler\n");
    ++failures;
  }
  auto a = tessera::ones<float>({1000});
  const float s = tessera::sum(a * 2);
  std::printf("main.cpp: sum(ones(1000) * 2) = %g\n", s);
  if (s != 2000.0f) ++failures;
  const float t = consumer_kernel_sum(1000);
  std::printf("kernel.cu: sum(ones(1000) * 2 + ones(1000)) = %g\n", t);
  if (t != 3000.0f) ++failures;
  std::printf("%s\n", failures ? "FAILED" : "OK");
  return failures ? 1 : 0;
} catch (const std::exception& e) {
  std::printf("FAILED: %s\n", e.what());
  return 1;
}
