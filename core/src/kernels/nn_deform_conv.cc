// Kernel group: nn — DeformConv (2-D deformable convolution) and CausalConvWithState
// (stateful causal depthwise 1-D convolution).
//
// DeformConv builds, per (image, group), a column matrix like im2col but with every tap
// sampled bilinearly at its offset position (zero outside the input) and scaled by the
// mask, then multiplies it with the group's filters.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "../gemm/sgemm.h"
#include "nn_geometry.h"

namespace mrt {
namespace {

// Bilinear sample of plane x[H, W] at (h, w); neighbours outside the plane count as 0.
inline float bilinear(const float* x, int64_t H, int64_t W, float h, float w) {
  if (!(h > -1.f && h < static_cast<float>(H) && w > -1.f && w < static_cast<float>(W))) return 0.f;
  const float hf = std::floor(h), wf = std::floor(w);
  const int64_t h0 = static_cast<int64_t>(hf), w0 = static_cast<int64_t>(wf);
  const float lh = h - hf, lw = w - wf;
  auto at = [&](int64_t i, int64_t j) { return (i >= 0 && i < H && j >= 0 && j < W) ? x[i * W + j] : 0.f; };
  return (1.f - lh) * ((1.f - lw) * at(h0, w0) + lw * at(h0, w0 + 1)) +
         lh * ((1.f - lw) * at(h0 + 1, w0) + lw * at(h0 + 1, w0 + 1));
}

void deform_conv_kernel(OpContext& ctx) {
  const char* op = "DeformConv";
  const Node& node = ctx.node();
  const Tensor& X = ctx.input(0);
  const Tensor& W = ctx.input(1);
  const Tensor& off = ctx.input(2);
  const Tensor* B = ctx.optional_input(3);
  const Tensor* mask = ctx.optional_input(4);
  MRT_CHECK_ARG(X.rank() >= 3, op, ": input X must have rank >= 3, got ", X.describe());
  MRT_CHECK_IMPL(X.rank() == 4, op, ": only 2-D deformable convolution is supported, got X ", X.describe());
  MRT_CHECK_IMPL(X.dtype() == DType::kFloat, op, ": element type ", dtype_name(X.dtype()), " is not supported");
  MRT_CHECK_ARG(W.dtype() == X.dtype() && off.dtype() == X.dtype(), op, ": X, W and offset must share a type");
  MRT_CHECK_ARG(W.rank() == 4, op, ": weight W must have rank 4, got ", W.describe());
  const int64_t N = X.dim(0), C = X.dim(1), H = X.dim(2), Wd = X.dim(3), M = W.dim(0);
  const int64_t group = node.attr_int("group", 1), ogroup = node.attr_int("offset_group", 1);
  MRT_CHECK_ARG(group >= 1 && ogroup >= 1, op, ": group and offset_group must be >= 1");
  MRT_CHECK_ARG(C % group == 0 && M % group == 0 && W.dim(1) * group == C, op, ": X ", X.describe(), ", W ",
                W.describe(), " and group ", group, " are inconsistent");
  MRT_CHECK_ARG(C % ogroup == 0, op, ": input channels ", C, " are not divisible by offset_group ", ogroup);
  nn::Window g;
  nn::read_window_attrs(node, 2, op, g);
  g.in = {H, Wd};
  g.kernel = {W.dim(2), W.dim(3)};
  if (node.has_attr("kernel_shape"))
    MRT_CHECK_ARG(node.attr_ints("kernel_shape") == g.kernel, op, ": kernel_shape does not match W ",
                  W.describe());
  nn::resolve_forward(g, nn::AutoPad::kNotSet, false, op);
  const int64_t OH = g.out[0], OW = g.out[1], KH = g.kernel[0], KW = g.kernel[1], K = KH * KW;
  const int64_t P = OH * OW;
  MRT_CHECK_ARG(off.rank() == 4 && off.dim(0) == N && off.dim(1) == ogroup * K * 2 && off.dim(2) == OH &&
                    off.dim(3) == OW,
                op, ": offset ", off.describe(), " must have shape [", N, ",", ogroup * K * 2, ",", OH, ",", OW, "]");
  if (mask) {
    MRT_CHECK_ARG(mask->dtype() == X.dtype(), op, ": mask must have the type of X");
    MRT_CHECK_ARG(mask->rank() == 4 && mask->dim(0) == N && mask->dim(1) == ogroup * K && mask->dim(2) == OH &&
                      mask->dim(3) == OW,
                  op, ": mask ", mask->describe(), " must have shape [", N, ",", ogroup * K, ",", OH, ",", OW, "]");
  }
  if (B)
    MRT_CHECK_ARG(B->dtype() == X.dtype() && B->rank() == 1 && B->dim(0) == M, op, ": bias B ", B->describe(),
                  " must have shape [", M, "]");
  Tensor& Y = ctx.output(0, X.dtype(), {N, M, OH, OW});
  const int64_t Cg = C / group, Mg = M / group, Cog = C / ogroup;
  const float* x = X.data<float>();
  const float* w = W.data<float>();
  const float* o = off.data<float>();
  const float* mk = mask ? mask->data<float>() : nullptr;
  float* y = Y.data<float>();
  // Column band: positions [p0, p1) at a time, bounded to about 16 MB.
  const int64_t band = std::max<int64_t>(1, std::min<int64_t>(P, (int64_t{16} << 20) / std::max<int64_t>(1, Cg * K * 4)));
  std::vector<float> col(static_cast<size_t>(std::max<int64_t>(Cg * K * band, 1)));
  for (int64_t n = 0; n < N; ++n)
    for (int64_t grp = 0; grp < group; ++grp)
      for (int64_t p0 = 0; p0 < P; p0 += band) {
        const int64_t p1 = std::min(P, p0 + band), cols = p1 - p0;
        ctx.threads().parallel_for(Cg, 1, [&](int64_t c0, int64_t c1) {
          for (int64_t cl = c0; cl < c1; ++cl) {
            const int64_t c = grp * Cg + cl, og = c / Cog;
            const float* xp = x + (n * C + c) * H * Wd;
            for (int64_t kh = 0; kh < KH; ++kh)
              for (int64_t kw = 0; kw < KW; ++kw) {
                const int64_t k = kh * KW + kw;
                const float* off_h = o + ((n * ogroup + og) * K * 2 + 2 * k) * P;  // offset along H
                const float* off_w = off_h + P;                                     // offset along W
                const float* m_ = mk ? mk + ((n * ogroup + og) * K + k) * P : nullptr;
                float* row = col.data() + (cl * K + k) * cols;
                for (int64_t p = p0; p < p1; ++p) {
                  const int64_t i = p / OW, j = p % OW;
                  const float h = static_cast<float>(i * g.stride[0] - g.pad_begin[0] + kh * g.dilation[0]) + off_h[p];
                  const float ww = static_cast<float>(j * g.stride[1] - g.pad_begin[1] + kw * g.dilation[1]) + off_w[p];
                  float v = bilinear(xp, H, Wd, h, ww);
                  if (m_) v *= m_[p];
                  row[p - p0] = v;
                }
              }
          }
        });
        float* yg = y + (n * M + grp * Mg) * P + p0;
        float beta = 0.f;
        if (B) {
          for (int64_t m = 0; m < Mg; ++m) std::fill(yg + m * P, yg + m * P + cols, B->data<float>()[grp * Mg + m]);
          beta = 1.f;
        }
        sgemm(false, false, Mg, cols, Cg * K, 1.f, w + grp * Mg * Cg * K, Cg * K, col.data(), cols, beta, yg, P,
              &ctx.threads());
      }
}

// ---------------------------------------------------------------------------------------
// CausalConvWithState: out[b, c, t] = bias[c] + sum_j w[c, 0, j] * padded[b, c, t + j],
// padded = concat(past_state (or zeros), input) along time; present_state = the last
// k - 1 steps of padded. Optional fused SiLU ("silu"/"swish").

template <class Load, class StoreOut, class StoreState>
void causal_conv(int64_t Bn, int64_t C, int64_t L, int64_t k, bool silu, Load load_in, Load load_w, Load load_b,
                 Load load_past, bool has_b, bool has_past, StoreOut store_out, StoreState store_state) {
  std::vector<float> padded(static_cast<size_t>(L + k - 1));
  for (int64_t b = 0; b < Bn; ++b)
    for (int64_t c = 0; c < C; ++c) {
      const int64_t bc = b * C + c;
      for (int64_t j = 0; j < k - 1; ++j) padded[j] = has_past ? load_past(bc * (k - 1) + j) : 0.f;
      for (int64_t t = 0; t < L; ++t) padded[k - 1 + t] = load_in(bc * L + t);
      const float bias = has_b ? load_b(c) : 0.f;
      for (int64_t t = 0; t < L; ++t) {
        float acc = bias;
        for (int64_t j = 0; j < k; ++j) acc += load_w(c * k + j) * padded[t + j];
        store_out(bc * L + t, acc, silu);
      }
      for (int64_t j = 0; j < k - 1; ++j) store_state(bc * (k - 1) + j, padded[L + j], false);
    }
}

void causal_conv_kernel(OpContext& ctx) {
  const char* op = "CausalConvWithState";
  const Tensor& X = ctx.input(0);
  const Tensor& W = ctx.input(1);
  const Tensor* Bt = ctx.optional_input(2);
  const Tensor* past = ctx.optional_input(3);
  const std::string act = ctx.node().attr_string("activation", "none");
  MRT_CHECK_ARG(act == "none" || act == "silu" || act == "swish", op, ": activation must be none, silu or swish, got '",
                act, "'");
  const bool silu = act != "none";
  MRT_CHECK_ARG(X.rank() == 3, op, ": input must have rank 3 [batch, channels, length], got ", X.describe());
  const int64_t Bn = X.dim(0), C = X.dim(1), L = X.dim(2);
  MRT_CHECK_ARG(W.rank() == 3 && W.dim(0) == C && W.dim(1) == 1 && W.dim(2) >= 1, op, ": weight ", W.describe(),
                " must have shape [", C, ",1,k]");
  const int64_t k = W.dim(2);
  MRT_CHECK_ARG(W.dtype() == X.dtype(), op, ": weight type differs from input type");
  if (Bt) MRT_CHECK_ARG(Bt->dtype() == X.dtype() && Bt->rank() == 1 && Bt->dim(0) == C, op, ": bias ", Bt->describe(),
                        " must have shape [", C, "]");
  if (past)
    MRT_CHECK_ARG(past->dtype() == X.dtype() && past->shape() == Shape({Bn, C, k - 1}), op, ": past_state ",
                  past->describe(), " must have shape [", Bn, ",", C, ",", k - 1, "]");
  Tensor& Y = ctx.output(0, X.dtype(), {Bn, C, L});
  Tensor* S = ctx.has_output(1) ? &ctx.output(1, X.dtype(), {Bn, C, k - 1}) : nullptr;
  auto apply = [](float v, bool act_on) { return act_on ? v / (1.f + std::exp(-v)) : v; };
  switch (X.dtype()) {
    case DType::kFloat: {
      auto ld = [](const Tensor* t) { return [p = t ? t->data<float>() : nullptr](int64_t i) { return p[i]; }; };
      float* yo = Y.data<float>();
      float* so = S ? S->data<float>() : nullptr;
      causal_conv(
          Bn, C, L, k, silu, ld(&X), ld(&W), ld(Bt), ld(past), Bt != nullptr, past != nullptr,
          [&](int64_t i, float v, bool a) { yo[i] = apply(v, a); },
          [&](int64_t i, float v, bool) {
            if (so) so[i] = v;
          });
      break;
    }
    case DType::kFloat16:
    case DType::kBFloat16: {
      const bool half = X.dtype() == DType::kFloat16;
      auto to_f = [half](uint16_t v) { return half ? half_to_float(v) : bfloat16_to_float(v); };
      auto to_h = [half](float v) { return half ? float_to_half(v) : float_to_bfloat16(v); };
      auto ld = [&](const Tensor* t) {
        return [p = t ? t->data_as<uint16_t>() : nullptr, to_f](int64_t i) { return to_f(p[i]); };
      };
      uint16_t* yo = Y.data_as<uint16_t>();
      uint16_t* so = S ? S->data_as<uint16_t>() : nullptr;
      causal_conv(
          Bn, C, L, k, silu, ld(&X), ld(&W), ld(Bt), ld(past), Bt != nullptr, past != nullptr,
          // The convolution result is rounded to the 16-bit type before the activation.
          [&](int64_t i, float v, bool a) { yo[i] = to_h(apply(to_f(to_h(v)), a)); },
          [&](int64_t i, float v, bool) {
            if (so) so[i] = to_h(v);
          });
      break;
    }
    default:
      fail(MRT_NOT_IMPLEMENTED, op, ": element type ", dtype_name(X.dtype()), " is not supported");
  }
}

}  // namespace

void register_nn_deform_kernels(KernelRegistry& r) {
  r.add("DeformConv", 19, deform_conv_kernel);
  r.add("CausalConvWithState", 27, causal_conv_kernel);
}

}  // namespace mrt
