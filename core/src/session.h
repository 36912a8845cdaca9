// A loaded model ready to run: validated graph in execution order, kernels resolved,
// value lifetimes computed, constant tensors and per-node caches kept for the session's life.
#pragma once
#include <atomic>
#include <chrono>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "ep/plugin_ep.h"
#include "ep/registry.h"
#include "graph.h"
#include "resource_limits.h"
#include "kernel.h"
#include "tensor.h"
#include "threadpool.h"

namespace mrt {

struct SessionOptions {
  int intra_op_num_threads = 0;  // 0 = one per hardware thread
  std::map<std::string, std::string> config;
  ProviderSelection providers;  // which EPs (explicit list, policy or delegate); default: CPU EP only
  // Replace the model's initializers of these names before optimization (add_initializer).
  std::vector<std::pair<std::string, Tensor>> initializers;
};

// Per-call controls of Session::run.
struct RunControl {
  const std::atomic<bool>* terminate = nullptr;  // set from any thread: the run stops before its next node
  // Per requested output: a valid tensor is the caller's buffer that output is written into
  // (when the result has its type and shape; otherwise the result is returned as usual).
  const std::vector<Tensor>* bound_outputs = nullptr;
};

// Which EP runs a node, and why it fell back to the CPU EP when it did.
struct NodeAssignment {
  std::string node_name, op_type, ep, note;
};

class Session {
 public:
  static std::unique_ptr<Session> from_path(const std::string& path, const SessionOptions& options);
  static std::unique_ptr<Session> from_bytes(const uint8_t* data, size_t size, const SessionOptions& options);

  const std::vector<ValueInfo>& inputs() const { return inputs_; }    // feedable inputs (no initializers)
  const std::vector<ValueInfo>& outputs() const { return outputs_; }
  const Model& model() const { return model_; }
  const std::vector<std::string>& providers() const { return provider_names_; }  // claim order, CPU EP last
  const std::vector<NodeAssignment>& assignments() const { return assignments_; }  // execution order
  // Initializers that are also graph inputs: a feed may override them.
  const std::vector<ValueInfo>& overridable_initializers() const { return overridable_info_; }

  // Profiling: while on, every run records one Chrome-trace event per executed node.
  void start_profiling();
  // Stops profiling and returns the events recorded since it started (JSON objects, comma-joined).
  std::string end_profiling();

  // A subgraph (If branch, Loop/Scan body) compiled on its own: its inputs are the
  // graph's formal inputs followed by `outer` (values of enclosing graphs it reads).
  static std::shared_ptr<Session> for_subgraph(const Graph& g, const std::vector<std::string>& outer,
                                               const Model& parent, const SessionOptions& options);

  // Runs the graph. output_names empty = all graph outputs in order.
  std::vector<Tensor> run(const std::vector<std::string>& input_names, const std::vector<Tensor>& input_values,
                          const std::vector<std::string>& output_names, const RunControl& control = {});

 private:
  Session(Model model, const SessionOptions& options);
  void build();
  int value_id(const std::string& name) const;

  // Chooses EPs, lets each claim nodes in turn and prepares their kernels; the CPU EP
  // takes the rest. Returns the CPU kernel (or nullptr with `plugin` set) per node of `order`.
  void partition(const std::vector<size_t>& order, const std::map<std::string, ValueInfo>& known,
                 std::vector<const KernelDef*>& cpu, std::vector<std::unique_ptr<PluginKernel>>& plugin);
  const KernelDef* cpu_kernel(const Node& n, bool required) const;

  struct Step {
    const Node* node;
    const KernelDef* kernel;                // CPU EP kernel, or nullptr when `plugin` runs the node
    std::unique_ptr<PluginKernel> plugin;
    int64_t opset;
    std::vector<int> inputs;   // value ids, -1 = omitted
    std::vector<int> outputs;  // value ids, -1 = omitted
    std::vector<int> release;  // values whose last use is this step
    std::vector<bool> constant;
    std::unique_ptr<OpContext::Cache> cache;
  };

  Model model_;
  SessionOptions options_;
  Limits limits_;  // from options_.config and the environment (resource_limits.h)
  std::vector<ValueInfo> inputs_, outputs_;
  std::map<std::string, int> ids_;
  std::vector<std::string> names_;
  std::vector<Tensor> constants_;            // by value id; invalid when not constant
  std::vector<int> input_ids_, output_ids_;  // graph inputs (feedable) and outputs
  std::vector<int> overridable_;             // initializers that are also graph inputs
  std::vector<ValueInfo> overridable_info_;
  std::vector<std::unique_ptr<PluginEp>> eps_;  // before steps_: kernels are released first
  std::vector<std::string> provider_names_;
  std::vector<NodeAssignment> assignments_;
  std::vector<Step> steps_;
  std::unique_ptr<ThreadPool> pool_;
  std::shared_ptr<Allocator> alloc_;
  std::atomic<bool> profiling_{false};
  std::mutex profile_mutex_;
  std::string profile_events_;
  std::chrono::steady_clock::time_point created_ = std::chrono::steady_clock::now();
};

}  // namespace mrt
