// Errors, device memory, per-EP CUDA state and the run context of the CUDA EP.
#include "cuda_common.h"

#include <cstring>
#include <sstream>

namespace mrt_cuda {

void fail(MrtErrorCode code, const std::string& message) { throw Error{code, message}; }

void fail_cuda(cudaError_t err, const char* what, const char* file, int line) {
  std::ostringstream os;
  os << "CUDA EP: " << what << " failed: " << cudaGetErrorName(err) << " (" << cudaGetErrorString(err) << ") at "
     << file << ":" << line;
  (void)cudaGetLastError();  // clear a non-sticky error so later calls are not blamed
  fail(err == cudaErrorMemoryAllocation ? MRT_OUT_OF_MEMORY : MRT_RUNTIME_ERROR, os.str());
}

void fail_cublas(cublasStatus_t st, const char* what, const char* file, int line) {
  std::ostringstream os;
  os << "CUDA EP: " << what << " failed: " << cublasGetStatusName(st) << " (" << cublasGetStatusString(st)
     << ") at " << file << ":" << line;
  fail(st == CUBLAS_STATUS_ALLOC_FAILED ? MRT_OUT_OF_MEMORY : MRT_RUNTIME_ERROR, os.str());
}

int64_t numel(const std::vector<int64_t>& dims) {
  int64_t n = 1;
  for (int64_t d : dims) n *= d;
  return n;
}

std::string dims_str(const std::vector<int64_t>& dims) {
  std::string s = "[";
  for (size_t i = 0; i < dims.size(); ++i) s += (i ? "," : "") + std::to_string(dims[i]);
  return s + "]";
}

// ---- DevicePool ----
DevicePool::~DevicePool() {
  trim_locked();
  for (auto& [p, size] : live_sizes_) cudaFree(p);
}

void* DevicePool::acquire(size_t bytes) {
  std::lock_guard<std::mutex> lock(mu_);
  bytes = (bytes + 255) & ~size_t{255};
  if (bytes == 0) bytes = 256;
  // Best fit among cached blocks no more than twice the request.
  auto it = free_.lower_bound(bytes);
  if (it != free_.end() && it->first <= 2 * bytes) {
    void* p = it->second;
    live_sizes_[p] = it->first;
    free_.erase(it);
    return p;
  }
  void* p = nullptr;
  cudaError_t err = cudaMalloc(&p, bytes);
  if (err == cudaErrorMemoryAllocation) {  // give the cache back and retry once
    (void)cudaGetLastError();
    trim_locked();
    err = cudaMalloc(&p, bytes);
  }
  if (err != cudaSuccess) fail_cuda(err, "cudaMalloc", __FILE__, __LINE__);
  live_sizes_[p] = bytes;
  return p;
}

void DevicePool::release(void* p) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = live_sizes_.find(p);
  if (it == live_sizes_.end()) return;
  free_.emplace(it->second, p);
  live_sizes_.erase(it);
}

void DevicePool::trim() {
  std::lock_guard<std::mutex> lock(mu_);
  trim_locked();
}

void DevicePool::trim_locked() {
  for (auto& [size, p] : free_) cudaFree(p);
  free_.clear();
}

DeviceConstant::~DeviceConstant() {
  if (data) cudaFree(data);
}

// ---- CudaState ----
CudaState::CudaState(int dev, bool allow_tf32) : device(dev) {
  MRT_CUDA_CHECK(cudaSetDevice(device));
  MRT_CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  cublasStatus_t st = cublasCreate(&cublas);
  if (st != CUBLAS_STATUS_SUCCESS) {
    cudaStreamDestroy(stream);
    fail_cublas(st, "cublasCreate", __FILE__, __LINE__);
  }
  cublasSetStream(cublas, stream);
  // Exact FP32 by default so results match the CPU EP; TF32 tensor cores on request.
  cublasSetMathMode(cublas, allow_tf32 ? CUBLAS_TF32_TENSOR_OP_MATH : CUBLAS_PEDANTIC_MATH);
  pool = std::make_unique<DevicePool>(device);
}

CudaState::~CudaState() {
  cudaSetDevice(device);
  if (stream) cudaStreamSynchronize(stream);
  pool.reset();
  if (cublas) cublasDestroy(cublas);
  if (stream) cudaStreamDestroy(stream);
}

// ---- RunContext ----
RunContext::RunContext(const MrtEpApi* api, MrtEpKernelContext* ctx, CudaState& state, const Kernel& kernel)
    : st(state), api_(api), ctx_(ctx), kernel_(kernel) {}

RunContext::~RunContext() {
  // On an error path the stream may still use the blocks: wait before recycling them. (After a
  // normal finish in device mode the blocks go back to the pool while kernels may still be queued:
  // later users of a block run on the same stream, after them.)
  if (!(finished_ && st.device_memory)) cudaStreamSynchronize(st.stream);
  for (void* p : blocks_) st.pool->release(p);
}

bool RunContext::has_input(size_t i) const {
  if (i >= api_->KernelContextGetInputCount(ctx_)) return false;
  MrtEpTensor t{};
  return api_->KernelContextGetInput(ctx_, i, &t) != 0;
}

MrtEpTensor RunContext::host_input(size_t i) const {
  MrtEpTensor t{};
  if (i >= api_->KernelContextGetInputCount(ctx_) || !api_->KernelContextGetInput(ctx_, i, &t))
    fail(MRT_RUNTIME_ERROR, "CUDA EP: input " + std::to_string(i) + " is missing");
  if (st.device_memory && t.data_bytes) {  // the value lives on the device: read a host copy
    host_copies_.push_back(std::make_unique<std::vector<char>>(t.data_bytes));
    MRT_CUDA_CHECK(cudaMemcpyAsync(host_copies_.back()->data(), t.data, t.data_bytes, cudaMemcpyDeviceToHost,
                                   st.stream));
    MRT_CUDA_CHECK(cudaStreamSynchronize(st.stream));
    t.data = host_copies_.back()->data();
  }
  return t;
}

DevTensor RunContext::input(size_t i) {
  if (i < kernel_.constants.size() && kernel_.constants[i]) {
    const DeviceConstant& c = *kernel_.constants[i];
    return DevTensor{c.data, c.dims};
  }
  MrtEpTensor t = host_input(i);
  if (t.elem_type != kFloat)
    fail(MRT_RUNTIME_ERROR, "CUDA EP: input " + std::to_string(i) + " has element type " +
                                std::to_string(t.elem_type) + ", expected float32");
  DevTensor d;
  d.dims.assign(t.dims, t.dims + t.rank);
  const size_t bytes = static_cast<size_t>(d.size()) * sizeof(float);
  if (bytes != t.data_bytes)
    fail(MRT_RUNTIME_ERROR, "CUDA EP: input " + std::to_string(i) + " of shape " + dims_str(d.dims) + " has " +
                                std::to_string(t.data_bytes) + " bytes");
  if (bytes > 0 && st.device_memory) {
    d.data = static_cast<const float*>(t.data);  // already on the device
  } else if (bytes > 0) {
    void* p = st.pool->acquire(bytes);
    blocks_.push_back(p);
    MRT_CUDA_CHECK(cudaMemcpyAsync(p, t.data, bytes, cudaMemcpyHostToDevice, st.stream));
    d.data = static_cast<const float*>(p);
  }
  return d;
}

bool RunContext::wants_output(size_t i) const { return i < api_->KernelContextGetOutputCount(ctx_); }

float* RunContext::output(size_t i, const std::vector<int64_t>& dims) {
  MrtEpTensor t{};
  if (MrtStatus* s = api_->KernelContextAllocateOutput(ctx_, i, kFloat, dims.data(), dims.size(), &t))
    throw Error{MRT_RUNTIME_ERROR, "", s};  // the core's own status goes back to it unchanged
  const size_t bytes = static_cast<size_t>(numel(dims)) * sizeof(float);
  if (bytes == 0) return nullptr;
  if (st.device_memory) return static_cast<float*>(t.data);  // the core allocated it on this device
  float* dev = static_cast<float*>(scratch(static_cast<size_t>(numel(dims))));
  outputs_.push_back(PendingOutput{dev, t.data, bytes});
  return dev;
}

float* RunContext::scratch(size_t count) {
  void* p = st.pool->acquire(count * sizeof(float));
  blocks_.push_back(p);
  return static_cast<float*>(p);
}

void RunContext::finish() {
  MRT_CUDA_CHECK(cudaGetLastError());  // launch errors of this call's kernels
  if (st.device_memory) {  // outputs stay on the device; the core's copies to the host wait for the stream
    finished_ = true;
    return;
  }
  for (const PendingOutput& o : outputs_)
    MRT_CUDA_CHECK(cudaMemcpyAsync(o.host, o.dev, o.bytes, cudaMemcpyDeviceToHost, st.stream));
  MRT_CUDA_CHECK(cudaStreamSynchronize(st.stream));
  finished_ = true;
}

// ---- node helpers ----
const MrtEpAttribute* find_attr(const MrtEpNode& node, const char* name) {
  for (size_t i = 0; i < node.attribute_count; ++i)
    if (std::strcmp(node.attributes[i].name, name) == 0) return &node.attributes[i];
  return nullptr;
}

int64_t attr_int(const MrtEpNode& node, const char* name, int64_t dflt) {
  const MrtEpAttribute* a = find_attr(node, name);
  return a && a->type == MRT_ATTR_INT ? a->i : dflt;
}

float attr_float(const MrtEpNode& node, const char* name, float dflt) {
  const MrtEpAttribute* a = find_attr(node, name);
  return a && a->type == MRT_ATTR_FLOAT ? a->f : dflt;
}

std::string attr_string(const MrtEpNode& node, const char* name, const std::string& dflt) {
  const MrtEpAttribute* a = find_attr(node, name);
  return a && a->type == MRT_ATTR_STRING ? std::string(a->s, a->s_len) : dflt;
}

std::vector<int64_t> attr_ints(const MrtEpNode& node, const char* name) {
  const MrtEpAttribute* a = find_attr(node, name);
  if (!a || a->type != MRT_ATTR_INTS) return {};
  return std::vector<int64_t>(a->ints, a->ints + a->count);
}

bool has_input(const MrtEpNode& node, size_t i) {
  return i < node.input_count && node.inputs[i].name && node.inputs[i].name[0] != '\0';
}

std::vector<int64_t> constant_int64s(const MrtEpTensor& t) {
  if (t.elem_type != kInt64) fail(MRT_NOT_IMPLEMENTED, "CUDA EP: expected an int64 tensor");
  std::vector<int64_t> v(t.data_bytes / sizeof(int64_t));
  if (!v.empty()) std::memcpy(v.data(), t.data, v.size() * sizeof(int64_t));
  return v;
}

}  // namespace mrt_cuda
