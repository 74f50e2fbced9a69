// SPDX-License-Identifier: Apache-2.0
// The node's mailbox (backend/process/mailbox.hpp), which carries the consistency checks between
// ranks on one node: two mappings of one segment stand for two ranks. A record is visible through
// the other mapping once posted and not before; exchanges c and c + 1 live side by side; threads
// acting as ranks run thousands of exchanges of fresh random records and each reads every
// other's exactly (the two-slot protocol); the name is gone after unlink; a missing or wrongly
// sized segment is refused with the reason. The mpirun tests use it through every collective
// (test_distributed*.mpiN); test_distributed_values.mpi3.no_mailbox runs them without it.
#include "test_support.hpp"

#include <backend/process/mailbox.hpp>

#include <cstdint>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

using tessera::detail::dist::node_mailbox;

namespace {

std::unique_ptr<node_mailbox> make(int ranks, std::size_t bytes) {
  std::string why;
  auto box = node_mailbox::create(ranks, bytes, why);
  REQUIRE_MESSAGE(box != nullptr, why);
  return box;
}

}  // namespace

TEST_CASE("mailbox: a posted record is seen through another mapping, not before") {
  auto a = make(2, 40);
  std::string why;
  auto b = node_mailbox::open(a->name(), 2, 40, why);
  REQUIRE_MESSAGE(b != nullptr, why);
  a->unlink();  // both stay mapped
  CHECK(b->peek(0, 1) == nullptr);
  CHECK(a->peek(1, 1) == nullptr);
  const char first[] = "rank 0, exchange 1";
  a->post(0, 1, first, sizeof first);
  REQUIRE(b->peek(0, 1) != nullptr);
  CHECK(std::memcmp(b->peek(0, 1), first, sizeof first) == 0);
  CHECK(b->peek(0, 2) == nullptr);  // exchange 2's slot is still empty
  CHECK(b->peek(1, 1) == nullptr);  // rank 1 has not posted
  const char second[] = "rank 0, exchange 2";
  a->post(0, 2, second, sizeof second);
  CHECK(std::memcmp(b->peek(0, 1), first, sizeof first) == 0);  // c and c + 1 side by side
  CHECK(std::memcmp(b->peek(0, 2), second, sizeof second) == 0);
  const char third[] = "rank 0, exchange 3";
  a->post(0, 3, third, sizeof third);  // takes exchange 1's slot
  CHECK(b->peek(0, 1) == nullptr);
  CHECK(std::memcmp(b->peek(0, 3), third, sizeof third) == 0);
  a->post(0, 4, nullptr, 0);  // an empty record still counts
  CHECK(b->peek(0, 4) != nullptr);
}

TEST_CASE("mailbox: ranks as threads exchange fresh records thousands of times") {
  for (const int ranks : {1, 2, 3, 4}) {
    CAPTURE(ranks);
    constexpr std::size_t bytes = 520;  // a consistency check's record, payload included
    constexpr std::uint64_t exchanges = 3000;
    auto creator = make(ranks, bytes);
    std::vector<std::unique_ptr<node_mailbox>> boxes;
    for (int r = 0; r < ranks; ++r) {
      std::string why;
      boxes.push_back(node_mailbox::open(creator->name(), ranks, bytes, why));
      REQUIRE_MESSAGE(boxes.back() != nullptr, why);
    }
    creator->unlink();
    // Record of rank r in exchange c: bytes drawn from a generator seeded by (seed, r, c), so
    // every reader can rebuild what it must see.
    const std::uint64_t seed = std::random_device{}();
    auto record = [&](int r, std::uint64_t c) {
      std::mt19937_64 g(seed ^ (static_cast<std::uint64_t>(r) << 48) ^ c);
      std::vector<unsigned char> v(1 + g() % bytes);
      for (auto& x : v) x = static_cast<unsigned char>(g());
      return v;
    };
    std::vector<int> wrong(static_cast<std::size_t>(ranks), 0);
    std::vector<std::thread> threads;
    for (int r = 0; r < ranks; ++r) {
      threads.emplace_back([&, r] {
        node_mailbox& box = *boxes[static_cast<std::size_t>(r)];
        for (std::uint64_t c = 1; c <= exchanges; ++c) {
          const auto mine = record(r, c);
          box.post(r, c, mine.data(), mine.size());
          for (int q = 0; q < ranks; ++q) {
            const void* p = nullptr;
            while ((p = box.peek(q, c)) == nullptr) std::this_thread::yield();
            const auto want = record(q, c);
            if (std::memcmp(p, want.data(), want.size()) != 0) ++wrong[static_cast<std::size_t>(r)];
          }
        }
      });
    }
    for (auto& t : threads) t.join();
    for (int r = 0; r < ranks; ++r) CHECK(wrong[static_cast<std::size_t>(r)] == 0);
  }
}

TEST_CASE("mailbox: a missing or mis-sized segment is refused with the reason") {
  std::string why;
  auto a = make(3, 100);
  auto wrong_size = node_mailbox::open(a->name(), 4, 100, why);
  CHECK(wrong_size == nullptr);
  CHECK(why.find("is not") != std::string::npos);
  a->unlink();
  why.clear();
  auto gone = node_mailbox::open(a->name(), 3, 100, why);
  CHECK(gone == nullptr);
  CHECK(why.find("shm_open") != std::string::npos);
}
