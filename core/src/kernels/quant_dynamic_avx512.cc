// DynamicQuantizeLinear's two passes on AVX-512, 16 floats a step: the range (min and max, NaN skipped) and
// the quantization (x / scale, clamped to +-1e6 with a NaN going to -1e6, rounded half to even with the magic
// constant, plus the zero point, saturated to [0, 255]): the arithmetic of quant.cc's scalar and SSE2 loops,
// so every path gives the same bytes. QuantizeLinear to uint8 or int8 takes the second pass too. At batch 1 (the
// quantized MLP's 256- and 512-float rows) the SSE2 division took half a microsecond of a 17-microsecond run.
#include <immintrin.h>

#include "quant_common.h"

namespace mrt {
namespace quant {
namespace {

// The lanes of the 16 floats from i that lie below n.
inline __mmask16 lanes_from(int64_t i, int64_t n) {
  return n - i >= 16 ? __mmask16(0xFFFF) : static_cast<__mmask16>((1u << (n - i)) - 1);
}

}  // namespace

void minmax_f32_avx512(const float* x, int64_t n, float& mn, float& mx) {
  __m512 vmn = _mm512_set1_ps(mn), vmx = _mm512_set1_ps(mx);
  for (int64_t i = 0; i < n; i += 16) {
    const __mmask16 m = lanes_from(i, n);
    // masked-off lanes keep the running values; min / max return their second operand for a NaN in the first
    const __m512 v = _mm512_maskz_loadu_ps(m, x + i);
    vmn = _mm512_mask_min_ps(vmn, m, v, vmn);
    vmx = _mm512_mask_max_ps(vmx, m, v, vmx);
  }
  alignas(64) float a[16], b[16];
  _mm512_store_ps(a, vmn);
  _mm512_store_ps(b, vmx);
  fold_range(a, 16, mn, mx);  // (the lanes' minima cannot raise mx, nor their maxima lower mn)
  fold_range(b, 16, mn, mx);
}

void quantize_bytes_avx512(const float* x, void* y, int64_t n, float scale, float zp, float lo, float hi) {
  const __m512 vs = _mm512_set1_ps(scale), vz = _mm512_set1_ps(zp), magic = _mm512_set1_ps(12582912.f);
  const __m512 lim_lo = _mm512_set1_ps(-1e6f), lim_hi = _mm512_set1_ps(1e6f), vlo = _mm512_set1_ps(lo),
               vhi = _mm512_set1_ps(hi);
  int8_t* out = static_cast<int8_t*>(y);
  for (int64_t i = 0; i < n; i += 16) {
    const __mmask16 m = lanes_from(i, n);
    __m512 v = _mm512_div_ps(_mm512_maskz_loadu_ps(m, x + i), vs);
    v = _mm512_min_ps(_mm512_max_ps(v, lim_lo), lim_hi);  // NaN -> -1e6 (max returns the 2nd operand)
    v = _mm512_add_ps(_mm512_sub_ps(_mm512_add_ps(v, magic), magic), vz);
    v = _mm512_min_ps(_mm512_max_ps(v, vlo), vhi);
    // (an integer in [lo, hi] within a byte's range: its low byte is the uint8 or int8 value)
    _mm512_mask_cvtepi32_storeu_epi8(out + i, m, _mm512_cvttps_epi32(v));
  }
}

void quantize_u8_avx512(const float* x, uint8_t* y, int64_t n, float scale, float zp) {
  quantize_bytes_avx512(x, y, n, scale, zp, 0.f, 255.f);
}

}  // namespace quant
}  // namespace mrt
