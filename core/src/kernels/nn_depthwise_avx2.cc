// Depthwise 2-D convolution of one (image, channel) plane with AVX2 + FMA.
// Compiled only for x86-64 targets (with -mavx2 -mfma); nn.cc calls it when the CPU has
// those features (the same decision the SGEMM dispatcher makes).
//
// The plane is first copied into a zero-padded scratch image (split by column phase for
// strides > 1, so every load is contiguous), then every output row is computed 8 columns
// at a time with all taps accumulated in registers (up to four independent accumulators
// to cover the FMA latency).
#include <immintrin.h>

#include <algorithm>
#include <cstdint>
#include <vector>

#include "../gemm/transpose8_avx.h"
#include "nn_geometry.h"

namespace mrt {
namespace nn {

namespace {

// `act` on a finished vector, as the output stage computes it (Relu: a NaN goes to 0; Clip: max(lo, v), then
// min(hi, .), which is std::min(std::max(v, lo), hi) on every input).
inline __m256 activate(__m256 v, const RegisterAct& act) {
  if (act.kind == RegisterAct::kRelu) return _mm256_max_ps(v, _mm256_setzero_ps());
  if (act.kind == RegisterAct::kClip)
    return _mm256_min_ps(_mm256_set1_ps(act.hi), _mm256_max_ps(_mm256_set1_ps(act.lo), v));
  return v;
}

// Output blocks [0, kBlocks) of 8 columns for one output row. `xr` points at the scratch
// row of tap row 0 for output column 0; tap (kh, kw) reads xr + kh * row_step + off[kw].
template <int kBlocks>
inline void row_blocks(const float* xr, int64_t row_step, const int64_t* off, const float* w, int64_t KH,
                       int64_t KW, __m256 vb, const RegisterAct& act, float* out) {
  __m256 acc[kBlocks];
  for (int b = 0; b < kBlocks; ++b) acc[b] = vb;
  for (int64_t kh = 0; kh < KH; ++kh) {
    const float* xk = xr + kh * row_step;
    for (int64_t kw = 0; kw < KW; ++kw) {
      const __m256 wv = _mm256_set1_ps(w[kh * KW + kw]);
      const float* p = xk + off[kw];
      for (int b = 0; b < kBlocks; ++b) acc[b] = _mm256_fmadd_ps(wv, _mm256_loadu_ps(p + b * 8), acc[b]);
    }
  }
  for (int b = 0; b < kBlocks; ++b) _mm256_storeu_ps(out + b * 8, activate(acc[b], act));
}

// The same for 3x3 windows, with the taps unrolled and their weights held in registers.
template <int kBlocks>
inline void row_blocks3(const float* xr, int64_t row_step, const int64_t* off, const __m256 (&wv)[9], __m256 vb,
                        const RegisterAct& act, float* out) {
  __m256 acc[kBlocks];
  for (int b = 0; b < kBlocks; ++b) acc[b] = vb;
#pragma GCC unroll 3
  for (int kh = 0; kh < 3; ++kh) {
    const float* xk = xr + kh * row_step;
#pragma GCC unroll 3
    for (int kw = 0; kw < 3; ++kw) {
      const float* p = xk + off[kw];
      for (int b = 0; b < kBlocks; ++b) acc[b] = _mm256_fmadd_ps(wv[kh * 3 + kw], _mm256_loadu_ps(p + b * 8), acc[b]);
    }
  }
  for (int b = 0; b < kBlocks; ++b) _mm256_storeu_ps(out + b * 8, activate(acc[b], act));
}

}  // namespace

void depthwise_block8_avx2(const float* x, const float* w, const float* bias, float* y, const DepthwisePlane& g,
                           const RegisterAct& act) {
  // Interleaved, zero-padded copy of the 8 planes: xi[(r * cols + j) * 8 + c] = plane c at padded (r, j),
  // the rows and columns the taps of all outputs reach.
  const int64_t in_plane = g.H * g.W, out_plane = g.OH * g.OW, taps = g.KH * g.KW;
  const int64_t rows = (g.OH - 1) * g.sh + (g.KH - 1) * g.dh + 1, cols = (g.OW - 1) * g.sw + (g.KW - 1) * g.dw + 1;
  thread_local std::vector<float> scratch;
  const size_t need = static_cast<size_t>(rows * cols * 8 + taps * 8 + 8 + in_plane * 8);
  if (scratch.size() < need) scratch.resize(need);
  float* xi = scratch.data();
  float* wi = xi + rows * cols * 8;  // wi[t * 8 + c]: the 8 channels' weights of tap t
  for (int64_t t = 0; t < taps; ++t)
    for (int c = 0; c < 8; ++c) wi[t * 8 + c] = w[c * taps + t];
  // The 8 planes interleaved first as flat arrays (8 x 8 transposes over their H * W values, whatever the
  // row width), then their rows copied into the padded layout.
  float* flat = wi + taps * 8 + 8;  // flat[i * 8 + c] = plane c's value i
  int64_t i = 0;
  for (; i + 8 <= in_plane; i += 8) {
    __m256 v[8];
    for (int c = 0; c < 8; ++c) v[c] = _mm256_loadu_ps(x + c * in_plane + i);
    transpose8x8(v);
    for (int k = 0; k < 8; ++k) _mm256_storeu_ps(flat + (i + k) * 8, v[k]);
  }
  for (; i < in_plane; ++i)
    for (int c = 0; c < 8; ++c) flat[i * 8 + c] = x[c * in_plane + i];
  pad_interleaved_planes(flat, 8, g, rows, cols, xi);
  const __m256 vb = bias ? _mm256_loadu_ps(bias) : _mm256_setzero_ps();
  // Output positions in flat order, 8 at a time: 8 accumulators (one position, 8 channels each), then one
  // transpose gives each channel's 8 consecutive outputs.
  const int64_t row_step = g.dh * cols * 8, col_step = g.dw * 8;
  int64_t oh = 0, ow = 0;
  float* tail = wi + taps * 8;  // room for the last group's positions
  for (int64_t p0 = 0; p0 < out_plane; p0 += 8) {
    const int64_t n = std::min<int64_t>(8, out_plane - p0);
    const float* base[8];  // each position's window origin in xi
    for (int64_t k = 0; k < 8; ++k) {
      if (k >= n) {  // past the last output: any valid address, the results are dropped
        base[k] = base[0];
        continue;
      }
      base[k] = xi + ((oh * g.sh) * cols + ow * g.sw) * 8;
      if (++ow == g.OW) ow = 0, ++oh;
    }
    __m256 acc[8];
    for (int k = 0; k < 8; ++k) acc[k] = vb;
    for (int64_t kh = 0; kh < g.KH; ++kh)
      for (int64_t kw = 0; kw < g.KW; ++kw) {
        const __m256 wv = _mm256_loadu_ps(wi + (kh * g.KW + kw) * 8);
        const int64_t off = kh * row_step + kw * col_step;
        for (int k = 0; k < 8; ++k) acc[k] = _mm256_fmadd_ps(wv, _mm256_loadu_ps(base[k] + off), acc[k]);
      }
    transpose8x8(acc);  // acc[c] = channel c at the 8 positions
    for (int c = 0; c < 8; ++c) acc[c] = activate(acc[c], act);
    if (n == 8) {
      for (int c = 0; c < 8; ++c) _mm256_storeu_ps(y + c * out_plane + p0, acc[c]);
    } else {
      for (int c = 0; c < 8; ++c) {
        _mm256_storeu_ps(tail, acc[c]);
        std::copy(tail, tail + n, y + c * out_plane + p0);
      }
    }
  }
}

void depthwise_plane_avx2(const float* x, const float* w, float bias, float* y, const DepthwisePlane& g,
                          const RegisterAct& act) {
  // The plane is copied into a zero-padded scratch image split by column phase: phase p
  // holds padded columns j * sw + p, so output column ow, tap kw reads phase
  // (kw*dw) % sw at column ow + (kw*dw) / sw -- contiguous for any stride. The scratch
  // covers every tap of every output (rounded up to whole 8-column blocks), so the loops
  // need no bounds checks.
  const int64_t s = g.sw;
  const int64_t blocks = (g.OW + 7) / 8, full = g.OW / 8;
  const int64_t rows = (g.OH - 1) * g.sh + (g.KH - 1) * g.dh + 1;
  const int64_t pcols = blocks * 8 + ((g.KW - 1) * g.dw) / s + 1;
  const int64_t phase_size = rows * pcols;
  thread_local std::vector<float> scratch;
  scratch.resize(static_cast<size_t>(s * phase_size));
  float* xpad = scratch.data();
  for (int64_t ph = 0; ph < s; ++ph) {
    // Columns j of this phase with 0 <= j*s + ph - pw < W.
    int64_t lo, hi;
    valid_range(pcols, s, ph - g.pw, g.W, lo, hi);
    for (int64_t r = 0; r < rows; ++r) {
      float* dst = xpad + ph * phase_size + r * pcols;
      const int64_t ih = r - g.ph;
      if (ih < 0 || ih >= g.H) {
        std::fill(dst, dst + pcols, 0.f);
        continue;
      }
      const float* src = x + ih * g.W + ph - g.pw;
      std::fill(dst, dst + lo, 0.f);
      if (s == 1) {
        std::copy(src + lo, src + hi, dst + lo);
      } else if (s == 2) {
        int64_t j = lo;
        // 8 outputs from 16 inputs while the 16-wide read stays inside the row.
        for (; j + 8 <= hi && (j + 8) * 2 + ph - g.pw <= g.W; j += 8) {
          const __m256 a = _mm256_loadu_ps(src + j * 2), b = _mm256_loadu_ps(src + j * 2 + 8);
          const __m256 e = _mm256_shuffle_ps(a, b, _MM_SHUFFLE(2, 0, 2, 0));  // a0 a2 b0 b2 | a4 a6 b4 b6
          _mm256_storeu_ps(dst + j, _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(e), _MM_SHUFFLE(3, 1, 2, 0))));
        }
        for (; j < hi; ++j) dst[j] = src[j * 2];
      } else {
        for (int64_t j = lo; j < hi; ++j) dst[j] = src[j * s];
      }
      std::fill(dst + hi, dst + pcols, 0.f);
    }
  }
  int64_t off_small[16];
  std::vector<int64_t> off_big(g.KW > 16 ? static_cast<size_t>(g.KW) : 0);
  int64_t* off = g.KW > 16 ? off_big.data() : off_small;
  for (int64_t kw = 0; kw < g.KW; ++kw) off[kw] = ((kw * g.dw) % s) * phase_size + (kw * g.dw) / s;
  const int64_t row_step = g.dh * pcols;
  const __m256 vb = _mm256_set1_ps(bias);
  alignas(32) float tail[8];
  if (g.KH == 3 && g.KW == 3) {
    __m256 wv[9];
    for (int i = 0; i < 9; ++i) wv[i] = _mm256_set1_ps(w[i]);
    for (int64_t oh = 0; oh < g.OH; ++oh) {
      const float* xr = xpad + oh * g.sh * pcols;
      float* yr = y + oh * g.OW;
      int64_t b = 0;
      for (; b + 4 <= full; b += 4) row_blocks3<4>(xr + b * 8, row_step, off, wv, vb, act, yr + b * 8);
      for (; b + 2 <= full; b += 2) row_blocks3<2>(xr + b * 8, row_step, off, wv, vb, act, yr + b * 8);
      for (; b < full; ++b) row_blocks3<1>(xr + b * 8, row_step, off, wv, vb, act, yr + b * 8);
      if (b < blocks) {
        row_blocks3<1>(xr + b * 8, row_step, off, wv, vb, act, tail);
        for (int64_t i = 0; i < g.OW - b * 8; ++i) yr[b * 8 + i] = tail[i];
      }
    }
    return;
  }
  for (int64_t oh = 0; oh < g.OH; ++oh) {
    const float* xr = xpad + oh * g.sh * pcols;
    float* yr = y + oh * g.OW;
    int64_t b = 0;
    for (; b + 4 <= full; b += 4) row_blocks<4>(xr + b * 8, row_step, off, w, g.KH, g.KW, vb, act, yr + b * 8);
    for (; b + 2 <= full; b += 2) row_blocks<2>(xr + b * 8, row_step, off, w, g.KH, g.KW, vb, act, yr + b * 8);
    for (; b < full; ++b) row_blocks<1>(xr + b * 8, row_step, off, w, g.KH, g.KW, vb, act, yr + b * 8);
    if (b < blocks) {
      row_blocks<1>(xr + b * 8, row_step, off, w, g.KH, g.KW, vb, act, tail);
      for (int64_t i = 0; i < g.OW - b * 8; ++i) yr[b * 8 + i] = tail[i];
    }
  }
}

}  // namespace nn
}  // namespace mrt
