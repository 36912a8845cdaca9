// com.microsoft quantized operators that onnxruntime's static quantizer emits in the
// QOperator format: QLinearAdd, QLinearMul (numpy broadcasting), QLinearSigmoid,
// QLinearLeakyRelu, QLinearGlobalAveragePool and QLinearAveragePool (NCHW or
// channels_last; explicit pads or VALID, ceil_mode, count_include_pad), QLinearConcat and
// QGemm (quantized or float output, per-tensor or per-column B scale). Each dequantizes
// (x - zero_point) * scale, computes in float and requantizes to the output scale and
// zero point, rounding half to even and saturating to uint8/int8.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <type_traits>
#include <vector>

#include "../gemm/backend_registry.h"
#include "quant_common.h"

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

namespace mrt {
namespace {

struct QParam {
  float scale = 1.f;
  int32_t zp = 0;
};

QParam qparam(const OpContext& ctx, size_t scale_idx, size_t zp_idx, const char* what) {
  QParam q;
  const Tensor& s = ctx.input(scale_idx);
  MRT_CHECK_ARG(s.numel() == 1, what, " scale must be a scalar, got ", s.describe());
  q.scale = static_cast<float>(s.scalar_as_double(0));
  if (const Tensor* z = ctx.optional_input(zp_idx)) {
    MRT_CHECK_ARG(z->numel() == 1, what, " zero point must be a scalar, got ", z->describe());
    q.zp = static_cast<int32_t>(z->scalar_as_double(0));
  }
  return q;
}

void check_u8_s8(const Tensor& t, const char* what) {
  MRT_CHECK_IMPL(t.dtype() == DType::kUInt8 || t.dtype() == DType::kInt8, what, ": element type ",
                 dtype_name(t.dtype()), " is not supported (uint8 and int8 are)");
}

inline float deq(const Tensor& t, int64_t i, const QParam& q) {
  const int32_t v = t.dtype() == DType::kUInt8 ? t.data<uint8_t>()[i] : t.data<int8_t>()[i];
  return static_cast<float>(v - q.zp) * q.scale;
}

inline void store_q(Tensor& y, int64_t i, float v, const QParam& q) {
  const float r = quant::round_even(v / q.scale) + static_cast<float>(q.zp);
  if (y.dtype() == DType::kUInt8) y.data<uint8_t>()[i] = static_cast<uint8_t>(quant::saturate(r, 0.f, 255.f));
  else y.data<int8_t>()[i] = static_cast<int8_t>(quant::saturate(r, -128.f, 127.f));
}

// Offsets of every output element into a and b under numpy broadcasting.
void broadcast_offsets(const Shape& a, const Shape& b, const Shape& out, std::vector<int64_t>& oa,
                       std::vector<int64_t>& ob) {
  const size_t r = out.size();
  auto strides = [&](const Shape& s) {
    std::vector<int64_t> st(r, 0);
    int64_t acc = 1;
    for (size_t i = 0; i < s.size(); ++i) {
      const size_t d = s.size() - 1 - i, od = r - 1 - i;
      st[od] = s[d] == 1 ? 0 : acc;
      acc *= s[d];
    }
    return st;
  };
  const std::vector<int64_t> sa = strides(a), sb = strides(b);
  const int64_t n = shape_size(out);
  oa.resize(static_cast<size_t>(n));
  ob.resize(static_cast<size_t>(n));
  std::vector<int64_t> idx(r, 0);
  for (int64_t i = 0; i < n; ++i) {
    int64_t pa = 0, pb = 0;
    for (size_t d = 0; d < r; ++d) {
      pa += idx[d] * sa[d];
      pb += idx[d] * sb[d];
    }
    oa[static_cast<size_t>(i)] = pa;
    ob[static_cast<size_t>(i)] = pb;
    for (size_t d = r; d-- > 0;) {
      if (++idx[d] < out[d]) break;
      idx[d] = 0;
    }
  }
}

// A and B of the output's shape, or one of them a single value (the residual Add of a quantized
// CNN, a scale by a constant): one pass, the same arithmetic as the general path.
template <bool kMul, class T>
void qlinear_binary_flat(const T* a, bool a_scalar, const T* b, bool b_scalar, T* y, int64_t n, const QParam& qa,
                         const QParam& qb, const QParam& qc, ThreadPool& pool) {
  constexpr float lo = std::is_same_v<T, uint8_t> ? 0.f : -128.f, hi = std::is_same_v<T, uint8_t> ? 255.f : 127.f;
  // Branch-free bodies (one per operand layout) so the compiler vectorizes them.
  const float sa = qa.scale, sb = qb.scale, sc = qc.scale, zc = static_cast<float>(qc.zp);
  const int32_t za = qa.zp, zb = qb.zp;
  auto one = [](int32_t x, int32_t z) { return static_cast<float>(x - z); };
  auto out = [=](float va, float vb) {  // store_q's rounding and saturation
    return static_cast<T>(quant::saturate(quant::round_even((kMul ? va * vb : va + vb) / sc) + zc, lo, hi));
  };
#if defined(MOSAICRT_X86_SIMD)
  const bool avx512 = cpu_has(kCpuAvx512), avx2 = cpu_has(kCpuAvx2Fma);
#endif
  pool.parallel_for(n, 16384, [&](int64_t s, int64_t e) {
    if (!a_scalar && !b_scalar) {
#if defined(MOSAICRT_X86_SIMD)
      if (avx512) {
        const quant::QLinearBinaryParams p{sa, sb, sc, zc, lo, hi, za, zb};
        quant::qlinear_binary_avx512(kMul, std::is_signed_v<T>, a + s, b + s, y + s, e - s, p);
        return;
      }
#endif
      int64_t i = s;
#if defined(MOSAICRT_X86_SIMD)
      if (avx2) {
        const quant::QLinearBinaryParams p{sa, sb, sc, zc, lo, hi, za, zb};
        i += quant::qlinear_binary_avx2(kMul, std::is_signed_v<T>, a + s, b + s, y + s, e - s, p);
      }
#endif
#if defined(__SSE2__)
      // 16 values per step: widen to int32, dequantize, combine, divide, round half to even with the
      // same magic constant as quant::round_even, saturate (NaN to lo, as quant::saturate), narrow.
      const __m128 vsa = _mm_set1_ps(sa), vsb = _mm_set1_ps(sb), vsc = _mm_set1_ps(sc), vzc = _mm_set1_ps(zc);
      const __m128i vza = _mm_set1_epi32(za), vzb = _mm_set1_epi32(zb);
      const __m128 lim = _mm_set1_ps(1e6f), nlim = _mm_set1_ps(-1e6f), magic = _mm_set1_ps(12582912.f);
      const __m128 vlo = _mm_set1_ps(lo), vhi = _mm_set1_ps(hi);
      auto widen = [](__m128i x, __m128i (&w)[4]) {  // 16 bytes -> 4 x 4 int32
        __m128i lo16, hi16;
        if constexpr (std::is_signed_v<T>) {
          lo16 = _mm_srai_epi16(_mm_unpacklo_epi8(x, x), 8);
          hi16 = _mm_srai_epi16(_mm_unpackhi_epi8(x, x), 8);
          w[0] = _mm_srai_epi32(_mm_unpacklo_epi16(lo16, lo16), 16);
          w[1] = _mm_srai_epi32(_mm_unpackhi_epi16(lo16, lo16), 16);
          w[2] = _mm_srai_epi32(_mm_unpacklo_epi16(hi16, hi16), 16);
          w[3] = _mm_srai_epi32(_mm_unpackhi_epi16(hi16, hi16), 16);
        } else {
          const __m128i z = _mm_setzero_si128();
          lo16 = _mm_unpacklo_epi8(x, z);
          hi16 = _mm_unpackhi_epi8(x, z);
          w[0] = _mm_unpacklo_epi16(lo16, z);
          w[1] = _mm_unpackhi_epi16(lo16, z);
          w[2] = _mm_unpacklo_epi16(hi16, z);
          w[3] = _mm_unpackhi_epi16(hi16, z);
        }
      };
      for (; i + 16 <= e; i += 16) {
        __m128i wa[4], wb[4], r[4];
        widen(_mm_loadu_si128(reinterpret_cast<const __m128i*>(a + i)), wa);
        widen(_mm_loadu_si128(reinterpret_cast<const __m128i*>(b + i)), wb);
        for (int k = 0; k < 4; ++k) {
          const __m128 va = _mm_mul_ps(_mm_cvtepi32_ps(_mm_sub_epi32(wa[k], vza)), vsa);
          const __m128 vb = _mm_mul_ps(_mm_cvtepi32_ps(_mm_sub_epi32(wb[k], vzb)), vsb);
          __m128 v = _mm_div_ps(kMul ? _mm_mul_ps(va, vb) : _mm_add_ps(va, vb), vsc);
          v = _mm_min_ps(_mm_max_ps(v, nlim), lim);
          v = _mm_add_ps(_mm_sub_ps(_mm_add_ps(v, magic), magic), vzc);
          v = _mm_min_ps(_mm_max_ps(v, vlo), vhi);
          r[k] = _mm_cvttps_epi32(v);
        }
        const __m128i w0 = _mm_packs_epi32(r[0], r[1]), w1 = _mm_packs_epi32(r[2], r[3]);
        const __m128i packed = std::is_signed_v<T> ? _mm_packs_epi16(w0, w1) : _mm_packus_epi16(w0, w1);
        _mm_storeu_si128(reinterpret_cast<__m128i*>(y + i), packed);
      }
#endif
      for (; i < e; ++i) y[i] = out(one(a[i], za) * sa, one(b[i], zb) * sb);
    } else if (a_scalar && !b_scalar) {
      const float va = one(a[0], za) * sa;
      for (int64_t i = s; i < e; ++i) y[i] = out(va, one(b[i], zb) * sb);
    } else if (!a_scalar) {
      const float vb = one(b[0], zb) * sb;
      for (int64_t i = s; i < e; ++i) y[i] = out(one(a[i], za) * sa, vb);
    } else {
      const T v = out(one(a[0], za) * sa, one(b[0], zb) * sb);
      for (int64_t i = s; i < e; ++i) y[i] = v;
    }
  });
}

template <bool kMul>
void qlinear_binary(OpContext& ctx) {
  const char* op = kMul ? "QLinearMul" : "QLinearAdd";
  const Tensor& A = ctx.input(0);
  const Tensor& B = ctx.input(3);
  check_u8_s8(A, op);
  MRT_CHECK_ARG(B.dtype() == A.dtype(), op, ": A is ", A.describe(), " but B is ", B.describe());
  const QParam qa = qparam(ctx, 1, 2, "A"), qb = qparam(ctx, 4, 5, "B"), qc = qparam(ctx, 6, 7, "C");
  const Shape out = broadcast_shapes(A.shape(), B.shape());
  Tensor& Y = ctx.output(0, A.dtype(), out);
  const bool a_full = A.shape() == out, b_full = B.shape() == out;
  if ((a_full || A.numel() == 1) && (b_full || B.numel() == 1)) {
    if (A.dtype() == DType::kUInt8)
      qlinear_binary_flat<kMul>(A.data<uint8_t>(), !a_full, B.data<uint8_t>(), !b_full, Y.data<uint8_t>(), Y.numel(),
                                qa, qb, qc, ctx.threads());
    else
      qlinear_binary_flat<kMul>(A.data<int8_t>(), !a_full, B.data<int8_t>(), !b_full, Y.data<int8_t>(), Y.numel(), qa,
                                qb, qc, ctx.threads());
    return;
  }
  std::vector<int64_t> oa, ob;
  broadcast_offsets(A.shape(), B.shape(), out, oa, ob);
  for (int64_t i = 0; i < Y.numel(); ++i) {
    const float a = deq(A, oa[static_cast<size_t>(i)], qa), b = deq(B, ob[static_cast<size_t>(i)], qb);
    store_q(Y, i, kMul ? a * b : a + b, qc);
  }
}

template <bool kLeaky>
void qlinear_unary(OpContext& ctx) {
  const Tensor& X = ctx.input(0);
  check_u8_s8(X, kLeaky ? "QLinearLeakyRelu" : "QLinearSigmoid");
  const QParam qx = qparam(ctx, 1, 2, "X"), qy = qparam(ctx, 3, 4, "Y");
  const float alpha = ctx.node().attr_float("alpha", 0.01f);
  Tensor& Y = ctx.output(0, X.dtype(), X.shape());
  // one lookup per possible input byte
  float table[256];
  for (int v = 0; v < 256; ++v) {
    const int32_t q = X.dtype() == DType::kUInt8 ? v : static_cast<int8_t>(v);
    const float x = static_cast<float>(q - qx.zp) * qx.scale;
    table[v] = kLeaky ? (x >= 0 ? x : alpha * x) : 1.f / (1.f + std::exp(-x));
  }
  const uint8_t* xb = X.data_as<uint8_t>();
  for (int64_t i = 0; i < X.numel(); ++i) store_q(Y, i, table[xb[i]], qy);
}

void qlinear_global_avg_pool(OpContext& ctx) {
  const Tensor& X = ctx.input(0);
  check_u8_s8(X, "QLinearGlobalAveragePool");
  const QParam qx = qparam(ctx, 1, 2, "X"), qy = qparam(ctx, 3, 4, "Y");
  const bool nhwc = ctx.node().attr_int("channels_last", 0) != 0;
  MRT_CHECK_ARG(X.rank() >= 3, "QLinearGlobalAveragePool: input must have rank >= 3, got ", X.describe());
  const int64_t N = X.dim(0), C = nhwc ? X.dim(X.rank() - 1) : X.dim(1);
  const int64_t S = X.numel() / std::max<int64_t>(1, N * C);
  Shape out = X.shape();
  for (size_t d = nhwc ? 1 : 2; d < (nhwc ? X.rank() - 1 : X.rank()); ++d) out[d] = 1;
  Tensor& Y = ctx.output(0, X.dtype(), out);
  if (Y.numel() == 0) return;
  // The mean of a channel from the exact integer sum of its values less the zero point (onnxruntime sums the
  // integers too): sum_s (x_s - zp) * scale / S, one multiplication in double instead of one per value.
  std::vector<int64_t> sums(static_cast<size_t>(C));
  auto channel_sums = [&](auto tag) {
    using T = decltype(tag);
    for (int64_t n = 0; n < N; ++n) {
      const T* xn = X.data<T>() + n * C * S;
      std::fill(sums.begin(), sums.end(), 0);
      for (int64_t s = 0; nhwc && s < S; ++s)  // (each layout read in its memory order)
        for (int64_t c = 0; c < C; ++c) sums[static_cast<size_t>(c)] += xn[s * C + c];
      for (int64_t c = 0; !nhwc && c < C; ++c)
        for (int64_t s = 0; s < S; ++s) sums[static_cast<size_t>(c)] += xn[c * S + s];
      for (int64_t c = 0; c < C; ++c) {
        const double centred = static_cast<double>(sums[static_cast<size_t>(c)] - static_cast<int64_t>(qx.zp) * S);
        store_q(Y, n * C + c, static_cast<float>(centred * static_cast<double>(qx.scale) / static_cast<double>(S)),
                qy);
      }
    }
  };
  if (X.dtype() == DType::kUInt8) channel_sums(uint8_t());
  else channel_sums(int8_t());
}

void qlinear_concat(OpContext& ctx) {
  const QParam qy = qparam(ctx, 0, 1, "Y");
  const size_t n_in = (ctx.input_count() - 2) / 3;
  MRT_CHECK_ARG(n_in >= 1 && ctx.input_count() == 2 + 3 * n_in, "QLinearConcat: inputs must be Y_scale, Y_zero_point "
                "and (X, X_scale, X_zero_point) triples, got ", ctx.input_count());
  const Tensor& X0 = ctx.input(2);
  check_u8_s8(X0, "QLinearConcat");
  const int64_t axis = normalize_axis(ctx.node().require_int("axis"), static_cast<int64_t>(X0.rank()), "axis");
  Shape out = X0.shape();
  out[static_cast<size_t>(axis)] = 0;
  for (size_t k = 0; k < n_in; ++k) {
    const Tensor& X = ctx.input(2 + 3 * k);
    MRT_CHECK_ARG(X.dtype() == X0.dtype() && X.rank() == X0.rank(), "QLinearConcat: input ", k, " ", X.describe(),
                  " does not match ", X0.describe());
    for (size_t d = 0; d < X.rank(); ++d)
      MRT_CHECK_ARG(static_cast<int64_t>(d) == axis || X.dim(d) == X0.dim(d), "QLinearConcat: input ", k, " ",
                    X.describe(), " differs from ", X0.describe(), " outside axis ", axis);
    out[static_cast<size_t>(axis)] += X.dim(static_cast<size_t>(axis));
  }
  Tensor& Y = ctx.output(0, X0.dtype(), out);
  const int64_t outer = shape_size(Shape(out.begin(), out.begin() + axis));
  const int64_t inner = shape_size(Shape(out.begin() + axis + 1, out.end()));
  const int64_t total = out[static_cast<size_t>(axis)];
  int64_t offset = 0;
  for (size_t k = 0; k < n_in; ++k) {
    const Tensor& X = ctx.input(2 + 3 * k);
    const QParam qx = qparam(ctx, 3 + 3 * k, 4 + 3 * k, "X");
    const int64_t len = X.dim(static_cast<size_t>(axis));
    for (int64_t o = 0; o < outer; ++o)
      for (int64_t j = 0; j < len * inner; ++j)
        store_q(Y, (o * total + offset) * inner + j, deq(X, o * len * inner + j, qx), qy);
    offset += len;
  }
}

void qgemm(OpContext& ctx) {
  const Node& n = ctx.node();
  const Tensor& A = ctx.input(0);
  const Tensor& B = ctx.input(3);
  check_u8_s8(A, "QGemm");
  check_u8_s8(B, "QGemm");
  const bool ta = n.attr_int("transA", 0) != 0, tb = n.attr_int("transB", 0) != 0;
  const float alpha = n.attr_float("alpha", 1.f);
  MRT_CHECK_ARG(A.rank() == 2 && B.rank() == 2, "QGemm: A and B must be 2-D, got ", A.describe(), " and ",
                B.describe());
  const int64_t M = ta ? A.dim(1) : A.dim(0), K = ta ? A.dim(0) : A.dim(1);
  const int64_t N = tb ? B.dim(0) : B.dim(1);
  MRT_CHECK_ARG((tb ? B.dim(1) : B.dim(0)) == K, "QGemm: inner dimensions of ", A.describe(), " and ", B.describe(),
                " differ");
  const QParam qa = qparam(ctx, 1, 2, "A");
  const Tensor& bs = ctx.input(4);
  MRT_CHECK_ARG(bs.numel() == 1 || bs.numel() == N, "QGemm: b_scale must have 1 or ", N, " values, got ",
                bs.describe());
  std::vector<float> b_scale(static_cast<size_t>(N)), b_zp(static_cast<size_t>(N), 0.f);
  for (int64_t j = 0; j < N; ++j) b_scale[static_cast<size_t>(j)] = static_cast<float>(bs.scalar_as_double(bs.numel() == 1 ? 0 : j));
  if (const Tensor* bz = ctx.optional_input(5)) {
    MRT_CHECK_ARG(bz->numel() == 1 || bz->numel() == N, "QGemm: b_zero_point must have 1 or ", N, " values");
    for (int64_t j = 0; j < N; ++j) b_zp[static_cast<size_t>(j)] = static_cast<float>(bz->scalar_as_double(bz->numel() == 1 ? 0 : j));
  }
  const Tensor* C = ctx.optional_input(6);
  const bool quant_out = ctx.has_input(7);
  QParam qy;
  if (quant_out) qy = qparam(ctx, 7, 8, "Y");
  const DType out_type = !quant_out ? DType::kFloat : ctx.has_input(8) ? ctx.input(8).dtype() : A.dtype();
  if (quant_out) check_u8_s8(Tensor(out_type, Shape{0}), "QGemm output");
  Tensor& Y = ctx.output(0, out_type, Shape{M, N});
  auto bval = [&](int64_t k, int64_t j) {
    const int64_t i = tb ? j * K + k : k * N + j;
    const int32_t v = B.dtype() == DType::kUInt8 ? B.data<uint8_t>()[i] : B.data<int8_t>()[i];
    return static_cast<float>(v) - b_zp[static_cast<size_t>(j)];
  };
  for (int64_t i = 0; i < M; ++i)
    for (int64_t j = 0; j < N; ++j) {
      double acc = 0;
      for (int64_t k = 0; k < K; ++k) {
        const int64_t ai = ta ? k * M + i : i * K + k;
        const int32_t av = A.dtype() == DType::kUInt8 ? A.data<uint8_t>()[ai] : A.data<int8_t>()[ai];
        acc += static_cast<double>(av - qa.zp) * bval(k, j);
      }
      if (C) acc += static_cast<double>(C->int_at(C->numel() == 1 ? 0 : (C->numel() == N ? j : i * N + j)));
      const float v = static_cast<float>(acc * alpha * qa.scale * b_scale[static_cast<size_t>(j)]);
      if (quant_out) store_q(Y, i * N + j, v, qy);
      else Y.data<float>()[i * N + j] = v;
    }
}


void qavgpool_check(const Node& n, int64_t) {
  const std::string ap = n.attr_string("auto_pad", "NOTSET");
  MRT_ENFORCE(ap == "NOTSET" || ap == "VALID", MRT_NOT_IMPLEMENTED, n.label(), ": auto_pad '", ap,
              "' is not supported (NOTSET and VALID are)");
  const std::vector<int64_t> k = n.attr_ints("kernel_shape");
  MRT_ENFORCE(!k.empty() && k.size() <= 3, MRT_INVALID_MODEL, n.label(), ": kernel_shape must hold 1 to 3 sizes, got ",
              shape_str(k));
  for (int64_t v : k) MRT_ENFORCE(v > 0, MRT_INVALID_MODEL, n.label(), ": kernel_shape ", shape_str(k), " must be positive");
}

void qavgpool_kernel(OpContext& ctx) {
  const Node& n = ctx.node();
  const Tensor& X = ctx.input(0);
  check_u8_s8(X, "QLinearAveragePool");
  const QParam qx = qparam(ctx, 1, 2, "X"), qy = qparam(ctx, 3, 4, "Y");
  const bool nhwc = n.attr_int("channels_last", 0) != 0;
  const bool include_pad = n.attr_int("count_include_pad", 0) != 0;
  const bool ceil_mode = n.attr_int("ceil_mode", 0) != 0;
  const std::vector<int64_t> k = n.attr_ints("kernel_shape");
  const size_t nd = k.size();
  MRT_CHECK_ARG(X.rank() == nd + 2, "QLinearAveragePool: input ", X.describe(), " does not match kernel_shape ",
                shape_str(k));
  std::vector<int64_t> strides = n.attr_ints("strides", std::vector<int64_t>(nd, 1));
  std::vector<int64_t> pads = n.attr_ints("pads", std::vector<int64_t>(2 * nd, 0));
  if (n.attr_string("auto_pad", "NOTSET") == "VALID") pads.assign(2 * nd, 0);
  MRT_CHECK_ARG(strides.size() == nd && pads.size() == 2 * nd, "QLinearAveragePool: strides ", shape_str(strides),
                " / pads ", shape_str(pads), " do not match kernel_shape ", shape_str(k));
  const int64_t N = X.dim(0), C = nhwc ? X.dim(nd + 1) : X.dim(1);
  std::vector<int64_t> in(nd), out(nd);
  for (size_t d = 0; d < nd; ++d) {
    in[d] = X.dim(nhwc ? d + 1 : d + 2);
    const int64_t span = in[d] + pads[d] + pads[nd + d] - k[d];
    out[d] = (ceil_mode ? (span + strides[d] - 1) / strides[d] : span / strides[d]) + 1;
    if (ceil_mode && (out[d] - 1) * strides[d] >= in[d] + pads[d]) --out[d];
    MRT_CHECK_ARG(out[d] > 0, "QLinearAveragePool: kernel ", shape_str(k), " does not fit input ", X.describe());
  }
  while (in.size() < 3) { in.push_back(1); out.push_back(1); }
  std::vector<int64_t> kk = k, st = strides, pb(pads.begin(), pads.begin() + nd), pe(pads.begin() + nd, pads.end());
  while (kk.size() < 3) { kk.push_back(1); st.push_back(1); pb.push_back(0); pe.push_back(0); }
  Shape oshape{N};
  if (!nhwc) oshape.push_back(C);
  for (size_t d = 0; d < nd; ++d) oshape.push_back(out[d]);
  if (nhwc) oshape.push_back(C);
  Tensor& Y = ctx.output(0, X.dtype(), oshape);
  const int64_t isp = in[0] * in[1] * in[2], osp = out[0] * out[1] * out[2];
  for (int64_t b = 0; b < N; ++b)
    for (int64_t c = 0; c < C; ++c)
      for (int64_t o0 = 0; o0 < out[0]; ++o0)
        for (int64_t o1 = 0; o1 < out[1]; ++o1)
          for (int64_t o2 = 0; o2 < out[2]; ++o2) {
            const int64_t s0 = o0 * st[0] - pb[0], s1 = o1 * st[1] - pb[1], s2 = o2 * st[2] - pb[2];
            double sum = 0;
            int64_t cnt = 0, padded = 0;
            for (int64_t a0 = s0; a0 < s0 + kk[0]; ++a0)
              for (int64_t a1 = s1; a1 < s1 + kk[1]; ++a1)
                for (int64_t a2 = s2; a2 < s2 + kk[2]; ++a2) {
                  const bool inside_pad = a0 < in[0] + pe[0] && a1 < in[1] + pe[1] && a2 < in[2] + pe[2];
                  if (inside_pad) ++padded;
                  if (a0 < 0 || a1 < 0 || a2 < 0 || a0 >= in[0] || a1 >= in[1] || a2 >= in[2]) continue;
                  const int64_t sp = (a0 * in[1] + a1) * in[2] + a2;
                  sum += deq(X, nhwc ? (b * isp + sp) * C + c : (b * C + c) * isp + sp, qx);
                  ++cnt;
                }
            const int64_t div = include_pad ? padded : cnt;
            const int64_t osp_i = (o0 * out[1] + o1) * out[2] + o2;
            store_q(Y, nhwc ? (b * osp + osp_i) * C + c : (b * C + c) * osp + osp_i,
                    div ? static_cast<float>(sum / static_cast<double>(div)) : 0.f, qy);
          }
}

}  // namespace

void register_contrib_qlinear_kernels(KernelRegistry& r) {
  r.add_domain("com.microsoft", "QLinearAdd", 1, qlinear_binary<false>);
  r.add_domain("com.microsoft", "QLinearMul", 1, qlinear_binary<true>);
  r.add_domain("com.microsoft", "QLinearSigmoid", 1, qlinear_unary<false>);
  r.add_domain("com.microsoft", "QLinearLeakyRelu", 1, qlinear_unary<true>);
  r.add_domain("com.microsoft", "QLinearGlobalAveragePool", 1, qlinear_global_avg_pool);
  r.add_domain("com.microsoft", "QLinearConcat", 1, qlinear_concat);
  r.add_domain("com.microsoft", "QGemm", 1, qgemm);
  r.add_domain("com.microsoft", "QLinearAveragePool", 1, qavgpool_kernel, qavgpool_check);
}

}  // namespace mrt

