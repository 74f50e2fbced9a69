// SPDX-License-Identifier: Apache-2.0
// Compile-time probe (scripts/compile_time.sh): a program that only includes the library. What it
// costs is what every translation unit of a user's program pays before writing one expression
// (DESIGN.md target: <= 3 s with nvcc on a 2-core machine).
#include <tessera/tessera.hpp>

int main() { return 0; }
