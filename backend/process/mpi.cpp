// SPDX-License-Identifier: Apache-2.0
// Tessera across processes: tessera::distributed (init, finalize, rank, size, ...) and the byte
// collectives of mpi.hpp. The only file with MPI_* calls. Built without MPI (TESSERA_HAS_MPI=0) it
// is the one-rank version of the same functions, so the rest of the library never tests for MPI.
//
// Every wait polls its request with a deadline instead of blocking inside MPI: a blocking call
// whose peer died or called something else never returns, which is the hang the issue forbids.
// A collective that cannot be cancelled is left behind, and the layer is marked broken.
#include <backend/process/backoff.hpp>
#include <backend/process/mailbox.hpp>
#include <backend/process/mpi.hpp>
#include <tessera/distributed.hpp>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <limits>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#ifndef TESSERA_HAS_MPI
#define TESSERA_HAS_MPI 0
#endif
#if TESSERA_HAS_MPI
#include <mpi.h>
#endif

namespace tessera::detail::dist {
namespace {

struct layer {
  std::mutex m;  // MPI is initialized as MPI_THREAD_SERIALIZED: one Tessera call in MPI at a time
  bool initialized = false;
  bool finalized = false;
  bool started_mpi = false;  // init() called MPI_Init (so finalize() ends it)
  bool spans = false;        // size > 1, read without the lock on hot paths
  int rank = 0, size = 1, local_rank = 0, local_size = 1;
  double timeout_s = 300;
  std::chrono::microseconds spin{0};  // spin_time(), set by init()
  std::string broken;  // why the layer stopped (a timeout, an MPI error); empty while healthy
  // Why this rank failed (fail(): NCCL work across ranks); MPI still works, so agree() can tell
  // the other ranks. Its own lock: the watchdog thread sets it while a wait may hold `m`.
  std::mutex failure_m;
  std::string failure;
  std::atomic<bool> failed{false};
#if TESSERA_HAS_MPI
  MPI_Comm comm = MPI_COMM_NULL;  // a duplicate of MPI_COMM_WORLD: our messages only
#endif
  // The consistency checks through shared memory (mailbox.hpp) when every rank shares this node;
  // null: through MPI. `checks` counts them (every rank makes the same ones in the same order).
  std::unique_ptr<node_mailbox> mailbox;
  std::uint64_t checks = 0;
};

layer& lay() {
  static layer* l = new layer();  // leaked like the runtime's state: atexit handlers may use it
  return *l;
}

[[maybe_unused]] std::string rank_prefix() { return "tessera (rank " + std::to_string(lay().rank) + "): "; }

std::string failure_text() {
  layer& l = lay();
  if (!l.failed.load(std::memory_order_acquire)) return {};
  std::lock_guard<std::mutex> lock(l.failure_m);
  return l.failure;
}

// Checks that the layer can take a collective call; the caller holds the lock.
[[maybe_unused]] void require_live(const char* what) {
  layer& l = lay();
  if (!l.broken.empty()) {
    throw distributed_error(rank_prefix() + what + " not started: an earlier distributed operation failed (" +
                            l.broken + "); the job cannot continue (finalize() aborts it)");
  }
  if (l.finalized) {
    throw distributed_error(rank_prefix() + what +
                            " called after distributed::finalize(); arrays spanning processes cannot be used "
                            "once the layer has ended");
  }
}

double env_timeout() {
  const char* v = std::getenv("TESSERA_MPI_TIMEOUT");
  if (v == nullptr || *v == '\0') return 300;
  char* end = nullptr;
  const double t = std::strtod(v, &end);
  if (*end != '\0' || t < 0) {
    throw invalid_argument(std::string("tessera: TESSERA_MPI_TIMEOUT=") + v +
                           " is not a number of seconds; expected a value >= 0 (0: wait forever)");
  }
  return t;
}

// Under a launcher, the environment names the job's size; without one we are a single process.
bool launched() {
  if (const char* force = std::getenv("TESSERA_MPI"); force != nullptr && *force != '\0')
    return std::strcmp(force, "0") != 0;
  for (const char* v : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_RANK", "MPI_LOCALNRANKS"})
    if (std::getenv(v) != nullptr) return true;
  return false;
}

// The GPUs this process could see, without initializing CUDA (which would freeze the selection):
// the entries of CUDA_VISIBLE_DEVICES when set, else one per GPU the driver lists.
std::vector<std::string> visible_gpus() {
  std::vector<std::string> out;
  if (const char* v = std::getenv("CUDA_VISIBLE_DEVICES")) {
    std::string s = v;
    std::size_t at = 0;
    while (at <= s.size() && !s.empty()) {
      const std::size_t comma = std::min(s.find(',', at), s.size());
      if (comma > at) out.push_back(s.substr(at, comma - at));
      at = comma + 1;
    }
    return out;
  }
  std::error_code ec;
  int n = 0;
  for (auto it = std::filesystem::directory_iterator("/proc/driver/nvidia/gpus", ec);
       !ec && it != std::filesystem::directory_iterator(); it.increment(ec))
    ++n;
  for (int i = 0; i < n; ++i) out.push_back(std::to_string(i));
  return out;
}

// Gives this rank its share of the node's GPUs: a balanced block of them when there are at least
// as many GPUs as ranks on the node (several GPUs per rank allowed), else GPU local_rank % count.
void select_gpus(int local_rank, int local_size) {
  if (!TESSERA_HAS_CUDA || local_size < 2) return;  // alone on its node: every GPU is its own
  if (const char* sel = std::getenv("TESSERA_GPU_SELECT"); sel != nullptr && std::strcmp(sel, "none") == 0) return;
  const std::vector<std::string> gpus = visible_gpus();
  const int g = static_cast<int>(gpus.size());
  if (g == 0) return;
  int lo = local_rank % g, hi = lo + 1;
  if (g >= local_size) {
    lo = static_cast<int>(static_cast<long>(local_rank) * g / local_size);
    hi = static_cast<int>(static_cast<long>(local_rank + 1) * g / local_size);
  }
  std::string list;
  for (int i = lo; i < hi; ++i) list += (i > lo ? "," : "") + gpus[static_cast<std::size_t>(i)];
  setenv("CUDA_VISIBLE_DEVICES", list.c_str(), 1);
}

void finalize_at_exit() { tessera::distributed::finalize(); }

#if TESSERA_HAS_MPI
constexpr int tag_p2p = 7;
constexpr std::size_t max_message = std::size_t(1) << 30;  // MPI counts are int: chunks of 1 GiB

std::string mpi_error_text(int rc) {
  char text[MPI_MAX_ERROR_STRING];
  int len = 0;
  if (MPI_Error_string(rc, text, &len) != MPI_SUCCESS) return "MPI error " + std::to_string(rc);
  return std::string(text, static_cast<std::size_t>(len));
}

void check(int rc, const char* call, const std::string& what) {
  if (rc == MPI_SUCCESS) return;
  layer& l = lay();
  l.broken = std::string(call) + " failed in " + what + ": " + mpi_error_text(rc);
  throw distributed_error(rank_prefix() + l.broken);
}

// Throws, marking the layer broken, once a wait that began at `start` has passed the deadline.
void check_deadline(std::chrono::steady_clock::time_point start, const std::string& what, int peer) {
  layer& l = lay();
  const double waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (l.timeout_s <= 0 || waited <= l.timeout_s) return;
  l.broken = what + " did not complete within " + std::to_string(static_cast<int>(l.timeout_s)) + " s" +
             (peer >= 0 ? " (waiting for rank " + std::to_string(peer) + ")" : "") +
             ": a peer rank died, hangs, or made a different call (every rank must make the same Tessera calls "
             "in the same order); TESSERA_MPI_TIMEOUT sets the limit";
  throw distributed_error(rank_prefix() + l.broken);
}

// Waits for a request, polling, until the deadline; on timeout the layer is broken (an MPI
// collective cannot be cancelled) and every later call says so.
void wait(MPI_Request& req, MPI_Status* status, const std::string& what, int peer = -1) {
  const auto start = std::chrono::steady_clock::now();
  comm::backoff pace(spin_time());  // spins, then sleeps (backoff.hpp: why)
  for (;;) {
    int done = 0;
    check(MPI_Test(&req, &done, status), "MPI_Test", what);
    if (done) return;
    check_deadline(start, what, peer);
    pace.pause();
  }
}

#endif

}  // namespace

bool spans_processes() { return lay().spans; }
int world_rank() { return lay().rank; }
int world_size() { return lay().size; }

void fail(const std::string& reason) {
  layer& l = lay();
  std::lock_guard<std::mutex> lock(l.failure_m);
  if (l.failure.empty()) l.failure = reason;
  l.failed.store(true, std::memory_order_release);
}

void check_healthy(const char* what) {
  const std::string f = failure_text();
  if (f.empty()) return;
  throw distributed_error(rank_prefix() + what + ": an earlier distributed operation failed (" + f +
                          "); the job cannot continue (finalize() ends it)");
}

double timeout_seconds() { return lay().timeout_s; }

std::chrono::microseconds spin_time() { return lay().spin; }

namespace {

// spin_time()'s value for a rank sharing its node with local_size ranks (mpi.hpp).
std::chrono::microseconds choose_spin(int local_size) {
  if (const char* v = std::getenv("TESSERA_MPI_SPIN_US"); v != nullptr && *v != '\0') {
    char* end = nullptr;
    const long us = std::strtol(v, &end, 10);
    if (*end != '\0' || us < 0) {
      throw invalid_argument(std::string("tessera: TESSERA_MPI_SPIN_US=") + v +
                             " is not a number of microseconds; expected a value >= 0");
    }
    return std::chrono::microseconds(us);
  }
  // A rank bound to one core of a roomy node (Open MPI binds each of 2 ranks to a core) spins on
  // it too: the core is its own, and yielding lets its other threads (the watchdog's) run. Before,
  // such a rank slept in every wait: 2 GPU ranks queued a re-shard across ranks in 575-893 us
  // against 150-270 us for 4 ranks bound to their NUMA nodes, and samples ran late.
  const long node = static_cast<long>(std::thread::hardware_concurrency());
  const bool spare = node >= 2L * std::max(local_size, 1);
  return std::chrono::microseconds(spare ? 2000 : 0);
}

}  // namespace

void require_init(const char* what) {
  if (!lay().initialized) {
    throw distributed_error(std::string("tessera: ") + what +
                            " called before tessera::distributed::init(); call init(argc, argv) (or create a "
                            "distributed::session) first, on every rank");
  }
}

#if TESSERA_HAS_MPI

namespace {

// What each rank sends in the consistency check: the call, its size, this rank's failure, and an
// optional small payload (share() below), so that an exchange of a few bytes, such as a
// reduction's partials to the host, costs one round instead of two.
constexpr std::size_t inline_payload = 256;
struct call_record {
  char what[48];
  std::uint64_t size;
  char failure[200];  // this rank's failure (fail()), cut to fit; empty while healthy
  std::uint32_t inline_used;  // 1: the payload travels here (every rank must agree on it)
  std::uint32_t payload_bytes;
  char payload[inline_payload];
};

// The records' bytes that matter: all but the payload's unused tail.
std::size_t used_bytes(const call_record& r) {
  return offsetof(call_record, payload) + std::min<std::size_t>(r.payload_bytes, inline_payload);
}

// Every rank's record through the node's mailbox: this rank's posted, the others' read as they
// come, with the same deadline as an MPI wait. The caller holds the layer's lock.
void exchange_records(const call_record& mine, std::vector<call_record>& all, const std::string& what) {
  layer& l = lay();
  const std::uint64_t c = ++l.checks;
  l.mailbox->post(l.rank, c, &mine, used_bytes(mine));
  const auto start = std::chrono::steady_clock::now();
  comm::backoff pace(spin_time());
  for (int q = 0; q < l.size; ++q) {
    const void* r = nullptr;
    while ((r = l.mailbox->peek(q, c)) == nullptr) {
      check_deadline(start, what, q);
      pace.pause();
    }
    call_record& to = all[static_cast<std::size_t>(q)];
    std::memcpy(&to, r, offsetof(call_record, payload));
    to.what[sizeof to.what - 1] = '\0';
    to.failure[sizeof to.failure - 1] = '\0';
    std::memcpy(to.payload, static_cast<const char*>(r) + offsetof(call_record, payload),
                std::min<std::size_t>(to.payload_bytes, inline_payload));
  }
}

// The consistency check (mpi.hpp, agree), carrying `bytes` <= inline_payload of `payload` when
// `inline_used`; returns every rank's record. The caller holds the layer's lock.
std::vector<call_record> agree_locked(const char* what, std::uint64_t size, bool inline_used, const void* payload,
                                      std::size_t bytes) {
  layer& l = lay();
  require_live(what);
  call_record mine{};
  std::strncpy(mine.what, what, sizeof mine.what - 1);
  mine.size = size;
  const std::string own = failure_text();
  std::strncpy(mine.failure, own.c_str(), sizeof mine.failure - 1);
  mine.inline_used = inline_used ? 1 : 0;
  mine.payload_bytes = static_cast<std::uint32_t>(bytes);
  if (bytes > 0) std::memcpy(mine.payload, payload, bytes);
  std::vector<call_record> all(static_cast<std::size_t>(l.size));
  const std::string name = std::string("the consistency check of ") + what;
  if (l.mailbox) {
    exchange_records(mine, all, name);
  } else {
    MPI_Request req;
    check(MPI_Iallgather(&mine, sizeof mine, MPI_BYTE, all.data(), sizeof mine, MPI_BYTE, l.comm, &req),
          "MPI_Iallgather", name);
    wait(req, MPI_STATUS_IGNORE, name);
  }
  // A failed rank takes part in the check, so every rank learns of it in this one round instead
  // of each waiting out its own deadline on work the failed rank will never serve.
  std::string failures;
  for (std::size_t q = 0; q < all.size(); ++q) {
    if (all[q].failure[0] == '\0') continue;
    failures += (failures.empty() ? "rank " : "; rank ") + std::to_string(q) + ": " +
                std::string(all[q].failure, strnlen(all[q].failure, sizeof all[q].failure));
  }
  if (!failures.empty()) {
    fail("a peer rank failed (" + failures + ")");
    throw distributed_error(rank_prefix() + what + " not started: an earlier distributed operation failed (" +
                            failures + "); the job cannot continue (finalize() ends it)");
  }
  bool same = true;
  for (const call_record& r : all)
    same = same && std::strcmp(r.what, mine.what) == 0 && r.size == mine.size && r.inline_used == mine.inline_used;
  if (same) return all;
  std::string calls;
  for (std::size_t q = 0; q < all.size(); ++q) {
    calls += (q ? "; rank " : "rank ") + std::to_string(q) + ": " + all[q].what + " (" + std::to_string(all[q].size) +
             ")";
  }
  // Every rank saw the same records, so every rank throws here and the layer stays usable.
  throw distributed_error(rank_prefix() + "ranks made different calls: " + calls +
                          "; every rank must make the same Tessera calls, with the same sizes, in the same order");
}

// The node's mailbox, when every rank runs on this node and TESSERA_MPI_MAILBOX is not 0: rank 0
// creates it and sends its name, the others map it, and every rank uses it only if all could (else
// the checks stay MPI_Allgathers). Rank 0 then removes the name: nothing is left behind in
// /dev/shm, even by a job that crashes.
void open_mailbox(layer& l) {
  const char* v = std::getenv("TESSERA_MPI_MAILBOX");
  int ok = l.local_size == l.size && !(v != nullptr && std::strcmp(v, "0") == 0) ? 1 : 0;
  const std::string what = "distributed::init (the node's mailbox)";
  char name[64] = {};
  std::string why;
  std::unique_ptr<node_mailbox> box;
  if (l.rank == 0 && ok) {
    box = node_mailbox::create(l.size, sizeof(call_record), why);
    if (box) std::strncpy(name, box->name().c_str(), sizeof name - 1);
  }
  MPI_Request req;
  check(MPI_Ibcast(name, sizeof name, MPI_CHAR, 0, l.comm, &req), "MPI_Ibcast", what);
  wait(req, MPI_STATUS_IGNORE, what);
  if (l.rank != 0 && ok && name[0] != '\0') box = node_mailbox::open(name, l.size, sizeof(call_record), why);
  ok = ok && box ? 1 : 0;
  check(MPI_Iallreduce(MPI_IN_PLACE, &ok, 1, MPI_INT, MPI_MIN, l.comm, &req), "MPI_Iallreduce", what);
  wait(req, MPI_STATUS_IGNORE, what);
  if (box && l.rank == 0) box->unlink();
  if (ok) l.mailbox = std::move(box);
}

// `o` over every rank's `count` elements of type t (their payloads in `all`), into `data`, in rank
// order. Sums and products in unsigned arithmetic, so that they wrap as MPI's (allreduce below).
template <class S, class U>
void fold_as(void* data, std::size_t count, comm::op o, const std::vector<call_record>& all) {
  for (std::size_t i = 0; i < count; ++i) {
    S acc{};
    for (std::size_t q = 0; q < all.size(); ++q) {
      S x;
      std::memcpy(&x, all[q].payload + i * sizeof(S), sizeof(S));
      if (q == 0) {
        acc = x;
        continue;
      }
      switch (o) {
        case comm::op::sum: acc = static_cast<S>(static_cast<U>(acc) + static_cast<U>(x)); break;
        case comm::op::prod: acc = static_cast<S>(static_cast<U>(acc) * static_cast<U>(x)); break;
        case comm::op::max: acc = std::max(acc, x); break;
        default: acc = std::min(acc, x); break;
      }
    }
    std::memcpy(static_cast<char*>(data) + i * sizeof(S), &acc, sizeof(S));
  }
}

void fold_records(void* data, std::size_t count, comm::dtype t, comm::op o, const std::vector<call_record>& all) {
  switch (t) {
    case comm::dtype::u8: fold_as<std::uint8_t, unsigned>(data, count, o, all); break;
    case comm::dtype::i32: fold_as<std::int32_t, std::uint32_t>(data, count, o, all); break;
    default: fold_as<std::int64_t, std::uint64_t>(data, count, o, all); break;
  }
}

}  // namespace

void agree(const char* what, std::uint64_t size) {
  layer& l = lay();
  if (!l.spans) return;
  std::lock_guard<std::mutex> lock(l.m);
  (void)agree_locked(what, size, false, nullptr, 0);
}

std::vector<std::vector<device_record>> exchange_devices(const std::vector<device_record>& mine) {
  layer& l = lay();
  std::vector<std::vector<device_record>> all(static_cast<std::size_t>(l.size));
  if (!l.spans) {
    all[0] = mine;
    return all;
  }
  agree("device table exchange", 0);
  std::lock_guard<std::mutex> lock(l.m);
  const std::string what = "the device table exchange";
  const int count = static_cast<int>(mine.size() * sizeof(device_record));
  std::vector<int> counts(static_cast<std::size_t>(l.size)), displs(static_cast<std::size_t>(l.size));
  MPI_Request req;
  check(MPI_Iallgather(&count, 1, MPI_INT, counts.data(), 1, MPI_INT, l.comm, &req), "MPI_Iallgather", what);
  wait(req, MPI_STATUS_IGNORE, what);
  int total = 0;
  for (int q = 0; q < l.size; ++q) {
    displs[static_cast<std::size_t>(q)] = total;
    total += counts[static_cast<std::size_t>(q)];
  }
  std::vector<device_record> flat(static_cast<std::size_t>(total) / sizeof(device_record));
  check(MPI_Iallgatherv(mine.data(), count, MPI_BYTE, flat.data(), counts.data(), displs.data(), MPI_BYTE, l.comm,
                        &req),
        "MPI_Iallgatherv", what);
  wait(req, MPI_STATUS_IGNORE, what);
  for (int q = 0; q < l.size; ++q) {
    const std::size_t first = static_cast<std::size_t>(displs[static_cast<std::size_t>(q)]) / sizeof(device_record);
    const std::size_t n = static_cast<std::size_t>(counts[static_cast<std::size_t>(q)]) / sizeof(device_record);
    all[static_cast<std::size_t>(q)].assign(flat.begin() + static_cast<std::ptrdiff_t>(first),
                                            flat.begin() + static_cast<std::ptrdiff_t>(first + n));
  }
  return all;
}

void broadcast(void* data, std::size_t bytes, int root, const char* what) {
  layer& l = lay();
  if (!l.spans) return;
  if (root < 0 || root >= l.size) {
    throw invalid_argument(std::string("tessera: ") + what + ": the root must be a rank from 0 to " +
                           std::to_string(l.size - 1) + ", found " + std::to_string(root));
  }
  // Small (an NCCL id, a small array of host devices): the root's bytes ride along with the
  // consistency check, one round instead of two, as a share of one block.
  if (bytes <= inline_payload) return share(&data, &bytes, &root, 1, what);
  agree(what, bytes);
  std::lock_guard<std::mutex> lock(l.m);
  for (std::size_t at = 0; at < bytes; at += max_message) {
    const int n = static_cast<int>(std::min(max_message, bytes - at));
    MPI_Request req;
    check(MPI_Ibcast(static_cast<char*>(data) + at, n, MPI_BYTE, root, l.comm, &req), "MPI_Ibcast", what);
    wait(req, MPI_STATUS_IGNORE, what, root);
  }
}

void share(void* const* blocks, const std::size_t* sizes, const int* owner, std::size_t n, const char* what) {
  layer& l = lay();
  if (!l.spans || n == 0) return;
  const auto P = static_cast<std::size_t>(l.size);
  std::vector<std::size_t> per_rank(P, 0);
  for (std::size_t i = 0; i < n; ++i) per_rank[static_cast<std::size_t>(owner[i])] += sizes[i];
  std::size_t total = 0;
  for (std::size_t b : per_rank) total += b;
  // Small exchanges (every rank's part fits the check's payload: a reduction's partials, one
  // element's host read) ride along with the consistency check: one round instead of two, which
  // is most of what a host result across ranks costs beyond one process's (issue 20). Every rank
  // knows every part's size, so all choose alike; the check compares the choice too.
  const bool small = *std::max_element(per_rank.begin(), per_rank.end()) <= inline_payload;
  if (small) {
    std::vector<char> mine(per_rank[static_cast<std::size_t>(l.rank)]);
    for (std::size_t i = 0, at = 0; i < n; ++i) {
      if (owner[i] != l.rank || sizes[i] == 0) continue;
      std::memcpy(mine.data() + at, blocks[i], sizes[i]);
      at += sizes[i];
    }
    std::vector<call_record> all;
    {
      std::lock_guard<std::mutex> lock(l.m);
      all = agree_locked(what, total, true, mine.data(), mine.size());
    }
    std::vector<std::size_t> next(P, 0);
    for (std::size_t i = 0; i < n; ++i) {
      const auto q = static_cast<std::size_t>(owner[i]);
      if (owner[i] != l.rank && sizes[i] != 0) {
        if (next[q] + sizes[i] > all[q].payload_bytes) {
          l.broken = std::string(what) + ": rank " + std::to_string(q) + " sent " +
                     std::to_string(all[q].payload_bytes) + " bytes where at least " +
                     std::to_string(next[q] + sizes[i]) + " were expected (mismatched calls)";
          throw distributed_error(rank_prefix() + l.broken);
        }
        std::memcpy(blocks[i], all[q].payload + next[q], sizes[i]);
      }
      next[q] += sizes[i];
    }
    return;
  }
  agree(what, total);
  if (total == 0) return;
  std::lock_guard<std::mutex> lock(l.m);
  // Each rank's blocks travel packed in block order; every rank knows every owner and size, so
  // every rank unpacks them to the same places without a second exchange.
  std::vector<std::size_t> base(P, 0);
  for (std::size_t q = 1; q < P; ++q) base[q] = base[q - 1] + per_rank[q - 1];
  std::vector<char> all(total);
  for (std::size_t i = 0, at = base[static_cast<std::size_t>(l.rank)]; i < n; ++i) {
    if (owner[i] != l.rank || sizes[i] == 0) continue;
    std::memcpy(all.data() + at, blocks[i], sizes[i]);
    at += sizes[i];
  }
  // MPI counts and displacements are int: rounds of at most max_message bytes in all, each rank
  // sending its next slice (in place: MPI_IN_PLACE reads this rank's slice from the receive buffer).
  const std::size_t slice = std::max<std::size_t>(1, max_message / P);
  std::vector<std::size_t> sent(P, 0);
  std::vector<int> counts(P), displs(P);
  std::vector<char> round;
  for (bool more = true; more;) {
    std::size_t in_round = 0;
    for (std::size_t q = 0; q < P; ++q) {
      counts[q] = static_cast<int>(std::min(slice, per_rank[q] - sent[q]));
      displs[q] = static_cast<int>(in_round);
      in_round += static_cast<std::size_t>(counts[q]);
    }
    // One round moves everything: straight into place. Otherwise through a staging buffer.
    const bool direct = in_round == total;
    if (direct) {
      for (std::size_t q = 0; q < P; ++q) displs[q] = static_cast<int>(base[q]);
    } else {
      round.resize(in_round);
      const auto me = static_cast<std::size_t>(l.rank);
      std::memcpy(round.data() + displs[me], all.data() + base[me] + sent[me], static_cast<std::size_t>(counts[me]));
    }
    char* buffer = direct ? all.data() : round.data();
    MPI_Request req;
    check(MPI_Iallgatherv(MPI_IN_PLACE, 0, MPI_BYTE, buffer, counts.data(), displs.data(), MPI_BYTE, l.comm, &req),
          "MPI_Iallgatherv", what);
    wait(req, MPI_STATUS_IGNORE, what);
    more = false;
    for (std::size_t q = 0; q < P; ++q) {
      if (!direct)
        std::memcpy(all.data() + base[q] + sent[q], round.data() + displs[q], static_cast<std::size_t>(counts[q]));
      sent[q] += static_cast<std::size_t>(counts[q]);
      more = more || sent[q] < per_rank[q];
    }
  }
  std::vector<std::size_t> next = base;
  for (std::size_t i = 0; i < n; ++i) {
    std::size_t& at = next[static_cast<std::size_t>(owner[i])];
    if (owner[i] != l.rank && sizes[i] != 0) std::memcpy(blocks[i], all.data() + at, sizes[i]);
    at += sizes[i];
  }
}

void share_blocks(void* data, std::size_t n, std::size_t bytes, const int* owner, const char* what) {
  if (!lay().spans || n == 0 || bytes == 0) return;
  std::vector<void*> blocks(n);
  const std::vector<std::size_t> sizes(n, bytes);
  for (std::size_t i = 0; i < n; ++i) blocks[i] = static_cast<char*>(data) + i * bytes;
  share(blocks.data(), sizes.data(), owner, n, what);
}

void allreduce(void* data, std::size_t count, comm::dtype t, comm::op o, const char* what) {
  // Sums and products as unsigned integers: they wrap like NCCL's and the host devices' (signed
  // overflow would be undefined in MPI's C loops), with the same bits as signed two's complement.
  const bool wraps = o == comm::op::sum || o == comm::op::prod;
  MPI_Datatype type = MPI_DATATYPE_NULL;
  std::size_t size = 0;
  switch (t) {
    case comm::dtype::u8: type = MPI_UINT8_T, size = 1; break;
    case comm::dtype::i32: type = wraps ? MPI_UINT32_T : MPI_INT32_T, size = 4; break;
    case comm::dtype::i64: type = wraps ? MPI_UINT64_T : MPI_INT64_T, size = 8; break;
    default:
      throw invalid_argument(std::string("tessera: ") + what +
                             ": MPI_Allreduce is used for integer and byte types only (floating results would "
                             "depend on MPI's order of operations)");
  }
  const MPI_Op op = o == comm::op::sum ? MPI_SUM : o == comm::op::prod ? MPI_PROD : o == comm::op::max ? MPI_MAX : MPI_MIN;
  layer& l = lay();
  if (!l.spans || count == 0) return;
  if (count * size <= inline_payload) {
    // Small (a flag, a count): every rank's elements ride along with the consistency check, and
    // every rank folds them in rank order, one round instead of two.
    std::vector<call_record> all;
    {
      std::lock_guard<std::mutex> lock(l.m);
      all = agree_locked(what, count * size, true, data, count * size);
    }
    fold_records(data, count, t, o, all);
    return;
  }
  agree(what, count * size);
  std::lock_guard<std::mutex> lock(l.m);
  const std::size_t per_call = max_message / size;
  for (std::size_t at = 0; at < count; at += per_call) {
    const int n = static_cast<int>(std::min(per_call, count - at));
    MPI_Request req;
    check(MPI_Iallreduce(MPI_IN_PLACE, static_cast<char*>(data) + at * size, n, type, op, l.comm, &req),
          "MPI_Iallreduce", what);
    wait(req, MPI_STATUS_IGNORE, what);
  }
}

void send(const void* data, std::size_t bytes, int to, const char* what) {
  layer& l = lay();
  std::lock_guard<std::mutex> lock(l.m);
  require_live(what);
  for (std::size_t at = 0; at < bytes; at += max_message) {
    const int n = static_cast<int>(std::min(max_message, bytes - at));
    MPI_Request req;
    check(MPI_Isend(static_cast<const char*>(data) + at, n, MPI_BYTE, to, tag_p2p, l.comm, &req), "MPI_Isend", what);
    wait(req, MPI_STATUS_IGNORE, what, to);
  }
}

void recv(void* data, std::size_t bytes, int from, const char* what) {
  layer& l = lay();
  std::lock_guard<std::mutex> lock(l.m);
  require_live(what);
  for (std::size_t at = 0; at < bytes; at += max_message) {
    const int n = static_cast<int>(std::min(max_message, bytes - at));
    MPI_Request req;
    MPI_Status status;
    check(MPI_Irecv(static_cast<char*>(data) + at, n, MPI_BYTE, from, tag_p2p, l.comm, &req), "MPI_Irecv", what);
    wait(req, &status, what, from);
    int got = 0;
    check(MPI_Get_count(&status, MPI_BYTE, &got), "MPI_Get_count", what);
    if (got != n) {
      l.broken = std::string(what) + ": rank " + std::to_string(from) + " sent " + std::to_string(got) +
                 " bytes where " + std::to_string(n) + " were expected (mismatched calls)";
      throw distributed_error(rank_prefix() + l.broken);
    }
  }
}

#else  // one rank of one: nothing to exchange

void agree(const char*, std::uint64_t) {}
std::vector<std::vector<device_record>> exchange_devices(const std::vector<device_record>& mine) { return {mine}; }
void broadcast(void*, std::size_t, int, const char*) {}
void share_blocks(void*, std::size_t, std::size_t, const int*, const char*) {}
void share(void* const*, const std::size_t*, const int*, std::size_t, const char*) {}
void allreduce(void*, std::size_t, comm::dtype t, comm::op, const char* what) {
  if (t == comm::dtype::f32 || t == comm::dtype::f64)
    throw invalid_argument(std::string("tessera: ") + what + ": MPI_Allreduce is used for integer and byte types only");
}
void send(const void*, std::size_t, int to, const char* what) {
  throw distributed_error(std::string("tessera: ") + what + ": no rank " + std::to_string(to) +
                          " (this Tessera was built without MPI)");
}
void recv(void*, std::size_t, int from, const char* what) {
  throw distributed_error(std::string("tessera: ") + what + ": no rank " + std::to_string(from) +
                          " (this Tessera was built without MPI)");
}

#endif

}  // namespace tessera::detail::dist

// -- public API (tessera/distributed.hpp) ------------------------------------------------------

namespace tessera::detail::dist {

// Starts the layer (distributed::init, backend/runtime/processes.cpp, calls it before it builds
// the device table): MPI, this rank's place on its node, its GPUs. False when it was running.
bool start(int& argc, char**& argv) {
  auto& l = lay();
  std::unique_lock<std::mutex> lock(l.m);
  if (l.initialized) return false;
  if (l.finalized) {
    throw distributed_error("tessera: distributed::init() after finalize(); MPI cannot be started twice");
  }
  l.timeout_s = env_timeout();
#if TESSERA_HAS_MPI
  if (launched()) {
    int already = 0;
    MPI_Initialized(&already);
    if (!already) {
      int provided = 0;
      if (MPI_Init_thread(&argc, &argv, MPI_THREAD_SERIALIZED, &provided) != MPI_SUCCESS)
        throw distributed_error("tessera: MPI_Init_thread failed");
      l.started_mpi = true;
    }
    const std::string what = "distributed::init";
    check(MPI_Comm_dup(MPI_COMM_WORLD, &l.comm), "MPI_Comm_dup", what);
    MPI_Comm_set_errhandler(l.comm, MPI_ERRORS_RETURN);
    check(MPI_Comm_rank(l.comm, &l.rank), "MPI_Comm_rank", what);
    check(MPI_Comm_size(l.comm, &l.size), "MPI_Comm_size", what);
    MPI_Comm node = MPI_COMM_NULL;
    check(MPI_Comm_split_type(l.comm, MPI_COMM_TYPE_SHARED, l.rank, MPI_INFO_NULL, &node), "MPI_Comm_split_type",
          what);
    check(MPI_Comm_rank(node, &l.local_rank), "MPI_Comm_rank", what);
    check(MPI_Comm_size(node, &l.local_size), "MPI_Comm_size", what);
    MPI_Comm_free(&node);
    l.spans = l.size > 1;
    if (l.spans) open_mailbox(l);
  }
#endif
  (void)argc, (void)argv;
  select_gpus(l.local_rank, l.local_size);
  l.spin = choose_spin(l.local_size);
  l.initialized = true;
  std::atexit(finalize_at_exit);
  return true;
}

}  // namespace tessera::detail::dist

namespace tessera::distributed {

using detail::dist::lay;

bool built_with_mpi() { return TESSERA_HAS_MPI != 0; }

void finalize() {
  auto& l = lay();
  std::lock_guard<std::mutex> lock(l.m);
  if (!l.initialized) return;
  l.initialized = false;
  l.finalized = true;
#if TESSERA_HAS_MPI
  if (l.comm != MPI_COMM_NULL && (!l.broken.empty() || l.failed.load())) {
    // A peer may be waiting forever in a collective we abandoned (or on NCCL work a failed rank
    // will never serve): end the whole job.
    MPI_Abort(l.comm, 1);
  }
  l.mailbox.reset();
  if (l.comm != MPI_COMM_NULL) MPI_Comm_free(&l.comm);
  if (l.started_mpi) {
    int done = 0;
    MPI_Finalized(&done);
    if (!done) MPI_Finalize();
  }
#endif
}

bool initialized() { return lay().initialized; }

int rank() {
  detail::dist::require_init("tessera::distributed::rank()");
  return lay().rank;
}
int size() {
  detail::dist::require_init("tessera::distributed::size()");
  return lay().size;
}
int local_rank() {
  detail::dist::require_init("tessera::distributed::local_rank()");
  return lay().local_rank;
}
int local_size() {
  detail::dist::require_init("tessera::distributed::local_size()");
  return lay().local_size;
}

}  // namespace tessera::distributed
