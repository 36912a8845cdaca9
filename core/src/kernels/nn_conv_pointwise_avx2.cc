// Pointwise convolution on AVX2 + FMA (declared in nn_geometry.h), for CPUs without AVX-512: the method of
// nn_conv_pointwise_avx512.cc with vectors of 8 positions. A tile is 16 positions (two vectors) by 6 output
// channels: 12 sums, the two input vectors and one broadcast filter value within the 16 vector registers; per
// step k, 2 loads of input row k straight from its plane, 6 broadcasts and 12 fused multiply-adds, the ratio of
// the SGEMM's 6 x 16 AVX2 tile, but with no packed copy of the input and each output written once, finished.
// The same tile over a direct convolution's (channel, tap) steps (pointwise_tile_offs_avx2) makes
// conv_direct_lanes_avx2 (nn_conv_direct_avx2.cc).
#include <immintrin.h>

#include <algorithm>
#include <array>
#include <utility>
#include <vector>

#include "../threadpool.h"
#include "nn_geometry.h"

namespace mrt {
namespace nn {
namespace {

constexpr int kRows = static_cast<int>(kPointwiseRows);
constexpr int64_t kTile = kPointwiseTileAvx2;  // positions per tile (two vectors)
// Deeper inputs are copied a span at a time into rows of whole lines, read by every block of channels: a tile
// then reads one line per step instead of two (rows of P floats start anywhere in a line), from K rows at one
// fixed distance. Alone in light SqueezeNet, AMD Zen 3, 1 thread: 512 -> 1000 on 13 x 13 2216 -> 1960 us (the
// GEMM 2093, onnxruntime 1904), 256 -> 32 on 27 x 27 183 -> 170-176; shallower, the copy costs more than it
// saves (128 -> 16 on 55 x 55 173 -> 195, 16 -> 64 92 -> 106).
constexpr int64_t kCopyDepth = 128;
// Blocks of channels per work item, each tile of positions multiplied by all of them in turn while its input rows
// are in L1 (and written to 6 x 8 output planes). Alone, 1 thread, AMD Zen 3, against one block per item: 128 ->
// 512 on 28 x 28 1.05 -> 0.97 of the GEMM's time, 1024 -> 256 on 14 x 14 1.02 -> 0.97, 64 -> 256 on 56 x 56 1.08 ->
// 1.03; 24 -> 144 on 56 x 56 0.93 either way.
constexpr int64_t kGroupBlocks = 8;

// the lanes [0, n) of a vector (n clamped to 0..8)
inline __m256i first8(int64_t n) {
  const int k = static_cast<int>(std::clamp<int64_t>(n, 0, 8));
  return _mm256_cmpgt_epi32(_mm256_set1_epi32(k), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}
// lanes [0, n) of v into p[0, n): through the stack, as a masked store (vmaskmovps) takes about 12 cycles on an
// AMD Zen 3 core, against 1 for a store
inline void store_first(float* p, __m256 v, int n) {
  alignas(32) float t[8];
  _mm256_store_ps(t, v);
  for (int j = 0; j < n; ++j) p[j] = t[j];
}

// R output channels (rows of y, and of z, P floats apart) by V vectors of positions; with kTail the last vector
// holds `tail` positions (1..7), loaded under a mask and stored lane by lane. Step k reads the input row at
// x + k * ldx, or with kOffs at x + offs[k] (a direct convolution's (channel, tap) steps over its staged planes),
// whose positions are flat ones over the staged rows, stored where `flat` says.
template <int R, int V, bool kTail, bool kOffs>
void tile(const float* x, int64_t ldx, int64_t P, const int64_t* offs, int64_t K, const float* wp, const float* bias,
          const float* z, const RegisterAct& act, float* y, int64_t tail, const FlatTile8* flat) {
  const __m256i last = first8(kTail ? tail : 8);
  // one named array per vector of positions: GCC keeps these in registers
  __m256 a0[R], a1[R];
#pragma GCC unroll 6
  for (int r = 0; r < R; ++r) {
    a0[r] = _mm256_setzero_ps();
    if constexpr (V > 1) a1[r] = _mm256_setzero_ps();
  }
  auto load = [&](const float* p, int i) __attribute__((always_inline)) {
    if (kTail && i == V - 1) return _mm256_maskload_ps(p, last);
    return _mm256_loadu_ps(p);
  };
  const float* row = x;
  for (int64_t k = 0; k < K; ++k, row += ldx, wp += kRows) {
    const float* xr = kOffs ? x + offs[k] : row;
    // the filters 64 steps ahead (a layer's filters come from memory in a model larger than the cache)
    if constexpr (!kOffs) _mm_prefetch(reinterpret_cast<const char*>(wp + kRows * 64), _MM_HINT_T0);
    const __m256 x0 = load(xr, 0);
    __m256 x1 = x0;
    if constexpr (V > 1) x1 = load(xr + 8, 1);
#pragma GCC unroll 6
    for (int r = 0; r < R; ++r) {
      const __m256 w = _mm256_broadcast_ss(wp + r);
      a0[r] = _mm256_fmadd_ps(w, x0, a0[r]);
      if constexpr (V > 1) a1[r] = _mm256_fmadd_ps(w, x1, a1[r]);
    }
  }
  // the output stage compiled per activation and for a bias or none (with_output_stage)
  const __m256 zero = _mm256_setzero_ps(), vlo = _mm256_set1_ps(act.lo), vhi = _mm256_set1_ps(act.hi);
  __m256 vbias[R];
#pragma GCC unroll 6
  for (int r = 0; r < R; ++r) vbias[r] = bias ? _mm256_set1_ps(bias[r]) : zero;
  auto stage = [&](auto act_kind, auto with_bias) __attribute__((always_inline)) {
    constexpr auto kAct = decltype(act_kind)::value;
    constexpr bool kBias = decltype(with_bias)::value;
    // (products + bias) + residual, then the activation, operands in the order of the other output stages
    auto finish = [&](__m256 v, int r, int i) __attribute__((always_inline)) {
      if constexpr (kBias) v = _mm256_add_ps(v, vbias[r]);
      if (!kOffs && z) v = _mm256_add_ps(v, load(z + r * P + 8 * i, i));
      if constexpr (kAct == RegisterAct::kRelu) v = _mm256_max_ps(v, zero);
      else if constexpr (kAct == RegisterAct::kClip) v = _mm256_min_ps(vhi, _mm256_max_ps(vlo, v));
      return v;
    };
    auto rows_of = [&](const __m256(&a)[R], int i) __attribute__((always_inline)) {
      if constexpr (!kOffs) {
#pragma GCC unroll 6
        for (int r = 0; r < R; ++r) {
          float* o = y + r * P + 8 * i;
          if (kTail && i == V - 1) store_first(o, finish(a[r], r, i), static_cast<int>(tail));
          else _mm256_storeu_ps(o, finish(a[r], r, i));
        }
        return;
      }
      // flat positions: the kept lanes moved to the front where they are not there, then stored (FlatTile8)
      const int kept = flat->kept[i];
      float* o = y + flat->to[i];
      if (kept == 8 || (flat->spill && kept > 0 && !flat->gap[i])) {
#pragma GCC unroll 6
        for (int r = 0; r < R; ++r) _mm256_storeu_ps(o + r * P, finish(a[r], r, i));
      } else if (kept > 0) {
        const __m256i perm = _mm256_load_si256(reinterpret_cast<const __m256i*>(flat->perm[i]));
#pragma GCC unroll 6
        for (int r = 0; r < R; ++r) {
          const __m256 v = _mm256_permutevar8x32_ps(finish(a[r], r, i), perm);
          if (flat->spill) _mm256_storeu_ps(o + r * P, v);
          else store_first(o + r * P, v, kept);
        }
      }
    };
    rows_of(a0, 0);
    if constexpr (V > 1) rows_of(a1, 1);
  };
  with_output_stage(act, bias != nullptr, stage);
}

using TileFn = void (*)(const float*, int64_t, int64_t, const int64_t*, int64_t, const float*, const float*,
                        const float*, const RegisterAct&, float*, int64_t, const FlatTile8*);

// per R: [V - 1][tail]
template <bool kOffs, int R>
constexpr std::array<std::array<TileFn, 2>, 2> tile_shapes() {
  return {{{&tile<R, 1, false, kOffs>, &tile<R, 1, true, kOffs>},
           {&tile<R, 2, false, kOffs>, &tile<R, 2, true, kOffs>}}};
}
template <bool kOffs, size_t... R>
constexpr std::array<std::array<std::array<TileFn, 2>, 2>, kRows> tile_table(std::index_sequence<R...>) {
  return {tile_shapes<kOffs, static_cast<int>(R) + 1>()...};
}
// kTiles[R - 1][V - 1][tail], and the same over arbitrary input rows
constexpr auto kTiles = tile_table<false>(std::make_index_sequence<kRows>());
constexpr auto kOffsTiles = tile_table<true>(std::make_index_sequence<kRows>());

// The tile function for R rows and n positions (1..16): vectors, and whether the last one is partial.
inline TileFn tile_for(const decltype(kTiles)& table, int64_t rows, int64_t n, int64_t& tail) {
  const int64_t vectors = (n + 7) / 8;
  tail = n - (vectors - 1) * 8;
  return table[static_cast<size_t>(rows - 1)][static_cast<size_t>(vectors - 1)][tail < 8 ? 1 : 0];
}

}  // namespace

void conv_pointwise_avx2(const PointwiseConv& g, const float* x, const float* wpacked, float* y, ThreadPool* pool) {
  // Work items as in conv_pointwise_avx512, of kGroupBlocks blocks of output channels instead of one: a group over
  // a span of positions whose input rows (K x span floats, at most 128 KiB) stay in L2 for all the groups; or, with
  // several threads, an input of at most 512 KiB and many groups, one span of all the positions, the threads
  // sharing out whole groups.
  const int64_t blocks = (g.M + kPointwiseRows - 1) / kPointwiseRows;
  const int64_t group = std::min(kGroupBlocks, blocks), groups = (blocks + group - 1) / group;
  const bool by_block = pool && pool->size() > 1 && g.K * g.P <= (int64_t{128} << 10) && groups >= 16 * pool->size();
  const int64_t span =
      by_block ? g.P : std::max<int64_t>(kTile, (int64_t{32} << 10) / std::max<int64_t>(g.K, 1) / kTile * kTile);
  const int64_t spans = (g.P + span - 1) / span;
  auto run = [&](int64_t i0, int64_t i1) {
    thread_local AlignedVector<float> staged;
    int64_t staged_span = -1;
    for (int64_t item = i0; item < i1; ++item) {
      const int64_t s = item / groups, gb = item % groups;
      const int64_t b0 = gb * group, b1 = std::min(blocks, b0 + group);
      const int64_t s0 = s * span, s1 = std::min(g.P, s0 + span);
      const float* xs = x + s0;  // the span's first input position and the distance between its rows
      int64_t ld = g.P;
      // the span's rows through the input stage, or copied (deep inputs), into rows of whole lines
      if (g.in_scale || g.K > kCopyDepth) {
        ld = (s1 - s0 + 15) / 16 * 16;
        if (staged_span != s) {
          if (staged.size() < static_cast<size_t>(g.K * ld)) staged.resize(static_cast<size_t>(g.K * ld));
          stage_span_rows_avx2(x, g.P, g.in_scale, g.in_shift, g.K, s0, s1, ld, staged.data());
          staged_span = s;
        }
        xs = staged.data();
      }
      for (int64_t p0 = s0; p0 < s1; p0 += kTile) {
        int64_t tail = 0;
        const int64_t n = std::min(kTile, s1 - p0);
        for (int64_t b = b0; b < b1; ++b) {
          const int64_t m0 = b * kPointwiseRows, rows = std::min(kPointwiseRows, g.M - m0);
          const TileFn fn = tile_for(kTiles, rows, n, tail);
          fn(xs + (p0 - s0), ld, g.P, nullptr, g.K, wpacked + b * g.K * kPointwiseRows, g.bias ? g.bias + m0 : nullptr,
             g.z ? g.z + m0 * g.P + p0 : nullptr, g.act, y + m0 * g.P + p0, tail, nullptr);
        }
      }
    }
  };
  // a few hundred thousand multiply-adds per work item at least
  const int64_t items = spans * groups;
  const int64_t per_item = std::max<int64_t>(1, g.K * kPointwiseRows * group * std::min(span, g.P));
  const int64_t grain = std::max<int64_t>(1, (int64_t{1} << 18) / per_item);
  if (pool && pool->size() > 1 && items > grain) pool->parallel_for(items, grain, run);
  else run(0, items);
}

FlatTile8 flat_tile8(const FlatRows& flat, int64_t n, bool spill) {
  FlatTile8 t{};
  t.spill = spill;
  int64_t row = flat.row, col = flat.col;
  for (int i = 0; i < 2; ++i) {
    int kept = 0;
    for (int j = 0; j < 8 && 8 * i + j < n; ++j) {
      if (col < flat.OW) {
        if (kept == 0) t.to[i] = row * flat.OW + col;
        t.gap[i] = t.gap[i] || j != kept;
        t.perm[i][kept++] = j;
      }
      if (++col == flat.Wq) col = 0, ++row;
    }
    for (int j = kept; j < 8; ++j) t.perm[i][j] = j;
    t.kept[i] = static_cast<uint8_t>(kept);
  }
  return t;
}

void pointwise_tile_offs_avx2(const float* x, const int64_t* offs, int64_t steps, const float* wpacked, int64_t rows,
                              int64_t n, const float* bias, const RegisterAct& act, float* y, int64_t ldy,
                              const FlatTile8& lanes) {
  int64_t tail = 0;
  const TileFn fn = tile_for(kOffsTiles, rows, n, tail);
  fn(x, 0, ldy, offs, steps, wpacked, bias, nullptr, act, y, tail, &lanes);
}

}  // namespace nn
}  // namespace mrt
