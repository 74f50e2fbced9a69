// SPDX-License-Identifier: Apache-2.0
// Tessera: sharded linear algebra. transpose(A) and reverse(x, dim) are views (no copy);
// matmul(A, B) and matmul(A, x) run one BLAS call per device (cuBLAS on GPUs, CBLAS on host
// devices, backend/linalg) over the operands' parts on that device. How the work splits follows
// the operands' placements (docs/semantics.md, "Linear algebra"):
//   A sharded along rows, B whole on every device     -> C sharded along rows, no communication
//   A whole, B sharded along columns                   -> C sharded along columns
//   the inner dimension split (A along columns, B along rows, or one of them whole)
//                                                      -> partial products summed across devices:
//                                                         allreduce (replicated C, the default) or
//                                                         reduce-scatter (C sharded along its last dim)
//   both whole on the same devices                     -> C replicated (or on the one device)
// Anything else throws placement_mismatch with a fix. Elementwise `*` stays elementwise.
#pragma once
#include <tessera/array.hpp>
#include <tessera/assign.hpp>
#include <tessera/collective.hpp>

#include <backend/linalg/blas.hpp>

#include <string>
#include <type_traits>
#include <vector>

namespace tessera {
namespace detail {

template <class X>
concept blas_array = is_array_like<std::remove_cvref_t<X>>::value &&
                     (std::is_same_v<typename std::remove_cvref_t<X>::value_type, float> ||
                      std::is_same_v<typename std::remove_cvref_t<X>::value_type, double>);

// The transpose (2-d) or row (1-d: 1 x n) view of a layout: every part keeps its buffer.
template <class T, int N>
std::shared_ptr<const Layout<T, 2>> transposed(const Layout<T, N>& l) {
  auto out = std::make_shared<Layout<T, 2>>();
  out->mem = l.mem;
  out->replicated = l.replicated;
  auto swap2 = [](const Shape<N>& s, index_t one) {
    if constexpr (N == 2) return Shape<2>{s[1], s[0]};
    else return Shape<2>{one, s[0]};
  };
  out->shape = swap2(l.shape, 1);
  out->shard_dim = l.shard_dim < 0 ? -1 : (N == 2 ? 1 - l.shard_dim : 1);
  for (auto& p : l.parts) {
    Part<T, 2> q;
    q.device = p.device;
    q.buf = p.buf;
    q.ptr = p.ptr;
    q.extent = swap2(p.extent, 1);
    q.origin = swap2(p.origin, 0);
    q.stride = swap2(p.stride, volume<N>(p.extent));
    out->parts.push_back(std::move(q));
  }
  return out;
}

// How an operand is split over its devices, as the product sees it.
enum class split { whole, dim0, dim1 };

template <class T, int N>
split split_of(const Layout<T, N>& l) {
  if (l.replicated || l.parts.size() <= 1 || l.shard_dim < 0) return split::whole;
  return l.shard_dim == 0 ? split::dim0 : split::dim1;
}

// The part of `l` on device d holding rows [r0, r0 + rn) and, for a matrix, columns [c0, c0 + cn):
// the placement rule of every operation (operand_view), or null when there is none.
template <class T, int N>
const Part<T, N>* holding(const Layout<T, N>& l, Device d, index_t r0, index_t rn, index_t c0 = 0, index_t cn = 1) {
  Shape<N> o{}, e{};
  o[0] = r0, e[0] = rn;
  if constexpr (N == 2) o[1] = c0, e[1] = cn;
  return operand_view<T, N, N>(l, d, l.shape, o, e).part;
}

// (A std::optional without <optional>, which the umbrella header leaves out.)
struct maybe_operand {
  blas::operand value{};
  bool ok = false;
  explicit operator bool() const { return ok; }
  const blas::operand& operator*() const { return value; }
};
// A part as a BLAS matrix: column-major (stride 1 down the rows) or its transpose (stride 1
// along the columns); anything else (a strided view) is not one.
template <class T>
maybe_operand as_blas(const Part<T, 2>& p, index_t row0 = 0, index_t col0 = 0) {
  const index_t r = p.extent[0], c = p.extent[1];
  const T* base = p.ptr + row0 * p.stride[0] + col0 * p.stride[1];
  if (r <= 1 || p.stride[0] == 1) {
    const index_t ld = c <= 1 ? (r > 1 ? r : 1) : p.stride[1];
    if (ld >= (r > 1 ? r : 1)) return {blas::operand{base, ld, false}, true};
  }
  if (c <= 1 || p.stride[1] == 1) {
    const index_t ld = r <= 1 ? (c > 1 ? c : 1) : p.stride[0];
    if (ld >= (c > 1 ? c : 1)) return {blas::operand{base, ld, true}, true};
  }
  return {};
}

template <class T, int N>
bool blas_ready(const Layout<T, N>& l) {
  for (auto& p : l.parts) {
    if (p.empty()) continue;
    if constexpr (N == 2) {
      if (!as_blas(p)) return false;
    } else {
      if (p.extent[0] > 1 && p.stride[0] <= 0) return false;
    }
  }
  return true;
}

// The operand's layout, copied into contiguous storage (same devices and boxes) when a part is
// not a BLAS matrix or vector.
template <class T, int N>
std::shared_ptr<const Layout<T, N>> blas_layout(const std::shared_ptr<const Layout<T, N>>& l) {
  return blas_ready(*l) ? l : clone_layout<T, N>(*l);
}

template <class T>
constexpr blas::dtype blas_type() {
  return std::is_same_v<T, float> ? blas::dtype::f32 : blas::dtype::f64;
}

inline std::string split_name(split s, const char* dim0, const char* dim1) {
  return s == split::whole ? "whole (replicated or on one device)" : s == split::dim0 ? dim0 : dim1;
}

template <class T, int NA, int NB>
[[noreturn]] void product_mismatch(const Layout<T, NA>& a, const Layout<T, NB>& b, const std::string& why) {
  throw placement_mismatch("tessera::placement_mismatch: matmul(A, B) with A " + shape_string<NA>(a.shape) + ", " +
                           describe_placement(a) + " and B " + shape_string<NB>(b.shape) + ", " +
                           describe_placement(b) + ": " + why +
                           ". Supported: A sharded along rows (shard(0)) with B replicated; A replicated with B "
                           "sharded along columns (shard(1)); the inner dimension split (A shard(1) and B shard(0) "
                           "over the same devices and blocks, or one of them replicated); or both replicated. "
                           "Fix: create the operands with one of these placements.");
}

// One device's product: C (rows r0.. of `c`, m x n, contiguous) = A's rows [r0, r0 + m) and
// columns [k0, k0 + k) times B's rows [k0, k0 + k) and columns [c0, c0 + n) (or a vector), from the
// parts qa and qb that hold them.
template <class T, int NB>
Job<ProductTask> product_job(Device d, int shard, const Part<T, 2>& qa, const Part<T, NB>& qb, T* c, index_t r0,
                             index_t m, index_t c0, index_t n, index_t k0, index_t k) {
  Job<ProductTask> j{.task = {.type = blas_type<T>(), .matrix_vector = NB == 1, .m = m, .n = n, .k = k,
                              .a = *as_blas(qa, r0 - qa.origin[0], k0 - qa.origin[1]), .b = {}, .c = c,
                              .ldc = NB == 1 ? 1 : (m > 1 ? m : 1)},
                     .device = d,
                     .shard = shard,
                     .n = m * n * (k > 0 ? k : 1)};
  if constexpr (NB == 1) {
    j.task.b = {qb.ptr + (k0 - qb.origin[0]) * qb.stride[0], qb.extent[0] > 1 ? qb.stride[0] : 1, false};
  } else {
    j.task.b = *as_blas(qb, k0 - qb.origin[0], c0 - qb.origin[1]);
  }
  j.uses.add(qa.buf.get());
  j.uses.add(qb.buf.get());
  return j;
}

template <class T, int NB>
auto matmul_layouts(std::shared_ptr<const Layout<T, 2>> pa, std::shared_ptr<const Layout<T, NB>> pb,
                    const Placement& result) {
  const Layout<T, 2>& a0 = *pa;
  const Layout<T, NB>& b0 = *pb;
  const index_t m = a0.shape[0], k = a0.shape[1], kb = b0.shape[0];
  const index_t n = NB == 2 ? b0.shape[NB - 1] : 1;
  if (k != kb) {
    throw dimension_mismatch("tessera::dimension_mismatch: matmul(A, B) with A " + shape_string<2>(a0.shape) +
                             " and B " + shape_string<NB>(b0.shape) + ": A has " + std::to_string(k) +
                             " columns and B " + std::to_string(kb) + " rows; they must be equal");
  }
  using Out = Array<T, NB>;
  Shape<NB> cshape{};
  cshape[0] = m;
  if constexpr (NB == 2) cshape[1] = n;
  const split sa = split_of(a0), sb = split_of(b0);
  const bool k_split = sa == split::dim1 || (sb == split::dim0);
  const bool natural = result.kind == Placement::kind_t::default_shard;
  // Checked before anything is copied or allocated.
  if (sa == split::dim0 && sb != split::whole) product_mismatch(a0, b0, "A is sharded along rows, so B must be whole");
  if (sb == split::dim1 && sa != split::whole)
    product_mismatch(a0, b0, "B is sharded along columns, so A must be whole");
  // The devices that compute, and for a split inner dimension the blocks of k each one takes.
  DeviceSet devs;
  std::vector<std::pair<index_t, index_t>> kblock;  // origin, extent of k per device
  if (k_split) {
    const bool from_a = sa == split::dim1;
    if (from_a) {
      for (auto& p : a0.parts) devs.push_back(p.device), kblock.push_back({p.origin[1], p.extent[1]});
    } else {
      for (auto& p : b0.parts) devs.push_back(p.device), kblock.push_back({p.origin[0], p.extent[0]});
    }
    for (std::size_t d = 0; d < devs.size(); ++d) {
      const auto [k0, kn] = kblock[d];
      if (kn == 0 || m == 0 || n == 0) continue;  // no work there
      if (!holding(a0, devs[d], 0, m, k0, kn) || !holding(b0, devs[d], k0, kn, 0, n)) {
        product_mismatch(a0, b0, "the inner dimension is split over " + device_list(devs) + ", and " +
                                     (from_a ? "B" : "A") + " has no part on " + devs[d].name() + " holding block [" +
                                     std::to_string(k0) + "," + std::to_string(k0 + kn) +
                                     ") of it (A's column blocks and B's row blocks must agree)");
      }
    }
    if (!natural && !(result.kind == Placement::kind_t::replicate || result.kind == Placement::kind_t::single ||
                      (result.kind == Placement::kind_t::shard && result.dim == NB - 1))) {
      throw invalid_argument("tessera: matmul(A, B, placement) with a split inner dimension combines the partial "
                             "products by allreduce (replicate() or on(device)) or reduce-scatter (shard(" +
                             std::to_string(NB - 1) + ")); found another placement");
    }
    if (result.kind == Placement::kind_t::single) {
      bool computing = false;
      for (Device d : devs) computing = computing || d == result.devices[0];
      if (!computing) {
        throw invalid_argument("tessera: matmul(A, B, on(" + result.devices[0].name() + ")): the partial products "
                               "live on " + device_list(devs) + ", so the sum can land on one of those; move it "
                               "afterwards with copy(c, on(device))");
      }
    } else if (!natural && !result.devices.empty() && result.devices != devs) {
      throw invalid_argument("tessera: matmul(A, B, placement): the partial products live on " + device_list(devs) +
                             "; the result's placement names " + device_list(result.devices));
    }
  } else if (sa == split::dim0) {
    devs = a0.devices();
  } else if (sb == split::dim1) {
    devs = b0.devices();
  } else {
    devs = a0.devices();
  }
  if (!natural && !k_split) {
    // The result's placement follows from the operands'; a placement that names it is accepted.
    const int cdim = sa == split::dim0 ? 0 : sb == split::dim1 ? NB - 1 : -1;
    const bool same_devices = result.devices.empty() || result.devices == devs;
    const bool one = devs.size() == 1;
    const bool ok = same_devices && (one || (cdim >= 0 ? result.kind == Placement::kind_t::shard && result.dim == cdim
                                                       : result.kind == Placement::kind_t::replicate));
    if (!ok) {
      throw invalid_argument("tessera: matmul(A, B, placement): with A " + describe_placement(a0) + " and B " +
                             describe_placement(b0) + " the result is " +
                             (one ? "on " + devs[0].name()
                                  : cdim >= 0 ? "sharded along dim " + std::to_string(cdim) + " over " + device_list(devs)
                                              : "replicated over " + device_list(devs)) +
                             " (no communication); another placement is taken only when the inner dimension is split "
                             "over the devices. Leave the placement out, or move the result afterwards.");
    }
  }
  // The result's boxes (no split inner dimension): A's row blocks, B's column blocks, or whole copies.
  Geometry<NB> g{cshape, -1, false, {}};
  if (!k_split) {
    if (sa == split::dim0) g.shard_dim = 0;
    else if (sb == split::dim1) g.shard_dim = NB - 1;
    else g.replicated = devs.size() > 1 || a0.replicated;
    if (sa == split::dim0) {
      for (const auto& p : a0.parts) {
        typename Geometry<NB>::Box box{p.device, {}, cshape};
        box.origin[0] = p.origin[0], box.extent[0] = p.extent[0];
        g.boxes.push_back(box);
      }
    } else if (sb == split::dim1) {
      for (const auto& p : b0.parts) {
        typename Geometry<NB>::Box box{p.device, {}, cshape};
        box.origin[NB - 1] = p.origin[NB - 1], box.extent[NB - 1] = p.extent[NB - 1];
        g.boxes.push_back(box);
      }
    } else {
      for (Device d : devs) g.boxes.push_back({d, {}, cshape});
    }
    // Every operand's block must be on its box's device (checked before anything is allocated).
    for (const auto& box : g.boxes) {
      const index_t r0 = box.origin[0], rn = box.extent[0];
      const index_t c0 = NB == 2 ? box.origin[NB - 1] : 0, cn = NB == 2 ? box.extent[NB - 1] : 1;
      if (rn * cn == 0 || k == 0) continue;  // nothing read: the result is empty or zeros
      if (!holding(a0, box.device, r0, rn, 0, k) || !holding(b0, box.device, 0, k, c0, cn)) {
        product_mismatch(a0, b0, "both operands need a part on every computing device (" + device_list(devs) +
                                     ") holding the block it computes");
      }
    }
  }
  // Contiguous copies where a part is a strided view (same devices and boxes).
  pa = blas_layout<T, 2>(pa);
  pb = blas_layout<T, NB>(pb);
  const Layout<T, 2>& a = *pa;
  const Layout<T, NB>& b = *pb;
  const memory mem = a.mem;
  std::vector<Job<ProductTask>> jobs;
  if (!k_split) {
    auto out = std::make_shared<const Layout<T, NB>>(allocate_layout<T, NB>(g, mem));
    if (k == 0) {
      assign_node(*out, Scalar<T>{T(0)}, par);
      return Out(out);
    }
    for (std::size_t s = 0; s < out->parts.size(); ++s) {
      const auto& qc = out->parts[s];
      if (volume<NB>(qc.extent) == 0) continue;
      const index_t r0 = qc.origin[0], rn = qc.extent[0];
      const index_t c0 = NB == 2 ? qc.origin[NB - 1] : 0, cn = NB == 2 ? qc.extent[NB - 1] : 1;
      jobs.push_back(product_job<T, NB>(qc.device, static_cast<int>(s), *holding(a, qc.device, r0, rn, 0, k),
                                        *holding(b, qc.device, 0, k, c0, cn), qc.ptr, r0, rn, c0, cn, 0, k));
      jobs.back().uses.add(qc.buf.get());
    }
    execute(jobs);
    return Out(out);
  }
  // The inner dimension is split: every device computes a full-size partial, then they combine.
  Out partials(std::make_shared<const Layout<T, NB>>(
      allocate_layout<T, NB>(geometry_from_placement<NB>(cshape, replicate(devs)), memory::device)));
  const auto& pl = partials.layout();
  for (std::size_t s = 0; s < devs.size(); ++s) {
    const auto [k0, kn] = kblock[s];
    if (m == 0 || n == 0) continue;
    if (kn == 0) {
      // This device holds none of the inner dimension: its partial is zero.
      auto one = std::make_shared<Layout<T, NB>>(pl);
      one->parts = {pl.parts[s]};
      one->replicated = false;
      assign_node(*one, Scalar<T>{T(0)}, par);
      continue;
    }
    jobs.push_back(product_job<T, NB>(devs[s], static_cast<int>(s), *holding(a, devs[s], 0, m, k0, kn),
                                      *holding(b, devs[s], k0, kn, 0, n), pl.parts[s].ptr, 0, m, 0, n, k0, kn));
    jobs.back().uses.add(pl.parts[s].buf.get());
  }
  execute(jobs);
  Out summed = result.kind == Placement::kind_t::shard ? reduce_scatter(partials, reduce_op::sum) : partials;
  if (result.kind != Placement::kind_t::shard) allreduce(summed, reduce_op::sum);
  if (result.kind == Placement::kind_t::single) {
    // on(d): d's replica of the allreduced sum (NCCL's reduce to one root would move as much on
    // NVLink rings; the other replicas return to the memory cache here).
    auto one = std::make_shared<Layout<T, NB>>(summed.layout());
    std::erase_if(one->parts, [&](const auto& q) { return !(q.device == result.devices[0]); });
    one->replicated = false;
    summed = Out(std::shared_ptr<const Layout<T, NB>>(std::move(one)));
  }
  if (mem == memory::device) return summed;
  // The partials lived in device memory; the result takes A's memory kind.
  Out c(std::make_shared<const Layout<T, NB>>(allocate_layout<T, NB>(geometry_of(summed.layout()), mem)));
  assign_node(c.layout(), summed.leaf(), par);
  return c;
}

}  // namespace detail

/// transpose(A): A's transpose as a view (NumPy's A.T, Julia's transpose), sharing A's storage;
/// a matrix sharded along rows gives a view sharded along columns. A vector gives its 1 x n row.
template <class X>
  requires detail::is_array_like<std::remove_cvref_t<X>>::value &&
           (std::remove_cvref_t<X>::rank == 1 || std::remove_cvref_t<X>::rank == 2)
auto transpose(const X& a) {
  using T = typename std::remove_cvref_t<X>::value_type;
  return View<T, 2>(detail::transposed(a.layout()));
}

/// reverse(x, dim): x with dimension `dim` reversed, as a view (Julia's reverse(x; dims), NumPy's
/// flip): no copy; each shard's piece is read backwards where it lives, so the view of a sharded
/// array stays sharded (its blocks mirrored).
template <class X>
  requires detail::is_array_like<std::remove_cvref_t<X>>::value
auto reverse(const X& x, int dim = 0) {
  using V = std::remove_cvref_t<X>;
  using T = typename V::value_type;
  constexpr int N = V::rank;
  if (dim < 0 || dim >= N) {
    throw invalid_argument("tessera: reverse(x, " + std::to_string(dim) + ") on an array of rank " +
                           std::to_string(N) + ": expected a dimension in [0, " + std::to_string(N) + ")");
  }
  const auto& l = x.layout();
  return [&]<std::size_t... K>(std::index_sequence<K...>) {
    auto idx = [&](int k) {
      const index_t n = l.shape[k];
      return k == dim ? range(n - 1, -1, -1) : range(0, n);
    };
    return View<T, N>(detail::make_view<T, N, N>(l, idx(static_cast<int>(K))...));
  }(std::make_index_sequence<N>{});
}

/// matmul(A, B) for matrices and matmul(A, x) for a matrix and a vector (NumPy's A @ B, Julia's
/// A * B), float or double: one BLAS call per device; the result's placement follows the
/// operands' (see the header comment and docs/semantics.md). When the inner dimension is split
/// over the devices, `result` chooses how partial products combine: replicate() (allreduce, the
/// default) or shard(last dim) (reduce-scatter).
template <detail::blas_array A, detail::blas_array B>
  requires(std::remove_cvref_t<A>::rank == 2 && (std::remove_cvref_t<B>::rank == 1 || std::remove_cvref_t<B>::rank == 2))
auto matmul(const A& a, const B& b, const Placement& result = {}) {
  using T = typename std::remove_cvref_t<A>::value_type;
  static_assert(std::is_same_v<T, typename std::remove_cvref_t<B>::value_type>,
                "TESSERA_ELEMENT_TYPE_MISMATCH: matmul takes two float or two double operands; convert one with "
                "Array<T, N>(cast<T>(x))");
  constexpr int NB = std::remove_cvref_t<B>::rank;
  a.layout();
  b.layout();
  return detail::matmul_layouts<T, NB>(a.layout_ptr(), b.layout_ptr(), result);
}

}  // namespace tessera
