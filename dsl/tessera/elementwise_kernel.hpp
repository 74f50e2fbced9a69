// SPDX-License-Identifier: Apache-2.0
// Tessera: CuPy's ElementwiseKernel and ReductionKernel over sharded arrays. The parameter lists
// ("float32 x, T y") and bodies are CuPy's; the inputs broadcast by the DSL's (Julia's) rules; a
// kernel is generated per signature (element types, rank) and compiled by NVRTC for GPUs or by the
// system C++ compiler for host devices (backend/rtc), then runs once per shard. The generated GPU
// code has the fused DSL kernel's three paths: 16-byte vector loads when every operand is
// contiguous and aligned, linear, and cartesian (N-d index and strides).
#pragma once
#include <tessera/instantiate.hpp>
#include <tessera/kernel.hpp>
#include <tessera/transfer.hpp>

#include <map>
#include <sstream>
#include <string>
#include <tuple>
#include <vector>

namespace tessera {
namespace detail {

struct KParam {
  std::string type;  // as written: float32, double, T...
  std::string name;
};

inline std::string trim(const std::string& s) {
  const auto b = s.find_first_not_of(" \t\n");
  const auto e = s.find_last_not_of(" \t\n");
  return b == std::string::npos ? "" : s.substr(b, e - b + 1);
}

// The C type of a CuPy or C type name; "" for a placeholder (a type parameter such as T).
inline std::string c_type_of(const std::string& t) {
  static const std::map<std::string, std::string> names = {
      {"float32", "float"}, {"float", "float"}, {"float64", "double"}, {"double", "double"},
      {"int32", "int"},     {"int", "int"},     {"int64", "long long"}, {"long long", "long long"},
      {"bool", "bool"}};
  auto it = names.find(t);
  return it == names.end() ? "" : it->second;
}

inline std::vector<KParam> parse_params(const std::string& list, const std::string& kernel, const char* which) {
  std::vector<KParam> out;
  std::stringstream ss(list);
  std::string item;
  while (std::getline(ss, item, ',')) {
    item = trim(item);
    if (item.empty()) continue;
    const auto sp = item.find_last_of(" \t");
    if (sp == std::string::npos) {
      throw invalid_argument("tessera: kernel '" + kernel + "': " + which + " parameter '" + item +
                             "': expected '<type> <name>', e.g. 'float32 x' or 'T x'");
    }
    KParam p{trim(item.substr(0, sp)), trim(item.substr(sp + 1))};
    // A placeholder is an identifier starting with a capital letter (CuPy's T, U...); anything else
    // must be a known type, so that "uint32 x" is refused rather than bound to any array.
    const bool placeholder = !p.type.empty() && p.type[0] >= 'A' && p.type[0] <= 'Z' &&
                             p.type.find_first_of(" \t*&") == std::string::npos;
    if (!placeholder && c_type_of(p.type).empty()) {
      throw invalid_argument("tessera: kernel '" + kernel + "': " + which + " parameter '" + item + "': type '" +
                             p.type + "' is not supported; expected float32, float64, int32, int64, bool (or float, "
                             "double, int, long long), or a placeholder such as T");
    }
    out.push_back(std::move(p));
  }
  return out;
}

template <class T>
std::string c_type() {
  if constexpr (std::is_same_v<T, float>) return "float";
  else if constexpr (std::is_same_v<T, double>) return "double";
  else if constexpr (std::is_same_v<T, std::int32_t>) return "int";
  else if constexpr (std::is_same_v<T, std::int64_t> || std::is_same_v<T, long long>) return "long long";
  else if constexpr (std::is_same_v<T, bool>) return "bool";
  else return "";
}

// The operand structs of generated kernels (prepended to their source, GPU and host alike).
inline const char* generated_preamble() {
  return R"(namespace tessera {
template <class T, int N> struct operand { T* p; long long st[N]; };
template <int N> struct box { long long ext[N]; long long n; int path; };
template <class T> struct alignas(16) vec4 { T v[4]; };
}
#ifdef __CUDACC_RTC__
#define TESSERA_HD __device__ __forceinline__
#else
#include <cmath>
#include <algorithm>
using namespace std;
#define TESSERA_HD inline
#endif
)";
}

// Per-shard description of one operand: a pointer and strides over the shard's box (stride 0 on
// broadcast dims), as the generated kernels read it.
template <int R>
struct OperandArg {
  void* p;
  long long st[R];
};
template <int R>
struct BoxArg {
  long long ext[R];
  long long n;
  int path;  // 0: vector, 1: linear, 2: cartesian
};

// Where operand x (rank M <= R) is read for the box (origin, extent) of an output of shape `shape`.
template <class T, int M, int R>
OperandArg<R> operand_for(const Layout<T, M>& l, Device d, const Shape<R>& shape, const Shape<R>& origin,
                          const Shape<R>& extent, const std::string& kernel, int position, bool& linear,
                          bool& aligned) {
  const auto view = operand_view<T, M, R>(l, d, shape, origin, extent);
  if (!view.part) {
    throw placement_mismatch("tessera::placement_mismatch: kernel '" + kernel + "', argument #" +
                             std::to_string(position) + " (" + shape_string<M>(l.shape) + ", " +
                             describe_placement(l) + ") has no part on " + d.name() +
                             " holding the indices the output computes there. Fix: give it the output's placement, "
                             "or replicate() it.");
  }
  if (view.part->buf) rt::make_resident(*view.part->buf);
  OperandArg<R> a{};
  index_t acc = 1;
  for (int k = 0; k < R; ++k) {
    a.st[k] = view.stride(k);
    if (extent[k] != 1 && a.st[k] != acc) linear = false;
    acc *= extent[k];
  }
  a.p = view.start();
  if (reinterpret_cast<std::uintptr_t>(a.p) % 16 != 0) aligned = false;
  return a;
}

// The element type of the first Array or View among A (float when there is none).
template <class... A>
struct first_array_value {
  using type = float;
};
template <class F, class... A>
struct first_array_value<F, A...> {
  template <class V, bool IsArray = is_array_like<V>::value>
  struct pick {
    using type = typename first_array_value<A...>::type;
  };
  template <class V>
  struct pick<V, true> {
    using type = typename V::value_type;
  };
  using type = typename pick<std::remove_cvref_t<F>>::type;
};

template <class X>
constexpr int rank_of() {
  using V = std::remove_cvref_t<X>;
  if constexpr (is_array_like<V>::value) return V::rank;
  else return 0;
}

// The largest rank among a call's arguments (scalars count 0): the rank of the generated kernel.
template <class... A>
inline constexpr int max_arg_rank = [] {
  int r = 0;
  ((r = rank_of<A>() > r ? rank_of<A>() : r), ...);
  return r;
}();

template <class X>
std::string type_of_arg() {
  using V = std::remove_cvref_t<X>;
  if constexpr (is_array_like<V>::value) return c_type<typename V::value_type>();
  else if constexpr (is_per_shard<V>::value) return c_type<typename decltype(V::values)::value_type>();
  else return c_type<V>();
}

// A scalar argument's value for shard s (per_shard(values): values[s], counted against `count`).
template <class V>
auto scalar_for(const V& x, int s, int count, const std::string& kernel, std::size_t position) {
  if constexpr (is_per_shard<V>::value) {
    if (static_cast<int>(x.values.size()) != count) {
      throw invalid_argument("tessera: kernel '" + kernel + "', argument #" + std::to_string(position) +
                             ": per_shard(values) has " + std::to_string(x.values.size()) +
                             " values; expected one per shard, " + std::to_string(count));
    }
    return x.values[static_cast<std::size_t>(s)];
  } else {
    return x;
  }
}

// Resolves every parameter's C type: concrete names map directly; a placeholder takes the type
// of the first argument bound to it. `arg_types` are the C types of the arguments given so far.
inline std::vector<std::string> resolve_types(const std::vector<KParam>& params, const std::vector<std::string>& arg_types,
                                              std::map<std::string, std::string>& bound, const std::string& kernel) {
  std::vector<std::string> out;
  for (std::size_t i = 0; i < params.size(); ++i) {
    std::string c = c_type_of(params[i].type);
    if (c.empty()) {
      auto it = bound.find(params[i].type);
      if (it != bound.end()) c = it->second;
      else if (i < arg_types.size() && !arg_types[i].empty()) c = bound[params[i].type] = arg_types[i];
      else {
        throw invalid_argument("tessera: kernel '" + kernel + "': the type of parameter '" + params[i].name + "' (" +
                               params[i].type + ") is not fixed by any argument; pass that output explicitly");
      }
    }
    out.push_back(c);
  }
  return out;
}

// One argument of a generated kernel: its C type, name, and whether it is an array.
struct GenArg {
  std::string type, name;
  bool array;
};

// The source of an elementwise kernel over rank R: tessera_body(inputs..., outputs..., i) holds
// the user's operation; tessera_elementwise (GPU) and tessera_elementwise_host run it per element.
inline std::string elementwise_source(const std::vector<GenArg>& in, const std::vector<GenArg>& out, int R,
                                      const std::string& body, const std::string& user_preamble,
                                      const std::string& name) {
  std::ostringstream o;
  o << generated_preamble() << user_preamble << "\n";
  o << "TESSERA_HD void tessera_body(";
  for (auto& a : in) o << "const " << a.type << "& " << a.name << ", ";
  for (auto& a : out) o << a.type << "& " << a.name << ", ";
  o << "long long i) {\n#line 1 \"" << name << "\"\n" << body << ";\n}\n#line 1 \"" << name
    << " (generated)\"\n";
  // Arguments: operands (arrays) or values (scalar inputs), then the box.
  auto params = [&](bool host) {
    std::ostringstream p;
    int k = 0;
    for (auto& a : in) {
      if (host) {
        if (a.array) p << "  auto& _a" << k << " = *static_cast<tessera::operand<const " << a.type << ", " << R << ">*>(_args[" << k << "]);\n";
        else p << "  const " << a.type << " _a" << k << " = *static_cast<const " << a.type << "*>(_args[" << k << "]);\n";
      } else {
        p << (k ? ", " : "") << (a.array ? "tessera::operand<const " + a.type + ", " + std::to_string(R) + "> " : "const " + a.type + " ") << "_a" << k;
      }
      ++k;
    }
    int j = 0;
    for (auto& a : out) {
      if (host) p << "  auto& _o" << j << " = *static_cast<tessera::operand<" << a.type << ", " << R << ">*>(_args[" << k << "]);\n";
      else p << (k ? ", " : "") << "tessera::operand<" << a.type << ", " << R << "> _o" << j;
      ++j, ++k;
    }
    if (host) p << "  auto& _b = *static_cast<tessera::box<" << R << ">*>(_args[" << k << "]);\n";
    else p << ", tessera::box<" << R << "> _b";
    return p.str();
  };
  // The call of the body for element _i at offsets given by `at(name)`.
  auto call = [&](auto at_in, auto at_out) {
    std::ostringstream c;
    for (std::size_t j = 0; j < out.size(); ++j) c << out[j].type << " _r" << j << "{}; ";
    c << "tessera_body(";
    for (std::size_t k = 0; k < in.size(); ++k) c << (in[k].array ? at_in(k) : "_a" + std::to_string(k)) << ", ";
    for (std::size_t j = 0; j < out.size(); ++j) c << "_r" << j << ", ";
    c << "_i); ";
    for (std::size_t j = 0; j < out.size(); ++j) c << at_out(j) << " = _r" << j << "; ";
    return c.str();
  };
  auto linear_in = [](std::size_t k) { return "_a" + std::to_string(k) + ".p[_i]"; };
  auto linear_out = [](std::size_t j) { return "_o" + std::to_string(j) + ".p[_i]"; };
  auto cart_in = [](std::size_t k) { return "_a" + std::to_string(k) + ".p[_off(_a" + std::to_string(k) + ".st)]"; };
  auto cart_out = [](std::size_t j) { return "_o" + std::to_string(j) + ".p[_off(_o" + std::to_string(j) + ".st)]"; };
  auto cartesian = [&](const char* loop) {
    std::ostringstream c;
    c << "    " << loop << " {\n      long long _x[" << R << "], _r = _i;\n"
      << "      for (int _k = 0; _k < " << R << "; ++_k) { _x[_k] = _k + 1 < " << R
      << " ? _r % _b.ext[_k] : _r; _r = _k + 1 < " << R << " ? _r / _b.ext[_k] : 0; }\n"
      << "      auto _off = [&](const long long* _st) { long long _o = 0; for (int _k = 0; _k < " << R
      << "; ++_k) _o += _x[_k] * _st[_k]; return _o; };\n      " << call(cart_in, cart_out) << "\n    }\n";
    return c.str();
  };
  // GPU: the fused kernel's three paths; two vectors of 4 elements in flight per thread.
  o << "#ifdef __CUDACC_RTC__\nextern \"C\" __global__ void tessera_elementwise(" << params(false) << ") {\n"
    << "  const long long _n = _b.n;\n"
    << "  const long long _tid = (long long)blockIdx.x * blockDim.x + threadIdx.x;\n"
    << "  const long long _threads = (long long)gridDim.x * blockDim.x;\n"
    << "  if (_b.path == 0) {\n    const long long _chunks = _n / 4;\n"
    << "    for (long long _c0 = _tid; _c0 < _chunks; _c0 += 2 * _threads) {\n";
  for (std::size_t k = 0; k < in.size(); ++k)
    if (in[k].array) o << "      tessera::vec4<" << in[k].type << "> _v" << k << "[2];\n";
  o << "#pragma unroll\n      for (int _u = 0; _u < 2; ++_u) {\n        const long long _c = _c0 + _u * _threads;\n"
    << "        if (_c < _chunks) {";
  for (std::size_t k = 0; k < in.size(); ++k)
    if (in[k].array) o << " _v" << k << "[_u] = reinterpret_cast<const tessera::vec4<" << in[k].type << ">*>(_a" << k << ".p)[_c];";
  o << " }\n      }\n#pragma unroll\n      for (int _u = 0; _u < 2; ++_u) {\n        const long long _c = _c0 + _u * _threads;\n"
    << "        if (_c < _chunks) {\n";
  for (std::size_t j = 0; j < out.size(); ++j) o << "          tessera::vec4<" << out[j].type << "> _w" << j << "{};\n";
  o << "#pragma unroll\n          for (int _j = 0; _j < 4; ++_j) {\n            const long long _i = _c * 4 + _j;\n            "
    << call([](std::size_t k) { return "_v" + std::to_string(k) + "[_u].v[_j]"; },
            [](std::size_t j) { return "_w" + std::to_string(j) + ".v[_j]"; })
    << "\n          }\n";
  for (std::size_t j = 0; j < out.size(); ++j)
    o << "          reinterpret_cast<tessera::vec4<" << out[j].type << ">*>(_o" << j << ".p)[_c] = _w" << j << ";\n";
  o << "        }\n      }\n    }\n"
    << "    for (long long _i = _chunks * 4 + _tid; _i < _n; _i += _threads) { " << call(linear_in, linear_out) << "}\n"
    << "  } else if (_b.path == 1) {\n"
    << "    for (long long _i = _tid; _i < _n; _i += _threads) { " << call(linear_in, linear_out) << "}\n"
    << "  } else {\n" << cartesian("for (long long _i = _tid; _i < _n; _i += _threads)") << "  }\n}\n#else\n";
  // Host: the same body in loops, through one pointer to each argument.
  o << "extern \"C\" void tessera_elementwise_host(void** _args) {\n" << params(true)
    << "  const long long _n = _b.n;\n  if (_b.path != 2) {\n"
    << "    for (long long _i = 0; _i < _n; ++_i) { " << call(linear_in, linear_out) << "}\n  } else {\n"
    << cartesian("for (long long _i = 0; _i < _n; ++_i)") << "  }\n}\n#endif\n";
  return o.str();
}

// Adds a scalar argument as the C type the kernel declares for it.
template <class V>
void pack_scalar(ArgPack& pack, V v, const std::string& type) {
  if (type == "float") pack.add(static_cast<float>(v));
  else if (type == "double") pack.add(static_cast<double>(v));
  else if (type == "int") pack.add(static_cast<std::int32_t>(v));
  else if (type == "long long") pack.add(static_cast<std::int64_t>(v));
  else pack.add(static_cast<bool>(v));
}

// The compiled forms of one generated kernel: per device on GPUs, one host function.
struct Generated {
  std::shared_ptr<KernelState> gpu;
  std::vector<std::shared_ptr<KernelState>> more;  // further kernels of the same source (reductions)
  std::string reduce_type;                         // reductions: the C type of the folded values
  std::string host_code;
  void* host_fn = nullptr;
  std::mutex m;
  void* host(const std::string& name) {
    std::lock_guard<std::mutex> g(m);
    if (!host_fn) host_fn = rtc::host_symbol(host_code, "tessera_elementwise_host", name);
    return host_fn;
  }
};

// One shard of a generated kernel, run by rt::run_shards (so large host shards run on threads of
// their own, GPU shards are queued first, and the caller's device is restored).
struct GeneratedRun {
  ArgPack pack;
  Generated* gen;
  const std::string* name;
  bool vec;  // the vector path: a grid of one pass over pairs of 4-element vectors
  index_t n;
};
inline void run_generated(const void* task, int device, int shard, bool host) {
  auto& r = *static_cast<GeneratedRun*>(const_cast<void*>(task));
  if (host) {
    reinterpret_cast<void (*)(void**)>(r.gen->host(*r.name))(r.pack.pointers());
    return;
  }
  void* fn = r.gen->gpu->function(device);
  const index_t sms = rt::info(device).sm_count > 0 ? rt::info(device).sm_count : 1;
  const index_t work = r.vec ? (r.n / 4 + 1) / 2 : r.n;
  index_t blocks = (work + 255) / 256;
  const index_t cap = r.vec ? index_t(0x7fffffff) : sms * 64;
  blocks = blocks < 1 ? 1 : blocks > cap ? cap : blocks;
  const unsigned g3[3] = {static_cast<unsigned>(blocks), 1, 1}, b3[3] = {256, 1, 1};
  rtc::launch(fn, device, shard, g3, b3, 0, r.pack.pointers(), *r.name);
}

// A key per list of argument types: the address of a variable template instance.
template <class... A>
inline const char type_list_key = 0;

// The broadcast shape of a call's first `n_in` arguments (the inputs; Julia's rule) and the boxes
// of a result computed from them: placement_of's rule over those inputs (the first sharded one,
// along a dim it does not broadcast, else single-device, else replicated, else the default).
template <int R>
struct CallGeometry {
  Shape<R> shape;
  Geometry<R> g;
  memory mem = memory::unified;
};
template <int R, class... A>
CallGeometry<R> call_geometry(std::size_t n_in, const A&... args) {
  CallGeometry<R> c;
  for (int k = 0; k < R; ++k) c.shape[k] = 1;
  std::size_t pos = 0;
  auto fold_shape = [&](const auto& x) {
    using V = std::remove_cvref_t<decltype(x)>;
    if constexpr (is_array_like<V>::value) {
      if (pos < n_in) c.shape = broadcast_into<R, V::rank>(c.shape, R, x.shape());
    }
    ++pos;
  };
  (fold_shape(args), ...);
  LayoutChoice<R> choice;
  pos = 0;
  auto consider = [&](const auto& x) {
    using V = std::remove_cvref_t<decltype(x)>;
    if constexpr (is_array_like<V>::value) {
      if (pos < n_in) choose<R>(ArrayLeaf<typename V::value_type, V::rank>{x.layout_ptr()}, c.shape, choice);
    }
    ++pos;
  };
  (consider(args), ...);
  c.g = choice.priority ? choice.g : geometry_from_placement<R>(c.shape, Placement{});
  c.mem = choice.mem;
  return c;
}

// What ElementwiseKernel and ReductionKernel share: the parameter lists (one output), the name,
// preamble and options, and the binding of the parameters' types to a call's arguments.
struct KernelSignature {
  std::vector<KParam> in, out;
  std::string name, preamble;
  std::vector<std::string> options;
  std::string kind;  // "ElementwiseKernel" or "ReductionKernel", in messages

  KernelSignature(const std::string& in_params, const std::string& out_params, std::string kernel_name,
                  std::string pre, std::vector<std::string> opts, std::string what)
      : in(parse_params(in_params, kernel_name, "input")),
        out(parse_params(out_params, kernel_name, "output")),
        name(std::move(kernel_name)),
        preamble(std::move(pre)),
        options(std::move(opts)),
        kind(std::move(what)) {
    if (out.size() != 1) {
      throw invalid_argument("tessera: " + kind + " '" + name + "': expected one output parameter, found " +
                             std::to_string(out.size()));
    }
  }

  // The C types of the inputs and the output for arguments of C types `arg_types` (the output's
  // among them when given): placeholders bound in order, arrays of exactly the declared type, the
  // output of the type the call returns (`returned`).
  std::vector<std::string> bind(const std::vector<std::string>& arg_types, const std::vector<bool>& is_array,
                                const std::string& returned, std::map<std::string, std::string>& bound) const {
    std::vector<KParam> all = in;
    all.push_back(out[0]);
    const auto types = resolve_types(all, arg_types, bound, name);
    for (std::size_t k = 0; k < arg_types.size(); ++k) {
      if (is_array[k] && types[k] != arg_types[k]) {
        throw invalid_argument("tessera: " + kind + " '" + name + "', argument #" + std::to_string(k + 1) + " (" +
                               all[k].name + "): expected an array of " + types[k] + ", found " + arg_types[k]);
      }
    }
    if (types[in.size()] != returned) {
      throw invalid_argument("tessera: " + kind + " '" + name + "': the output '" + out[0].name + "' is " +
                             types[in.size()] + ", but the call returns " + returned +
                             "; use k.call<T>(...) with T its type" + (kind == "ElementwiseKernel" ? ", or pass the output" : ""));
    }
    return types;
  }

  // Per (output type, argument types) of a call, which fix everything above: the types and the
  // generated kernel are computed once, so that a repeated call builds no string. An entry is
  // stored complete (never half-made: a failed binding stores nothing and throws again).
  struct Bound {
    std::vector<std::string> types;
    std::map<std::string, std::string> placeholders;
    std::shared_ptr<Generated> generated;
  };
  std::mutex cache_m;
  std::map<const void*, std::shared_ptr<const Bound>> cache;

  template <class OutT, class... A, class Make>
  std::shared_ptr<const Bound> bound(Make&& make) {
    const void* key = &type_list_key<OutT, A...>;
    {
      std::lock_guard<std::mutex> g(cache_m);
      if (auto it = cache.find(key); it != cache.end()) return it->second;
    }
    auto b = std::make_shared<Bound>();
    b->types = bind({type_of_arg<A>()...}, {is_array_like<std::remove_cvref_t<A>>::value...}, c_type<OutT>(),
                    b->placeholders);
    b->generated = make(b->types, b->placeholders);
    std::lock_guard<std::mutex> g(cache_m);
    return cache.emplace(key, std::move(b)).first->second;  // a racing first call keeps the first entry
  }
};

}  // namespace detail

/// ElementwiseKernel(in_params, out_params, operation, name[, preamble, options]): CuPy's
/// ElementwiseKernel. `in_params`/`out_params` list "<type> <name>" (float32, float64, int32, int64,
/// bool, their C names, or a placeholder such as T bound by the arguments); `operation` is C++ over
/// those names (and `i`, the element's index in its shard). Inputs may be arrays or scalars and
/// broadcast by the DSL's rules. k(x, y) allocates the output (the first sharded input's placement;
/// its element type is the first array argument's, or Out in k.call<Out>(x, y)); k(x, y, z) writes
/// z and returns it (sharing its storage). Runs on GPUs (NVRTC) and on host devices (the system
/// C++ compiler), once per shard.
class ElementwiseKernel {
 public:
  ElementwiseKernel(std::string in_params, std::string out_params, std::string operation, std::string name,
                    std::string preamble = "", std::vector<std::string> options = {})
      : s_(std::make_shared<shared>(in_params, out_params, std::move(name), std::move(preamble), std::move(options),
                                    "ElementwiseKernel")) {
    s_->body = std::move(operation);
  }

  template <detail::kernel_arg... A>
  auto operator()(const A&... args) const {
    return call<void>(args...);
  }

  template <class Out, detail::kernel_arg... A>
  auto call(const A&... args) const;

  const std::string& name() const { return s_->name; }

 private:
  struct shared : detail::KernelSignature {
    using KernelSignature::KernelSignature;
    std::string body;
  };
  std::shared_ptr<shared> s_;

};

template <class Out, detail::kernel_arg... A>
auto ElementwiseKernel::call(const A&... args) const {
  using namespace detail;
  using T0 = typename first_array_value<A...>::type;
  using OutT = std::conditional_t<std::is_void_v<Out>, T0, Out>;
  constexpr int R = max_arg_rank<A...>;
  static_assert(R >= 1, "TESSERA_KERNEL_NEEDS_AN_ARRAY: pass at least one Array or View to an ElementwiseKernel");
  const std::string& kname = s_->name;
  const std::size_t n_in = s_->in.size(), n = sizeof...(A);
  if (n != n_in && n != n_in + 1) {
    throw invalid_argument("tessera: ElementwiseKernel '" + kname + "' takes " + std::to_string(n_in) + " inputs (and " +
                           "optionally its output); found " + std::to_string(n) + " arguments");
  }
  // Types: placeholders bind to the arguments' types in order (inputs, then the output if given).
  static constexpr bool is_array[] = {is_array_like<std::remove_cvref_t<A>>::value..., false};
  // The types and the generated kernel of this signature (made once per argument types).
  const auto binding = s_->bound<OutT, A...>([&](const std::vector<std::string>& types,
                                                 const std::map<std::string, std::string>&) {
    std::vector<GenArg> in, out{{types[n_in], s_->out[0].name, true}};
    for (std::size_t k = 0; k < n_in; ++k) in.push_back({types[k], s_->in[k].name, is_array[k]});
    auto g = std::make_shared<Generated>();
    g->gpu = std::make_shared<KernelState>();
    const std::string code = elementwise_source(in, out, R, s_->body, s_->preamble, kname);
    g->gpu->src = {code, "tessera_elementwise", s_->options, kname};
    g->host_code = code;
    return g;
  });
  const std::vector<std::string>& types = binding->types;
  const std::shared_ptr<Generated>& gen = binding->generated;
  // The output: the given one (its shape must take the inputs' broadcast shape), or new storage
  // with the inputs' placement.
  const CallGeometry<R> cg = call_geometry<R>(n_in, args...);
  Shape<R> shape = cg.shape;
  const Layout<OutT, R>* out_layout = nullptr;
  std::shared_ptr<const Layout<OutT, R>> owned;
  std::size_t pos = 0;
  auto find_output = [&](const auto& x) {
    using V = std::remove_cvref_t<decltype(x)>;
    if (pos++ < n_in) return;
    if constexpr (is_array_like<V>::value) {
      if constexpr (std::is_same_v<typename V::value_type, OutT> && V::rank == R) out_layout = &x.layout();
      else throw invalid_argument("tessera: ElementwiseKernel '" + kname + "': the output must be an array of rank " + std::to_string(R));
    } else {
      throw invalid_argument("tessera: ElementwiseKernel '" + kname + "': the output must be an array, found a scalar");
    }
  };
  (find_output(args), ...);
  if (out_layout) {
    check_assignable<R, R>(out_layout->shape, shape);
    shape = out_layout->shape;
  } else {
    owned = std::make_shared<const Layout<OutT, R>>(allocate_layout<OutT, R>(cg.g, cg.mem));
    out_layout = owned.get();
  }
  // Plan every shard (placement errors leave every array intact), then run them.
  std::vector<GeneratedRun> runs;
  std::vector<rt::shard_launch> launches;
  runs.reserve(out_layout->parts.size());
  for (std::size_t s = 0; s < out_layout->parts.size(); ++s) {
    const auto& p = out_layout->parts[s];
    const index_t count = volume<R>(p.extent);
    if (count == 0) continue;
    bool linear = true, aligned = true;
    GeneratedRun run{{}, gen.get(), &s_->name, false, count};
    pos = 0;
    auto pack_one = [&](const auto& x) {
      using V = std::remove_cvref_t<decltype(x)>;
      if (pos < n_in) {
        if constexpr (is_array_like<V>::value) {
          run.pack.add(operand_for<typename V::value_type, V::rank, R>(x.layout(), p.device, shape, p.origin, p.extent,
                                                                       kname, static_cast<int>(pos) + 1, linear, aligned));
        } else {
          pack_scalar(run.pack, scalar_for(x, static_cast<int>(s), static_cast<int>(out_layout->parts.size()), kname,
                                           pos + 1),
                      types[pos]);
        }
      }
      ++pos;
    };
    (pack_one(args), ...);
    OperandArg<R> o{};
    o.p = p.ptr;
    index_t acc = 1;
    for (int k = 0; k < R; ++k) {
      o.st[k] = p.stride[k];
      if (p.extent[k] != 1 && p.stride[k] != acc) linear = false;
      acc *= p.extent[k];
    }
    if (reinterpret_cast<std::uintptr_t>(p.ptr) % 16 != 0) aligned = false;
    if (p.buf) rt::make_resident(*p.buf);
    run.pack.add(o);
    // Vectors of 4 elements: every operand 4 or 8 bytes wide, so each vector is 16-byte aligned.
    bool wide_enough = true;
    for (std::size_t k = 0; k <= n_in; ++k) {
      const std::string& t = types[k];
      if ((k == n_in || is_array[k]) && !(t == "float" || t == "int" || t == "double" || t == "long long"))
        wide_enough = false;
    }
    BoxArg<R> b{};
    for (int k = 0; k < R; ++k) b.ext[k] = p.extent[k];
    b.n = count;
    b.path = linear ? (aligned && wide_enough ? 0 : 1) : 2;
    run.vec = b.path == 0;
    run.pack.add(b);
    runs.push_back(std::move(run));
    launches.push_back({.device = p.device.id(), .shard = static_cast<int>(s), .host = p.device.is_host(), .n = count,
                        .run = &run_generated, .task = nullptr});
  }
  for (std::size_t k = 0; k < runs.size(); ++k) launches[k].task = &runs[k];
  rt::run_shards(launches.data(), launches.size(), false);
  if (owned) return Array<OutT, R>(owned);
  // A given output: a handle sharing its storage (CuPy returns the output array itself).
  std::shared_ptr<const Layout<OutT, R>> shared_out;
  pos = 0;
  auto grab = [&](const auto& x) {
    using V = std::remove_cvref_t<decltype(x)>;
    if constexpr (is_array_like<V>::value) {
      if constexpr (std::is_same_v<typename V::value_type, OutT> && V::rank == R) {
        if (pos == n_in) shared_out = x.layout_ptr();
      }
    }
    ++pos;
  };
  (grab(args), ...);
  return Array<OutT, R>(shared_out);
}

}  // namespace tessera
