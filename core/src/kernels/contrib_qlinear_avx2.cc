// QLinearAdd / QLinearMul of two 8-bit operands of the same shape on AVX2: 16 values a step, the arithmetic
// of contrib_qlinear.cc's scalar and SSE2 loops (dequantize in float, combine, divide by the output scale,
// round half to even, add the zero point, saturate with NaN going to the lowest value), so every path gives the
// same bytes. Here the rounding and what follows are integer: after the clamp to +-1e6 (NaN to -1e6) the
// conversion's rounding (to nearest even) is the magic constant's, the zero point and the quotient's integer
// add exactly, and the saturating packs to int16 and then to the output's bytes are the clamp to its range
// (lo and hi are always the type's bounds).
#include <immintrin.h>

#include "quant_common.h"

namespace mrt {
namespace quant {
namespace {

template <bool kMul, bool kSigned>
int64_t binary(const void* a, const void* b, void* y, int64_t n, const QLinearBinaryParams& p) {
  const __m256 vsa = _mm256_set1_ps(p.sa), vsb = _mm256_set1_ps(p.sb), vsc = _mm256_set1_ps(p.sc);
  const __m256i vzc = _mm256_set1_epi32(static_cast<int32_t>(p.zc));
  const __m256 lim = _mm256_set1_ps(1e6f), nlim = _mm256_set1_ps(-1e6f);
  const __m256i vza = _mm256_set1_epi32(p.za), vzb = _mm256_set1_epi32(p.zb);
  const uint8_t* pa = static_cast<const uint8_t*>(a);
  const uint8_t* pb = static_cast<const uint8_t*>(b);
  uint8_t* py = static_cast<uint8_t*>(y);
  auto widen = [](const uint8_t* q) {
    const __m128i v = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(q));
    return kSigned ? _mm256_cvtepi8_epi32(v) : _mm256_cvtepu8_epi32(v);
  };
  auto eight = [&](const uint8_t* qa, const uint8_t* qb) {
    const __m256 va = _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_sub_epi32(widen(qa), vza)), vsa);
    const __m256 vb = _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_sub_epi32(widen(qb), vzb)), vsb);
    __m256 v = _mm256_div_ps(kMul ? _mm256_mul_ps(va, vb) : _mm256_add_ps(va, vb), vsc);
    v = _mm256_min_ps(_mm256_max_ps(v, nlim), lim);  // max gives its second operand for a NaN: -1e6
    return _mm256_add_epi32(_mm256_cvtps_epi32(v), vzc);
  };
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    // int32 -> int16 per 128-bit lane (saturating), put back in order, then to bytes (saturating: the clamp)
    const __m256i r0 = eight(pa + i, pb + i), r1 = eight(pa + i + 8, pb + i + 8);
    const __m256i w = _mm256_permute4x64_epi64(_mm256_packs_epi32(r0, r1), 0xD8);
    const __m128i lo16 = _mm256_castsi256_si128(w), hi16 = _mm256_extracti128_si256(w, 1);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(py + i),
                     kSigned ? _mm_packs_epi16(lo16, hi16) : _mm_packus_epi16(lo16, hi16));
  }
  return i;
}

}  // namespace

int64_t qlinear_binary_avx2(bool mul, bool is_signed, const void* a, const void* b, void* y, int64_t n,
                            const QLinearBinaryParams& p) {
  if (mul) return is_signed ? binary<true, true>(a, b, y, n, p) : binary<true, false>(a, b, y, n, p);
  return is_signed ? binary<false, true>(a, b, y, n, p) : binary<false, false>(a, b, y, n, p);
}

}  // namespace quant
}  // namespace mrt
