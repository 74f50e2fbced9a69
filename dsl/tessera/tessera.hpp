// SPDX-License-Identifier: Apache-2.0
// Tessera: the umbrella header, the only one users include.
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
#include <tessera/collective.hpp>
#include <tessera/linalg.hpp>
#include <tessera/kernel.hpp>
#include <tessera/elementwise_kernel.hpp>
#include <tessera/reduction_kernel.hpp>
#include <tessera/for_each_shard.hpp>
