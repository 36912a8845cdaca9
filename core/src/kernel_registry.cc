#include <algorithm>

#include "kernel.h"

namespace mrt {

// Kernel groups in their own files, registered here (declared here to keep kernel.h stable).
void register_resize_kernels(KernelRegistry& r);  // kernels/resize.cc: Resize, Upsample
void register_rnn_kernels(KernelRegistry& r);     // kernels/rnn.cc: RNN, GRU, LSTM
void register_attention_kernels(KernelRegistry& r);  // kernels/attention.cc: Attention
void register_rotary_embedding_kernels(KernelRegistry& r);  // kernels/rotary_embedding.cc
void register_grid_sample_kernels(KernelRegistry& r);  // kernels/grid_sample.cc
void register_nms_kernels(KernelRegistry& r);          // kernels/non_max_suppression.cc
void register_spectral_kernels(KernelRegistry& r);     // kernels/spectral.cc: DFT, STFT, windows
void register_roi_align_kernels(KernelRegistry& r);    // kernels/roi_align.cc
void register_affine_grid_kernels(KernelRegistry& r);  // kernels/affine_grid.cc: AffineGrid, SwiGLU, Det
void register_control_flow_kernels(KernelRegistry& r);  // kernels/control_flow.cc: If, Loop, Scan
void register_contrib_qlinear_kernels(KernelRegistry& r);      // kernels/contrib_qlinear.cc (com.microsoft)
void register_contrib_transformer_kernels(KernelRegistry& r);  // kernels/contrib_transformer.cc (com.microsoft)
void register_contrib_matmul_nbits_kernels(KernelRegistry& r);  // kernels/contrib_matmul_nbits.cc (com.microsoft)
void register_contrib_attention_kernels(KernelRegistry& r);     // kernels/contrib_attention.cc (com.microsoft)
void register_training_optimizer_kernels(KernelRegistry& r);  // kernels/training_optimizers.cc
void register_contrib_gqa_kernels(KernelRegistry& r);         // kernels/contrib_gqa.cc (com.microsoft)
void register_ml_feature_kernels(KernelRegistry& r);          // kernels/ml_feature_ops.cc (ai.onnx.ml)
void register_ml_tree_kernels(KernelRegistry& r);             // kernels/ml_tree_ensemble.cc (ai.onnx.ml)
void register_linear_attention_kernels(KernelRegistry& r);    // kernels/linear_attention.cc
void register_flex_attention_kernels(KernelRegistry& r);      // kernels/flex_attention.cc (ai.onnx.preview)
void register_tfidf_kernels(KernelRegistry& r);               // kernels/tfidf_vectorizer.cc
void register_random_kernels(KernelRegistry& r);              // kernels/random.cc
void register_sequence_kernels(KernelRegistry& r);            // kernels/sequence.cc: sequences, optionals
void register_string_kernels(KernelRegistry& r);              // kernels/strings.cc: string ops, LabelEncoder
void register_ml_classic_kernels(KernelRegistry& r);          // kernels/ml_classic.cc: scikit-learn's ai.onnx.ml ops

const Tensor& OpContext::input(size_t i) const {
  if (!has_input(i)) fail(MRT_INVALID_MODEL, "required input ", i, " is missing");
  return *inputs_[i];
}

Tensor& OpContext::output(size_t i, DType dtype, Shape shape) {
  if (i >= outputs_->size())
    fail(MRT_INVALID_MODEL, "the node declares ", outputs_->size(), " output(s) but the operator produces at least ", i + 1);
  Tensor& slot = (*outputs_)[i];
  // The session pre-sets the slot to a caller's buffer for bound outputs (IOBinding): write there on a match.
  if (slot.valid() && slot.dtype() == dtype && slot.shape() == shape) return slot;
  slot = Tensor(dtype, std::move(shape), alloc_);
  return slot;
}

void OpContext::set_output(size_t i, Tensor t) {
  if (i >= outputs_->size())
    fail(MRT_INVALID_MODEL, "the node declares ", outputs_->size(), " output(s) but the operator produces at least ", i + 1);
  (*outputs_)[i] = std::move(t);
}

Tensor* OpContext::output_in_input(size_t out, size_t in) {
  if (!donatable_ || in >= donatable_->size() || !(*donatable_)[in] || !has_input(in) || out >= outputs_->size())
    return nullptr;
  const Tensor& x = *inputs_[in];
  Tensor& slot = (*outputs_)[out];
  // (the value's own entry holds the buffer once: any other holder is a view, a Concat's assembly or a caller)
  if (slot.valid() || !x.is_tensor() || !x.buffer() || !x.buffer()->owned || x.buffer().use_count() != 1)
    return nullptr;
  slot = x;
  return &slot;
}

static std::string key_of(const std::string& domain, const std::string& op) { return domain + "::" + op; }

void KernelRegistry::add(const char* op_type, int64_t since, KernelFn fn, KernelCheckFn check, int64_t until) {
  add_domain("", op_type, since, fn, check, until);
}

void KernelRegistry::add_domain(const char* domain, const char* op_type, int64_t since, KernelFn fn,
                                KernelCheckFn check, int64_t until) {
  KernelDef d;
  d.domain = domain;
  d.op_type = op_type;
  d.since_version = since;
  d.until_version = until;
  d.fn = fn;
  d.check = check;
  defs_[key_of(d.domain, d.op_type)].push_back(std::move(d));
}

const KernelDef* KernelRegistry::find(const std::string& domain, const std::string& op_type, int64_t opset) const {
  auto it = defs_.find(key_of(domain, op_type));
  if (it == defs_.end()) return nullptr;
  const KernelDef* best = nullptr;
  for (const auto& d : it->second)
    if (opset >= d.since_version && opset <= d.until_version)
      if (!best || d.since_version > best->since_version) best = &d;
  return best;
}

bool KernelRegistry::knows_op(const std::string& domain, const std::string& op_type) const {
  return defs_.count(key_of(domain, op_type)) != 0;
}

std::vector<std::string> KernelRegistry::op_names() const {
  std::vector<std::string> v;
  for (const auto& kv : defs_) v.push_back(kv.first);
  std::sort(v.begin(), v.end());
  return v;
}

const KernelRegistry& KernelRegistry::cpu() {
  // Never destroyed: a session created on another thread while the process exits must not
  // find the registry torn down under it.
  static const KernelRegistry& reg = *[] {
    auto* owned = new KernelRegistry();
    KernelRegistry& r = *owned;
    register_elementwise_kernels(r);
    register_reduce_kernels(r);
    register_shape_kernels(r);
    register_linalg_kernels(r);
    register_nn_kernels(r);
    register_norm_kernels(r);
    register_quant_kernels(r);
    register_resize_kernels(r);
    register_rnn_kernels(r);
    register_attention_kernels(r);
    register_rotary_embedding_kernels(r);
    register_grid_sample_kernels(r);
    register_nms_kernels(r);
    register_spectral_kernels(r);
    register_roi_align_kernels(r);
    register_affine_grid_kernels(r);
    register_control_flow_kernels(r);
    register_contrib_qlinear_kernels(r);
    register_contrib_transformer_kernels(r);
    register_contrib_matmul_nbits_kernels(r);
    register_contrib_attention_kernels(r);
    register_training_optimizer_kernels(r);
    register_contrib_gqa_kernels(r);
    register_ml_feature_kernels(r);
    register_ml_tree_kernels(r);
    register_linear_attention_kernels(r);
    register_flex_attention_kernels(r);
    register_tfidf_kernels(r);
    register_random_kernels(r);
    register_sequence_kernels(r);
    register_string_kernels(r);
    register_ml_classic_kernels(r);
    return owned;
  }();
  return reg;
}

}  // namespace mrt
