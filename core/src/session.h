// A loaded model ready to run: validated graph in execution order, kernels resolved,
// value lifetimes computed, constant tensors and per-node caches kept for the session's life.
#pragma once
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "graph.h"
#include "kernel.h"
#include "tensor.h"
#include "threadpool.h"

namespace mrt {

struct SessionOptions {
  int intra_op_num_threads = 0;  // 0 = one per hardware thread
  std::map<std::string, std::string> config;
};

class Session {
 public:
  static std::unique_ptr<Session> from_path(const std::string& path, const SessionOptions& options);
  static std::unique_ptr<Session> from_bytes(const uint8_t* data, size_t size, const SessionOptions& options);

  const std::vector<ValueInfo>& inputs() const { return inputs_; }    // feedable inputs (no initializers)
  const std::vector<ValueInfo>& outputs() const { return outputs_; }
  const Model& model() const { return model_; }

  // Runs the graph. output_names empty = all graph outputs in order.
  std::vector<Tensor> run(const std::vector<std::string>& input_names, const std::vector<Tensor>& input_values,
                          const std::vector<std::string>& output_names);

 private:
  Session(Model model, const SessionOptions& options);
  void build();
  int value_id(const std::string& name) const;

  struct Step {
    const Node* node;
    const KernelDef* kernel;
    int64_t opset;
    std::vector<int> inputs;   // value ids, -1 = omitted
    std::vector<int> outputs;  // value ids, -1 = omitted
    std::vector<int> release;  // values whose last use is this step
    std::vector<bool> constant;
    std::unique_ptr<OpContext::Cache> cache;
  };

  Model model_;
  SessionOptions options_;
  std::vector<ValueInfo> inputs_, outputs_;
  std::map<std::string, int> ids_;
  std::vector<std::string> names_;
  std::vector<Tensor> constants_;            // by value id; invalid when not constant
  std::vector<int> input_ids_, output_ids_;  // graph inputs (feedable) and outputs
  std::vector<int> overridable_;             // initializers that are also graph inputs
  std::vector<Step> steps_;
  std::unique_ptr<ThreadPool> pool_;
  std::shared_ptr<Allocator> alloc_;
};

}  // namespace mrt
