#include "ep/plugin_ep.h"

#include <cstring>

#include "error.h"

struct MrtEpKernelContext {
  mrt::OpContext* ctx;
  int32_t threads;
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

size_t ctx_input_count(const MrtEpKernelContext* c) { return c ? c->ctx->input_count() : 0; }
size_t ctx_output_count(const MrtEpKernelContext* c) { return c ? c->ctx->output_count() : 0; }
int ctx_get_input(const MrtEpKernelContext* c, size_t i, MrtEpTensor* out) {
  if (!c || !out || !c->ctx->has_input(i)) return 0;
  fill_tensor(c->ctx->input(i), out);
  return 1;
}
MrtStatus* ctx_allocate_output(MrtEpKernelContext* c, size_t i, int32_t elem_type, const int64_t* dims, size_t rank,
                               MrtEpTensor* out) {
  try {
    if (!c || !out) fail(MRT_INVALID_ARGUMENT, "AllocateOutput: NULL context or out");
    if (i >= c->ctx->output_count())
      fail(MRT_INVALID_ARGUMENT, "AllocateOutput: output index ", i, " out of range (", c->ctx->output_count(), ")");
    if (!dtype_is_known(elem_type) || !dtype_is_storable(static_cast<DType>(elem_type)))
      fail(MRT_INVALID_ARGUMENT, "AllocateOutput: unsupported element type ", elem_type);
    if (rank && !dims) fail(MRT_INVALID_ARGUMENT, "AllocateOutput: dims is NULL");
    for (size_t d = 0; d < rank; ++d)
      if (dims[d] < 0) fail(MRT_INVALID_ARGUMENT, "AllocateOutput: negative dimension ", dims[d]);
    Tensor& t = c->ctx->output(i, static_cast<DType>(elem_type), Shape(dims, dims + rank));
    fill_tensor(t, out);
    return nullptr;
  } catch (const Error& e) {
    return MrtCreateStatus(e.code(), e.what());
  } catch (const std::bad_alloc&) {
    return MrtCreateStatus(MRT_OUT_OF_MEMORY, "out of memory allocating an EP output");
  } catch (const std::exception& e) {
    return MrtCreateStatus(MRT_INTERNAL, e.what());
  }
}
int32_t ctx_threads(const MrtEpKernelContext* c) { return c ? c->threads : 1; }

}  // namespace

const MrtEpApi& ep_host_api() {
  static const MrtEpApi api = {
      MRT_EP_ABI_VERSION, MrtCreateStatus, ctx_input_count, ctx_output_count, ctx_get_input, ctx_allocate_output,
      ctx_threads,
  };
  return api;
}

EpGraphView::EpGraphView(const std::vector<const Node*>& nodes, const std::map<std::string, ValueInfo>& known,
                         const std::function<const Tensor*(const std::string&)>& constant,
                         const std::map<std::string, int64_t>& opsets) {
  for (const Node* n : nodes) {
    MrtEpNode v{};
    v.name = n->name.c_str();
    v.op_type = n->op_type.c_str();
    v.domain = n->domain.c_str();
    auto op = opsets.find(n->domain);
    v.opset = op == opsets.end() ? 0 : op->second;
    auto& ins = values_.emplace_back();
    for (const auto& name : n->inputs) ins.push_back(value(name, known, constant));
    auto& outs = values_.emplace_back();
    for (const auto& name : n->outputs) outs.push_back(value(name, known, constant));
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

const MrtEpTensor* EpGraphView::tensor(const Tensor& t) {
  MrtEpTensor& x = tensors_.emplace_back();
  fill_tensor(t, &x);
  return &x;
}

MrtEpValue EpGraphView::value(const std::string& name, const std::map<std::string, ValueInfo>& known,
                              const std::function<const Tensor*(const std::string&)>& constant) {
  MrtEpValue v{};
  v.name = name.c_str();
  v.rank = -1;
  if (name.empty()) return v;
  if (const Tensor* c = constant(name)) {
    v.constant_value = tensor(*c);
    v.elem_type = static_cast<int32_t>(c->dtype());
    v.rank = static_cast<int64_t>(c->rank());
    v.dims = c->shape().data();
    return v;
  }
  auto it = known.find(name);
  if (it == known.end()) return v;
  v.elem_type = static_cast<int32_t>(it->second.elem_type);
  if (it->second.has_shape) {
    auto& d = dims_.emplace_back();
    for (const auto& dim : it->second.dims) d.push_back(dim.value);
    v.rank = static_cast<int64_t>(d.size());
    v.dims = d.data();
  }
  return v;
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
  if (!err.empty())
    fail(code == MRT_OK ? MRT_EP_ERROR : code, "execution provider '", name_, "' (", library_path(),
         ") could not be created: ", err);
  if (!ep) fail(MRT_EP_ERROR, "execution provider '", name_, "' (", library_path(), ") returned no EP");
  ep_ = ep;
  if (ep->abi_version >> 16 != MRT_EP_ABI_VERSION_MAJOR || (ep->abi_version & 0xFFFF) > MRT_EP_ABI_VERSION_MINOR ||
      !ep->GetCapability || !ep->CreateKernel || !ep->Compute || !ep->ReleaseKernel)
    fail(MRT_EP_ERROR, "execution provider '", name_, "' (", library_path(), ") returned an EP with ABI ",
         ep->abi_version >> 16, ".", ep->abi_version & 0xFFFF, " or missing functions; this mosaicrt provides EP ABI ",
         MRT_EP_ABI_VERSION_MAJOR, ".", MRT_EP_ABI_VERSION_MINOR);
}

PluginEp::~PluginEp() {
  if (ep_) choice_.factory->api->ReleaseEp(choice_.factory->api, ep_);
}

std::vector<uint8_t> PluginEp::capability(const EpGraphView& view) {
  std::vector<uint8_t> take(view.graph().node_count, 0);
  MrtErrorCode code = MRT_EP_ERROR;
  std::string err = take_status_message(ep_->GetCapability(ep_, &view.graph(), take.data()), &code);
  if (!err.empty())
    fail(code == MRT_OK ? MRT_EP_ERROR : code, "execution provider '", name_, "' (", library_path(),
         ") failed to partition the graph: ", err);
  return take;
}

void* PluginEp::create_kernel(const MrtEpNode& node, std::string& why) {
  void* k = nullptr;
  why = take_status_message(ep_->CreateKernel(ep_, &node, &k));
  if (why.empty() && !k) why = "CreateKernel returned no kernel";
  return why.empty() ? k : nullptr;
}

void PluginEp::release_kernel(void* kernel) { ep_->ReleaseKernel(ep_, kernel); }

void PluginEp::compute(void* kernel, const Node& node, OpContext& ctx, int32_t threads) {
  MrtEpKernelContext c{&ctx, threads};
  MrtErrorCode code = MRT_RUNTIME_ERROR;
  std::string err = take_status_message(ep_->Compute(ep_, kernel, &c), &code);
  if (!err.empty())
    fail(code == MRT_OK ? MRT_RUNTIME_ERROR : code, node.label(), ": execution provider '", name_, "' (",
         library_path(), ") failed: ", err);
  for (size_t i = 0; i < ctx.output_count(); ++i)
    if (ctx.has_output(i) && !(*ctx.outputs_)[i].valid())
      fail(MRT_RUNTIME_ERROR, node.label(), ": execution provider '", name_, "' (", library_path(),
           ") did not produce output ", i);
}

}  // namespace mrt
