// A test-only EP ABI 1.1 plugin with simulated device memory and compiled partitions
// (tests/wheel/test_ep_abi_1_1.py).
//
// One factory, "FakeDevice_<registration name>", with its own simulated GPU. Device memory is
// a table of blocks behind opaque handles (not host addresses): a kernel handed a host pointer,
// or the core reading a handle as host memory, fails loudly instead of computing by accident.
// It runs Relu, Add and Mul on float tensors. Provider options:
//   mode=compile|kernels   compile groups into one compute object (default) or one kernel per node
//   group=runs|all         runs: one group per run of consecutive claimed nodes (default);
//                          all: every claimed node in group 0 (the core splits / refuses it)
//   ops=Relu,Add,Mul       which op types to claim
//   fail=compile           make Compile fail
//   bad_shape=1            compiled partitions return outputs of a wrong shape
//   onnx_dir=<dir>         Compile writes each partition's SubgraphToOnnx bytes to <dir>/<name>.onnx
#include <cstdint>
#include <cstring>
#include <fstream>
#include <map>
#include <memory>
#include <mutex>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "mosaicrt/ep.h"

namespace {

const MrtEpApi* g_api = nullptr;

std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> out;
  std::stringstream in(s);
  std::string item;
  while (std::getline(in, item, sep))
    if (!item.empty()) out.push_back(item);
  return out;
}

MrtStatus* error(const std::string& msg) { return g_api->CreateStatus(MRT_EP_ERROR, msg.c_str()); }

struct Factory {
  MrtEpFactory base;
  std::string name;
  MrtHardwareDevice device{};
};

// Simulated device memory: handles 0x1000, 0x2000, ... -> blocks.
struct DeviceMemory {
  std::mutex mutex;
  std::map<uintptr_t, std::vector<char>> blocks;
  uintptr_t next = 0x1000;
  void* allocate(size_t bytes) {
    std::lock_guard<std::mutex> lock(mutex);
    uintptr_t h = next;
    next += 0x1000;
    blocks[h].resize(bytes);
    return reinterpret_cast<void*>(h);
  }
  void release(void* p) {
    std::lock_guard<std::mutex> lock(mutex);
    blocks.erase(reinterpret_cast<uintptr_t>(p));
  }
  float* at(const void* p, size_t bytes) {
    std::lock_guard<std::mutex> lock(mutex);
    auto it = blocks.find(reinterpret_cast<uintptr_t>(p));
    if (it == blocks.end()) throw std::runtime_error("a pointer that is not device memory of this EP");
    if (it->second.size() < bytes) throw std::runtime_error("device block too small");
    return reinterpret_cast<float*>(it->second.data());
  }
};

struct Node {
  std::string op;
  std::vector<std::string> inputs;
  std::string output;
};

// A compiled partition: its nodes and the names of its boundary inputs/outputs.
struct Program {
  std::vector<Node> nodes;
  std::vector<std::string> inputs, outputs;
  std::map<std::string, std::vector<float>> constants;  // initializers, host copies
  bool per_node = false;
};

struct Ep {
  MrtEp base;
  std::string name;
  std::vector<std::string> ops{"Relu", "Add", "Mul"};
  bool compile = true, group_all = false, fail_compile = false, bad_shape = false;
  std::string onnx_dir;
  DeviceMemory memory;
};

Ep* self(MrtEp* ep) { return reinterpret_cast<Ep*>(ep); }

bool claims(const Ep& ep, const MrtEpNode& n) {
  if (std::strcmp(n.domain, "") != 0 || n.output_count != 1) return false;
  for (size_t i = 0; i < n.input_count; ++i)
    if (n.inputs[i].elem_type != 1) return false;
  for (const auto& op : ep.ops)
    if (op == n.op_type) return true;
  return false;
}

MrtStatus* ep_groups(MrtEp* base, const MrtEpGraph* graph, int32_t* group) {
  Ep& ep = *self(base);
  int32_t current = -1, next = 0;
  for (size_t i = 0; i < graph->node_count; ++i) {
    if (!claims(ep, graph->nodes[i])) {
      current = -1;
      continue;
    }
    if (ep.group_all) {
      group[i] = 0;
      continue;
    }
    if (current < 0) current = next++;
    group[i] = current;
  }
  return nullptr;
}

Node to_node(const MrtEpNode& n) {
  Node x;
  x.op = n.op_type;
  for (size_t i = 0; i < n.input_count; ++i) x.inputs.push_back(n.inputs[i].name);
  x.output = n.outputs[0].name;
  return x;
}

MrtStatus* ep_compile(MrtEp* base, const MrtEpSubgraph* sg, void** out) {
  Ep& ep = *self(base);
  if (ep.fail_compile) return error(std::string("the fake device compiler rejects ") + sg->name);
  auto p = std::make_unique<Program>();
  for (size_t i = 0; i < sg->node_count; ++i) p->nodes.push_back(to_node(sg->nodes[i]));
  for (size_t i = 0; i < sg->input_count; ++i) p->inputs.push_back(sg->inputs[i].name);
  for (size_t i = 0; i < sg->output_count; ++i) p->outputs.push_back(sg->outputs[i].name);
  for (size_t i = 0; i < sg->initializer_count; ++i) {
    const MrtEpTensor* t = sg->initializers[i].constant_value;
    if (!t || t->elem_type != 1) return error("initializer without a float value");
    const float* f = static_cast<const float*>(t->data);
    p->constants[sg->initializers[i].name].assign(f, f + t->data_bytes / sizeof(float));
  }
  if (!ep.onnx_dir.empty()) {
    const void* bytes = nullptr;
    size_t size = 0;
    if (MrtStatus* st = g_api->SubgraphToOnnx(sg, &bytes, &size)) return st;
    std::ofstream(ep.onnx_dir + "/" + sg->name + ".onnx", std::ios::binary)
        .write(static_cast<const char*>(bytes), static_cast<std::streamsize>(size));
  }
  *out = p.release();
  return nullptr;
}

MrtStatus* ep_create_kernel(MrtEp*, const MrtEpNode* node, void** out) {
  auto p = std::make_unique<Program>();
  p->per_node = true;
  p->nodes.push_back(to_node(*node));
  for (size_t i = 0; i < node->input_count; ++i) {
    p->inputs.push_back(node->inputs[i].name);
  }
  p->outputs.push_back(node->outputs[0].name);
  *out = p.release();
  return nullptr;
}

struct Value {
  std::vector<int64_t> dims;
  std::vector<float> data;
};

void run(Ep& ep, const Program& p, MrtEpKernelContext* ctx) {
  std::map<std::string, Value> env;
  for (const auto& kv : p.constants) env[kv.first].data = kv.second;  // shapes: elementwise with same size only
  for (size_t i = 0; i < p.inputs.size(); ++i) {
    MrtEpTensor t{};
    if (!g_api->KernelContextGetInput(ctx, i, &t)) throw std::runtime_error("missing input " + p.inputs[i]);
    const float* d = ep.memory.at(t.data, t.data_bytes);  // must be device memory
    Value& v = env[p.inputs[i]];
    v.dims.assign(t.dims, t.dims + t.rank);
    v.data.assign(d, d + t.data_bytes / sizeof(float));
  }
  for (const auto& n : p.nodes) {
    const Value& a = env.at(n.inputs[0]);
    Value r = a;
    if (n.op == "Relu") {
      for (auto& x : r.data) x = x > 0.f ? x : 0.f;
    } else {
      const Value& b = env.at(n.inputs[1]);
      if (b.data.size() != a.data.size()) throw std::runtime_error(n.op + " without broadcasting only");
      for (size_t i = 0; i < r.data.size(); ++i) r.data[i] = n.op == "Add" ? a.data[i] + b.data[i] : a.data[i] * b.data[i];
    }
    env[n.output] = std::move(r);
  }
  for (size_t i = 0; i < p.outputs.size(); ++i) {
    Value& v = env.at(p.outputs[i]);
    std::vector<int64_t> dims = v.dims;
    if (ep.bad_shape && !p.per_node) dims.push_back(1);
    MrtEpTensor out{};
    if (MrtStatus* st = g_api->KernelContextAllocateOutput(ctx, i, 1, dims.data(), dims.size(), &out)) {
      (void)st;
      throw std::runtime_error("output allocation failed");
    }
    std::memcpy(ep.memory.at(out.data, out.data_bytes), v.data.data(), out.data_bytes);
  }
}

MrtStatus* ep_compute(MrtEp* base, void* kernel, MrtEpKernelContext* ctx) {
  try {
    run(*self(base), *static_cast<Program*>(kernel), ctx);
    return nullptr;
  } catch (const std::exception& e) {
    return error(e.what());
  }
}

void ep_release(MrtEp*, void* kernel) { delete static_cast<Program*>(kernel); }
const char* ep_name(const MrtEp* ep) { return reinterpret_cast<const Ep*>(ep)->name.c_str(); }

MrtStatus* dev_alloc(MrtEp* base, size_t bytes, void** p) {
  *p = self(base)->memory.allocate(bytes);
  return nullptr;
}
void dev_free(MrtEp* base, void* p) { self(base)->memory.release(p); }
MrtStatus* dev_in(MrtEp* base, void* dst, const void* src, size_t bytes) {
  try {
    std::memcpy(self(base)->memory.at(dst, bytes), src, bytes);
    return nullptr;
  } catch (const std::exception& e) {
    return error(e.what());
  }
}
MrtStatus* dev_out(MrtEp* base, void* dst, const void* src, size_t bytes) {
  try {
    std::memcpy(dst, self(base)->memory.at(src, bytes), bytes);
    return nullptr;
  } catch (const std::exception& e) {
    return error(e.what());
  }
}
MrtStatus* dev_sync(MrtEp*) { return nullptr; }

const char* f_name(const MrtEpFactory* f) { return reinterpret_cast<const Factory*>(f)->name.c_str(); }
const char* f_vendor(const MrtEpFactory*) { return "mosaicrt tests"; }
const char* f_version(const MrtEpFactory*) { return "1.1.0"; }
size_t f_own(MrtEpFactory* base, const MrtHardwareDevice** devices) {
  *devices = &reinterpret_cast<Factory*>(base)->device;
  return 1;
}
MrtStatus* f_supported(MrtEpFactory* base, const MrtHardwareDevice* const* devices, size_t n, uint8_t* supported) {
  for (size_t i = 0; i < n; ++i) supported[i] = devices[i] == &reinterpret_cast<Factory*>(base)->device;
  return nullptr;
}

MrtStatus* f_create_ep(MrtEpFactory* base, const MrtHardwareDevice* const*, size_t, const char* const* keys,
                       const char* const* values, size_t n_options, MrtEp** out) {
  auto ep = std::make_unique<Ep>();
  ep->name = reinterpret_cast<Factory*>(base)->name;
  for (size_t i = 0; i < n_options; ++i) {
    std::string k = keys[i], v = values[i];
    if (k == "mode") ep->compile = v != "kernels";
    else if (k == "group") ep->group_all = v == "all";
    else if (k == "ops") ep->ops = split(v, ',');
    else if (k == "fail") ep->fail_compile = v == "compile";
    else if (k == "bad_shape") ep->bad_shape = v == "1";
    else if (k == "onnx_dir") ep->onnx_dir = v;
    else return g_api->CreateStatus(MRT_INVALID_ARGUMENT, ("unknown provider option '" + k + "'").c_str());
  }
  MrtEp b{};
  b.abi_version = MRT_EP_ABI_VERSION;
  b.GetName = ep_name;
  b.Compute = ep_compute;
  b.ReleaseKernel = ep_release;
  b.GetCapabilityGroups = ep_groups;
  if (ep->compile) b.Compile = ep_compile;
  else b.CreateKernel = ep_create_kernel;
  b.DeviceAllocate = dev_alloc;
  b.DeviceFree = dev_free;
  b.CopyToDevice = dev_in;
  b.CopyToHost = dev_out;
  b.Synchronize = dev_sync;
  ep->base = b;
  *out = &ep.release()->base;
  return nullptr;
}
void f_release_ep(MrtEpFactory*, MrtEp* ep) { delete reinterpret_cast<Ep*>(ep); }

}  // namespace

extern "C" {

MRT_EP_EXPORT uint32_t MrtEpGetAbiVersion(void) { return MRT_EP_ABI_VERSION; }

MRT_EP_EXPORT MrtStatus* MrtEpCreateFactories(const MrtEpApi* api, const char* registration_name,
                                              MrtEpFactory** factories, size_t capacity, size_t* count) {
  g_api = api;
  if ((api->abi_version & 0xFFFF) < 1 || capacity < 1)
    return api->CreateStatus(MRT_EP_ERROR, "the fake device EP needs a core with EP ABI 1.1");
  auto* f = new Factory();
  f->name = std::string("FakeDevice_") + (registration_name ? registration_name : "");
  f->device.type = MRT_DEVICE_GPU;
  f->device.vendor_id = 0xFA4E;
  f->device.device_id = 11;
  f->device.vendor = "Fakevendor";
  f->device.name = "Simulated device with its own memory";
  f->base = MrtEpFactory{MRT_EP_ABI_VERSION, f_name, f_vendor, f_version, f_own, f_supported, f_create_ep,
                         f_release_ep};
  factories[0] = &f->base;
  *count = 1;
  return nullptr;
}

MRT_EP_EXPORT void MrtEpReleaseFactory(MrtEpFactory* factory) { delete reinterpret_cast<Factory*>(factory); }

}  // extern "C"
