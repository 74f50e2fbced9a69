// SPDX-License-Identifier: Apache-2.0
// Tessera: the fft family (NumPy's and Julia's names; docs/semantics.md, "FFT"). Every transform is
// a sequence of FftTask passes (fft_task.hpp), one per device, each a batched cuFFT or FFTW call over
// that device's part (backend/fft). Dimensions that lie whole inside every part are transformed in
// place there; the shard dimension is transformed by re-sharding the data along another dimension
// (copy_into: the all-to-all of a slab decomposition), transforming locally and re-sharding back.
// A vector sharded over several devices has no other dimension: it is gathered on its first device,
// transformed there and scattered back. Results are new arrays with the input's placement.
// Included on its own, like <tessera/kernel.hpp>: it brings the umbrella header and complex
// numbers (<tessera/complex.hpp>), which cost more than a second of nvcc time per translation unit.
#pragma once
#include <tessera/complex.hpp>
#include <tessera/tessera.hpp>
#include <tessera/array.hpp>
#include <tessera/assign.hpp>
#include <tessera/concat.hpp>
#include <tessera/copy.hpp>
#include <tessera/reduce_dims.hpp>
#include <tessera/transfer.hpp>

#include <backend/fft/fft.hpp>

#include <array>
#include <cmath>
#include <memory>
#include <string>
#include <type_traits>
#include <vector>

namespace tessera {

/// How a transform is scaled (NumPy's `norm`): backward (the default) leaves the forward transform
/// unscaled and divides the inverse by n; ortho divides both by sqrt(n); forward divides the
/// forward transform by n and leaves the inverse unscaled. n is the product of the transformed
/// lengths.
enum class fft_norm { backward, ortho, forward };

namespace detail {

// The real type a transform of T computes in: float for float, half and bfloat16 (and
// complex<float>), double for double and complex<double>.
template <class T>
struct fft_real {
  using type = std::conditional_t<std::is_same_v<real_of_t<T>, double>, double, float>;
};
template <class T>
using fft_real_t = typename fft_real<T>::type;

template <class T>
inline constexpr bool fft_real_input_v = std::is_same_v<T, float> || std::is_same_v<T, double> ||
                                         std::is_same_v<T, half> || std::is_same_v<T, bfloat16>;
template <class T>
inline constexpr bool fft_element_v =
    fft_real_input_v<T> || std::is_same_v<T, complex<float>> || std::is_same_v<T, complex<double>>;

template <class X>
concept fft_array = is_array_like<std::remove_cvref_t<X>>::value;

#define TESSERA_FFT_CHECK_ELEMENT(T)                                                                              \
  static_assert(::tessera::detail::fft_element_v<T>,                                                             \
                "TESSERA_FFT_ELEMENT_TYPE: the fft family takes float, double, half, bfloat16, complex<float> or " \
                "complex<double> arrays; convert integers first: Array<double, N> y = cast<double>(x)")

// The dims a transform covers, checked (distinct, in range) before anything is allocated.
template <int N>
std::array<bool, N> fft_mask(const ReduceDims& d, const char* what) {
  std::array<bool, N> m{};
  for (int i = 0; i < d.count; ++i) {
    const int k = d.d[i];
    if (k < 0 || k >= N || m[k]) {
      throw invalid_argument(std::string("tessera: ") + what + "(x, dims(...)) on an array of rank " +
                             std::to_string(N) + ": expected distinct dimensions in [0, " + std::to_string(N) +
                             "), found dimension " + std::to_string(k) +
                             (k >= 0 && k < N ? " listed twice" : ", outside that range"));
    }
    m[k] = true;
  }
  return m;
}

// The layout of an fft operand (layout() throws for a default-constructed array).
template <class X>
const auto& checked(const X& x) {
  (void)x.layout();
  return x.layout_ptr();
}

template <int N>
ReduceDims all_dims() {
  ReduceDims d{{}, N};
  for (int k = 0; k < N; ++k) d.d[k] = k;
  return d;
}

// New contiguous storage with g's devices and boxes (no halo: passes need contiguous parts).
template <class T, int N>
std::shared_ptr<const Layout<T, N>> fft_storage(Geometry<N> g, memory mem) {
  g.halo = Halo{};
  return std::make_shared<const Layout<T, N>>(allocate_layout<T, N>(g, mem));
}

// g with dimension f of extent n (boxes must span f whole).
template <int N>
Geometry<N> with_extent(Geometry<N> g, int f, index_t n) {
  g.shape[f] = n;
  for (auto& b : g.boxes) b.origin[f] = 0, b.extent[f] = n;
  return g;
}

template <class T, int N>
bool contiguous_parts(const Layout<T, N>& l) {
  for (auto& p : l.parts)
    if (!p.contiguous()) return false;
  return true;
}

// The shard dimension when the layout really is split over several devices, else -1.
template <class T, int N>
int split_dim(const Layout<T, N>& l) {
  return (!l.replicated && l.parts.size() > 1 && l.shard_dim >= 0) ? l.shard_dim : -1;
}

template <class R>
constexpr fft::precision fft_precision() {
  return std::is_same_v<R, float> ? fft::precision::f32 : fft::precision::f64;
}

// One pass over every part: dims [a, b] (whole in each part, at most three) of `in` into `out`
// (the same devices and boxes but for dim a of an r2c/c2r pass), batched over the dims before a
// (merged: one loop of stride 1) and after b (merged: one loop). Both layouts are contiguous.
template <class R, class I, class O, int N>
void fft_pass(const Layout<I, N>& in, const Layout<O, N>& out, int a, int b, fft::kind k, int sign) {
  std::vector<Job<FftTask>> jobs;
  for (std::size_t s = 0; s < out.parts.size(); ++s) {
    const auto& pi = in.parts[s];
    const auto& po = out.parts[s];
    if (pi.empty() || po.empty()) continue;
    FftTask t{.kind = k, .type = fft_precision<R>(), .sign = sign, .rank = b - a + 1, .dims = {}, .loops = 0,
              .loop = {}, .in = pi.ptr, .out = po.ptr};
    for (int d = a; d <= b; ++d)
      t.dims[d - a] = {k == fft::kind::c2r ? po.extent[d] : pi.extent[d], pi.stride[d], po.stride[d]};
    index_t inner = 1, outer = 1;
    for (int d = 0; d < a; ++d) inner *= pi.extent[d];
    for (int d = b + 1; d < N; ++d) outer *= pi.extent[d];
    if (inner > 1) t.loop[t.loops++] = {inner, 1, 1};
    if (outer > 1) t.loop[t.loops++] = {outer, pi.stride[b + 1], po.stride[b + 1]};
    Job<FftTask> j{.task = t, .device = po.device, .shard = static_cast<int>(s), .n = volume<N>(po.extent)};
    j.uses.add(pi.buf.get());
    j.uses.add(po.buf.get());
    jobs.push_back(std::move(j));
  }
  execute(jobs);
}

// Where the shard dim's transform runs: the array re-sharded along its longest other dimension
// (a slab decomposition), or, when every other dimension has length 1 (a vector), on its first
// device.
template <class T, int N>
Placement transpose_placement(const Layout<T, N>& l, int sd) {
  int o = -1;
  for (int k = 0; k < N; ++k)
    if (k != sd && l.shape[k] > 1 && (o < 0 || l.shape[k] > l.shape[o])) o = k;
  return o >= 0 ? shard(o, l.devices()) : on(l.parts[0].device);
}

// C2C of `src` along `mask` into `out` (same geometry; out may be src when src is contiguous).
template <class R, int N>
void transform_c2c(const Layout<complex<R>, N>& src, const Layout<complex<R>, N>& out, const std::array<bool, N>& mask,
                   int sign) {
  using C = complex<R>;
  const int sd = split_dim(out);
  const Layout<C, N>* cur = &src;
  // A length-1 transform is the identity: no pass (and no length-1 plan for the libraries).
  auto local = [&](int k) { return mask[k] && k != sd && out.shape[k] > 1; };
  for (int k = 0; k < N;) {  // runs of consecutive dims whole in every part, three at most (cuFFT's rank)
    if (!local(k)) {
      ++k;
      continue;
    }
    int e = k;
    while (e + 1 < N && local(e + 1) && e + 1 - k < fft::max_rank) ++e;
    fft_pass<R>(*cur, out, k, e, fft::kind::c2c, sign);
    cur = &out;
    k = e + 1;
  }
  if (sd >= 0 && mask[sd] && out.shape[sd] > 1) {
    auto tmp = fft_storage<C, N>(geometry_from_placement<N>(out.shape, transpose_placement(out, sd)), memory::device);
    copy_into(*tmp, *cur);
    fft_pass<R>(*tmp, *tmp, sd, sd, fft::kind::c2c, sign);
    copy_into(out, *tmp);
    cur = &out;
  }
  if (cur != &out) copy_into(out, *cur);
}

// x as contiguous storage of U with x's geometry: x itself when it already is, else converted.
template <class U, class T, int N>
std::shared_ptr<const Layout<U, N>> contiguous_as(const std::shared_ptr<const Layout<T, N>>& x) {
  if constexpr (std::is_same_v<T, U>) {
    if (contiguous_parts(*x)) return x;
  }
  auto out = fft_storage<U, N>(geometry_of(*x), x->mem);
  assign_node(*out, make_node(fn::cast_to<U>{}, ArrayLeaf<T, N>{x}), par);
  return out;
}

inline double fft_scale(fft_norm norm, bool inverse, double n) {
  if (n <= 0 || norm == fft_norm::ortho) return n > 0 ? 1.0 / std::sqrt(n) : 1.0;
  const bool divide = inverse ? norm == fft_norm::backward : norm == fft_norm::forward;
  return divide ? 1.0 / n : 1.0;
}

template <class T, int N>
void scale_by(const std::shared_ptr<const Layout<T, N>>& l, double s) {
  if (s == 1.0) return;
  Array<T, N> a(l);
  a *= real_of_t<T>(s);
}

template <class T, int N>
double transformed_length(const Shape<N>& shape, const std::array<bool, N>& mask) {
  double n = 1;
  for (int k = 0; k < N; ++k)
    if (mask[k]) n *= double(shape[k]);
  return n;
}

// fft / ifft along mask: a new complex array with x's placement.
template <class T, int N>
auto c2c_array(const std::shared_ptr<const Layout<T, N>>& x, const std::array<bool, N>& mask, int sign, fft_norm norm) {
  using R = fft_real_t<T>;
  using C = complex<R>;
  // A complex input of the right type is read where it lies (the first pass is out of place);
  // anything else is converted once into the result's storage, then transformed there.
  auto src = contiguous_as<C, T, N>(x);
  const bool reads_input = static_cast<const void*>(src.get()) == static_cast<const void*>(x.get());
  auto out = reads_input ? fft_storage<C, N>(geometry_of(*x), x->mem) : src;
  transform_c2c<R, N>(*src, *out, mask, sign);
  scale_by<C, N>(out, fft_scale(norm, sign > 0, transformed_length<T, N>(x->shape, mask)));
  return Array<C, N>(out);
}


// rfft along mask: R2C along dim f (the first listed: Julia's rfft halves dims[1]), then C2C along
// the others. The result has n/2 + 1 elements along f and x's placement.
template <class T, int N>
auto r2c_array(const std::shared_ptr<const Layout<T, N>>& x, const std::array<bool, N>& mask, int f, fft_norm norm) {
  using R = fft_real_t<T>;
  using C = complex<R>;
  if (x->shape[f] == 0) {
    throw invalid_argument("tessera: rfft along dim " + std::to_string(f) + " of an array of shape " +
                           shape_string<N>(x->shape) + ": the length there must be >= 1 (n/2 + 1 outputs), found 0");
  }
  auto src = contiguous_as<R, T, N>(x);
  const index_t h = x->shape[f] / 2 + 1;
  std::shared_ptr<const Layout<C, N>> out;
  if (x->shape[f] == 1) {
    // Length 1: the transform is the value itself, as a complex number.
    out = fft_storage<C, N>(geometry_of(*x), x->mem);
    assign_node(*out, make_node(fn::cast_to<C>{}, ArrayLeaf<R, N>{src}), par);
  } else if (split_dim(*src) == f) {
    // f is split over the devices: the real data moves to slabs along another dim first.
    auto tr = fft_storage<R, N>(geometry_from_placement<N>(src->shape, transpose_placement(*src, f)), memory::device);
    copy_into(*tr, *src);
    auto tc = fft_storage<C, N>(with_extent(geometry_of(*tr), f, h), memory::device);
    fft_pass<R>(*tr, *tc, f, f, fft::kind::r2c, -1);
    out = fft_storage<C, N>(geometry_from_placement<N>(tc->shape, placement_like(*x)), x->mem);
    copy_into(*out, *tc);
  } else {
    out = fft_storage<C, N>(with_extent(geometry_of(*src), f, h), x->mem);
    fft_pass<R>(*src, *out, f, f, fft::kind::r2c, -1);
  }
  std::array<bool, N> rest = mask;
  rest[f] = false;
  bool any = false;
  for (bool b : rest) any = any || b;
  if (any) transform_c2c<R, N>(*out, *out, rest, -1);
  scale_by<C, N>(out, fft_scale(norm, false, transformed_length<T, N>(x->shape, mask)));
  return Array<C, N>(out);
}

// irfft along mask with n real outputs along f: C2C (inverse) along the other dims into a work
// copy (C2R overwrites its input), then C2R along f.
template <class T, int N>
auto c2r_array(const std::shared_ptr<const Layout<T, N>>& x, index_t n, const std::array<bool, N>& mask, int f,
               fft_norm norm) {
  using R = fft_real_t<T>;
  using C = complex<R>;
  if (n < 1) {
    throw invalid_argument("tessera: irfft(X, n = " + std::to_string(n) + "): n, the length of the real result along "
                           "dim " + std::to_string(f) + ", must be >= 1");
  }
  if (x->shape[f] != n / 2 + 1) {
    throw dimension_mismatch("tessera::dimension_mismatch: irfft(X, n = " + std::to_string(n) + ") with X of shape " +
                             shape_string<N>(x->shape) + ": X must have n/2 + 1 = " + std::to_string(n / 2 + 1) +
                             " elements along dim " + std::to_string(f) + ", found " + std::to_string(x->shape[f]) +
                             " (rfft of a length-n array gives n/2 + 1)");
  }
  auto xc = contiguous_as<C, T, N>(x);
  auto work = fft_storage<C, N>(geometry_of(*x), memory::device);
  std::array<bool, N> rest = mask;
  rest[f] = false;
  transform_c2c<R, N>(*xc, *work, rest, +1);  // a plain copy when rest is empty
  Shape<N> out_shape = x->shape;
  out_shape[f] = n;
  std::shared_ptr<const Layout<R, N>> out;
  if (n == 1) {
    // Length 1: the real part of the one (zero-frequency) value.
    out = fft_storage<R, N>(geometry_of(*work), x->mem);
    assign_node(*out, make_node(fn::real_part{}, ArrayLeaf<C, N>{work}), par);
  } else if (split_dim(*work) == f) {
    auto tc = fft_storage<C, N>(geometry_from_placement<N>(work->shape, transpose_placement(*work, f)), memory::device);
    copy_into(*tc, *work);
    auto tr = fft_storage<R, N>(with_extent(geometry_of(*tc), f, n), memory::device);
    fft_pass<R>(*tc, *tr, f, f, fft::kind::c2r, +1);
    out = fft_storage<R, N>(geometry_from_placement<N>(out_shape, placement_like(*x)), x->mem);
    copy_into(*out, *tr);
  } else {
    out = fft_storage<R, N>(with_extent(geometry_of(*work), f, n), x->mem);
    fft_pass<R>(*work, *out, f, f, fft::kind::c2r, +1);
  }
  scale_by<R, N>(out, fft_scale(norm, true, transformed_length<T, N>(out_shape, mask)));
  return Array<R, N>(out);
}

// fftshift / ifftshift: a circular shift by n/2 (ifftshift: n - n/2) along each masked dim, as at
// most 2^N block copies between x and a new array with x's geometry.
template <class T, int N>
auto shift_array(const std::shared_ptr<const Layout<T, N>>& x, const std::array<bool, N>& mask, bool inverse) {
  auto out = fft_storage<T, N>(geometry_of(*x), x->mem);
  for (unsigned c = 0; c < (1u << N); ++c) {
    Shape<N> from{}, to{}, ext{};
    bool skip = false;
    for (int k = 0; k < N && !skip; ++k) {
      const index_t n = x->shape[k];
      const index_t s = mask[k] && n > 0 ? (inverse ? n - n / 2 : n / 2) % n : 0;
      if (c & (1u << k)) {  // the tail [n - s, n) wraps to the front
        skip = s == 0;
        from[k] = n - s, to[k] = 0, ext[k] = s;
      } else {
        from[k] = 0, to[k] = s, ext[k] = n - s;
      }
      skip = skip || ext[k] == 0;
    }
    if (!skip) copy_into(*window(*out, to, ext), *window(*x, from, ext));
  }
  return Array<T, N>(out);
}

}  // namespace detail

#define TESSERA_FFT_RANK1(X, NAME)                                                                                \
  static_assert(std::remove_cvref_t<X>::rank == 1, "TESSERA_FFT_DIMS_REQUIRED: " NAME                             \
                "(x) takes a vector; for a rank-N array say which dims: " NAME "(x, dims(d...)), or " NAME "n(x) " \
                "for all of them (NumPy's " NAME "(a) transforms the last axis, Julia's every dim)")

/// fft(x): the discrete Fourier transform of a vector, sum_j x[j] e^{-2 pi i jk/n} (NumPy's and
/// Julia's sign), as a new tessera::complex array with x's placement.
template <detail::fft_array X>
auto fft(const X& x, fft_norm norm = fft_norm::backward) {
  using T = typename std::remove_cvref_t<X>::value_type;
  TESSERA_FFT_CHECK_ELEMENT(T);
  TESSERA_FFT_RANK1(X, "fft");
  return detail::c2c_array<T, 1>(detail::checked(x), {true}, -1, norm);
}

/// fft(x, dims(d...)): the transform along the listed dims (Julia's fft(A, dims)).
template <detail::fft_array X>
auto fft(const X& x, const ReduceDims& d, fft_norm norm = fft_norm::backward) {
  using V = std::remove_cvref_t<X>;
  TESSERA_FFT_CHECK_ELEMENT(typename V::value_type);
  const auto mask = detail::fft_mask<V::rank>(d, "fft");
  return detail::c2c_array<typename V::value_type, V::rank>(detail::checked(x), mask, -1, norm);
}

/// ifft(x), ifft(x, dims(d...)): the inverse, sum_k X[k] e^{+2 pi i jk/n} / n (with the default norm).
template <detail::fft_array X>
auto ifft(const X& x, fft_norm norm = fft_norm::backward) {
  using T = typename std::remove_cvref_t<X>::value_type;
  TESSERA_FFT_CHECK_ELEMENT(T);
  TESSERA_FFT_RANK1(X, "ifft");
  return detail::c2c_array<T, 1>(detail::checked(x), {true}, +1, norm);
}
template <detail::fft_array X>
auto ifft(const X& x, const ReduceDims& d, fft_norm norm = fft_norm::backward) {
  using V = std::remove_cvref_t<X>;
  TESSERA_FFT_CHECK_ELEMENT(typename V::value_type);
  const auto mask = detail::fft_mask<V::rank>(d, "ifft");
  return detail::c2c_array<typename V::value_type, V::rank>(detail::checked(x), mask, +1, norm);
}

/// fft2(x) / ifft2(x): along dims 0 and 1 (a matrix, or every matrix x(_, _, k) of a batch).
template <detail::fft_array X>
  requires(std::remove_cvref_t<X>::rank >= 2)
auto fft2(const X& x, fft_norm norm = fft_norm::backward) {
  return fft(x, dims(0, 1), norm);
}
template <detail::fft_array X>
  requires(std::remove_cvref_t<X>::rank >= 2)
auto ifft2(const X& x, fft_norm norm = fft_norm::backward) {
  return ifft(x, dims(0, 1), norm);
}

/// fftn(x) / ifftn(x): along every dim.
template <detail::fft_array X>
auto fftn(const X& x, fft_norm norm = fft_norm::backward) {
  return fft(x, detail::all_dims<std::remove_cvref_t<X>::rank>(), norm);
}
template <detail::fft_array X>
auto ifftn(const X& x, fft_norm norm = fft_norm::backward) {
  return ifft(x, detail::all_dims<std::remove_cvref_t<X>::rank>(), norm);
}

#define TESSERA_FFT_CHECK_REAL(T)                                                                            \
  static_assert(::tessera::detail::fft_real_input_v<T>,                                                     \
                "TESSERA_FFT_REAL_INPUT: rfft takes a real (float, double, half or bfloat16) array; use fft " \
                "for complex input")

/// rfft(x): the n/2 + 1 non-negative frequencies of a real vector's transform (NumPy's rfft).
template <detail::fft_array X>
auto rfft(const X& x, fft_norm norm = fft_norm::backward) {
  using T = typename std::remove_cvref_t<X>::value_type;
  TESSERA_FFT_CHECK_REAL(T);
  TESSERA_FFT_RANK1(X, "rfft");
  return detail::r2c_array<T, 1>(detail::checked(x), {true}, 0, norm);
}
/// rfft(x, dims(d...)): Julia's rfft(A, dims): the first listed dim is halved (n/2 + 1), the
/// others transformed in full.
template <detail::fft_array X>
auto rfft(const X& x, const ReduceDims& d, fft_norm norm = fft_norm::backward) {
  using V = std::remove_cvref_t<X>;
  TESSERA_FFT_CHECK_REAL(typename V::value_type);
  const auto mask = detail::fft_mask<V::rank>(d, "rfft");
  return detail::r2c_array<typename V::value_type, V::rank>(detail::checked(x), mask, d.d[0], norm);
}

/// irfft(X, n): the real vector of length n whose rfft is X (X must hold n/2 + 1 elements; the
/// imaginary parts that a real signal's transform cannot have are ignored, as NumPy and FFTW do).
template <detail::fft_array X>
auto irfft(const X& x, index_t n, fft_norm norm = fft_norm::backward) {
  using T = typename std::remove_cvref_t<X>::value_type;
  TESSERA_FFT_CHECK_ELEMENT(T);
  TESSERA_FFT_RANK1(X, "irfft");
  return detail::c2r_array<T, 1>(detail::checked(x), n, {true}, 0, norm);
}
/// irfft(X, n, dims(d...)): Julia's irfft(A, d, dims): n is the real length along the first listed dim.
template <detail::fft_array X>
auto irfft(const X& x, index_t n, const ReduceDims& d, fft_norm norm = fft_norm::backward) {
  using V = std::remove_cvref_t<X>;
  TESSERA_FFT_CHECK_ELEMENT(typename V::value_type);
  const auto mask = detail::fft_mask<V::rank>(d, "irfft");
  return detail::c2r_array<typename V::value_type, V::rank>(detail::checked(x), n, mask, d.d[0], norm);
}

/// fftfreq(n, d): the sample frequencies of an n-point transform with sample spacing d, in the
/// order fft returns them: [0, 1, ..., (n-1)/2, -(n/2), ..., -1] / (d n) (NumPy's fftfreq).
template <class T = double>
  requires(std::is_same_v<T, float> || std::is_same_v<T, double>)
Array<T, 1> fftfreq(index_t n, double d = 1.0, const Placement& p = {}, memory m = memory::unified) {
  if (n < 0 || !(d != 0.0) || !std::isfinite(d)) {
    throw invalid_argument("tessera: fftfreq(n = " + std::to_string(n) + ", d = " + std::to_string(d) +
                           "): expected n >= 0 and a finite, non-zero spacing d");
  }
  std::vector<T> f(static_cast<std::size_t>(n));
  const index_t pos = (n - 1) / 2 + 1;
  for (index_t i = 0; i < n; ++i) f[i] = T(double(i < pos ? i : i - n) / (d * double(n)));
  return from_host(std::span<const T>(f), std::array<index_t, 1>{n}, p, m);
}

/// rfftfreq(n, d): the n/2 + 1 non-negative frequencies of rfft: [0, 1, ..., n/2] / (d n).
template <class T = double>
  requires(std::is_same_v<T, float> || std::is_same_v<T, double>)
Array<T, 1> rfftfreq(index_t n, double d = 1.0, const Placement& p = {}, memory m = memory::unified) {
  if (n < 1 || !(d != 0.0) || !std::isfinite(d)) {
    throw invalid_argument("tessera: rfftfreq(n = " + std::to_string(n) + ", d = " + std::to_string(d) +
                           "): expected n >= 1 and a finite, non-zero spacing d");
  }
  std::vector<T> f(static_cast<std::size_t>(n / 2 + 1));
  for (index_t i = 0; i <= n / 2; ++i) f[i] = T(double(i) / (d * double(n)));
  return from_host(std::span<const T>(f), std::array<index_t, 1>{n / 2 + 1}, p, m);
}

/// fftshift(x[, dims(d...)]): the zero frequency moved to the centre (a circular shift by n/2
/// along each dim; all dims by default, as NumPy). ifftshift undoes it (n - n/2). Any element type;
/// the result is a new array with x's placement.
template <detail::fft_array X>
auto fftshift(const X& x) {
  using V = std::remove_cvref_t<X>;
  std::array<bool, V::rank> all{};
  all.fill(true);
  return detail::shift_array<typename V::value_type, V::rank>(detail::checked(x), all, false);
}
template <detail::fft_array X>
auto fftshift(const X& x, const ReduceDims& d) {
  using V = std::remove_cvref_t<X>;
  const auto mask = detail::fft_mask<V::rank>(d, "fftshift");
  return detail::shift_array<typename V::value_type, V::rank>(detail::checked(x), mask, false);
}
template <detail::fft_array X>
auto ifftshift(const X& x) {
  using V = std::remove_cvref_t<X>;
  std::array<bool, V::rank> all{};
  all.fill(true);
  return detail::shift_array<typename V::value_type, V::rank>(detail::checked(x), all, true);
}
template <detail::fft_array X>
auto ifftshift(const X& x, const ReduceDims& d) {
  using V = std::remove_cvref_t<X>;
  const auto mask = detail::fft_mask<V::rank>(d, "ifftshift");
  return detail::shift_array<typename V::value_type, V::rank>(detail::checked(x), mask, true);
}

}  // namespace tessera
