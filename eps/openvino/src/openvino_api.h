// The part of OpenVINO's C API this EP uses, resolved at run time from the `openvino` wheel's
// libopenvino_c (never linked, never bundled): without OpenVINO, or with another release than
// the one the EP was built against, the EP reports no devices and mosaicrt keeps working.
#pragma once
#include <string>

#include "openvino/c/openvino.h"

namespace mrt_ov {

struct OpenVino {
  decltype(&ov_get_openvino_version) get_version = nullptr;
  decltype(&ov_version_free) version_free = nullptr;
  decltype(&ov_core_create) core_create = nullptr;
  decltype(&ov_core_free) core_free = nullptr;
  decltype(&ov_core_get_available_devices) available_devices = nullptr;
  decltype(&ov_available_devices_free) available_devices_free = nullptr;
  decltype(&ov_core_read_model_from_memory_buffer) read_model = nullptr;
  decltype(&ov_model_free) model_free = nullptr;
  decltype(&ov_core_compile_model) compile_model = nullptr;
  decltype(&ov_compiled_model_free) compiled_model_free = nullptr;
  decltype(&ov_compiled_model_export_model) export_model = nullptr;
  decltype(&ov_core_import_model) import_model = nullptr;
  decltype(&ov_core_set_properties) set_properties = nullptr;
  decltype(&ov_compiled_model_create_infer_request) create_infer_request = nullptr;
  decltype(&ov_infer_request_free) infer_request_free = nullptr;
  decltype(&ov_infer_request_set_input_tensor_by_index) set_input = nullptr;
  decltype(&ov_infer_request_get_output_tensor_by_index) get_output = nullptr;
  decltype(&ov_infer_request_infer) infer = nullptr;
  decltype(&ov_tensor_create_from_host_ptr) tensor_from_host = nullptr;
  decltype(&ov_tensor_get_shape) tensor_shape = nullptr;
  decltype(&ov_tensor_get_element_type) tensor_type = nullptr;
  decltype(&ov_tensor_data) tensor_data = nullptr;
  decltype(&ov_tensor_free) tensor_free = nullptr;
  decltype(&ov_shape_create) shape_create = nullptr;
  decltype(&ov_shape_free) shape_free = nullptr;
  decltype(&ov_get_last_err_msg) last_error = nullptr;

  ov_core_t* core = nullptr;  // one per process, created on first use
  std::string version;        // the loaded OpenVINO's build number
  std::string problem;        // why OpenVINO is unusable ("" when it is usable)

  // "<what> failed: <OpenVINO's message>".
  std::string error(const char* what, ov_status_e status) const;
};

// Loads OpenVINO once (thread safe). Never throws; check `problem`.
OpenVino& openvino();

}  // namespace mrt_ov
