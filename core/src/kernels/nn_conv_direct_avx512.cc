// Direct 2-D convolution of stride 1 on AVX-512, in the NCHW layout, without im2col.
//
// The input planes are copied once into zero-padded planes of width Wp = W + pads. In a padded plane
// the output position (oh, ow) reads the input at oh * Wp + ow + kh * dh * Wp + kw * dw: every kernel
// tap is a fixed offset of the flat position. So the convolution is computed over flat positions
// q = oh * Wp + ow (those with ow >= OW are computed and dropped: (Wp - OW) of every Wp), 32 at a
// time, for blocks of R output channels: two vector loads of the input per (channel, tap) feed 2R
// fused multiply-adds with the R filter values broadcast. The input is read straight from cache, and
// each loaded vector serves R output channels: no column matrix is written or read, which is what the
// im2col + GEMM path costs when the layer has few output channels (DenseNet's 32).
#include <immintrin.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include "../gemm/sgemm.h"
#include "../threadpool.h"
#include "nn_geometry.h"

namespace mrt {
namespace nn {
namespace {

constexpr int64_t kTile = 32;  // flat positions per tile (two zmm)

template <int R>
void tile(const float* x, int64_t plane, int64_t C, const int64_t* offsets, int64_t taps, const float* w,
          float* out /* R x kTile */) {
  __m512 a0[R], a1[R];
  for (int r = 0; r < R; ++r) {
    a0[r] = _mm512_setzero_ps();
    a1[r] = _mm512_setzero_ps();
  }
  for (int64_t c = 0; c < C; ++c) {
    const float* xc = x + c * plane;
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
  for (int r = 0; r < R; ++r) {
    _mm512_storeu_ps(out + r * kTile, a0[r]);
    _mm512_storeu_ps(out + r * kTile + 16, a1[r]);
  }
}

template <int R>
void run(const DirectConv& g, const float* x, const float* wpacked, float* y, const TileEpilogue& epi,
         ThreadPool* pool) {
  const int64_t Hp = g.OH + (g.KH - 1) * g.dh, Wp = g.OW + (g.KW - 1) * g.dw;
  // plane stride: the padded plane, then zeros for the reads of the last tile past the plane's end
  const int64_t plane = (Hp * Wp + (g.KW - 1) * g.dw + kTile + 15) / 16 * 16;
  static thread_local std::vector<float> staging;
  if (staging.size() < static_cast<size_t>(g.C * plane)) staging.resize(static_cast<size_t>(g.C * plane));
  float* xp = staging.data();
  auto stage = [&](int64_t c0, int64_t c1) {
    for (int64_t c = c0; c < c1; ++c) {
      float* d = xp + c * plane;
      const float* s = x + c * g.H * g.W;
      std::fill(d, d + g.pt * Wp, 0.f);
      for (int64_t ih = 0; ih < Hp - g.pt; ++ih) {
        float* row = d + (g.pt + ih) * Wp;
        if (ih >= g.H) {
          std::fill(row, row + Wp, 0.f);
          continue;
        }
        const int64_t n = std::min(g.W, Wp - g.pl);
        std::fill(row, row + g.pl, 0.f);
        std::memcpy(row + g.pl, s + ih * g.W, static_cast<size_t>(n) * sizeof(float));
        std::fill(row + g.pl + n, row + Wp, 0.f);
      }
      std::fill(d + Hp * Wp, d + plane, 0.f);
    }
  };
  if (pool && g.C * plane >= (int64_t{1} << 16)) pool->parallel_for(g.C, 1, stage);
  else stage(0, g.C);

  std::vector<int64_t> offsets(static_cast<size_t>(g.KH * g.KW));
  for (int64_t kh = 0; kh < g.KH; ++kh)
    for (int64_t kw = 0; kw < g.KW; ++kw) offsets[static_cast<size_t>(kh * g.KW + kw)] = kh * g.dh * Wp + kw * g.dw;
  const int64_t taps = g.KH * g.KW;
  const int64_t flat = g.OH * Wp, tiles = (flat + kTile - 1) / kTile, blocks = (g.M + R - 1) / R;
  const int64_t out_size = g.OH * g.OW;
  auto body = [&](int64_t b, int64_t e) {
    alignas(64) float out[R * kTile];
    for (int64_t item = b; item < e; ++item) {
      // tiles outer, channel blocks inner: a tile's input stays in cache across the blocks
      const int64_t ti = item / blocks, mb = item % blocks;
      const int64_t q0 = ti * kTile, q1 = std::min(flat, q0 + kTile);
      tile<R>(xp + q0, plane, g.C, offsets.data(), taps, wpacked + mb * g.C * taps * R, out);
      const int64_t m0 = mb * R, rows = std::min<int64_t>(R, g.M - m0);
      // the tile's positions as pieces of output rows
      for (int64_t q = q0; q < q1;) {
        const int64_t oh = q / Wp, ow = q % Wp;
        if (ow >= g.OW) {
          q += Wp - ow;
          continue;
        }
        const int64_t len = std::min(g.OW - ow, q1 - q), pos = oh * g.OW + ow;
        float* dst = y + m0 * out_size + pos;
        for (int64_t r = 0; r < rows; ++r)
          std::memcpy(dst + r * out_size, out + r * kTile + (q - q0), static_cast<size_t>(len) * sizeof(float));
        if (epi.apply) epi.apply(epi.ctx, m0, rows, pos, len, dst, out_size);
        q += len;
      }
    }
  };
  const int64_t items = tiles * blocks;
  if (pool && pool->size() > 1 && items > 1) pool->parallel_for(items, 1, body);
  else body(0, items);
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
