// SPDX-License-Identifier: Apache-2.0
// Tessera: NumPy .npy files (format versions 1.0, 2.0 and 3.0). save_npy writes Fortran order,
// which is Tessera's column-major order, so each part's rows go to their own file offsets and the
// array is never gathered on one device or in one host buffer; load_npy reads them back the same
// way. A C-order file is the Fortran-order file of the reversed shape: it is read into parts with
// reversed boxes and each part is transposed on its own device. See docs/semantics.md, "Files and
// interop".
#pragma once
#include <tessera/reshape.hpp>
#include <tessera/transfer.hpp>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <bit>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <limits>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace tessera {
namespace detail::npy {

static_assert(std::endian::native == std::endian::little,
              "TESSERA_BIG_ENDIAN_HOST: the .npy reader and writer assume a little-endian host");

enum class dtype { b1, i4, i8, f4, f8, f2 };

// bfloat16 has no NumPy dtype (ml_dtypes' is an extension type, written as raw '<V2' bytes): save_npy
// and load_npy refuse it with invalid_argument, naming what they found (no dtype_of<bfloat16>).
template <class T>
inline constexpr bool has_npy_dtype_v = !std::is_same_v<T, bfloat16>;

template <class T>
constexpr dtype dtype_of() {
  if constexpr (std::is_same_v<T, bool>) return dtype::b1;
  else if constexpr (std::is_same_v<T, std::int32_t>) return dtype::i4;
  else if constexpr (std::is_same_v<T, std::int64_t>) return dtype::i8;
  else if constexpr (std::is_same_v<T, float>) return dtype::f4;
  else if constexpr (std::is_same_v<T, half>) return dtype::f2;
  else {
    static_assert(std::is_same_v<T, double>, "TESSERA_COMPLEX_UNSUPPORTED: .npy files of complex arrays are not "
                                             "supported yet");
    return dtype::f8;
  }
}

inline const char* descr_of(dtype t) {
  constexpr const char* names[] = {"|b1", "<i4", "<i8", "<f4", "<f8", "<f2"};
  return names[static_cast<int>(t)];
}

inline const char* cpp_name(dtype t) {
  constexpr const char* names[] = {"bool", "int32_t", "int64_t", "float", "double", "half"};
  return names[static_cast<int>(t)];
}

template <class T>
constexpr const char* type_name() {
  if constexpr (has_npy_dtype_v<T>) return cpp_name(dtype_of<T>());
  else return "bfloat16";
}

inline std::size_t item_size(dtype t) {
  constexpr std::size_t sizes[] = {1, 4, 8, 4, 8, 2};
  return sizes[static_cast<int>(t)];
}

// NumPy's safe casting, np.can_cast(from, to, "safe"), among Tessera's element types: every value
// survives, except that int64 -> float64 may round, as NumPy accepts.
constexpr bool safe_cast(dtype from, dtype to) {
  if (from == to || from == dtype::b1) return true;
  if (from == dtype::f2) return to == dtype::f4 || to == dtype::f8;
  if (from == dtype::i4) return to == dtype::i8 || to == dtype::f8;
  return (from == dtype::i8 || from == dtype::f4) && to == dtype::f8;
}

// Sizes of the staging chunks: the runtime's pinned chunk, so that one chunk of the file is one
// pinned round trip to a GPU.
inline constexpr std::size_t chunk_bytes = rt::staging_chunk_bytes;

// An open file descriptor with positioned, complete reads and writes (pread/pwrite loop over
// short transfers and EINTR). Every failure names the file.
class file {
 public:
  file(int fd, std::string path) : fd_(fd), path_(std::move(path)) {}
  file(file&& o) noexcept : fd_(std::exchange(o.fd_, -1)), path_(std::move(o.path_)) {}
  file(const file&) = delete;
  file& operator=(const file&) = delete;
  ~file() {
    if (fd_ >= 0) ::close(fd_);
  }

  void read_at(void* dst, std::size_t n, std::uint64_t at) const {
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
  void write_at(const void* src, std::size_t n, std::uint64_t at) const {
    auto* p = static_cast<const char*>(src);
    while (n > 0) {
      const ssize_t put = ::pwrite(fd_, p, n, static_cast<off_t>(at));
      if (put < 0 && errno == EINTR) continue;
      if (put <= 0) fail("pwrite");
      p += put, n -= static_cast<std::size_t>(put), at += static_cast<std::uint64_t>(put);
    }
  }
  std::uint64_t size() const {
    struct stat st {};
    if (::fstat(fd_, &st) != 0) fail("fstat");
    return static_cast<std::uint64_t>(st.st_size);
  }
  void resize(std::uint64_t bytes) const {
    if (::ftruncate(fd_, static_cast<off_t>(bytes)) != 0) fail("ftruncate");
  }
  // Closing reports delayed write errors (NFS), so a writer closes before it renames.
  void close() {
    if (fd_ < 0) return;
    const int rc = ::close(std::exchange(fd_, -1));
    if (rc != 0) fail("close");
  }
  [[noreturn]] void fail(const char* call) const {
    throw backend_error("tessera: " + std::string(call) + " on \"" + path_ + "\" failed: " + std::strerror(errno));
  }

 private:
  int fd_;
  std::string path_;
};

// A new file written next to its final path and renamed over it on commit(): a failed save leaves
// no half-written file behind, and an existing file stays intact until the new one is complete.
class output_file {
 public:
  output_file(const std::filesystem::path& path, const std::string& who) : final_(path) {
    static std::atomic<unsigned> counter{0};
    for (;;) {
      tmp_ = path.string() + ".tessera-tmp-" + std::to_string(::getpid()) + "-" + std::to_string(counter++);
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
  output_file(const output_file&) = delete;
  output_file& operator=(const output_file&) = delete;
  ~output_file() {
    if (committed_) return;
    f_.reset();
    ::unlink(tmp_.c_str());
  }
  const file& get() const { return *f_; }
  void commit() {
    f_->close();
    if (::rename(tmp_.c_str(), final_.c_str()) != 0) f_->fail("rename");
    committed_ = true;
  }

 private:
  std::filesystem::path final_;
  std::string tmp_;
  std::unique_ptr<file> f_;
  bool committed_ = false;
};

inline file open_for_reading(const std::filesystem::path& path, const std::string& who) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    throw invalid_argument(who + ": cannot open the file: expected a readable .npy file, found " +
                           std::strerror(errno));
  }
  file f(fd, path.string());
  struct stat st {};
  if (::fstat(fd, &st) != 0) f.fail("fstat");
  if (!S_ISREG(st.st_mode)) throw invalid_argument(who + ": expected a regular file, found a directory or device");
  return f;
}

struct header {
  dtype type = dtype::f4;
  bool fortran_order = false;
  std::vector<index_t> shape;
  std::uint64_t data_offset = 0;  // bytes before the first element (magic, version, length, dict)
};

inline std::string shape_text(const std::vector<index_t>& s) {
  std::string t = "(";
  for (std::size_t k = 0; k < s.size(); ++k) t += (k ? ", " : "") + std::to_string(s[k]);
  return t + (s.size() == 1 ? ",)" : ")");
}

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
  index_t integer() {
    skip();
    index_t v = 0;
    const std::size_t start = i_;
    while (i_ < s_.size() && s_[i_] >= '0' && s_[i_] <= '9') {
      if (v > (std::numeric_limits<index_t>::max() - 9) / 10) malformed("an extent below 2^63");
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

inline header read_header(const file& f, std::uint64_t file_size, const std::string& who) {
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

// The complete prefix of a Fortran-order file: magic, version, length and the dict, padded with
// spaces and a newline so that the data starts at a multiple of 64 bytes, as NumPy writes it.
inline std::string make_header(dtype t, const index_t* shape, int rank) {
  std::vector<index_t> s(shape, shape + rank);
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

enum class direction { load, save };

// Moves the rows of `parts` (of layout `l`, see part_rows) between the file, whose data starts at
// `at`, and the devices. A file row is one run of the shard dimension and those before it: when it
// fits in a chunk, whole file rows are staged, so each chunk is one pread/pwrite and every part
// copies its piece of it with one pitched transfer; otherwise each part's row moves in pieces.
template <class T, int N>
void move_rows(const Layout<T, N>& l, const std::vector<const Part<T, N>*>& parts, const file& f, std::uint64_t at,
               direction dir) {
  constexpr std::size_t sz = sizeof(T);
  if (parts.empty()) return;
  const PartRows shape_of = part_rows(l, *parts.front());  // height and host pitch are those of every part
  const std::size_t height = shape_of.height, row = shape_of.host_pitch * sz;
  if (height == 0 || row == 0) return;
  auto normalize = [](unsigned char* p, std::size_t n) {
    if constexpr (std::is_same_v<T, bool>) {
      for (std::size_t i = 0; i < n; ++i) p[i] = p[i] != 0;  // any non-zero byte is True, as in NumPy
    }
  };
  if (row <= chunk_bytes) {
    const std::size_t rows = std::min(height, chunk_bytes / row);
    auto stage = std::make_unique_for_overwrite<unsigned char[]>(rows * row);
    for (std::size_t h0 = 0; h0 < height; h0 += rows) {
      const std::size_t h = std::min(rows, height - h0);
      if (dir == direction::load) {
        f.read_at(stage.get(), h * row, at + h0 * row);
        normalize(stage.get(), h * row);
      }
      for (const auto* p : parts) {
        const PartRows r = part_rows(l, *p);
        unsigned char* host = stage.get() + r.host_offset * sz;
        T* dev = p->ptr + h0 * r.part_pitch;
        if (dir == direction::load) {
          rt::copy_from_host(p->device.id(), dev, r.part_pitch * sz, host, row, r.width * sz, h);
        } else {
          rt::copy_to_host(p->device.id(), host, row, dev, r.part_pitch * sz, r.width * sz, h);
        }
      }
      if (dir == direction::save) f.write_at(stage.get(), h * row, at + h0 * row);
    }
    return;
  }
  const std::size_t piece = chunk_bytes / sz;
  auto stage = std::make_unique_for_overwrite<unsigned char[]>(piece * sz);
  for (const auto* p : parts) {
    const PartRows r = part_rows(l, *p);
    for (std::size_t h = 0; h < height; ++h) {
      for (std::size_t c = 0; c < r.width; c += piece) {
        const std::size_t n = std::min(piece, r.width - c) * sz;
        const std::uint64_t pos = at + (r.host_offset + h * r.host_pitch + c) * sz;
        T* dev = p->ptr + h * r.part_pitch + c;
        if (dir == direction::load) {
          f.read_at(stage.get(), n, pos);
          normalize(stage.get(), n);
          rt::copy_from_host(p->device.id(), dev, n, stage.get(), n, n, 1);
        } else {
          rt::copy_to_host(p->device.id(), stage.get(), n, dev, n, n, 1);
          f.write_at(stage.get(), n, pos);
        }
      }
    }
  }
}

template <class T, int N>
std::vector<const Part<T, N>*> parts_with_elements(const Layout<T, N>& l, bool one_replica) {
  std::vector<const Part<T, N>*> out;
  for (auto& p : l.parts) {
    if (p.empty()) continue;
    out.push_back(&p);
    if (one_replica && l.replicated) break;  // every replica holds the same values
  }
  return out;
}

template <int N>
Shape<N> reversed(const Shape<N>& s) {
  Shape<N> r{};
  for (int k = 0; k < N; ++k) r[k] = s[N - 1 - k];
  return r;
}

// A C-order file holds the column-major array of the reversed shape. Each part of `dst` gets a
// part with the reversed box on its own device, filled like any Fortran-order read, and is then
// transposed there by one fused assignment: no device reads another's rows, and the transpose runs
// on the GPU, at the cost of a second copy of each part while loading.
template <class T, int N>
void read_transposed(const Layout<T, N>& dst, const file& f, std::uint64_t at) {
  Geometry<N> g;
  g.shape = reversed<N>(dst.shape);
  g.shard_dim = dst.shard_dim >= 0 ? N - 1 - dst.shard_dim : -1;
  g.replicated = dst.replicated;
  for (auto& p : dst.parts) g.boxes.push_back({p.device, reversed<N>(p.origin), reversed<N>(p.extent)});
  auto file_order = std::make_shared<const Layout<T, N>>(allocate_layout<T, N>(g, dst.mem));
  move_rows(*file_order, parts_with_elements(*file_order, false), f, at, direction::load);
  std::array<int, N> rev{};
  for (int k = 0; k < N; ++k) rev[k] = N - 1 - k;
  assign_node(dst, permutedims(View<T, N>(file_order), rev).leaf(), par);
}

template <element_type T, int N>
Array<T, N> load_exact(const file& f, const header& h, const Shape<N>& shape, const Placement& p, memory m) {
  auto l = std::make_shared<const Layout<T, N>>(allocate_layout<T, N>(geometry_from_placement<N>(shape, p), m));
  // Halo cells are read too: they hold the values of the cells they mirror, as from_host gives them.
  const Layout<T, N> dst = has_halo_cells(*l) ? including_halo(*l) : *l;
  int long_dims = 0;  // with at most one extent above 1, C and Fortran order are the same bytes
  for (int k = 0; k < N; ++k) long_dims += shape[k] > 1;
  if (h.fortran_order || long_dims <= 1) {
    move_rows(dst, parts_with_elements(dst, false), f, h.data_offset, direction::load);
  } else {
    read_transposed(dst, f, h.data_offset);
  }
  return Array<T, N>(std::move(l));
}

// A file of element type U loaded into T by NumPy's safe casting, on the devices.
template <element_type T, element_type U, int N>
Array<T, N> load_converted(const file& f, const header& h, const Shape<N>& shape, const Placement& p, memory m) {
  if constexpr (safe_cast(dtype_of<U>(), dtype_of<T>())) {
    const Array<U, N> raw = load_exact<U, N>(f, h, shape, p, m);
    auto out = clone_geometry<T, N>(raw.layout());
    assign_generated(*out, make_node(fn::cast_to<T>{}, raw.leaf()));
    return Array<T, N>(std::move(out));
  } else {
    throw error("tessera: internal error: load_converted without a safe cast");
  }
}

}  // namespace detail::npy

/// save_npy(path, a): writes `a` (an Array or View of any rank) to a NumPy .npy file, format 1.0
/// (2.0 when the header needs it), Fortran order, little-endian. A sharded array is written part
/// by part, each part's rows at their file offsets through a host chunk of at most 16 MiB; strided
/// views are packed on their own devices first. The file appears complete or not at all (written
/// under a temporary name, then renamed). Throws invalid_argument for a default-constructed array
/// or a path that cannot be created, backend_error when a write fails.
template <detail::array_like X>
void save_npy(const std::filesystem::path& path, const X& a) {
  using T = detail::value_of<X>;
  constexpr int N = detail::array_rank<X>;
  const std::string who = "tessera: save_npy(\"" + path.string() + "\")";
  if (!a.has_storage()) {
    throw invalid_argument(who + ": expected an array with a shape, found a default-constructed one");
  }
  if constexpr (!detail::npy::has_npy_dtype_v<T>) {
    throw invalid_argument(who + ": NumPy has no bfloat16 dtype: expected an array of bool, int32_t, int64_t, half, "
                                 "float or double, found bfloat16; save cast<float>(a), which is exact");
  } else {
    std::shared_ptr<const detail::Layout<T, N>> packed;
    const detail::Layout<T, N>* l = &a.layout();
    if (!detail::all_parts_contiguous(*l)) {
      packed = detail::clone_layout(*l);
      l = packed.get();
    }
    const std::string head = detail::npy::make_header(detail::npy::dtype_of<T>(), l->shape.data(), N);
    detail::npy::output_file out(path, who);
    out.get().resize(head.size() + static_cast<std::uint64_t>(detail::volume<N>(l->shape)) * sizeof(T));
    out.get().write_at(head.data(), head.size(), 0);
    detail::npy::move_rows(*l, detail::npy::parts_with_elements(*l, true), out.get(), head.size(),
                           detail::npy::direction::save);
    out.commit();
  }
}

/// load_npy<T, N>(path, placement = {}, memory = unified): a new Array<T, N> with the values of a
/// NumPy .npy file (versions 1.0-3.0, little-endian <f2 <f4 <f8 <i4 <i8 |b1, C or Fortran order),
/// placed by `placement`. Each part reads its own rows of a Fortran-order file; a C-order file is
/// transposed on load. The file's rank must be N; its dtype must be T's or convert to T by NumPy's
/// safe casting (bool to anything, int32 to int64 or double, half to float or double, int64 or float
/// to double), converted on the devices; bfloat16 has no NumPy dtype and is refused. Bad input
/// (missing file, bad magic, version, header or dtype, big-endian data, rank mismatch, truncated
/// data) throws invalid_argument naming the path, what was expected and what was found, before
/// anything is allocated.
template <element_type T, int N>
Array<T, N> load_npy(const std::filesystem::path& path, const Placement& placement = {},
                     memory m = memory::unified) {
  namespace npy = detail::npy;
  const std::string who = "tessera: load_npy<" + std::string(npy::type_name<T>()) + ", " +
                          std::to_string(N) + ">(\"" + path.string() + "\")";
  const npy::file f = npy::open_for_reading(path, who);
  const std::uint64_t size = f.size();
  const npy::header h = npy::read_header(f, size, who);
  if constexpr (!npy::has_npy_dtype_v<T>) {
    throw invalid_argument(who + ": NumPy has no bfloat16 dtype, so no .npy file holds bfloat16 values: expected "
                                 "bfloat16, found " + npy::descr_of(h.type) + " (" + npy::cpp_name(h.type) +
                           ") values; load it as load_npy<" + npy::cpp_name(h.type) + ", " + std::to_string(N) +
                           "> and convert with cast<bfloat16>(...)");
  } else {
    if (h.shape.size() != static_cast<std::size_t>(N)) {
      throw invalid_argument(who + ": rank mismatch: expected a rank-" + std::to_string(N) + " array, found shape " +
                             npy::shape_text(h.shape) + " (rank " + std::to_string(h.shape.size()) + ")");
    }
    Shape<N> shape{};
    std::copy(h.shape.begin(), h.shape.end(), shape.begin());
    const std::uint64_t room = (size - h.data_offset) / npy::item_size(h.type);
    std::uint64_t count = 1;  // saturates at room + 1: only the comparison matters
    for (int k = 0; k < N; ++k) {
      const auto e = static_cast<std::uint64_t>(shape[k]);
      count = e == 0 ? 0 : count > (room + 1) / e ? room + 1 : count * e;
      if (count == 0) break;
    }
    if (count > room) {
      throw invalid_argument(who + ": truncated data: expected " + npy::shape_text(h.shape) + " " +
                             npy::descr_of(h.type) + " values after the " + std::to_string(h.data_offset) +
                             "-byte header, found " + std::to_string(size - h.data_offset) + " bytes of data");
    }
    if (h.type == npy::dtype_of<T>()) return npy::load_exact<T, N>(f, h, shape, placement, m);
    if (!npy::safe_cast(h.type, npy::dtype_of<T>())) {
      throw invalid_argument(who + ": the file holds " + npy::descr_of(h.type) + " (" + npy::cpp_name(h.type) +
                             ") values: expected " + npy::descr_of(npy::dtype_of<T>()) +
                             " or a dtype that converts to it safely; load it as load_npy<" + npy::cpp_name(h.type) +
                             ", " + std::to_string(N) + "> and convert with cast<" +
                             npy::cpp_name(npy::dtype_of<T>()) + ">(...)");
    }
    switch (h.type) {
      case npy::dtype::b1: return npy::load_converted<T, bool, N>(f, h, shape, placement, m);
      case npy::dtype::i4: return npy::load_converted<T, std::int32_t, N>(f, h, shape, placement, m);
      case npy::dtype::i8: return npy::load_converted<T, std::int64_t, N>(f, h, shape, placement, m);
      case npy::dtype::f2: return npy::load_converted<T, half, N>(f, h, shape, placement, m);
      case npy::dtype::f4: return npy::load_converted<T, float, N>(f, h, shape, placement, m);
      default: return npy::load_converted<T, double, N>(f, h, shape, placement, m);
    }
  }
}

}  // namespace tessera
