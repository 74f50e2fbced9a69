// SPDX-License-Identifier: Apache-2.0
// Tessera: the umbrella header, the only one users include, except for user kernels (RawKernel,
// ElementwiseKernel, ReductionKernel, for_each_shard): <tessera/kernel.hpp>; the fft family:
// <tessera/fft.hpp> (both include this one); and complex elements: <tessera/complex.hpp>, next to
// this one (complex is declared here, defined there; docs/semantics.md, "Complex numbers").
#pragma once
#include <tessera/config.hpp>
#include <tessera/error.hpp>
#include <tessera/device.hpp>
#include <tessera/memory.hpp>
#include <tessera/shape.hpp>
#include <tessera/placement.hpp>
#include <tessera/layout.hpp>
#include <tessera/expr.hpp>
#include <tessera/functional.hpp>
#include <tessera/index.hpp>
#include <tessera/policy.hpp>
#include <tessera/array.hpp>
#include <tessera/evaluator.hpp>
#include <tessera/assign.hpp>
#include <tessera/transfer.hpp>
#include <tessera/creation.hpp>
#include <tessera/io.hpp>
#include <tessera/reduce.hpp>
#include <tessera/reduce_dims.hpp>
#include <tessera/statistics.hpp>
#include <tessera/scan.hpp>
#include <tessera/sort.hpp>
#include <tessera/collective.hpp>
#include <tessera/copy.hpp>
#include <tessera/halo.hpp>
#include <tessera/overlap.hpp>
#include <tessera/linalg.hpp>
#include <tessera/solver.hpp>
#include <tessera/reshape.hpp>
#include <tessera/concat.hpp>
#include <tessera/capture.hpp>
#include <tessera/npy.hpp>
#include <tessera/dlpack.hpp>
#include <tessera/png.hpp>
