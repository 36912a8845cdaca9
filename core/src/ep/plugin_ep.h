// A plugin EP bound to one session: the read-only graph views it sees (nodes for
// GetCapability, subgraphs for Compile), its kernels and compiled partitions, its device
// memory, and the kernel context through which it reads inputs and allocates outputs.
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

class PluginEp;

// MrtEpNode structs for some nodes, with all the storage they point into.
class EpGraphView {
 public:
  using ConstantFn = std::function<const Tensor*(const std::string&)>;
  // `known` holds inferred value types/shapes; `constant` returns the tensor of a
  // non-overridable initializer (nullptr otherwise). Both must outlive the view.
  EpGraphView(const std::vector<const Node*>& nodes, const std::map<std::string, ValueInfo>& known,
              const ConstantFn& constant, const std::map<std::string, int64_t>& opsets);
  const MrtEpGraph& graph() const { return graph_; }
  const MrtEpNode& node(size_t i) const { return nodes_[i]; }
  // MrtEpValue structs for `names`, stored in the view.
  const MrtEpValue* values(const std::vector<std::string>& names);

 protected:
  MrtEpValue value(const std::string& name);
  const MrtEpTensor* tensor(const Tensor& t);

  const std::map<std::string, ValueInfo>& known_;
  ConstantFn constant_;
  std::vector<MrtEpNode> nodes_;
  MrtEpGraph graph_{};
  std::deque<std::vector<MrtEpValue>> values_;
  std::deque<std::vector<MrtEpAttribute>> attrs_;
  std::deque<std::vector<int64_t>> dims_;
  std::deque<MrtEpTensor> tensors_;
  std::deque<std::vector<const char*>> strings_;
  std::deque<std::string> names_;
};

// A group of nodes as Compile sees it (MrtEpSubgraph), and as ONNX bytes on request.
class EpSubgraphView : public EpGraphView {
 public:
  // `model` is the group as a standalone model (its graph inputs/outputs = the boundary).
  EpSubgraphView(const std::string& name, const std::vector<const Node*>& nodes, const Model& model,
                 const std::map<std::string, ValueInfo>& known, const ConstantFn& constant, int32_t threads);
  ~EpSubgraphView();
  EpSubgraphView(const EpSubgraphView&) = delete;
  EpSubgraphView& operator=(const EpSubgraphView&) = delete;
  const MrtEpSubgraph& subgraph() const { return c_; }
  // The view registered for a pointer a plugin handed back (nullptr when unknown).
  static EpSubgraphView* find(const MrtEpSubgraph* c);
  const std::string& onnx();  // encoded once

 private:
  std::string name_;
  const Model& model_;
  MrtEpSubgraph c_{};
  bool encoded_ = false;
  std::string onnx_;
};

// Device memory of one plugin EP.
struct DeviceBuffer {
  PluginEp* ep = nullptr;
  void* data = nullptr;
  size_t bytes = 0;
  DeviceBuffer() = default;
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  ~DeviceBuffer();
};

struct DeviceTensor {
  DType dtype = DType::kUndefined;
  Shape shape;
  std::shared_ptr<DeviceBuffer> buffer;
  bool valid() const { return dtype != DType::kUndefined; }
  size_t nbytes() const { return static_cast<size_t>(shape_size(shape)) * dtype_size(dtype); }
};

class PluginEp {
 public:
  explicit PluginEp(EpChoice choice);  // creates the EP through its factory
  ~PluginEp();
  PluginEp(const PluginEp&) = delete;
  PluginEp& operator=(const PluginEp&) = delete;

  const std::string& name() const { return name_; }
  const std::string& library_path() const { return choice_.library->path; }
  uint32_t abi_version() const { return abi_; }
  // Group id per node of `view` (-1: not taken). A 1.0 EP (GetCapability) puts each claimed
  // node in a group of its own.
  std::vector<int32_t> claim(const EpGraphView& view);
  bool compiles() const { return fns_.Compile != nullptr; }
  bool has_device_memory() const { return fns_.DeviceAllocate != nullptr; }
  // nullptr plus `why` when the EP could not prepare the node (it then falls back to the CPU EP).
  void* create_kernel(const MrtEpNode& node, std::string& why);
  // nullptr plus `why` when Compile failed (the group then falls back).
  void* compile(EpSubgraphView& view, std::string& why);
  void release_kernel(void* kernel);
  // Host memory: inputs and outputs through the OpContext.
  void compute(void* kernel, const std::string& what, OpContext& ctx, int32_t threads);
  // Device memory: inputs are device tensors of this EP; outputs are allocated on the device.
  void compute_on_device(void* kernel, const std::string& what, const std::vector<const DeviceTensor*>& inputs,
                         std::vector<DeviceTensor>& outputs, int32_t threads);
  DeviceTensor to_device(const Tensor& host);
  Tensor to_host(const DeviceTensor& dev, Allocator* alloc);
  DeviceTensor allocate(DType dtype, Shape shape);
  void device_free(void* data);
  void synchronize();

 private:
  std::string who() const;  // "execution provider 'X' (path)"
  EpChoice choice_;
  MrtEp* ep_ = nullptr;
  MrtEp fns_{};  // the EP's function table, fields beyond its ABI version left NULL
  uint32_t abi_ = 0;
  std::string name_;
};

// A plugin kernel of one node, or a compiled partition, released with the session's steps.
struct PluginKernel {
  PluginEp* ep = nullptr;
  void* handle = nullptr;
  ~PluginKernel() {
    if (ep && handle) ep->release_kernel(handle);
  }
};

}  // namespace mrt
