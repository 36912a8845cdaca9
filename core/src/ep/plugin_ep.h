// A plugin EP bound to one session: the read-only graph view it sees, its kernels, and
// the kernel context through which it reads inputs and allocates outputs.
#pragma once
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "ep/registry.h"
#include "graph.h"
#include "kernel.h"

namespace mrt {

// MrtEpNode structs for some nodes, with all the storage they point into.
class EpGraphView {
 public:
  // `known` holds inferred value types/shapes; `constant` returns the tensor of a
  // non-overridable initializer (nullptr otherwise).
  EpGraphView(const std::vector<const Node*>& nodes, const std::map<std::string, ValueInfo>& known,
              const std::function<const Tensor*(const std::string&)>& constant, const std::map<std::string, int64_t>& opsets);
  const MrtEpGraph& graph() const { return graph_; }
  const MrtEpNode& node(size_t i) const { return nodes_[i]; }

 private:
  MrtEpValue value(const std::string& name, const std::map<std::string, ValueInfo>& known,
                   const std::function<const Tensor*(const std::string&)>& constant);
  const MrtEpTensor* tensor(const Tensor& t);

  std::vector<MrtEpNode> nodes_;
  MrtEpGraph graph_{};
  std::deque<std::vector<MrtEpValue>> values_;
  std::deque<std::vector<MrtEpAttribute>> attrs_;
  std::deque<std::vector<int64_t>> dims_;
  std::deque<MrtEpTensor> tensors_;
  std::deque<std::vector<const char*>> strings_;
};

class PluginEp {
 public:
  explicit PluginEp(EpChoice choice);  // creates the EP through its factory
  ~PluginEp();
  PluginEp(const PluginEp&) = delete;
  PluginEp& operator=(const PluginEp&) = delete;

  const std::string& name() const { return name_; }
  const std::string& library_path() const { return choice_.library->path; }
  // Flags for the nodes of `view` this EP takes.
  std::vector<uint8_t> capability(const EpGraphView& view);
  // nullptr plus `why` when the EP could not prepare the node (it then falls back to the CPU EP).
  void* create_kernel(const MrtEpNode& node, std::string& why);
  void release_kernel(void* kernel);
  void compute(void* kernel, const Node& node, OpContext& ctx, int32_t threads);

 private:
  EpChoice choice_;
  MrtEp* ep_ = nullptr;
  std::string name_;
};

// A plugin kernel of one node, released with the session's steps.
struct PluginKernel {
  PluginEp* ep = nullptr;
  void* handle = nullptr;
  ~PluginKernel() {
    if (ep && handle) ep->release_kernel(handle);
  }
};

}  // namespace mrt
