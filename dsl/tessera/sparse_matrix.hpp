// SPDX-License-Identifier: Apache-2.0
// Tessera: SparseMatrix<T>, compressed sparse rows (CSR) of float or double, sharded by rows over
// devices (or replicated, or on one device). Each shard keeps its block of rows on its device as
// a local block (columns in the shard's column block, local numbers) and a remote block (the other
// columns, as positions in the shard's ghost list); backend/sparse/csr.hpp builds both on the host.
// The index arrays and the values are ordinary Tessera arrays whose parts are the shards, so
// memory, residency, host transfers and elementwise work on the values need nothing new.
// A matrix is immutable: operations return new matrices, which share the index arrays.
#pragma once
#include <tessera/array.hpp>
#include <tessera/assign.hpp>
#include <tessera/transfer.hpp>

#include <backend/sparse/sparse.hpp>

#include <algorithm>
#include <memory>
#include <mutex>
#include <string>
#include <type_traits>
#include <vector>

namespace tessera {
namespace detail::sparse {

template <class T>
concept sparse_value = std::is_same_v<T, float> || std::is_same_v<T, double>;

template <class T>
constexpr dtype type_of() {
  return std::is_same_v<T, float> ? dtype::f32 : dtype::f64;
}

// What the shards look like, kept on the host: sizes and offsets into the shard arrays.
struct shard_info {
  index_t row0 = 0, rows = 0, col0 = 0, cols = 0;
  index_t nnz_local = 0, nnz = 0, rem_rows = 0, ghosts = 0, sends = 0;
};
// One piece of the gather plan: `count` rows of x that shard `src` sends (from `src_off` in its send
// buffer) land in shard `dst`'s ghost rows from `dst_off`.
struct segment {
  int src, dst;
  index_t src_off, dst_off, count;
};

// The index arrays and the gather plan of a matrix, shared by every matrix made from its values.
struct structure {
  index_t m = 0, n = 0, nnz = 0;
  enum class kind { sharded, replicated, single } placement = kind::single;
  DeviceSet devices;
  std::vector<shard_info> shards;  // one per device (replicated: the same for all)
  Array<std::int32_t, 1> rowptr, col, rem_row, rem_ptr, send_idx;
  Array<std::int64_t, 1> ghost;
  std::vector<segment> plan;  // empty unless sharded
};

// "replicated over [...]", "on cuda:0" or "sharded by rows over [...]".
inline std::string placement_text(const structure& s) {
  if (s.placement == structure::kind::replicated) return "replicated over " + device_list(s.devices);
  if (s.placement == structure::kind::single) return "on " + s.devices[0].name();
  return "sharded by rows over " + device_list(s.devices);
}

// A 1-D array whose part on device i holds sizes[i] elements (sharded, the blocks in device order),
// or, replicated or on one device, one array of sizes[0] elements on each device.
template <class E>
Array<E, 1> shard_array(const structure& s, const std::vector<index_t>& sizes) {
  Geometry<1> g;
  if (s.placement == structure::kind::sharded) {
    index_t total = 0;
    g.shard_dim = 0;
    for (std::size_t i = 0; i < s.devices.size(); ++i) {
      g.boxes.push_back({s.devices[i], {total}, {sizes[i]}});
      total += sizes[i];
    }
    g.shape = {total};
  } else {
    g.shape = {sizes[0]};
    g.replicated = s.placement == structure::kind::replicated;
    for (Device d : s.devices) g.boxes.push_back({d, {0}, {sizes[0]}});
  }
  return Array<E, 1>(std::make_shared<const Layout<E, 1>>(allocate_layout<E, 1>(g, memory::device)));
}

// Writes each shard's host values into its part (this rank's devices only).
template <class E, class Get>
void fill_parts(const Array<E, 1>& a, Get&& host_of) {
  const auto& l = a.layout();
  for (std::size_t i = 0; i < l.parts.size(); ++i) {
    const auto& p = l.parts[i];
    if (p.empty()) continue;
    const std::vector<E>& h = host_of(i);
    const std::size_t bytes = h.size() * sizeof(E);
    rt::copy_from_host(p.device.id(), p.ptr, bytes, h.data(), bytes, bytes, 1);
  }
}

// The matrix from its host shards (one per device; one for a replicated matrix or one on a
// device). `shards` is consumed.
template <class T>
std::pair<std::shared_ptr<const structure>, Array<T, 1>> upload(std::vector<host_shard<T>>&& hs, structure&& s) {
  const bool sharded = s.placement == structure::kind::sharded;
  const std::size_t parts = s.devices.size();
  auto at = [&](std::size_t i) -> const host_shard<T>& { return hs[sharded ? i : 0]; };
  std::vector<index_t> n_rowptr, n_col, n_rem, n_remptr, n_ghost, n_send;
  for (std::size_t i = 0; i < parts; ++i) {
    const auto& h = at(i);
    shard_info si{.row0 = h.row0, .rows = h.rows, .col0 = h.col0, .cols = h.cols, .nnz_local = h.nnz_local,
                  .nnz = static_cast<index_t>(h.val.size()), .rem_rows = static_cast<index_t>(h.rem_row.size()),
                  .ghosts = static_cast<index_t>(h.ghost.size()), .sends = 0};
    s.shards.push_back(si);
    s.nnz += sharded || i == 0 ? si.nnz : 0;
  }
  // The gather plan: the rows of x each shard's ghost list takes from each other shard. Ghost lists
  // are sorted, so what one source sends one destination is a contiguous run of it.
  std::vector<std::vector<std::int32_t>> send(parts);
  if (sharded) {
    for (std::size_t d = 0; d < parts; ++d) {
      const auto& g = hs[d].ghost;
      for (std::size_t src = 0; src < parts; ++src) {
        const index_t c0 = s.shards[src].col0, c1 = c0 + s.shards[src].cols;
        const auto a = std::lower_bound(g.begin(), g.end(), c0) - g.begin();
        const auto b = std::lower_bound(g.begin(), g.end(), c1) - g.begin();
        if (b == a) continue;
        s.plan.push_back({static_cast<int>(src), static_cast<int>(d), static_cast<index_t>(send[src].size()),
                          static_cast<index_t>(a), static_cast<index_t>(b - a)});
        for (auto k = a; k < b; ++k) send[src].push_back(static_cast<std::int32_t>(g[k] - c0));
      }
    }
    for (std::size_t i = 0; i < parts; ++i) s.shards[i].sends = static_cast<index_t>(send[i].size());
  }
  for (std::size_t i = 0; i < parts; ++i) {
    const auto& h = at(i);
    n_rowptr.push_back(static_cast<index_t>(h.rowptr.size()));
    n_col.push_back(static_cast<index_t>(h.col.size()));
    n_rem.push_back(static_cast<index_t>(h.rem_row.size()));
    n_remptr.push_back(static_cast<index_t>(h.rem_ptr.size()));
    n_ghost.push_back(static_cast<index_t>(h.ghost.size()));
    n_send.push_back(static_cast<index_t>(send[i].size()));
  }
  s.rowptr = shard_array<std::int32_t>(s, n_rowptr);
  s.col = shard_array<std::int32_t>(s, n_col);
  s.rem_row = shard_array<std::int32_t>(s, n_rem);
  s.rem_ptr = shard_array<std::int32_t>(s, n_remptr);
  s.ghost = shard_array<std::int64_t>(s, n_ghost);
  s.send_idx = shard_array<std::int32_t>(s, n_send);
  Array<T, 1> values = shard_array<T>(s, n_col);
  fill_parts(s.rowptr, [&](std::size_t i) -> const auto& { return at(i).rowptr; });
  fill_parts(s.col, [&](std::size_t i) -> const auto& { return at(i).col; });
  fill_parts(s.rem_row, [&](std::size_t i) -> const auto& { return at(i).rem_row; });
  fill_parts(s.rem_ptr, [&](std::size_t i) -> const auto& { return at(i).rem_ptr; });
  fill_parts(s.ghost, [&](std::size_t i) -> const auto& { return at(i).ghost; });
  fill_parts(s.send_idx, [&](std::size_t i) -> const auto& { return send[i]; });
  fill_parts(values, [&](std::size_t i) -> const auto& { return at(i).val; });
  return {std::make_shared<const structure>(std::move(s)), std::move(values)};
}

// The devices, row blocks and column blocks of an m x n matrix placed by `p`: shard(0) (the
// default: rows balanced like a vector of m elements over the devices, so that S * x is placed like
// the vectors of a solver), replicate() or on(d). The column blocks are the row blocks for a square
// matrix (x in S * x is then placed like S's rows) and a balanced split of n otherwise.
struct blocks {
  structure::kind kind;
  DeviceSet devices;
  std::vector<std::pair<index_t, index_t>> rows, cols;  // origin, extent per device
};
inline blocks blocks_of(index_t m, index_t n, const Placement& p, const char* what) {
  if (p.kind == Placement::kind_t::shard && p.dim != 0) {
    throw invalid_argument(std::string("tessera: ") + what + " with shard(" + std::to_string(p.dim) +
                           "): a sparse matrix is sharded by rows; expected shard(0), replicate() or on(device)");
  }
  const Geometry<1> g = geometry_from_placement<1>(Shape<1>{m}, p);
  blocks b;
  b.kind = g.replicated ? structure::kind::replicated
                        : g.shard_dim == 0 ? structure::kind::sharded : structure::kind::single;
  for (auto& box : g.boxes) b.devices.push_back(box.device);
  const int parts = static_cast<int>(b.devices.size());
  for (int i = 0; i < parts; ++i) {
    if (b.kind != structure::kind::sharded) {
      b.rows.push_back({0, m});
      b.cols.push_back({0, n});
      continue;
    }
    b.rows.push_back({g.boxes[i].origin[0], g.boxes[i].extent[0]});
    const auto [lo, hi] = balanced_block(n, parts, i);
    b.cols.push_back(m == n ? b.rows.back() : std::pair<index_t, index_t>{lo, hi - lo});
  }
  return b;
}

// Builds a matrix whose shard i gets the rows that rows_for(r0, rows) returns (a CSR of those rows
// with global columns, canonical).
template <class T, class Rows>
auto build(index_t m, index_t n, const Placement& p, const char* what, Rows&& rows_for) {
  const blocks b = blocks_of(m, n, p, what);
  std::vector<host_shard<T>> hs;
  const std::size_t count = b.kind == structure::kind::sharded ? b.devices.size() : 1;
  for (std::size_t i = 0; i < count; ++i) {
    const host_csr<T> block = rows_for(b.rows[i].first, b.rows[i].second);
    hs.push_back(make_shard<T>(rows_of<T>(block, 0, block.m), b.rows[i].first, b.cols[i].first, b.cols[i].second));
  }
  structure s;
  s.m = m, s.n = n;
  s.placement = b.kind;
  s.devices = b.devices;
  return upload<T>(std::move(hs), std::move(s));
}

}  // namespace detail::sparse

template <class T>
class SparseMatrix;
template <class T>
host_csr<T> to_host_csr(const SparseMatrix<T>& S);

/// A sparse matrix in compressed sparse rows (see the header comment). Made by sparse(...),
/// laplacian(...), laplacian_2d(...) or from another matrix; copies share the storage (immutable).
template <class T>
class SparseMatrix {
  static_assert(detail::sparse::sparse_value<T>, "TESSERA_SPARSE_TYPE: SparseMatrix<T> holds float or double");

 public:
  using value_type = T;
  SparseMatrix() = default;
  SparseMatrix(std::shared_ptr<const detail::sparse::structure> s, Array<T, 1> values)
      : st_(std::make_shared<state>(std::move(s), std::move(values))) {}

  index_t rows() const { return s().m; }
  index_t cols() const { return s().n; }
  Shape<2> shape() const { return {s().m, s().n}; }
  index_t nnz() const { return s().nnz; }
  /// Stored entries per device (one entry for a replicated matrix): how even the row blocks are.
  std::vector<index_t> nnz_per_shard() const {
    std::vector<index_t> out;
    for (auto& i : s().shards) out.push_back(i.nnz);
    if (s().placement != detail::sparse::structure::kind::sharded) out.resize(1);
    return out;
  }
  DeviceSet devices() const { return s().devices; }
  bool is_replicated() const { return s().placement == detail::sparse::structure::kind::replicated; }
  /// "sharded by rows over ... with blocks [..)", "replicated over ...", "on ...".
  std::string placement_string() const {
    std::string out = detail::sparse::placement_text(s());
    if (s().placement != detail::sparse::structure::kind::sharded) return out;
    out += " with blocks";
    for (auto& i : s().shards) out += " [" + std::to_string(i.row0) + "," + std::to_string(i.row0 + i.rows) + ")";
    return out;
  }
  /// The stored values, shard by shard (each shard's local block, then its remote block): an
  /// ordinary array, e.g. for sum(S.values()) or building a matrix with with_values.
  const Array<T, 1>& values() const { return st().values; }
  /// A matrix of the same structure with other values (an expression over values(): same length
  /// and placement), e.g. S.with_values(abs(S.values())).
  template <class X>
  SparseMatrix with_values(X&& x) const {
    Array<T, 1> v(std::forward<X>(x));
    const auto& a = values().layout();
    const auto& b = v.layout();
    bool same = a.shape == b.shape && a.parts.size() == b.parts.size();
    for (std::size_t i = 0; same && i < a.parts.size(); ++i) {
      same = a.parts[i].device == b.parts[i].device && a.parts[i].origin == b.parts[i].origin &&
             a.parts[i].extent == b.parts[i].extent;
    }
    if (!same) {
      throw placement_mismatch("tessera::placement_mismatch: SparseMatrix::with_values: the matrix stores " +
                               std::to_string(a.shape[0]) + " values " + describe_placement(a) + "; found " +
                               std::to_string(b.shape[0]) + " " + describe_placement(b) +
                               "; expected an expression over values()");
    }
    return SparseMatrix(st().structure, std::move(v));
  }

  const detail::sparse::structure& s() const { return *st().structure; }
  // S's transpose as a matrix, built once on first use (host assembly) and kept with S.
  const SparseMatrix& transposed_matrix() const {
    std::lock_guard<std::mutex> lock(st().mu);
    if (!st().transposed) st().transposed = std::make_shared<SparseMatrix>(make_transpose());
    return *st().transposed;
  }

 private:
  struct state {
    state(std::shared_ptr<const detail::sparse::structure> s, Array<T, 1> v)
        : structure(std::move(s)), values(std::move(v)) {}
    std::shared_ptr<const detail::sparse::structure> structure;
    Array<T, 1> values;
    mutable std::mutex mu;
    mutable std::shared_ptr<SparseMatrix> transposed;
  };
  const state& st() const {
    if (!st_) throw invalid_argument("tessera: this SparseMatrix is default-constructed and holds no matrix");
    return *st_;
  }
  SparseMatrix make_transpose() const;
  std::shared_ptr<const state> st_;
};

}  // namespace tessera
