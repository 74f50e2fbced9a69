// SPDX-License-Identifier: Apache-2.0
// DLPack: to_dlpack of single-device arrays and views (every element type, both memory kinds, host
// devices and GPUs) checked field by field and read through the exported pointer; from_dlpack of
// tensors built here over host vectors (C order, Fortran order, negative strides, byte offsets),
// writes through the view reaching the tensor, the deleter called once after the last Tessera
// reference; round trips sharing one buffer; bad tensors named and left to their caller. Skipped
// visibly where the DLPack header is not installed.
#include "test_support.hpp"

#if !defined(TESSERA_HAS_DLPACK)
TEST_CASE("DLPack (skipped)") { MESSAGE("SKIPPED: <dlpack/dlpack.h> not found (Debian: apt-get install libdlpack-dev)"); }
#else

#include <cstring>
#include <optional>
#include <vector>

using namespace tessera_test;

namespace {

// A DLPack tensor over host memory made by a "producer": counts its deleter's calls.
struct producer {
  std::vector<unsigned char> bytes;
  std::vector<std::int64_t> shape, strides;
  DLManagedTensor tensor{};
  int released = 0;

  producer(DLDataType dtype, std::vector<std::int64_t> shp, std::vector<std::int64_t> str, std::size_t n_bytes)
      : bytes(n_bytes), shape(std::move(shp)), strides(std::move(str)) {
    tensor.dl_tensor.data = bytes.data();
    tensor.dl_tensor.device = {kDLCPU, 0};
    tensor.dl_tensor.ndim = static_cast<std::int32_t>(shape.size());
    tensor.dl_tensor.dtype = dtype;
    tensor.dl_tensor.shape = shape.data();
    tensor.dl_tensor.strides = strides.empty() ? nullptr : strides.data();
    tensor.manager_ctx = this;
    tensor.deleter = [](DLManagedTensor* self) { ++static_cast<producer*>(self->manager_ctx)->released; };
  }
  template <class T>
  T* data() {
    return reinterpret_cast<T*>(bytes.data());
  }
};

template <class T>
DLDataType dl_type() {
  return detail::dlpack::dtype_of<T>();
}

template <class T>
void export_one(const DeviceSet& ds, memory m) {
  const index_t rows = 7, cols = 5;
  const auto v = random_values<T>(static_cast<std::size_t>(rows * cols));
  const Device d = ds.back();
  DLManagedTensor* t = nullptr;
  {
    const Array<T, 2> a = from_host(v, {rows, cols}, on(d), m);
    t = to_dlpack(a);
  }  // the array is gone; the tensor keeps its storage
  REQUIRE(t != nullptr);
  const DLTensor& x = t->dl_tensor;
  CHECK(x.ndim == 2);
  CHECK(x.shape[0] == rows);
  CHECK(x.shape[1] == cols);
  CHECK(x.strides[0] == 1);  // column-major
  CHECK(x.strides[1] == rows);
  CHECK(x.byte_offset == 0);
  CHECK(x.dtype.code == dl_type<T>().code);
  CHECK(x.dtype.bits == 8 * sizeof(T));
  CHECK(x.dtype.lanes == 1);
  if (d.is_host()) {
    CHECK(x.device.device_type == kDLCPU);
    CHECK(x.device.device_id == 0);
  } else {
    CHECK(x.device.device_type == (m == memory::unified ? kDLCUDAManaged : kDLCUDA));
    CHECK(x.device.device_id == d.ordinal());
  }
  // A consumer reads through the pointer (host memory and managed memory are host-readable).
  if (d.is_host() || m == memory::unified) {
    const T* p = static_cast<const T*>(x.data);
    for (index_t j = 0; j < cols; ++j)
      for (index_t i = 0; i < rows; ++i) CHECK(p[i * x.strides[0] + j * x.strides[1]] == v[i + j * rows]);
  }
  // Labelled for PyTorch, which refuses kDLCUDAManaged: kDLCUDA on a GPU, kDLCPU on the host.
  {
    const Array<T, 2> a = from_host(v, {rows, cols}, on(d), m);
    DLManagedTensor* c = to_dlpack(a, dlpack_unified_as::cuda);
    CHECK(c->dl_tensor.device.device_type == (d.is_host() ? kDLCPU : kDLCUDA));
    c->deleter(c);
  }
  // Back into Tessera: the same memory, the same values.
  const View<T, 2> back = from_dlpack<T, 2>(t);
  CHECK(back.devices() == DeviceSet{d.is_host() ? host_devices(1)[0] : d});
  CHECK(back.memory_kind() == (d.is_host() ? memory::unified : m));
  CHECK(back.layout().parts[0].ptr == x.data);
  check_equal(to_host(back), v);
}

}  // namespace

TEST_CASE("to_dlpack exports a single-device array of every element type, and from_dlpack takes it back") {
  for (const auto& ds : device_sets()) {
    for (memory m : {memory::unified, memory::device}) {
      INFO(set_name(ds) << (m == memory::unified ? ", unified" : ", device"));
      export_one<float>(ds, m);
      export_one<double>(ds, m);
      export_one<i32>(ds, m);
      export_one<i64>(ds, m);
      export_one<bool>(ds, m);
      export_one<half>(ds, m);      // kDLFloat 16
      export_one<bfloat16>(ds, m);  // kDLBfloat 16
    }
  }
}

TEST_CASE("exported views carry their strides and offset; the round trip shares storage") {
  for (const auto& ds : device_sets()) {
    INFO(set_name(ds));
    const index_t m = 9, n = 6;
    const auto v = random_values<float>(static_cast<std::size_t>(m * n));
    Array<float, 2> a = from_host(v, {m, n}, on(ds.front()));
    auto view = a(range(m - 1, 0, -2), range(1, n));
    DLManagedTensor* t = to_dlpack(view);
    CHECK(t->dl_tensor.shape[0] == 4);
    CHECK(t->dl_tensor.shape[1] == n - 1);
    CHECK(t->dl_tensor.strides[0] == -2);
    CHECK(t->dl_tensor.strides[1] == m);
    CHECK(t->dl_tensor.data == static_cast<const void*>(a.layout().parts[0].ptr + (m - 1) + m));
    View<float, 2> w = from_dlpack<float, 2>(t);
    check_equal(to_host(w), to_host(view));
    w = 3.f;  // writes reach a's storage
    CHECK(a.at(m - 1, 1) == 3.f);
    CHECK(a.at(m - 2, 1) == v[static_cast<std::size_t>(m - 2 + m)]);
    // 0-d
    const Array<double, 0> s = from_host(std::vector<double>{4.5}, std::array<index_t, 0>{}, on(ds.front()));
    DLManagedTensor* ts = to_dlpack(s);
    CHECK(ts->dl_tensor.ndim == 0);
    CHECK(from_dlpack<double, 0>(ts).at() == 4.5);
  }
}

TEST_CASE("to_dlpack refuses arrays of several parts, naming the placement") {
  for (const auto& ds : multi_device_sets()) {
    const auto a = zeros<float>({4, 8}, shard(1, ds));
    check_mentions(expect_error<invalid_argument>([&] { (void)to_dlpack(a); }),
                   {"one part", std::to_string(ds.size()), "sharded along dim 1", "copy(a, on(device))"});
    check_mentions(expect_error<invalid_argument>([&] { (void)to_dlpack(zeros<float>({3}, replicate(ds))); }),
                   {"replicated"});
  }
  check_mentions(expect_error<invalid_argument>([&] { (void)to_dlpack(Array<float, 1>()); }), {"default-constructed"});
}

TEST_CASE("from_dlpack wraps a producer's memory without a copy and releases it after the last reference") {
  // 3 x 4 float in C order (null strides): x[i][j] = 10 i + j.
  producer p(dl_type<float>(), {3, 4}, {}, 12 * sizeof(float));
  for (int i = 0; i < 12; ++i) p.data<float>()[i] = static_cast<float>(10 * (i / 4) + i % 4);
  {
    std::optional<View<float, 2>> v = from_dlpack<float, 2>(&p.tensor);
    CHECK(v->shape() == Shape<2>{3, 4});
    CHECK(v->devices() == host_devices(1));
    for (index_t i = 0; i < 3; ++i)
      for (index_t j = 0; j < 4; ++j) CHECK(v->at(i, j) == 10.f * i + j);
    CHECK(sum(*v) == doctest::Approx(4 * (0 + 10 + 20) + 3 * (0 + 1 + 2 + 3)));
    (*v)(1, _) = -1.f;  // writes reach the producer's memory
    for (int j = 0; j < 4; ++j) CHECK(p.data<float>()[4 + j] == -1.f);
    auto e = *v * 2.f;  // a lazy expression shares ownership
    std::optional<View<float, 2>> second = *v;
    v.reset();
    second.reset();
    CHECK(p.released == 0);
    CHECK(to_host(eval(e))[1] == -2.f);
  }
  CHECK(p.released == 1);

  // Fortran-order strides, a byte offset and negative strides.
  producer q(dl_type<i64>(), {4}, {-1}, 6 * sizeof(i64));
  for (int i = 0; i < 6; ++i) q.data<i64>()[i] = i;
  q.tensor.dl_tensor.byte_offset = 4 * sizeof(i64);  // starts at element 4, walks back
  check_equal(to_host(from_dlpack<i64, 1>(&q.tensor)), std::vector<i64>{4, 3, 2, 1});
  CHECK(q.released == 1);

  // bool: DLPack's bool, or uint8 as PyTorch 1.x exported it.
  producer b(DLDataType{kDLUInt, 8, 1}, {3}, {}, 3);
  b.bytes = {1, 0, 1};
  b.tensor.dl_tensor.data = b.bytes.data();
  CHECK(to_host(from_dlpack<bool, 1>(&b.tensor)) == std::vector<bool>{true, false, true});

  // An empty tensor: nothing to keep, released at once.
  producer z(dl_type<double>(), {0, 5}, {}, 0);
  const auto ev = from_dlpack<double, 2>(&z.tensor);
  CHECK(ev.shape() == Shape<2>{0, 5});
  CHECK(z.released == 1);
}

TEST_CASE("from_dlpack names bad tensors and leaves them to the caller") {
  producer p(dl_type<double>(), {2, 3}, {}, 6 * sizeof(double));
  auto fails = [&](auto&& f, const std::vector<std::string>& words) {
    check_mentions(expect_error<invalid_argument>(f), words);
    CHECK(p.released == 0);
  };
  fails([&] { (void)from_dlpack<double, 3>(&p.tensor); }, {"rank mismatch", "rank 3", "rank 2"});
  fails([&] { (void)from_dlpack<float, 2>(&p.tensor); }, {"dtype mismatch", "float32", "float64"});
  fails([&] { (void)from_dlpack<i64, 2>(&p.tensor); }, {"int64", "float64"});
  fails([&] { (void)from_dlpack<bool, 2>(&p.tensor); }, {"uint8", "float64"});
  fails([&] { (void)from_dlpack<double, 2>(nullptr); }, {"null"});
  p.tensor.dl_tensor.device = {kDLCUDA, 57};
  fails([&] { (void)from_dlpack<double, 2>(&p.tensor); }, {"kDLCUDA 57", "cuda:57", "does not know"});
  p.tensor.dl_tensor.device = {kDLOpenCL, 0};
  fails([&] { (void)from_dlpack<double, 2>(&p.tensor); }, {"unsupported device", "device type 4", "kDLCPU"});
  p.tensor.dl_tensor.device = {kDLCPU, 0};
  p.tensor.dl_tensor.byte_offset = 3;
  fails([&] { (void)from_dlpack<double, 2>(&p.tensor); }, {"aligned to 8"});
  p.tensor.dl_tensor.byte_offset = 0;
  p.shape[1] = -3;
  fails([&] { (void)from_dlpack<double, 2>(&p.tensor); }, {"extents >= 0", "-3"});
}

#endif
