// The C ABI: every exported function converts C++ exceptions into an MrtStatus.
#include <atomic>
#include <cstring>
#include <fstream>
#include <new>
#include <string>
#include <mutex>
#include <thread>

#include "mosaicrt/ep.h"
#include "mosaicrt/mosaicrt.h"
#include "gemm/backend_registry.h"
#include "gemm/sgemm.h"
#include "ep/registry.h"
#include "process_exit.h"
#include "session.h"

struct MrtStatus {
  MrtErrorCode code;
  std::string message;
};
struct MrtSessionOptions {
  mrt::SessionOptions options;
};

namespace {
// Storage behind pointers handed out by MrtGetAvailableProviders / MrtGetEpDevices.
std::mutex g_snapshot_mutex;
std::string g_provider_names;
}  // namespace
struct MrtSession {
  std::unique_ptr<mrt::Session> session;
  std::mutex profile_mutex;
  std::string last_profile;  // behind the pointer MrtSessionEndProfiling hands out
};
struct MrtRunOptions {
  std::atomic<bool> terminate{false};
};
struct MrtValue {
  mrt::Tensor tensor;
};

namespace {

// Returned when even the status object cannot be allocated; never deleted.
MrtStatus g_oom_status{MRT_OUT_OF_MEMORY, "out of memory"};

MrtStatus* make_status(MrtErrorCode code, const std::string& msg) {
  try {
    return new MrtStatus{code, msg};
  } catch (...) {
    return &g_oom_status;
  }
}

template <class F>
MrtStatus* guarded(F&& f) {
  try {
    f();
    return nullptr;
  } catch (const mrt::Error& e) {
    return make_status(e.code(), e.what());
  } catch (const std::bad_alloc&) {
    return make_status(MRT_OUT_OF_MEMORY, "out of memory");
  } catch (const std::exception& e) {
    return make_status(MRT_RUNTIME_ERROR, e.what());
  } catch (...) {
    return make_status(MRT_INTERNAL, "unknown exception");
  }
}

// A call that runs kernels or EP code, under the exit gate (process_exit.h): after another thread began
// to exit the process, the call blocks instead of running into objects that exit() destroys.
template <class F>
MrtStatus* gated(F&& f) {
  mrt::ExitPass pass;
  return guarded(std::forward<F>(f));
}

#define MRT_REQUIRE_ARG(p) \
  if (!(p)) ::mrt::fail(MRT_INVALID_ARGUMENT, #p " must not be NULL")

const std::vector<mrt::ValueInfo>& io_list(const MrtSession* s, MrtIoKind kind) {
  switch (kind) {
    case MRT_IO_INPUT: return s->session->inputs();
    case MRT_IO_OUTPUT: return s->session->outputs();
    case MRT_IO_OVERRIDABLE_INITIALIZER: return s->session->overridable_initializers();
  }
  mrt::fail(MRT_INVALID_ARGUMENT, "invalid io kind ", static_cast<int>(kind));
}

const mrt::ValueInfo& io_info(const MrtSession* s, MrtIoKind kind, size_t index) {
  const auto& list = io_list(s, kind);
  if (index >= list.size())
    mrt::fail(MRT_INVALID_ARGUMENT, kind == MRT_IO_INPUT ? "input" : "output", " index ", index, " out of range (",
              list.size(), ")");
  return list[index];
}

mrt::Shape to_shape(const int64_t* shape, size_t rank) {
  if (rank && !shape) mrt::fail(MRT_INVALID_ARGUMENT, "shape must not be NULL when rank > 0");
  return mrt::Shape(shape, shape + rank);
}

void check_type_and_bytes(int32_t elem_type, const mrt::Shape& shape, size_t data_bytes) {
  if (!mrt::dtype_is_known(elem_type) || !mrt::dtype_is_plain(static_cast<mrt::DType>(elem_type)))
    mrt::fail(MRT_NOT_IMPLEMENTED, "element type ", mrt::dtype_name(static_cast<mrt::DType>(elem_type)), " (", elem_type,
              ") is not supported");
  int64_t n = mrt::shape_size(shape);
  size_t want = static_cast<size_t>(n) * mrt::dtype_size(static_cast<mrt::DType>(elem_type));
  if (want != data_bytes)
    mrt::fail(MRT_INVALID_ARGUMENT, "tensor data has ", data_bytes, " bytes but shape ", mrt::shape_str(shape), " of ",
              mrt::dtype_name(static_cast<mrt::DType>(elem_type)), " needs ", want);
}

std::vector<std::pair<std::string, std::string>> read_options(const char* const* keys, const char* const* values,
                                                             size_t n) {
  if (n && (!keys || !values)) mrt::fail(MRT_INVALID_ARGUMENT, "provider option arrays must not be NULL");
  std::vector<std::pair<std::string, std::string>> out;
  for (size_t i = 0; i < n; ++i) {
    if (!keys[i] || !values[i]) mrt::fail(MRT_INVALID_ARGUMENT, "provider option ", i, " has a NULL key or value");
    out.emplace_back(keys[i], values[i]);
  }
  return out;
}

std::string build_info() {
  std::string s = "version=" MOSAICRT_VERSION_STRING;
#if defined(__x86_64__) || defined(_M_X64)
  s += ",arch=x86_64";
#elif defined(__aarch64__) || defined(_M_ARM64)
  s += ",arch=arm64";
#elif defined(__arm__)
  s += ",arch=armv7";
#else
  s += ",arch=other";
#endif
#if defined(MOSAICRT_X86_SIMD)
  s += ",x86_simd=on";
#endif
#if defined(MOSAICRT_ARM64_KERNELS)
  s += ",arm64_kernels=on";
#endif
  s += ",ep_abi=" + std::to_string(MRT_EP_ABI_VERSION_MAJOR) + "." + std::to_string(MRT_EP_ABI_VERSION_MINOR);
#if defined(MOSAICRT_DYNAMIC_EP_DOWNLOAD)
  s += ",dynamic_ep_download=on";
#endif
  s += std::string(",") + mrt::cpu_kernel_summary();
  s += ",hardware_threads=" + std::to_string(std::thread::hardware_concurrency());
  return s;
}

}  // namespace

extern "C" {

MRT_API uint32_t MrtGetAbiVersion(void) { return (MRT_ABI_VERSION_MAJOR << 16) | MRT_ABI_VERSION_MINOR; }
MRT_API const char* MrtGetVersionString(void) { return MOSAICRT_VERSION_STRING; }
MRT_API const char* MrtGetBuildInfo(void) {
  static const std::string info = build_info();
  return info.c_str();
}

MRT_API const char* MrtGetCpuOperators(void) {
  static const std::string ops = [] {
    std::string out;
    for (const auto& name : mrt::KernelRegistry::cpu().op_names()) {
      if (!out.empty()) out += ",";
      out += name;
    }
    return out;
  }();
  return ops.c_str();
}

MRT_API MrtErrorCode MrtStatusGetCode(const MrtStatus* status) { return status ? status->code : MRT_OK; }
MRT_API const char* MrtStatusGetMessage(const MrtStatus* status) { return status ? status->message.c_str() : ""; }
MRT_API void MrtReleaseStatus(MrtStatus* status) {
  if (status != &g_oom_status) delete status;
}
MRT_API MrtStatus* MrtCreateStatus(MrtErrorCode code, const char* message) {
  return make_status(code == MRT_OK ? MRT_INTERNAL : code, message ? message : "");
}

MRT_API MrtStatus* MrtRegisterExecutionProviderLibrary(const char* registration_name, const char* path) {
  return gated([&] {
    MRT_REQUIRE_ARG(registration_name);
    MRT_REQUIRE_ARG(path);
    mrt::EpRegistry::instance().register_library(registration_name, path);
  });
}
MRT_API MrtStatus* MrtUnregisterExecutionProviderLibrary(const char* registration_name) {
  return gated([&] {
    MRT_REQUIRE_ARG(registration_name);
    mrt::EpRegistry::instance().unregister_library(registration_name);
  });
}
MRT_API const char* MrtGetAvailableProviders(void) {
  mrt::ExitPass pass;
  std::lock_guard<std::mutex> lock(g_snapshot_mutex);
  try {
    std::string s;
    for (const auto& n : mrt::EpRegistry::instance().provider_names()) s += (s.empty() ? "" : ",") + n;
    g_provider_names = s;
  } catch (...) {
    g_provider_names = MRT_CPU_EP_NAME;
  }
  return g_provider_names.c_str();
}
MRT_API MrtStatus* MrtGetEpDevices(MrtEpDeviceInfo* devices, size_t capacity, size_t* count) {
  return gated([&] {
    MRT_REQUIRE_ARG(count);
    if (capacity && !devices) mrt::fail(MRT_INVALID_ARGUMENT, "devices must not be NULL when capacity > 0");
    std::vector<mrt::EpDevice> all = mrt::EpRegistry::instance().ep_devices();
    for (size_t i = 0; i < all.size() && i < capacity; ++i) devices[i] = mrt::device_info(all[i]);
    *count = all.size();
  });
}

MRT_API MrtStatus* MrtSessionOptionsAppendExecutionProvider(MrtSessionOptions* options, const char* ep_name,
                                                            const char* const* option_keys,
                                                            const char* const* option_values, size_t n_options) {
  return guarded([&] {
    MRT_REQUIRE_ARG(options);
    MRT_REQUIRE_ARG(ep_name);
    mrt::ProviderRequest r;
    r.ep_name = ep_name;
    r.options = read_options(option_keys, option_values, n_options);
    for (const auto& e : options->options.providers.explicit_providers)
      if (e.device_ids.empty() && e.ep_name == r.ep_name)
        mrt::fail(MRT_INVALID_ARGUMENT, "execution provider '", r.ep_name, "' is listed twice");
    options->options.providers.explicit_providers.push_back(std::move(r));
  });
}
MRT_API MrtStatus* MrtSessionOptionsAppendExecutionProviderForDevices(MrtSessionOptions* options,
                                                                      const uint64_t* ep_device_ids, size_t n_devices,
                                                                      const char* const* option_keys,
                                                                      const char* const* option_values,
                                                                      size_t n_options) {
  return guarded([&] {
    MRT_REQUIRE_ARG(options);
    if (!n_devices || !ep_device_ids) mrt::fail(MRT_INVALID_ARGUMENT, "add_provider_for_devices needs at least one device");
    mrt::ProviderRequest r;
    r.device_ids.assign(ep_device_ids, ep_device_ids + n_devices);
    r.options = read_options(option_keys, option_values, n_options);
    options->options.providers.explicit_providers.push_back(std::move(r));
  });
}
MRT_API MrtStatus* MrtSessionOptionsSetEpSelectionPolicy(MrtSessionOptions* options, MrtEpSelectionPolicy policy) {
  return guarded([&] {
    MRT_REQUIRE_ARG(options);
    if (policy < MRT_EP_POLICY_DEFAULT || policy > MRT_EP_POLICY_MIN_OVERALL_POWER)
      mrt::fail(MRT_INVALID_ARGUMENT, "unknown EP selection policy ", static_cast<int>(policy));
    options->options.providers.policy = policy;
    options->options.providers.delegate = nullptr;
    options->options.providers.delegate_state = nullptr;
  });
}
MRT_API MrtStatus* MrtSessionOptionsSetEpSelectionDelegate(MrtSessionOptions* options, MrtEpSelectionDelegate delegate,
                                                           void* state) {
  return guarded([&] {
    MRT_REQUIRE_ARG(options);
    options->options.providers.delegate = delegate;
    options->options.providers.delegate_state = state;
    if (delegate) options->options.providers.policy = -1;
  });
}

MRT_API MrtStatus* MrtSessionGetProviderCount(const MrtSession* session, size_t* count) {
  return guarded([&] {
    MRT_REQUIRE_ARG(session);
    MRT_REQUIRE_ARG(count);
    *count = session->session->providers().size();
  });
}
MRT_API MrtStatus* MrtSessionGetProvider(const MrtSession* session, size_t index, const char** ep_name) {
  return guarded([&] {
    MRT_REQUIRE_ARG(session);
    MRT_REQUIRE_ARG(ep_name);
    const auto& p = session->session->providers();
    if (index >= p.size()) mrt::fail(MRT_INVALID_ARGUMENT, "provider index ", index, " out of range (", p.size(), ")");
    *ep_name = p[index].c_str();
  });
}
MRT_API MrtStatus* MrtSessionGetNodeCount(const MrtSession* session, size_t* count) {
  return guarded([&] {
    MRT_REQUIRE_ARG(session);
    MRT_REQUIRE_ARG(count);
    *count = session->session->assignments().size();
  });
}
MRT_API MrtStatus* MrtSessionGetNodeAssignment(const MrtSession* session, size_t index, const char** node_name,
                                               const char** op_type, const char** ep_name, const char** note) {
  return guarded([&] {
    MRT_REQUIRE_ARG(session);
    const auto& a = session->session->assignments();
    if (index >= a.size()) mrt::fail(MRT_INVALID_ARGUMENT, "node index ", index, " out of range (", a.size(), ")");
    if (node_name) *node_name = a[index].node_name.c_str();
    if (op_type) *op_type = a[index].op_type.c_str();
    if (ep_name) *ep_name = a[index].ep.c_str();
    if (note) *note = a[index].note.c_str();
  });
}

MRT_API MrtStatus* MrtSessionGetNodePartition(const MrtSession* session, size_t index, const char** partition,
                                              const char** copies) {
  return guarded([&] {
    MRT_REQUIRE_ARG(session);
    const auto& a = session->session->assignments();
    if (index >= a.size()) mrt::fail(MRT_INVALID_ARGUMENT, "node index ", index, " out of range (", a.size(), ")");
    if (partition) *partition = a[index].partition.c_str();
    if (copies) *copies = a[index].copies.c_str();
  });
}
MRT_API MrtStatus* MrtSessionGetTransferCounts(const MrtSession* session, uint64_t* to_device, uint64_t* to_host,
                                               uint64_t* device_resident, uint64_t* constants_uploaded) {
  return guarded([&] {
    MRT_REQUIRE_ARG(session);
    mrt::TransferCounts c = session->session->transfer_counts();
    if (to_device) *to_device = c.to_device;
    if (to_host) *to_host = c.to_host;
    if (device_resident) *device_resident = c.device_resident;
    if (constants_uploaded) *constants_uploaded = c.constants_uploaded;
  });
}

MRT_API MrtStatus* MrtCreateSessionOptions(MrtSessionOptions** out) {
  return guarded([&] {
    MRT_REQUIRE_ARG(out);
    *out = new MrtSessionOptions();
  });
}
MRT_API void MrtReleaseSessionOptions(MrtSessionOptions* options) { delete options; }
MRT_API MrtStatus* MrtSessionOptionsSetIntraOpNumThreads(MrtSessionOptions* options, int32_t threads) {
  return guarded([&] {
    MRT_REQUIRE_ARG(options);
    if (threads < 0) mrt::fail(MRT_INVALID_ARGUMENT, "intra_op_num_threads must be >= 0, got ", threads);
    if (threads > 1024) mrt::fail(MRT_INVALID_ARGUMENT, "intra_op_num_threads must be <= 1024, got ", threads);
    options->options.intra_op_num_threads = threads;
  });
}
MRT_API MrtStatus* MrtSessionOptionsSetConfigEntry(MrtSessionOptions* options, const char* key, const char* value) {
  return guarded([&] {
    MRT_REQUIRE_ARG(options);
    MRT_REQUIRE_ARG(key);
    MRT_REQUIRE_ARG(value);
    options->options.config[key] = value;
  });
}

MRT_API MrtStatus* MrtCreateSession(const char* model_path, const MrtSessionOptions* options, MrtSession** out) {
  return gated([&] {
    MRT_REQUIRE_ARG(model_path);
    MRT_REQUIRE_ARG(out);
    mrt::SessionOptions o = options ? options->options : mrt::SessionOptions();
    auto s = mrt::Session::from_path(model_path, o);
    auto* handle = new MrtSession();
    handle->session = std::move(s);
    *out = handle;
  });
}

MRT_API MrtStatus* MrtCreateSessionFromBytes(const void* model_data, size_t model_size,
                                             const MrtSessionOptions* options, MrtSession** out) {
  return gated([&] {
    MRT_REQUIRE_ARG(out);
    if (!model_data && model_size) mrt::fail(MRT_INVALID_ARGUMENT, "model_data must not be NULL");
    mrt::SessionOptions o = options ? options->options : mrt::SessionOptions();
    auto s = mrt::Session::from_bytes(static_cast<const uint8_t*>(model_data), model_size, o);
    auto* handle = new MrtSession();
    handle->session = std::move(s);
    *out = handle;
  });
}
MRT_API void MrtReleaseSession(MrtSession* session) {
  mrt::ExitPass pass;
  delete session;
}

MRT_API MrtStatus* MrtSessionGetIoCount(const MrtSession* session, MrtIoKind kind, size_t* count) {
  return guarded([&] {
    MRT_REQUIRE_ARG(session);
    MRT_REQUIRE_ARG(count);
    *count = io_list(session, kind).size();
  });
}

MRT_API MrtStatus* MrtSessionGetIoInfo(const MrtSession* session, MrtIoKind kind, size_t index, const char** name,
                                       int32_t* elem_type, size_t* rank) {
  return guarded([&] {
    MRT_REQUIRE_ARG(session);
    const auto& v = io_info(session, kind, index);
    if (name) *name = v.name.c_str();
    if (elem_type) *elem_type = static_cast<int32_t>(v.elem_type);
    if (rank) *rank = v.has_shape ? v.dims.size() : SIZE_MAX;
  });
}

MRT_API MrtStatus* MrtSessionGetIoDim(const MrtSession* session, MrtIoKind kind, size_t index, size_t dim,
                                      int64_t* value, const char** symbol) {
  return guarded([&] {
    MRT_REQUIRE_ARG(session);
    const auto& v = io_info(session, kind, index);
    if (!v.has_shape || dim >= v.dims.size())
      mrt::fail(MRT_INVALID_ARGUMENT, "dimension ", dim, " out of range for '", v.name, "'");
    if (value) *value = v.dims[dim].value;
    if (symbol) *symbol = v.dims[dim].param.c_str();
  });
}

MRT_API MrtStatus* MrtRun(MrtSession* session, const char* const* input_names, const MrtValue* const* inputs,
                          size_t n_inputs, const char* const* output_names, size_t n_outputs, MrtValue** outputs) {
  return gated([&] {
    MRT_REQUIRE_ARG(session);
    MRT_REQUIRE_ARG(outputs);
    if (n_inputs && (!input_names || !inputs)) mrt::fail(MRT_INVALID_ARGUMENT, "input arrays must not be NULL");
    if (n_outputs && !output_names) mrt::fail(MRT_INVALID_ARGUMENT, "output_names must not be NULL");
    std::vector<std::string> in_names;
    std::vector<mrt::Tensor> in_values;
    for (size_t i = 0; i < n_inputs; ++i) {
      if (!input_names[i] || !inputs[i]) mrt::fail(MRT_INVALID_ARGUMENT, "input ", i, " name or value is NULL");
      in_names.emplace_back(input_names[i]);
      in_values.push_back(inputs[i]->tensor);
    }
    std::vector<std::string> out_names;
    for (size_t i = 0; i < n_outputs; ++i) {
      if (!output_names[i]) mrt::fail(MRT_INVALID_ARGUMENT, "output name ", i, " is NULL");
      out_names.emplace_back(output_names[i]);
    }
    std::vector<mrt::Tensor> result = session->session->run(in_names, in_values, out_names);
    std::vector<MrtValue*> made;
    try {
      for (auto& t : result) made.push_back(new MrtValue{std::move(t)});
    } catch (...) {
      for (auto* v : made) delete v;
      throw;
    }
    for (size_t i = 0; i < made.size(); ++i) outputs[i] = made[i];
  });
}

MRT_API int64_t MrtBeginProcessExit(uint32_t timeout_ms) { return mrt::begin_process_exit(timeout_ms); }

MRT_API MrtStatus* MrtCreateRunOptions(MrtRunOptions** out) {
  return guarded([&] {
    MRT_REQUIRE_ARG(out);
    *out = new MrtRunOptions();
  });
}
MRT_API void MrtReleaseRunOptions(MrtRunOptions* run_options) { delete run_options; }
MRT_API MrtStatus* MrtRunOptionsSetTerminate(MrtRunOptions* run_options, int32_t terminate) {
  return guarded([&] {
    MRT_REQUIRE_ARG(run_options);
    run_options->terminate.store(terminate != 0);
  });
}

MRT_API MrtStatus* MrtRunWithOptions(MrtSession* session, const MrtRunOptions* run_options,
                                     const char* const* input_names, const MrtTensorRef* inputs, size_t n_inputs,
                                     const char* const* output_names, size_t n_outputs,
                                     const MrtTensorRef* bound_outputs, MrtValue** outputs, MrtTensorRef* output_info) {
  return gated([&] {
    MRT_REQUIRE_ARG(session);
    MRT_REQUIRE_ARG(outputs);
    if (n_inputs && (!input_names || !inputs)) mrt::fail(MRT_INVALID_ARGUMENT, "input arrays must not be NULL");
    if (n_outputs && !output_names) mrt::fail(MRT_INVALID_ARGUMENT, "output_names must not be NULL");
    auto borrow = [](const MrtTensorRef& r) {
      mrt::Shape shape = to_shape(r.shape, r.rank);
      check_type_and_bytes(r.elem_type, shape, r.data_bytes);
      if (r.data_bytes && !r.data) mrt::fail(MRT_INVALID_ARGUMENT, "tensor data must not be NULL");
      return mrt::Tensor::borrow(static_cast<mrt::DType>(r.elem_type), std::move(shape), r.data);
    };
    std::vector<std::string> in_names(n_inputs);
    std::vector<mrt::Tensor> in_values(n_inputs);
    for (size_t i = 0; i < n_inputs; ++i) {
      if (!input_names[i]) mrt::fail(MRT_INVALID_ARGUMENT, "input name ", i, " is NULL");
      in_names[i] = input_names[i];
      in_values[i] = borrow(inputs[i]);
    }
    std::vector<std::string> out_names(n_outputs);
    for (size_t i = 0; i < n_outputs; ++i) {
      if (!output_names[i]) mrt::fail(MRT_INVALID_ARGUMENT, "output name ", i, " is NULL");
      out_names[i] = output_names[i];
    }
    size_t n_result = n_outputs ? n_outputs : session->session->outputs().size();
    std::vector<mrt::Tensor> bound;
    mrt::RunControl control;
    if (run_options) control.terminate = &run_options->terminate;
    if (bound_outputs) {
      bound.resize(n_result);
      for (size_t i = 0; i < n_result; ++i)
        if (bound_outputs[i].data || bound_outputs[i].data_bytes) bound[i] = borrow(bound_outputs[i]);
      control.bound_outputs = &bound;
    }
    std::vector<mrt::Tensor> result = session->session->run(in_names, in_values, out_names, control);
    std::vector<MrtValue*> made(result.size(), nullptr);
    try {
      for (size_t i = 0; i < result.size(); ++i) {
        bool in_bound = bound_outputs && bound[i].valid() && result[i].raw() == bound[i].raw() &&
                        result[i].shape() == bound[i].shape() && result[i].dtype() == bound[i].dtype();
        if (!in_bound) made[i] = new MrtValue{std::move(result[i])};
      }
    } catch (...) {
      for (auto* v : made) delete v;
      throw;
    }
    for (size_t i = 0; i < made.size(); ++i) {
      outputs[i] = made[i];
      if (!output_info) continue;
      const mrt::Tensor& t = made[i] ? made[i]->tensor : result[i];
      const bool plain = mrt::dtype_is_plain(t.dtype());  // strings, sequences and none: no byte view
      output_info[i] = MrtTensorRef{static_cast<int32_t>(t.dtype()), t.rank(),
                                    made[i] ? t.shape().data() : bound_outputs[i].shape,
                                    !plain ? nullptr : made[i] ? made[i]->tensor.raw() : bound_outputs[i].data,
                                    plain ? t.nbytes() : 0};
    }
  });
}

MRT_API MrtStatus* MrtSessionOptionsAddInitializer(MrtSessionOptions* options, const char* name,
                                                   const MrtValue* value) {
  return guarded([&] {
    MRT_REQUIRE_ARG(options);
    MRT_REQUIRE_ARG(name);
    MRT_REQUIRE_ARG(value);
    auto& list = options->options.initializers;
    for (auto& [n, t] : list)
      if (n == name) {
        t = value->tensor.clone();
        return;
      }
    list.emplace_back(name, value->tensor.clone());
  });
}

MRT_API MrtStatus* MrtSessionStartProfiling(MrtSession* session) {
  return guarded([&] {
    MRT_REQUIRE_ARG(session);
    session->session->start_profiling();
  });
}
MRT_API MrtStatus* MrtSessionEndProfiling(MrtSession* session, const char** events_json) {
  return guarded([&] {
    MRT_REQUIRE_ARG(session);
    MRT_REQUIRE_ARG(events_json);
    std::lock_guard<std::mutex> lock(session->profile_mutex);
    session->last_profile = session->session->end_profiling();
    *events_json = session->last_profile.c_str();
  });
}

MRT_API MrtStatus* MrtSessionSaveOptimizedModel(const MrtSession* session, const char* path) {
  return guarded([&] {
    MRT_REQUIRE_ARG(session);
    MRT_REQUIRE_ARG(path);
    std::string bytes = mrt::encode_model(session->session->model());
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    if (!out) mrt::fail(MRT_NO_SUCH_FILE, "cannot open '", path, "' for writing the optimized model");
    out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    out.close();
    if (!out) mrt::fail(MRT_NO_SUCH_FILE, "failed writing the optimized model to '", path, "'");
  });
}

MRT_API MrtStatus* MrtSessionGetModelMetadata(const MrtSession* session, const char** producer_name,
                                              const char** graph_name, const char** domain, const char** description,
                                              const char** graph_description, int64_t* version,
                                              size_t* n_custom_metadata) {
  return guarded([&] {
    MRT_REQUIRE_ARG(session);
    const mrt::Model& m = session->session->model();
    if (producer_name) *producer_name = m.producer_name.c_str();
    if (graph_name) *graph_name = m.graph.name.c_str();
    if (domain) *domain = m.domain.c_str();
    if (description) *description = m.doc_string.c_str();
    if (graph_description) *graph_description = m.graph.doc_string.c_str();
    if (version) *version = m.model_version;
    if (n_custom_metadata) *n_custom_metadata = m.metadata.size();
  });
}
MRT_API MrtStatus* MrtSessionGetCustomMetadata(const MrtSession* session, size_t index, const char** key,
                                               const char** value) {
  return guarded([&] {
    MRT_REQUIRE_ARG(session);
    const auto& md = session->session->model().metadata;
    if (index >= md.size()) mrt::fail(MRT_INVALID_ARGUMENT, "metadata index ", index, " out of range (", md.size(), ")");
    if (key) *key = md[index].first.c_str();
    if (value) *value = md[index].second.c_str();
  });
}

MRT_API MrtStatus* MrtCreateTensor(int32_t elem_type, const int64_t* shape, size_t rank, const void* data,
                                   size_t data_bytes, MrtValue** out) {
  return guarded([&] {
    MRT_REQUIRE_ARG(out);
    mrt::Shape s = to_shape(shape, rank);
    check_type_and_bytes(elem_type, s, data_bytes);
    if (data_bytes && !data) mrt::fail(MRT_INVALID_ARGUMENT, "data must not be NULL");
    mrt::Tensor t(static_cast<mrt::DType>(elem_type), s);
    if (data_bytes) std::memcpy(t.raw(), data, data_bytes);
    *out = new MrtValue{std::move(t)};
  });
}

MRT_API MrtStatus* MrtCreateTensorBorrowed(int32_t elem_type, const int64_t* shape, size_t rank, void* data,
                                           size_t data_bytes, MrtValue** out) {
  return guarded([&] {
    MRT_REQUIRE_ARG(out);
    mrt::Shape s = to_shape(shape, rank);
    check_type_and_bytes(elem_type, s, data_bytes);
    if (data_bytes && !data) mrt::fail(MRT_INVALID_ARGUMENT, "data must not be NULL");
    *out = new MrtValue{mrt::Tensor::borrow(static_cast<mrt::DType>(elem_type), s, data)};
  });
}

MRT_API MrtStatus* MrtValueGetInfo(const MrtValue* value, int32_t* elem_type, size_t* rank, const int64_t** shape,
                                   const void** data, size_t* data_bytes) {
  return guarded([&] {
    MRT_REQUIRE_ARG(value);
    const mrt::Tensor& t = value->tensor;
    const bool plain = mrt::dtype_is_plain(t.dtype());  // strings, sequences and none have no byte view
    if (elem_type) *elem_type = static_cast<int32_t>(t.dtype());
    if (rank) *rank = t.rank();
    if (shape) *shape = t.shape().data();
    if (data) *data = plain ? t.raw() : nullptr;
    if (data_bytes) *data_bytes = plain ? t.nbytes() : 0;
  });
}

MRT_API void MrtReleaseValue(MrtValue* value) {
  mrt::ExitPass pass;  // device memory goes back to its EP
  delete value;
}

MRT_API MrtStatus* MrtValueGetKind(const MrtValue* value, MrtValueKind* kind) {
  return guarded([&] {
    MRT_REQUIRE_ARG(value);
    MRT_REQUIRE_ARG(kind);
    const mrt::Tensor& t = value->tensor;
    *kind = t.is_sequence() ? MRT_VALUE_SEQUENCE : t.is_none() ? MRT_VALUE_NONE : t.is_map() ? MRT_VALUE_MAP : MRT_VALUE_TENSOR;
  });
}

MRT_API MrtStatus* MrtCreateStringTensor(const int64_t* shape, size_t rank, const char* const* strings,
                                         const size_t* lengths, MrtValue** out) {
  return guarded([&] {
    MRT_REQUIRE_ARG(out);
    mrt::Shape s = to_shape(shape, rank);
    mrt::Tensor t(mrt::DType::kString, s);
    if (t.numel() && (!strings || !lengths)) mrt::fail(MRT_INVALID_ARGUMENT, "strings and lengths must not be NULL");
    for (int64_t i = 0; i < t.numel(); ++i) {
      if (!strings[i] && lengths[i]) mrt::fail(MRT_INVALID_ARGUMENT, "string ", i, " is NULL");
      mrt::set_string(t, i, lengths[i] ? std::string(strings[i], lengths[i]) : std::string());
    }
    *out = new MrtValue{std::move(t)};
  });
}

MRT_API MrtStatus* MrtValueGetString(const MrtValue* value, size_t index, const char** data, size_t* length) {
  return guarded([&] {
    MRT_REQUIRE_ARG(value);
    const mrt::Tensor& t = value->tensor;
    if (t.dtype() != mrt::DType::kString) mrt::fail(MRT_INVALID_ARGUMENT, "the value is ", t.describe(), ", not strings");
    if (index >= static_cast<size_t>(t.numel()))
      mrt::fail(MRT_INVALID_ARGUMENT, "string index ", index, " out of range for ", t.describe());
    const std::string& str = mrt::string_at(t, static_cast<int64_t>(index));
    if (data) *data = str.data();
    if (length) *length = str.size();
  });
}

MRT_API MrtStatus* MrtCreateSequence(int32_t elem_type, const MrtValue* const* items, size_t count, MrtValue** out) {
  return guarded([&] {
    MRT_REQUIRE_ARG(out);
    if (count && !items) mrt::fail(MRT_INVALID_ARGUMENT, "items must not be NULL");
    if (elem_type != 0 && (!mrt::dtype_is_known(elem_type) || !mrt::dtype_is_storable(static_cast<mrt::DType>(elem_type))))
      mrt::fail(MRT_INVALID_ARGUMENT, "element type ", elem_type, " is not supported in a sequence");
    std::vector<mrt::Tensor> tensors;
    for (size_t i = 0; i < count; ++i) {
      if (!items[i]) mrt::fail(MRT_INVALID_ARGUMENT, "sequence item ", i, " is NULL");
      // Items are copied: a borrowed tensor's memory belongs to the caller only until this returns.
      tensors.push_back(items[i]->tensor.clone());
    }
    *out = new MrtValue{mrt::Tensor::sequence(static_cast<mrt::DType>(elem_type), std::move(tensors))};
  });
}

MRT_API MrtStatus* MrtCreateNone(MrtValue** out) {
  return guarded([&] {
    MRT_REQUIRE_ARG(out);
    *out = new MrtValue{mrt::Tensor::none()};
  });
}

MRT_API MrtStatus* MrtValueGetSequenceInfo(const MrtValue* value, size_t* count, int32_t* elem_type) {
  return guarded([&] {
    MRT_REQUIRE_ARG(value);
    const mrt::Sequence& s = value->tensor.seq();
    if (count) *count = s.items.size();
    if (elem_type) *elem_type = static_cast<int32_t>(s.elem_type);
  });
}

MRT_API MrtStatus* MrtValueGetSequenceItem(const MrtValue* value, size_t index, MrtValue** item) {
  return guarded([&] {
    MRT_REQUIRE_ARG(value);
    MRT_REQUIRE_ARG(item);
    const mrt::Sequence& s = value->tensor.seq();
    if (index >= s.items.size())
      mrt::fail(MRT_INVALID_ARGUMENT, "item ", index, " out of range for a sequence of ", s.items.size());
    *item = new MrtValue{s.items[index].clone()};
  });
}

MRT_API MrtStatus* MrtValueGetMap(const MrtValue* value, MrtValue** keys, MrtValue** values) {
  return guarded([&] {
    MRT_REQUIRE_ARG(value);
    const mrt::Tensor& t = value->tensor;
    std::unique_ptr<MrtValue> k(new MrtValue{t.map_keys().clone()});
    std::unique_ptr<MrtValue> v(new MrtValue{t.map_values().clone()});
    if (keys) *keys = k.release();
    if (values) *values = v.release();
  });
}

MRT_API MrtStatus* MrtSessionGetIoType(const MrtSession* session, MrtIoKind kind, size_t index, const char** type) {
  return guarded([&] {
    MRT_REQUIRE_ARG(session);
    MRT_REQUIRE_ARG(type);
    *type = io_info(session, kind, index).type.c_str();  // (the session fills it for tensors too)
  });
}

}  // extern "C"
