// The oneDNN execution provider's plugin entry points, factory and EP (mosaicrt/ep.h).
// Every function the core calls goes through guard(): no C++ exception crosses the ABI.
#include <dlfcn.h>

#include <cstdio>
#include <functional>
#include <set>
#include <unordered_map>

#include "ep_common.h"

#ifndef MRT_DNNL_EP_VERSION
#error "MRT_DNNL_EP_VERSION must come from eps/dnnl/VERSION (CMake)"
#endif

namespace mrt_dnnl {
namespace {

constexpr const char* kEpName = "DnnlExecutionProvider";
constexpr const char* kVendor = "mosaicrt (oneDNN)";

const MrtEpApi* g_api = nullptr;

MrtStatus* make_status(MrtErrorCode code, const std::string& msg) {
  return g_api ? g_api->CreateStatus(code, msg.c_str()) : nullptr;
}

// Runs fn, turning every exception into a status that names `where`.
MrtStatus* guard(const std::string& where, const std::function<void()>& fn) {
  try {
    fn();
    return nullptr;
  } catch (const StatusError& e) {
    return e.status;
  } catch (const Unsupported& e) {
    return make_status(MRT_NOT_IMPLEMENTED, cat(kEpName, ": ", where, ": ", e.what()));
  } catch (const dnnl::error& e) {
    return make_status(MRT_RUNTIME_ERROR, cat(kEpName, ": ", where, ": oneDNN: ", e.what(), " (status ", e.status, ")"));
  } catch (const std::invalid_argument& e) {  // the caller's mistake (an unknown option, a wrong device)
    return make_status(MRT_INVALID_ARGUMENT, cat(kEpName, ": ", where, ": ", e.what()));
  } catch (const std::bad_alloc&) {
    return make_status(MRT_OUT_OF_MEMORY, cat(kEpName, ": ", where, ": out of memory"));
  } catch (const std::exception& e) {
    return make_status(MRT_RUNTIME_ERROR, cat(kEpName, ": ", where, ": ", e.what()));
  } catch (...) {
    return make_status(MRT_INTERNAL, cat(kEpName, ": ", where, ": unknown exception"));
  }
}

// oneDNN here runs on GNU OpenMP: the session's thread count is applied per Compute call on
// the calling thread. The runtime is looked up in the already loaded libgomp, never loaded.
using OmpSetNumThreads = void (*)(int);
OmpSetNumThreads omp_setter() {
  static OmpSetNumThreads fn = [] {
    void* h = dlopen("libgomp.so.1", RTLD_LAZY | RTLD_NOLOAD);
    return h ? reinterpret_cast<OmpSetNumThreads>(dlsym(h, "omp_set_num_threads")) : nullptr;
  }();
  return fn;
}

struct OpEntry {
  bool (*claim)(const NodeView&, std::string*);
  std::unique_ptr<Kernel> (*make)(const NodeView&, const dnnl::engine&);
};

const std::unordered_map<std::string, OpEntry>& op_table() {
  static const std::unordered_map<std::string, OpEntry> table = {
      {"::Conv", {claim_conv, make_conv}},
      {"com.microsoft::FusedConv", {claim_conv, make_conv}},
      {"::MaxPool", {claim_pool, make_pool}},
      {"::AveragePool", {claim_pool, make_pool}},
      {"::GlobalAveragePool", {claim_pool, make_pool}},
      {"::GlobalMaxPool", {claim_pool, make_pool}},
      {"::BatchNormalization", {claim_batchnorm, make_batchnorm}},
      {"::MatMul", {claim_matmul, make_matmul}},
      {"::Gemm", {claim_gemm, make_gemm}},
      {"::Relu", {claim_unary, make_unary}},
      {"::LeakyRelu", {claim_unary, make_unary}},
      {"::Sigmoid", {claim_unary, make_unary}},
      {"::Tanh", {claim_unary, make_unary}},
      {"::Clip", {claim_unary, make_unary}},
      {"::Add", {claim_binary, make_binary}},
      {"::Sub", {claim_binary, make_binary}},
      {"::Mul", {claim_binary, make_binary}},
      {"::Div", {claim_binary, make_binary}},
      {"::Softmax", {claim_softmax, make_softmax}},
  };
  return table;
}

const OpEntry* find_op(const MrtEpNode& node) {
  std::string domain = node.domain ? node.domain : "";
  if (domain == "ai.onnx") domain.clear();
  auto it = op_table().find(domain + "::" + (node.op_type ? node.op_type : ""));
  return it == op_table().end() ? nullptr : &it->second;
}

struct KernelHolder {
  std::unique_ptr<Kernel> kernel;
  std::string where;  // "node 'name' (op)" for error messages
};

struct DnnlEp : MrtEp {
  dnnl::engine engine{dnnl::engine::kind::cpu, 0};
  bool verbose = false;
  std::map<std::string, int32_t> types_;  // element types inferred during GetCapability
  std::set<std::string> claimed_;

  DnnlEp() : MrtEp{} {  // zeroed: fields of newer EP ABI minors this EP does not use stay NULL
    abi_version = MRT_EP_ABI_VERSION;
    GetName = [](const MrtEp*) -> const char* { return kEpName; };
    GetCapability = [](MrtEp* self, const MrtEpGraph* graph, uint8_t* take) -> MrtStatus* {
      return guard("GetCapability", [&] { static_cast<DnnlEp*>(self)->capability(*graph, take); });
    };
    CreateKernel = [](MrtEp* self, const MrtEpNode* node, void** kernel) -> MrtStatus* {
      return guard(cat("node '", node && node->name ? node->name : "", "' (", node && node->op_type ? node->op_type : "", ")"),
                   [&] { *kernel = static_cast<DnnlEp*>(self)->create(*node); });
    };
    Compute = [](MrtEp* self, void* kernel, MrtEpKernelContext* ctx) -> MrtStatus* {
      auto* holder = static_cast<KernelHolder*>(kernel);
      return guard(holder ? holder->where : "Compute", [&] { static_cast<DnnlEp*>(self)->compute(holder, ctx); });
    };
    ReleaseKernel = [](MrtEp*, void* kernel) { delete static_cast<KernelHolder*>(kernel); };
  }

  // Ops whose outputs have the element type of their first input: used to follow float32 through
  // nodes this EP does not run when the core gives no element type for a value.
  static bool passes_type_through(const MrtEpNode& node) {
    static const char* const kOps[] = {"Flatten", "Reshape", "Transpose", "Identity", "Squeeze", "Unsqueeze",
                                       "Concat", "Dropout", "Slice", "Gather", "Expand", "Pad", "Tile", "Split",
                                       "ReduceMean", "ReduceSum", "ReduceMax", "ReduceMin", "Resize", "Neg",
                                       "Abs", "Exp", "Log", "Sqrt", "Pow", "Erf", "HardSigmoid", "Elu", "Max",
                                       "Min", "LayerNormalization", "InstanceNormalization", "ConvTranspose"};
    const std::string domain = node.domain ? node.domain : "";
    if (!domain.empty() && domain != "ai.onnx") return false;
    for (const char* op : kOps)
      if (node.op_type && std::strcmp(node.op_type, op) == 0) return true;
    return false;
  }

  void capability(const MrtEpGraph& graph, uint8_t* take) {
    types_.clear();
    claimed_.clear();
    auto known = [&](const MrtEpValue& v) -> int32_t {
      if (v.constant_value) return v.constant_value->elem_type;
      if (v.elem_type != 0 || !v.name) return v.elem_type;
      auto it = types_.find(v.name);
      return it == types_.end() ? 0 : it->second;
    };
    for (size_t i = 0; i < graph.node_count; ++i) {
      const MrtEpNode& node = graph.nodes[i];
      const OpEntry* op = find_op(node);
      std::string why;
      const bool ok = op && op->claim(NodeView(node, &types_), &why);
      // Outputs: what the core says, else float32 for nodes this EP runs (float32 only) or
      // the first input's type for type-preserving ops.
      int32_t inferred = 0;
      if (ok) {
        inferred = kFloat;
      } else if (node.input_count > 0 && passes_type_through(node)) {
        inferred = known(node.inputs[0]);
      }
      for (size_t o = 0; o < node.output_count; ++o) {
        const MrtEpValue& v = node.outputs[o];
        if (v.name && v.name[0]) types_[v.name] = v.elem_type != 0 ? v.elem_type : inferred;
      }
      if (!op) continue;
      take[i] = ok ? 1 : 0;
      if (ok && node.name) claimed_.insert(node.name);
      if (!ok && verbose)
        std::fprintf(stderr, "[%s] not taking '%s' (%s): %s\n", kEpName, node.name ? node.name : "",
                     node.op_type ? node.op_type : "", why.c_str());
    }
  }

  void* create(const MrtEpNode& node) const {
    const OpEntry* op = find_op(node);
    NodeView view(node, &types_);
    std::string why;
    if (!op || !op->claim(view, &why)) throw Unsupported(why.empty() ? "operator not supported" : why);
    auto holder = std::make_unique<KernelHolder>();
    holder->kernel = op->make(view, engine);
    holder->where = cat("node '", view.name(), "' (", view.op(), ")");
    return holder.release();
  }

  void compute(KernelHolder* holder, MrtEpKernelContext* ctx) const {
    if (!holder || !holder->kernel) throw std::runtime_error("Compute called without a kernel");
    if (OmpSetNumThreads set = omp_setter()) {
      const int32_t n = g_api->KernelContextGetThreadCount(ctx);
      if (n > 0) set(n);
    }
    RunContext run(g_api, ctx, engine);
    holder->kernel->compute(run);
  }
};

struct DnnlFactory : MrtEpFactory {
  std::string registration_name;

  DnnlFactory() : MrtEpFactory{} {
    abi_version = MRT_EP_ABI_VERSION;
    GetName = [](const MrtEpFactory*) -> const char* { return kEpName; };
    GetVendor = [](const MrtEpFactory*) -> const char* { return kVendor; };
    GetVersion = [](const MrtEpFactory*) -> const char* { return MRT_DNNL_EP_VERSION; };
    GetOwnDevices = nullptr;
    GetSupportedDevices = [](MrtEpFactory*, const MrtHardwareDevice* const* devices, size_t n,
                             uint8_t* supported) -> MrtStatus* {
      return guard("GetSupportedDevices", [&] {
        for (size_t i = 0; i < n; ++i) supported[i] = devices[i] && devices[i]->type == MRT_DEVICE_CPU ? 1 : 0;
      });
    };
    CreateEp = [](MrtEpFactory*, const MrtHardwareDevice* const* devices, size_t n_devices, const char* const* keys,
                  const char* const* values, size_t n_options, MrtEp** ep) -> MrtStatus* {
      return guard("CreateEp", [&] {
        for (size_t i = 0; i < n_devices; ++i)
          if (!devices[i] || devices[i]->type != MRT_DEVICE_CPU)
            throw std::invalid_argument("this EP runs on CPU devices only");
        auto made = std::make_unique<DnnlEp>();
        for (size_t i = 0; i < n_options; ++i) {
          const std::string key = keys[i] ? keys[i] : "", value = values[i] ? values[i] : "";
          if (key == "verbose") {
            made->verbose = value == "1" || value == "true";
          } else {
            throw std::invalid_argument(cat("unknown provider option '", key, "' (known: verbose)"));
          }
        }
        *ep = made.release();
      });
    };
    ReleaseEp = [](MrtEpFactory*, MrtEp* ep) { delete static_cast<DnnlEp*>(ep); };
  }
};

}  // namespace
}  // namespace mrt_dnnl

extern "C" {

MRT_EP_EXPORT uint32_t MrtEpGetAbiVersion(void) { return MRT_EP_ABI_VERSION; }

MRT_EP_EXPORT MrtStatus* MrtEpCreateFactories(const MrtEpApi* api, const char* registration_name,
                                              MrtEpFactory** factories, size_t capacity, size_t* count) {
  using namespace mrt_dnnl;
  if (!api || !factories || !count) return api ? api->CreateStatus(MRT_INVALID_ARGUMENT, "MrtEpCreateFactories: NULL argument") : nullptr;
  if ((api->abi_version >> 16) != MRT_EP_ABI_VERSION_MAJOR) {
    char msg[160];
    std::snprintf(msg, sizeof msg, "%s: core EP ABI %u.%u is incompatible with the plugin's %u.%u", kEpName,
                  api->abi_version >> 16, api->abi_version & 0xffff, MRT_EP_ABI_VERSION_MAJOR, MRT_EP_ABI_VERSION_MINOR);
    return api->CreateStatus(MRT_EP_ERROR, msg);
  }
  g_api = api;
  return guard("MrtEpCreateFactories", [&] {
    *count = 0;
    if (capacity < 1) throw std::invalid_argument("no room for the factory");
    auto f = std::make_unique<DnnlFactory>();
    f->registration_name = registration_name ? registration_name : "";
    factories[0] = f.release();
    *count = 1;
  });
}

MRT_EP_EXPORT void MrtEpReleaseFactory(MrtEpFactory* factory) {
  delete static_cast<mrt_dnnl::DnnlFactory*>(factory);
}

}  // extern "C"
