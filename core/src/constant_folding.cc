#include "constant_folding.h"

#include <algorithm>
#include <map>
#include <queue>
#include <unordered_map>

#include "kernel.h"
#include "static_shapes.h"
#include "type_inference.h"

namespace mrt {

std::set<std::string> overridable_initializers(const Model& model) {
  std::set<std::string> out;
  if (model.ir_version < 4) return out;
  std::set<std::string> inits;
  for (const auto& [name, t] : model.graph.initializers) inits.insert(name);
  for (const auto& in : model.graph.inputs)
    if (inits.count(in.name)) out.insert(in.name);
  return out;
}

namespace {

bool has_subgraph(const Node& n) {
  for (const auto& a : n.attributes)
    if (a.g || !a.graphs.empty()) return true;
  return false;
}

// Ops whose result is not a function of their inputs, or that later rewrites want to see.
bool never_fold(const Node& n, bool quantize_ops) {
  static const std::set<std::string>& ops = *new std::set<std::string>{  // never destroyed (exit races)
      "RandomNormal", "RandomUniform", "RandomNormalLike", "RandomUniformLike", "Multinomial", "Bernoulli",
      "Dropout",  // random in training mode
  };
  if (!quantize_ops && (n.op_type == "DequantizeLinear" || n.op_type == "QuantizeLinear")) return true;
  return !n.domain.empty() || ops.count(n.op_type) != 0 || has_subgraph(n);
}

// Names read by nodes of nested graphs (outer-scope references).
void collect_subgraph_reads(const Graph& g, std::set<std::string>& reads) {
  for (const auto& n : g.nodes)
    for (const auto& a : n.attributes) {
      std::vector<std::shared_ptr<Graph>> subs = a.graphs;
      if (a.g) subs.push_back(a.g);
      for (const auto& sub : subs) {
        for (const auto& sn : sub->nodes)
          for (const auto& i : sn.inputs)
            if (!i.empty()) reads.insert(i);
        collect_subgraph_reads(*sub, reads);
      }
    }
}

}  // namespace

std::vector<size_t> topological_order(const Graph& g) {
  std::unordered_map<std::string, size_t> producer;
  for (size_t i = 0; i < g.nodes.size(); ++i)
    for (const auto& o : g.nodes[i].outputs)
      if (!o.empty() && !producer.emplace(o, i).second) return {};
  std::vector<std::vector<size_t>> users(g.nodes.size());
  std::vector<int> pending(g.nodes.size(), 0);
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    std::set<size_t> deps;
    for (const auto& in : g.nodes[i].inputs) {
      auto p = in.empty() ? producer.end() : producer.find(in);
      if (p != producer.end()) deps.insert(p->second);
    }
    if (deps.count(i)) return {};
    pending[i] = static_cast<int>(deps.size());
    for (size_t d : deps) users[d].push_back(i);
  }
  std::priority_queue<size_t, std::vector<size_t>, std::greater<size_t>> ready;
  for (size_t i = 0; i < g.nodes.size(); ++i)
    if (pending[i] == 0) ready.push(i);
  std::vector<size_t> order;
  while (!ready.empty()) {
    size_t i = ready.top();
    ready.pop();
    order.push_back(i);
    for (size_t u : users[i])
      if (--pending[u] == 0) ready.push(u);
  }
  if (order.size() != g.nodes.size()) return {};
  return order;
}

int drop_unread_initializers(Graph& g) {
  std::set<std::string> reads;
  for (const auto& o : g.outputs) reads.insert(o.name);
  for (const auto& in : g.inputs) reads.insert(in.name);
  for (const auto& n : g.nodes)
    for (const auto& i : n.inputs)
      if (!i.empty()) reads.insert(i);
  collect_subgraph_reads(g, reads);
  const size_t before = g.initializers.size();
  g.initializers.erase(std::remove_if(g.initializers.begin(), g.initializers.end(),
                                      [&](const auto& init) { return !reads.count(init.first); }),
                       g.initializers.end());
  return static_cast<int>(before - g.initializers.size());
}

namespace {

// Shape (with opset-15 start/end) or Size of a value whose shape is static.
std::shared_ptr<Tensor> fold_shape_query(const Node& n, const Shape& s) {
  if (n.op_type == "Size") {
    auto t = std::make_shared<Tensor>(DType::kInt64, Shape{});
    t->data<int64_t>()[0] = shape_size(s);
    return t;
  }
  const int64_t r = static_cast<int64_t>(s.size());
  auto clamp = [&](int64_t v) {
    if (v < 0) v += r;
    return std::min(std::max<int64_t>(v, 0), r);
  };
  const int64_t b = clamp(n.attr_int("start", 0)), e = std::max(b, clamp(n.attr_int("end", r)));
  auto t = std::make_shared<Tensor>(DType::kInt64, Shape{e - b});
  std::copy(s.begin() + b, s.begin() + e, t->data<int64_t>());
  return t;
}

}  // namespace

ConstantFoldingStats fold_constants(Model& model, ThreadPool& pool, bool quantize_ops) {
  ConstantFoldingStats stats;
  Graph& g = model.graph;
  const std::set<std::string> overridable = overridable_initializers(model);
  std::map<std::string, std::shared_ptr<Tensor>> constants;
  for (auto& [name, t] : g.initializers)
    if (!overridable.count(name) && t) constants[name] = t;

  const KernelRegistry& reg = KernelRegistry::cpu();
  std::vector<bool> folded(g.nodes.size(), false);
  bool changed = true;
  // Rounds: a fold can make a later shape static (a Reshape whose shape input became
  // constant), which the next round's shape pass sees.
  for (int round = 0; changed && round < 4; ++round) {
    changed = false;
    std::vector<size_t> order = topological_order(g);
    if (order.empty()) return stats;
    std::map<std::string, ValueInfo> known;
    try {
      std::vector<const Node*> nodes;
      for (size_t i : order)
        if (!folded[i]) nodes.push_back(&g.nodes[i]);
      std::vector<ValueInfo> outs = g.outputs;
      infer_types(g, nodes, outs, &known);
    } catch (const std::exception&) {
      known.clear();  // the session reports the model's error; fold without static shapes
    }
    const std::map<std::string, Shape> shapes = static_shapes(g, order, [&](const std::string& name) -> const Tensor* {
      auto c = constants.find(name);
      return c == constants.end() ? nullptr : c->second.get();
    });
    for (size_t i : order) {
      if (folded[i]) continue;
      Node& n = g.nodes[i];
      auto opset = model.opsets.find(n.domain);
      if (opset == model.opsets.end() || never_fold(n, quantize_ops)) continue;
      std::vector<std::shared_ptr<Tensor>> results;
      if ((n.op_type == "Shape" || n.op_type == "Size") && n.inputs.size() == 1 && n.outputs.size() == 1 &&
          !n.inputs[0].empty() && !constants.count(n.inputs[0])) {
        auto k = shapes.find(n.inputs[0]);
        if (k == shapes.end()) continue;
        try {
          results.push_back(fold_shape_query(n, k->second));
        } catch (const std::exception&) {
          continue;  // e.g. a Size that overflows: the run reports it
        }
        ++stats.shapes_folded;
      } else {
        bool all_constant = true;
        int64_t in_bytes = 0;
        std::vector<const Tensor*> inputs;
        for (const auto& in : n.inputs) {
          if (in.empty()) {
            inputs.push_back(nullptr);
            continue;
          }
          auto c = constants.find(in);
          if (c == constants.end()) {
            all_constant = false;
            break;
          }
          inputs.push_back(c->second.get());
          in_bytes += static_cast<int64_t>(c->second->nbytes());
        }
        if (!all_constant) continue;
        // Known-too-big expansions are skipped before computing them.
        bool too_big = false;
        for (const auto& o : n.outputs) {
          auto k = o.empty() ? known.end() : known.find(o);
          auto s = o.empty() ? shapes.end() : shapes.find(o);
          if (k != known.end() && k->second.elem_type != DType::kUndefined && s != shapes.end()) {
            int64_t elems = 0;
            try {
              elems = shape_size(s->second);
            } catch (const std::exception&) {
              too_big = true;  // overflows int64: certainly not folded
              continue;
            }
            const double bytes = static_cast<double>(elems) * static_cast<double>(dtype_size(k->second.elem_type));
            too_big = too_big || (bytes > static_cast<double>(kMaxFoldedExpansionBytes) && bytes > in_bytes);
          }
        }
        const KernelDef* kernel = too_big ? nullptr : reg.find(n.domain, n.op_type, opset->second);
        if (!kernel) continue;
        std::vector<bool> constant_flags(n.inputs.size(), true);
        std::vector<Tensor> outs(n.outputs.size());
        OpContext::Cache cache;
        OpContext ctx;
        ctx.node_ = &n;
        ctx.opset_ = opset->second;
        ctx.inputs_ = inputs;
        ctx.constant_ = &constant_flags;
        ctx.outputs_ = &outs;
        ctx.output_names_ = &n.outputs;
        ctx.pool_ = &pool;
        ctx.alloc_ = nullptr;  // heap: folded values live as long as the session
        ctx.cache_ = &cache;
        try {
          if (kernel->check) kernel->check(n, opset->second);
          kernel->fn(ctx);
          adopt_strings(outs, ctx.inputs_);
        } catch (const std::exception&) {
          continue;  // left in the graph: the run reports the error as it would have
        }
        bool ok = true;
        for (size_t o = 0; o < outs.size() && ok; ++o) {
          if (n.outputs[o].empty()) continue;
          ok = outs[o].is_tensor() &&  // (sequences and optionals are not initializers)
               (static_cast<int64_t>(outs[o].nbytes()) <= kMaxFoldedExpansionBytes ||
                static_cast<int64_t>(outs[o].nbytes()) <= in_bytes);
        }
        if (!ok) continue;
        for (auto& t : outs) results.push_back(t.valid() ? std::make_shared<Tensor>(std::move(t)) : nullptr);
        ++stats.nodes_folded;
      }
      for (size_t o = 0; o < n.outputs.size(); ++o) {
        if (n.outputs[o].empty() || !results[o]) continue;
        constants[n.outputs[o]] = results[o];
        g.initializers.emplace_back(n.outputs[o], results[o]);
      }
      folded[i] = true;
      changed = true;
    }
  }
  if (stats.nodes_folded + stats.shapes_folded == 0) return stats;

  std::vector<Node> kept;
  for (size_t i = 0; i < g.nodes.size(); ++i)
    if (!folded[i]) kept.push_back(std::move(g.nodes[i]));
  g.nodes = std::move(kept);

  // The inputs of folded nodes, so a folded weight does not keep its source alive next to it.
  stats.initializers_dropped = drop_unread_initializers(g);
  return stats;
}

}  // namespace mrt
