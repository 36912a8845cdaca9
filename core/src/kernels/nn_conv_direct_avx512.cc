// Direct 2-D convolution on AVX-512, in the NCHW layout, without im2col.
//
// The input planes are copied once into zero-padded planes. With stride 1, in a padded plane of width
// Wp the output position (oh, ow) reads the input at oh * Wp + ow + kh * dh * Wp + kw * dw: every kernel
// tap is a fixed offset of the flat position. A stride s is brought back to that case by splitting each
// padded plane into s_h x s_w phase planes (rows i * s_h + a, columns j * s_w + b): tap (kh, kw) reads
// phase ((kh * dh) % s_h, (kw * dw) % s_w) at the offset ((kh * dh) / s_h) * Wq + (kw * dw) / s_w.
// So the convolution is computed over flat positions q = oh * Wq + ow (those with ow >= OW are computed
// and dropped), 32 at a time, for blocks of R output channels: two vector loads of the input per
// (channel, tap) feed 2R fused multiply-adds with the R filter values broadcast. The input is read
// straight from cache and each loaded vector serves R output channels: no column matrix is written or
// read, which is what the im2col + GEMM path costs when the layer has few output channels (DenseNet's
// 32) or few input channels (every network's first layer).
#include <immintrin.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include "../gemm/sgemm.h"
#include "../threadpool.h"
#include "nn_geometry.h"

// GCC 12 warns inside its own headers that the pass-through operand of the masked builtin behind
// _mm512_max_ps may be uninitialized (unused by design).
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif

namespace mrt {
namespace nn {
namespace {

constexpr int64_t kTile = 32;  // flat positions per tile (two zmm)
constexpr int64_t kRunTiles = 8;  // tiles per work item (256 positions)

template <int R>
void tile(const float* x, int64_t channel, int64_t C, const int64_t* offsets, int64_t taps, const float* w,
          const float* bias /* R values or null */, bool relu, float* out /* R x kTile */) {
  __m512 a0[R], a1[R];
  for (int r = 0; r < R; ++r) {
    a0[r] = _mm512_setzero_ps();
    a1[r] = _mm512_setzero_ps();
  }
  for (int64_t c = 0; c < C; ++c) {
    const float* xc = x + c * channel;
    const float* wc = w + c * taps * R;
    for (int64_t t = 0; t < taps; ++t) {
      const float* xt = xc + offsets[t];
      const __m512 x0 = _mm512_loadu_ps(xt), x1 = _mm512_loadu_ps(xt + 16);
      const float* wt = wc + t * R;
      for (int r = 0; r < R; ++r) {
        const __m512 wv = _mm512_set1_ps(wt[r]);
        a0[r] = _mm512_fmadd_ps(wv, x0, a0[r]);
        a1[r] = _mm512_fmadd_ps(wv, x1, a1[r]);
      }
    }
  }
  const __m512 zero = _mm512_setzero_ps();
  for (int r = 0; r < R; ++r) {
    if (bias) {
      const __m512 b = _mm512_set1_ps(bias[r]);
      a0[r] = _mm512_add_ps(a0[r], b);
      a1[r] = _mm512_add_ps(a1[r], b);
    }
    if (relu) {  // max(x, 0), operands in the order of the epilogue's Relu (same result for a NaN)
      a0[r] = _mm512_max_ps(a0[r], zero);
      a1[r] = _mm512_max_ps(a1[r], zero);
    }
    _mm512_storeu_ps(out + r * kTile, a0[r]);
    _mm512_storeu_ps(out + r * kTile + 16, a1[r]);
  }
}

template <int R>
void run(const DirectConv& g, const float* x, const float* wpacked, float* y, const TileEpilogue& epi,
         ThreadPool* pool) {
  const int64_t sh = g.sh, sw = g.sw, phases = sh * sw;
  // each phase plane: the rows and columns the outputs reach
  const int64_t Hq = g.OH + (g.KH - 1) * g.dh / sh, Wq = g.OW + (g.KW - 1) * g.dw / sw;
  // plane stride: the phase plane, then zeros for the reads of the last tile past the plane's end
  const int64_t plane = (Hq * Wq + (g.KW - 1) * g.dw / sw + kTile + 15) / 16 * 16, channel = phases * plane;
  static thread_local std::vector<float> staging;
  if (staging.size() < static_cast<size_t>(g.C * channel)) staging.resize(static_cast<size_t>(g.C * channel));
  float* xp = staging.data();
  auto stage = [&](int64_t c0, int64_t c1) {
    for (int64_t c = c0; c < c1; ++c) {
      const float* s = x + c * g.H * g.W;
      for (int64_t ph = 0; ph < phases; ++ph) {
        const int64_t a = ph / sw, b = ph % sw;
        float* d = xp + c * channel + ph * plane;
        // phase column j reads input column j * sw + b - pl: the columns inside [0, W)
        const int64_t j0 = std::min(Wq, std::max<int64_t>(0, (g.pl - b + sw - 1) / sw));
        const int64_t j1 = std::max(j0, std::min(Wq, (g.W + g.pl - b + sw - 1) / sw));
        for (int64_t i = 0; i < Hq; ++i) {
          float* row = d + i * Wq;
          const int64_t ih = i * sh + a - g.pt;
          if (ih < 0 || ih >= g.H) {
            std::fill(row, row + Wq, 0.f);
            continue;
          }
          std::fill(row, row + j0, 0.f);
          const float* src = s + ih * g.W + j0 * sw + b - g.pl;
          if (sw == 1) {
            std::memcpy(row + j0, src, static_cast<size_t>(j1 - j0) * sizeof(float));
          } else {
            for (int64_t j = j0; j < j1; ++j) row[j] = src[(j - j0) * sw];
          }
          std::fill(row + j1, row + Wq, 0.f);
        }
        std::fill(d + Hq * Wq, d + plane, 0.f);
      }
    }
  };
  if (pool && g.C * channel >= (int64_t{1} << 16)) pool->parallel_for(g.C, 1, stage);
  else stage(0, g.C);

  std::vector<int64_t> offsets(static_cast<size_t>(g.KH * g.KW));
  for (int64_t kh = 0; kh < g.KH; ++kh)
    for (int64_t kw = 0; kw < g.KW; ++kw) {
      const int64_t r = kh * g.dh, q = kw * g.dw;
      offsets[static_cast<size_t>(kh * g.KW + kw)] = ((r % sh) * sw + q % sw) * plane + (r / sh) * Wq + q / sw;
    }
  const int64_t taps = g.KH * g.KW;
  const int64_t flat = g.OH * Wq, tiles = (flat + kTile - 1) / kTile, blocks = (g.M + R - 1) / R;
  const int64_t out_size = g.OH * g.OW;
  // the bias of the padded rows of the last block: 0
  std::vector<float> bias_rows;
  if (g.bias) {
    bias_rows.assign(static_cast<size_t>((g.M + R - 1) / R * R), 0.f);
    std::copy(g.bias, g.bias + g.M, bias_rows.begin());
  }
  // Work items: a run of kRunTiles tiles for one block of channels; runs outer, blocks inner. Within a
  // run, each of the block's R output rows is written as one sequential stretch (the rows are a plane
  // apart: one tile at a time for all blocks would scatter every store over R * blocks rows), while the
  // run's input stays in cache across the blocks.
  const int64_t runs = (tiles + kRunTiles - 1) / kRunTiles;
  // one tile of the block's R output channels: computed into `out`, then stored as pieces of output rows
  auto one_tile = [&](int64_t ti, int64_t mb, float* out) {
    const int64_t q0 = ti * kTile, q1 = std::min(flat, q0 + kTile);
    tile<R>(xp + q0, channel, g.C, offsets.data(), taps, wpacked + mb * g.C * taps * R,
            g.bias ? bias_rows.data() + mb * R : nullptr, g.relu, out);
    const int64_t m0 = mb * R, rows = std::min<int64_t>(R, g.M - m0);
    for (int64_t q = q0; q < q1;) {
      const int64_t oh = q / Wq, ow = q % Wq;
      if (ow >= g.OW) {
        q += Wq - ow;
        continue;
      }
      const int64_t len = std::min(g.OW - ow, q1 - q), pos = oh * g.OW + ow;
      float* dst = y + m0 * out_size + pos;
      // (len <= kTile = 32: two masked stores per row instead of a memcpy call)
      const __mmask16 lo = len >= 16 ? __mmask16(0xFFFF) : static_cast<__mmask16>((1u << len) - 1);
      const __mmask16 hi = len > 16 ? static_cast<__mmask16>((1u << (len - 16)) - 1) : __mmask16(0);
      for (int64_t r = 0; r < rows; ++r) {
        const float* src = out + r * kTile + (q - q0);
        float* d = dst + r * out_size;
        _mm512_mask_storeu_ps(d, lo, _mm512_maskz_loadu_ps(lo, src));
        if (hi) _mm512_mask_storeu_ps(d + 16, hi, _mm512_maskz_loadu_ps(hi, src + 16));
      }
      if (epi.apply) epi.apply(epi.ctx, m0, rows, pos, len, dst, out_size);
      q += len;
    }
  };
  auto body = [&](int64_t b, int64_t e) {
    alignas(64) float out[R * kTile];
    for (int64_t item = b; item < e; ++item) {
      const int64_t mb = item % blocks, t0 = item / blocks * kRunTiles;
      for (int64_t ti = t0; ti < std::min(tiles, t0 + kRunTiles); ++ti) one_tile(ti, mb, out);
    }
  };
  const int64_t items = runs * blocks;
  if (pool && pool->size() > 1 && items > 1) pool->parallel_for(items, 1, body);
  else body(0, items);
  // kept between runs while small; a large layer's staging is not held by the thread afterwards
  if (staging.capacity() * sizeof(float) > (size_t{64} << 20)) std::vector<float>().swap(staging);
}

}  // namespace

int direct_conv_rows(int64_t M) {
  // the block height that wastes fewer padded output channels (12 on ties: fewer input reloads)
  const int64_t waste12 = (M + 11) / 12 * 12 - M, waste8 = (M + 7) / 8 * 8 - M;
  return waste12 <= waste8 ? 12 : 8;
}

std::vector<float> pack_direct_filters(const float* w, int64_t M, int64_t C, int64_t taps) {
  const int R = direct_conv_rows(M);
  const int64_t blocks = (M + R - 1) / R;
  std::vector<float> out(static_cast<size_t>(blocks * C * taps * R), 0.f);
  for (int64_t m = 0; m < M; ++m)
    for (int64_t c = 0; c < C; ++c)
      for (int64_t t = 0; t < taps; ++t)
        out[static_cast<size_t>((((m / R) * C + c) * taps + t) * R + m % R)] = w[(m * C + c) * taps + t];
  return out;
}

void conv_direct_avx512(const DirectConv& g, const float* x, const float* wpacked, float* y,
                        const TileEpilogue& epi, ThreadPool* pool) {
  if (direct_conv_rows(g.M) == 12) run<12>(g, x, wpacked, y, epi, pool);
  else run<8>(g, x, wpacked, y, epi, pool);
}

}  // namespace nn
}  // namespace mrt

#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif
