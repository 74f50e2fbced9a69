// SPDX-License-Identifier: Apache-2.0
// The decisions of the watchdog of collectives spanning ranks (backend/comm/watchdog.hpp), with a
// fake collective and a fake clock: what NCCL work across ranks does on the GPU machine when a
// peer fails (an asynchronous error) or never comes (a collective that runs past the deadline),
// and that nothing is aborted while work merely queues behind other work. The last case checks the
// failure state of the layer itself (dist::fail), which a process cannot leave: it stays last.
#include "test_support.hpp"

#include <backend/process/mpi.hpp>
#include <backend/comm/watchdog.hpp>
#include <tessera/distributed.hpp>

#include <memory>
#include <string>

using namespace tessera_test;
using tessera::detail::comm::inflight;
using tessera::detail::comm::watchdog;

namespace {

// A collective whose state the test sets, and which records whether it was aborted.
struct fake_collective final : inflight {
  explicit fake_collective(std::string n) : label(std::move(n)) {}
  state now;
  int polls = 0, aborts = 0;
  std::string label;
  state poll() override {
    ++polls;
    return now;
  }
  void abort() override { ++aborts; }
  std::string name() const override { return label; }
};

std::shared_ptr<fake_collective> collective(const char* name) { return std::make_shared<fake_collective>(name); }

bool contains(const std::string& s, const char* part) { return s.find(part) != std::string::npos; }

}  // namespace

TEST_CASE("finished collectives are dropped; nothing is aborted while all goes well") {
  watchdog dog(10.0);
  auto a = collective("ncclAllReduce over [rank0/cuda:0, rank1/cuda:0]");
  auto b = collective("ncclAllGather over [rank0/cuda:0, rank1/cuda:0]");
  dog.watch(a);
  dog.watch(b);
  CHECK(dog.in_flight() == 2);
  CHECK(dog.sweep(0.0).empty());
  a->now = {.started = true, .finished = true, .error = {}};
  CHECK(dog.sweep(1.0).empty());
  CHECK(dog.in_flight() == 1);
  b->now = {.started = true, .finished = false, .error = {}};
  CHECK(dog.sweep(2.0).empty());
  b->now.finished = true;
  CHECK(dog.sweep(11.5).empty());  // finished before the deadline was checked past it
  CHECK(dog.in_flight() == 0);
  CHECK(a->aborts + b->aborts == 0);
  CHECK_FALSE(dog.failed());
}

TEST_CASE("the deadline counts from the start on this rank, not from the queueing") {
  watchdog dog(5.0);
  auto c = collective("ncclAllReduce over [rank0/cuda:0, rank1/cuda:0]");
  dog.watch(c);
  // Queued behind 100 s of other work: never started, never timed out.
  for (double t = 0; t <= 100; t += 10) CHECK(dog.sweep(t).empty());
  c->now.started = true;
  CHECK(dog.sweep(100.0).empty());  // the clock starts here
  CHECK(dog.sweep(104.9).empty());
  CHECK(c->aborts == 0);
  const std::string why = dog.sweep(105.1);
  CHECK(contains(why, "ncclAllReduce over [rank0/cuda:0, rank1/cuda:0]"));
  CHECK(contains(why, "did not finish within 5 s"));
  CHECK(contains(why, "TESSERA_MPI_TIMEOUT"));
  CHECK(c->aborts == 1);
  CHECK(dog.failed());
  CHECK(dog.in_flight() == 0);
  CHECK(dog.sweep(200.0).empty());  // reported once
  CHECK(c->aborts == 1);
}

TEST_CASE("an asynchronous error aborts every collective in flight and is reported once") {
  watchdog dog(0.0);  // no deadline: errors are still caught
  auto stuck = collective("ncclBroadcast over [rank0/cuda:0, rank1/cuda:0]");
  auto failing = collective("ncclAllReduce over [rank0/cuda:0, rank1/cuda:0]");
  auto queued = collective("ncclAllGather over [rank0/cuda:0, rank1/cuda:0]");
  dog.watch(stuck);
  dog.watch(failing);
  dog.watch(queued);
  stuck->now.started = true;
  CHECK(dog.sweep(0.0).empty());
  CHECK(dog.sweep(1e6).empty());  // no deadline: running for ever is not a failure
  failing->now.error = "remote process exited or there was a network error";
  const std::string why = dog.sweep(1e6 + 1);
  CHECK(contains(why, "ncclAllReduce over"));
  CHECK(contains(why, "network error"));
  CHECK(contains(why, "aborted"));
  CHECK(stuck->aborts == 1);
  CHECK(failing->aborts == 1);
  CHECK(queued->aborts == 1);
  // Queued after the failure: nothing will serve it, aborted at once and not kept.
  auto late = collective("ncclAllReduce over [rank0/cuda:0, rank1/cuda:0]");
  dog.watch(late);
  CHECK(late->aborts == 1);
  CHECK(dog.in_flight() == 0);
  CHECK(dog.sweep(1e6 + 2).empty());
}

TEST_CASE("an error wins over finishing: the communicator cannot be trusted") {
  watchdog dog(5.0);
  auto c = collective("ncclReduceScatter over [rank0/cuda:0, rank1/cuda:0]");
  dog.watch(c);
  c->now = {.started = true, .finished = true, .error = "unhandled cuda error"};
  CHECK(contains(dog.sweep(0.0), "unhandled cuda error"));
  CHECK(c->aborts == 1);
}

TEST_CASE("the failure is handed on before anything is aborted") {
  // A host wait blocked on the aborted work returns as soon as it is aborted and then checks the
  // rank's health: the failure must be known by then (on 4 GPUs, a wait that returned first went
  // on to its next call and waited a second deadline there for the dead peer).
  std::string handed;
  int aborts_before = -1;
  auto c = collective("ncclAllReduce over [rank0/cuda:0, rank1/cuda:0]");
  watchdog dog(5.0, [&](const std::string& why) {
    handed = why;
    aborts_before = c->aborts;
  });
  dog.watch(c);
  c->now.started = true;
  CHECK(dog.sweep(0.0).empty());
  CHECK(handed.empty());
  const std::string why = dog.sweep(6.0);
  CHECK(why == handed);
  CHECK(contains(handed, "did not finish within 5 s"));
  CHECK(aborts_before == 0);
  CHECK(c->aborts == 1);
}

TEST_CASE("a finished collective whose communicators were busy stays watched until they are asked") {
  // NCCL allows one thread at a time per communicator: while the calling thread uses them the
  // watchdog cannot ask for errors (poll() says checked = false), and must not drop the collective
  // unasked, nor time it out while it waits to be asked.
  watchdog dog(5.0);
  auto c = collective("ncclAllReduce over [rank0/cuda:0, rank1/cuda:0]");
  dog.watch(c);
  c->now = {.started = true, .finished = true, .error = {}, .checked = false};
  CHECK(dog.sweep(0.0).empty());
  CHECK(dog.sweep(100.0).empty());  // past the deadline, but finished: no timeout
  CHECK(dog.in_flight() == 1);
  CHECK(c->aborts == 0);
  c->now = {.started = true, .finished = true, .error = "remote process exited", .checked = true};
  CHECK(contains(dog.sweep(101.0), "remote process exited"));
  CHECK(c->aborts == 1);
  watchdog calm(5.0);
  auto d = collective("ncclAllGather over [rank0/cuda:0, rank1/cuda:0]");
  calm.watch(d);
  d->now = {.started = true, .finished = true, .error = {}, .checked = false};
  CHECK(calm.sweep(0.0).empty());
  CHECK(calm.in_flight() == 1);
  d->now.checked = true;
  CHECK(calm.sweep(1.0).empty());
  CHECK(calm.in_flight() == 0);
}

TEST_CASE("a failed rank: waits and the next calls name the failure (last: the state is final)") {
  using namespace tessera::detail;
  distributed::init();  // one rank of one here: no MPI
  CHECK_NOTHROW(dist::check_healthy("a wait on a GPU"));
  CHECK(dist::timeout_seconds() >= 0);
  dist::fail("ncclAllReduce over [rank0/cuda:0, rank1/cuda:0] failed on this rank: remote error");
  dist::fail("a second reason is not kept");
  try {
    dist::check_healthy("a wait on a GPU");
    FAIL("no error after dist::fail");
  } catch (const distributed_error& e) {
    const std::string what = e.what();
    CHECK(contains(what, "a wait on a GPU"));
    CHECK(contains(what, "remote error"));
    CHECK_FALSE(contains(what, "second reason"));
  }
}
