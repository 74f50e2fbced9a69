// SPDX-License-Identifier: Apache-2.0
// Tessera BLAS layer: the executors of one device's matrix product (ProductTask,
// dsl/tessera/product_task.hpp). GPUs call cuBLAS (one handle per device, bound to the device's
// stream, created on first use); host devices call the CBLAS found at configure time (OpenBLAS
// where installed), or plain loops when none was found. This header includes no CUDA or BLAS
// header, so dsl/ may include it.
#pragma once
#include <tessera/product_task.hpp>

namespace tessera::detail::blas {

// The library behind host devices' products ("OpenBLAS", "CBLAS", or "loops").
const char* host_blas_name();

}  // namespace tessera::detail::blas

// The executors of a ProductTask: the host CBLAS (done when it returns) and cuBLAS (queued on the
// device's stream, one handle per device). Failures throw backend_error naming the call and device.
namespace tessera::detail::host {
void run(const ProductTask& t);
}
namespace tessera::detail::cuda {
void run(const ProductTask& t, int device, int shard);
}
