#include "session_extras.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>

namespace mrt {

void replace_initializers(Graph& g, const std::vector<std::pair<std::string, Tensor>>& replacements) {
  for (const auto& replacement : replacements) {
    const std::string& name = replacement.first;  // (a lambda captures no structured binding before C++20)
    const Tensor& t = replacement.second;
    auto it = std::find_if(g.initializers.begin(), g.initializers.end(), [&](const auto& i) { return i.first == name; });
    if (it == g.initializers.end())
      fail(MRT_INVALID_ARGUMENT, "add_initializer: the model has no initializer named '", name, "'");
    if (it->second->dtype() != t.dtype())
      fail(MRT_INVALID_ARGUMENT, "add_initializer: '", name, "' is ", it->second->describe(), " in the model but ",
           t.describe(), " was given");
    it->second = std::make_shared<Tensor>(t);
  }
}

void override_free_dims(Graph& g, const std::map<std::string, std::string>& config) {
  const std::string by_name = "session.free_dimension_override_by_name.";
  const std::string by_denotation = "session.free_dimension_override_by_denotation.";
  for (const auto& [key, value] : config) {
    bool name = key.rfind(by_name, 0) == 0, denotation = key.rfind(by_denotation, 0) == 0;
    if (!name && !denotation) continue;
    std::string what = key.substr((name ? by_name : by_denotation).size());
    char* end = nullptr;
    long long v = std::strtoll(value.c_str(), &end, 10);
    if (value.empty() || *end || v < 0)
      fail(MRT_INVALID_ARGUMENT, "free dimension override '", what, "' must be a non-negative integer, got '", value,
           "'");
    for (auto* list : {&g.inputs, &g.outputs, &g.value_info})
      for (auto& info : *list)
        for (auto& d : info.dims)
          if (d.value < 0 && (name ? d.param : d.denotation) == what) d.value = v;
  }
}

namespace {

void json_escape(std::string& out, const std::string& s) {
  for (char c : s) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (static_cast<unsigned char>(c) < 0x20) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\u%04x", static_cast<unsigned>(static_cast<unsigned char>(c)));
      out += buf;
    } else {
      out += c;
    }
  }
}

void json_type_shape(std::string& out, const Tensor* t) {
  if (!t || !t->valid()) {
    out += "{}";
    return;
  }
  // ONNX's type names ("float", "double"), as onnxruntime's traces spell them
  std::string type = dtype_name(t->dtype());
  if (type == "float32") type = "float";
  if (type == "float64") type = "double";
  out += "{\"" + type + "\":[";
  for (size_t d = 0; d < t->rank(); ++d) out += (d ? "," : "") + std::to_string(t->dim(d));
  out += "]}";
}

void event_head(std::string& out, const char* cat, const std::string& name, const std::string& tid, double ts_us,
                double dur_us) {
  out += out.empty() ? "" : ",\n";
  out += std::string("{\"cat\":\"") + cat + "\",\"ph\":\"X\",\"pid\":1,\"tid\":" + tid + ",\"name\":\"";
  json_escape(out, name);
  out += "\",\"ts\":" + std::to_string(ts_us) + ",\"dur\":" + std::to_string(dur_us) + ",\"args\":{";
}

}  // namespace

void append_node_event(std::string& out, const Node& node, const std::string& provider, const std::string& tid,
                       double ts_us, double dur_us, const std::vector<const Tensor*>& inputs,
                       const std::vector<Tensor>& outputs) {
  event_head(out, "Node", node.name.empty() ? node.op_type : node.name, tid, ts_us, dur_us);
  out += "\"op_name\":\"";
  json_escape(out, node.op_type);
  out += "\",\"provider\":\"";
  json_escape(out, provider);
  out += "\",\"input_type_shape\":[";
  for (size_t i = 0; i < inputs.size(); ++i) {
    out += i ? "," : "";
    json_type_shape(out, inputs[i]);
  }
  out += "],\"output_type_shape\":[";
  for (size_t i = 0; i < outputs.size(); ++i) {
    out += i ? "," : "";
    json_type_shape(out, &outputs[i]);
  }
  out += "]}}";
}

void append_run_event(std::string& out, const std::string& tid, double ts_us, double dur_us) {
  event_head(out, "Session", "model_run", tid, ts_us, dur_us);
  out += "}}";
}

}  // namespace mrt
