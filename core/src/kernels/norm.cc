// Kernel group: norm — BatchNormalization, LRN, LayerNormalization, RMSNormalization,
// InstanceNormalization, GroupNormalization, LpNormalization, MeanVarianceNormalization.
// Softmax/LogSoftmax/Hardmax live in norm_softmax.cc, NegativeLogLikelihoodLoss and
// SoftmaxCrossEntropyLoss in norm_loss.cc.
//
// Statistics are accumulated in double and applied in the tensor's compute type
// (float for float/float16/bfloat16, double for double). Work is split over
// independent rows / (batch, channel) slices with the session's thread pool.
#include <algorithm>
#include <cmath>

#include "../gemm/sgemm.h"
#include "norm_util.h"

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

namespace mrt {

void register_softmax_kernels(KernelRegistry& r);  // norm_softmax.cc
void register_loss_kernels(KernelRegistry& r);     // norm_loss.cc

namespace {

using norm::Acc;
using norm::load;
using norm::store;

int64_t grain_for(int64_t work_per_item) {
  return std::max<int64_t>(1, 16384 / std::max<int64_t>(1, work_per_item));
}

std::vector<double> param(const OpContext& ctx, size_t i, int64_t expect, const char* what) {
  const Tensor& t = ctx.input(i);
  MRT_CHECK_ARG(t.numel() == expect, ctx.node().op_type, ": ", what, " must have ", expect,
                " elements, got ", t.describe());
  return norm::to_doubles(t, what);
}

// ---------------------------------------------------------------- BatchNormalization

// sum(x) and sum((x - mean)^2) of a float row, in double (4 partial sums of 2 lanes, or of 8 on AVX-512).
double row_sum_f64(const float* p, int64_t n) {
#if defined(MOSAICRT_X86_SIMD)
  if (sgemm_kernel_is_avx512()) return norm::row_sum_f64_avx512(p, n);
#endif
  int64_t j = 0;
  double s = 0;
#if defined(__SSE2__)
  __m128d a0 = _mm_setzero_pd(), a1 = a0, a2 = a0, a3 = a0;
  for (; j + 8 <= n; j += 8) {
    const __m128 v0 = _mm_loadu_ps(p + j), v1 = _mm_loadu_ps(p + j + 4);
    a0 = _mm_add_pd(a0, _mm_cvtps_pd(v0));
    a1 = _mm_add_pd(a1, _mm_cvtps_pd(_mm_movehl_ps(v0, v0)));
    a2 = _mm_add_pd(a2, _mm_cvtps_pd(v1));
    a3 = _mm_add_pd(a3, _mm_cvtps_pd(_mm_movehl_ps(v1, v1)));
  }
  alignas(16) double l[2];
  _mm_store_pd(l, _mm_add_pd(_mm_add_pd(a0, a1), _mm_add_pd(a2, a3)));
  s = l[0] + l[1];
#endif
  for (; j < n; ++j) s += p[j];
  return s;
}

double row_sq_dev_f64(const float* p, int64_t n, double mean) {
#if defined(MOSAICRT_X86_SIMD)
  if (sgemm_kernel_is_avx512()) return norm::row_sq_dev_f64_avx512(p, n, mean);
#endif
  int64_t j = 0;
  double s = 0;
#if defined(__SSE2__)
  const __m128d m = _mm_set1_pd(mean);
  __m128d a0 = _mm_setzero_pd(), a1 = a0, a2 = a0, a3 = a0;
  auto sq = [&](__m128d v) {
    const __m128d d = _mm_sub_pd(v, m);
    return _mm_mul_pd(d, d);
  };
  for (; j + 8 <= n; j += 8) {
    const __m128 v0 = _mm_loadu_ps(p + j), v1 = _mm_loadu_ps(p + j + 4);
    a0 = _mm_add_pd(a0, sq(_mm_cvtps_pd(v0)));
    a1 = _mm_add_pd(a1, sq(_mm_cvtps_pd(_mm_movehl_ps(v0, v0))));
    a2 = _mm_add_pd(a2, sq(_mm_cvtps_pd(v1)));
    a3 = _mm_add_pd(a3, sq(_mm_cvtps_pd(_mm_movehl_ps(v1, v1))));
  }
  alignas(16) double l[2];
  _mm_store_pd(l, _mm_add_pd(_mm_add_pd(a0, a1), _mm_add_pd(a2, a3)));
  s = l[0] + l[1];
#endif
  for (; j < n; ++j) {
    const double d = static_cast<double>(p[j]) - mean;
    s += d * d;
  }
  return s;
}

// The sum of p[0, n) and the sum of squared deviations from `mean`, in double: float spans on the vector
// paths above, others over 4 independent partial sums. (One running sum waits on each addition's latency:
// InstanceNormalization of 256 planes of 56 x 56 took 5.7 times onnxruntime's time on one serial sum per pass.)
template <class T>
double span_sum(const T* p, int64_t n) {
  if constexpr (std::is_same<T, float>::value) {
    return row_sum_f64(p, n);
  } else {
    double s[4] = {};
    int64_t j = 0;
    for (; j + 4 <= n; j += 4)
      for (int k = 0; k < 4; ++k) s[k] += load(p[j + k]);
    for (; j < n; ++j) s[0] += load(p[j]);
    return (s[0] + s[1]) + (s[2] + s[3]);
  }
}
template <class T>
double span_sq_dev(const T* p, int64_t n, double mean) {
  if constexpr (std::is_same<T, float>::value) {
    return row_sq_dev_f64(p, n, mean);
  } else {
    double s[4] = {};
    int64_t j = 0;
    for (; j + 4 <= n; j += 4)
      for (int k = 0; k < 4; ++k) {
        const double d = load(p[j + k]) - mean;
        s[k] += d * d;
      }
    for (; j < n; ++j) {
      const double d = load(p[j]) - mean;
      s[0] += d * d;
    }
    return (s[0] + s[1]) + (s[2] + s[3]);
  }
}

template <class T>
void batchnorm_typed(OpContext& ctx, int64_t N, int64_t C, int64_t S, bool training) {
  using A = Acc<T>;
  const Tensor& X = ctx.input(0);
  const float eps = ctx.node().attr_float("epsilon", 1e-5f);
  const std::vector<double> scale = param(ctx, 1, C, "scale");
  const std::vector<double> bias = param(ctx, 2, C, "B");
  std::vector<double> mean = param(ctx, 3, C, "input_mean");
  std::vector<double> var = param(ctx, 4, C, "input_var");
  const T* x = X.data<T>();
  Tensor& Y = ctx.output(0, X.dtype(), X.shape());
  T* y = Y.data<T>();

  if (training) {
    const float momentum = ctx.node().attr_float("momentum", 0.9f);
    std::vector<double> bmean(C, 0.0), bvar(C, 0.0);
    const double count = static_cast<double>(N * S);
    ctx.threads().parallel_for(C, grain_for(N * S), [&](int64_t cb, int64_t ce) {
      for (int64_t c = cb; c < ce; ++c) {
        double s = 0;
        for (int64_t n = 0; n < N; ++n) s += span_sum(x + (n * C + c) * S, S);
        const double m = count > 0 ? s / count : 0.0;
        double v = 0;
        for (int64_t n = 0; n < N; ++n) v += span_sq_dev(x + (n * C + c) * S, S, m);
        bmean[c] = m;
        bvar[c] = count > 0 ? v / count : 0.0;
      }
    });
    const DType pt = ctx.input(3).dtype();
    if (ctx.has_output(1)) {
      std::vector<double> v(C);
      for (int64_t c = 0; c < C; ++c) v[c] = mean[c] * momentum + bmean[c] * (1.0 - momentum);
      norm::from_doubles(ctx.output(1, pt, ctx.input(3).shape()), v);
    }
    if (ctx.has_output(2)) {
      const DType vt = ctx.input(4).dtype();
      std::vector<double> v(C);
      for (int64_t c = 0; c < C; ++c) v[c] = var[c] * momentum + bvar[c] * (1.0 - momentum);
      norm::from_doubles(ctx.output(2, vt, ctx.input(4).shape()), v);
    }
    mean = bmean;
    var = bvar;
  } else {
    // Inference: the running statistics pass through unchanged when asked for.
    for (size_t o = 1; o <= 2; ++o)
      if (ctx.has_output(o)) ctx.set_output(o, ctx.input(o + 2));
  }

  std::vector<A> a(C), b(C);
  for (int64_t c = 0; c < C; ++c) {
    const double inv = 1.0 / std::sqrt(var[c] + static_cast<double>(eps));
    a[c] = static_cast<A>(scale[c] * inv);
    b[c] = static_cast<A>(bias[c] - mean[c] * scale[c] * inv);
  }
  if (S == 1) {  // [N, C] (after a Gemm): rows of the channels, a vectorizable loop per row
    ctx.threads().parallel_for(N, grain_for(C), [&](int64_t b0, int64_t e0) {
      for (int64_t n = b0; n < e0; ++n) {
        const T* p = x + n * C;
        T* q = y + n * C;
        for (int64_t c = 0; c < C; ++c) q[c] = store<T>(static_cast<A>(load(p[c])) * a[c] + b[c]);
      }
    });
    return;
  }
  ctx.threads().parallel_for(N * C, grain_for(S), [&](int64_t b0, int64_t e0) {
    for (int64_t nc = b0; nc < e0; ++nc) {
      const int64_t c = nc % C;
      const A ac = a[c], bc = b[c];
      const T* p = x + nc * S;
      T* q = y + nc * S;
      for (int64_t i = 0; i < S; ++i) q[i] = store<T>(static_cast<A>(load(p[i])) * ac + bc);
    }
  });
}

void batchnorm_kernel(OpContext& ctx) {
  const Tensor& X = ctx.input(0);
  const Node& node = ctx.node();
  const int64_t op = ctx.opset();
  MRT_CHECK_ARG(X.rank() >= 1, "BatchNormalization: input must have rank >= 1, got ", X.describe());
  bool training = false;
  if (op >= 14) {
    training = node.attr_int("training_mode", 0) != 0;
  } else {
    MRT_CHECK_IMPL(!ctx.has_output(3) && !ctx.has_output(4),
                   "BatchNormalization: the saved_mean/saved_var training outputs (opset < 14) are not supported");
  }
  bool spatial = true;
  if (op < 9) spatial = node.attr_int("spatial", 1) != 0;
  const Shape& s = X.shape();
  const int64_t N = s[0];
  int64_t C = s.size() >= 2 ? s[1] : 1;
  int64_t S = norm::prod(s, 2, s.size());
  if (!spatial) {  // per-activation statistics: every (c, d1, ...) position has its own
    C = norm::prod(s, 1, s.size());
    S = 1;
  }
  MRT_NORM_DISPATCH(X.dtype(), "BatchNormalization", { batchnorm_typed<T>(ctx, N, C, S, training); });
}

// ---------------------------------------------------------------- LRN

template <class T>
void lrn_typed(OpContext& ctx) {
  using A = Acc<T>;
  const Tensor& X = ctx.input(0);
  const Node& node = ctx.node();
  const int64_t size = node.require_int("size");
  MRT_CHECK_ARG(size > 0, "LRN: size must be positive, got ", size);
  const double alpha = node.attr_float("alpha", 1e-4f);
  const double beta = node.attr_float("beta", 0.75f);
  const double bias = node.attr_float("bias", 1.0f);
  const Shape& s = X.shape();
  const int64_t N = s[0], C = s[1], S = norm::prod(s, 2, s.size());
  const int64_t lo = (size - 1) / 2, hi = size - 1 - lo;  // floor / ceil of (size-1)/2
  const T* x = X.data<T>();
  T* y = ctx.output(0, X.dtype(), s).data<T>();
  const A coef = static_cast<A>(alpha / static_cast<double>(size));
  ctx.threads().parallel_for(N * C, grain_for(S * size), [&](int64_t b0, int64_t e0) {
    std::vector<A> acc(static_cast<size_t>(S));
    for (int64_t nc = b0; nc < e0; ++nc) {
      const int64_t n = nc / C, c = nc % C;
      std::fill(acc.begin(), acc.end(), A(0));
      const int64_t c0 = std::max<int64_t>(0, c - lo), c1 = std::min<int64_t>(C - 1, c + hi);
      for (int64_t j = c0; j <= c1; ++j) {
        const T* p = x + (n * C + j) * S;
        for (int64_t i = 0; i < S; ++i) { const A v = load(p[i]); acc[i] += v * v; }
      }
      const T* p = x + nc * S;
      T* q = y + nc * S;
      for (int64_t i = 0; i < S; ++i)
        q[i] = store<T>(load(p[i]) / std::pow(static_cast<A>(bias) + coef * acc[i], static_cast<A>(beta)));
    }
  });
}

void lrn_kernel(OpContext& ctx) {
  const Tensor& X = ctx.input(0);
  MRT_CHECK_ARG(X.rank() >= 3, "LRN: input must have rank >= 3 (N x C x D1 ...), got ", X.describe());
  MRT_NORM_DISPATCH(X.dtype(), "LRN", { lrn_typed<T>(ctx); });
}

// ---------------------------------------------------------------- Layer / RMS normalization

// Broadcast a scale/bias tensor to the normalized shape xs[axis:] (right-aligned).
std::vector<double> expand_param(const Tensor& t, const Shape& xs, size_t axis, const char* op, const char* what) {
  const size_t nr = xs.size() - axis;
  const Shape& ts = t.shape();
  const std::vector<double> v = norm::to_doubles(t, what);
  const int64_t cols = norm::prod(xs, axis, xs.size());
  if (t.numel() == cols && ts.size() <= nr) {
    bool same = true;
    for (size_t i = 0; i < ts.size(); ++i) same = same && ts[ts.size() - 1 - i] == xs[xs.size() - 1 - i];
    if (same) return v;
  }
  std::vector<int64_t> stride(nr, 0);
  int64_t st = 1;
  for (size_t k = 0; k < ts.size(); ++k) {
    const size_t j = ts.size() - 1 - k;  // dim of t
    const int64_t d = ts[j];
    if (k >= nr) {
      MRT_CHECK_ARG(d == 1, op, ": ", what, " shape ", shape_str(ts), " does not broadcast to the normalized shape of ",
                    shape_str(xs), " at axis ", axis);
      continue;
    }
    const size_t i = nr - 1 - k;  // dim of the normalized shape
    MRT_CHECK_ARG(d == xs[axis + i] || d == 1, op, ": ", what, " shape ", shape_str(ts),
                  " does not broadcast to the normalized shape of ", shape_str(xs), " at axis ", axis);
    stride[i] = d == 1 ? 0 : st;
    st *= d;
  }
  std::vector<double> out(static_cast<size_t>(cols));
  std::vector<int64_t> idx(nr, 0);
  int64_t off = 0;
  for (int64_t c = 0; c < cols; ++c) {
    out[c] = v[off];
    for (size_t i = nr; i-- > 0;) {
      off += stride[i];
      if (++idx[i] < xs[axis + i]) break;
      off -= stride[i] * idx[i];
      idx[i] = 0;
    }
  }
  return out;
}

template <class A>
std::vector<A> cast_vec(const std::vector<double>& v) {
  return std::vector<A>(v.begin(), v.end());
}

template <class T>
void layernorm_typed(OpContext& ctx, bool rms) {
  using A = Acc<T>;
  const char* op = rms ? "RMSNormalization" : "LayerNormalization";
  const Tensor& X = ctx.input(0);
  const Node& node = ctx.node();
  const Shape& s = X.shape();
  const int64_t rank = static_cast<int64_t>(s.size());
  MRT_CHECK_ARG(rank >= 1, op, ": input must have rank >= 1, got ", X.describe());
  const size_t axis = static_cast<size_t>(normalize_axis(node.attr_int("axis", -1), rank));
  const double eps = node.attr_float("epsilon", 1e-5f);
  const int64_t rows = norm::prod(s, 0, axis), cols = norm::prod(s, axis, s.size());
  const std::vector<A> W = cast_vec<A>(expand_param(ctx.input(1), s, axis, op, "scale"));
  std::vector<A> B;
  const bool has_b = !rms && ctx.has_input(2);
  if (has_b) B = cast_vec<A>(expand_param(ctx.input(2), s, axis, op, "bias"));

  const T* x = X.data<T>();
  T* y = ctx.output(0, X.dtype(), s).data<T>();
  // Optional Mean / InvStdDev outputs (LayerNormalization), shape d[:axis] + [1]*(rank-axis).
  Shape stat_shape(s.begin(), s.begin() + axis);
  stat_shape.resize(s.size(), 1);
  const int64_t stash = node.attr_int("stash_type", 1);
  std::vector<double> means, invs;
  const bool want_mean = !rms && ctx.has_output(1), want_inv = !rms && ctx.has_output(2);
  if (want_mean) means.resize(static_cast<size_t>(rows));
  if (want_inv) invs.resize(static_cast<size_t>(rows));

  ctx.threads().parallel_for(rows, grain_for(cols * 3), [&](int64_t rb, int64_t re) {
    for (int64_t r = rb; r < re; ++r) {
      const T* p = x + r * cols;
      T* q = y + r * cols;
      if (rms) {
        const double ss = span_sq_dev(p, cols, 0.0);
        const A inv = A(1) / std::sqrt(static_cast<A>(ss / static_cast<double>(cols) + eps));
        for (int64_t j = 0; j < cols; ++j) q[j] = store<T>(static_cast<A>(load(p[j])) * inv * W[j]);
        continue;
      }
      const double mean = cols > 0 ? span_sum(p, cols) / static_cast<double>(cols) : 0.0;
      const double sq = span_sq_dev(p, cols, mean);
      const double var = cols > 0 ? sq / static_cast<double>(cols) : 0.0;
      const A inv = A(1) / std::sqrt(static_cast<A>(var + eps));
      const A m = static_cast<A>(mean);
      if (has_b) {
        for (int64_t j = 0; j < cols; ++j) q[j] = store<T>((static_cast<A>(load(p[j])) - m) * inv * W[j] + B[j]);
      } else {
        for (int64_t j = 0; j < cols; ++j) q[j] = store<T>((static_cast<A>(load(p[j])) - m) * inv * W[j]);
      }
      if (want_mean) means[r] = mean;
      if (want_inv) invs[r] = inv;
    }
  });
  for (int o = 1; o <= 2; ++o) {
    if (!(o == 1 ? want_mean : want_inv)) continue;
    const std::vector<double>& src = o == 1 ? means : invs;
    const DType dt = static_cast<DType>(stash);
    MRT_CHECK_IMPL(dtype_is_float(dt), op, ": stash_type ", stash, " is not supported");
    norm::from_doubles(ctx.output(o, dt, stat_shape), src);
  }
}

void layernorm_kernel(OpContext& ctx) {
  MRT_NORM_DISPATCH(ctx.input(0).dtype(), "LayerNormalization", { layernorm_typed<T>(ctx, false); });
}
void rmsnorm_kernel(OpContext& ctx) {
  MRT_NORM_DISPATCH(ctx.input(0).dtype(), "RMSNormalization", { layernorm_typed<T>(ctx, true); });
}

// ---------------------------------------------------------------- Instance / Group normalization

// Normalizes x viewed as [N, G, cpg * S]: each (n, g) slice gets its own mean/variance;
// channel c (of C = G * cpg) is then scaled by scale[c] and shifted by bias[c].
template <class T>
void group_stats_norm(OpContext& ctx, int64_t N, int64_t G, int64_t cpg, int64_t S, const std::vector<double>& scale,
                      const std::vector<double>& bias, double eps) {
  using A = Acc<T>;
  const Tensor& X = ctx.input(0);
  const T* x = X.data<T>();
  T* y = ctx.output(0, X.dtype(), X.shape()).data<T>();
  const int64_t len = cpg * S;
  ctx.threads().parallel_for(N * G, grain_for(len * 3), [&](int64_t b0, int64_t e0) {
    for (int64_t ng = b0; ng < e0; ++ng) {
      const T* p = x + ng * len;
      T* q = y + ng * len;
      const double mean = len > 0 ? span_sum(p, len) / static_cast<double>(len) : 0.0;
      const double sq = span_sq_dev(p, len, mean);
      const double var = len > 0 ? sq / static_cast<double>(len) : 0.0;
      const double inv = 1.0 / std::sqrt(var + eps);
      const int64_t g = ng % G;
      for (int64_t k = 0; k < cpg; ++k) {
        const int64_t c = g * cpg + k;
        const A a = static_cast<A>(scale[c] * inv);
        const A b = static_cast<A>(bias[c] - mean * scale[c] * inv);
        const T* pp = p + k * S;
        T* qq = q + k * S;
        for (int64_t i = 0; i < S; ++i) qq[i] = store<T>(static_cast<A>(load(pp[i])) * a + b);
      }
    }
  });
}

void instancenorm_kernel(OpContext& ctx) {
  const Tensor& X = ctx.input(0);
  MRT_CHECK_ARG(X.rank() >= 2, "InstanceNormalization: input must have rank >= 2, got ", X.describe());
  const Shape& s = X.shape();
  const int64_t N = s[0], C = s[1], S = norm::prod(s, 2, s.size());
  const std::vector<double> scale = param(ctx, 1, C, "scale");
  const std::vector<double> bias = param(ctx, 2, C, "B");
  const double eps = ctx.node().attr_float("epsilon", 1e-5f);
  MRT_NORM_DISPATCH(X.dtype(), "InstanceNormalization",
                    { group_stats_norm<T>(ctx, N, C, 1, S, scale, bias, eps); });
}

void groupnorm_kernel(OpContext& ctx) {
  const Tensor& X = ctx.input(0);
  const Node& node = ctx.node();
  MRT_CHECK_ARG(X.rank() >= 2, "GroupNormalization: input must have rank >= 2, got ", X.describe());
  const Shape& s = X.shape();
  const int64_t N = s[0], C = s[1], S = norm::prod(s, 2, s.size());
  const int64_t G = node.require_int("num_groups");
  MRT_CHECK_ARG(G > 0 && C % G == 0, "GroupNormalization: num_groups ", G, " must divide the channel count ", C);
  const int64_t cpg = C / G;
  const double eps = node.attr_float("epsilon", 1e-5f);
  std::vector<double> scale = norm::to_doubles(ctx.input(1), "scale");
  std::vector<double> bias = norm::to_doubles(ctx.input(2), "bias");
  // Opset 18 gives one scale/bias per group, opset 21 one per channel.
  auto per_channel = [&](std::vector<double>& v, const char* what) {
    if (static_cast<int64_t>(v.size()) == C) return;
    MRT_CHECK_ARG(ctx.opset() < 21 && static_cast<int64_t>(v.size()) == G, "GroupNormalization: ", what,
                  " must have ", C, " elements (one per channel), got ", v.size());
    std::vector<double> out(static_cast<size_t>(C));
    for (int64_t c = 0; c < C; ++c) out[c] = v[c / cpg];
    v.swap(out);
  };
  per_channel(scale, "scale");
  per_channel(bias, "bias");
  MRT_NORM_DISPATCH(X.dtype(), "GroupNormalization", { group_stats_norm<T>(ctx, N, G, cpg, S, scale, bias, eps); });
}

// ---------------------------------------------------------------- LpNormalization

template <class T>
void lpnorm_typed(OpContext& ctx, int64_t outer, int64_t n, int64_t inner, int64_t p) {
  using A = Acc<T>;
  const Tensor& X = ctx.input(0);
  const T* x = X.data<T>();
  T* y = ctx.output(0, X.dtype(), X.shape()).data<T>();
  ctx.threads().parallel_for(outer * inner, grain_for(n * 2), [&](int64_t b0, int64_t e0) {
    for (int64_t l = b0; l < e0; ++l) {
      const int64_t o = l / inner, i = l % inner;
      const T* px = x + o * n * inner + i;
      T* py = y + o * n * inner + i;
      double acc = 0;
      for (int64_t k = 0; k < n; ++k) {
        const double v = load(px[k * inner]);
        acc += p == 1 ? std::fabs(v) : v * v;
      }
      const A nrm = static_cast<A>(p == 1 ? acc : std::sqrt(acc));
      for (int64_t k = 0; k < n; ++k)
        py[k * inner] = store<T>(nrm == A(0) ? A(0) : static_cast<A>(load(px[k * inner])) / nrm);
    }
  });
}

void lpnorm_kernel(OpContext& ctx) {
  const Tensor& X = ctx.input(0);
  const int64_t p = ctx.node().attr_int("p", 2);
  MRT_CHECK_IMPL(p == 1 || p == 2, "LpNormalization: p must be 1 or 2, got ", p);
  const Shape& s = X.shape();
  const int64_t rank = static_cast<int64_t>(s.size());
  MRT_CHECK_ARG(rank >= 1, "LpNormalization: input must have rank >= 1");
  const size_t axis = static_cast<size_t>(normalize_axis(ctx.node().attr_int("axis", -1), rank));
  const int64_t outer = norm::prod(s, 0, axis), n = s[axis], inner = norm::prod(s, axis + 1, s.size());
  MRT_NORM_DISPATCH(X.dtype(), "LpNormalization", { lpnorm_typed<T>(ctx, outer, n, inner, p); });
}

// ---------------------------------------------------------------- MeanVarianceNormalization

template <class T>
void mvn_typed(OpContext& ctx, const std::vector<bool>& reduced) {
  const Tensor& X = ctx.input(0);
  const Shape& s = X.shape();
  const size_t rank = s.size();
  // Linear index of an element's kept coordinates: sum of idx[d] * mult[d].
  std::vector<int64_t> mult(rank, 0);
  int64_t groups = 1;
  for (size_t d = rank; d-- > 0;) {
    if (!reduced[d]) { mult[d] = groups; groups *= s[d]; }
  }
  const int64_t total = X.numel();
  const int64_t per_group = groups > 0 ? total / groups : 0;
  const T* x = X.data<T>();
  T* y = ctx.output(0, X.dtype(), s).data<T>();
  if (total == 0) return;
  std::vector<double> mean(static_cast<size_t>(groups), 0.0), sq(static_cast<size_t>(groups), 0.0);
  auto walk = [&](auto&& fn) {
    std::vector<int64_t> idx(rank, 0);
    int64_t g = 0;
    for (int64_t e = 0; e < total; ++e) {
      fn(e, g);
      for (size_t d = rank; d-- > 0;) {
        g += mult[d];
        if (++idx[d] < s[d]) break;
        g -= mult[d] * idx[d];
        idx[d] = 0;
      }
    }
  };
  walk([&](int64_t e, int64_t g) { mean[g] += load(x[e]); });
  for (auto& m : mean) m /= static_cast<double>(per_group);
  walk([&](int64_t e, int64_t g) { const double d = load(x[e]) - mean[g]; sq[g] += d * d; });
  std::vector<double> denom(static_cast<size_t>(groups));
  for (int64_t g = 0; g < groups; ++g) denom[g] = std::sqrt(sq[g] / static_cast<double>(per_group)) + 1e-9;
  walk([&](int64_t e, int64_t g) { y[e] = store<T>((load(x[e]) - mean[g]) / denom[g]); });
}

void mvn_kernel(OpContext& ctx) {
  const Tensor& X = ctx.input(0);
  const int64_t rank = static_cast<int64_t>(X.rank());
  const std::vector<int64_t> axes = ctx.node().attr_ints("axes", {0, 2, 3});
  std::vector<bool> reduced(static_cast<size_t>(rank), false);
  for (int64_t a : axes) reduced[static_cast<size_t>(normalize_axis(a, rank, "MeanVarianceNormalization axes"))] = true;
  MRT_NORM_DISPATCH(X.dtype(), "MeanVarianceNormalization", { mvn_typed<T>(ctx, reduced); });
}

// ---------------------------------------------------------------- session-creation checks

void batchnorm_check(const Node& node, int64_t opset) {
  if (opset >= 14) return;
  for (size_t i = 3; i < node.outputs.size(); ++i)
    MRT_CHECK_IMPL(node.outputs[i].empty(), node.label(),
                   ": the saved_mean/saved_var training outputs (opset < 14) are not supported");
}

void lrn_check(const Node& node, int64_t) {
  MRT_ENFORCE(node.require_int("size") > 0, MRT_INVALID_MODEL, node.label(), ": size must be positive");
}

void stash_check(const Node& node, int64_t) {
  const int64_t st = node.attr_int("stash_type", 1);
  MRT_CHECK_IMPL(st == 1 || st == 11 || st == 10 || st == 16, node.label(), ": stash_type ", st, " is not supported");
}

void lpnorm_check(const Node& node, int64_t) {
  const int64_t p = node.attr_int("p", 2);
  MRT_CHECK_IMPL(p == 1 || p == 2, node.label(), ": p must be 1 or 2, got ", p);
}

void groupnorm_check(const Node& node, int64_t) {
  MRT_ENFORCE(node.require_int("num_groups") > 0, MRT_INVALID_MODEL, node.label(), ": num_groups must be positive");
}

}  // namespace

void register_norm_kernels(KernelRegistry& r) {
  r.add("BatchNormalization", 1, batchnorm_kernel, batchnorm_check);
  r.add("LRN", 1, lrn_kernel, lrn_check);
  // Opsets before 17 cover the LayerNormalization that exporters emit in the default
  // domain ahead of its standardization; the semantics are the same.
  r.add("LayerNormalization", 1, layernorm_kernel, stash_check);
  r.add("RMSNormalization", 23, rmsnorm_kernel, stash_check);
  r.add("InstanceNormalization", 1, instancenorm_kernel);
  r.add("GroupNormalization", 18, groupnorm_kernel, groupnorm_check);
  r.add("LpNormalization", 1, lpnorm_kernel, lpnorm_check);
  r.add("MeanVarianceNormalization", 9, mvn_kernel);
  register_softmax_kernels(r);
  register_loss_kernels(r);
}

}  // namespace mrt
