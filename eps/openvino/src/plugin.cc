// mosaicrt OpenVINO execution provider (EP ABI 1.1): claims runs of ONNX nodes as groups, and
// compiles each group through OpenVINO's ONNX frontend from the subgraph's ONNX bytes
// (SubgraphToOnnx). Provider options (names as onnxruntime's OpenVINO EP):
//   device_type      CPU (default), GPU, NPU, or any OpenVINO device string (AUTO:GPU,CPU, ...)
//   precision        f32 | f16 | bf16 (INFERENCE_PRECISION_HINT; default: f32 on CPU, else the device's)
//   num_of_threads   INFERENCE_NUM_THREADS (default: the session's intra-op thread count)
//   num_streams      NUM_STREAMS (default 1: one request at a time, latency)
//   enable_cpu_pinning  true | false (ENABLE_CPU_PINNING; default false: pinned threads suffer most
//                    when other processes share the cores, and onnxruntime does not pin either)
//   cache_dir        compiled-blob cache: one file per partition, keyed by the partition's ONNX bytes,
//                    device, options, EP and OpenVINO versions, with a SHA-256 of the blob; a blob
//                    whose key or checksum does not match is not loaded (the partition is recompiled
//                    and the file rewritten, with one line on stderr saying why)
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iterator>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <vector>

#include "mosaicrt/ep.h"
#include "openvino_api.h"
#include "sha256.h"

#ifndef MRT_OPENVINO_EP_VERSION
#define MRT_OPENVINO_EP_VERSION "0.0.0"
#endif

namespace {

using mrt_ov::OpenVino;
using mrt_ov::openvino;
using mrt_ov::Sha256;

const MrtEpApi* g_api = nullptr;
constexpr const char* kName = "OpenVINOExecutionProvider";

MrtStatus* error(MrtErrorCode code, const std::string& msg) { return g_api->CreateStatus(code, msg.c_str()); }

// ONNX TensorProto.DataType -> OpenVINO element type (DYNAMIC: not supported here).
ov_element_type_e ov_type(int32_t onnx) {
  switch (onnx) {
    case 1: return F32;
    case 2: return U8;
    case 3: return I8;
    case 4: return U16;
    case 5: return I16;
    case 6: return I32;
    case 7: return I64;
    case 9: return BOOLEAN;
    case 10: return F16;
    case 11: return F64;
    case 12: return U32;
    case 13: return U64;
    case 16: return BF16;
    default: return DYNAMIC;
  }
}

int32_t onnx_type(ov_element_type_e t) {
  for (int32_t onnx : {1, 2, 3, 4, 5, 6, 7, 9, 10, 11, 12, 13, 16})
    if (ov_type(onnx) == t) return onnx;
  return 0;
}

struct Options {
  std::string device = "CPU", precision, threads, streams = "1", cache_dir;
  bool cpu_pinning = false;
};

struct InferRequests {  // a pool: one request per concurrent run
  std::mutex mutex;
  std::vector<ov_infer_request_t*> free;
};

struct Partition {
  ov_compiled_model_t* compiled = nullptr;
  std::string name;
  size_t inputs = 0, outputs = 0;
  InferRequests requests;
  ~Partition() {
    OpenVino& ov = openvino();
    for (auto* r : requests.free) ov.infer_request_free(r);
    if (compiled) ov.compiled_model_free(compiled);
  }
};

struct Ep {
  MrtEp base;
  Options options;
};

Ep* self(MrtEp* ep) { return reinterpret_cast<Ep*>(ep); }

bool types_supported(const MrtEpValue* values, size_t n) {
  for (size_t i = 0; i < n; ++i)
    if (values[i].name[0] && values[i].elem_type != 0 && ov_type(values[i].elem_type) == DYNAMIC) return false;
  return true;
}

bool claimable(const MrtEpNode& n) {
  if (std::strcmp(n.domain, "") != 0 && std::strcmp(n.domain, "ai.onnx") != 0) return false;
  return types_supported(n.inputs, n.input_count) && types_supported(n.outputs, n.output_count);
}

MrtStatus* ep_groups(MrtEp*, const MrtEpGraph* graph, int32_t* group) {
  // Runs of consecutive claimable nodes (in the topological order the core gives): a run never
  // closes a cycle through nodes outside it; the core splits a run into its connected parts.
  int32_t current = -1, next = 0;
  for (size_t i = 0; i < graph->node_count; ++i) {
    if (!claimable(graph->nodes[i])) {
      current = -1;
      continue;
    }
    if (current < 0) current = next++;
    group[i] = current;
  }
  return nullptr;
}

// ---- compiled-blob cache: "<magic>\n<key>\n<sha256 of blob>\n<blob>" in <cache_dir>/<key>.mrtov ----
constexpr const char* kBlobMagic = "mosaicrt-openvino-blob-1";

bool read_file(const std::string& path, std::string& out) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return false;
  out.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  return true;
}

// The cached blob for `key`, or "" with `why` set when there is none or it cannot be trusted.
std::string load_blob(const std::string& path, const std::string& key, std::string& why) {
  std::string data;
  if (!read_file(path, data)) return "";
  size_t a = data.find('\n'), b = a == std::string::npos ? a : data.find('\n', a + 1),
         c = b == std::string::npos ? b : data.find('\n', b + 1);
  if (c == std::string::npos || data.compare(0, a, kBlobMagic) != 0) {
    why = "not a mosaicrt OpenVINO blob";
    return "";
  }
  if (data.compare(a + 1, b - a - 1, key) != 0) {
    why = "it was compiled from another partition, device, options or version (stale key)";
    return "";
  }
  Sha256 sum;
  sum.update(data.data() + c + 1, data.size() - c - 1);
  if (data.compare(b + 1, c - b - 1, sum.hex()) != 0) {
    why = "its checksum does not match its content (corrupted or tampered)";
    return "";
  }
  return data.substr(c + 1);
}

void store_blob(const OpenVino& ov, ov_compiled_model_t* compiled, const std::string& path, const std::string& key) {
  std::string raw_path = path + ".export", blob;
  if (ov.export_model(compiled, raw_path.c_str()) != OK || !read_file(raw_path, blob)) {
    std::remove(raw_path.c_str());
    return;  // a cache that cannot be written only costs the next session a compile
  }
  std::remove(raw_path.c_str());
  Sha256 sum;
  sum.update(blob);
  std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    out << kBlobMagic << '\n' << key << '\n' << sum.hex() << '\n';
    out.write(blob.data(), static_cast<std::streamsize>(blob.size()));
    if (!out) return;
  }
  std::rename(tmp.c_str(), path.c_str());
}

MrtStatus* ep_compile(MrtEp* base, const MrtEpSubgraph* sg, void** out) {
  OpenVino& ov = openvino();
  if (!ov.problem.empty()) return error(MRT_EP_ERROR, ov.problem);
  const Options& o = self(base)->options;
  const void* bytes = nullptr;
  size_t size = 0;
  if (MrtStatus* st = g_api->SubgraphToOnnx(sg, &bytes, &size)) return st;
  ov_model_t* model = nullptr;
  ov_status_e st = ov.read_model(ov.core, static_cast<const char*>(bytes), size, nullptr, &model);
  if (st != OK) return error(MRT_EP_ERROR, ov.error("reading the partition through OpenVINO's ONNX frontend", st));
  std::string threads = o.threads.empty() ? std::to_string(sg->intra_op_threads > 0 ? sg->intra_op_threads : 1)
                                          : o.threads;
  std::vector<const char*> props = {"PERFORMANCE_HINT", "LATENCY", "NUM_STREAMS", o.streams.c_str()};
  if (o.device.rfind("CPU", 0) == 0) {
    props.push_back("INFERENCE_NUM_THREADS");
    props.push_back(threads.c_str());
    props.push_back("ENABLE_CPU_PINNING");
    props.push_back(o.cpu_pinning ? "YES" : "NO");
  }
  // f32 unless asked otherwise: OpenVINO's CPU plugin would pick bf16 on CPUs that have it.
  std::string precision = o.precision.empty() && o.device.rfind("CPU", 0) == 0 ? "f32" : o.precision;
  if (!precision.empty()) {
    props.push_back("INFERENCE_PRECISION_HINT");
    props.push_back(precision.c_str());
  }
  if (props.size() > 10) return error(MRT_INTERNAL, "more OpenVINO properties than the compile call passes");
  props.resize(10, nullptr);  // the variadic call passes 10; OpenVINO reads the first n
  auto p = std::make_unique<Partition>();
  p->name = sg->name;
  p->inputs = sg->input_count;
  p->outputs = sg->output_count;
  size_t n_props = 0;
  while (n_props < props.size() && props[n_props]) ++n_props;
  std::string cache_path, key;
  if (!o.cache_dir.empty()) {
    Sha256 k;
    k.update(bytes, size);
    for (size_t i = 0; i < n_props; ++i) k.update(std::string(props[i]) + '\0');
    k.update(o.device + '\0' + MRT_OPENVINO_EP_VERSION + '\0' + ov.version);
    key = k.hex();
    cache_path = o.cache_dir + "/" + key + ".mrtov";
    std::string why;
    std::string blob = load_blob(cache_path, key, why);
    if (!blob.empty()) {
      // An imported blob takes its run-time settings (precision, threads) from the core's
      // settings for the device: set them to this EP's, under a lock shared by every import.
      static std::mutex import_mutex;
      std::lock_guard<std::mutex> lock(import_mutex);
      std::vector<ov_property_t> settings;
      for (size_t i = 0; i + 1 < n_props; i += 2) settings.push_back(ov_property_t{props[i], props[i + 1]});
      ov_status_e set = ov.set_properties(ov.core, o.device.c_str(), settings.size(), settings.data());
      if (set == OK && ov.import_model(ov.core, blob.data(), blob.size(), o.device.c_str(), &p->compiled) == OK) {
        ov.model_free(model);
        *out = p.release();
        return nullptr;
      }
      p->compiled = nullptr;
      why = "OpenVINO could not import it";
    }
    if (!why.empty())
      std::fprintf(stderr, "mosaicrt OpenVINO EP: compiled blob %s of partition '%s' not used: %s; recompiling\n",
                   cache_path.c_str(), sg->name, why.c_str());
  }
  st = ov.compile_model(ov.core, model, o.device.c_str(), n_props, &p->compiled, props[0], props[1], props[2],
                        props[3], props[4], props[5], props[6], props[7], props[8], props[9]);
  ov.model_free(model);
  if (st != OK) {
    p->compiled = nullptr;
    return error(MRT_EP_ERROR, ov.error(("compiling the partition for OpenVINO device " + o.device).c_str(), st));
  }
  if (!cache_path.empty()) store_blob(ov, p->compiled, cache_path, key);
  *out = p.release();
  return nullptr;
}

struct Tensors {  // OpenVINO tensors of one run, freed on every path
  std::vector<ov_tensor_t*> list;
  ~Tensors() {
    for (auto* t : list) openvino().tensor_free(t);
  }
};

void run(Partition& p, MrtEpKernelContext* ctx) {
  OpenVino& ov = openvino();
  ov_infer_request_t* request = nullptr;
  {
    std::lock_guard<std::mutex> lock(p.requests.mutex);
    if (!p.requests.free.empty()) {
      request = p.requests.free.back();
      p.requests.free.pop_back();
    }
  }
  if (!request) {
    ov_status_e st = ov.create_infer_request(p.compiled, &request);
    if (st != OK) throw std::runtime_error(ov.error("creating an infer request", st));
  }
  struct Return {
    Partition& p;
    ov_infer_request_t* r;
    ~Return() {
      std::lock_guard<std::mutex> lock(p.requests.mutex);
      p.requests.free.push_back(r);
    }
  } give_back{p, request};
  Tensors tensors;
  for (size_t i = 0; i < p.inputs; ++i) {
    MrtEpTensor t{};
    if (!g_api->KernelContextGetInput(ctx, i, &t)) throw std::runtime_error("input " + std::to_string(i) + " is missing");
    ov_shape_t shape{};
    ov_status_e st = ov.shape_create(static_cast<int64_t>(t.rank), t.dims, &shape);
    if (st != OK) throw std::runtime_error(ov.error("describing an input shape", st));
    ov_tensor_t* tensor = nullptr;
    static char empty_buffer[64];  // OpenVINO wants a pointer even for an empty tensor
    st = ov.tensor_from_host(ov_type(t.elem_type), shape, t.data ? t.data : empty_buffer, &tensor);
    ov.shape_free(&shape);
    if (st != OK) throw std::runtime_error(ov.error("wrapping an input", st));
    tensors.list.push_back(tensor);
    st = ov.set_input(request, i, tensor);
    if (st != OK) throw std::runtime_error(ov.error(("setting input " + std::to_string(i)).c_str(), st));
  }
  ov_status_e st = ov.infer(request);
  if (st != OK) throw std::runtime_error(ov.error("inference", st));
  for (size_t i = 0; i < p.outputs; ++i) {
    ov_tensor_t* tensor = nullptr;
    st = ov.get_output(request, i, &tensor);
    if (st != OK) throw std::runtime_error(ov.error(("reading output " + std::to_string(i)).c_str(), st));
    tensors.list.push_back(tensor);
    ov_shape_t shape{};
    ov_element_type_e type = DYNAMIC;
    void* data = nullptr;
    if ((st = ov.tensor_shape(tensor, &shape)) != OK || (st = ov.tensor_type(tensor, &type)) != OK)
      throw std::runtime_error(ov.error("reading an output's shape", st));
    std::vector<int64_t> dims(shape.dims, shape.dims + shape.rank);
    ov.shape_free(&shape);
    int32_t onnx = onnx_type(type);
    if (!onnx) throw std::runtime_error("output " + std::to_string(i) + " has an element type mosaicrt does not know");
    MrtEpTensor out{};
    if (MrtStatus* s = g_api->KernelContextAllocateOutput(ctx, i, onnx, dims.data(), dims.size(), &out)) {
      (void)s;
      throw std::runtime_error("allocating output " + std::to_string(i) + " failed");
    }
    if (out.data_bytes) {
      if ((st = ov.tensor_data(tensor, &data)) != OK) throw std::runtime_error(ov.error("reading an output", st));
      std::memcpy(out.data, data, out.data_bytes);
    }
  }
}

MrtStatus* ep_compute(MrtEp*, void* kernel, MrtEpKernelContext* ctx) {
  auto* p = static_cast<Partition*>(kernel);
  try {
    run(*p, ctx);
    return nullptr;
  } catch (const std::exception& e) {
    return error(MRT_RUNTIME_ERROR, "partition '" + p->name + "': " + e.what());
  }
}

void ep_release(MrtEp*, void* kernel) { delete static_cast<Partition*>(kernel); }
const char* ep_name(const MrtEp*) { return kName; }

// ---- factory: devices OpenVINO sees ----
struct Factory {
  MrtEpFactory base;
  std::vector<MrtHardwareDevice> own;  // GPU / NPU as OpenVINO names them
  std::vector<std::string> own_names;
  std::vector<std::string> ov_names;   // OpenVINO device name of each own device
  bool cpu = false;
  bool probed = false;
};

void probe(Factory& f) {
  if (f.probed) return;
  f.probed = true;
  OpenVino& ov = openvino();
  if (!ov.problem.empty()) return;  // no devices; the Python package warns once with the reason
  ov_available_devices_t devices{};
  if (ov.available_devices(ov.core, &devices) != OK) return;
  for (size_t i = 0; i < devices.size; ++i) {
    std::string d = devices.devices[i];
    if (d == "CPU") {
      f.cpu = true;
    } else if (d.rfind("GPU", 0) == 0 || d.rfind("NPU", 0) == 0) {
      f.ov_names.push_back(d);
      f.own_names.push_back("OpenVINO " + d);
    }
  }
  ov.available_devices_free(&devices);
  f.own.resize(f.ov_names.size());
  for (size_t i = 0; i < f.own.size(); ++i) {
    MrtHardwareDevice& h = f.own[i];
    h.type = f.ov_names[i].rfind("GPU", 0) == 0 ? MRT_DEVICE_GPU : MRT_DEVICE_NPU;
    h.vendor_id = 0x8086;
    h.vendor = "Intel";
    h.name = f.own_names[i].c_str();
  }
}

const char* f_name(const MrtEpFactory*) { return kName; }
const char* f_vendor(const MrtEpFactory*) { return "mosaicrt"; }
const char* f_version(const MrtEpFactory*) { return MRT_OPENVINO_EP_VERSION; }

size_t f_own(MrtEpFactory* base, const MrtHardwareDevice** devices) {
  auto* f = reinterpret_cast<Factory*>(base);
  probe(*f);
  *devices = f->own.data();
  return f->own.size();
}

MrtStatus* f_supported(MrtEpFactory* base, const MrtHardwareDevice* const* devices, size_t n, uint8_t* supported) {
  auto* f = reinterpret_cast<Factory*>(base);
  probe(*f);
  for (size_t i = 0; i < n; ++i) {
    bool own = !f->own.empty() && devices[i] >= f->own.data() && devices[i] < f->own.data() + f->own.size();
    supported[i] = own || (f->cpu && devices[i]->type == MRT_DEVICE_CPU);
  }
  return nullptr;
}

MrtStatus* f_create_ep(MrtEpFactory* base, const MrtHardwareDevice* const* devices, size_t n_devices,
                       const char* const* keys, const char* const* values, size_t n_options, MrtEp** out) {
  auto* f = reinterpret_cast<Factory*>(base);
  OpenVino& ov = openvino();
  if (!ov.problem.empty()) return error(MRT_EP_ERROR, ov.problem);
  auto ep = std::make_unique<Ep>();
  // Without device_type: the first chosen device (the CPU unless only a GPU/NPU was chosen).
  for (size_t i = 0; i < n_devices; ++i) {
    if (devices[i]->type == MRT_DEVICE_CPU) break;
    for (size_t k = 0; k < f->own.size(); ++k)
      if (devices[i] == &f->own[k]) {
        ep->options.device = f->ov_names[k];
        i = n_devices;
        break;
      }
  }
  for (size_t i = 0; i < n_options; ++i) {
    std::string k = keys[i], v = values[i];
    if (k == "device_type") ep->options.device = v;
    else if (k == "precision") {
      std::string p;
      for (char c : v) p += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
      if (p == "fp32") p = "f32";
      if (p == "fp16") p = "f16";
      if (p != "f32" && p != "f16" && p != "bf16")
        return error(MRT_INVALID_ARGUMENT, "precision must be f32, f16 or bf16, got '" + v + "'");
      ep->options.precision = p;
    } else if (k == "num_of_threads" || k == "num_streams") {
      bool digits = !v.empty() && v.find_first_not_of("0123456789") == std::string::npos;
      if (!digits || std::stol(v) < 1) return error(MRT_INVALID_ARGUMENT, k + " must be a positive integer, got '" + v + "'");
      (k == "num_streams" ? ep->options.streams : ep->options.threads) = v;
    } else if (k == "cache_dir") {
      ep->options.cache_dir = v;
    } else if (k == "enable_cpu_pinning") {
      if (v != "true" && v != "false" && v != "1" && v != "0")
        return error(MRT_INVALID_ARGUMENT, "enable_cpu_pinning must be true or false, got '" + v + "'");
      ep->options.cpu_pinning = v == "true" || v == "1";
    } else {
      return error(MRT_INVALID_ARGUMENT, "unknown provider option '" + k +
                                             "' (OpenVINOExecutionProvider takes device_type, precision, "
                                             "num_of_threads, num_streams, enable_cpu_pinning, cache_dir)");
    }
  }
  MrtEp b{};
  b.abi_version = MRT_EP_ABI_VERSION;
  b.GetName = ep_name;
  b.Compute = ep_compute;
  b.ReleaseKernel = ep_release;
  b.GetCapabilityGroups = ep_groups;
  b.Compile = ep_compile;
  ep->base = b;
  *out = &ep.release()->base;
  return nullptr;
}

void f_release_ep(MrtEpFactory*, MrtEp* ep) { delete reinterpret_cast<Ep*>(ep); }

}  // namespace

extern "C" {

MRT_EP_EXPORT uint32_t MrtEpGetAbiVersion(void) { return MRT_EP_ABI_VERSION; }

MRT_EP_EXPORT MrtStatus* MrtEpCreateFactories(const MrtEpApi* api, const char*, MrtEpFactory** factories,
                                              size_t capacity, size_t* count) {
  g_api = api;
  if (capacity < 1) return api->CreateStatus(MRT_INVALID_ARGUMENT, "no room for a factory");
  auto* f = new Factory();
  f->base = MrtEpFactory{MRT_EP_ABI_VERSION, f_name, f_vendor, f_version, f_own, f_supported, f_create_ep,
                         f_release_ep};
  factories[0] = &f->base;
  *count = 1;
  return nullptr;
}

MRT_EP_EXPORT void MrtEpReleaseFactory(MrtEpFactory* factory) { delete reinterpret_cast<Factory*>(factory); }

}  // extern "C"
