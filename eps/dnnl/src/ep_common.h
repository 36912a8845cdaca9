// Shared helpers of the oneDNN EP: node/attribute views, the kernel interface, errors.
#ifndef MOSAICRT_EP_DNNL_EP_COMMON_H_
#define MOSAICRT_EP_DNNL_EP_COMMON_H_

#include <cstdint>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <sstream>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include <oneapi/dnnl/dnnl.hpp>

#include "mosaicrt/ep.h"

namespace mrt_dnnl {

constexpr int32_t kFloat = 1;  // TensorProto.FLOAT

using Dims = std::vector<int64_t>;

template <typename... Args>
std::string cat(Args&&... args) {
  std::ostringstream os;
  (os << ... << args);
  return os.str();
}

std::string dims_str(const Dims& d);

// An error carrying a status the core made (e.g. from AllocateOutput): returned as is.
struct StatusError {
  MrtStatus* status;
};

// A node this EP does not run; at CreateKernel time it sends the node back to the CPU EP.
struct Unsupported : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// Read-only view over a core-owned MrtEpNode.
class NodeView {
 public:
  // `types`: element types this EP inferred for values the core left unknown (elem_type 0).
  explicit NodeView(const MrtEpNode& n, const std::map<std::string, int32_t>* types = nullptr) : n_(n), types_(types) {}
  std::string op() const { return n_.op_type ? n_.op_type : ""; }
  std::string domain() const { return n_.domain ? n_.domain : ""; }
  std::string name() const { return n_.name ? n_.name : ""; }
  int64_t opset() const { return n_.opset; }

  size_t input_count() const { return n_.input_count; }
  size_t output_count() const { return n_.output_count; }
  bool has_input(size_t i) const { return i < n_.input_count && present(n_.inputs[i]); }
  bool has_output(size_t i) const { return i < n_.output_count && present(n_.outputs[i]); }
  // Number of outputs that are present (non-empty names).
  size_t present_outputs() const;
  const MrtEpValue& input(size_t i) const { return n_.inputs[i]; }
  const MrtEpValue& output(size_t i) const { return n_.outputs[i]; }
  const MrtEpTensor* constant(size_t i) const { return has_input(i) ? n_.inputs[i].constant_value : nullptr; }
  // True when input i is present and known to be float32 (constant or not).
  bool input_is_float(size_t i) const;
  // True when every present input is float32 (unknown counts as not float).
  bool all_inputs_float() const;

  const MrtEpAttribute* attr(const char* name) const;
  int64_t attr_int(const char* name, int64_t def) const;
  float attr_float(const char* name, float def) const;
  std::string attr_string(const char* name, const std::string& def) const;
  std::vector<int64_t> attr_ints(const char* name) const;
  std::vector<float> attr_floats(const char* name) const;

 private:
  static bool present(const MrtEpValue& v) { return v.name != nullptr && v.name[0] != '\0'; }
  const MrtEpNode& n_;
  const std::map<std::string, int32_t>* types_;
};

// A float32 constant copied out of the graph at CreateKernel time.
struct ConstTensor {
  Dims dims;
  std::vector<float> data;
  int64_t numel() const { return static_cast<int64_t>(data.size()); }
};
ConstTensor copy_constant(const MrtEpTensor& t, const char* what);
// A scalar float constant (rank 0 or a single element), for Clip bounds.
bool scalar_constant(const MrtEpTensor* t, float* out);

// The run-time view of one Compute call.
class RunContext {
 public:
  RunContext(const MrtEpApi* api, MrtEpKernelContext* kc, const dnnl::engine& eng)
      : api_(api), kc_(kc), eng_(eng), stream_(eng) {}
  // Input i, or false when it is omitted. Throws for non-float32 inputs.
  bool input(size_t i, MrtEpTensor* t) const;
  MrtEpTensor require(size_t i) const;
  MrtEpTensor output(size_t i, const Dims& dims);
  const dnnl::engine& engine() const { return eng_; }
  dnnl::stream& stream() { return stream_; }

 private:
  const MrtEpApi* api_;
  MrtEpKernelContext* kc_;
  const dnnl::engine& eng_;
  dnnl::stream stream_;
};

Dims tensor_dims(const MrtEpTensor& t);
int64_t numel(const Dims& d);
// Dense row-major memory descriptor (works for any rank, including rank 0 as {1}).
dnnl::memory::desc plain_md(const Dims& dims);
dnnl::memory wrap(const dnnl::memory::desc& md, const dnnl::engine& eng, const void* data);

class Kernel {
 public:
  virtual ~Kernel() = default;
  virtual void compute(RunContext& ctx) = 0;
};

// Small primitive cache keyed by the input shapes of a run. Entries are immutable once built.
template <typename Entry>
class ShapeCache {
 public:
  template <typename Make>
  std::shared_ptr<const Entry> get(const Dims& key, Make&& make) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      auto it = entries_.find(key);
      if (it != entries_.end()) return it->second;
    }
    std::shared_ptr<const Entry> built = make();
    std::lock_guard<std::mutex> lock(mu_);
    if (entries_.size() >= kMaxEntries) entries_.clear();
    return entries_.emplace(key, std::move(built)).first->second;
  }

 private:
  static constexpr size_t kMaxEntries = 32;
  std::mutex mu_;
  std::map<Dims, std::shared_ptr<const Entry>> entries_;
};

// ---- what each op family provides ----
// claim_*: true when this EP runs the node (why receives the reason otherwise).
// make_*: the kernel; throws Unsupported when the node turns out not to be runnable.
bool claim_conv(const NodeView& n, std::string* why);
std::unique_ptr<Kernel> make_conv(const NodeView& n, const dnnl::engine& eng);
bool claim_pool(const NodeView& n, std::string* why);
std::unique_ptr<Kernel> make_pool(const NodeView& n, const dnnl::engine& eng);
bool claim_batchnorm(const NodeView& n, std::string* why);
std::unique_ptr<Kernel> make_batchnorm(const NodeView& n, const dnnl::engine& eng);
bool claim_matmul(const NodeView& n, std::string* why);
std::unique_ptr<Kernel> make_matmul(const NodeView& n, const dnnl::engine& eng);
bool claim_gemm(const NodeView& n, std::string* why);
std::unique_ptr<Kernel> make_gemm(const NodeView& n, const dnnl::engine& eng);
bool claim_unary(const NodeView& n, std::string* why);
std::unique_ptr<Kernel> make_unary(const NodeView& n, const dnnl::engine& eng);
bool claim_binary(const NodeView& n, std::string* why);
std::unique_ptr<Kernel> make_binary(const NodeView& n, const dnnl::engine& eng);
bool claim_softmax(const NodeView& n, std::string* why);
std::unique_ptr<Kernel> make_softmax(const NodeView& n, const dnnl::engine& eng);

// An activation applied as a oneDNN eltwise (post-op or primitive).
struct Activation {
  bool present = false;
  dnnl::algorithm alg = dnnl::algorithm::eltwise_relu;
  float alpha = 0.f, beta = 0.f;
};
// Parse a FusedConv-style activation name + params; false when not supported.
bool parse_activation(const std::string& name, const std::vector<float>& params, Activation* out);

// Spatial window geometry shared by Conv and pooling.
struct Window {
  Dims kernel, strides, dilations, pad_l, pad_r, out;  // spatial only
};
// The window attributes of a node, copied at CreateKernel time.
struct WindowAttrs {
  std::string auto_pad;  // NOTSET, SAME_UPPER, SAME_LOWER, VALID
  Dims pads, strides, dilations;
  static WindowAttrs read(const NodeView& n);
};
// Resolve auto_pad/pads/strides/dilations for input spatial dims `in`; throws on bad geometry.
Window resolve_window(const WindowAttrs& a, const Dims& in, const Dims& kernel, const char* op);
// auto_pad value is one this EP handles.
bool auto_pad_ok(const NodeView& n);

}  // namespace mrt_dnnl

#endif  // MOSAICRT_EP_DNNL_EP_COMMON_H_
