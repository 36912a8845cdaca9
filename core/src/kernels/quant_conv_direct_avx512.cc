// Direct 2-D 8-bit convolution on AVX512-VNNI (ConvInteger, QLinearConv): an implicit GEMM over a
// channels-last copy of the image, without im2col.
//
// The image is staged once as bytes in HWC order, padded with the x zero point's byte out to every row and
// column the window reads (Hp x Wp pixels of Cp bytes). Output position (oh, ow) then reads, for each kernel
// row kh, one contiguous run of bytes from the pixel (oh*sh + kh*dh, ow*sw) on: its KW pixels' channels
// (KW*C bytes) when the columns are not dilated, else one run of C bytes per tap. A run is read 4 bytes at a
// time, broadcast as the u8 operand of vpdpbusd against 16 output channels' weight bytes per zmm (the s8
// operand). So a tile is R positions x 16*NZ output channels with positions as GEMM rows: every lane is a
// real output whatever the plane's width (a 7x7 map wastes nothing), strides and dilations are base-pointer
// arithmetic, and a run's tail rounds up to 4 bytes against zero weights.
//
// A work item is one block of output channels over a chunk of positions: its tiles write int32 rows
// [position][channel] to a small buffer, which is then requantized lane-wise (the per-channel multipliers as
// vectors) and transposed 16 x 16 bytes at a time into the NCHW planes.
//
// Zero points: the weights' must be 0 (symmetric int8 weights, what quantizers emit by default), so
// sum (x - xz) w = sum x w - xz * sum w, the second term one constant per output channel. Padding holds
// xz, so it contributes nothing; an int8 input is moved to uint8 by flipping its top bit (x + 128, and
// xz + 128). The int32 sums wrap like the GEMM path's, so the result is exact whenever it fits int32.
#include <immintrin.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <utility>
#include <vector>

#include "../threadpool.h"
#include "direct_tiles.h"
#include "quant_common.h"

#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC target("avx512vnni")
#elif defined(__clang__)
#pragma clang attribute push(__attribute__((target("avx512vnni"))), apply_to = function)
#endif

#include "quant_vnni.h"  // after the target pragma: dpbusd is compiled for AVX512-VNNI

namespace mrt {
namespace quant {
namespace {

// acc[r] = the R positions' sums for 16*NZ channels over `runs` runs of run_quads quads each; rows[r]: the
// base of position r's first run in the staged image, run_off: each run's byte offset from a base, w: the
// block's weights (per run and quad: NZ x 64 bytes), corr: per channel, added on the way out.
template <int R, int NZ>
MRT_DIRECT_TILE void tile(const uint8_t* const* rows, const int64_t* run_off, int64_t runs, int64_t run_quads,
                          const int8_t* w, const int32_t* corr, int32_t* out, int64_t ldo) {
  static_assert(NZ >= 1 && NZ <= 4 && R >= 1 && R <= direct::max_rows(NZ), "tile shape");
  // one named array per vector column: GCC keeps these in registers (a 2-D array was spilled)
  __m512i a0[R], a1[R], a2[R], a3[R];
  for (int r = 0; r < R; ++r) {
    a0[r] = _mm512_setzero_si512();
    if constexpr (NZ > 1) a1[r] = _mm512_setzero_si512();
    if constexpr (NZ > 2) a2[r] = _mm512_setzero_si512();
    if constexpr (NZ > 3) a3[r] = _mm512_setzero_si512();
  }
  for (int64_t s = 0; s < runs; ++s) {
    const uint8_t* p[R];
    for (int r = 0; r < R; ++r) p[r] = rows[r] + run_off[s];
    for (int64_t q = 0; q < run_quads; ++q, w += NZ * 64) {
      const __m512i b0 = _mm512_loadu_si512(w);
      __m512i b1 = b0, b2 = b0, b3 = b0;
      if constexpr (NZ > 1) b1 = _mm512_loadu_si512(w + 64);
      if constexpr (NZ > 2) b2 = _mm512_loadu_si512(w + 128);
      if constexpr (NZ > 3) b3 = _mm512_loadu_si512(w + 192);
      for (int r = 0; r < R; ++r) {
        int32_t quad;
        std::memcpy(&quad, p[r] + 4 * q, sizeof(quad));
        const __m512i a = _mm512_set1_epi32(quad);
        a0[r] = dpbusd(a0[r], a, b0);
        if constexpr (NZ > 1) a1[r] = dpbusd(a1[r], a, b1);
        if constexpr (NZ > 2) a2[r] = dpbusd(a2[r], a, b2);
        if constexpr (NZ > 3) a3[r] = dpbusd(a3[r], a, b3);
      }
    }
  }
  for (int r = 0; r < R; ++r) {
    int32_t* o = out + r * ldo;
    _mm512_storeu_si512(o, _mm512_add_epi32(a0[r], _mm512_loadu_si512(corr)));
    if constexpr (NZ > 1) _mm512_storeu_si512(o + 16, _mm512_add_epi32(a1[r], _mm512_loadu_si512(corr + 16)));
    if constexpr (NZ > 2) _mm512_storeu_si512(o + 32, _mm512_add_epi32(a2[r], _mm512_loadu_si512(corr + 32)));
    if constexpr (NZ > 3) _mm512_storeu_si512(o + 48, _mm512_add_epi32(a3[r], _mm512_loadu_si512(corr + 48)));
  }
}

template <int R, int NZ>
struct Tile {
  static constexpr auto fn = &tile<R, NZ>;
};
constexpr auto kTiles = direct::tile_table<Tile>();  // kTiles[NZ - 1][R - 1]

// v[i] = row i of a 16 x 16 byte matrix, transposed in place (four rounds of interleaves)
inline void transpose16(__m128i (&v)[16]) {
  __m128i lo[8], hi[8];  // byte pairs of rows 2k, 2k+1: columns 0..7 and 8..15
  for (int k = 0; k < 8; ++k) {
    lo[k] = _mm_unpacklo_epi8(v[2 * k], v[2 * k + 1]);
    hi[k] = _mm_unpackhi_epi8(v[2 * k], v[2 * k + 1]);
  }
  __m128i q[4][4];  // q[m][g]: columns 4g..4g+3 of rows 4m..4m+3, a column's 4 bytes together
  for (int m = 0; m < 4; ++m) {
    q[m][0] = _mm_unpacklo_epi16(lo[2 * m], lo[2 * m + 1]);
    q[m][1] = _mm_unpackhi_epi16(lo[2 * m], lo[2 * m + 1]);
    q[m][2] = _mm_unpacklo_epi16(hi[2 * m], hi[2 * m + 1]);
    q[m][3] = _mm_unpackhi_epi16(hi[2 * m], hi[2 * m + 1]);
  }
  __m128i o[2][8];  // o[e][h]: columns 2h, 2h+1 of rows 8e..8e+7
  for (int e = 0; e < 2; ++e)
    for (int g = 0; g < 4; ++g) {
      o[e][2 * g] = _mm_unpacklo_epi32(q[2 * e][g], q[2 * e + 1][g]);
      o[e][2 * g + 1] = _mm_unpackhi_epi32(q[2 * e][g], q[2 * e + 1][g]);
    }
  for (int h = 0; h < 8; ++h) {
    v[2 * h] = _mm_unpacklo_epi64(o[0][h], o[1][h]);
    v[2 * h + 1] = _mm_unpackhi_epi64(o[0][h], o[1][h]);
  }
}

// How an image is staged and read; the weights are prepared for the same runs.
struct Runs {
  bool per_tap = false;  // dilated columns: one run per tap, else one per kernel row
  int64_t Cp = 0;        // bytes per staged pixel: C, or C rounded up to 4 with per-tap runs
  int64_t count = 0, quads = 0;  // runs per position, quads per run
};

Runs runs_for(int64_t C, int64_t KH, int64_t KW, bool per_tap) {
  Runs r;
  r.per_tap = per_tap;
  r.Cp = per_tap ? (C + 3) / 4 * 4 : C;
  r.count = per_tap ? KH * KW : KH;
  r.quads = ((per_tap ? C : KW * C) + 3) / 4;
  return r;
}

// Staged rows [i0, i1): pixel (i, j) holds channels 0..C-1 of input pixel (i - pt, j - pl), the zero point's
// byte outside the input (bytes C..Cp-1 of a pixel meet only zero weights).
void stage_rows(const DirectConv8& g, const Runs& rn, int64_t Wp, const uint8_t* x, uint8_t fill, uint8_t flip,
                int64_t i0, int64_t i1, uint8_t* img) {
  const int64_t Cp = rn.Cp, HW = g.H * g.W;
  const int64_t j_lo = std::clamp<int64_t>(g.pl, 0, Wp), j_hi = std::clamp<int64_t>(g.pl + g.W, j_lo, Wp);
  const __m128i vflip = _mm_set1_epi8(static_cast<char>(flip));
  for (int64_t i = i0; i < i1; ++i) {
    uint8_t* row = img + i * Wp * Cp;
    const int64_t ih = i - g.pt;
    if (ih < 0 || ih >= g.H) {
      std::memset(row, fill, static_cast<size_t>(Wp * Cp));
      continue;
    }
    std::memset(row, fill, static_cast<size_t>(j_lo * Cp));
    std::memset(row + j_hi * Cp, fill, static_cast<size_t>((Wp - j_hi) * Cp));
    for (int64_t c0 = 0; c0 < Cp; c0 += 16) {
      const __mmask16 keep = direct::first16(Cp - c0);
      for (int64_t j0 = j_lo; j0 < j_hi; j0 += 16) {
        const int64_t nj = std::min<int64_t>(16, j_hi - j0);
        const __mmask16 in = direct::first16(nj);
        const uint8_t* src = x + ih * g.W + (j0 - g.pl);
        __m128i v[16];
        for (int c = 0; c < 16; ++c)
          v[c] = c0 + c < g.C ? _mm_maskz_loadu_epi8(in, src + (c0 + c) * HW) : _mm_setzero_si128();
        transpose16(v);
        for (int64_t j = 0; j < nj; ++j)
          _mm_mask_storeu_epi8(row + (j0 + j) * Cp + c0, keep, _mm_xor_si128(v[j], vflip));
      }
    }
  }
}

// 16 lanes of int32 sums (+ bias) requantized to bytes: rint(v * multiplier) + zp, clamped to [lo, hi] (the
// arithmetic of requantize_bytes_avx512, so both paths round alike).
struct LaneRequant {
  __m512i bias;
  __m512d m_lo, m_hi;  // the lanes' multipliers
  bool small;          // every |multiplier| < 1/2: the rounded products fit int32 with room for the zero point
  __m512d zp, lo, hi;  // as doubles, for the general form
  __m512i izp, ilo, ihi;

  __m128i operator()(__m512i acc) const {
    const __m512i a = _mm512_add_epi32(acc, bias);
    const __m256i a_lo = _mm512_castsi512_si256(a), a_hi = _mm512_extracti64x4_epi64(a, 1);
    if (small) {  // |a * m| < 2^30: round in double, add the zero point and clamp in int32 (same values)
      constexpr int kNearest = _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC;
      const __m256i l = _mm512_cvt_roundpd_epi32(_mm512_mul_pd(_mm512_cvtepi32_pd(a_lo), m_lo), kNearest);
      const __m256i h = _mm512_cvt_roundpd_epi32(_mm512_mul_pd(_mm512_cvtepi32_pd(a_hi), m_hi), kNearest);
      const __m512i v = _mm512_add_epi32(_mm512_inserti64x4(_mm512_castsi256_si512(l), h, 1), izp);
      return _mm512_cvtepi32_epi8(_mm512_min_epi32(_mm512_max_epi32(v, ilo), ihi));
    }
    auto eight = [&](__m256i v, __m512d m) {
      __m512d d = _mm512_mul_pd(_mm512_cvtepi32_pd(v), m);
      d = _mm512_add_pd(_mm512_roundscale_pd(d, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC), zp);
      return _mm512_cvtpd_epi32(_mm512_min_pd(_mm512_max_pd(d, lo), hi));
    };
    const __m256i l = eight(a_lo, m_lo), h = eight(a_hi, m_hi);
    return _mm512_cvtepi32_epi8(_mm512_inserti64x4(_mm512_castsi256_si512(l), h, 1));
  }
};

}  // namespace

DirectWeights8 prepare_direct_weights8(const int8_t* w, int64_t M, int64_t C, int64_t KH, int64_t KW, bool per_tap) {
  DirectWeights8 out;
  out.M = M, out.C = C, out.KH = KH, out.KW = KW, out.per_tap = per_tap;
  out.nz = direct::block_vectors(M);
  const Runs rn = runs_for(C, KH, KW, per_tap);
  const int64_t lanes = 16 * out.nz, blocks = (M + lanes - 1) / lanes, steps = rn.count * rn.quads;
  out.data.assign(static_cast<size_t>(blocks * steps * lanes * 4), 0);
  out.wsum.assign(static_cast<size_t>(M), 0);
  for (int64_t m = 0; m < M; ++m) {
    int8_t* block = out.data.data() + (m / lanes) * steps * lanes * 4 + (m % lanes) * 4;
    for (int64_t s = 0; s < rn.count; ++s)
      for (int64_t j = 0; j < 4 * rn.quads; ++j) {  // byte j of run s
        const int64_t kh = per_tap ? s / KW : s, kw = per_tap ? s % KW : j / C, c = per_tap ? j : j % C;
        if (c >= C || kw >= KW) continue;
        const int8_t v = w[((m * C + c) * KH + kh) * KW + kw];
        block[(s * rn.quads + j / 4) * lanes * 4 + j % 4] = v;
        out.wsum[static_cast<size_t>(m)] += v;
      }
  }
  return out;
}

void conv8_direct_vnni(const DirectConv8& g, const uint8_t* x, bool x_signed, int32_t xzp, const DirectWeights8& w,
                       int32_t* y, const DirectRequant8* rq, ThreadPool* pool) {
  MRT_ENFORCE(w.M == g.M && w.C == g.C && w.KH == g.KH && w.KW == g.KW && w.per_tap == (g.dw != 1), MRT_INTERNAL,
              "direct 8-bit conv: weights prepared for another geometry");
  const Runs rn = runs_for(g.C, g.KH, g.KW, w.per_tap);
  const int64_t Hp = (g.OH - 1) * g.sh + (g.KH - 1) * g.dh + 1, Wp = (g.OW - 1) * g.sw + (g.KW - 1) * g.dw + 1;
  const int64_t Cp = rn.Cp, P = g.OH * g.OW;
  std::vector<int64_t> run_off(static_cast<size_t>(rn.count));
  for (int64_t s = 0; s < rn.count; ++s)
    run_off[static_cast<size_t>(s)] =
        rn.per_tap ? ((s / g.KW) * g.dh * Wp + (s % g.KW) * g.dw) * Cp : s * g.dh * Wp * Cp;

  // the staged image, with slack for a run's last quad read past the final pixel
  static thread_local std::vector<uint8_t> staging_buf;
  Scratch<uint8_t> staging(staging_buf, static_cast<size_t>(Hp * Wp * Cp + 64));
  uint8_t* img = staging.data();
  std::memset(img + Hp * Wp * Cp, 0, 64);
  const uint8_t flip = x_signed ? 0x80 : 0;
  const int32_t xz = x_signed ? xzp + 128 : xzp;
  const uint8_t fill = static_cast<uint8_t>(xz);
  auto stage = [&](int64_t b, int64_t e) { stage_rows(g, rn, Wp, x, fill, flip, b, e, img); };
  if (pool && pool->size() > 1 && Hp * Wp * Cp >= (int64_t{1} << 15))
    pool->parallel_for(Hp, std::max<int64_t>(1, 4096 / std::max<int64_t>(1, Wp * Cp)), stage);
  else
    stage(0, Hp);

  const int nz = w.nz;
  const int64_t lanes = 16 * nz, blocks = (g.M + lanes - 1) / lanes, steps = rn.count * rn.quads;
  const int rmax = direct::max_rows(nz);
  // per padded channel: -xz * (the sum of its weights), and for requantization the bias and multiplier
  const size_t padded = static_cast<size_t>(blocks * lanes);
  std::vector<int32_t> corr(padded, 0), bias(padded, 0);
  std::vector<double> mult(padded, 0.0);
  for (int64_t m = 0; m < g.M; ++m) {
    const size_t i = static_cast<size_t>(m);
    corr[i] = static_cast<int32_t>(static_cast<uint32_t>(-xz) * static_cast<uint32_t>(w.wsum[i]));
    if (rq) {
      bias[i] = rq->bias ? rq->bias[m] : 0;
      mult[i] = rq->multiplier[m];
    }
  }
  LaneRequant base{};
  if (rq) {
    base.small = std::all_of(mult.begin(), mult.end(), [](double v) { return std::abs(v) < 0.5; }) &&
                 rq->zp == std::nearbyint(rq->zp) && std::abs(rq->zp) <= 65536 && rq->lo >= -65536 && rq->hi <= 65536;
    base.zp = _mm512_set1_pd(rq->zp), base.lo = _mm512_set1_pd(rq->lo), base.hi = _mm512_set1_pd(rq->hi);
    base.izp = _mm512_set1_epi32(static_cast<int32_t>(rq->zp));
    base.ilo = _mm512_set1_epi32(static_cast<int32_t>(rq->lo)), base.ihi = _mm512_set1_epi32(static_cast<int32_t>(rq->hi));
  }
  const int64_t chunks = (P + direct::kChunk - 1) / direct::kChunk;
  auto body = [&](int64_t b, int64_t e) {
    alignas(64) int32_t acc[direct::kChunk * direct::kMaxLanes];
    const uint8_t* rows[8];
    for (int64_t item = b; item < e; ++item) {
      const int64_t mb = item / chunks, p0 = (item % chunks) * direct::kChunk;
      const int64_t n = std::min(direct::kChunk, P - p0);
      const int64_t m0 = mb * lanes, valid = std::min(lanes, g.M - m0);
      const int8_t* wb = w.data.data() + mb * steps * lanes * 4;
      direct::for_each_tile(n, rmax, [&](int64_t r0, int64_t R) {
        for (int64_t r = 0; r < R; ++r) {
          const int64_t p = p0 + r0 + r, oh = p / g.OW, ow = p % g.OW;
          rows[r] = img + (oh * g.sh * Wp + ow * g.sw) * Cp;
        }
        kTiles[static_cast<size_t>(nz - 1)][static_cast<size_t>(R - 1)](rows, run_off.data(), rn.count, rn.quads, wb,
                                                                        corr.data() + m0, acc + r0 * lanes, lanes);
      });
      if (!rq) {
        for (int64_t l = 0; l < valid; ++l) {
          int32_t* dst = y + (m0 + l) * P + p0;
          for (int64_t i = 0; i < n; ++i) dst[i] = acc[i * lanes + l];
        }
        continue;
      }
      // requantized per lane, then 16 positions x 16 channels at a time into the planes
      for (int64_t l0 = 0; l0 < valid; l0 += 16) {
        LaneRequant rqv = base;
        rqv.bias = _mm512_loadu_si512(bias.data() + m0 + l0);
        rqv.m_lo = _mm512_loadu_pd(mult.data() + m0 + l0);
        rqv.m_hi = _mm512_loadu_pd(mult.data() + m0 + l0 + 8);
        const int64_t nl = std::min<int64_t>(16, valid - l0);
        for (int64_t i0 = 0; i0 < n; i0 += 16) {
          const int64_t ni = std::min<int64_t>(16, n - i0);
          __m128i v[16];
          for (int64_t i = 0; i < 16; ++i)
            v[i] = i < ni ? rqv(_mm512_loadu_si512(acc + (i0 + i) * lanes + l0)) : _mm_setzero_si128();
          transpose16(v);
          uint8_t* dst = rq->y + (m0 + l0) * P + p0 + i0;
          const __mmask16 keep = direct::first16(ni);
          for (int64_t l = 0; l < nl; ++l) _mm_mask_storeu_epi8(dst + l * P, keep, v[l]);
        }
      }
    }
  };
  const int64_t items = blocks * chunks;
  if (pool && pool->size() > 1 && items > 1) pool->parallel_for(items, 1, body);
  else body(0, items);
}

}  // namespace quant
}  // namespace mrt

#if defined(__clang__)
#pragma clang attribute pop
#endif
