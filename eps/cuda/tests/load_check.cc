// Native check of the CUDA EP library without the core: dlopen it, drive the ep.h entry
// points through a test-only MrtEpApi and simulated devices, and
//   --expect-no-gpu : assert that no device is supported and CreateEp fails cleanly;
//   --expect-gpu    : assert that the simulated NVIDIA GPU is supported and run a few kernels
//                     against CPU references through a test kernel context.
// Usage: cuda_ep_load_check <libmosaicrt_ep_cuda.so> [--expect-no-gpu|--expect-gpu]
#include <dlfcn.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "mosaicrt/ep.h"

// The core's status object, test edition.
struct MrtStatus {
  MrtErrorCode code;
  std::string message;
};

namespace {

int g_failures = 0;
#define CHECK(cond, ...)                                  \
  do {                                                    \
    if (!(cond)) {                                        \
      std::fprintf(stderr, "FAIL %s:%d: ", __FILE__, __LINE__); \
      std::fprintf(stderr, __VA_ARGS__);                  \
      std::fprintf(stderr, "\n");                         \
      ++g_failures;                                       \
    }                                                     \
  } while (0)

MrtStatus* create_status(MrtErrorCode code, const char* msg) { return new MrtStatus{code, msg ? msg : ""}; }

std::string take_message(MrtStatus* s) {
  if (!s) return "";
  std::string m = "[" + std::to_string(s->code) + "] " + s->message;
  delete s;
  return m;
}

// ---- test kernel context ----
struct Tensor {
  std::vector<int64_t> dims;
  std::vector<float> data;
};

struct MrtEpKernelContextImpl {
  std::vector<const Tensor*> inputs;  // null = omitted
  std::vector<Tensor> outputs;
};

size_t ctx_in_count(const MrtEpKernelContext* c) {
  return reinterpret_cast<const MrtEpKernelContextImpl*>(c)->inputs.size();
}
size_t ctx_out_count(const MrtEpKernelContext* c) {
  return reinterpret_cast<const MrtEpKernelContextImpl*>(c)->outputs.size();
}
int ctx_input(const MrtEpKernelContext* c, size_t i, MrtEpTensor* out) {
  auto* k = reinterpret_cast<const MrtEpKernelContextImpl*>(c);
  if (i >= k->inputs.size() || !k->inputs[i]) return 0;
  const Tensor& t = *k->inputs[i];
  *out = MrtEpTensor{1, t.dims.size(), t.dims.data(), const_cast<float*>(t.data.data()), t.data.size() * 4};
  return 1;
}
MrtStatus* ctx_alloc(MrtEpKernelContext* c, size_t i, int32_t type, const int64_t* dims, size_t rank,
                     MrtEpTensor* out) {
  auto* k = reinterpret_cast<MrtEpKernelContextImpl*>(c);
  if (i >= k->outputs.size() || type != 1) return create_status(MRT_INVALID_ARGUMENT, "bad output request");
  Tensor& t = k->outputs[i];
  t.dims.assign(dims, dims + rank);
  size_t n = 1;
  for (size_t d = 0; d < rank; ++d) n *= static_cast<size_t>(dims[d]);
  t.data.assign(n, NAN);
  *out = MrtEpTensor{1, rank, t.dims.data(), t.data.data(), n * 4};
  return nullptr;
}
int32_t ctx_threads(const MrtEpKernelContext*) { return 1; }

MrtEpApi make_api(uint32_t version) {
  MrtEpApi api{};
  api.abi_version = version;
  api.CreateStatus = create_status;
  api.KernelContextGetInputCount = ctx_in_count;
  api.KernelContextGetOutputCount = ctx_out_count;
  api.KernelContextGetInput = ctx_input;
  api.KernelContextAllocateOutput = ctx_alloc;
  api.KernelContextGetThreadCount = ctx_threads;
  return api;
}

// ---- simulated devices ----
struct FakeDevice {
  std::vector<const char*> keys, values;
  MrtHardwareDevice dev{};
};

FakeDevice nvidia_gpu() {
  FakeDevice f;
  f.keys = {"pci_bus_id", "cuda_device_ordinal"};
  f.values = {"", "0"};
  f.dev = MrtHardwareDevice{MRT_DEVICE_GPU, 0x10de, 0x2335, "NVIDIA", "simulated NVIDIA GPU", 1, nullptr, nullptr};
  return f;
}

// ---- kernel checks (GPU only) ----
struct NodeSpec {
  std::string op;
  int64_t opset = 17;
  std::vector<Tensor> inputs;
  std::vector<bool> constant;  // per input
  size_t outputs = 1;
  std::vector<MrtEpAttribute> attrs;
};

std::vector<float> rand_vec(size_t n, unsigned seed) {
  std::mt19937 g(seed);
  std::uniform_real_distribution<float> u(-1.f, 1.f);
  std::vector<float> v(n);
  for (float& x : v) x = u(g);
  return v;
}

Tensor rand_tensor(std::vector<int64_t> dims, unsigned seed) {
  size_t n = 1;
  for (int64_t d : dims) n *= static_cast<size_t>(d);
  return Tensor{dims, rand_vec(n, seed)};
}

// Runs one node on the EP; returns its outputs (empty on failure, with a CHECK failure).
std::vector<Tensor> run_node(MrtEp* ep, const NodeSpec& spec) {
  std::vector<MrtEpValue> in_vals(spec.inputs.size());
  std::vector<MrtEpTensor> consts(spec.inputs.size());
  std::vector<std::string> names;
  for (size_t i = 0; i < spec.inputs.size(); ++i) names.push_back("in" + std::to_string(i));
  for (size_t i = 0; i < spec.inputs.size(); ++i) {
    const Tensor& t = spec.inputs[i];
    in_vals[i] = MrtEpValue{names[i].c_str(), 1, static_cast<int64_t>(t.dims.size()), t.dims.data(), nullptr};
    if (i < spec.constant.size() && spec.constant[i]) {
      consts[i] = MrtEpTensor{1, t.dims.size(), t.dims.data(), const_cast<float*>(t.data.data()), t.data.size() * 4};
      in_vals[i].constant_value = &consts[i];
    }
  }
  std::vector<MrtEpValue> out_vals(spec.outputs, MrtEpValue{"out", 1, -1, nullptr, nullptr});
  MrtEpNode node{spec.op.c_str(),   spec.op.c_str(),  "", spec.opset, in_vals.size(), in_vals.data(), out_vals.size(),
                 out_vals.data(), spec.attrs.size(), spec.attrs.data()};
  MrtEpGraph graph{1, &node};
  uint8_t take = 0;
  CHECK(ep->GetCapability(ep, &graph, &take) == nullptr, "GetCapability failed for %s", spec.op.c_str());
  CHECK(take == 1, "the EP does not take %s", spec.op.c_str());
  void* kernel = nullptr;
  std::string err = take_message(ep->CreateKernel(ep, &node, &kernel));
  CHECK(err.empty(), "CreateKernel(%s): %s", spec.op.c_str(), err.c_str());
  if (!err.empty()) return {};
  MrtEpKernelContextImpl ctx;
  for (const Tensor& t : spec.inputs) ctx.inputs.push_back(&t);
  ctx.outputs.resize(spec.outputs);
  for (int run = 0; run < 2; ++run) {  // the second run reuses pooled memory and device constants
    err = take_message(ep->Compute(ep, kernel, reinterpret_cast<MrtEpKernelContext*>(&ctx)));
    CHECK(err.empty(), "Compute(%s): %s", spec.op.c_str(), err.c_str());
  }
  ep->ReleaseKernel(ep, kernel);
  return ctx.outputs;
}

void expect_close(const char* what, const Tensor& got, const std::vector<int64_t>& dims,
                  const std::vector<float>& want, float tol = 1e-4f) {
  CHECK(got.dims == dims, "%s: wrong output shape", what);
  if (got.data.size() != want.size()) return;
  double worst = 0;
  for (size_t i = 0; i < want.size(); ++i) worst = std::max(worst, double(std::fabs(got.data[i] - want[i])));
  CHECK(worst <= tol * (1 + 0), "%s: max abs error %g > %g", what, worst, double(tol));
  std::printf("  %-28s max abs err %.3g\n", what, worst);
}

MrtEpAttribute ints_attr(const char* name, const std::vector<int64_t>& v) {
  MrtEpAttribute a{};
  a.name = name;
  a.type = MRT_ATTR_INTS;
  a.count = v.size();
  a.ints = v.data();
  return a;
}
MrtEpAttribute int_attr(const char* name, int64_t v) {
  MrtEpAttribute a{};
  a.name = name;
  a.type = MRT_ATTR_INT;
  a.i = v;
  return a;
}

void kernel_checks(MrtEp* ep) {
  {  // batched MatMul with a broadcast batch: [2,1,3,4] x [3,4,5] -> [2,3,3,5]
    NodeSpec s{"MatMul", 13, {rand_tensor({2, 1, 3, 4}, 1), rand_tensor({3, 4, 5}, 2)}, {false, true}};
    auto out = run_node(ep, s);
    std::vector<float> want(2 * 3 * 3 * 5);
    for (int b0 = 0; b0 < 2; ++b0)
      for (int b1 = 0; b1 < 3; ++b1)
        for (int i = 0; i < 3; ++i)
          for (int j = 0; j < 5; ++j) {
            float acc = 0;
            for (int k = 0; k < 4; ++k) acc += s.inputs[0].data[(b0 * 3 + i) * 4 + k] * s.inputs[1].data[(b1 * 4 + k) * 5 + j];
            want[((b0 * 3 + b1) * 3 + i) * 5 + j] = acc;
          }
    if (!out.empty()) expect_close("MatMul broadcast batch", out[0], {2, 3, 3, 5}, want);
  }
  {  // Gemm transB with a row bias: [4,6] x [3,6]^T + [3]
    std::vector<MrtEpAttribute> attrs{int_attr("transB", 1)};
    NodeSpec s{"Gemm", 13, {rand_tensor({4, 6}, 3), rand_tensor({3, 6}, 4), rand_tensor({3}, 5)}, {false, true, true}, 1,
               attrs};
    auto out = run_node(ep, s);
    std::vector<float> want(12);
    for (int i = 0; i < 4; ++i)
      for (int j = 0; j < 3; ++j) {
        float acc = s.inputs[2].data[j];
        for (int k = 0; k < 6; ++k) acc += s.inputs[0].data[i * 6 + k] * s.inputs[1].data[j * 6 + k];
        want[i * 3 + j] = acc;
      }
    if (!out.empty()) expect_close("Gemm transB + bias", out[0], {4, 3}, want);
  }
  {  // Add with broadcasting [2,3,4] + [3,1]
    NodeSpec s{"Add", 14, {rand_tensor({2, 3, 4}, 6), rand_tensor({3, 1}, 7)}, {false, false}};
    auto out = run_node(ep, s);
    std::vector<float> want(24);
    for (int i = 0; i < 24; ++i) want[i] = s.inputs[0].data[i] + s.inputs[1].data[(i / 4) % 3];
    if (!out.empty()) expect_close("Add broadcast", out[0], {2, 3, 4}, want);
  }
  {  // Softmax over the last axis [3,7]
    NodeSpec s{"Softmax", 13, {rand_tensor({3, 7}, 8)}, {false}};
    auto out = run_node(ep, s);
    std::vector<float> want(21);
    for (int r = 0; r < 3; ++r) {
      float m = -1e30f, sum = 0;
      for (int i = 0; i < 7; ++i) m = std::max(m, s.inputs[0].data[r * 7 + i]);
      for (int i = 0; i < 7; ++i) sum += std::exp(s.inputs[0].data[r * 7 + i] - m);
      for (int i = 0; i < 7; ++i) want[r * 7 + i] = std::exp(s.inputs[0].data[r * 7 + i] - m) / sum;
    }
    if (!out.empty()) expect_close("Softmax axis=-1", out[0], {3, 7}, want);
  }
  {  // ReduceMean over axis 1 of [2,3,4], keepdims=0
    std::vector<MrtEpAttribute> attrs{ints_attr("axes", {1}), int_attr("keepdims", 0)};
    static const std::vector<int64_t> axes{1};
    attrs[0].ints = axes.data();
    NodeSpec s{"ReduceMean", 13, {rand_tensor({2, 3, 4}, 9)}, {false}, 1, attrs};
    auto out = run_node(ep, s);
    std::vector<float> want(8, 0.f);
    for (int a = 0; a < 2; ++a)
      for (int c = 0; c < 4; ++c) {
        for (int b = 0; b < 3; ++b) want[a * 4 + c] += s.inputs[0].data[(a * 3 + b) * 4 + c] / 3.f;
      }
    if (!out.empty()) expect_close("ReduceMean axes=[1]", out[0], {2, 4}, want);
  }
  {  // Conv 2-D: X [1,4,5,5], W [6,2,3,3], group 2, pads 1, stride 2, bias
    static const std::vector<int64_t> pads{1, 1, 1, 1}, strides{2, 2};
    std::vector<MrtEpAttribute> attrs{int_attr("group", 2), ints_attr("pads", pads), ints_attr("strides", strides)};
    attrs[1].ints = pads.data();
    attrs[2].ints = strides.data();
    NodeSpec s{"Conv", 11, {rand_tensor({1, 4, 5, 5}, 10), rand_tensor({6, 2, 3, 3}, 11), rand_tensor({6}, 12)},
               {false, true, true}, 1, attrs};
    auto out = run_node(ep, s);
    std::vector<float> want(6 * 3 * 3);
    const auto& X = s.inputs[0].data;
    const auto& W = s.inputs[1].data;
    for (int m = 0; m < 6; ++m) {
      const int g = m / 3;
      for (int oy = 0; oy < 3; ++oy)
        for (int ox = 0; ox < 3; ++ox) {
          float acc = s.inputs[2].data[m];
          for (int c = 0; c < 2; ++c)
            for (int ky = 0; ky < 3; ++ky)
              for (int kx = 0; kx < 3; ++kx) {
                const int iy = oy * 2 - 1 + ky, ix = ox * 2 - 1 + kx;
                if (iy < 0 || iy >= 5 || ix < 0 || ix >= 5) continue;
                acc += X[((g * 2 + c) * 5 + iy) * 5 + ix] * W[((m * 2 + c) * 3 + ky) * 3 + kx];
              }
          want[(m * 3 + oy) * 3 + ox] = acc;
        }
    }
    if (!out.empty()) expect_close("Conv group=2 pad=1 stride=2", out[0], {1, 6, 3, 3}, want);
  }
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s <plugin.so> [--expect-no-gpu|--expect-gpu]\n", argv[0]);
    return 2;
  }
  const std::string mode = argc > 2 ? argv[2] : "";
  void* lib = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
  if (!lib) {
    std::fprintf(stderr, "FAIL: dlopen: %s\n", dlerror());
    return 1;
  }
  auto get_abi = reinterpret_cast<MrtEpGetAbiVersionFn>(dlsym(lib, "MrtEpGetAbiVersion"));
  auto create = reinterpret_cast<MrtEpCreateFactoriesFn>(dlsym(lib, "MrtEpCreateFactories"));
  auto release = reinterpret_cast<MrtEpReleaseFactoryFn>(dlsym(lib, "MrtEpReleaseFactory"));
  CHECK(get_abi && create && release, "missing entry points");
  if (!get_abi || !create || !release) return 1;
  CHECK(get_abi() == MRT_EP_ABI_VERSION, "ABI version %#x", get_abi());

  // A core from the future (major 2) is refused with both versions named.
  MrtEpApi future = make_api((2u << 16) | 0u);
  MrtEpFactory* f = nullptr;
  size_t count = 0;
  std::string err = take_message(create(&future, "cuda", &f, 1, &count));
  CHECK(err.find("plugin: 1.") != std::string::npos && err.find("core: 2.0") != std::string::npos,
        "ABI skew message: %s", err.c_str());

  MrtEpApi api = make_api(MRT_EP_ABI_VERSION);
  err = take_message(create(&api, "cuda", &f, 1, &count));
  CHECK(err.empty() && count == 1 && f, "CreateFactories: %s", err.c_str());
  if (!f) return 1;
  std::printf("factory %s / %s / %s\n", f->GetName(f), f->GetVendor(f), f->GetVersion(f));
  CHECK(std::strcmp(f->GetName(f), "CUDAExecutionProvider") == 0, "factory name");

  FakeDevice gpu = nvidia_gpu();
  gpu.dev.metadata_count = 1;  // only cuda_device_ordinal: the simulated bus id is unknown
  gpu.dev.metadata_keys = gpu.keys.data() + 1;
  gpu.dev.metadata_values = gpu.values.data() + 1;
  MrtHardwareDevice cpu{MRT_DEVICE_CPU, 0, 0, "GenuineIntel", "cpu", 0, nullptr, nullptr};
  MrtHardwareDevice amd{MRT_DEVICE_GPU, 0x1002, 0x744c, "AMD", "amd gpu", 0, nullptr, nullptr};
  const MrtHardwareDevice* devs[] = {&cpu, &gpu.dev, &amd};
  uint8_t supported[3] = {9, 9, 9};
  err = take_message(f->GetSupportedDevices(f, devs, 3, supported));
  CHECK(err.empty(), "GetSupportedDevices: %s", err.c_str());
  std::printf("supported: cpu=%d nvidia=%d amd=%d\n", supported[0], supported[1], supported[2]);
  CHECK(supported[0] == 0 && supported[2] == 0, "only NVIDIA GPUs may be supported");

  const MrtHardwareDevice* chosen[] = {&gpu.dev};
  MrtEp* ep = nullptr;
  err = take_message(f->CreateEp(f, chosen, 1, nullptr, nullptr, 0, &ep));
  if (mode == "--expect-no-gpu") {
    CHECK(supported[1] == 0, "a GPU was reported supported on a machine without one");
    CHECK(!err.empty() && ep == nullptr, "CreateEp succeeded without a GPU");
    std::printf("CreateEp without GPU: %s\n", err.c_str());
    CHECK(err.find("CUDAExecutionProvider cannot be created") != std::string::npos, "unclear message");
  } else if (mode == "--expect-gpu") {
    CHECK(supported[1] == 1, "the NVIDIA GPU is not supported");
    CHECK(err.empty() && ep, "CreateEp: %s", err.c_str());
    const char* bad_keys[] = {"no_such_option"};
    const char* bad_values[] = {"1"};
    MrtEp* bad = nullptr;
    std::string e2 = take_message(f->CreateEp(f, chosen, 1, bad_keys, bad_values, 1, &bad));
    CHECK(e2.find("unknown provider option") != std::string::npos, "unknown option: %s", e2.c_str());
    if (ep) {
      kernel_checks(ep);
      f->ReleaseEp(f, ep);
    }
  } else if (ep) {
    f->ReleaseEp(f, ep);
  }
  release(f);
  dlclose(lib);
  if (g_failures) {
    std::fprintf(stderr, "%d check(s) failed\n", g_failures);
    return 1;
  }
  std::printf("OK\n");
  return 0;
}
