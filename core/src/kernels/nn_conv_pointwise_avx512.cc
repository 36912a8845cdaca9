// Pointwise convolution on AVX-512 (declared in nn_geometry.h): y[M, P] = w[M, K] x[K, P] for one image and
// group, 64 positions (four vectors) by 6 output channels per tile. Each step k loads the tile's four vectors of
// input row k straight from the input planes and multiplies them by the 6 channels' weights for k (broadcast);
// the 24 sums stay in registers over all of K and leave them finished (bias, residual, activation). Against the
// GEMM, the input is not copied into packed panels and the output is written once: for the small depths of
// mobile and squeeze layers (16..128 input channels) those two passes cost as much as the products, and deeper
// layers (up to 2048 channels) still gain 3-16 % (conv_uses_pointwise).
#include <immintrin.h>

#include <algorithm>
#include <array>
#include <utility>

#include "../threadpool.h"
#include "nn_geometry.h"

namespace mrt {
namespace nn {
namespace {

constexpr int kRows = static_cast<int>(kPointwiseRows);
constexpr int64_t kTile = 64;  // positions per tile (four vectors)
// Inputs deeper than kCopyDepth with at least kCopyBlocks blocks of output channels are copied a span at a time into
// rows of whole vectors, read by every block: a tile then reads its rows from one compact buffer at one fixed distance
// instead of rows a plane apart (on a 16 x 16 map 1 KiB: a tile's rows fall in a quarter of L1's sets). Intel Xeon
// (AVX-512), one process: alone 1024 -> 256 on 16 x 16 0.886, 512 -> 1000 on 13 x 13 0.92; light ResNet-50 0.980-0.981
// at 1 thread, 0.981-0.983 at 2, light SqueezeNet 0.969-0.971 / 0.988-0.990, ResNet-18 0.987-0.991 at 2. With fewer
// blocks the copy is not won back: MobileNetV2's projections (4 to 16 blocks) took 1.027 with every deep input copied,
// 1.000-1.004 with this limit.
constexpr int64_t kCopyDepth = 128, kCopyBlocks = 24;

inline __mmask16 first16(int64_t n) { return n >= 16 ? __mmask16(0xFFFF) : static_cast<__mmask16>((1u << n) - 1); }

// R output channels (rows of y, and of z, P floats apart) by V vectors of positions; the last vector holds `tail`
// positions (1..16). Step k reads the input row at x + k * ldx, or with kOffs at x + offs[k] (a direct convolution's
// (channel, tap) steps over its staged planes, conv_direct_lanes_avx512), whose positions are flat ones over the
// staged rows (`flat`, null otherwise) and land in y as it says.
template <int R, int V, bool kOffs>
void tile(const float* x, int64_t ldx, int64_t P, const int64_t* offs, int64_t K, const float* wp, const float* bias,
          const float* z, const RegisterAct& act, float* y, int64_t tail, const FlatTile* flat) {
  const __mmask16 last = first16(tail);
  // one named array per vector of positions: GCC keeps these in registers (a 2-D array is kept in memory)
  __m512 a0[R], a1[R], a2[R], a3[R];
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r) {
    a0[r] = _mm512_setzero_ps();
    if constexpr (V > 1) a1[r] = _mm512_setzero_ps();
    if constexpr (V > 2) a2[r] = _mm512_setzero_ps();
    if constexpr (V > 3) a3[r] = _mm512_setzero_ps();
  }
  // the last vector of the tile is loaded under the mask of its positions
  const __mmask16 m0 = V == 1 ? last : __mmask16(0xFFFF), m1 = V == 2 ? last : __mmask16(0xFFFF),
                  m2 = V == 3 ? last : __mmask16(0xFFFF), m3 = V == 4 ? last : __mmask16(0xFFFF);
  const float* row = x;
  for (int64_t k = 0; k < K; ++k, row += ldx, wp += kRows) {
    const float* xr = kOffs ? x + offs[k] : row;
    // the filters 64 steps ahead (1.5 KB): a layer's filters come from memory in a model larger than the cache,
    // on the first span of positions. A chain of 40 1x1 convolutions 1024 <-> 256 on 14 x 14 (40 MB of filters),
    // per layer: 472 -> 421 us at 1 thread (onnxruntime 396), 262 -> 248 at 2; light ResNet-50 0.979 at 1 and at
    // 2 threads; with the filters in the cache 1.00-1.01.
    if constexpr (!kOffs) _mm_prefetch(reinterpret_cast<const char*>(wp + kRows * 64), _MM_HINT_T0);
    const __m512 x0 = _mm512_maskz_loadu_ps(m0, xr);
    __m512 x1 = x0, x2 = x0, x3 = x0;
    if constexpr (V > 1) x1 = _mm512_maskz_loadu_ps(m1, xr + 16);
    if constexpr (V > 2) x2 = _mm512_maskz_loadu_ps(m2, xr + 32);
    if constexpr (V > 3) x3 = _mm512_maskz_loadu_ps(m3, xr + 48);
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) {
      const __m512 w = _mm512_set1_ps(wp[r]);
      a0[r] = _mm512_fmadd_ps(w, x0, a0[r]);
      if constexpr (V > 1) a1[r] = _mm512_fmadd_ps(w, x1, a1[r]);
      if constexpr (V > 2) a2[r] = _mm512_fmadd_ps(w, x2, a2[r]);
      if constexpr (V > 3) a3[r] = _mm512_fmadd_ps(w, x3, a3[r]);
    }
  }
  // The output stage is compiled once per activation and for a bias or none, its branches taken once per tile
  // (whole rows of vectors) rather than per vector: for the few steps of a stem (27: 3 channels x 3 x 3), an
  // output stage that tested the activation, the bias and the row ends for each of the 24 vectors took a fifth
  // of the tile's time.
  // (operands read once: the stores below may alias what act and bias point at, as far as the compiler knows)
  const __m512 zero = _mm512_setzero_ps(), vlo = _mm512_set1_ps(act.lo), vhi = _mm512_set1_ps(act.hi);
  __m512 vbias[R];
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r) vbias[r] = bias ? _mm512_set1_ps(bias[r]) : zero;
  auto stage = [&](auto act_kind, auto with_bias) __attribute__((always_inline)) {
    constexpr auto kAct = decltype(act_kind)::value;
    constexpr bool kBias = decltype(with_bias)::value;
    // (products + bias) + residual, then the activation with its operands in this order (the same result for a
    // NaN as the other output stages)
    auto finish = [&](__m512 v, int r, int i, __mmask16 m) __attribute__((always_inline)) {
      if constexpr (kBias) v = _mm512_add_ps(v, vbias[r]);
      if (!kOffs && z) v = _mm512_add_ps(v, _mm512_maskz_loadu_ps(m, z + r * P + 16 * i));
      if constexpr (kAct == RegisterAct::kRelu) v = _mm512_max_ps(v, zero);
      else if constexpr (kAct == RegisterAct::kClip) v = _mm512_min_ps(vhi, _mm512_max_ps(vlo, v));
      return v;
    };
    // every row of vector i of the tile (inlined, as all three lambdas must be: otherwise the sums live in memory)
    auto rows_of = [&](const __m512(&a)[R], int i) __attribute__((always_inline)) {
      if constexpr (!kOffs) {
        const __mmask16 m = i == V - 1 ? last : __mmask16(0xFFFF);
#pragma GCC unroll 8
        for (int r = 0; r < R; ++r) _mm512_mask_storeu_ps(y + r * P + 16 * i, m, finish(a[r], r, i, m));
        return;
      }
      // flat positions: where the outputs among the vector's lanes go (FlatTile)
      const __mmask16 k = static_cast<__mmask16>(flat->keep[i]);
      float* yr = y + flat->at[i];
      if (k == __mmask16(0xFFFF)) {
#pragma GCC unroll 8
        for (int r = 0; r < R; ++r) _mm512_storeu_ps(yr + r * P, finish(a[r], r, i, k));
      } else if (k) {
        const __mmask16 run = first16(flat->kept[i]);
#pragma GCC unroll 8
        for (int r = 0; r < R; ++r)
          _mm512_mask_storeu_ps(yr + r * P, run, _mm512_maskz_compress_ps(k, finish(a[r], r, i, k)));
      }
    };
    rows_of(a0, 0);
    if constexpr (V > 1) rows_of(a1, 1);
    if constexpr (V > 2) rows_of(a2, 2);
    if constexpr (V > 3) rows_of(a3, 3);
  };
  with_output_stage(act, bias != nullptr, stage);
}

using TileFn = void (*)(const float*, int64_t, int64_t, const int64_t*, int64_t, const float*, const float*,
                        const float*, const RegisterAct&, float*, int64_t, const FlatTile*);

template <bool kOffs, int R, size_t... V>
constexpr std::array<TileFn, 4> tile_row(std::index_sequence<V...>) {
  return {tile<R, static_cast<int>(V) + 1, kOffs>...};
}
template <bool kOffs, size_t... R>
constexpr std::array<std::array<TileFn, 4>, kRows> tile_table(std::index_sequence<R...>) {
  return {tile_row<kOffs, static_cast<int>(R) + 1>(std::make_index_sequence<4>())...};
}
// kTiles[R - 1][V - 1], and the same over arbitrary input rows
constexpr auto kTiles = tile_table<false>(std::make_index_sequence<kRows>());
constexpr auto kOffsTiles = tile_table<true>(std::make_index_sequence<kRows>());

}  // namespace

void conv_pointwise_avx512(const PointwiseConv& g, const float* x, const float* wpacked, float* y, ThreadPool* pool) {
  // Work items: one block of output channels over a span of positions, tile after tile. A span's input rows
  // (K x span floats, at most 128 KiB) stay in L2 for all the blocks, and an item writes (and reads the residual
  // of) only its block's rows, front to back: a few streams that the hardware prefetcher follows. (Items of all
  // the channels for one tile of positions stored to every output plane at once; with 256 channels on 56x56,
  // 3.2 MB out and a residual as large, each line waited on memory.)
  // With several threads, an input of at most 512 KiB and many blocks, one span of all the positions: the
  // threads share out whole blocks evenly. Spans cut such a map unevenly (196 positions of 256 channels: 128 +
  // 68), and the thread done first took blocks of the other's span, reading its input and writing its output
  // across the cores. Alone, 2 threads, AMD Zen 5: 256 -> 1024 on 14 x 14 0.925 (in the phases where a cross-core
  // round trip takes ~500 ns, 0.916), SqueezeNet's 512 -> 1000 on 13 x 13 0.917; deeper inputs kept their spans
  // (1024 -> 256 on 14 x 14 1.044 and 64 -> 256 on 56 x 56 1.077 by blocks), as did fewer blocks (SqueezeNet's
  // 16 -> 64, 11 blocks, shared 6 / 5).
  const int64_t blocks = (g.M + kPointwiseRows - 1) / kPointwiseRows;
  const bool by_block = pool && pool->size() > 1 && g.K * g.P <= (int64_t{128} << 10) && blocks >= 16 * pool->size();
  const int64_t span =
      by_block ? g.P : std::max<int64_t>(kTile, (int64_t{32} << 10) / std::max<int64_t>(g.K, 1) / kTile * kTile);
  // With several threads the spans share out the map's vectors of positions evenly (one more vector in some): 196
  // positions in spans of at most 64 are 48 + 48 + 48 + 52, not 64 + 64 + 64 + 4, whose last span (a tile of 4
  // positions, as slow per step as one of 16) left one thread the lighter half of the work. Intel Xeon, 2 threads,
  // one process: 1024 -> 256 on 14 x 14 0.971, 576 -> 96 0.963; light ResNet-50 0.982-0.985, ResNet-18 0.980,
  // MobileNetV2 0.985-0.988. (At 1 thread the 3-vector tiles cost 0.4-1 %: spans of whole tiles there.)
  const int64_t spans = (g.P + span - 1) / span, vectors = (g.P + 15) / 16;
  const bool even = pool && pool->size() > 1;
  auto span_at = [&](int64_t s) { return std::min(g.P, even ? 16 * (s * vectors / spans) : s * span); };
  // With an input stage, each thread applies it to a span's input rows once, into a buffer its items of that span
  // read (rows of the span's length rounded up to whole vectors), instead of once per block of output channels;
  // deep inputs of many blocks are copied the same way (kCopyDepth).
  // (Before, such convolutions went to the GEMM, which applied the stage while packing its B panels: DenseNet's
  // bottleneck layers. Two processes alternating: the benchmark's DenseNet 0.968 at 1 thread, 0.985 at 2; light
  // DenseNet-121 0.979 / 0.971.)
  auto run = [&](int64_t i0, int64_t i1) {
    thread_local AlignedVector<float> staged;
    int64_t staged_span = -1;
    for (int64_t item = i0; item < i1; ++item) {
      const int64_t s = item / blocks, b = item % blocks;
      const int64_t m0 = b * kPointwiseRows, rows = std::min(kPointwiseRows, g.M - m0);
      const float* w = wpacked + b * g.K * kPointwiseRows;
      const int64_t s0 = span_at(s), s1 = span_at(s + 1);
      const float* xs = x + s0;  // the span's first input position and the distance between its rows
      int64_t ld = g.P;
      if (g.in_scale || (g.K > kCopyDepth && blocks >= kCopyBlocks)) {
        ld = (s1 - s0 + 15) / 16 * 16;
        if (staged_span != s) {
          if (staged.size() < static_cast<size_t>(g.K * ld)) staged.resize(static_cast<size_t>(g.K * ld));
          stage_span_rows_avx2(x, g.P, g.in_scale, g.in_shift, g.K, s0, s1, ld, staged.data());
          staged_span = s;
        }
        xs = staged.data();
      }
      for (int64_t p0 = s0; p0 < s1; p0 += kTile) {
        const int64_t n = std::min(kTile, s1 - p0), vectors = (n + 15) / 16, tail = n - (vectors - 1) * 16;
        const float* bias = g.bias ? g.bias + m0 : nullptr;
        kTiles[static_cast<size_t>(rows - 1)][static_cast<size_t>(vectors - 1)](
            xs + (p0 - s0), ld, g.P, nullptr, g.K, w, bias, g.z ? g.z + m0 * g.P + p0 : nullptr, g.act,
            y + m0 * g.P + p0, tail, nullptr);
      }
    }
  };
  // a few hundred thousand multiply-adds per work item at least
  const int64_t items = spans * blocks, per_item = std::max<int64_t>(1, g.K * kPointwiseRows * std::min(span, g.P));
  const int64_t grain = std::max<int64_t>(1, (int64_t{1} << 18) / per_item);
  if (pool && pool->size() > 1 && items > grain) pool->parallel_for(items, grain, run);
  else run(0, items);
}

FlatTile flat_tile(const FlatRows& flat, int64_t n) {
  FlatTile t{};
  int64_t col = flat.col, to = flat.row * flat.OW + std::min(col, flat.OW);
  for (int i = 0; i < 4 && 16 * i < n; ++i) {
    const int64_t lanes = std::min<int64_t>(16, n - 16 * i);
    uint32_t m = 0;
    int64_t kept_here = 0;
    for (int64_t j = 0; j < lanes;) {  // the lanes left in the current staged row, then the next row's
      const int64_t run = std::min(lanes - j, flat.Wq - col);
      const int64_t kept = std::max<int64_t>(0, std::min(run, flat.OW - col));
      m |= ((1u << kept) - 1) << j;
      kept_here += kept;
      j += run;
      col += run;
      if (col == flat.Wq) col = 0;
    }
    t.keep[i] = static_cast<uint16_t>(m);
    t.kept[i] = kept_here;
    t.at[i] = to;
    to += kept_here;
  }
  return t;
}

void pointwise_tile_offs_avx512(const float* x, const int64_t* offs, int64_t steps, const float* wpacked,
                                int64_t rows, int64_t n, const float* bias, const RegisterAct& act, float* y,
                                int64_t ldy, const FlatTile& lanes) {
  const int64_t vectors = (n + 15) / 16;
  kOffsTiles[static_cast<size_t>(rows - 1)][static_cast<size_t>(vectors - 1)](
      x, 0, ldy, offs, steps, wpacked, bias, nullptr, act, y, n - (vectors - 1) * 16, &lanes);
}

}  // namespace nn
}  // namespace mrt
