// SPDX-License-Identifier: Apache-2.0
// The current device's role in placement (DeviceScope: new arrays live on the scope's device) and
// print_topology's count of host devices created on demand.
#include "test_support.hpp"

#include <sstream>
#include <string>

using namespace tessera_test;

TEST_CASE("inside a DeviceScope a new array without a placement lives on the scope's device") {
  const DeviceSet hs = tessera::host_devices(3);
  for (Device d : hs) {
    tessera::DeviceScope scope(d);
    auto a = tessera::zeros<float>({10});
    CHECK(a.devices() == DeviceSet{d});
    CHECK(a.shard_dim() == -1);
    auto b = tessera::rand<double>({4, 5});
    CHECK(b.devices() == DeviceSet{d});
    // An explicit placement still wins, and an expression keeps its operands' placement.
    auto c = tessera::zeros<float>({10}, tessera::shard(0, hs));
    CHECK(c.devices() == hs);
    tessera::Array<float, 1> e = c + 1.f;
    CHECK(e.devices() == hs);
  }
  // Outside any scope the default placement shards over devices() again.
  if (!tessera_test::cuda_variant() || !tessera::gpus().empty()) {
    auto a = tessera::zeros<float>({10});
    CHECK(a.devices() == tessera::devices());
  }
}

TEST_CASE("print_topology counts the host devices of the default set") {
  if (tessera_test::cuda_variant()) return;
  const DeviceSet ds = tessera::devices();  // host devices, created on demand
  std::ostringstream os;
  tessera::print_topology(os);
  const std::string out = os.str();
  const auto at = out.find(" host device(s)");
  REQUIRE(at != std::string::npos);
  const auto start = out.rfind(' ', at - 1);
  CHECK(std::stoi(out.substr(start + 1, at - start - 1)) >= static_cast<int>(ds.size()));
  CHECK(std::stoi(out.substr(start + 1, at - start - 1)) >= 1);
}
