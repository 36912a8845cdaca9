// The decoded model: what the protobuf decoder (onnx/model_decoder.cc) produces and the
// session executes. Plain data; no protobuf types leak past the decoder.
#pragma once
#include <cstdint>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "resource_limits.h"
#include "tensor.h"

namespace mrt {

struct Graph;

// AttributeProto.AttributeType codes.
enum class AttrType : int32_t {
  kUndefined = 0, kFloat = 1, kInt = 2, kString = 3, kTensor = 4, kGraph = 5,
  kFloats = 6, kInts = 7, kStrings = 8, kTensors = 9, kGraphs = 10,
  kSparseTensor = 11, kSparseTensors = 12, kTypeProto = 13, kTypeProtos = 14,
};

struct Attribute {
  std::string name;
  AttrType type = AttrType::kUndefined;
  float f = 0.f;
  int64_t i = 0;
  std::string s;
  std::shared_ptr<Tensor> t;
  std::shared_ptr<Graph> g;
  std::vector<float> floats;
  std::vector<int64_t> ints;
  std::vector<std::string> strings;
  std::vector<std::shared_ptr<Tensor>> tensors;
  std::vector<std::shared_ptr<Graph>> graphs;
  std::string ref_attr_name;  // attribute reference inside a function body
};

struct Node {
  std::string name;
  std::string op_type;
  std::string domain;  // "" and "ai.onnx" are the same domain
  std::vector<std::string> inputs;   // "" = omitted optional input
  std::vector<std::string> outputs;  // "" = omitted optional output
  std::vector<Attribute> attributes;
  size_t byte_offset = 0;  // where the NodeProto started in the model bytes

  const Attribute* attr(const std::string& name) const;
  bool has_attr(const std::string& name) const { return attr(name) != nullptr; }
  // Typed getters: return `def` when absent; throw INVALID_MODEL when present with another type.
  int64_t attr_int(const std::string& name, int64_t def) const;
  float attr_float(const std::string& name, float def) const;
  std::string attr_string(const std::string& name, const std::string& def) const;
  std::vector<int64_t> attr_ints(const std::string& name, const std::vector<int64_t>& def = {}) const;
  std::vector<float> attr_floats(const std::string& name, const std::vector<float>& def = {}) const;
  const Tensor* attr_tensor(const std::string& name) const;  // nullptr when absent
  // Required variants: throw INVALID_MODEL naming node and attribute when absent.
  int64_t require_int(const std::string& name) const;
  std::vector<int64_t> require_ints(const std::string& name) const;
  // "node 'conv1' (Conv)" — used as the prefix of every error about this node.
  std::string label() const;
};

struct Dim {
  int64_t value = -1;  // -1 = unknown/dynamic
  std::string param;   // symbolic name, may be empty
  std::string denotation;  // e.g. "DATA_BATCH", may be empty
};

struct ValueInfo {
  std::string name;
  DType elem_type = DType::kUndefined;  // kUndefined when the type is not a tensor or absent
  bool has_shape = false;
  std::vector<Dim> dims;
  bool is_tensor = true;  // false for sequence/map/optional types
  // Non-tensor types in ONNX notation: "seq(tensor(float))", "optional(seq(tensor(int64)))",
  // "map(string,tensor(float))", "sparse_tensor(float)"; "" for tensors (see value_type below), except
  // in a session's input and output lists, where every value has it.
  std::string type;
};

// ONNX's name of an element type: "float", "int64", "string", "bfloat16", ...
const char* onnx_type_name(DType t);
// The ONNX type of a value: "tensor(float)" (with "?" for an unknown element type), or ValueInfo::type.
std::string value_type(const ValueInfo& v);
// Whether runtime value `v` has the ONNX type `type` ("" accepts anything).
bool value_has_type(const Tensor& v, const std::string& type);

struct Graph {
  std::string name;
  std::string doc_string;
  std::vector<Node> nodes;
  std::vector<ValueInfo> inputs;
  std::vector<ValueInfo> outputs;
  std::vector<ValueInfo> value_info;
  std::vector<std::pair<std::string, std::shared_ptr<Tensor>>> initializers;
};

struct FunctionDef {  // model-local FunctionProto
  std::string name, domain;
  std::vector<std::string> inputs, outputs, attribute_names;
  std::vector<Attribute> attribute_defaults;
  std::vector<Node> nodes;
  std::map<std::string, int64_t> opsets;
};

struct Model {
  int64_t ir_version = 0;
  std::map<std::string, int64_t> opsets;  // domain ("" for ai.onnx) -> version
  std::string producer_name, producer_version, domain, doc_string;
  int64_t model_version = 0;
  std::vector<std::pair<std::string, std::string>> metadata;
  Graph graph;
  std::vector<FunctionDef> functions;
};

struct DecodeOptions {
  // Directory that external-data locations are relative to; empty = external data refused.
  std::string model_dir;
  // Initializers whose data the caller supplies: their external data is not read.
  std::set<std::string> supplied_initializers;
  // Node count, nesting depth and attribute count the model may have (resource_limits.h).
  Limits limits = Limits::process();
};

// Decode ModelProto bytes. Throws INVALID_MODEL with the byte offset and field path on
// malformed input, NO_SUCH_FILE for missing external data.
Model decode_model(const uint8_t* data, size_t size, const DecodeOptions& options);

// Encode a model as ModelProto bytes (onnx/model_encoder.cc): the graph as it is now (after
// optimization), initializers inline as raw_data, model-local functions left out (they are
// inlined before a session runs). Throws NOT_IMPLEMENTED for what cannot be written back.
std::string encode_model(const Model& model);

}  // namespace mrt
