// Branch-free float32 approximations of exp, tanh, sigmoid and erf written so the
// compiler vectorizes loops that call them (no libm calls, selects instead of
// branches). Accuracy: exp ~2 ulp, tanh/sigmoid a few ulp, erf absolute error < 2e-7.
// Special values: NaN propagates, exp overflows to +inf and underflows to 0.
// The functions are `static` so that a translation unit compiled for a wider ISA never
// lends its copy to another one.
#pragma once
#include <cstdint>
#include <cstring>

namespace mrt {
namespace fastmath {

static inline float from_bits(int32_t b) {
  float f;
  std::memcpy(&f, &b, 4);
  return f;
}
static inline float abs_f(float x) {
  int32_t b;
  std::memcpy(&b, &x, 4);
  return from_bits(b & 0x7fffffff);
}
// |m| with the sign of s.
static inline float with_sign_of(float m, float s) {
  int32_t bm, bs;
  std::memcpy(&bm, &m, 4);
  std::memcpy(&bs, &s, 4);
  return from_bits((bm & 0x7fffffff) | (bs & static_cast<int32_t>(0x80000000u)));
}

static inline float exp_f(float x) {
  // Clamping maps NaN to the upper bound (comparisons with NaN are false); the bounds
  // make the scaling below overflow to +inf above ln(FLT_MAX) and give 0 below ln(FLT_MIN).
  float xc = x < 89.f ? x : 89.f;
  xc = xc > -87.33654f ? xc : -87.33654f;
  // x = n ln2 + r, |r| <= ln2/2; n rounded to nearest with the 1.5*2^23 trick.
  float fn = xc * 1.44269504088896341f;
  fn = (fn + 12582912.f) - 12582912.f;
  float r = xc - fn * 0.693359375f;  // ln2 split in a short high part and a correction
  r = r - fn * -2.12194440e-4f;
  // Taylor series of exp(r) to degree 7 (truncation error < 1e-8 relative on |r| <= 0.35).
  float p = 1.f / 5040.f;
  p = p * r + 1.f / 720.f;
  p = p * r + 1.f / 120.f;
  p = p * r + 1.f / 24.f;
  p = p * r + 1.f / 6.f;
  p = p * r + 0.5f;
  p = p * r + 1.f;
  p = p * r + 1.f;
  const int32_t n = static_cast<int32_t>(fn);  // in [-126, 129]
  // 2^n as 2^(n-1) * 2 so that n = 128 still has a valid exponent field; n = 129 only
  // occurs for x >= 89 where the product overflows to +inf as it should.
  const int32_t e = n + 126 < 254 ? n + 126 : 254;
  const float res = p * from_bits(static_cast<int32_t>(static_cast<uint32_t>(e) << 23)) * 2.f;
  return x != x ? x : res;
}

static inline float tanh_f(float x) {
  const float ax = abs_f(x);
  // |x| >= 0.3: 1 - 2 / (exp(2|x|) + 1), sign restored.
  const float e = exp_f(2.f * ax);
  const float big = with_sign_of(1.f - 2.f / (e + 1.f), x);
  // |x| < 0.3: odd Taylor series to x^9 (error < 6e-8 relative).
  const float x2 = x * x;
  float p = 62.f / 2835.f;
  p = p * x2 - 17.f / 315.f;
  p = p * x2 + 2.f / 15.f;
  p = p * x2 - 1.f / 3.f;
  const float small = x + x * x2 * p;
  return with_sign_of(ax < 0.3f ? small : big, x);  // (-0 stays -0)
}

static inline float sigmoid_f(float x) { return 1.f / (1.f + exp_f(-x)); }

static inline float erf_f(float x) {
  const float ax = abs_f(x);
  const float x2 = x * x;
  // |x| < 0.5: Maclaurin series 2/sqrt(pi) * sum (-1)^k x^(2k+1) / (k! (2k+1)).
  float s = -0.000854832592981449f;
  s = s * x2 + 0.005223977625442188f;
  s = s * x2 - 0.026866170645131252f;
  s = s * x2 + 0.11283791670955126f;
  s = s * x2 - 0.37612638903183754f;
  s = s * x2 + 1.1283791670955126f;
  const float small = x * s;
  // |x| >= 0.5: 1 - t*P(t)*exp(-x^2), t = 1/(1 + 0.3275911|x|) (Abramowitz & Stegun 7.1.26).
  const float t = 1.f / (1.f + 0.3275911f * ax);
  float q = 1.061405429f;
  q = q * t - 1.453152027f;
  q = q * t + 1.421413741f;
  q = q * t - 0.284496736f;
  q = q * t + 0.254829592f;
  const float big = with_sign_of(1.f - q * t * exp_f(-x2), x);
  const float res = ax < 0.5f ? small : big;
  return x != x ? x : res;
}

// Whole-array float32 kernels. `elementwise_math_avx2.cc` builds them with AVX2+FMA for
// x86-64 targets; the callers use them only when the CPU has those features.
#if defined(MOSAICRT_X86_SIMD)
bool cpu_has_avx2_fma();
void exp_avx2(const float* x, float* y, int64_t n);
void tanh_avx2(const float* x, float* y, int64_t n);
void sigmoid_avx2(const float* x, float* y, int64_t n);
void erf_avx2(const float* x, float* y, int64_t n);
// elementwise_math_avx512.cc: y = 0.5 x (1 + erf_f(x / sqrt 2)) in 16 lanes (y may be x); for AVX-512 CPUs.
void gelu_erf_avx512(const float* x, float* y, int64_t n);
// The functions of the AVX2 build above in 16 lanes.
void exp_avx512(const float* x, float* y, int64_t n);
void tanh_avx512(const float* x, float* y, int64_t n);
void sigmoid_avx512(const float* x, float* y, int64_t n);
void erf_avx512(const float* x, float* y, int64_t n);
// float16 <-> float32 over whole arrays on AVX-512 (elementwise_math_avx512.cc; VCVTPH2PS / VCVTPS2PH, rounding to
// nearest even like float_to_half, NaN kept NaN): for AVX-512 CPUs.
void halves_to_floats_avx512(const uint16_t* x, float* y, int64_t n);
void floats_to_halves_avx512(const float* x, uint16_t* y, int64_t n);
#endif

}  // namespace fastmath

// Sigmoid and Tanh over float arrays (y may be x) on the widest build the CPU runs: AVX-512 where the AVX-512
// kernels run, AVX2 + FMA, else the same functions element by element (elementwise_unary.cc).
void sigmoid_array(const float* x, float* y, int64_t n);
void tanh_array(const float* x, float* y, int64_t n);

// float16 <-> float32 over arrays (elementwise_cast.cc): the conversion instructions where the AVX-512 kernels
// run, else half_to_float / float_to_half element by element; the same values either way.
void halves_to_floats(const uint16_t* x, float* y, int64_t n);
void floats_to_halves(const float* x, uint16_t* y, int64_t n);

// com.microsoft Gelu (erf form) on float values, y = 0.5 x (1 + erf(x / sqrt 2)), as its kernel computes it
// (contrib_transformer.cc); y may be x. For fusions that apply it to a kernel's output in pieces.
void gelu_erf_float(const float* x, float* y, int64_t n);

}  // namespace mrt
