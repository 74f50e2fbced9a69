// SPDX-License-Identifier: Apache-2.0
// Tessera: the generated sources of ElementwiseKernel and ReductionKernel and the parser of CuPy
// parameter lists (codegen.hpp), compiled once into tessera_runtime.
#include <backend/rtc/codegen.hpp>

#include <tessera/error.hpp>

#include <map>
#include <memory>
#include <mutex>
#include <sstream>
#include <utility>

namespace tessera::detail {
namespace {

std::string trim(const std::string& s) {
  const auto b = s.find_first_not_of(" \t\n");
  const auto e = s.find_last_not_of(" \t\n");
  return b == std::string::npos ? "" : s.substr(b, e - b + 1);
}

const char* generated_preamble() {
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

std::vector<std::string> resolve_types(const std::vector<KParam>& params, const std::vector<std::string>& arg_types,
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

}  // namespace

std::string c_type_of(const std::string& t) {
  static const std::map<std::string, std::string> names = {
      {"float32", "float"}, {"float", "float"}, {"float64", "double"}, {"double", "double"},
      {"int32", "int"},     {"int", "int"},     {"int64", "long long"}, {"long long", "long long"},
      {"bool", "bool"}};
  auto it = names.find(t);
  return it == names.end() ? "" : it->second;
}

std::size_t c_type_size(const std::string& t) {
  return t == "double" || t == "long long" ? 8 : t == "bool" ? 1 : 4;
}

std::vector<KParam> parse_params(const std::string& list, const std::string& kernel, const char* which) {
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

const char* kernel_preamble() {
  return R"(namespace tessera {
template <class T, int N>
struct shard {
  T* data;
  long long extent[N];  // of this shard
  long long stride[N];  // in elements
  long long origin[N];  // global index of the shard's first element
  long long shape[N];   // of the whole array
  long long size;       // elements in this shard
  int index, count;     // this shard and the number of shards
#ifdef __CUDACC_RTC__
  __device__
#endif
  T& operator()(long long i) const {  // element i of the shard in column-major order
    long long off = 0;
    for (int k = 0; k < N; ++k) {
      const long long e = extent[k];
      off += (k + 1 < N ? i % e : i) * stride[k];
      i = k + 1 < N ? i / e : 0;
    }
    return data[off];
  }
};
template <class T, int N>
using Shard = shard<T, N>;
}  // namespace tessera
)";
}

std::vector<std::string> bind_types(const std::vector<KParam>& in, const KParam& out, const std::string& name,
                                    const std::string& kind, const std::vector<std::string>& arg_types,
                                    const std::vector<bool>& is_array, const std::string& returned,
                                    placeholder_list& bound) {
  std::vector<KParam> all = in;
  all.push_back(out);
  std::map<std::string, std::string> bound_map;
  const auto types = resolve_types(all, arg_types, bound_map, name);
  bound.assign(bound_map.begin(), bound_map.end());
  for (std::size_t k = 0; k < arg_types.size(); ++k) {
    if (is_array[k] && types[k] != arg_types[k]) {
      throw invalid_argument("tessera: " + kind + " '" + name + "', argument #" + std::to_string(k + 1) + " (" +
                             all[k].name + "): expected an array of " + types[k] + ", found " + arg_types[k]);
    }
  }
  if (types[in.size()] != returned) {
    throw invalid_argument("tessera: " + kind + " '" + name + "': the output '" + out.name + "' is " +
                           types[in.size()] + ", but the call returns " + returned +
                           "; use k.call<T>(...) with T its type" + (kind == "ElementwiseKernel" ? ", or pass the output" : ""));
  }
  return types;
}

std::string placeholder_type(const placeholder_list& bound, const std::string& name) {
  for (const auto& [placeholder, type] : bound)
    if (placeholder == name) return type;
  return "";
}

struct binding_cache::impl {
  mutable std::mutex m;
  std::map<const void*, std::shared_ptr<const void>> entries;
};
binding_cache::binding_cache() : impl_(std::make_unique<impl>()) {}
binding_cache::~binding_cache() = default;

std::shared_ptr<const void> binding_cache::find(const void* key) const {
  std::lock_guard<std::mutex> g(impl_->m);
  auto it = impl_->entries.find(key);
  return it == impl_->entries.end() ? nullptr : it->second;
}

std::shared_ptr<const void> binding_cache::emplace(const void* key, std::shared_ptr<const void> value) {
  std::lock_guard<std::mutex> g(impl_->m);
  return impl_->entries.emplace(key, std::move(value)).first->second;
}

std::string elementwise_source(const std::vector<GenArg>& in, const std::vector<GenArg>& out, int R,
                               const std::string& body, const std::string& user_preamble, const std::string& name) {
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

std::string reduction_source(const std::vector<GenArg>& in, const GenArg& out, const std::string& reduce_type, int R,
                             const std::string& map_expr, const std::string& reduce_expr, const std::string& post_expr,
                             const std::string& identity, const std::string& user_preamble, const std::string& name) {
  std::ostringstream o;
  o << generated_preamble() << user_preamble << "\ntypedef " << reduce_type << " tessera_reduce_t;\n";
  o << "TESSERA_HD tessera_reduce_t tessera_map(";
  for (auto& a : in) o << "const " << a.type << "& " << a.name << ", ";
  o << "long long i) {\n#line 1 \"" << name << "\"\nreturn (" << map_expr << ");\n}\n";
  o << "TESSERA_HD tessera_reduce_t tessera_fold(const tessera_reduce_t& a, const tessera_reduce_t& b) {\n#line 1 \""
    << name << " (reduce_expr)\"\nreturn (" << reduce_expr << ");\n}\n";
  o << "TESSERA_HD void tessera_post(const tessera_reduce_t& a, " << out.type << "& " << out.name << ") {\n#line 1 \""
    << name << " (post_map_expr)\"\n" << post_expr << ";\n}\n";
  o << "TESSERA_HD tessera_reduce_t tessera_identity() {\n#line 1 \"" << name << " (identity)\"\nreturn (tessera_reduce_t)("
    << identity << ");\n}\n#line 1 \"" << name << " (generated)\"\n";
  auto params = [&](bool host) {
    std::ostringstream p;
    for (std::size_t k = 0; k < in.size(); ++k) {
      const auto& a = in[k];
      if (host) {
        if (a.array) p << "  auto& _a" << k << " = *static_cast<tessera::operand<const " << a.type << ", " << R << ">*>(_args[" << k << "]);\n";
        else p << "  const " << a.type << " _a" << k << " = *static_cast<const " << a.type << "*>(_args[" << k << "]);\n";
      } else {
        p << (k ? ", " : "") << (a.array ? "tessera::operand<const " + a.type + ", " + std::to_string(R) + "> " : "const " + a.type + " ") << "_a" << k;
      }
    }
    if (host) p << "  auto& _b = *static_cast<tessera::box<" << R << ">*>(_args[" << in.size() << "]);\n";
    else p << ", tessera::box<" << R << "> _b";
    return p.str();
  };
  // The mapped value of element _i (linear path, or cartesian offsets through _off).
  auto mapped = [&](bool cartesian) {
    std::ostringstream c;
    c << "tessera_map(";
    for (std::size_t k = 0; k < in.size(); ++k) {
      const std::string a = "_a" + std::to_string(k);
      c << (!in[k].array ? a : cartesian ? a + ".p[_off(" + a + ".st)]" : a + ".p[_i]") << ", ";
    }
    c << "_i)";
    return c.str();
  };
  auto fold_loop = [&](const char* loop) {
    std::ostringstream c;
    c << "  if (_b.path != 2) {\n    " << loop << " _acc = tessera_fold(_acc, " << mapped(false) << ");\n  } else {\n    "
      << loop << " {\n      long long _x[" << R << "], _r = _i;\n      for (int _k = 0; _k < " << R
      << "; ++_k) { _x[_k] = _k + 1 < " << R << " ? _r % _b.ext[_k] : _r; _r = _k + 1 < " << R
      << " ? _r / _b.ext[_k] : 0; }\n      auto _off = [&](const long long* _st) { long long _o = 0; for (int _k = 0; _k < "
      << R << "; ++_k) _o += _x[_k] * _st[_k]; return _o; };\n      _acc = tessera_fold(_acc, " << mapped(true)
      << ");\n    }\n  }\n";
    return c.str();
  };
  const char* block_fold =
      "  __shared__ tessera_reduce_t _s[256];\n  _s[threadIdx.x] = _acc;\n"
      "  for (int _w = 128; _w > 0; _w /= 2) { __syncthreads(); if ((int)threadIdx.x < _w) _s[threadIdx.x] = "
      "tessera_fold(_s[threadIdx.x], _s[threadIdx.x + _w]); }\n  __syncthreads();\n";
  o << "#ifdef __CUDACC_RTC__\n"
    << "extern \"C\" __global__ void tessera_reduction(" << params(false) << ", tessera_reduce_t* _partials) {\n"
    << "  const long long _n = _b.n, _tid = (long long)blockIdx.x * blockDim.x + threadIdx.x;\n"
    << "  const long long _threads = (long long)gridDim.x * blockDim.x;\n  tessera_reduce_t _acc = tessera_identity();\n"
    << fold_loop("for (long long _i = _tid; _i < _n; _i += _threads)") << block_fold
    << "  if (threadIdx.x == 0) _partials[blockIdx.x] = _s[0];\n}\n"
    << "extern \"C\" __global__ void tessera_reduction_final(const tessera_reduce_t* _parts, long long _n, "
       "tessera_reduce_t* _out) {\n  tessera_reduce_t _acc = tessera_identity();\n"
    << "  for (long long _k = threadIdx.x; _k < _n; _k += blockDim.x) _acc = tessera_fold(_acc, _parts[_k]);\n"
    << block_fold << "  if (threadIdx.x == 0) *_out = _s[0];\n}\n"
    << "extern \"C\" __global__ void tessera_reduction_post(const tessera_reduce_t* _parts, long long _n, " << out.type
    << "* _y) {\n  tessera_reduce_t _acc = tessera_identity();\n"
    << "  for (long long _k = 0; _k < _n; ++_k) _acc = tessera_fold(_acc, _parts[_k]);\n  tessera_post(_acc, *_y);\n}\n"
    << "#else\n"
    << "extern \"C\" void tessera_reduction_host(void** _args, tessera_reduce_t* _out) {\n" << params(true)
    << "  const long long _n = _b.n;\n  tessera_reduce_t _acc = tessera_identity();\n"
    << fold_loop("for (long long _i = 0; _i < _n; ++_i)") << "  *_out = _acc;\n}\n"
    << "extern \"C\" void tessera_reduction_host_post(const tessera_reduce_t* _parts, long long _n, " << out.type
    << "* _y) {\n  tessera_reduce_t _acc = tessera_identity();\n"
    << "  for (long long _k = 0; _k < _n; ++_k) _acc = tessera_fold(_acc, _parts[_k]);\n  tessera_post(_acc, *_y);\n}\n"
    << "#endif\n";
  return o.str();
}

}  // namespace tessera::detail
