#include "static_shapes.h"

#include <algorithm>
#include <set>

#include "kernels/nn_geometry.h"

namespace mrt {

namespace {

using Lookup = std::function<const Tensor*(const std::string&)>;

const std::set<std::string>& same_shape_ops() {
  static const std::set<std::string>& s = *new std::set<std::string>{  // never destroyed (exit races)
      "Relu", "Sigmoid", "Tanh", "LeakyRelu", "Clip", "Identity", "Dropout", "BatchNormalization", "LRN",
      "Softmax", "LogSoftmax", "Cast", "Erf", "Sqrt", "Exp", "Log", "Neg", "Abs", "Reciprocal", "HardSigmoid",
      "HardSwish", "Elu", "Selu", "Softplus", "Gelu", "InstanceNormalization", "LayerNormalization", "Floor",
      "Ceil", "Round", "Sign", "Not", "IsNaN", "Mish", "PRelu"};
  return s;
}

const std::set<std::string>& broadcast_ops() {
  static const std::set<std::string>& s = *new std::set<std::string>{"Add", "Sub", "Mul", "Div", "Pow", "Sum", "Max", "Min", "Mean",
                                          "Where", "Equal", "Less", "Greater", "LessOrEqual", "GreaterOrEqual",
                                          "And", "Or", "Xor", "Mod"};
  return s;
}

// acc *= d / acc += d; false (acc unspecified) when the result does not fit: the shape is then
// left unknown, as the kernels will refuse it at run time.
bool checked_mul(int64_t& acc, int64_t d) { return !__builtin_mul_overflow(acc, d, &acc); }
bool checked_add(int64_t& acc, int64_t d) { return !__builtin_add_overflow(acc, d, &acc); }

// Window output shape of Conv/FusedConv and the pools, as the kernels compute it.
bool window_shape(const Node& n, const Shape& x, const Shape* w, Shape& out) {
  if (x.size() < 3) return false;
  const size_t nsp = x.size() - 2;
  nn::Window g;
  nn::read_window_attrs(n, nsp, n.op_type.c_str(), g);
  g.in.assign(x.begin() + 2, x.end());
  int64_t channels = x[1];
  if (w) {  // Conv: kernel from the weight, channels = W dim 0
    if (w->size() != x.size()) return false;
    g.kernel.assign(w->begin() + 2, w->end());
    if (n.has_attr("kernel_shape") && n.attr_ints("kernel_shape") != g.kernel) return false;
    channels = (*w)[0];
  } else {
    g.kernel = n.attr_ints("kernel_shape");
    if (g.kernel.size() != nsp) return false;
  }
  const bool ceil_mode = !w && n.attr_int("ceil_mode", 0) != 0;
  nn::resolve_forward(g, nn::parse_auto_pad(n), ceil_mode, n.op_type.c_str());
  out = {x[0], channels};
  out.insert(out.end(), g.out.begin(), g.out.end());
  return true;
}

bool broadcast(const std::vector<const Shape*>& ins, Shape& out) {
  size_t rank = 0;
  for (auto* s : ins) rank = std::max(rank, s->size());
  out.assign(rank, 1);
  for (auto* s : ins)
    for (size_t i = 0; i < s->size(); ++i) {
      int64_t& o = out[rank - s->size() + i];
      const int64_t d = (*s)[i];
      if (d == o || d == 1) continue;
      if (o != 1) return false;
      o = d;
    }
  return true;
}

std::vector<int64_t> axes_of(const Node& n, size_t input, const Lookup& constant, bool& ok) {
  if (n.has_attr("axes")) return n.attr_ints("axes");
  if (n.inputs.size() > input && !n.inputs[input].empty()) {
    const Tensor* t = constant(n.inputs[input]);
    if (!t) ok = false;
    return t ? t->to_int64_vector() : std::vector<int64_t>{};
  }
  return {};
}

// Output shape of node `n` (first output) from its inputs' shapes; false when not derivable.
bool infer(const Node& n, const std::vector<const Shape*>& in, const Lookup& constant, Shape& out) {
  const std::string& op = n.op_type;
  auto have = [&](size_t i) { return i < in.size() && in[i]; };
  if ((n.domain == "com.microsoft" || n.domain == "ai.mosaicrt") && op == "FusedConv") {
    if (!have(0) || !have(1) || !window_shape(n, *in[0], in[1], out)) return false;
    if (n.inputs.size() < 4 || n.inputs[3].empty()) return true;
    // the residual Z is added with broadcasting (the graph optimizer fuses an Add of unknown shapes)
    if (!have(3)) return false;
    const Shape conv = out;
    return broadcast({&conv, in[3]}, out);
  }
  if (n.domain == "com.microsoft" && (op == "Gelu" || op == "BiasGelu" || op == "FastGelu")) {
    if (!have(0)) return false;  // the bias, if any, spans the last axis
    out = *in[0];
    return true;
  }
  const bool matmul = op == "MatMul" || (n.domain == "ai.mosaicrt" && op == "MatMulAdd");
  if ((!n.domain.empty() && !matmul) || in.empty()) return false;
  if (same_shape_ops().count(op)) {
    if (!have(0)) return false;
    out = *in[0];
    return true;
  }
  if (broadcast_ops().count(op)) {
    for (size_t i = 0; i < in.size(); ++i)
      if (!have(i) && !n.inputs[i].empty()) return false;
    std::vector<const Shape*> present;
    for (auto* s : in)
      if (s) present.push_back(s);
    return !present.empty() && broadcast(present, out);
  }
  if (op == "ConstantOfShape" || op == "Expand") {  // shape values from a constant input
    const size_t at = op == "Expand" ? 1 : 0;
    const Tensor* s = n.inputs.size() > at ? constant(n.inputs[at]) : nullptr;
    if (!s || (op == "Expand" && !have(0))) return false;
    Shape dims = s->to_int64_vector();
    for (int64_t d : dims)
      if (d < 0) return false;
    if (op == "ConstantOfShape") {
      out = dims;
      return true;
    }
    return broadcast({in[0], &dims}, out);
  }
  if (op == "Conv") return have(0) && have(1) && window_shape(n, *in[0], in[1], out);
  if (op == "MaxPool" || op == "AveragePool" || op == "LpPool") return have(0) && window_shape(n, *in[0], nullptr, out);
  if (op == "GlobalAveragePool" || op == "GlobalMaxPool") {
    if (!have(0) || in[0]->size() < 2) return false;
    out = *in[0];
    std::fill(out.begin() + 2, out.end(), 1);
    return true;
  }
  if (matmul) {
    if (!have(0) || !have(1) || in[0]->empty() || in[1]->empty()) return false;
    Shape a = *in[0], b = *in[1];
    const bool a1 = a.size() == 1, b1 = b.size() == 1;
    if (a1) a.insert(a.begin(), 1);
    if (b1) b.push_back(1);
    if (a.back() != b[b.size() - 2]) return false;
    Shape ba(a.begin(), a.end() - 2), bb(b.begin(), b.end() - 2);
    if (!broadcast({&ba, &bb}, out)) return false;
    if (!a1) out.push_back(a[a.size() - 2]);
    if (!b1) out.push_back(b.back());
    if (op == "MatMul" || n.inputs.size() < 4 || n.inputs[3].empty()) return true;
    // MatMulAdd's residual Z is added with broadcasting (its bias C cannot change the shape)
    if (!have(3)) return false;
    const Shape product = out;
    return broadcast({&product, in[3]}, out);
  }
  if (op == "Gemm") {
    if (!have(0) || !have(1) || in[0]->size() != 2 || in[1]->size() != 2) return false;
    const Shape &a = *in[0], &b = *in[1];
    out = {n.attr_int("transA", 0) ? a[1] : a[0], n.attr_int("transB", 0) ? b[0] : b[1]};
    return true;
  }
  if (op == "Flatten") {
    if (!have(0)) return false;
    const int64_t r = static_cast<int64_t>(in[0]->size());
    int64_t axis = n.attr_int("axis", 1);
    if (axis < 0) axis += r;
    if (axis < 0 || axis > r) return false;
    int64_t outer = 1, inner = 1;
    for (int64_t i = 0; i < r; ++i)
      if (!checked_mul(i < axis ? outer : inner, (*in[0])[static_cast<size_t>(i)])) return false;
    out = {outer, inner};
    return true;
  }
  if (op == "Reshape") {
    const Tensor* s = n.inputs.size() > 1 ? constant(n.inputs[1]) : nullptr;
    if (!have(0) || !s) return false;
    out = s->to_int64_vector();
    const bool allowzero = n.attr_int("allowzero", 0) != 0;
    int64_t known = 1, infer_at = -1;
    for (size_t i = 0; i < out.size(); ++i) {
      if (out[i] == 0 && !allowzero) {
        if (i >= in[0]->size()) return false;
        out[i] = (*in[0])[i];
      }
      if (out[i] == -1) {
        if (infer_at >= 0) return false;
        infer_at = static_cast<int64_t>(i);
      } else if (out[i] < 0) {
        return false;
      } else if (!checked_mul(known, out[i])) {
        return false;
      }
    }
    const int64_t total = shape_size(*in[0]);
    if (infer_at >= 0) {
      if (known == 0 || total % known) return false;
      out[static_cast<size_t>(infer_at)] = total / known;
    }
    return shape_size(out) == total;
  }
  if (op == "Transpose") {
    if (!have(0)) return false;
    const size_t r = in[0]->size();
    std::vector<int64_t> perm = n.attr_ints("perm");
    if (perm.empty())
      for (size_t i = r; i-- > 0;) perm.push_back(static_cast<int64_t>(i));
    if (perm.size() != r) return false;
    out.clear();
    for (int64_t p : perm) {
      if (p < 0 || p >= static_cast<int64_t>(r)) return false;
      out.push_back((*in[0])[static_cast<size_t>(p)]);
    }
    return true;
  }
  if (op == "Concat") {
    for (auto* s : in)
      if (!s) return false;
    const int64_t r = static_cast<int64_t>(in[0]->size());
    int64_t axis = n.attr_int("axis", 0);
    if (axis < 0) axis += r;
    if (axis < 0 || axis >= r) return false;
    out = *in[0];
    out[static_cast<size_t>(axis)] = 0;
    for (auto* s : in) {
      if (static_cast<int64_t>(s->size()) != r) return false;
      for (int64_t i = 0; i < r; ++i)
        if (i != axis && (*s)[static_cast<size_t>(i)] != out[static_cast<size_t>(i)]) return false;
      if (!checked_add(out[static_cast<size_t>(axis)], (*s)[static_cast<size_t>(axis)])) return false;
    }
    return true;
  }
  if (op == "Unsqueeze" || op == "Squeeze") {
    if (!have(0)) return false;
    bool ok = true;
    std::vector<int64_t> axes = axes_of(n, 1, constant, ok);
    if (!ok) return false;
    const Shape& x = *in[0];
    if (op == "Unsqueeze") {
      const int64_t r = static_cast<int64_t>(x.size() + axes.size());
      std::vector<bool> at(static_cast<size_t>(r), false);
      for (int64_t a : axes) {
        if (a < 0) a += r;
        if (a < 0 || a >= r || at[static_cast<size_t>(a)]) return false;
        at[static_cast<size_t>(a)] = true;
      }
      out.clear();
      size_t k = 0;
      for (int64_t i = 0; i < r; ++i) out.push_back(at[static_cast<size_t>(i)] ? 1 : x[k++]);
      return true;
    }
    const int64_t r = static_cast<int64_t>(x.size());
    std::vector<bool> drop(x.size(), false);
    for (int64_t a : axes) {
      if (a < 0) a += r;
      if (a < 0 || a >= r || x[static_cast<size_t>(a)] != 1) return false;
      drop[static_cast<size_t>(a)] = true;
    }
    out.clear();
    for (size_t i = 0; i < x.size(); ++i)
      if (axes.empty() ? x[i] != 1 : !drop[i]) out.push_back(x[i]);
    return true;
  }
  if (op == "Gather") {
    if (!have(0) || !have(1)) return false;
    const int64_t r = static_cast<int64_t>(in[0]->size());
    int64_t axis = n.attr_int("axis", 0);
    if (axis < 0) axis += r;
    if (axis < 0 || axis >= r) return false;
    out.assign(in[0]->begin(), in[0]->begin() + axis);
    out.insert(out.end(), in[1]->begin(), in[1]->end());
    out.insert(out.end(), in[0]->begin() + axis + 1, in[0]->end());
    return true;
  }
  return false;
}

}  // namespace

std::map<std::string, Shape> static_shapes(const Graph& g, const std::vector<size_t>& order, const Lookup& constant,
                                           const std::map<std::string, Shape>* feeds) {
  std::map<std::string, Shape> shapes;
  for (const auto& [name, t] : g.initializers)
    if (t) shapes[name] = t->shape();
  for (const auto& v : g.inputs) {
    auto fed = feeds ? feeds->find(v.name) : std::map<std::string, Shape>::const_iterator();
    if (feeds && fed != feeds->end()) {
      shapes[v.name] = fed->second;
      continue;
    }
    if (shapes.count(v.name) || !v.is_tensor || !v.has_shape) continue;
    Shape s;
    bool all = true;
    for (const auto& d : v.dims) {
      all = all && d.value >= 0;
      s.push_back(d.value);
    }
    if (all) shapes[v.name] = s;
  }
  for (size_t i : order) {
    const Node& n = g.nodes[i];
    if (n.outputs.empty() || n.outputs[0].empty()) continue;
    std::vector<const Shape*> in;
    for (const auto& name : n.inputs) {
      auto it = name.empty() ? shapes.end() : shapes.find(name);
      in.push_back(it == shapes.end() ? nullptr : &it->second);
    }
    Shape out;
    try {
      if (!infer(n, in, constant, out)) continue;
    } catch (const std::exception&) {
      continue;  // inconsistent attributes: the kernel reports them at run time
    }
    shapes[n.outputs[0]] = out;
  }
  return shapes;
}

}  // namespace mrt
