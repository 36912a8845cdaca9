// Direct 2-D 8-bit convolution on AVX512-VNNI (ConvInteger, QLinearConv), without im2col.
//
// The float direct kernel's idea (nn_conv_direct_avx512.cc) in the dot-product domain. The input is
// copied once into padded (phase) planes in which the 4 channels of a quad are interleaved: pixel p of
// quad q holds channels 4q .. 4q + 3 as 4 consecutive bytes. In a padded plane of width Wq every kernel
// tap is then a fixed offset of the flat output position (a stride is brought back to that case with
// s_h x s_w phase planes, as in the float kernel), and 16 consecutive flat positions of one tap and quad
// are one 64-byte load: exactly the u8 operand vpdpbusd wants (4 bytes per int32 lane). The weights are
// the s8 operand, 4 bytes (one tap, one quad) broadcast per output channel. So a tile of R output
// channels x 16*NZ positions takes NZ loads + R broadcasts per (quad, tap) for R*NZ vpdpbusd, and no
// column matrix is written, packed or summed.
//
// Zero points: the weights' must be 0 (symmetric int8 weights, what quantizers emit by default), so
// sum (x - xz) w = sum x w - xz * sum w, the second term one constant per output channel. Padding holds
// xz, so it contributes nothing; an int8 input is moved to uint8 by flipping its top bit (x + 128, and
// xz + 128). The int32 sums wrap like the GEMM path's, so the result is exact whenever it fits int32.
#include <immintrin.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include "../threadpool.h"
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

constexpr int kRows = 8;  // output channels per tile

// acc[r][z] (R x NZ zmm) over `steps` (quad, tap) pairs; x: the tile's first position in the staged
// image, offs: byte offset of each step, w: the block's weights, R quads of 4 bytes per step.
// (not inlined: inside run(), GCC 12 copied the accumulators between registers on every step)
template <int NZ>
#if defined(__GNUC__)
__attribute__((noinline))
#endif
void tile(const uint8_t* x, const int64_t* offs, int64_t steps, const int8_t* w, const int32_t* corr,
          int32_t* out /* kRows x NZ*16 */) {
  static_assert(NZ == 2 || NZ == 3, "tiles of 32 or 48 positions");
  // one named array per vector column: GCC keeps these in registers (a 2-D array was spilled)
  __m512i a0[kRows], a1[kRows], a2[kRows];
  for (int r = 0; r < kRows; ++r) {
    a0[r] = _mm512_setzero_si512();
    a1[r] = _mm512_setzero_si512();
    if constexpr (NZ == 3) a2[r] = _mm512_setzero_si512();
  }
  for (int64_t s = 0; s < steps; ++s) {
    const uint8_t* xs = x + offs[s];
    const __m512i v0 = _mm512_loadu_si512(xs), v1 = _mm512_loadu_si512(xs + 64);
    __m512i v2 = v0;
    if constexpr (NZ == 3) v2 = _mm512_loadu_si512(xs + 128);
    const int8_t* ws = w + s * kRows * 4;
    for (int r = 0; r < kRows; ++r) {
      int32_t quad;
      std::memcpy(&quad, ws + 4 * r, sizeof(quad));
      const __m512i b = _mm512_set1_epi32(quad);
      a0[r] = dpbusd(a0[r], v0, b);
      a1[r] = dpbusd(a1[r], v1, b);
      if constexpr (NZ == 3) a2[r] = dpbusd(a2[r], v2, b);
    }
  }
  for (int r = 0; r < kRows; ++r) {
    const __m512i c = _mm512_set1_epi32(corr[r]);
    int32_t* o = out + r * NZ * 16;
    _mm512_storeu_si512(o, _mm512_add_epi32(a0[r], c));
    _mm512_storeu_si512(o + 16, _mm512_add_epi32(a1[r], c));
    if constexpr (NZ == 3) _mm512_storeu_si512(o + 32, _mm512_add_epi32(a2[r], c));
  }
}

// One line of a phase plane for a channel quad: pixel j = the 4 channels' bytes at input column
// j * sw + col0 of the rows given (a null row: outside the input, all xz; past nrows: a padding channel, 0),
// flipped to uint8 when the input is int8. lines: 4 scratch lines of ls >= Wq rounded up to 16 bytes.
void stage_row(const uint8_t* const* rows, int64_t nrows, int64_t W, int64_t sw, int64_t col0, int64_t Wq,
               uint8_t fill, uint8_t flip, uint8_t* lines, int64_t ls, uint8_t* dst) {
  // phase columns [j0, j1) read inside [0, W)
  const int64_t j0 = std::min(Wq, std::max<int64_t>(0, (-col0 + sw - 1) / sw));
  const int64_t j1 = std::max(j0, std::min(Wq, (W - col0 + sw - 1) / sw));
  for (int c = 0; c < 4; ++c) {
    uint8_t* l = lines + c * ls;
    if (c >= nrows || !rows[c]) {
      std::memset(l, c >= nrows ? 0 : fill, static_cast<size_t>(Wq));
      continue;
    }
    std::memset(l, fill, static_cast<size_t>(j0));
    const uint8_t* src = rows[c] + col0 + j0 * sw;
    const int64_t m = j1 - j0;
    if (sw == 1) {
      std::memcpy(l + j0, src, static_cast<size_t>(m));
    } else if (sw == 2 && m > 0) {
      // 32 outputs a step from 64 bytes (masked to the line's last byte read, 2 (m - 1)), even bytes kept
      const int64_t last = 2 * (m - 1);
      for (int64_t t = 0; t < m; t += 32) {
        const int64_t avail = std::min<int64_t>(64, last - 2 * t + 1);
        const __mmask64 in = avail >= 64 ? ~__mmask64(0) : (__mmask64(1) << avail) - 1;
        const __m256i even = _mm512_maskz_cvtepi16_epi8(~__mmask32(0), _mm512_maskz_loadu_epi8(in, src + 2 * t));
        const int64_t n = std::min<int64_t>(32, m - t);
        _mm256_mask_storeu_epi8(l + j0 + t, n >= 32 ? ~__mmask32(0) : (__mmask32(1) << n) - 1, even);
      }
    } else {
      for (int64_t t = 0; t < m; ++t) l[j0 + t] = src[t * sw];
    }
    std::memset(l + j1, fill, static_cast<size_t>(Wq - j1));
    if (flip)
      for (int64_t j = j0; j < j1; ++j) l[j] ^= flip;
  }
  // interleave the 4 lines into pixels of 4 bytes, 16 pixels a step (the last step masked)
  for (int64_t j = 0; j < Wq; j += 16) {
    const __m128i c0 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(lines + j));
    const __m128i c1 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(lines + ls + j));
    const __m128i c2 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(lines + 2 * ls + j));
    const __m128i c3 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(lines + 3 * ls + j));
    const __m128i lo01 = _mm_unpacklo_epi8(c0, c1), hi01 = _mm_unpackhi_epi8(c0, c1);
    const __m128i lo23 = _mm_unpacklo_epi8(c2, c3), hi23 = _mm_unpackhi_epi8(c2, c3);
    __m512i px = _mm512_castsi128_si512(_mm_unpacklo_epi16(lo01, lo23));
    px = _mm512_inserti32x4(px, _mm_unpackhi_epi16(lo01, lo23), 1);
    px = _mm512_inserti32x4(px, _mm_unpacklo_epi16(hi01, hi23), 2);
    px = _mm512_inserti32x4(px, _mm_unpackhi_epi16(hi01, hi23), 3);
    const int64_t n = std::min<int64_t>(16, Wq - j);
    _mm512_mask_storeu_epi8(dst + 4 * j, n >= 16 ? ~__mmask64(0) : (__mmask64(1) << (4 * n)) - 1, px);
  }
}

template <int NZ>
void run(const DirectConv8& g, const uint8_t* x, bool x_signed, int32_t xzp, const DirectWeights8& w, int32_t* y,
         const DirectRequant8* rq, ThreadPool* pool) {
  constexpr int64_t kTile = 16 * NZ;
  const int64_t sh = g.sh, sw = g.sw;
  const int64_t Hq = g.OH + (g.KH - 1) * g.dh / sh, Wq = g.OW + (g.KW - 1) * g.dw / sw;
  const int64_t taps = g.KH * g.KW, quads = (g.C + 3) / 4, steps = quads * taps;
  const int64_t plane = Hq * Wq;  // pixels per phase plane
  // the phases some tap reads, numbered in order of first use; each tap's pixel offset within a quad
  std::vector<int64_t> phase_slot(static_cast<size_t>(sh * sw), -1), tap_off(static_cast<size_t>(taps));
  std::vector<int64_t> used;  // phase index of each slot
  int64_t max_off = 0;        // furthest tap offset within a plane
  for (int64_t kh = 0; kh < g.KH; ++kh)
    for (int64_t kw = 0; kw < g.KW; ++kw) {
      const int64_t r = kh * g.dh, q = kw * g.dw, ph = (r % sh) * sw + q % sw;
      if (phase_slot[static_cast<size_t>(ph)] < 0) {
        phase_slot[static_cast<size_t>(ph)] = static_cast<int64_t>(used.size());
        used.push_back(ph);
      }
      const int64_t within = (r / sh) * Wq + q / sw;
      max_off = std::max(max_off, within);
      tap_off[static_cast<size_t>(kh * g.KW + kw)] = phase_slot[static_cast<size_t>(ph)] * plane + within;
    }
  const int64_t flat = g.OH * Wq, tiles = (flat + kTile - 1) / kTile;
  const int64_t slots = static_cast<int64_t>(used.size()), quad_px = plane * slots;
  // room for the last tile's reads past the plane (they land in the next plane or the slack at the end
  // and feed only dropped positions)
  const int64_t slack = tiles * kTile - flat + max_off + 16;
  std::vector<int64_t> offs(static_cast<size_t>(steps));  // byte offset of each (quad, tap) step
  for (int64_t qd = 0; qd < quads; ++qd)
    for (int64_t t = 0; t < taps; ++t) offs[static_cast<size_t>(qd * taps + t)] = 4 * (qd * quad_px + tap_off[static_cast<size_t>(t)]);

  static thread_local std::vector<uint8_t> staging_buf;
  Scratch<uint8_t> staging(staging_buf, static_cast<size_t>(4 * (quads * quad_px + slack)));
  uint8_t* img = staging.data();
  std::memset(img + 4 * quads * quad_px, 0, static_cast<size_t>(4 * slack));
  const uint8_t flip = x_signed ? 0x80 : 0;
  const uint8_t fill = static_cast<uint8_t>(x_signed ? xzp + 128 : xzp);
  const int64_t HW = g.H * g.W;
  auto stage = [&](int64_t b, int64_t e) {
    const int64_t ls = (Wq + 15) / 16 * 16;
    std::vector<uint8_t> lines(static_cast<size_t>(4 * ls));
    for (int64_t item = b; item < e; ++item) {  // item = (quad, phase slot, row)
      const int64_t qd = item / (slots * Hq), rest = item % (slots * Hq);
      const int64_t slot = rest / Hq, i = rest % Hq, ph = used[static_cast<size_t>(slot)];
      const int64_t a = ph / sw, bcol = ph % sw, ih = i * sh + a - g.pt;
      const int64_t nrows = std::min<int64_t>(4, g.C - 4 * qd);
      const uint8_t* rows[4] = {nullptr, nullptr, nullptr, nullptr};
      if (ih >= 0 && ih < g.H)
        for (int64_t c = 0; c < nrows; ++c) rows[c] = x + (4 * qd + c) * HW + ih * g.W;
      stage_row(rows, nrows, g.W, sw, bcol - g.pl, Wq, fill, flip, lines.data(), ls,
                img + 4 * (qd * quad_px + slot * plane + i * Wq));
    }
  };
  const int64_t stage_items = quads * slots * Hq;
  if (pool && pool->size() > 1 && quads * quad_px >= (int64_t{1} << 14))
    pool->parallel_for(stage_items, std::max<int64_t>(1, 512 / std::max<int64_t>(1, Wq)), stage);
  else
    stage(0, stage_items);

  const int64_t blocks = (g.M + kRows - 1) / kRows, out_size = g.OH * g.OW;
  // -xz * (sum of the channel's weights), per output channel (padded rows: 0)
  std::vector<int32_t> corr(static_cast<size_t>(blocks * kRows), 0);
  const int32_t xz = x_signed ? xzp + 128 : xzp;
  for (int64_t m = 0; m < g.M; ++m)
    corr[static_cast<size_t>(m)] =
        static_cast<int32_t>(static_cast<uint32_t>(-xz) * static_cast<uint32_t>(w.wsum[static_cast<size_t>(m)]));
  // big weights, small image (deep layers): channel blocks outer, so a block's weights stay in cache
  const bool blocks_outer = w.data.size() > static_cast<size_t>(4 * quads * quad_px);
  auto body = [&](int64_t b, int64_t e) {
    alignas(64) int32_t out[kRows * kTile];
    alignas(64) uint8_t bytes[kRows * kTile + 64];  // requantized rows (64 bytes slack for the copies' loads)
    for (int64_t item = b; item < e; ++item) {
      const int64_t ti = blocks_outer ? item % tiles : item / blocks, mb = blocks_outer ? item / tiles : item % blocks;
      const int64_t q0 = ti * kTile, q1 = std::min(flat, q0 + kTile);
      tile<NZ>(img + 4 * q0, offs.data(), steps, w.data.data() + mb * steps * kRows * 4, corr.data() + mb * kRows, out);
      const int64_t m0 = mb * kRows, rows = std::min<int64_t>(kRows, g.M - m0);
      if (rq)
        for (int64_t r = 0; r < rows; ++r)
          requantize_bytes_avx512(out + r * kTile, rq->bias ? rq->bias[m0 + r] : 0, rq->multiplier[m0 + r], rq->zp,
                                  rq->lo, rq->hi, bytes + r * kTile, q1 - q0);
      for (int64_t q = q0; q < q1;) {  // the tile's positions as pieces of output rows (at most kTile <= 48 long)
        const int64_t oh = q / Wq, ow = q % Wq;
        if (ow >= g.OW) {
          q += Wq - ow;
          continue;
        }
        const int64_t len = std::min(g.OW - ow, q1 - q), pos = m0 * out_size + oh * g.OW + ow;
        if (rq) {
          const __mmask64 m = (__mmask64(1) << len) - 1;
          for (int64_t r = 0; r < rows; ++r)
            _mm512_mask_storeu_epi8(rq->y + pos + r * out_size, m, _mm512_loadu_si512(bytes + r * kTile + (q - q0)));
        } else {
          for (int64_t r = 0; r < rows; ++r) {
            const int32_t* src = out + r * kTile + (q - q0);
            int32_t* dst = y + pos + r * out_size;
            for (int64_t i = 0; i < len; i += 16) {
              const int64_t n = std::min<int64_t>(16, len - i);
              const __mmask16 m = static_cast<__mmask16>((1u << n) - 1);
              _mm512_mask_storeu_epi32(dst + i, m, _mm512_maskz_loadu_epi32(m, src + i));
            }
          }
        }
        q += len;
      }
    }
  };
  const int64_t items = tiles * blocks;
  if (pool && pool->size() > 1 && items > 1) pool->parallel_for(items, 1, body);
  else body(0, items);
}

}  // namespace

DirectWeights8 prepare_direct_weights8(const int8_t* w, int64_t M, int64_t C, int64_t taps) {
  DirectWeights8 out;
  out.M = M;
  out.C = C;
  out.taps = taps;
  const int64_t quads = (C + 3) / 4, steps = quads * taps, blocks = (M + kRows - 1) / kRows;
  out.data.assign(static_cast<size_t>(blocks * steps * kRows * 4), 0);
  out.wsum.assign(static_cast<size_t>(M), 0);
  for (int64_t m = 0; m < M; ++m)
    for (int64_t c = 0; c < C; ++c)
      for (int64_t t = 0; t < taps; ++t) {
        const int8_t v = w[(m * C + c) * taps + t];
        const int64_t s = (c / 4) * taps + t;
        out.data[static_cast<size_t>(((m / kRows) * steps + s) * kRows * 4 + (m % kRows) * 4 + c % 4)] = v;
        out.wsum[static_cast<size_t>(m)] += v;
      }
  return out;
}

void conv8_direct_vnni(const DirectConv8& g, const uint8_t* x, bool x_signed, int32_t xzp, const DirectWeights8& w,
                       int32_t* y, const DirectRequant8* rq, ThreadPool* pool) {
  MRT_ENFORCE(w.M == g.M && w.C == g.C && w.taps == g.KH * g.KW, MRT_INTERNAL,
              "direct 8-bit conv: weights prepared for another geometry");
  // positions per tile: 32 or 48, whichever computes fewer dropped ones (48 on ties: fewer weight loads)
  const int64_t Wq = g.OW + (g.KW - 1) * g.dw / g.sw, flat = g.OH * Wq;
  const int64_t waste32 = (flat + 31) / 32 * 32, waste48 = (flat + 47) / 48 * 48;
  if (waste48 <= waste32) run<3>(g, x, x_signed, xzp, w, y, rq, pool);
  else run<2>(g, x, x_signed, xzp, w, y, rq, pool);
}

}  // namespace quant
}  // namespace mrt

#if defined(__clang__)
#pragma clang attribute pop
#endif
