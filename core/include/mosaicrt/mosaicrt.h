/*
 * mosaicrt C ABI — sessions, tensors and errors.
 *
 * Conventions
 *  - Every handle is opaque. Functions that can fail return MrtStatus*: NULL means
 *    success; a non-NULL status owns an error code and message and must be released
 *    with MrtReleaseStatus.
 *  - "out" parameters are written only on success. Objects returned through an out
 *    parameter are owned by the caller and released with the matching MrtRelease*.
 *  - Strings returned by const char* getters stay valid as long as the object they
 *    were read from.
 *  - The ABI is versioned: MRT_ABI_VERSION_MAJOR changes on incompatible changes,
 *    MINOR on additions. MrtGetAbiVersion reports the library's version so callers
 *    (the Python package, plugin EPs) can refuse a mismatch with a clear message.
 *  - The plugin-EP half of the ABI lives in mosaicrt/ep.h (added in 1.1, with the EP
 *    registration, device and provider-selection functions below).
 */
#ifndef MOSAICRT_MOSAICRT_H_
#define MOSAICRT_MOSAICRT_H_

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(_WIN32)
#if defined(MOSAICRT_BUILDING)
#define MRT_API __declspec(dllexport)
#else
#define MRT_API __declspec(dllimport)
#endif
#else
#define MRT_API __attribute__((visibility("default")))
#endif

#define MRT_ABI_VERSION_MAJOR 1
#define MRT_ABI_VERSION_MINOR 5

typedef enum MrtErrorCode {
  MRT_OK = 0,
  MRT_INVALID_ARGUMENT = 1, /* bad input from the caller (names, dtype, shape, values) */
  MRT_INVALID_MODEL = 2,    /* the model bytes are malformed or violate ONNX rules */
  MRT_NOT_IMPLEMENTED = 3,  /* valid ONNX the runtime does not support (op, type, attribute) */
  MRT_NO_SUCH_FILE = 4,     /* model or external data file missing/unreadable */
  MRT_RUNTIME_ERROR = 5,    /* a kernel failed while running */
  MRT_OUT_OF_MEMORY = 6,
  MRT_INTERNAL = 7,         /* a bug in mosaicrt */
  MRT_EP_ERROR = 8,         /* (1.1) an EP library cannot be loaded, is incompatible, or is misused */
  MRT_CANCELLED = 9,        /* (1.2) the run was stopped by MrtRunOptionsSetTerminate */
} MrtErrorCode;

typedef struct MrtStatus MrtStatus;
typedef struct MrtSessionOptions MrtSessionOptions;
typedef struct MrtSession MrtSession;
typedef struct MrtValue MrtValue;

/* Element types use ONNX TensorProto.DataType codes (1 = float, 7 = int64, 9 = bool, ...).
 * The narrow types (17-26: float8, uint4/int4, float4e2m1, float8e8m0, uint2/int2) take one
 * byte per element in tensor data, the 4-bit and 2-bit codes in the low bits (ml_dtypes'
 * layout), not ONNX's packed serialization. */

/* ---- library ---- */
/* (major << 16) | minor */
MRT_API uint32_t MrtGetAbiVersion(void);
MRT_API const char* MrtGetVersionString(void);
/* Comma-separated build facts, e.g. "arch=x86_64,simd=avx2;avx512f,threads=1". */
MRT_API const char* MrtGetBuildInfo(void);

/* Operators the built-in CPU EP implements, comma-separated "domain::OpType" ("" domain = ai.onnx). */
MRT_API const char* MrtGetCpuOperators(void);

/* ---- status ---- */
MRT_API MrtErrorCode MrtStatusGetCode(const MrtStatus* status);
MRT_API const char* MrtStatusGetMessage(const MrtStatus* status);
MRT_API void MrtReleaseStatus(MrtStatus* status);
/* (1.1) For plugin EPs and selection delegates: a status to return from a callback. */
MRT_API MrtStatus* MrtCreateStatus(MrtErrorCode code, const char* message);

/* ---- session options ---- */
MRT_API MrtStatus* MrtCreateSessionOptions(MrtSessionOptions** out);
MRT_API void MrtReleaseSessionOptions(MrtSessionOptions* options);
/* 0 = one thread per core. */
MRT_API MrtStatus* MrtSessionOptionsSetIntraOpNumThreads(MrtSessionOptions* options, int32_t threads);
/* Free-form configuration entries ("session.model_dir" for external data of in-memory models, ...). */
MRT_API MrtStatus* MrtSessionOptionsSetConfigEntry(MrtSessionOptions* options, const char* key, const char* value);

/* ---- sessions ---- */
MRT_API MrtStatus* MrtCreateSession(const char* model_path, const MrtSessionOptions* options, MrtSession** out);
MRT_API MrtStatus* MrtCreateSessionFromBytes(const void* model_data, size_t model_size,
                                             const MrtSessionOptions* options, MrtSession** out);
MRT_API void MrtReleaseSession(MrtSession* session);

typedef enum MrtIoKind {
  MRT_IO_INPUT = 0,
  MRT_IO_OUTPUT = 1,
  MRT_IO_OVERRIDABLE_INITIALIZER = 2, /* (1.2) initializers that are also graph inputs (a feed may replace them) */
} MrtIoKind;

MRT_API MrtStatus* MrtSessionGetIoCount(const MrtSession* session, MrtIoKind kind, size_t* count);
/* Name, element type and rank of input/output `index`. rank is SIZE_MAX when unknown. */
MRT_API MrtStatus* MrtSessionGetIoInfo(const MrtSession* session, MrtIoKind kind, size_t index,
                                       const char** name, int32_t* elem_type, size_t* rank);
/* Dimension `dim`: value >= 0 when fixed, -1 when dynamic; symbol is the dim_param or "" . */
MRT_API MrtStatus* MrtSessionGetIoDim(const MrtSession* session, MrtIoKind kind, size_t index, size_t dim,
                                      int64_t* value, const char** symbol);

/*
 * Run the model. input_names/inputs have n_inputs entries; output_names has n_outputs
 * entries (n_outputs == 0 with output_names == NULL means "all outputs in graph order";
 * then `outputs` must have room for MrtSessionGetIoCount(OUTPUT) entries).
 * Safe to call concurrently on one session.
 */
MRT_API MrtStatus* MrtRun(MrtSession* session, const char* const* input_names, const MrtValue* const* inputs,
                          size_t n_inputs, const char* const* output_names, size_t n_outputs, MrtValue** outputs);

/* ---- execution providers, devices and provider selection (1.1) ---- */
#define MRT_CPU_EP_NAME "CPUExecutionProvider"

/* Load a plugin EP library (see mosaicrt/ep.h) under a registration name. Registering a name
 * twice is an error; so is a library whose EP ABI is incompatible (the message names both
 * versions and the file). */
MRT_API MrtStatus* MrtRegisterExecutionProviderLibrary(const char* registration_name, const char* path);
/* Refused while a live session uses one of the library's EPs. */
MRT_API MrtStatus* MrtUnregisterExecutionProviderLibrary(const char* registration_name);
/* Comma-separated names of the EPs available now, the built-in CPU EP last. The string is
 * valid until the next call on any thread. */
MRT_API const char* MrtGetAvailableProviders(void);

/* One (EP, hardware device) pair. Strings stay valid while the EP's library is registered
 * (forever for the CPU EP). `id` identifies the pair for this process. */
typedef struct MrtEpDeviceInfo {
  uint64_t id;
  const char* ep_name;
  const char* ep_vendor;
  const char* ep_version;
  const char* library_path; /* "" for the built-in CPU EP */
  int32_t device_type;      /* MrtDeviceType: 0 CPU, 1 GPU, 2 NPU */
  uint32_t vendor_id;
  uint32_t device_id;
  const char* device_vendor;
  const char* device_name;
  size_t metadata_count;
  const char* const* metadata_keys;
  const char* const* metadata_values;
} MrtEpDeviceInfo;

/* Writes up to `capacity` pairs and sets *count to the total number available. */
MRT_API MrtStatus* MrtGetEpDevices(MrtEpDeviceInfo* devices, size_t capacity, size_t* count);

typedef enum MrtEpSelectionPolicy {
  MRT_EP_POLICY_DEFAULT = 0,           /* = PREFER_CPU */
  MRT_EP_POLICY_PREFER_CPU = 1,
  MRT_EP_POLICY_PREFER_NPU = 2,
  MRT_EP_POLICY_PREFER_GPU = 3,
  MRT_EP_POLICY_MAX_PERFORMANCE = 4,   /* GPU, then NPU, then CPU */
  MRT_EP_POLICY_MAX_EFFICIENCY = 5,    /* NPU first */
  MRT_EP_POLICY_MIN_OVERALL_POWER = 6, /* NPU first */
} MrtEpSelectionPolicy;

/* Use EP `ep_name` on every device it supports, with provider options. Order matters:
 * earlier EPs claim nodes first; the CPU EP always takes what nobody claimed. */
MRT_API MrtStatus* MrtSessionOptionsAppendExecutionProvider(MrtSessionOptions* options, const char* ep_name,
                                                            const char* const* option_keys,
                                                            const char* const* option_values, size_t n_options);
/* Use the EP of the given ep-device ids (all of one EP) on exactly those devices. */
MRT_API MrtStatus* MrtSessionOptionsAppendExecutionProviderForDevices(MrtSessionOptions* options,
                                                                      const uint64_t* ep_device_ids, size_t n_devices,
                                                                      const char* const* option_keys,
                                                                      const char* const* option_values,
                                                                      size_t n_options);
/* Choose EPs by policy when no EP was appended explicitly. */
MRT_API MrtStatus* MrtSessionOptionsSetEpSelectionPolicy(MrtSessionOptions* options, MrtEpSelectionPolicy policy);

/* A custom choice: given every available pair, write the indices of the chosen ones (in
 * preference order) into `selected` (room for max_selected) and their number into
 * *n_selected. Return NULL, or a status (MrtCreateStatus) to fail session creation. */
typedef MrtStatus* (*MrtEpSelectionDelegate)(const MrtEpDeviceInfo* devices, size_t n_devices, size_t* selected,
                                             size_t max_selected, size_t* n_selected, void* state);
MRT_API MrtStatus* MrtSessionOptionsSetEpSelectionDelegate(MrtSessionOptions* options, MrtEpSelectionDelegate delegate,
                                                           void* state);

/* EPs the session uses, in claim order (the CPU EP last). */
MRT_API MrtStatus* MrtSessionGetProviderCount(const MrtSession* session, size_t* count);
MRT_API MrtStatus* MrtSessionGetProvider(const MrtSession* session, size_t index, const char** ep_name);
/* Which EP runs each node (execution order). `note` says why a node fell back to the CPU EP
 * ("" otherwise). */
MRT_API MrtStatus* MrtSessionGetNodeCount(const MrtSession* session, size_t* count);
MRT_API MrtStatus* MrtSessionGetNodeAssignment(const MrtSession* session, size_t index, const char** node_name,
                                               const char** op_type, const char** ep_name, const char** note);

/* ---- (1.2) run options, caller-described tensors, profiling, model facts ---- */
typedef struct MrtRunOptions MrtRunOptions;
MRT_API MrtStatus* MrtCreateRunOptions(MrtRunOptions** out);
MRT_API void MrtReleaseRunOptions(MrtRunOptions* run_options);
/* Any thread may call this while runs use the options: a run sees the flag before its next node and
 * fails with MRT_CANCELLED. 0 clears it. */
MRT_API MrtStatus* MrtRunOptionsSetTerminate(MrtRunOptions* run_options, int32_t terminate);

/* A dense tensor in caller memory, described in place (no value object). */
typedef struct MrtTensorRef {
  int32_t elem_type;
  size_t rank;
  const int64_t* shape;
  void* data;
  size_t data_bytes;
} MrtTensorRef;

/*
 * MrtRun with run options (may be NULL), inputs described by MrtTensorRef (borrowed for the call)
 * and, optionally, caller buffers for outputs: bound_outputs is NULL or has one entry per requested
 * output; an entry with data != NULL is a buffer that output is written into when the result has
 * its type and shape (nodes write there directly when they can); outputs[i] is then set to NULL.
 * Every other output (unbound, or not matching its buffer) receives a new value in outputs[i].
 * output_info (may be NULL) receives each output's type, shape and data (valid while the value,
 * or the bound buffer, lives).
 */
MRT_API MrtStatus* MrtRunWithOptions(MrtSession* session, const MrtRunOptions* run_options,
                                     const char* const* input_names, const MrtTensorRef* inputs, size_t n_inputs,
                                     const char* const* output_names, size_t n_outputs,
                                     const MrtTensorRef* bound_outputs, MrtValue** outputs, MrtTensorRef* output_info);

/* Replace the model's initializer `name` (same element type) with a copy of `value` (add_initializer). */
MRT_API MrtStatus* MrtSessionOptionsAddInitializer(MrtSessionOptions* options, const char* name,
                                                   const MrtValue* value);

/* Profiling: while on, each run records one Chrome-trace event ("ph":"X", µs) per executed node
 * (args: op_name, provider, input_type_shape, output_type_shape) and one per run. End returns
 * the events since start as comma-joined JSON objects; the string stays valid until the next
 * MrtSessionEndProfiling on this session. */
MRT_API MrtStatus* MrtSessionStartProfiling(MrtSession* session);
MRT_API MrtStatus* MrtSessionEndProfiling(MrtSession* session, const char** events_json);

/* Write the session's graph as it runs (after optimization) as an ONNX model file. */
MRT_API MrtStatus* MrtSessionSaveOptimizedModel(const MrtSession* session, const char* path);

/* ModelProto facts. Strings live as long as the session. */
MRT_API MrtStatus* MrtSessionGetModelMetadata(const MrtSession* session, const char** producer_name,
                                              const char** graph_name, const char** domain, const char** description,
                                              const char** graph_description, int64_t* version,
                                              size_t* n_custom_metadata);
MRT_API MrtStatus* MrtSessionGetCustomMetadata(const MrtSession* session, size_t index, const char** key,
                                               const char** value);

/* ---- (1.3) partitions and device memory (EP ABI 1.1) ---- */
/* Where node `index` (as in MrtSessionGetNodeAssignment) runs: `partition` names the group of
 * nodes its EP runs as one unit ("" on the CPU EP); `copies` lists the copies between host and
 * device memory made before that partition runs (and for graph outputs it produces), e.g.
 * "to device 'x'; to host (graph output) 'y'", "" for none. */
MRT_API MrtStatus* MrtSessionGetNodePartition(const MrtSession* session, size_t index, const char** partition,
                                              const char** copies);
/* Copies the session made since it was created: per-run values copied host -> device and
 * device -> host, device inputs read in place (produced by the same EP: no copy), and
 * initializers uploaded to a device (once per session and device EP). Any argument may be NULL. */
MRT_API MrtStatus* MrtSessionGetTransferCounts(const MrtSession* session, uint64_t* to_device, uint64_t* to_host,
                                               uint64_t* device_resident, uint64_t* constants_uploaded);

/* ---- values (dense tensors) ---- */
/* Copies `data` (data_bytes must equal numel * element size). */
MRT_API MrtStatus* MrtCreateTensor(int32_t elem_type, const int64_t* shape, size_t rank, const void* data,
                                   size_t data_bytes, MrtValue** out);
/* Wraps `data` without copying; the caller keeps it alive and unchanged until the value is released. */
MRT_API MrtStatus* MrtCreateTensorBorrowed(int32_t elem_type, const int64_t* shape, size_t rank, void* data,
                                           size_t data_bytes, MrtValue** out);
MRT_API MrtStatus* MrtValueGetInfo(const MrtValue* value, int32_t* elem_type, size_t* rank, const int64_t** shape,
                                   const void** data, size_t* data_bytes);
MRT_API void MrtReleaseValue(MrtValue* value);

/* ---- strings, sequences and optionals (1.4) ----
 * A value is a tensor, a sequence of tensors (ONNX seq(tensor(T))) or an optional without a value
 * (ONNX optional(T) holding nothing), or a map (outputs only); an optional with a value is passed as
 * the value itself.
 * MrtValueGetInfo reports string tensors with their shape and no data (read them with
 * MrtValueGetString), a sequence as elem_type MRT_ELEM_SEQUENCE and none as MRT_ELEM_NONE. The same holds
 * for MrtRunWithOptions's output_info; MrtRunWithOptions takes plain tensors as inputs, MrtRun any value. */
#define MRT_ELEM_SEQUENCE 1001
#define MRT_ELEM_NONE 1002
#define MRT_ELEM_MAP 1003
typedef enum MrtValueKind { MRT_VALUE_TENSOR = 0, MRT_VALUE_SEQUENCE = 1, MRT_VALUE_NONE = 2, MRT_VALUE_MAP = 3 } MrtValueKind;
MRT_API MrtStatus* MrtValueGetKind(const MrtValue* value, MrtValueKind* kind);
/* A string tensor of `shape`; element i is the UTF-8 bytes strings[i][0 .. lengths[i]) (copied). */
MRT_API MrtStatus* MrtCreateStringTensor(const int64_t* shape, size_t rank, const char* const* strings,
                                         const size_t* lengths, MrtValue** out);
/* Element `index` (row-major) of a string tensor; the bytes stay valid while the value lives. */
MRT_API MrtStatus* MrtValueGetString(const MrtValue* value, size_t index, const char** data, size_t* length);
/* A sequence of copies of `items` (tensors of one element type). elem_type may be 0 when count > 0. */
MRT_API MrtStatus* MrtCreateSequence(int32_t elem_type, const MrtValue* const* items, size_t count, MrtValue** out);
MRT_API MrtStatus* MrtCreateNone(MrtValue** out);
MRT_API MrtStatus* MrtValueGetSequenceInfo(const MrtValue* value, size_t* count, int32_t* elem_type);
/* A new value holding a copy of item `index`; release it with MrtReleaseValue. */
MRT_API MrtStatus* MrtValueGetSequenceItem(const MrtValue* value, size_t index, MrtValue** item);
/* A map (ZipMap's outputs are sequences of maps): new values holding copies of its 1-D keys (int64 or
 * string) and values; either pointer may be NULL. Release them with MrtReleaseValue. */
MRT_API MrtStatus* MrtValueGetMap(const MrtValue* value, MrtValue** keys, MrtValue** values);
/* The ONNX type of input/output `index`: "tensor(float)", "tensor(string)", "seq(tensor(int64))",
 * "optional(tensor(float))", ...; "?" stands for an unknown element type. Valid while the session lives. */
MRT_API MrtStatus* MrtSessionGetIoType(const MrtSession* session, MrtIoKind kind, size_t index, const char** type);

/* ---- (1.5) exiting the process ----
 * exit() destroys the static objects of the library and of the EP libraries; a run still going on another
 * thread at that moment can crash the process on its way out. Call MrtBeginProcessExit on the exiting
 * thread before exit() when other threads may be inside mosaicrt (the Python package does it from an atexit
 * hook). Runs in flight on other threads stop before their next node; the call waits up to timeout_ms for
 * them, and for session creations and releases in flight, to leave, and returns how many were still in
 * flight when it gave up (0: none). From then on, any other thread that calls MrtRun, MrtRunWithOptions,
 * MrtCreateSession*, MrtReleaseSession, MrtReleaseValue or the EP library and device functions, or whose
 * call was in flight, blocks for good instead of returning into a process being torn down. The calling
 * thread keeps full use of the API. */
MRT_API int64_t MrtBeginProcessExit(uint32_t timeout_ms);

#ifdef __cplusplus
}
#endif
#endif /* MOSAICRT_MOSAICRT_H_ */
