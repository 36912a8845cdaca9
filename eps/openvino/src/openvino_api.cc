#include "openvino_api.h"

#include <dlfcn.h>

#include <cstdlib>
#include <mutex>

#ifndef MRT_OPENVINO_BUILT_WITH
#error "MRT_OPENVINO_BUILT_WITH (the OpenVINO release the EP is built against) must be defined"
#endif
#ifndef MRT_OPENVINO_C_LIBRARY
#error "MRT_OPENVINO_C_LIBRARY (file name of libopenvino_c of that release) must be defined"
#endif

namespace mrt_ov {

namespace {

std::string directory_of_this_library() {
  Dl_info info{};
  if (!dladdr(reinterpret_cast<void*>(&directory_of_this_library), &info) || !info.dli_fname) return ".";
  std::string path = info.dli_fname;
  size_t slash = path.find_last_of('/');
  return slash == std::string::npos ? "." : path.substr(0, slash);
}

template <class F>
bool resolve(void* lib, const char* name, F& fn, std::string& missing) {
  fn = reinterpret_cast<F>(dlsym(lib, name));
  if (!fn) missing += (missing.empty() ? "" : ", ") + std::string(name);
  return fn != nullptr;
}

void load(OpenVino& ov) {
  // 1. MOSAICRT_OPENVINO_LIBS (a folder holding the openvino wheel's libs), 2. the wheel installed
  // next to this package (site-packages/openvino/libs), 3. the dynamic loader's search path.
  std::string candidates[3];
  if (const char* env = std::getenv("MOSAICRT_OPENVINO_LIBS")) candidates[0] = std::string(env) + "/" + MRT_OPENVINO_C_LIBRARY;
  candidates[1] = directory_of_this_library() + "/../openvino/libs/" + MRT_OPENVINO_C_LIBRARY;
  candidates[2] = MRT_OPENVINO_C_LIBRARY;
  void* lib = nullptr;
  std::string tried;
  for (const auto& c : candidates) {
    if (c.empty()) continue;
    lib = dlopen(c.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (lib) break;
    const char* e = dlerror();
    tried += "\n  " + c + ": " + (e ? e : "not found");
  }
  if (!lib) {
    ov.problem = std::string("OpenVINO ") + MRT_OPENVINO_BUILT_WITH + " (" + MRT_OPENVINO_C_LIBRARY +
                 ") was not found; pip install openvino==" + MRT_OPENVINO_BUILT_WITH + tried;
    return;
  }
  std::string missing;
  resolve(lib, "ov_get_openvino_version", ov.get_version, missing);
  resolve(lib, "ov_version_free", ov.version_free, missing);
  resolve(lib, "ov_core_create", ov.core_create, missing);
  resolve(lib, "ov_core_free", ov.core_free, missing);
  resolve(lib, "ov_core_get_available_devices", ov.available_devices, missing);
  resolve(lib, "ov_available_devices_free", ov.available_devices_free, missing);
  resolve(lib, "ov_core_read_model_from_memory_buffer", ov.read_model, missing);
  resolve(lib, "ov_model_free", ov.model_free, missing);
  resolve(lib, "ov_core_compile_model", ov.compile_model, missing);
  resolve(lib, "ov_compiled_model_free", ov.compiled_model_free, missing);
  resolve(lib, "ov_compiled_model_export_model", ov.export_model, missing);
  resolve(lib, "ov_core_import_model", ov.import_model, missing);
  resolve(lib, "ov_core_set_properties", ov.set_properties, missing);
  resolve(lib, "ov_compiled_model_create_infer_request", ov.create_infer_request, missing);
  resolve(lib, "ov_infer_request_free", ov.infer_request_free, missing);
  resolve(lib, "ov_infer_request_set_input_tensor_by_index", ov.set_input, missing);
  resolve(lib, "ov_infer_request_get_output_tensor_by_index", ov.get_output, missing);
  resolve(lib, "ov_infer_request_infer", ov.infer, missing);
  resolve(lib, "ov_tensor_create_from_host_ptr", ov.tensor_from_host, missing);
  resolve(lib, "ov_tensor_get_shape", ov.tensor_shape, missing);
  resolve(lib, "ov_tensor_get_element_type", ov.tensor_type, missing);
  resolve(lib, "ov_tensor_data", ov.tensor_data, missing);
  resolve(lib, "ov_tensor_free", ov.tensor_free, missing);
  resolve(lib, "ov_shape_create", ov.shape_create, missing);
  resolve(lib, "ov_shape_free", ov.shape_free, missing);
  resolve(lib, "ov_get_last_err_msg", ov.last_error, missing);
  if (!missing.empty()) {
    ov.problem = "the OpenVINO C library lacks " + missing + "; this EP needs OpenVINO " + MRT_OPENVINO_BUILT_WITH;
    return;
  }
  ov_version_t v{};
  if (ov.get_version(&v) == OK) {
    ov.version = v.buildNumber ? v.buildNumber : "";
    ov.version_free(&v);
  }
  if (ov.version.rfind(MRT_OPENVINO_BUILT_WITH, 0) != 0) {
    ov.problem = "OpenVINO " + ov.version + " is installed, but this EP was built against OpenVINO " +
                 MRT_OPENVINO_BUILT_WITH + "; pip install openvino==" + MRT_OPENVINO_BUILT_WITH;
    return;
  }
  ov_status_e st = ov.core_create(&ov.core);
  if (st != OK) ov.problem = ov.error("creating the OpenVINO core", st);
}

}  // namespace

std::string OpenVino::error(const char* what, ov_status_e status) const {
  std::string msg = std::string(what) + " failed (OpenVINO status " + std::to_string(static_cast<int>(status)) + ")";
  const char* detail = last_error ? last_error() : nullptr;
  if (detail && *detail) msg += ": " + std::string(detail);
  return msg;
}

OpenVino& openvino() {
  static OpenVino ov;
  static std::once_flag once;
  std::call_once(once, [] { load(ov); });
  return ov;
}

}  // namespace mrt_ov
