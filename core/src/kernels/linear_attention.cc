// LinearAttention (ai.onnx opset 27): recurrent linear attention over 3-D [B, T, H * d]
// query/key/value. A per-(batch, kv head) state S [d_k, d_v] (past_state or zeros) is
// updated every step: gated rules first decay it by exp(decay) (per head or per key
// feature), delta rules replace v by beta * (v - S^T k), then S += k v^T; the output for
// query head h (reading kv head h / (q_heads / kv_heads)) is scale * q^T S. update_rule
// linear / gated / delta / gated_delta decides which inputs must be present, checked at
// session creation. Computed in float32; present_state keeps the past state's type.
#include <cmath>
#include <string>
#include <vector>

#include "../resource_limits.h"
#include "norm_util.h"

namespace mrt {
namespace {

struct LaAttrs {
  bool gating = true, delta = true;
  int64_t hq = 0, hkv = 0;
  double scale = 0;
};

LaAttrs read_la(const Node& n) {
  LaAttrs a;
  const std::string rule = n.attr_string("update_rule", "gated_delta");
  MRT_ENFORCE(rule == "linear" || rule == "gated" || rule == "delta" || rule == "gated_delta", MRT_INVALID_MODEL,
              n.label(), ": update_rule is '", rule, "'; expected linear, gated, delta or gated_delta");
  a.gating = rule == "gated" || rule == "gated_delta";
  a.delta = rule == "delta" || rule == "gated_delta";
  a.hq = n.attr_int("q_num_heads", 0);
  a.hkv = n.attr_int("kv_num_heads", 0);
  MRT_ENFORCE(a.hq > 0 && a.hkv > 0 && a.hq % a.hkv == 0, MRT_INVALID_MODEL, n.label(),
              ": q_num_heads must be a positive multiple of kv_num_heads, got ", a.hq, " and ", a.hkv);
  a.scale = n.attr_float("scale", 0.f);
  auto has = [&](size_t i) { return n.inputs.size() > i && !n.inputs[i].empty(); };
  MRT_ENFORCE(has(4) == a.gating, MRT_INVALID_MODEL, n.label(), ": update_rule '", rule, "' ",
              a.gating ? "requires" : "forbids", " the decay input");
  MRT_ENFORCE(has(5) == a.delta, MRT_INVALID_MODEL, n.label(), ": update_rule '", rule, "' ",
              a.delta ? "requires" : "forbids", " the beta input");
  return a;
}

void la_check(const Node& n, int64_t) { (void)read_la(n); }

void la_kernel(OpContext& ctx) {
  const LaAttrs a = read_la(ctx.node());
  const Tensor& Q = ctx.input(0);
  const Tensor& K = ctx.input(1);
  const Tensor& V = ctx.input(2);
  const Tensor* past = ctx.optional_input(3);
  const Tensor* decay = ctx.optional_input(4);
  const Tensor* beta = ctx.optional_input(5);
  MRT_CHECK_ARG(Q.rank() == 3 && K.rank() == 3 && V.rank() == 3, "LinearAttention: query, key and value must be 3-D, "
                "got ", Q.describe(), ", ", K.describe(), ", ", V.describe());
  const int64_t B = Q.dim(0), T = Q.dim(1);
  MRT_CHECK_ARG(Q.dim(2) % a.hq == 0 && V.dim(2) % a.hkv == 0, "LinearAttention: hidden sizes do not split into heads");
  const int64_t dk = Q.dim(2) / a.hq, dv = V.dim(2) / a.hkv, group = a.hq / a.hkv;
  MRT_CHECK_ARG(K.dim(0) == B && K.dim(1) == T && K.dim(2) == a.hkv * dk && V.dim(0) == B && V.dim(1) == T,
                "LinearAttention: key ", K.describe(), " / value ", V.describe(), " do not match query ", Q.describe());
  const std::vector<double> q = norm::to_doubles(Q, "query"), k = norm::to_doubles(K, "key"),
                            v = norm::to_doubles(V, "value");
  std::vector<float> state(checked_scratch({B, a.hkv, dk, dv}, sizeof(float), "LinearAttention state"), 0.f);
  if (past) {
    MRT_CHECK_ARG(past->shape() == Shape({B, a.hkv, dk, dv}), "LinearAttention: past_state ", past->describe(),
                  " must be [", B, ",", a.hkv, ",", dk, ",", dv, "]");
    const std::vector<double> p = norm::to_doubles(*past, "past_state");
    for (size_t i = 0; i < p.size(); ++i) state[i] = static_cast<float>(p[i]);
  }
  std::vector<double> dec, bet;
  int64_t dec_per = 0, bet_per = 0;
  if (decay) {
    MRT_CHECK_ARG(decay->rank() == 3 && decay->dim(0) == B && decay->dim(1) == T &&
                      (decay->dim(2) == a.hkv || decay->dim(2) == a.hkv * dk),
                  "LinearAttention: decay ", decay->describe(), " must be [", B, ", ", T, ", ", a.hkv, " or ",
                  a.hkv * dk, "]");
    dec = norm::to_doubles(*decay, "decay");
    dec_per = decay->dim(2) / a.hkv;
  }
  if (beta) {
    MRT_CHECK_ARG(beta->rank() == 3 && beta->dim(0) == B && beta->dim(1) == T &&
                      (beta->dim(2) == a.hkv || beta->dim(2) == 1),
                  "LinearAttention: beta ", beta->describe(), " must be [", B, ", ", T, ", ", a.hkv, " or 1]");
    bet = norm::to_doubles(*beta, "beta");
    bet_per = beta->dim(2);
  }
  const float scale = a.scale != 0 ? static_cast<float>(a.scale) : 1.f / std::sqrt(static_cast<float>(dk));
  std::vector<double> out(checked_scratch({B, T, a.hq, dv}, sizeof(double), "LinearAttention output"), 0.0);
  std::vector<float> vt(static_cast<size_t>(dv));
  for (int64_t b = 0; b < B; ++b)
    for (int64_t t = 0; t < T; ++t) {
      for (int64_t h = 0; h < a.hkv; ++h) {
        float* S = &state[static_cast<size_t>((b * a.hkv + h) * dk * dv)];
        const double* kt = &k[static_cast<size_t>(((b * T + t) * a.hkv + h) * dk)];
        const double* vsrc = &v[static_cast<size_t>(((b * T + t) * a.hkv + h) * dv)];
        if (a.gating) {
          for (int64_t i = 0; i < dk; ++i) {
            const double g = dec[static_cast<size_t>((b * T + t) * a.hkv * dec_per + h * dec_per + (dec_per == 1 ? 0 : i))];
            const float f = static_cast<float>(std::exp(static_cast<float>(g)));
            for (int64_t j = 0; j < dv; ++j) S[i * dv + j] *= f;
          }
        }
        for (int64_t j = 0; j < dv; ++j) vt[static_cast<size_t>(j)] = static_cast<float>(vsrc[j]);
        if (a.delta) {
          const float be = static_cast<float>(bet[static_cast<size_t>((b * T + t) * bet_per + (bet_per == 1 ? 0 : h))]);
          for (int64_t j = 0; j < dv; ++j) {
            float r = 0;
            for (int64_t i = 0; i < dk; ++i) r += S[i * dv + j] * static_cast<float>(kt[i]);
            vt[static_cast<size_t>(j)] = be * (vt[static_cast<size_t>(j)] - r);
          }
        }
        for (int64_t i = 0; i < dk; ++i)
          for (int64_t j = 0; j < dv; ++j) S[i * dv + j] += static_cast<float>(kt[i]) * vt[static_cast<size_t>(j)];
      }
      for (int64_t h = 0; h < a.hq; ++h) {
        const float* S = &state[static_cast<size_t>((b * a.hkv + h / group) * dk * dv)];
        const double* qt = &q[static_cast<size_t>(((b * T + t) * a.hq + h) * dk)];
        double* o = &out[static_cast<size_t>(((b * T + t) * a.hq + h) * dv)];
        for (int64_t j = 0; j < dv; ++j) {
          float s = 0;
          for (int64_t i = 0; i < dk; ++i) s += static_cast<float>(qt[i]) * S[i * dv + j];
          o[j] = scale * s;
        }
      }
    }
  norm::from_doubles(ctx.output(0, Q.dtype(), Shape{B, T, a.hq * dv}), out);
  if (ctx.has_output(1)) {
    const std::vector<double> st(state.begin(), state.end());
    norm::from_doubles(ctx.output(1, past ? past->dtype() : Q.dtype(), Shape{B, a.hkv, dk, dv}), st);
  }
}

}  // namespace

void register_linear_attention_kernels(KernelRegistry& r) {
  r.add("LinearAttention", 27, la_kernel, la_check);
}

}  // namespace mrt
