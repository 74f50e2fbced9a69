// SPDX-License-Identifier: Apache-2.0
// .npy files: save_npy/load_npy round trips on fresh random data for every element type, ranks
// 0-3, sizes 0, 1, odd, 2^k +- 1 and 2^20, every placement over 1, 2, 3 and 8 host devices (one
// and every GPU in the CUDA variant), halo'd arrays and views as sources; save_npy's bytes checked
// by an independent parser in this file; hand-written C-order and Fortran-order files (versions
// 1.0, 2.0, 3.0) loaded; safe dtype conversions; bad input named; NumPy itself when it is there.
#include "test_support.hpp"

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

using namespace tessera_test;
namespace fs = std::filesystem;

namespace {

// A fresh directory, removed with its files at the end of the test case.
struct scratch_dir {
  fs::path path;
  scratch_dir() {
    path = fs::temp_directory_path() / ("tessera_npy_" + std::to_string(rng()()));
    fs::create_directories(path);
  }
  ~scratch_dir() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
  fs::path operator/(const std::string& name) const { return path / name; }
};

std::string read_bytes(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), {}};
}
void write_bytes(const fs::path& p, const std::string& bytes) {
  std::ofstream out(p, std::ios::binary);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

// The raw bytes of column-major host values (bool as one byte each).
template <class T>
std::string bytes_of(const std::vector<T>& v) {
  std::string s;
  for (std::size_t i = 0; i < v.size(); ++i) {
    const T x = v[i];
    s.append(reinterpret_cast<const char*>(&x), sizeof(T));
  }
  return s;
}

template <class T>
const char* descr() {
  if constexpr (std::is_same_v<T, bool>) return "|b1";
  else if constexpr (std::is_same_v<T, i32>) return "<i4";
  else if constexpr (std::is_same_v<T, i64>) return "<i8";
  else if constexpr (std::is_same_v<T, float>) return "<f4";
  else return "<f8";
}

// -- an independent minimal reader of save_npy's output ------------------------------------------
struct parsed {
  int major = 0;
  std::string descr;
  bool fortran = false;
  Dims shape;
  std::size_t data_offset = 0;
  std::string data;
};

// Reads the fields by searching the dict text rather than tokenizing it, so that it shares no logic
// with the library's parser.
parsed parse_npy(const std::string& b) {
  parsed p;
  REQUIRE(b.size() >= 10);
  REQUIRE(b.compare(0, 6, std::string("\x93") + "NUMPY") == 0);
  p.major = static_cast<unsigned char>(b[6]);
  REQUIRE(b[7] == 0);
  std::size_t len = static_cast<unsigned char>(b[8]) | static_cast<std::size_t>(static_cast<unsigned char>(b[9])) << 8;
  std::size_t start = 10;
  if (p.major >= 2) {
    len |= static_cast<std::size_t>(static_cast<unsigned char>(b[10])) << 16 |
           static_cast<std::size_t>(static_cast<unsigned char>(b[11])) << 24;
    start = 12;
  }
  p.data_offset = start + len;
  CHECK(p.data_offset % 64 == 0);  // NumPy aligns the data to 64 bytes
  const std::string dict = b.substr(start, len);
  CHECK(dict.back() == '\n');
  const auto d = dict.find("'descr': '");
  REQUIRE(d != std::string::npos);
  p.descr = dict.substr(d + 10, 3);
  const auto f = dict.find("'fortran_order': ");
  REQUIRE(f != std::string::npos);
  p.fortran = dict.compare(f + 17, 4, "True") == 0;
  const auto s = dict.find("'shape': (");
  REQUIRE(s != std::string::npos);
  const std::string tuple = dict.substr(s + 10, dict.find(')', s) - s - 10);
  std::size_t i = 0;
  while (i < tuple.size()) {
    if (tuple[i] >= '0' && tuple[i] <= '9') {
      std::size_t used = 0;
      p.shape.push_back(std::stoll(tuple.substr(i), &used));
      i += used;
    } else {
      ++i;
    }
  }
  p.data = b.substr(p.data_offset);
  return p;
}

// -- hand-written files ----------------------------------------------------------------------
// A .npy file of `dict` (padded to 64 bytes as NumPy pads it) and `data`, in format `major`.0.
std::string npy_file(const std::string& dict, const std::string& data, int major = 1) {
  const std::size_t pre = major == 1 ? 10 : 12;
  const std::size_t total = (pre + dict.size() + 1 + 63) / 64 * 64, len = total - pre;
  std::string s = std::string("\x93") + "NUMPY";
  s += static_cast<char>(major);
  s += '\0';
  for (std::size_t k = 0; k < pre - 8; ++k) s += static_cast<char>((len >> (8 * k)) & 0xff);
  s += dict + std::string(total - pre - dict.size() - 1, ' ') + "\n";
  return s + data;
}

std::string dict_of(const std::string& descr, bool fortran, const Dims& shape) {
  std::string t = "(";
  for (std::size_t k = 0; k < shape.size(); ++k) t += (k ? ", " : "") + std::to_string(shape[k]);
  if (shape.size() == 1) t += ",";
  return "{'descr': '" + descr + "', 'fortran_order': " + (fortran ? "True" : "False") + ", 'shape': " + t + "), }";
}

// The C-order (row-major) bytes of column-major values `v` of `shape`.
template <class T>
std::vector<T> c_order(const std::vector<T>& v, const Dims& shape) {
  std::vector<T> out(v.size());
  const std::size_t n = shape.size();
  std::vector<index_t> idx(n, 0);
  for (std::size_t c = 0; c < v.size(); ++c) {
    // idx walks in C order: last index fastest
    index_t f = 0, stride = 1;
    for (std::size_t k = 0; k < n; ++k) f += idx[k] * stride, stride *= shape[k];
    out[c] = v[static_cast<std::size_t>(f)];
    for (std::size_t k = n; k-- > 0;) {
      if (++idx[k] < shape[k]) break;
      idx[k] = 0;
    }
  }
  return out;
}

template <class T>
std::vector<T> as_values(const std::string& bytes) {
  std::vector<T> out(bytes.size() / sizeof(T));
  for (std::size_t i = 0; i < out.size(); ++i) {
    T x;
    std::memcpy(&x, bytes.data() + i * sizeof(T), sizeof(T));
    out[i] = x;
  }
  return out;
}

// -- round trips ------------------------------------------------------------------------------
// test_support's make() for every element type (from_host's vector overload unpacks bool).
template <int N, class T>
Array<T, N> put_values(const std::vector<T>& v, const Dims& dims, const Placement& p) {
  return from_host<T, static_cast<std::size_t>(N)>(v, to_shape<N>(dims), p);
}

template <class T, int N>
void round_trip(const scratch_dir& dir, const DeviceSet& ds, const Dims& dims) {
  const auto v = random_values<T>(static_cast<std::size_t>(volume(dims)));
  const fs::path file = dir / "a.npy";
  auto ps = placements(N, ds);
  if (N == 0) ps = {{"replicate", replicate(ds)}, {"on", on(ds.back())}};
  const bool large = volume(dims) > 100000;
  for (const auto& from : ps) {
    if (large && from.name == "replicate") continue;
    INFO("saved from " << from.name << ", shape " << dims_string(dims));
    const Array<T, N> a = put_values<N, T>(v, dims, from.p);
    save_npy(file, a);
    const parsed p = parse_npy(read_bytes(file));
    CHECK(p.descr == descr<T>());
    CHECK(p.fortran);
    CHECK(p.shape == dims);
    CHECK(p.data == bytes_of(v));
    for (const auto& to : ps) {
      if (large && to.name != from.name) continue;
      INFO("loaded into " << to.name);
      const Array<T, N> b = load_npy<T, N>(file, to.p);
      CHECK(b.shape() == to_shape<N>(dims));
      check_replicas(b, v);
    }
  }
}

template <class T>
void round_trip_ranks(const scratch_dir& dir, const DeviceSet& ds) {
  INFO("element type " << descr<T>() << ", " << set_name(ds));
  round_trip<T, 0>(dir, ds, {});
  for (index_t n : sweep_sizes()) round_trip<T, 1>(dir, ds, {n});
  for (const Dims& d : {Dims{0, 5}, Dims{1, 1}, Dims{7, 33}, Dims{33, 7}, Dims{255, 257}, Dims{1024, 1024}})
    round_trip<T, 2>(dir, ds, d);
  for (const Dims& d : {Dims{3, 0, 2}, Dims{1, 1, 1}, Dims{5, 7, 3}, Dims{31, 2, 17}, Dims{2, 9, 65}})
    round_trip<T, 3>(dir, ds, d);
}

// The whole storage of every part, halo cells included (host devices and unified memory).
template <class T>
std::vector<std::vector<T>> storage_of(const Array<T, 2>& a) {
  std::vector<std::vector<T>> out;
  const auto& l = a.layout();
  for (int i = 0; i < static_cast<int>(l.parts.size()); ++i) {
    const auto& p = l.parts[static_cast<std::size_t>(i)];
    if (p.empty()) continue;
    const auto* base = static_cast<const T*>(a.host_data(i)) - (p.halo_lo[0] * p.stride[0] + p.halo_lo[1] * p.stride[1]);
    Shape<2> ext = p.extent;
    for (int k = 0; k < 2; ++k) ext[k] += p.halo_lo[k] + p.halo_hi[k];
    out.emplace_back(base, base + detail::volume<2>(ext));
  }
  return out;
}

}  // namespace

TEST_CASE("save_npy and load_npy round trip every element type, rank 0-3 and placement") {
  const scratch_dir dir;
  for (const auto& ds : device_sets()) {
    round_trip_ranks<float>(dir, ds);
    round_trip_ranks<double>(dir, ds);
    round_trip_ranks<i32>(dir, ds);
    round_trip_ranks<i64>(dir, ds);
    round_trip_ranks<bool>(dir, ds);
  }
}

TEST_CASE("files larger than a staging chunk move in several chunks, and in pieces of rows") {
  const scratch_dir dir;
  for (const auto& ds : device_sets()) {
    // 4.5 M floats in one file row (18 MB, above the 16 MiB chunk): each part moves in pieces.
    // 4097 x 1100 sharded along rows: 16 KB file rows, staged 1024 rows at a time.
    for (const Dims& dims : {Dims{4'500'001}, Dims{4097, 1100}}) {
      const auto v = random_values<float>(static_cast<std::size_t>(volume(dims)));
      for (int d = 0; d < static_cast<int>(dims.size()); ++d) {
        INFO(set_name(ds) << ", shape " << dims_string(dims) << ", shard(" << d << ")");
        if (dims.size() == 1) {
          save_npy(dir / "big.npy", put_values<1>(v, dims, shard(d, ds)));
          check_equal(to_host(load_npy<float, 1>(dir / "big.npy", on(ds.back()))), v);
        } else {
          save_npy(dir / "big.npy", put_values<2>(v, dims, shard(d, ds)));
          check_equal(to_host(load_npy<float, 2>(dir / "big.npy", shard(1 - d, ds))), v);
          check_equal(to_host(load_npy<float, 2>(dir / "big.npy", on(ds.back()))), v);
        }
        CHECK(parse_npy(read_bytes(dir / "big.npy")).data == bytes_of(v));
      }
    }
    const Dims dims{4097, 1100};
    const auto v = random_values<float>(static_cast<std::size_t>(volume(dims)));
    write_bytes(dir / "bigc.npy", npy_file(dict_of("<f4", false, dims), bytes_of(c_order(v, dims))));
    for (const Placement& p : {shard(0, ds), shard(1, ds), on(ds.back())}) {
      check_equal(to_host(load_npy<float, 2>(dir / "bigc.npy", p)), v);
    }
  }
}

TEST_CASE("memory::device arrays round trip, and load_npy honours the memory kind") {
  const scratch_dir dir;
  for (const auto& ds : device_sets()) {
    const Dims dims{37, 129};
    const auto v = random_values<double>(static_cast<std::size_t>(volume(dims)));
    const Array<double, 2> a = from_host(v, {37, 129}, shard(1, ds));
    const Array<double, 2> d = copy(a, shard(0, ds), memory::device);
    save_npy(dir / "d.npy", d);
    CHECK(as_values<double>(parse_npy(read_bytes(dir / "d.npy")).data) == v);
    const auto b = load_npy<double, 2>(dir / "d.npy", shard(0, ds), memory::device);
    CHECK(b.memory_kind() == memory::device);
    check_equal(to_host(b), v);
  }
}

TEST_CASE("halo cells never reach the file, and load_npy fills them as from_host does") {
  const scratch_dir dir;
  for (const auto& ds : multi_device_sets()) {
    for (int dim : {0, 1}) {
      for (const Dims& dims : {Dims{17, 9}, Dims{9, 17}, Dims{40, 33}}) {
        if (dims[static_cast<std::size_t>(dim)] < static_cast<index_t>(ds.size())) continue;
        INFO(set_name(ds) << ", shape " << dims_string(dims) << ", shard(" << dim << ", halo(1))");
        const auto v = random_values<float>(static_cast<std::size_t>(volume(dims)));
        const Placement p = shard(dim, halo(1), ds);
        const Array<float, 2> a = make<2, float>(v, dims, p);
        save_npy(dir / "h.npy", a);
        const std::string bytes = read_bytes(dir / "h.npy");
        const parsed f = parse_npy(bytes);
        CHECK(bytes.size() == f.data_offset + v.size() * sizeof(float));
        CHECK(as_values<float>(f.data) == v);
        const auto b = load_npy<float, 2>(dir / "h.npy", p);
        CHECK(halo_width(b) == 1);
        check_equal(to_host(b), v);
        CHECK(storage_of(b) == storage_of(a));
        // A C-order file of the same values fills the halo cells too.
        write_bytes(dir / "hc.npy", npy_file(dict_of("<f4", false, dims), bytes_of(c_order(v, dims))));
        CHECK(storage_of(load_npy<float, 2>(dir / "hc.npy", p)) == storage_of(a));
      }
    }
  }
}

TEST_CASE("views are saved with their own shape and values") {
  const scratch_dir dir;
  for (const auto& ds : device_sets()) {
    const index_t m = 13, n = 10, k = 6;
    const auto v = random_values<i64>(static_cast<std::size_t>(m * n * k));
    for (int d = 0; d < 3; ++d) {
      const Array<i64, 3> a = from_host(v, {m, n, k}, shard(d, ds));
      auto check = [&](const auto& view, const char* what) {
        INFO(set_name(ds) << ", sharded along " << d << ", view " << what);
        using V = std::remove_cvref_t<decltype(view)>;
        constexpr int R = V::rank;
        save_npy(dir / "v.npy", view);
        const parsed f = parse_npy(read_bytes(dir / "v.npy"));
        Dims want_shape(view.shape().begin(), view.shape().end());
        CHECK(f.shape == want_shape);
        const auto want = to_host(view);
        CHECK(as_values<i64>(f.data) == want);
        const Placement to = R == 0 ? replicate(ds) : shard(R - 1, ds);
        check_equal(to_host(load_npy<i64, R>(dir / "v.npy", to)), want);
      };
      check(a(range(1, m - 1), _, range(1, k)), "a(1:m-1, :, 1:k)");
      check(a(range(m - 1, -1, -2), range(0, n, 3), _), "reversed and stepped");
      check(a(4, _, _), "a(4, :, :)");
      check(a(_, 3, _), "a(:, 3, :)");
      check(a(_, _, 2), "a(:, :, 2)");
      check(permutedims(a, {2, 0, 1}), "permutedims(a, {2, 0, 1})");
      check(a(2, 3, 1), "a(2, 3, 1) (0-d)");
    }
    const Array<i64, 3> r = from_host(v, {m, n, k}, replicate(ds));
    save_npy(dir / "r.npy", r(_, range(2, 5), _));
    check_equal(to_host(load_npy<i64, 3>(dir / "r.npy")), to_host(r(_, range(2, 5), _)));
  }
}

TEST_CASE("hand-written Fortran-order and C-order files load with their values") {
  if (skip_without_gpu()) return;
  const scratch_dir dir;
  // 2 x 3 int32 with x[i][j] = 10 i + j, both orders, format versions 1.0, 2.0 and 3.0.
  const std::string f_data = bytes_of(std::vector<i32>{0, 10, 1, 11, 2, 12});
  const std::string c_data = bytes_of(std::vector<i32>{0, 1, 2, 10, 11, 12});
  for (int major : {1, 2, 3}) {
    write_bytes(dir / "f.npy", npy_file(dict_of("<i4", true, {2, 3}), f_data, major));
    write_bytes(dir / "c.npy", npy_file(dict_of("<i4", false, {2, 3}), c_data, major));
    for (const auto& ds : device_sets()) {
      for (const auto& p : placements(2, ds)) {
        INFO("version " << major << ".0, " << set_name(ds) << ", " << p.name);
        for (const char* name : {"f.npy", "c.npy"}) {
          const auto a = load_npy<i32, 2>(dir / name, p.p);
          REQUIRE(a.shape() == Shape<2>{2, 3});
          for (index_t i = 0; i < 2; ++i)
            for (index_t j = 0; j < 3; ++j) CHECK(a.at(i, j) == 10 * i + j);
        }
      }
    }
  }
  // 2 x 3 x 4 float64 with x[i][j][k] = 100 i + 10 j + k in C order, with the header spelled
  // differently (key order, double quotes, Python 2 longs, no trailing comma).
  std::vector<double> c3;
  for (int i = 0; i < 2; ++i)
    for (int j = 0; j < 3; ++j)
      for (int k = 0; k < 4; ++k) c3.push_back(100 * i + 10 * j + k);
  write_bytes(dir / "c3.npy", npy_file("{\"shape\": (2L, 3L, 4L), \"fortran_order\": False, \"descr\": \"<f8\"}",
                                      bytes_of(c3)));
  for (const auto& ds : device_sets()) {
    for (const auto& p : placements(3, ds)) {
      INFO(set_name(ds) << ", " << p.name);
      const auto a = load_npy<double, 3>(dir / "c3.npy", p.p);
      for (index_t i = 0; i < 2; ++i)
        for (index_t j = 0; j < 3; ++j)
          for (index_t k = 0; k < 4; ++k) CHECK(a.at(i, j, k) == 100 * i + 10 * j + k);
    }
  }
  // 0-d and 1-d files, and bool bytes other than 0 and 1 (any non-zero byte is true).
  write_bytes(dir / "s.npy", npy_file(dict_of("<f8", false, {}), bytes_of(std::vector<double>{2.5})));
  CHECK(load_npy<double, 0>(dir / "s.npy").at() == 2.5);
  write_bytes(dir / "b.npy", npy_file(dict_of("|b1", false, {4}), std::string("\x00\x01\x02\xff", 4)));
  CHECK(to_host(load_npy<bool, 1>(dir / "b.npy")) == std::vector<bool>{false, true, true, true});
}

TEST_CASE("C-order files of random values load transposed, on every placement") {
  const scratch_dir dir;
  for (const auto& ds : device_sets()) {
    for (const Dims& dims : {Dims{257, 129}, Dims{33, 7, 65}, Dims{1, 31, 2}, Dims{1024, 1024}, Dims{4, 0, 3}}) {
      const auto v = random_values<float>(static_cast<std::size_t>(volume(dims)));
      write_bytes(dir / "c.npy", npy_file(dict_of("<f4", false, dims), bytes_of(c_order(v, dims))));
      for (const auto& p : placements(static_cast<int>(dims.size()), ds, volume(dims) < 100000)) {
        INFO(set_name(ds) << ", shape " << dims_string(dims) << ", " << p.name);
        if (dims.size() == 2) {
          check_replicas(load_npy<float, 2>(dir / "c.npy", p.p), v);
        } else {
          check_replicas(load_npy<float, 3>(dir / "c.npy", p.p), v);
        }
      }
    }
  }
}

TEST_CASE("load_npy converts by NumPy's safe casting and refuses the rest") {
  if (skip_without_gpu()) return;
  const scratch_dir dir;
  const auto ints = random_values<i32>(101);
  write_bytes(dir / "i4.npy", npy_file(dict_of("<i4", true, {101}), bytes_of(ints)));
  check_equal(to_host(load_npy<i64, 1>(dir / "i4.npy")), std::vector<i64>(ints.begin(), ints.end()));
  check_equal(to_host(load_npy<double, 1>(dir / "i4.npy")), std::vector<double>(ints.begin(), ints.end()));
  const auto floats = random_values<float>(33);
  write_bytes(dir / "f4.npy", npy_file(dict_of("<f4", false, {3, 11}), bytes_of(c_order(floats, {3, 11}))));
  for (const auto& ds : device_sets()) {
    const auto d = load_npy<double, 2>(dir / "f4.npy", shard(1, halo(1), ds));
    check_equal(to_host(d), std::vector<double>(floats.begin(), floats.end()));
  }
  write_bytes(dir / "b1.npy", npy_file(dict_of("|b1", true, {3}), std::string("\x01\x00\x01", 3)));
  check_equal(to_host(load_npy<float, 1>(dir / "b1.npy")), std::vector<float>{1.f, 0.f, 1.f});
  check_equal(to_host(load_npy<i32, 1>(dir / "b1.npy")), std::vector<i32>{1, 0, 1});

  write_bytes(dir / "f8.npy", npy_file(dict_of("<f8", true, {2}), bytes_of(std::vector<double>{1, 2})));
  check_mentions(expect_error<invalid_argument>([&] { (void)load_npy<float, 1>(dir / "f8.npy"); }),
                 {"f8.npy", "<f8", "double", "expected <f4", "cast<float>"});
  write_bytes(dir / "i8.npy", npy_file(dict_of("<i8", true, {2}), bytes_of(std::vector<i64>{1, 2})));
  check_mentions(expect_error<invalid_argument>([&] { (void)load_npy<i32, 1>(dir / "i8.npy"); }), {"<i8", "<i4"});
  check_mentions(expect_error<invalid_argument>([&] { (void)load_npy<float, 1>(dir / "i4.npy"); }), {"<i4", "<f4"});
  check_mentions(expect_error<invalid_argument>([&] { (void)load_npy<bool, 1>(dir / "i4.npy"); }), {"<i4", "|b1"});
}

TEST_CASE("bad files throw invalid_argument naming the path, what was expected and what was found") {
  if (skip_without_gpu()) return;
  const scratch_dir dir;
  auto load_error = [&](const std::string& name, const std::string& bytes) {
    write_bytes(dir / name, bytes);
    return expect_error<invalid_argument>([&] { (void)load_npy<float, 2>(dir / name); });
  };
  const std::string data = bytes_of(std::vector<float>(6, 1.f));
  check_mentions(expect_error<invalid_argument>([&] { (void)load_npy<float, 2>(dir / "missing.npy"); }),
                 {"missing.npy", "expected a readable .npy file", "No such file"});
  check_mentions(expect_error<invalid_argument>([&] { (void)load_npy<float, 2>(dir.path); }), {"regular file"});
  check_mentions(load_error("magic.npy", "PK\x03\x04 this is a zip file"), {"magic.npy", "\\x93NUMPY", "PK"});
  check_mentions(load_error("short.npy", "\x93NUM"), {"short.npy", "at least 10 bytes", "found 4"});
  std::string v4 = npy_file(dict_of("<f4", true, {2, 3}), data);
  v4[6] = 4;
  check_mentions(load_error("v4.npy", v4), {"v4.npy", "1.0, 2.0 or 3.0", "found 4.0"});
  check_mentions(load_error("c8.npy", npy_file(dict_of("<c8", true, {2, 3}), data)), {"c8.npy", "<f4", "'<c8'"});
  check_mentions(load_error("u1.npy", npy_file(dict_of("|u1", true, {2, 3}), data)), {"unsupported dtype", "'|u1'"});
  check_mentions(load_error("big.npy", npy_file(dict_of(">f4", true, {2, 3}), data)),
                 {"big.npy", "big-endian", "expected '<f4'", "found '>f4'"});
  check_mentions(load_error("struct.npy", npy_file("{'descr': [('a', '<f4')], 'fortran_order': False, 'shape': (2,), }", data)),
                 {"structured dtype"});
  check_mentions(load_error("rank.npy", npy_file(dict_of("<f4", true, {6}), data)),
                 {"rank.npy", "rank mismatch", "rank-2", "(6,)", "rank 1"});
  check_mentions(load_error("trunc.npy", npy_file(dict_of("<f4", true, {2, 3}), data.substr(0, 20))),
                 {"trunc.npy", "truncated data", "(2, 3)", "found 20 bytes"});
  check_mentions(load_error("huge.npy", npy_file(dict_of("<f4", true, {4611686018427387904, 4}), data)),
                 {"truncated data"});
  std::string head = npy_file(dict_of("<f4", true, {2, 3}), data);
  check_mentions(load_error("thead.npy", head.substr(0, 40)), {"thead.npy", "truncated header", "found a file of 40"});
  check_mentions(load_error("dict.npy", npy_file("{'descr': '<f4', 'fortran_order': maybe, 'shape': (2, 3), }", data)),
                 {"malformed header", "True or False"});
  check_mentions(load_error("nokey.npy", npy_file("{'descr': '<f4', 'shape': (2, 3), }", data)), {"'fortran_order'"});
  check_mentions(load_error("extra.npy", npy_file("{'descr': '<f4', 'fortran_order': True, 'shape': (2, 3), 'x': 1}", data)),
                 {"unexpected key 'x'"});
  check_mentions(load_error("neg.npy", npy_file("{'descr': '<f4', 'fortran_order': True, 'shape': (2, -3), }", data)),
                 {"malformed header"});

  // Saving: a default-constructed array, a directory that does not exist.
  check_mentions(expect_error<invalid_argument>([&] { save_npy(dir / "x.npy", Array<float, 2>()); }),
                 {"x.npy", "default-constructed"});
  check_mentions(expect_error<invalid_argument>([&] { save_npy(dir / "no" / "such" / "x.npy", zeros<float>({2})); }),
                 {"x.npy", "cannot create", "No such file"});
}

TEST_CASE("save_npy replaces a file whole and leaves no temporary file behind") {
  if (skip_without_gpu()) return;
  const scratch_dir dir;
  save_npy(dir / "a.npy", iota<float>({1000}));
  save_npy(dir / "a.npy", Array<i32, 2>(Shape<2>{2, 2}));
  CHECK(parse_npy(read_bytes(dir / "a.npy")).shape == Dims{2, 2});
  std::size_t files = 0;
  for (const auto& e : fs::directory_iterator(dir.path)) files += e.is_regular_file();
  CHECK(files == 1);
}

TEST_CASE("NumPy reads save_npy's files and writes files load_npy reads (skipped without numpy)") {
  if (skip_without_gpu()) return;
  if (std::system("python3 -c 'import numpy' > /dev/null 2>&1") != 0) {
    MESSAGE("SKIPPED: python3 with numpy is not available");
    return;
  }
  const scratch_dir dir;
  const DeviceSet ds = device_sets().back();
  const auto v = random_values<float>(5 * 7 * 9);
  save_npy(dir / "t.npy", from_host(v, {5, 7, 9}, shard(2, halo(1), ds)));
  write_bytes(dir / "t.raw", bytes_of(v));
  const auto bv = random_values<bool>(11);
  save_npy(dir / "b.npy", from_host(bv, {11}, shard(0, ds)));
  write_bytes(dir / "b.raw", bytes_of(bv));
  const std::string d = dir.path.string();
  const std::string script =
      "import numpy as np, sys\n"
      "d = sys.argv[1]\n"
      "t = np.load(d + '/t.npy')\n"
      "assert t.dtype == np.float32 and t.shape == (5, 7, 9) and t.flags.f_contiguous\n"
      "assert (t == np.fromfile(d + '/t.raw', np.float32).reshape((5, 7, 9), order='F')).all()\n"
      "b = np.load(d + '/b.npy')\n"
      "assert b.dtype == np.bool_ and (b == np.fromfile(d + '/b.raw', np.uint8).astype(bool)).all()\n"
      "x = np.arange(3 * 4 * 5, dtype=np.int64).reshape(3, 4, 5) * 7 - 100\n"
      "np.save(d + '/c.npy', x)\n"
      "np.save(d + '/f.npy', np.asfortranarray(x))\n"
      "np.save(d + '/s.npy', np.float64(-1.5))\n"
      "np.save(d + '/e.npy', np.zeros((0, 3), np.float32))\n";
  write_bytes(dir / "check.py", script);
  REQUIRE(std::system(("python3 " + d + "/check.py " + d).c_str()) == 0);
  for (const char* name : {"c.npy", "f.npy"}) {
    INFO(name);
    const auto x = load_npy<i64, 3>(dir / name, shard(2, ds));
    for (index_t i = 0; i < 3; ++i)
      for (index_t j = 0; j < 4; ++j)
        for (index_t k = 0; k < 5; ++k) CHECK(x.at(i, j, k) == (i * 20 + j * 5 + k) * 7 - 100);
  }
  CHECK(load_npy<double, 0>(dir / "s.npy").at() == -1.5);
  CHECK(load_npy<float, 2>(dir / "e.npy").shape() == Shape<2>{0, 3});
}
