#include "graph_optimizer.h"

#include "type_inference.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <set>

namespace mrt {

namespace {

struct GraphIndex {
  std::map<std::string, int> uses;  // consumer count, graph outputs included
  std::map<std::string, std::shared_ptr<Tensor>> constants;  // initializers no graph input overrides
  std::set<std::string> names;

  explicit GraphIndex(Model& m) {
    Graph& g = m.graph;
    const std::set<std::string> overridable = overridable_initializers(m);
    for (auto& [name, t] : g.initializers) {
      names.insert(name);
      if (!overridable.count(name)) constants[name] = t;
    }
    for (const auto& n : g.nodes) {
      for (const auto& i : n.inputs)
        if (!i.empty()) ++uses[i];
      for (const auto& o : n.outputs) names.insert(o);
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

// Conv(W, B?) → BatchNormalization: returns true when folded.
bool fold_batchnorm(Graph& g, GraphIndex& idx, Node& conv, Node& bn) {
  // Inference form only: one output, the training statistics outputs absent.
  if (bn.outputs.empty() || bn.outputs[0].empty() ||
      !std::all_of(bn.outputs.begin() + 1, bn.outputs.end(), [](const std::string& s) { return s.empty(); }))
    return false;
  if (bn.attr_int("training_mode", 0) != 0 || bn.inputs.size() != 5 || conv.inputs.size() < 2) return false;
  if (bn.has_attr("spatial") && bn.attr_int("spatial", 1) != 1) return false;
  const Tensor* W = idx.constant(conv.inputs[1]);
  if (!W || W->dtype() != DType::kFloat || W->rank() < 3) return false;
  int64_t M = W->dim(0);
  const Tensor* B = conv.inputs.size() > 2 && !conv.inputs[2].empty() ? idx.constant(conv.inputs[2]) : nullptr;
  if (conv.inputs.size() > 2 && !conv.inputs[2].empty() && !is_float_vector(B, M)) return false;
  const Tensor* scale = idx.constant(bn.inputs[1]);
  const Tensor* bias = idx.constant(bn.inputs[2]);
  const Tensor* mean = idx.constant(bn.inputs[3]);
  const Tensor* var = idx.constant(bn.inputs[4]);
  if (!is_float_vector(scale, M) || !is_float_vector(bias, M) || !is_float_vector(mean, M) || !is_float_vector(var, M))
    return false;
  float eps = bn.attr_float("epsilon", 1e-5f);
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

bool same_type_and_shape(const ValueInfo* a, const ValueInfo* b) {
  if (!a || !b || !a->has_shape || !b->has_shape || a->elem_type != b->elem_type || a->dims.size() != b->dims.size())
    return false;
  for (size_t i = 0; i < a->dims.size(); ++i) {
    const Dim &x = a->dims[i], &y = b->dims[i];
    const bool same = (x.value >= 0 && x.value == y.value) || (x.value < 0 && y.value < 0 && !x.param.empty() &&
                                                               x.param == y.param);
    if (!same) return false;
  }
  return true;
}

// add = Add(value, z) or Sum(value, z) (either order), float, where z and the sum have the
// same shape as `value`: adding z is then exactly FusedConv's residual input.
bool is_residual_add(const Node& add, const std::string& value, const std::map<std::string, ValueInfo>& shapes) {
  if (!add.domain.empty() || (add.op_type != "Add" && add.op_type != "Sum") || add.inputs.size() != 2 ||
      add.outputs.size() != 1 || add.outputs[0].empty() || add.inputs[0] == add.inputs[1])
    return false;
  const std::string& z = add.inputs[0] == value ? add.inputs[1] : add.inputs[0];
  if (z.empty()) return false;
  auto info = [&](const std::string& name) -> const ValueInfo* {
    auto it = shapes.find(name);
    return it == shapes.end() ? nullptr : &it->second;
  };
  const ValueInfo* v = info(value);
  return v && v->elem_type == DType::kFloat && same_type_and_shape(v, info(z)) &&
         same_type_and_shape(v, info(add.outputs[0]));
}

}  // namespace

int optimization_level(const std::map<std::string, std::string>& config) {
  auto it = config.find("session.graph_optimization_level");
  if (it == config.end()) return kOptAll;
  try {
    return std::stoi(it->second);
  } catch (const std::exception&) {
    return kOptAll;
  }
}

GraphOptimizerStats optimize_graph(Model& model, int level, ThreadPool& pool) {
  GraphOptimizerStats stats;
  if (level <= kOptDisabled) return stats;
  Graph& g = model.graph;
  auto onnx_opset = model.opsets.find("");
  if (onnx_opset == model.opsets.end()) return stats;
  stats.folding = fold_constants(model, pool);
  GraphIndex idx(model);
  std::map<std::string, ValueInfo> shapes;  // static types/shapes, for fusions that need them
  if (level >= kOptExtended) {
    std::vector<size_t> order = topological_order(g);
    try {
      std::vector<const Node*> nodes;
      for (size_t i : order) nodes.push_back(&g.nodes[i]);
      std::vector<ValueInfo> outs = g.outputs;
      if (!order.empty()) infer_types(g, nodes, outs, &shapes);
    } catch (const std::exception&) {
      shapes.clear();  // the session reports the model's error
    }
  }
  std::map<std::string, size_t> consumer;  // meaningful for values with exactly one use
  for (size_t i = 0; i < g.nodes.size(); ++i)
    for (const auto& in : g.nodes[i].inputs)
      if (!in.empty()) consumer[in] = i;
  std::vector<bool> removed(g.nodes.size(), false);
  auto single_consumer = [&](const std::string& value) -> Node* {
    auto u = idx.uses.find(value);
    auto c = consumer.find(value);
    if (u == idx.uses.end() || u->second != 1 || c == consumer.end() || removed[c->second]) return nullptr;
    return &g.nodes[c->second];
  };
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    Node& n = g.nodes[i];
    if (removed[i] || n.op_type != "Conv" || !n.domain.empty() || n.outputs.size() != 1) continue;
    if (Node* bn = single_consumer(n.outputs[0]); bn && bn->op_type == "BatchNormalization" && bn->domain.empty()) {
      if (fold_batchnorm(g, idx, n, *bn)) {
        removed[bn - g.nodes.data()] = true;
        ++stats.batchnorms_folded;
      }
    }
    if (level < kOptExtended) continue;
    const Tensor* W = n.inputs.size() > 1 ? idx.constant(n.inputs[1]) : nullptr;
    if (!W || W->dtype() != DType::kFloat) continue;
    bool fused = false;
    // Residual: Conv → Add/Sum(conv, z) with z of exactly the output's shape (no broadcast)
    // → FusedConv(x, W, B, z): the sum is taken while the Conv's output is in cache.
    if (Node* add = single_consumer(n.outputs[0]); add && is_residual_add(*add, n.outputs[0], shapes)) {
      const std::string& z = add->inputs[0] == n.outputs[0] ? add->inputs[1] : add->inputs[0];
      n.inputs.resize(3);
      n.inputs.push_back(z);
      n.outputs[0] = add->outputs[0];
      removed[add - g.nodes.data()] = true;
      ++stats.residual_adds_fused;
      fused = true;
    }
    std::string activation;
    if (Node* act = single_consumer(n.outputs[0]);
        act && act->op_type == "Relu" && act->domain.empty() && act->outputs.size() == 1 && !act->outputs[0].empty()) {
      activation = "Relu";
      n.outputs[0] = act->outputs[0];
      removed[act - g.nodes.data()] = true;
      ++stats.activations_fused;
      fused = true;
    }
    if (!fused) continue;
    n.domain = "com.microsoft";
    n.op_type = "FusedConv";
    Attribute a;
    a.name = "activation";
    a.type = AttrType::kString;
    a.s = activation.empty() ? "Identity" : activation;
    n.attributes.push_back(a);
  }
  if (stats.batchnorms_folded == 0 && stats.activations_fused == 0 && stats.residual_adds_fused == 0) {
    if (stats.folding.nodes_folded) drop_unread_initializers(g);
    return stats;
  }
  std::vector<Node> kept;
  for (size_t i = 0; i < g.nodes.size(); ++i)
    if (!removed[i]) kept.push_back(std::move(g.nodes[i]));
  g.nodes = std::move(kept);
  if (stats.activations_fused || stats.residual_adds_fused) {
    auto it = model.opsets.find("com.microsoft");
    if (it == model.opsets.end()) model.opsets["com.microsoft"] = 1;
  }
  drop_unread_initializers(g);  // the weights BatchNormalization folding replaced
  return stats;
}

}  // namespace mrt
