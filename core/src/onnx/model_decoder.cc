// ModelProto decoder: wire format → mrt::Model. No protobuf library is involved. All
// allocations are bounded by the size of the input bytes (or of an external data file
// whose size was checked first); every inconsistency is an INVALID_MODEL error that names
// the byte offset and the message path.
#include <cstdio>
#include <fstream>
#include <limits>

#include "../graph.h"
#include "../narrow_dtype.h"
#include "wire.h"

namespace mrt {
namespace {

using wire::Reader;
using wire::WireType;

// Repeated scalar fields may arrive packed (one length-delimited run) or one per key.
template <class F>
void read_repeated_varint(Reader& r, WireType t, F&& push) {
  if (t == wire::kLengthDelimited) {
    Reader run = r.sub("packed");
    while (!run.done()) push(run.varint());
  } else {
    r.expect(t, wire::kVarint, "repeated varint");
    push(r.varint());
  }
}
template <class F>
void read_repeated_fixed32(Reader& r, WireType t, F&& push) {
  if (t == wire::kLengthDelimited) {
    Reader run = r.sub("packed");
    while (!run.done()) push(run.fixed32());
  } else {
    r.expect(t, wire::kFixed32, "repeated fixed32");
    push(r.fixed32());
  }
}
template <class F>
void read_repeated_fixed64(Reader& r, WireType t, F&& push) {
  if (t == wire::kLengthDelimited) {
    Reader run = r.sub("packed");
    while (!run.done()) push(run.fixed64());
  } else {
    r.expect(t, wire::kFixed64, "repeated fixed64");
    push(r.fixed64());
  }
}

template <class T>
void store_int(T& dst, int64_t v) {
  if constexpr (std::is_same_v<T, Float16> || std::is_same_v<T, BFloat16>) {
    dst.bits = static_cast<uint16_t>(v);
  } else if constexpr (std::is_same_v<T, bool>) {
    dst = v != 0;
  } else {
    dst = static_cast<T>(v);
  }
}

float bits_to_float(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}
double bits_to_double(uint64_t u) {
  double d;
  std::memcpy(&d, &u, 8);
  return d;
}

class Decoder {
 public:
  Decoder(const uint8_t* data, size_t size, const DecodeOptions& opts) : data_(data), size_(size), opts_(opts) {}

  Model model() {
    Model m;
    Reader r(data_, size_, 0, "ModelProto");
    if (size_ == 0) fail(MRT_INVALID_MODEL, "model is empty (0 bytes)");
    bool have_graph = false;
    uint32_t f;
    WireType t;
    while (r.next(f, t)) {
      switch (f) {
        case 1: r.expect(t, wire::kVarint, "ir_version"); m.ir_version = static_cast<int64_t>(r.varint()); break;
        case 2: r.expect(t, wire::kLengthDelimited, "producer_name"); m.producer_name = r.string(); break;
        case 3: r.expect(t, wire::kLengthDelimited, "producer_version"); m.producer_version = r.string(); break;
        case 4: r.expect(t, wire::kLengthDelimited, "domain"); m.domain = r.string(); break;
        case 5: r.expect(t, wire::kVarint, "model_version"); m.model_version = static_cast<int64_t>(r.varint()); break;
        case 6: r.expect(t, wire::kLengthDelimited, "doc_string"); m.doc_string = r.string(); break;
        case 7: {
          r.expect(t, wire::kLengthDelimited, "graph");
          Reader g = r.sub("graph");
          m.graph = graph(g, 0);
          have_graph = true;
          break;
        }
        case 8: {
          r.expect(t, wire::kLengthDelimited, "opset_import");
          Reader o = r.sub("opset_import");
          auto [domain, version] = opset_id(o);
          m.opsets[domain] = version;
          break;
        }
        case 14: {
          r.expect(t, wire::kLengthDelimited, "metadata_props");
          Reader e = r.sub("metadata_props");
          m.metadata.push_back(string_entry(e));
          break;
        }
        case 25: {
          r.expect(t, wire::kLengthDelimited, "functions");
          Reader fr = r.sub(str_cat("functions[", m.functions.size(), "]"));
          m.functions.push_back(function(fr));
          break;
        }
        default: r.skip(t);
      }
    }
    if (!have_graph) fail(MRT_INVALID_MODEL, "model has no graph (ModelProto.graph is missing)");
    if (m.ir_version <= 0) fail(MRT_INVALID_MODEL, "model has no ir_version");
    if (m.opsets.empty()) {
      if (m.ir_version >= 3) fail(MRT_INVALID_MODEL, "model has no opset_import");
      m.opsets[""] = 1;
    }
    return m;
  }

 private:
  std::pair<std::string, int64_t> opset_id(Reader& r) {
    std::string domain;
    int64_t version = 0;
    uint32_t f;
    WireType t;
    while (r.next(f, t)) {
      if (f == 1) { r.expect(t, wire::kLengthDelimited, "domain"); domain = r.string(); }
      else if (f == 2) { r.expect(t, wire::kVarint, "version"); version = static_cast<int64_t>(r.varint()); }
      else r.skip(t);
    }
    if (domain == "ai.onnx") domain.clear();
    return {domain, version};
  }

  std::pair<std::string, std::string> string_entry(Reader& r) {
    std::string k, v;
    uint32_t f;
    WireType t;
    while (r.next(f, t)) {
      if (f == 1) { r.expect(t, wire::kLengthDelimited, "key"); k = r.string(); }
      else if (f == 2) { r.expect(t, wire::kLengthDelimited, "value"); v = r.string(); }
      else r.skip(t);
    }
    return {k, v};
  }

  Graph graph(Reader& r, int depth) {
    if (depth > opts_.limits.max_graph_depth)
      r.error(str_cat("subgraphs nested deeper than ", opts_.limits.max_graph_depth,
                      " levels (the limit: session.max_graph_depth / MOSAICRT_MAX_GRAPH_DEPTH)"));
    Graph g;
    uint32_t f;
    WireType t;
    while (r.next(f, t)) {
      switch (f) {
        case 1: {
          r.expect(t, wire::kLengthDelimited, "node");
          size_t off = r.offset();
          Reader n = r.sub(str_cat("node[", g.nodes.size(), "]"));
          g.nodes.push_back(node(n, depth));
          g.nodes.back().byte_offset = off;
          break;
        }
        case 2: r.expect(t, wire::kLengthDelimited, "name"); g.name = r.string(); break;
        case 10: r.expect(t, wire::kLengthDelimited, "doc_string"); g.doc_string = r.string(); break;
        case 5: {
          r.expect(t, wire::kLengthDelimited, "initializer");
          Reader tr = r.sub(str_cat("initializer[", g.initializers.size(), "]"));
          std::string name;
          auto tensor_ptr = tensor(tr, &name);
          if (name.empty()) r.error("initializer without a name");
          g.initializers.emplace_back(name, std::move(tensor_ptr));
          break;
        }
        case 15: r.error("sparse_initializer is not supported");
        case 11: case 12: case 13: {
          r.expect(t, wire::kLengthDelimited, "value info");
          const char* what = f == 11 ? "input" : f == 12 ? "output" : "value_info";
          auto& list = f == 11 ? g.inputs : f == 12 ? g.outputs : g.value_info;
          Reader v = r.sub(str_cat(what, "[", list.size(), "]"));
          list.push_back(value_info(v));
          break;
        }
        default: r.skip(t);
      }
    }
    return g;
  }

  Node node(Reader& r, int depth) {
    if (++node_count_ > opts_.limits.max_nodes)
      r.error(str_cat("the model has more than ", opts_.limits.max_nodes,
                      " nodes (graphs, subgraphs and functions together; the limit: session.max_nodes / "
                      "MOSAICRT_MAX_NODES)"));
    Node n;
    uint32_t f;
    WireType t;
    while (r.next(f, t)) {
      switch (f) {
        case 1: r.expect(t, wire::kLengthDelimited, "input"); n.inputs.push_back(r.string()); break;
        case 2: r.expect(t, wire::kLengthDelimited, "output"); n.outputs.push_back(r.string()); break;
        case 3: r.expect(t, wire::kLengthDelimited, "name"); n.name = r.string(); break;
        case 4: r.expect(t, wire::kLengthDelimited, "op_type"); n.op_type = r.string(); break;
        case 7: r.expect(t, wire::kLengthDelimited, "domain"); n.domain = r.string(); break;
        case 5: {
          r.expect(t, wire::kLengthDelimited, "attribute");
          if (static_cast<int64_t>(n.attributes.size()) >= opts_.limits.max_node_attributes)
            r.error(str_cat("node has more than ", opts_.limits.max_node_attributes,
                            " attributes (the limit: session.max_node_attributes / MOSAICRT_MAX_NODE_ATTRIBUTES)"));
          Reader a = r.sub(str_cat("attribute[", n.attributes.size(), "]"));
          n.attributes.push_back(attribute(a, depth));
          break;
        }
        default: r.skip(t);
      }
    }
    if (n.domain == "ai.onnx") n.domain.clear();
    if (n.op_type.empty()) r.error("node has no op_type");
    return n;
  }

  Attribute attribute(Reader& r, int depth) {
    Attribute a;
    bool has_type = false;
    uint32_t f;
    WireType t;
    AttrType inferred = AttrType::kUndefined;
    while (r.next(f, t)) {
      switch (f) {
        case 1: r.expect(t, wire::kLengthDelimited, "name"); a.name = r.string(); break;
        case 20: r.expect(t, wire::kVarint, "type"); a.type = static_cast<AttrType>(r.varint()); has_type = true; break;
        case 21: r.expect(t, wire::kLengthDelimited, "ref_attr_name"); a.ref_attr_name = r.string(); break;
        case 2: r.expect(t, wire::kFixed32, "f"); a.f = bits_to_float(r.fixed32()); inferred = AttrType::kFloat; break;
        case 3: r.expect(t, wire::kVarint, "i"); a.i = static_cast<int64_t>(r.varint()); inferred = AttrType::kInt; break;
        case 4: r.expect(t, wire::kLengthDelimited, "s"); a.s = r.string(); inferred = AttrType::kString; break;
        case 5: {
          r.expect(t, wire::kLengthDelimited, "t");
          Reader tr = r.sub("t");
          a.t = tensor(tr, nullptr);
          inferred = AttrType::kTensor;
          break;
        }
        case 6: {
          r.expect(t, wire::kLengthDelimited, "g");
          Reader gr = r.sub("g");
          a.g = std::make_shared<Graph>(graph(gr, depth + 1));
          inferred = AttrType::kGraph;
          break;
        }
        case 7: read_repeated_fixed32(r, t, [&](uint32_t v) { a.floats.push_back(bits_to_float(v)); });
          inferred = AttrType::kFloats; break;
        case 8: read_repeated_varint(r, t, [&](uint64_t v) { a.ints.push_back(static_cast<int64_t>(v)); });
          inferred = AttrType::kInts; break;
        case 9: r.expect(t, wire::kLengthDelimited, "strings"); a.strings.push_back(r.string());
          inferred = AttrType::kStrings; break;
        case 10: {
          r.expect(t, wire::kLengthDelimited, "tensors");
          Reader tr = r.sub(str_cat("tensors[", a.tensors.size(), "]"));
          a.tensors.push_back(tensor(tr, nullptr));
          inferred = AttrType::kTensors;
          break;
        }
        case 11: {
          r.expect(t, wire::kLengthDelimited, "graphs");
          Reader gr = r.sub(str_cat("graphs[", a.graphs.size(), "]"));
          a.graphs.push_back(std::make_shared<Graph>(graph(gr, depth + 1)));
          inferred = AttrType::kGraphs;
          break;
        }
        case 22: case 23: r.skip(t); inferred = f == 22 ? AttrType::kSparseTensor : AttrType::kSparseTensors; break;
        case 14: case 15: r.skip(t); inferred = f == 14 ? AttrType::kTypeProto : AttrType::kTypeProtos; break;
        default: r.skip(t);
      }
    }
    if (a.name.empty()) r.error("attribute without a name");
    if (!has_type) a.type = inferred;
    if (static_cast<int32_t>(a.type) < 0 || static_cast<int32_t>(a.type) > 14)
      r.error(str_cat("attribute '", a.name, "' has unknown type ", static_cast<int32_t>(a.type)));
    // A declared TENSOR/GRAPH type must come with its value (a reference inside a function body
    // gets the value of the calling node's attribute when it is inlined).
    if (a.ref_attr_name.empty() && ((a.type == AttrType::kTensor && !a.t) || (a.type == AttrType::kGraph && !a.g)))
      r.error(str_cat("attribute '", a.name, "' declares type ", a.type == AttrType::kTensor ? "TENSOR" : "GRAPH",
                      " but holds no value"));
    return a;
  }

  ValueInfo value_info(Reader& r) {
    ValueInfo v;
    uint32_t f;
    WireType t;
    while (r.next(f, t)) {
      if (f == 1) { r.expect(t, wire::kLengthDelimited, "name"); v.name = r.string(); }
      else if (f == 2) { r.expect(t, wire::kLengthDelimited, "type"); Reader tp = r.sub("type"); type_proto(tp, v); }
      else r.skip(t);
    }
    return v;
  }

  // A TypeProto in ONNX notation ("seq(tensor(float))"); `f` is the field that held `r`.
  std::string nested_type(Reader& r, int depth) {
    if (depth > 16) r.error("types nested too deeply");
    uint32_t f;
    WireType t;
    std::string out = "?";
    while (r.next(f, t)) {
      if (f == 1 || f == 4 || f == 5 || f == 8 || f == 9) {
        r.expect(t, wire::kLengthDelimited, "type");
        Reader inner = r.sub("type");
        out = f == 1 ? tensor_type_name("tensor", inner) : composite_type(f, inner, depth + 1);
      } else {
        r.skip(t);
      }
    }
    return out;
  }

  std::string tensor_type_name(const char* ctor, Reader& r) {
    uint32_t f;
    WireType t;
    std::string elem = "?";
    while (r.next(f, t)) {
      if (f == 1) {
        r.expect(t, wire::kVarint, "elem_type");
        const int32_t code = static_cast<int32_t>(r.varint());
        elem = dtype_is_known(code) ? onnx_type_name(static_cast<DType>(code)) : "?";
      } else {
        r.skip(t);
      }
    }
    return str_cat(ctor, "(", elem, ")");
  }

  std::string composite_type(uint32_t field, Reader& r, int depth) {
    if (field == 8) return tensor_type_name("sparse_tensor", r);
    uint32_t f;
    WireType t;
    std::string key = "?", elem = "?";
    while (r.next(f, t)) {
      if (field == 5 && f == 1) {
        r.expect(t, wire::kVarint, "key_type");
        const int32_t code = static_cast<int32_t>(r.varint());
        key = dtype_is_known(code) ? onnx_type_name(static_cast<DType>(code)) : "?";
      } else if ((field == 5 && f == 2) || (field != 5 && f == 1)) {
        r.expect(t, wire::kLengthDelimited, "elem_type");
        Reader inner = r.sub("elem_type");
        elem = nested_type(inner, depth + 1);
      } else {
        r.skip(t);
      }
    }
    if (field == 4) return str_cat("seq(", elem, ")");
    if (field == 5) return str_cat("map(", key, ",", elem, ")");
    return str_cat("optional(", elem, ")");
  }

  void type_proto(Reader& r, ValueInfo& v) {
    uint32_t f;
    WireType t;
    while (r.next(f, t)) {
      if (f == 1) {
        r.expect(t, wire::kLengthDelimited, "tensor_type");
        Reader tt = r.sub("tensor_type");
        uint32_t f2;
        WireType t2;
        while (tt.next(f2, t2)) {
          if (f2 == 1) {
            tt.expect(t2, wire::kVarint, "elem_type");
            v.elem_type = static_cast<DType>(static_cast<int32_t>(tt.varint()));
          } else if (f2 == 2) {
            tt.expect(t2, wire::kLengthDelimited, "shape");
            Reader sh = tt.sub("shape");
            v.has_shape = true;
            uint32_t f3;
            WireType t3;
            while (sh.next(f3, t3)) {
              if (f3 != 1) { sh.skip(t3); continue; }
              sh.expect(t3, wire::kLengthDelimited, "dim");
              Reader d = sh.sub(str_cat("dim[", v.dims.size(), "]"));
              Dim dim;
              uint32_t f4;
              WireType t4;
              while (d.next(f4, t4)) {
                if (f4 == 1) { d.expect(t4, wire::kVarint, "dim_value"); dim.value = static_cast<int64_t>(d.varint()); }
                else if (f4 == 2) { d.expect(t4, wire::kLengthDelimited, "dim_param"); dim.param = d.string(); }
                else if (f4 == 3) { d.expect(t4, wire::kLengthDelimited, "denotation"); dim.denotation = d.string(); }
                else d.skip(t4);
              }
              v.dims.push_back(std::move(dim));
            }
          } else {
            tt.skip(t2);
          }
        }
      } else if (f == 4 || f == 5 || f == 8 || f == 9) {
        r.expect(t, wire::kLengthDelimited, "type");
        Reader inner = r.sub(f == 4 ? "sequence_type" : f == 5 ? "map_type" : f == 8 ? "sparse_tensor_type" : "optional_type");
        v.is_tensor = false;
        v.type = composite_type(f, inner, 0);
      } else {
        r.skip(t);
      }
    }
  }

  FunctionDef function(Reader& r) {
    FunctionDef fn;
    uint32_t f;
    WireType t;
    while (r.next(f, t)) {
      switch (f) {
        case 1: r.expect(t, wire::kLengthDelimited, "name"); fn.name = r.string(); break;
        case 4: r.expect(t, wire::kLengthDelimited, "input"); fn.inputs.push_back(r.string()); break;
        case 5: r.expect(t, wire::kLengthDelimited, "output"); fn.outputs.push_back(r.string()); break;
        case 6: r.expect(t, wire::kLengthDelimited, "attribute"); fn.attribute_names.push_back(r.string()); break;
        case 11: {
          r.expect(t, wire::kLengthDelimited, "attribute_proto");
          Reader a = r.sub("attribute_proto");
          fn.attribute_defaults.push_back(attribute(a, 1));
          break;
        }
        case 7: {
          r.expect(t, wire::kLengthDelimited, "node");
          size_t off = r.offset();
          Reader n = r.sub(str_cat("node[", fn.nodes.size(), "]"));
          fn.nodes.push_back(node(n, 1));
          fn.nodes.back().byte_offset = off;
          break;
        }
        case 9: {
          r.expect(t, wire::kLengthDelimited, "opset_import");
          Reader o = r.sub("opset_import");
          auto [d, ver] = opset_id(o);
          fn.opsets[d] = ver;
          break;
        }
        case 10: r.expect(t, wire::kLengthDelimited, "domain"); fn.domain = r.string(); break;
        default: r.skip(t);
      }
    }
    if (fn.domain == "ai.onnx") fn.domain.clear();
    return fn;
  }

  // TensorProto → Tensor. Element counts are validated against the dims before any
  // allocation proportional to the dims is made.
  std::shared_ptr<Tensor> tensor(Reader& r, std::string* name_out) {
    Shape dims;
    int32_t data_type = 0;
    std::string name;
    Reader::Bytes raw{nullptr, 0, 0};
    bool has_raw = false, external = false, has_strings = false;
    std::vector<float> floats;
    std::vector<double> doubles;
    std::vector<int64_t> ints;  // int32_data and int64_data and uint64_data
    std::vector<std::string> strings;
    int typed_field = 0;
    std::vector<std::pair<std::string, std::string>> ext;
    uint32_t f;
    WireType t;
    size_t start = r.offset();
    while (r.next(f, t)) {
      switch (f) {
        case 1: read_repeated_varint(r, t, [&](uint64_t v) { dims.push_back(static_cast<int64_t>(v)); }); break;
        case 2: r.expect(t, wire::kVarint, "data_type"); data_type = static_cast<int32_t>(r.varint()); break;
        case 3: r.error("segmented tensors are not supported");
        case 4: read_repeated_fixed32(r, t, [&](uint32_t v) { floats.push_back(bits_to_float(v)); }); typed_field = 4; break;
        case 5: read_repeated_varint(r, t, [&](uint64_t v) { ints.push_back(static_cast<int32_t>(v)); }); typed_field = 5; break;
        case 6:
          r.expect(t, wire::kLengthDelimited, "string_data");
          strings.push_back(r.string());
          has_strings = true;
          break;
        case 7: read_repeated_varint(r, t, [&](uint64_t v) { ints.push_back(static_cast<int64_t>(v)); }); typed_field = 7; break;
        case 8: r.expect(t, wire::kLengthDelimited, "name"); name = r.string(); break;
        case 9: r.expect(t, wire::kLengthDelimited, "raw_data"); raw = r.bytes(); has_raw = true; break;
        case 10: read_repeated_fixed64(r, t, [&](uint64_t v) { doubles.push_back(bits_to_double(v)); }); typed_field = 10; break;
        case 11: read_repeated_varint(r, t, [&](uint64_t v) { ints.push_back(static_cast<int64_t>(v)); }); typed_field = 11; break;
        case 13: {
          r.expect(t, wire::kLengthDelimited, "external_data");
          Reader e = r.sub("external_data");
          ext.push_back(string_entry(e));
          break;
        }
        case 14: r.expect(t, wire::kVarint, "data_location"); external = r.varint() == 1; break;
        default: r.skip(t);
      }
    }
    if (name_out) *name_out = name;
    std::string label = name.empty() ? std::string("tensor") : str_cat("tensor '", name, "'");
    auto bad = [&](const std::string& what) -> void {
      fail(MRT_INVALID_MODEL, "malformed model at byte ", start, " in ", r.path(), ": ", label, " ", what);
    };
    DType dt = static_cast<DType>(data_type);
    if (has_strings && data_type != 8) bad(str_cat("holds string_data but has element type ", data_type));
    if (!dtype_is_known(data_type)) {
      if (data_type == 0) bad("has no data_type");
      fail(MRT_NOT_IMPLEMENTED, label, " has element type ", dtype_name(dt), " (", data_type, "), which is not supported");
    }
    if (!dtype_is_storable(dt)) fail(MRT_NOT_IMPLEMENTED, label, " has element type ", dtype_name(dt), ", which is not supported");
    for (int64_t d : dims)
      if (d < 0) bad(str_cat("has negative dimension ", d));
    int64_t numel = 1;
    for (int64_t d : dims) {
      if (d != 0 && numel > std::numeric_limits<int64_t>::max() / d) bad("has too many elements");
      numel *= d;
    }
    size_t esz = dtype_size(dt);
    if (numel > 0 && static_cast<uint64_t>(numel) > (std::numeric_limits<uint64_t>::max() / 2) / esz)
      bad("has too many elements");
    uint64_t want_bytes = static_cast<uint64_t>(numel) * esz;

    if (dt == DType::kString) {
      if (external || has_raw || typed_field) bad("of element type string must hold its values in string_data");
      if (strings.size() != static_cast<size_t>(numel))
        bad(str_cat("holds ", strings.size(), " strings but shape ", shape_str(dims), " needs ", numel));
      auto out = std::make_shared<Tensor>(dt, dims);
      for (int64_t i = 0; i < numel; ++i) set_string(*out, i, std::move(strings[static_cast<size_t>(i)]));
      return out;
    }
    if (dtype_is_narrow(dt)) return narrow_tensor(dt, dims, numel, has_raw, raw, external, typed_field, ints, bad);
    if (external) {
      // The caller supplies this initializer's data (add_external_initializers): nothing to read.
      if (name_out && opts_.supplied_initializers.count(name)) return std::make_shared<Tensor>(dt, dims);
      return external_tensor(dt, dims, want_bytes, ext, label);
    }
    if (has_raw) {
      if (raw.size != want_bytes)
        bad(str_cat("raw_data holds ", raw.size, " bytes but shape ", shape_str(dims), " of ", dtype_name(dt), " needs ",
                    want_bytes));
      auto out = std::make_shared<Tensor>(dt, dims);
      if (want_bytes) std::memcpy(out->raw(), raw.data, want_bytes);
      return out;
    }
    size_t count = typed_field == 4 ? floats.size() : typed_field == 10 ? doubles.size() : ints.size();
    if (typed_field == 0 && numel != 0) bad(str_cat("has shape ", shape_str(dims), " but no data"));
    if (static_cast<uint64_t>(count) != static_cast<uint64_t>(numel))
      bad(str_cat("holds ", count, " values but shape ", shape_str(dims), " needs ", numel));
    int expected_field = 0;
    switch (dt) {
      case DType::kFloat: expected_field = 4; break;
      case DType::kDouble: expected_field = 10; break;
      case DType::kInt64: expected_field = 7; break;
      case DType::kUInt32: case DType::kUInt64: expected_field = 11; break;
      default: expected_field = 5; break;
    }
    if (numel != 0 && typed_field != expected_field)
      bad(str_cat("stores ", dtype_name(dt), " values in the wrong typed field (", typed_field, ")"));
    auto out = std::make_shared<Tensor>(dt, dims);
    size_t n = static_cast<size_t>(numel);
    switch (dt) {
      // (an empty tensor's vectors have no data: memcpy must not see their NULL)
      case DType::kFloat: if (n) std::memcpy(out->raw(), floats.data(), n * 4); break;
      case DType::kDouble: if (n) std::memcpy(out->raw(), doubles.data(), n * 8); break;
      default:
        MRT_DISPATCH_ALL(dt, "tensor decoding", {
          T* p = out->data_as<T>();
          for (size_t i = 0; i < n; ++i) {
            store_int(p[i], ints[i]);
          }
        });
    }
    return out;
  }

  // float8/float4/int4/int2: raw_data or int32_data hold ONNX's packed bytes (one per
  // element for the 8-bit types); unpack to one byte per element.
  template <class Bad, class Raw>
  std::shared_ptr<Tensor> narrow_tensor(DType dt, const Shape& dims, int64_t numel, bool has_raw, const Raw& raw,
                                        bool external, int typed_field, const std::vector<int64_t>& ints,
                                        const Bad& bad) {
    if (external) fail(MRT_NOT_IMPLEMENTED, "external data for element type ", dtype_name(dt), " is not supported");
    const size_t want = narrow::packed_bytes(dt, numel);
    std::vector<uint8_t> packed;
    if (has_raw) {
      if (raw.size != want)
        bad(str_cat("raw_data holds ", raw.size, " bytes but shape ", shape_str(dims), " of ", dtype_name(dt),
                    " needs ", want));
      packed.assign(reinterpret_cast<const uint8_t*>(raw.data), reinterpret_cast<const uint8_t*>(raw.data) + want);
    } else {
      if (numel != 0 && typed_field != 5)
        bad(str_cat("stores ", dtype_name(dt), " values in the wrong typed field (", typed_field, ")"));
      if (ints.size() != want)
        bad(str_cat("holds ", ints.size(), " packed values but shape ", shape_str(dims), " of ", dtype_name(dt),
                    " needs ", want));
      for (int64_t v : ints) packed.push_back(static_cast<uint8_t>(v));
    }
    auto out = std::make_shared<Tensor>(dt, dims);
    narrow::unpack(dt, packed.data(), numel, static_cast<uint8_t*>(out->raw()));
    return out;
  }

  std::shared_ptr<Tensor> external_tensor(DType dt, const Shape& dims, uint64_t want_bytes,
                                          const std::vector<std::pair<std::string, std::string>>& ext,
                                          const std::string& label) {
    std::string location;
    int64_t offset = 0, length = -1;
    for (auto& [k, v] : ext) {
      try {
        if (k == "location") location = v;
        else if (k == "offset") offset = std::stoll(v);
        else if (k == "length") length = std::stoll(v);
      } catch (const std::exception&) {
        fail(MRT_INVALID_MODEL, label, ": external_data '", k, "' is not a number: '", v, "'");
      }
    }
    if (location.empty()) fail(MRT_INVALID_MODEL, label, ": external data without a location");
    if (opts_.model_dir.empty())
      fail(MRT_INVALID_ARGUMENT, label, " keeps its data in external file '", location,
           "' but the model was loaded from bytes; load it from its path or set the session config entry "
           "'session.model_dir'");
    if (location[0] == '/' || location[0] == '\\' || location.find("..") != std::string::npos ||
        location.find(':') != std::string::npos)
      fail(MRT_INVALID_MODEL, label, ": external data location '", location,
           "' must be a relative path inside the model's directory");
    if (offset < 0) fail(MRT_INVALID_MODEL, label, ": negative external data offset");
    if (length >= 0 && static_cast<uint64_t>(length) != want_bytes)
      fail(MRT_INVALID_MODEL, label, ": external data length ", length, " does not match its shape (", want_bytes,
           " bytes)");
    std::string path = opts_.model_dir + "/" + location;
    std::ifstream in(path, std::ios::binary | std::ios::ate);
    if (!in) fail(MRT_NO_SUCH_FILE, label, ": cannot open external data file '", path, "'");
    uint64_t file_size = static_cast<uint64_t>(in.tellg());
    if (static_cast<uint64_t>(offset) > file_size || want_bytes > file_size - static_cast<uint64_t>(offset))
      fail(MRT_INVALID_MODEL, label, ": external data file '", path, "' has ", file_size, " bytes, need ", want_bytes,
           " at offset ", offset);
    auto out = std::make_shared<Tensor>(dt, dims);
    in.seekg(offset);
    if (want_bytes && !in.read(static_cast<char*>(out->raw()), static_cast<std::streamsize>(want_bytes)))
      fail(MRT_NO_SUCH_FILE, label, ": failed reading external data file '", path, "'");
    return out;
  }

  const uint8_t* data_;
  size_t size_;
  const DecodeOptions& opts_;
  int64_t node_count_ = 0;
};

}  // namespace

Model decode_model(const uint8_t* data, size_t size, const DecodeOptions& options) {
  return Decoder(data, size, options).model();
}

}  // namespace mrt
