// SPDX-License-Identifier: Apache-2.0
// User kernels: CuPy's multi-GPU RawKernel seed and its multi-GPU Monte Carlo option pricing,
// ported. (a) a kernel computing y = x * 2 on each GPU's shard and (b) one adding a value of its
// own to each GPU's shard (per_shard), both checked against host loops; (c) a European call
// priced by Monte Carlo, the paths split over the devices with a seed per device, the mean and
// standard error reduced by the DSL and checked against the Black-Scholes formula.
//
// RawKernel (CUDA C++ compiled by NVRTC at run time) runs on GPUs only; on host devices (no GPU,
// or TESSERA_BACKEND=host; TESSERA_HOST_DEVICES=4 to try several) the same steps use
// ElementwiseKernel, which the system C++ compiler builds at run time.
#include <tessera/kernel.hpp>  // the umbrella header and the user kernels

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <exception>
#include <string>
#include <utility>
#include <vector>

using namespace tessera;

namespace {

// (a), (b) on GPUs: one launch per shard, on the shard's GPU; `x` is that shard (grid-stride loop).
const char* times_two_source = R"(
extern "C" __global__ void times_two(tessera::shard<float, 1> x, tessera::shard<float, 1> y) {
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < x.size; i += (long long)gridDim.x * blockDim.x)
    y(i) = x(i) * 2;
}
)";
const char* add_value_source = R"(
extern "C" __global__ void add_value(tessera::shard<float, 1> x, float value) {
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < x.size; i += (long long)gridDim.x * blockDim.x)
    x(i) += value;
}
)";

// (c) The code both backends share (MC_HD: __device__ on GPUs). A counter-based generator: the
// k-th number of a stream is splitmix64(stream + k * golden gamma), and Box-Muller turns two of
// them into a normal draw, so path k depends only on its stream and k, not on the thread.
const char* mc_code = R"(
MC_HD unsigned long long splitmix64(unsigned long long z) {
  z += 0x9E3779B97F4A7C15ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}
MC_HD double uniform(unsigned long long stream, unsigned long long k) {  // in (0, 1]
  return double((splitmix64(stream + k * 0x9E3779B97F4A7C15ull) >> 11) + 1) / 9007199254740992.0;
}
// max(S_T - K, 0) on path k, S_T = S exp((r - sigma^2 / 2) T + sigma sqrt(T) Z).
MC_HD double call_payoff(unsigned long long stream, long long k, double s0, double strike, double t, double r,
                         double sigma) {
  const double u1 = uniform(stream, 2 * k), u2 = uniform(stream, 2 * k + 1);
  const double z = sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2);
  const double st = s0 * exp((r - 0.5 * sigma * sigma) * t + sigma * sqrt(t) * z);
  return st > strike ? st - strike : 0.0;
}
)";
const std::string mc_raw_source = std::string("#define MC_HD __device__\n") + mc_code + R"(
extern "C" __global__ void mc_call(tessera::shard<double, 1> payoff, unsigned long long seed, double s0,
                                   double strike, double t, double r, double sigma) {
  const unsigned long long stream = splitmix64(seed);  // this GPU's stream
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < payoff.size; i += (long long)gridDim.x * blockDim.x)
    payoff(i) = call_payoff(stream, i, s0, strike, t, r, sigma);
}
)";

// The global index range [first, last) of shard s of a 1-d array.
std::pair<index_t, index_t> shard_range(const Array<float, 1>& x, std::size_t s) {
  const auto& p = x.layout().parts[s];
  return {p.origin[0], p.origin[0] + p.extent[0]};
}

bool seed_kernels(bool gpu) {
  const DeviceSet all = devices();
  const index_t n = (gpu ? index_t(1) << 22 : index_t(1) << 16) + 3;  // uneven shards
  Array<float, 1> x = rand<float>({n});  // shard(0) over every device (the default)
  Array<float, 1> y = zeros<float>({n});
  Array<float, 1> z = x;
  std::vector<float> values;
  for (std::size_t s = 0; s < all.size(); ++s) values.push_back(100.f * float(s + 1));
  if (gpu) {
    RawKernel times_two(times_two_source, "times_two");
    RawKernel add_value(add_value_source, "add_value");
    times_two(x, y);                  // y = x * 2, one launch per shard on its GPU
    add_value(z, per_shard(values));  // shard s: z += values[s]
  } else {
    ElementwiseKernel times_two("float32 x", "float32 y", "y = x * 2", "times_two");
    ElementwiseKernel add_value("float32 x, float32 value", "float32 z", "z = x + value", "add_value");
    times_two(x, y);  // k(inputs..., output) writes the output
    for (std::size_t s = 0; s < all.size(); ++s) {  // each shard's block (a view on its device)
      const auto [first, last] = shard_range(z, s);
      auto block = z(range(first, last));
      add_value(block, values[s], block);
    }
  }
  // Host loops.
  const auto xh = to_host(x), yh = to_host(y), zh = to_host(z);
  double err_a = 0, err_b = 0;
  for (std::size_t i = 0; i < xh.size(); ++i) err_a = std::fmax(err_a, std::fabs(double(yh[i]) - 2.0 * xh[i]));
  for (std::size_t s = 0; s < all.size(); ++s) {
    const auto [first, last] = shard_range(z, s);
    for (index_t i = first; i < last; ++i) err_b = std::fmax(err_b, std::fabs(double(zh[i]) - double(xh[i] + values[s])));
  }
  const char* how = gpu ? "RawKernel" : "ElementwiseKernel";
  std::printf("(a) y = x * 2 on each shard (%s times_two, %lld float, %s): max |y - 2 x| = %g (host loop)\n", how,
              static_cast<long long>(n), x.placement_string().c_str(), err_a);
  std::printf("(b) z = x + value of its device (%s add_value, %s): values", how,
              gpu ? "per_shard(values)" : "a scalar per shard's view");
  for (float v : values) std::printf(" %g", double(v));
  std::printf(", max error %g (host loop)\n", err_b);
  return err_a == 0 && err_b == 0;
}

// The Black-Scholes price of a European call.
double black_scholes_call(double s0, double k, double t, double r, double sigma) {
  const double d1 = (std::log(s0 / k) + (r + 0.5 * sigma * sigma) * t) / (sigma * std::sqrt(t));
  const double d2 = d1 - sigma * std::sqrt(t);
  auto cdf = [](double v) { return 0.5 * std::erfc(-v / std::sqrt(2.0)); };
  return s0 * cdf(d1) - k * std::exp(-r * t) * cdf(d2);
}

bool monte_carlo(bool gpu) {
  const double s0 = 100, strike = 100, t = 1, r = 0.05, sigma = 0.2;
  const DeviceSet all = devices();
  const index_t paths = gpu ? index_t(1) << 22 : 200000;
  Array<double, 1> payoff;
  if (gpu) {
    // Each GPU prices its block of paths with its own seed (CuPy's seed + device id).
    std::vector<std::uint64_t> seeds;
    for (std::size_t s = 0; s < all.size(); ++s) seeds.push_back(2024 + s);
    RawKernel mc(mc_raw_source, "mc_call");
    payoff = zeros<double>({paths});
    mc(payoff, per_shard(seeds), s0, strike, t, r, sigma);
  } else {
    // The path's global index (iota) keys its draws, so every shard draws its own numbers.
    ElementwiseKernel mc("int64 path, int64 seed, float64 s0, float64 strike, float64 t, float64 r, float64 sigma",
                         "float64 payoff", "payoff = call_payoff(splitmix64(seed), path, s0, strike, t, r, sigma)",
                         "mc_call", std::string("#define MC_HD TESSERA_HD\n") + mc_code);
    const Array<std::int64_t, 1> path = iota<std::int64_t>({paths});
    payoff = mc.call<double>(path, std::int64_t(2024), s0, strike, t, r, sigma);
  }
  // Gathered by the DSL: E[p] and E[p^2] (each device reduces its shard, the partials combined).
  const double m1 = mean(payoff), m2 = mean(payoff * payoff);
  const double discount = std::exp(-r * t);
  const double price = discount * m1, std_error = discount * std::sqrt((m2 - m1 * m1) / double(paths));
  const double exact = black_scholes_call(s0, strike, t, r, sigma);
  const double off = std::fabs(price - exact) / std_error;
  std::printf("(c) European call S=%g K=%g T=%g r=%g sigma=%g, %lld paths over %zu %s (%s): Monte Carlo %.4f "
              "+- %.4f (std. error), Black-Scholes %.4f: %.2f std. errors apart\n",
              s0, strike, t, r, sigma, static_cast<long long>(paths), all.size(), gpu ? "GPU(s)" : "host device(s)",
              gpu ? "RawKernel, per_shard seeds" : "ElementwiseKernel over iota", price, std_error, exact, off);
  return off < 4 && std_error < 0.05;
}

}  // namespace

int main() {
  try {
    const bool gpu = cuda_backend();
    std::printf("user kernels on %zu %s\n", devices().size(),
                gpu ? "GPU(s)"
                    : "host device(s): RawKernel runs on GPUs only, so (a) to (c) use ElementwiseKernel, compiled "
                      "by the host C++ compiler");
    const bool seeds_ok = seed_kernels(gpu);
    const bool mc_ok = monte_carlo(gpu);
    std::printf("%s\n", seeds_ok && mc_ok ? "OK: the kernels match the host loops and the Monte Carlo price is "
                                            "within 4 standard errors of Black-Scholes"
                                          : "FAIL: a result differs (see above)");
    return seeds_ok && mc_ok ? 0 : 1;
  } catch (const std::exception& e) {
    std::printf("FAIL: %s\n", e.what());
    return 1;
  }
}
