// SPDX-License-Identifier: Apache-2.0
// Tessera: what CuPy-style user kernels (ElementwiseKernel, ReductionKernel) share on the DSL side:
// the binding of a call's argument types to the parameter lists, once per signature
// (KernelSignature), and the expression that stands for a call's inputs, so that the one planner
// (plan_shard) plans them like any expression. The source generators and the parameter parser are
// compiled into tessera_runtime (backend/rtc/codegen.hpp).
#pragma once
#include <tessera/assign.hpp>
#include <tessera/raw_kernel.hpp>

#include <backend/rtc/codegen.hpp>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace tessera::detail {

template <class T>
std::string c_type() {
  if constexpr (std::is_same_v<T, float>) return "float";
  else if constexpr (std::is_same_v<T, double>) return "double";
  else if constexpr (std::is_same_v<T, std::int32_t>) return "int";
  else if constexpr (std::is_same_v<T, std::int64_t> || std::is_same_v<T, long long>) return "long long";
  else if constexpr (std::is_same_v<T, bool>) return "bool";
  else return "";
}

// Per-shard description of one operand as the generated kernels read it: a pointer and strides
// over the shard's box (stride 0 on broadcast dims), and the box.
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

// Adds a scalar argument as the C type the kernel declares for it.
template <class V>
void pack_scalar(ArgPack& pack, V v, const std::string& type) {
  if (type == "float") pack.add(static_cast<float>(v));
  else if (type == "double") pack.add(static_cast<double>(v));
  else if (type == "int") pack.add(static_cast<std::int32_t>(v));
  else if (type == "long long") pack.add(static_cast<std::int64_t>(v));
  else pack.add(static_cast<bool>(v));
}

// The functor of the expression that stands for a user kernel's inputs: the planner walks it like
// any expression; nothing evaluates it.
struct kernel_inputs {
  template <class... X>
  TS_HD int operator()(const X&...) const {
    return 0;
  }
};

// An argument as a leaf of that expression: arrays as themselves, scalars as scalars (per_shard
// values are substituted shard by shard when the task is packed).
template <class X>
auto kernel_leaf(const X& x) {
  using V = std::remove_cvref_t<X>;
  if constexpr (is_array_like<V>::value) return x.leaf();
  else if constexpr (is_per_shard<V>::value) return Scalar<typename decltype(V::values)::value_type>{{}};
  else return Scalar<V>{x};
}
template <class... In>
auto kernel_node(const In&... in) {
  return Broadcasted<kernel_inputs, decltype(kernel_leaf(in))...>{{}, {kernel_leaf(in)...}};
}

// The argument positions (1-based) of the array inputs, for placement errors.
template <class... In>
std::vector<int> array_positions() {
  std::vector<int> out;
  int k = 0;
  ((++k, is_array_like<std::remove_cvref_t<In>>::value ? out.push_back(k) : void()), ...);
  return out;
}

inline std::string kernel_text(const void* name) { return "kernel '" + *static_cast<const std::string*>(name) + "'"; }

// Packs input k of shard s: the operand from the plan's leaf evaluator, or the scalar's value.
template <int R, class Eval, class X>
void pack_input(ArgPack& pack, const Eval& e, const X& x, const std::string& type, int s, int count,
                const std::string& kernel, std::size_t position) {
  using V = std::remove_cvref_t<X>;
  if constexpr (is_array_like<V>::value) {
    OperandArg<R> a{};
    a.p = const_cast<void*>(static_cast<const void*>(e.p));
    for (int k = 0; k < R; ++k) a.st[k] = e.st[k];
    pack.add(a);
  } else if constexpr (is_per_shard<V>::value) {
    pack_scalar(pack, per_shard_value(x, s, count, kernel, position), type);
  } else {
    pack_scalar(pack, x, type);
  }
}

// A key per list of argument types: the address of a variable template instance.
template <class... A>
inline const char type_list_key = 0;

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

  // Per (output type, argument types) of a call, which fix everything above: the types and the
  // generated program are made once (one NVRTC run per architecture), so that a repeated call
  // builds no string. An entry is stored complete (a failed binding stores nothing, throws again).
  struct Bound {
    std::vector<std::string> types;
    placeholder_list placeholders;
    std::shared_ptr<rtc::program> program;
    std::size_t value_bytes = 0;  // reductions: the size of the folded type
  };
  binding_cache cache;  // of const Bound

  template <class OutT, class... A, class Make>
  std::shared_ptr<const Bound> bound(Make&& make) {
    const void* key = &type_list_key<OutT, A...>;
    if (auto hit = cache.find(key)) return std::static_pointer_cast<const Bound>(hit);
    auto b = std::make_shared<Bound>();
    b->types = bind_types(in, out[0], name, kind, {type_of_arg<A>()...}, {is_array_like<std::remove_cvref_t<A>>::value...},
                          c_type<OutT>(), b->placeholders);
    make(*b);
    // A racing first call keeps the first entry.
    return std::static_pointer_cast<const Bound>(cache.emplace(key, std::move(b)));
  }
};

}  // namespace tessera::detail
