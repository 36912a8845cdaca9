// com.microsoft GroupQueryAttention (the attention of onnxruntime-genai LLM exports).
// Query [B, S, Hq * d] with key/value [B, S, Hkv * d] (or one packed QKV input), a
// key/value cache past_key/past_value [B, Hkv, P, d], seqlens_k [B] (each sequence's
// total length - 1) and total_sequence_length. Per sequence b the new keys/values land at
// positions [past_b, past_b + S) of present_key/present_value (past_b = 0 for the first
// prompt, seqlens_k[b] + 1 - S afterwards); query i sits at position past_b + i and
// attends the keys at or before it and before seqlens_k[b] + 1, within local_window_size
// when given. do_rotary rotates Q and K (cos/sin caches, interleaved or not) at those
// positions. softcap and scale as in Attention. smooth_softmax, head_sink, attention_bias
// and position_ids are refused at session creation.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "../resource_limits.h"
#include "norm_util.h"

namespace mrt {
namespace {

void gqa_check(const Node& n, int64_t) {
  const int64_t h = n.attr_int("num_heads", 0), kv = n.attr_int("kv_num_heads", 0);
  MRT_ENFORCE(h > 0 && kv > 0 && h % kv == 0, MRT_INVALID_MODEL, n.label(),
              ": num_heads must be a positive multiple of kv_num_heads, got ", h, " and ", kv);
  MRT_ENFORCE(n.attr_int("smooth_softmax", 0) == 0, MRT_NOT_IMPLEMENTED, n.label(), ": smooth_softmax is not supported");
  for (size_t i : {size_t{9}, size_t{10}, size_t{11}})
    MRT_ENFORCE(n.inputs.size() <= i || n.inputs[i].empty(), MRT_NOT_IMPLEMENTED, n.label(), ": input ", i,
                " (position_ids / attention_bias / head_sink) is not supported");
}

void rotate_rows(float* x, int64_t pos, const std::vector<double>& cs, const std::vector<double>& sn,
                 int64_t half, bool interleaved) {
  for (int64_t i = 0; i < half; ++i) {
    const int64_t i1 = interleaved ? 2 * i : i, i2 = interleaved ? 2 * i + 1 : i + half;
    const float c = static_cast<float>(cs[static_cast<size_t>(pos * half + i)]);
    const float s = static_cast<float>(sn[static_cast<size_t>(pos * half + i)]);
    const float a = x[i1], b = x[i2];
    x[i1] = c * a - s * b;
    x[i2] = s * a + c * b;
  }
}

void gqa_kernel(OpContext& ctx) {
  const Node& n = ctx.node();
  const int64_t Hq = n.attr_int("num_heads", 0), Hkv = n.attr_int("kv_num_heads", 0);
  const Tensor& Qt = ctx.input(0);
  const Tensor* Kt = ctx.optional_input(1);
  const Tensor* Vt = ctx.optional_input(2);
  const Tensor* PK = ctx.optional_input(3);
  const Tensor* PV = ctx.optional_input(4);
  const Tensor& SL = ctx.input(5);
  const Tensor& TSL = ctx.input(6);
  MRT_CHECK_IMPL(Qt.dtype() == DType::kFloat, "GroupQueryAttention: only float32 is supported, got ", Qt.describe());
  MRT_CHECK_ARG(Qt.rank() == 3, "GroupQueryAttention: query must be [batch, seq, hidden], got ", Qt.describe());
  const int64_t B = Qt.dim(0), S = Qt.dim(1);
  const bool packed = Kt == nullptr;
  const int64_t d = packed ? Qt.dim(2) / (Hq + 2 * Hkv) : Qt.dim(2) / Hq;
  MRT_CHECK_ARG(d > 0 && (packed ? Qt.dim(2) == (Hq + 2 * Hkv) * d : Qt.dim(2) == Hq * d), "GroupQueryAttention: query ",
                Qt.describe(), " does not hold ", Hq, " heads", packed ? " plus packed keys and values" : "");
  if (!packed)
    MRT_CHECK_ARG(Vt && Kt->shape() == Shape({B, S, Hkv * d}) && Vt->shape() == Kt->shape(),
                  "GroupQueryAttention: key/value must be [", B, ",", S, ",", Hkv * d, "]");
  MRT_CHECK_ARG((PK == nullptr) == (PV == nullptr), "GroupQueryAttention: past_key and past_value go together");
  const int64_t P = PK ? PK->dim(2) : 0;
  if (PK)
    MRT_CHECK_ARG(PK->shape() == Shape({B, Hkv, P, d}) && PV->shape() == PK->shape(),
                  "GroupQueryAttention: past_key/past_value must be [", B, ",", Hkv, ",past,", d, "], got ",
                  PK->describe());
  MRT_CHECK_ARG(SL.numel() == B, "GroupQueryAttention: seqlens_k must hold ", B, " values, got ", SL.describe());
  const int64_t total = TSL.int_at(0);
  const int64_t T = std::max(total, P);  // present length
  const bool first_prompt = P == 0 || (S == total && S > 1);
  const bool rotary = n.attr_int("do_rotary", 0) != 0;
  const bool interleaved = n.attr_int("rotary_interleaved", 0) != 0;
  const float softcap = n.attr_float("softcap", 0.f);
  const int64_t window = n.attr_int("local_window_size", -1);
  const float scale = n.has_attr("scale") && n.attr_float("scale", 0.f) != 0.f ? n.attr_float("scale", 0.f)
                                                                                : 1.f / std::sqrt(static_cast<float>(d));
  std::vector<double> cs, sn;
  int64_t half = 0, max_pos = 0;
  if (rotary) {
    const Tensor& C = ctx.input(7);
    const Tensor& Sn = ctx.input(8);
    MRT_CHECK_ARG(C.rank() == 2 && C.shape() == Sn.shape() && 2 * C.dim(1) <= d, "GroupQueryAttention: cos/sin caches ",
                  C.describe(), " must be [positions, rotary_dim / 2]");
    cs = norm::to_doubles(C, "cos_cache");
    sn = norm::to_doubles(Sn, "sin_cache");
    half = C.dim(1);
    max_pos = C.dim(0);
  }
  // q [B, Hq, S, d], present k/v [B, Hkv, T, d]
  const float* qin = Qt.data<float>();
  const int64_t qstride = Qt.dim(2);
  std::vector<float> q(checked_scratch({B, Hq, S, d}, sizeof(float), "GroupQueryAttention queries"));
  Tensor PKo(DType::kFloat, Shape{B, Hkv, T, d}, ctx.allocator());
  Tensor PVo(DType::kFloat, Shape{B, Hkv, T, d}, ctx.allocator());
  float* pk = PKo.data<float>();
  float* pv = PVo.data<float>();
  std::fill(pk, pk + PKo.numel(), 0.f);
  std::fill(pv, pv + PVo.numel(), 0.f);
  std::vector<int64_t> past(static_cast<size_t>(B)), valid(static_cast<size_t>(B));
  for (int64_t b = 0; b < B; ++b) {
    const int64_t tl = SL.int_at(b) + 1;
    past[static_cast<size_t>(b)] = first_prompt ? 0 : tl - S;
    valid[static_cast<size_t>(b)] = tl;
    MRT_CHECK_ARG(tl >= 1 && tl <= T && past[static_cast<size_t>(b)] >= 0, "GroupQueryAttention: seqlens_k[", b,
                  "] = ", tl - 1, " does not fit ", S, " new tokens and a cache of ", T);
    const int64_t pb = past[static_cast<size_t>(b)];
    for (int64_t h = 0; h < Hkv; ++h) {
      if (PK) {
        std::memcpy(pk + (b * Hkv + h) * T * d, PK->data<float>() + (b * Hkv + h) * P * d,
                    sizeof(float) * static_cast<size_t>(std::min(pb, P) * d));
        std::memcpy(pv + (b * Hkv + h) * T * d, PV->data<float>() + (b * Hkv + h) * P * d,
                    sizeof(float) * static_cast<size_t>(std::min(pb, P) * d));
      }
      for (int64_t s = 0; s < S && pb + s < T; ++s) {
        const float* ksrc = packed ? qin + (b * S + s) * qstride + (Hq + h) * d : Kt->data<float>() + ((b * S + s) * Hkv + h) * d;
        const float* vsrc = packed ? qin + (b * S + s) * qstride + (Hq + Hkv + h) * d
                                   : Vt->data<float>() + ((b * S + s) * Hkv + h) * d;
        float* kd = pk + ((b * Hkv + h) * T + pb + s) * d;
        std::memcpy(kd, ksrc, sizeof(float) * static_cast<size_t>(d));
        std::memcpy(pv + ((b * Hkv + h) * T + pb + s) * d, vsrc, sizeof(float) * static_cast<size_t>(d));
        if (rotary) {
          MRT_CHECK_ARG(pb + s < max_pos, "GroupQueryAttention: position ", pb + s, " is past the rotary cache");
          rotate_rows(kd, pb + s, cs, sn, half, interleaved);
        }
      }
    }
    for (int64_t h = 0; h < Hq; ++h)
      for (int64_t s = 0; s < S; ++s) {
        float* qd = &q[static_cast<size_t>(((b * Hq + h) * S + s) * d)];
        std::memcpy(qd, qin + (b * S + s) * qstride + h * d, sizeof(float) * static_cast<size_t>(d));
        if (rotary) rotate_rows(qd, pb + s, cs, sn, half, interleaved);
      }
  }
  Tensor& Y = ctx.output(0, DType::kFloat, Shape{B, S, Hq * d});
  float* y = Y.data<float>();
  const int64_t group = Hq / Hkv;
  ctx.threads().parallel_for(B * Hq, 1, [&](int64_t begin, int64_t end) {
    std::vector<double> w(static_cast<size_t>(T));
    for (int64_t bh = begin; bh < end; ++bh) {
      const int64_t b = bh / Hq, h = bh % Hq, hk = h / group;
      const float* kb = pk + (b * Hkv + hk) * T * d;
      const float* vb = pv + (b * Hkv + hk) * T * d;
      const int64_t pb = past[static_cast<size_t>(b)], tl = valid[static_cast<size_t>(b)];
      for (int64_t i = 0; i < S; ++i) {
        const float* qi = &q[static_cast<size_t>(((b * Hq + h) * S + i) * d)];
        const int64_t posq = pb + i;
        double m = -INFINITY;
        for (int64_t j = 0; j < T; ++j) {
          const bool ok = j <= posq && j < tl && (window < 0 || j > posq - window);
          if (!ok) {
            w[static_cast<size_t>(j)] = -INFINITY;
            continue;
          }
          float s = 0;
          for (int64_t e = 0; e < d; ++e) s += qi[e] * kb[j * d + e];
          double sd = static_cast<double>(s) * scale;
          if (softcap > 0) sd = softcap * std::tanh(sd / softcap);
          w[static_cast<size_t>(j)] = sd;
          m = std::max(m, sd);
        }
        float* yo = y + (b * S + i) * Hq * d + h * d;
        std::fill(yo, yo + d, 0.f);
        if (m == -INFINITY) continue;
        double sum = 0;
        for (int64_t j = 0; j < T; ++j) {
          w[static_cast<size_t>(j)] = std::exp(w[static_cast<size_t>(j)] - m);
          sum += w[static_cast<size_t>(j)];
        }
        for (int64_t j = 0; j < T; ++j) {
          const float p = static_cast<float>(w[static_cast<size_t>(j)] / sum);
          if (p == 0.f) continue;
          for (int64_t e = 0; e < d; ++e) yo[e] += p * vb[j * d + e];
        }
      }
    }
  });
  if (ctx.has_output(1)) ctx.set_output(1, PKo);
  if (ctx.has_output(2)) ctx.set_output(2, PVo);
}

}  // namespace

void register_contrib_gqa_kernels(KernelRegistry& r) {
  r.add_domain("com.microsoft", "GroupQueryAttention", 1, gqa_kernel, gqa_check);
}

}  // namespace mrt
