// ModelProto writer: the inverse of model_decoder.cc for what a session keeps, used to save the
// optimized graph (SessionOptions.optimized_model_filepath). Field numbers are onnx.proto's.
#include <cstring>
#include <set>
#include <string>

#include "../graph.h"

namespace mrt {

namespace {

class Writer {
 public:
  std::string& bytes() { return out_; }

  void varint(uint64_t v) {
    while (v >= 0x80) {
      out_.push_back(static_cast<char>((v & 0x7F) | 0x80));
      v >>= 7;
    }
    out_.push_back(static_cast<char>(v));
  }
  void key(uint32_t field, uint32_t wire_type) { varint((static_cast<uint64_t>(field) << 3) | wire_type); }
  void int_field(uint32_t field, int64_t v) {
    key(field, 0);
    varint(static_cast<uint64_t>(v));
  }
  void float_field(uint32_t field, float v) {
    key(field, 5);
    uint32_t bits;
    std::memcpy(&bits, &v, 4);
    for (int i = 0; i < 4; ++i) out_.push_back(static_cast<char>((bits >> (8 * i)) & 0xFF));
  }
  void bytes_field(uint32_t field, const std::string& s) {
    key(field, 2);
    varint(s.size());
    out_ += s;
  }
  void bytes_field(uint32_t field, const void* data, size_t n) {
    key(field, 2);
    varint(n);
    if (n) out_.append(static_cast<const char*>(data), n);
  }
  // Writes a nested message produced by `fill` into a fresh writer.
  template <class F>
  void message(uint32_t field, F&& fill) {
    Writer sub;
    fill(sub);
    bytes_field(field, sub.out_);
  }

 private:
  std::string out_;
};

void write_graph(Writer& w, const Graph& g);

void write_tensor(Writer& w, const Tensor& t, const std::string& name) {
  for (int64_t d : t.shape()) w.int_field(1, d);
  w.int_field(2, static_cast<int64_t>(t.dtype()));
  if (!name.empty()) w.bytes_field(8, name);
  if (!dtype_is_storable(t.dtype()))
    fail(MRT_NOT_IMPLEMENTED, "saving the model: tensor '", name, "' of type ", dtype_name(t.dtype()),
         " cannot be written");
  if (t.dtype() == DType::kString) {
    for (int64_t i = 0; i < t.numel(); ++i) w.bytes_field(6, string_at(t, i));
    return;
  }
  w.bytes_field(9, t.raw(), t.nbytes());
}

void write_value_info(Writer& w, const ValueInfo& v) {
  w.bytes_field(1, v.name);
  if (!v.is_tensor || v.elem_type == DType::kUndefined) return;  // type left unspecified
  w.message(2, [&](Writer& type) {
    type.message(1, [&](Writer& tensor) {
      tensor.int_field(1, static_cast<int64_t>(v.elem_type));
      if (!v.has_shape) return;
      tensor.message(2, [&](Writer& shape) {
        for (const Dim& d : v.dims)
          shape.message(1, [&](Writer& dim) {
            if (d.value >= 0)
              dim.int_field(1, d.value);
            else if (!d.param.empty())
              dim.bytes_field(2, d.param);
            if (!d.denotation.empty()) dim.bytes_field(3, d.denotation);
          });
      });
    });
  });
}

void write_attribute(Writer& w, const Attribute& a) {
  w.bytes_field(1, a.name);
  if (!a.ref_attr_name.empty()) w.bytes_field(21, a.ref_attr_name);
  switch (a.type) {
    case AttrType::kFloat: w.float_field(2, a.f); break;
    case AttrType::kInt: w.int_field(3, a.i); break;
    case AttrType::kString: w.bytes_field(4, a.s); break;
    case AttrType::kTensor: w.message(5, [&](Writer& t) { write_tensor(t, *a.t, ""); }); break;
    case AttrType::kGraph: w.message(6, [&](Writer& g) { write_graph(g, *a.g); }); break;
    case AttrType::kFloats: for (float f : a.floats) w.float_field(7, f); break;
    case AttrType::kInts: for (int64_t i : a.ints) w.int_field(8, i); break;
    case AttrType::kStrings: for (const auto& s : a.strings) w.bytes_field(9, s); break;
    case AttrType::kTensors:
      for (const auto& t : a.tensors) w.message(10, [&](Writer& tw) { write_tensor(tw, *t, ""); });
      break;
    case AttrType::kGraphs:
      for (const auto& g : a.graphs) w.message(11, [&](Writer& gw) { write_graph(gw, *g); });
      break;
    default:
      fail(MRT_NOT_IMPLEMENTED, "saving the model: attribute '", a.name, "' of type ", static_cast<int>(a.type),
           " cannot be written");
  }
  w.int_field(20, static_cast<int64_t>(a.type));
}

void write_node(Writer& w, const Node& n) {
  for (const auto& in : n.inputs) w.bytes_field(1, in);
  for (const auto& out : n.outputs) w.bytes_field(2, out);
  if (!n.name.empty()) w.bytes_field(3, n.name);
  w.bytes_field(4, n.op_type);
  for (const auto& a : n.attributes) w.message(5, [&](Writer& aw) { write_attribute(aw, a); });
  if (!n.domain.empty()) w.bytes_field(7, n.domain);
}

// Every value name a graph's nodes (and the subgraphs they hold) read.
void collect_reads(const Graph& g, std::set<std::string>& reads) {
  for (const auto& n : g.nodes) {
    reads.insert(n.inputs.begin(), n.inputs.end());
    for (const auto& a : n.attributes) {
      if (a.g) collect_reads(*a.g, reads);
      for (const auto& sub : a.graphs) collect_reads(*sub, reads);
    }
  }
  for (const auto& o : g.outputs) reads.insert(o.name);
}

void write_graph(Writer& w, const Graph& g) {
  for (const auto& n : g.nodes) w.message(1, [&](Writer& nw) { write_node(nw, n); });
  w.bytes_field(2, g.name);
  // Initializers the optimizer made obsolete (folded BatchNormalization parameters, ...) are left out.
  std::set<std::string> reads;
  collect_reads(g, reads);
  for (const auto& in : g.inputs) reads.insert(in.name);
  for (const auto& init : g.initializers)  // (no structured bindings: lambdas capture them only from C++20)
    if (reads.count(init.first)) w.message(5, [&](Writer& tw) { write_tensor(tw, *init.second, init.first); });
  if (!g.doc_string.empty()) w.bytes_field(10, g.doc_string);
  for (const auto& v : g.inputs) w.message(11, [&](Writer& vw) { write_value_info(vw, v); });
  for (const auto& v : g.outputs) w.message(12, [&](Writer& vw) { write_value_info(vw, v); });
  // value_info is left out: after optimization some of it may describe values that no longer
  // exist; readers infer intermediate shapes again.
}

}  // namespace

std::string encode_model(const Model& model) {
  Writer w;
  w.int_field(1, model.ir_version);
  if (!model.producer_name.empty()) w.bytes_field(2, model.producer_name);
  if (!model.producer_version.empty()) w.bytes_field(3, model.producer_version);
  if (!model.domain.empty()) w.bytes_field(4, model.domain);
  if (model.model_version) w.int_field(5, model.model_version);
  if (!model.doc_string.empty()) w.bytes_field(6, model.doc_string);
  w.message(7, [&](Writer& g) { write_graph(g, model.graph); });
  for (const auto& opset : model.opsets)
    w.message(8, [&](Writer& o) {
      if (!opset.first.empty()) o.bytes_field(1, opset.first);
      o.int_field(2, opset.second);
    });
  for (const auto& entry : model.metadata)
    w.message(14, [&](Writer& p) {
      p.bytes_field(1, entry.first);
      p.bytes_field(2, entry.second);
    });
  return std::move(w.bytes());
}

}  // namespace mrt
