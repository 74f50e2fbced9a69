// SPDX-License-Identifier: Apache-2.0
// Tessera across processes (tessera/distributed.hpp). Run by ctest as one process (.host, .cuda)
// and under mpirun with 2, 3 and 4 ranks of one host device each (.mpi2, .mpi3, .mpi4). Every
// result over devices() (every rank's devices) is compared bit for bit with the same work on as
// many rank-private host devices of this process, which has the same blocks and the same order of
// operations: elementwise work, host reads (to_host, at, pitched rows), full reductions (to the
// host and as arrays), reductions along dims, collectives (integer allreduce through
// MPI_Allreduce), copies and halo exchanges between ranks, scans, sorts and matrix-vector products.
// Mismatched calls must be named on every rank, and the library must keep working after.
//
// Host values come from fixed seeds so that every rank holds the same ones (SPMD).
#include "test_support.hpp"

#include <tessera/distributed.hpp>

#include <cstring>
#include <sstream>
#include <vector>

using namespace tessera_test;

namespace {

// Before any other Tessera call (doctest's main makes none): the device table spans the ranks.
const bool started = [] {
  distributed::init();
  return true;
}();

template <class T>
std::vector<T> values(std::size_t n, std::uint64_t seed, double lo = -2.0, double hi = 2.0) {
  std::mt19937_64 g(seed);
  std::vector<T> v(n);
  if constexpr (std::is_integral_v<T>) {
    std::uniform_int_distribution<long long> d(static_cast<long long>(lo * 10), static_cast<long long>(hi * 10));
    for (std::size_t i = 0; i < n; ++i) v[i] = static_cast<T>(d(g));  // indices: std::vector<bool> too
  } else {
    std::uniform_real_distribution<double> d(lo, hi);
    for (auto& x : v) x = static_cast<T>(d(g));
  }
  return v;
}

// As many host devices as devices() holds, private to this rank: one process's run of the same
// work. In one process, devices() itself.
DeviceSet reference_devices() {
  const DeviceSet all = devices();
  if (distributed::size() == 1) return all;
  const std::size_t mine = distributed::local_devices().size();
  const DeviceSet h = host_devices(static_cast<int>(mine + all.size()));
  return DeviceSet(h.begin() + static_cast<std::ptrdiff_t>(mine), h.end());
}

// The bit-for-bit comparisons need host devices on every rank (GPUs have no private twin); the
// GPU paths across ranks are checked against host loops in test_distributed_values.cpp. The GPU
// check comes first: without a GPU, devices() throws in the .cuda variant.
bool comparable() {
  if (skip_without_gpu()) return false;
  if (distributed::size() > 1 && devices().front().kind() != device_kind::host) {
    MESSAGE("SKIPPED: bit-for-bit references need host devices (TESSERA_BACKEND=host); "
            "test_distributed_values checks the GPU paths against host loops");
    return false;
  }
  return true;
}

template <class T>
bool same_bits(const T& a, const T& b) {
  return std::memcmp(&a, &b, sizeof(T)) == 0;
}

template <class T>
void check_bits(const std::vector<T>& got, const std::vector<T>& want) {
  REQUIRE(got.size() == want.size());
  for (std::size_t i = 0; i < got.size(); ++i) {
    if (!same_bits<T>(got[i], want[i])) {
      FAIL_CHECK("element " << i << ": got " << got[i] << ", expected " << want[i]);
      return;
    }
  }
}

const std::vector<index_t> lengths{0, 1, 2, 3, 5, 1000, 100003, (1 << 20) + 7};

}  // namespace

TEST_CASE("devices() lists every rank's devices in rank order; each rank owns its own") {
  if (skip_without_gpu()) return;
  const int P = distributed::size(), me = distributed::rank();
  CHECK(distributed::initialized());
  CHECK(me >= 0);
  CHECK(me < P);
  CHECK(distributed::local_rank() < distributed::local_size());
  const DeviceSet ds = devices();
  const DeviceSet mine = distributed::local_devices();
  REQUIRE(!mine.empty());
  int previous = 0;
  std::size_t local = 0;
  for (Device d : ds) {
    CHECK(d.rank() >= previous);
    previous = d.rank();
    CHECK(distributed::is_local(d) == (d.rank() == me));
    local += d.rank() == me ? 1 : 0;
    if (P > 1) CHECK(d.name().rfind("rank" + std::to_string(d.rank()) + "/", 0) == 0);
  }
  CHECK(local == mine.size());
  CHECK(previous == P - 1);
  for (std::size_t i = 0; i < ds.size(); ++i)
    for (std::size_t j = 0; j < i; ++j) CHECK(ds[i].name() != ds[j].name());
}

TEST_CASE("elementwise work and host reads equal one process bit for bit") {
  if (!comparable()) return;
  const DeviceSet R = reference_devices();
  for (index_t n : lengths) {
    INFO("n = " << n);
    const auto v = values<float>(static_cast<std::size_t>(n), 11);
    seed(7);
    const Array<float, 1> a = from_host(v, {n});
    const Array<float, 1> b = rand<float>({n});
    const Array<float, 1> c = sin(a) * b + 2.f * a;
    seed(7);
    const Array<float, 1> ra = from_host(v, {n}, shard(0, R));
    const Array<float, 1> rb = rand<float>({n}, shard(0, R));
    const Array<float, 1> rc = sin(ra) * rb + 2.f * ra;
    check_bits(to_host(c), to_host(rc));
    check_bits(to_host(a), v);
    for (index_t i : {index_t(0), n / 2, n - 1})
      if (i >= 0 && i < n) CHECK(same_bits(c.at(i), rc.at(i)));
  }
  // Sharded along the first dimension: every part is a set of pitched rows of the host array.
  for (auto [m, n] : {std::pair<index_t, index_t>{37, 11}, {2, 5}, {1001, 3}}) {
    INFO("shape " << m << "x" << n);
    const auto v = values<double>(static_cast<std::size_t>(m * n), 12);
    const Array<double, 2> a = from_host(v, {m, n}, shard(0));
    const Array<double, 2> ra = from_host(v, {m, n}, shard(0, R));
    const Array<double, 2> c = exp(a) - a * a;
    const Array<double, 2> rc = exp(ra) - ra * ra;
    check_bits(to_host(c), to_host(rc));
    check_bits(to_host(a(range(1, m), _)), to_host(ra(range(1, m), _)));  // a strided view
    CHECK(same_bits(c.at(m - 1, n - 1), rc.at(m - 1, n - 1)));
  }
}

TEST_CASE("full reductions equal one process bit for bit") {
  if (!comparable()) return;
  const DeviceSet R = reference_devices();
  for (index_t n : lengths) {
    INFO("n = " << n);
    const auto v = values<float>(static_cast<std::size_t>(n), 21);
    const auto w = values<double>(static_cast<std::size_t>(n), 22, 0.999, 1.001);
    const auto k = values<std::int32_t>(static_cast<std::size_t>(n), 23);
    const Array<float, 1> a = from_host(v, {n});
    const Array<float, 1> ra = from_host(v, {n}, shard(0, R));
    const Array<double, 1> b = from_host(w, {n});
    const Array<double, 1> rb = from_host(w, {n}, shard(0, R));
    const Array<std::int32_t, 1> i = from_host(k, {n});
    const Array<std::int32_t, 1> ri = from_host(k, {n}, shard(0, R));
    CHECK(same_bits(sum(a), sum(ra)));
    CHECK(same_bits(sum(a * a + 1.f), sum(ra * ra + 1.f)));
    CHECK(same_bits(prod(b), prod(rb)));
    CHECK(same_bits(mean(b), mean(rb)));
    CHECK(same_bits(norm(a), norm(ra)));
    CHECK(same_bits(dot(a, a), dot(ra, ra)));
    CHECK(sum(i) == sum(ri));
    CHECK(count(a > 0.f) == count(ra > 0.f));
    CHECK(any(i > 15) == any(ri > 15));
    CHECK(all(i > -25) == all(ri > -25));
    CHECK(same_bits(sum(a, as_array).at(), sum(ra, as_array).at()));
    CHECK(same_bits(sum(b, as_array).at(), sum(rb, as_array).at()));
    if (n == 0) {
      CHECK_THROWS_AS(maximum(a), invalid_argument);
      continue;
    }
    CHECK(same_bits(maximum(a), maximum(ra)));
    CHECK(same_bits(minimum(b), minimum(rb)));
    CHECK(maximum(i) == maximum(ri));
    CHECK(same_bits(maximum(a, as_array).at(), maximum(ra, as_array).at()));
    // The device-side result feeds later work without leaving the devices.
    check_bits(to_host(eval(a / sum(a, as_array))), to_host(eval(ra / sum(ra, as_array))));
  }
}

TEST_CASE("reductions along dims, collectives and copies between ranks") {
  if (!comparable()) return;
  const DeviceSet R = reference_devices();
  const int P = static_cast<int>(devices().size());
  for (auto [m, n] : {std::pair<index_t, index_t>{9, 13}, {1, 2}, {64, 1000}}) {
    INFO("shape " << m << "x" << n);
    const auto v = values<float>(static_cast<std::size_t>(m * n), 31);
    const Array<float, 2> x = from_host(v, {m, n});
    const Array<float, 2> rx = from_host(v, {m, n}, shard(1, R));
    // Along the shard dimension the per-device partials are allgathered between ranks.
    check_bits(to_host(sum(x, dims(1))), to_host(sum(rx, dims(1))));
    check_bits(to_host(maximum(x, dims(0, 1))), to_host(maximum(rx, dims(0, 1))));
    check_bits(to_host(sum(x, dims(0))), to_host(sum(rx, dims(0))));
    check_bits(to_host(allgather(x)), v);
    // Copies: to rank 0's device, to another shard dimension, to every rank.
    check_bits(to_host(copy(x, on(devices()[0]))), v);
    check_bits(to_host(copy(x, shard(0))), v);
    const Array<float, 2> everywhere = copy(x, replicate());
    for (int s = 0; s < P; ++s) {
      if (!distributed::is_local(devices()[static_cast<std::size_t>(s)])) {
        CHECK_THROWS_AS(everywhere.host_data(s), invalid_argument);  // a remote shard is never touched
        continue;
      }
      const float* h = everywhere.host_data(s);
      CHECK(std::memcmp(h, v.data(), v.size() * sizeof(float)) == 0);
    }
    Array<float, 2> y = zeros<float>({m, n}, shard(0));
    copyto(y, x);
    check_bits(to_host(y), v);
  }
  // allreduce / broadcast_from / reduce_scatter of per-device values: each rank writes its replicas.
  const index_t k = 1000;
  Array<double, 1> r = zeros<double>({k}, replicate());
  Array<double, 1> rr = zeros<double>({k}, replicate(R));
  for (int s = 0; s < P; ++s) {
    const auto part = values<double>(static_cast<std::size_t>(k), 40 + static_cast<std::uint64_t>(s));
    std::memcpy(rr.host_data(s), part.data(), part.size() * sizeof(double));
    if (distributed::is_local(devices()[static_cast<std::size_t>(s)]))
      std::memcpy(r.host_data(s), part.data(), part.size() * sizeof(double));
  }
  const Array<double, 1> scattered = reduce_scatter(r), rscattered = reduce_scatter(rr);
  check_bits(to_host(scattered), to_host(rscattered));
  allreduce(r);
  allreduce(rr);
  check_bits(to_host(r), to_host(rr));
  // Replicas made different, then the last device's copied into every one.
  const std::vector<double> reduced = to_host(r);
  for (int s = 0; s < P; ++s) {
    if (!distributed::is_local(devices()[static_cast<std::size_t>(s)])) continue;
    double* h = r.host_data(s);
    for (index_t i = 0; i < k; ++i) h[i] += s;
  }
  broadcast_from(r, devices()[static_cast<std::size_t>(P - 1)]);
  for (int s = 0; s < P; ++s) {
    if (!distributed::is_local(devices()[static_cast<std::size_t>(s)])) continue;
    const double* h = r.host_data(s);
    for (index_t i = 0; i < k; ++i) {
      if (h[i] != reduced[static_cast<std::size_t>(i)] + (P - 1)) {
        FAIL_CHECK("replica " << s << " element " << i << ": " << h[i]);
        break;
      }
    }
  }
  Array<std::int32_t, 1> counts = ones<std::int32_t>({7}, replicate());
  allreduce(counts, reduce_op::sum);
  for (std::int32_t c : to_host(counts)) CHECK(c == P);
}

// Every device of D writes its own values into its replica (each rank its own devices); the same
// values go into the one-process reference over R. Then allreduce(op) on both must agree bit for
// bit, in every replica of this rank (integers and bools go through one MPI_Allreduce).
template <class T>
void check_allreduce(const DeviceSet& D, const DeviceSet& R, reduce_op op, std::uint64_t seed, double lo, double hi) {
  const index_t k = 1001;
  Array<T, 1> x = zeros<T>({k}, replicate(D));
  Array<T, 1> rx = zeros<T>({k}, replicate(R));
  for (std::size_t s = 0; s < D.size(); ++s) {
    const auto part = values<T>(static_cast<std::size_t>(k), seed + s, lo, hi);
    T* ref = rx.host_data(static_cast<int>(s));
    for (index_t i = 0; i < k; ++i) ref[i] = part[static_cast<std::size_t>(i)];
    if (!distributed::is_local(D[s])) continue;
    T* mine = x.host_data(static_cast<int>(s));
    for (index_t i = 0; i < k; ++i) mine[i] = part[static_cast<std::size_t>(i)];
  }
  allreduce(x, op);
  allreduce(rx, op);
  const std::vector<T> want = to_host(rx);
  check_bits(to_host(x), want);
  for (std::size_t s = 0; s < D.size(); ++s) {
    if (!distributed::is_local(D[s])) continue;
    const T* h = x.host_data(static_cast<int>(s));
    for (index_t i = 0; i < k; ++i) {
      if (!same_bits<T>(h[i], want[static_cast<std::size_t>(i)])) {
        FAIL_CHECK("replica " << s << " element " << i);
        break;
      }
    }
  }
}

TEST_CASE("integer and bool allreduce (MPI_Allreduce) equal one process bit for bit") {
  if (!comparable()) return;
  const DeviceSet D = devices(), R = reference_devices();
  for (reduce_op op : {reduce_op::sum, reduce_op::prod, reduce_op::max, reduce_op::min}) {
    INFO("op " << static_cast<int>(op));
    // Values near the int32 range: sums and products wrap, the same on every path.
    check_allreduce<std::int32_t>(D, R, op, 70, -2e8, 2e8);
    check_allreduce<std::int64_t>(D, R, op, 71, -1e17, 1e17);
    check_allreduce<bool>(D, R, op, 72, 0.0, 0.1);
    check_allreduce<double>(D, R, op, 73, -1.0, 1.0);  // floating: the gathering path
    if (D.size() > 1) {
      // Replicated over the first and last device only: ranks between take part with nothing.
      const DeviceSet ends{D.front(), D.back()}, rends{R.front(), R.back()};
      check_allreduce<std::int32_t>(ends, rends, op, 74, -2e8, 2e8);
      check_allreduce<std::int64_t>(ends, rends, op, 75, -1e17, 1e17);
    }
  }
}

TEST_CASE("host reads of every layout gather the global values in one exchange") {
  if (!comparable()) return;
  const DeviceSet D = devices();
  const auto v = values<double>(3 * 7 * 40, 81);
  // Sharded along the middle dimension: every part is pitched rows of the host array.
  for (int dim = 0; dim < 3; ++dim) {
    INFO("shard(" << dim << ")");
    const Array<double, 3> a = from_host(v, {3, 7, 40}, shard(dim));
    check_bits(to_host(a), v);
    check_bits(to_host(a(_, range(1, 6), _)), to_host(eval(a(_, range(1, 6), _))));
  }
  // Replicated: the first replica's values, whichever rank holds it; one device: its rank's.
  check_bits(to_host(from_host(v, {3, 7, 40}, replicate())), v);
  check_bits(to_host(from_host(v, {3, 7, 40}, on(D.back()))), v);
  const std::vector<std::int64_t> k = values<std::int64_t>(100003, 82, -1e6, 1e6);
  check_bits(to_host(from_host(k, {100003})), k);
  const Array<bool, 1> b = from_host(k, {100003}) > std::int64_t(0);
  std::vector<bool> want(k.size());
  for (std::size_t i = 0; i < k.size(); ++i) want[i] = k[i] > 0;
  CHECK(to_host(b) == want);
}

TEST_CASE("scans, sorts and matrix-vector products across ranks equal one process") {
  if (!comparable()) return;
  const DeviceSet R = reference_devices();
  for (index_t n : {index_t(1), index_t(5), index_t(1001)}) {
    INFO("n = " << n);
    const auto v = values<double>(static_cast<std::size_t>(n), 61);
    const Array<double, 1> x = from_host(v, {n});
    const Array<double, 1> rx = from_host(v, {n}, shard(0, R));
    check_bits(to_host(cumsum(x)), to_host(cumsum(rx)));
    check_bits(to_host(sort(x)), to_host(sort(rx)));
    check_bits(to_host(sortperm(x)), to_host(sortperm(rx)));
    const auto a = values<double>(static_cast<std::size_t>(n * 7), 62);
    const Array<double, 2> A = from_host(a, {n, 7}, shard(0));
    const Array<double, 2> rA = from_host(a, {n, 7}, shard(0, R));
    const Array<double, 1> y = from_host(values<double>(7, 63), {7}, replicate());
    const Array<double, 1> ry = from_host(values<double>(7, 63), {7}, replicate(R));
    check_bits(to_host(matmul(A, y)), to_host(matmul(rA, ry)));
  }
}

TEST_CASE("update_halo exchanges halo cells between ranks") {
  if (!comparable()) return;
  const DeviceSet R = reference_devices();
  const index_t m = 12, n = 40;
  const auto v = values<float>(static_cast<std::size_t>(m * n), 51);
  Array<float, 2> u = from_host(v, {m, n}, shard(1, halo(1)));
  Array<float, 2> ru = from_host(v, {m, n}, shard(1, halo(1), R));
  u = u * 2.f + 1.f;
  ru = ru * 2.f + 1.f;
  update_halo(u);
  update_halo(ru);
  auto step = [](const Array<float, 2>& a) {
    const index_t M = a.size(0), N = a.size(1);
    Array<float, 2> out = zeros<float>({M, N}, shard(1, a.layout().devices()));
    const auto I = range(1, M - 1), J = range(1, N - 1);
    out(I, J) = a(range(0, M - 2), J) + a(range(2, M), J) + a(I, range(0, N - 2)) + a(I, range(2, N)) - 4.f * a(I, J);
    return out;
  };
  check_bits(to_host(step(u)), to_host(step(ru)));
}

TEST_CASE("mismatched calls are named on every rank, and the library keeps working") {
  if (skip_without_gpu()) return;
  if (distributed::size() == 1) {
    MESSAGE("SKIPPED: needs several ranks (mpirun)");
    return;
  }
  const Array<float, 1> a = ones<float>({100});
  try {
    if (distributed::rank() == 0) (void)sum(a);
    else (void)to_host(a);
    FAIL("mismatched calls were not detected");
  } catch (const distributed_error& e) {
    const std::string what = e.what();
    CHECK(what.find("different calls") != std::string::npos);
    CHECK(what.find("rank 1") != std::string::npos);
  }
  CHECK(sum(a) == 100.f);
  std::ostringstream os;
  os << a;  // printing reads the global values, on every rank
  CHECK(os.str().find("rank" + std::to_string(distributed::size() - 1) + "/") != std::string::npos);
}
