// SPDX-License-Identifier: Apache-2.0
// Tessera: CuPy's ReductionKernel over sharded arrays. map_expr turns each element (of the
// broadcast inputs) into a value, reduce_expr folds two values `a` and `b`, post_map_expr writes the
// output from the folded value `a`, identity is the fold's neutral element. Each shard folds its
// elements (GPU: one kernel of block partials plus one that folds them; host devices: a loop
// compiled by the system C++ compiler); the shards' values then fold in shard order and the post
// map runs once, on the first GPU of the reduction or on the host. The result is a host value.
#pragma once
#include <tessera/elementwise_kernel.hpp>

namespace tessera {
namespace detail {

inline std::string reduction_source(const std::vector<GenArg>& in, const GenArg& out, const std::string& reduce_type,
                                    int R, const std::string& map_expr, const std::string& reduce_expr,
                                    const std::string& post_expr, const std::string& identity,
                                    const std::string& user_preamble, const std::string& name) {
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

// The size of a C type of the kernels' vocabulary.
inline std::size_t c_type_size(const std::string& t) {
  return t == "double" || t == "long long" ? 8 : t == "bool" ? 1 : 4;
}

}  // namespace detail

/// ReductionKernel(in_params, out_params, map_expr, reduce_expr, post_map_expr, identity, name
/// [, reduce_type, preamble, options]): CuPy's ReductionKernel, reducing every element of its
/// (broadcast) inputs into one host value. k(x, y) returns it as the first array argument's
/// element type, or Out in k.call<Out>(x, y). reduce_type (default: the output's type) is the type
/// of `a` and `b` in reduce_expr.
class ReductionKernel {
 public:
  ReductionKernel(std::string in_params, std::string out_params, std::string map_expr, std::string reduce_expr,
                  std::string post_map_expr, std::string identity, std::string name, std::string reduce_type = "",
                  std::string preamble = "", std::vector<std::string> options = {})
      : s_(std::make_shared<shared>(in_params, out_params, std::move(name), std::move(preamble), std::move(options),
                                    "ReductionKernel")) {
    s_->map = std::move(map_expr);
    s_->reduce = std::move(reduce_expr);
    s_->post = std::move(post_map_expr);
    s_->identity = std::move(identity);
    s_->reduce_type = std::move(reduce_type);
  }

  template <detail::kernel_arg... A>
  auto operator()(const A&... args) const {
    return call<void>(args...);
  }
  template <class Out, detail::kernel_arg... A>
  auto call(const A&... args) const;

 private:
  struct shared : detail::KernelSignature {
    using KernelSignature::KernelSignature;
    std::string map, reduce, post, identity, reduce_type;
  };
  std::shared_ptr<shared> s_;
};

template <class Out, detail::kernel_arg... A>
auto ReductionKernel::call(const A&... args) const {
  using namespace detail;
  using T0 = typename first_array_value<A...>::type;
  using OutT = std::conditional_t<std::is_void_v<Out>, T0, Out>;
  constexpr int R = max_arg_rank<A...>;
  static_assert(R >= 1, "TESSERA_KERNEL_NEEDS_AN_ARRAY: pass at least one Array or View to a ReductionKernel");
  const std::string& kname = s_->name;
  const std::size_t n_in = s_->in.size();
  if (sizeof...(A) != n_in) {
    throw invalid_argument("tessera: ReductionKernel '" + kname + "' takes " + std::to_string(n_in) + " inputs; found " +
                           std::to_string(sizeof...(A)) + " arguments");
  }
  static constexpr bool is_array[] = {is_array_like<std::remove_cvref_t<A>>::value..., false};
  // The types and the generated kernels of this signature (made once per argument types).
  const auto binding = s_->bound<OutT, A...>([&](const std::vector<std::string>& types,
                                                 const std::map<std::string, std::string>& placeholders) {
    std::string rtype = s_->reduce_type.empty() ? types[n_in] : c_type_of(s_->reduce_type);
    if (rtype.empty() && placeholders.count(s_->reduce_type)) rtype = placeholders.at(s_->reduce_type);
    if (rtype.empty()) {
      throw invalid_argument("tessera: ReductionKernel '" + kname + "': reduce_type '" + s_->reduce_type +
                             "' is not one of float32, float64, int32, int64, bool (or their C names), nor a placeholder "
                             "of the parameters");
    }
    std::vector<GenArg> in;
    for (std::size_t k = 0; k < n_in; ++k) in.push_back({types[k], s_->in[k].name, is_array[k]});
    const std::string code = reduction_source(in, {types[n_in], s_->out[0].name, true}, rtype, R, s_->map, s_->reduce,
                                              s_->post, s_->identity, s_->preamble, kname);
    auto g = std::make_shared<Generated>();
    g->gpu = std::make_shared<KernelState>();
    g->gpu->src = {code, "tessera_reduction", s_->options, kname};
    g->host_code = code;
    g->reduce_type = rtype;
    for (const char* k : {"tessera_reduction_final", "tessera_reduction_post"}) {
      g->more.push_back(std::make_shared<KernelState>());
      g->more.back()->src = {code, k, s_->options, kname};
    }
    return g;
  });
  const std::vector<std::string>& types = binding->types;
  const std::shared_ptr<Generated>& gen = binding->generated;
  const std::string& rtype = gen->reduce_type;
  const std::shared_ptr<KernelState>& fin = gen->more[0];
  const std::shared_ptr<KernelState>& post = gen->more[1];
  // The boxes: the inputs' broadcast shape, split like the first sharded input (one replica of a
  // replicated input).
  const CallGeometry<R> cg = call_geometry<R>(n_in, args...);
  const Shape<R>& shape = cg.shape;
  Geometry<R> g = cg.g;
  std::size_t pos = 0;
  // per_shard values are counted and indexed by the parts before any is dropped (a replicated
  // input folds its first replica, with the first value).
  const int part_count = static_cast<int>(g.boxes.size());
  std::vector<int> part_index(g.boxes.size());
  for (std::size_t s = 0; s < part_index.size(); ++s) part_index[s] = static_cast<int>(s);
  if (g.replicated) g.boxes.resize(1), part_index.resize(1);
  // Empty shards add the identity: they take no part. The post map runs on the first GPU of the
  // reduction even when all of its shards are empty (no host compiler needed on GPUs).
  int post_gpu = -1;
  for (auto& b : g.boxes)
    if (post_gpu < 0 && !b.device.is_host()) post_gpu = b.device.id();
  for (std::size_t s = g.boxes.size(); s-- > 0;) {
    if (volume<R>(g.boxes[s].extent) == 0) {
      g.boxes.erase(g.boxes.begin() + static_cast<std::ptrdiff_t>(s));
      part_index.erase(part_index.begin() + static_cast<std::ptrdiff_t>(s));
    }
  }
  // Plan every shard, then fold each.
  const std::size_t rbytes = c_type_size(rtype);
  std::vector<ArgPack> packs(g.boxes.size());
  std::vector<index_t> counts(g.boxes.size());
  for (std::size_t s = 0; s < g.boxes.size(); ++s) {
    const auto& b = g.boxes[s];
    bool linear = true, aligned = true;
    pos = 0;
    auto pack_one = [&](const auto& x) {
      using V = std::remove_cvref_t<decltype(x)>;
      if constexpr (is_array_like<V>::value) {
        packs[s].add(operand_for<typename V::value_type, V::rank, R>(x.layout(), b.device, shape, b.origin, b.extent,
                                                                     kname, static_cast<int>(pos) + 1, linear, aligned));
      } else {
        pack_scalar(packs[s], scalar_for(x, part_index[s], part_count, kname, pos + 1), types[pos]);
      }
      ++pos;
    };
    (pack_one(args), ...);
    BoxArg<R> box{};
    for (int k = 0; k < R; ++k) box.ext[k] = b.extent[k];
    box.n = counts[s] = volume<R>(b.extent);
    box.path = linear ? 1 : 2;
    packs[s].add(box);
  }
  if (rbytes > rt::result_slot_bytes || sizeof(OutT) > rt::result_slot_bytes) {
    throw invalid_argument("tessera: ReductionKernel '" + kname + "': its reduce and output types take " +
                           std::to_string(rbytes) + " and " + std::to_string(sizeof(OutT)) + " bytes; at most " +
                           std::to_string(rt::result_slot_bytes) + " fit a result slot");
  }
  // Each shard's value goes to its device's result slot (as the built-in full reductions do), so
  // that rt::read_results gathers them in one exchange across processes; this rank computes only
  // the shards of its own devices.
  rt::device_restorer restore;
  std::vector<unsigned char> values(g.boxes.size() * rbytes);
  std::vector<std::shared_ptr<rt::buffer>> results;
  std::vector<int> ids(g.boxes.size());
  for (std::size_t s = 0; s < g.boxes.size(); ++s) {
    const Device d = g.boxes[s].device;
    ids[s] = d.id();
    if (rt::is_remote(d.id())) continue;
    if (d.is_host()) {
      using host_fn = void (*)(void**, void*);
      reinterpret_cast<host_fn>(rtc::host_symbol(gen->host_code, "tessera_reduction_host", kname))(
          packs[s].pointers(), rt::mapped_result(d.id()).host);
      continue;
    }
    const int id = d.id();
    const index_t sms = rt::info(id).sm_count > 0 ? rt::info(id).sm_count : 1;
    index_t blocks = (counts[s] + 255) / 256;
    blocks = blocks < 1 ? 1 : blocks > sms * 4 ? sms * 4 : blocks;
    auto buf = std::make_shared<rt::buffer>(id, static_cast<std::size_t>(blocks) * rbytes, memory::device);
    void* partials = buf->ptr;
    void* result = rt::mapped_result(id).device;
    ArgPack& pk = packs[s];
    pk.add(partials);
    const unsigned g3[3] = {static_cast<unsigned>(blocks), 1, 1}, one[3] = {1, 1, 1}, b3[3] = {256, 1, 1};
    rtc::launch(gen->gpu->function(id), id, static_cast<int>(s), g3, b3, 0, pk.pointers(), kname);
    ArgPack fp;
    fp.add(static_cast<const void*>(partials));
    fp.add(static_cast<long long>(blocks));
    fp.add(result);
    rtc::launch(fin->function(id), id, static_cast<int>(s), one, b3, 0, fp.pointers(), kname);
    results.push_back(std::move(buf));
  }
  // Every GPU is busy before the host waits for the first value.
  if (!ids.empty()) rt::read_results(ids.data(), ids.size(), values.data(), rbytes);
  // Fold the shards' values in shard order and apply the post map.
  OutT y{};
  const long long nv = static_cast<long long>(g.boxes.size());
  if (post_gpu < 0) {
    using post_fn = void (*)(const void*, long long, void*);
    reinterpret_cast<post_fn>(rtc::host_symbol(gen->host_code, "tessera_reduction_host_post", kname))(values.data(), nv, &y);
  } else {
    // On post_gpu's rank (the same device on every rank), then shared like the partials.
    if (!rt::is_remote(post_gpu)) {
      auto buf = std::make_shared<rt::buffer>(post_gpu, values.size() + 16, memory::device);
      void* vals = buf->ptr;
      if (!values.empty()) rt::copy_from_host(post_gpu, vals, values.size(), values.data(), values.size(), values.size(), 1);
      ArgPack pp;
      pp.add(static_cast<const void*>(vals));
      pp.add(nv);
      pp.add(rt::mapped_result(post_gpu).device);
      const unsigned one[3] = {1, 1, 1};
      rtc::launch(post->function(post_gpu), post_gpu, 0, one, one, 0, pp.pointers(), kname);
    }
    rt::read_results(&post_gpu, 1, &y, sizeof(OutT));
  }
  return y;
}

}  // namespace tessera
