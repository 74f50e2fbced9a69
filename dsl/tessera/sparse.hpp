// SPDX-License-Identifier: Apache-2.0
// Tessera: sparse matrices (sparse_matrix.hpp) and what a notebook does with them: build one
// (sparse(I, J, V, m, n) as Julia's SparseArrays, from a host CSR as SciPy's csr_matrix, the
// Laplacians), read it back (to_dense, to_host_csr, diag, nnz), work on its values (S * 2,
// abs(S), sum) and multiply: matmul(S, x) (SpMV) and matmul(S, X) (SpMM), one cuSPARSE call per
// shard on GPUs and loops on host devices, as SparseTasks through execute().
// A product needs, on each shard, the entries of x that its columns touch. x placed like S's
// column blocks (for a square matrix: like S's rows, which is how a vector of length n is sharded
// by default) has them in its parts but for the remote block's ghost rows, which the gather plan
// made with the matrix brings from their owners (pack, peer copies or messages, while the local
// block multiplies); a replicated x (or one on S's one device) needs no exchange; any other x is
// first copied to S's column blocks. docs/semantics.md, "Sparse matrices", says the rest.
#pragma once
#include <tessera/copy.hpp>
#include <tessera/creation.hpp>
#include <tessera/linalg.hpp>
#include <tessera/reduce.hpp>
#include <tessera/reduce_dims.hpp>
#include <tessera/sparse_matrix.hpp>

#include <algorithm>
#include <limits>
#include <string>
#include <type_traits>
#include <vector>

namespace tessera {
namespace detail::sparse {

template <class X>
concept index_array = is_array_like<std::remove_cvref_t<X>>::value && std::remove_cvref_t<X>::rank == 1 &&
                      std::is_integral_v<typename std::remove_cvref_t<X>::value_type> &&
                      !std::is_same_v<typename std::remove_cvref_t<X>::value_type, bool>;
template <class X>
concept value_array = is_array_like<std::remove_cvref_t<X>>::value && std::remove_cvref_t<X>::rank == 1 &&
                      sparse_value<typename std::remove_cvref_t<X>::value_type>;
template <class X>
concept dense_operand = is_array_like<std::remove_cvref_t<X>>::value &&
                        (std::remove_cvref_t<X>::rank == 1 || std::remove_cvref_t<X>::rank == 2) &&
                        sparse_value<typename std::remove_cvref_t<X>::value_type>;

template <class T>
SparseMatrix<T> from_csr(const host_csr<T>& a, const Placement& p, const char* what) {
  auto [s, v] = build<T>(a.m, a.n, p, what, [&](index_t r0, index_t rows) {
    host_csr<T> b;
    b.m = rows, b.n = a.n;
    const auto first = a.indptr[static_cast<std::size_t>(r0)];
    for (index_t i = 0; i <= rows; ++i) b.indptr.push_back(a.indptr[static_cast<std::size_t>(r0 + i)] - first);
    b.indices.assign(a.indices.begin() + first, a.indices.begin() + first + b.indptr.back());
    b.data.assign(a.data.begin() + first, a.data.begin() + first + b.indptr.back());
    return b;
  });
  return SparseMatrix<T>(std::move(s), std::move(v));
}

// The task of one shard, with the matrix's parts filled in.
template <class T>
Job<SparseTask> shard_job(const structure& s, const Array<T, 1>& values, std::size_t i, op o) {
  const shard_info& si = s.shards[i];
  auto part = [&](const auto& a) -> const auto& { return a.layout().parts[i]; };
  Job<SparseTask> j{.task = {.op = o, .type = type_of<T>(), .rows = si.rows, .cols = si.cols, .row0 = si.row0,
                             .col0 = si.col0, .nnz_local = si.nnz_local, .rowptr = part(s.rowptr).ptr,
                             .col = part(s.col).ptr, .val = part(values).ptr, .rem_rows = si.rem_rows,
                             .rem_row = part(s.rem_row).ptr, .rem_ptr = part(s.rem_ptr).ptr,
                             .ghost = part(s.ghost).ptr},
                    .device = s.devices[i],
                    .shard = static_cast<int>(i),
                    .n = si.nnz};
  for (auto* b : {part(s.rowptr).buf.get(), part(s.col).buf.get(), part(s.rem_row).buf.get(),
                  part(s.rem_ptr).buf.get(), part(s.ghost).buf.get()}) {
    j.uses.add(b);
  }
  j.uses.add(part(values).buf.get());
  return j;
}

// A dense operand's part as a column-major block: stride 1 down the rows and, for a matrix, a
// leading dimension at least the rows.
template <class T, int N>
bool column_major(const Part<T, N>& p) {
  if (p.empty()) return true;
  if (p.extent[0] > 1 && p.stride[0] != 1) return false;
  if constexpr (N == 2) return p.extent[1] <= 1 || p.stride[1] >= p.extent[0];
  return true;
}
template <class T, int N>
index_t leading_dim(const Part<T, N>& p) {
  if constexpr (N == 2) return p.extent[1] > 1 ? p.stride[1] : std::max<index_t>(p.extent[0], 1);
  return std::max<index_t>(p.extent[0], 1);
}

// The geometry of an array of `shape` (rows first) with S's row blocks (or `cols`: its column blocks).
template <int N>
Geometry<N> geometry_like(const structure& s, const Shape<N>& shape, bool cols) {
  Geometry<N> g{shape, -1, false, {}};
  g.replicated = s.placement == structure::kind::replicated;
  if (s.placement == structure::kind::sharded) g.shard_dim = 0;
  for (std::size_t i = 0; i < s.devices.size(); ++i) {
    typename Geometry<N>::Box b{s.devices[i], {}, shape};
    if (s.placement == structure::kind::sharded) {
      b.origin[0] = cols ? s.shards[i].col0 : s.shards[i].row0;
      b.extent[0] = cols ? s.shards[i].cols : s.shards[i].rows;
    }
    g.boxes.push_back(b);
  }
  return g;
}

// x as the product reads it: every row on every device of S (`full`), or S's column blocks.
template <class T, int N>
struct operand_parts {
  std::shared_ptr<const Layout<T, N>> l;
  bool full = false;
  std::vector<const Part<T, N>*> part;  // per shard
};
template <class T, int N>
operand_parts<T, N> place_operand(const structure& s, const std::shared_ptr<const Layout<T, N>>& xl) {
  operand_parts<T, N> o{xl, false, {}};
  const Layout<T, N>& x = *xl;
  // x must share a device with S: replicated over S's devices, or sharded or placed anywhere that
  // meets them (then it moves to S's blocks). An x wholly on devices S does not use is refused
  // rather than silently copied across.
  bool meets = false;
  for (auto& p : x.parts) meets = meets || std::find(s.devices.begin(), s.devices.end(), p.device) != s.devices.end();
  if (!meets) {
    throw placement_mismatch("tessera::placement_mismatch: matmul(S, x) with S " + std::to_string(s.m) + " x " +
                             std::to_string(s.n) + " " + placement_text(s) + " and x " + shape_string<N>(x.shape) + " " +
                             describe_placement(x) + ": x has no part on S's devices (it may be sharded over "
                             "them, on one of them, or replicated over them). Fix: copy(x, shard(0, S.devices())) or copy(x, "
                             "replicate(S.devices()))");
  }
  auto find = [&](Device d, index_t origin, index_t extent) -> const Part<T, N>* {
    for (auto& p : x.parts) {
      if (p.device == d && p.origin[0] == origin && p.extent[0] == extent && column_major(p)) return &p;
    }
    return nullptr;
  };
  // Whole on every device of S?
  bool whole = x.replicated || x.parts.size() == 1;
  for (std::size_t i = 0; i < s.devices.size() && whole; ++i) {
    const Part<T, N>* p = find(s.devices[i], 0, x.shape[0]);
    whole = p != nullptr;
    o.part.push_back(p);
  }
  if (whole) {
    o.full = true;
    return o;
  }
  o.part.clear();
  bool like = s.placement == structure::kind::sharded && x.shard_dim == 0;
  for (std::size_t i = 0; i < s.devices.size() && like; ++i) {
    const Part<T, N>* p = find(s.devices[i], s.shards[i].col0, s.shards[i].cols);
    like = p != nullptr || s.shards[i].cols == 0;
    o.part.push_back(p);
  }
  if (like) return o;
  // Anything else: a copy with S's column blocks (every row on each device of a replicated S).
  auto placed = std::make_shared<const Layout<T, N>>(
      allocate_layout<T, N>(geometry_like<N>(s, x.shape, true), x.mem));
  copy_into(*placed, x);
  o.l = placed;
  o.full = s.placement != structure::kind::sharded;
  o.part.clear();
  for (auto& p : placed->parts) o.part.push_back(&p);
  return o;
}

template <class T, int N>
Array<T, N> product(const SparseMatrix<T>& S, const std::shared_ptr<const Layout<T, N>>& xl) {
  const structure& s = S.s();
  const Layout<T, N>& x0 = *xl;
  if (x0.shape[0] != s.n) {
    throw dimension_mismatch("tessera::dimension_mismatch: matmul(S, x) with S " + std::to_string(s.m) + " x " +
                             std::to_string(s.n) + " and x " + shape_string<N>(x0.shape) + ": S has " +
                             std::to_string(s.n) + " columns and x " + std::to_string(x0.shape[0]) +
                             " rows; they must be equal");
  }
  const index_t k = N == 2 ? x0.shape[N - 1] : 1;
  const operand_parts<T, N> xo = place_operand<T, N>(s, xl);
  Shape<N> yshape = x0.shape;
  yshape[0] = s.m;
  Array<T, N> y(std::make_shared<const Layout<T, N>>(allocate_layout<T, N>(geometry_like<N>(s, yshape, false), x0.mem)));
  if (s.m == 0 || k == 0) return y;
  const auto& yl = y.layout();
  const Array<T, 1>& values = S.values();
  const std::size_t parts = s.devices.size();
  const bool exchange = !xo.full && !s.plan.empty();
  // The gather plan: each source packs the rows it sends, then every segment moves at once on the
  // copy streams while the local blocks multiply.
  Array<T, 1> sent, ghosts;
  rt::copy_ticket ticket;
  if (exchange) {
    std::vector<index_t> n_send, n_ghost;
    for (auto& i : s.shards) n_send.push_back(i.sends * k), n_ghost.push_back(i.ghosts * k);
    sent = shard_array<T>(s, n_send);
    ghosts = shard_array<T>(s, n_ghost);
    std::vector<Job<SparseTask>> packs;
    for (std::size_t i = 0; i < parts; ++i) {
      if (s.shards[i].sends == 0) continue;
      const auto& xp = *xo.part[i];
      const auto& sp = sent.layout().parts[i];
      Job<SparseTask> j{.task = {.op = op::pack, .type = type_of<T>(), .k = k, .x = xp.ptr, .ldx = leading_dim(xp),
                                 .idx = s.send_idx.layout().parts[i].ptr, .count = s.shards[i].sends, .y = sp.ptr,
                                 .ldy = s.shards[i].sends},
                        .device = s.devices[i],
                        .shard = static_cast<int>(i),
                        .n = s.shards[i].sends * k};
      j.uses.add(xp.buf.get());
      j.uses.add(sp.buf.get());
      j.uses.add(s.send_idx.layout().parts[i].buf.get());
      packs.push_back(std::move(j));
    }
    execute(packs);
    std::vector<rt::copy_region> regions;
    for (const segment& g : s.plan) {
      const auto& sp = sent.layout().parts[static_cast<std::size_t>(g.src)];
      const auto& gp = ghosts.layout().parts[static_cast<std::size_t>(g.dst)];
      const index_t src_rows = s.shards[static_cast<std::size_t>(g.src)].sends;
      const index_t dst_rows = s.shards[static_cast<std::size_t>(g.dst)].ghosts;
      regions.push_back({.dst_device = s.devices[static_cast<std::size_t>(g.dst)].id(),
                         .dst = gp.ptr ? gp.ptr + g.dst_off : nullptr,
                         .dst_pitch = static_cast<std::size_t>(dst_rows) * sizeof(T),
                         .src_device = s.devices[static_cast<std::size_t>(g.src)].id(),
                         .src = sp.ptr ? sp.ptr + g.src_off : nullptr,
                         .src_pitch = static_cast<std::size_t>(src_rows) * sizeof(T),
                         .width = static_cast<std::size_t>(g.count) * sizeof(T),
                         .height = static_cast<std::size_t>(k),
                         .dst_buf = gp.buf.get(),
                         .src_buf = sp.buf.get()});
    }
    rt::start_copies(regions.data(), regions.size(), ticket);
  }
  std::vector<Job<SparseTask>> local, remote;
  for (std::size_t i = 0; i < parts; ++i) {
    const shard_info& si = s.shards[i];
    if (si.rows == 0) continue;
    const auto& yp = yl.parts[i];
    const Part<T, N>* xp = xo.part[i];
    Job<SparseTask> j = shard_job<T>(s, values, i, op::product);
    j.task.k = k;
    j.task.y = yp.ptr;
    j.task.ldy = leading_dim(yp);
    j.uses.add(yp.buf.get());
    if (xp) {
      j.task.x = xp->ptr + (xo.full ? si.col0 : 0);
      j.task.ldx = leading_dim(*xp);
      j.uses.add(xp->buf.get());
    }
    local.push_back(j);
    if (si.rem_rows == 0) continue;
    j.task.op = op::remote;
    if (xo.full) {
      j.task.x = nullptr;
      j.task.x_full = xp->ptr;
      j.task.ld_full = leading_dim(*xp);
    } else {
      const auto& gp = ghosts.layout().parts[i];
      j.task.x = gp.ptr;
      j.task.ldx = si.ghosts;
      j.uses.add(gp.buf.get());
    }
    remote.push_back(std::move(j));
  }
  execute(local);
  if (exchange) rt::finish_copies(ticket);
  execute(remote);
  return y;
}

}  // namespace detail::sparse

/// sparse(I, J, V, m, n[, placement]): the m x n matrix with V[k] at (I[k], J[k]), 0-based,
/// duplicates summed (Julia's sparse(I, J, V, m, n); SciPy's coo_matrix((V, (I, J))).tocsr()).
/// Placement: shard(0) (rows over the devices, the default), replicate() or on(device).
template <detail::sparse::sparse_value T>
SparseMatrix<T> sparse(const std::vector<std::int64_t>& I, const std::vector<std::int64_t>& J, const std::vector<T>& V,
                       index_t m, index_t n, const Placement& p = {}) {
  const auto a = detail::sparse::from_triplets<T>(I.data(), I.size(), J.data(), J.size(), V.data(), V.size(), m, n);
  return detail::sparse::from_csr<T>(a, p, "sparse(I, J, V, m, n)");
}
/// The same from Tessera arrays (any placement; read to the host once).
template <detail::sparse::index_array XI, detail::sparse::index_array XJ, detail::sparse::value_array XV>
auto sparse(const XI& I, const XJ& J, const XV& V, index_t m, index_t n, const Placement& p = {}) {
  using T = typename std::remove_cvref_t<XV>::value_type;
  auto widen = [](const auto& a) {
    const auto h = to_host(a);
    return std::vector<std::int64_t>(h.begin(), h.end());
  };
  return sparse<T>(widen(I), widen(J), to_host(V), m, n, p);
}
/// sparse(csr[, placement]): from a host CSR (checked; columns sorted and duplicates summed).
template <detail::sparse::sparse_value T>
SparseMatrix<T> sparse(const host_csr<T>& csr, const Placement& p = {}) {
  return detail::sparse::from_csr<T>(detail::sparse::canonical<T>(csr), p, "sparse(host_csr)");
}

/// laplacian<T>(n): the n x n 1-D Laplacian with Dirichlet ends (2 on the diagonal, -1 beside it:
/// symmetric positive definite, the negative of the second difference). Built shard by shard.
template <detail::sparse::sparse_value T = double>
SparseMatrix<T> laplacian(index_t n, const Placement& p = {}) {
  auto [s, v] = detail::sparse::build<T>(n, n, p, "laplacian(n)", [&](index_t r0, index_t rows) {
    return detail::sparse::laplacian_rows<T>(n, r0, rows);
  });
  return SparseMatrix<T>(std::move(s), std::move(v));
}
/// laplacian_2d<T>(nx, ny): the 5-point Laplacian on an nx x ny grid with Dirichlet boundaries,
/// unknown (x, y) at row x + nx * y (column-major, like an nx x ny Array): 4 on the diagonal, -1
/// for each neighbour. Symmetric positive definite.
template <detail::sparse::sparse_value T = double>
SparseMatrix<T> laplacian_2d(index_t nx, index_t ny, const Placement& p = {}) {
  if (nx < 0 || ny < 0 || (nx > 0 && ny > std::numeric_limits<index_t>::max() / nx)) {
    throw invalid_argument("tessera: laplacian_2d(" + std::to_string(nx) + ", " + std::to_string(ny) +
                           "): expected grid sizes >= 0 whose product fits a 64-bit index");
  }
  auto [s, v] = detail::sparse::build<T>(nx * ny, nx * ny, p, "laplacian_2d(nx, ny)", [&](index_t r0, index_t rows) {
    return detail::sparse::laplacian_2d_rows<T>(nx, ny, r0, rows);
  });
  return SparseMatrix<T>(std::move(s), std::move(v));
}

/// The matrix in compressed sparse rows on the host (canonical: columns ascending).
template <class T>
host_csr<T> to_host_csr(const SparseMatrix<T>& S) {
  using namespace detail::sparse;
  const structure& s = S.s();
  const auto rowptr = to_host(s.rowptr), col = to_host(s.col), rem_row = to_host(s.rem_row),
             rem_ptr = to_host(s.rem_ptr);
  const auto ghost = to_host(s.ghost);
  const auto val = to_host(S.values());
  const bool sharded = s.placement == structure::kind::sharded;
  std::vector<host_shard<T>> hs;
  std::size_t o_rp = 0, o_c = 0, o_rr = 0, o_rptr = 0, o_g = 0;
  for (std::size_t i = 0; i < (sharded ? s.shards.size() : 1); ++i) {
    const shard_info& si = s.shards[i];
    host_shard<T> h;
    h.row0 = si.row0, h.rows = si.rows, h.col0 = si.col0, h.cols = si.cols, h.nnz_local = si.nnz_local;
    auto take = [](const auto& from, std::size_t& off, std::size_t n) {
      std::vector<typename std::remove_cvref_t<decltype(from)>::value_type> out(from.begin() + off, from.begin() + off + n);
      off += n;
      return out;
    };
    std::size_t o_v = o_c;
    h.rowptr = take(rowptr, o_rp, static_cast<std::size_t>(si.rows + 1));
    h.col = take(col, o_c, static_cast<std::size_t>(si.nnz));
    h.val = take(val, o_v, static_cast<std::size_t>(si.nnz));
    h.rem_row = take(rem_row, o_rr, static_cast<std::size_t>(si.rem_rows));
    h.rem_ptr = take(rem_ptr, o_rptr, static_cast<std::size_t>(si.rem_rows + 1));
    h.ghost = take(ghost, o_g, static_cast<std::size_t>(si.ghosts));
    hs.push_back(std::move(h));
  }
  return join<T>(hs, s.m, s.n);
}

template <class T>
SparseMatrix<T> SparseMatrix<T>::make_transpose() const {
  using K = detail::sparse::structure::kind;
  const auto t = detail::sparse::transposed<T>(to_host_csr(*this));
  const Placement p = s().placement == K::replicated ? replicate(s().devices)
                      : s().placement == K::single   ? on(s().devices[0])
                                                     : shard(0, s().devices);
  return detail::sparse::from_csr<T>(t, p, "transpose(S)");
}

/// transpose(S): S's transpose as a view; products, to_dense and sums through it use S's
/// transpose as a matrix, built on first use and kept with S.
template <class T>
struct SparseTranspose {
  SparseMatrix<T> parent;
  index_t rows() const { return parent.cols(); }
  index_t cols() const { return parent.rows(); }
  Shape<2> shape() const { return {parent.cols(), parent.rows()}; }
  index_t nnz() const { return parent.nnz(); }
  const SparseMatrix<T>& matrix() const { return parent.transposed_matrix(); }
};
template <class T>
SparseTranspose<T> transpose(const SparseMatrix<T>& S) {
  return {S};
}
template <class T>
SparseMatrix<T> transpose(const SparseTranspose<T>& t) {
  return t.parent;
}
template <class T>
index_t nnz(const SparseMatrix<T>& S) {
  return S.nnz();
}
template <class T>
index_t nnz(const SparseTranspose<T>& t) {
  return t.nnz();
}

/// matmul(S, x) (SpMV) and matmul(S, X) (SpMM): S's rows times a vector of length n or an n x k
/// matrix; the result is placed like S's rows (see the header comment for x's placement).
template <class T, detail::sparse::dense_operand X>
auto matmul(const SparseMatrix<T>& S, const X& x) {
  static_assert(std::is_same_v<T, typename std::remove_cvref_t<X>::value_type>,
                "TESSERA_ELEMENT_TYPE_MISMATCH: matmul(S, x) takes a SparseMatrix<T> and an array of T");
  constexpr int N = std::remove_cvref_t<X>::rank;
  x.layout();  // a default-constructed array throws here
  return detail::sparse::product<T, N>(S, x.layout_ptr());
}
template <class T, detail::sparse::dense_operand X>
auto matmul(const SparseTranspose<T>& t, const X& x) {
  return matmul(t.matrix(), x);
}

/// to_dense(S): the m x n dense Array, placed like S's rows (shard(0) of a sharded matrix).
template <class T>
Array<T, 2> to_dense(const SparseMatrix<T>& S) {
  using namespace detail::sparse;
  const structure& s = S.s();
  Array<T, 2> d(std::make_shared<const detail::Layout<T, 2>>(
      detail::allocate_layout<T, 2>(geometry_like<2>(s, {s.m, s.n}, false), memory::unified)));
  std::vector<detail::Job<detail::SparseTask>> jobs;
  for (std::size_t i = 0; i < s.devices.size(); ++i) {
    const auto& p = d.layout().parts[i];
    if (p.empty()) continue;
    auto j = shard_job<T>(s, S.values(), i, op::to_dense);
    j.task.y = p.ptr;
    j.task.ldy = leading_dim(p);
    j.task.count = s.n;
    j.uses.add(p.buf.get());
    jobs.push_back(std::move(j));
  }
  detail::execute(jobs);
  return d;
}
template <class T>
Array<T, 2> to_dense(const SparseTranspose<T>& t) {
  return to_dense(t.matrix());
}

/// diag(S): the min(m, n) diagonal entries (0 where none is stored), placed like S's rows.
template <class T>
Array<T, 1> diag(const SparseMatrix<T>& S) {
  using namespace detail::sparse;
  const structure& s = S.s();
  const index_t kd = std::min(s.m, s.n);
  detail::Geometry<1> g = geometry_like<1>(s, {kd}, false);
  for (auto& b : g.boxes) {
    b.origin[0] = std::min(b.origin[0], kd);
    b.extent[0] = std::clamp<index_t>(kd - b.origin[0], 0, b.extent[0]);
  }
  Array<T, 1> out(std::make_shared<const detail::Layout<T, 1>>(detail::allocate_layout<T, 1>(g, memory::unified)));
  std::vector<detail::Job<detail::SparseTask>> jobs;
  for (std::size_t i = 0; i < s.devices.size(); ++i) {
    const auto& p = out.layout().parts[i];
    if (p.empty()) continue;
    auto j = shard_job<T>(s, S.values(), i, op::diag);
    j.task.y = p.ptr;
    j.task.count = p.extent[0];
    j.uses.add(p.buf.get());
    jobs.push_back(std::move(j));
  }
  detail::execute(jobs);
  return out;
}
template <class T>
Array<T, 1> diag(const SparseTranspose<T>& t) {
  return diag(t.parent);
}

/// Elementwise work on the stored values (the structure is shared): S * a, a * S, S / a, -S,
/// abs(S). Zeros stay unstored, so only maps with f(0) == 0 are offered.
template <class T, class A>
  requires std::is_arithmetic_v<A>
SparseMatrix<T> operator*(const SparseMatrix<T>& S, A a) {
  return S.with_values(S.values() * static_cast<T>(a));
}
template <class T, class A>
  requires std::is_arithmetic_v<A>
SparseMatrix<T> operator*(A a, const SparseMatrix<T>& S) {
  return S.with_values(static_cast<T>(a) * S.values());
}
template <class T, class A>
  requires std::is_arithmetic_v<A>
SparseMatrix<T> operator/(const SparseMatrix<T>& S, A a) {
  return S.with_values(S.values() / static_cast<T>(a));
}
template <class T>
SparseMatrix<T> operator-(const SparseMatrix<T>& S) {
  return S.with_values(-S.values());
}
template <class T>
SparseMatrix<T> abs(const SparseMatrix<T>& S) {
  return S.with_values(abs(S.values()));
}

/// sum(S): the sum of the stored values.
template <class T>
T sum(const SparseMatrix<T>& S) {
  return static_cast<T>(sum(S.values()));
}
/// sum(S, dims(1)): the m x 1 row sums, placed like S's rows; dims(0): the 1 x n column sums;
/// dims(0, 1): the 1 x 1 total (Julia's sum(S; dims), which keeps the rank).
template <class T>
Array<T, 2> sum(const SparseMatrix<T>& S, const ReduceDims& d) {
  const auto mask = detail::reduced_mask<2>(d, "sum");
  auto ones_over = [](index_t n, const DeviceSet& devs) {
    return ones<T>({n, 1}, devs.size() == 1 ? on(devs[0]) : replicate(devs));
  };
  if (mask[1] && !mask[0]) return matmul(S, ones_over(S.cols(), S.devices()));
  const auto& t = S.transposed_matrix();
  auto colsums = matmul(t, ones_over(t.cols(), t.devices()));  // n x 1, placed like S's columns
  Array<T, 2> row(transpose(colsums));
  if (!mask[1]) return row;
  return Array<T, 2>(sum(row, dims(1)));
}

}  // namespace tessera
