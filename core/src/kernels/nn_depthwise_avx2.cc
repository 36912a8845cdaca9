// Depthwise 2-D convolution of one (image, channel) plane with AVX2 + FMA.
// Compiled only for x86-64 targets (with -mavx2 -mfma); nn.cc calls it when the CPU has
// those features (the same decision the SGEMM dispatcher makes).
//
// 3- and 5-wide windows of column stride 1 or 2 without column dilation read the plane in place: the blocks of 8
// outputs whose taps all lie inside the row with plain loads, the few at the row's ends with masked ones. Other
// windows copy the plane into a zero-padded scratch image split by column phase, so every load is contiguous.
// Either way each output row is computed 8 columns at a time with all taps accumulated in registers (several
// blocks at once, to cover the FMA latency).
#include <immintrin.h>

#include <algorithm>
#include <cstdint>
#include <numeric>
#include <type_traits>
#include <vector>

#include "../aligned_vector.h"
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

// Loads of 8 values at offsets from a block's position p in a tap row. Inside the row: plain loads.
struct InRow {
  const float* p;
  __m256 operator()(int64_t off) const { return _mm256_loadu_ps(p + off); }
};
// Near the row's ends: the lanes outside the row's offsets [lo, hi) from p read as 0 and touch no memory. A load
// inside the row is a plain one; one that reaches past one end of a row of at least 8 values takes the 8 values at
// that end and moves them into its lanes (masked loads, the fallback for narrower rows, cost several times a plain
// load on some CPUs: AMD Zen 1).
struct AtRowEnds {
  const float* p;
  int64_t lo, hi;
  __m256 operator()(int64_t off) const {
    if (off >= lo && off + 8 <= hi) return _mm256_loadu_ps(p + off);
    const __m256i lanes = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
    if (hi - lo >= 8) {  // past one end only: lane l takes value j = off - at + l of the 8 at `at`, kept if j in [0, 8)
      const int64_t at = off < lo ? lo : hi - 8;
      const __m256i j = _mm256_add_epi32(_mm256_set1_epi32(static_cast<int>(off - at)), lanes);
      const __m256i keep = _mm256_andnot_si256(_mm256_cmpgt_epi32(_mm256_setzero_si256(), j),
                                               _mm256_cmpgt_epi32(_mm256_set1_epi32(8), j));
      return _mm256_and_ps(_mm256_permutevar8x32_ps(_mm256_loadu_ps(p + at), j), _mm256_castsi256_ps(keep));
    }
    const __m256i i = _mm256_add_epi32(_mm256_set1_epi32(static_cast<int>(off)), lanes);
    const __m256i inside = _mm256_andnot_si256(_mm256_cmpgt_epi32(_mm256_set1_epi32(static_cast<int>(lo)), i),
                                               _mm256_cmpgt_epi32(_mm256_set1_epi32(static_cast<int>(hi)), i));
    return _mm256_maskload_ps(p + off, inside);
  }
};

// Adds one tap row to kBlocks blocks of 8 outputs: `ld` loads at offsets from the row's padded column of the
// blocks' first output (ow0 * S), `wr` holds the row's KW weights. Stride 1 loads tap kw at kw. Stride 2 takes
// taps kw and kw + 1 from one 16-value load at kw -- its even values are tap kw's 8 inputs, its odd ones tap
// kw + 1's -- and an odd KW's last tap from the odd values of the load at KW - 2; the shuffles leave the outputs
// in the order 0 1 4 5 2 3 6 7 (finish_block restores it). Taps alternate between a block's two accumulators.
template <int S, int kBlocks, int KW, class Load>
inline void tap_row(const Load& ld, const float* wr, __m256 (&acc)[kBlocks][2]) {
  static_assert(KW >= 2, "the last tap of stride 2 loads at KW - 2");
#pragma GCC unroll 4
  for (int kw = 0; kw + 1 < KW; kw += 2) {
    const __m256 w0 = _mm256_broadcast_ss(wr + kw), w1 = _mm256_broadcast_ss(wr + kw + 1);
    for (int b = 0; b < kBlocks; ++b) {
      if constexpr (S == 1) {
        acc[b][0] = _mm256_fmadd_ps(w0, ld(b * 8 + kw), acc[b][0]);
        acc[b][1] = _mm256_fmadd_ps(w1, ld(b * 8 + kw + 1), acc[b][1]);
      } else {
        const __m256 lo = ld(b * 16 + kw), hi = ld(b * 16 + kw + 8);
        acc[b][0] = _mm256_fmadd_ps(w0, _mm256_shuffle_ps(lo, hi, _MM_SHUFFLE(2, 0, 2, 0)), acc[b][0]);
        acc[b][1] = _mm256_fmadd_ps(w1, _mm256_shuffle_ps(lo, hi, _MM_SHUFFLE(3, 1, 3, 1)), acc[b][1]);
      }
    }
  }
  if constexpr (KW % 2 == 1) {
    const __m256 wv = _mm256_broadcast_ss(wr + KW - 1);
    for (int b = 0; b < kBlocks; ++b) {
      if constexpr (S == 1) {
        acc[b][0] = _mm256_fmadd_ps(wv, ld(b * 8 + KW - 1), acc[b][0]);
      } else {
        const __m256 lo = ld(b * 16 + KW - 2), hi = ld(b * 16 + KW + 6);
        acc[b][0] = _mm256_fmadd_ps(wv, _mm256_shuffle_ps(lo, hi, _MM_SHUFFLE(3, 1, 3, 1)), acc[b][0]);
      }
    }
  }
}

// One block's finished outputs in column order.
template <int S>
inline __m256 finish_block(const __m256 (&acc)[2], const RegisterAct& act) {
  __m256 v = _mm256_add_ps(acc[0], acc[1]);
  if constexpr (S == 2) v = _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(v), _MM_SHUFFLE(3, 1, 2, 0)));
  return activate(v, act);
}

// The last offset from a block's position that tap_row reads (its first is 0).
constexpr int64_t block_reach(int S, int KW) { return S == 1 ? 7 + KW - 1 : KW + 13; }

// depthwise_plane_avx2 for column stride S (1 or 2), a window KW wide and no column dilation, reading the plane in
// place; the blocks whose taps reach past a row's ends with masked loads.
template <int S, int KW>
void depthwise_plane_in_place(const float* x, const float* w, float bias, float* y, const DepthwisePlane& g,
                              const RegisterAct& act) {
  constexpr int64_t reach = block_reach(S, KW);
  const int64_t nblocks = (g.OW + 7) / 8;
  // Blocks [b_lo, b_hi) are interior: whole, and every column they read lies in the row.
  const int64_t full = g.OW / 8, b_lo = std::min(full, ceil_div(g.pw, 8 * S));
  int64_t b_hi = full;
  while (b_hi > b_lo && (b_hi - 1) * 8 * S - g.pw + reach > g.W - 1) --b_hi;
  const __m256 vb = _mm256_set1_ps(bias), zero = _mm256_setzero_ps();
  alignas(32) float tail[8];
  // One output row's tap rows inside the plane, at their padded column 0 (only the row's columns are read),
  // and their weights.
  const float *rows[16], *wrows[16];
  for (int64_t oh = 0; oh < g.OH; ++oh) {
    float* yr = y + oh * g.OW;
    int64_t nrows = 0;
    for (int64_t kh = 0; kh < g.KH; ++kh) {
      const int64_t ih = oh * g.sh - g.ph + kh * g.dh;
      if (ih < 0 || ih >= g.H) continue;
      rows[nrows] = x + ih * g.W - g.pw;
      wrows[nrows++] = w + kh * g.KW;
    }
    auto interior = [&](auto blocks_c, int64_t b) {
      constexpr int kBlocks = decltype(blocks_c)::value;
      __m256 acc[kBlocks][2];
      for (int i = 0; i < kBlocks; ++i) acc[i][0] = vb, acc[i][1] = zero;
      for (int64_t r = 0; r < nrows; ++r)
        tap_row<S, kBlocks, KW>(InRow{rows[r] + b * 8 * S}, wrows[r], acc);
      for (int i = 0; i < kBlocks; ++i) _mm256_storeu_ps(yr + (b + i) * 8, finish_block<S>(acc[i], act));
    };
    auto edge = [&](int64_t b) {
      const int64_t c = b * 8 * S;  // the block's padded column
      const int64_t lo = g.pw - c, hi = g.pw + g.W - c;
      __m256 acc[1][2] = {{vb, zero}};
      for (int64_t r = 0; r < nrows; ++r) tap_row<S, 1, KW>(AtRowEnds{rows[r] + c, lo, hi}, wrows[r], acc);
      const __m256 v = finish_block<S>(acc[0], act);
      if (b < full) {
        _mm256_storeu_ps(yr + b * 8, v);
      } else {  // the last, part block
        _mm256_store_ps(tail, v);
        std::copy(tail, tail + (g.OW - b * 8), yr + b * 8);
      }
    };
    for (int64_t b = 0; b < b_lo; ++b) edge(b);
    int64_t b = b_lo;
    for (; b + 4 <= b_hi; b += 4) interior(std::integral_constant<int, 4>{}, b);
    for (; b + 2 <= b_hi; b += 2) interior(std::integral_constant<int, 2>{}, b);
    for (; b < b_hi; ++b) interior(std::integral_constant<int, 1>{}, b);
    for (; b < nblocks; ++b) edge(b);
  }
}

// Floats of interleaved input one band of depthwise_block8_avx2 keeps (16 KiB: half of L1).
constexpr int64_t kBandFloats = 4096;

}  // namespace

void depthwise_block8_avx2(const float* x, const float* w, const float* bias, float* y, const DepthwisePlane& g,
                           const RegisterAct& act) {
  // The 8 planes interleaved and zero-padded: xi[(r * cols + j) * 8 + c] = plane c at padded (row r, column j),
  // the columns the taps of all outputs reach. Rows of at least 8 such columns are interleaved a band of output
  // rows at a time, straight from the planes, so that the taps read the band in L1. Narrower rows: the whole
  // plane, through a flat interleaved copy (8 x 8 transposes over the plane's values, whatever the row width).
  const int64_t in_plane = g.H * g.W, out_plane = g.OH * g.OW, taps = g.KH * g.KW;
  const int64_t cols = (g.OW - 1) * g.sw + (g.KW - 1) * g.dw + 1, reach = (g.KH - 1) * g.dh + 1;
  const int64_t used = std::clamp<int64_t>(cols - g.pw, 0, g.W);  // columns of an input row the taps reach
  const bool banded = used >= 8;
  // Output rows per band: as many as kBandFloats holds, a multiple of 8 / gcd(OW, 8) where it can be, so that
  // the groups of 8 positions below are whole.
  int64_t band = g.OH;
  if (banded) {
    band = std::max<int64_t>(1, (kBandFloats / (cols * 8) - reach) / g.sh + 1);
    const int64_t unit = 8 / std::gcd<int64_t>(g.OW, 8);
    if (band >= unit) band -= band % unit;
    band = std::min(band, g.OH);
  }
  const int64_t band_rows = (band - 1) * g.sh + reach;
  // cache-line aligned: every load of the interleaved input is then a whole 32-byte half line
  thread_local AlignedVector<float> scratch;
  const size_t need = static_cast<size_t>(band_rows * cols * 8 + taps * 8 + 64 + (banded ? 0 : in_plane * 8));
  if (scratch.size() < need) scratch.resize(need);
  float* xi = scratch.data();
  float* wi = xi + band_rows * cols * 8;  // wi[t * 8 + c]: the 8 channels' weights of tap t
  for (int64_t t = 0; t < taps; ++t)
    for (int c = 0; c < 8; ++c) wi[t * 8 + c] = w[c * taps + t];
  float* tail = wi + taps * 8;  // a part group's outputs: tail[c * 8 + k] = channel c at position k
  if (!banded) {
    float* flat = tail + 64;  // flat[i * 8 + c] = plane c's value i
    int64_t i = 0;
    for (; i + 8 <= in_plane; i += 8) {
      __m256 v[8];
      load_transposed8x8(x + i, in_plane, v);
      for (int k = 0; k < 8; ++k) _mm256_storeu_ps(flat + (i + k) * 8, v[k]);
    }
    for (; i < in_plane; ++i)
      for (int c = 0; c < 8; ++c) flat[i * 8 + c] = x[c * in_plane + i];
    pad_interleaved_planes(flat, 8, g, band_rows, cols, xi);
  }
  const __m256 vb = bias ? _mm256_loadu_ps(bias) : _mm256_setzero_ps();
  const int64_t row_step = g.dh * cols * 8, col_step = g.dw * 8;
  for (int64_t oh0 = 0; oh0 < g.OH; oh0 += band) {
    const int64_t oh1 = std::min(g.OH, oh0 + band), r0 = oh0 * g.sh - g.ph;  // r0: input row of band row 0
    if (banded) {
      // Each input row's 8-column blocks transposed into place, the last one ending at the row's last used
      // column (it may overlap the one before).
      for (int64_t r = 0; r < (oh1 - 1 - oh0) * g.sh + reach; ++r) {
        float* xr = xi + r * cols * 8;
        const int64_t ih = r0 + r;
        if (ih < 0 || ih >= g.H) {
          std::fill(xr, xr + cols * 8, 0.f);
          continue;
        }
        std::fill(xr, xr + g.pw * 8, 0.f);  // pw < cols: used >= 8
        std::fill(xr + (g.pw + used) * 8, xr + cols * 8, 0.f);
        const float* src = x + ih * g.W;
        for (int64_t j = 0; j < used; j += 8) {
          const int64_t jb = std::min(j, used - 8);
          __m256 v[8];
          load_transposed8x8(src + jb, in_plane, v);
          for (int k = 0; k < 8; ++k) _mm256_storeu_ps(xr + (g.pw + jb + k) * 8, v[k]);
        }
      }
    }
    // The band's output positions in flat order, 8 at a time: 8 accumulators (one position, 8 channels each),
    // then one transpose gives each channel's 8 consecutive outputs.
    int64_t oh = oh0, ow = 0;
    for (int64_t p0 = oh0 * g.OW; p0 < oh1 * g.OW; p0 += 8) {
      const int64_t n = std::min<int64_t>(8, oh1 * g.OW - p0);
      const float* base[8];  // each position's window origin in xi
      for (int64_t k = 0; k < 8; ++k) {
        if (k >= n) {  // past the band's last output: any valid address, the results are dropped
          base[k] = base[0];
          continue;
        }
        base[k] = xi + (((oh - oh0) * g.sh) * cols + ow * g.sw) * 8;
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
      for (int k = 0; k < 8; ++k) acc[k] = activate(acc[k], act);
      if (n == 8) {
        store_transposed8x8(acc, y + p0, out_plane);  // channel c's 8 outputs at y + c * out_plane + p0
      } else {
        store_transposed8x8(acc, tail, 8);
        for (int c = 0; c < 8; ++c) std::copy(tail + c * 8, tail + c * 8 + n, y + c * out_plane + p0);
      }
    }
  }
}

void depthwise_plane_avx2(const float* x, const float* w, float bias, float* y, const DepthwisePlane& g,
                          const RegisterAct& act) {
  // 3- and 5-wide windows of column stride 1 or 2 without column dilation (nearly every depthwise convolution)
  if (g.KH <= 16 && g.dw == 1 && (g.sw == 1 || g.sw == 2) && (g.KW == 3 || g.KW == 5) &&
      g.W + g.pw + 8 * g.sw < (int64_t{1} << 30)) {  // AtRowEnds' offsets as int32
    if (g.sw == 1) (g.KW == 3 ? depthwise_plane_in_place<1, 3> : depthwise_plane_in_place<1, 5>)(x, w, bias, y, g, act);
    else (g.KW == 3 ? depthwise_plane_in_place<2, 3> : depthwise_plane_in_place<2, 5>)(x, w, bias, y, g, act);
    return;
  }
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
