// Expands calls to model-local functions (ModelProto.functions) into their body nodes,
// so the executor only ever sees operators with kernels. Exporters emit such functions
// for custom blocks; without inlining they would be "unsupported operators".
#include <set>

#include "function_inliner.h"
#include "kernel.h"

namespace mrt {

namespace {

constexpr int kMaxInlineDepth = 16;

const FunctionDef* find_function(const Model& m, const Node& n) {
  for (const auto& f : m.functions)
    if (f.name == n.op_type && f.domain == n.domain) return &f;
  return nullptr;
}

std::vector<Node> expand(const Node& call, const FunctionDef& fn, size_t serial) {
  if (call.inputs.size() > fn.inputs.size())
    fail(MRT_INVALID_MODEL, call.label(), ": passes ", call.inputs.size(), " inputs to function '", fn.name,
         "' which takes ", fn.inputs.size());
  if (call.outputs.size() > fn.outputs.size())
    fail(MRT_INVALID_MODEL, call.label(), ": expects ", call.outputs.size(), " outputs from function '", fn.name,
         "' which returns ", fn.outputs.size());
  std::map<std::string, std::string> rename;
  for (size_t i = 0; i < fn.inputs.size(); ++i) rename[fn.inputs[i]] = i < call.inputs.size() ? call.inputs[i] : "";
  for (size_t i = 0; i < fn.outputs.size(); ++i)
    rename[fn.outputs[i]] = i < call.outputs.size() ? call.outputs[i] : "";
  std::string prefix = str_cat(call.name.empty() ? fn.name : call.name, "/#", serial, "/");
  auto map_name = [&](const std::string& v) -> std::string {
    if (v.empty()) return v;
    auto it = rename.find(v);
    return it != rename.end() ? it->second : prefix + v;
  };
  std::vector<Node> out;
  for (const Node& body : fn.nodes) {
    Node n = body;
    n.name = prefix + (body.name.empty() ? body.op_type : body.name);
    for (auto& v : n.inputs) v = map_name(v);
    for (auto& v : n.outputs) v = map_name(v);
    std::vector<Attribute> attrs;
    for (const Attribute& a : body.attributes) {
      if (a.ref_attr_name.empty()) {
        attrs.push_back(a);
        continue;
      }
      const Attribute* src = call.attr(a.ref_attr_name);
      if (!src)
        for (const auto& d : fn.attribute_defaults)
          if (d.name == a.ref_attr_name) src = &d;
      if (src) {  // an unset reference without default means "attribute absent"
        Attribute copy = *src;
        copy.name = a.name;
        copy.ref_attr_name.clear();
        attrs.push_back(std::move(copy));
      }
    }
    n.attributes = std::move(attrs);
    n.byte_offset = call.byte_offset;
    out.push_back(std::move(n));
  }
  return out;
}

}  // namespace

void inline_model_functions(Model& model) {
  if (model.functions.empty()) return;
  for (const auto& f : model.functions)
    for (const auto& [domain, version] : f.opsets) {
      auto it = model.opsets.find(domain);
      if (it == model.opsets.end()) {
        model.opsets[domain] = version;
      } else if (it->second != version && domain.empty()) {
        fail(MRT_NOT_IMPLEMENTED, "function '", f.name, "' uses ai.onnx opset ", version, " but the model uses opset ",
             it->second, "; mixed opsets are not supported");
      }
    }
  const KernelRegistry& reg = KernelRegistry::cpu();
  size_t serial = 0;
  for (int depth = 0;; ++depth) {
    bool changed = false;
    std::vector<Node> next;
    for (Node& n : model.graph.nodes) {
      const FunctionDef* fn = find_function(model, n);
      auto op = model.opsets.find(n.domain);
      bool has_kernel = op != model.opsets.end() && reg.find(n.domain, n.op_type, op->second);
      if (fn && !has_kernel) {
        if (depth >= kMaxInlineDepth)
          fail(MRT_INVALID_MODEL, n.label(), ": model-local functions nest deeper than ", kMaxInlineDepth,
               " levels (recursive function?)");
        for (Node& b : expand(n, *fn, serial++)) next.push_back(std::move(b));
        changed = true;
      } else {
        next.push_back(std::move(n));
      }
    }
    model.graph.nodes = std::move(next);
    if (!changed) break;
  }
}

}  // namespace mrt
