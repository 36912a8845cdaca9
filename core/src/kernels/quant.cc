// Kernel group: quant — QuantizeLinear, DequantizeLinear, DynamicQuantizeLinear here;
// MatMulInteger / QLinearMatMul in quant_matmul.cc, ConvInteger / QLinearConv in
// quant_conv.cc, the integer GEMM in quant_igemm*.cc.
//
// Scales and zero points are per tensor (one element), per axis (1-D, length of `axis`)
// or blocked (opset 21: same rank as x, dimension `axis` holds ceil(D / block_size)).
// Rounding is half to even; results saturate to the range of the quantized type.
// The narrow types (int4/uint4/int2/uint2, float8, float4e2m1) quantize and dequantize
// through narrow_dtype.h; float8 targets honour the `saturate` attribute.
#include <algorithm>
#include <cmath>
#include <limits>
#include <mutex>
#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#include "../gemm/backend_registry.h"
#include "narrow_dtype.h"
#include "quant_common.h"

namespace mrt {

void register_quant_matmul_kernels(KernelRegistry& r);  // quant_matmul.cc
void register_quant_conv_kernels(KernelRegistry& r);    // quant_conv.cc

namespace {

using norm::load;
using norm::store;

// x viewed as [outer, D, inner]; the scale index of element (o, d, i) depends on the mode.
struct QuantLayout {
  enum Mode { kTensor, kAxis, kBlocked } mode = kTensor;
  int64_t outer = 1, D = 1, inner = 1;
  int64_t block = 0, Sd = 1;  // blocked: block size and the scale's extent along the axis
};

QuantLayout quant_layout(const OpContext& ctx, const Tensor& x, const Tensor& scale, const Tensor* zp, const char* op) {
  const Node& node = ctx.node();
  QuantLayout q;
  const int64_t block = ctx.opset() >= 21 ? node.attr_int("block_size", 0) : 0;
  MRT_CHECK_ARG(block >= 0, op, ": block_size must be >= 0, got ", block);
  if (zp) {
    MRT_CHECK_ARG(zp->numel() == scale.numel(), op, ": zero point ", zp->describe(), " and scale ", scale.describe(),
                  " must have the same shape");
  }
  const int64_t rank = static_cast<int64_t>(x.rank());
  if (scale.numel() == 1) {
    q.mode = QuantLayout::kTensor;
    q.D = x.numel();
    return q;
  }
  MRT_CHECK_ARG(ctx.opset() >= 13, op, ": opset ", ctx.opset(), " needs a scalar scale, got ", scale.describe());
  MRT_CHECK_ARG(rank >= 1, op, ": a non-scalar scale ", scale.describe(), " needs an input of rank >= 1");
  const int64_t axis = normalize_axis(node.attr_int("axis", 1), rank, "axis");
  const Shape& s = x.shape();
  q.outer = norm::prod(s, 0, static_cast<size_t>(axis));
  q.D = s[static_cast<size_t>(axis)];
  q.inner = norm::prod(s, static_cast<size_t>(axis) + 1, s.size());
  if (block == 0) {
    MRT_CHECK_ARG(scale.rank() == 1 && scale.numel() == q.D, op, ": per-axis scale must be 1-D with ", q.D,
                  " elements (axis ", axis, " of ", x.describe(), "), got ", scale.describe());
    q.mode = QuantLayout::kAxis;
    return q;
  }
  MRT_CHECK_ARG(static_cast<int64_t>(scale.rank()) == rank, op, ": blocked scale ", scale.describe(),
                " must have the rank of the input ", x.describe());
  for (int64_t d = 0; d < rank; ++d) {
    const int64_t want = d == axis ? (s[d] + block - 1) / block : s[d];
    MRT_CHECK_ARG(scale.dim(d) == want, op, ": blocked scale ", scale.describe(), " does not match input ",
                  x.describe(), " with block_size ", block, " on axis ", axis);
  }
  q.mode = QuantLayout::kBlocked;
  q.block = block;
  q.Sd = scale.dim(static_cast<size_t>(axis));
  return q;
}

// Calls fn(begin, end, scale_index_of_begin, scale_step) over runs of elements that share
// the scale index pattern, split over threads by rows of the [outer*D, inner] view.
template <class Fn>
void for_each_run(const QuantLayout& q, ThreadPool& pool, Fn&& fn) {
  if (q.mode == QuantLayout::kTensor) {
    pool.parallel_for(q.D, 4096, [&](int64_t b, int64_t e) { fn(b, e, 0, 0); });
    return;
  }
  const int64_t rows = q.outer * q.D;
  pool.parallel_for(rows, std::max<int64_t>(1, 4096 / std::max<int64_t>(1, q.inner)), [&](int64_t b, int64_t e) {
    for (int64_t r = b; r < e; ++r) {
      const int64_t o = r / q.D, d = r % q.D;
      const int64_t begin = r * q.inner;
      if (q.mode == QuantLayout::kAxis) fn(begin, begin + q.inner, d, 0);
      else fn(begin, begin + q.inner, (o * q.Sd + d / q.block) * q.inner, 1);
    }
  });
}

// ---------------------------------------------------------------- QuantizeLinear

inline double load_any(int32_t v) { return v; }
inline double load_any(float v) { return v; }
inline double load_any(double v) { return v; }
inline double load_any(Float16 v) { return load(v); }
inline double load_any(BFloat16 v) { return load(v); }

template <class TIn, class TOut>
void quantize_typed(OpContext& ctx, const QuantLayout& q, const std::vector<double>& scale,
                    const std::vector<int32_t>& zp, DType prec, Tensor& Y) {
  const TIn* x = ctx.input(0).data<TIn>();
  TOut* y = Y.data<TOut>();
  double lo, hi;
  quant::qrange(Y.dtype(), lo, hi);
  const double* sc = scale.data();
  const int32_t* zpp = zp.empty() ? nullptr : zp.data();
  for_each_run(q, ctx.threads(), [x, y, sc, zpp, prec, lo, hi](int64_t b, int64_t e, int64_t si, int64_t step) {
    if (prec == DType::kFloat && step == 0) {  // the common case: one scale for the whole run
      const float s = static_cast<float>(sc[si]);
      const float z = zpp ? static_cast<float>(zpp[si]) : 0.f;
      const float flo = static_cast<float>(lo), fhi = static_cast<float>(hi);
      int64_t j = b;
#if defined(MOSAICRT_X86_SIMD)
      if constexpr (std::is_same_v<TIn, float> && sizeof(TOut) == 1) {
        // 16 values a step with the same arithmetic, so the same bytes (the SSE2 loop's division was most of
        // the time: a 1 x 3 x 224 x 224 image alone, 1 thread, 46.6 -> 17.4 us a run)
        if (cpu_has(kCpuAvx512)) {
          quant::quantize_bytes_avx512(x + b, y + b, e - b, s, z, flo, fhi);
          return;
        }
      }
#endif
#if defined(__SSE2__)
      if constexpr (std::is_same_v<TIn, float> && sizeof(TOut) == 1) {
        // 16 values a step, the scalar loop's arithmetic: divide, clamp to +-1e6, round half to even with
        // the magic constant, add the zero point, saturate (NaN to lo), narrow
        const __m128 vs = _mm_set1_ps(s), vz = _mm_set1_ps(z), vlo = _mm_set1_ps(flo), vhi = _mm_set1_ps(fhi);
        const __m128 lim = _mm_set1_ps(1e6f), nlim = _mm_set1_ps(-1e6f), magic = _mm_set1_ps(12582912.f);
        auto four = [&](const float* p) {
          __m128 v = _mm_div_ps(_mm_loadu_ps(p), vs);
          v = _mm_min_ps(_mm_max_ps(v, nlim), lim);
          v = _mm_add_ps(_mm_sub_ps(_mm_add_ps(v, magic), magic), vz);
          return _mm_cvttps_epi32(_mm_min_ps(_mm_max_ps(v, vlo), vhi));
        };
        for (; j + 16 <= e; j += 16) {
          const __m128i w0 = _mm_packs_epi32(four(x + j), four(x + j + 4));
          const __m128i w1 = _mm_packs_epi32(four(x + j + 8), four(x + j + 12));
          const __m128i v = std::is_signed_v<TOut> ? _mm_packs_epi16(w0, w1) : _mm_packus_epi16(w0, w1);
          _mm_storeu_si128(reinterpret_cast<__m128i*>(y + j), v);
        }
      }
#endif
      for (; j < e; ++j) {
        const float v = quant::round_even(static_cast<float>(load_any(x[j])) / s) + z;
        y[j] = static_cast<TOut>(static_cast<int32_t>(quant::saturate(v, flo, fhi)));
      }
      return;
    }
    for (int64_t j = b; j < e; ++j, si += step) {
      const double xv = load_any(x[j]);
      const double s = sc[si];
      double v;
      switch (prec) {
        case DType::kDouble: v = xv / s; break;
        case DType::kFloat16: v = half_to_float(float_to_half(static_cast<float>(xv) / static_cast<float>(s))); break;
        case DType::kBFloat16:
          v = bfloat16_to_float(float_to_bfloat16(static_cast<float>(xv) / static_cast<float>(s)));
          break;
        default: v = static_cast<float>(xv) / static_cast<float>(s); break;
      }
      v = quant::round_even(v) + (zpp ? zpp[si] : 0);
      y[j] = static_cast<TOut>(quant::saturate(v, lo, hi));
    }
  });
}

// Zero points of a narrow type as their values (empty: no zero point).
std::vector<double> narrow_zero_points(const Tensor* Z) {
  std::vector<double> zp;
  if (!Z) return zp;
  const double* table = narrow::decode_table(Z->dtype());
  const uint8_t* z = Z->data_as<uint8_t>();
  for (int64_t i = 0; i < Z->numel(); ++i) zp.push_back(table[z[i]]);
  return zp;
}

// x / scale in the requested precision.
inline double scaled(double xv, double s, DType prec) {
  switch (prec) {
    case DType::kDouble: return xv / s;
    case DType::kFloat16: return half_to_float(float_to_half(static_cast<float>(xv) / static_cast<float>(s)));
    case DType::kBFloat16: return bfloat16_to_float(float_to_bfloat16(static_cast<float>(xv) / static_cast<float>(s)));
    default: return static_cast<float>(xv) / static_cast<float>(s);
  }
}

void quantize_narrow(OpContext& ctx, const QuantLayout& q, const std::vector<double>& scale,
                     const std::vector<double>& zp, DType prec, bool saturate, Tensor& Y) {
  const Tensor& X = ctx.input(0);
  const DType out = Y.dtype();
  std::vector<double> xs(static_cast<size_t>(X.numel()));
  if (X.dtype() == DType::kInt32) {
    const int32_t* x = X.data<int32_t>();
    for (size_t i = 0; i < xs.size(); ++i) xs[i] = x[i];
  } else {
    MRT_NORM_DISPATCH(X.dtype(), "QuantizeLinear", {
      const T* x = X.data<T>();
      for (size_t i = 0; i < xs.size(); ++i) xs[i] = static_cast<double>(load(x[i]));
    });
  }
  uint8_t* y = Y.data_as<uint8_t>();
  const bool is_int = narrow::is_integer(out);
  const double* sc = scale.data();
  const double* zpp = zp.empty() ? nullptr : zp.data();
  const double* xv = xs.data();
  for_each_run(q, ctx.threads(), [&](int64_t b, int64_t e, int64_t si, int64_t step) {
    for (int64_t j = b; j < e; ++j, si += step) {
      const double v = scaled(xv[j], sc[si], prec);
      const double z = zpp ? zpp[si] : 0.0;
      if (is_int) {
        const double r = quant::round_even(v) + z;
        const double c = std::isnan(r) ? 0.0 : std::min(std::max(r, -1e9), 1e9);
        y[j] = narrow::encode_int_clamp(out, static_cast<int64_t>(c));
      } else {
        y[j] = narrow::encode_float(out, v + z, saturate);
      }
    }
  });
}

void quantize_kernel(OpContext& ctx) {
  const Node& node = ctx.node();
  const Tensor& X = ctx.input(0);
  const Tensor& S = ctx.input(1);
  const Tensor* Z = ctx.optional_input(2);
  DType out = DType::kUInt8;
  const int64_t attr_dt = ctx.opset() >= 21 ? node.attr_int("output_dtype", 0) : 0;
  if (Z) {
    out = Z->dtype();
    MRT_CHECK_ARG(attr_dt == 0 || attr_dt == static_cast<int64_t>(out), "QuantizeLinear: output_dtype ", attr_dt,
                  " differs from the zero point type ", dtype_name(out));
  } else if (attr_dt != 0) {
    out = static_cast<DType>(attr_dt);
  }
  MRT_CHECK_IMPL(out == DType::kUInt8 || out == DType::kInt8 || out == DType::kUInt16 || out == DType::kInt16 ||
                     (dtype_is_narrow(out) && out != DType::kFloat8E8M0),
                 "QuantizeLinear: quantizing to element type ", dtype_name(out), " (code ", static_cast<int>(out),
                 ") is not supported; uint8, int8, uint16, int16, int4, uint4, int2, uint2, float8 and float4e2m1 are");
  const QuantLayout q = quant_layout(ctx, X, S, Z, "QuantizeLinear");
  const std::vector<double> scale = norm::to_doubles(S, "QuantizeLinear scale");
  DType prec = S.dtype();
  if (ctx.opset() >= 25) {
    const int64_t p = node.attr_int("precision", 0);
    if (p != 0) prec = static_cast<DType>(p);
    MRT_CHECK_IMPL(dtype_is_float(prec), "QuantizeLinear: precision ", p, " is not supported");
  }
  Tensor& Y = ctx.output(0, out, X.shape());
  if (X.numel() == 0) return;
  if (dtype_is_narrow(out)) {
    const bool saturate = ctx.opset() >= 19 ? node.attr_int("saturate", 1) != 0 : true;
    quantize_narrow(ctx, q, scale, narrow_zero_points(Z), prec, saturate, Y);
    return;
  }
  const std::vector<int32_t> zp = Z ? quant::to_int32s(*Z) : std::vector<int32_t>();
  auto with_out = [&](auto tag_in) {
    using TIn = decltype(tag_in);
    switch (out) {
      case DType::kUInt8: quantize_typed<TIn, uint8_t>(ctx, q, scale, zp, prec, Y); break;
      case DType::kInt8: quantize_typed<TIn, int8_t>(ctx, q, scale, zp, prec, Y); break;
      case DType::kUInt16: quantize_typed<TIn, uint16_t>(ctx, q, scale, zp, prec, Y); break;
      default: quantize_typed<TIn, int16_t>(ctx, q, scale, zp, prec, Y); break;
    }
  };
  switch (X.dtype()) {
    case DType::kFloat: with_out(float()); break;
    case DType::kDouble: with_out(double()); break;
    case DType::kFloat16: with_out(Float16()); break;
    case DType::kBFloat16: with_out(BFloat16()); break;
    case DType::kInt32: with_out(int32_t()); break;
    default: fail(MRT_NOT_IMPLEMENTED, "QuantizeLinear: input element type ", dtype_name(X.dtype()), " is not supported");
  }
}

// ---------------------------------------------------------------- DequantizeLinear

template <class TIn, class TOut>
void dequantize_typed(OpContext& ctx, const QuantLayout& q, const std::vector<double>& scale,
                      const std::vector<int32_t>& zp, Tensor& Y) {
  const TIn* x = ctx.input(0).data<TIn>();
  TOut* y = Y.data<TOut>();
  const bool dbl = Y.dtype() == DType::kDouble;
  const std::vector<float> fscale(scale.begin(), scale.end());
  const double* sc = scale.data();
  const float* fsc = fscale.data();
  const int32_t* zpp = zp.empty() ? nullptr : zp.data();
  for_each_run(q, ctx.threads(), [x, y, sc, fsc, zpp, dbl](int64_t b, int64_t e, int64_t si, int64_t step) {
    for (int64_t j = b; j < e; ++j, si += step) {
      const int64_t d = static_cast<int64_t>(x[j]) - (zpp ? zpp[si] : 0);
      if (dbl) y[j] = store<TOut>(static_cast<double>(d) * sc[si]);
      else y[j] = store<TOut>(static_cast<float>(d) * fsc[si]);
    }
  });
}

void dequantize_narrow(OpContext& ctx, const QuantLayout& q, const std::vector<double>& scale,
                       const std::vector<double>& zp, Tensor& Y) {
  const Tensor& X = ctx.input(0);
  const double* table = narrow::decode_table(X.dtype());
  const uint8_t* x = X.data_as<uint8_t>();
  const bool dbl = Y.dtype() == DType::kDouble;
  const double* sc = scale.data();
  const double* zpp = zp.empty() ? nullptr : zp.data();
  MRT_NORM_DISPATCH(Y.dtype(), "DequantizeLinear", {
    T* y = Y.data<T>();
    for_each_run(q, ctx.threads(), [&](int64_t b, int64_t e, int64_t si, int64_t step) {
      for (int64_t j = b; j < e; ++j, si += step) {
        const double d = table[x[j]] - (zpp ? zpp[si] : 0.0);
        if (dbl) y[j] = store<T>(d * sc[si]);
        else y[j] = store<T>(static_cast<float>(d) * static_cast<float>(sc[si]));
      }
    });
  });
}

void dequantize_kernel(OpContext& ctx) {
  const Node& node = ctx.node();
  const Tensor& X = ctx.input(0);
  const Tensor& S = ctx.input(1);
  const Tensor* Z = ctx.optional_input(2);
  MRT_CHECK_IMPL(quant::is_quant_int(X.dtype()) || dtype_is_narrow(X.dtype()), "DequantizeLinear: input element type ",
                 dtype_name(X.dtype()), " (code ", static_cast<int>(X.dtype()), ") is not supported");
  if (Z) {
    MRT_CHECK_ARG(Z->dtype() == X.dtype(), "DequantizeLinear: zero point type ", dtype_name(Z->dtype()),
                  " differs from the input type ", dtype_name(X.dtype()));
  }
  DType out = S.dtype();
  const int64_t attr_dt = ctx.opset() >= 23 ? node.attr_int("output_dtype", 0) : 0;
  if (attr_dt != 0) out = static_cast<DType>(attr_dt);
  MRT_CHECK_IMPL(dtype_is_float(out), "DequantizeLinear: output element type code ", static_cast<int>(out),
                 " is not supported");
  const QuantLayout q = quant_layout(ctx, X, S, Z, "DequantizeLinear");
  const std::vector<double> scale = norm::to_doubles(S, "DequantizeLinear scale");
  Tensor& Y = ctx.output(0, out, X.shape());
  if (X.numel() == 0) return;
  if (dtype_is_narrow(X.dtype())) {
    dequantize_narrow(ctx, q, scale, narrow_zero_points(Z), Y);
    return;
  }
  const std::vector<int32_t> zp = Z ? quant::to_int32s(*Z) : std::vector<int32_t>();
  auto with_out = [&](auto tag_in) {
    using TIn = decltype(tag_in);
    MRT_NORM_DISPATCH(out, "DequantizeLinear", { dequantize_typed<TIn, T>(ctx, q, scale, zp, Y); });
  };
  switch (X.dtype()) {
    case DType::kUInt8: with_out(uint8_t()); break;
    case DType::kInt8: with_out(int8_t()); break;
    case DType::kUInt16: with_out(uint16_t()); break;
    case DType::kInt16: with_out(int16_t()); break;
    default: with_out(int32_t()); break;
  }
}

// ---------------------------------------------------------------- DynamicQuantizeLinear

// Running min/max of x folded into mn/mx; NaN values are skipped.
void minmax_f32(const float* x, int64_t n, float& mn, float& mx) {
  int64_t i = 0;
#if defined(__SSE2__)
  __m128 vmn = _mm_set1_ps(mn), vmx = _mm_set1_ps(mx);
  for (; i + 4 <= n; i += 4) {
    const __m128 v = _mm_loadu_ps(x + i);
    vmn = _mm_min_ps(v, vmn);  // returns the 2nd operand when v is NaN
    vmx = _mm_max_ps(v, vmx);
  }
  alignas(16) float a[4], b[4];
  _mm_store_ps(a, vmn);
  _mm_store_ps(b, vmx);
  quant::fold_range(a, 4, mn, mx);  // (the lanes' minima cannot raise mx, nor their maxima lower mn)
  quant::fold_range(b, 4, mn, mx);
#endif
  quant::fold_range(x + i, n - i, mn, mx);
}

// y = saturate(round(x / scale) + zp) into uint8. A separate function with restrict
// pointers: uint8_t stores may alias anything, which would keep the loop scalar.
void quantize_u8(const float* __restrict x, uint8_t* __restrict y, int64_t n, float scale, float zp) {
  int64_t i = 0;
#if defined(__SSE2__)
  const __m128 vs = _mm_set1_ps(scale), vz = _mm_set1_ps(zp), magic = _mm_set1_ps(12582912.f);
  const __m128 lim_lo = _mm_set1_ps(-1e6f), lim_hi = _mm_set1_ps(1e6f), zero = _mm_setzero_ps(), top = _mm_set1_ps(255.f);
  auto q4 = [&](const float* p) {
    __m128 v = _mm_div_ps(_mm_loadu_ps(p), vs);
    v = _mm_min_ps(_mm_max_ps(v, lim_lo), lim_hi);  // NaN -> -1e6 (max returns the 2nd operand)
    v = _mm_add_ps(_mm_sub_ps(_mm_add_ps(v, magic), magic), vz);
    v = _mm_min_ps(_mm_max_ps(v, zero), top);
    return _mm_cvttps_epi32(v);
  };
  for (; i + 16 <= n; i += 16) {
    const __m128i a = _mm_packs_epi32(q4(x + i), q4(x + i + 4));
    const __m128i b = _mm_packs_epi32(q4(x + i + 8), q4(x + i + 12));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(y + i), _mm_packus_epi16(a, b));
  }
#endif
  for (; i < n; ++i) {
    float v = x[i] / scale;
    v = v < -1e6f ? -1e6f : (v > 1e6f ? 1e6f : v);
    v = ((v + 12582912.f) - 12582912.f) + zp;  // round half to even
    v = v > 0.f ? v : 0.f;                      // NaN -> 0
    v = v < 255.f ? v : 255.f;
    y[i] = static_cast<uint8_t>(static_cast<int32_t>(v));
  }
}

}  // namespace

quant::DynamicQuantized quant::dynamic_quantize_u8(ThreadPool& pool, const float* x, int64_t n, uint8_t* y) {
#if defined(MOSAICRT_X86_SIMD)
  const bool avx512 = cpu_has(kCpuAvx512);
  auto minmax_f32 = avx512 ? quant::minmax_f32_avx512 : mrt::minmax_f32;
  auto quantize_u8 = avx512 ? quant::quantize_u8_avx512 : mrt::quantize_u8;
#endif
  float mn = 0.f, mx = 0.f;  // the range always includes 0
  if (n <= 16384) {
    minmax_f32(x, n, mn, mx);
  } else {
    std::mutex mu;
    pool.parallel_for(n, 16384, [&](int64_t b, int64_t e) {
      float lmn = 0.f, lmx = 0.f;
      minmax_f32(x + b, e - b, lmn, lmx);
      std::lock_guard<std::mutex> lock(mu);
      mn = std::min(mn, lmn);
      mx = std::max(mx, lmx);
    });
  }
  // An all-zero input gets scale 1 (as onnxruntime does); every value quantizes to 0.
  const float scale = mx == mn ? 1.0f : (mx - mn) / 255.0f;
  const float izp = 0.0f - mn / scale;
  const float zpf = std::nearbyint(std::min(255.0f, std::max(0.0f, izp)));
  if (n <= 16384) quantize_u8(x, y, n, scale, zpf);
  else pool.parallel_for(n, 16384, [=](int64_t b, int64_t e) { quantize_u8(x + b, y + b, e - b, scale, zpf); });
  return {scale, static_cast<uint8_t>(zpf)};
}

namespace {

void dynamic_quantize_kernel(OpContext& ctx) {
  const Tensor& X = ctx.input(0);
  MRT_CHECK_IMPL(X.dtype() == DType::kFloat, "DynamicQuantizeLinear: input must be float32, got ", X.describe());
  Tensor& Y = ctx.output(0, DType::kUInt8, X.shape());
  const quant::DynamicQuantized q = quant::dynamic_quantize_u8(ctx.threads(), X.data<float>(), X.numel(), Y.data<uint8_t>());
  if (ctx.has_output(1)) ctx.output(1, DType::kFloat, {}).data<float>()[0] = q.scale;
  if (ctx.has_output(2)) ctx.output(2, DType::kUInt8, {}).data<uint8_t>()[0] = q.zero_point;
}

void quantize_check(const Node& node, int64_t opset) {
  if (opset < 21) return;
  const int64_t dt = node.attr_int("output_dtype", 0);
  MRT_CHECK_IMPL(dt == 0 || dt == 2 || dt == 3 || dt == 4 || dt == 5, node.label(), ": output_dtype ", dt,
                 " is not supported; uint8, int8, uint16 and int16 are");
  MRT_ENFORCE(node.attr_int("block_size", 0) >= 0, MRT_INVALID_MODEL, node.label(), ": block_size must be >= 0");
}

void dequantize_check(const Node& node, int64_t opset) {
  if (opset < 23) return;
  const int64_t dt = node.attr_int("output_dtype", 0);
  MRT_CHECK_IMPL(dt == 0 || dtype_is_float(static_cast<DType>(dt)), node.label(), ": output_dtype ", dt,
                 " is not supported; float, double, float16 and bfloat16 are");
}

}  // namespace

void register_quant_kernels(KernelRegistry& r) {
  r.add("QuantizeLinear", 10, quantize_kernel, quantize_check);
  r.add("DequantizeLinear", 10, dequantize_kernel, dequantize_check);
  r.add("DynamicQuantizeLinear", 11, dynamic_quantize_kernel);
  register_quant_matmul_kernels(r);
  register_quant_conv_kernels(r);
}

}  // namespace mrt
