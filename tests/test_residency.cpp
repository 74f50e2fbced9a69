// SPDX-License-Identifier: Apache-2.0
// Residency and execution: host writes through host_data() on unified memory followed by kernels
// and host reads; memory::device arrays (no host pointer on GPUs); the out-of-memory guard;
// the seq and par policies; synchronize(); DeviceScope; and the library staying usable after
// errors.
#include "test_support.hpp"

#include <algorithm>
#include <csignal>
#include <cstdint>
#include <cstdlib>
#include <cstdio>
#include <string>
#include <thread>
#include <vector>

#include <sys/wait.h>
#include <unistd.h>

using namespace tessera;
using namespace tessera_test;

namespace {

// The documented balanced split: block i of n over p devices; the first n % p blocks get one more.
std::pair<index_t, index_t> block(index_t n, index_t p, index_t i) {
  const index_t base = n / p, rem = n % p;
  const index_t lo = i * base + std::min(i, rem);
  return {lo, lo + base + (i < rem ? 1 : 0)};
}

// The box (rows [r0, r1) x columns [c0, c1)) that shard `s` of a rows x cols array holds.
struct Box {
  index_t r0, r1, c0, c1;
  index_t size() const { return (r1 - r0) * (c1 - c0); }
};

std::vector<Box> boxes(index_t rows, index_t cols, const Placement& p, const DeviceSet& ds) {
  std::vector<Box> out;
  if (p.kind == Placement::kind_t::shard) {
    const auto nd = static_cast<index_t>(ds.size());
    for (index_t s = 0; s < nd; ++s) {
      if (p.dim == 0) {
        auto [lo, hi] = block(rows, nd, s);
        out.push_back({lo, hi, 0, cols});
      } else {
        auto [lo, hi] = block(cols, nd, s);
        out.push_back({0, rows, lo, hi});
      }
    }
  } else {
    const std::size_t copies = p.kind == Placement::kind_t::replicate ? ds.size() : 1;
    for (std::size_t s = 0; s < copies; ++s) out.push_back({0, rows, 0, cols});
  }
  return out;
}

// Writes the global column-major host array `v` (rows x cols) into every shard of `a` through
// host_data(), in the shard's own column-major layout.
void write_shards(const Array<float, 2>& a, const std::vector<Box>& bx, const std::vector<float>& v, index_t rows) {
  for (std::size_t s = 0; s < bx.size(); ++s) {
    float* p = a.host_data(static_cast<int>(s));
    const Box& b = bx[s];
    if (b.size() == 0) {
      CHECK(p == nullptr);
      continue;
    }
    REQUIRE(p != nullptr);
    for (index_t j = b.c0; j < b.c1; ++j)
      for (index_t i = b.r0; i < b.r1; ++i)
        p[(i - b.r0) + (b.r1 - b.r0) * (j - b.c0)] = v[static_cast<std::size_t>(i + rows * j)];
  }
}

// Reads every shard of `a` through host_data() and compares it with the global host array `want`;
// returns a description of the first mismatch.
std::string read_shards(const Array<float, 2>& a, const std::vector<Box>& bx, const std::vector<float>& want,
                        index_t rows) {
  for (std::size_t s = 0; s < bx.size(); ++s) {
    const float* p = a.host_data(static_cast<int>(s));
    const Box& b = bx[s];
    if (b.size() == 0) continue;
    if (p == nullptr) return "host_data(" + std::to_string(s) + ") is null for a non-empty shard";
    for (index_t j = b.c0; j < b.c1; ++j)
      for (index_t i = b.r0; i < b.r1; ++i) {
        const float got = p[(i - b.r0) + (b.r1 - b.r0) * (j - b.c0)];
        if (got != want[static_cast<std::size_t>(i + rows * j)]) {
          return "shard " + std::to_string(s) + ", element (" + std::to_string(i) + ", " + std::to_string(j) +
                 "): host_data gives " + std::to_string(got) + ", expected " +
                 std::to_string(want[static_cast<std::size_t>(i + rows * j)]);
        }
      }
  }
  return {};
}

std::vector<float> map(const std::vector<float>& a, float (*f)(float)) {
  std::vector<float> out(a.size());
  for (std::size_t i = 0; i < a.size(); ++i) out[i] = f(a[i]);
  return out;
}

const std::vector<std::pair<index_t, index_t>> shapes{{0, 3}, {3, 0}, {1, 1}, {7, 5}, {3, 2}, {2, 9}, {33, 17}, {1025, 1023}};

// Runs body(ds, rows, cols, np) for every device set, shape of `shapes` and placement of a matrix
// (shard(0), shard(1), replicate, on(device)), all of them named in any failure.
template <class F>
void for_each_layout(F&& body) {
  for (const auto& ds : device_sets()) {
    INFO("device set " << set_name(ds));
    for (auto [rows, cols] : shapes) {
      for (const auto& np : placements(2, ds)) {
        INFO("shape " << rows << "×" << cols << ", " << np.name);
        body(ds, rows, cols, np);
      }
    }
  }
}

// Runs `child` in a forked process and reports how it ended: "" when it returned 0, otherwise a
// description (a crash is reported instead of taking the whole test executable down).
std::string in_child(int (*child)()) {
  std::fflush(nullptr);
  const pid_t pid = fork();
  if (pid < 0) return "fork failed";
  if (pid == 0) {
    // doctest's crash handlers belong to the parent: a crash here is reported by the parent.
    for (int sig : {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT}) std::signal(sig, SIG_DFL);
    _exit(child());
  }
  int status = 0;
  if (waitpid(pid, &status, 0) != pid) return "waitpid failed";
  if (WIFSIGNALED(status)) return "the process died of signal " + std::to_string(WTERMSIG(status));
  if (!WIFEXITED(status)) return "the process did not exit normally";
  switch (WEXITSTATUS(status)) {
    case 0: return {};
    case 1: return "no exception was thrown";
    case 2: return "a tessera::error other than out_of_memory or invalid_argument was thrown (message on stderr)";
    case 4: return "out_of_memory with inconsistent fields (requested must exceed free, free <= total)";
    default: return "a non-tessera exception was thrown";
  }
}

// A request of more bytes than size_t can count (or elements than index_t can) must be refused
// like any other request larger than free memory (out_of_memory; invalid_argument naming the
// shape is accepted too), not wrap around to a small request.
template <class T, index_t R, index_t C>
int oversized_child() {
  try {
    auto a = zeros<T>({R, C}, on(host_devices(1)[0]));
    (void)a;
    return 1;
  } catch (const out_of_memory& e) {
    return e.requested_bytes > e.free_bytes && e.free_bytes <= e.total_bytes ? 0 : 4;
  } catch (const invalid_argument&) {
    return 0;
  } catch (const error& e) {
    std::fprintf(stderr, "child process: %s\n", e.what());
    return 2;
  } catch (...) {
    return 3;
  }
}

}  // namespace

TEST_CASE("unified memory: host writes through host_data, kernels read them, host reads the results") {
  for_each_layout([](const DeviceSet& ds, index_t rows, index_t cols, const NamedPlacement& np) {
    const auto bx = boxes(rows, cols, np.p, ds);
    const auto n = static_cast<std::size_t>(rows * cols);

    Array<float, 2> a({rows, cols}, np.p);  // unified by default, zero-filled by a kernel
    CHECK(a.memory_kind() == memory::unified);
    REQUIRE(a.devices().size() == bx.size());
    // Round 1: the host writes a's shards, a kernel reads them, the host reads the result.
    const auto v1 = random_values<float>(n);
    write_shards(a, bx, v1, rows);
    Array<float, 2> b = a * 2.f;
    CHECK(b.placement_string() == a.placement_string());
    CHECK(to_host(b) == map(v1, [](float x) { return 2 * x; }));
    std::string bad = read_shards(b, bx, map(v1, [](float x) { return 2 * x; }), rows);
    CHECK_MESSAGE(bad.empty(), bad);
    CHECK(to_host(a) == v1);
    if (n > 0) CHECK(a.at(rows - 1, cols - 1) == v1.back());

    // Round 2: the host rewrites both a and b (right after a kernel wrote b), then one kernel
    // reads both and writes b in place.
    const auto v2 = random_values<float>(n), v3 = random_values<float>(n);
    write_shards(a, bx, v2, rows);
    write_shards(b, bx, v3, rows);
    b = b + a;
    std::vector<float> sum(n);
    for (std::size_t i = 0; i < n; ++i) sum[i] = v3[i] + v2[i];
    CHECK(to_host(b) == sum);
    bad = read_shards(b, bx, sum, rows);
    CHECK_MESSAGE(bad.empty(), bad);

    // Round 3: a kernel writes a, the host reads it straight through host_data (which must
    // wait for the kernel), writes it again, and another kernel uses it.
    a = a * -1.f;
    bad = read_shards(a, bx, map(v2, [](float x) { return -x; }), rows);
    CHECK_MESSAGE(bad.empty(), bad);
    write_shards(a, bx, v1, rows);
    Array<float, 2> c = a - b;
    std::vector<float> diff(n);
    for (std::size_t i = 0; i < n; ++i) diff[i] = v1[i] - sum[i];
    CHECK(to_host(c) == diff);
    CHECK(to_host(a) == v1);
  });
}

TEST_CASE("host_data: shard index checks, empty shards, views and replicas") {
  for (const auto& ds : device_sets()) {
    INFO("device set " << set_name(ds));
    auto a = zeros<float>({3, 5}, shard(1, ds));
    const int parts = static_cast<int>(ds.size());
    CHECK_THROWS_AS(a.host_data(-1), out_of_bounds);
    CHECK_THROWS_AS(a.host_data(parts), out_of_bounds);
    try {
      (void)a.host_data(parts + 2);
      FAIL("no exception");
    } catch (const out_of_bounds& e) {
      INFO(e.what());
      CHECK(contains(e.what(), std::to_string(parts + 2)));
      CHECK(contains(e.what(), std::to_string(parts)));
    }
    // 5 columns over more than 5 devices: the last shards are empty and have no storage.
    for (int s = 0; s < parts; ++s) CHECK((a.host_data(s) == nullptr) == (s >= 5));
    Array<float, 2> none;
    CHECK_THROWS_AS(none.host_data(0), invalid_argument);
    // Each replica is its own copy: writing one replica through host_data leaves the others.
    if (parts > 1) {
      auto r = zeros<float>({4, 4}, replicate(ds));
      float* p1 = r.host_data(1);
      REQUIRE(p1 != nullptr);
      CHECK(p1 != r.host_data(0));
      for (int i = 0; i < 16; ++i) p1[i] = float(i);
      const float* p0 = r.host_data(0);
      CHECK(std::all_of(p0, p0 + 16, [](float x) { return x == 0.f; }));
    }
    CHECK(to_host(a) == std::vector<float>(15, 0.f));
  }
}

TEST_CASE("memory::device: host_data throws on GPUs, to_host / at / kernels work") {
  for_each_layout([](const DeviceSet& ds, index_t rows, index_t cols, const NamedPlacement& np) {
    const auto bx = boxes(rows, cols, np.p, ds);
    const auto v = random_values<float>(static_cast<std::size_t>(rows * cols));
    auto a = from_host(v, {rows, cols}, np.p, memory::device);
    CHECK(a.memory_kind() == memory::device);
    if (ds[0].is_host()) {
      // Host devices: plain host memory either way.
      const std::string bad = read_shards(a, bx, v, rows);
      CHECK_MESSAGE(bad.empty(), bad);
    } else {
      for (std::size_t s = 0; s < bx.size(); ++s) {
        if (bx[s].size() == 0) continue;
        CHECK_THROWS_AS(a.host_data(static_cast<int>(s)), invalid_argument);
        try {
          (void)a.host_data(static_cast<int>(s));
        } catch (const invalid_argument& e) {
          INFO(e.what());
          CHECK(contains(e.what(), "memory::device"));
          CHECK(contains(e.what(), "to_host"));
        }
      }
    }
    CHECK(to_host(a) == v);
    if (!v.empty()) {
      CHECK(a.at(0, 0) == v.front());
      CHECK(a.at(rows - 1, cols - 1) == v.back());
      CHECK(a.at(rows / 2, cols / 2) == v[static_cast<std::size_t>(rows / 2 + rows * (cols / 2))]);
    }
    Array<float, 2> b = a * 2.f;
    CHECK(b.memory_kind() == memory::device);  // the result inherits the operand's memory kind
    CHECK(to_host(b) == map(v, [](float x) { return 2 * x; }));
    b += a;
    CHECK(to_host(b) == map(v, [](float x) { return 3 * x; }));
    CHECK(to_host(a) == v);
  });
}

TEST_CASE("out_of_memory: a request larger than free memory is refused before anything is allocated") {
  const index_t rows = index_t(1) << 40, cols = index_t(1) << 10;
  for (const auto& ds : device_sets()) {
    INFO("device set " << set_name(ds));
    for (const auto& np : placements(2, ds)) {
      for (memory m : {memory::unified, memory::device}) {
        for (int how = 0; how < 3; ++how) {
          INFO(np.name << (m == memory::device ? ", memory::device" : "") << ", via "
                       << (how == 0 ? "zeros<float>" : how == 1 ? "Array<float, 2>(shape)" : "ones<double>"));
          const std::size_t elem = how == 2 ? sizeof(double) : sizeof(float);
          bool thrown = false;
          try {
            if (how == 0) (void)zeros<float>({rows, cols}, np.p, m);
            else if (how == 1) (void)Array<float, 2>({rows, cols}, np.p, m);
            else (void)ones<double>({rows, cols}, np.p, m);
          } catch (const out_of_memory& e) {
            thrown = true;
            const std::string msg = e.what();
            INFO(msg);
            // The device is one of the placement's, and the request is that device's share.
            const auto it = std::find(ds.begin(), ds.end(), Device(e.device_id));
            REQUIRE(it != ds.end());
            index_t share = rows * cols;
            if (np.p.kind == Placement::kind_t::shard) {
              const index_t k = it - ds.begin(), nd = static_cast<index_t>(ds.size());
              auto [lo, hi] = np.p.dim == 0 ? block(rows, nd, k) : block(cols, nd, k);
              share = np.p.dim == 0 ? (hi - lo) * cols : rows * (hi - lo);
            } else if (np.p.kind == Placement::kind_t::single) {
              CHECK(e.device_id == ds.back().id());
            }
            CHECK(e.requested_bytes == static_cast<std::size_t>(share) * elem);
            CHECK(e.requested_bytes > e.free_bytes);
            CHECK(e.free_bytes <= e.total_bytes);
            CHECK(e.total_bytes > 0);
            CHECK(contains(msg, std::to_string(e.requested_bytes)));
            CHECK(contains(msg, std::to_string(e.free_bytes)));
            CHECK(contains(msg, std::to_string(e.total_bytes)));
            CHECK(contains(msg, Device(e.device_id).name()));
          }
          CHECK_MESSAGE(thrown, "no out_of_memory for " << rows << "×" << cols << " elements");
        }
      }
    }
    // It derives from tessera::error, and a following normal allocation and computation work.
    CHECK_THROWS_AS(zeros<float>({rows, cols}, shard(1, ds)), tessera::error);
    auto x = from_host(std::vector<float>{1, 2, 3, 4, 5, 6}, {2, 3}, shard(1, ds));
    Array<float, 2> y = x * 2.f + 1.f;
    CHECK(to_host(y) == std::vector<float>{3, 5, 7, 9, 11, 13});
    auto z = zeros<float>({1000, 257}, shard(0, ds));
    z += 1.f;
    CHECK(to_host(z) == std::vector<float>(257000, 1.f));
  }
}

TEST_CASE("out_of_memory: sizes whose byte or element count overflows are refused, not wrapped") {
  // Each request runs in a child process, so that a crash (a wrapped size allocating nothing and
  // a fill writing through a null pointer) is reported here instead of ending the test run.
  // 2^31 x 2^31 doubles: 2^62 elements fit in index_t, but 2^65 bytes wrap size_t to 0.
  std::string bad = in_child(oversized_child<double, index_t(1) << 31, index_t(1) << 31>);
  CHECK_MESSAGE(bad.empty(), "zeros<double>({2^31, 2^31}) on host:0: " << bad);
  // 2^33 x 2^31 floats: 2^64 elements wrap index_t to 0.
  bad = in_child(oversized_child<float, index_t(1) << 33, index_t(1) << 31>);
  CHECK_MESSAGE(bad.empty(), "zeros<float>({2^33, 2^31}) on host:0: " << bad);
  // (2^40 + 1) x (2^30 + 1) floats: the element count wraps to a large but wrong number.
  bad = in_child(oversized_child<float, (index_t(1) << 40) + 1, (index_t(1) << 30) + 1>);
  CHECK_MESSAGE(bad.empty(), "zeros<float>({2^40 + 1, 2^30 + 1}) on host:0: " << bad);
  // The wrapped size must not reach from_host either: a shape of 2^64 elements is not one of 0.
  try {
    auto a = from_host(std::vector<float>{}, {index_t(1) << 32, index_t(1) << 32}, on(host_devices(1)[0]));
    FAIL_CHECK("from_host accepted 0 values for a 2^32 × 2^32 shape (length() = " << a.length() << ")");
  } catch (const tessera::error& e) {
    INFO(e.what());
    CHECK(true);
  }
}

TEST_CASE("assign with seq and par gives the same results") {
  for_each_layout([](const DeviceSet&, index_t rows, index_t cols, const NamedPlacement& np) {
    const auto n = static_cast<std::size_t>(rows * cols);
    const auto va = random_values<float>(n), vb = random_values<float>(n);
    auto a = from_host(va, {rows, cols}, np.p);
    auto b = from_host(vb, {rows, cols}, np.p);
    Array<float, 2> s({rows, cols}, np.p), p({rows, cols}, np.p);
    assign(s, a * b - 2.f * a, seq);
    assign(p, a * b - 2.f * a, par);
    const auto hs = to_host(s), hp = to_host(p);
    CHECK(hs == hp);
    std::vector<double> want(n);
    for (std::size_t i = 0; i < n; ++i) want[i] = double(va[i]) * vb[i] - 2.0 * va[i];
    check_all_close(hs, want);
    // Into views (every other row) with each policy; the other rows stay.
    if (rows > 1) {
      assign(s(range(0, rows, 2), _), 7.f, seq);
      assign(p(range(0, rows, 2), _), 7.f, par);
      const auto hs2 = to_host(s), hp2 = to_host(p);
      CHECK(hs2 == hp2);
      for (index_t j = 0; j < cols; ++j)
        for (index_t i = 0; i < rows; ++i) {
          const auto k = static_cast<std::size_t>(i + rows * j);
          if (hs2[k] != (i % 2 == 0 ? 7.f : hs[k])) {
            FAIL_CHECK("element (" << i << ", " << j << ") = " << hs2[k]);
            j = cols;
            break;
          }
        }
    }
    CHECK(to_host(a) == va);
    CHECK(to_host(b) == vb);
  });
}

TEST_CASE("synchronize() and synchronize(d) make queued results visible through host_data") {
  for (const auto& ds : device_sets()) {
    INFO("device set " << set_name(ds));
    const index_t rows = 513, cols = 2 * static_cast<index_t>(ds.size()) + 1;
    const auto v = random_values<float>(static_cast<std::size_t>(rows * cols));
    auto a = from_host(v, {rows, cols}, shard(1, ds));
    Array<float, 2> b({rows, cols}, shard(1, ds));
    for (int round = 0; round < 3; ++round) {
      assign(b, a * float(round + 1), par);
      if (round == 1) {
        for (Device d : ds) synchronize(d);
      } else {
        synchronize();
      }
      const float f = float(round + 1);
      std::vector<float> want(v.size());
      for (std::size_t i = 0; i < v.size(); ++i) want[i] = v[i] * f;
      const std::string bad = read_shards(b, boxes(rows, cols, shard(1, ds), ds), want, rows);
      CHECK_MESSAGE(bad.empty(), "round " << round << ": " << bad);
    }
  }
  synchronize();  // with nothing queued
}

TEST_CASE("DeviceScope sets current_device() and restores it") {
  if (tessera_test::skip_without_gpu()) return;
  const Device outside = current_device();
  if (!device_sets().empty()) CHECK(outside == devices().front());
  for (const auto& ds : device_sets()) {
    INFO("device set " << set_name(ds));
    for (Device d : ds) {
      {
        DeviceScope scope(d);
        CHECK(current_device() == d);
        {
          DeviceScope inner(ds.front());
          CHECK(current_device() == ds.front());
          // Work inside a scope runs on each shard's own device and leaves the scope alone.
          auto x = from_host(std::vector<float>{1, 2, 3, 4, 5}, {5}, shard(0, ds));
          Array<float, 1> y = x + 1.f;
          CHECK(to_host(y) == std::vector<float>{2, 3, 4, 5, 6});
          CHECK(current_device() == ds.front());
        }
        CHECK(current_device() == d);
        // The current device is per thread.
        Device seen;
        std::thread([&] { seen = current_device(); }).join();
        CHECK(seen == outside);
      }
      CHECK(current_device() == outside);
    }
  }
  // A bad device is refused with a tessera error and changes nothing.
  CHECK_THROWS_AS(DeviceScope(Device(1 << 20)), tessera::error);
  CHECK(current_device() == outside);
  CHECK_THROWS_AS(DeviceScope(Device(-5)), tessera::error);
  CHECK(current_device() == outside);
  if (!device_sets().empty()) {
    // By index into devices(): past the end is refused the same way.
    const int past = static_cast<int>(devices().size()) + 3;
    CHECK_THROWS_AS(DeviceScope{past}, tessera::error);
    CHECK(current_device() == outside);
  }
}

TEST_CASE("errors leave every array intact and the library usable") {
  for (const auto& ds : device_sets()) {
    INFO("device set " << set_name(ds));
    const auto va = random_values<float>(7 * 5), vw = random_values<float>(4 * 5);
    auto a = from_host(va, {7, 5}, shard(1, ds));
    auto wrong = from_host(vw, {4, 5}, shard(1, ds));
    Array<float, 2> c({7, 5}, shard(1, ds));
    c = 3.f;
    // Shapes that do not broadcast.
    CHECK_THROWS_AS(c = a + wrong, dimension_mismatch);
    CHECK_THROWS_AS(assign(c, a * wrong, seq), dimension_mismatch);
    // Placements that do not match (sharded along another dimension), on multi-device sets.
    if (ds.size() > 1) {
      auto other = from_host(va, {7, 5}, shard(0, ds));
      CHECK_THROWS_AS(c = a + other, placement_mismatch);
      CHECK_THROWS_AS(assign(c, a - other, par), placement_mismatch);
    }
    // Bad views, bad at(), bad host_data, bad from_host, a refused allocation.
    CHECK_THROWS_AS(a(range(0, 9), _), out_of_bounds);
    CHECK_THROWS_AS(a.at(7, 0), out_of_bounds);
    CHECK_THROWS_AS(a.host_data(static_cast<int>(ds.size())), out_of_bounds);
    CHECK_THROWS_AS(from_host(va, {6, 5}, shard(1, ds)), invalid_argument);
    CHECK_THROWS_AS(zeros<float>({index_t(1) << 40, 1024}, shard(1, ds)), out_of_memory);
    // Everything is intact.
    CHECK(to_host(a) == va);
    CHECK(to_host(wrong) == vw);
    CHECK(to_host(c) == std::vector<float>(35, 3.f));
    // And the library still computes.
    c = a * 2.f + 1.f;
    std::vector<double> want(va.size());
    for (std::size_t i = 0; i < va.size(); ++i) want[i] = 2.0 * va[i] + 1.0;
    check_all_close(to_host(c), want);
    assign(c(_, range(1, 5, 2)), a(_, range(1, 5, 2)) - 1.f, seq);
    CHECK(c.at(3, 1) == va[3 + 7 * 1] - 1.f);
    CHECK(c.at(3, 2) == 2.f * va[3 + 7 * 2] + 1.f);
  }
}

// The GPU memory cache (backend/runtime/pool.cpp): a dead array's block goes to its device's
// cache and the next array of its size class takes it, ordered after every kernel that still
// reads it; cached blocks never make a request fail; reclaim() empties the caches. Host devices
// cache nothing.
TEST_CASE("dead arrays' GPU memory is cached, reused in stream order, and never causes out_of_memory") {
  namespace rt = tessera::detail::rt;
  for (const auto& ds : device_sets()) {
    INFO("device set " << set_name(ds));
    const index_t n = (index_t(1) << 20) + 3;
    const auto v = random_values<float>(static_cast<std::size_t>(n));
    const auto a = from_host(v, {n}, shard(0, ds));
    std::vector<Array<float, 1>> kept;
    std::vector<float> scale;
    // Each round's temporary dies while the kernels reading it are still queued; the next
    // round's arrays take its block and overwrite it.
    for (int round = 0; round < 6; ++round) {
      Array<float, 1> t = a * float(round + 1);
      kept.push_back(t + 0.5f);
      scale.push_back(float(round + 1));
    }
    for (std::size_t r = 0; r < kept.size(); ++r) {
      const auto got = to_host(kept[r]);
      bool ok = true;
      for (std::size_t i = 0; i < got.size() && ok; ++i) ok = got[i] == v[i] * scale[r] + 0.5f;
      CHECK_MESSAGE(ok, "round " << r);
    }
    kept.clear();
    std::size_t cached = 0;
    for (Device d : ds) cached += rt::pool_bytes(d.id());
    const char* pool_env = std::getenv("TESSERA_MEMORY_POOL");
    const bool pool_on = pool_env == nullptr || std::string(pool_env) != "0";
    if (ds[0].is_host() || !pool_on) CHECK(cached == 0);
    else CHECK(cached >= static_cast<std::size_t>(n) * sizeof(float));
    // Host-touched blocks come back resident: written by the host, freed, reused by a kernel.
    for (int round = 0; round < 3; ++round) {
      Array<float, 1> h({n}, on(ds[0]));
      float* p = h.host_data(0);
      for (index_t i = 0; i < n; ++i) p[i] = float(i % 7);
      Array<float, 1> g = h * 2.f;
      const auto got = to_host(g);
      CHECK(got[static_cast<std::size_t>(n - 1)] == float(((n - 1) % 7) * 2));
      CHECK(got[5] == 10.f);
    }
    // A request that fits only once the cache is emptied succeeds.
    if (!ds[0].is_host() && pool_on) {
      const int id = ds[0].id();
      std::size_t free = 0, total = 0;
      rt::memory_info(id, free, total);
      const index_t big = static_cast<index_t>(free / 4 / sizeof(float));
      { Array<float, 1> b({big}, on(ds[0]), memory::device); }
      CHECK(rt::pool_bytes(id) >= static_cast<std::size_t>(big) * sizeof(float));
      std::size_t free2 = 0;
      rt::memory_info(id, free2, total);
      const std::size_t ask = free2 + static_cast<std::size_t>(big) * sizeof(float) / 2;
      CHECK_NOTHROW(rt::check_free(id, ask));
      CHECK(rt::pool_bytes(id) == 0);
    }
    reclaim();
    for (Device d : ds) CHECK(rt::pool_bytes(d.id()) == 0);
  }
}
