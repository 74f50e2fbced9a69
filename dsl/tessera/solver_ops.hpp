// SPDX-License-Identifier: Apache-2.0
// Tessera: the dense solvers themselves (included by solver.hpp, which holds the planning
// helpers): each copies its input, plans one SolverTask per part (run_solver), turns LAPACK's
// info into linalg_error, and finishes with ordinary assignments (triangles, pivots) and products.
#pragma once
#include <tessera/solver.hpp>

namespace tessera {
namespace detail {

// Whether A (a square matrix split by columns over several GPUs of this process) is solved where
// it lies (cusolverMg; Tessera's own split cholesky, which needs only CUDA, shares the condition),
// instead of gathered on one device.
template <class T, int N>
bool solve_in_place_over_gpus(const Layout<T, N>& a) {
  if constexpr (N != 2) {
    return false;
  } else {
    if (a.replicated || a.shard_dim != 1 || a.parts.size() < 2 || a.parts.size() > max_mg_devices) return false;
    // A matrix narrower than two columns per GPU gains nothing from the split, and every GPU must
    // hold at least one tile: such a matrix is gathered instead.
    if (a.shape[0] < 2 * static_cast<index_t>(a.parts.size())) return false;
    int ids[max_mg_devices];
    for (std::size_t k = 0; k < a.parts.size(); ++k) ids[k] = a.parts[k].device.id();
    return solver::multi_gpu_available(ids, a.parts.size());
  }
}

// A's column blocks copied into 1-D block-cyclic tiles (block b on device b % G,
// as that device's local block b / G), with pivots beside them: the task's `a` and `ipiv`, and
// the buffers its job uses. `tiles` describes them as a layout (several parts per device).
template <class T>
struct mg_tiles {
  Layout<T, 2> tiles;
  MgSolveTask task{};
  std::vector<std::shared_ptr<rt::buffer>> buffers;
};

template <class T>
mg_tiles<T> copy_to_tiles(const Layout<T, 2>& a) {
  const index_t n = a.shape[0];
  const int G = static_cast<int>(a.parts.size());
  // Tiles of at most 256 columns (cusolverMg's examples) spread the LU's trailing updates over
  // every GPU; a small matrix takes narrower ones (n / G, at least 2) so that each GPU holds at
  // least one. The columns are then shared evenly among that many tiles, so that the last tile is
  // at most `blocks` - 1 columns short: 1025 columns on 4 GPUs are 5 tiles of 205, not 4 of 256
  // and one of 1.
  const index_t widest = std::min<index_t>(256, n / G);
  const index_t count = (n + widest - 1) / widest;  // tiles of `widest` that hold the columns
  const index_t tile = (n + count - 1) / count;
  const index_t blocks = (n + tile - 1) / tile;
  mg_tiles<T> m;
  m.tiles.shape = a.shape;
  m.tiles.shard_dim = 1;
  m.tiles.mem = memory::device;
  MgSolveTask& t = m.task;
  t.type = solver_type<T>();
  t.n = n, t.tile = tile, t.count = G;
  std::vector<std::shared_ptr<rt::buffer>> local(static_cast<std::size_t>(G));
  for (int g = 0; g < G; ++g) {
    const Device d = a.parts[static_cast<std::size_t>(g)].device;
    const index_t cols = ((blocks - g + G - 1) / G) * tile;  // every device holds a block
    rt::check_free(d.id(), static_cast<std::size_t>(n * cols) * sizeof(T));
    local[static_cast<std::size_t>(g)] =
        std::make_shared<rt::buffer>(d.id(), static_cast<std::size_t>(n * cols) * sizeof(T), memory::device);
    auto piv = std::make_shared<rt::buffer>(d.id(), static_cast<std::size_t>(cols) * sizeof(std::int32_t), memory::device);
    t.devices[g] = d.id();
    t.a[g] = local[static_cast<std::size_t>(g)]->ptr;
    t.ipiv[g] = static_cast<std::int32_t*>(piv->ptr);
    m.buffers.push_back(local[static_cast<std::size_t>(g)]);
    m.buffers.push_back(std::move(piv));
  }
  for (index_t b = 0; b < blocks; ++b) {
    const auto g = static_cast<std::size_t>(b % G);
    Part<T, 2> q;
    q.device = a.parts[g].device;
    q.buf = local[g];
    q.ptr = static_cast<T*>(local[g]->ptr) + (b / G) * tile * n;
    q.extent = {n, std::min(tile, n - b * tile)};
    q.stride = {1, n};
    q.origin = {0, b * tile};
    m.tiles.parts.push_back(std::move(q));
  }
  copy_into(m.tiles, a);
  return m;
}

// Runs the task on A's first device (it drives the others: cusolverMg, or split_cholesky.cpp) and
// returns getrf's or potrf's info; a negative one (a rejected argument) throws.
template <class T>
int run_over_gpus(mg_tiles<T>& m, const Layout<T, 2>& a, rt::buffer* x, const char* what) {
  int info = 0;
  m.task.info = &info;
  std::vector<Job<MgSolveTask>> jobs{{.task = m.task, .device = a.parts[0].device, .shard = 0, .n = a.shape[0] * a.shape[0]}};
  for (auto& b : m.buffers) jobs[0].uses.add(b.get());
  if (x != nullptr) jobs[0].uses.add(x);
  execute(jobs);
  if (info < 0) {
    throw backend_error("tessera: the multi-GPU factorization rejected its argument " + std::to_string(-info) + " in " +
                        what);
  }
  return info;
}

// solve(A, B) with A's columns over GPUs: A into the tiles, B into X on A's first device, then one
// MgSolveTask (getrf + getrs across the devices). X lies on A's first device.
template <class T, int NB>
std::shared_ptr<const Layout<T, NB>> solve_over_gpus(const Layout<T, 2>& a, const std::shared_ptr<const Layout<T, NB>>& pb,
                                                     const Shape<NB>& bshape, const char* what, bool eye) {
  const index_t n = a.shape[0];
  auto m = copy_to_tiles<T>(a);
  m.task.kind = mg_kind::solve;
  m.task.nrhs = NB == 2 ? bshape[NB - 1] : 1;
  Geometry<NB> g = geometry_from_placement<NB>(bshape, on(a.parts[0].device));
  auto x = std::make_shared<const Layout<T, NB>>(allocate_layout<T, NB>(g, a.mem));
  if constexpr (NB == 2) {
    if (eye) assign_node(*x, Broadcasted<fn::eye_of<T>, IndexLeaf<NB>>{{n}, {IndexLeaf<NB>{bshape}}}, par);
    else copy_into(*x, *pb);
  } else {
    copy_into(*x, *pb);
  }
  m.task.x = x->parts[0].ptr;
  const int info = run_over_gpus<T>(m, a, x->parts[0].buf.get(), what);
  throw_if_singular<T, 2>(what, a, std::vector<std::int32_t>{info});
  return x;
}

// X = A \ B for A n x n (x batch) and B n, n x r, or (stacks) n x batch, n x r x batch. `eye`:
// B is the identity (inv), `pb` unused.
template <class T, int N, int NB>
std::shared_ptr<const Layout<T, NB>> solve_layouts(const std::shared_ptr<const Layout<T, N>>& pa,
                                                   const std::shared_ptr<const Layout<T, NB>>& pb, const char* what,
                                                   bool eye) {
  const Layout<T, N>& a = *pa;
  require_square(what, a);
  const index_t n = a.shape[0], batch = batch_of(a);
  Shape<NB> bshape{};
  if (eye) {
    if constexpr (NB == N) bshape = matrix_shape<NB>(n, n, batch);
  } else {
    bshape = pb->shape;
    const bool rows_ok = bshape[0] == n;
    const bool batch_ok = N == 2 || bshape[NB - 1] == batch;
    if (!rows_ok || !batch_ok) {
      throw dimension_mismatch("tessera::dimension_mismatch: " + std::string(what) + " with " + matrix_name("A", a) +
                               " and B " + shape_string<NB>(bshape) + ": B must have " + std::to_string(n) +
                               " rows (A's size)" + (N == 3 ? " and " + std::to_string(batch) + " matrices" : "") +
                               ", found " + std::to_string(bshape[0]) + " rows" +
                               (N == 3 ? " and " + std::to_string(bshape[NB - 1]) : ""));
    }
  }
  const index_t nrhs = NB == N ? bshape[1] : 1;
  if constexpr (N == 2) {
    if (solve_in_place_over_gpus(a)) return solve_over_gpus<T, NB>(a, pb, bshape, what, eye);
  }
  auto whole = whole_matrices<T, N>(pa, what);
  const bool gathered = whole != pa;  // A was split along rows or columns: B follows it
  auto w = gathered ? whole : clone_layout<T, N>(*pa);
  // X starts as B beside each part of A's copy: the assignment's placement rule refuses a B whose
  // blocks are elsewhere before anything is factored.
  auto x = allocate_beside<T, NB>(*w, bshape);
  if (gathered && !eye) {
    copy_into(*x, *pb);
  } else if constexpr (NB != N) {
    assign_node(*x, ArrayLeaf<T, NB>{pb}, par);
  } else if (eye) {
    assign_node(*x, Broadcasted<fn::eye_of<T>, IndexLeaf<NB>>{{n > 0 ? n : 1}, {IndexLeaf<NB>{bshape}}}, par);
  } else {
    assign_node(*x, ArrayLeaf<T, NB>{pb}, par);
  }
  auto piv = allocate_beside<std::int32_t, N - 1>(*w, vector_shape<N>(n, batch));
  const auto info = run_solver<T, N>(*w, solver::kind::gesv, n, n, [&](Job<SolverTask>& j, std::size_t s) {
    const auto& px = x->parts[s];
    const auto& pp = piv->parts[s];
    j.task.k = nrhs;
    j.task.b = px.ptr, j.task.ldb = n > 0 ? n : 1, j.task.stride_b = n * nrhs;
    j.task.ipiv = pp.ptr, j.task.stride_piv = n;
    j.uses.add(px.buf.get());
    j.uses.add(pp.buf.get());
  });
  throw_if_singular(what, a, info);
  return x;
}

// LU of the copy of every square matrix of A (one, or a stack): each matrix's {diagonal of U,
// LAPACK's pivots}, read to the host.
template <class T, int N>
std::vector<std::pair<std::vector<T>, std::vector<std::int32_t>>> lu_diagonals(
    const std::shared_ptr<const Layout<T, N>>& pa, const char* what) {
  require_square(what, *pa);
  const index_t n = pa->shape[0], batch = batch_of(*pa);
  std::vector<std::pair<std::vector<T>, std::vector<std::int32_t>>> out(static_cast<std::size_t>(batch));
  if (n == 0 || batch == 0) return out;
  auto w = working_copy<T, N>(pa, what);
  auto piv = allocate_beside<std::int32_t, N - 1>(*w, vector_shape<N>(n, batch));
  // An exactly singular matrix is no error here: det is 0 and logdet -inf.
  run_solver<T, N>(*w, solver::kind::getrf, n, n, [&](Job<SolverTask>& j, std::size_t s) {
    j.task.ipiv = piv->parts[s].ptr, j.task.stride_piv = n;
    j.uses.add(piv->parts[s].buf.get());
  });
  const std::size_t bytes = static_cast<std::size_t>(n) * sizeof(std::int32_t);
  for (std::size_t s = 0; s < w->parts.size(); ++s) {
    const auto& p = w->parts[s];
    if (p.empty()) continue;
    const index_t count = N == 3 ? p.extent[2] : 1, first = N == 3 ? p.origin[2] : 0;
    for (index_t i = 0; i < count; ++i) {
      auto& [d, pv] = out[static_cast<std::size_t>(first + i)];
      d.resize(static_cast<std::size_t>(n));
      pv.resize(static_cast<std::size_t>(n));
      // The diagonal: n rows of one element, n + 1 elements apart.
      rt::copy_to_host(p.device.id(), d.data(), sizeof(T), p.ptr + i * n * n, static_cast<std::size_t>(n + 1) * sizeof(T),
                       sizeof(T), static_cast<std::size_t>(n));
      rt::copy_to_host(p.device.id(), pv.data(), bytes, piv->parts[s].ptr + i * n, bytes, bytes, 1);
    }
    if (w->replicated) break;  // every copy of a replicated matrix holds the same factors
  }
  return out;
}

template <class T>
slogdet_result<T> slogdet_of(const std::vector<T>& d, const std::vector<std::int32_t>& piv) {
  double sign = 1.0, logabs = 0.0;
  for (std::size_t i = 0; i < d.size(); ++i) {
    if (piv[i] != static_cast<std::int32_t>(i + 1)) sign = -sign;
    const double v = static_cast<double>(d[i]);
    if (v == 0.0) return {T(0), -std::numeric_limits<T>::infinity()};
    if (v < 0) sign = -sign;
    logabs += std::log(std::fabs(v));
  }
  return {static_cast<T>(sign), static_cast<T>(logabs)};
}

template <class T>
T det_of(const std::vector<T>& d, const std::vector<std::int32_t>& piv) {
  double v = 1.0;
  for (std::size_t i = 0; i < d.size(); ++i)
    v *= piv[i] != static_cast<std::int32_t>(i + 1) ? -static_cast<double>(d[i]) : static_cast<double>(d[i]);
  return static_cast<T>(v);
}

template <class T>
T logdet_of(const std::vector<T>& d, const std::vector<std::int32_t>& piv) {
  const auto r = slogdet_of<T>(d, piv);
  return r.sign < 0 ? std::numeric_limits<T>::quiet_NaN() : r.logabsdet;
}

// One value per matrix of a stack, as a vector with the stack's devices and batch blocks.
template <class T>
Array<T, 1> per_matrix(const Layout<T, 3>& a, const std::vector<T>& v) {
  auto out = allocate_beside<T, 1>(a, Shape<1>{static_cast<index_t>(v.size())});
  for (const auto& p : out->parts) {
    if (p.empty()) continue;
    const std::size_t bytes = static_cast<std::size_t>(p.extent[0]) * sizeof(T);
    rt::copy_from_host(p.device.id(), p.ptr, bytes, v.data() + p.origin[0], bytes, bytes, 1);
  }
  return Array<T, 1>(out);
}

// f(diagonal, pivots) of each matrix: a host scalar for one matrix, a vector for a stack.
template <class T, int N, class F>
auto per_matrix_lu(const std::shared_ptr<const Layout<T, N>>& pa, const char* what, F&& f) {
  const auto lus = lu_diagonals<T, N>(pa, what);
  if constexpr (N == 2) {
    return f(lus[0].first, lus[0].second);
  } else {
    using R = decltype(f(lus[0].first, lus[0].second));
    std::vector<R> v;
    for (const auto& [d, piv] : lus) v.push_back(f(d, piv));
    if constexpr (std::is_same_v<R, T>) {
      return per_matrix<T>(*pa, v);
    } else {
      std::vector<T> sign, logabs;
      for (const auto& r : v) sign.push_back(r.sign), logabs.push_back(r.logabsdet);
      return slogdet_result<Array<T, 1>>{per_matrix<T>(*pa, sign), per_matrix<T>(*pa, logabs)};
    }
  }
}

template <class T, int N>
svd_result<T, N> svd_layouts(const std::shared_ptr<const Layout<T, N>>& pa, bool vectors, const char* what) {
  const Layout<T, N>& a = *pa;
  const index_t m = a.shape[0], n = a.shape[1], batch = batch_of(a);
  // cuSOLVER's gesvd takes m >= n: a wide matrix is factored as its transpose, A' = U2 S Vt2, so
  // that A = Vt2' S U2'.
  const bool wide = m < n;
  const index_t mm = wide ? n : m, k = wide ? m : n;
  auto w = working_copy<T, N>(pa, what, wide);
  auto s = allocate_beside<T, N - 1>(*w, vector_shape<N>(k, batch));
  std::shared_ptr<const Layout<T, N>> u, vt;
  if (vectors) {
    u = allocate_beside<T, N>(*w, matrix_shape<N>(mm, k, batch));
    vt = allocate_beside<T, N>(*w, matrix_shape<N>(k, k, batch));
  }
  const auto info = run_solver<T, N>(*w, solver::kind::gesvd, mm, k, [&](Job<SolverTask>& j, std::size_t p) {
    j.task.b = s->parts[p].ptr, j.task.stride_b = k;
    j.task.vectors = vectors;
    j.task.ldu = mm, j.task.ldvt = k > 0 ? k : 1;
    j.uses.add(s->parts[p].buf.get());
    if (vectors) {
      j.task.u = u->parts[p].ptr, j.task.stride_u = mm * k;
      j.task.vt = vt->parts[p].ptr, j.task.stride_vt = k * k;
      j.uses.add(u->parts[p].buf.get());
      j.uses.add(vt->parts[p].buf.get());
    }
  });
  throw_if_unconverged(what, a, info);
  if (!vectors) return {Array<T, N>(), Array<T, N - 1>(s), Array<T, N>()};
  if (!wide) return {Array<T, N>(u), Array<T, N - 1>(s), Array<T, N>(vt)};
  return {Array<T, N>(transposed_copy<T, N>(*vt)), Array<T, N - 1>(s), Array<T, N>(transposed_copy<T, N>(*u))};
}

template <class T>
eigh_result<T, 2> eigh_over_gpus(const Layout<T, 2>& a, bool vectors, const char* what);

template <class T, int N>
eigh_result<T, N> eigh_layouts(const std::shared_ptr<const Layout<T, N>>& pa, bool vectors, const char* what) {
  const Layout<T, N>& a = *pa;
  require_square(what, a);
  const index_t n = a.shape[0];
  if constexpr (N == 2) {
    if (solve_in_place_over_gpus(a)) return eigh_over_gpus<T>(a, vectors, what);
  }
  auto w = working_copy<T, N>(pa, what);
  auto vals = allocate_beside<T, N - 1>(*w, vector_shape<N>(n, batch_of(a)));
  const auto info = run_solver<T, N>(*w, solver::kind::syevd, n, n, [&](Job<SolverTask>& j, std::size_t s) {
    j.task.b = vals->parts[s].ptr, j.task.stride_b = n;
    j.task.vectors = vectors;
    j.uses.add(vals->parts[s].buf.get());
  });
  throw_if_unconverged(what, a, info);
  return {Array<T, N - 1>(vals), vectors ? Array<T, N>(w) : Array<T, N>()};
}

// The default cut-off of lstsq and pinv: NumPy's rcond=None (and Julia's rtol), eps * max(m, n).
template <class T>
T default_rcond(index_t m, index_t n) {
  return std::numeric_limits<T>::epsilon() * static_cast<T>(m > n ? m : n);
}

// 1 / s for the singular values above rcond * max(s), 0 for the others, and how many are above.
template <class T>
std::pair<Array<T, 1>, index_t> pseudo_reciprocal(const Array<T, 1>& s, T rcond) {
  const auto host = to_host(s);
  const T tol = host.empty() ? T(0) : rcond * host[0];  // gesvd sorts them descending
  index_t rank = 0;
  for (T v : host) rank += v > tol ? 1 : 0;
  Array<T, 1> inv_s(clone_geometry<T, 1>(s.layout()));
  assign_node(inv_s.layout(), Broadcasted<fn::reciprocal_above<T>, ArrayLeaf<T, 1>>{{tol}, {s.leaf()}}, par);
  return {std::move(inv_s), rank};
}

template <class T, int N>
[[noreturn]] void throw_not_positive_definite(const Layout<T, N>& a, std::int64_t b, int code) {
  throw linalg_error("tessera::linalg_error: cholesky(A) with " + matrix_name("A", a) + ": A" + which_matrix<T, N>(b) +
                         " is not positive definite: its leading minor of order " + std::to_string(code) +
                         " is not (pivot " + std::to_string(code - 1) + ", 0-based); nothing was written",
                     code - 1, b);
}

template <class T, int N>
void zero_upper(const std::shared_ptr<const Layout<T, N>>& l) {
  const index_t n = l->shape[0];
  if (n == 0) return;
  assign_node(*l, Broadcasted<fn::keep_triangle<T>, ArrayLeaf<T, N>, IndexLeaf<N>>{
                      {n, n, true}, {ArrayLeaf<T, N>{l}, IndexLeaf<N>{l->shape}}},
              par);
}

// cholesky(A) with A's columns over GPUs: Tessera's own potrf over the tiles (split_cholesky.cpp),
// then the factor copied back into A's column blocks: L has A's placement.
template <class T>
Array<T, 2> cholesky_over_gpus(const Layout<T, 2>& a) {
  auto m = copy_to_tiles<T>(a);
  m.task.kind = mg_kind::cholesky;
  if (const int info = run_over_gpus<T>(m, a, nullptr, "cholesky(A)"); info > 0) {
    throw_not_positive_definite<T, 2>(a, 0, info);
  }
  auto out = std::make_shared<const Layout<T, 2>>(allocate_layout<T, 2>(geometry_of(a), a.mem));
  copy_into(*out, m.tiles);
  zero_upper<T, 2>(out);
  return Array<T, 2>(out);
}

// eigh(A) with A's columns over GPUs: syevd on the tiles (cusolverMg); V copied back into A's
// column blocks (A's placement), w replicated over A's devices.
template <class T>
eigh_result<T, 2> eigh_over_gpus(const Layout<T, 2>& a, bool vectors, const char* what) {
  const index_t n = a.shape[0];
  auto m = copy_to_tiles<T>(a);
  m.task.kind = mg_kind::eigh;
  m.task.vectors = vectors;
  std::vector<T> w(static_cast<std::size_t>(n));
  m.task.w = w.data();
  if (run_over_gpus<T>(m, a, nullptr, what) > 0) throw_if_unconverged<T, 2>(what, a, std::vector<std::int32_t>{1});
  Array<T, 1> vals = from_host(w, {n}, replicate(a.devices()), a.mem);
  if (!vectors) return {std::move(vals), Array<T, 2>()};
  auto out = std::make_shared<const Layout<T, 2>>(allocate_layout<T, 2>(geometry_of(a), a.mem));
  copy_into(*out, m.tiles);
  return {std::move(vals), Array<T, 2>(out)};
}

}  // namespace detail

/// solve(A, B): X with A X = B (NumPy's linalg.solve, Julia's A \ B) by LU with partial pivoting.
/// A is n x n and B a vector (n) or a matrix (n x r); for a stack A (n x n x batch) B is n x batch
/// or n x r x batch. X has B's shape and A's placement. An exactly singular A throws linalg_error
/// naming the zero pivot.
template <detail::solver_array A, detail::blas_array B>
  requires(std::remove_cvref_t<B>::rank == std::remove_cvref_t<A>::rank ||
           std::remove_cvref_t<B>::rank == std::remove_cvref_t<A>::rank - 1)
auto solve(const A& a, const B& b) {
  using T = detail::value_of<A>;
  static_assert(std::is_same_v<T, detail::value_of<B>>,
                "TESSERA_ELEMENT_TYPE_MISMATCH: solve takes two float or two double operands; convert one with "
                "Array<T, N>(cast<T>(x))");
  constexpr int N = std::remove_cvref_t<A>::rank, NB = std::remove_cvref_t<B>::rank;
  return Array<T, NB>(detail::solve_layouts<T, N, NB>(a.layout_ptr(), b.layout_ptr(), "solve(A, B)", false));
}

/// inv(A): the inverse of a square matrix (or of each matrix of a stack); a singular one throws
/// linalg_error naming the zero pivot.
template <detail::solver_array A>
auto inv(const A& a) {
  using T = detail::value_of<A>;
  constexpr int N = std::remove_cvref_t<A>::rank;
  return Array<T, N>(detail::solve_layouts<T, N, N>(a.layout_ptr(), nullptr, "inv(A)", true));
}

/// slogdet(A): {sign, log|det A|} (NumPy's slogdet, Julia's logabsdet), from A's LU: host scalars
/// for a matrix, vectors (the stack's placement) for a stack.
template <detail::solver_array A>
auto slogdet(const A& a) {
  using T = detail::value_of<A>;
  return detail::per_matrix_lu<T, std::remove_cvref_t<A>::rank>(a.layout_ptr(), "slogdet(A)", [](const auto& d, const auto& p) {
    return detail::slogdet_of<T>(d, p);
  });
}

/// det(A): the determinant of a square matrix, the product of U's diagonal with the pivots' sign;
/// 0 for an exactly singular matrix, 1 for a 0 x 0 one. A host scalar, or a vector for a stack.
template <detail::solver_array A>
auto det(const A& a) {
  using T = detail::value_of<A>;
  return detail::per_matrix_lu<T, std::remove_cvref_t<A>::rank>(a.layout_ptr(), "det(A)", [](const auto& d, const auto& p) {
    return detail::det_of<T>(d, p);
  });
}

/// logdet(A): log(det A) (Julia's logdet): -inf for a singular matrix, NaN when det A < 0 (the
/// log of a negative number; slogdet gives the sign and log|det A|).
template <detail::solver_array A>
auto logdet(const A& a) {
  using T = detail::value_of<A>;
  return detail::per_matrix_lu<T, std::remove_cvref_t<A>::rank>(a.layout_ptr(), "logdet(A)", [](const auto& d, const auto& p) {
    return detail::logdet_of<T>(d, p);
  });
}

/// cholesky(A): the lower triangular L with A = L L' (NumPy's linalg.cholesky) of a symmetric
/// positive definite matrix, from its lower triangle. One that is not positive definite throws
/// linalg_error naming the leading minor.
template <detail::solver_array A>
auto cholesky(const A& a) {
  using T = detail::value_of<A>;
  constexpr int N = std::remove_cvref_t<A>::rank;
  const auto& l = a.layout();
  detail::require_square("cholesky(A)", l);
  const index_t n = l.shape[0];
  if constexpr (N == 2) {
    if (detail::solve_in_place_over_gpus(l)) return detail::cholesky_over_gpus<T>(l);
  }
  auto w = detail::working_copy<T, N>(a.layout_ptr(), "cholesky(A)");
  const auto info = detail::run_solver<T, N>(*w, detail::solver::kind::potrf, n, n, [](auto&, std::size_t) {});
  if (const auto [b, code] = detail::first_failure(info); b >= 0) detail::throw_not_positive_definite<T, N>(l, b, code);
  // potrf leaves the strict upper triangle as it was: zero it, in place.
  detail::zero_upper<T, N>(w);
  return Array<T, N>(w);
}

/// lu(A): LAPACK's packed LU with partial pivoting of an m x n matrix (SciPy's lu_factor):
/// {LU, piv}, L unit lower triangular below the diagonal, U on and above it, and 0-based pivots
/// (row i was interchanged with row piv[i], in order). A singular matrix is factored (U has a zero
/// on its diagonal), not refused.
template <detail::solver_array A>
auto lu(const A& a) {
  using T = detail::value_of<A>;
  constexpr int N = std::remove_cvref_t<A>::rank;
  const auto& l = a.layout();
  const index_t m = l.shape[0], n = l.shape[1], k = m < n ? m : n;
  auto w = detail::working_copy<T, N>(a.layout_ptr(), "lu(A)");
  auto piv = detail::allocate_beside<std::int32_t, N - 1>(*w, detail::vector_shape<N>(k, detail::batch_of(l)));
  detail::run_solver<T, N>(*w, detail::solver::kind::getrf, m, n, [&](auto& j, std::size_t s) {
    j.task.ipiv = piv->parts[s].ptr, j.task.stride_piv = k;
    j.uses.add(piv->parts[s].buf.get());
  });
  detail::assign_node(*piv, detail::Broadcasted<detail::fn::pivot_from_lapack, detail::ArrayLeaf<std::int32_t, N - 1>>{
                                {}, {detail::ArrayLeaf<std::int32_t, N - 1>{piv}}},
                      par);
  return lu_result<T, N>{Array<T, N>(w), Array<std::int32_t, N - 1>(piv)};
}

/// qr(A): the reduced QR of an m x n matrix (NumPy's mode='reduced'): {Q m x k, R k x n}, k =
/// min(m, n), Q with orthonormal columns, R upper triangular (Householder, geqrf + orgqr).
template <detail::solver_array A>
auto qr(const A& a) {
  using T = detail::value_of<A>;
  constexpr int N = std::remove_cvref_t<A>::rank;
  const auto& l = a.layout();
  const index_t m = l.shape[0], n = l.shape[1], k = m < n ? m : n, batch = detail::batch_of(l);
  auto w = detail::working_copy<T, N>(a.layout_ptr(), "qr(A)");
  auto tau = detail::allocate_beside<T, N - 1>(*w, detail::vector_shape<N>(k, batch));
  auto with_tau = [&](auto& j, std::size_t s) {
    j.task.b = tau->parts[s].ptr, j.task.stride_b = k;
    j.uses.add(tau->parts[s].buf.get());
  };
  detail::run_solver<T, N>(*w, detail::solver::kind::geqrf, m, n, with_tau);
  // R: the upper triangle of the first k rows, before orgqr overwrites them with Q.
  const Shape<N> rshape = detail::matrix_shape<N>(k, n, batch);
  auto r = detail::allocate_beside<T, N>(*w, rshape);
  if (k > 0) {
    auto top = [&] {
      if constexpr (N == 2) return detail::make_view<T, N, N>(*w, range(0, k), range(0, n));
      else return detail::make_view<T, N, N>(*w, range(0, k), range(0, n), range(0, batch));
    }();
    detail::assign_node(*r, detail::Broadcasted<detail::fn::keep_triangle<T>, detail::ArrayLeaf<T, N>, detail::IndexLeaf<N>>{
                                {k, n, false}, {detail::ArrayLeaf<T, N>{top}, detail::IndexLeaf<N>{rshape}}},
                        par);
  }
  // Q: orgqr turns the first k columns of each matrix into Q's (the matrix stride stays m * n).
  detail::run_solver<T, N>(*w, detail::solver::kind::orgqr, m, k, [&](auto& j, std::size_t s) {
    with_tau(j, s);
    j.task.k = k;
    j.task.stride_a = m * n;
  });
  if (k == n) return qr_result<T, N>{Array<T, N>(w), Array<T, N>(r)};
  auto left = [&] {
    if constexpr (N == 2) return detail::make_view<T, N, N>(*w, range(0, m), range(0, k));
    else return detail::make_view<T, N, N>(*w, range(0, m), range(0, k), range(0, batch));
  }();
  return qr_result<T, N>{Array<T, N>(detail::clone_layout<T, N>(*left)), Array<T, N>(r)};
}

/// svd(A): the thin SVD (NumPy's full_matrices=False): {U m x k, S k descending, Vt k x n}, k =
/// min(m, n), A = U diag(S) Vt. A non-converging iteration throws linalg_error.
template <detail::solver_array A>
auto svd(const A& a) {
  return detail::svd_layouts<detail::value_of<A>, std::remove_cvref_t<A>::rank>(a.layout_ptr(), true, "svd(A)");
}

/// svdvals(A): the singular values alone, descending (Julia's svdvals).
template <detail::solver_array A>
auto svdvals(const A& a) {
  return detail::svd_layouts<detail::value_of<A>, std::remove_cvref_t<A>::rank>(a.layout_ptr(), false, "svdvals(A)").S;
}

/// eigh(A): {w ascending, V} of a symmetric matrix from its lower triangle (NumPy's eigh with
/// UPLO='L'), A V = V diag(w), V orthogonal.
template <detail::solver_array A>
auto eigh(const A& a) {
  return detail::eigh_layouts<detail::value_of<A>, std::remove_cvref_t<A>::rank>(a.layout_ptr(), true, "eigh(A)");
}

/// eigvalsh(A): the eigenvalues alone, ascending.
template <detail::solver_array A>
auto eigvalsh(const A& a) {
  return detail::eigh_layouts<detail::value_of<A>, std::remove_cvref_t<A>::rank>(a.layout_ptr(), false, "eigvalsh(A)").w;
}

/// lstsq(A, B[, rcond]): the minimum-norm x minimizing |A x - B| (NumPy's lstsq, through the
/// SVD like its gelsd): singular values at most rcond * max(S) count as zero (rcond < 0: eps *
/// max(m, n), NumPy's rcond=None). {x, rank, s}. A and B must be whole on the same devices (as
/// for matmul).
template <detail::matrix_array A, detail::blas_array B>
  requires(std::remove_cvref_t<B>::rank == 1 || std::remove_cvref_t<B>::rank == 2)
auto lstsq(const A& a, const B& b, double rcond = -1) {
  using T = detail::value_of<A>;
  static_assert(std::is_same_v<T, detail::value_of<B>>,
                "TESSERA_ELEMENT_TYPE_MISMATCH: lstsq takes two float or two double operands");
  constexpr int NB = std::remove_cvref_t<B>::rank;
  const index_t m = a.layout().shape[0], n = a.layout().shape[1];
  if (b.layout().shape[0] != m) {
    throw dimension_mismatch("tessera::dimension_mismatch: lstsq(A, B) with A " + detail::shape_string<2>(a.layout().shape) +
                             " and B " + detail::shape_string<NB>(b.layout().shape) + ": B must have " +
                             std::to_string(m) + " rows (A's), found " + std::to_string(b.layout().shape[0]));
  }
  auto f = detail::svd_layouts<T, 2>(a.layout_ptr(), true, "lstsq(A, B)");
  auto [inv_s, rank] = detail::pseudo_reciprocal<T>(f.S, rcond < 0 ? detail::default_rcond<T>(m, n) : T(rcond));
  Array<T, NB> y = matmul(transpose(f.U), b);
  y = y * inv_s;
  return lstsq_result<T, NB>{matmul(transpose(f.Vt), y), rank, f.S};
}

/// pinv(A[, rcond]): the Moore-Penrose pseudo-inverse (n x m) through the SVD, with lstsq's cut-off.
template <detail::matrix_array A>
auto pinv(const A& a, double rcond = -1) {
  using T = detail::value_of<A>;
  const index_t m = a.layout().shape[0], n = a.layout().shape[1];
  auto f = detail::svd_layouts<T, 2>(a.layout_ptr(), true, "pinv(A)");
  auto [inv_s, rank] = detail::pseudo_reciprocal<T>(f.S, rcond < 0 ? detail::default_rcond<T>(m, n) : T(rcond));
  (void)rank;
  Array<T, 2> vs = eval(transpose(f.Vt) * transpose(inv_s));
  return matmul(vs, transpose(f.U));
}

}  // namespace tessera
