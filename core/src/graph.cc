#include "graph.h"

namespace mrt {

namespace {
const char* attr_type_name(AttrType t) {
  switch (t) {
    case AttrType::kFloat: return "float";
    case AttrType::kInt: return "int";
    case AttrType::kString: return "string";
    case AttrType::kTensor: return "tensor";
    case AttrType::kGraph: return "graph";
    case AttrType::kFloats: return "floats";
    case AttrType::kInts: return "ints";
    case AttrType::kStrings: return "strings";
    case AttrType::kTensors: return "tensors";
    case AttrType::kGraphs: return "graphs";
    default: return "other";
  }
}
}  // namespace

std::string Node::label() const {
  std::string op = domain.empty() ? op_type : domain + "::" + op_type;
  if (name.empty()) return str_cat("node (", op, ") producing '", outputs.empty() ? std::string() : outputs[0], "'");
  return str_cat("node '", name, "' (", op, ")");
}

const Attribute* Node::attr(const std::string& n) const {
  for (const auto& a : attributes)
    if (a.name == n) return &a;
  return nullptr;
}

static const Attribute* typed(const Node& node, const std::string& name, AttrType want) {
  const Attribute* a = node.attr(name);
  if (!a) return nullptr;
  if (a->type != want)
    fail(MRT_INVALID_MODEL, node.label(), ": attribute '", name, "' has type ", attr_type_name(a->type), ", expected ",
         attr_type_name(want));
  return a;
}

int64_t Node::attr_int(const std::string& n, int64_t def) const {
  const Attribute* a = typed(*this, n, AttrType::kInt);
  return a ? a->i : def;
}
float Node::attr_float(const std::string& n, float def) const {
  const Attribute* a = attr(n);
  if (a && a->type == AttrType::kInt) return static_cast<float>(a->i);  // tolerated by onnx checkers
  a = typed(*this, n, AttrType::kFloat);
  return a ? a->f : def;
}
std::string Node::attr_string(const std::string& n, const std::string& def) const {
  const Attribute* a = typed(*this, n, AttrType::kString);
  return a ? a->s : def;
}
std::vector<int64_t> Node::attr_ints(const std::string& n, const std::vector<int64_t>& def) const {
  const Attribute* a = typed(*this, n, AttrType::kInts);
  return a ? a->ints : def;
}
std::vector<float> Node::attr_floats(const std::string& n, const std::vector<float>& def) const {
  const Attribute* a = typed(*this, n, AttrType::kFloats);
  return a ? a->floats : def;
}
const Tensor* Node::attr_tensor(const std::string& n) const {
  const Attribute* a = typed(*this, n, AttrType::kTensor);
  return a ? a->t.get() : nullptr;
}
int64_t Node::require_int(const std::string& n) const {
  if (!has_attr(n)) fail(MRT_INVALID_MODEL, label(), ": required attribute '", n, "' is missing");
  return attr_int(n, 0);
}
std::vector<int64_t> Node::require_ints(const std::string& n) const {
  if (!has_attr(n)) fail(MRT_INVALID_MODEL, label(), ": required attribute '", n, "' is missing");
  return attr_ints(n);
}

}  // namespace mrt

namespace mrt {

const char* onnx_type_name(DType t) {
  switch (t) {
    case DType::kFloat: return "float";
    case DType::kDouble: return "double";
    case DType::kFloat16: return "float16";
    case DType::kFloat8E4M3FN: return "float8e4m3fn";
    case DType::kFloat8E4M3FNUZ: return "float8e4m3fnuz";
    case DType::kFloat8E5M2: return "float8e5m2";
    case DType::kFloat8E5M2FNUZ: return "float8e5m2fnuz";
    case DType::kFloat4E2M1: return "float4e2m1";
    case DType::kFloat8E8M0: return "float8e8m0";
    default: return dtype_name(t);  // the integer, bool, string, bfloat16 and complex names are the same
  }
}

std::string value_type(const ValueInfo& v) {
  if (!v.is_tensor) return v.type;
  return str_cat("tensor(", v.elem_type == DType::kUndefined ? "?" : onnx_type_name(v.elem_type), ")");
}

namespace {
// Whether `type` is `ctor(inner)`; sets `inner` when it is.
bool unwrap(const std::string& type, const char* ctor, std::string* inner) {
  const std::string head = std::string(ctor) + "(";
  if (type.compare(0, head.size(), head) != 0 || type.back() != ')') return false;
  *inner = type.substr(head.size(), type.size() - head.size() - 1);
  return true;
}
}  // namespace

bool value_has_type(const Tensor& v, const std::string& type) {
  if (type.empty()) return true;
  std::string inner;
  if (unwrap(type, "optional", &inner)) return v.is_none() || value_has_type(v, inner);
  if (unwrap(type, "seq", &inner)) {
    if (!v.is_sequence()) return false;
    std::string elem;
    if (v.seq().items.empty() && unwrap(inner, "tensor", &elem) && elem != "?" &&
        v.seq().elem_type != DType::kUndefined && elem != onnx_type_name(v.seq().elem_type))
      return false;
    for (const Tensor& item : v.seq().items)
      if (!value_has_type(item, inner)) return false;
    return true;
  }
  if (unwrap(type, "map", &inner)) {
    const size_t comma = inner.find(',');
    if (!v.is_map() || comma == std::string::npos) return false;
    const std::string key = inner.substr(0, comma);
    return (key == "?" || key == onnx_type_name(v.map_keys().dtype())) && value_has_type(v.map_values(), inner.substr(comma + 1));
  }
  if (unwrap(type, "tensor", &inner)) return v.is_tensor() && (inner == "?" || inner == onnx_type_name(v.dtype()));
  return false;  // map, sparse_tensor: not supported
}

}  // namespace mrt
