// SPDX-License-Identifier: Apache-2.0
// save_png: the PNG's signature and header (width = columns, height = rows, 8-bit RGB) read from the
// file, the same bytes for the same values from any placement and other bytes for another colour
// map, the range options, and named errors for bad input.
#include "test_support.hpp"

#include <cstdio>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

using namespace tessera_test;

namespace {

std::vector<unsigned char> read_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>()};
}

std::uint32_t be32(const std::vector<unsigned char>& b, std::size_t at) {
  return (std::uint32_t(b[at]) << 24) | (std::uint32_t(b[at + 1]) << 16) | (std::uint32_t(b[at + 2]) << 8) |
         std::uint32_t(b[at + 3]);
}

std::string temp_png(const char* tag) {
  return "/tmp/tessera-test-" + std::string(tag) + "-" + std::to_string(::getpid()) + ".png";
}

}  // namespace

TEST_CASE("save_png writes a PNG of the array's rows and columns, from any placement") {
  if (!tessera::detail::png::available()) {
    Array<float, 2> a = zeros<float>({2, 3}, on(host_devices(1)[0]));
    check_mentions(expect_error<error>([&] { save_png(a, temp_png("none")); }), {"libpng", "libpng-dev"});
    MESSAGE("SKIPPED: built without libpng");
    return;
  }
  for (const auto& ds : device_sets()) {
    for (auto [m, n] : {std::pair<index_t, index_t>{1, 1}, {7, 3}, {64, 257}}) {
      INFO(set_name(ds) << ", " << m << "x" << n);
      const auto v = random_values<float>(static_cast<std::size_t>(m * n));
      Array<float, 2> a = from_host(v, {m, n}, shard(1, ds));
      const std::string path = temp_png("a");
      save_png(a, path);
      const auto bytes = read_file(path);
      REQUIRE(bytes.size() > 33);
      const unsigned char sig[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};
      CHECK(std::equal(sig, sig + 8, bytes.begin()));
      CHECK(std::string(bytes.begin() + 12, bytes.begin() + 16) == "IHDR");
      CHECK(be32(bytes, 16) == static_cast<std::uint32_t>(n));  // width: columns
      CHECK(be32(bytes, 20) == static_cast<std::uint32_t>(m));  // height: rows
      CHECK(bytes[24] == 8);                                   // bits per channel
      CHECK(bytes[25] == 2);                                   // RGB
      // The same values on one device give the same file; other values another one.
      Array<float, 2> b = from_host(v, {m, n}, on(ds[0]));
      const std::string path_b = temp_png("b");
      save_png(b, path_b);
      CHECK(read_file(path_b) == bytes);
      save_png(b, path_b, colormap::gray);
      if (m * n > 1) CHECK(read_file(path_b) != bytes);
      std::remove(path.c_str());
      std::remove(path_b.c_str());
    }
  }
}

TEST_CASE("save_png refuses an empty array and an unwritable path by name") {
  if (!tessera::detail::png::available()) {
    MESSAGE("SKIPPED: built without libpng");
    return;
  }
  for (const auto& ds : device_sets()) {
    Array<double, 2> e = zeros<double>({0, 4}, shard(1, ds));
    check_mentions(expect_error<invalid_argument>([&] { save_png(e, temp_png("e")); }), {"save_png", "0×4"});
    Array<double, 2> a = ones<double>({3, 4}, shard(1, ds));
    check_mentions(expect_error<error>([&] { save_png(a, "/nonexistent-dir/x.png"); }), {"save_png", "/nonexistent-dir"});
    check_equal(to_host(a), std::vector<double>(12, 1.0));  // intact
    // A constant array (lo == hi) and a given range both write.
    const std::string path = temp_png("c");
    CHECK_NOTHROW(save_png(a, path));
    CHECK_NOTHROW(save_png(a, path, colormap::diverging, -1.0, 1.0));
    std::remove(path.c_str());
  }
}
