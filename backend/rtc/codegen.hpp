// SPDX-License-Identifier: Apache-2.0
// Tessera: the source generators of CuPy-style user kernels (ElementwiseKernel, ReductionKernel)
// and the parser of their parameter lists ("float32 x, T y"). Compiled once into tessera_runtime:
// none of it depends on a program's types, so no program should compile it again. This header
// includes no CUDA header, so dsl/ may include it.
#pragma once
#include <cstddef>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace tessera::detail {

// One parameter as written: its type (float32, double, T...) and name.
struct KParam {
  std::string type;
  std::string name;
};

// One argument of a generated kernel: its C type, name, and whether it is an array.
struct GenArg {
  std::string type, name;
  bool array;
};

// The C type of a CuPy or C type name; "" for a placeholder (a type parameter such as T).
std::string c_type_of(const std::string& t);
// The size of a C type of the kernels' vocabulary (float, double, int, long long, bool).
std::size_t c_type_size(const std::string& t);
// "float32 x, T y" as parameters; throws invalid_argument naming `kernel` and `which` (input or
// output) for an item that is not "<type> <name>" or names an unsupported type.
std::vector<KParam> parse_params(const std::string& list, const std::string& kernel, const char* which);

// Placeholders (type parameters such as T) and the C types they were bound to, in the order bound.
using placeholder_list = std::vector<std::pair<std::string, std::string>>;
// The C type bound to placeholder `name`; "" when it is not one.
std::string placeholder_type(const placeholder_list& bound, const std::string& name);

// The C types of a call: `params` (inputs, then the output) bound to the C types of the arguments
// given (`arg_types`; "" for none), placeholders taking the type of the first argument bound to
// them (`bound` collects them). `kind` names the kernel class in messages. Arrays must have exactly
// the declared type, the output the type the call returns (`returned`).
std::vector<std::string> bind_types(const std::vector<KParam>& in, const KParam& out, const std::string& kernel,
                                    const std::string& kind, const std::vector<std::string>& arg_types,
                                    const std::vector<bool>& is_array, const std::string& returned,
                                    placeholder_list& bound);

// KernelSignature's bindings (dsl/tessera/kernel_signature.hpp) by key, the address of a type list:
// a map behind a mutex, kept here so that no program compiles std::map or std::mutex for them.
class binding_cache {
 public:
  binding_cache();
  ~binding_cache();
  binding_cache(const binding_cache&) = delete;
  binding_cache& operator=(const binding_cache&) = delete;
  // The entry of `key`, or null.
  std::shared_ptr<const void> find(const void* key) const;
  // Stores `value` under `key` unless a racing first call stored one; returns the stored entry.
  std::shared_ptr<const void> emplace(const void* key, std::shared_ptr<const void> value);

 private:
  struct impl;
  std::unique_ptr<impl> impl_;
};

// Declarations every RawKernel sees (prepended to its source): tessera::shard<T, N>, the layout of
// tessera::Shard (dsl/tessera/kernel_task.hpp).
const char* kernel_preamble();

// The source of an elementwise kernel over rank R: tessera_body(inputs..., outputs..., i) holds
// the user's operation; tessera_elementwise (GPU: vector, linear and cartesian paths) and
// tessera_elementwise_host run it per element. Arguments: the inputs (operands or values), the
// outputs (operands), then the box (backend/rtc/run.cpp).
std::string elementwise_source(const std::vector<GenArg>& in, const std::vector<GenArg>& out, int R,
                               const std::string& body, const std::string& user_preamble, const std::string& name);

// The source of a reduction kernel over rank R: tessera_reduction (block partials),
// tessera_reduction_final (one block folds them into the result slot) and tessera_reduction_post
// (the shards' values, folded in order, through the post map), and their host counterparts
// tessera_reduction_host and tessera_reduction_host_post.
std::string reduction_source(const std::vector<GenArg>& in, const GenArg& out, const std::string& reduce_type, int R,
                             const std::string& map_expr, const std::string& reduce_expr, const std::string& post_expr,
                             const std::string& identity, const std::string& user_preamble, const std::string& name);

}  // namespace tessera::detail
