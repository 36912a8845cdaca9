// float32 erf and the erf form of GELU over whole arrays, compiled for AVX-512 (x86-64 targets only; see
// elementwise_math.h): the same branch-free functions as the AVX2 build, vectorized to 16 lanes.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC optimize("no-trapping-math", "no-math-errno", "fp-contract=fast")
#endif
#include <immintrin.h>

#include "elementwise_math.h"

namespace mrt {
namespace fastmath {

// 512-bit vectors for the loop (compilers tuned for some AVX-512 CPUs prefer 256)
#if defined(__clang__)
#define MRT_WIDE __attribute__((min_vector_width(512)))
#elif defined(__GNUC__)
#define MRT_WIDE __attribute__((target("prefer-vector-width=512")))
#else
#define MRT_WIDE
#endif

MRT_WIDE void gelu_erf_avx512(const float* x, float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    const float v = x[i];
    y[i] = 0.5f * v * (1.f + erf_f(v * 0.70710678118654752f));
  }
}

MRT_WIDE void exp_avx512(const float* x, float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = exp_f(x[i]);
}
MRT_WIDE void tanh_avx512(const float* x, float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = tanh_f(x[i]);
}
MRT_WIDE void sigmoid_avx512(const float* x, float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = sigmoid_f(x[i]);
}
MRT_WIDE void erf_avx512(const float* x, float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = erf_f(x[i]);
}

#undef MRT_WIDE

namespace {
inline __mmask16 first16(int64_t n) { return n >= 16 ? __mmask16(0xFFFF) : static_cast<__mmask16>((1u << n) - 1); }
}  // namespace

void halves_to_floats_avx512(const uint16_t* x, float* y, int64_t n) {
  int64_t i = 0;
  for (; i + 16 <= n; i += 16)
    _mm512_storeu_ps(y + i, _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(x + i))));
  if (i < n) {
    const __mmask16 m = first16(n - i);
    _mm512_mask_storeu_ps(y + i, m, _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(m, x + i)));
  }
}

void floats_to_halves_avx512(const float* x, uint16_t* y, int64_t n) {
  int64_t i = 0;
  for (; i + 16 <= n; i += 16)
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(y + i),
                        _mm512_cvtps_ph(_mm512_loadu_ps(x + i), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
  if (i < n) {
    const __mmask16 m = first16(n - i);
    _mm256_mask_storeu_epi16(y + i, m,
                             _mm512_cvtps_ph(_mm512_maskz_loadu_ps(m, x + i), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
  }
}

}  // namespace fastmath
}  // namespace mrt
