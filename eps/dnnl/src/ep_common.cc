#include "ep_common.h"

#include <algorithm>
#include <numeric>

namespace mrt_dnnl {

std::string dims_str(const Dims& d) {
  std::string s = "[";
  for (size_t i = 0; i < d.size(); ++i) s += (i ? "," : "") + std::to_string(d[i]);
  return s + "]";
}

size_t NodeView::present_outputs() const {
  size_t k = 0;
  for (size_t i = 0; i < n_.output_count; ++i) k += present(n_.outputs[i]) ? 1 : 0;
  return k;
}

bool NodeView::input_is_float(size_t i) const {
  if (!has_input(i)) return false;
  const MrtEpValue& v = n_.inputs[i];
  if (v.constant_value) return v.constant_value->elem_type == kFloat;
  if (v.elem_type != 0 || !types_) return v.elem_type == kFloat;
  auto it = types_->find(v.name);
  return it != types_->end() && it->second == kFloat;
}

bool NodeView::all_inputs_float() const {
  for (size_t i = 0; i < n_.input_count; ++i)
    if (present(n_.inputs[i]) && !input_is_float(i)) return false;
  return true;
}

const MrtEpAttribute* NodeView::attr(const char* name) const {
  for (size_t i = 0; i < n_.attribute_count; ++i)
    if (n_.attributes[i].name && std::strcmp(n_.attributes[i].name, name) == 0) return &n_.attributes[i];
  return nullptr;
}

int64_t NodeView::attr_int(const char* name, int64_t def) const {
  const MrtEpAttribute* a = attr(name);
  return a && a->type == MRT_ATTR_INT ? a->i : def;
}

float NodeView::attr_float(const char* name, float def) const {
  const MrtEpAttribute* a = attr(name);
  return a && a->type == MRT_ATTR_FLOAT ? a->f : def;
}

std::string NodeView::attr_string(const char* name, const std::string& def) const {
  const MrtEpAttribute* a = attr(name);
  return a && a->type == MRT_ATTR_STRING && a->s ? std::string(a->s, a->s_len) : def;
}

std::vector<int64_t> NodeView::attr_ints(const char* name) const {
  const MrtEpAttribute* a = attr(name);
  if (!a || a->type != MRT_ATTR_INTS || !a->ints) return {};
  return std::vector<int64_t>(a->ints, a->ints + a->count);
}

std::vector<float> NodeView::attr_floats(const char* name) const {
  const MrtEpAttribute* a = attr(name);
  if (!a || a->type != MRT_ATTR_FLOATS || !a->floats) return {};
  return std::vector<float>(a->floats, a->floats + a->count);
}

Dims tensor_dims(const MrtEpTensor& t) {
  return t.dims ? Dims(t.dims, t.dims + t.rank) : Dims(t.rank, 0);
}

int64_t numel(const Dims& d) {
  return std::accumulate(d.begin(), d.end(), int64_t{1}, std::multiplies<int64_t>());
}

ConstTensor copy_constant(const MrtEpTensor& t, const char* what) {
  if (t.elem_type != kFloat) throw Unsupported(cat(what, ": element type ", t.elem_type, " is not float32"));
  ConstTensor c;
  c.dims = tensor_dims(t);
  int64_t n = numel(c.dims);
  if (t.data_bytes != static_cast<size_t>(n) * sizeof(float) || (n > 0 && !t.data))
    throw Unsupported(cat(what, ": constant of shape ", dims_str(c.dims), " has ", t.data_bytes, " bytes"));
  c.data.resize(static_cast<size_t>(n));
  if (n > 0) std::memcpy(c.data.data(), t.data, t.data_bytes);
  return c;
}

bool scalar_constant(const MrtEpTensor* t, float* out) {
  if (!t || t->elem_type != kFloat || t->data_bytes != sizeof(float) || !t->data) return false;
  std::memcpy(out, t->data, sizeof(float));
  return true;
}

bool RunContext::input(size_t i, MrtEpTensor* t) const {
  if (i >= api_->KernelContextGetInputCount(kc_)) return false;
  if (!api_->KernelContextGetInput(kc_, i, t)) return false;
  if (t->elem_type != kFloat) throw std::runtime_error(cat("input ", i, " has element type ", t->elem_type, ", expected float32"));
  return true;
}

MrtEpTensor RunContext::require(size_t i) const {
  MrtEpTensor t{};
  if (!input(i, &t)) throw std::runtime_error(cat("input ", i, " is missing"));
  return t;
}

MrtEpTensor RunContext::output(size_t i, const Dims& dims) {
  MrtEpTensor t{};
  MrtStatus* s = api_->KernelContextAllocateOutput(kc_, i, kFloat, dims.data(), dims.size(), &t);
  if (s) throw StatusError{s};
  return t;
}

dnnl::memory::desc plain_md(const Dims& dims_in) {
  Dims dims = dims_in.empty() ? Dims{1} : dims_in;
  Dims strides(dims.size());
  int64_t s = 1;
  for (size_t i = dims.size(); i-- > 0;) {
    strides[i] = s;
    s *= std::max<int64_t>(dims[i], 1);
  }
  return dnnl::memory::desc(dims, dnnl::memory::data_type::f32, strides);
}

dnnl::memory wrap(const dnnl::memory::desc& md, const dnnl::engine& eng, const void* data) {
  return dnnl::memory(md, eng, const_cast<void*>(data));
}

bool parse_activation(const std::string& act, const std::vector<float>& params, Activation* out) {
  auto param = [&](size_t i, float def) { return i < params.size() ? params[i] : def; };
  Activation a;
  a.present = true;
  if (act.empty() || act == "Identity") {
    a.present = false;
  } else if (act == "Relu") {
    a.alg = dnnl::algorithm::eltwise_relu;
  } else if (act == "LeakyRelu") {
    a.alg = dnnl::algorithm::eltwise_relu;
    a.alpha = param(0, 0.01f);
  } else if (act == "Sigmoid") {
    a.alg = dnnl::algorithm::eltwise_logistic;
  } else if (act == "Tanh") {
    a.alg = dnnl::algorithm::eltwise_tanh;
  } else if (act == "Clip") {
    a.alg = dnnl::algorithm::eltwise_clip;
    a.alpha = param(0, -3.402823466e+38f);
    a.beta = param(1, 3.402823466e+38f);
  } else if (act == "HardSigmoid") {
    a.alg = dnnl::algorithm::eltwise_hardsigmoid;
    a.alpha = param(0, 0.2f);
    a.beta = param(1, 0.5f);
  } else {
    return false;
  }
  *out = a;
  return true;
}

bool auto_pad_ok(const NodeView& n) {
  std::string ap = n.attr_string("auto_pad", "NOTSET");
  return ap == "NOTSET" || ap == "SAME_UPPER" || ap == "SAME_LOWER" || ap == "VALID";
}

WindowAttrs WindowAttrs::read(const NodeView& n) {
  WindowAttrs a;
  a.auto_pad = n.attr_string("auto_pad", "NOTSET");
  a.pads = n.attr_ints("pads");
  a.strides = n.attr_ints("strides");
  a.dilations = n.attr_ints("dilations");
  return a;
}

Window resolve_window(const WindowAttrs& a, const Dims& in, const Dims& kernel, const char* op) {
  const size_t s = in.size();
  if (kernel.size() != s) throw std::runtime_error(cat(op, ": kernel ", dims_str(kernel), " does not match input spatial dims ", dims_str(in)));
  Window w;
  w.kernel = kernel;
  w.strides = a.strides.empty() ? Dims(s, 1) : a.strides;
  w.dilations = a.dilations.empty() ? Dims(s, 1) : a.dilations;
  if (w.strides.size() != s || w.dilations.size() != s) throw std::runtime_error(cat(op, ": strides/dilations rank mismatch"));
  w.pad_l.assign(s, 0);
  w.pad_r.assign(s, 0);
  w.out.assign(s, 0);
  for (size_t i = 0; i < s; ++i) {
    if (w.strides[i] < 1 || w.dilations[i] < 1 || kernel[i] < 1) throw std::runtime_error(cat(op, ": bad window"));
    int64_t ext = (kernel[i] - 1) * w.dilations[i] + 1;
    if (a.auto_pad == "SAME_UPPER" || a.auto_pad == "SAME_LOWER") {
      int64_t out = (in[i] + w.strides[i] - 1) / w.strides[i];
      int64_t total = std::max<int64_t>(0, (out - 1) * w.strides[i] + ext - in[i]);
      int64_t small = total / 2, big = total - small;
      w.pad_l[i] = a.auto_pad == "SAME_UPPER" ? small : big;
      w.pad_r[i] = total - w.pad_l[i];
    } else if (a.auto_pad != "VALID" && !a.pads.empty()) {
      if (a.pads.size() != 2 * s) throw std::runtime_error(cat(op, ": pads has ", a.pads.size(), " values for ", s, " spatial dims"));
      w.pad_l[i] = a.pads[i];
      w.pad_r[i] = a.pads[i + s];
    }
    int64_t span = in[i] + w.pad_l[i] + w.pad_r[i] - ext;
    if (span < 0) throw std::runtime_error(cat(op, ": window ", ext, " is larger than the padded input ", in[i]));
    w.out[i] = span / w.strides[i] + 1;
  }
  return w;
}

}  // namespace mrt_dnnl
