// A test-only plugin EP library for the plugin-EP tests (tests/wheel/test_plugin_eps.py and
// core/tests/native/ep_plugin_check.c, which also runs under qemu/wine in `nox -s crosscheck`).
//
// The registration name configures it: "<tag>:<kinds>" creates one factory per kind
// (cpu, gpu, npu, nvgpu), named "Fake<Kind>_<tag>". gpu/npu factories bring their own
// simulated device; the cpu factory supports the discovered CPU and nvgpu the discovered
// NVIDIA GPUs. Each EP claims Relu and Add nodes on
// float tensors and runs them for real. Provider options:
//   ops=Relu,Add          which op types to claim
//   fail=compute|create_kernel|capability|create_ep   make that step fail (compute throws a
//                         C++ exception inside the kernel, caught at the ABI boundary)
//   sleep_ms=N            each kernel takes N ms, watching the library's static state meanwhile: if exit()
//                         destroys it under a running kernel (what a real EP library's caches suffer), the
//                         kernel reports it on stderr and the process ends with status 70
// Compile-time switches build deliberately broken variants:
//   -DFAKE_ABI_VERSION=0x00020000   claim another EP ABI
//   -DFAKE_FACTORY_ABI=...          put another ABI in the factory struct
//   -DFAKE_NO_ENTRY                 export no MrtEpCreateFactories
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "mosaicrt/ep.h"

#ifndef FAKE_ABI_VERSION
#define FAKE_ABI_VERSION MRT_EP_ABI_VERSION
#endif
#ifndef FAKE_FACTORY_ABI
#define FAKE_FACTORY_ABI MRT_EP_ABI_VERSION
#endif

namespace {

const MrtEpApi* g_api = nullptr;

// Static state of the library, as an EP library's primitive cache is: exit() destroys it. Its destructor
// lingers a little, as tearing down a real cache does, so that a kernel still running sees it happen.
struct LibraryState {
  volatile bool alive = true;
  ~LibraryState() {
    alive = false;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
};
LibraryState g_state;

std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> out;
  std::stringstream in(s);
  std::string item;
  while (std::getline(in, item, sep))
    if (!item.empty()) out.push_back(item);
  return out;
}

struct FakeFactory {
  MrtEpFactory base;
  std::string name, kind;
  MrtHardwareDevice own{};
  std::string own_name, own_vendor;
};

struct FakeEp {
  MrtEp base;
  std::string name;
  std::vector<std::string> ops{"Relu", "Add"};
  std::string fail;
  int sleep_ms = 0;
};

struct FakeKernel {
  std::string op;
};

MrtStatus* error(const std::string& msg) { return g_api->CreateStatus(MRT_RUNTIME_ERROR, msg.c_str()); }

const char* ep_name(const MrtEp* ep) { return reinterpret_cast<const FakeEp*>(ep)->name.c_str(); }

MrtStatus* ep_capability(MrtEp* base, const MrtEpGraph* graph, uint8_t* take) {
  auto* ep = reinterpret_cast<FakeEp*>(base);
  if (ep->fail == "capability") return error("capability failure requested by the test");
  for (size_t i = 0; i < graph->node_count; ++i) {
    const MrtEpNode& n = graph->nodes[i];
    bool float_in = n.input_count > 0 && (n.inputs[0].elem_type == 1 || n.inputs[0].elem_type == 0);
    for (const auto& op : ep->ops)
      if (op == n.op_type && std::strcmp(n.domain, "") == 0 && float_in) take[i] = 1;
  }
  return nullptr;
}

MrtStatus* ep_create_kernel(MrtEp* base, const MrtEpNode* node, void** kernel) {
  auto* ep = reinterpret_cast<FakeEp*>(base);
  if (ep->fail == "create_kernel") return error(std::string("cannot prepare ") + node->op_type);
  *kernel = new FakeKernel{node->op_type};
  return nullptr;
}

void run(const FakeKernel& k, MrtEpKernelContext* ctx) {
  MrtEpTensor a{}, b{}, out{};
  if (!g_api->KernelContextGetInput(ctx, 0, &a)) throw std::runtime_error("missing input 0");
  if (a.elem_type != 1) throw std::runtime_error("only float tensors");
  size_t n = a.data_bytes / sizeof(float);
  if (k.op == "Add") {
    if (!g_api->KernelContextGetInput(ctx, 1, &b)) throw std::runtime_error("missing input 1");
    if (b.data_bytes != a.data_bytes) throw std::runtime_error("Add without broadcasting only");
  }
  if (MrtStatus* st = g_api->KernelContextAllocateOutput(ctx, 0, 1, a.dims, a.rank, &out)) {
    (void)st;
    throw std::runtime_error("output allocation failed");
  }
  const float* x = static_cast<const float*>(a.data);
  float* y = static_cast<float*>(out.data);
  for (size_t i = 0; i < n; ++i)
    y[i] = k.op == "Relu" ? (x[i] > 0.f ? x[i] : 0.f) : x[i] + static_cast<const float*>(b.data)[i];
}

MrtStatus* ep_compute(MrtEp* base, void* kernel, MrtEpKernelContext* ctx) {
  auto* ep = reinterpret_cast<FakeEp*>(base);
  try {
    if (ep->fail == "compute") throw std::runtime_error("simulated kernel crash in " + ep->name);
    const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(ep->sleep_ms);
    while (std::chrono::steady_clock::now() < until) {
      if (!g_state.alive) {
        std::fputs("fake EP: a kernel is running while exit() destroys the library's static state\n", stderr);
        std::fflush(stderr);
        std::_Exit(70);
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    run(*static_cast<FakeKernel*>(kernel), ctx);
    return nullptr;
  } catch (const std::exception& e) {
    return error(e.what());
  }
}

void ep_release_kernel(MrtEp*, void* kernel) { delete static_cast<FakeKernel*>(kernel); }

const char* f_name(const MrtEpFactory* f) { return reinterpret_cast<const FakeFactory*>(f)->name.c_str(); }
const char* f_vendor(const MrtEpFactory*) { return "mosaicrt tests"; }
const char* f_version(const MrtEpFactory*) { return "9.9.9"; }

size_t f_own(MrtEpFactory* base, const MrtHardwareDevice** devices) {
  auto* f = reinterpret_cast<FakeFactory*>(base);
  if (f->kind == "cpu" || f->kind == "nvgpu") return 0;
  *devices = &f->own;
  return 1;
}

MrtStatus* f_supported(MrtEpFactory* base, const MrtHardwareDevice* const* devices, size_t n, uint8_t* supported) {
  auto* f = reinterpret_cast<FakeFactory*>(base);
  for (size_t i = 0; i < n; ++i) {
    if (f->kind == "cpu") supported[i] = devices[i]->type == MRT_DEVICE_CPU;
    else if (f->kind == "nvgpu") supported[i] = devices[i]->type == MRT_DEVICE_GPU && devices[i]->vendor_id == 0x10de;
    else supported[i] = devices[i] == &f->own;
  }
  return nullptr;
}

MrtStatus* f_create_ep(MrtEpFactory* base, const MrtHardwareDevice* const*, size_t n_devices, const char* const* keys,
                       const char* const* values, size_t n_options, MrtEp** out) {
  auto* f = reinterpret_cast<FakeFactory*>(base);
  if (n_devices == 0) return error("no device given");
  auto ep = std::make_unique<FakeEp>();
  ep->name = f->name;
  for (size_t i = 0; i < n_options; ++i) {
    std::string k = keys[i], v = values[i];
    if (k == "ops") ep->ops = split(v, ',');
    else if (k == "fail") ep->fail = v;
    else if (k == "sleep_ms") ep->sleep_ms = std::atoi(v.c_str());
    else return g_api->CreateStatus(MRT_INVALID_ARGUMENT, ("unknown provider option '" + k + "'").c_str());
  }
  if (ep->fail == "create_ep") return error("create_ep failure requested by the test");
  ep->base = MrtEp{MRT_EP_ABI_VERSION, ep_name, ep_capability, ep_create_kernel, ep_compute, ep_release_kernel};
  *out = &ep.release()->base;
  return nullptr;
}

void f_release_ep(MrtEpFactory*, MrtEp* ep) { delete reinterpret_cast<FakeEp*>(ep); }

}  // namespace

extern "C" {

MRT_EP_EXPORT uint32_t MrtEpGetAbiVersion(void) { return FAKE_ABI_VERSION; }

#ifndef FAKE_NO_ENTRY
MRT_EP_EXPORT MrtStatus* MrtEpCreateFactories(const MrtEpApi* api, const char* registration_name,
                                              MrtEpFactory** factories, size_t capacity, size_t* count) {
  g_api = api;
  std::string reg = registration_name ? registration_name : "";
  size_t colon = reg.find(':');
  std::string tag = colon == std::string::npos ? reg : reg.substr(0, colon);
  std::vector<std::string> kinds = split(colon == std::string::npos ? "npu" : reg.substr(colon + 1), ',');
  if (kinds.size() > capacity) return api->CreateStatus(MRT_INVALID_ARGUMENT, "too many kinds");
  size_t made = 0;
  for (const auto& kind : kinds) {
    if (kind != "cpu" && kind != "gpu" && kind != "npu" && kind != "nvgpu") {
      for (size_t i = 0; i < made; ++i) delete reinterpret_cast<FakeFactory*>(factories[i]);
      return api->CreateStatus(MRT_INVALID_ARGUMENT, ("unknown fake device kind '" + kind + "'").c_str());
    }
    auto* f = new FakeFactory();
    std::string cap = kind;
    cap[0] = static_cast<char>(cap[0] - 'a' + 'A');
    f->name = "Fake" + cap + "_" + tag;
    f->kind = kind;
    f->own_name = "Simulated " + kind + " (" + tag + ")";
    f->own_vendor = "Fakevendor";
    f->own.type = kind == "gpu" ? MRT_DEVICE_GPU : kind == "npu" ? MRT_DEVICE_NPU : MRT_DEVICE_CPU;
    f->own.vendor_id = 0xFA4E;
    f->own.device_id = kind == "gpu" ? 1 : 2;
    f->own.vendor = f->own_vendor.c_str();
    f->own.name = f->own_name.c_str();
    f->base = MrtEpFactory{FAKE_FACTORY_ABI, f_name, f_vendor, f_version, f_own, f_supported, f_create_ep,
                           f_release_ep};
    factories[made++] = &f->base;
  }
  *count = made;
  return nullptr;
}
#endif

MRT_EP_EXPORT void MrtEpReleaseFactory(MrtEpFactory* factory) { delete reinterpret_cast<FakeFactory*>(factory); }

}  // extern "C"
