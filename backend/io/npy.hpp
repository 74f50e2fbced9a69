// SPDX-License-Identifier: Apache-2.0
// Tessera .npy layer: the parts of reading and writing NumPy .npy files that do not depend on an
// element type or rank (files, the header's parser and writer, dtype names), compiled once into
// tessera_runtime (backend/io/npy.cpp). dsl/tessera/npy.hpp keeps the templates that move each
// part's rows. This header includes no system or <filesystem> header, so that every program that
// includes tessera.hpp does not pay for them; paths are native strings (POSIX: UTF-8 bytes).
//
// Failures throw tessera::invalid_argument (bad input, naming the caller `who`, what was expected
// and what was found) or tessera::backend_error (a failing system call, naming the file).
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace tessera::detail::npy {

enum class dtype { b1, i4, i8, f4, f8, f2 };

// NumPy's descr ("<f4"), the C++ name ("float") and the size in bytes of each dtype.
const char* descr_of(dtype t);
const char* cpp_name(dtype t);
std::size_t item_size(dtype t);

// NumPy's safe casting, np.can_cast(from, to, "safe"), among Tessera's element types: every value
// survives, except that int64 -> float64 may round, as NumPy accepts. constexpr: load_npy chooses
// the conversions it instantiates with it.
constexpr bool safe_cast(dtype from, dtype to) {
  if (from == to || from == dtype::b1) return true;
  if (from == dtype::f2) return to == dtype::f4 || to == dtype::f8;
  if (from == dtype::i4) return to == dtype::i8 || to == dtype::f8;
  return (from == dtype::i8 || from == dtype::f4) && to == dtype::f8;
}

// An open file descriptor with positioned, complete reads and writes (pread/pwrite loop over
// short transfers and EINTR). Every failure names the file.
class file {
 public:
  file(int fd, std::string path);
  file(file&& o) noexcept;
  file(const file&) = delete;
  file& operator=(const file&) = delete;
  ~file();

  void read_at(void* dst, std::size_t n, std::uint64_t at) const;
  void write_at(const void* src, std::size_t n, std::uint64_t at) const;
  std::uint64_t size() const;
  void resize(std::uint64_t bytes) const;
  // Closing reports delayed write errors (NFS), so a writer closes before it renames.
  void close();
  [[noreturn]] void fail(const char* call) const;

 private:
  int fd_;
  std::string path_;
};

// A new file written next to its final path and renamed over it on commit(): a failed save leaves
// no half-written file behind, and an existing file stays intact until the new one is complete.
class output_file {
 public:
  output_file(const std::string& path, const std::string& who);
  output_file(const output_file&) = delete;
  output_file& operator=(const output_file&) = delete;
  ~output_file();
  const file& get() const { return *f_; }
  void commit();

 private:
  std::string final_;
  std::string tmp_;
  std::unique_ptr<file> f_;
  bool committed_ = false;
};

// Opens a regular file for reading; invalid_argument when it cannot be opened or is a directory.
file open_for_reading(const std::string& path, const std::string& who);

struct header {
  dtype type = dtype::f4;
  bool fortran_order = false;
  std::vector<std::int64_t> shape;
  std::uint64_t data_offset = 0;  // bytes before the first element (magic, version, length, dict)
};

// A shape as Python writes a tuple: "(3, 4)", "(5,)", "()".
std::string shape_text(const std::vector<std::int64_t>& s);

// Reads and checks the magic, the version (1.0, 2.0 or 3.0) and the header dict of a file of
// `file_size` bytes: {'descr': '<f4', 'fortran_order': False, 'shape': (3, 4), } in any key order,
// either quote, any spacing, Python 2's `3L`.
header read_header(const file& f, std::uint64_t file_size, const std::string& who);

// The complete prefix of a Fortran-order file: magic, version, length and the dict, padded with
// spaces and a newline so that the data starts at a multiple of 64 bytes, as NumPy writes it.
std::string make_header(dtype t, const std::int64_t* shape, int rank);

}  // namespace tessera::detail::npy
