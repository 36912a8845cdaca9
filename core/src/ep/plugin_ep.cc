#include "ep/plugin_ep.h"

#include <cstddef>
#include <cstring>
#include <mutex>
#include <set>

#include "error.h"

// The context of one Compute call: host tensors through an OpContext, or (EPs with device
// memory) device tensors of that EP.
struct MrtEpKernelContext {
  mrt::OpContext* ctx = nullptr;
  int32_t threads = 1;
  mrt::PluginEp* device = nullptr;
  const std::vector<const mrt::DeviceTensor*>* device_inputs = nullptr;
  std::vector<mrt::DeviceTensor>* device_outputs = nullptr;
};

namespace mrt {

namespace {

void fill_tensor(const Tensor& t, MrtEpTensor* out) {
  out->elem_type = static_cast<int32_t>(t.dtype());
  out->rank = t.rank();
  out->dims = t.shape().data();
  out->data = const_cast<void*>(t.raw());
  out->data_bytes = t.nbytes();
}

void fill_device_tensor(const DeviceTensor& t, MrtEpTensor* out) {
  out->elem_type = static_cast<int32_t>(t.dtype);
  out->rank = t.shape.size();
  out->dims = t.shape.data();
  out->data = t.buffer ? t.buffer->data : nullptr;
  out->data_bytes = t.nbytes();
}

MrtStatus* to_status(const std::function<void()>& body) {
  try {
    body();
    return nullptr;
  } catch (const Error& e) {
    return MrtCreateStatus(e.code(), e.what());
  } catch (const std::bad_alloc&) {
    return MrtCreateStatus(MRT_OUT_OF_MEMORY, "out of memory");
  } catch (const std::exception& e) {
    return MrtCreateStatus(MRT_INTERNAL, e.what());
  }
}

size_t ctx_input_count(const MrtEpKernelContext* c) {
  if (!c) return 0;
  return c->device ? c->device_inputs->size() : c->ctx->input_count();
}
size_t ctx_output_count(const MrtEpKernelContext* c) {
  if (!c) return 0;
  return c->device ? c->device_outputs->size() : c->ctx->output_count();
}
int ctx_get_input(const MrtEpKernelContext* c, size_t i, MrtEpTensor* out) {
  if (!c || !out) return 0;
  if (c->device) {
    if (i >= c->device_inputs->size() || !(*c->device_inputs)[i]) return 0;
    fill_device_tensor(*(*c->device_inputs)[i], out);
    return 1;
  }
  if (!c->ctx->has_input(i)) return 0;
  fill_tensor(c->ctx->input(i), out);
  return 1;
}
MrtStatus* ctx_allocate_output(MrtEpKernelContext* c, size_t i, int32_t elem_type, const int64_t* dims, size_t rank,
                               MrtEpTensor* out) {
  return to_status([&] {
    if (!c || !out) fail(MRT_INVALID_ARGUMENT, "AllocateOutput: NULL context or out");
    size_t n = ctx_output_count(c);
    if (i >= n) fail(MRT_INVALID_ARGUMENT, "AllocateOutput: output index ", i, " out of range (", n, ")");
    if (!dtype_is_known(elem_type) || !dtype_is_plain(static_cast<DType>(elem_type)))
      fail(MRT_INVALID_ARGUMENT, "AllocateOutput: unsupported element type ", elem_type);
    if (rank && !dims) fail(MRT_INVALID_ARGUMENT, "AllocateOutput: dims is NULL");
    for (size_t d = 0; d < rank; ++d)
      if (dims[d] < 0) fail(MRT_INVALID_ARGUMENT, "AllocateOutput: negative dimension ", dims[d]);
    if (c->device) {
      DeviceTensor& slot = (*c->device_outputs)[i];
      slot = c->device->allocate(static_cast<DType>(elem_type), Shape(dims, dims + rank));
      fill_device_tensor(slot, out);
      return;
    }
    Tensor& t = c->ctx->output(i, static_cast<DType>(elem_type), Shape(dims, dims + rank));
    fill_tensor(t, out);
  });
}
int32_t ctx_threads(const MrtEpKernelContext* c) { return c ? c->threads : 1; }

MrtStatus* subgraph_to_onnx(const MrtEpSubgraph* subgraph, const void** bytes, size_t* size) {
  return to_status([&] {
    if (!bytes || !size) fail(MRT_INVALID_ARGUMENT, "SubgraphToOnnx: NULL bytes or size");
    EpSubgraphView* view = EpSubgraphView::find(subgraph);
    if (!view) fail(MRT_INVALID_ARGUMENT, "SubgraphToOnnx: not a subgraph the core handed to Compile (or Compile returned)");
    const std::string& b = view->onnx();
    *bytes = b.data();
    *size = b.size();
  });
}

std::mutex& views_mutex() {
  static std::mutex m;
  return m;
}
std::map<const MrtEpSubgraph*, EpSubgraphView*>& live_views() {
  static auto* m = new std::map<const MrtEpSubgraph*, EpSubgraphView*>();
  return *m;
}

std::string abi_str(uint32_t v) { return std::to_string(v >> 16) + "." + std::to_string(v & 0xFFFF); }

}  // namespace

const MrtEpApi& ep_host_api() {
  static const MrtEpApi api = {
      MRT_EP_ABI_VERSION, MrtCreateStatus, ctx_input_count, ctx_output_count, ctx_get_input, ctx_allocate_output,
      ctx_threads,        subgraph_to_onnx,
  };
  return api;
}

EpGraphView::EpGraphView(const std::vector<const Node*>& nodes, const std::map<std::string, ValueInfo>& known,
                         const ConstantFn& constant, const std::map<std::string, int64_t>& opsets)
    : known_(known), constant_(constant) {
  for (const Node* n : nodes) {
    MrtEpNode v{};
    v.name = n->name.c_str();
    v.op_type = n->op_type.c_str();
    v.domain = n->domain.c_str();
    auto op = opsets.find(n->domain);
    v.opset = op == opsets.end() ? 0 : op->second;
    auto& ins = values_.emplace_back();
    for (const auto& name : n->inputs) ins.push_back(value(name));
    auto& outs = values_.emplace_back();
    for (const auto& name : n->outputs) outs.push_back(value(name));
    auto& attrs = attrs_.emplace_back();
    for (const auto& a : n->attributes) {
      MrtEpAttribute x{};
      x.name = a.name.c_str();
      x.type = static_cast<int32_t>(a.type);
      x.f = a.f;
      x.i = a.i;
      x.s = a.s.c_str();
      x.s_len = a.s.size();
      switch (a.type) {
        case AttrType::kFloats: x.count = a.floats.size(); x.floats = a.floats.data(); break;
        case AttrType::kInts: x.count = a.ints.size(); x.ints = a.ints.data(); break;
        case AttrType::kStrings: {
          auto& ptrs = strings_.emplace_back();
          for (const auto& s : a.strings) ptrs.push_back(s.c_str());
          x.count = ptrs.size();
          x.strings = ptrs.data();
          break;
        }
        case AttrType::kTensor: x.t = a.t ? tensor(*a.t) : nullptr; break;
        default: break;
      }
      attrs.push_back(x);
    }
    v.input_count = ins.size();
    v.inputs = ins.data();
    v.output_count = outs.size();
    v.outputs = outs.data();
    v.attribute_count = attrs.size();
    v.attributes = attrs.data();
    nodes_.push_back(v);
  }
  graph_.node_count = nodes_.size();
  graph_.nodes = nodes_.data();
}

const MrtEpValue* EpGraphView::values(const std::vector<std::string>& names) {
  auto& out = values_.emplace_back();
  for (const auto& n : names) out.push_back(value(names_.emplace_back(n)));  // the view keeps the names
  return out.data();
}

const MrtEpTensor* EpGraphView::tensor(const Tensor& t) {
  MrtEpTensor& x = tensors_.emplace_back();
  fill_tensor(t, &x);
  return &x;
}

MrtEpValue EpGraphView::value(const std::string& name) {
  MrtEpValue v{};
  v.name = name.c_str();
  v.rank = -1;
  if (name.empty()) return v;
  if (const Tensor* c = constant_(name)) {
    v.constant_value = tensor(*c);
    v.elem_type = static_cast<int32_t>(c->dtype());
    v.rank = static_cast<int64_t>(c->rank());
    v.dims = c->shape().data();
    return v;
  }
  auto it = known_.find(name);
  if (it == known_.end()) return v;
  v.elem_type = static_cast<int32_t>(it->second.elem_type);
  if (it->second.has_shape) {
    auto& d = dims_.emplace_back();
    for (const auto& dim : it->second.dims) d.push_back(dim.value);
    v.rank = static_cast<int64_t>(d.size());
    v.dims = d.data();
  }
  return v;
}

EpSubgraphView::EpSubgraphView(const std::string& name, const std::vector<const Node*>& nodes, const Model& model,
                               const std::map<std::string, ValueInfo>& known, const ConstantFn& constant,
                               int32_t threads)
    : EpGraphView(nodes, known, constant, model.opsets), name_(name), model_(model) {
  const Graph& g = model.graph;
  std::vector<std::string> ins, outs, inits;
  for (const auto& v : g.inputs) ins.push_back(v.name);
  for (const auto& v : g.outputs) outs.push_back(v.name);
  for (const auto& kv : g.initializers) inits.push_back(kv.first);
  c_.name = name_.c_str();
  c_.node_count = nodes_.size();
  c_.nodes = nodes_.data();
  c_.input_count = ins.size();
  c_.inputs = values(ins);
  c_.output_count = outs.size();
  c_.outputs = values(outs);
  c_.initializer_count = inits.size();
  c_.initializers = values(inits);
  c_.intra_op_threads = threads;
  std::lock_guard<std::mutex> lock(views_mutex());
  live_views()[&c_] = this;
}

EpSubgraphView::~EpSubgraphView() {
  std::lock_guard<std::mutex> lock(views_mutex());
  live_views().erase(&c_);
}

EpSubgraphView* EpSubgraphView::find(const MrtEpSubgraph* c) {
  std::lock_guard<std::mutex> lock(views_mutex());
  auto it = live_views().find(c);
  return it == live_views().end() ? nullptr : it->second;
}

const std::string& EpSubgraphView::onnx() {
  if (!encoded_) {
    onnx_ = encode_model(model_);
    encoded_ = true;
  }
  return onnx_;
}

DeviceBuffer::~DeviceBuffer() {
  if (ep && data) ep->device_free(data);
}

PluginEp::PluginEp(EpChoice choice) : choice_(std::move(choice)), name_(choice_.name()) {
  MrtEpFactory* f = choice_.factory->api;
  std::vector<const char*> keys, values;
  for (const auto& kv : choice_.options) {
    keys.push_back(kv.first.c_str());
    values.push_back(kv.second.c_str());
  }
  MrtEp* ep = nullptr;
  MrtErrorCode code = MRT_EP_ERROR;
  std::string err = take_status_message(f->CreateEp(f, choice_.devices.data(), choice_.devices.size(), keys.data(),
                                             values.data(), keys.size(), &ep),
                                 &code);
  if (!err.empty()) fail(code == MRT_OK ? MRT_EP_ERROR : code, who(), " could not be created: ", err);
  if (!ep) fail(MRT_EP_ERROR, who(), " returned no EP");
  ep_ = ep;
  abi_ = ep->abi_version;
  if (abi_ >> 16 != MRT_EP_ABI_VERSION_MAJOR || (abi_ & 0xFFFF) > MRT_EP_ABI_VERSION_MINOR)
    fail(MRT_EP_ERROR, who(), " returned an EP with ABI ", abi_str(abi_), "; this mosaicrt provides EP ABI ",
         abi_str(MRT_EP_ABI_VERSION));
  // Read only the fields the EP's ABI version has: a 1.0 EP's struct ends at ReleaseKernel.
  size_t known = (abi_ & 0xFFFF) >= 1 ? sizeof(MrtEp) : offsetof(MrtEp, GetCapabilityGroups);
  std::memcpy(&fns_, ep, known);
  if ((!fns_.GetCapability && !fns_.GetCapabilityGroups) || !fns_.Compute || !fns_.ReleaseKernel ||
      (!fns_.CreateKernel && !fns_.Compile))
    fail(MRT_EP_ERROR, who(), " returned an EP with missing functions (GetCapability or GetCapabilityGroups, "
         "CreateKernel or Compile, Compute and ReleaseKernel are required)");
  int memory = !!fns_.DeviceAllocate + !!fns_.DeviceFree + !!fns_.CopyToDevice + !!fns_.CopyToHost;
  if (memory != 0 && memory != 4)
    fail(MRT_EP_ERROR, who(), " declares device memory partly: DeviceAllocate, DeviceFree, CopyToDevice and "
         "CopyToHost are all required together");
}

PluginEp::~PluginEp() {
  if (ep_) choice_.factory->api->ReleaseEp(choice_.factory->api, ep_);
}

std::string PluginEp::who() const { return "execution provider '" + name_ + "' (" + library_path() + ")"; }

std::vector<int32_t> PluginEp::claim(const EpGraphView& view) {
  size_t n = view.graph().node_count;
  std::vector<int32_t> group(n, -1);
  MrtErrorCode code = MRT_EP_ERROR;
  std::string err;
  if (fns_.GetCapabilityGroups) {
    err = take_status_message(fns_.GetCapabilityGroups(ep_, &view.graph(), group.data()), &code);
  } else {
    std::vector<uint8_t> take(n, 0);
    err = take_status_message(fns_.GetCapability(ep_, &view.graph(), take.data()), &code);
    int32_t next = 0;
    for (size_t i = 0; i < n; ++i)
      if (take[i]) group[i] = next++;
  }
  if (!err.empty()) fail(code == MRT_OK ? MRT_EP_ERROR : code, who(), " failed to partition the graph: ", err);
  for (int32_t g : group)
    if (g < -1) fail(MRT_EP_ERROR, who(), " returned group id ", g, " (ids are >= 0, -1 = not claimed)");
  return group;
}

void* PluginEp::create_kernel(const MrtEpNode& node, std::string& why) {
  if (!fns_.CreateKernel) {
    why = "the EP compiles groups only (no CreateKernel)";
    return nullptr;
  }
  void* k = nullptr;
  why = take_status_message(fns_.CreateKernel(ep_, &node, &k));
  if (why.empty() && !k) why = "CreateKernel returned no kernel";
  return why.empty() ? k : nullptr;
}

void* PluginEp::compile(EpSubgraphView& view, std::string& why) {
  void* k = nullptr;
  why = take_status_message(fns_.Compile(ep_, &view.subgraph(), &k));
  if (why.empty() && !k) why = "Compile returned no compute object";
  return why.empty() ? k : nullptr;
}

void PluginEp::release_kernel(void* kernel) { fns_.ReleaseKernel(ep_, kernel); }

void PluginEp::compute(void* kernel, const std::string& what, OpContext& ctx, int32_t threads) {
  MrtEpKernelContext c;
  c.ctx = &ctx;
  c.threads = threads;
  MrtErrorCode code = MRT_RUNTIME_ERROR;
  std::string err = take_status_message(fns_.Compute(ep_, kernel, &c), &code);
  if (!err.empty()) fail(code == MRT_OK ? MRT_RUNTIME_ERROR : code, what, ": ", who(), " failed: ", err);
  for (size_t i = 0; i < ctx.output_count(); ++i)
    if (ctx.has_output(i) && !(*ctx.outputs_)[i].valid())
      fail(MRT_RUNTIME_ERROR, what, ": ", who(), " did not produce output ", i);
}

void PluginEp::compute_on_device(void* kernel, const std::string& what, const std::vector<const DeviceTensor*>& inputs,
                                 std::vector<DeviceTensor>& outputs, int32_t threads) {
  MrtEpKernelContext c;
  c.threads = threads;
  c.device = this;
  c.device_inputs = &inputs;
  c.device_outputs = &outputs;
  MrtErrorCode code = MRT_RUNTIME_ERROR;
  std::string err = take_status_message(fns_.Compute(ep_, kernel, &c), &code);
  if (!err.empty()) fail(code == MRT_OK ? MRT_RUNTIME_ERROR : code, what, ": ", who(), " failed: ", err);
}

DeviceTensor PluginEp::allocate(DType dtype, Shape shape) {
  DeviceTensor t;
  t.dtype = dtype;
  t.shape = std::move(shape);
  t.buffer = std::make_shared<DeviceBuffer>();
  size_t bytes = t.nbytes();
  if (bytes) {
    void* p = nullptr;
    MrtErrorCode code = MRT_OUT_OF_MEMORY;
    std::string err = take_status_message(fns_.DeviceAllocate(ep_, bytes, &p), &code);
    if (!err.empty()) fail(code == MRT_OK ? MRT_OUT_OF_MEMORY : code, who(), " could not allocate ", bytes,
                           " bytes of device memory: ", err);
    if (!p) fail(MRT_OUT_OF_MEMORY, who(), " returned no device memory for ", bytes, " bytes");
    t.buffer->ep = this;
    t.buffer->data = p;
    t.buffer->bytes = bytes;
  }
  return t;
}

void PluginEp::device_free(void* data) { fns_.DeviceFree(ep_, data); }

DeviceTensor PluginEp::to_device(const Tensor& host) {
  DeviceTensor t = allocate(host.dtype(), host.shape());
  if (t.nbytes()) {
    std::string err = take_status_message(fns_.CopyToDevice(ep_, t.buffer->data, host.raw(), t.nbytes()));
    if (!err.empty()) fail(MRT_EP_ERROR, who(), " failed to copy ", t.nbytes(), " bytes to the device: ", err);
  }
  return t;
}

Tensor PluginEp::to_host(const DeviceTensor& dev, Allocator* alloc) {
  Tensor t(dev.dtype, dev.shape, alloc);
  if (t.nbytes()) {
    std::string err = take_status_message(fns_.CopyToHost(ep_, t.raw(), dev.buffer->data, t.nbytes()));
    if (!err.empty()) fail(MRT_EP_ERROR, who(), " failed to copy ", t.nbytes(), " bytes to the host: ", err);
  }
  return t;
}

void PluginEp::synchronize() {
  if (!fns_.Synchronize) return;
  std::string err = take_status_message(fns_.Synchronize(ep_));
  if (!err.empty()) fail(MRT_EP_ERROR, who(), " failed to synchronize: ", err);
}

}  // namespace mrt
