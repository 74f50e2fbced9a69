// SPDX-License-Identifier: Apache-2.0
// Tessera: the memory kinds an array's shards may live in (DESIGN.md, "Memory").
#pragma once

namespace tessera {

// unified: CUDA managed memory advised to and prefetched on the owner (host memory on host
// devices); device: cudaMalloc (host memory on host devices).
enum class memory { unified, device };

}  // namespace tessera
