// Unary elementwise ops: math functions, activations (with their attributes), IsNaN,
// IsInf, Not, BitwiseNot and Clip.
#if defined(__GNUC__) && !defined(__clang__)
// Let GCC if-convert the selects of the float approximations so their loops vectorize
// (FP exception flags are never observed by the runtime; clang does this by default).
#pragma GCC optimize("no-trapping-math", "no-math-errno")
#endif
#include <cstring>
#include <string>

#include "../gemm/sgemm.h"
#include "elementwise_common.h"
#include "elementwise_math.h"

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

namespace mrt {

#if defined(MOSAICRT_X86_SIMD)
bool fastmath::cpu_has_avx2_fma() {
#if defined(__GNUC__)
  static const bool has = [] {
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  }();
  return has;
#else
  return false;
#endif
}
#endif

void sigmoid_array(const float* x, float* y, int64_t n) {
#if defined(MOSAICRT_X86_SIMD)
  if (sgemm_kernel_is_avx512()) return fastmath::sigmoid_avx512(x, y, n);
  if (fastmath::cpu_has_avx2_fma()) return fastmath::sigmoid_avx2(x, y, n);
#endif
  for (int64_t i = 0; i < n; ++i) y[i] = fastmath::sigmoid_f(x[i]);
}

void tanh_array(const float* x, float* y, int64_t n) {
#if defined(MOSAICRT_X86_SIMD)
  if (sgemm_kernel_is_avx512()) return fastmath::tanh_avx512(x, y, n);
  if (fastmath::cpu_has_avx2_fma()) return fastmath::tanh_avx2(x, y, n);
#endif
  for (int64_t i = 0; i < n; ++i) y[i] = fastmath::tanh_f(x[i]);
}

namespace ew {
namespace {

template <class T>
using wrap_t = std::conditional_t<sizeof(T) <= 4, uint32_t, uint64_t>;

// float32 goes through the vectorizable approximations; double keeps libm.
template <class C> inline C fexp(C x) {
  if constexpr (std::is_same<C, float>::value) return fastmath::exp_f(x);
  else return std::exp(x);
}
template <class C> inline C ftanh(C x) {
  if constexpr (std::is_same<C, float>::value) return fastmath::tanh_f(x);
  else return std::tanh(x);
}
template <class C> inline C ferf(C x) {
  if constexpr (std::is_same<C, float>::value) return fastmath::erf_f(x);
  else return std::erf(x);
}

#define MRT_EW_SIMPLE_FN(NAME, OPNAME, EXPR)                        \
  struct NAME {                                                     \
    static constexpr const char* kName = OPNAME;                    \
    static NAME make(const Node&) { return NAME{}; }                \
    template <class C> C operator()(C x) const { return EXPR; }     \
  };

MRT_EW_SIMPLE_FN(CeilF, "Ceil", std::ceil(x))
MRT_EW_SIMPLE_FN(FloorF, "Floor", std::floor(x))
MRT_EW_SIMPLE_FN(RoundF, "Round", std::nearbyint(x))  // default rounding mode: half to even
MRT_EW_SIMPLE_FN(ReciprocalF, "Reciprocal", C(1) / x)
MRT_EW_SIMPLE_FN(SqrtF, "Sqrt", std::sqrt(x))
MRT_EW_SIMPLE_FN(ExpF, "Exp", fexp(x))
MRT_EW_SIMPLE_FN(LogF, "Log", std::log(x))
MRT_EW_SIMPLE_FN(SinF, "Sin", std::sin(x))
MRT_EW_SIMPLE_FN(CosF, "Cos", std::cos(x))
MRT_EW_SIMPLE_FN(TanF, "Tan", std::tan(x))
MRT_EW_SIMPLE_FN(AsinF, "Asin", std::asin(x))
MRT_EW_SIMPLE_FN(AcosF, "Acos", std::acos(x))
MRT_EW_SIMPLE_FN(AtanF, "Atan", std::atan(x))
MRT_EW_SIMPLE_FN(SinhF, "Sinh", std::sinh(x))
MRT_EW_SIMPLE_FN(CoshF, "Cosh", std::cosh(x))
MRT_EW_SIMPLE_FN(AsinhF, "Asinh", std::asinh(x))
MRT_EW_SIMPLE_FN(AcoshF, "Acosh", std::acosh(x))
MRT_EW_SIMPLE_FN(AtanhF, "Atanh", std::atanh(x))
MRT_EW_SIMPLE_FN(ErfF, "Erf", ferf(x))
MRT_EW_SIMPLE_FN(TanhF, "Tanh", ftanh(x))
MRT_EW_SIMPLE_FN(SoftsignF, "Softsign", x / (C(1) + std::fabs(x)))
MRT_EW_SIMPLE_FN(HardSwishF, "HardSwish", x * std::max(C(0), std::min(C(1), x / C(6) + C(0.5))))

template <class C> inline C sigmoid(C x) {
  if constexpr (std::is_same<C, float>::value) return fastmath::sigmoid_f(x);
  if (x >= 0) return C(1) / (C(1) + std::exp(-x));
  const C e = std::exp(x);
  return e / (C(1) + e);
}
template <class C> inline C softplus(C x) {
  // log(1 + exp(x)) without overflow
  return x > 0 ? x + std::log1p(std::exp(-x)) : std::log1p(std::exp(x));
}

MRT_EW_SIMPLE_FN(SigmoidF, "Sigmoid", sigmoid(x))
MRT_EW_SIMPLE_FN(SoftplusF, "Softplus", softplus(x))
MRT_EW_SIMPLE_FN(MishF, "Mish", x * std::tanh(softplus(x)))

struct LeakyReluF {
  static constexpr const char* kName = "LeakyRelu";
  float alpha;
  static LeakyReluF make(const Node& n) { return {n.attr_float("alpha", 0.01f)}; }
  // (a select, not a branch that mispredicts on every other value: 22x onnxruntime's time on random signs)
  template <class C> C operator()(C x) const { return select_negative(x, C(alpha) * x, x); }
};
struct EluF {
  static constexpr const char* kName = "Elu";
  float alpha;
  static EluF make(const Node& n) { return {n.attr_float("alpha", 1.0f)}; }
  template <class C> C operator()(C x) const { return x < 0 ? C(alpha) * std::expm1(x) : x; }
};
struct SeluF {
  static constexpr const char* kName = "Selu";
  float alpha, gamma;
  static SeluF make(const Node& n) {
    return {n.attr_float("alpha", 1.67326319217681884765625f), n.attr_float("gamma", 1.05070102214813232421875f)};
  }
  template <class C> C operator()(C x) const {
    return x <= 0 ? C(gamma) * (C(alpha) * std::exp(x) - C(alpha)) : C(gamma) * x;
  }
};
struct CeluF {
  static constexpr const char* kName = "Celu";
  float alpha;
  static CeluF make(const Node& n) { return {n.attr_float("alpha", 1.0f)}; }
  template <class C> C operator()(C x) const {
    const C a = C(alpha);
    return std::max(C(0), x) + std::min(C(0), a * std::expm1(x / a));
  }
};
struct ThresholdedReluF {
  static constexpr const char* kName = "ThresholdedRelu";
  float alpha;
  static ThresholdedReluF make(const Node& n) { return {n.attr_float("alpha", 1.0f)}; }
  template <class C> C operator()(C x) const { return x > C(alpha) ? x : C(0); }
};
struct HardSigmoidF {
  static constexpr const char* kName = "HardSigmoid";
  float alpha, beta;
  static HardSigmoidF make(const Node& n) { return {n.attr_float("alpha", 0.2f), n.attr_float("beta", 0.5f)}; }
  template <class C> C operator()(C x) const {
    return std::max(C(0), std::min(C(1), C(alpha) * x + C(beta)));
  }
};
struct GeluF {
  static constexpr const char* kName = "Gelu";
  bool tanh_approx;
  static GeluF make(const Node& n) { return {n.attr_string("approximate", "none") == "tanh"}; }
  template <class C> C operator()(C x) const {
    if (tanh_approx) {
      const C k = C(0.7978845608028654);  // sqrt(2/pi)
      return C(0.5) * x * (C(1) + ftanh(k * (x + C(0.044715) * x * x * x)));
    }
    return C(0.5) * x * (C(1) + std::erf(x * C(0.7071067811865476)));
  }
};
struct SwishF {
  static constexpr const char* kName = "Swish";
  float alpha;
  static SwishF make(const Node& n) { return {n.attr_float("alpha", 1.0f)}; }
  template <class C> C operator()(C x) const { return x * sigmoid(C(alpha) * x); }
};

// Functors over every numeric type (integers included).
struct AbsF {
  static constexpr const char* kName = "Abs";
  static AbsF make(const Node&) { return {}; }
  template <class C> C operator()(C x) const {
    if constexpr (std::is_floating_point<C>::value) return std::fabs(x);
    else if constexpr (std::is_unsigned<C>::value) return x;
    else return x < 0 ? static_cast<C>(wrap_t<C>(0) - wrap_t<C>(x)) : x;
  }
};
struct NegF {
  static constexpr const char* kName = "Neg";
  static NegF make(const Node&) { return {}; }
  template <class C> C operator()(C x) const {
    if constexpr (std::is_floating_point<C>::value) return -x;
    else return static_cast<C>(wrap_t<C>(0) - wrap_t<C>(x));
  }
};
struct SignF {
  static constexpr const char* kName = "Sign";
  static SignF make(const Node&) { return {}; }
  template <class C> C operator()(C x) const { return x > 0 ? C(1) : (x < 0 ? static_cast<C>(-1) : x); }
};
struct ReluF {
  static constexpr const char* kName = "Relu";
  static ReluF make(const Node&) { return {}; }
  template <class C> C operator()(C x) const { return x < 0 ? C(0) : x; }
};
struct ShrinkF {
  static constexpr const char* kName = "Shrink";
  float bias, lambd;
  static ShrinkF make(const Node& n) { return {n.attr_float("bias", 0.0f), n.attr_float("lambd", 0.5f)}; }
  template <class C> C operator()(C x) const {
    if constexpr (std::is_floating_point<C>::value) {
      const C up = x + C(bias), down = x - C(bias);  // (both taken: a select, not branches)
      return x < -C(lambd) ? up : (x > C(lambd) ? down : C(0));
    } else {
      const double v = static_cast<double>(x);
      return v < -double(lambd) ? static_cast<C>(v + bias) : (v > double(lambd) ? static_cast<C>(v - bias) : C(0));
    }
  }
};

// Whole-array AVX2 variants of some float32 functions (nullptr: none).
using ArrayFn = void (*)(const float*, float*, int64_t);
template <class F> ArrayFn avx2_variant() { return nullptr; }
#if defined(MOSAICRT_X86_SIMD)
template <> ArrayFn avx2_variant<ExpF>() { return &fastmath::exp_avx2; }
template <> ArrayFn avx2_variant<TanhF>() { return &fastmath::tanh_avx2; }
template <> ArrayFn avx2_variant<SigmoidF>() { return &fastmath::sigmoid_avx2; }
template <> ArrayFn avx2_variant<ErfF>() { return &fastmath::erf_avx2; }
template <class F> ArrayFn avx512_variant() { return nullptr; }
template <> ArrayFn avx512_variant<ExpF>() { return &fastmath::exp_avx512; }
template <> ArrayFn avx512_variant<TanhF>() { return &fastmath::tanh_avx512; }
template <> ArrayFn avx512_variant<SigmoidF>() { return &fastmath::sigmoid_avx512; }
template <> ArrayFn avx512_variant<ErfF>() { return &fastmath::erf_avx512; }
#endif

template <class F>
void float_unary_kernel(OpContext& ctx) {
  const Tensor& x = ctx.input(0);
  Tensor& y = ctx.output(0, x.dtype(), x.shape());
#if defined(MOSAICRT_X86_SIMD)
  // 16 lanes where the AVX-512 kernels run (sgemm's choice, so MOSAICRT_SGEMM_KERNEL=avx2 tests the other)
  ArrayFn wide = sgemm_kernel_is_avx512() ? avx512_variant<F>() : nullptr;
  if (ArrayFn fn = wide ? wide : avx2_variant<F>(); fn && x.dtype() == DType::kFloat && fastmath::cpu_has_avx2_fma()) {
    const float* xp = x.data_as<float>();
    float* yp = y.data_as<float>();
    const int64_t n = x.numel();
    if (n < 2 * kGrain) fn(xp, yp, n);
    else ctx.threads().parallel_for(n, kGrain, [&](int64_t b, int64_t e) { fn(xp + b, yp + b, e - b); });
    return;
  }
#endif
  const F f = F::make(ctx.node());
  MRT_EW_DISPATCH_FLOATLIKE(x.dtype(), F::kName, { unary_apply<T, T>(ctx, x, y, Lift1<T, F>{f}); });
}

template <class F>
void numeric_unary_kernel(OpContext& ctx) {
  const Tensor& x = ctx.input(0);
  Tensor& y = ctx.output(0, x.dtype(), x.shape());
  const F f = F::make(ctx.node());
  MRT_EW_DISPATCH_NUMERIC(x.dtype(), F::kName, { unary_apply<T, T>(ctx, x, y, Lift1<T, F>{f}); });
}

void sqrt_kernel(OpContext& ctx) {
#if defined(__SSE2__)
  const Tensor& x = ctx.input(0);
  if (x.dtype() == DType::kFloat || x.dtype() == DType::kDouble) {
    Tensor& y = ctx.output(0, x.dtype(), x.shape());
    const int64_t n = x.numel();
    const bool f32 = x.dtype() == DType::kFloat;
    auto body = [&](int64_t b, int64_t e) {
      if (f32) {
        const float* xp = x.data_as<float>();
        float* yp = y.data_as<float>();
        int64_t i = b;
        for (; i + 4 <= e; i += 4) _mm_storeu_ps(yp + i, _mm_sqrt_ps(_mm_loadu_ps(xp + i)));
        for (; i < e; ++i) yp[i] = _mm_cvtss_f32(_mm_sqrt_ss(_mm_set_ss(xp[i])));
      } else {
        const double* xp = x.data_as<double>();
        double* yp = y.data_as<double>();
        int64_t i = b;
        for (; i + 2 <= e; i += 2) _mm_storeu_pd(yp + i, _mm_sqrt_pd(_mm_loadu_pd(xp + i)));
        for (; i < e; ++i) yp[i] = _mm_cvtsd_f64(_mm_sqrt_sd(_mm_setzero_pd(), _mm_set_sd(xp[i])));
      }
    };
    if (n < 2 * kGrain) body(0, n);
    else ctx.threads().parallel_for(n, kGrain, body);
    return;
  }
#endif
  float_unary_kernel<SqrtF>(ctx);
}

void gelu_check(const Node& n, int64_t) {
  const std::string a = n.attr_string("approximate", "none");
  MRT_ENFORCE(a == "none" || a == "tanh", MRT_INVALID_MODEL, n.label(),
              ": approximate must be \"none\" or \"tanh\", got \"", a, "\"");
}

void isnan_kernel(OpContext& ctx) {
  const Tensor& x = ctx.input(0);
  Tensor& y = ctx.output(0, DType::kBool, x.shape());
  MRT_EW_DISPATCH_FLOATLIKE(x.dtype(), "IsNaN", {
    unary_apply<T, bool>(ctx, x, y, [](T v) { return std::isnan(Compute<T>::load(v)); });
  });
}

void isinf_kernel(OpContext& ctx) {
  const Tensor& x = ctx.input(0);
  Tensor& y = ctx.output(0, DType::kBool, x.shape());
  const bool pos = ctx.node().attr_int("detect_positive", 1) != 0;
  const bool neg = ctx.node().attr_int("detect_negative", 1) != 0;
  MRT_EW_DISPATCH_FLOATLIKE(x.dtype(), "IsInf", {
    unary_apply<T, bool>(ctx, x, y, [pos, neg](T v) {
      const auto c = Compute<T>::load(v);
      return std::isinf(c) && ((c > 0 && pos) || (c < 0 && neg));
    });
  });
}

void not_kernel(OpContext& ctx) {
  const Tensor& x = ctx.input(0);
  MRT_CHECK_IMPL(x.dtype() == DType::kBool, "Not: element type ", dtype_name(x.dtype()),
                 " is not supported (bool only)");
  Tensor& y = ctx.output(0, DType::kBool, x.shape());
  unary_apply<bool, bool>(ctx, x, y, [](bool v) { return !v; });
}

void bitwise_not_kernel(OpContext& ctx) {
  const Tensor& x = ctx.input(0);
  Tensor& y = ctx.output(0, x.dtype(), x.shape());
  MRT_DISPATCH_INTEGER(x.dtype(), "BitwiseNot", {
    unary_apply<T, T>(ctx, x, y, [](T v) { return static_cast<T>(~v); });
  });
}

// ---- Clip: bounds as attributes (opset < 11) or optional scalar inputs ----
template <class T>
void clip_apply(OpContext& ctx, const Tensor& x, Tensor& y) {
  using C = compute_t<T>;
  C lo = std::numeric_limits<C>::lowest(), hi = std::numeric_limits<C>::max();
  if constexpr (std::is_floating_point<C>::value) {
    lo = -std::numeric_limits<C>::infinity();
    hi = std::numeric_limits<C>::infinity();
  }
  if (ctx.opset() < 11) {
    const Node& n = ctx.node();
    if (n.has_attr("min")) lo = static_cast<C>(n.attr_float("min", 0.f));
    if (n.has_attr("max")) hi = static_cast<C>(n.attr_float("max", 0.f));
  } else {
    for (size_t i = 1; i <= 2; ++i) {
      const Tensor* b = ctx.optional_input(i);
      if (!b) continue;
      MRT_CHECK_ARG(b->dtype() == x.dtype(), "Clip bound ", (i == 1 ? "min" : "max"), " must have type ",
                    dtype_name(x.dtype()), ", got ", b->describe());
      MRT_CHECK_ARG(b->numel() == 1, "Clip bound ", (i == 1 ? "min" : "max"), " must be a scalar, got ",
                    b->describe());
      const C v = Compute<T>::load(b->data_as<T>()[0]);
      (i == 1 ? lo : hi) = v;
    }
  }
  unary_apply<T, T>(ctx, x, y, [lo, hi](T v) {
    C c = Compute<T>::load(v);
    c = c < lo ? lo : c;
    c = c > hi ? hi : c;
    return Compute<T>::store(c);
  });
}

void clip_kernel(OpContext& ctx) {
  const Tensor& x = ctx.input(0);
  Tensor& y = ctx.output(0, x.dtype(), x.shape());
  MRT_EW_DISPATCH_NUMERIC(x.dtype(), "Clip", { clip_apply<T>(ctx, x, y); });
}

}  // namespace

void register_unary_kernels(KernelRegistry& r) {
  r.add("Abs", 1, numeric_unary_kernel<AbsF>);
  r.add("Neg", 1, numeric_unary_kernel<NegF>);
  r.add("Sign", 9, numeric_unary_kernel<SignF>);
  r.add("Relu", 1, numeric_unary_kernel<ReluF>);
  r.add("Shrink", 9, numeric_unary_kernel<ShrinkF>);
  r.add("Ceil", 1, float_unary_kernel<CeilF>);
  r.add("Floor", 1, float_unary_kernel<FloorF>);
  r.add("Round", 11, float_unary_kernel<RoundF>);
  r.add("Reciprocal", 1, float_unary_kernel<ReciprocalF>);
  r.add("Sqrt", 1, sqrt_kernel);
  r.add("Exp", 1, float_unary_kernel<ExpF>);
  r.add("Log", 1, float_unary_kernel<LogF>);
  r.add("Sin", 7, float_unary_kernel<SinF>);
  r.add("Cos", 7, float_unary_kernel<CosF>);
  r.add("Tan", 7, float_unary_kernel<TanF>);
  r.add("Asin", 7, float_unary_kernel<AsinF>);
  r.add("Acos", 7, float_unary_kernel<AcosF>);
  r.add("Atan", 7, float_unary_kernel<AtanF>);
  r.add("Sinh", 9, float_unary_kernel<SinhF>);
  r.add("Cosh", 9, float_unary_kernel<CoshF>);
  r.add("Asinh", 9, float_unary_kernel<AsinhF>);
  r.add("Acosh", 9, float_unary_kernel<AcoshF>);
  r.add("Atanh", 9, float_unary_kernel<AtanhF>);
  r.add("Erf", 9, float_unary_kernel<ErfF>);
  r.add("Sigmoid", 1, float_unary_kernel<SigmoidF>);
  r.add("Tanh", 1, float_unary_kernel<TanhF>);
  r.add("LeakyRelu", 1, float_unary_kernel<LeakyReluF>);
  r.add("Elu", 1, float_unary_kernel<EluF>);
  r.add("Selu", 1, float_unary_kernel<SeluF>);
  r.add("Celu", 12, float_unary_kernel<CeluF>);
  r.add("ThresholdedRelu", 10, float_unary_kernel<ThresholdedReluF>);
  r.add("HardSigmoid", 1, float_unary_kernel<HardSigmoidF>);
  r.add("HardSwish", 14, float_unary_kernel<HardSwishF>);
  r.add("Softplus", 1, float_unary_kernel<SoftplusF>);
  r.add("Softsign", 1, float_unary_kernel<SoftsignF>);
  r.add("Mish", 18, float_unary_kernel<MishF>);
  r.add("Gelu", 20, float_unary_kernel<GeluF>, gelu_check);
  r.add("Swish", 24, float_unary_kernel<SwishF>);
  r.add("IsNaN", 9, isnan_kernel);
  r.add("IsInf", 10, isinf_kernel);
  r.add("Not", 1, not_kernel);
  r.add("BitwiseNot", 18, bitwise_not_kernel);
  r.add("Clip", 1, clip_kernel);
}

}  // namespace ew
}  // namespace mrt
