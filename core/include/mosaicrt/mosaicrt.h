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
 *  - The plugin-EP half of the ABI lives in mosaicrt/ep.h (a later addition; it will
 *    bump MINOR).
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
#define MRT_ABI_VERSION_MINOR 0

typedef enum MrtErrorCode {
  MRT_OK = 0,
  MRT_INVALID_ARGUMENT = 1, /* bad input from the caller (names, dtype, shape, values) */
  MRT_INVALID_MODEL = 2,    /* the model bytes are malformed or violate ONNX rules */
  MRT_NOT_IMPLEMENTED = 3,  /* valid ONNX the runtime does not support (op, type, attribute) */
  MRT_NO_SUCH_FILE = 4,     /* model or external data file missing/unreadable */
  MRT_RUNTIME_ERROR = 5,    /* a kernel failed while running */
  MRT_OUT_OF_MEMORY = 6,
  MRT_INTERNAL = 7,         /* a bug in mosaicrt */
} MrtErrorCode;

typedef struct MrtStatus MrtStatus;
typedef struct MrtSessionOptions MrtSessionOptions;
typedef struct MrtSession MrtSession;
typedef struct MrtValue MrtValue;

/* Element types use ONNX TensorProto.DataType codes (1 = float, 7 = int64, 9 = bool, ...). */

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

typedef enum MrtIoKind { MRT_IO_INPUT = 0, MRT_IO_OUTPUT = 1 } MrtIoKind;

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

#ifdef __cplusplus
}
#endif
#endif /* MOSAICRT_MOSAICRT_H_ */
