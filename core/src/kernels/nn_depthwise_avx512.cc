// Depthwise 3x3 convolution of one (image, channel) plane on AVX-512, stride 1 or 2, no dilation: MobileNet's
// and EfficientNet's layer.
//
// The taps read the input plane in place, 16 output columns a vector: with stride 1 the three taps of a row
// are loads at three consecutive column offsets; with stride 2 two vectors of 16 input columns are split
// into their even and odd columns (permutes), and the third tap is the even columns one further on. Columns
// outside the plane (the padding) are masked off in the loads, which read them as 0 and never touch them, so
// the plane is not copied into a padded image first. An input row's taps are loaded (and split) once and
// kept in registers for every output row whose window holds it. The three rows of the window go to three
// partial sums (the bias in the first), added at the end: three short chains of multiply-adds, not one of nine.
//
// Narrow maps (7x7: a row fills 7 of a vector's 16 lanes) take the blocked form instead: 16 planes
// interleaved so that the 16 channels of a position share a vector, any window, stride and dilation.
#include <immintrin.h>

#include <algorithm>
#include <cstdint>
#include <vector>

#include "nn_geometry.h"
#include "transpose16_avx512.h"

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

namespace {

// The three tap vectors of input row `ih` for the 16 output columns from ow (tap kw of output column ow + i in
// lane i of t[kw]); zeros for a row outside the plane (top and bottom padding).
template <int S>
struct RowTaps {
  __mmask16 m0, m1, m2;
  int64_t c0;
  __m512i even, odd;

  void load(const float* x, const DepthwisePlane& g, int64_t ih, __m512* t) const {
    if (ih < 0 || ih >= g.H) {
      t[0] = t[1] = t[2] = _mm512_setzero_ps();
      return;
    }
    const float* row = x + ih * g.W + c0;  // masked-off lanes are never accessed
    constexpr int64_t step = S == 1 ? 1 : 16;
    const __m512 a = _mm512_maskz_loadu_ps(m0, row), b = _mm512_maskz_loadu_ps(m1, row + step);
    const __m512 c = _mm512_maskz_loadu_ps(m2, row + 2 * step);
    if constexpr (S == 1) {
      t[0] = a, t[1] = b, t[2] = c;
    } else {
      t[0] = _mm512_permutex2var_ps(a, even, b);  // columns c0 + 2i
      t[1] = _mm512_permutex2var_ps(a, odd, b);   // c0 + 1 + 2i
      const __m512i ai = _mm512_castps_si512(a), bi = _mm512_castps_si512(b), ci = _mm512_castps_si512(c);
      t[2] = _mm512_permutex2var_ps(_mm512_castsi512_ps(_mm512_alignr_epi32(bi, ai, 2)), even,
                                    _mm512_castsi512_ps(_mm512_alignr_epi32(ci, bi, 2)));  // c0 + 2 + 2i
    }
  }
};

template <int S>
void depthwise3x3_plane(const float* x, const float* w, float bias, float* y, const DepthwisePlane& g,
                        const RegisterAct& act) {
  const __m512 vlo = _mm512_set1_ps(act.lo), vhi = _mm512_set1_ps(act.hi);
  __m512 wv[9];
  for (int i = 0; i < 9; ++i) wv[i] = _mm512_set1_ps(w[i]);
  const __m512 vb = _mm512_set1_ps(bias), zero = _mm512_setzero_ps();
  RowTaps<S> taps;
  taps.even = _mm512_set_epi32(30, 28, 26, 24, 22, 20, 18, 16, 14, 12, 10, 8, 6, 4, 2, 0);
  taps.odd = _mm512_add_epi32(taps.even, _mm512_set1_epi32(1));
  // Column blocks outer: the masks of a block's loads hold for all its rows. Down a block, the taps of an
  // input row are loaded once and carried to the next output rows whose window holds it (the bottom row of
  // a window is the next window's middle row at stride 1, its top row at stride 2).
  for (int64_t ow = 0; ow < g.OW; ow += 16) {
    const int64_t n = std::min<int64_t>(16, g.OW - ow);
    const __mmask16 keep = n >= 16 ? __mmask16(0xFFFF) : static_cast<__mmask16>((1u << n) - 1u);
    taps.c0 = ow * S - g.pw;  // the input column of tap 0 for output column ow
    constexpr int64_t step = S == 1 ? 1 : 16;
    taps.m0 = columns_inside(taps.c0, g.W), taps.m1 = columns_inside(taps.c0 + step, g.W);
    taps.m2 = columns_inside(taps.c0 + 2 * step, g.W);
    __m512 r0[3], r1[3], r2[3];  // the taps of the window's top, middle and bottom rows
    int64_t ih0 = -g.ph;
    taps.load(x, g, ih0, r0);
    if constexpr (S == 1) taps.load(x, g, ih0 + 1, r1);
    for (int64_t oh = 0; oh < g.OH; ++oh, ih0 += S) {
      if constexpr (S == 2) taps.load(x, g, ih0 + 1, r1);
      taps.load(x, g, ih0 + 2, r2);
      __m512 p0 = _mm512_fmadd_ps(wv[0], r0[0], vb), p1 = _mm512_mul_ps(wv[3], r1[0]);
      __m512 p2 = _mm512_mul_ps(wv[6], r2[0]);
      p0 = _mm512_fmadd_ps(wv[1], r0[1], p0), p1 = _mm512_fmadd_ps(wv[4], r1[1], p1);
      p2 = _mm512_fmadd_ps(wv[7], r2[1], p2);
      p0 = _mm512_fmadd_ps(wv[2], r0[2], p0), p1 = _mm512_fmadd_ps(wv[5], r1[2], p1);
      p2 = _mm512_fmadd_ps(wv[8], r2[2], p2);
      __m512 v = _mm512_add_ps(_mm512_add_ps(p0, p1), p2);
      if (act.kind == RegisterAct::kRelu) v = _mm512_max_ps(v, zero);
      else if (act.kind == RegisterAct::kClip) v = _mm512_min_ps(vhi, _mm512_max_ps(vlo, v));
      _mm512_mask_storeu_ps(y + oh * g.OW + ow, keep, v);
      for (int k = 0; k < 3; ++k) {
        if constexpr (S == 1) r0[k] = r1[k], r1[k] = r2[k];
        else r0[k] = r2[k];
      }
    }
  }
}

}  // namespace

void depthwise3x3_plane_avx512(const float* x, const float* w, float bias, float* y, const DepthwisePlane& g,
                               const RegisterAct& act) {
  if (g.sw == 1) depthwise3x3_plane<1>(x, w, bias, y, g, act);
  else depthwise3x3_plane<2>(x, w, bias, y, g, act);
}

void depthwise_block16_avx512(const float* x, const float* w, const float* bias, float* y, const DepthwisePlane& g,
                              const RegisterAct& act) {
  // xi[(r * cols + j) * 16 + c]: plane c at padded (r, j), over the rows and columns the taps of all outputs
  // reach; wi[t * 16 + c]: channel c's weight of tap t.
  const int64_t in_plane = g.H * g.W, out_plane = g.OH * g.OW, taps = g.KH * g.KW;
  const int64_t rows = (g.OH - 1) * g.sh + (g.KH - 1) * g.dh + 1, cols = (g.OW - 1) * g.sw + (g.KW - 1) * g.dw + 1;
  thread_local std::vector<float> scratch;
  thread_local std::vector<int64_t> origin;  // each output position's window origin in xi, in floats
  const int64_t flat_floats = (in_plane + 15) / 16 * 16 * 16;
  const size_t need = static_cast<size_t>(rows * cols * 16 + taps * 16 + flat_floats + 16);
  if (scratch.size() < need) scratch.resize(need);
  if (origin.size() < static_cast<size_t>(out_plane)) origin.resize(static_cast<size_t>(out_plane));
  float* xi = scratch.data();
  float* wi = xi + rows * cols * 16;
  float* flat = wi + taps * 16;  // flat[i * 16 + c] = plane c's value i
  for (int64_t t = 0; t < taps; ++t)
    for (int c = 0; c < 16; ++c) wi[t * 16 + c] = w[c * taps + t];
  // The planes interleaved as flat arrays, 16 values of the 16 planes a transpose (the last one masked).
  for (int64_t i = 0; i < in_plane; i += 16) {
    const __mmask16 m = static_cast<__mmask16>(in_plane - i >= 16 ? 0xFFFF : (1u << (in_plane - i)) - 1u);
    __m512 v[16];
    for (int c = 0; c < 16; ++c) v[c] = _mm512_maskz_loadu_ps(m, x + c * in_plane + i);
    transpose16(v);
    for (int k = 0; k < 16; ++k) _mm512_storeu_ps(flat + (i + k) * 16, v[k]);
  }
  pad_interleaved_planes(flat, 16, g, rows, cols, xi);
  for (int64_t oh = 0, p = 0; oh < g.OH; ++oh)
    for (int64_t ow = 0; ow < g.OW; ++ow, ++p) origin[p] = (oh * g.sh * cols + ow * g.sw) * 16;
  const __m512 vb = bias ? _mm512_loadu_ps(bias) : _mm512_setzero_ps(), zero = _mm512_setzero_ps();
  const __m512 vlo = _mm512_set1_ps(act.lo), vhi = _mm512_set1_ps(act.hi);
  const int64_t row_step = g.dh * cols * 16, col_step = g.dw * 16;
  // 16 positions at a time (the last group's missing ones read position 0 and are dropped): one accumulator
  // per position holding its 16 channels, then a transpose gives each channel's 16 consecutive outputs.
  for (int64_t p0 = 0; p0 < out_plane; p0 += 16) {
    const int64_t n = std::min<int64_t>(16, out_plane - p0);
    const float* base[16];
    for (int64_t k = 0; k < 16; ++k) base[k] = xi + origin[k < n ? p0 + k : 0];
    __m512 acc[16];
    for (int k = 0; k < 16; ++k) acc[k] = vb;
    for (int64_t kh = 0; kh < g.KH; ++kh)
      for (int64_t kw = 0; kw < g.KW; ++kw) {
        const __m512 wv = _mm512_loadu_ps(wi + (kh * g.KW + kw) * 16);
        const int64_t off = kh * row_step + kw * col_step;
        for (int k = 0; k < 16; ++k) acc[k] = _mm512_fmadd_ps(wv, _mm512_loadu_ps(base[k] + off), acc[k]);
      }
    if (act.kind == RegisterAct::kRelu) {
      for (int k = 0; k < 16; ++k) acc[k] = _mm512_max_ps(acc[k], zero);
    } else if (act.kind == RegisterAct::kClip) {
      for (int k = 0; k < 16; ++k) acc[k] = _mm512_min_ps(vhi, _mm512_max_ps(vlo, acc[k]));
    }
    transpose16(acc);  // acc[c] = channel c at the 16 positions
    const __mmask16 keep = static_cast<__mmask16>(n >= 16 ? 0xFFFF : (1u << n) - 1u);
    for (int c = 0; c < 16; ++c) _mm512_mask_storeu_ps(y + c * out_plane + p0, keep, acc[c]);
  }
}

}  // namespace nn
}  // namespace mrt
