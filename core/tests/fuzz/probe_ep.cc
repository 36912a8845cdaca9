// A plugin EP for the EP graph-view fuzz target: it reads every field of what the core hands a
// plugin -- the graph view in GetCapability and the node view in CreateKernel: names, value
// types and dims, constant tensors byte by byte, attributes of every kind -- so that ASan
// reports any view pointer that is dangling, short or not NUL-terminated. It claims a
// deterministic subset of nodes (so partitions and CPU fallback both happen) and never
// computes (the fuzz target does not run sessions).
//
// A new kind of view (a subgraph view, serialized partition bytes) gets its own walk_* here.
#include <cstring>
#include <new>

#include "mosaicrt/ep.h"

namespace {

const MrtEpApi* g_api = nullptr;
volatile uint64_t g_sink = 0;

void touch(const void* p, size_t n) {
  const unsigned char* b = static_cast<const unsigned char*>(p);
  uint64_t h = 0;
  for (size_t i = 0; i < n; ++i) h = h * 31 + b[i];
  g_sink = g_sink + h;
}
void touch_string(const char* s) {
  if (s) touch(s, std::strlen(s) + 1);
}

void walk_tensor(const MrtEpTensor* t) {
  if (!t) return;
  touch(t->dims, t->rank * sizeof(int64_t));
  touch(t->data, t->data_bytes);
}

void walk_value(const MrtEpValue& v) {
  touch_string(v.name);
  if (v.rank > 0) touch(v.dims, static_cast<size_t>(v.rank) * sizeof(int64_t));
  walk_tensor(v.constant_value);
}

void walk_attribute(const MrtEpAttribute& a) {
  touch_string(a.name);
  switch (a.type) {
    case MRT_ATTR_STRING: touch(a.s, a.s_len + 1); break;
    case MRT_ATTR_FLOATS: touch(a.floats, a.count * sizeof(float)); break;
    case MRT_ATTR_INTS: touch(a.ints, a.count * sizeof(int64_t)); break;
    case MRT_ATTR_STRINGS:
      for (size_t i = 0; i < a.count; ++i) touch_string(a.strings[i]);
      break;
    case MRT_ATTR_TENSOR: walk_tensor(a.t); break;
    default: break;
  }
}

void walk_node(const MrtEpNode& n) {
  touch_string(n.name);
  touch_string(n.op_type);
  touch_string(n.domain);
  for (size_t i = 0; i < n.input_count; ++i) walk_value(n.inputs[i]);
  for (size_t i = 0; i < n.output_count; ++i) walk_value(n.outputs[i]);
  for (size_t i = 0; i < n.attribute_count; ++i) walk_attribute(n.attributes[i]);
}

bool claims(const MrtEpNode& n) {  // about half of the op types, decided by their name
  size_t h = 0;
  for (const char* c = n.op_type; *c; ++c) h = h * 131 + static_cast<unsigned char>(*c);
  return (h >> 3) & 1;
}

struct ProbeKernel {
  int unused;
};

const char* ep_name(const MrtEp*) { return "FuzzProbeEP"; }
MrtStatus* get_capability(MrtEp*, const MrtEpGraph* graph, uint8_t* take) {
  for (size_t i = 0; i < graph->node_count; ++i) {
    walk_node(graph->nodes[i]);
    take[i] = claims(graph->nodes[i]) ? 1 : 0;
  }
  return nullptr;
}
MrtStatus* create_kernel(MrtEp*, const MrtEpNode* node, void** kernel) {
  walk_node(*node);
  ProbeKernel* k = new (std::nothrow) ProbeKernel{0};
  if (!k) return g_api->CreateStatus(MRT_OUT_OF_MEMORY, "probe kernel");
  *kernel = k;
  return nullptr;
}
MrtStatus* compute(MrtEp*, void*, MrtEpKernelContext*) {
  return g_api->CreateStatus(MRT_NOT_IMPLEMENTED, "the probe EP does not compute");
}
void release_kernel(MrtEp*, void* kernel) { delete static_cast<ProbeKernel*>(kernel); }

const char* factory_name(const MrtEpFactory*) { return "FuzzProbeEP"; }
const char* factory_vendor(const MrtEpFactory*) { return "mosaicrt fuzzing"; }
const char* factory_version(const MrtEpFactory*) { return "0.0.0"; }
MrtStatus* supported_devices(MrtEpFactory*, const MrtHardwareDevice* const* devices, size_t n, uint8_t* supported) {
  for (size_t i = 0; i < n; ++i) supported[i] = devices[i]->type == MRT_DEVICE_CPU;
  return nullptr;
}
MrtStatus* create_ep(MrtEpFactory*, const MrtHardwareDevice* const*, size_t, const char* const*, const char* const*,
                     size_t, MrtEp** out) {
  MrtEp* ep = new (std::nothrow) MrtEp{};
  if (!ep) return g_api->CreateStatus(MRT_OUT_OF_MEMORY, "probe EP");
  ep->abi_version = MRT_EP_ABI_VERSION;
  ep->GetName = ep_name;
  ep->GetCapability = get_capability;
  ep->CreateKernel = create_kernel;
  ep->Compute = compute;
  ep->ReleaseKernel = release_kernel;
  *out = ep;
  return nullptr;
}
void release_ep(MrtEpFactory*, MrtEp* ep) { delete ep; }

MrtEpFactory g_factory = {MRT_EP_ABI_VERSION, factory_name, factory_vendor, factory_version, nullptr,
                          supported_devices,  create_ep,    release_ep};

}  // namespace

extern "C" MRT_EP_EXPORT uint32_t MrtEpGetAbiVersion(void) { return MRT_EP_ABI_VERSION; }

extern "C" MRT_EP_EXPORT MrtStatus* MrtEpCreateFactories(const MrtEpApi* api, const char*, MrtEpFactory** factories,
                                                         size_t capacity, size_t* count) {
  g_api = api;
  *count = 0;
  if (capacity < 1) return api->CreateStatus(MRT_INVALID_ARGUMENT, "no room for the probe factory");
  factories[0] = &g_factory;
  *count = 1;
  return nullptr;
}

extern "C" MRT_EP_EXPORT void MrtEpReleaseFactory(MrtEpFactory*) {}
