// SPDX-License-Identifier: Apache-2.0
// The runtime: device table, default set, topology, memory, transfers, residency, DeviceScope.
#include <doctest/doctest.h>

#include <tessera/device.hpp>
#include <backend/runtime/runtime.hpp>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <new>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

namespace rt = tessera::detail::rt;
using tessera::Device;
using tessera::DeviceSet;
using tessera::memory;

namespace {

bool cuda_variant() {
  const char* b = std::getenv("TESSERA_BACKEND");
  return b != nullptr && std::string(b) == "cuda";
}

// True (after a visible skip message) when this is the .cuda variant and no GPU is visible.
bool skip_without_gpu() {
  if (cuda_variant() && tessera::gpus().empty()) {
    MESSAGE("SKIPPED: no GPU visible");
    return true;
  }
  return false;
}

// The default devices plus three host devices, each once.
DeviceSet devices_under_test() {
  DeviceSet out = tessera::devices();
  for (Device h : tessera::host_devices(3))
    if (std::find(out.begin(), out.end(), h) == out.end()) out.push_back(h);
  return out;
}

std::vector<unsigned char> random_bytes(std::size_t n, std::uint64_t seed) {
  std::vector<unsigned char> v(n);
  std::mt19937_64 gen(seed);
  std::size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const std::uint64_t x = gen();
    std::memcpy(v.data() + i, &x, 8);
  }
  for (; i < n; ++i) v[i] = static_cast<unsigned char>(gen());
  return v;
}

}  // namespace

TEST_CASE("devices() follows TESSERA_BACKEND") {
  if (skip_without_gpu()) {
    CHECK_THROWS_AS(tessera::devices(), tessera::error);
    try {
      (void)tessera::devices();
    } catch (const tessera::error& e) {
      CHECK(std::string(e.what()).find("TESSERA_BACKEND=cuda") != std::string::npos);
    }
    return;
  }
  const DeviceSet ds = tessera::devices();
  REQUIRE_FALSE(ds.empty());
  std::set<int> ids;
  for (Device d : ds) {
    ids.insert(d.id());
    CHECK(d.name() == (d.is_host() ? "host:" : "cuda:") + std::to_string(d.ordinal()));
    if (cuda_variant()) CHECK(d.kind() == tessera::device_kind::cuda);
    if (!cuda_variant() && std::getenv("TESSERA_BACKEND") != nullptr) CHECK(d.is_host());
  }
  CHECK(ids.size() == ds.size());
  CHECK(tessera::cuda_backend() == (ds.front().kind() == tessera::device_kind::cuda));
  if (!tessera::gpus().empty() && !ds.front().is_host()) CHECK(ds == tessera::gpus());
  if (!rt::built_with_cuda()) CHECK(tessera::gpus().empty());
}

TEST_CASE("host_devices(n) are distinct host devices named host:i") {
  std::set<int> all;
  for (int n = 1; n <= 8; ++n) {
    const DeviceSet hs = tessera::host_devices(n);
    REQUIRE(hs.size() == static_cast<std::size_t>(n));
    std::set<int> ids;
    for (int i = 0; i < n; ++i) {
      const Device d = hs[static_cast<std::size_t>(i)];
      CHECK(d.is_host());
      CHECK(d.ordinal() == i);
      CHECK(d.name() == "host:" + std::to_string(i));
      CHECK(rt::info(d.id()).name == "host:" + std::to_string(i));
      CHECK(d.id() >= static_cast<int>(tessera::gpus().size()));
      ids.insert(d.id());
      all.insert(d.id());
    }
    CHECK(ids.size() == static_cast<std::size_t>(n));
  }
  CHECK(all.size() == 8);  // host_devices(n) is a prefix of host_devices(n + 1)
  CHECK(rt::device_count() >= static_cast<int>(tessera::gpus().size()) + 8);
  CHECK(tessera::host_devices(0).empty());
  CHECK_THROWS_AS(tessera::host_devices(-1), tessera::invalid_argument);
  CHECK_THROWS_AS(tessera::host_devices(rt::max_host_devices + 1), tessera::invalid_argument);
  CHECK_THROWS_AS(Device().kind(), tessera::invalid_argument);
  CHECK_THROWS_AS(rt::info(rt::device_count()), tessera::invalid_argument);
}

TEST_CASE("host devices can be created from several threads at once") {
  std::vector<std::thread> threads;
  std::vector<DeviceSet> got(8);
  for (int t = 0; t < 8; ++t)
    threads.emplace_back([t, &got] { got[static_cast<std::size_t>(t)] = tessera::host_devices(8 + t); });
  for (auto& th : threads) th.join();
  const DeviceSet all = tessera::host_devices(15);
  for (int t = 0; t < 8; ++t)
    CHECK(std::equal(got[static_cast<std::size_t>(t)].begin(), got[static_cast<std::size_t>(t)].end(), all.begin()));
}

TEST_CASE("print_topology prints every device") {
  (void)tessera::host_devices(8);
  std::ostringstream os;
  tessera::print_topology(os);
  const std::string out = os.str();
  MESSAGE(out);
  for (int id = 0; id < rt::device_count(); ++id) CHECK(out.find(rt::info(id).name) != std::string::npos);
  if (!tessera::host_devices(1).empty()) CHECK(out.find("memcpy (host)") != std::string::npos);
  if (tessera::gpus().size() > 1) CHECK(out.find("cuda:0 -> cuda:1") != std::string::npos);
}

TEST_CASE("an absurd request is refused with out_of_memory before allocating") {
  if (skip_without_gpu()) return;
  constexpr std::size_t absurd = std::size_t(1) << 60;
  for (Device d : devices_under_test()) {
    CAPTURE(d.name());
    std::size_t free = 0, total = 0;
    rt::memory_info(d.id(), free, total);
    CHECK(total > 0);
    CHECK(free <= total);
    CHECK_NOTHROW(rt::check_free(d.id(), 0));
    CHECK_NOTHROW(rt::check_free(d.id(), 1));
    bool thrown = false;
    try {
      rt::check_free(d.id(), absurd);
    } catch (const tessera::out_of_memory& e) {
      thrown = true;
      const std::string msg = e.what();
      CHECK(e.requested_bytes == absurd);
      CHECK(e.device_id == d.id());
      CHECK(e.total_bytes > 0);
      CHECK(e.free_bytes <= e.total_bytes);
      CHECK(msg.find(std::to_string(absurd)) != std::string::npos);
      CHECK(msg.find(std::to_string(e.free_bytes)) != std::string::npos);
      CHECK(msg.find(std::to_string(e.total_bytes)) != std::string::npos);
      CHECK(msg.find("device " + std::to_string(d.id())) != std::string::npos);
      CHECK(msg.find(rt::info(d.id()).name) != std::string::npos);
    }
    CHECK(thrown);
    CHECK_THROWS_AS(rt::allocate(d.id(), absurd, memory::unified), tessera::out_of_memory);
    CHECK_THROWS_AS(rt::allocate(d.id(), absurd, memory::device), tessera::out_of_memory);
    // The library keeps working after the refusal.
    void* p = rt::allocate(d.id(), 64, memory::unified);
    CHECK(p != nullptr);
    rt::deallocate(d.id(), p, 64, memory::unified);
  }
}

TEST_CASE("allocate and deallocate small sizes") {
  if (skip_without_gpu()) return;
  for (Device d : devices_under_test()) {
    for (memory kind : {memory::unified, memory::device}) {
      for (std::size_t bytes : {std::size_t(0), std::size_t(1), std::size_t(4097)}) {
        CAPTURE(d.name());
        CAPTURE(bytes);
        void* p = rt::allocate(d.id(), bytes, kind);
        CHECK((p == nullptr) == (bytes == 0));
        CHECK(reinterpret_cast<std::uintptr_t>(p) % 256 == 0);
        if (p != nullptr && d.is_host()) std::memset(p, 0x5a, bytes);
        rt::deallocate(d.id(), p, bytes, kind);
      }
    }
    rt::deallocate(d.id(), nullptr, 0, memory::unified);
    rt::buffer b(d.id(), 4097, memory::unified);
    CHECK(b.ptr != nullptr);
    CHECK_FALSE(b.host_touched.load());
  }
}

namespace {

// Copies a width x height region host -> device -> host through pitched buffers and checks
// the bytes, and that the destination's padding between rows is left alone.
void round_trip(Device d, memory kind, std::size_t width, std::size_t height, std::size_t dev_pitch,
                std::size_t src_pitch, std::size_t dst_pitch, std::uint64_t seed) {
  CAPTURE(d.name());
  CAPTURE(width);
  CAPTURE(height);
  CAPTURE(dev_pitch);
  const std::vector<unsigned char> src = random_bytes(src_pitch * height, seed);
  std::vector<unsigned char> dst(dst_pitch * height, 0xab);
  rt::buffer dev(d.id(), dev_pitch * height, kind);
  rt::copy_from_host(d.id(), dev.ptr, dev_pitch, src.data(), src_pitch, width, height);
  rt::copy_to_host(d.id(), dst.data(), dst_pitch, dev.ptr, dev_pitch, width, height);
  bool rows_equal = true, padding_kept = true;
  for (std::size_t r = 0; r < height; ++r) {
    rows_equal = rows_equal && std::memcmp(dst.data() + r * dst_pitch, src.data() + r * src_pitch, width) == 0;
    for (std::size_t c = width; c < dst_pitch; ++c) padding_kept = padding_kept && dst[r * dst_pitch + c] == 0xab;
  }
  CHECK(rows_equal);
  CHECK(padding_kept);
}

}  // namespace

TEST_CASE("copy_from_host / copy_to_host round trip") {
  if (skip_without_gpu()) return;
  const std::size_t mib = std::size_t(1) << 20;
  static_assert(rt::staging_chunk_bytes < 40 * (std::size_t(1) << 20) / 2, "the large cases must take >2 chunks");
  for (Device d : devices_under_test()) {
    for (memory kind : {memory::unified, memory::device}) {
      CAPTURE(static_cast<int>(kind));
      // Empty regions are no-ops, whatever the pointers.
      rt::copy_from_host(d.id(), nullptr, 0, nullptr, 0, 0, 5);
      rt::copy_to_host(d.id(), nullptr, 0, nullptr, 0, 7, 0);
      round_trip(d, kind, 1, 1, 1, 1, 1, 1);
      round_trip(d, kind, 1, 7, 3, 5, 2, 2);
      round_trip(d, kind, 13, 9, 16, 21, 13, 3);
      round_trip(d, kind, 13, 9, 13, 13, 13, 4);  // contiguous: folded into one row
      round_trip(d, kind, 40 * mib + 3, 1, 40 * mib + 3, 40 * mib + 3, 40 * mib + 3, 5);
      round_trip(d, kind, 4099, 10000, 4352, 4111, 4104, 6);          // ~41 MB of pitched rows
      round_trip(d, kind, 20 * mib + 1, 2, 20 * mib + 256, 20 * mib + 7, 20 * mib + 1, 7);  // rows > a chunk
    }
    rt::buffer b(d.id(), 64, memory::device);
    unsigned char host[64] = {};
    CHECK_THROWS_AS(rt::copy_to_host(d.id(), host, 8, b.ptr, 4, 8, 2), tessera::invalid_argument);
  }
}

TEST_CASE("host_access and make_resident on unified buffers") {
  if (skip_without_gpu()) return;
  for (Device d : devices_under_test()) {
    CAPTURE(d.name());
    constexpr std::size_t n = 1024;
    rt::buffer b(d.id(), n * sizeof(int), memory::unified);
    rt::make_resident(b);  // flag clear: nothing to do
    CHECK_FALSE(b.host_touched.load());
    int* p = static_cast<int*>(rt::host_access(b));
    CHECK(p == b.ptr);
    CHECK(b.host_touched.load() == !d.is_host());
    for (std::size_t i = 0; i < n; ++i) p[i] = static_cast<int>(3 * i + 1);
    rt::make_resident(b);
    CHECK_FALSE(b.host_touched.load());
    tessera::synchronize(d);
    std::vector<int> back(n);
    rt::copy_to_host(d.id(), back.data(), 0, b.ptr, 0, n * sizeof(int), 1);
    bool ok = true;
    for (std::size_t i = 0; i < n; ++i) ok = ok && back[i] == static_cast<int>(3 * i + 1);
    CHECK(ok);
    // A second access after the prefetch sees the same data.
    p = static_cast<int*>(rt::host_access(b));
    CHECK(p[n - 1] == static_cast<int>(3 * (n - 1) + 1));
    rt::make_resident(b);

    rt::buffer dev(d.id(), 256, memory::device);
    if (d.is_host()) {
      CHECK(rt::host_access(dev) == dev.ptr);
    } else {
      CHECK_THROWS_WITH_AS(rt::host_access(dev), doctest::Contains("to_host"), tessera::invalid_argument);
    }
  }
}

TEST_CASE("DeviceScope sets and restores current_device()") {
  if (skip_without_gpu()) return;
  const DeviceSet ds = tessera::devices();
  CHECK(tessera::current_device() == ds.front());
  const DeviceSet hs = tessera::host_devices(2);
  {
    tessera::DeviceScope outer(hs[1]);
    CHECK(tessera::current_device() == hs[1]);
    {
      tessera::DeviceScope inner(hs[0]);
      CHECK(tessera::current_device() == hs[0]);
    }
    CHECK(tessera::current_device() == hs[1]);
    // The current device is per thread.
    Device seen;
    std::thread([&seen] { seen = tessera::current_device(); }).join();
    CHECK(seen == ds.front());
  }
  CHECK(tessera::current_device() == ds.front());
  {
    tessera::DeviceScope by_index(static_cast<int>(ds.size()) - 1);
    CHECK(tessera::current_device() == ds.back());
  }
  CHECK(tessera::current_device() == ds.front());
  CHECK_THROWS_AS(tessera::DeviceScope(Device(rt::device_count() + 5)), tessera::invalid_argument);
  CHECK(tessera::current_device() == ds.front());

  const DeviceSet gs = tessera::gpus();
  if (gs.empty()) return;
  // The scope restores the thread's CUDA device as it was, not the default device.
  for (Device before : {gs.front(), gs.back()}) {
    rt::set_device(before.id());
    {
      tessera::DeviceScope scope(gs.back());
      CHECK(rt::get_cuda_device() == gs.back().ordinal());
      {
        tessera::DeviceScope inner(gs.front());
        CHECK(rt::get_cuda_device() == gs.front().ordinal());
        tessera::DeviceScope host(tessera::host_devices(1)[0]);
        CHECK(rt::get_cuda_device() == gs.front().ordinal());
      }
      CHECK(rt::get_cuda_device() == gs.back().ordinal());
    }
    CHECK(rt::get_cuda_device() == before.ordinal());
  }
}

TEST_CASE("streams, set_device, synchronize and check_launch") {
  if (skip_without_gpu()) return;
  for (Device d : devices_under_test()) {
    CAPTURE(d.name());
    CHECK((rt::stream(d.id()) == nullptr) == d.is_host());
    rt::set_device(d.id());
    rt::synchronize_device(d.id());
    tessera::synchronize(d);
    CHECK_NOTHROW(rt::check_launch(d.id(), 0, "nothing"));
  }
  tessera::synchronize();
  const DeviceSet gs = tessera::gpus();
  if (gs.empty()) {
    CHECK(rt::get_cuda_device() == -1);
    return;
  }
  const int before = rt::get_cuda_device();
  rt::set_device(gs.back().id());
  CHECK(rt::get_cuda_device() == gs.back().ordinal());
  rt::restore_cuda_device(before);
  CHECK(rt::get_cuda_device() == before);
  for (Device a : gs) {
    CHECK_FALSE(rt::can_access_peer(a.id(), a.id()));
    CHECK_FALSE(rt::can_access_peer(a.id(), tessera::host_devices(1)[0].id()));
  }
  // A runtime call on another device leaves the thread's device as it was.
  rt::set_device(gs.front().id());
  std::size_t free = 0, total = 0;
  rt::memory_info(gs.back().id(), free, total);
  CHECK(rt::get_cuda_device() == gs.front().ordinal());
}

namespace {
// Tasks for the job-list test: each run counts one hit; destroyed_tasks counts in-place
// destructions of the owning kind.
int destroyed_tasks = 0;
struct counting_task {
  int* hits;
};
struct owning_task {
  int* hits;
  ~owning_task() { ++destroyed_tasks; }
};
template <class T>
void run_counting(const void* t, int, int, bool) {
  ++*static_cast<const T*>(t)->hits;
}
void destroy_owning(void* t) { static_cast<owning_task*>(t)->~owning_task(); }
constexpr rt::task_type counting_type{sizeof(counting_task), run_counting<counting_task>, nullptr, nullptr, nullptr,
                                      false};
constexpr rt::task_type owning_type{sizeof(owning_task), run_counting<owning_task>, nullptr, nullptr, destroy_owning,
                                    false};
}  // namespace

// Job lists take their storage from a per-thread stack (no allocation per operation): a list
// reusing the storage of a larger one still holds exactly the jobs it asked room for, a list made
// while another is alive gets storage of its own, and tasks are destroyed with their list.
TEST_CASE("job lists: room for the jobs asked for, reused storage, nested lists apart") {
  const Device h = tessera::host_devices(1)[0];
  int hits = 0, expected = 0;
  for (const std::size_t cap : {std::size_t{4}, std::size_t{1}, std::size_t{3}, std::size_t{1}, std::size_t{0}}) {
    CAPTURE(cap);
    rt::job_list jobs(counting_type, cap);
    for (std::size_t i = 0; i < cap; ++i) new (jobs.add(h.id(), int(i), 1, rt::buffer_list{})) counting_task{&hits};
    CHECK_THROWS_WITH_AS(jobs.add(h.id(), 9, 1, rt::buffer_list{}), doctest::Contains("past its capacity"),
                         tessera::error);
    jobs.run(false);
    expected += static_cast<int>(cap);
    CHECK(hits == expected);
  }
  int outer = 0, inner = 0;
  {
    rt::job_list a(counting_type, 2);
    new (a.add(h.id(), 0, 1, rt::buffer_list{})) counting_task{&outer};
    {
      rt::job_list b(counting_type, 3);
      for (int i = 0; i < 3; ++i) new (b.add(h.id(), i, 1, rt::buffer_list{})) counting_task{&inner};
      b.run(false);
    }
    new (a.add(h.id(), 1, 1, rt::buffer_list{})) counting_task{&outer};
    a.run(false);
  }
  CHECK(outer == 2);
  CHECK(inner == 3);
  destroyed_tasks = 0;
  int owned = 0;
  for (int round = 0; round < 3; ++round) {
    rt::job_list jobs(owning_type, 2);
    new (jobs.add(h.id(), 0, 1, rt::buffer_list{})) owning_task{&owned};
    new (jobs.add(h.id(), 1, 1, rt::buffer_list{})) owning_task{&owned};
    jobs.run(false);
  }
  CHECK(owned == 6);
  CHECK(destroyed_tasks == 6);
}

#if defined(__CUDACC__)
// The runtime caches the thread's CUDA device and checks the current context against it (one
// cuCtxGetCurrent): a device the user made current behind that cache, with cudaSetDevice, must
// still be the current one after the runtime ran shards on any GPU.
TEST_CASE("run_shards leaves current the device the user set with cudaSetDevice") {
  if (skip_without_gpu()) return;
  const DeviceSet gs = tessera::gpus();
  if (gs.empty()) return;
  auto as_a_launch = [](const void*, int device, int, bool) { rt::set_device(device); };
  for (Device user : gs) {
    for (Device target : gs) {
      CAPTURE(user.name());
      CAPTURE(target.name());
      REQUIRE(cudaSetDevice(user.ordinal()) == cudaSuccess);
      const rt::shard_launch s{.device = target.id(), .shard = 0, .host = false, .n = 1, .run = +as_a_launch,
                               .task = nullptr};
      rt::run_shards(&s, 1, false);
      int now = -1;
      REQUIRE(cudaGetDevice(&now) == cudaSuccess);
      CHECK(now == user.ordinal());
      CHECK(rt::get_cuda_device() == user.ordinal());
    }
  }
}
#endif
