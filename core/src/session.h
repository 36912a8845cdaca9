// A loaded model ready to run: validated graph in execution order, kernels resolved,
// value lifetimes computed, constant tensors and per-node caches kept for the session's life.
#pragma once
#include <atomic>
#include <chrono>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "ep/plugin_ep.h"
#include "ep/registry.h"
#include "graph.h"
#include "kernel.h"
#include "resource_limits.h"
#include "run_arena.h"
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

// Which EP runs a node, and why it fell back to the CPU EP when it did. `partition` names the
// group of nodes the EP runs as one (compiled) unit ("" for the CPU EP); `copies` lists the
// transfers between host and device memory at the start of the node's partition (and for graph
// outputs it produces), "" when there are none.
struct NodeAssignment {
  std::string node_name, op_type, ep, note, partition, copies;
};

// Copies between host and device memory since the session was created.
struct TransferCounts {
  uint64_t to_device = 0;        // host -> device copies of per-run values
  uint64_t to_host = 0;          // device -> host copies
  uint64_t device_resident = 0;  // device inputs read in place (produced by the same EP, no copy)
  uint64_t constants_uploaded = 0;  // initializers copied to a device once for the session
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
  TransferCounts transfer_counts() const;
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
  bool fixed_constant(int id) const;  // a constant no graph input overrides

  // Chooses EPs, lets each claim nodes in turn and prepares their kernels; the CPU EP
  // takes the rest. Returns the CPU kernel (or nullptr with `plugin` set) per node of `order`.
  // One step of the plan: a node (CPU EP or a plugin's per-node kernel) or a compiled partition.
  struct Unit {
    const Node* node = nullptr;  // the model's node, or a fused node standing for the partition
    const KernelDef* cpu = nullptr;
    std::unique_ptr<PluginKernel> plugin;
    std::vector<size_t> members;  // positions in `order`
    std::string partition;
    std::string note;  // CPU EP nodes: why no plugin EP runs the node
    std::vector<ValueInfo> expect;  // compiled partitions: the outputs' known types/shapes
  };
  std::vector<Unit> partition(const std::vector<size_t>& order, const std::map<std::string, ValueInfo>& known,
                              const std::vector<std::vector<std::string>>& outer);
  const KernelDef* cpu_kernel(const Node& n, bool required) const;
  void plan_transfers();
  struct ConcatPlan;
  // static_shapes over the optimized graph (order_), seeded with `feeds` when given
  std::map<std::string, Shape> value_shapes(const std::map<std::string, Shape>* feeds) const;
  void find_concat_candidates(const std::map<std::string, ValueInfo>& known);
  std::shared_ptr<const ConcatPlan> plan_concat_placement(const std::map<std::string, Shape>& shapes) const;
  std::shared_ptr<const ConcatPlan> concat_plan_for(const std::vector<std::string>& input_names,
                                                    const std::vector<Tensor>& input_values);
  struct Step;
  void check_partition_output(const Step& s, size_t i, DType dtype, const Shape& shape) const;
  const DeviceTensor* device_constant(PluginEp* ep, int id);

  struct Step {
    const Node* node;
    const KernelDef* kernel;                // CPU EP kernel, or nullptr when `plugin` runs the node
    std::unique_ptr<PluginKernel> plugin;
    PluginEp* device = nullptr;             // the plugin EP when it keeps values in device memory
    size_t first_assignment = 0;            // index of its first node in assignments_
    std::vector<ValueInfo> expect;
    int64_t opset;
    std::vector<int> inputs;   // value ids, -1 = omitted
    std::vector<int> outputs;  // value ids, -1 = omitted
    std::vector<int> release;  // values whose last use is this step
    std::vector<bool> constant;
    // Inputs whose memory the kernel may take for an output (OpContext::output_in_input): values made by an
    // earlier CPU EP step that die here and that no other input of this step names.
    std::vector<bool> donatable;
    bool tensors_only = true;  // the kernel takes tensors only (no sequence or optional values)
    std::unique_ptr<OpContext::Cache> cache;
    bool on_cpu_ep() const { return kernel && !plugin && !device; }  // a CPU EP kernel on host memory
  };

  Model model_;
  SessionOptions options_;
  Limits limits_;  // from options_.config and the environment (resource_limits.h)
  std::vector<ValueInfo> inputs_, outputs_;
  std::map<std::string, int> ids_;
  std::vector<std::string> names_;
  // Concat outputs assembled in place (plan_concat_placement), for the value shapes of one set of feed shapes:
  // the buffer is made when the first producer of a placed input runs. A Concat whose output is itself placed
  // in a later Concat's output (DenseNet's chain, each layer's Concat the first input of the next) is
  // assembled inside that one's buffer: `parent` (-1: none) at parent_offset.
  struct ConcatPlacement {
    size_t step;  // the Concat's step
    DType dtype;
    Shape shape;
    int parent = -1;
    size_t parent_offset = 0;
  };
  // An output written straight into its slice of a later Concat's output.
  struct Placed {
    size_t output;     // index among the step's outputs
    size_t placement;  // index in ConcatPlan::placements
    size_t byte_offset;
    Shape shape;
  };
  struct ConcatPlan {
    std::vector<ConcatPlacement> placements;
    std::vector<std::vector<Placed>> placed;  // by step
    std::vector<int> assembles;               // by step: the placement a Concat assembles, or -1
  };
  // The CPU EP Concats that may be assembled in place (step, output type), the plan for the static shapes, and
  // when some candidate's shapes depend on symbolic input dimensions, plans made per set of feed shapes.
  std::vector<std::pair<size_t, DType>> concat_candidates_;
  std::vector<size_t> order_;  // the graph's nodes in execution order (for static_shapes)
  std::shared_ptr<const ConcatPlan> static_concat_plan_;
  bool concat_plans_per_shape_ = false;
  static constexpr size_t kConcatPlansKept = 16;  // sets of feed shapes planned at most before starting over
  std::mutex concat_plans_mutex_;
  std::map<std::vector<Shape>, std::shared_ptr<const ConcatPlan>> concat_plans_;
  std::vector<Tensor> constants_;            // by value id; invalid when not constant
  std::vector<int> input_ids_, output_ids_;  // graph inputs (feedable) and outputs
  std::vector<int> overridable_;             // initializers that are also graph inputs
  std::vector<ValueInfo> overridable_info_;
  std::vector<EpChoice> choices_;               // chosen before optimization, consumed by partition()
  std::vector<std::unique_ptr<PluginEp>> eps_;  // before steps_: kernels are released first
  std::vector<std::string> provider_names_;
  std::vector<NodeAssignment> assignments_;
  std::deque<Node> fused_nodes_;         // one per compiled partition, stepped like a node
  std::mutex device_constants_mutex_;
  std::map<std::pair<PluginEp*, int>, DeviceTensor> device_constants_;  // released before eps_
  std::atomic<uint64_t> to_device_{0}, to_host_{0}, device_resident_{0}, constants_uploaded_{0};
  std::vector<Step> steps_;
  std::unique_ptr<ThreadPool> pool_;
  std::shared_ptr<Allocator> alloc_;
  std::shared_ptr<RunArena> arena_;  // runs allocate from it (one at a time; others from alloc_)
  std::atomic<bool> profiling_{false};
  std::mutex profile_mutex_;
  std::string profile_events_;
  std::chrono::steady_clock::time_point created_ = std::chrono::steady_clock::now();
};

}  // namespace mrt
