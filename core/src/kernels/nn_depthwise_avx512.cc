// Depthwise 3x3 convolution of one (image, channel) plane on AVX-512, stride 1 or 2, no dilation: MobileNet's
// and EfficientNet's layer.
//
// The taps read the input plane in place, 16 output columns a vector: with stride 1 the three taps of a row
// are loads at three consecutive column offsets; with stride 2 two vectors of 16 input columns are split
// into their even and odd columns (permutes), and the third tap is the even columns one further on. Columns
// outside the plane (the padding) are masked off in the loads, which read them as 0 and never touch them, so
// the plane is not copied into a padded image first. The three rows of the window go to three partial sums
// (the bias in the first), added at the end: three short chains of multiply-adds instead of one of nine.
#include <immintrin.h>

#include <algorithm>
#include <cstdint>

#include "nn_geometry.h"

namespace mrt {
namespace nn {
namespace {

// Lanes i in [0, 16) whose column c + i lies in [0, W).
inline __mmask16 columns_inside(int64_t c, int64_t W) {
  const int64_t lo = std::clamp<int64_t>(-c, 0, 16), hi = std::clamp<int64_t>(W - c, 0, 16);
  if (hi <= lo) return 0;
  const uint32_t upto_hi = hi >= 16 ? 0xFFFFu : (1u << hi) - 1u;
  return static_cast<__mmask16>(upto_hi & ~((1u << lo) - 1u));
}

}  // namespace

bool depthwise3x3_avx512_applies(const DepthwisePlane& g) {
  return g.KH == 3 && g.KW == 3 && g.dh == 1 && g.dw == 1 && g.sh == g.sw && (g.sw == 1 || g.sw == 2);
}

void depthwise3x3_plane_avx512(const float* x, const float* w, float bias, float* y, const DepthwisePlane& g) {
  __m512 wv[9];
  for (int i = 0; i < 9; ++i) wv[i] = _mm512_set1_ps(w[i]);
  const __m512 vb = _mm512_set1_ps(bias), zero = _mm512_setzero_ps();
  const __m512i even = _mm512_set_epi32(30, 28, 26, 24, 22, 20, 18, 16, 14, 12, 10, 8, 6, 4, 2, 0);
  const __m512i odd = _mm512_add_epi32(even, _mm512_set1_epi32(1));
  const int64_t s = g.sw;
  // Column blocks outer: the masks of a block's loads hold for all its rows.
  for (int64_t ow = 0; ow < g.OW; ow += 16) {
    const int64_t n = std::min<int64_t>(16, g.OW - ow);
    const __mmask16 keep = n >= 16 ? __mmask16(0xFFFF) : static_cast<__mmask16>((1u << n) - 1u);
    const int64_t c0 = ow * s - g.pw;  // the input column of tap 0 for output column ow
    // stride 1: the three taps' columns; stride 2: three vectors of 16 columns from c0
    const int64_t step = s == 1 ? 1 : 16;
    const __mmask16 m0 = columns_inside(c0, g.W), m1 = columns_inside(c0 + step, g.W),
                    m2 = columns_inside(c0 + 2 * step, g.W);
    for (int64_t oh = 0; oh < g.OH; ++oh) {
      const int64_t ih0 = oh * s - g.ph;
      __m512 part[3] = {vb, zero, zero};
#pragma GCC unroll 3
      for (int kh = 0; kh < 3; ++kh) {
        const int64_t ih = ih0 + kh;
        if (ih < 0 || ih >= g.H) continue;
        const float* row = x + ih * g.W + c0;  // masked-off lanes are never accessed
        const __m512 a = _mm512_maskz_loadu_ps(m0, row), b = _mm512_maskz_loadu_ps(m1, row + step);
        const __m512 c = _mm512_maskz_loadu_ps(m2, row + 2 * step);
        __m512 t0 = a, t1 = b, t2 = c;
        if (s == 2) {
          t0 = _mm512_permutex2var_ps(a, even, b);  // columns c0 + 2i
          t1 = _mm512_permutex2var_ps(a, odd, b);   // c0 + 1 + 2i
          const __m512i ai = _mm512_castps_si512(a), bi = _mm512_castps_si512(b), ci = _mm512_castps_si512(c);
          t2 = _mm512_permutex2var_ps(_mm512_castsi512_ps(_mm512_alignr_epi32(bi, ai, 2)), even,
                                      _mm512_castsi512_ps(_mm512_alignr_epi32(ci, bi, 2)));  // c0 + 2 + 2i
        }
        part[kh] = _mm512_fmadd_ps(wv[kh * 3], t0, part[kh]);
        part[kh] = _mm512_fmadd_ps(wv[kh * 3 + 1], t1, part[kh]);
        part[kh] = _mm512_fmadd_ps(wv[kh * 3 + 2], t2, part[kh]);
      }
      _mm512_mask_storeu_ps(y + oh * g.OW + ow, keep, _mm512_add_ps(_mm512_add_ps(part[0], part[1]), part[2]));
    }
  }
}

}  // namespace nn
}  // namespace mrt
