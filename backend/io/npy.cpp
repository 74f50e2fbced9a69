// SPDX-License-Identifier: Apache-2.0
// The .npy layer (npy.hpp): positioned file I/O over POSIX descriptors, the temporary-then-rename
// writer, and the header's reader (a small parser of the Python dict literal NumPy writes) and
// writer.
#include <backend/io/npy.hpp>
#include <tessera/error.hpp>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <bit>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <limits>
#include <string_view>
#include <utility>

namespace tessera::detail::npy {

static_assert(std::endian::native == std::endian::little,
              "TESSERA_BIG_ENDIAN_HOST: the .npy reader and writer assume a little-endian host");

const char* descr_of(dtype t) {
  constexpr const char* names[] = {"|b1", "<i4", "<i8", "<f4", "<f8", "<f2"};
  return names[static_cast<int>(t)];
}

const char* cpp_name(dtype t) {
  constexpr const char* names[] = {"bool", "int32_t", "int64_t", "float", "double", "half"};
  return names[static_cast<int>(t)];
}

std::size_t item_size(dtype t) {
  constexpr std::size_t sizes[] = {1, 4, 8, 4, 8, 2};
  return sizes[static_cast<int>(t)];
}

// -- file, output_file ---------------------------------------------------------------------------

file::file(int fd, std::string path) : fd_(fd), path_(std::move(path)) {}
file::file(file&& o) noexcept : fd_(std::exchange(o.fd_, -1)), path_(std::move(o.path_)) {}
file::~file() {
  if (fd_ >= 0) ::close(fd_);
}

void file::read_at(void* dst, std::size_t n, std::uint64_t at) const {
  auto* p = static_cast<char*>(dst);
  while (n > 0) {
    const ssize_t got = ::pread(fd_, p, n, static_cast<off_t>(at));
    if (got < 0 && errno == EINTR) continue;
    if (got < 0) fail("pread");
    if (got == 0) {
      throw backend_error("tessera: reading \"" + path_ + "\": the file ended early (it shrank while being read)");
    }
    p += got, n -= static_cast<std::size_t>(got), at += static_cast<std::uint64_t>(got);
  }
}

void file::write_at(const void* src, std::size_t n, std::uint64_t at) const {
  auto* p = static_cast<const char*>(src);
  while (n > 0) {
    const ssize_t put = ::pwrite(fd_, p, n, static_cast<off_t>(at));
    if (put < 0 && errno == EINTR) continue;
    if (put <= 0) fail("pwrite");
    p += put, n -= static_cast<std::size_t>(put), at += static_cast<std::uint64_t>(put);
  }
}

std::uint64_t file::size() const {
  struct stat st {};
  if (::fstat(fd_, &st) != 0) fail("fstat");
  return static_cast<std::uint64_t>(st.st_size);
}

void file::resize(std::uint64_t bytes) const {
  if (::ftruncate(fd_, static_cast<off_t>(bytes)) != 0) fail("ftruncate");
}

void file::close() {
  if (fd_ < 0) return;
  const int rc = ::close(std::exchange(fd_, -1));
  if (rc != 0) fail("close");
}

void file::fail(const char* call) const {
  throw backend_error("tessera: " + std::string(call) + " on \"" + path_ + "\" failed: " + std::strerror(errno));
}

output_file::output_file(const std::string& path, const std::string& who) : final_(path) {
  // The pid and a process-wide counter keep concurrent saves (threads, processes) apart; O_EXCL
  // skips a name that is still taken, e.g. by a crashed run.
  static std::atomic<unsigned> counter{0};
  for (;;) {
    tmp_ = path + ".tessera-tmp-" + std::to_string(::getpid()) + "-" + std::to_string(counter++);
    const int fd = ::open(tmp_.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);  // umask applies
    if (fd >= 0) {
      f_ = std::make_unique<file>(fd, tmp_);
      return;
    }
    if (errno != EEXIST) {
      throw invalid_argument(who + ": cannot create the file: expected a writable directory, found " +
                             std::strerror(errno));
    }
  }
}

output_file::~output_file() {
  if (committed_) return;
  f_.reset();
  ::unlink(tmp_.c_str());
}

void output_file::commit() {
  f_->close();
  if (::rename(tmp_.c_str(), final_.c_str()) != 0) f_->fail("rename");
  committed_ = true;
}

file open_for_reading(const std::string& path, const std::string& who) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    throw invalid_argument(who + ": cannot open the file: expected a readable .npy file, found " +
                           std::strerror(errno));
  }
  file f(fd, path);
  struct stat st {};
  if (::fstat(fd, &st) != 0) f.fail("fstat");
  if (!S_ISREG(st.st_mode)) throw invalid_argument(who + ": expected a regular file, found a directory or device");
  return f;
}

std::string shape_text(const std::vector<std::int64_t>& s) {
  std::string t = "(";
  for (std::size_t k = 0; k < s.size(); ++k) t += (k ? ", " : "") + std::to_string(s[k]);
  return t + (s.size() == 1 ? ",)" : ")");
}

// -- the header ----------------------------------------------------------------------------------

namespace {

// The header dict is a Python literal: {'descr': '<f4', 'fortran_order': False, 'shape': (3, 4), }
// NumPy writes exactly this form; any key order, either quote, spacing and Python 2's `3L` parse.
class dict_reader {
 public:
  dict_reader(std::string_view s, const std::string& who) : s_(s), who_(who) {}

  header read() {
    header h;
    bool descr = false, order = false, shape = false;
    if (!eat('{')) malformed("a Python dict literal");
    while (!eat('}')) {
      const std::string key = string_literal("a quoted key");
      if (!eat(':')) malformed("':' after '" + key + "'");
      if (key == "descr") {
        skip();
        if (i_ < s_.size() && s_[i_] == '[') {
          throw invalid_argument(who_ + ": unsupported dtype: expected one of <f2, <f4, <f8, <i4, <i8, |b1, found a "
                                        "structured dtype " + excerpt());
        }
        h.type = parse_descr(string_literal("a quoted dtype"));
        descr = true;
      } else if (key == "fortran_order") {
        if (word("True")) h.fortran_order = true;
        else if (word("False")) h.fortran_order = false;
        else malformed("True or False for 'fortran_order'");
        order = true;
      } else if (key == "shape") {
        if (!eat('(')) malformed("a tuple for 'shape'");
        while (!eat(')')) {
          h.shape.push_back(integer());
          eat('L');
          if (!eat(',')) {
            if (!eat(')')) malformed("',' or ')' in 'shape'");
            break;
          }
        }
        shape = true;
      } else {
        throw invalid_argument(who_ + ": unexpected key '" + key + "' in the header: expected 'descr', "
                                      "'fortran_order' and 'shape' only");
      }
      if (!eat(',')) {
        if (!eat('}')) malformed("',' or '}' after the value of '" + key + "'");
        break;
      }
    }
    if (!descr || !order || !shape) {
      const std::string missing = !descr ? "'descr'" : !order ? "'fortran_order'" : "'shape'";
      throw invalid_argument(who_ + ": the header lacks " + missing +
                             ": expected 'descr', 'fortran_order' and 'shape', found " + excerpt(0));
    }
    return h;
  }

 private:
  dtype parse_descr(const std::string& d) {
    const std::string code = d.size() > 1 ? d.substr(1) : d;
    const char order = d.empty() ? '?' : d[0];
    if (code == "b1" && (order == '|' || order == '<' || order == '>' || order == '=')) return dtype::b1;
    for (dtype t : {dtype::i4, dtype::i8, dtype::f2, dtype::f4, dtype::f8}) {
      if (code != descr_of(t) + 1) continue;
      if (order == '<' || order == '=') return t;  // '=' is native: the host is little-endian
      if (order == '>') {
        throw invalid_argument(who_ + ": big-endian data is not supported: expected '" + std::string(descr_of(t)) +
                               "' (little-endian), found '" + d +
                               "'; in NumPy, save a.astype(a.dtype.newbyteorder('<'))");
      }
    }
    throw invalid_argument(who_ + ": unsupported dtype: expected one of <f2, <f4, <f8, <i4, <i8, |b1 (half, float, "
                                  "double, int32_t, int64_t, bool), found '" + d + "'");
  }
  void skip() {
    while (i_ < s_.size() && (s_[i_] == ' ' || s_[i_] == '\t' || s_[i_] == '\n' || s_[i_] == '\r')) ++i_;
  }
  bool eat(char c) {
    skip();
    if (i_ < s_.size() && s_[i_] == c) return ++i_, true;
    return false;
  }
  bool word(std::string_view w) {
    skip();
    if (s_.substr(i_, w.size()) != w) return false;
    i_ += w.size();
    return true;
  }
  std::string string_literal(const std::string& what) {
    skip();
    if (i_ >= s_.size() || (s_[i_] != '\'' && s_[i_] != '"')) malformed(what);
    const char q = s_[i_++];
    const std::size_t end = s_.find(q, i_);
    if (end == std::string_view::npos) malformed("a closing quote");
    std::string out(s_.substr(i_, end - i_));
    i_ = end + 1;
    return out;
  }
  std::int64_t integer() {
    skip();
    std::int64_t v = 0;
    const std::size_t start = i_;
    while (i_ < s_.size() && s_[i_] >= '0' && s_[i_] <= '9') {
      if (v > (std::numeric_limits<std::int64_t>::max() - 9) / 10) malformed("an extent below 2^63");
      v = v * 10 + (s_[i_++] - '0');
    }
    if (i_ == start) malformed("a non-negative integer extent in 'shape'");
    return v;
  }
  std::string excerpt(std::size_t from = std::string_view::npos) const {
    const std::size_t at = from == std::string_view::npos ? i_ : from;
    std::string t(s_.substr(at, 80));
    return "\"" + t + (s_.size() - at > 80 ? "...\"" : "\"");
  }
  [[noreturn]] void malformed(const std::string& expected) const {
    throw invalid_argument(who_ + ": malformed header: expected " + expected + " at byte " + std::to_string(i_) +
                           " of the header dict, found " + excerpt());
  }

  std::string_view s_;
  std::size_t i_ = 0;
  const std::string& who_;
};

}  // namespace

header read_header(const file& f, std::uint64_t file_size, const std::string& who) {
  unsigned char pre[12] = {};
  if (file_size < 10) {
    throw invalid_argument(who + ": not a .npy file: expected at least 10 bytes (magic, version, header length), "
                                 "found " + std::to_string(file_size));
  }
  f.read_at(pre, 10, 0);
  if (std::memcmp(pre, "\x93" "NUMPY", 6) != 0) {
    std::string found;
    for (int k = 0; k < 6; ++k) {
      char hex[8];
      std::snprintf(hex, sizeof hex, "\\x%02x", pre[k]);
      found += pre[k] >= 0x20 && pre[k] < 0x7f ? std::string(1, static_cast<char>(pre[k])) : std::string(hex);
    }
    throw invalid_argument(who + ": not a .npy file: expected the magic string \\x93NUMPY, found \"" + found + "\"");
  }
  const int major = pre[6], minor = pre[7];
  if (major < 1 || major > 3 || minor != 0) {
    throw invalid_argument(who + ": unsupported .npy format version: expected 1.0, 2.0 or 3.0, found " +
                           std::to_string(major) + "." + std::to_string(minor));
  }
  // Version 1.0 counts the header in 2 bytes; 2.0 and 3.0 (UTF-8 dict) in 4.
  std::uint64_t len = pre[8] | (std::uint64_t(pre[9]) << 8), start = 10;
  if (major > 1) {
    if (file_size < 12) {
      throw invalid_argument(who + ": truncated header: expected at least 12 bytes, found " +
                             std::to_string(file_size));
    }
    f.read_at(pre + 10, 2, 10);
    len |= (std::uint64_t(pre[10]) << 16) | (std::uint64_t(pre[11]) << 24);
    start = 12;
  }
  if (start + len > file_size) {
    throw invalid_argument(who + ": truncated header: expected " + std::to_string(start + len) +
                           " bytes of header, found a file of " + std::to_string(file_size) + " bytes");
  }
  std::string text(static_cast<std::size_t>(len), '\0');
  f.read_at(text.data(), text.size(), start);
  header h = dict_reader(text, who).read();
  h.data_offset = start + len;
  return h;
}

std::string make_header(dtype t, const std::int64_t* shape, int rank) {
  std::vector<std::int64_t> s(shape, shape + rank);
  const std::string dict =
      "{'descr': '" + std::string(descr_of(t)) + "', 'fortran_order': True, 'shape': " + shape_text(s) + ", }";
  auto padded = [&](std::size_t pre) { return (pre + dict.size() + 1 + 63) / 64 * 64; };
  const bool v2 = padded(10) - 10 > 0xffff;
  const std::size_t pre = v2 ? 12 : 10, total = padded(pre), len = total - pre;
  std::string out = "\x93" "NUMPY";
  out += static_cast<char>(v2 ? 2 : 1);
  out += '\0';
  for (std::size_t k = 0; k < pre - 8; ++k) out += static_cast<char>((len >> (8 * k)) & 0xff);
  out += dict;
  out.append(total - out.size() - 1, ' ');
  out += '\n';
  return out;
}

}  // namespace tessera::detail::npy
