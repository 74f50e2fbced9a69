// SPDX-License-Identifier: Apache-2.0
// Tessera: the exception hierarchy. Every message names what was asked and what was found.
#pragma once
#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <utility>

namespace tessera {

struct error : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// Shapes that do not broadcast (Julia's DimensionMismatch).
struct dimension_mismatch : error {
  using error::error;
};

// Operands whose shards live on different devices or with different boundaries.
struct placement_mismatch : error {
  using error::error;
};

// An index or range outside an array's bounds.
struct out_of_bounds : error {
  using error::error;
};

// An argument with a wrong value (negative extent, zero step, bad device...).
struct invalid_argument : error {
  using error::error;
};

// A request larger than the owner device's free memory, refused before allocating.
struct out_of_memory : error {
  out_of_memory(std::size_t requested, std::size_t free, std::size_t total, int device,
                const std::string& device_name)
      : error("tessera::out_of_memory: requested " + std::to_string(requested) + " bytes on device " +
              std::to_string(device) + " (" + device_name + "), which has " + std::to_string(free) +
              " bytes free of " + std::to_string(total) + " total"),
        requested_bytes(requested), free_bytes(free), total_bytes(total), device_id(device) {}
  std::size_t requested_bytes, free_bytes, total_bytes;
  int device_id;
};

// A failing CUDA, NCCL or system call: names the call, the device and the shard.
struct backend_error : error {
  using error::error;
};

// A user kernel that does not compile: the message holds the compiler's log, whose line numbers
// are those of the user's source; `log` holds the log alone.
struct compile_error : error {
  compile_error(const std::string& what, std::string compiler_log) : error(what), log(std::move(compiler_log)) {}
  std::string log;
};

// A matrix that a dense solver cannot take (NumPy's LinAlgError, Julia's SingularException and
// PosDefException): exactly singular in solve/inv (`index`: the 0-based pivot whose U(k, k) is
// zero), not positive definite in cholesky (`index`: the leading minor of order index + 1 is not),
// or an iteration that did not converge (svd, eigh; `index` -1). `batch`: which matrix of an array
// of matrices (0 for one matrix).
struct linalg_error : error {
  linalg_error(const std::string& what, std::int64_t idx, std::int64_t which = 0)
      : error(what), index(idx), batch(which) {}
  std::int64_t index;
  std::int64_t batch;
};

}  // namespace tessera
