// com.microsoft operators that onnxruntime's transformer optimizer fuses BERT/GPT-style
// graphs into: Gelu, BiasGelu (erf form), FastGelu (tanh form, optional bias),
// SkipLayerNormalization and SkipSimplifiedLayerNormalization (residual add + optional
// bias + LayerNorm / RMSNorm over the last axis, with the optional mean, inverse std and
// sum outputs), SimplifiedLayerNormalization (RMSNorm), EmbedLayerNormalization and FusedMatMul (alpha, transA, transB; the batch
// transposes are refused).
#include <algorithm>
#include <cmath>
#include <vector>

#include "../gemm/sgemm.h"
#include "elementwise_math.h"
#include "linalg_util.h"
#include "norm_util.h"

namespace mrt {
namespace {

enum class GeluKind { kErf, kBiasErf, kTanh };

}  // namespace

void gelu_erf_float(const float* x, float* y, int64_t n) {
#if defined(MOSAICRT_X86_SIMD)
  // with the SGEMM's AVX-512 kernel (MOSAICRT_SGEMM_KERNEL=avx2 runs, and tests, the AVX2 blocks below)
  if (sgemm_kernel_is_avx512()) {
    fastmath::gelu_erf_avx512(x, y, n);
    return;
  }
  if (fastmath::cpu_has_avx2_fma()) {  // on the vectorized erf, a block at a time
    constexpr int64_t kBlock = 1024;
    float t[kBlock];
    for (int64_t b = 0; b < n; b += kBlock) {
      const int64_t m = std::min(kBlock, n - b);
      for (int64_t i = 0; i < m; ++i) t[i] = x[b + i] * 0.70710678118654752f;
      fastmath::erf_avx2(t, t, m);
      for (int64_t i = 0; i < m; ++i) y[b + i] = 0.5f * x[b + i] * (1.f + t[i]);
    }
    return;
  }
#endif
  for (int64_t i = 0; i < n; ++i) {
    const float v = x[i];
    y[i] = 0.5f * v * (1.f + std::erf(v * 0.70710678118654752f));
  }
}

namespace {

template <GeluKind kind>
void gelu_kernel(OpContext& ctx) {
  const Tensor& X = ctx.input(0);
  const Tensor* bias = kind == GeluKind::kErf ? nullptr : ctx.optional_input(1);
  MRT_CHECK_ARG(kind != GeluKind::kBiasErf || bias, "BiasGelu: input B is required");
  int64_t bn = 0;
  if (bias) {
    bn = bias->numel();
    MRT_CHECK_ARG(bias->rank() == 1 && X.rank() >= 1 && bn == X.dim(X.rank() - 1) && bias->dtype() == X.dtype(),
                  ctx.node().op_type, ": bias ", bias->describe(), " must be 1-D with the last dimension of ",
                  X.describe());
  }
  Tensor& Y = ctx.output(0, X.dtype(), X.shape());
  if (kind == GeluKind::kErf && X.dtype() == DType::kFloat) {
    const float* x = X.data<float>();
    float* y = Y.data<float>();
    ctx.threads().parallel_for(X.numel(), 4096, [&](int64_t s, int64_t e) { gelu_erf_float(x + s, y + s, e - s); });
    return;
  }
  MRT_NORM_DISPATCH(X.dtype(), ctx.node().op_type.c_str(), {
    using C = norm::Acc<T>;
    const T* x = X.data<T>();
    const T* b = bias ? bias->data<T>() : nullptr;
    T* y = Y.data<T>();
    ctx.threads().parallel_for(X.numel(), 4096, [&](int64_t s, int64_t e) {
      for (int64_t i = s; i < e; ++i) {
        C v = norm::load(x[i]);
        if (b) v += norm::load(b[i % bn]);
        C r;
        if (kind == GeluKind::kTanh) {
          const C k = static_cast<C>(0.7978845608028654);  // sqrt(2 / pi)
          r = C(0.5) * v * (C(1) + std::tanh(k * (v + static_cast<C>(0.044715) * v * v * v)));
        } else {
          r = C(0.5) * v * (C(1) + std::erf(v * static_cast<C>(0.7071067811865476)));
        }
        y[i] = norm::store<T>(r);
      }
    });
  });
}

template <bool kSimplified>
void skip_norm_kernel(OpContext& ctx) {
  const char* op = kSimplified ? "SkipSimplifiedLayerNormalization" : "SkipLayerNormalization";
  const Tensor& X = ctx.input(0);
  const Tensor& S = ctx.input(1);
  const Tensor& G = ctx.input(2);
  const Tensor* Bt = kSimplified ? nullptr : ctx.optional_input(3);
  const Tensor* bias = ctx.optional_input(kSimplified ? 3 : 4);
  const float eps = ctx.node().attr_float("epsilon", 1e-12f);
  MRT_CHECK_ARG(X.rank() >= 2, op, ": input must have rank >= 2, got ", X.describe());
  const int64_t H = X.dim(X.rank() - 1), rows = X.numel() / std::max<int64_t>(H, 1);
  MRT_CHECK_ARG(S.numel() == X.numel() || (S.numel() % H == 0 && X.numel() % S.numel() == 0), op, ": skip ",
                S.describe(), " does not match input ", X.describe());
  MRT_CHECK_ARG(G.numel() == H, op, ": gamma ", G.describe(), " must have ", H, " values");
  if (Bt) MRT_CHECK_ARG(Bt->numel() == H, op, ": beta ", Bt->describe(), " must have ", H, " values");
  if (bias) MRT_CHECK_ARG(bias->numel() == H, op, ": bias ", bias->describe(), " must have ", H, " values");
  const std::vector<double> x = norm::to_doubles(X, op), s = norm::to_doubles(S, op), g = norm::to_doubles(G, op);
  const std::vector<double> beta = Bt ? norm::to_doubles(*Bt, op) : std::vector<double>(static_cast<size_t>(H), 0.0);
  const std::vector<double> bb = bias ? norm::to_doubles(*bias, op) : std::vector<double>(static_cast<size_t>(H), 0.0);
  std::vector<double> y(x.size()), sum(x.size()), mean(static_cast<size_t>(rows)), inv(static_cast<size_t>(rows));
  const int64_t sn = static_cast<int64_t>(s.size());
  for (int64_t r = 0; r < rows; ++r) {
    double m = 0, sq = 0;
    for (int64_t j = 0; j < H; ++j) {
      const int64_t i = r * H + j;
      const double v = x[static_cast<size_t>(i)] + s[static_cast<size_t>(i % sn)] + bb[static_cast<size_t>(j)];
      sum[static_cast<size_t>(i)] = v;
      m += v;
      sq += v * v;
    }
    m /= static_cast<double>(H);
    const double var = kSimplified ? sq / static_cast<double>(H) : sq / static_cast<double>(H) - m * m;
    const double is = 1.0 / std::sqrt(var + eps);
    mean[static_cast<size_t>(r)] = m;
    inv[static_cast<size_t>(r)] = is;
    for (int64_t j = 0; j < H; ++j) {
      const size_t i = static_cast<size_t>(r * H + j);
      const double c = kSimplified ? sum[i] : sum[i] - m;
      y[i] = c * is * g[static_cast<size_t>(j)] + beta[static_cast<size_t>(j)];
    }
  }
  norm::from_doubles(ctx.output(0, X.dtype(), X.shape()), y);
  Shape stat_shape = X.shape();
  stat_shape.back() = 1;
  if (ctx.has_output(1)) norm::from_doubles(ctx.output(1, DType::kFloat, stat_shape), mean);
  if (ctx.has_output(2)) norm::from_doubles(ctx.output(2, DType::kFloat, stat_shape), inv);
  if (ctx.has_output(3)) norm::from_doubles(ctx.output(3, X.dtype(), X.shape()), sum);
}

void fused_matmul_check(const Node& n, int64_t) {
  MRT_ENFORCE(n.attr_int("transBatchA", 0) == 0 && n.attr_int("transBatchB", 0) == 0, MRT_NOT_IMPLEMENTED, n.label(),
              ": transBatchA/transBatchB are not supported");
}

void fused_matmul_kernel(OpContext& ctx) {
  const Node& n = ctx.node();
  const Tensor& A = ctx.input(0);
  const Tensor& B = ctx.input(1);
  MRT_CHECK_IMPL(A.dtype() == DType::kFloat && B.dtype() == DType::kFloat, "FusedMatMul: only float32 is supported, "
                 "got ", A.describe(), " and ", B.describe());
  MRT_CHECK_ARG(A.rank() >= 2 && B.rank() >= 2, "FusedMatMul: inputs must have rank >= 2, got ", A.describe(), " and ",
                B.describe());
  const bool ta = n.attr_int("transA", 0) != 0, tb = n.attr_int("transB", 0) != 0;
  const float alpha = n.attr_float("alpha", 1.f);
  const int64_t M = ta ? A.dim(A.rank() - 1) : A.dim(A.rank() - 2), K = ta ? A.dim(A.rank() - 2) : A.dim(A.rank() - 1);
  const int64_t KB = tb ? B.dim(B.rank() - 1) : B.dim(B.rank() - 2), N = tb ? B.dim(B.rank() - 2) : B.dim(B.rank() - 1);
  MRT_CHECK_ARG(K == KB, "FusedMatMul: inner dimensions of ", A.describe(), " and ", B.describe(), " differ");
  const Shape ba(A.shape().begin(), A.shape().end() - 2), bb(B.shape().begin(), B.shape().end() - 2);
  Shape batch = broadcast_shapes(ba, bb);
  Shape out = batch;
  out.push_back(M);
  out.push_back(N);
  Tensor& Y = ctx.output(0, DType::kFloat, out);
  const int64_t nb = shape_size(batch);
  const size_t r = batch.size();
  // the matrices split between the threads when they are many and small (an attention's heads), as MatMul does
  linalg_for_each_matrix(ctx, nb, 2.0 * M * N * K, true, [&](int64_t b0, int64_t b1, ThreadPool* pool) {
    for (int64_t bi = b0; bi < b1; ++bi) {
      // batch offsets under broadcasting
      int64_t oa = 0, ob = 0, sa = 1, sb = 1;
      for (size_t d = r, rest = static_cast<size_t>(bi); d-- > 0;) {
        const int64_t at = static_cast<int64_t>(rest % static_cast<size_t>(batch[d]));
        rest /= static_cast<size_t>(batch[d]);
        const int64_t da = d + ba.size() >= r ? ba[d + ba.size() - r] : 1;
        const int64_t db = d + bb.size() >= r ? bb[d + bb.size() - r] : 1;
        oa += (da == 1 ? 0 : at) * sa;
        ob += (db == 1 ? 0 : at) * sb;
        sa *= da;
        sb *= db;
      }
      sgemm(ta, tb, M, N, K, alpha, A.data<float>() + oa * M * K, ta ? M : K, B.data<float>() + ob * K * N,
            tb ? K : N, 0.f, Y.data<float>() + bi * M * N, N, pool);
    }
  });
}

// SimplifiedLayerNormalization (RMSNorm; onnxruntime registers it in the ai.onnx domain):
// Y = X / sqrt(mean(X^2 over axes >= axis) + epsilon) * scale, optional inv_std_var output.
void simplified_ln_kernel(OpContext& ctx) {
  const Tensor& X = ctx.input(0);
  const Tensor& scale = ctx.input(1);
  const float eps = ctx.node().attr_float("epsilon", 1e-5f);
  const int64_t axis = normalize_axis(ctx.node().attr_int("axis", -1), static_cast<int64_t>(X.rank()), "axis");
  const int64_t inner = norm::prod(X.shape(), static_cast<size_t>(axis), X.rank());
  const int64_t rows = inner ? X.numel() / inner : 0;
  MRT_CHECK_ARG(scale.numel() == inner, "SimplifiedLayerNormalization: scale ", scale.describe(), " must have ", inner,
                " values");
  const std::vector<double> x = norm::to_doubles(X, "X"), g = norm::to_doubles(scale, "scale");
  std::vector<double> y(x.size()), inv(static_cast<size_t>(rows));
  for (int64_t r = 0; r < rows; ++r) {
    double sq = 0;
    for (int64_t j = 0; j < inner; ++j) sq += x[static_cast<size_t>(r * inner + j)] * x[static_cast<size_t>(r * inner + j)];
    const double is = 1.0 / std::sqrt(sq / static_cast<double>(inner) + eps);
    inv[static_cast<size_t>(r)] = is;
    for (int64_t j = 0; j < inner; ++j)
      y[static_cast<size_t>(r * inner + j)] = x[static_cast<size_t>(r * inner + j)] * is * g[static_cast<size_t>(j)];
  }
  norm::from_doubles(ctx.output(0, X.dtype(), X.shape()), y);
  if (ctx.has_output(1)) {
    Shape st = X.shape();
    for (size_t d = static_cast<size_t>(axis); d < st.size(); ++d) st[d] = 1;
    norm::from_doubles(ctx.output(1, DType::kFloat, st), inv);
  }
}

// EmbedLayerNormalization: word + position (+ segment) embeddings of the token ids, then
// LayerNorm(gamma, beta, epsilon). Outputs: [batch, seq, hidden], mask_index [batch] (the
// count of mask ones per sequence; zeros without a mask), embedding_sum (optional).
void embed_ln_kernel(OpContext& ctx) {
  const Tensor& ids = ctx.input(0);
  const Tensor* seg = ctx.optional_input(1);
  const Tensor& word = ctx.input(2);
  const Tensor& pos = ctx.input(3);
  const Tensor* segemb = ctx.optional_input(4);
  const Tensor& gamma = ctx.input(5);
  const Tensor& beta = ctx.input(6);
  const Tensor* mask = ctx.optional_input(7);
  const Tensor* pos_ids = ctx.optional_input(8);
  const float eps = ctx.node().attr_float("epsilon", 1e-12f);
  MRT_CHECK_ARG(ids.rank() == 2, "EmbedLayerNormalization: input_ids must be [batch, seq], got ", ids.describe());
  MRT_CHECK_IMPL(word.dtype() == DType::kFloat, "EmbedLayerNormalization: only float32 embeddings are supported");
  const int64_t B = ids.dim(0), S = ids.dim(1), H = word.dim(1);
  MRT_CHECK_ARG(word.rank() == 2 && pos.rank() == 2 && pos.dim(1) == H && gamma.numel() == H && beta.numel() == H,
                "EmbedLayerNormalization: embeddings ", word.describe(), " / ", pos.describe(), " and gamma/beta ",
                gamma.describe(), " / ", beta.describe(), " do not agree on the hidden size");
  MRT_CHECK_ARG((seg == nullptr) == (segemb == nullptr), "EmbedLayerNormalization: segment_ids and "
                "segment_embedding must be given together");
  const float* w = word.data<float>();
  const float* p = pos.data<float>();
  const float* se = segemb ? segemb->data<float>() : nullptr;
  const float* g = gamma.data<float>();
  const float* bt = beta.data<float>();
  Tensor& Y = ctx.output(0, DType::kFloat, Shape{B, S, H});
  float* sum_out = ctx.has_output(2) ? ctx.output(2, DType::kFloat, Shape{B, S, H}).data<float>() : nullptr;
  float* y = Y.data<float>();
  std::vector<double> e(static_cast<size_t>(H));
  for (int64_t b = 0; b < B; ++b)
    for (int64_t s = 0; s < S; ++s) {
      const int64_t t = b * S + s;
      const int64_t id = ids.int_at(t);
      MRT_CHECK_ARG(id >= 0 && id < word.dim(0), "EmbedLayerNormalization: token id ", id, " is outside [0, ",
                    word.dim(0), ")");
      int64_t ps = s;
      if (pos_ids) ps = pos_ids->int_at(pos_ids->numel() == S ? s : t);
      MRT_CHECK_ARG(ps >= 0 && ps < pos.dim(0), "EmbedLayerNormalization: position ", ps, " is outside [0, ",
                    pos.dim(0), ")");
      int64_t sg = 0;
      if (seg) {
        sg = seg->int_at(t);
        MRT_CHECK_ARG(sg >= 0 && sg < segemb->dim(0), "EmbedLayerNormalization: segment id ", sg,
                      " is outside [0, ", segemb->dim(0), ")");
      }
      double m = 0, sq = 0;
      for (int64_t j = 0; j < H; ++j) {
        double v = static_cast<double>(w[id * H + j]) + p[ps * H + j];
        if (se) v += se[sg * H + j];
        e[static_cast<size_t>(j)] = v;
        m += v;
        if (sum_out) sum_out[t * H + j] = static_cast<float>(v);
      }
      m /= static_cast<double>(H);
      for (int64_t j = 0; j < H; ++j) sq += (e[static_cast<size_t>(j)] - m) * (e[static_cast<size_t>(j)] - m);
      const double inv = 1.0 / std::sqrt(sq / static_cast<double>(H) + eps);
      for (int64_t j = 0; j < H; ++j)
        y[t * H + j] = static_cast<float>((e[static_cast<size_t>(j)] - m) * inv * g[j] + bt[j]);
    }
  if (ctx.has_output(1)) {
    Tensor& MI = ctx.output(1, DType::kInt32, Shape{B});
    int32_t* mi = MI.data<int32_t>();
    for (int64_t b = 0; b < B; ++b) {
      int32_t c = 0;
      if (mask)
        for (int64_t s = 0; s < S; ++s) c += mask->int_at(b * S + s) != 0 ? 1 : 0;
      mi[b] = c;
    }
  }
}

}  // namespace

void register_contrib_transformer_kernels(KernelRegistry& r) {
  r.add_domain("com.microsoft", "EmbedLayerNormalization", 1, embed_ln_kernel);
  r.add("SimplifiedLayerNormalization", 1, simplified_ln_kernel);
  r.add_domain("com.microsoft", "SimplifiedLayerNormalization", 1, simplified_ln_kernel);
  r.add_domain("com.microsoft", "Gelu", 1, gelu_kernel<GeluKind::kErf>);
  r.add_domain("com.microsoft", "BiasGelu", 1, gelu_kernel<GeluKind::kBiasErf>);
  r.add_domain("com.microsoft", "FastGelu", 1, gelu_kernel<GeluKind::kTanh>);
  r.add_domain("com.microsoft", "SkipLayerNormalization", 1, skip_norm_kernel<false>);
  r.add_domain("com.microsoft", "SkipSimplifiedLayerNormalization", 1, skip_norm_kernel<true>);
  r.add_domain("com.microsoft", "FusedMatMul", 1, fused_matmul_kernel, fused_matmul_check);
}

}  // namespace mrt
