// Direct 2-D convolution on AVX2 + FMA, for CPUs without AVX-512: the method of conv_direct_avx512 (see
// nn_conv_direct_avx512.cc) with vectors of 8 output channels. The input planes are copied once into
// zero-padded phase planes, where every (channel, tap) step of an output position is a fixed offset from the
// position's base; a tile is R consecutive output positions of one output row by 8 x NZ output channels (R
// broadcasts against NZ filter vectors per step), and a chunk's tiles are transposed 8 x 8 into the output
// planes, where the rest of the output stage runs while the chunk is in cache.
// Against im2col + GEMM, no column matrix is written and read: on an AMD Zen 3 core (AVX2 only) DenseNet's
// 3x3 128 -> 32 layers and SqueezeNet's 3x3 16 -> 64, which have few output or few input channels, spent
// most of their time writing the column matrix into the GEMM's panels.
// conv_direct_lanes_avx2 runs the few steps of a stem over the same staged planes with the positions in the lanes
// instead (pointwise_tile_offs_avx2): no transpose, each output written once.
#include <immintrin.h>

#include <algorithm>
#include <array>
#include <utility>
#include <vector>

#include "../gemm/transpose8_avx.h"
#include "../threadpool.h"
#include "nn_conv_bands.h"
#include "nn_geometry.h"

#if defined(__GNUC__) && !defined(__clang__)
#define MRT_DIRECT_TILE_AVX2 __attribute__((noinline, optimize("no-tree-loop-distribute-patterns")))
#elif defined(__clang__)
#define MRT_DIRECT_TILE_AVX2 __attribute__((noinline))
#else
#define MRT_DIRECT_TILE_AVX2
#endif

namespace mrt {
namespace nn {
namespace {

// Positions per tile at most, per block width NZ (vectors of 8 channels): R x NZ accumulators, the NZ filter
// vectors and one broadcast within the 16 vector registers.
constexpr int kMaxRows(int nz) { return nz == 1 ? 12 : nz == 2 ? 6 : 4; }
constexpr int kMaxNz = 3;
constexpr int64_t kChunk = 96;  // output positions per work item at most (whole output rows where they fit)
constexpr int64_t kMaxLanes = 8 * kMaxNz;

// The block width in vectors (1 to 3) that pads the fewest of M output channels, the wider on ties.
int block_vectors(int64_t M) {
  int best = kMaxNz;
  int64_t best_pad = (M + 8 * kMaxNz - 1) / (8 * kMaxNz) * (8 * kMaxNz) - M;
  for (int nz = kMaxNz - 1; nz >= 1; --nz) {
    const int64_t pad = (M + 8 * nz - 1) / (8 * nz) * (8 * nz) - M;
    if (pad < best_pad) best = nz, best_pad = pad;
  }
  return best;
}

// acc[r] = the sums of position r (the base `base` + r in the staged planes) for 8 x NZ channels over `steps`
// (channel, tap) steps at offsets offs from the base, against the block's filters w (per step NZ x 8 values);
// starting from row r of `out` when `resume` (a part sum over earlier steps), else from 0; then + bias (8 x NZ
// values, or null) and `act`, stored as row r of `out` (stride ldo).
template <int R, int NZ>
MRT_DIRECT_TILE_AVX2 void tile(const float* base, const int64_t* offs, int64_t steps, const float* w,
                               const float* bias, const RegisterAct& act, bool resume, float* out, int64_t ldo) {
  static_assert(NZ >= 1 && NZ <= kMaxNz && R >= 1 && R <= kMaxRows(NZ), "tile shape");
  __m256 a0[R], a1[R], a2[R];  // one named array per vector column (kept in registers)
#pragma GCC unroll 12
  for (int r = 0; r < R; ++r) {
    const float* o = out + r * ldo;
    a0[r] = resume ? _mm256_loadu_ps(o) : _mm256_setzero_ps();
    if constexpr (NZ > 1) a1[r] = resume ? _mm256_loadu_ps(o + 8) : _mm256_setzero_ps();
    if constexpr (NZ > 2) a2[r] = resume ? _mm256_loadu_ps(o + 16) : _mm256_setzero_ps();
  }
  for (int64_t s = 0; s < steps; ++s, w += NZ * 8) {
    const float* q = base + offs[s];
    const __m256 b0 = _mm256_loadu_ps(w);
    __m256 b1 = b0, b2 = b0;
    if constexpr (NZ > 1) b1 = _mm256_loadu_ps(w + 8);
    if constexpr (NZ > 2) b2 = _mm256_loadu_ps(w + 16);
#pragma GCC unroll 12
    for (int r = 0; r < R; ++r) {
      const __m256 a = _mm256_broadcast_ss(q + r);
      a0[r] = _mm256_fmadd_ps(a, b0, a0[r]);
      if constexpr (NZ > 1) a1[r] = _mm256_fmadd_ps(a, b1, a1[r]);
      if constexpr (NZ > 2) a2[r] = _mm256_fmadd_ps(a, b2, a2[r]);
    }
  }
  const __m256 zero = _mm256_setzero_ps(), vlo = _mm256_set1_ps(act.lo), vhi = _mm256_set1_ps(act.hi);
  auto stage = [&](auto act_kind, auto with_bias) __attribute__((always_inline)) {
    constexpr auto kAct = decltype(act_kind)::value;
    constexpr bool kBias = decltype(with_bias)::value;
    // + bias, then the activation with the operands in the order of the scalar output stage's (same NaNs)
    auto finish = [&](__m256 v, int z) __attribute__((always_inline)) {
      if constexpr (kBias) v = _mm256_add_ps(v, _mm256_loadu_ps(bias + 8 * z));
      if constexpr (kAct == RegisterAct::kRelu) return _mm256_max_ps(v, zero);
      if constexpr (kAct == RegisterAct::kClip) return _mm256_min_ps(vhi, _mm256_max_ps(vlo, v));
      return v;
    };
#pragma GCC unroll 12
    for (int r = 0; r < R; ++r) {
      float* o = out + r * ldo;
      _mm256_storeu_ps(o, finish(a0[r], 0));
      if constexpr (NZ > 1) _mm256_storeu_ps(o + 8, finish(a1[r], 1));
      if constexpr (NZ > 2) _mm256_storeu_ps(o + 16, finish(a2[r], 2));
    }
  };
  with_output_stage(act, bias != nullptr, stage);
}

using TileFn = decltype(&tile<1, 1>);
template <int NZ, size_t... I>
constexpr std::array<TileFn, kMaxRows(1)> tile_row(std::index_sequence<I...>) {
  return {&tile<(int(I) + 1 < kMaxRows(NZ) ? int(I) + 1 : kMaxRows(NZ)), NZ>...};
}
// kTiles[NZ - 1][R - 1] (R past kMaxRows(NZ) maps to the largest, never called)
constexpr auto kRowsSeq = std::make_index_sequence<kMaxRows(1)>();
constexpr std::array<std::array<TileFn, kMaxRows(1)>, kMaxNz> kTiles{tile_row<1>(kRowsSeq), tile_row<2>(kRowsSeq),
                                                                     tile_row<3>(kRowsSeq)};

// Bytes of a block's filters per piece of steps: a piece stays in L2 while every tile of a chunk runs over it.
constexpr int64_t kPieceBytes = int64_t{128} << 10;

int64_t staged_width(const DirectConv& g) { return g.OW + (g.KW - 1) * g.dw / g.sw; }

// The input planes copied into zero-padded phase planes of staged_width(g) columns (Wq), for output rows [oh0,
// oh0 + out_rows) in planes sized for `plane_rows` output rows; position (oh, ow) has its base at xp + (oh - oh0)
// * Wq + ow, and (channel c, tap kh, kw) is at offs[(c * KH + kh) * KW + kw] from it.
struct Staged {
  const float* xp;
  std::vector<int64_t> offs;
};

std::vector<float>& staging_buffer() {
  static thread_local std::vector<float> staging;
  return staging;
}

Staged stage_input(const DirectConv& g, const float* x, int64_t oh0, int64_t out_rows, int64_t plane_rows,
                   ThreadPool* pool) {
  const int64_t sh = g.sh, sw = g.sw, phases = sh * sw, halo = (g.KH - 1) * g.dh / sh;
  const int64_t Hq = out_rows + halo, Wq = staged_width(g);
  // (+ 8: the tiles read no further than the plane's last column, but keep each plane's start on a vector)
  const int64_t plane = ((plane_rows + halo) * Wq + 7) / 8 * 8, channel = phases * plane;
  std::vector<float>& staging = staging_buffer();
  if (staging.size() < static_cast<size_t>(g.C * channel)) staging.resize(static_cast<size_t>(g.C * channel));
  float* xp = staging.data();
  auto stage = [&](int64_t c0, int64_t c1) {
    for (int64_t c = c0; c < c1; ++c) {
      const float* s = x + c * g.H * g.W;
      for (int64_t ph = 0; ph < phases; ++ph) {
        const int64_t a = ph / sw, b = ph % sw;
        float* d = xp + c * channel + ph * plane;
        // phase column j reads input column j * sw + b - pl: the columns [j0, j1) are inside the input
        const int64_t j0 = std::min(Wq, std::max<int64_t>(0, (g.pl - b + sw - 1) / sw));
        const int64_t j1 = std::max(j0, std::min(Wq, (g.W + g.pl - b + sw - 1) / sw));
        for (int64_t i = 0; i < Hq; ++i) {
          float* row = d + i * Wq;
          const int64_t ih = (i + oh0) * sh + a - g.pt;
          if (ih < 0 || ih >= g.H) {
            std::fill(row, row + Wq, 0.f);
            continue;
          }
          std::fill(row, row + j0, 0.f);
          const float* src = s + ih * g.W + j0 * sw + b - g.pl;
          if (sw == 1) std::copy(src, src + (j1 - j0), row + j0);
          else
            for (int64_t j = 0; j < j1 - j0; ++j) row[j0 + j] = src[j * sw];
          std::fill(row + j1, row + Wq, 0.f);
        }
        std::fill(d + Hq * Wq, d + plane, 0.f);
      }
    }
  };
  if (pool && g.C * channel >= (int64_t{1} << 16)) pool->parallel_for(g.C, 1, stage);
  else stage(0, g.C);
  std::vector<int64_t> offs(static_cast<size_t>(g.C * g.KH * g.KW));
  for (int64_t c = 0; c < g.C; ++c)
    for (int64_t kh = 0; kh < g.KH; ++kh)
      for (int64_t kw = 0; kw < g.KW; ++kw) {
        const int64_t r = kh * g.dh, q = kw * g.dw;
        offs[static_cast<size_t>((c * g.KH + kh) * g.KW + kw)] =
            c * channel + ((r % sh) * sw + q % sw) * plane + (r / sh) * Wq + q / sw;
      }
  return {xp, std::move(offs)};
}

// A large layer's staging is not kept by the thread after the call.
void release_large_staging() {
  std::vector<float>& staging = staging_buffer();
  if (staging.capacity() * sizeof(float) > (size_t{64} << 20)) std::vector<float>().swap(staging);
}

// run_in_bands (nn_conv_bands.h) with this file's staging.
template <class BandOf, class Work>
void in_bands(const DirectConv& g, const float* x, ThreadPool& pool, BandOf band, Work work) {
  auto stage = [&](int64_t oh0, int64_t rows, int64_t most_rows) {
    return stage_input(g, x, oh0, rows, most_rows, nullptr);
  };
  run_in_bands(pool, band, stage, work, [] { release_large_staging(); });
}

}  // namespace

int direct_conv_lanes_avx2(int64_t M) { return 8 * block_vectors(M); }

void conv_direct_avx2(const DirectConv& g, const float* x, const float* wpacked, float* y, const TileEpilogue& epi,
                      ThreadPool* pool) {
  const int64_t Wq = staged_width(g), steps = g.C * g.KH * g.KW, P = g.OH * g.OW;
  const int64_t lanes = direct_conv_lanes_avx2(g.M), nz = lanes / 8, blocks = (g.M + lanes - 1) / lanes;
  const int rmax = kMaxRows(static_cast<int>(nz));
  const TileFn* table = kTiles[static_cast<size_t>(nz - 1)].data();
  // Chunks: whole output rows, as many as fit in kChunk positions, or an even share of a row wider than that;
  // their count rounded up to a multiple of the threads (the rows dealt out evenly).
  const int64_t threads = pool ? pool->size() : 1;
  const int64_t row_shares = (g.OW + kChunk - 1) / kChunk;  // chunks per output row (1 unless wider)
  const int64_t rows_per_chunk = std::max<int64_t>(1, kChunk / g.OW);
  int64_t chunks = row_shares > 1 ? g.OH * row_shares : (g.OH + rows_per_chunk - 1) / rows_per_chunk;
  if (row_shares == 1 && !(chunks == 1 && blocks >= threads))
    chunks = std::min(g.OH, (chunks + threads - 1) / threads * threads);
  auto chunk_at = [&](int64_t ci) -> std::pair<int64_t, int64_t> {  // chunk -> (first position, positions)
    if (row_shares == 1) {
      const int64_t r0 = ci * g.OH / chunks, r1 = (ci + 1) * g.OH / chunks;
      return {r0 * g.OW, (r1 - r0) * g.OW};
    }
    const int64_t oh = ci / row_shares, share = ci % row_shares;
    const int64_t a = share * g.OW / row_shares, b = (share + 1) * g.OW / row_shares;
    return {oh * g.OW + a, b - a};
  };
  std::vector<float> bias_lanes;  // the bias of the last block's padded channels: 0
  if (g.bias) {
    bias_lanes.assign(static_cast<size_t>(blocks * lanes), 0.f);
    std::copy(g.bias, g.bias + g.M, bias_lanes.begin());
  }
  const int64_t most_steps = std::max<int64_t>(1, kPieceBytes / (lanes * static_cast<int64_t>(sizeof(float))));
  const int64_t pieces = (steps + most_steps - 1) / most_steps, piece = (steps + pieces - 1) / pieces;
  // Work items: one chunk of positions for one block of channels, blocks inner (a chunk's input rows stay in
  // cache across the blocks). Items [b, e) over the staged rows `in` of the output rows from oh0 on.
  auto body = [&](int64_t b, int64_t e, const Staged& in, int64_t oh0) {
    alignas(32) float acc[kChunk * kMaxLanes];
    for (int64_t item = b; item < e; ++item) {
      const int64_t mb = item % blocks;
      const auto [p0, n] = chunk_at(item / blocks);
      const int64_t m0 = mb * lanes, valid = std::min(lanes, g.M - m0);
      const float* wb = wpacked + mb * steps * lanes;
      for (int64_t s0 = 0; s0 < steps; s0 += piece) {
        const int64_t ns = std::min(piece, steps - s0);
        const bool last = s0 + ns == steps;
        const float* bias = g.bias && last ? bias_lanes.data() + m0 : nullptr;
        const RegisterAct act = last ? g.act : RegisterAct{};
        // each output row of the chunk in tiles of at most rmax positions, evened out
        for (int64_t r = 0; r < n;) {
          const int64_t oh = (p0 + r) / g.OW, ow = (p0 + r) % g.OW, len = std::min(g.OW - ow, n - r);
          const float* base = in.xp + (oh - oh0) * Wq + ow;
          const int64_t tiles = (len + rmax - 1) / rmax;
          for (int64_t t = 0, t0 = 0; t < tiles; ++t) {
            const int64_t count = (len - t0) / (tiles - t);
            table[static_cast<size_t>(count - 1)](base + t0, in.offs.data() + s0, ns, wb + s0 * lanes, bias, act,
                                                  s0 > 0, acc + (r + t0) * lanes, lanes);
            t0 += count;
          }
          r += len;
        }
      }
      // into the planes 8 positions x 8 channels at a time
      float* dst = y + m0 * P + p0;
      for (int64_t l0 = 0; l0 < valid; l0 += 8) {
        const int64_t nl = std::min<int64_t>(8, valid - l0);
        for (int64_t i0 = 0; i0 < n; i0 += 8) {
          const int64_t ni = std::min<int64_t>(8, n - i0);
          __m256 v[8];
          for (int64_t i = 0; i < 8; ++i)
            v[i] = i < ni ? _mm256_loadu_ps(acc + (i0 + i) * lanes + l0) : _mm256_setzero_ps();
          transpose8x8(v);
          if (ni == 8) {
            for (int64_t l = 0; l < nl; ++l) _mm256_storeu_ps(dst + (l0 + l) * P + i0, v[l]);
          } else {
            const __m256i keep = _mm256_cmpgt_epi32(_mm256_set1_epi32(static_cast<int>(ni)),
                                                    _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
            for (int64_t l = 0; l < nl; ++l) _mm256_maskstore_ps(dst + (l0 + l) * P + i0, keep, v[l]);
          }
        }
      }
      if (epi.apply) epi.apply(epi.ctx, m0, valid, p0, n, dst, P);
    }
  };
  // With several threads and enough chunks, each thread takes a band of consecutive chunks (every block of
  // them) and stages the input rows of its band itself (no staged line goes from one core's cache to the
  // other's); otherwise the input is staged once and the items shared out.
  const int64_t items = chunks * blocks;
  if (threads > 1 && chunks >= 2 * threads && chunks % threads == 0) {
    auto band = [&](int64_t k) {  // chunks [c0, c1) and the output rows they cover
      const int64_t c0 = k * chunks / threads, c1 = (k + 1) * chunks / threads;
      return Band{c0, c1, chunk_at(c0).first / g.OW,
                  (chunk_at(c1 - 1).first + chunk_at(c1 - 1).second - 1) / g.OW + 1};
    };
    in_bands(g, x, *pool, band,
             [&](const Band& bd, const Staged& in) { body(bd[0] * blocks, bd[1] * blocks, in, bd[2]); });
  } else {
    const Staged in = stage_input(g, x, 0, g.OH, g.OH, pool);
    if (threads > 1 && items > 1) pool->parallel_for(items, 1, [&](int64_t b, int64_t e) { body(b, e, in, 0); });
    else body(0, items, in, 0);
    release_large_staging();
  }
}

void conv_direct_lanes_avx2(const DirectConv& g, const float* x, const float* wpacked, float* y,
                            const TileEpilogue& epi, ThreadPool* pool) {
  // conv_direct_lanes_avx512's method with tiles of kPointwiseTileAvx2 flat positions (pointwise_tile_offs_avx2):
  // the Wq - OW columns past each output row are computed and dropped, each output written once, finished.
  constexpr int64_t kTile = kPointwiseTileAvx2;
  const int64_t steps = g.C * g.KH * g.KW, P = g.OH * g.OW, Wq = staged_width(g);
  const int64_t blocks = (g.M + kPointwiseRows - 1) / kPointwiseRows;
  const int64_t Q = (g.OH - 1) * Wq + g.OW, tiles = (Q + kTile - 1) / kTile;
  // Work items: a span of tiles (about 48 KiB of staged input, kept in L2) for one block of channels, blocks
  // inner; an item writes its block's planes front to back.
  // (8, 16 or 48 KiB a span ran SqueezeNet's 16 -> 64 and 3x3 stems alike)
  const int64_t span = std::max<int64_t>(1, (int64_t{48} << 10) / (g.C * g.sh * g.sw * kTile * 4));
  auto out_index = [&](int64_t q) { return q / Wq * g.OW + std::min(q % Wq, g.OW); };
  auto items_of = [&](int64_t ta, int64_t tb) { return (tb - ta + span - 1) / span * blocks; };
  // items [b, e) of tiles [ta, tb), over the staged rows `in` of output rows from oh0 on
  auto run = [&](int64_t ta, int64_t tb, int64_t b, int64_t e, const Staged& in, int64_t oh0) {
    // where each tile of the current span puts its outputs, once for all blocks (per thread: no allocation per run)
    thread_local std::vector<FlatTile8> lanes;
    lanes.clear();
    int64_t lanes_t0 = -1;
    for (int64_t item = b; item < e; ++item) {
      const int64_t mb = item % blocks, t0 = ta + item / blocks * span, t1 = std::min(tb, t0 + span);
      const int64_t m0 = mb * kPointwiseRows, rows = std::min(kPointwiseRows, g.M - m0);
      if (t0 != lanes_t0) {
        lanes.clear();
        for (int64_t q0 = t0 * kTile, qr = q0 / Wq, qc = q0 % Wq; q0 < t1 * kTile; q0 += kTile) {
          // (the lanes of a span's last tile are not stored past its outputs: the next span may be another
          // thread's, and the map's last tile ends the planes; nor where the next tile may hold fewer than 8
          // outputs, more than 8 of its 16 lanes dropped)
          const bool spill = q0 + kTile < t1 * kTile && Wq - g.OW <= 8;
          lanes.push_back(flat_tile8(FlatRows{Wq, g.OW, qr, qc}, std::min(kTile, Q - q0), spill));
          for (qc += kTile; qc >= Wq; qc -= Wq) ++qr;
        }
        lanes_t0 = t0;
      }
      for (int64_t t = t0; t < t1; ++t) {
        const int64_t q0 = t * kTile;
        pointwise_tile_offs_avx2(in.xp + q0 - oh0 * Wq, in.offs.data(), steps, wpacked + mb * steps * kPointwiseRows,
                                 rows, std::min(kTile, Q - q0), g.bias ? g.bias + m0 : nullptr, g.act, y + m0 * P, P,
                                 lanes[static_cast<size_t>(t - t0)]);
      }
      const int64_t p0 = out_index(t0 * kTile), p1 = out_index(std::min(Q, t1 * kTile));
      if (epi.apply && p1 > p0) epi.apply(epi.ctx, m0, rows, p0, p1 - p0, y + m0 * P + p0, P);
    }
  };
  // With several threads, bands of tiles, each thread staging the rows its band reads (see conv_direct_avx2).
  const int64_t threads = pool ? pool->size() : 1;
  if (threads > 1 && tiles >= 4 * threads) {
    // tiles [ta, tb) of band k and the output rows their lanes read from (one row more: the dropped lanes past a
    // row's outputs read on into the next staged row)
    auto band = [&](int64_t k) {
      const int64_t ta = k * tiles / threads, tb = (k + 1) * tiles / threads;
      return Band{ta, tb, ta * kTile / Wq, std::min(g.OH, (std::min(Q, tb * kTile) - 1) / Wq + 2)};
    };
    in_bands(g, x, *pool, band,
             [&](const Band& bd, const Staged& in) { run(bd[0], bd[1], 0, items_of(bd[0], bd[1]), in, bd[2]); });
  } else {
    const Staged in = stage_input(g, x, 0, g.OH, g.OH, pool);
    const int64_t items = items_of(0, tiles);
    if (threads > 1 && items > 1)
      pool->parallel_for(items, 1, [&](int64_t b, int64_t e) { run(0, tiles, b, e, in, 0); });
    else run(0, tiles, 0, items, in, 0);
    release_large_staging();
  }
}

}  // namespace nn
}  // namespace mrt
