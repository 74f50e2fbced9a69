// SPDX-License-Identifier: Apache-2.0
// The CUDA.jl "Multiple GPUs" page (https://cuda.juliagpu.org/stable/usage/multigpu/) ported
// to Tessera. The Julia program:
//
//   gpus = Int(length(devices()))
//   dims = (3, 4, gpus)
//   a = round.(rand(Float32, dims) * 100);  b = round.(rand(Float32, dims) * 100)
//   d_a = cu(a; unified=true);  d_b = cu(b; unified=true);  d_c = similar(d_a)
//   for (gpu, dev) in enumerate(devices())
//       device!(dev)
//       @views d_c[:, :, gpu] .= d_a[:, :, gpu] .+ d_b[:, :, gpu]
//   end
//   synchronize()
//   c = Array(d_c)
//   @assert c ≈ a .+ b
//
// In Tessera the arrays are created sharded along their last dimension (one slice per device)
// in unified memory, so slice g already lives on device g: the loop only selects the device
// and assigns the slice, exactly like the Julia code. The second half does the same work as
// one whole-array statement, `c2 = a + b`, which launches one fused kernel per shard on all
// devices at once. Without a GPU the program runs on host devices (TESSERA_HOST_DEVICES=n).
#include <tessera/tessera.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <exception>
#include <iostream>
#include <vector>

using namespace tessera;

namespace {

// Largest |got - want| over all elements, and the count of elements outside the tolerance
// (float addition is exact on every backend, so any difference beyond rounding is a bug).
struct Comparison {
  double max_error = 0;
  std::size_t bad = 0;
};

Comparison compare(const std::vector<float>& got, const std::vector<double>& want) {
  Comparison c;
  if (got.size() != want.size()) {
    c.bad = std::max(got.size(), want.size());
    return c;
  }
  for (std::size_t i = 0; i < got.size(); ++i) {
    const double err = std::fabs(double(got[i]) - want[i]);
    if (!(err <= 1e-6 * std::max(1.0, std::fabs(want[i])))) ++c.bad;  // also catches NaN
    c.max_error = std::max(c.max_error, std::isnan(err) ? INFINITY : err);
  }
  return c;
}

}  // namespace

int main() {
  try {
    const DeviceSet devs = devices();
    const auto ngpus = static_cast<index_t>(devs.size());
    std::cout << "Tessera multi-GPU example (CUDA.jl usage/multigpu ported)\n";
    if (cuda_backend()) {
      std::cout << "running on " << ngpus << " GPU(s):";
    } else {
      std::cout << "no GPU in use: running on " << ngpus
                << " host device(s) (set TESSERA_HOST_DEVICES=n for more; the same code runs on GPUs):";
    }
    for (auto d : devs) std::cout << ' ' << d.name();
    std::cout << "\n\n";
    print_topology(std::cout);
    std::cout << '\n';

    // dims = (3, 4, gpus); sharded along dim 2 over every device, unified memory (the defaults).
    auto a = rand<float>({3, 4, ngpus});
    auto b = rand<float>({3, 4, ngpus});
    auto c = zeros<float>({3, 4, ngpus});
    std::cout << "a, b, c: 3 x 4 x " << ngpus << " Float32, " << a.placement_string() << ", "
              << (a.memory_kind() == memory::unified ? "unified" : "device") << " memory\n";

    // for each gpu: device!(gpu); @views d_c[:, :, gpu] .= d_a[:, :, gpu] .+ d_b[:, :, gpu]
    for (index_t g = 0; g < ngpus; ++g) {
      DeviceScope scope(devs[static_cast<std::size_t>(g)]);
      c(_, _, g) = a(_, _, g) + b(_, _, g);  // a rank-2 view: slice g, held by device g
    }
    synchronize();

    // Check on the host: c ≈ a .+ b (the sum rounded to float, as every device computes it).
    const auto ha = to_host(a), hb = to_host(b);
    std::vector<double> want(ha.size());
    for (std::size_t i = 0; i < ha.size(); ++i) want[i] = double(ha[i] + hb[i]);
    const Comparison per_slice = compare(to_host(c), want);
    std::cout << "per-device slices  c(_, _, g) = a(_, _, g) + b(_, _, g), g = 0.." << ngpus - 1
              << ": max |c - (a + b)| = " << per_slice.max_error << (per_slice.bad ? "  WRONG" : "  ok") << '\n';

    // The same as one statement: one fused kernel per shard, all devices at once.
    Array<float, 3> c2 = a + b;
    const Comparison whole = compare(to_host(c2), want);
    std::cout << "whole array        c2 = a + b (" << c2.placement_string()
              << "): max |c2 - (a + b)| = " << whole.max_error << (whole.bad ? "  WRONG" : "  ok") << "\n\n";

    std::cout << "c = " << c << '\n';

    if (per_slice.bad || whole.bad) {
      std::cout << "FAILED: " << per_slice.bad << " (per-slice) and " << whole.bad
                << " (whole array) elements differ from a + b\n";
      return 1;
    }
    std::cout << "OK: c ≈ a + b on " << ngpus << (cuda_backend() ? " GPU(s)" : " host device(s)") << '\n';
    return 0;
  } catch (const std::exception& e) {
    std::cerr << "multi_gpu: error: " << e.what() << '\n';
    return 2;
  }
}
