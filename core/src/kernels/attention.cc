// Attention (ai.onnx opsets 23-25): scaled dot-product attention over 3-D
// ([batch, seq, heads * head_size], with q_num_heads / kv_num_heads) or 4-D
// ([batch, heads, seq, head_size]) Q, K, V; multi-head, grouped-query and multi-query
// (query head h reads key/value head h / (q_heads / kv_heads)); past_key/past_value
// concatenated into present_key/present_value; a boolean (True = attend) or additive
// attn_mask broadcast to [batch, q_heads, q_seq, total_seq] (a shorter last dimension
// counts as masked beyond its end); is_causal with the bottom-right offset (the past
// length, or nonpad_kv_seqlen - q_seq per batch); left/right sliding windows;
// nonpad_kv_seqlen padding; softcap; the qk_matmul_output modes 0-3. A row whose bias
// masks every key gives zero probabilities and a zero output row.
//
// Scores and softmax run in double for double inputs, in float otherwise.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "norm_util.h"

namespace mrt {
namespace {

struct AttnAttrs {
  bool causal = false;
  int64_t q_heads = 0, kv_heads = 0;  // 0: not given
  double scale = 0;                   // 0: 1/sqrt(head_size)
  bool has_scale = false;
  double softcap = 0;
  int64_t qk_mode = 0;
  int64_t left = -1, right = -1;
};

AttnAttrs read_attn_attrs(const Node& n, int64_t opset) {
  AttnAttrs a;
  a.causal = n.attr_int("is_causal", 0) != 0;
  a.q_heads = n.attr_int("q_num_heads", 0);
  a.kv_heads = n.attr_int("kv_num_heads", 0);
  a.has_scale = n.has_attr("scale");
  a.scale = n.attr_float("scale", 0.f);
  a.softcap = n.attr_float("softcap", 0.f);
  a.qk_mode = n.attr_int("qk_matmul_output_mode", 0);
  a.left = n.attr_int("left_window_size", -1);
  a.right = n.attr_int("right_window_size", -1);
  MRT_ENFORCE(a.qk_mode >= 0 && a.qk_mode <= 3, MRT_INVALID_MODEL, n.label(),
              ": attribute qk_matmul_output_mode must be 0, 1, 2 or 3, got ", a.qk_mode);
  MRT_ENFORCE(a.left >= -1 && a.right >= -1, MRT_INVALID_MODEL, n.label(),
              ": left_window_size and right_window_size must be -1 or nonnegative, got ", a.left, " and ", a.right);
  MRT_ENFORCE(a.q_heads >= 0 && a.kv_heads >= 0, MRT_INVALID_MODEL, n.label(),
              ": q_num_heads and kv_num_heads must be positive, got ", a.q_heads, " and ", a.kv_heads);
  MRT_ENFORCE(a.softcap >= 0, MRT_INVALID_MODEL, n.label(), ": softcap must be >= 0, got ", a.softcap);
  if (n.has_attr("softmax_precision")) {
    const int64_t p = n.attr_int("softmax_precision", 1);
    MRT_ENFORCE(p == 1 || p == 10 || p == 11 || p == 16, MRT_INVALID_MODEL, n.label(),
                ": softmax_precision must be a floating element type (1, 10, 11 or 16), got ", p);
  }
  return a;
}

void attention_check(const Node& n, int64_t opset) { (void)read_attn_attrs(n, opset); }

template <class C>
std::vector<C> widen(const Tensor& t) {
  std::vector<C> v(static_cast<size_t>(t.numel()));
  MRT_NORM_DISPATCH(t.dtype(), "Attention", {
    const T* p = t.data<T>();
    for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<C>(norm::load(p[i]));
  });
  return v;
}

template <class C>
void store_all(const std::vector<C>& v, Tensor& t) {
  MRT_NORM_DISPATCH(t.dtype(), "Attention", {
    T* p = t.data<T>();
    for (size_t i = 0; i < v.size(); ++i) p[i] = norm::store<T>(static_cast<double>(v[i]));
  });
}

// [batch, seq, heads * d] -> [batch, heads, seq, d]
template <class C>
std::vector<C> split_heads(const std::vector<C>& x, int64_t B, int64_t S, int64_t H, int64_t d) {
  std::vector<C> y(x.size());
  for (int64_t b = 0; b < B; ++b)
    for (int64_t s = 0; s < S; ++s)
      for (int64_t h = 0; h < H; ++h)
        std::memcpy(&y[((b * H + h) * S + s) * d], &x[((b * S + s) * H + h) * d], sizeof(C) * d);
  return y;
}

template <class C>
void run_attention(OpContext& ctx, const AttnAttrs& a) {
  const Tensor& Qt = ctx.input(0);
  const Tensor& Kt = ctx.input(1);
  const Tensor& Vt = ctx.input(2);
  const Tensor* Mt = ctx.optional_input(3);
  const Tensor* PKt = ctx.optional_input(4);
  const Tensor* PVt = ctx.optional_input(5);
  const Tensor* NPt = ctx.optional_input(6);
  MRT_CHECK_ARG((PKt == nullptr) == (PVt == nullptr), "Attention: past_key and past_value must be given together");
  MRT_CHECK_ARG(!(NPt && PKt), "Attention: nonpad_kv_seqlen cannot be combined with past_key/past_value");
  const size_t rank = Qt.rank();
  MRT_CHECK_ARG((rank == 3 || rank == 4) && Kt.rank() == rank && Vt.rank() == rank, "Attention: Q, K and V must all "
                "be 3-D or all 4-D, got ", Qt.describe(), ", ", Kt.describe(), ", ", Vt.describe());
  const int64_t B = Qt.dim(0);
  int64_t Hq, Hkv, Sq, Skv, dq, dv;
  std::vector<C> q = widen<C>(Qt), k = widen<C>(Kt), v = widen<C>(Vt);
  if (rank == 3) {
    MRT_CHECK_ARG(a.q_heads > 0 && a.kv_heads > 0, "Attention: 3-D inputs need the q_num_heads and kv_num_heads "
                  "attributes");
    Hq = a.q_heads;
    Hkv = a.kv_heads;
    Sq = Qt.dim(1);
    Skv = Kt.dim(1);
    MRT_CHECK_ARG(Qt.dim(2) % Hq == 0 && Kt.dim(2) % Hkv == 0 && Vt.dim(2) % Hkv == 0, "Attention: hidden sizes of ",
                  Qt.describe(), ", ", Kt.describe(), ", ", Vt.describe(), " are not divisible by the head counts ", Hq,
                  " and ", Hkv);
    dq = Qt.dim(2) / Hq;
    dv = Vt.dim(2) / Hkv;
    MRT_CHECK_ARG(Kt.dim(2) / Hkv == dq, "Attention: key head size ", Kt.dim(2) / Hkv, " differs from query head size ",
                  dq);
    MRT_CHECK_ARG(Vt.dim(1) == Skv && Kt.dim(0) == B && Vt.dim(0) == B, "Attention: K ", Kt.describe(), " and V ",
                  Vt.describe(), " do not match");
    q = split_heads(q, B, Sq, Hq, dq);
    k = split_heads(k, B, Skv, Hkv, dq);
    v = split_heads(v, B, Skv, Hkv, dv);
  } else {
    MRT_CHECK_ARG(a.q_heads == 0 && a.kv_heads == 0, "Attention: q_num_heads and kv_num_heads must not be given for "
                  "4-D inputs");
    Hq = Qt.dim(1);
    Hkv = Kt.dim(1);
    Sq = Qt.dim(2);
    Skv = Kt.dim(2);
    dq = Qt.dim(3);
    dv = Vt.dim(3);
    MRT_CHECK_ARG(Kt.dim(0) == B && Vt.dim(0) == B && Vt.dim(1) == Hkv && Vt.dim(2) == Skv && Kt.dim(3) == dq,
                  "Attention: Q ", Qt.describe(), ", K ", Kt.describe(), " and V ", Vt.describe(), " do not match");
  }
  MRT_CHECK_ARG(Hkv > 0 && Hq % Hkv == 0, "Attention: q heads ", Hq, " are not a multiple of kv heads ", Hkv);
  // present = past ++ new along the sequence
  int64_t P = 0;
  if (PKt) {
    MRT_CHECK_ARG(PKt->rank() == 4 && PKt->dim(0) == B && PKt->dim(1) == Hkv && PKt->dim(3) == dq,
                  "Attention: past_key ", PKt->describe(), " must be [", B, ",", Hkv, ",past,", dq, "]");
    P = PKt->dim(2);
    MRT_CHECK_ARG(PVt->rank() == 4 && PVt->dim(0) == B && PVt->dim(1) == Hkv && PVt->dim(2) == P && PVt->dim(3) == dv,
                  "Attention: past_value ", PVt->describe(), " must be [", B, ",", Hkv, ",", P, ",", dv, "]");
    const std::vector<C> pk = widen<C>(*PKt), pv = widen<C>(*PVt);
    auto cat = [&](const std::vector<C>& past, const std::vector<C>& cur, int64_t d) {
      std::vector<C> out(static_cast<size_t>(B * Hkv * (P + Skv) * d));
      for (int64_t bh = 0; bh < B * Hkv; ++bh) {
        std::memcpy(&out[bh * (P + Skv) * d], &past[bh * P * d], sizeof(C) * P * d);
        std::memcpy(&out[(bh * (P + Skv) + P) * d], &cur[bh * Skv * d], sizeof(C) * Skv * d);
      }
      return out;
    };
    k = cat(pk, k, dq);
    v = cat(pv, v, dv);
  }
  const int64_t T = P + Skv;
  std::vector<int64_t> nonpad;
  if (NPt) {
    MRT_CHECK_ARG(NPt->rank() == 1 && NPt->dim(0) == B, "Attention: nonpad_kv_seqlen must be [", B, "], got ",
                  NPt->describe());
    nonpad = NPt->to_int64_vector();
  }
  // mask, broadcast to [B, Hq, Sq, Tm]
  const bool bool_mask = Mt && Mt->dtype() == DType::kBool;
  std::vector<double> mask;
  int64_t ms[4] = {0, 0, 0, 0}, Tm = 0;
  if (Mt) {
    MRT_CHECK_ARG(Mt->rank() >= 1 && Mt->rank() <= 4, "Attention: attn_mask must have rank 1 to 4, got ",
                  Mt->describe());
    Shape m4(4, 1);
    for (size_t i = 0; i < Mt->rank(); ++i) m4[4 - Mt->rank() + i] = Mt->dim(i);
    const int64_t want[3] = {B, Hq, Sq};
    for (int i = 0; i < 3; ++i)
      MRT_CHECK_ARG(m4[i] == 1 || m4[i] == want[i], "Attention: attn_mask ", Mt->describe(),
                    " does not broadcast to [", B, ",", Hq, ",", Sq, ",", T, "]");
    Tm = m4[3];
    MRT_CHECK_ARG(Tm <= T, "Attention: attn_mask ", Mt->describe(), " is longer than the ", T, " keys");
    ms[3] = 1;
    ms[2] = m4[2] == 1 ? 0 : Tm;
    ms[1] = m4[1] == 1 ? 0 : m4[2] * Tm;
    ms[0] = m4[0] == 1 ? 0 : m4[1] * m4[2] * Tm;
    mask.resize(static_cast<size_t>(Mt->numel()));
    if (bool_mask) {
      const bool* mp = Mt->data<bool>();
      for (size_t i = 0; i < mask.size(); ++i) mask[i] = mp[i] ? 0.0 : -std::numeric_limits<double>::infinity();
    } else {
      for (size_t i = 0; i < mask.size(); ++i) mask[i] = Mt->scalar_as_double(static_cast<int64_t>(i));
    }
  }
  const double scale = a.has_scale ? a.scale : 1.0 / std::sqrt(static_cast<double>(dq));
  const C sq = static_cast<C>(std::sqrt(scale));
  const DType dt = Qt.dtype();
  std::vector<C> y(static_cast<size_t>(B * Hq * Sq * dv), C(0));
  std::vector<C> qk_out;
  const bool want_qk = ctx.has_output(3);
  if (want_qk) qk_out.assign(static_cast<size_t>(B * Hq * Sq * T), C(0));
  const int64_t group = Hq / Hkv;
  const double ninf = -std::numeric_limits<double>::infinity();

  ctx.threads().parallel_for(B * Hq, 1, [&](int64_t begin, int64_t end) {
    std::vector<double> bias(static_cast<size_t>(T)), w(static_cast<size_t>(T));
    std::vector<C> qs(static_cast<size_t>(dq));
    for (int64_t bh = begin; bh < end; ++bh) {
      const int64_t b = bh / Hq, h = bh % Hq, hk = h / group;
      const C* kb = k.data() + (b * Hkv + hk) * T * dq;  // (data(): k may be empty)
      const C* vb = v.data() + (b * Hkv + hk) * T * dv;
      const int64_t offset = NPt ? nonpad[static_cast<size_t>(b)] - Sq : P;
      for (int64_t i = 0; i < Sq; ++i) {
        const C* qi = q.data() + ((b * Hq + h) * Sq + i) * dq;
        for (int64_t e = 0; e < dq; ++e) qs[e] = qi[e] * sq;
        double bias_max = ninf;
        for (int64_t j = 0; j < T; ++j) {
          double bj = 0;
          if (Mt) bj += j < Tm ? mask[static_cast<size_t>(b * ms[0] + h * ms[1] + i * ms[2] + j)] : ninf;
          if (a.causal && j > i + offset) bj = ninf;
          const int64_t diff = i + offset - j;
          if (a.left >= 0 && diff > a.left) bj = ninf;
          if (a.right >= 0 && -diff > a.right) bj = ninf;
          if (NPt && j >= nonpad[static_cast<size_t>(b)]) bj = ninf;
          bias[j] = bj;
          bias_max = std::max(bias_max, bj);
          C s = 0;
          const C* kj = kb + j * dq;
          for (int64_t e = 0; e < dq; ++e) s += qs[e] * (kj[e] * sq);
          double sd = static_cast<double>(s);
          if (a.softcap > 0) sd = a.softcap * std::tanh(sd / a.softcap);
          w[j] = sd;
        }
        C* qko = want_qk ? qk_out.data() + ((b * Hq + h) * Sq + i) * T : nullptr;
        if (qko && a.qk_mode <= 1)
          for (int64_t j = 0; j < T; ++j) qko[j] = static_cast<C>(w[j]);
        for (int64_t j = 0; j < T; ++j) w[j] += bias[j];
        if (qko && a.qk_mode == 2)
          for (int64_t j = 0; j < T; ++j) qko[j] = static_cast<C>(w[j]);
        C* yi = y.data() + ((b * Hq + h) * Sq + i) * dv;
        if (bias_max == ninf) {  // every key masked: zero probabilities, zero output
          if (qko && a.qk_mode == 3) std::fill(qko, qko + T, C(0));
          continue;
        }
        double m = ninf;
        for (int64_t j = 0; j < T; ++j) m = std::max(m, w[j]);
        if (m == ninf) m = 0;
        double sum = 0;
        for (int64_t j = 0; j < T; ++j) {
          w[j] = std::exp(w[j] - m);
          sum += w[j];
        }
        if (sum == 0) sum = 1;
        for (int64_t j = 0; j < T; ++j) {
          const C p = static_cast<C>(w[j] / sum);
          if (qko && a.qk_mode == 3) qko[j] = p;
          if (p == C(0)) continue;
          const C* vj = vb + j * dv;
          for (int64_t e = 0; e < dv; ++e) yi[e] += p * vj[e];
        }
      }
    }
  });

  if (rank == 3) {  // [B, Hq, Sq, dv] -> [B, Sq, Hq * dv]
    std::vector<C> t(y.size());
    for (int64_t b = 0; b < B; ++b)
      for (int64_t h = 0; h < Hq; ++h)
        for (int64_t s = 0; s < Sq; ++s)
          std::memcpy(&t[((b * Sq + s) * Hq + h) * dv], &y[((b * Hq + h) * Sq + s) * dv], sizeof(C) * dv);
    store_all(t, ctx.output(0, dt, Shape{B, Sq, Hq * dv}));
  } else {
    store_all(y, ctx.output(0, dt, Shape{B, Hq, Sq, dv}));
  }
  if (ctx.has_output(1)) store_all(k, ctx.output(1, Kt.dtype(), Shape{B, Hkv, T, dq}));
  if (ctx.has_output(2)) store_all(v, ctx.output(2, Vt.dtype(), Shape{B, Hkv, T, dv}));
  if (want_qk) store_all(qk_out, ctx.output(3, dt, Shape{B, Hq, Sq, T}));
}

void attention_kernel(OpContext& ctx) {
  const AttnAttrs a = read_attn_attrs(ctx.node(), ctx.opset());
  const DType dt = ctx.input(0).dtype();
  switch (dt) {
    case DType::kFloat: case DType::kFloat16: case DType::kBFloat16: run_attention<float>(ctx, a); break;
    case DType::kDouble: run_attention<double>(ctx, a); break;
    default: fail(MRT_NOT_IMPLEMENTED, "Attention: element type ", dtype_name(dt), " is not supported");
  }
}

}  // namespace

void register_attention_kernels(KernelRegistry& r) { r.add("Attention", 23, attention_kernel, attention_check); }

}  // namespace mrt
