// Direct 2-D convolution on AVX-512, in the NCHW layout, without im2col: an implicit GEMM with output
// positions as rows and output channels as vector lanes.
//
// The input planes are copied once into zero-padded planes. With stride 1, in a padded plane of width
// Wp the output position (oh, ow) reads the input at oh * Wp + ow + kh * dh * Wp + kw * dw: every kernel
// tap is a fixed offset from the position's base. A stride s is brought back to that case by splitting each
// padded plane into s_h x s_w phase planes (rows i * s_h + a, columns j * s_w + b): tap (kh, kw) reads
// phase ((kh * dh) % s_h, (kw * dw) % s_w) at the offset ((kh * dh) / s_h) * Wq + (kw * dw) / s_w.
// A tile is R output positions (any R of them, each with its base pointer) by 16 x NZ output channels: per
// (channel, tap) step, R input values are broadcast against NZ vectors of filter values, R x NZ fused
// multiply-adds. Every lane is a real output whatever the plane's width (a 7x7 map wastes nothing), and no
// column matrix is written or read, which is what the im2col + GEMM path costs when the layer has few output
// channels (DenseNet's 32) or few input channels (every network's first layer).
// The tiles of a chunk of positions write rows [position][channel] to a small buffer, transposed 16 x 16 into
// the output planes, where the rest of the output stage runs on the chunk while it is in cache.
#include <immintrin.h>

#include <algorithm>
#include <array>
#include <cstring>
#include <utility>
#include <vector>

#include "../gemm/sgemm.h"
#include "../threadpool.h"
#include "direct_tiles.h"
#include "nn_conv_bands.h"
#include "transpose16_avx512.h"
#include "nn_geometry.h"

namespace mrt {
namespace nn {
namespace {

// A row tile (kRow) takes R consecutive positions of one output row: their bases in the staged planes are
// consecutive too, so one base pointer and constant displacements address all of them. With no base pointer per
// position the tile can be taller: up to kRowTileRows(NZ) positions for one or two vectors of channels, where the
// filter loads per multiply-add limit the pointer tile (3x3 128 -> 32 on 56x56, alone: 182 GFLOP/s with 8
// positions, 218 with 14; 16 -> 1 vector: 126 -> 186). GCC unrolls at most 16 rows, hence the cap. With four
// vectors the freed registers hold a seventh position's accumulators (28, the filters in the other 4, the
// broadcasts folded into the multiply-adds): 192 -> 201 GFLOP/s on 3x3 128 -> 64 rows of 56.
constexpr int kRowTileRows(int nz) { return nz == 1 ? 16 : nz == 2 ? 14 : nz == 4 ? 7 : 8; }
constexpr int kRowTileMaxRows = 16;

// acc[r] = position r's sums for 16 x NZ channels over `steps` (channel, tap) steps; rows[r]: position r's
// base in the staged planes (for a row tile: rows[0] only, position r's is rows[0] + r), offs: each step's offset
// from a base, w: the block's filters (per step, NZ x 16 values), then + bias (16 x NZ values, or null) and the
// activation `act` (none on a part sum), stored as row r of `out`. With `resume` the sums start from row r of
// `out` (a part sum over earlier steps) instead of 0: the same additions in the same order as one call over all
// the steps. The first `ahead` steps each fetch one line from `next` on into L2 (filters the item needs next).
template <int R, int NZ, bool kRow>
MRT_DIRECT_TILE void tile(const float* const* rows, const int64_t* offs, int64_t steps, const float* w,
                          const float* bias, const RegisterAct& act, bool resume, float* out, int64_t ldo,
                          const char* next, int64_t ahead) {
  static_assert(NZ >= 1 && NZ <= 4 && R >= 1 && R <= (kRow ? kRowTileRows(NZ) : direct::max_rows(NZ)), "tile shape");
  // one named array per vector column: GCC keeps these in registers (a 2-D array was spilled)
  __m512 a0[R], a1[R], a2[R], a3[R];
#pragma GCC unroll 16
  for (int r = 0; r < R; ++r) {
    const float* o = out + r * ldo;
    a0[r] = resume ? _mm512_loadu_ps(o) : _mm512_setzero_ps();
    if constexpr (NZ > 1) a1[r] = resume ? _mm512_loadu_ps(o + 16) : _mm512_setzero_ps();
    if constexpr (NZ > 2) a2[r] = resume ? _mm512_loadu_ps(o + 32) : _mm512_setzero_ps();
    if constexpr (NZ > 3) a3[r] = resume ? _mm512_loadu_ps(o + 48) : _mm512_setzero_ps();
  }
  const float* p[kRow ? 1 : R];
  for (int r = 0; r < (kRow ? 1 : R); ++r) p[r] = rows[r];
  for (int64_t s = 0; s < steps; ++s, w += NZ * 16) {
    const int64_t o = offs[s];
    const float* q = p[0] + o;  // a row tile's first position
    if (s < ahead) _mm_prefetch(next + s * 64, _MM_HINT_T1);
    const __m512 b0 = _mm512_loadu_ps(w);
    __m512 b1 = b0, b2 = b0, b3 = b0;
    if constexpr (NZ > 1) b1 = _mm512_loadu_ps(w + 16);
    if constexpr (NZ > 2) b2 = _mm512_loadu_ps(w + 32);
    if constexpr (NZ > 3) b3 = _mm512_loadu_ps(w + 48);
    for (int r = 0; r < R; ++r) {
      const __m512 a = _mm512_set1_ps(kRow ? q[r] : p[r][o]);
      a0[r] = _mm512_fmadd_ps(a, b0, a0[r]);
      if constexpr (NZ > 1) a1[r] = _mm512_fmadd_ps(a, b1, a1[r]);
      if constexpr (NZ > 2) a2[r] = _mm512_fmadd_ps(a, b2, a2[r]);
      if constexpr (NZ > 3) a3[r] = _mm512_fmadd_ps(a, b3, a3[r]);
    }
  }
  // The output stage compiled per activation and for a bias or none, its loops unrolled so that the sums stay in
  // registers (a rolled loop over them stored all of them to memory and loaded them back, with the activation and
  // the bias tested for each vector).
  const __m512 zero = _mm512_setzero_ps(), vlo = _mm512_set1_ps(act.lo), vhi = _mm512_set1_ps(act.hi);
  auto stage = [&](auto act_kind, auto with_bias) __attribute__((always_inline)) {
    constexpr auto kAct = decltype(act_kind)::value;
    constexpr bool kBias = decltype(with_bias)::value;
    // + bias, then the activation with the operands in the order of the output stage's (same result for a NaN)
    auto finish = [&](__m512 v, int z) __attribute__((always_inline)) {
      if constexpr (kBias) v = _mm512_add_ps(v, _mm512_loadu_ps(bias + 16 * z));
      if constexpr (kAct == RegisterAct::kRelu) return _mm512_max_ps(v, zero);
      if constexpr (kAct == RegisterAct::kClip) return _mm512_min_ps(vhi, _mm512_max_ps(vlo, v));
      return v;
    };
#pragma GCC unroll 16
    for (int r = 0; r < R; ++r) {
      float* o = out + r * ldo;
      _mm512_storeu_ps(o, finish(a0[r], 0));
      if constexpr (NZ > 1) _mm512_storeu_ps(o + 16, finish(a1[r], 1));
      if constexpr (NZ > 2) _mm512_storeu_ps(o + 32, finish(a2[r], 2));
      if constexpr (NZ > 3) _mm512_storeu_ps(o + 48, finish(a3[r], 3));
    }
  };
  with_output_stage(act, bias != nullptr, stage);
}

template <int R, int NZ>
struct Tile {
  static constexpr auto fn = &tile<R, NZ, false>;
};
constexpr auto kTiles = direct::tile_table<Tile>();  // kTiles[NZ - 1][R - 1]

using TileFn = decltype(&tile<1, 1, false>);
template <int NZ, size_t... I>
constexpr std::array<TileFn, kRowTileMaxRows> row_tiles(std::index_sequence<I...>) {
  return {&tile<(int(I) + 1 < kRowTileRows(NZ) ? int(I) + 1 : kRowTileRows(NZ)), NZ, true>...};
}
// kRowTiles[NZ - 1][R - 1] (R past kRowTileRows(NZ): never called; NZ = 3 takes pointer tiles, row_tile_min)
using RowTiles = std::array<TileFn, kRowTileMaxRows>;
constexpr auto kRows16 = std::make_index_sequence<kRowTileMaxRows>();
constexpr std::array<RowTiles, 4> kRowTiles{row_tiles<1>(kRows16), row_tiles<2>(kRows16), row_tiles<3>(kRows16),
                                            row_tiles<4>(kRows16)};

// Row tiles for a map whose rows split into tiles of at least this many positions, per block width (0: never).
// One or two vectors: 10 (7 x 7 maps keep the pointer tiles of 8 positions, two rows in one: 200 against 185
// GFLOP/s); four: 6, the pointer tiles' own height, on maps of one chunk only (7 x 7: four 3x3 512 -> 512 5.08
// -> 4.85 ms). On larger maps chunks of whole rows end inside a line of the output planes, which the threads
// working on neighbouring chunks then both write (3x3 64 -> 128 stride 2 to 28 x 28 at 2 threads: 0.36 -> 0.40).
constexpr int64_t row_tile_min(int nz) { return nz <= 2 ? 10 : nz == 4 ? 6 : 0; }

// Bytes of a block's filters per piece of steps (see conv_direct_avx512).
constexpr int64_t kDirectPieceBytes = int64_t{192} << 10;

}  // namespace

int direct_conv_lanes(int64_t M) { return 16 * direct::block_vectors(M); }

namespace {

// The width of a staged (phase) plane: the columns the output columns reach.
int64_t staged_width(const DirectConv& g) { return g.OW + (g.KW - 1) * g.dw / g.sw; }

// The input planes of both direct kernels, copied into zero-padded (phase) planes of staged_width(g) columns
// (Wq), and the offset of each (channel, tap) step from a position's base: position (oh, ow) has its base at
// xp + oh * Wq + ow.
struct StagedInput {
  const float* xp;
  std::vector<int64_t> offs;
};

std::vector<float>& staging_buffer() {
  static thread_local std::vector<float> staging;
  return staging;
}

// kept between runs while small; a large layer's staging is not held by the thread afterwards
void release_large_staging() {
  std::vector<float>& staging = staging_buffer();
  if (staging.capacity() * sizeof(float) > (size_t{64} << 20)) std::vector<float>().swap(staging);
}

// The rows that output rows [oh0, oh0 + out_rows) read (all of them by default), in planes sized for
// `plane_rows` output rows, so that the bands of one layer (conv_direct_avx512) share the step offsets. Position
// (oh, ow) has its base at xp + (oh - oh0) * Wq + ow.
StagedInput stage_input(const DirectConv& g, const float* x, ThreadPool* pool, int64_t oh0 = 0, int64_t out_rows = -1,
                        int64_t plane_rows = -1) {
  const int64_t sh = g.sh, sw = g.sw, phases = sh * sw, halo = (g.KH - 1) * g.dh / sh;
  if (out_rows < 0) out_rows = g.OH;
  if (plane_rows < out_rows) plane_rows = out_rows;
  // each phase plane: the rows and columns the outputs reach
  const int64_t Hq = out_rows + halo, Wq = staged_width(g);
  const int64_t plane = ((plane_rows + halo) * Wq + 15) / 16 * 16, channel = phases * plane;
  std::vector<float>& staging = staging_buffer();
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
          const int64_t ih = (i + oh0) * sh + a - g.pt;
          if (ih < 0 || ih >= g.H) {
            std::fill(row, row + Wq, 0.f);
            continue;
          }
          if (sw == 1) {  // the padding and the row in one pass of vectors (rows are short: 28 floats on 28 x 28)
            const float* from = s + ih * g.W - g.pl;  // column j reads from[j], for j in [j0, j1)
            for (int64_t t = 0; t < Wq; t += 16) {
              const __mmask16 inside = static_cast<__mmask16>(direct::first16(std::max<int64_t>(0, j1 - t)) &
                                                              ~direct::first16(std::max<int64_t>(0, j0 - t)));
              _mm512_mask_storeu_ps(row + t, direct::first16(Wq - t), _mm512_maskz_loadu_ps(inside, from + t));
            }
            continue;
          }
          std::fill(row, row + j0, 0.f);
          const float* src = s + ih * g.W + j0 * sw + b - g.pl;
          if (sw == 2) {  // every other float, 16 at a time from 32 (loads masked to the row's last read)
            const __m512i even = _mm512_set_epi32(30, 28, 26, 24, 22, 20, 18, 16, 14, 12, 10, 8, 6, 4, 2, 0);
            const int64_t m = j1 - j0, last = 2 * (m - 1);  // the last float read
            for (int64_t t = 0; t < m; t += 16) {
              const int64_t avail = last - 2 * t + 1;  // floats from src + 2t on that are read
              const __mmask16 m0 = avail >= 16 ? __mmask16(0xFFFF) : static_cast<__mmask16>((1u << avail) - 1);
              const __mmask16 m1 = avail >= 32 ? __mmask16(0xFFFF)
                                   : avail <= 16 ? __mmask16(0)
                                                 : static_cast<__mmask16>((1u << (avail - 16)) - 1);
              const __m512 v = _mm512_permutex2var_ps(_mm512_maskz_loadu_ps(m0, src + 2 * t), even,
                                                      _mm512_maskz_loadu_ps(m1, src + 2 * t + 16));
              const int64_t n = std::min<int64_t>(16, m - t);
              _mm512_mask_storeu_ps(row + j0 + t, n >= 16 ? __mmask16(0xFFFF) : static_cast<__mmask16>((1u << n) - 1), v);
            }
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

  const int64_t taps = g.KH * g.KW, steps = g.C * taps;
  std::vector<int64_t> offs(static_cast<size_t>(steps));  // offset of each (channel, tap) step from a base
  for (int64_t c = 0; c < g.C; ++c)
    for (int64_t kh = 0; kh < g.KH; ++kh)
      for (int64_t kw = 0; kw < g.KW; ++kw) {
        const int64_t r = kh * g.dh, q = kw * g.dw;
        offs[static_cast<size_t>((c * g.KH + kh) * g.KW + kw)] =
            c * channel + ((r % sh) * sw + q % sw) * plane + (r / sh) * Wq + q / sw;
      }
  return {xp, std::move(offs)};
}

// run_in_bands (nn_conv_bands.h) with this file's staging.
template <class BandOf, class Work>
void in_bands(const DirectConv& g, const float* x, ThreadPool& pool, BandOf band, Work work) {
  auto stage = [&](int64_t oh0, int64_t rows, int64_t most_rows) {
    return stage_input(g, x, nullptr, oh0, rows, most_rows);
  };
  run_in_bands(pool, band, stage, work, [] { release_large_staging(); });
}

}  // namespace

void conv_direct_avx512(const DirectConv& g, const float* x, const float* wpacked, float* y,
                        const TileEpilogue& epi, ThreadPool* pool) {
  const int64_t Wq = staged_width(g), taps = g.KH * g.KW, steps = g.C * taps;
  const int64_t lanes = direct_conv_lanes(g.M), nz = lanes / 16, blocks = (g.M + lanes - 1) / lanes;
  const int rmax = direct::max_rows(static_cast<int>(nz)), row_cap = kRowTileRows(static_cast<int>(nz));
  const int64_t P = g.OH * g.OW;
  // With row tiles, a chunk is whole output rows (as many as fit in kChunk positions), or an even share of one
  // row wider than that; otherwise kChunk consecutive positions, whose pointer tiles may span rows.
  const int64_t row_min = row_tile_min(static_cast<int>(nz));
  const bool by_rows = row_min > 0 && g.OW >= row_min && g.OW / ((g.OW + row_cap - 1) / row_cap) >= row_min &&
                       (nz != 4 || P <= direct::kChunk);
  const int64_t threads = pool ? pool->size() : 1;
  // Chunks of whole output rows (by_rows, rows no wider than kChunk) or of whole tiles of rmax positions, as
  // many as their kChunk-position cap needs, then a multiple of the threads, the rows or tiles dealt out evenly:
  // 14 x 14 positions in chunks of 64 were 64 + 64 + 64 + 4, whose two bands (128 and 68 positions) ran 3x3
  // 256 -> 256 stride 2 at 2 threads 1.48x faster than at 1, and every 64 was 11 tiles of 5 or 6 positions.
  // A single chunk stays single where its blocks of channels are work for every thread: each chunk streams all
  // the filters (3x3 512 -> 512 on 7 x 7, 9.4 MB of them, is bound by that).
  const int64_t rows_per_chunk = std::max<int64_t>(1, direct::kChunk / std::max<int64_t>(1, g.OW));
  const int64_t row_shares = (g.OW + direct::kChunk - 1) / direct::kChunk;  // chunks per row when wider
  const int64_t units = by_rows ? g.OH : (P + rmax - 1) / rmax;  // rows, or tiles (the last one short)
  const int64_t units_per_chunk = by_rows ? rows_per_chunk : direct::kChunk / rmax;
  auto dealt = [&](int64_t n) {
    return n == 1 && blocks >= threads ? n : std::min(units, (n + threads - 1) / threads * threads);
  };
  const int64_t chunks = by_rows && g.OW > direct::kChunk ? g.OH * row_shares
                                                          : dealt((units + units_per_chunk - 1) / units_per_chunk);
  // chunk -> (first position, positions)
  auto chunk_at = [&](int64_t ci) -> std::pair<int64_t, int64_t> {
    const int64_t u0 = ci * units / chunks, u1 = (ci + 1) * units / chunks;
    if (!by_rows) return {u0 * rmax, std::min(P, u1 * rmax) - u0 * rmax};
    if (g.OW <= direct::kChunk) return {u0 * g.OW, (u1 - u0) * g.OW};
    const int64_t oh = ci / row_shares, share = ci % row_shares;
    const int64_t a = share * g.OW / row_shares, b = (share + 1) * g.OW / row_shares;
    return {oh * g.OW + a, b - a};
  };
  // the tiles of a chunk's n positions: fn(first, count), rows split evenly into row tiles when by_rows
  auto for_each_chunk_tile = [&](int64_t p0, int64_t n, auto&& fn) {
    if (!by_rows) return direct::for_each_tile(n, rmax, fn);
    for (int64_t r = 0; r < n;) {
      const int64_t len = std::min(g.OW - (p0 + r) % g.OW, n - r), at = r;
      direct::for_each_tile(len, row_cap, [&](int64_t r0, int64_t R) { fn(at + r0, R); });
      r += len;
    }
  };
  const TileFn* table = by_rows ? kRowTiles[static_cast<size_t>(nz - 1)].data()
                                : kTiles[static_cast<size_t>(nz - 1)].data();
  // the bias of the padded channels of the last block: 0
  std::vector<float> bias_lanes;
  if (g.bias) {
    bias_lanes.assign(static_cast<size_t>(blocks * lanes), 0.f);
    std::copy(g.bias, g.bias + g.M, bias_lanes.begin());
  }
  // The steps in pieces whose filters stay in L2 while every tile of the chunk runs over them: a block's
  // filters are streamed once per tile, and a wide layer's (3x3 512 -> 512: 1.2 MB for 64 channels) would
  // otherwise come from L3 for each tile (with 2 threads on 7x7 maps, the layer was L3-bound).
  const int64_t most_steps = kDirectPieceBytes / (lanes * static_cast<int64_t>(sizeof(float)));
  const int64_t pieces = (steps + most_steps - 1) / most_steps, piece = (steps + pieces - 1) / pieces;  // evened out
  // Work items: one chunk of positions for one block of channels; chunks outer, blocks inner, so a chunk's
  // input rows stay in cache across the blocks.
  // The lines an item writes: up to `lanes` planes, each a run of at most kChunk floats.
  auto item_lines = [&](int64_t item, auto&& fn) {
    const int64_t mb = item % blocks;
    const auto [p0, n] = chunk_at(item / blocks);
    const int64_t m0 = mb * lanes, valid = std::min(lanes, g.M - m0);
    for (int64_t l = 0; l < valid; ++l) {
      const uintptr_t first = reinterpret_cast<uintptr_t>(y + (m0 + l) * P + p0) & ~uintptr_t{63};
      const uintptr_t end = reinterpret_cast<uintptr_t>(y + (m0 + l) * P + p0 + n);
      for (uintptr_t a = first; a < end; a += 64) fn(reinterpret_cast<const char*>(a));
    }
  };
  // items [b, e) over the staged rows `in` of output rows from oh0 on
  auto body = [&](int64_t b, int64_t e, const StagedInput& in, int64_t oh0) {
    const float* xp = in.xp;
    const std::vector<int64_t>& offs = in.offs;
    alignas(64) float acc[direct::kChunk * direct::kMaxLanes];
    const float* rows[direct::kChunk];  // each position's base in the staged planes
    const char* ahead[direct::kMaxLanes * (direct::kChunk / 16 + 1)];
    for (int64_t item = b; item < e; ++item) {
      const int64_t mb = item % blocks;
      const auto [p0, n] = chunk_at(item / blocks);
      const int64_t m0 = mb * lanes, valid = std::min(lanes, g.M - m0);
      for (int64_t r = 0, oh = p0 / g.OW, ow = p0 % g.OW; r < n; ++r) {  // (no division per position)
        rows[r] = xp + (oh - oh0) * Wq + ow;
        if (++ow == g.OW) ow = 0, ++oh;
      }
      // The next item's output lines are fetched into L2 while this one computes, a share after each tile: its
      // stores go to as many planes as it has channels, more write streams than the hardware prefetcher follows,
      // and an output larger than L2 (3 -> 64 channels on 111 x 111: 3.2 MB) otherwise waits on every line.
      int64_t n_ahead = 0, next_ahead = 0;
      if (item + 1 < e) item_lines(item + 1, [&](const char* line) { ahead[n_ahead++] = line; });
      int64_t chunk_tiles = 0;
      for_each_chunk_tile(p0, n, [&](int64_t, int64_t) { ++chunk_tiles; });
      const int64_t tiles = chunk_tiles * pieces;
      const int64_t per_tile = (n_ahead + tiles - 1) / std::max<int64_t>(tiles, 1);
      for (int64_t s0 = 0; s0 < steps; s0 += piece) {
        const int64_t ns = std::min(piece, steps - s0);
        const bool last = s0 + ns == steps;
        // A layer of several pieces has filters larger than L2 can keep across the items (3x3 512 -> 512: 1.2 MB a
        // block), so each piece's came from L3 on its first tile, which waited on them. The tiles of a piece fetch
        // the next piece's filters (this block's, or the next item's first) into L2, a share each, one line per
        // step (4 such layers on 7x7: 5.80-6.14 -> 5.06-5.43 ms; onnxruntime 5.21).
        const char* next = nullptr;
        int64_t next_lines = 0;
        if (pieces > 1) {
          const int64_t nb = last ? (item + 1 < e ? (item + 1) % blocks : -1) : mb, ns0 = last ? 0 : s0 + ns;
          if (nb >= 0) {
            next = reinterpret_cast<const char*>(wpacked + (nb * steps + ns0) * lanes);
            next_lines = std::min(piece, steps - ns0) * lanes * static_cast<int64_t>(sizeof(float)) / 64;
          }
        }
        const int64_t share = std::min(ns, (next_lines + chunk_tiles - 1) / chunk_tiles);
        int64_t fetched = 0;
        for_each_chunk_tile(p0, n, [&](int64_t r0, int64_t R) {
          const int64_t lines = std::min(share, next_lines - fetched);
          table[static_cast<size_t>(R - 1)](
              rows + r0, offs.data() + s0, ns, wpacked + (mb * steps + s0) * lanes,
              g.bias && last ? bias_lanes.data() + m0 : nullptr, last ? g.act : RegisterAct{}, s0 > 0,
              acc + r0 * lanes, lanes, next + fetched * 64, lines);
          fetched += lines;
          for (int64_t k = 0; k < per_tile && next_ahead < n_ahead; ++k) _mm_prefetch(ahead[next_ahead++], _MM_HINT_T1);
        });
      }
      // into the planes 16 positions x 16 channels at a time
      float* dst = y + m0 * P + p0;
      for (int64_t l0 = 0; l0 < valid; l0 += 16) {
        const int64_t nl = std::min<int64_t>(16, valid - l0);
        for (int64_t i0 = 0; i0 < n; i0 += 16) {
          const int64_t ni = std::min<int64_t>(16, n - i0);
          __m512 v[16];
          for (int64_t i = 0; i < 16; ++i)
            v[i] = i < ni ? _mm512_loadu_ps(acc + (i0 + i) * lanes + l0) : _mm512_setzero_ps();
          transpose16(v);
          const __mmask16 keep = direct::first16(ni);
          for (int64_t l = 0; l < nl; ++l) _mm512_mask_storeu_ps(dst + (l0 + l) * P + i0, keep, v[l]);
        }
      }
      if (epi.apply) epi.apply(epi.ctx, m0, valid, p0, n, dst, P);
    }
  };
  // With several threads and enough chunks, each thread takes a band of consecutive chunks (every block of
  // them) and stages the input rows of its band itself. Staged by all threads and read by all, every line of the
  // staged input went from one core's cache to the other's on every run, both ways (the staging of the next run
  // writes where the other core read): on this 2-vCPU VM, 3x3 128 -> 32 on 28 x 28 took 0.47 ms at 2 threads
  // against 0.55 at 1, the staging alone 18 % of the samples. A band stages its halo rows again (2 of 16).
  const int64_t items = chunks * blocks;
  if (threads > 1 && chunks >= 2 * threads && (chunks % threads == 0 || chunks >= 4 * threads)) {
    auto band = [&](int64_t k) {  // chunks [c0, c1) and the output rows [oh0, oh1) they cover
      const int64_t c0 = k * chunks / threads, c1 = (k + 1) * chunks / threads;
      const int64_t first = chunk_at(c0).first, last = chunk_at(c1 - 1).first + chunk_at(c1 - 1).second - 1;
      return Band{c0, c1, first / g.OW, last / g.OW + 1};
    };
    in_bands(g, x, *pool, band,
             [&](const Band& bd, const StagedInput& in) { body(bd[0] * blocks, bd[1] * blocks, in, bd[2]); });
  } else {
    const StagedInput in = stage_input(g, x, pool);
    if (threads > 1 && items > 1) pool->parallel_for(items, 1, [&](int64_t b, int64_t e) { body(b, e, in, 0); });
    else body(0, items, in, 0);
    release_large_staging();  // (in_bands releases each band's own)
  }
}

void conv_direct_lanes_avx512(const DirectConv& g, const float* x, const float* wpacked, float* y,
                              const TileEpilogue& epi, ThreadPool* pool) {
  const int64_t steps = g.C * g.KH * g.KW, P = g.OH * g.OW, Wq = staged_width(g);
  const int64_t blocks = (g.M + kPointwiseRows - 1) / kPointwiseRows;
  // Tiles of 64 flat positions of the staged rows (FlatRows: the Wq - OW columns past each output row are
  // computed and dropped): against tiles of one output row, none is short at a row's end (55 outputs a row
  // took four vectors of 64 lanes, 57 flat positions take 3.6).
  // Work items: a span of tiles for one block of channels, blocks inner. A span's staged input (about 192 KiB)
  // stays in L2 for all the blocks, and an item writes its block's planes front to back: kRows streams. (Items
  // of one tile for every block wrote all the output planes at once: with the layer's output not in cache,
  // the 3 -> 64 stem on 224 x 224 went from 0.61 to 0.81 ms.)
  const int64_t Q = (g.OH - 1) * Wq + g.OW, tiles = (Q + 63) / 64;
  const int64_t span = std::max<int64_t>(1, (int64_t{48} << 10) / (g.C * g.sh * g.sw * 64));  // in tiles
  auto out_index = [&](int64_t q) { return q / Wq * g.OW + std::min(q % Wq, g.OW); };
  auto items_of = [&](int64_t ta, int64_t tb) { return (tb - ta + span - 1) / span * blocks; };
  // items [b, e) of tiles [ta, tb), over the staged rows `in` of output rows from oh0 on
  auto run = [&](int64_t ta, int64_t tb, int64_t b, int64_t e, const StagedInput& in, int64_t oh0) {
    // where each tile of the current span puts its outputs, worked out once for all the blocks (for the 27 steps
    // of a stem, working it out in every tile took 5 % of the layer)
    thread_local std::vector<FlatTile> lanes;  // per thread: no allocation per run
    lanes.clear();
    int64_t lanes_t0 = -1;
    for (int64_t item = b; item < e; ++item) {
      const int64_t mb = item % blocks, t0 = ta + item / blocks * span, t1 = std::min(tb, t0 + span);
      const int64_t m0 = mb * kPointwiseRows, rows = std::min(kPointwiseRows, g.M - m0);
      if (t0 != lanes_t0) {
        lanes.clear();
        // (t1 <= tiles: every q0 is below Q; the row and column of q0 stepped along, no division per tile)
        for (int64_t q0 = t0 * 64, qr = q0 / Wq, qc = q0 % Wq; q0 < t1 * 64; q0 += 64) {
          lanes.push_back(flat_tile(FlatRows{Wq, g.OW, qr, qc}, std::min<int64_t>(64, Q - q0)));
          for (qc += 64; qc >= Wq; qc -= Wq) ++qr;
        }
        lanes_t0 = t0;
      }
      for (int64_t t = t0; t < t1; ++t) {
        const int64_t q0 = t * 64;
        pointwise_tile_offs_avx512(in.xp + q0 - oh0 * Wq, in.offs.data(), steps, wpacked + mb * steps * kPointwiseRows,
                                   rows, std::min<int64_t>(64, Q - q0), g.bias ? g.bias + m0 : nullptr, g.act,
                                   y + m0 * P, P, lanes[static_cast<size_t>(t - t0)]);
      }
      const int64_t p0 = out_index(t0 * 64), p1 = out_index(std::min(Q, t1 * 64));
      if (epi.apply && p1 > p0) epi.apply(epi.ctx, m0, rows, p0, p1 - p0, y + m0 * P + p0, P);
    }
  };
  // With several threads, bands of tiles, each staging its own rows (see conv_direct_avx512): the 3 -> 64 stem
  // of SqueezeNet (3x3 stride 2 on 224 x 224) took longer at 2 threads than at 1 when both threads staged
  // and both read every row.
  const int64_t threads = pool ? pool->size() : 1;
  if (threads > 1 && tiles >= 4 * threads) {
    auto band = [&](int64_t k) {  // tiles [ta, tb) and the output rows [oh0, oh1) their lanes read from
      const int64_t ta = k * tiles / threads, tb = (k + 1) * tiles / threads;
      // (one row more: the dropped lanes past a row's outputs read on into the next staged row)
      return Band{ta, tb, ta * 64 / Wq, std::min(g.OH, (std::min(Q, tb * 64) - 1) / Wq + 2)};
    };
    in_bands(g, x, *pool, band,
             [&](const Band& bd, const StagedInput& in) { run(bd[0], bd[1], 0, items_of(bd[0], bd[1]), in, bd[2]); });
  } else {
    const StagedInput in = stage_input(g, x, pool);
    const int64_t items = items_of(0, tiles);
    if (threads > 1 && items > 1)
      pool->parallel_for(items, 1, [&](int64_t b, int64_t e) { run(0, tiles, b, e, in, 0); });
    else run(0, tiles, 0, items, in, 0);
    release_large_staging();  // (in_bands releases each band's own)
  }
}

}  // namespace nn
}  // namespace mrt
