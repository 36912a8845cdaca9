// com.microsoft Attention (the fused self-attention of onnxruntime's transformer
// optimizer): QKV = input * weights + bias split into Q, K, V (qkv_hidden_sizes or three
// equal parts), num_heads heads, scores Q K^T * scale (default 1 / sqrt(head size)),
// masked by mask_index (1-D [batch] key lengths, 2-D [batch, keys] 1/0 raw mask or 3-D
// [batch, queries, keys]; masked scores get mask_filter_value), unidirectional (causal),
// plus attention_bias; softmax; times V. The key/value cache inputs (past,
// past_sequence_length) and rotary/packed variants are refused at session creation.
#include <algorithm>
#include <cmath>
#include <vector>

#include "../resource_limits.h"
#include "../gemm/sgemm.h"
#include "norm_util.h"

namespace mrt {
namespace {

void ms_attention_check(const Node& n, int64_t) {
  MRT_ENFORCE(n.attr_int("num_heads", 0) > 0, MRT_INVALID_MODEL, n.label(), ": attribute num_heads must be positive, got ",
              n.attr_int("num_heads", 0));
  MRT_ENFORCE(n.inputs.size() <= 4 || n.inputs[4].empty(), MRT_NOT_IMPLEMENTED, n.label(),
              ": the past key/value input is not supported");
  MRT_ENFORCE(n.inputs.size() <= 6 || n.inputs[6].empty(), MRT_NOT_IMPLEMENTED, n.label(),
              ": past_sequence_length is not supported");
  MRT_ENFORCE(n.outputs.size() <= 1 || n.outputs[1].empty(), MRT_NOT_IMPLEMENTED, n.label(),
              ": the present output is not supported");
  MRT_ENFORCE(n.attr_int("do_rotary", 0) == 0, MRT_NOT_IMPLEMENTED, n.label(), ": do_rotary=1 is not supported");
  const std::vector<int64_t> qkv = n.attr_ints("qkv_hidden_sizes");
  MRT_ENFORCE(qkv.empty() || (qkv.size() == 3 && qkv[0] == qkv[1] && qkv[0] > 0 && qkv[2] > 0), MRT_INVALID_MODEL,
              n.label(), ": qkv_hidden_sizes must hold 3 positive sizes with Q and K equal, got ", shape_str(qkv));
}

void ms_attention_kernel(OpContext& ctx) {
  const Node& n = ctx.node();
  const Tensor& X = ctx.input(0);
  const Tensor& W = ctx.input(1);
  const Tensor* Bt = ctx.optional_input(2);
  const Tensor* mask = ctx.optional_input(3);
  const Tensor* abias = ctx.optional_input(5);
  MRT_CHECK_IMPL(X.dtype() == DType::kFloat && W.dtype() == DType::kFloat, "Attention: only float32 is supported, got ",
                 X.describe(), " and ", W.describe());
  MRT_CHECK_ARG(X.rank() == 3 && W.rank() == 2 && W.dim(0) == X.dim(2), "Attention: input ", X.describe(),
                " and weights ", W.describe(), " do not match");
  const int64_t B = X.dim(0), S = X.dim(1), Din = X.dim(2), Htot = W.dim(1);
  const int64_t heads = n.attr_int("num_heads", 1);
  std::vector<int64_t> qkv = n.attr_ints("qkv_hidden_sizes");
  if (qkv.empty()) {
    MRT_CHECK_ARG(Htot % 3 == 0, "Attention: weights ", W.describe(), " do not split into three equal parts");
    qkv = {Htot / 3, Htot / 3, Htot / 3};
  }
  MRT_CHECK_ARG(qkv[0] + qkv[1] + qkv[2] == Htot && qkv[0] % heads == 0 && qkv[2] % heads == 0,
                "Attention: qkv sizes ", shape_str(qkv), " do not fit weights ", W.describe(), " and ", heads, " heads");
  if (Bt) MRT_CHECK_ARG(Bt->numel() == Htot, "Attention: bias ", Bt->describe(), " must have ", Htot, " values");
  const int64_t dq = qkv[0] / heads, dv = qkv[2] / heads;
  const float scale = n.has_attr("scale") ? n.attr_float("scale", 0.f) : 1.f / std::sqrt(static_cast<float>(dq));
  const float filter = n.attr_float("mask_filter_value", -10000.f);
  const bool causal = n.attr_int("unidirectional", 0) != 0;
  // projections
  std::vector<float> proj(checked_scratch({B, S, Htot}, sizeof(float), "Attention projections"));
  sgemm(false, false, B * S, Htot, Din, 1.f, X.data<float>(), Din, W.data<float>(), Htot, 0.f, proj.data(), Htot,
        &ctx.threads());
  if (Bt) {
    const float* b = Bt->data<float>();
    for (int64_t r = 0; r < B * S; ++r)
      for (int64_t j = 0; j < Htot; ++j) proj[static_cast<size_t>(r * Htot + j)] += b[j];
  }
  // mask as an additive [B, S, S] term
  std::vector<float> madd(checked_scratch({B, S, S}, sizeof(float), "Attention mask"), 0.f);
  if (mask) {
    const std::vector<int64_t> dims = mask->shape();
    auto at = [&](int64_t i) { return mask->int_at(i); };
    if (dims.size() == 1 && dims[0] == B) {
      for (int64_t b = 0; b < B; ++b)
        for (int64_t i = 0; i < S; ++i)
          for (int64_t j = at(b); j < S; ++j) madd[static_cast<size_t>((b * S + i) * S + j)] = filter;
    } else if (dims.size() == 2 && dims[0] == B && dims[1] == S) {
      for (int64_t b = 0; b < B; ++b)
        for (int64_t i = 0; i < S; ++i)
          for (int64_t j = 0; j < S; ++j)
            if (at(b * S + j) == 0) madd[static_cast<size_t>((b * S + i) * S + j)] = filter;
    } else if (dims.size() == 3 && dims[0] == B && dims[1] == S && dims[2] == S) {
      for (int64_t i = 0; i < B * S * S; ++i)
        if (at(i) == 0) madd[static_cast<size_t>(i)] = filter;
    } else {
      fail(MRT_NOT_IMPLEMENTED, "Attention: mask_index ", mask->describe(), " is not supported; [", B, "], [", B, ",",
           S, "] and [", B, ",", S, ",", S, "] are");
    }
  }
  std::vector<float> ab;
  int64_t ab_b = 0, ab_h = 0;
  if (abias) {
    MRT_CHECK_ARG(abias->rank() == 4 && (abias->dim(0) == 1 || abias->dim(0) == B) &&
                      (abias->dim(1) == 1 || abias->dim(1) == heads) && abias->dim(2) == S && abias->dim(3) == S,
                  "Attention: attention_bias ", abias->describe(), " must be [", B, " or 1,", heads, " or 1,", S, ",",
                  S, "]");
    const std::vector<double> v = norm::to_doubles(*abias, "Attention attention_bias");
    ab.assign(v.begin(), v.end());
    ab_b = abias->dim(0) == 1 ? 0 : abias->dim(1) * S * S;
    ab_h = abias->dim(1) == 1 ? 0 : S * S;
  }
  Tensor& Y = ctx.output(0, DType::kFloat, Shape{B, S, qkv[2]});
  float* y = Y.data<float>();
  ctx.threads().parallel_for(B * heads, 1, [&](int64_t begin, int64_t end) {
    std::vector<float> sc(static_cast<size_t>(S));
    for (int64_t bh = begin; bh < end; ++bh) {
      const int64_t b = bh / heads, h = bh % heads;
      for (int64_t i = 0; i < S; ++i) {
        const float* q = &proj[static_cast<size_t>((b * S + i) * Htot + h * dq)];
        float m = -INFINITY;
        for (int64_t j = 0; j < S; ++j) {
          const float* k = &proj[static_cast<size_t>((b * S + j) * Htot + qkv[0] + h * dq)];
          float s = 0;
          for (int64_t e = 0; e < dq; ++e) s += q[e] * k[e];
          s = s * scale + madd[static_cast<size_t>((b * S + i) * S + j)];
          if (!ab.empty()) s += ab[static_cast<size_t>(b * ab_b + h * ab_h + i * S + j)];
          if (causal && j > i) s = -INFINITY;
          sc[static_cast<size_t>(j)] = s;
          m = std::max(m, s);
        }
        double sum = 0;
        for (int64_t j = 0; j < S; ++j) {
          sc[static_cast<size_t>(j)] = std::exp(sc[static_cast<size_t>(j)] - m);
          sum += sc[static_cast<size_t>(j)];
        }
        float* yo = y + (b * S + i) * qkv[2] + h * dv;
        std::fill(yo, yo + dv, 0.f);
        for (int64_t j = 0; j < S; ++j) {
          const float p = static_cast<float>(sc[static_cast<size_t>(j)] / sum);
          const float* v = &proj[static_cast<size_t>((b * S + j) * Htot + qkv[0] + qkv[1] + h * dv)];
          for (int64_t e = 0; e < dv; ++e) yo[e] += p * v[e];
        }
      }
    }
  });
}

}  // namespace

void register_contrib_attention_kernels(KernelRegistry& r) {
  r.add_domain("com.microsoft", "Attention", 1, ms_attention_kernel, ms_attention_check);
}

}  // namespace mrt
