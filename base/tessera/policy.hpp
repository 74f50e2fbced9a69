// SPDX-License-Identifier: Apache-2.0
// Tessera: execution policies (Thrust's par / seq). A policy says how shards are dispatched.
#pragma once

namespace tessera {

struct execution_policy {
  // par: every shard launched from this thread without waiting (devices run concurrently).
  // seq: shards one after another, waiting for each (for debugging).
  bool sequential = false;
};

inline constexpr execution_policy par{false};
inline constexpr execution_policy seq{true};

}  // namespace tessera
