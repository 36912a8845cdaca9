#include "graph_optimizer.h"

#include "static_shapes.h"
#include "subgraph.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <map>
#include <set>

namespace mrt {

namespace {

struct GraphIndex {
  std::map<std::string, int> uses;  // consumer count, graph outputs included
  std::map<std::string, size_t> consumer;  // a node reading the value: its only one where uses is 1
  std::map<std::string, std::shared_ptr<Tensor>> constants;  // initializers no graph input overrides
  std::set<std::string> names;

  explicit GraphIndex(Model& m) {
    Graph& g = m.graph;
    const std::set<std::string> overridable = overridable_initializers(m);
    for (auto& [name, t] : g.initializers) {
      names.insert(name);
      if (!overridable.count(name)) constants[name] = t;
    }
    for (size_t k = 0; k < g.nodes.size(); ++k) {
      const Node& n = g.nodes[k];
      for (const auto& i : n.inputs)
        if (!i.empty()) {
          ++uses[i];
          consumer[i] = k;
        }
      for (const auto& o : n.outputs) names.insert(o);
      for (const auto& name : outer_scope_names(n)) uses[name] += 1000;  // read by a subgraph: kept as well
    }
    for (const auto& o : g.outputs) uses[o.name] += 1000;  // never fuse away a graph output
  }
  const Tensor* constant(const std::string& name) const {
    auto it = constants.find(name);
    return it == constants.end() ? nullptr : it->second.get();
  }
  std::string fresh(const std::string& base) {
    for (int i = 0;; ++i) {
      std::string n = str_cat(base, "#opt", i);
      if (names.insert(n).second) return n;
    }
  }
};

bool is_float_vector(const Tensor* t, int64_t n) {
  return t && t->dtype() == DType::kFloat && t->rank() == 1 && t->dim(0) == n;
}

// The constant parameters of a BatchNormalization in inference form over `channels` channels (one output, the
// training statistics outputs absent, float vectors): false when it is not one.
struct BatchNormParams {
  const Tensor *scale = nullptr, *bias = nullptr, *mean = nullptr, *var = nullptr;
  float eps = 1e-5f;
};
bool inference_batchnorm(const Node& bn, const GraphIndex& idx, int64_t channels, BatchNormParams& out) {
  if (bn.outputs.empty() || bn.outputs[0].empty() ||
      !std::all_of(bn.outputs.begin() + 1, bn.outputs.end(), [](const std::string& s) { return s.empty(); }))
    return false;
  if (bn.attr_int("training_mode", 0) != 0 || bn.inputs.size() != 5) return false;
  if (bn.has_attr("spatial") && bn.attr_int("spatial", 1) != 1) return false;
  out.scale = idx.constant(bn.inputs[1]);
  out.bias = idx.constant(bn.inputs[2]);
  out.mean = idx.constant(bn.inputs[3]);
  out.var = idx.constant(bn.inputs[4]);
  out.eps = bn.attr_float("epsilon", 1e-5f);
  return is_float_vector(out.scale, channels) && is_float_vector(out.bias, channels) &&
         is_float_vector(out.mean, channels) && is_float_vector(out.var, channels);
}

// Conv(W, B?) → BatchNormalization: returns true when folded.
bool fold_batchnorm(Graph& g, GraphIndex& idx, Node& conv, Node& bn) {
  if (conv.inputs.size() < 2) return false;
  const Tensor* W = idx.constant(conv.inputs[1]);
  if (!W || W->dtype() != DType::kFloat || W->rank() < 3) return false;
  int64_t M = W->dim(0);
  const Tensor* B = conv.inputs.size() > 2 && !conv.inputs[2].empty() ? idx.constant(conv.inputs[2]) : nullptr;
  if (conv.inputs.size() > 2 && !conv.inputs[2].empty() && !is_float_vector(B, M)) return false;
  BatchNormParams bp;
  if (!inference_batchnorm(bn, idx, M, bp)) return false;
  const Tensor *scale = bp.scale, *bias = bp.bias, *mean = bp.mean, *var = bp.var;
  const float eps = bp.eps;
  auto W2 = std::make_shared<Tensor>(DType::kFloat, W->shape());
  auto B2 = std::make_shared<Tensor>(DType::kFloat, Shape{M});
  int64_t per = W->numel() / M;
  const float* w = W->data<float>();
  float* w2 = W2->data<float>();
  for (int64_t m = 0; m < M; ++m) {
    float s = scale->data<float>()[m] / std::sqrt(var->data<float>()[m] + eps);
    for (int64_t k = 0; k < per; ++k) w2[m * per + k] = w[m * per + k] * s;
    float b = B ? B->data<float>()[m] : 0.f;
    B2->data<float>()[m] = (b - mean->data<float>()[m]) * s + bias->data<float>()[m];
  }
  std::string wn = idx.fresh(conv.inputs[1]), bn_name = idx.fresh(conv.name.empty() ? "conv_bias" : conv.name + "/bias");
  g.initializers.emplace_back(wn, W2);
  g.initializers.emplace_back(bn_name, B2);
  idx.constants[wn] = W2;
  idx.constants[bn_name] = B2;
  conv.inputs.resize(3);
  conv.inputs[1] = wn;
  conv.inputs[2] = bn_name;
  conv.outputs[0] = bn.outputs[0];
  return true;
}

// The per-channel values of a constant that a Mul/Add applies to an [N, C, spatial...]
// tensor of rank `rank` along its channels only (shape [C,1,..], [1,C,1,..], [1] or
// scalar: every other dim 1, never more dims than the tensor); empty when it is not one.
std::vector<float> per_channel(const Tensor* t, int64_t channels, size_t rank) {
  if (!t || t->dtype() != DType::kFloat || t->rank() > rank) return {};
  const size_t k = t->rank();
  for (size_t i = 0; i < k; ++i) {
    const bool channel_axis = k + 1 >= rank && i == k - (rank - 1);
    if (t->dim(i) != 1 && !(channel_axis && t->dim(i) == channels)) return {};
  }
  const float* v = t->data<float>();
  if (t->numel() == 1) return std::vector<float>(static_cast<size_t>(channels), v[0]);
  return std::vector<float>(v, v + channels);
}

// The constant operand of a binary Mul/Add node reading `value` (nullptr otherwise).
const Tensor* other_constant(const Node& op, const std::string& value, const GraphIndex& idx) {
  if (!op.domain.empty() || op.inputs.size() != 2 || op.outputs.size() != 1 || op.outputs[0].empty() ||
      op.inputs[0] == op.inputs[1])
    return nullptr;
  return idx.constant(op.inputs[0] == value ? op.inputs[1] : op.inputs[0]);
}

std::shared_ptr<Tensor> float_vector(const std::vector<float>& v) {
  auto t = std::make_shared<Tensor>(DType::kFloat, Shape{static_cast<int64_t>(v.size())});
  std::copy(v.begin(), v.end(), t->data<float>());
  return t;
}

// Conv(W, B?) → Mul(c)/Add(c) with c per output channel: W rows scaled / B shifted.
bool fold_conv_affine(Graph& g, GraphIndex& idx, Node& conv, Node& op) {
  if (op.op_type != "Mul" && op.op_type != "Add") return false;
  const Tensor* W = conv.inputs.size() > 1 ? idx.constant(conv.inputs[1]) : nullptr;
  if (!W || W->dtype() != DType::kFloat || W->rank() < 3) return false;
  const int64_t M = W->dim(0);
  std::vector<float> c = per_channel(other_constant(op, conv.outputs[0], idx), M, W->rank());
  if (c.empty()) return false;
  const bool has_b = conv.inputs.size() > 2 && !conv.inputs[2].empty();
  const Tensor* B = has_b ? idx.constant(conv.inputs[2]) : nullptr;
  if (has_b && !is_float_vector(B, M)) return false;
  std::vector<float> b(static_cast<size_t>(M), 0.f);
  if (B) std::copy(B->data<float>(), B->data<float>() + M, b.begin());
  std::string base = conv.name.empty() ? "conv" : conv.name;
  if (op.op_type == "Mul") {
    auto W2 = std::make_shared<Tensor>(DType::kFloat, W->shape());
    const int64_t per = W->numel() / M;
    for (int64_t m = 0; m < M; ++m) {
      for (int64_t k = 0; k < per; ++k) W2->data<float>()[m * per + k] = W->data<float>()[m * per + k] * c[m];
      b[m] *= c[m];
    }
    std::string wn = idx.fresh(conv.inputs[1]);
    g.initializers.emplace_back(wn, W2);
    idx.constants[wn] = W2;
    conv.inputs[1] = wn;
  } else {
    for (int64_t m = 0; m < M; ++m) b[m] += c[m];
  }
  if (op.op_type == "Add" || has_b) {
    auto B2 = float_vector(b);
    std::string bname = idx.fresh(base + "/bias");
    g.initializers.emplace_back(bname, B2);
    idx.constants[bname] = B2;
    conv.inputs.resize(3);
    conv.inputs[2] = bname;
  }
  conv.outputs[0] = op.outputs[0];
  return true;
}

// BatchNormalization (inference form, constant scale/bias, input of rank `rank`) →
// Mul(c)/Add(c) per channel: folded into the BN's scale and bias.
bool fold_bn_affine(Graph& g, GraphIndex& idx, Node& bn, Node& op, size_t rank) {
  if ((op.op_type != "Mul" && op.op_type != "Add") || rank < 2) return false;
  if (bn.inputs.size() != 5 || bn.attr_int("training_mode", 0) != 0 ||
      !std::all_of(bn.outputs.begin() + 1, bn.outputs.end(), [](const std::string& s) { return s.empty(); }))
    return false;
  const Tensor* scale = idx.constant(bn.inputs[1]);
  const Tensor* bias = idx.constant(bn.inputs[2]);
  if (!scale || !is_float_vector(scale, scale->numel()) || !is_float_vector(bias, scale->numel())) return false;
  const int64_t C = scale->numel();
  std::vector<float> c = per_channel(other_constant(op, bn.outputs[0], idx), C, rank);
  if (c.empty()) return false;
  std::vector<float> s(scale->data<float>(), scale->data<float>() + C), b(bias->data<float>(), bias->data<float>() + C);
  for (int64_t i = 0; i < C; ++i) {
    if (op.op_type == "Mul") {
      s[i] *= c[i];
      b[i] *= c[i];
    } else {
      b[i] += c[i];
    }
  }
  std::string base = bn.name.empty() ? "batchnorm" : bn.name;
  std::string sn = idx.fresh(base + "/scale"), bname = idx.fresh(base + "/bias");
  auto S2 = float_vector(s), B2 = float_vector(b);
  g.initializers.emplace_back(sn, S2);
  g.initializers.emplace_back(bname, B2);
  idx.constants[sn] = S2;
  idx.constants[bname] = B2;
  bn.inputs[1] = sn;
  bn.inputs[2] = bname;
  bn.outputs[0] = op.outputs[0];
  return true;
}

// add = Add(value, z) or Sum(value, z) (either order) where z and the sum have the same
// static shape as `value`: adding z is then exactly FusedConv's residual input. With
// `unless_unknown`, also when a shape is not known here (a symbolic batch): the fused kernel
// then compares the shapes on each run and adds with broadcasting where they differ.
bool is_residual_add(const Node& add, const std::string& value, const std::map<std::string, Shape>& shapes,
                     bool unless_unknown = false) {
  if (!add.domain.empty() || (add.op_type != "Add" && add.op_type != "Sum") || add.inputs.size() != 2 ||
      add.outputs.size() != 1 || add.outputs[0].empty() || add.inputs[0] == add.inputs[1])
    return false;
  const std::string& z = add.inputs[0] == value ? add.inputs[1] : add.inputs[0];
  if (z.empty()) return false;
  auto v = shapes.find(value), zs = shapes.find(z), out = shapes.find(add.outputs[0]);
  if (v == shapes.end() || zs == shapes.end() || out == shapes.end()) return unless_unknown;
  return v->second == zs->second && v->second == out->second;
}


// ---- QDQ: DequantizeLinear → Conv / MatMul → QuantizeLinear as one integer node ----
// What onnxruntime's quantize_static emits by default (QuantFormat.QDQ): every quantized tensor is
// dequantized to float before the op and quantized again after it. Run as QLinearConv /
// QLinearMatMul, the op reads the 8-bit values and accumulates exactly in int32; the result is the
// float path's within one step of the output quantization (the float path rounds its sums).

// The operands of a DequantizeLinear / QuantizeLinear node: (q, scale, zero point) with a float32
// constant scale (one value, or one per `axis`) and a constant zero point of as many values, no
// block quantization.
struct QdqOperands {
  std::string value, scale, zp;
  const Tensor* scale_t = nullptr;
  const Tensor* zp_t = nullptr;  // nullptr when absent
  int64_t axis = 1;
};

bool qdq_operands(const Node& n, const char* op, const GraphIndex& idx, QdqOperands& out) {
  if (n.op_type != op || !n.domain.empty() || n.inputs.size() < 2 || n.inputs.size() > 3 || n.outputs.size() != 1 ||
      n.outputs[0].empty() || n.inputs[0].empty() || n.attr_int("block_size", 0) != 0)
    return false;
  out.value = n.inputs[0];
  out.scale = n.inputs[1];
  out.zp = n.inputs.size() > 2 ? n.inputs[2] : std::string();
  out.scale_t = idx.constant(out.scale);
  if (!out.scale_t || out.scale_t->dtype() != DType::kFloat || out.scale_t->rank() > 1 || out.scale_t->numel() < 1)
    return false;
  for (int64_t i = 0; i < out.scale_t->numel(); ++i)
    if (!(out.scale_t->data<float>()[i] > 0.f) || !std::isfinite(out.scale_t->data<float>()[i])) return false;
  out.zp_t = out.zp.empty() ? nullptr : idx.constant(out.zp);
  if (!out.zp.empty() && (!out.zp_t || out.zp_t->numel() != out.scale_t->numel())) return false;
  out.axis = n.attr_int("axis", 1);
  return true;
}

bool is_8bit(DType t) { return t == DType::kUInt8 || t == DType::kInt8; }

// A one-element zero point of type `t`, added as an initializer.
std::string zero_point(Graph& g, GraphIndex& idx, DType t, const std::string& base) {
  auto z = std::make_shared<Tensor>(t, Shape{});
  std::memset(z->data<uint8_t>(), 0, z->nbytes());
  std::string name = idx.fresh(base + "/zero_point");
  g.initializers.emplace_back(name, z);
  idx.constants[name] = z;
  return name;
}

// The 8-bit type of a dequantized activation: its zero point's (a constant input's own type
// otherwise); kUndefined when it is not known to be 8-bit.
DType dequantized_type(const QdqOperands& d, const GraphIndex& idx) {
  if (d.zp_t) return is_8bit(d.zp_t->dtype()) ? d.zp_t->dtype() : DType::kUndefined;
  const Tensor* q = idx.constant(d.value);
  return q && is_8bit(q->dtype()) ? q->dtype() : DType::kUndefined;
}

// The per-output-channel float values of a Conv bias: a float constant, or DequantizeLinear of an
// int32 constant. Empty when it is neither.
std::vector<double> conv_bias_values(const std::string& name, int64_t M, const GraphIndex& idx,
                                     const std::map<std::string, size_t>& producer, const Graph& g) {
  if (const Tensor* b = idx.constant(name)) {
    if (!is_float_vector(b, M)) return {};
    return std::vector<double>(b->data<float>(), b->data<float>() + M);
  }
  auto p = producer.find(name);
  QdqOperands d;
  if (p == producer.end() || !qdq_operands(g.nodes[p->second], "DequantizeLinear", idx, d)) return {};
  const Tensor* q = idx.constant(d.value);
  const int64_t k = d.scale_t->numel();
  if (!q || q->dtype() != DType::kInt32 || q->rank() != 1 || q->numel() != M || (k != 1 && k != M) ||
      (d.zp_t && d.zp_t->dtype() != DType::kInt32))
    return {};
  std::vector<double> out(static_cast<size_t>(M));
  for (int64_t m = 0; m < M; ++m) {
    const int64_t j = k == 1 ? 0 : m;
    const double zp = d.zp_t ? d.zp_t->data<int32_t>()[j] : 0.0;
    out[m] = (static_cast<double>(q->data<int32_t>()[m]) - zp) * d.scale_t->data<float>()[j];
  }
  return out;
}

// The output side: QuantizeLinear with a scalar scale; its zero point (made when absent) and type.
bool quantize_output(Graph& g, GraphIndex& idx, const Node& q, QdqOperands& y, DType& type) {
  if (!qdq_operands(q, "QuantizeLinear", idx, y) || y.scale_t->numel() != 1) return false;
  if (y.zp_t) {
    type = y.zp_t->dtype();
  } else {
    type = q.has_attr("output_dtype") ? static_cast<DType>(q.attr_int("output_dtype", 2)) : DType::kUInt8;
  }
  if (!is_8bit(type)) return false;
  if (!y.zp_t) y.zp = zero_point(g, idx, type, q.name.empty() ? "quantize" : q.name);
  return true;
}


int32_t zero_point_value(const QdqOperands& d) {
  if (!d.zp_t) return 0;
  return d.zp_t->dtype() == DType::kUInt8 ? d.zp_t->data<uint8_t>()[0] : d.zp_t->data<int8_t>()[0];
}

// Every DequantizeLinear → Conv / MatMul → QuantizeLinear group whose scales are constants (per
// tensor; the weight's per output channel / column) becomes QLinearConv / QLinearMatMul. A Conv
// bias (float, or dequantized int32) is requantized to int32 with the scale x_scale * w_scale.
// DequantizeLinear nodes nothing else reads are dropped. Returns the number of groups fused.
// value -> index of the node (not removed) that produces it
std::map<std::string, size_t> producers(const Graph& g, const std::vector<bool>& removed) {
  std::map<std::string, size_t> producer;
  for (size_t i = 0; i < g.nodes.size(); ++i)
    if (!removed[i])
      for (const auto& o : g.nodes[i].outputs)
        if (!o.empty()) producer[o] = i;
  return producer;
}

int fuse_qdq(Graph& g, GraphIndex& idx, std::vector<bool>& removed,
             const std::function<Node*(const std::string&)>& single_consumer, bool& contrib_ops) {
  const std::map<std::string, size_t> producer = producers(g, removed);
  auto dequantized = [&](const std::string& v, QdqOperands& d) {
    auto p = producer.find(v);
    return p != producer.end() && !removed[p->second] && qdq_operands(g.nodes[p->second], "DequantizeLinear", idx, d);
  };
  auto release = [&](const std::string& value) {  // one use fewer; an unread DequantizeLinear goes
    auto u = idx.uses.find(value);
    if (u == idx.uses.end() || --u->second > 0) return;
    auto p = producer.find(value);
    if (p != producer.end() && g.nodes[p->second].op_type == "DequantizeLinear") removed[p->second] = true;
  };
  int fused = 0;
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    Node& n = g.nodes[i];
    if (removed[i] || !n.domain.empty() || n.outputs.size() != 1 || n.outputs[0].empty()) continue;
    const bool conv = n.op_type == "Conv" && (n.inputs.size() == 2 || n.inputs.size() == 3);
    const bool matmul = n.op_type == "MatMul" && n.inputs.size() == 2;
    if (!conv && !matmul) continue;
    Node* q = single_consumer(n.outputs[0]);
    QdqOperands x, w, y;
    if (!q || q->op_type != "QuantizeLinear" || !dequantized(n.inputs[0], x) || !dequantized(n.inputs[1], w) ||
        x.scale_t->numel() != 1)
      continue;
    const DType xt = dequantized_type(x, idx), wt = dequantized_type(w, idx);
    if (xt == DType::kUndefined || wt == DType::kUndefined) continue;
    const Tensor* W = idx.constant(w.value);
    const int64_t k = w.scale_t->numel();
    std::vector<double> bias;
    if (conv) {
      // per output channel: axis 0 of the weight
      if (!W || W->rank() < 3 || (k != 1 && (k != W->dim(0) || (w.axis < 0 ? w.axis + W->rank() : w.axis) != 0)))
        continue;
      if (n.inputs.size() == 3 && !n.inputs[2].empty()) {
        bias = conv_bias_values(n.inputs[2], W->dim(0), idx, producer, g);
        if (bias.empty()) continue;
      }
    } else if (k != 1) {  // per column: axis 1 of a constant 2-D B
      if (!W || W->rank() != 2 || k != W->dim(1) || (w.axis < 0 ? w.axis + 2 : w.axis) != 1) continue;
    }
    std::vector<int32_t> bias_q(bias.size());
    bool fits = true;
    for (size_t m = 0; m < bias.size(); ++m) {
      const double v = std::nearbyint(bias[m] / (static_cast<double>(x.scale_t->data<float>()[0]) *
                                                 w.scale_t->data<float>()[k == 1 ? 0 : m]));
      fits = fits && std::abs(v) <= static_cast<double>(std::numeric_limits<int32_t>::max());
      bias_q[m] = fits ? static_cast<int32_t>(v) : 0;
    }
    DType out_type = DType::kUndefined;
    if (!fits || !quantize_output(g, idx, *q, y, out_type)) continue;

    const std::string base = n.name.empty() ? n.op_type : n.name;
    const std::string xzp = x.zp_t ? x.zp : zero_point(g, idx, xt, base + "/x");
    const std::string wzp = w.zp_t ? w.zp : zero_point(g, idx, wt, base + "/w");
    std::vector<std::string> inputs = {x.value, x.scale, xzp, w.value, w.scale, wzp, y.scale, y.zp};
    if (!bias_q.empty()) {
      auto B = std::make_shared<Tensor>(DType::kInt32, Shape{static_cast<int64_t>(bias_q.size())});
      std::copy(bias_q.begin(), bias_q.end(), B->data<int32_t>());
      std::string bname = idx.fresh(base + "/bias_int32");
      g.initializers.emplace_back(bname, B);
      idx.constants[bname] = B;
      inputs.push_back(bname);
    }
    for (const auto& in : n.inputs)
      if (!in.empty()) release(in);
    for (const auto& in : inputs) ++idx.uses[in];
    n.op_type = conv ? "QLinearConv" : "QLinearMatMul";
    n.inputs = std::move(inputs);
    n.outputs[0] = q->outputs[0];
    removed[q - g.nodes.data()] = true;
    ++fused;
  }
  // Element-wise and pooling ops between per-tensor DQ and Q: Add / Mul → com.microsoft QLinearAdd /
  // QLinearMul, GlobalAveragePool → com.microsoft QLinearGlobalAveragePool, and MaxPool with the same
  // scale and zero point on both sides → MaxPool of the 8-bit values (max commutes with the monotonic
  // dequantization, so that one is exact).
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    Node& n = g.nodes[i];
    if (removed[i] || !n.domain.empty() || n.outputs.empty() || n.outputs[0].empty()) continue;
    const bool binary = (n.op_type == "Add" || n.op_type == "Mul") && n.inputs.size() == 2 && n.outputs.size() == 1;
    const bool gap = n.op_type == "GlobalAveragePool" && n.inputs.size() == 1 && n.outputs.size() == 1;
    const bool maxpool = n.op_type == "MaxPool" && n.inputs.size() == 1 &&
                         (n.outputs.size() == 1 || (n.outputs.size() == 2 && n.outputs[1].empty()));
    if (!binary && !gap && !maxpool) continue;
    Node* q = single_consumer(n.outputs[0]);
    QdqOperands a, b, y;
    if (!q || q->op_type != "QuantizeLinear" || !dequantized(n.inputs[0], a) || a.scale_t->numel() != 1) continue;
    if (binary && (!dequantized(n.inputs[1], b) || b.scale_t->numel() != 1)) continue;
    const DType at = dequantized_type(a, idx);
    if (at == DType::kUndefined || (binary && dequantized_type(b, idx) != at)) continue;
    QdqOperands probe;
    if (!qdq_operands(*q, "QuantizeLinear", idx, probe) || probe.scale_t->numel() != 1) continue;
    const DType yt = probe.zp_t ? probe.zp_t->dtype()
                     : q->has_attr("output_dtype") ? static_cast<DType>(q->attr_int("output_dtype", 2))
                                                   : DType::kUInt8;
    if (yt != at) continue;  // these kernels keep the input's 8-bit type
    if (maxpool && (a.scale_t->data<float>()[0] != probe.scale_t->data<float>()[0] ||
                    zero_point_value(a) != zero_point_value(probe)))
      continue;
    DType out_type = DType::kUndefined;
    if (!quantize_output(g, idx, *q, y, out_type)) continue;
    const std::string base = n.name.empty() ? n.op_type : n.name;
    std::vector<std::string> inputs;
    if (maxpool) {
      inputs = {a.value};
    } else {
      const std::string azp = a.zp_t ? a.zp : zero_point(g, idx, at, base + "/a");
      inputs = {a.value, a.scale, azp};
      if (binary) inputs.insert(inputs.end(), {b.value, b.scale, b.zp_t ? b.zp : zero_point(g, idx, at, base + "/b")});
      inputs.insert(inputs.end(), {y.scale, y.zp});
      n.domain = "com.microsoft";
      n.op_type = gap ? "QLinearGlobalAveragePool" : n.op_type == "Add" ? "QLinearAdd" : "QLinearMul";
      contrib_ops = true;
    }
    for (const auto& in : n.inputs)
      if (!in.empty()) release(in);
    for (const auto& in : inputs) ++idx.uses[in];
    n.inputs = std::move(inputs);
    n.outputs = {q->outputs[0]};
    removed[q - g.nodes.data()] = true;
    ++fused;
  }
  return fused;
}

// The `activation` attribute of a node a fusion made (FusedConv, MatMulAdd, DynamicQuantizeMatMul, ...).
void add_activation(Node& n, const std::string& activation) {
  Attribute a;
  a.name = "activation";
  a.type = AttrType::kString;
  a.s = activation;
  n.attributes.push_back(a);
}

// ---- Dynamic quantization: DynamicQuantizeLinear → MatMulInteger → Cast → Mul (→ Add bias) as one node ----
// What onnxruntime's quantize_dynamic makes of every MatMul: x is quantized per run, multiplied in integers with
// the constant 8-bit weights, and the product scaled back by Mul(x_scale, w_scale). The chain becomes
// com.microsoft DynamicQuantizeMatMul(x, W, w_scale, w_zero_point, bias), which rounds as the chain does.
int fuse_dynamic_quant_matmul(Graph& g, GraphIndex& idx, std::vector<bool>& removed,
                              const std::function<Node*(const std::string&)>& single_consumer) {
  const std::map<std::string, size_t> producer = producers(g, removed);
  auto produced_by = [&](const std::string& v, const char* op) -> Node* {
    auto p = producer.find(v);
    if (p == producer.end() || removed[p->second]) return nullptr;
    Node& n = g.nodes[p->second];
    return n.op_type == op && n.domain.empty() ? &n : nullptr;
  };
  auto used_once = [&](const std::string& v) {
    auto u = idx.uses.find(v);
    return u != idx.uses.end() && u->second == 1;
  };
  auto float_constant = [&](const std::string& v, int64_t n, bool vector_only) {
    const Tensor* t = idx.constant(v);
    if (!t || t->dtype() != DType::kFloat) return false;
    if (t->numel() == 1 && !vector_only && t->rank() <= 1) return true;
    return t->rank() == 1 && t->numel() == n;
  };
  int fused = 0;
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    Node& mm = g.nodes[i];
    if (removed[i] || mm.op_type != "MatMulInteger" || !mm.domain.empty() || mm.inputs.size() < 3 ||
        mm.outputs.size() != 1)
      continue;
    Node* dq = produced_by(mm.inputs[0], "DynamicQuantizeLinear");
    if (!dq || dq->outputs.size() != 3 || dq->inputs.size() != 1 || mm.inputs[0] != dq->outputs[0] ||
        mm.inputs[2] != dq->outputs[2] || !used_once(dq->outputs[0]) || !used_once(dq->outputs[1]) ||
        !used_once(dq->outputs[2]))
      continue;
    const Tensor* W = idx.constant(mm.inputs[1]);
    if (!W || W->rank() != 2 || (W->dtype() != DType::kUInt8 && W->dtype() != DType::kInt8)) continue;
    const int64_t N = W->dim(1);
    const std::string wzp = mm.inputs.size() > 3 ? mm.inputs[3] : std::string();
    if (!wzp.empty()) {
      const Tensor* z = idx.constant(wzp);
      if (!z || z->dtype() != W->dtype() || !(z->numel() == 1 || (z->rank() == 1 && z->numel() == N))) continue;
    }
    Node* cast = single_consumer(mm.outputs[0]);
    if (!cast || cast->op_type != "Cast" || !cast->domain.empty() || cast->outputs.size() != 1 ||
        cast->attr_int("to", 0) != static_cast<int64_t>(DType::kFloat))
      continue;
    Node* mul = single_consumer(cast->outputs[0]);
    if (!mul || mul->op_type != "Mul" || !mul->domain.empty() || mul->inputs.size() != 2 || mul->outputs.size() != 1)
      continue;
    const std::string& factor = mul->inputs[0] == cast->outputs[0] ? mul->inputs[1] : mul->inputs[0];
    Node* scales = produced_by(factor, "Mul");
    if (!scales || !used_once(factor) || scales->inputs.size() != 2) continue;
    const bool scale_first = scales->inputs[0] == dq->outputs[1];
    if (!scale_first && scales->inputs[1] != dq->outputs[1]) continue;
    const std::string& w_scale = scale_first ? scales->inputs[1] : scales->inputs[0];
    if (!float_constant(w_scale, N, false)) continue;
    std::string bias, out = mul->outputs[0];
    Node* add = single_consumer(out);
    if (add && add->op_type == "Add" && add->domain.empty() && add->inputs.size() == 2 && add->outputs.size() == 1) {
      const std::string& other = add->inputs[0] == out ? add->inputs[1] : add->inputs[0];
      if (float_constant(other, N, true)) {
        bias = other;
        out = add->outputs[0];
        removed[add - g.nodes.data()] = true;
      }
    }
    // A Relu after the layer (the hidden layers of an MLP) is applied to each finished row: one node and one pass
    // over the output less (the quantized MLP at batch 1 runs in about 17 us, of which each node costs ~1).
    Node* relu = single_consumer(out);
    const bool with_relu = relu && relu->op_type == "Relu" && relu->domain.empty() && relu->inputs.size() == 1 &&
                           relu->outputs.size() == 1;
    if (with_relu) {
      out = relu->outputs[0];
      removed[relu - g.nodes.data()] = true;
    }
    const std::string x = dq->inputs[0];
    mm.domain = "com.microsoft";
    mm.op_type = "DynamicQuantizeMatMul";
    mm.inputs = {x, mm.inputs[1], w_scale, wzp};
    if (!bias.empty()) mm.inputs.push_back(bias);
    mm.outputs = {out};
    if (with_relu) add_activation(mm, "Relu");
    removed[dq - g.nodes.data()] = true;
    removed[cast - g.nodes.data()] = true;
    removed[mul - g.nodes.data()] = true;
    removed[scales - g.nodes.data()] = true;
    ++fused;
  }
  return fused;
}

// ---- GELU written out: x * 0.5 * (1 + erf(x / sqrt(2))) (how exporters write it) as com.microsoft Gelu ----
// Accepted: Erf of Div(x, sqrt 2) or Mul(x, 1 / sqrt 2); Add of 1; then Mul by x and Mul by 0.5 in either
// order (Mul(Mul(x, e), 0.5) or Mul(Mul(x, 0.5), e)). Every intermediate value must have this chain as its
// only reader; the constants are float scalars within float rounding of their values.
int fuse_gelu(Graph& g, GraphIndex& idx, std::vector<bool>& removed,
              const std::function<Node*(const std::string&)>& single_consumer) {
  const std::map<std::string, size_t> producer = producers(g, removed);
  auto scalar = [&](const std::string& v, double want) {
    const Tensor* t = idx.constant(v);
    return t && t->dtype() == DType::kFloat && t->numel() == 1 &&
           std::abs(static_cast<double>(t->data<float>()[0]) - want) <= 1e-6 * std::abs(want);
  };
  auto plain = [](const Node* n, const char* op, size_t ins) {
    return n && n->op_type == op && n->domain.empty() && n->inputs.size() == ins && n->outputs.size() == 1;
  };
  // the operand of a binary node that is not `v`
  auto other = [](const Node& n, const std::string& v) -> const std::string& {
    return n.inputs[0] == v ? n.inputs[1] : n.inputs[0];
  };
  int fused = 0;
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    Node& erf = g.nodes[i];
    if (removed[i] || !plain(&erf, "Erf", 1)) continue;
    auto pi = producer.find(erf.inputs[0]);
    if (pi == producer.end() || removed[pi->second]) continue;
    Node& scale = g.nodes[pi->second];
    std::string x;
    if (plain(&scale, "Div", 2) && scalar(scale.inputs[1], std::sqrt(2.0))) x = scale.inputs[0];
    else if (plain(&scale, "Mul", 2) && scalar(other(scale, scale.inputs[0]), std::sqrt(0.5))) x = scale.inputs[0];
    else if (plain(&scale, "Mul", 2) && scalar(scale.inputs[0], std::sqrt(0.5))) x = scale.inputs[1];
    if (x.empty() || single_consumer(scale.outputs[0]) != &erf) continue;
    Node* add = single_consumer(erf.outputs[0]);
    if (!plain(add, "Add", 2) || !scalar(other(*add, erf.outputs[0]), 1.0)) continue;
    Node* m1 = single_consumer(add->outputs[0]);
    if (!plain(m1, "Mul", 2)) continue;
    const std::string& f = other(*m1, add->outputs[0]);
    Node* half = nullptr;  // Mul(x, 0.5) feeding m1, in the second order
    Node* last = nullptr;  // the node whose output is the GELU
    if (f == x) {
      last = single_consumer(m1->outputs[0]);
      if (!plain(last, "Mul", 2) || !scalar(other(*last, m1->outputs[0]), 0.5)) continue;
    } else {
      auto ph = producer.find(f);
      if (ph == producer.end() || removed[ph->second]) continue;
      half = &g.nodes[ph->second];
      if (!plain(half, "Mul", 2) || (half->inputs[0] != x && half->inputs[1] != x) ||
          !scalar(half->inputs[0] == x ? half->inputs[1] : half->inputs[0], 0.5) ||
          single_consumer(half->outputs[0]) != m1)
        continue;
      last = m1;
    }
    const std::string out = last->outputs[0];
    erf.domain = "com.microsoft";
    erf.op_type = "Gelu";
    erf.inputs = {x};
    --idx.uses[x];  // read by the scale and by one Mul of the chain before, by the Gelu alone now
    idx.consumer[x] = i;
    erf.outputs = {out};
    for (Node* n : {&scale, add, m1, half, last})
      if (n && n != &erf) removed[n - g.nodes.data()] = true;
    ++fused;
  }
  return fused;
}

// ---- LayerNormalization written out (exporters before opset 17) ----
// m = ReduceMean(x), d = Sub(x, m), v = ReduceMean(Pow(d, 2)), y = Div(d, Sqrt(Add(v, eps))), then Mul by a
// constant scale and optionally Add of a constant bias, both reductions over the last axis only (keepdims), as
// one LayerNormalization(x, scale[, bias], axis -1, epsilon eps): its statistics in double, one pass to write y
// instead of eight elementwise passes and two reductions. d is read by the Pow and the Div alone, every other
// value by the next node alone; the scale and bias are float vectors of the last axis's length (known from the
// static shapes, or from the scale itself when it is longer than 1, which a broadcast against the last axis
// needs to be).
int fuse_layernorm(Graph& g, GraphIndex& idx, std::vector<bool>& removed,
                   const std::function<Node*(const std::string&)>& single_consumer,
                   const std::map<std::string, Shape>& shapes) {
  auto plain = [](const Node* n, const char* op) {
    return n && n->op_type == op && n->domain.empty() && n->outputs.size() == 1;
  };
  auto scalar = [&](const std::string& v, float& out) {
    const Tensor* t = idx.constant(v);
    if (!t || t->dtype() != DType::kFloat || t->numel() != 1) return false;
    out = t->data<float>()[0];
    return true;
  };
  // a ReduceMean of v over its last axis only, keeping it (v of x's shape: x's rank tells which axis is the last)
  auto mean_of_last = [&](const Node* n, const std::string& v, const std::string& x) {
    if (!plain(n, "ReduceMean") || n->inputs.empty() || n->inputs[0] != v || n->attr_int("keepdims", 1) == 0)
      return false;
    std::vector<int64_t> axes = n->attr_ints("axes");
    if (n->inputs.size() > 1 && !n->inputs[1].empty()) {
      const Tensor* a = idx.constant(n->inputs[1]);
      if (!a || a->dtype() != DType::kInt64) return false;
      axes = a->to_int64_vector();
    }
    if (axes.size() != 1) return false;
    if (axes[0] == -1) return true;
    auto s = shapes.find(x);
    return s != shapes.end() && axes[0] == static_cast<int64_t>(s->second.size()) - 1;
  };
  // a constant float vector that broadcasts against x's last axis as LayerNormalization's scale or bias does
  auto last_axis_vector = [&](const std::string& v, const std::string& x) {
    const Tensor* t = idx.constant(v);
    if (!t || t->dtype() != DType::kFloat || t->rank() != 1) return false;
    auto s = shapes.find(x);
    if (s != shapes.end() && !s->second.empty()) return s->second.back() == t->dim(0);
    return t->dim(0) > 1;
  };
  auto other = [](const Node& n, const std::string& v) -> const std::string& {
    return n.inputs[0] == v ? n.inputs[1] : n.inputs[0];
  };
  int fused = 0;
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    Node& mean = g.nodes[i];
    if (removed[i] || !plain(&mean, "ReduceMean") || mean.inputs.empty()) continue;
    const std::string x = mean.inputs[0];
    if (!mean_of_last(&mean, x, x)) continue;
    Node* sub = single_consumer(mean.outputs[0]);
    if (!plain(sub, "Sub") || sub->inputs.size() != 2 || sub->inputs[0] != x || sub->inputs[1] != mean.outputs[0])
      continue;
    const std::string d = sub->outputs[0];
    auto du = idx.uses.find(d);
    if (du == idx.uses.end() || du->second != 2) continue;
    Node* pow = nullptr;
    Node* div = nullptr;
    for (Node& n : g.nodes) {
      if (removed[static_cast<size_t>(&n - g.nodes.data())] || n.inputs.empty()) continue;
      if (plain(&n, "Pow") && n.inputs.size() == 2 && n.inputs[0] == d) pow = &n;
      else if (plain(&n, "Div") && n.inputs.size() == 2 && n.inputs[0] == d) div = &n;
    }
    float two = 0.f, eps = 0.f;
    if (!pow || !div || !scalar(pow->inputs[1], two) || two != 2.f) continue;
    Node* var = single_consumer(pow->outputs[0]);
    if (!mean_of_last(var, pow->outputs[0], x)) continue;
    Node* add = single_consumer(var->outputs[0]);
    if (!plain(add, "Add") || add->inputs.size() != 2 || !scalar(other(*add, var->outputs[0]), eps) || !(eps >= 0.f))
      continue;
    Node* sqrt = single_consumer(add->outputs[0]);
    if (!plain(sqrt, "Sqrt") || single_consumer(sqrt->outputs[0]) != div || div->inputs[1] != sqrt->outputs[0]) continue;
    Node* mul = single_consumer(div->outputs[0]);
    if (!plain(mul, "Mul") || mul->inputs.size() != 2 || !last_axis_vector(other(*mul, div->outputs[0]), x)) continue;
    const std::string scale = other(*mul, div->outputs[0]);
    Node* last = mul;
    std::string bias;
    if (Node* b = single_consumer(mul->outputs[0]);
        plain(b, "Add") && b->inputs.size() == 2 && last_axis_vector(other(*b, mul->outputs[0]), x)) {
      bias = other(*b, mul->outputs[0]);
      last = b;
    }
    const std::string out = last->outputs[0];
    mean.op_type = "LayerNormalization";
    mean.inputs = {x, scale};
    if (!bias.empty()) mean.inputs.push_back(bias);
    mean.outputs = {out};
    mean.attributes.clear();
    Attribute axis, epsilon;
    axis.name = "axis";
    axis.type = AttrType::kInt;
    axis.i = -1;
    epsilon.name = "epsilon";
    epsilon.type = AttrType::kFloat;
    epsilon.f = eps;
    mean.attributes = {axis, epsilon};
    --idx.uses[x];  // read by the mean and the Sub before, by the LayerNormalization alone now
    idx.consumer[x] = i;
    idx.consumer[scale] = i;
    if (!bias.empty()) idx.consumer[bias] = i;
    for (Node* n : {sub, pow, var, add, sqrt, div, mul, last})
      if (n != &mean) removed[static_cast<size_t>(n - g.nodes.data())] = true;
    ++fused;
  }
  return fused;
}

// ---- Attention scores: MatMul(A, Transpose(B)) / c (or * c) as one com.microsoft FusedMatMul ----
// An exported attention computes Q K^T / sqrt(d) as a Transpose of K swapping its last two axes, a MatMul and a
// Div (or Mul) by a float scalar: FusedMatMul(Q, K, transB 1, alpha 1 / c (or c)) reads K transposed inside the
// GEMM and scales the products on their way out, without the transposed copy of K and the pass of the Div. The
// float scalar is what tells the MatMul is a float one (FusedMatMul's only type); A must have two dimensions at
// least (a Transpose's output, or a static shape), as FusedMatMul needs. Without the Transpose, the scale alone.
int fuse_scaled_matmul(Graph& g, GraphIndex& idx, std::vector<bool>& removed,
                       const std::function<Node*(const std::string&)>& single_consumer,
                       const std::map<std::string, Shape>& shapes) {
  const std::map<std::string, size_t> producer = producers(g, removed);
  auto made_by = [&](const std::string& v) -> Node* {
    auto p = producer.find(v);
    return p == producer.end() || removed[p->second] ? nullptr : &g.nodes[p->second];
  };
  // a Transpose that swaps the last two axes and keeps the others
  auto swaps_last_two = [](const Node* t) {
    if (!t || t->op_type != "Transpose" || !t->domain.empty() || t->inputs.size() != 1 || t->outputs.size() != 1)
      return false;
    const std::vector<int64_t> perm = t->attr_ints("perm");
    const size_t r = perm.size();
    if (r < 2 || perm[r - 2] != static_cast<int64_t>(r) - 1 || perm[r - 1] != static_cast<int64_t>(r) - 2) return false;
    for (size_t k = 0; k + 2 < r; ++k)
      if (perm[k] != static_cast<int64_t>(k)) return false;
    return true;
  };
  auto rank_at_least_2 = [&](const std::string& v) {
    const Node* p = made_by(v);
    if (p && p->op_type == "Transpose" && p->domain.empty() && p->attr_ints("perm").size() >= 2) return true;
    auto s = shapes.find(v);
    return s != shapes.end() && s->second.size() >= 2;
  };
  int fused = 0;
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    Node& mm = g.nodes[i];
    if (removed[i] || mm.op_type != "MatMul" || !mm.domain.empty() || mm.inputs.size() != 2 || mm.outputs.size() != 1)
      continue;
    Node* scale = single_consumer(mm.outputs[0]);
    if (!scale || !scale->domain.empty() || scale->inputs.size() != 2 || scale->outputs.size() != 1 ||
        (scale->op_type != "Div" && scale->op_type != "Mul"))
      continue;
    const bool div = scale->op_type == "Div";
    if (div && scale->inputs[0] != mm.outputs[0]) continue;  // (c / MatMul is no scale of it)
    const std::string& c_name = scale->inputs[0] == mm.outputs[0] ? scale->inputs[1] : scale->inputs[0];
    const Tensor* c = idx.constant(c_name);
    if (!c || c->dtype() != DType::kFloat || c->numel() != 1 || c->rank() > 2 || c->data<float>()[0] == 0.f ||
        !std::isfinite(c->data<float>()[0]) || !rank_at_least_2(mm.inputs[0]))
      continue;
    Node* t = made_by(mm.inputs[1]);
    const bool trans_b = swaps_last_two(t) && single_consumer(t->outputs[0]) == &mm;
    if (!trans_b && !rank_at_least_2(mm.inputs[1])) continue;
    const float alpha = div ? 1.f / c->data<float>()[0] : c->data<float>()[0];
    if (trans_b) {
      mm.inputs[1] = t->inputs[0];
      idx.consumer[mm.inputs[1]] = i;
      removed[static_cast<size_t>(t - g.nodes.data())] = true;
    }
    mm.outputs[0] = scale->outputs[0];
    removed[static_cast<size_t>(scale - g.nodes.data())] = true;
    mm.domain = "com.microsoft";
    mm.op_type = "FusedMatMul";
    Attribute a, tb;
    a.name = "alpha";
    a.type = AttrType::kFloat;
    a.f = alpha;
    tb.name = "transB";
    tb.type = AttrType::kInt;
    tb.i = trans_b ? 1 : 0;
    mm.attributes = {a, tb};
    ++fused;
  }
  return fused;
}

}  // namespace

// ---- MatMul → Add of a constant vector (→ Gelu) (→ Add of a residual): one ai.mosaicrt MatMulAdd ----
// Every projection of an exported transformer is MatMul(x, W) + b, its feed-forward layer's first one is followed
// by Gelu (written out: fused as com.microsoft Gelu before this) and its output projections add the residual.
// MatMulAdd(A, B, C[, Z]) with activation "Gelu" or none takes the sum, the Gelu and the residual sum on each
// finished tile of the GEMM while it is in cache, in the unfused graph's order, with the same arithmetic; the
// nodes and their passes over the activations go. B must be a constant float matrix and C a constant float
// tensor of B's N values whose broadcast cannot change the output's shape ([N], or [1, ..., 1, N] of at most the
// output's rank).
int fuse_matmul_add(Graph& g, GraphIndex& idx, std::vector<bool>& removed,
                    const std::function<Node*(const std::string&)>& single_consumer,
                    const std::map<std::string, Shape>& shapes) {
  int fused = 0;
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    Node& mm = g.nodes[i];
    if (removed[i] || !mm.domain.empty() || mm.op_type != "MatMul" || mm.inputs.size() != 2 ||
        mm.outputs.size() != 1 || mm.inputs[0].empty())
      continue;
    const Tensor* B = idx.constant(mm.inputs[1]);
    if (!B || B->dtype() != DType::kFloat || B->rank() != 2) continue;
    Node* add = single_consumer(mm.outputs[0]);
    if (!add || !add->domain.empty() || add->op_type != "Add" || add->inputs.size() != 2 || add->outputs.size() != 1 ||
        add->inputs[0] == add->inputs[1])
      continue;
    const std::string& bias = add->inputs[0] == mm.outputs[0] ? add->inputs[1] : add->inputs[0];
    const Tensor* C = idx.constant(bias);
    if (!C || C->dtype() != DType::kFloat || C->rank() < 1 || C->numel() != B->dim(1) || C->dim(C->rank() - 1) != B->dim(1))
      continue;
    if (C->rank() > 1) {  // leading 1s only, and no more of them than the output has dimensions
      auto out = shapes.find(mm.outputs[0]);
      const Shape& cs = C->shape();
      if (out == shapes.end() || cs.size() > out->second.size() ||
          !std::all_of(cs.begin(), cs.end() - 1, [](int64_t d) { return d == 1; }))
        continue;
    }
    mm.inputs.push_back(bias);
    mm.outputs[0] = add->outputs[0];
    removed[static_cast<size_t>(add - g.nodes.data())] = true;
    if (Node* act = single_consumer(mm.outputs[0]); act && act->domain == "com.microsoft" && act->op_type == "Gelu" &&
                                                     act->inputs.size() == 1 && act->outputs.size() == 1) {
      add_activation(mm, "Gelu");
      mm.outputs[0] = act->outputs[0];
      removed[static_cast<size_t>(act - g.nodes.data())] = true;
    }
    idx.consumer[bias] = i;
    if (Node* res = single_consumer(mm.outputs[0]);
        res && is_residual_add(*res, mm.outputs[0], shapes, /*unless_unknown=*/true)) {
      mm.inputs.push_back(res->inputs[0] == mm.outputs[0] ? res->inputs[1] : res->inputs[0]);
      idx.consumer[mm.inputs.back()] = i;
      mm.outputs[0] = res->outputs[0];
      removed[static_cast<size_t>(res - g.nodes.data())] = true;
    }
    mm.domain = "ai.mosaicrt";
    mm.op_type = "MatMulAdd";
    ++fused;
  }
  return fused;
}

// ---- Pre-activation: BatchNormalization → Relu → Conv (DenseNet's layers, pre-activation ResNets) ----
// The BN's per-channel scale and shift and the Relu move into the Conv as its input stage: an ai.mosaicrt
// FusedConv (com.microsoft FusedConv's inputs and epilogue, plus inputs 4 and 5, a scale and a shift per input
// channel) reads relu(x * scale + shift) where the Conv read the Relu's output. The two passes over the
// activations and the tensor between them go; a 1x1 convolution applies the stage while it packs its input.
int fuse_preactivation(Graph& g, GraphIndex& idx, std::vector<bool>& removed,
                       const std::function<Node*(const std::string&)>& single_consumer) {
  const std::map<std::string, size_t> producer = producers(g, removed);
  auto made_by = [&](const std::string& value, const char* op) -> Node* {
    auto it = producer.find(value);
    if (it == producer.end()) return nullptr;
    Node& n = g.nodes[it->second];
    return n.domain.empty() && n.op_type == op && n.outputs.size() >= 1 && n.outputs[0] == value ? &n : nullptr;
  };
  int fused = 0;
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    Node& conv = g.nodes[i];
    const bool plain = conv.domain.empty() && conv.op_type == "Conv";
    if (removed[i] || conv.inputs.size() < 2 || conv.inputs.size() > 4 ||
        !(plain || (conv.domain == "com.microsoft" && conv.op_type == "FusedConv")))
      continue;
    const Tensor* W = idx.constant(conv.inputs[1]);
    if (!W || W->dtype() != DType::kFloat || W->rank() < 3) continue;
    Node* relu = made_by(conv.inputs[0], "Relu");
    if (!relu || relu->inputs.empty() || single_consumer(relu->outputs[0]) != &conv) continue;
    Node* bn = made_by(relu->inputs[0], "BatchNormalization");
    if (!bn || bn->inputs.empty() || single_consumer(bn->outputs[0]) != relu) continue;
    const int64_t C = W->dim(1) * conv.attr_int("group", 1);
    BatchNormParams bp;
    if (!inference_batchnorm(*bn, idx, C, bp)) continue;
    // the BatchNormalization kernel's own arithmetic: a = scale / sqrt(var + eps), b = bias - mean * a
    std::vector<float> a(static_cast<size_t>(C)), b(static_cast<size_t>(C));
    for (int64_t c = 0; c < C; ++c) {
      const double inv = 1.0 / std::sqrt(static_cast<double>(bp.var->data<float>()[c]) + static_cast<double>(bp.eps));
      const double sc = bp.scale->data<float>()[c];
      a[static_cast<size_t>(c)] = static_cast<float>(sc * inv);
      b[static_cast<size_t>(c)] = static_cast<float>(bp.bias->data<float>()[c] - bp.mean->data<float>()[c] * sc * inv);
    }
    const std::string base = conv.name.empty() ? std::string("conv") : conv.name;
    const std::string an = idx.fresh(base + "/input_scale"), bn_name = idx.fresh(base + "/input_shift");
    for (const auto& [name, v] : {std::make_pair(an, &a), std::make_pair(bn_name, &b)}) {
      auto t = float_vector(*v);
      g.initializers.emplace_back(name, t);
      idx.constants[name] = t;
    }
    conv.inputs[0] = bn->inputs[0];
    conv.inputs.resize(4);
    conv.inputs.push_back(an);
    conv.inputs.push_back(bn_name);
    if (plain) add_activation(conv, "Identity");
    conv.domain = "ai.mosaicrt";
    conv.op_type = "FusedConv";
    removed[static_cast<size_t>(bn - g.nodes.data())] = true;
    removed[static_cast<size_t>(relu - g.nodes.data())] = true;
    ++fused;
  }
  return fused;
}

int optimization_level(const std::map<std::string, std::string>& config) {
  auto it = config.find("session.graph_optimization_level");
  if (it == config.end()) return kOptAll;
  try {
    return std::stoi(it->second);
  } catch (const std::exception&) {
    return kOptAll;
  }
}

// A float scalar initializer (Clip's min / max inputs).
bool float_scalar(const GraphIndex& idx, const std::string& name, float& value) {
  const Tensor* t = idx.constant(name);
  if (!t || t->dtype() != DType::kFloat || t->numel() != 1) return false;
  value = *t->data<float>();
  return true;
}

// The activations com.microsoft FusedConv applies in its epilogue, as its `activation` and
// `activation_params` attributes: Relu, Tanh, Sigmoid, LeakyRelu (alpha), HardSigmoid (alpha, beta) and Clip
// (min, max: attributes before opset 11, constant scalar inputs from it; absent bounds are infinite).
bool fusable_activation(const Node& act, const GraphIndex& idx, int64_t opset, std::string& name,
                        std::vector<float>& params) {
  const std::string& op = act.op_type;
  if (op == "Relu" || op == "Tanh" || op == "Sigmoid") {
    name = op;
    return true;
  }
  if (op == "LeakyRelu") {
    name = op;
    params = {act.attr_float("alpha", 0.01f)};
    return true;
  }
  if (op == "HardSigmoid") {
    name = op;
    params = {act.attr_float("alpha", 0.2f), act.attr_float("beta", 0.5f)};
    return true;
  }
  if (op == "Clip") {
    constexpr float inf = std::numeric_limits<float>::infinity();
    float lo = -inf, hi = inf;
    if (opset < 11) {
      lo = act.attr_float("min", -std::numeric_limits<float>::max());
      hi = act.attr_float("max", std::numeric_limits<float>::max());
    } else {
      if (act.inputs.size() > 1 && !act.inputs[1].empty() && !float_scalar(idx, act.inputs[1], lo)) return false;
      if (act.inputs.size() > 2 && !act.inputs[2].empty() && !float_scalar(idx, act.inputs[2], hi)) return false;
    }
    name = op;
    params = {lo, hi};
    return true;
  }
  return false;
}

// A Dropout's mask and a MaxPool's Indices (optional outputs) that no node, subgraph or graph output reads are
// dropped from the node, so that its kernel does not make them: an inference Dropout passes its input through
// without a copy, but filled its mask with ones on every run (a pass over a tensor of the activations' size).
int drop_unread_optional_outputs(Graph& g, const GraphIndex& idx) {
  int dropped = 0;
  for (Node& n : g.nodes) {
    if (!n.domain.empty() || (n.op_type != "Dropout" && n.op_type != "MaxPool")) continue;
    for (size_t i = 1; i < n.outputs.size(); ++i) {
      if (n.outputs[i].empty() || idx.uses.count(n.outputs[i])) continue;
      n.outputs[i].clear();
      ++dropped;
    }
  }
  return dropped;
}

GraphOptimizerStats optimize_graph(Model& model, int level, ThreadPool& pool) {
  GraphOptimizerStats stats;
  if (level <= kOptDisabled) return stats;
  Graph& g = model.graph;
  auto onnx_opset = model.opsets.find("");
  if (onnx_opset == model.opsets.end()) return stats;
  stats.folding = fold_constants(model, pool);
  GraphIndex idx(model);
  stats.unread_outputs_dropped = drop_unread_optional_outputs(g, idx);
  // Static shapes, for the rewrites that need ranks or equal shapes.
  const std::map<std::string, Shape> shapes =
      static_shapes(g, topological_order(g), [&](const std::string& name) { return idx.constant(name); });
  std::vector<bool> removed(g.nodes.size(), false);
  auto single_consumer = [&](const std::string& value) -> Node* {
    auto u = idx.uses.find(value);
    auto c = idx.consumer.find(value);
    if (u == idx.uses.end() || u->second != 1 || c == idx.consumer.end() || removed[c->second]) return nullptr;
    return &g.nodes[c->second];
  };
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    Node& n = g.nodes[i];
    if (removed[i] || n.op_type != "BatchNormalization" || !n.domain.empty() || n.outputs.empty()) continue;
    auto x = shapes.find(n.inputs.empty() ? std::string() : n.inputs[0]);
    while (Node* op = single_consumer(n.outputs[0])) {
      if (x == shapes.end() || !fold_bn_affine(g, idx, n, *op, x->second.size())) break;
      removed[op - g.nodes.data()] = true;
      ++stats.affines_folded;
    }
  }
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    Node& n = g.nodes[i];
    if (removed[i] || n.op_type != "Conv" || !n.domain.empty() || n.outputs.size() != 1) continue;
    // BN and per-channel Mul/Add in any order: fold until the next consumer is neither.
    while (Node* next = single_consumer(n.outputs[0])) {
      if (next->op_type == "BatchNormalization" && next->domain.empty() && fold_batchnorm(g, idx, n, *next)) {
        ++stats.batchnorms_folded;
      } else if (fold_conv_affine(g, idx, n, *next)) {
        ++stats.affines_folded;
      } else {
        break;
      }
      removed[next - g.nodes.data()] = true;
    }
    if (level < kOptExtended) continue;
    const Tensor* W = n.inputs.size() > 1 ? idx.constant(n.inputs[1]) : nullptr;
    if (!W || W->dtype() != DType::kFloat) continue;
    bool fused = false;
    // Residual: Conv → Add/Sum(conv, z) with z of exactly the output's shape, or of a shape not known
    // here → FusedConv(x, W, B, z): the sum is taken while the Conv's output is in cache (when z turns out
    // to have another shape, FusedConv adds it with broadcasting after the convolution).
    if (Node* add = single_consumer(n.outputs[0]);
        add && is_residual_add(*add, n.outputs[0], shapes, /*unless_unknown=*/true)) {
      const std::string& z = add->inputs[0] == n.outputs[0] ? add->inputs[1] : add->inputs[0];
      n.inputs.resize(3);
      n.inputs.push_back(z);
      n.outputs[0] = add->outputs[0];
      removed[add - g.nodes.data()] = true;
      ++stats.residual_adds_fused;
      fused = true;
    }
    std::string activation;
    std::vector<float> activation_params;
    if (Node* act = single_consumer(n.outputs[0]);
        act && act->domain.empty() && act->outputs.size() == 1 && !act->outputs[0].empty() &&
        fusable_activation(*act, idx, onnx_opset->second, activation, activation_params)) {
      n.outputs[0] = act->outputs[0];
      removed[act - g.nodes.data()] = true;
      ++stats.activations_fused;
      fused = true;
    }
    if (!fused) continue;
    n.domain = "com.microsoft";
    n.op_type = "FusedConv";
    add_activation(n, activation.empty() ? "Identity" : activation);
    if (!activation_params.empty()) {
      Attribute params;
      params.name = "activation_params";
      params.type = AttrType::kFloats;
      params.floats = activation_params;
      n.attributes.push_back(params);
    }
  }
  bool qdq_contrib_ops = false;
  if (level >= kOptExtended) {
    stats.qdq_groups_fused = fuse_qdq(g, idx, removed, single_consumer, qdq_contrib_ops);
    stats.dynamic_matmuls_fused = fuse_dynamic_quant_matmul(g, idx, removed, single_consumer);
    stats.gelus_fused = fuse_gelu(g, idx, removed, single_consumer);
    stats.layernorms_fused = fuse_layernorm(g, idx, removed, single_consumer, shapes);
    stats.scaled_matmuls_fused = fuse_scaled_matmul(g, idx, removed, single_consumer, shapes);
    stats.preactivations_fused = fuse_preactivation(g, idx, removed, single_consumer);
    stats.matmul_adds_fused = fuse_matmul_add(g, idx, removed, single_consumer, shapes);
    qdq_contrib_ops = qdq_contrib_ops || stats.dynamic_matmuls_fused > 0 || stats.gelus_fused > 0 ||
                      stats.scaled_matmuls_fused > 0;
  }
  if (stats.batchnorms_folded + stats.activations_fused + stats.residual_adds_fused + stats.affines_folded +
          stats.qdq_groups_fused + stats.dynamic_matmuls_fused + stats.gelus_fused + stats.layernorms_fused +
          stats.scaled_matmuls_fused +
          stats.preactivations_fused +
          stats.matmul_adds_fused !=
      0) {
    std::vector<Node> kept;
    for (size_t i = 0; i < g.nodes.size(); ++i)
      if (!removed[i]) kept.push_back(std::move(g.nodes[i]));
    g.nodes = std::move(kept);
    if (stats.activations_fused || stats.residual_adds_fused || qdq_contrib_ops) {
      auto it = model.opsets.find("com.microsoft");
      if (it == model.opsets.end()) model.opsets["com.microsoft"] = 1;
    }
    if ((stats.preactivations_fused || stats.matmul_adds_fused) && !model.opsets.count("ai.mosaicrt"))
      model.opsets["ai.mosaicrt"] = 1;
  }
  // What stays of the quantized patterns: constant weights dequantized once, not per run.
  if (std::any_of(g.nodes.begin(), g.nodes.end(), [](const Node& n) {
        return n.domain.empty() && (n.op_type == "DequantizeLinear" || n.op_type == "QuantizeLinear");
      })) {
    const ConstantFoldingStats late = fold_constants(model, pool, /*quantize_ops=*/true);
    stats.folding.nodes_folded += late.nodes_folded;
    stats.folding.shapes_folded += late.shapes_folded;
  }
  drop_unread_initializers(g);  // the weights BatchNormalization folding replaced
  return stats;
}

}  // namespace mrt
