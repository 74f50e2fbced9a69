// SPDX-License-Identifier: Apache-2.0
// Misuse of tessera::distributed in one process (no mpirun): the rank queries before init() and an
// init() after the device table was built throw distributed_error naming what to do, and the
// library keeps working as one process.
#include "test_support.hpp"

#include <tessera/distributed.hpp>

#include <string>

using namespace tessera_test;

TEST_CASE("distributed functions before init, and init after the first Tessera call, are named errors") {
  if (skip_without_gpu()) return;
  CHECK_FALSE(distributed::initialized());
  check_mentions(expect_error<distributed_error>([] { (void)distributed::rank(); }),
                 {"rank()", "before tessera::distributed::init()"});
  check_mentions(expect_error<distributed_error>([] { (void)distributed::size(); }), {"size()", "init(argc, argv)"});
  check_mentions(expect_error<distributed_error>([] { (void)distributed::local_rank(); }), {"local_rank()"});
  const DeviceSet ds = devices();  // builds the device table for this process alone
  check_mentions(expect_error<distributed_error>([] { distributed::init(); }),
                 {"must come before any other Tessera call"});
  CHECK_FALSE(distributed::initialized());
  // Still one working process; its devices are all local.
  for (Device d : ds) {
    CHECK(distributed::is_local(d));
    CHECK(d.rank() == 0);
  }
  CHECK(sum(ones<float>({1000})) == 1000.f);
  distributed::finalize();  // without init: nothing to end
}
