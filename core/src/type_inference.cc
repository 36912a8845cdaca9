#include "type_inference.h"

#include <algorithm>
#include <map>
#include <set>

namespace mrt {

namespace {

ValueInfo unknown() { return ValueInfo{}; }

ValueInfo of_tensor(const std::string& name, const Tensor& t) {
  ValueInfo v;
  v.name = name;
  v.elem_type = t.dtype();
  v.has_shape = true;
  for (int64_t d : t.shape()) v.dims.push_back(Dim{d, ""});
  return v;
}

ValueInfo with_type(ValueInfo v, DType t) {
  v.elem_type = t;
  return v;
}

ValueInfo shaped(DType t, std::vector<Dim> dims) {
  ValueInfo v;
  v.elem_type = t;
  v.has_shape = true;
  v.dims = std::move(dims);
  return v;
}

bool same_dim(const Dim& a, const Dim& b) {
  return (a.value >= 0 && a.value == b.value) || (a.value < 0 && b.value < 0 && !a.param.empty() && a.param == b.param);
}

// Multidirectional broadcasting over possibly symbolic dims.
ValueInfo broadcast(const std::vector<const ValueInfo*>& ins, DType t) {
  ValueInfo out;
  out.elem_type = t;
  size_t rank = 0;
  for (auto* v : ins) {
    if (!v->has_shape) return out;
    rank = std::max(rank, v->dims.size());
  }
  out.has_shape = true;
  out.dims.assign(rank, Dim{1, ""});
  for (size_t i = 0; i < rank; ++i) {
    Dim acc{1, ""};
    bool first = true;
    for (auto* v : ins) {
      size_t off = rank - v->dims.size();
      Dim d = i < off ? Dim{1, ""} : v->dims[i - off];
      if (d.value == 1) continue;
      if (first) { acc = d; first = false; continue; }
      if (same_dim(acc, d)) continue;
      if (acc.value == 1) acc = d;
      else if (d.value > 1 && acc.value < 0) acc = d;
      else if (!(acc.value > 1 && d.value < 0)) acc = Dim{-1, ""};
    }
    out.dims[i] = acc;
  }
  return out;
}

const std::set<std::string>& same_type_unary() {
  static const std::set<std::string> s = {
      "Abs", "Neg", "Sign", "Ceil", "Floor", "Round", "Reciprocal", "Sqrt", "Exp", "Log", "Sin", "Cos", "Tan",
      "Asin", "Acos", "Atan", "Sinh", "Cosh", "Asinh", "Acosh", "Atanh", "Erf", "Relu", "Sigmoid", "Tanh",
      "LeakyRelu", "Elu", "Selu", "Celu", "ThresholdedRelu", "HardSigmoid", "HardSwish", "Softplus", "Softsign",
      "Mish", "Gelu", "Shrink", "Swish", "Clip", "Identity", "Softmax", "LogSoftmax", "Hardmax",
      "LRN", "LpNormalization", "MeanVarianceNormalization", "InstanceNormalization", "BatchNormalization",
      "CumSum", "CumProd", "BitwiseNot", "Trilu", "Dropout", "LayerNormalization", "GroupNormalization",
      "RMSNormalization"};
  return s;
}
const std::set<std::string>& same_type_broadcast() {
  static const std::set<std::string> s = {"Add", "Sub", "Mul", "Div", "Mod", "PRelu", "BitShift", "BitwiseAnd",
                                          "BitwiseOr", "BitwiseXor", "Sum", "Max", "Min", "Mean", "Pow"};
  return s;
}
const std::set<std::string>& bool_broadcast() {
  static const std::set<std::string> s = {"Equal", "Less", "Greater", "LessOrEqual", "GreaterOrEqual", "And", "Or",
                                          "Xor"};
  return s;
}

struct Inferred {
  std::vector<ValueInfo> outs;
  bool certain = false;  // the element types follow from the operator definition
};

Inferred infer_node(const Node& n, const std::vector<ValueInfo>& in) {
  auto input = [&](size_t i) -> const ValueInfo& {
    static const ValueInfo none;
    return i < in.size() ? in[i] : none;
  };
  Inferred r;
  r.outs.assign(n.outputs.size(), unknown());
  if (n.outputs.empty()) return r;
  const std::string& op = n.op_type;
  DType t0 = input(0).elem_type;
  if ((n.domain == "com.microsoft" && (op == "FusedConv" || op == "FusedGemm")) ||
      (n.domain == "ai.mosaicrt" && (op == "FusedConv" || op == "MatMulAdd"))) {
    r.outs[0] = with_type(unknown(), t0);  // the graph optimizer's fused nodes keep the input type
    return r;
  }
  if (!n.domain.empty()) return r;
  // Sequence and optional values: the kind matters (plugin EPs are not offered them); element types
  // are left to the run.
  auto non_tensor = [](const std::string& type) {
    ValueInfo v;
    v.is_tensor = false;
    v.type = type;
    return v;
  };
  if (op == "SequenceConstruct" || op == "SequenceEmpty" || op == "SplitToSequence") {
    DType t = op == "SequenceEmpty" ? static_cast<DType>(n.attr_int("dtype", 1)) : t0;
    r.outs[0] = non_tensor("seq(tensor(" + std::string(t == DType::kUndefined ? "?" : onnx_type_name(t)) + "))");
    return r;
  }
  if (op == "SequenceInsert" || op == "SequenceErase") {
    r.outs[0] = input(0).is_tensor ? non_tensor("seq(tensor(?))") : input(0);
    return r;
  }
  if (op == "SequenceMap") {
    for (auto& o : r.outs) o = non_tensor("seq(tensor(?))");
    return r;
  }
  if (op == "Optional") {
    r.outs[0] = non_tensor(n.inputs.empty() || n.inputs[0].empty() ? "optional(?)" : "optional(" + value_type(input(0)) + ")");
    return r;
  }
  if (op == "OptionalGetElement") {
    const std::string& t = input(0).type;
    if (!input(0).is_tensor && t.rfind("optional(seq(", 0) == 0) r.outs[0] = non_tensor(t.substr(9, t.size() - 10));
    else if (!input(0).is_tensor && t.rfind("seq(", 0) == 0) r.outs[0] = input(0);
    return r;
  }
  if (same_type_unary().count(op)) {
    r.outs[0] = input(0);
    r.certain = t0 != DType::kUndefined;
    // the mask: bool from opset 10, the input's type before (the opset is not known here: left open)
    if (op == "Dropout" && r.outs.size() > 1) r.outs[1] = with_type(input(0), DType::kUndefined);
    if ((op == "LayerNormalization" || op == "BatchNormalization") && r.outs.size() > 1) {
      for (size_t i = 1; i < r.outs.size(); ++i) r.outs[i] = with_type(unknown(), DType::kFloat);
      r.certain = false;
    }
    return r;
  }
  if (same_type_broadcast().count(op) || bool_broadcast().count(op)) {
    std::vector<const ValueInfo*> ptrs;
    for (auto& v : in) ptrs.push_back(&v);
    if (ptrs.empty()) return r;
    bool is_bool = bool_broadcast().count(op) != 0;
    r.outs[0] = broadcast(ptrs, is_bool ? DType::kBool : t0);
    r.certain = is_bool || t0 != DType::kUndefined;
    return r;
  }
  if (op == "IsNaN" || op == "IsInf" || op == "Not") {
    r.outs[0] = with_type(input(0), DType::kBool);
    r.certain = true;
    return r;
  }
  if (op == "Where" && in.size() == 3) {
    r.outs[0] = broadcast({&in[0], &in[1], &in[2]}, in[1].elem_type);
    r.certain = in[1].elem_type != DType::kUndefined;
    return r;
  }
  if (op == "Cast") {
    r.outs[0] = with_type(input(0), static_cast<DType>(n.attr_int("to", 0)));
    r.certain = true;
    return r;
  }
  if (op == "CastLike") {
    r.outs[0] = with_type(input(0), input(1).elem_type);
    r.certain = input(1).elem_type != DType::kUndefined;
    return r;
  }
  if (op == "Shape") {
    r.outs[0] = shaped(DType::kInt64, {Dim{-1, ""}});
    if (input(0).has_shape && !n.has_attr("start") && !n.has_attr("end"))
      r.outs[0].dims[0].value = static_cast<int64_t>(input(0).dims.size());
    r.certain = true;
    return r;
  }
  if (op == "Size") {
    r.outs[0] = shaped(DType::kInt64, {});
    r.certain = true;
    return r;
  }
  if (op == "ArgMax" || op == "ArgMin" || op == "NonZero") {
    r.outs[0] = with_type(unknown(), DType::kInt64);
    r.certain = true;
    return r;
  }
  if (op == "MatMul" && in.size() == 2) {
    r.outs[0] = with_type(unknown(), t0);
    const ValueInfo& a = in[0];
    const ValueInfo& b = in[1];
    if (a.has_shape && b.has_shape && a.dims.size() >= 2 && b.dims.size() >= 2) {
      ValueInfo ba = a, bb = b;
      ba.dims.resize(a.dims.size() - 2);
      bb.dims.resize(b.dims.size() - 2);
      ValueInfo batch = broadcast({&ba, &bb}, t0);
      if (batch.has_shape) {
        batch.dims.push_back(a.dims[a.dims.size() - 2]);
        batch.dims.push_back(b.dims.back());
        r.outs[0] = batch;
      }
    }
    r.certain = t0 != DType::kUndefined;
    return r;
  }
  if (op == "Gemm" && in.size() >= 2) {
    r.outs[0] = with_type(unknown(), t0);
    if (in[0].has_shape && in[1].has_shape && in[0].dims.size() == 2 && in[1].dims.size() == 2) {
      Dim m = n.attr_int("transA", 0) ? in[0].dims[1] : in[0].dims[0];
      Dim nn = n.attr_int("transB", 0) ? in[1].dims[0] : in[1].dims[1];
      r.outs[0] = shaped(t0, {m, nn});
    }
    r.certain = t0 != DType::kUndefined;
    return r;
  }
  if (op == "Transpose") {
    r.outs[0] = with_type(unknown(), t0);
    if (input(0).has_shape) {
      size_t rank = input(0).dims.size();
      std::vector<int64_t> perm = n.attr_ints("perm");
      if (perm.empty())
        for (size_t i = 0; i < rank; ++i) perm.push_back(static_cast<int64_t>(rank - 1 - i));
      if (perm.size() == rank) {
        std::vector<Dim> dims;
        bool ok = true;
        for (int64_t p : perm) {
          if (p < 0 || p >= static_cast<int64_t>(rank)) { ok = false; break; }
          dims.push_back(input(0).dims[static_cast<size_t>(p)]);
        }
        if (ok) r.outs[0] = shaped(t0, dims);
      }
    }
    r.certain = t0 != DType::kUndefined;
    return r;
  }
  if (op == "Constant") {
    if (const Tensor* t = n.attr_tensor("value")) r.outs[0] = of_tensor("", *t);
    else if (n.has_attr("value_float")) r.outs[0] = shaped(DType::kFloat, {});
    else if (n.has_attr("value_int")) r.outs[0] = shaped(DType::kInt64, {});
    else if (n.has_attr("value_floats")) r.outs[0] = shaped(DType::kFloat, {Dim{(int64_t)n.attr_floats("value_floats").size(), ""}});
    else if (n.has_attr("value_ints")) r.outs[0] = shaped(DType::kInt64, {Dim{(int64_t)n.attr_ints("value_ints").size(), ""}});
    r.certain = r.outs[0].elem_type != DType::kUndefined;
    return r;
  }
  if (op == "RandomUniform" || op == "RandomNormal") {
    const DType t = static_cast<DType>(n.attr_int("dtype", static_cast<int64_t>(DType::kFloat)));
    std::vector<Dim> dims;
    for (int64_t d : n.attr_ints("shape")) dims.push_back(Dim{d, ""});
    r.outs[0] = shaped(t, dims);
    r.certain = true;
    return r;
  }
  if (op == "RandomUniformLike" || op == "RandomNormalLike" || op == "Bernoulli") {
    r.outs[0] = with_type(input(0), n.has_attr("dtype") ? static_cast<DType>(n.attr_int("dtype", 1)) : t0);
    r.certain = n.has_attr("dtype") || t0 != DType::kUndefined;
    return r;
  }
  if (op == "Multinomial") {
    r.outs[0] = with_type(unknown(), static_cast<DType>(n.attr_int("dtype", static_cast<int64_t>(DType::kInt32))));
    r.certain = true;
    return r;
  }
  if (op == "ConstantOfShape") {
    const Tensor* v = n.attr_tensor("value");
    r.outs[0] = with_type(unknown(), v ? v->dtype() : DType::kFloat);
    r.certain = true;
    return r;
  }
  if (op == "DynamicQuantizeLinear" && r.outs.size() == 3) {
    r.outs[0] = with_type(input(0), DType::kUInt8);
    r.outs[1] = shaped(DType::kFloat, {});
    r.outs[2] = shaped(DType::kUInt8, {});
    r.certain = true;
    return r;
  }
  if (op == "MatMulInteger" || op == "ConvInteger") {
    r.outs[0] = with_type(unknown(), DType::kInt32);
    r.certain = true;
    return r;
  }
  if (op == "DequantizeLinear") {
    r.outs[0] = with_type(input(0), input(1).elem_type);
    r.certain = false;  // opset 23 output_dtype may override
    return r;
  }
  if (op == "TopK" && r.outs.size() == 2) {
    r.outs[0] = with_type(unknown(), t0);
    r.outs[1] = with_type(unknown(), DType::kInt64);
    r.certain = t0 != DType::kUndefined;
    return r;
  }
  // Data-movement and layer ops keep the element type of their first input.
  static const std::set<std::string> keeps_type = {
      "Reshape", "Flatten", "Concat", "Split", "Slice", "Gather", "GatherElements", "GatherND", "Squeeze",
      "Unsqueeze", "Expand", "Tile", "Pad", "Conv", "ConvTranspose", "MaxPool", "AveragePool", "GlobalAveragePool",
      "GlobalMaxPool", "LpPool", "ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin", "ReduceProd", "ReduceL1",
      "ReduceL2", "ReduceLogSum", "ReduceLogSumExp", "ReduceSumSquare", "DepthToSpace", "SpaceToDepth",
      "ScatterElements", "ScatterND", "Compress", "ReverseSequence", "Einsum", "Range"};
  if (keeps_type.count(op)) {
    for (auto& o : r.outs) o = with_type(unknown(), t0);
    if (op == "MaxPool" && r.outs.size() == 2) r.outs[1] = with_type(unknown(), DType::kInt64);
    if ((op == "Flatten") && input(0).has_shape) r.outs[0] = shaped(t0, {Dim{-1, ""}, Dim{-1, ""}});
    r.certain = t0 != DType::kUndefined;
    return r;
  }
  return r;
}

void merge_declared(ValueInfo& inferred, const ValueInfo& declared) {
  if (declared.elem_type != DType::kUndefined) inferred.elem_type = declared.elem_type;
  if (declared.has_shape) {
    if (!inferred.has_shape || inferred.dims.size() != declared.dims.size()) {
      inferred.has_shape = true;
      inferred.dims = declared.dims;
    } else {
      for (size_t i = 0; i < declared.dims.size(); ++i)
        if (declared.dims[i].value >= 0 || !declared.dims[i].param.empty()) inferred.dims[i] = declared.dims[i];
    }
  }
}

}  // namespace

void infer_types(const Graph& g, const std::vector<const Node*>& order, std::vector<ValueInfo>& outputs,
                 std::map<std::string, ValueInfo>* known_out) {
  std::map<std::string, ValueInfo> known;
  std::map<std::string, const ValueInfo*> declared;
  for (const auto& v : g.value_info) declared[v.name] = &v;
  for (const auto& v : g.outputs) declared[v.name] = &v;
  for (const auto& [name, t] : g.initializers) known[name] = of_tensor(name, *t);
  for (const auto& v : g.inputs)
    if (!known.count(v.name)) known[v.name] = v;
  for (const Node* n : order) {
    std::vector<ValueInfo> ins;
    for (const auto& name : n->inputs) {
      auto it = name.empty() ? known.end() : known.find(name);
      ins.push_back(it == known.end() ? ValueInfo{} : it->second);
    }
    Inferred r = infer_node(*n, ins);
    for (size_t i = 0; i < n->outputs.size(); ++i) {
      const std::string& name = n->outputs[i];
      if (name.empty()) continue;
      ValueInfo v = r.outs[i];
      v.name = name;
      auto d = declared.find(name);
      if (d != declared.end() && !d->second->is_tensor) {
        v.is_tensor = false;
        v.type = d->second->type;
        v.elem_type = DType::kUndefined;
        v.has_shape = false;
      } else if (d != declared.end() && d->second->is_tensor) {
        DType want = d->second->elem_type;
        if (r.certain && want != DType::kUndefined && v.elem_type != DType::kUndefined && want != v.elem_type)
          fail(MRT_INVALID_MODEL, n->label(), ": output '", name, "' is declared ", dtype_name(want),
               " but the operator produces ", dtype_name(v.elem_type));
        merge_declared(v, *d->second);
      }
      known[name] = v;
    }
  }
  for (auto& o : outputs) {
    auto it = known.find(o.name);
    if (it == known.end() || !o.is_tensor) continue;
    if (o.elem_type == DType::kUndefined) o.elem_type = it->second.elem_type;
    if (!o.has_shape && it->second.has_shape) {
      o.has_shape = true;
      o.dims = it->second.dims;
    }
  }
  if (known_out) *known_out = std::move(known);
}

}  // namespace mrt
