// The CUDA EP's plugin entry points (mosaicrt/ep.h): factory, device support, EP instances,
// kernels. Every function here is an ABI boundary: no C++ exception leaves it.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <new>
#include <string>

#include "cuda_common.h"

#ifndef MRT_EP_CUDA_VERSION_STRING
#define MRT_EP_CUDA_VERSION_STRING "0.0.0"
#endif

namespace mrt_cuda {
namespace {

constexpr const char* kEpName = "CUDAExecutionProvider";
constexpr uint32_t kNvidiaVendorId = 0x10de;
constexpr int kMinComputeCapability = 75;  // the oldest SASS/PTX the library carries (sm_75)

template <class F>
MrtStatus* guarded(const MrtEpApi* api, F&& body) noexcept {
  try {
    body();
    return nullptr;
  } catch (const Error& e) {
    if (e.core_status) return e.core_status;
    return api->CreateStatus(e.code, e.message.c_str());
  } catch (const std::bad_alloc&) {
    return api->CreateStatus(MRT_OUT_OF_MEMORY, "CUDA EP: out of host memory");
  } catch (const std::exception& e) {
    return api->CreateStatus(MRT_INTERNAL, (std::string("CUDA EP: unexpected error: ") + e.what()).c_str());
  } catch (...) {
    return api->CreateStatus(MRT_INTERNAL, "CUDA EP: unexpected error");
  }
}

bool verbose() {
  const char* v = std::getenv("MOSAICRT_CUDA_EP_VERBOSE");
  return v && *v && std::strcmp(v, "0") != 0;
}

// Number of CUDA devices, or -1 with `why` set when the runtime/driver cannot be used.
int cuda_device_count(std::string* why) {
  int n = 0;
  const cudaError_t err = cudaGetDeviceCount(&n);
  if (err != cudaSuccess) {
    (void)cudaGetLastError();
    if (why) {
      *why = std::string("no usable NVIDIA GPU/driver: cudaGetDeviceCount failed with ") + cudaGetErrorName(err) +
             " (" + cudaGetErrorString(err) + ")";
      if (err == cudaErrorInsufficientDriver)
        *why += "; the NVIDIA driver (libcuda.so.1) is missing or older than this CUDA " +
                std::to_string(CUDART_VERSION / 1000) + " build needs";
    }
    return -1;
  }
  if (n == 0 && why) *why = "no usable NVIDIA GPU/driver: the CUDA runtime sees no device";
  return n;
}

const char* metadata(const MrtHardwareDevice& d, const char* key) {
  for (size_t i = 0; i < d.metadata_count; ++i)
    if (d.metadata_keys[i] && std::strcmp(d.metadata_keys[i], key) == 0) return d.metadata_values[i];
  return nullptr;
}

bool parse_int(const char* s, int* out) {
  if (!s || !*s) return false;
  char* end = nullptr;
  const long v = std::strtol(s, &end, 10);
  if (*end != '\0' || v < 0 || v > 1 << 20) return false;
  *out = static_cast<int>(v);
  return true;
}

// The CUDA ordinal of a discovered device: by PCI bus id (robust to CUDA_VISIBLE_DEVICES and
// CUDA's fastest-first ordering), else by the core's "cuda_device_ordinal". -1 when the device
// is not an NVIDIA GPU this process can use.
int cuda_ordinal(const MrtHardwareDevice& d, int count, std::string* why) {
  if (d.type != MRT_DEVICE_GPU || d.vendor_id != kNvidiaVendorId) {
    if (why) *why = "not an NVIDIA GPU";
    return -1;
  }
  int ord = -1;
  if (const char* bus = metadata(d, "pci_bus_id")) {
    if (cudaDeviceGetByPCIBusId(&ord, bus) != cudaSuccess) {
      (void)cudaGetLastError();
      if (why) *why = std::string("GPU ") + bus + " is not visible to the CUDA runtime (CUDA_VISIBLE_DEVICES?)";
      return -1;
    }
  } else if (!parse_int(metadata(d, "cuda_device_ordinal"), &ord)) {
    ord = 0;
  }
  if (ord < 0 || ord >= count) {
    if (why) *why = "CUDA device ordinal " + std::to_string(ord) + " is out of range";
    return -1;
  }
  int major = 0, minor = 0;
  cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, ord);
  cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, ord);
  (void)cudaGetLastError();
  if (major * 10 + minor < kMinComputeCapability) {
    if (why)
      *why = "compute capability " + std::to_string(major) + "." + std::to_string(minor) +
             " is below the 7.5 this build supports";
    return -1;
  }
  return ord;
}

// ---- EP ----
struct CudaEp {
  MrtEp base;  // first member: the core sees this
  const MrtEpApi* api;
  std::unique_ptr<CudaState> state;
};

CudaEp* as_ep(MrtEp* ep) { return reinterpret_cast<CudaEp*>(ep); }

const char* ep_get_name(const MrtEp*) { return kEpName; }

MrtStatus* ep_get_capability(MrtEp* ep, const MrtEpGraph* graph, uint8_t* take) {
  CudaEp* self = as_ep(ep);
  return guarded(self->api, [&] {
    if (!graph || !take) fail(MRT_INVALID_ARGUMENT, "CUDA EP: GetCapability got a null graph or take array");
    const bool talk = verbose();
    for (size_t i = 0; i < graph->node_count; ++i) {
      const MrtEpNode& n = graph->nodes[i];
      const std::string why = check_node(n);
      take[i] = why.empty() ? 1 : 0;
      if (talk && !why.empty())
        std::fprintf(stderr, "[mosaicrt CUDA EP] not taking %s (%s): %s\n", n.name ? n.name : "", n.op_type,
                     why.c_str());
    }
  });
}

MrtStatus* ep_create_kernel(MrtEp* ep, const MrtEpNode* node, void** kernel) {
  CudaEp* self = as_ep(ep);
  return guarded(self->api, [&] {
    if (!node || !kernel) fail(MRT_INVALID_ARGUMENT, "CUDA EP: CreateKernel got a null node or out pointer");
    std::lock_guard<std::mutex> lock(self->state->mu);
    MRT_CUDA_CHECK(cudaSetDevice(self->state->device));
    *kernel = create_kernel(*node, *self->state).release();
  });
}

MrtStatus* ep_compute(MrtEp* ep, void* kernel, MrtEpKernelContext* ctx) {
  CudaEp* self = as_ep(ep);
  return guarded(self->api, [&] {
    if (!kernel || !ctx) fail(MRT_INVALID_ARGUMENT, "CUDA EP: Compute got a null kernel or context");
    std::lock_guard<std::mutex> lock(self->state->mu);
    MRT_CUDA_CHECK(cudaSetDevice(self->state->device));
    Kernel* k = static_cast<Kernel*>(kernel);
    RunContext rc(self->api, ctx, *self->state, *k);
    k->compute(rc);
  });
}

void ep_release_kernel(MrtEp* ep, void* kernel) {
  try {
    if (!kernel) return;
    CudaEp* self = as_ep(ep);
    std::lock_guard<std::mutex> lock(self->state->mu);
    cudaSetDevice(self->state->device);
    delete static_cast<Kernel*>(kernel);
  } catch (...) {
  }
}

// ---- EP ABI 1.1 device memory: values stay on the GPU between CUDA nodes ----
MrtStatus* ep_device_allocate(MrtEp* ep, size_t bytes, void** ptr) {
  CudaEp* self = as_ep(ep);
  return guarded(self->api, [&] {
    MRT_CUDA_CHECK(cudaSetDevice(self->state->device));
    *ptr = bytes ? self->state->pool->acquire(bytes) : nullptr;
  });
}

void ep_device_free(MrtEp* ep, void* ptr) {
  if (ptr) as_ep(ep)->state->pool->release(ptr);  // stream-ordered reuse: later work on the same stream
}

MrtStatus* ep_copy(MrtEp* ep, void* dst, const void* src, size_t bytes, cudaMemcpyKind kind) {
  CudaEp* self = as_ep(ep);
  return guarded(self->api, [&] {
    MRT_CUDA_CHECK(cudaSetDevice(self->state->device));
    MRT_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, kind, self->state->stream));
    MRT_CUDA_CHECK(cudaStreamSynchronize(self->state->stream));  // the host side may be reused at once
  });
}

MrtStatus* ep_copy_to_device(MrtEp* ep, void* dst, const void* src, size_t bytes) {
  return ep_copy(ep, dst, src, bytes, cudaMemcpyHostToDevice);
}

MrtStatus* ep_copy_to_host(MrtEp* ep, void* dst, const void* src, size_t bytes) {
  return ep_copy(ep, dst, src, bytes, cudaMemcpyDeviceToHost);
}

MrtStatus* ep_synchronize(MrtEp* ep) {
  CudaEp* self = as_ep(ep);
  return guarded(self->api, [&] {
    MRT_CUDA_CHECK(cudaSetDevice(self->state->device));
    MRT_CUDA_CHECK(cudaStreamSynchronize(self->state->stream));
  });
}

// ---- factory ----
struct CudaFactory {
  MrtEpFactory base;  // first member: the core sees this
  const MrtEpApi* api;
  std::string registration_name;
};

CudaFactory* as_factory(MrtEpFactory* f) { return reinterpret_cast<CudaFactory*>(f); }

const char* factory_get_name(const MrtEpFactory*) { return kEpName; }
const char* factory_get_vendor(const MrtEpFactory*) { return "mosaicrt"; }
const char* factory_get_version(const MrtEpFactory*) { return MRT_EP_CUDA_VERSION_STRING; }

MrtStatus* factory_get_supported_devices(MrtEpFactory* factory, const MrtHardwareDevice* const* devices, size_t n,
                                         uint8_t* supported) {
  CudaFactory* self = as_factory(factory);
  return guarded(self->api, [&] {
    if (n == 0) return;
    if (!devices || !supported) fail(MRT_INVALID_ARGUMENT, "CUDA EP: GetSupportedDevices got null arrays");
    std::memset(supported, 0, n);
    bool any_nvidia = false;
    for (size_t i = 0; i < n; ++i)
      if (devices[i] && devices[i]->type == MRT_DEVICE_GPU && devices[i]->vendor_id == kNvidiaVendorId)
        any_nvidia = true;
    if (!any_nvidia) return;  // do not even initialize the CUDA runtime
    std::string why;
    const int count = cuda_device_count(&why);
    if (count <= 0) {
      if (verbose()) std::fprintf(stderr, "[mosaicrt CUDA EP] %s\n", why.c_str());
      return;
    }
    for (size_t i = 0; i < n; ++i) {
      if (!devices[i]) continue;
      why.clear();
      supported[i] = cuda_ordinal(*devices[i], count, &why) >= 0 ? 1 : 0;
      if (!supported[i] && verbose() && devices[i]->vendor_id == kNvidiaVendorId)
        std::fprintf(stderr, "[mosaicrt CUDA EP] %s: %s\n", devices[i]->name ? devices[i]->name : "GPU",
                     why.c_str());
    }
  });
}

MrtStatus* factory_create_ep(MrtEpFactory* factory, const MrtHardwareDevice* const* devices, size_t n_devices,
                             const char* const* keys, const char* const* values, size_t n_options, MrtEp** out) {
  CudaFactory* self = as_factory(factory);
  return guarded(self->api, [&] {
    if (!out) fail(MRT_INVALID_ARGUMENT, "CUDA EP: CreateEp got a null out pointer");
    int device = -1;
    bool tf32 = false;
    bool device_memory = true;
    for (size_t i = 0; i < n_options; ++i) {
      const std::string key = keys && keys[i] ? keys[i] : "";
      const char* value = values && values[i] ? values[i] : "";
      if (key == "device_id") {
        if (!parse_int(value, &device))
          fail(MRT_INVALID_ARGUMENT, std::string("CUDA EP: option device_id must be a CUDA device ordinal, got '") +
                                         value + "'");
      } else if (key == "use_tf32") {
        tf32 = std::strcmp(value, "1") == 0 || std::strcmp(value, "true") == 0;
      } else if (key == "device_memory") {  // 0: every CUDA node copies in and out (EP ABI 1.0 behaviour)
        device_memory = !(std::strcmp(value, "0") == 0 || std::strcmp(value, "false") == 0);
      } else {
        fail(MRT_INVALID_ARGUMENT, "CUDA EP: unknown provider option '" + key +
                                       "' (known options: device_id, use_tf32, device_memory)");
      }
    }
    std::string why;
    const int count = cuda_device_count(&why);
    if (count <= 0) fail(MRT_EP_ERROR, "CUDAExecutionProvider cannot be created: " + why);
    if (device < 0) {
      for (size_t i = 0; i < n_devices && device < 0; ++i)
        if (devices && devices[i]) device = cuda_ordinal(*devices[i], count, &why);
      if (device < 0) {
        if (n_devices > 0) fail(MRT_EP_ERROR, "CUDAExecutionProvider cannot use the requested device: " + why);
        device = 0;
      }
    }
    if (device >= count)
      fail(MRT_INVALID_ARGUMENT, "CUDA EP: device_id " + std::to_string(device) + " is out of range (" +
                                     std::to_string(count) + " CUDA device(s) visible)");
    auto ep = std::make_unique<CudaEp>();
    ep->base.abi_version = MRT_EP_ABI_VERSION;
    ep->base.GetName = ep_get_name;
    ep->base.GetCapability = ep_get_capability;
    ep->base.CreateKernel = ep_create_kernel;
    ep->base.Compute = ep_compute;
    ep->base.ReleaseKernel = ep_release_kernel;
    ep->api = self->api;
    ep->state = std::make_unique<CudaState>(device, tf32);
    if (device_memory) {
      ep->base.DeviceAllocate = ep_device_allocate;
      ep->base.DeviceFree = ep_device_free;
      ep->base.CopyToDevice = ep_copy_to_device;
      ep->base.CopyToHost = ep_copy_to_host;
      ep->base.Synchronize = ep_synchronize;
      ep->state->device_memory = true;
    }
    *out = &ep.release()->base;
  });
}

void factory_release_ep(MrtEpFactory*, MrtEp* ep) {
  try {
    delete as_ep(ep);
  } catch (...) {
  }
}

}  // namespace
}  // namespace mrt_cuda

extern "C" {

MRT_EP_EXPORT uint32_t MrtEpGetAbiVersion(void) { return MRT_EP_ABI_VERSION; }

MRT_EP_EXPORT MrtStatus* MrtEpCreateFactories(const MrtEpApi* api, const char* registration_name,
                                              MrtEpFactory** factories, size_t capacity, size_t* count) {
  using namespace mrt_cuda;
  if (!api || !api->CreateStatus) return nullptr;  // nothing to report errors with; the core never does this
  if ((api->abi_version >> 16) != MRT_EP_ABI_VERSION_MAJOR)
    return api->CreateStatus(MRT_EP_ERROR, ("CUDA EP: incompatible EP ABI (plugin: " +
                                            std::to_string(MRT_EP_ABI_VERSION_MAJOR) + "." +
                                            std::to_string(MRT_EP_ABI_VERSION_MINOR) + ", core: " +
                                            std::to_string(api->abi_version >> 16) + "." +
                                            std::to_string(api->abi_version & 0xffff) + ")")
                                               .c_str());
  return guarded(api, [&] {
    if (!factories || !count) fail(MRT_INVALID_ARGUMENT, "CUDA EP: MrtEpCreateFactories got null out pointers");
    *count = 0;
    if (capacity < 1) fail(MRT_INVALID_ARGUMENT, "CUDA EP: no room for its factory (capacity 0)");
    auto f = std::make_unique<CudaFactory>();
    f->base.abi_version = MRT_EP_ABI_VERSION;
    f->base.GetName = factory_get_name;
    f->base.GetVendor = factory_get_vendor;
    f->base.GetVersion = factory_get_version;
    f->base.GetOwnDevices = nullptr;
    f->base.GetSupportedDevices = factory_get_supported_devices;
    f->base.CreateEp = factory_create_ep;
    f->base.ReleaseEp = factory_release_ep;
    f->api = api;
    f->registration_name = registration_name ? registration_name : "";
    factories[0] = &f.release()->base;
    *count = 1;
  });
}

MRT_EP_EXPORT void MrtEpReleaseFactory(MrtEpFactory* factory) {
  try {
    delete mrt_cuda::as_factory(factory);
  } catch (...) {
  }
}

}  // extern "C"
