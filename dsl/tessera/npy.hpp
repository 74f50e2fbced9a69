// SPDX-License-Identifier: Apache-2.0
// Tessera: NumPy .npy files (format versions 1.0, 2.0 and 3.0). save_npy writes Fortran order,
// which is Tessera's column-major order, so each part's rows go to their own file offsets and the
// array is never gathered on one device or in one host buffer; load_npy reads them back the same
// way. A C-order file is the Fortran-order file of the reversed shape: it is read into parts with
// reversed boxes and each part is transposed on its own device. See docs/semantics.md, "Files and
// interop". What depends on no element type (files, the header's parser and writer) is compiled
// into tessera_runtime (backend/io/npy.cpp): this header carries no system or <filesystem> header.
#pragma once
#include <backend/io/npy.hpp>
#include <tessera/reshape.hpp>
#include <tessera/transfer.hpp>

#include <array>
#include <concepts>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace tessera {
namespace detail::npy {

// The file name save_npy and load_npy take: a std::filesystem::path (or anything else whose
// native() is a std::string, as path's is on POSIX), a std::string, a string_view or a C string.
// A class of its own rather than std::filesystem::path, whose header would add about half a second
// of nvcc time to every program that includes tessera.hpp.
class path_ref {
 public:
  path_ref(const char* s) : s_(s) {}
  path_ref(std::string s) : s_(std::move(s)) {}
  path_ref(std::string_view s) : s_(s) {}
  template <class P>
    requires requires(const P& p) {
      { p.native() } -> std::convertible_to<const std::string&>;
    }
  path_ref(const P& p) : s_(p.native()) {}
  const std::string& string() const { return s_; }

 private:
  std::string s_;
};

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

template <class T>
const char* type_name() {
  if constexpr (has_npy_dtype_v<T>) return cpp_name(dtype_of<T>());
  else return "bfloat16";
}

// Sizes of the staging chunks: the runtime's pinned chunk, so that one chunk of the file is one
// pinned round trip to a GPU.
inline constexpr std::size_t chunk_bytes = rt::staging_chunk_bytes;

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
    const std::size_t rows = height < chunk_bytes / row ? height : chunk_bytes / row;
    auto stage = std::make_unique_for_overwrite<unsigned char[]>(rows * row);
    for (std::size_t h0 = 0; h0 < height; h0 += rows) {
      const std::size_t h = rows < height - h0 ? rows : height - h0;
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
        const std::size_t n = (piece < r.width - c ? piece : r.width - c) * sz;
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
void save_npy(const detail::npy::path_ref& path, const X& a) {
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
    detail::npy::output_file out(path.string(), who);
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
Array<T, N> load_npy(const detail::npy::path_ref& path, const Placement& placement = {},
                     memory m = memory::unified) {
  namespace npy = detail::npy;
  const std::string who = "tessera: load_npy<" + std::string(npy::type_name<T>()) + ", " +
                          std::to_string(N) + ">(\"" + path.string() + "\")";
  const npy::file f = npy::open_for_reading(path.string(), who);
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
    for (std::size_t k = 0; k < shape.size(); ++k) shape[k] = h.shape[k];
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
