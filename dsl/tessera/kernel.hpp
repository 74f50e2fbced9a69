// SPDX-License-Identifier: Apache-2.0
// Tessera: user kernels, included on their own (docs/semantics.md, "User kernels"): RawKernel
// (raw_kernel.hpp), ElementwiseKernel and ReductionKernel (CuPy's, elementwise_kernel.hpp and
// reduction_kernel.hpp) and for_each_shard. The umbrella <tessera/tessera.hpp> leaves them out: they
// cost every program about 0.2 s of nvcc time (docs/performance.md, "Compile time"), and most
// programs launch no kernel of their own.
#pragma once
#include <tessera/tessera.hpp>
#include <tessera/raw_kernel.hpp>
#include <tessera/elementwise_kernel.hpp>
#include <tessera/reduction_kernel.hpp>
#include <tessera/for_each_shard.hpp>
