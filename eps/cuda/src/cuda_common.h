// Shared plumbing of the CUDA EP: errors, device memory, the per-EP CUDA state, the kernel
// interface and the per-Compute run context (host <-> device transfers).
#ifndef MOSAICRT_EP_CUDA_CUDA_COMMON_H_
#define MOSAICRT_EP_CUDA_CUDA_COMMON_H_

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "mosaicrt/ep.h"

namespace mrt_cuda {

constexpr int32_t kFloat = 1;  // TensorProto.FLOAT
constexpr int32_t kInt64 = 7;  // TensorProto.INT64

// Every failure inside the plugin is one of these; the ABI boundary turns it into a status.
struct Error {
  MrtErrorCode code;
  std::string message;
  MrtStatus* core_status = nullptr;  // a status the core handed us, returned to it as is
};

[[noreturn]] void fail(MrtErrorCode code, const std::string& message);
[[noreturn]] void fail_cuda(cudaError_t err, const char* what, const char* file, int line);
[[noreturn]] void fail_cublas(cublasStatus_t st, const char* what, const char* file, int line);

#define MRT_CUDA_CHECK(expr)                                                  \
  do {                                                                        \
    cudaError_t mrt_err_ = (expr);                                            \
    if (mrt_err_ != cudaSuccess) ::mrt_cuda::fail_cuda(mrt_err_, #expr, __FILE__, __LINE__); \
  } while (0)
#define MRT_CUBLAS_CHECK(expr)                                                \
  do {                                                                        \
    cublasStatus_t mrt_st_ = (expr);                                          \
    if (mrt_st_ != CUBLAS_STATUS_SUCCESS) ::mrt_cuda::fail_cublas(mrt_st_, #expr, __FILE__, __LINE__); \
  } while (0)

int64_t numel(const std::vector<int64_t>& dims);
std::string dims_str(const std::vector<int64_t>& dims);

// A caching device allocator: blocks are returned to a free list instead of cudaFree, so
// steady-state runs do not allocate. Thread-safe: the core allocates and frees device values
// (EP ABI 1.1 device memory) outside Compute too.
class DevicePool {
 public:
  explicit DevicePool(int device) : device_(device) {}
  ~DevicePool();
  DevicePool(const DevicePool&) = delete;
  DevicePool& operator=(const DevicePool&) = delete;
  void* acquire(size_t bytes);
  void release(void* p);
  void trim();  // frees every cached block

 private:
  void trim_locked();
  int device_;
  std::mutex mu_;
  std::multimap<size_t, void*> free_;   // size -> block
  std::map<void*, size_t> live_sizes_;  // block -> size
};

// A constant input (weight) kept on the device for the life of its kernel.
struct DeviceConstant {
  float* data = nullptr;
  std::vector<int64_t> dims;
  ~DeviceConstant();
};

// Per-EP CUDA state: the device, one stream, one cuBLAS handle, the scratch pool.
struct CudaState {
  int device = 0;
  cudaStream_t stream = nullptr;
  cublasHandle_t cublas = nullptr;
  std::unique_ptr<DevicePool> pool;
  std::mutex mu;  // Compute calls of one EP run one at a time on its stream
  // EP ABI 1.1 device memory: the core hands kernels device tensors and keeps values produced
  // and consumed by this EP on the device; work is ordered on `stream`, copies to the host wait for it.
  bool device_memory = false;
  explicit CudaState(int device, bool allow_tf32);
  ~CudaState();
};

struct DevTensor {
  const float* data = nullptr;
  std::vector<int64_t> dims;
  int64_t size() const { return numel(dims); }
};

class Kernel;

// One Compute call: fetches inputs (uploading host tensors, reusing device constants),
// allocates outputs (host through the core, device from the pool), and at finish() copies
// the outputs back and waits for the stream. Scratch memory returns to the pool afterwards.
class RunContext {
 public:
  RunContext(const MrtEpApi* api, MrtEpKernelContext* ctx, CudaState& st, const Kernel& kernel);
  ~RunContext();
  RunContext(const RunContext&) = delete;
  RunContext& operator=(const RunContext&) = delete;

  bool has_input(size_t i) const;
  DevTensor input(size_t i);
  // Host view of a (small) input, e.g. shape or axes tensors; no device copy.
  MrtEpTensor host_input(size_t i) const;
  float* output(size_t i, const std::vector<int64_t>& dims);
  bool wants_output(size_t i) const;
  float* scratch(size_t count);  // device floats, valid until the end of the call
  void finish();

  CudaState& st;

 private:
  struct PendingOutput {
    float* dev;
    void* host;
    size_t bytes;
  };
  const MrtEpApi* api_;
  MrtEpKernelContext* ctx_;
  const Kernel& kernel_;
  std::vector<void*> blocks_;
  std::vector<PendingOutput> outputs_;
  mutable std::vector<std::unique_ptr<std::vector<char>>> host_copies_;  // device mode: host_input copies
  bool finished_ = false;
};

class Kernel {
 public:
  virtual ~Kernel() = default;
  virtual void compute(RunContext& rc) = 0;
  // Device copies of constant float inputs, by input index (null where the input is not constant).
  std::vector<std::unique_ptr<DeviceConstant>> constants;
};

// Node view helpers.
const MrtEpAttribute* find_attr(const MrtEpNode& node, const char* name);
int64_t attr_int(const MrtEpNode& node, const char* name, int64_t dflt);
float attr_float(const MrtEpNode& node, const char* name, float dflt);
std::string attr_string(const MrtEpNode& node, const char* name, const std::string& dflt);
std::vector<int64_t> attr_ints(const MrtEpNode& node, const char* name);
bool has_input(const MrtEpNode& node, size_t i);  // present and not omitted
std::vector<int64_t> constant_int64s(const MrtEpTensor& t);

// Which nodes the EP takes: empty string = supported, else the reason it is not.
std::string check_node(const MrtEpNode& node);
// Build the kernel of a supported node (throws Error).
std::unique_ptr<Kernel> create_kernel(const MrtEpNode& node, CudaState& st);

}  // namespace mrt_cuda

#endif  // MOSAICRT_EP_CUDA_CUDA_COMMON_H_
