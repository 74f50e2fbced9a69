// SPDX-License-Identifier: Apache-2.0
// The node's mailbox (mailbox.hpp): a POSIX shared-memory segment, two slots per rank.
#include <backend/process/mailbox.hpp>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstring>

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

namespace tessera::detail::dist {
namespace {

constexpr std::size_t line = 64;  // the exchange number has a cache line of its own
static_assert(std::atomic_ref<std::uint64_t>::is_always_lock_free, "the exchange numbers are read across processes");

std::size_t stride_for(std::size_t record_bytes) { return line + (record_bytes + line - 1) / line * line; }

std::string errno_text(const char* call) { return std::string(call) + ": " + std::strerror(errno); }

// Maps `fd` (size `bytes`) and closes it; nullptr with the reason in `why`.
void* map(int fd, std::size_t bytes, std::string& why) {
  void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (p == MAP_FAILED) why = errno_text("mmap");
  close(fd);
  return p == MAP_FAILED ? nullptr : p;
}

}  // namespace

std::unique_ptr<node_mailbox> node_mailbox::create(int ranks, std::size_t record_bytes, std::string& why) {
  const std::size_t stride = stride_for(record_bytes);
  const std::size_t bytes = stride * 2 * static_cast<std::size_t>(ranks);
  // A name no other job on the node uses: this process's id and the clock (O_EXCL refuses a clash,
  // and the next tag is tried).
  const auto tag = static_cast<unsigned long long>(std::chrono::steady_clock::now().time_since_epoch().count());
  for (int attempt = 0; attempt < 8; ++attempt) {
    const std::string name = "/tessera-" + std::to_string(getpid()) + "-" + std::to_string(tag + attempt);
    const int fd = shm_open(name.c_str(), O_CREAT | O_EXCL | O_RDWR, S_IRUSR | S_IWUSR);
    if (fd < 0 && errno == EEXIST) continue;
    if (fd < 0) {
      why = errno_text("shm_open");
      return nullptr;
    }
    if (ftruncate(fd, static_cast<off_t>(bytes)) != 0) {  // zero-filled: no exchange posted
      why = errno_text("ftruncate");
      close(fd);
      shm_unlink(name.c_str());
      return nullptr;
    }
    void* p = map(fd, bytes, why);
    if (p == nullptr) {
      shm_unlink(name.c_str());
      return nullptr;
    }
    return std::unique_ptr<node_mailbox>(new node_mailbox(name, p, bytes, ranks, stride));
  }
  why = "shm_open: no free name";
  return nullptr;
}

std::unique_ptr<node_mailbox> node_mailbox::open(const std::string& name, int ranks, std::size_t record_bytes,
                                                 std::string& why) {
  const std::size_t stride = stride_for(record_bytes);
  const std::size_t bytes = stride * 2 * static_cast<std::size_t>(ranks);
  const int fd = shm_open(name.c_str(), O_RDWR, 0);
  if (fd < 0) {
    why = errno_text("shm_open");
    return nullptr;
  }
  struct stat st{};
  if (fstat(fd, &st) != 0 || static_cast<std::size_t>(st.st_size) != bytes) {
    why = "the segment " + name + " is not " + std::to_string(bytes) + " bytes";
    close(fd);
    return nullptr;
  }
  void* p = map(fd, bytes, why);
  if (p == nullptr) return nullptr;
  return std::unique_ptr<node_mailbox>(new node_mailbox(name, p, bytes, ranks, stride));
}

node_mailbox::~node_mailbox() { munmap(base_, bytes_); }

void node_mailbox::unlink() { shm_unlink(name_.c_str()); }

unsigned char* node_mailbox::slot(int q, std::uint64_t call) const {
  return static_cast<unsigned char*>(base_) + (static_cast<std::size_t>(q) * 2 + call % 2) * stride_;
}

void node_mailbox::post(int rank, std::uint64_t call, const void* data, std::size_t bytes) {
  unsigned char* s = slot(rank, call);
  if (bytes > 0) std::memcpy(s + line, data, bytes);
  // Release: a rank that sees the number sees the record (lock-free atomics are address-free, so
  // this holds across processes mapping the same page).
  std::atomic_ref<std::uint64_t>(*reinterpret_cast<std::uint64_t*>(s)).store(call, std::memory_order_release);
}

const void* node_mailbox::peek(int q, std::uint64_t call) const {
  unsigned char* s = slot(q, call);
  const std::uint64_t seen =
      std::atomic_ref<std::uint64_t>(*reinterpret_cast<std::uint64_t*>(s)).load(std::memory_order_acquire);
  return seen == call ? s + line : nullptr;
}

}  // namespace tessera::detail::dist
