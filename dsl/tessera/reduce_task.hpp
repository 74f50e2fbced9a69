// SPDX-License-Identifier: Apache-2.0
// Tessera: what one shard of a reduction hands to its executor. Like ShardTask for elementwise
// work, these are trivially copyable (kernel parameters) and hold the shard's evaluator; the fold
// loops shared by the host and CUDA executors live here too, so both compute the same function.
#pragma once
#include <tessera/evaluator.hpp>
#include <tessera/functional.hpp>

#include <cstdint>
#include <type_traits>

// Reduced elements each lane loads before folding them (independent loads in flight).
#ifndef TESSERA_DIMS_UNROLL
#define TESSERA_DIMS_UNROLL 8
#endif
// Vectors each lane loads before folding them, when lanes share one output's contiguous runs.
#ifndef TESSERA_DIMS_VEC_UNROLL
#define TESSERA_DIMS_VEC_UNROLL 4
#endif

namespace tessera::detail {
namespace red {

struct add {
  template <class A, class B>
  TS_HD auto operator()(A a, B b) const {
    return a + b;
  }
};
struct mul {
  template <class A, class B>
  TS_HD auto operator()(A a, B b) const {
    return a * b;
  }
};
// NaN wins wherever it sits (Julia's maximum/minimum): the elementwise max/min.
template <bool IsMax>
using extremum = fn::min_max<IsMax>;
struct lor {
  TS_HD bool operator()(bool a, bool b) const { return a || b; }
};
struct land {
  TS_HD bool operator()(bool a, bool b) const { return a && b; }
};
struct truthy {
  template <class A>
  TS_HD bool operator()(A a) const {
    return a != A(0);
  }
};
struct count_true {
  template <class A>
  TS_HD std::int64_t operator()(A a) const {
    return a != A(0) ? 1 : 0;
  }
};
struct abs2 {  // |a|^2 in double (norm): re^2 + im^2 for complex a
  template <class A>
  TS_HD double operator()(A a) const {
    if constexpr (is_complex_v<A>) return double(a.real()) * double(a.real()) + double(a.imag()) * double(a.imag());
    else return double(a) * double(a);
  }
};
// A value and its global (column-major linear) index: what argmax and friends fold.
template <class V>
struct value_index {
  V value;
  std::int64_t index;
};
struct with_index {
  template <class V>
  TS_HD value_index<V> operator()(V v, index_t i) const {
    return {v, static_cast<std::int64_t>(i)};
  }
};
// The halves of a pair, for splitting findmax(x, dims(...))'s result into values and indices.
struct value_of {
  template <class V>
  TS_HD V operator()(value_index<V> p) const {
    return p.value;
  }
};
struct index_of {
  template <class V>
  TS_HD std::int64_t operator()(value_index<V> p) const {
    return p.index;
  }
};
// The larger (IsMax) or smaller pair; NaN wins wherever it sits (Julia's findmax), and among equal
// values (or NaNs) the first index.
template <bool IsMax>
struct arg_extremum {
  template <class V>
  TS_HD value_index<V> operator()(value_index<V> a, value_index<V> b) const {
    if constexpr (std::is_floating_point_v<V>) {
      const bool an = a.value != a.value, bn = b.value != b.value;
      if (an || bn) return (an && bn) ? (b.index < a.index ? b : a) : (an ? a : b);
    }
    if (IsMax ? a.value < b.value : b.value < a.value) return b;
    if (a.value == b.value && b.index < a.index) return b;
    return a;
  }
};

template <class T>
struct to {
  template <class A>
  TS_HD T operator()(A a) const {
    return static_cast<T>(a);
  }
};

}  // namespace red

// A full reduction of one shard: every element of the box, mapped, folded with op from init.
// On GPUs one kernel does it all (accumulating in Acc, like CUB): each block folds a grid-stride
// share and stores a partial, and the last block to finish (counted in *counter) folds the
// partials into *result. Host devices fold in H (double for floating sums and products).
template <class Acc, class H, class E, class Map, class Op, int N>
struct FullTask {
  using acc_type = Acc;
  using fold_type = H;
  static constexpr bool parallel_launch = true;  // backend/execute.hpp
  E e;
  Map map;
  Op op;
  Acc init;
  Extents<N> ext;
  index_t n;
  path mode;
  bool wide;
  Acc* result;                  // device memory, or pinned host memory mapped into the device
  Acc* partials = nullptr;      // one per block: set by the CUDA executor
  unsigned* counter = nullptr;  // zero between launches: set by the CUDA executor
  unsigned* done = nullptr;     // if set, the GPU writes `ticket` there after the result
  unsigned ticket = 0;
  static constexpr int K = vector_width<E>;

  template <class I>
  TS_HD Acc element(I i) const {
    if (mode != path::cartesian) return static_cast<Acc>(map(e.linear(i)));
    I idx[N > 0 ? N : 1];
    box_index<N>(i, ext, idx);
    return static_cast<Acc>(map(e.at(idx)));
  }
};

// How a dims reduction reads its shard on a GPU: through the N-d evaluator, or with 16-byte vector
// loads when every operand is contiguous and aligned and the contiguous extent is a multiple of
// the vector width (lanes fold whole vectors of one output when the contiguous dim is reduced;
// one thread folds K neighbouring outputs at once when it is kept).
enum class dims_access : int { scalar = 0, vec_reduced = 1, vec_kept = 2 };

// A reduction along dimensions of one shard. The box's dims split into kept dims (the output's,
// in order) and reduced dims; output o (column-major over the kept dims) folds its reduced
// elements, column-major over the reduced dims, in `chunks` pieces of `chunk` elements. Runs of
// the first reduced dim are split among `group` lanes (GPU: 32 or 256 threads cooperate on one
// output when the first reduced dim is the contiguous one; 1 otherwise).
template <class Acc, class H, class E, class Map, class Op, int N>
struct DimsTask {
  using acc_type = Acc;
  using fold_type = H;  // the host's accumulator and the type of chunk partials
  static constexpr bool parallel_launch = true;  // backend/execute.hpp
  using value_type = typename E::value_type;
  static constexpr int rank = N;
  E e;
  Map map;
  Op op;
  H init;
  path mode;                   // how the operands are laid out over the box
  bool wide;
  bool dim0_vectors = false;   // operands readable with vec_at along dim 0 (ShardPlan)
  Acc* out;                    // n_out results, contiguous (chunks == 1)
  index_t n_out, n_red;        // outputs, reduced elements per output
  int nk = 0, nr = 0;          // kept / reduced dim counts
  int kdim[N > 0 ? N : 1] = {};      // kept dims, innermost first
  int rdim[N > 0 ? N : 1] = {};      // reduced dims, innermost first
  index_t kext[N > 0 ? N : 1] = {};
  index_t rext[N > 0 ? N : 1] = {};
  index_t cst[N > 0 ? N : 1] = {};   // the box's column-major strides (linear index of an N-d index)
  // How the GPU spreads the work: set by the CUDA executor (choose_access, spread); the host folds each
  // output in one chunk.
  index_t chunk = 1;           // reduced elements per chunk
  int chunks = 1;
  int group = 1;               // lanes per output
  dims_access access = dims_access::scalar;
  bool nd = false;             // vector paths address vectors by N-d index (vec_at), not linearly
  H* partial = nullptr;        // chunks * n_out partials, output fastest (chunks > 1)
  static constexpr int K = vector_width<E>;

  // Fills idx's kept dims for output o.
  template <class I>
  TS_HD void kept_index(I o, I* idx) const {
    for (int k = 0; k < nk; ++k) {
      const I x = static_cast<I>(kext[k]);
      if (k + 1 < nk) {
        idx[kdim[k]] = o % x;
        o /= x;
      } else {
        idx[kdim[k]] = o;
      }
    }
  }

  // The vector holding element idx (vector paths only: idx[0] is a multiple of K, and so is every
  // stride past dim 0), in units of K elements, so that 32-bit indices reach 2^30 vectors.
  template <class I>
  TS_HD I vec_index(const I* idx) const {
    I l = idx[0] / K;
    for (int k = 1; k < N; ++k) l += idx[k] * static_cast<I>(cst[k] / K);
    return l;
  }

  // Visits reduced elements [r0, r1) of the output whose kept dims are in idx as runs along the
  // first reduced dim: f(idx, run) with idx at the run's first element.
  template <class I, class F>
  TS_HD void for_runs(I* idx, I r0, I r1, F&& f) const {
    if (r0 >= r1) return;
    I r = r0;
    for (int k = 0; k < nr; ++k) {
      const I x = static_cast<I>(rext[k]);
      idx[rdim[k]] = r % x;
      r /= x;
    }
    r = r0;
    const int d0 = rdim[0];
    const I e0 = static_cast<I>(rext[0]);
    while (r < r1) {
      const I j0 = idx[d0];
      const I run = (e0 - j0 < r1 - r) ? e0 - j0 : r1 - r;
      f(static_cast<const I*>(idx), run);
      r += run;
      idx[d0] = j0 + run;
      for (int k = 0; k + 1 < nr && idx[rdim[k]] == static_cast<I>(rext[k]); ++k) {  // carry
        idx[rdim[k]] = 0;
        ++idx[rdim[k + 1]];
      }
    }
  }

  // Folds reduced elements [r0, r1) of the output whose kept dims are in idx, accumulating in A;
  // this lane takes positions lane, lane + lanes, ... of every run along the first reduced dim,
  // loading U of them before folding them (independent loads in flight).
  template <class A, class I>
  TS_HD A fold(I* idx, I r0, I r1, int lane, int lanes) const {
    constexpr int U = TESSERA_DIMS_UNROLL;
    A acc = static_cast<A>(init);
    const int d0 = rdim[0];
    for_runs(idx, r0, r1, [&](const I* at, I run) {
      I j[N > 0 ? N : 1];
      for (int k = 0; k < N; ++k) j[k] = at[k];
      const I j0 = j[d0];
      for (I p = lane; p < run; p += static_cast<I>(lanes) * U) {
        A v[U];
#pragma unroll
        for (int u = 0; u < U; ++u) {
          const I q = p + static_cast<I>(u) * lanes;
          if (q < run) {
            j[d0] = j0 + q;
            v[u] = static_cast<A>(map(e.at(j)));
          } else {
            v[u] = static_cast<A>(init);
          }
        }
#pragma unroll
        for (int u = 0; u < U; ++u) acc = static_cast<A>(op(acc, v[u]));
      }
    });
    return acc;
  }

  // fold() for access == vec_reduced: the runs lie along the contiguous dim and start at
  // multiples of K, so this lane folds vectors lane, lane + lanes, ... of every run.
  template <class A, class I>
  TS_HD A fold_vec(I* idx, I r0, I r1, int lane, int lanes) const {
    constexpr int U = TESSERA_DIMS_VEC_UNROLL;
    A acc = static_cast<A>(init);
    const int d0 = rdim[0];
    for_runs(idx, r0, r1, [&](const I* at, I run) {
      const I base = nd ? I(0) : vec_index(at);
      const auto cursor = e.run(at, d0, K);  // nd: vector q of the run at q * K elements along d0
      const I n = run / K;
      for (I p = lane; p < n; p += static_cast<I>(lanes) * U) {
        value_type v[U][K];
#pragma unroll
        for (int u = 0; u < U; ++u) {
          const I q = p + static_cast<I>(u) * lanes;
          if (q < n) {
            if (nd) cursor.template vec<K>(q, v[u]);
            else e.template vec<K>(base + q, v[u]);
          }
        }
#pragma unroll
        for (int u = 0; u < U; ++u) {
          if (p + static_cast<I>(u) * lanes < n) {
#pragma unroll
            for (int k = 0; k < K; ++k) acc = static_cast<A>(op(acc, static_cast<A>(map(v[u][k]))));
          }
        }
      }
    });
    return acc;
  }

  // For access == vec_kept: folds reduced elements [r0, r1) of the K outputs that start at the
  // kept index idx (a multiple of K along the contiguous dim) into acc, one vector per element.
  template <class A, class I>
  TS_HD void fold_columns(I* idx, I r0, I r1, A (&acc)[K]) const {
    constexpr int U = TESSERA_DIMS_VEC_UNROLL;
#pragma unroll
    for (int k = 0; k < K; ++k) acc[k] = static_cast<A>(init);
    const I step = static_cast<I>(cst[rdim[0]]) / K;
    const int d0 = rdim[0];
    for_runs(idx, r0, r1, [&](const I* at, I run) {
      const I base = nd ? I(0) : vec_index(at);
      const auto cursor = e.run(at, d0, 1);  // nd: vector p of the run, one element along d0 apart
      for (I p = 0; p < run; p += U) {
        value_type v[U][K];
#pragma unroll
        for (int u = 0; u < U; ++u) {
          if (p + u < run) {
            if (nd) cursor.template vec<K>(p + u, v[u]);
            else e.template vec<K>(base + (p + u) * step, v[u]);
          }
        }
#pragma unroll
        for (int u = 0; u < U; ++u) {
          if (p + u < run) {
#pragma unroll
            for (int k = 0; k < K; ++k) acc[k] = static_cast<A>(op(acc[k], static_cast<A>(map(v[u][k]))));
          }
        }
      }
    });
  }
};

template <class Acc, class H, class E, class Map, class Op, int N>
struct device_copyable<FullTask<Acc, H, E, Map, Op, N>>
    : std::bool_constant<device_copyable_functor_v<Map> && device_copyable_functor_v<Op> && device_copyable<E>::value> {};
template <class Acc, class H, class E, class Map, class Op, int N>
struct device_copyable<DimsTask<Acc, H, E, Map, Op, N>>
    : std::bool_constant<device_copyable_functor_v<Map> && device_copyable_functor_v<Op> && device_copyable<E>::value> {};

}  // namespace tessera::detail
