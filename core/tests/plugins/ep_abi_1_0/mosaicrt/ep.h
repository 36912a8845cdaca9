/*
 * mosaicrt plugin execution-provider (EP) ABI.
 *
 * A plugin EP is a shared library that exports exactly these three C functions:
 *
 *   uint32_t   MrtEpGetAbiVersion(void);
 *       The EP ABI the plugin was compiled against: MRT_EP_ABI_VERSION of its copy of this
 *       header. The core calls it first and refuses the library (naming both versions)
 *       unless the majors are equal and the plugin's minor is not newer than the core's.
 *   MrtStatus* MrtEpCreateFactories(const MrtEpApi* api, const char* registration_name,
 *                                   MrtEpFactory** factories, size_t capacity, size_t* count);
 *       Fill `factories` (at most `capacity`) with the EP factories the library provides.
 *       `api` stays valid for the life of the process; keep it to create statuses and to
 *       read kernel contexts.
 *   void       MrtEpReleaseFactory(MrtEpFactory* factory);
 *
 * Everything else in a plugin library should be hidden (the CMake helper of eps/ uses a
 * version script / visibility flags and the pipeline's wheel check verifies the exports).
 *
 * Object model
 *   factory  -- one per EP kind (name, vendor, version); says which hardware devices it
 *               supports and creates EP instances bound to some of them.
 *   EP       -- one per session: claims graph nodes (GetCapability) and creates one kernel
 *               per claimed node (CreateKernel); the core calls Compute on each run.
 *   kernel   -- an opaque pointer owned by the EP.
 *
 * Every struct a plugin implements starts with `abi_version`, set to MRT_EP_ABI_VERSION
 * when the plugin fills it; the core checks it before reading any other field.
 *
 * Tensors handed to kernels live in host memory. An EP for a device copies inputs in and
 * outputs out (and may keep constant inputs -- weights -- on the device across runs).
 *
 * Errors: plugin functions return NULL for success or a status made with
 * api->CreateStatus(code, message). A C++ exception must never cross this boundary.
 *
 * Compatibility rules: MRT_EP_ABI_VERSION_MINOR grows when fields are appended to the end of
 * core-provided structs or function pointers are appended to MrtEpApi; MAJOR changes when a
 * layout changes. Plugins never depend on one core distribution: any core with a
 * compatible EP ABI loads them.
 */
#ifndef MOSAICRT_EP_H_
#define MOSAICRT_EP_H_

#include "mosaicrt/mosaicrt.h"

#ifdef __cplusplus
extern "C" {
#endif

#define MRT_EP_ABI_VERSION_MAJOR 1
#define MRT_EP_ABI_VERSION_MINOR 0
#define MRT_EP_ABI_VERSION ((uint32_t)((MRT_EP_ABI_VERSION_MAJOR << 16) | MRT_EP_ABI_VERSION_MINOR))

#if defined(_WIN32)
#define MRT_EP_EXPORT __declspec(dllexport)
#else
#define MRT_EP_EXPORT __attribute__((visibility("default")))
#endif

/* ---- hardware devices ---- */
typedef enum MrtDeviceType { MRT_DEVICE_CPU = 0, MRT_DEVICE_GPU = 1, MRT_DEVICE_NPU = 2 } MrtDeviceType;

/* A physical (or, for tests, simulated) device. Strings are owned by whoever made the struct
 * (the core for discovered devices, the factory for devices from GetOwnDevices). */
typedef struct MrtHardwareDevice {
  int32_t type;       /* MrtDeviceType */
  uint32_t vendor_id; /* PCI vendor id (0x10de NVIDIA, 0x8086 Intel, ...); CPUs: 0 unless known */
  uint32_t device_id; /* PCI device id; CPUs: 0 */
  const char* vendor; /* "GenuineIntel", "NVIDIA", ... */
  const char* name;   /* model name */
  size_t metadata_count;
  const char* const* metadata_keys; /* e.g. "isa" -> "avx2,avx512f", "memory_mb" -> "81920" */
  const char* const* metadata_values;
} MrtHardwareDevice;

/* ---- graph view (core-owned, read-only, valid during the call it is passed to) ---- */
typedef struct MrtEpTensor {
  int32_t elem_type; /* ONNX TensorProto.DataType */
  size_t rank;
  const int64_t* dims;
  void* data; /* host memory; constant tensors must not be written */
  size_t data_bytes;
} MrtEpTensor;

typedef struct MrtEpValue {
  const char* name;                  /* "" for an omitted optional input/output */
  int32_t elem_type;                 /* 0 when unknown */
  int64_t rank;                      /* -1 when unknown */
  const int64_t* dims;               /* rank entries; -1 for a dynamic/symbolic dimension */
  const MrtEpTensor* constant_value; /* non-NULL for initializers (their value never changes) */
} MrtEpValue;

/* AttributeProto.AttributeType codes. */
enum { MRT_ATTR_FLOAT = 1, MRT_ATTR_INT = 2, MRT_ATTR_STRING = 3, MRT_ATTR_TENSOR = 4, MRT_ATTR_FLOATS = 6,
       MRT_ATTR_INTS = 7, MRT_ATTR_STRINGS = 8 };

typedef struct MrtEpAttribute {
  const char* name;
  int32_t type;
  float f;
  int64_t i;
  const char* s; /* STRING: bytes, s_len long (also NUL terminated) */
  size_t s_len;
  size_t count; /* FLOATS/INTS/STRINGS element count */
  const float* floats;
  const int64_t* ints;
  const char* const* strings;
  const MrtEpTensor* t; /* TENSOR */
} MrtEpAttribute;

typedef struct MrtEpNode {
  const char* name;
  const char* op_type;
  const char* domain; /* "" = ai.onnx */
  int64_t opset;      /* opset version of the node's domain */
  size_t input_count;
  const MrtEpValue* inputs;
  size_t output_count;
  const MrtEpValue* outputs;
  size_t attribute_count;
  const MrtEpAttribute* attributes;
} MrtEpNode;

typedef struct MrtEpGraph {
  size_t node_count;
  const MrtEpNode* nodes; /* topological order; only nodes no earlier EP claimed */
} MrtEpGraph;

/* ---- services the core offers plugins ---- */
typedef struct MrtEpKernelContext MrtEpKernelContext;

typedef struct MrtEpApi {
  uint32_t abi_version; /* the core's MRT_EP_ABI_VERSION */
  MrtStatus* (*CreateStatus)(MrtErrorCode code, const char* message);
  /* Kernel context, valid during Compute only. */
  size_t (*KernelContextGetInputCount)(const MrtEpKernelContext* ctx);
  size_t (*KernelContextGetOutputCount)(const MrtEpKernelContext* ctx);
  /* Returns 0 and leaves *out untouched when input `index` is omitted. */
  int (*KernelContextGetInput)(const MrtEpKernelContext* ctx, size_t index, MrtEpTensor* out);
  /* Allocates output `index` (host memory, uninitialized). Returns NULL on success. */
  MrtStatus* (*KernelContextAllocateOutput)(MrtEpKernelContext* ctx, size_t index, int32_t elem_type,
                                            const int64_t* dims, size_t rank, MrtEpTensor* out);
  /* Threads the session allows this run (the session's intra-op thread count). */
  int32_t (*KernelContextGetThreadCount)(const MrtEpKernelContext* ctx);
} MrtEpApi;

/* ---- what a plugin implements ---- */
typedef struct MrtEp {
  uint32_t abi_version;
  const char* (*GetName)(const struct MrtEp* ep);
  /* Set take[i] = 1 for every node of `graph` this EP runs (take has graph->node_count zeros). */
  MrtStatus* (*GetCapability)(struct MrtEp* ep, const MrtEpGraph* graph, uint8_t* take);
  /* Prepare a claimed node. A failure here makes the node fall back to the CPU EP. */
  MrtStatus* (*CreateKernel)(struct MrtEp* ep, const MrtEpNode* node, void** kernel);
  /* Run a kernel: read inputs, allocate and write outputs through the context. May be called
   * concurrently for different runs of one session. */
  MrtStatus* (*Compute)(struct MrtEp* ep, void* kernel, MrtEpKernelContext* ctx);
  void (*ReleaseKernel)(struct MrtEp* ep, void* kernel);
} MrtEp;

typedef struct MrtEpFactory {
  uint32_t abi_version;
  const char* (*GetName)(const struct MrtEpFactory* factory); /* e.g. "DnnlExecutionProvider" */
  const char* (*GetVendor)(const struct MrtEpFactory* factory);
  const char* (*GetVersion)(const struct MrtEpFactory* factory); /* the EP wheel's version */
  /* Devices only this factory can see (behind a vendor driver; test devices). May be NULL.
   * Returns the count and points *devices at factory-owned structs. */
  size_t (*GetOwnDevices)(struct MrtEpFactory* factory, const MrtHardwareDevice** devices);
  /* For each of the n devices (discovered ones and the factory's own), set supported[i] = 1
   * when the factory can create an EP for it. */
  MrtStatus* (*GetSupportedDevices)(struct MrtEpFactory* factory, const MrtHardwareDevice* const* devices, size_t n,
                                    uint8_t* supported);
  /* Create an EP bound to `devices` (a subset of the supported ones) with provider options. */
  MrtStatus* (*CreateEp)(struct MrtEpFactory* factory, const MrtHardwareDevice* const* devices, size_t n_devices,
                         const char* const* option_keys, const char* const* option_values, size_t n_options,
                         MrtEp** ep);
  void (*ReleaseEp)(struct MrtEpFactory* factory, MrtEp* ep);
} MrtEpFactory;

/* Entry points a plugin library exports (see the top of this file). */
typedef uint32_t (*MrtEpGetAbiVersionFn)(void);
typedef MrtStatus* (*MrtEpCreateFactoriesFn)(const MrtEpApi* api, const char* registration_name,
                                             MrtEpFactory** factories, size_t capacity, size_t* count);
typedef void (*MrtEpReleaseFactoryFn)(MrtEpFactory* factory);

#ifdef __cplusplus
}
#endif
#endif /* MOSAICRT_EP_H_ */
