#include "session.h"

#include "constant_folding.h"
#include "function_inliner.h"
#include "subgraph.h"
#include "graph_optimizer.h"
#include "process_exit.h"
#include "session_extras.h"
#include "static_shapes.h"
#include "type_inference.h"

#include <algorithm>
#include <cstring>
#include <fstream>
#include <functional>
#include <queue>
#include <set>
#include <thread>
#include <unordered_map>

namespace mrt {

namespace {

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary | std::ios::ate);
  if (!in) fail(MRT_NO_SUCH_FILE, "cannot open model file '", path, "'");
  std::streamoff n = in.tellg();
  if (n < 0) fail(MRT_NO_SUCH_FILE, "cannot read model file '", path, "'");
  std::string data(static_cast<size_t>(n), '\0');
  in.seekg(0);
  if (n && !in.read(&data[0], n)) fail(MRT_NO_SUCH_FILE, "failed reading model file '", path, "'");
  return data;
}

std::string dir_of(const std::string& path) {
  size_t p = path.find_last_of("/\\");
  return p == std::string::npos ? std::string(".") : path.substr(0, p == 0 ? 1 : p);
}

std::string dims_str(const ValueInfo& v) {
  if (!v.has_shape) return "[?]";
  std::string s = "[";
  for (size_t i = 0; i < v.dims.size(); ++i) {
    if (i) s += ",";
    s += v.dims[i].value >= 0 ? std::to_string(v.dims[i].value) : (v.dims[i].param.empty() ? "?" : v.dims[i].param);
  }
  return s + "]";
}

// Sequences and optionals of tensors are supported, and maps as outputs (ZipMap's sequence of maps);
// map inputs and sparse tensors are not.
bool supported_value_type(const std::string& type, bool output) {
  return (output || type.find("map(") == std::string::npos) && type.find("sparse_tensor(") == std::string::npos;
}

// Operators that take sequence or optional values (and control-flow nodes, whose outer-scope
// values may be anything). Every other kernel is given tensors only.
bool takes_non_tensors(const Node& n) {
  static const std::set<std::string> ops = {"Identity", "If", "Loop", "SequenceAt", "SequenceInsert", "SequenceErase",
                                            "SequenceLength", "ConcatFromSequence", "SequenceMap", "Optional",
                                            "OptionalHasElement", "OptionalGetElement"};
  if (!n.domain.empty() && n.domain != "ai.onnx") return false;
  for (const auto& a : n.attributes)
    if (a.g || !a.graphs.empty()) return true;
  return ops.count(n.op_type) != 0;
}

double micros(std::chrono::steady_clock::duration d) {
  return std::chrono::duration<double, std::micro>(d).count();
}

}  // namespace

void Session::start_profiling() { profiling_.store(true); }

std::string Session::end_profiling() {
  profiling_.store(false);
  std::lock_guard<std::mutex> lock(profile_mutex_);
  std::string out;
  out.swap(profile_events_);
  return out;
}

std::unique_ptr<Session> Session::from_path(const std::string& path, const SessionOptions& options) {
  std::string bytes = read_file(path);
  DecodeOptions d;
  d.limits = Limits::for_session(options.config);
  d.model_dir = dir_of(path);
  for (const auto& init : options.initializers) d.supplied_initializers.insert(init.first);
  Model m = decode_model(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size(), d);
  std::unique_ptr<Session> s(new Session(std::move(m), options));
  s->build();
  return s;
}

std::unique_ptr<Session> Session::from_bytes(const uint8_t* data, size_t size, const SessionOptions& options) {
  DecodeOptions d;
  d.limits = Limits::for_session(options.config);
  for (const auto& init : options.initializers) d.supplied_initializers.insert(init.first);
  auto it = options.config.find("session.model_dir");
  if (it != options.config.end()) d.model_dir = it->second;
  Model m = decode_model(data, size, d);
  std::unique_ptr<Session> s(new Session(std::move(m), options));
  s->build();
  return s;
}

Session::Session(Model model, const SessionOptions& options)
    : model_(std::move(model)), options_(options), limits_(Limits::for_session(options.config)) {}

std::shared_ptr<Session> Session::for_subgraph(const Graph& g, const std::vector<std::string>& outer,
                                               const Model& parent, const SessionOptions& options) {
  Model m;
  m.ir_version = parent.ir_version;
  m.opsets = parent.opsets;
  m.functions = parent.functions;
  m.graph = g;
  for (const auto& name : outer) {
    ValueInfo v;
    v.name = name;
    m.graph.inputs.push_back(v);
  }
  std::shared_ptr<Session> s(new Session(std::move(m), options));
  s->build();
  return s;
}

bool Session::fixed_constant(int id) const {
  return id >= 0 && static_cast<size_t>(id) < constants_.size() && constants_[id].valid() &&
         std::find(overridable_.begin(), overridable_.end(), id) == overridable_.end();
}

int Session::value_id(const std::string& name) const {
  auto it = ids_.find(name);
  return it == ids_.end() ? -1 : it->second;
}

void Session::build() {
  LimitsScope limits(limits_);
  replace_initializers(model_.graph, options_.initializers);
  override_free_dims(model_.graph, options_.config);
  inline_model_functions(model_);
  pool_ = std::make_unique<ThreadPool>(options_.intra_op_num_threads);
  // EPs are chosen first: the extended rewrites make CPU-EP-only nodes (com.microsoft FusedConv),
  // which would hide Conv/Add/Relu from plugin EPs, so with a plugin EP the graph gets the basic
  // (ONNX-preserving) rewrites only.
  choices_ = EpRegistry::instance().select(options_.providers);
  int level = optimization_level(options_.config);
  if (std::any_of(choices_.begin(), choices_.end(), [](const EpChoice& c) { return c.factory != nullptr; }))
    level = std::min(level, static_cast<int>(kOptBasic));
  optimize_graph(model_, level, *pool_);
  const std::set<std::string> overridable = mrt::overridable_initializers(model_);
  const Graph& g = model_.graph;
  auto intern = [&](const std::string& name) {
    auto it = ids_.find(name);
    if (it != ids_.end()) return it->second;
    int id = static_cast<int>(names_.size());
    ids_[name] = id;
    names_.push_back(name);
    return id;
  };

  for (const auto& [name, t] : g.initializers) {
    if (ids_.count(name)) fail(MRT_INVALID_MODEL, "initializer '", name, "' is defined twice");
    int id = intern(name);
    if (constants_.size() <= static_cast<size_t>(id)) constants_.resize(id + 1);
    constants_[id] = *t;
  }
  std::set<std::string> seen_inputs;
  for (const auto& in : g.inputs) {
    if (in.name.empty()) fail(MRT_INVALID_MODEL, "graph input without a name");
    if (!seen_inputs.insert(in.name).second) fail(MRT_INVALID_MODEL, "graph input '", in.name, "' is listed twice");
    bool is_init = ids_.count(in.name) != 0;
    int id = intern(in.name);
    if (!in.is_tensor && !supported_value_type(in.type, false))
      fail(MRT_NOT_IMPLEMENTED, "graph input '", in.name, "' has type ", in.type,
           ", which is not supported (tensors, sequences of tensors and optionals are)");
    if (in.elem_type != DType::kUndefined && !dtype_is_storable(in.elem_type))
      fail(MRT_NOT_IMPLEMENTED, "graph input '", in.name, "' has element type ", dtype_name(in.elem_type),
           ", which is not supported");
    if (is_init) {
      if (overridable.count(in.name)) {
        overridable_.push_back(id);
        overridable_info_.push_back(in);
      }
    } else {
      inputs_.push_back(in);
      input_ids_.push_back(id);
    }
  }
  // Producers: every node output is defined exactly once.
  std::unordered_map<int, size_t> producer;
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    for (const auto& o : g.nodes[i].outputs) {
      if (o.empty()) continue;
      int before = value_id(o);
      if (before >= 0) {
        bool is_const = static_cast<size_t>(before) < constants_.size() && constants_[before].valid();
        if (producer.count(before) || is_const)
          fail(MRT_INVALID_MODEL, g.nodes[i].label(), ": output '", o, "' is already defined elsewhere in the graph");
        if (std::find(input_ids_.begin(), input_ids_.end(), before) != input_ids_.end())
          fail(MRT_INVALID_MODEL, g.nodes[i].label(), ": output '", o, "' has the same name as a graph input");
      }
      producer[intern(o)] = i;
    }
  }
  constants_.resize(names_.size());
  // Kahn's algorithm over node dependencies, keeping the model's order among ready nodes.
  std::vector<std::vector<size_t>> users(g.nodes.size());
  std::vector<int> pending(g.nodes.size(), 0);
  // Control-flow nodes also read the outer-scope values their subgraphs use.
  std::vector<std::vector<std::string>> outer(g.nodes.size());
  for (size_t i = 0; i < g.nodes.size(); ++i) outer[i] = outer_scope_names(g.nodes[i]);
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    const Node& n = g.nodes[i];
    std::set<size_t> deps;
    std::vector<std::string> reads = n.inputs;
    reads.insert(reads.end(), outer[i].begin(), outer[i].end());
    for (size_t r = 0; r < reads.size(); ++r) {
      const std::string& in = reads[r];
      if (in.empty()) continue;
      int id = value_id(in);
      if (id < 0 && r >= n.inputs.size())
        fail(MRT_INVALID_MODEL, n.label(), ": a subgraph reads '", in,
             "', which is not a graph input, an initializer or the output of any node of the enclosing graph");
      if (id < 0)
        fail(MRT_INVALID_MODEL, n.label(), ": input '", in,
             "' is not a graph input, an initializer or the output of any node");
      auto p = producer.find(id);
      if (p != producer.end()) {
        if (p->second == i) fail(MRT_INVALID_MODEL, n.label(), ": consumes its own output '", in, "'");
        deps.insert(p->second);
      }
    }
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
  if (order.size() != g.nodes.size()) {
    for (size_t i = 0; i < g.nodes.size(); ++i)
      if (pending[i] > 0) fail(MRT_INVALID_MODEL, "the graph has a cycle through ", g.nodes[i].label());
  }

  // Graph outputs.
  for (const auto& o : g.outputs) {
    int id = value_id(o.name);
    if (id < 0) fail(MRT_INVALID_MODEL, "graph output '", o.name, "' is not produced by any node, input or initializer");
    if (!o.is_tensor && !supported_value_type(o.type, true))
      fail(MRT_NOT_IMPLEMENTED, "graph output '", o.name, "' has type ", o.type,
           ", which is not supported (tensors, sequences, maps and optionals are)");
    if (o.elem_type != DType::kUndefined && !dtype_is_storable(o.elem_type))
      fail(MRT_NOT_IMPLEMENTED, "graph output '", o.name, "' has element type ", dtype_name(o.elem_type),
           ", which is not supported");
    outputs_.push_back(o);
    output_ids_.push_back(id);
  }
  for (size_t idx : order) {
    const Node& n = g.nodes[idx];
    if (!model_.opsets.count(n.domain))
      fail(MRT_INVALID_MODEL, n.label(), ": domain '", n.domain.empty() ? "ai.onnx" : n.domain,
           "' is not imported by the model (opset_import)");
  }

  // Static type/shape propagation: fills undeclared output metadata, rejects contradictions.
  std::vector<const Node*> node_order;
  for (size_t idx : order) node_order.push_back(&g.nodes[idx]);
  std::map<std::string, ValueInfo> known;
  infer_types(g, node_order, outputs_, &known);
  for (auto* list : {&inputs_, &outputs_, &overridable_info_})
    for (ValueInfo& v : *list) v.type = value_type(v);  // the ONNX type string the C API reports

  // EPs claim nodes (alone or in groups); unsupported ops are reported here, before any run.
  std::vector<Unit> units = partition(order, known, outer);
  std::map<const Node*, size_t> index_of;
  for (size_t i = 0; i < g.nodes.size(); ++i) index_of[&g.nodes[i]] = i;
  for (auto& u : units) {
    const Node& n = *u.node;
    const bool fused = u.members.size() != 1 || u.node != &g.nodes[order[u.members[0]]];
    Step s;
    s.node = &n;
    s.kernel = u.cpu;
    s.plugin = std::move(u.plugin);
    s.device = s.plugin && s.plugin->ep->has_device_memory() ? s.plugin->ep : nullptr;
    s.expect = std::move(u.expect);
    s.first_assignment = assignments_.size();
    for (size_t k : u.members) {
      const Node& m = g.nodes[order[k]];
      NodeAssignment a;
      a.node_name = m.name;
      a.op_type = m.domain.empty() ? m.op_type : m.domain + "::" + m.op_type;
      a.ep = s.plugin ? s.plugin->ep->name() : std::string(MRT_CPU_EP_NAME);
      a.partition = u.partition;
      a.note = u.note;
      assignments_.push_back(std::move(a));
    }
    auto op = model_.opsets.find(n.domain);
    s.opset = op == model_.opsets.end() ? 0 : op->second;
    for (const auto& in : n.inputs) s.inputs.push_back(in.empty() ? -1 : value_id(in));
    if (!fused)
      for (const auto& in : outer[index_of[&n]]) s.inputs.push_back(value_id(in));  // after the node's own inputs
    for (const auto& o : n.outputs) s.outputs.push_back(o.empty() ? -1 : value_id(o));
    for (int id : s.inputs) s.constant.push_back(fixed_constant(id));
    s.cache = std::make_unique<OpContext::Cache>();
    s.tensors_only = !takes_non_tensors(n);
    bool has_subgraph = false;
    for (const auto& a : n.attributes) has_subgraph = has_subgraph || a.g || !a.graphs.empty();
    if (has_subgraph && !s.plugin) {  // compiled now: an unsupported op in a branch fails session creation
      // Bodies run inline on the calling thread: a pool per branch would start a set of
      // threads for every If/Loop/Scan node of the model.
      SessionOptions sub_options = options_;
      sub_options.intra_op_num_threads = 1;
      auto compiled = std::make_shared<CompiledSubgraphs>();
      compiled->outer = outer[index_of[&n]];
      for (const auto& a : n.attributes) {
        if (!a.g) continue;
        try {
          compiled->by_attr[a.name] = for_subgraph(*a.g, compiled->outer, model_, sub_options);
        } catch (const Error& e) {
          throw Error(e.code(), n.label() + ": subgraph '" + a.name + "': " + e.what());
        }
      }
      s.cache->value = compiled;
    }
    steps_.push_back(std::move(s));
  }

  if (level > kOptDisabled) {
    find_concat_candidates(known);
    if (!concat_candidates_.empty()) {
      order_ = order;
      const std::map<std::string, Shape> shapes = value_shapes(nullptr);
      static_concat_plan_ = plan_concat_placement(shapes);
      // a Concat whose shapes follow from the feeds' (a symbolic batch dimension) is planned per set of them
      for (const auto& [si, dtype] : concat_candidates_)
        if (!shapes.count(steps_[si].node->outputs[0])) concat_plans_per_shape_ = true;
    }
  }

  // Lifetimes: release a value after its last consumer, unless it is a graph output.
  std::vector<int> last_use(names_.size(), -1);
  for (size_t si = 0; si < steps_.size(); ++si)
    for (int id : steps_[si].inputs)
      if (id >= 0) last_use[id] = static_cast<int>(si);
  for (size_t si = 0; si < steps_.size(); ++si)
    for (int id : steps_[si].outputs)
      if (id >= 0 && last_use[id] < 0) last_use[id] = static_cast<int>(si);  // unused outputs die at once
  for (int id : output_ids_) last_use[id] = -1;
  for (size_t id = 0; id < last_use.size(); ++id)
    if (last_use[id] >= 0 && !constants_[id].valid()) steps_[last_use[id]].release.push_back(static_cast<int>(id));
  std::vector<bool> made_on_cpu(names_.size(), false);
  for (auto& s : steps_) {
    s.donatable.assign(s.inputs.size(), false);
    for (size_t i = 0; i < s.inputs.size(); ++i) {
      const int id = s.inputs[i];
      s.donatable[i] = id >= 0 && made_on_cpu[id] && s.on_cpu_ep() &&
                       std::count(s.release.begin(), s.release.end(), id) == 1 &&
                       std::count(s.inputs.begin(), s.inputs.end(), id) == 1;
    }
    for (int id : s.outputs)
      if (id >= 0) made_on_cpu[id] = s.on_cpu_ep();
  }

  plan_transfers();
  alloc_ = std::make_shared<Allocator>();
  arena_ = std::make_shared<RunArena>(alloc_);
}

// A Concat (CPU EP) whose output shape is static and whose inputs are contiguous slices of it (every dimension
// before the axis is 1: a batch-1 Concat along channels, as in Inception, SqueezeNet and DenseNet) is assembled
// in place: each input that a CPU EP kernel produces is given its slice of the Concat's buffer as its output,
// and the Concat copies only the other inputs. A kernel that produces another shape or type than the static one
// gets its own buffer as before (OpContext::output), and the Concat copies it: the results never depend on the
// placement. An input may have other readers (no kernel writes into its inputs, so they read the same values in
// the slice), but a value gets one slice only: the first Concat that reads it. When the placed input is itself
// an assembled Concat's output, that Concat is assembled inside this one's buffer (ConcatPlacement::parent), so a
// chain of Concats, each feeding the next as DenseNet's layers do, copies nothing: every layer's Concat used to
// copy all the channels before it (DenseNet-121: 58 Concats of up to 3.2 MB each).
std::map<std::string, Shape> Session::value_shapes(const std::map<std::string, Shape>* feeds) const {
  return static_shapes(
      model_.graph, order_,
      [&](const std::string& name) -> const Tensor* {
        const int id = value_id(name);
        return fixed_constant(id) ? &constants_[id] : nullptr;
      },
      feeds);
}

void Session::find_concat_candidates(const std::map<std::string, ValueInfo>& known) {
  for (size_t ci = 0; ci < steps_.size(); ++ci) {
    const Step& c = steps_[ci];
    const Node& n = *c.node;
    if (!c.on_cpu_ep() || !n.domain.empty() || n.op_type != "Concat" || n.outputs.size() != 1 || c.outputs[0] < 0 ||
        n.inputs.size() < 2 || c.inputs.size() != n.inputs.size() || c.opset < 4)
      continue;
    auto info = known.find(n.outputs[0]);
    if (info == known.end()) continue;
    const DType dtype = info->second.elem_type;
    if (dtype == DType::kUndefined || dtype == DType::kString || !dtype_is_storable(dtype)) continue;
    concat_candidates_.emplace_back(ci, dtype);
  }
}

std::shared_ptr<const Session::ConcatPlan> Session::plan_concat_placement(
    const std::map<std::string, Shape>& shapes) const {
  auto plan = std::make_shared<ConcatPlan>();
  plan->placed.resize(steps_.size());
  plan->assembles.assign(steps_.size(), -1);
  std::vector<int> producer(names_.size(), -1);
  std::vector<bool> placed_value(names_.size(), false);
  for (size_t si = 0; si < steps_.size(); ++si)
    for (int id : steps_[si].outputs)
      if (id >= 0) producer[id] = static_cast<int>(si);
  const std::set<int> graph_outputs(output_ids_.begin(), output_ids_.end());
  for (const auto& [ci, dtype] : concat_candidates_) {
    const Step& c = steps_[ci];
    const Node& n = *c.node;
    auto out = shapes.find(n.outputs[0]);
    if (out == shapes.end()) continue;
    const Shape& shape = out->second;
    const int64_t rank = static_cast<int64_t>(shape.size());
    int64_t axis = n.attr_int("axis", 0);
    if (axis < 0) axis += rank;
    if (axis < 0 || axis >= rank || !std::all_of(shape.begin(), shape.begin() + axis, [](int64_t d) { return d == 1; }))
      continue;
    std::vector<std::pair<size_t, Placed>> placed;  // (producer step, record)
    std::vector<int> placed_ids;
    const int here = static_cast<int>(plan->placements.size());
    size_t offset = 0;
    size_t k = 0;
    for (; k < n.inputs.size(); ++k) {
      auto in = shapes.find(n.inputs[k]);
      if (in == shapes.end() || in->second.size() != shape.size()) break;
      const size_t bytes = static_cast<size_t>(shape_size(in->second)) * dtype_size(dtype);
      const int id = c.inputs[k];
      const int p = id >= 0 ? producer[id] : -1;
      if (p >= 0 && p < static_cast<int>(ci) && !placed_value[id] &&
          std::find(placed_ids.begin(), placed_ids.end(), id) == placed_ids.end() && !graph_outputs.count(id) &&
          steps_[p].on_cpu_ep()) {
        const auto& outs = steps_[p].outputs;
        const size_t index = static_cast<size_t>(std::find(outs.begin(), outs.end(), id) - outs.begin());
        placed.push_back({static_cast<size_t>(p), {index, static_cast<size_t>(here), offset, in->second}});
        placed_ids.push_back(id);
      }
      offset += bytes;
    }
    if (k < n.inputs.size() || placed.empty() || offset != static_cast<size_t>(shape_size(shape)) * dtype_size(dtype))
      continue;
    for (auto& [p, rec] : placed) {
      const int inner = plan->assembles[p];
      if (inner >= 0 && rec.output == 0) {  // an assembled Concat's output: assembled inside this buffer
        plan->placements[static_cast<size_t>(inner)].parent = here;
        plan->placements[static_cast<size_t>(inner)].parent_offset = rec.byte_offset;
      }
      plan->placed[p].push_back(std::move(rec));
    }
    for (int id : placed_ids) placed_value[id] = true;
    plan->assembles[ci] = here;
    plan->placements.push_back({ci, dtype, shape});
  }
  if (plan->placements.empty()) return nullptr;
  return plan;
}

std::shared_ptr<const Session::ConcatPlan> Session::concat_plan_for(const std::vector<std::string>& input_names,
                                                                    const std::vector<Tensor>& input_values) {
  if (!concat_plans_per_shape_) return static_concat_plan_;
  std::vector<Shape> key;  // the feeds' shapes in the order of the graph's inputs (empty: not a tensor)
  for (const auto& v : inputs_) {
    const auto at = std::find(input_names.begin(), input_names.end(), v.name);
    const size_t i = static_cast<size_t>(at - input_names.begin());
    key.push_back(i < input_values.size() && input_values[i].is_tensor() ? input_values[i].shape() : Shape{});
  }
  std::lock_guard<std::mutex> lock(concat_plans_mutex_);
  auto found = concat_plans_.find(key);
  if (found != concat_plans_.end()) return found->second;
  if (concat_plans_.size() >= kConcatPlansKept) concat_plans_.clear();  // many shapes: start over
  std::map<std::string, Shape> feeds;
  for (size_t i = 0; i < input_names.size(); ++i)
    if (input_values[i].is_tensor()) feeds[input_names[i]] = input_values[i].shape();
  return concat_plans_[key] = plan_concat_placement(value_shapes(&feeds));
}

const KernelDef* Session::cpu_kernel(const Node& n, bool required) const {
  const KernelRegistry& reg = KernelRegistry::cpu();
  int64_t opset = model_.opsets.at(n.domain);
  const KernelDef* k = reg.find(n.domain, n.op_type, opset);
  if (!k) {
    if (!required) return nullptr;
    std::string dom = n.domain.empty() ? "ai.onnx" : n.domain;
    std::string others;
    for (const auto& p : provider_names_)
      if (p != MRT_CPU_EP_NAME) others += (others.empty() ? "" : ", ") + p;
    std::string also = others.empty() ? "" : " (nor by " + others + ")";
    if (reg.knows_op(n.domain, n.op_type))
      fail(MRT_NOT_IMPLEMENTED, n.label(), ": operator ", n.op_type, " of domain '", dom, "' at opset ", opset,
           " is not supported by the CPU execution provider (other opset versions are)", also);
    fail(MRT_NOT_IMPLEMENTED, n.label(), ": operator ", n.op_type, " of domain '", dom, "' (opset ", opset,
         ") is not supported by the CPU execution provider", also);
  }
  if (k->check) {
    try {
      k->check(n, opset);
    } catch (const Error& e) {
      if (!required) return nullptr;
      std::string msg = e.what();
      throw Error(e.code(), msg.rfind(n.label(), 0) == 0 ? msg : n.label() + ": " + msg);
    }
  }
  return k;
}

std::vector<Session::Unit> Session::partition(const std::vector<size_t>& order,
                                              const std::map<std::string, ValueInfo>& known,
                                              const std::vector<std::vector<std::string>>& outer) {
  const Graph& g = model_.graph;
  const size_t n = order.size();
  std::vector<EpChoice> choices = std::move(choices_);
  for (const auto& c : choices) provider_names_.push_back(c.name());
  auto node_at = [&](size_t k) -> const Node& { return g.nodes[order[k]]; };
  auto reads = [&](size_t k) {
    std::vector<std::string> r = node_at(k).inputs;
    r.insert(r.end(), outer[order[k]].begin(), outer[order[k]].end());
    return r;
  };
  // Dependencies between positions of `order` (a topological order).
  std::unordered_map<std::string, size_t> producer;
  for (size_t k = 0; k < n; ++k)
    for (const auto& o : node_at(k).outputs)
      if (!o.empty()) producer[o] = k;
  std::vector<std::vector<size_t>> succ(n), pred(n);
  for (size_t k = 0; k < n; ++k) {
    std::set<size_t> ps;
    for (const auto& in : reads(k)) {
      auto p = producer.find(in);
      if (!in.empty() && p != producer.end() && p->second != k) ps.insert(p->second);
    }
    for (size_t p : ps) {
      pred[k].push_back(p);
      succ[p].push_back(k);
    }
  }
  // Units: a position's unit id is its own position, or the id of the compiled group it joined.
  std::vector<int> unit_of(n);
  for (size_t k = 0; k < n; ++k) unit_of[k] = static_cast<int>(k);
  int next_unit = static_cast<int>(n);
  auto units_acyclic = [&]() {
    std::map<int, std::set<int>> out;
    std::map<int, int> indegree;
    for (size_t k = 0; k < n; ++k) {
      indegree.emplace(unit_of[k], 0);
      for (size_t s : succ[k])
        if (unit_of[s] != unit_of[k] && out[unit_of[k]].insert(unit_of[s]).second) ++indegree[unit_of[s]];
    }
    std::vector<int> ready;
    for (const auto& [u, d] : indegree)
      if (d == 0) ready.push_back(u);
    size_t done = 0;
    while (!ready.empty()) {
      int u = ready.back();
      ready.pop_back();
      ++done;
      for (int v : out[u])
        if (--indegree[v] == 0) ready.push_back(v);
    }
    return done == indegree.size();
  };
  // A node outside `in_group` on a path that leaves the group and comes back to it (or -1).
  auto cycle_through = [&](const std::vector<size_t>& members, const std::vector<bool>& in_group) -> long {
    const size_t lo = members.front(), hi = members.back();
    std::vector<bool> reached(n, false);
    for (size_t k = lo; k <= hi; ++k) {
      if (!in_group[k] && !reached[k]) continue;
      for (size_t s : succ[k]) {
        if (s > hi) continue;
        if (!in_group[s]) reached[s] = true;
        else if (reached[k]) return static_cast<long>(k);
      }
    }
    return -1;
  };
  auto constant = [&](const std::string& name) -> const Tensor* {
    int id = value_id(name);
    if (id < 0 || !constants_[id].valid()) return nullptr;
    if (std::find(overridable_.begin(), overridable_.end(), id) != overridable_.end()) return nullptr;
    return &constants_[id];
  };
  auto info = [&](const std::string& name) {
    auto it = known.find(name);
    ValueInfo v = it == known.end() ? ValueInfo() : it->second;
    v.name = name;
    return v;
  };
  std::set<std::string> graph_outputs;
  for (const auto& o : g.outputs) graph_outputs.insert(o.name);

  struct Claim {
    std::unique_ptr<PluginKernel> kernel;
    std::string partition;
    const Node* fused = nullptr;
    std::vector<ValueInfo> expect;
  };
  // Nodes that touch sequence, optional or string values run on the CPU EP: plugin EPs see tensors of
  // fixed-size elements only.
  std::vector<bool> host_only(n, false);
  for (size_t k = 0; k < n; ++k) {
    const Node& nd = node_at(k);
    bool host = takes_non_tensors(nd) && !(nd.op_type == "Identity" || nd.op_type == "If" || nd.op_type == "Loop");
    std::vector<std::string> touched = reads(k);
    touched.insert(touched.end(), nd.outputs.begin(), nd.outputs.end());
    for (const auto& name : touched) {
      auto it = name.empty() ? known.end() : known.find(name);
      if (it != known.end() && (!it->second.is_tensor || it->second.elem_type == DType::kString)) host = true;
    }
    host_only[k] = host;
  }
  std::map<int, Claim> claims;  // by unit id
  std::vector<const KernelDef*> cpu(n, nullptr);
  std::vector<std::string> notes(n);
  std::vector<bool> claimed(n, false);

  for (auto& choice : choices) {
    if (!choice.factory) {  // the CPU EP takes every remaining node it has a kernel for
      for (size_t k = 0; k < n; ++k)
        if (!claimed[k] && (cpu[k] = cpu_kernel(node_at(k), false))) claimed[k] = true;
      continue;
    }
    auto ep = std::make_unique<PluginEp>(std::move(choice));
    std::vector<size_t> open;
    std::vector<const Node*> nodes;
    for (size_t k = 0; k < n; ++k)
      if (!claimed[k] && !host_only[k]) {
        open.push_back(k);
        nodes.push_back(&node_at(k));
      }
    if (nodes.empty()) {
      eps_.push_back(std::move(ep));
      continue;
    }
    EpGraphView view(nodes, known, constant, model_.opsets);
    std::vector<int32_t> group = ep->claim(view);
    std::map<int32_t, std::vector<size_t>> by_id;  // group id -> view indices (ascending)
    for (size_t j = 0; j < open.size(); ++j)
      if (group[j] >= 0) by_id[group[j]].push_back(j);
    int made = 0;
    for (const auto& [id, js] : by_id) {
      // A group is split into its connected parts (edges between its own nodes).
      std::map<size_t, size_t> parent;
      for (size_t j : js) parent[open[j]] = open[j];
      std::function<size_t(size_t)> root = [&](size_t k) { return parent[k] == k ? k : parent[k] = root(parent[k]); };
      for (size_t j : js)
        for (size_t p : pred[open[j]])
          if (parent.count(p)) parent[root(open[j])] = root(p);
      std::map<size_t, std::vector<size_t>> parts;  // root -> positions (ascending)
      for (size_t j : js) parts[root(open[j])].push_back(open[j]);
      std::vector<std::vector<size_t>> ordered;
      for (auto& kv : parts) ordered.push_back(std::move(kv.second));
      std::sort(ordered.begin(), ordered.end(), [](const auto& a, const auto& b) { return a.front() < b.front(); });
      for (const auto& members : ordered) {
        const std::string name = ep->name() + "_" + std::to_string(made++);
        std::vector<bool> in_group(n, false);
        for (size_t k : members) in_group[k] = true;
        std::string refused;
        long via = cycle_through(members, in_group);
        if (via >= 0) {
          refused = node_at(static_cast<size_t>(via)).label() + " reads from the group and feeds it";
        } else if (ep->compiles() && members.size() > 1) {
          std::vector<int> saved = unit_of;
          for (size_t k : members) unit_of[k] = next_unit;
          if (!units_acyclic()) refused = "it would close a cycle with partitions formed before it";
          unit_of = saved;
        }
        if (!refused.empty()) {
          for (size_t k : members)
            notes[k] = ep->name() + " claimed the node in group '" + name + "', which was refused: it would form a cycle (" +
                       refused + ")";
          continue;
        }
        if (!ep->compiles()) {  // one kernel per node; values may still stay in the EP's memory
          for (size_t k : members) {
            size_t j = static_cast<size_t>(std::find(open.begin(), open.end(), k) - open.begin());
            std::string why;
            void* h = ep->create_kernel(view.node(j), why);
            if (!h) {
              notes[k] = ep->name() + " claimed the node but could not prepare it: " + why;
              continue;
            }
            Claim& c = claims[static_cast<int>(k)];
            c.kernel = std::make_unique<PluginKernel>();
            c.kernel->ep = ep.get();
            c.kernel->handle = h;
            c.partition = name;
            claimed[k] = true;
          }
          continue;
        }
        // The group as a standalone model: boundary inputs, initializers it reads, outputs read after it.
        std::set<std::string> produced, seen, read_outside;
        for (size_t k : members)
          for (const auto& o : node_at(k).outputs) produced.insert(o);
        for (size_t k = 0; k < n; ++k)
          if (!in_group[k])
            for (const auto& r : reads(k)) read_outside.insert(r);
        Model sub;
        sub.ir_version = model_.ir_version;
        sub.opsets = model_.opsets;
        sub.producer_name = "mosaicrt";
        sub.graph.name = name;
        std::vector<const Node*> group_nodes;
        for (size_t k : members) {
          group_nodes.push_back(&node_at(k));
          sub.graph.nodes.push_back(node_at(k));
          for (const auto& in : reads(k)) {
            if (in.empty() || produced.count(in) || !seen.insert(in).second) continue;
            if (const Tensor* c = constant(in))
              sub.graph.initializers.emplace_back(in, std::make_shared<Tensor>(*c));
            else
              sub.graph.inputs.push_back(info(in));
          }
        }
        for (size_t k : members)
          for (const auto& o : node_at(k).outputs)
            if (!o.empty() && (read_outside.count(o) || graph_outputs.count(o))) sub.graph.outputs.push_back(info(o));
        std::string why;
        void* h = nullptr;
        {
          EpSubgraphView sv(name, group_nodes, sub, known, constant, static_cast<int32_t>(pool_->size()));
          h = ep->compile(sv, why);
        }
        if (!h) {
          for (size_t k : members) notes[k] = ep->name() + " could not compile partition '" + name + "': " + why;
          continue;
        }
        Node& fused = fused_nodes_.emplace_back();
        fused.name = name;
        fused.op_type = "CompiledPartition";
        for (const auto& v : sub.graph.inputs) fused.inputs.push_back(v.name);
        for (const auto& v : sub.graph.outputs) fused.outputs.push_back(v.name);
        const int unit = next_unit++;
        for (size_t k : members) {
          unit_of[k] = unit;
          claimed[k] = true;
        }
        Claim& c = claims[unit];
        c.kernel = std::make_unique<PluginKernel>();
        c.kernel->ep = ep.get();
        c.kernel->handle = h;
        c.partition = name;
        c.fused = &fused;
        c.expect = sub.graph.outputs;
      }
    }
    eps_.push_back(std::move(ep));
  }
  for (size_t k = 0; k < n; ++k)
    if (!claimed[k]) cpu[k] = cpu_kernel(node_at(k), true);  // fallback (or the unsupported-op error)

  // Steps in a topological order of the units, each as early as its first node allows.
  std::map<int, std::vector<size_t>> members_of;
  for (size_t k = 0; k < n; ++k) members_of[unit_of[k]].push_back(k);
  std::map<int, std::set<int>> out;
  std::map<int, int> indegree;
  for (const auto& kv : members_of) indegree[kv.first] = 0;
  for (size_t k = 0; k < n; ++k)
    for (size_t s : succ[k])
      if (unit_of[s] != unit_of[k] && out[unit_of[k]].insert(unit_of[s]).second) ++indegree[unit_of[s]];
  using Entry = std::pair<size_t, int>;  // (first position, unit)
  std::priority_queue<Entry, std::vector<Entry>, std::greater<Entry>> ready;
  for (const auto& [u, d] : indegree)
    if (d == 0) ready.push({members_of[u].front(), u});
  std::vector<Unit> units;
  while (!ready.empty()) {
    int u = ready.top().second;
    ready.pop();
    Unit unit;
    unit.members = members_of[u];
    auto c = claims.find(u);
    if (c != claims.end()) {
      unit.plugin = std::move(c->second.kernel);
      unit.partition = c->second.partition;
      unit.node = c->second.fused ? c->second.fused : &node_at(unit.members.front());
      unit.expect = std::move(c->second.expect);
    } else {
      unit.node = &node_at(unit.members.front());
      unit.cpu = cpu[unit.members.front()];
      unit.note = notes[unit.members.front()];
    }
    units.push_back(std::move(unit));
    for (int v : out[u])
      if (--indegree[v] == 0) ready.push({members_of[v].front(), v});
  }
  if (units.size() != members_of.size()) fail(MRT_INTERNAL, "the partitioned graph has a cycle");
  return units;
}

void Session::check_partition_output(const Step& s, size_t i, DType dtype, const Shape& shape) const {
  const ValueInfo& want = s.expect[i];
  bool ok = want.elem_type == DType::kUndefined || want.elem_type == dtype;
  if (ok && want.has_shape) {
    ok = want.dims.size() == shape.size();
    for (size_t d = 0; ok && d < shape.size(); ++d) ok = want.dims[d].value < 0 || want.dims[d].value == shape[d];
  }
  if (ok) return;
  std::string expected = want.elem_type == DType::kUndefined ? std::string("?") : dtype_name(want.elem_type);
  fail(MRT_EP_ERROR, "execution provider '", s.plugin->ep->name(), "' (", s.plugin->ep->library_path(),
       ") returned output '", want.name, "' of partition '", s.node->name, "' as ", dtype_name(dtype), shape_str(shape),
       ", but the model says ", expected, dims_str(want));
}

const DeviceTensor* Session::device_constant(PluginEp* ep, int id) {
  std::lock_guard<std::mutex> lock(device_constants_mutex_);
  auto key = std::make_pair(ep, id);
  auto it = device_constants_.find(key);
  if (it == device_constants_.end()) {
    it = device_constants_.emplace(key, ep->to_device(constants_[id])).first;
    constants_uploaded_.fetch_add(1, std::memory_order_relaxed);
  }
  return &it->second;
}

TransferCounts Session::transfer_counts() const {
  TransferCounts c;
  c.to_device = to_device_.load();
  c.to_host = to_host_.load();
  c.device_resident = device_resident_.load();
  c.constants_uploaded = constants_uploaded_.load();
  return c;
}

// Where values cross between host and device memory, as the run will do it: recorded on the
// first node of the step that makes the copy.
void Session::plan_transfers() {
  std::vector<std::set<PluginEp*>> where(names_.size());  // nullptr = host
  for (int id : input_ids_) where[id].insert(nullptr);
  for (size_t id = 0; id < constants_.size(); ++id)
    if (constants_[id].valid()) where[id].insert(nullptr);
  std::vector<size_t> producer(names_.size(), 0);
  auto note = [&](size_t step, const std::string& what, const std::string& name) {
    std::string& c = assignments_[steps_[step].first_assignment].copies;
    c += (c.empty() ? "" : "; ") + what + " '" + name + "'";
  };
  for (size_t si = 0; si < steps_.size(); ++si) {
    const Step& s = steps_[si];
    for (size_t i = 0; i < s.inputs.size(); ++i) {
      const int id = s.inputs[i];
      if (id < 0) continue;
      if (s.device) {
        if (where[id].count(s.device) || s.constant[i]) continue;
        if (!where[id].count(nullptr)) {
          note(si, "to host", names_[id]);
          where[id].insert(nullptr);
        }
        note(si, "to device", names_[id]);
        where[id] = {nullptr, s.device};
      } else if (!where[id].count(nullptr)) {
        note(si, "to host", names_[id]);
        where[id].insert(nullptr);
      }
    }
    for (int id : s.outputs)
      if (id >= 0) {
        where[id] = {s.device};
        producer[id] = si;
      }
  }
  for (int id : output_ids_)
    if (!where[id].count(nullptr)) note(producer[id], "to host (graph output)", names_[id]);
}

std::vector<Tensor> Session::run(const std::vector<std::string>& input_names, const std::vector<Tensor>& input_values,
                                 const std::vector<std::string>& output_names, const RunControl& control) {
  LimitsScope limits(limits_);
  ThreadPool::RunScope spinning(*pool_);
  using Clock = std::chrono::steady_clock;
  const bool profile = profiling_.load(std::memory_order_relaxed);
  const Clock::time_point run_start = profile ? Clock::now() : Clock::time_point();
  if (input_names.size() != input_values.size())
    fail(MRT_INVALID_ARGUMENT, input_names.size(), " input names but ", input_values.size(), " input values");
  // Per-run values: feeds and node outputs. Initializers are read from constants_ in place
  // unless a feed overrides them.
  // The run's allocations follow the arena's memory plan (declared first: it ends after every local that holds
  // a buffer is gone, so what is still alive then is what the run returned).
  struct ArenaRun {
    RunArena& arena;
    const bool held;
    bool completed = false;
    ~ArenaRun() {
      if (held) arena.end_run(completed);
    }
  } arena_run{*arena_, arena_->begin_run()};
  Allocator* const alloc = arena_run.held ? static_cast<Allocator*>(arena_.get()) : alloc_.get();
  std::vector<Tensor> values(names_.size());
  auto value_of = [&](int id) -> const Tensor* {
    if (values[id].valid()) return &values[id];
    return constants_[id].valid() ? &constants_[id] : nullptr;
  };

  std::map<std::string, int64_t> symbols;
  std::vector<bool> fed(names_.size(), false);
  for (size_t i = 0; i < input_names.size(); ++i) {
    const std::string& name = input_names[i];
    const Tensor& t = input_values[i];
    const ValueInfo* info = nullptr;
    int id = value_id(name);
    for (size_t k = 0; k < inputs_.size(); ++k)
      if (inputs_[k].name == name) info = &inputs_[k];
    bool overridable = id >= 0 && std::find(overridable_.begin(), overridable_.end(), id) != overridable_.end();
    if (!info && !overridable) {
      std::string valid;
      for (const auto& v : inputs_) valid += (valid.empty() ? "'" : ", '") + v.name + "'";
      if (id >= 0 && constants_[id].valid())
        fail(MRT_INVALID_ARGUMENT, "input '", name, "' is a constant initializer",
             model_.ir_version < 4 ? " (up to IR version 3 every initializer is listed among the graph inputs; that "
                                     "does not make it overridable)"
                                   : "",
             "; the model's inputs are ", valid.empty() ? "none" : valid);
      fail(MRT_INVALID_ARGUMENT, "unknown input name '", name, "'; the model's inputs are ", valid.empty() ? "none" : valid);
    }
    if (fed[id]) fail(MRT_INVALID_ARGUMENT, "input '", name, "' is given twice");
    fed[id] = true;
    if (info && !info->is_tensor) {
      if (!value_has_type(t, info->type))
        fail(MRT_INVALID_ARGUMENT, "input '", name, "' is ", t.is_tensor() ? "a tensor " : "", t.describe(),
             " but the model expects ", info->type);
    } else if (!t.is_tensor() && !(info && info->elem_type == DType::kUndefined)) {  // (no type: any value)
      fail(MRT_INVALID_ARGUMENT, "input '", name, "' is ", t.describe(), " but the model expects ",
           info ? value_type(*info) : std::string("a tensor"));
    } else if (info) {
      if (info->elem_type != DType::kUndefined && info->elem_type != t.dtype())
        fail(MRT_INVALID_ARGUMENT, "input '", name, "' has element type ", dtype_name(t.dtype()), " but the model expects ",
             dtype_name(info->elem_type));
      if (info->has_shape) {
        if (info->dims.size() != t.rank())
          fail(MRT_INVALID_ARGUMENT, "input '", name, "' has rank ", t.rank(), " (shape ", shape_str(t.shape()),
               ") but the model expects rank ", info->dims.size(), " ", dims_str(*info));
        for (size_t d = 0; d < t.rank(); ++d) {
          const Dim& dim = info->dims[d];
          if (dim.value >= 0 && dim.value != t.dim(d))
            fail(MRT_INVALID_ARGUMENT, "input '", name, "' has shape ", shape_str(t.shape()), " but the model expects ",
                 dims_str(*info), " (dimension ", d, ")");
          if (dim.value < 0 && !dim.param.empty()) {
            auto [it, inserted] = symbols.emplace(dim.param, t.dim(d));
            if (!inserted && it->second != t.dim(d))
              fail(MRT_INVALID_ARGUMENT, "input '", name, "' dimension ", d, " ('", dim.param, "') is ", t.dim(d),
                   " but another input bound '", dim.param, "' to ", it->second);
          }
        }
      }
    } else {
      const Tensor& c = constants_[id];
      if (c.dtype() != t.dtype() || c.shape() != t.shape())
        fail(MRT_INVALID_ARGUMENT, "input '", name, "' overrides an initializer of ", c.describe(), " with ", t.describe());
    }
    values[id] = t;
  }
  for (size_t k = 0; k < inputs_.size(); ++k)
    if (!fed[input_ids_[k]])
      fail(MRT_INVALID_ARGUMENT, "missing input '", inputs_[k].name, "' (", inputs_[k].elem_type == DType::kUndefined
                                                                                 ? "any type"
                                                                                 : dtype_name(inputs_[k].elem_type),
           dims_str(inputs_[k]), ")");

  std::vector<int> wanted;
  if (output_names.empty()) {
    wanted = output_ids_;
  } else {
    for (const auto& name : output_names) {
      int id = value_id(name);
      bool is_output = id >= 0 && std::find(output_ids_.begin(), output_ids_.end(), id) != output_ids_.end();
      if (!is_output) {
        std::string valid;
        for (const auto& v : outputs_) valid += (valid.empty() ? "'" : ", '") + v.name + "'";
        fail(MRT_INVALID_ARGUMENT, "unknown output name '", name, "'; the model's outputs are ", valid);
      }
      wanted.push_back(id);
    }
  }

  // Bound outputs: the producing node writes into the caller's buffer when the shape and type match.
  std::unordered_map<int, const Tensor*> bound;
  if (control.bound_outputs) {
    if (control.bound_outputs->size() != wanted.size())
      fail(MRT_INVALID_ARGUMENT, control.bound_outputs->size(), " bound outputs for ", wanted.size(), " outputs");
    for (size_t k = 0; k < wanted.size(); ++k)
      if ((*control.bound_outputs)[k].valid()) bound[wanted[k]] = &(*control.bound_outputs)[k];
  }
  std::string events;
  const std::string tid =
      profile ? std::to_string(std::hash<std::thread::id>()(std::this_thread::get_id()) % 1000000) : std::string();

  std::vector<Tensor> outs;
  // Concat outputs assembled in place, for these feeds' shapes (nullptr: none)
  const std::shared_ptr<const ConcatPlan> concat_plan = concat_plan_for(input_names, input_values);
  std::vector<Tensor> assembling(concat_plan ? concat_plan->placements.size() : 0);
  // A Concat output bound to the caller's buffer is not assembled in place: its Concat copies into that buffer.
  auto concat_bound = [&](size_t placement) {
    return !bound.empty() && bound.count(steps_[concat_plan->placements[placement].step].outputs[0]) > 0;
  };
  // The buffer of an assembled Concat output, made on first use: a view into its parent's when it has one.
  std::function<const Tensor&(size_t)> assembly = [&](size_t placement) -> const Tensor& {
    Tensor& whole = assembling[placement];
    if (!whole.valid()) {
      const ConcatPlacement& cp = concat_plan->placements[placement];
      if (cp.parent >= 0 && !concat_bound(static_cast<size_t>(cp.parent)))
        whole = Tensor::view(assembly(static_cast<size_t>(cp.parent)), cp.dtype, cp.shape, cp.parent_offset);
      else
        whole = Tensor(cp.dtype, cp.shape, alloc);
    }
    return whole;
  };
  OpContext ctx;
  ctx.pool_ = pool_.get();
  ctx.alloc_ = alloc;
  // Values in device memory: where each lives (nullptr = only on the host) and its device copy.
  std::vector<DeviceTensor> dev(names_.size());
  std::vector<PluginEp*> dev_ep(names_.size(), nullptr);
  std::vector<const DeviceTensor*> dev_in;
  std::vector<DeviceTensor> dev_out;
  std::set<PluginEp*> used_devices;
  // The host tensor of a value, copied from device memory when it lives there only.
  auto host_value = [&](int id) -> const Tensor* {
    if (const Tensor* t = value_of(id)) return t;
    if (!dev_ep[id]) return nullptr;
    values[id] = dev_ep[id]->to_host(dev[id], alloc);
    to_host_.fetch_add(1, std::memory_order_relaxed);
    return &values[id];
  };
  for (auto& s : steps_) {
    if (control.terminate && control.terminate->load(std::memory_order_relaxed))
      fail(MRT_CANCELLED, "the run was terminated before ", s.node->label(), ": RunOptions.terminate is set");
    if (exit_stops_this_thread())
      fail(MRT_CANCELLED, "the run was stopped before ", s.node->label(), ": the process is exiting");
    ctx.node_ = s.node;
    ctx.opset_ = s.opset;
    const Clock::time_point node_start = profile ? Clock::now() : Clock::time_point();
    try {
      if (s.device) {
        used_devices.insert(s.device);
        dev_in.assign(s.inputs.size(), nullptr);
        for (size_t i = 0; i < s.inputs.size(); ++i) {
          const int id = s.inputs[i];
          if (id < 0) continue;
          if (dev_ep[id] == s.device) {  // produced by this EP: read in place
            dev_in[i] = &dev[id];
            device_resident_.fetch_add(1, std::memory_order_relaxed);
          } else if (s.constant[i]) {
            dev_in[i] = device_constant(s.device, id);
          } else {
            const Tensor* h = host_value(id);
            if (!h) fail(MRT_INTERNAL, "value '", names_[id], "' is not available");
            dev[id] = s.device->to_device(*h);
            dev_ep[id] = s.device;
            to_device_.fetch_add(1, std::memory_order_relaxed);
            dev_in[i] = &dev[id];
          }
        }
        dev_out.assign(s.outputs.size(), DeviceTensor());
        s.device->compute_on_device(s.plugin->handle, s.node->label(), dev_in, dev_out, pool_->size());
        outs.assign(s.outputs.size(), Tensor());
        for (size_t i = 0; i < s.outputs.size(); ++i) {
          if (s.outputs[i] < 0) continue;
          if (!dev_out[i].valid())
            fail(MRT_RUNTIME_ERROR, s.node->label(), ": execution provider '", s.device->name(), "' (",
                 s.device->library_path(), ") did not produce output ", i, " ('", names_[s.outputs[i]], "')");
          if (i < s.expect.size()) check_partition_output(s, i, dev_out[i].dtype, dev_out[i].shape);
        }
      } else {
        ctx.inputs_.assign(s.inputs.size(), nullptr);
        for (size_t i = 0; i < s.inputs.size(); ++i)
          if (s.inputs[i] >= 0) {
            const Tensor* in = host_value(s.inputs[i]);
            if (s.tensors_only && in && !in->is_tensor())
              fail(MRT_INVALID_ARGUMENT, "input ", i, " ('", names_[s.inputs[i]], "') is ", in->describe(),
                   "; the operator takes tensors");
            ctx.inputs_[i] = in;
          }
        ctx.constant_ = &s.constant;
        ctx.donatable_ = &s.donatable;
        outs.assign(s.outputs.size(), Tensor());
        if (!bound.empty() && !s.plugin)  // (plugin EPs' outputs are copied in at the end)
          for (size_t i = 0; i < s.outputs.size(); ++i) {
            auto b = s.outputs[i] >= 0 ? bound.find(s.outputs[i]) : bound.end();
            if (b != bound.end()) outs[i] = *b->second;  // OpContext::output hands it out on a match
          }
        const size_t si = static_cast<size_t>(&s - steps_.data());
        if (concat_plan)
          for (const auto& p : concat_plan->placed[si]) {  // outputs made in their slice of a later Concat's output
            if (outs[p.output].valid() || concat_bound(p.placement)) continue;
            const ConcatPlacement& cp = concat_plan->placements[p.placement];
            outs[p.output] = Tensor::view(assembly(p.placement), cp.dtype, p.shape, p.byte_offset);
          }
        if (concat_plan && concat_plan->assembles[si] >= 0) {  // (placed in a later Concat: outs[0] is the same memory)
          Tensor& mine = assembling[static_cast<size_t>(concat_plan->assembles[si])];
          if (!outs[0].valid()) outs[0] = std::move(mine);
          mine = Tensor();
        }
        ctx.outputs_ = &outs;
        ctx.output_names_ = &s.node->outputs;
        ctx.cache_ = s.cache.get();
        if (s.plugin)
          s.plugin->ep->compute(s.plugin->handle, s.node->label(), ctx, pool_->size());
        else
          s.kernel->fn(ctx);
        adopt_strings(outs, ctx.inputs_);
        for (size_t i = 0; i < s.expect.size() && i < outs.size(); ++i)
          if (outs[i].valid()) check_partition_output(s, i, outs[i].dtype(), outs[i].shape());
      }
    } catch (const Error& e) {
      std::string msg = e.what();
      throw Error(e.code(), msg.rfind(s.node->label(), 0) == 0 ? msg : s.node->label() + ": " + msg);
    } catch (const std::bad_alloc&) {
      fail(MRT_OUT_OF_MEMORY, s.node->label(), ": out of memory");
    } catch (const std::exception& e) {
      fail(MRT_RUNTIME_ERROR, s.node->label(), ": ", e.what());
    }
    if (profile)
      append_node_event(events, *s.node, s.plugin ? s.plugin->ep->name() : std::string(MRT_CPU_EP_NAME), tid,
                        micros(node_start - created_), micros(Clock::now() - node_start),
                        s.device ? std::vector<const Tensor*>() : ctx.inputs_,
                        s.device ? std::vector<Tensor>() : outs);  // device values: no host tensors to describe
    for (size_t i = 0; i < s.outputs.size(); ++i) {
      const int id = s.outputs[i];
      if (id < 0) continue;
      if (s.device) {
        dev[id] = std::move(dev_out[i]);
        dev_ep[id] = s.device;
        values[id] = Tensor();
      } else {
        values[id] = std::move(outs[i]);
      }
    }
    for (int id : s.release) {
      values[id] = Tensor();
      dev[id] = DeviceTensor();
      dev_ep[id] = nullptr;
    }
  }

  std::vector<Tensor> result;
  for (int id : wanted) {
    const Tensor* t = host_value(id);
    if (!t) fail(MRT_RUNTIME_ERROR, "output '", names_[id], "' was not produced (an optional output the kernel skipped)");
    result.push_back(*t);
  }
  dev.clear();
  for (PluginEp* ep : used_devices) ep->synchronize();
  values.clear();
  // Callers own (and may write to) the outputs: an output that still shares memory with a
  // constant, a caller's input or another output is copied so nothing else can change.
  for (size_t k = 0; k < result.size(); ++k) {
    Tensor& t = result[k];
    auto b = bound.find(wanted[k]);
    // The caller's buffer receives the result (copied in when the kernel made its own). When the
    // result's type or shape differ from the buffer's, it is returned like an unbound output.
    if (b != bound.end() && b->second->dtype() == t.dtype() && b->second->shape() == t.shape()) {
      const Tensor& dst = *b->second;
      if (t.raw() != dst.raw() && t.nbytes()) std::memcpy(Tensor(dst).raw(), t.raw(), t.nbytes());
      t = dst;
      continue;
    }
    const auto& buf = t.buffer();
    // (string outputs always get their own copies of the strings: nothing they point to is shared)
    if (buf && (!buf->owned || buf.use_count() > 1 || t.dtype() == DType::kString)) t = t.clone(alloc_.get());
  }
  if (profile) {
    append_run_event(events, tid, micros(run_start - created_), micros(Clock::now() - run_start));
    std::lock_guard<std::mutex> lock(profile_mutex_);
    if (profiling_.load()) profile_events_ += (profile_events_.empty() ? "" : ",\n") + events;
  }
  arena_run.completed = true;
  return result;
}

}  // namespace mrt
