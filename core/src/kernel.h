// The CPU EP's kernel interface. A kernel is a stateless function run once per node
// execution; it reads inputs and attributes from an OpContext and allocates outputs
// through it. Kernels register per (domain, op_type) with the opset range they cover and
// handle older attribute forms themselves by looking at ctx.opset().
#pragma once
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "graph.h"
#include "tensor.h"
#include "threadpool.h"

namespace mrt {

class OpContext {
 public:
  const Node& node() const { return *node_; }
  int64_t opset() const { return opset_; }  // opset version of the node's domain

  size_t input_count() const { return inputs_.size(); }
  // True when input i exists and was not omitted ("" name).
  bool has_input(size_t i) const { return i < inputs_.size() && inputs_[i] != nullptr; }
  // Throws INVALID_MODEL naming the node when the input is missing.
  const Tensor& input(size_t i) const;
  const Tensor* optional_input(size_t i) const { return has_input(i) ? inputs_[i] : nullptr; }
  // True when input i is an initializer/constant: its value never changes between runs.
  bool input_is_constant(size_t i) const { return constant_ && i < constant_->size() && (*constant_)[i]; }

  size_t output_count() const { return outputs_->size(); }
  bool has_output(size_t i) const { return i < output_names_->size() && !(*output_names_)[i].empty(); }
  // Allocate output i (uninitialized memory from the session's pool).
  Tensor& output(size_t i, DType dtype, Shape shape);
  // Set output i to an existing tensor (e.g. a view sharing an input's buffer).
  void set_output(size_t i, Tensor t);
  // Output `out` in input `in`'s memory, for a kernel that reads each element of that input before it writes
  // the same element of the output, and no other element after: where the input's value dies at this node, was
  // made by an earlier node (not a feed, not a constant), no other input of the node names it, nothing else
  // holds its memory (no view of it, no Concat slice) and the session has set no buffer for the output. The
  // output takes the input's type and shape. nullptr where that does not hold: call output() then.
  Tensor* output_in_input(size_t out, size_t in);

  ThreadPool& threads() const { return *pool_; }
  Allocator* allocator() const { return alloc_; }

  // Per-node cache that lives as long as the session (e.g. pre-packed weights).
  // `make` runs once, under a lock; later calls return the same object. Only use it for
  // data derived from constant inputs (see input_is_constant).
  template <class T>
  std::shared_ptr<T> node_cache(const std::function<std::shared_ptr<T>()>& make) const {
    std::lock_guard<std::mutex> lock(cache_->mutex);
    if (!cache_->value) cache_->value = make();
    return std::static_pointer_cast<T>(cache_->value);
  }

  struct Cache {
    std::mutex mutex;
    std::shared_ptr<void> value;
  };

  // Wiring, done by the session executor.
  const Node* node_ = nullptr;
  int64_t opset_ = 0;
  std::vector<const Tensor*> inputs_;
  const std::vector<bool>* constant_ = nullptr;
  const std::vector<bool>* donatable_ = nullptr;  // per input (see output_in_input); null: none
  std::vector<Tensor>* outputs_ = nullptr;
  const std::vector<std::string>* output_names_ = nullptr;
  ThreadPool* pool_ = nullptr;
  Allocator* alloc_ = nullptr;
  Cache* cache_ = nullptr;
};

using KernelFn = void (*)(OpContext& ctx);
// Optional check at session creation: throw NOT_IMPLEMENTED/INVALID_MODEL for attribute
// values the kernel cannot handle, so the error comes before the first run.
using KernelCheckFn = void (*)(const Node& node, int64_t opset);

struct KernelDef {
  std::string domain;  // "" = ai.onnx
  std::string op_type;
  int64_t since_version = 1;   // first opset this kernel implements
  int64_t until_version = 1 << 30;  // last opset (inclusive)
  KernelFn fn = nullptr;
  KernelCheckFn check = nullptr;
};

class KernelRegistry {
 public:
  // Register op_type for ai.onnx opsets [since, until].
  void add(const char* op_type, int64_t since, KernelFn fn, KernelCheckFn check = nullptr,
           int64_t until = 1 << 30);
  void add_domain(const char* domain, const char* op_type, int64_t since, KernelFn fn,
                  KernelCheckFn check = nullptr, int64_t until = 1 << 30);
  // nullptr when no kernel covers (domain, op_type, opset).
  const KernelDef* find(const std::string& domain, const std::string& op_type, int64_t opset) const;
  bool knows_op(const std::string& domain, const std::string& op_type) const;
  std::vector<std::string> op_names() const;  // "domain::op" sorted, for diagnostics

  static const KernelRegistry& cpu();  // the CPU EP's registry, built once

 private:
  std::unordered_map<std::string, std::vector<KernelDef>> defs_;
};

// Kernel groups; each lives in src/kernels/<group>.cc.
void register_elementwise_kernels(KernelRegistry& r);  // unary/binary math, compare, logic, Cast, Where, variadic
void register_reduce_kernels(KernelRegistry& r);       // Reduce*, ArgMax/ArgMin, CumSum, ...
void register_shape_kernels(KernelRegistry& r);        // Reshape, Transpose, Concat, Slice, Gather, ...
void register_linalg_kernels(KernelRegistry& r);       // MatMul, Gemm, Einsum
void register_nn_kernels(KernelRegistry& r);           // Conv, ConvTranspose, pooling
void register_norm_kernels(KernelRegistry& r);         // BatchNorm, LRN, LayerNorm, Softmax, ...
void register_quant_kernels(KernelRegistry& r);        // Quantize/Dequantize, *Integer, QLinear*

}  // namespace mrt
