// QLinearAdd / QLinearMul of two 8-bit operands of the same shape on AVX-512: 16 values a step, the
// arithmetic of contrib_qlinear.cc's scalar and SSE2 loops (dequantize in float, combine, divide by the
// output scale, round half to even with the magic constant, add the zero point, saturate with NaN going
// to the lowest value), so every path gives the same bytes.
#include <immintrin.h>

#include "quant_common.h"

namespace mrt {
namespace quant {
namespace {

template <bool kMul, bool kSigned>
void binary(const void* a, const void* b, void* y, int64_t n, const QLinearBinaryParams& p) {
  const __m512 vsa = _mm512_set1_ps(p.sa), vsb = _mm512_set1_ps(p.sb), vsc = _mm512_set1_ps(p.sc);
  const __m512 vzc = _mm512_set1_ps(p.zc), vlo = _mm512_set1_ps(p.lo), vhi = _mm512_set1_ps(p.hi);
  const __m512 lim = _mm512_set1_ps(1e6f), nlim = _mm512_set1_ps(-1e6f), magic = _mm512_set1_ps(12582912.f);
  const __m512i vza = _mm512_set1_epi32(p.za), vzb = _mm512_set1_epi32(p.zb);
  const uint8_t* pa = static_cast<const uint8_t*>(a);
  const uint8_t* pb = static_cast<const uint8_t*>(b);
  uint8_t* py = static_cast<uint8_t*>(y);
  auto widen = [](__m128i v) { return kSigned ? _mm512_cvtepi8_epi32(v) : _mm512_cvtepu8_epi32(v); };
  for (int64_t i = 0; i < n; i += 16) {
    const int64_t left = n - i;
    const __mmask16 m = left >= 16 ? __mmask16(0xFFFF) : static_cast<__mmask16>((1u << left) - 1);
    const __m512 va = _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_sub_epi32(widen(_mm_maskz_loadu_epi8(m, pa + i)), vza)), vsa);
    const __m512 vb = _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_sub_epi32(widen(_mm_maskz_loadu_epi8(m, pb + i)), vzb)), vsb);
    __m512 v = _mm512_div_ps(kMul ? _mm512_mul_ps(va, vb) : _mm512_add_ps(va, vb), vsc);
    v = _mm512_min_ps(_mm512_max_ps(v, nlim), lim);  // max gives its second operand for a NaN: -1e6
    v = _mm512_add_ps(_mm512_sub_ps(_mm512_add_ps(v, magic), magic), vzc);
    v = _mm512_min_ps(_mm512_max_ps(v, vlo), vhi);
    // in [lo, hi]: the low byte of the int32 is the int8 or uint8 value
    _mm512_mask_cvtepi32_storeu_epi8(py + i, m, _mm512_cvttps_epi32(v));
  }
}

}  // namespace

void qlinear_binary_avx512(bool mul, bool is_signed, const void* a, const void* b, void* y, int64_t n,
                           const QLinearBinaryParams& p) {
  if (mul) {
    if (is_signed) binary<true, true>(a, b, y, n, p);
    else binary<true, false>(a, b, y, n, p);
  } else {
    if (is_signed) binary<false, true>(a, b, y, n, p);
    else binary<false, false>(a, b, y, n, p);
  }
}

}  // namespace quant
}  // namespace mrt
