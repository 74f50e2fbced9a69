// SPDX-License-Identifier: Apache-2.0
// Differential test: random expression trees evaluated by every executor and compared.
//
// The SHAPE of each tree is fixed at compile time (three trees, of depth 3 and 4, with 4, 6 and 8
// leaves of mixed element types, ranks and scalars), so the file instantiates only three
// expression types; the OPERATIONS are chosen at runtime: each node is a functor holding an
// operation code (dyn_binop / dyn_unop) applied through tessera::broadcast. Each trial draws a
// fresh shape (with 0, 1 and odd extents), a placement mode, a destination kind, operation codes
// and leaves: full arrays, broadcasting arrays (size 1 along some dimensions, replicated when that
// is the shard dimension), views (offset, strided, reversed ranges; an integer index dropping a
// dimension of a rank-4 parent; rank-2 operands), scalars, on fresh random data.
//
// Reference 1: the same tree on one host device. Reference 2: plain loops in double on the host,
// which also carry a first-order bound on the rounding error of each value, so that results from
// GPUs (other libm, FMA contraction) are compared with a tolerance that is tight where the
// computation is well conditioned. Every device set of tessera_test::device_sets() is compared
// with both: host devices 1, 2, 3, 8 on the host build; one GPU and all GPUs in the CUDA variant.
//
// Set TESSERA_DIFFERENTIAL_SEED to replay a run (each failure prints the seed and the trial).
#include "test_support.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <limits>
#include <sstream>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

using namespace tessera;
using namespace tessera_test;

namespace {

// -- the operations ---------------------------------------------------------------------------

constexpr int n_binops = 11, n_unops = 10;
const char* const binop_names[n_binops] = {"add", "sub", "mul", "div(a,|b|+.5)", "min", "max", "clamp(a,8)^2+b",
                                           "clamp(b,4)^3-a", "(|a|+.25)^clamp(b,2)", "hypot", "a/2-b/4"};
const char* const unop_names[n_unops] = {"id", "sin", "exp(clamp(x,5))", "abs", "sqrt|x|", "tanh", "neg",
                                         "log1p|x|", "cos", "x/(1+|x|)"};

TS_HD inline double clampd(double x, double lo, double hi) { return x < lo ? lo : (x > hi ? hi : x); }

// The operations are compiled once, not inlined into every node of every kernel path: that keeps
// the CUDA build of this file short, and the fused tree is still one kernel.
#if defined(__CUDACC__)
#define DIFF_NOINLINE __noinline__
#else
#define DIFF_NOINLINE __attribute__((noinline))
#endif

// Every operation is continuous and finite on finite inputs, so that executors that round
// differently (another libm, contracted multiply-adds) stay close.
TS_HD DIFF_NOINLINE double binop_value(int code, double a, double b) {
  switch (code) {
    case 0: return a + b;
    case 1: return a - b;
    case 2: return a * b;
    case 3: return a / (::fabs(b) + 0.5);
    case 4: return b < a ? b : a;
    case 5: return a < b ? b : a;
    case 6: return ::pow(clampd(a, -8.0, 8.0), 2.0) + b;
    case 7: return ::pow(clampd(b, -4.0, 4.0), 3.0) - a;
    case 8: return ::pow(::fabs(a) + 0.25, clampd(b, -2.0, 2.0));
    case 9: return ::sqrt(a * a + b * b);
    default: return 0.5 * a - 0.25 * b;
  }
}

TS_HD DIFF_NOINLINE double unop_value(int code, double x) {
  switch (code) {
    case 0: return x;
    case 1: return ::sin(x);
    case 2: return ::exp(clampd(x, -5.0, 5.0));
    case 3: return ::fabs(x);
    case 4: return ::sqrt(::fabs(x));
    case 5: return ::tanh(x);
    case 6: return -x;
    case 7: return ::log1p(::fabs(x));
    case 8: return ::cos(x);
    default: return x / (1.0 + ::fabs(x));
  }
}

struct dyn_binop {
  int code;
  template <class A, class B>
  TS_HD double operator()(A a, B b) const {
    return binop_value(code, static_cast<double>(a), static_cast<double>(b));
  }
};
struct dyn_unop {
  int code;
  template <class A>
  TS_HD double operator()(A a) const {
    return unop_value(code, static_cast<double>(a));
  }
};

// Builds Tessera expressions.
struct Lazy {
  template <class A, class B>
  auto bin(int k, const A& a, const B& b) const {
    return broadcast(dyn_binop{k % n_binops}, a, b);
  }
  template <class A>
  auto un(int k, const A& a) const {
    return broadcast(dyn_unop{k % n_unops}, a);
  }
};

// The reference: a value in double and a bound on its absolute error (first order, with
// rounding of u per basic operation and 2-4 u for library functions, as GPU math allows).
struct Val {
  double v, e;
};
constexpr double u = std::numeric_limits<double>::epsilon();
constexpr double inf = std::numeric_limits<double>::infinity();

struct Ref {
  Val bin(int k, Val a, Val b) const {
    const int code = k % n_binops;
    const double r = binop_value(code, a.v, b.v), ar = std::fabs(r);
    double e;
    switch (code) {
      case 0:
      case 1: e = a.e + b.e + u * ar; break;
      case 2: e = std::fabs(a.v) * b.e + std::fabs(b.v) * a.e + a.e * b.e + u * ar; break;
      case 3: {
        const double d = std::fabs(b.v) + 0.5;
        e = (a.e + ar * (b.e + u * d)) / (d - std::min(b.e, 0.25)) + u * ar;
        break;
      }
      case 4:
      case 5: e = std::max(a.e, b.e); break;
      case 6: {
        const double c = clampd(a.v, -8, 8);
        e = 2 * std::fabs(c) * a.e + a.e * a.e + b.e + 4 * u * (c * c + ar);
        break;
      }
      case 7: {
        const double c = std::fabs(clampd(b.v, -4, 4));
        e = 3 * c * c * b.e + 3 * c * b.e * b.e + b.e * b.e * b.e + a.e + 4 * u * (c * c * c + ar);
        break;
      }
      case 8: {
        const double base = std::fabs(a.v) + 0.25, x = clampd(b.v, -2, 2);
        const double rel = (a.e + u * base) / base;  // relative error of the base
        e = rel < 0.1 ? ar * (std::fabs(x) * rel * 1.5 + std::fabs(std::log(base)) * b.e * 1.5) + 4 * u * ar : inf;
        break;
      }
      case 9: e = a.e + b.e + 3 * u * ar; break;
      default: e = 0.5 * a.e + 0.25 * b.e + 2 * u * ar; break;
    }
    return {r, e};
  }
  Val un(int k, Val a) const {
    const int code = k % n_unops;
    const double r = unop_value(code, a.v), ar = std::fabs(r);
    const double x = std::fabs(a.v);
    double e;
    switch (code) {
      case 0:
      case 3:
      case 6: e = a.e; break;
      case 1:
      case 5:
      case 8: e = std::min(a.e, 2.0) + 2 * u * ar; break;  // 1-Lipschitz and bounded by 1
      case 2: e = a.e < 0.5 ? ar * a.e * (1 + a.e) + 2 * u * ar : inf; break;
      case 4: e = (a.e == 0 ? 0 : std::min(a.e / (2 * std::sqrt(x)), std::sqrt(a.e))) + u * ar; break;
      case 7: e = a.e / (1 + x) + 2 * u * ar; break;
      default: e = a.e / ((1 + x) * (1 + x)) * (1 + a.e) + 3 * u * ar; break;
    }
    return {r, e};
  }
};

// -- the trees: shapes fixed at compile time ----------------------------------------------------

// Leaf kinds of the tree signatures.
enum class Elem { f64, f32, i32, i64 };
template <class T>
constexpr Elem elem_of() {
  if constexpr (std::is_same_v<T, double>) return Elem::f64;
  else if constexpr (std::is_same_v<T, float>) return Elem::f32;
  else if constexpr (std::is_same_v<T, std::int32_t>) return Elem::i32;
  else return Elem::i64;
}
template <class T, int R>
struct ArrayArg {  // an array operand of rank R (3, or 2: broadcast along the third dimension)
  using type = View<T, R>;
  using elem = T;
  static constexpr int rank = R;
  static constexpr bool scalar = false;
};
template <class T>
struct ScalarArg {
  using type = T;
  using elem = T;
  static constexpr bool scalar = true;
};

// Depth 3, 4 leaves.
struct TreeA {
  static constexpr const char* name = "b0(u1(b2(x0, x1)), b3(x2, x3))";
  using args = std::tuple<ArrayArg<double, 3>, ArrayArg<float, 3>, ArrayArg<double, 3>, ArrayArg<std::int32_t, 3>>;
  template <class C, class X0, class X1, class X2, class X3>
  static auto build(const C& c, const int* k, const X0& x0, const X1& x1, const X2& x2, const X3& x3) {
    return c.bin(k[0], c.un(k[1], c.bin(k[2], x0, x1)), c.bin(k[3], x2, x3));
  }
};

// Depth 4, 6 leaves: a scalar, a rank-2 operand, int64.
struct TreeB {
  static constexpr const char* name = "b0(b1(u2(b3(x0, s1)), x2), u4(b5(b6(x3, x4), x5)))";
  using args = std::tuple<ArrayArg<double, 3>, ScalarArg<double>, ArrayArg<float, 3>, ArrayArg<double, 2>,
                          ArrayArg<std::int64_t, 3>, ArrayArg<double, 3>>;
  template <class C, class X0, class X1, class X2, class X3, class X4, class X5>
  static auto build(const C& c, const int* k, const X0& x0, const X1& x1, const X2& x2, const X3& x3, const X4& x4,
                    const X5& x5) {
    return c.bin(k[0], c.bin(k[1], c.un(k[2], c.bin(k[3], x0, x1)), x2), c.un(k[4], c.bin(k[5], c.bin(k[6], x3, x4), x5)));
  }
};

// Depth 4, 8 leaves: two scalars (float and int).
struct TreeC {
  static constexpr const char* name = "b0(b1(u2(b3(x0, x1)), b4(x2, s3)), b5(u6(b7(x4, x5)), b8(s6, u9(x7))))";
  using args = std::tuple<ArrayArg<double, 3>, ArrayArg<double, 3>, ArrayArg<float, 3>, ScalarArg<float>,
                          ArrayArg<double, 3>, ArrayArg<std::int32_t, 3>, ScalarArg<std::int32_t>, ArrayArg<double, 3>>;
  template <class C, class X0, class X1, class X2, class X3, class X4, class X5, class X6, class X7>
  static auto build(const C& c, const int* k, const X0& x0, const X1& x1, const X2& x2, const X3& x3, const X4& x4,
                    const X5& x5, const X6& x6, const X7& x7) {
    return c.bin(k[0], c.bin(k[1], c.un(k[2], c.bin(k[3], x0, x1)), c.bin(k[4], x2, x3)),
                 c.bin(k[5], c.un(k[6], c.bin(k[7], x4, x5)), c.bin(k[8], x6, c.un(k[9], x7))));
  }
};

// -- one trial: shapes, placements, leaves ------------------------------------------------------

using Rng = std::mt19937_64;
index_t uniform(Rng& g, index_t lo, index_t hi) { return std::uniform_int_distribution<index_t>(lo, hi)(g); }
bool coin(Rng& g, double p) { return std::bernoulli_distribution(p)(g); }

enum class Mode { shard, replicate, single };
enum class Dest { eval, assign_par, assign_seq, view };
const char* const dest_names[] = {"eval(expr)", "assign(out, expr, par)", "assign(out, expr, seq)",
                                  "out(ranges) = expr (a view of a larger array)"};

struct Setup {
  Shape<3> S{};
  Mode mode = Mode::shard;
  int d = 0;         // shard dimension (Mode::shard)
  int device = 0;    // which device of the set (Mode::single), modulo its size
  Dest dest = Dest::eval;
  int pad_dim = 0;   // Dest::view: the dimension along which the destination's parent is larger
  bool plain = false;  // every array operand whole, unbroadcast and placed like the output, so
                       // that executors can take their linear (and vectorized) paths
  std::array<int, 10> codes{};
};

// One operand: how to build it on any device set, and how to read it on the host.
struct LeafSpec {
  bool scalar = false;
  double scalar_value = 0;
  Elem elem = Elem::f64;
  int rank = 3;                 // of the operand (3 or 2)
  std::vector<index_t> pshape;  // parent array shape (rank, or rank + 1 with a dropped dimension)
  std::vector<double> data;     // parent values (exactly representable in the element type)
  std::vector<Range> ranges;    // one per kept parent dimension (in order)
  int drop = -1;                // parent dimension dropped by an integer index (0 or rank), or -1
  index_t drop_index = 0;
  int pshard = -1;              // parent shard dimension, -1: replicated (or Mode::single)
  memory mem = memory::unified;
  bool as_view = false;         // built as a view with ranges (else the whole parent array)
  std::array<index_t, 3> V{1, 1, 1};  // the operand's shape (padded with 1)
  // Host reading: element at output index i is data[off + sum_k i_k * st[k]].
  index_t off = 0;
  std::array<index_t, 3> st{};
  std::string describe() const;
};

std::string LeafSpec::describe() const {
  std::ostringstream os;
  if (scalar) {
    os << "scalar " << scalar_value;
    return os.str();
  }
  const char* en[] = {"f64", "f32", "i32", "i64"};
  os << en[static_cast<int>(elem)] << " rank " << rank << " parent {";
  for (std::size_t k = 0; k < pshape.size(); ++k) os << (k ? "," : "") << pshape[k];
  os << "} " << (pshard >= 0 ? "shard(" + std::to_string(pshard) + ")" : std::string("replicated/single"))
     << (mem == memory::device ? " device-memory" : "");
  if (as_view) {
    os << " view(";
    for (std::size_t k = 0, r = 0; k < pshape.size(); ++k) {
      if (k) os << ", ";
      if (static_cast<int>(k) == drop) os << drop_index;
      else {
        const Range& q = ranges[r++];
        os << "range(" << q.first << "," << q.last << "," << q.step << ")";
      }
    }
    os << ")";
  }
  return os.str();
}

template <class T>
double draw_value(Rng& g) {
  if constexpr (std::is_integral_v<T>) return static_cast<double>(uniform(g, -20, 20));
  else return static_cast<double>(static_cast<T>(std::uniform_real_distribution<double>(-2.0, 2.0)(g)));
}

// Draws an operand of kind Arg for the setup.
template <class Arg>
LeafSpec draw_leaf(Rng& g, const Setup& su) {
  using T = typename Arg::elem;
  LeafSpec L;
  L.elem = elem_of<T>();
  if constexpr (Arg::scalar) {
    L.scalar = true;
    L.scalar_value = draw_value<T>(g);
    return L;
  } else {
    constexpr int R = Arg::rank;
    L.rank = R;
    // The operand's shape: the output's, with some dimensions broadcast (size 1).
    const double p_bcast = su.plain ? 0.0 : (coin(g, 0.15) ? 1.0 : 0.25);
    std::array<index_t, 3> V{1, 1, 1};
    for (int k = 0; k < R; ++k) V[static_cast<std::size_t>(k)] = coin(g, p_bcast) ? 1 : su.S[static_cast<std::size_t>(k)];
    L.V = V;
    // Sharded along the output's shard dimension when it has that extent there (and not always).
    bool sharded = su.mode == Mode::shard && su.d < R && V[static_cast<std::size_t>(su.d)] == su.S[static_cast<std::size_t>(su.d)] &&
                   (su.plain || coin(g, 0.8));
    L.mem = coin(g, 0.2) ? memory::device : memory::unified;
    L.as_view = !su.plain && coin(g, 0.5);
    const bool drop = L.as_view && R == 3 && coin(g, 0.3);
    L.drop = drop ? (coin(g, 0.5) ? 0 : 3) : -1;
    std::array<index_t, 3> first{}, step{};
    std::vector<index_t> kept;  // parent extent of each kept dimension
    for (int k = 0; k < R; ++k) {
      const index_t v = V[static_cast<std::size_t>(k)];
      index_t f = 0, s = 1, P = v;
      const bool fixed = sharded && k == su.d;  // the shard dimension is taken whole
      if (L.as_view && !fixed) {
        s = coin(g, 0.5) ? 1 : (coin(g, 0.6) ? uniform(g, 2, 3) : -uniform(g, 1, 2));
        const index_t lo = uniform(g, 0, 3), hi = uniform(g, 0, 3);
        const index_t span = v > 0 ? (v - 1) * (s > 0 ? s : -s) + 1 : 0;
        P = lo + span + hi;
        f = s > 0 ? lo : lo + span - 1;
        if (v == 0) f = lo;
      }
      first[static_cast<std::size_t>(k)] = f;
      step[static_cast<std::size_t>(k)] = s;
      kept.push_back(P);
      L.ranges.push_back(Range{f, f + v * s, s});
    }
    // The parent: kept dimensions plus the dropped one.
    L.pshape = kept;
    if (drop) {
      const index_t K = uniform(g, 1, 3);
      L.drop_index = uniform(g, 0, K - 1);
      L.pshape.insert(L.pshape.begin() + (L.drop == 0 ? 0 : 3), K);
    }
    L.pshard = sharded ? su.d + (L.drop == 0 ? 1 : 0) : -1;
    index_t n = 1;
    for (auto x : L.pshape) n *= x;
    L.data.resize(static_cast<std::size_t>(n));
    for (auto& x : L.data) x = draw_value<T>(g);
    // Host reading: parent column-major strides, mapped through the ranges.
    std::vector<index_t> pst(L.pshape.size());
    index_t acc = 1;
    for (std::size_t k = 0; k < L.pshape.size(); ++k) {
      pst[k] = acc;
      acc *= L.pshape[k];
    }
    L.off = drop ? L.drop_index * pst[static_cast<std::size_t>(L.drop)] : 0;
    for (int k = 0; k < 3; ++k) {
      if (k >= R) {
        L.st[static_cast<std::size_t>(k)] = 0;
        continue;
      }
      const std::size_t pk = static_cast<std::size_t>(k + (L.drop == 0 ? 1 : 0));
      L.off += first[static_cast<std::size_t>(k)] * pst[pk];
      L.st[static_cast<std::size_t>(k)] =
          V[static_cast<std::size_t>(k)] == 1 ? 0 : step[static_cast<std::size_t>(k)] * pst[pk];
    }
    return L;
  }
}

Placement placement_of(const Setup& su, const DeviceSet& ds, int pshard) {
  switch (su.mode) {
    case Mode::single: return on(ds[static_cast<std::size_t>(su.device) % ds.size()]);
    case Mode::replicate: return replicate(ds);
    default: return pshard >= 0 ? shard(pshard, ds) : replicate(ds);
  }
}

template <class T, std::size_t N>
Array<T, int(N)> parent_array(const LeafSpec& L, const Placement& p) {
  std::vector<T> v(L.data.size());
  for (std::size_t i = 0; i < v.size(); ++i) v[i] = static_cast<T>(L.data[i]);
  std::array<index_t, N> s{};
  for (std::size_t k = 0; k < N; ++k) s[k] = L.pshape[k];
  if constexpr (N == 2) return from_host(v, {s[0], s[1]}, p, L.mem);
  else if constexpr (N == 3) return from_host(v, {s[0], s[1], s[2]}, p, L.mem);
  else return from_host(v, {s[0], s[1], s[2], s[3]}, p, L.mem);
}

// Builds the operand on `ds`.
template <class Arg>
typename Arg::type make_leaf(const LeafSpec& L, const Setup& su, const DeviceSet& ds) {
  using T = typename Arg::elem;
  if constexpr (Arg::scalar) {
    return static_cast<T>(L.scalar_value);
  } else {
    const Placement p = placement_of(su, ds, L.pshard);
    const auto& r = L.ranges;
    if constexpr (Arg::rank == 2) {
      auto P = parent_array<T, 2>(L, p);
      return L.as_view ? P(r[0], r[1]) : View<T, 2>(P.layout_ptr());
    } else {
      if (L.drop < 0) {
        auto P = parent_array<T, 3>(L, p);
        return L.as_view ? P(r[0], r[1], r[2]) : View<T, 3>(P.layout_ptr());
      }
      auto P = parent_array<T, 4>(L, p);
      if (L.drop == 0) return P(L.drop_index, r[0], r[1], r[2]);
      return P(r[0], r[1], r[2], L.drop_index);
    }
  }
}

template <class Args, std::size_t... I>
auto make_leaves(const std::vector<LeafSpec>& specs, const Setup& su, const DeviceSet& ds, std::index_sequence<I...>) {
  return std::tuple<typename std::tuple_element_t<I, Args>::type...>{
      make_leaf<std::tuple_element_t<I, Args>>(specs[I], su, ds)...};
}

// Evaluates the tree on `ds` into the chosen kind of destination; returns the values.
template <class Tree>
std::vector<double> run_on(const std::vector<LeafSpec>& specs, const Setup& su, const DeviceSet& ds) {
  using Args = typename Tree::args;
  constexpr std::size_t NL = std::tuple_size_v<Args>;
  const auto leaves = make_leaves<Args>(specs, su, ds, std::make_index_sequence<NL>{});
  const auto expr =
      std::apply([&](const auto&... x) { return Tree::build(Lazy{}, su.codes.data(), x...); }, leaves);
  const Shape<3>& S = su.S;
  const Placement dp = placement_of(su, ds, su.d);
  switch (su.dest) {
    case Dest::eval: {
      // The expression's own shape: 1 along a dimension where every operand broadcasts.
      Shape<3> E{1, 1, 1};
      for (const auto& L : specs)
        for (std::size_t k = 0; k < 3; ++k)
          if (!L.scalar && L.V[k] != 1) E[k] = S[k];
      auto r = eval(expr);
      static_assert(std::is_same_v<decltype(r), Array<double, 3>>);
      REQUIRE(r.shape() == E);
      const auto h = to_host(r);
      std::vector<double> out;  // broadcast to S for the comparison
      out.reserve(static_cast<std::size_t>(S[0] * S[1] * S[2]));
      for (index_t k = 0; k < S[2]; ++k)
        for (index_t j = 0; j < S[1]; ++j)
          for (index_t i = 0; i < S[0]; ++i)
            out.push_back(h[static_cast<std::size_t>((E[0] == 1 ? 0 : i) + E[0] * ((E[1] == 1 ? 0 : j) + E[1] * (E[2] == 1 ? 0 : k)))]);
      return out;
    }
    case Dest::assign_par:
    case Dest::assign_seq: {
      auto out = full<double>(S, -777.0, dp);
      assign(out, expr, su.dest == Dest::assign_seq ? seq : par);
      return to_host(out);
    }
    default: {
      // A parent 3 larger along pad_dim, the expression written into the window [1, 1 + S).
      Shape<3> P = S;
      P[static_cast<std::size_t>(su.pad_dim)] += 3;
      auto parent = full<double>(P, -777.0, dp);
      Range rg[3];
      for (int k = 0; k < 3; ++k) {
        const index_t lo = k == su.pad_dim ? 1 : 0;
        rg[k] = range(lo, lo + S[static_cast<std::size_t>(k)]);
      }
      parent(rg[0], rg[1], rg[2]) = expr;
      const auto h = to_host(parent);
      std::vector<double> out(static_cast<std::size_t>(S[0] * S[1] * S[2]));
      std::size_t outside_changed = 0;
      for (index_t k = 0; k < P[2]; ++k)
        for (index_t j = 0; j < P[1]; ++j)
          for (index_t i = 0; i < P[0]; ++i) {
            index_t idx[3] = {i, j, k};
            idx[su.pad_dim] -= 1;
            const double v = h[static_cast<std::size_t>(i + P[0] * (j + P[1] * k))];
            if (idx[su.pad_dim] < 0 || idx[su.pad_dim] >= S[static_cast<std::size_t>(su.pad_dim)]) {
              outside_changed += v != -777.0;
            } else {
              out[static_cast<std::size_t>(idx[0] + S[0] * (idx[1] + S[1] * idx[2]))] = v;
            }
          }
      CHECK_MESSAGE(outside_changed == 0, outside_changed << " elements outside the destination view changed");
      return out;
    }
  }
}

// Plain loops in double, with error bounds.
template <class Tree>
std::vector<Val> reference(const std::vector<LeafSpec>& specs, const Setup& su) {
  constexpr std::size_t NL = std::tuple_size_v<typename Tree::args>;
  const Shape<3>& S = su.S;
  std::vector<Val> out;
  out.reserve(static_cast<std::size_t>(S[0] * S[1] * S[2]));
  std::array<Val, NL> x{};
  for (index_t k = 0; k < S[2]; ++k)
    for (index_t j = 0; j < S[1]; ++j)
      for (index_t i = 0; i < S[0]; ++i) {
        for (std::size_t l = 0; l < NL; ++l) {
          const LeafSpec& L = specs[l];
          x[l] = {L.scalar ? L.scalar_value
                           : L.data[static_cast<std::size_t>(L.off + i * L.st[0] + j * L.st[1] + k * L.st[2])],
                  0.0};
        }
        out.push_back(std::apply([&](const auto&... v) { return Tree::build(Ref{}, su.codes.data(), v...); }, x));
      }
  return out;
}

// An output extent: mostly small, with 0, 1 and odd sizes, sometimes larger.
index_t draw_extent(Rng& g, bool large) {
  if (large) return uniform(g, 40, 90);
  const double p = std::uniform_real_distribution<double>(0, 1)(g);
  if (p < 0.04) return 0;
  if (p < 0.25) return 1;
  if (p < 0.75) return uniform(g, 2, 9);
  return uniform(g, 10, 40);
}

Setup draw_setup(Rng& g) {
  Setup su;
  const bool large = coin(g, 0.04);
  do {
    for (auto& s : su.S) s = draw_extent(g, large);
  } while (!large && su.S[0] * su.S[1] * su.S[2] > 6000);
  const double m = std::uniform_real_distribution<double>(0, 1)(g);
  su.mode = m < 0.7 ? Mode::shard : (m < 0.85 ? Mode::replicate : Mode::single);
  su.d = static_cast<int>(uniform(g, 0, 2));
  su.device = static_cast<int>(uniform(g, 0, 7));
  su.dest = static_cast<Dest>(uniform(g, 0, 3));
  su.pad_dim = static_cast<int>(uniform(g, 0, 2));
  su.plain = coin(g, 0.3);
  if (su.mode == Mode::shard && su.pad_dim == su.d) su.pad_dim = (su.d + 1 + static_cast<int>(uniform(g, 0, 1))) % 3;
  for (auto& c : su.codes) c = static_cast<int>(uniform(g, 0, n_binops * n_unops - 1));
  return su;
}

std::string describe(const Setup& su, const std::vector<LeafSpec>& specs, const char* tree) {
  std::ostringstream os;
  os << "tree " << tree << "\n  output " << su.S[0] << "×" << su.S[1] << "×" << su.S[2] << ", "
     << (su.mode == Mode::shard ? "shard(" + std::to_string(su.d) + ")"
                                : su.mode == Mode::replicate ? std::string("replicate")
                                                             : "on(device #" + std::to_string(su.device) + ")")
     << ", destination " << dest_names[static_cast<int>(su.dest)] << (su.plain ? ", plain operands" : "");
  if (su.dest == Dest::view) os << " padded along dim " << su.pad_dim;
  os << "\n  codes:";
  for (int c : su.codes) os << " " << c << "(" << binop_names[c % n_binops] << "|" << unop_names[c % n_unops] << ")";
  for (std::size_t l = 0; l < specs.size(); ++l) os << "\n  x" << l << ": " << specs[l].describe();
  return os.str();
}

// Compares `got` with the plain-loop reference (within its error bound) and returns a description
// of the first mismatch.
std::string compare_to_reference(const std::vector<double>& got, const std::vector<Val>& ref, double factor) {
  if (got.size() != ref.size()) return "got " + std::to_string(got.size()) + " values, expected " + std::to_string(ref.size());
  for (std::size_t i = 0; i < got.size(); ++i) {
    const double tol = factor * (16 * ref[i].e + 8 * u * std::fabs(ref[i].v)) + 1e-300;
    if (!(std::fabs(got[i] - ref[i].v) <= tol)) {  // also catches NaN
      std::ostringstream os;
      os.precision(17);
      os << "element " << i << ": got " << got[i] << ", expected " << ref[i].v << " (error bound " << ref[i].e
         << ", tolerance " << tol << ")";
      return os.str();
    }
  }
  return {};
}

std::uint64_t base_seed() {
  if (const char* s = std::getenv("TESSERA_DIFFERENTIAL_SEED")) return std::strtoull(s, nullptr, 0);
  return rng()();
}

template <class Tree>
void differential(int trials) {
  const std::uint64_t seed0 = base_seed();
  const auto sets = device_sets();
  if (sets.empty()) return;
  const DeviceSet ref_set = host_devices(1);
  constexpr std::size_t NL = std::tuple_size_v<typename Tree::args>;
  std::size_t elements = 0, compared_sets = 0;
  for (int t = 0; t < trials; ++t) {
    Rng g(seed0 + static_cast<std::uint64_t>(t) * 0x9e3779b97f4a7c15ull);
    const Setup su = draw_setup(g);
    std::vector<LeafSpec> specs;
    [&]<std::size_t... I>(std::index_sequence<I...>) {
      (specs.push_back(draw_leaf<std::tuple_element_t<I, typename Tree::args>>(g, su)), ...);
    }(std::make_index_sequence<NL>{});
    INFO("TESSERA_DIFFERENTIAL_SEED=" << seed0 << ", trial " << t << "\n" << describe(su, specs, Tree::name));

    const std::vector<Val> ref2 = reference<Tree>(specs, su);
    // Every tree here is valid: an exception is a failure of the set that threw it.
    auto run_or_report = [&](const DeviceSet& ds, std::vector<double>& out) {
      try {
        out = run_on<Tree>(specs, su, ds);
        return true;
      } catch (const std::exception& e) {
        FAIL_CHECK(set_name(ds) << " (" << ds.size() << " devices) threw: " << e.what());
        return false;
      }
    };
    std::vector<double> ref1;
    if (!run_or_report(ref_set, ref1)) break;
    std::string bad = compare_to_reference(ref1, ref2, 1);
    CHECK_MESSAGE(bad.empty(), "one host device against plain loops: " << bad);
    bool failed = !bad.empty();
    elements += ref2.size();
    for (const auto& ds : sets) {
      if (ds == ref_set) continue;
      std::vector<double> got;
      if (!run_or_report(ds, got)) {
        failed = true;
        continue;
      }
      ++compared_sets;
      bad = compare_to_reference(got, ref2, 1);
      CHECK_MESSAGE(bad.empty(), set_name(ds) << " (" << ds.size() << " devices) against plain loops: " << bad);
      failed = failed || !bad.empty();
      // Against one host device: both lie within the bound of the exact value.
      std::vector<Val> r1(ref1.size());
      for (std::size_t i = 0; i < ref1.size(); ++i) r1[i] = {ref1[i], ref2[i].e};
      bad = compare_to_reference(got, r1, 2);
      CHECK_MESSAGE(bad.empty(), set_name(ds) << " (" << ds.size() << " devices) against one host device: " << bad);
      failed = failed || !bad.empty();
    }
    if (failed) break;  // one fully described failure is more useful than a flood
  }
  MESSAGE(std::string(Tree::name) << ": " << trials << " trials, " << elements << " output elements, " << compared_sets
                     << " device-set evaluations compared");
}

}  // namespace

TEST_CASE("differential: depth-3 tree of 4 mixed-type operands") { differential<TreeA>(150); }
TEST_CASE("differential: depth-4 tree with a scalar and a rank-2 operand") { differential<TreeB>(150); }
TEST_CASE("differential: depth-4 tree of 8 operands with two scalars") { differential<TreeC>(150); }
