// 2-D 8-bit convolution on AVX2 (ConvInteger, QLinearConv) without a column matrix: the u8 x s8 tile of the
// 8-bit GEMM (quant_u8s8_avx2.h) reading its B straight from a staged copy of the image.
//
// The image is staged as planes of channel quads: plane (cq, rho, phi) holds, for every pixel (i, j), the 4
// bytes of the channels in slots 4cq..4cq+3 (PlaneWeights8::slot_channel: channels paired to spare the pair
// limit) at padded input row i*sh + rho and column j*sw + phi (the x zero point's byte outside the input, 0 for
// a slot past C). Output position (oh, ow) at tap (kh, kw) reads pixel
// (oh + kh*dh / sh, ow + kw*dw / sw) of the phase plane (kh*dh % sh, kw*dw % sw). Numbering the positions
// q = oh * Wq + ow over the planes' width Wq (ow past OW being computed and dropped), the 4 bytes a position
// needs for one (channel quad, tap) lie at q*4 + a fixed offset: 16 consecutive positions are 64 contiguous
// bytes, the GEMM kernel's B group, for every stride and dilation. The waste is the columns past OW:
// (Wq - OW) / Wq. A row's right padding and the next row's left padding share their columns where both are
// padding for every tap that reads them (a read past a row's end lands on the next row's start): 1 of 57
// columns on a 56-wide 3x3 layer, 1 of 8 on a 7-wide one (rather than 2 of 9). The last tile of a chunk is 8
// positions wide where no more are left (a 7 x 7 map: 56 positions, 3.5 tiles).
//
// The weights are A, in the order of those groups: k = ((cq * KH + kh) * KW + kw) * 4 + slot % 4, with the
// 8-bit GEMM's pair limit and fix (quant_common.h), laid out as a panel of blocks of 4 rows
// (PlaneWeights8::panel): every tile is 4 rows, the rows past M zeros. Zero points: the weights' must be 0 in
// the kernel's int8 domain, so sum (x - xz) w = sum x w - xz * sum w (padding holds xz); an int8 input is moved
// to uint8 by flipping its top bit. Work items are chunks of positions times groups of output channels; each writes its
// int32 sums to a small buffer, then requantizes them (or copies them, for ConvInteger) into the NCHW planes.
// On small maps, where tiles of 16 positions would leave much of a last tile unused, the same staging and weights
// run as tiles of 4 positions x 16 output channels instead (the channel-column form, below).
#include <immintrin.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include "../threadpool.h"
#include "quant_common.h"
#include "quant_u8s8_avx2.h"

#if defined(__GNUC__)
#define MRT_PLANES_TILE __attribute__((noinline))
#else
#define MRT_PLANES_TILE
#endif

namespace mrt {
namespace quant {
namespace {

using u8s8::kCols;

constexpr int64_t kChunk = 64;      // positions per work item (4 tiles)
constexpr int64_t kGroupRows = 32;  // output channels per work item at most
static_assert(kGroupRows % 4 == 0, "an item's rows are whole blocks of 4 (a tile's rows past M land in its buffer)");
constexpr int64_t kBlockK = 1024;   // bytes of k per pass over an item's tiles at most

// B's groups of 4 k for 16 positions: base (position q's bytes) plus the group's offset.
struct PlaneSrc {
  const uint8_t* base;
  const int64_t* off;  // per group of 4 k
  const int8_t* at(int64_t k) const { return reinterpret_cast<const int8_t*>(base + off[k >> 2]); }
};

struct Staging {
  int64_t CQ = 0, Hq = 0, Wq = 0, plane = 0;
  std::vector<int> phase_of;        // per rho * sw + phi: its index among the staged phases, -1 when unused
  std::vector<int64_t> phases;      // the staged phases, as rho * sw + phi
  std::vector<int64_t> off;         // per (cq, kh, kw): the byte offset of its group from q * 4
};

// Whether planes Wq columns wide give every read its value: a read of column j >= Wq (position ow < OW at a tap
// kw) lands on column j - Wq of the next row, so both must be padding, the first past the input's right edge and
// the second before its left edge.
bool rows_may_share(const DirectConv8& g, int64_t Wq) {
  for (int64_t kw = 0; kw < g.KW; ++kw) {
    const int64_t shift = kw * g.dw / g.sw, phi = kw * g.dw % g.sw;
    for (int64_t j = std::max(Wq, shift); j < g.OW + shift; ++j) {
      const int64_t here = j * g.sw + phi - g.pl, next = (j - Wq) * g.sw + phi - g.pl;
      if (here < g.W || next >= 0) return false;
    }
  }
  return true;
}

Staging staging_for(const DirectConv8& g) {
  Staging s;
  s.CQ = (g.C + 3) / 4;
  s.Hq = g.OH + (g.KH - 1) * g.dh / g.sh;
  const int64_t full = g.OW + (g.KW - 1) * g.dw / g.sw;  // no read past a row's end
  s.Wq = std::max<int64_t>(g.OW, 1);
  while (s.Wq < full && (2 * s.Wq < full || !rows_may_share(g, s.Wq))) ++s.Wq;
  s.phase_of.assign(static_cast<size_t>(g.sh * g.sw), -1);
  for (int64_t kh = 0; kh < g.KH; ++kh)
    for (int64_t kw = 0; kw < g.KW; ++kw) {
      const int64_t ph = (kh * g.dh % g.sh) * g.sw + kw * g.dw % g.sw;
      if (s.phase_of[static_cast<size_t>(ph)] < 0) {
        s.phase_of[static_cast<size_t>(ph)] = static_cast<int>(s.phases.size());
        s.phases.push_back(ph);
      }
    }
  // a plane, with room for the last tile's reads past its final row (positions up to Hq * Wq + Wq + 16), in an
  // odd number of cache lines: a tile reads the same few lines of every plane, and planes an even number of
  // lines apart crowd into a fraction of the L1 sets
  s.plane = ((s.Hq + 1) * s.Wq + kCols) * 4;
  s.plane = (s.plane + 63) / 64 * 64;
  if (s.plane / 64 % 2 == 0) s.plane += 64;
  s.off.resize(static_cast<size_t>(s.CQ * g.KH * g.KW));
  for (int64_t cq = 0; cq < s.CQ; ++cq)
    for (int64_t kh = 0; kh < g.KH; ++kh)
      for (int64_t kw = 0; kw < g.KW; ++kw) {
        const int64_t ph = (kh * g.dh % g.sh) * g.sw + kw * g.dw % g.sw;
        const int64_t plane = cq * static_cast<int64_t>(s.phases.size()) + s.phase_of[static_cast<size_t>(ph)];
        s.off[static_cast<size_t>((cq * g.KH + kh) * g.KW + kw)] =
            plane * s.plane + ((kh * g.dh / g.sh) * s.Wq + kw * g.dw / g.sw) * 4;
      }
  return s;
}

// Rows [i0, i1) of staged plane p (a channel quad and phase): per slot, its channel's bytes for those rows (Wq
// per row) gathered from the image, then the run interleaved into 4-byte pixels in one pass (the plane's rows
// are consecutive, so a run of rows is one run of pixels: maps under 16 wide interleave 16 pixels at a time
// too). A slot whose rows are whole consecutive input rows (stride 1, no padding columns, no flip) is read in
// place. A slot's rows are copied first, 16 bytes at a time (int8 inputs flipped on the way, stride 2 picking the
// even bytes of 32), each copy free to run past its row's bytes, into the next row's (copied after it) or into a
// later slot's rows or the buffer's slack (written after it); then the padding columns and rows are filled, over
// whatever ran into them. (A call per plane's run of rows: the plane's divisions once, not per row; per row
// they were most of the staging's time on stride 2 layers.)
void stage_rows(const DirectConv8& g, const Staging& s, const int32_t* slot_channel, const uint8_t* x, uint8_t fill,
                uint8_t flip, int64_t p, int64_t i0, int64_t i1, uint8_t* img) {
  const int64_t nph = static_cast<int64_t>(s.phases.size());
  const int64_t cq = p / nph, ph = s.phases[static_cast<size_t>(p % nph)], rho = ph / g.sw, phi = ph % g.sw;
  const int64_t Wq = s.Wq, rows = i1 - i0, n = rows * Wq;
  // pixels [j_lo, j_hi) read the input: 0 <= j * sw + phi - pl < W
  const int64_t first = g.pl - phi;  // j * sw >= first
  const int64_t j_lo = std::clamp<int64_t>(first <= 0 ? 0 : (first + g.sw - 1) / g.sw, 0, Wq);
  const int64_t last = g.W - 1 + g.pl - phi;  // j * sw <= last
  const int64_t j_hi = std::clamp<int64_t>(last < 0 ? 0 : last / g.sw + 1, j_lo, Wq);
  const int64_t len = j_hi - j_lo;
  const int64_t ih0 = i0 * g.sh + rho - g.pt, ih1 = (i1 - 1) * g.sh + rho - g.pt;
  const bool in_place = g.sw == 1 && g.sh == 1 && !flip && j_lo == 0 && j_hi == Wq && Wq == g.W && ih0 >= 0 &&
                        ih1 < g.H;
  // a copy reads up to 32 bytes from a row's first (stride 2; 16 at stride 1) and writes 16 from its first
  const uint8_t* x_end = x + g.C * g.H * g.W;
  const int64_t reach = g.sw == 2 ? 32 : 16;
  constexpr int64_t kSlack = 16;
  static thread_local std::vector<uint8_t> rows_buf;
  if (rows_buf.size() < static_cast<size_t>(4 * n + kSlack)) rows_buf.resize(static_cast<size_t>(4 * n + kSlack));
  const __m128i vflip = _mm_set1_epi8(static_cast<char>(flip));
  const __m128i even = _mm_setr_epi8(0, 2, 4, 6, 8, 10, 12, 14, -1, -1, -1, -1, -1, -1, -1, -1);
  const uint8_t* t[4];
  for (int b = 0; b < 4; ++b) {
    const int64_t c = slot_channel[cq * 4 + b];
    if (c < g.C && in_place) {
      t[b] = x + (c * g.H + ih0) * g.W;
      continue;
    }
    uint8_t* rb = rows_buf.data() + b * n;
    t[b] = rb;
    if (c >= g.C) {
      std::memset(rb, 0, static_cast<size_t>(n));
      continue;
    }
    for (int64_t i = i0; i < i1 && len > 0; ++i) {
      const int64_t ih = i * g.sh + rho - g.pt;
      if (ih < 0 || ih >= g.H) continue;
      const uint8_t* src = x + (c * g.H + ih) * g.W + (j_lo * g.sw + phi - g.pl);
      uint8_t* d = rb + (i - i0) * Wq + j_lo;
      int64_t j = 0;
      if (g.sw <= 2) {
        // 16 bytes a step while the reads stay inside this image (and the writes inside the row's slot and the
        // next 16 bytes); the rest one by one
        for (; j < len && src + j * g.sw + reach <= x_end; j += 16) {
          const uint8_t* q = src + j * g.sw;
          __m128i v;
          if (g.sw == 1) {
            v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(q));
          } else {
            const __m128i lo = _mm_shuffle_epi8(_mm_loadu_si128(reinterpret_cast<const __m128i*>(q)), even);
            const __m128i hi = _mm_shuffle_epi8(_mm_loadu_si128(reinterpret_cast<const __m128i*>(q + 16)), even);
            v = _mm_unpacklo_epi64(lo, hi);
          }
          _mm_storeu_si128(reinterpret_cast<__m128i*>(d + j), _mm_xor_si128(v, vflip));
        }
      }
      for (; j < len; ++j) d[j] = static_cast<uint8_t>(src[j * g.sw] ^ flip);
    }
    // the padding, over what the copies wrote past their rows
    for (int64_t i = i0; i < i1; ++i) {
      const int64_t ih = i * g.sh + rho - g.pt;
      uint8_t* row = rb + (i - i0) * Wq;
      if (ih < 0 || ih >= g.H || len == 0) {
        std::memset(row, fill, static_cast<size_t>(Wq));
        continue;
      }
      for (int64_t j = 0; j < j_lo; ++j) row[j] = fill;
      for (int64_t j = j_hi; j < Wq; ++j) row[j] = fill;
    }
  }
  uint8_t* out = img + p * s.plane + i0 * Wq * 4;
  auto sixteen = [&](int64_t at) {
    auto row = [&](int b) { return _mm_loadu_si128(reinterpret_cast<const __m128i*>(t[b] + at)); };
    interleave4x16(row(0), row(1), row(2), row(3), out + at * 4);
  };
  int64_t j = 0;
  for (; j + 16 <= n; j += 16) sixteen(j);
  if (j < n && n >= 16) {
    sixteen(n - 16);  // the last 16 pixels, overlapping what is done
    j = n;
  }
  for (; j < n; ++j)
    for (int b = 0; b < 4; ++b) out[j * 4 + b] = t[b][j];
}

#if defined(__GNUC__)
// One group of 4 k of the 4 x 16 tile: B's 64 bytes at the next offset (ymm12, ymm13), then per row the weights'
// quad broadcast (ymm14) from the panel's 16 bytes of the group and multiplied into that row's two sums (as
// u8s8::madd4, through ymm15); the panel moves on by the group's 16 bytes.
#define MRT_PLANES_STEP                                                          \
  "movq (%[off]), %[p]\n\t"                                                    \
  "addq $8, %[off]\n\t"                                                        \
  "vmovdqu (%[base],%[p]), %%ymm12\n\t"                                        \
  "vmovdqu 32(%[base],%[p]), %%ymm13\n\t"                                      \
  MRT_PLANES_ROW("(%[a])", "%[c0]", "%[d0]")                                     \
  MRT_PLANES_ROW("4(%[a])", "%[c1]", "%[d1]")                                    \
  MRT_PLANES_ROW("8(%[a])", "%[c2]", "%[d2]")                                    \
  MRT_PLANES_ROW("12(%[a])", "%[c3]", "%[d3]")                                   \
  "addq $16, %[a]\n\t"
#define MRT_PLANES_ROW(ROW, C, D)                                                \
  "vpbroadcastd " ROW ", %%ymm14\n\t"                                          \
  "vpmaddubsw %%ymm14, %%ymm12, %%ymm15\n\t"                                   \
  "vpmaddwd %[ones], %%ymm15, %%ymm15\n\t"                                     \
  "vpaddd %%ymm15, " C ", " C "\n\t"                                           \
  "vpmaddubsw %%ymm14, %%ymm13, %%ymm15\n\t"                                   \
  "vpmaddwd %[ones], %%ymm15, %%ymm15\n\t"                                     \
  "vpaddd %%ymm15, " D ", " D "\n\t"

// The 4 x 16 tile's sums over K values of k from a block of the weights' panel, in one block of asm, two groups
// of k per loop: written with intrinsics, GCC 12 copied six of the eight sums between registers on every group
// of k (41 instructions per group where 33 do).
void sums4x16(int64_t K, const uint8_t* panel, const PlaneSrc& src, __m256i (&acc0)[4], __m256i (&acc1)[4]) {
  __m256i c0 = _mm256_setzero_si256(), c1 = c0, c2 = c0, c3 = c0, d0 = c0, d1 = c0, d2 = c0, d3 = c0;
  const __m256i ones = _mm256_set1_epi16(1);
  const int64_t* off = src.off;
  const uint8_t* base = src.base;
  const uint8_t* a = panel;
  int64_t groups = K / 4, p;
  if (groups % 2) {
    __asm__(MRT_PLANES_STEP
            : [c0] "+x"(c0), [c1] "+x"(c1), [c2] "+x"(c2), [c3] "+x"(c3), [d0] "+x"(d0), [d1] "+x"(d1),
              [d2] "+x"(d2), [d3] "+x"(d3), [off] "+r"(off), [a] "+r"(a), [p] "=&r"(p)
            : [ones] "x"(ones), [base] "r"(base)
            : "memory", "xmm12", "xmm13", "xmm14", "xmm15");
    --groups;
  }
  if (groups > 0) {
    __asm__("1:\n\t" MRT_PLANES_STEP MRT_PLANES_STEP
            "subq $2, %[n]\n\t"
            "jnz 1b\n\t"
            : [c0] "+x"(c0), [c1] "+x"(c1), [c2] "+x"(c2), [c3] "+x"(c3), [d0] "+x"(d0), [d1] "+x"(d1),
              [d2] "+x"(d2), [d3] "+x"(d3), [off] "+r"(off), [a] "+r"(a), [p] "=&r"(p), [n] "+r"(groups)
            : [ones] "x"(ones), [base] "r"(base)
            : "memory", "cc", "xmm12", "xmm13", "xmm14", "xmm15");
  }
  acc0[0] = c0, acc0[1] = c1, acc0[2] = c2, acc0[3] = c3;
  acc1[0] = d0, acc1[1] = d1, acc1[2] = d2, acc1[3] = d3;
}
#undef MRT_PLANES_ROW
#undef MRT_PLANES_STEP
#endif

// The 4 x Cols tile's sums from a block of the weights' panel (Cols 8: acc1 left zero; and where the asm above
// is not available, Cols 16).
template <int Cols>
inline void panel_sums(int64_t K, const uint8_t* panel, const PlaneSrc& src, __m256i (&acc0)[4],
                       __m256i (&acc1)[4]) {
#pragma GCC unroll 4
  for (int r = 0; r < 4; ++r) acc0[r] = acc1[r] = _mm256_setzero_si256();
  const __m256i ones = _mm256_set1_epi16(1);
  for (int64_t k = 0; k < K; k += 4, panel += 16) {
    const int8_t* q = src.at(k);
    const __m256i b0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(q));
#pragma GCC unroll 4
    for (int r = 0; r < 4; ++r) {
      int32_t quad;
      std::memcpy(&quad, panel + r * 4, sizeof(quad));
      const __m256i a = _mm256_set1_epi32(quad);
      acc0[r] = u8s8::madd4(acc0[r], b0, a, ones);
      if constexpr (Cols == 16)
        acc1[r] = u8s8::madd4(acc1[r], _mm256_loadu_si256(reinterpret_cast<const __m256i*>(q + 32)), a, ones);
    }
  }
}

// What the pair limit took off the weights (PreparedA8's fix entries), placed for this staging: entry e of
// row m (e in [begin[m], begin[m + 1])) adds its value times B's byte k % 4 of the group at at[e] from a tile's
// first position; quad[e] is the value at that byte of an otherwise zero quad of A.
struct PlaneFix {
  const int32_t* begin;
  const int64_t* at;
  const int32_t* quad;
};

// 4 rows x Cols (16 or 8) positions over K values of k from a block of the weights' panel: the sums into out
// (row stride ldo), plus corr[r] and the fix entries of the tile's rows (fix: nullptr for none) when first, else
// added to what out holds. Not inlined: inside the item loop GCC copied accumulators between registers on every
// group of k.
template <int Cols>
MRT_PLANES_TILE void tile(int64_t K, const uint8_t* panel, const PlaneSrc& src, const int32_t* corr, bool first,
                          const PlaneFix* fix, int32_t* out, int64_t ldo) {
  constexpr int R = 4;
  __m256i acc0[R], acc1[R];
#if defined(__GNUC__)
  if constexpr (Cols == 16) sums4x16(K, panel, src, acc0, acc1);
  else
#endif
    panel_sums<Cols>(K, panel, src, acc0, acc1);
  if (fix) {
    const __m256i ones = _mm256_set1_epi16(1);
#pragma GCC unroll 4
    for (int r = 0; r < R; ++r)
      for (int32_t e = fix->begin[r]; e < fix->begin[r + 1]; ++e) {
        const uint8_t* q = src.base + fix->at[e];
        const __m256i a = _mm256_set1_epi32(fix->quad[e]);
        acc0[r] = u8s8::madd4(acc0[r], _mm256_loadu_si256(reinterpret_cast<const __m256i*>(q)), a, ones);
        if constexpr (Cols == 16)
          acc1[r] = u8s8::madd4(acc1[r], _mm256_loadu_si256(reinterpret_cast<const __m256i*>(q + 32)), a, ones);
      }
  }
#pragma GCC unroll 4
  for (int r = 0; r < R; ++r) {
    int32_t* o = out + r * ldo;
    const __m256i c0 = first ? _mm256_set1_epi32(corr[r]) : _mm256_loadu_si256(reinterpret_cast<const __m256i*>(o));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(o), _mm256_add_epi32(acc0[r], c0));
    if constexpr (Cols == 16) {
      const __m256i c1 = first ? c0 : _mm256_loadu_si256(reinterpret_cast<const __m256i*>(o + 8));
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(o + 8), _mm256_add_epi32(acc1[r], c1));
    }
  }
}

// len bytes from a row of requantized bytes (kChunk of them, so 16 may be read from any run's start) to the
// output: runs are a few tens of bytes, too short for a library call to pay.
inline void copy_run(const uint8_t* from, uint8_t* to, int64_t len) {
  if (len >= 16) {
    int64_t j = 0;
    for (; j + 16 <= len; j += 16)
      _mm_storeu_si128(reinterpret_cast<__m128i*>(to + j), _mm_loadu_si128(reinterpret_cast<const __m128i*>(from + j)));
    if (j < len)  // the last 16, overlapping what is copied
      _mm_storeu_si128(reinterpret_cast<__m128i*>(to + len - 16),
                       _mm_loadu_si128(reinterpret_cast<const __m128i*>(from + len - 16)));
  } else if (len >= 8) {
    uint64_t head, tail;
    std::memcpy(&head, from, 8);
    std::memcpy(&tail, from + len - 8, 8);
    std::memcpy(to, &head, 8);
    std::memcpy(to + len - 8, &tail, 8);
  } else {
    for (int64_t j = 0; j < len; ++j) to[j] = from[j];
  }
}

// --- The channel-column form, for small maps: a tile of 4 positions x 16 output channels -------------------------
// Columns of 16 positions waste what a map's positions leave of a last tile (a 7 x 7 map: 56 computed for 49, a
// 14 x 14 one 216 for 196). With 16 output channels as the columns instead, a tile's 4 rows are any 4 positions:
// each row's quad is a broadcast from its own position's bytes (position address + the group's offset), the 16
// channels' quads two vectors from the panel's four 4-row blocks. The same operations per group of k as the
// position-column tile; a map wastes only its last tile's rows (and M what 16 leaves, where M is not a multiple).

constexpr int64_t kColPositions = 16;  // positions per work item (4 tiles of 4)
constexpr int64_t kColChannels = 64;   // output channels per work item (4 tiles of 16)
constexpr int64_t kColBlockK = 512;    // bytes of k per pass over an item's tiles at most

inline __m256i load_pieces(const uint8_t* p, int64_t piece) {
  return _mm256_inserti128_si256(
      _mm256_castsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))),
      _mm_loadu_si128(reinterpret_cast<const __m128i*>(p + piece)), 1);
}

// acc{0,1}[r] = the sums over `groups` groups of k: group i's quad of position r at pos[r] + off[i], times the
// 16 channels' quads, 4 pieces of 16 bytes (channels 4j..4j+3 at piece j) at w + 16 i + j * piece (acc0:
// channels 0..7, acc1: 8..15).
template <int R>
inline void col_sums(int64_t groups, const uint8_t* w, int64_t piece, const int64_t* off, const uint8_t* const* pos,
                     __m256i (&acc0)[R], __m256i (&acc1)[R]) {
#pragma GCC unroll 4
  for (int r = 0; r < R; ++r) acc0[r] = acc1[r] = _mm256_setzero_si256();
  const __m256i ones = _mm256_set1_epi16(1);
  for (int64_t i = 0; i < groups; ++i, w += 16) {
    const __m256i b0 = load_pieces(w, piece), b1 = load_pieces(w + 2 * piece, piece);
    const int64_t o = off[i];
#pragma GCC unroll 4
    for (int r = 0; r < R; ++r) {
      int32_t quad;
      std::memcpy(&quad, pos[r] + o, sizeof(quad));
      const __m256i a = _mm256_set1_epi32(quad);
      acc0[r] = u8s8::madd4(acc0[r], a, b0, ones);
      acc1[r] = u8s8::madd4(acc1[r], a, b1, ones);
    }
  }
}

#if defined(__GNUC__)
// One group of k of the 4 x 16 channel-column tile: the group's offset, the 16 channels' quads from the panel's
// four blocks (ymm12: channels 0..7, ymm13: 8..15), then per position its quad broadcast (ymm14) and multiplied
// into the position's two sums (as u8s8::madd4, through ymm15); the panel moves on by 16 bytes.
#define MRT_COLS_STEP                                                            \
  "movq (%[off]), %[p]\n\t"                                                    \
  "addq $8, %[off]\n\t"                                                        \
  "vmovdqu (%[w]), %%xmm12\n\t"                                                \
  "vinserti128 $1, (%[w],%[piece]), %%ymm12, %%ymm12\n\t"                      \
  "vmovdqu (%[w],%[piece],2), %%xmm13\n\t"                                     \
  "vinserti128 $1, (%[w],%[piece3]), %%ymm13, %%ymm13\n\t"                     \
  "addq $16, %[w]\n\t"                                                         \
  MRT_COLS_ROW("%[q0]", "%[c0]", "%[d0]")                                        \
  MRT_COLS_ROW("%[q1]", "%[c1]", "%[d1]")                                        \
  MRT_COLS_ROW("%[q2]", "%[c2]", "%[d2]")                                        \
  MRT_COLS_ROW("%[q3]", "%[c3]", "%[d3]")
#define MRT_COLS_ROW(Q, C, D)                                                    \
  "vpbroadcastd (" Q ",%[p]), %%ymm14\n\t"                                     \
  "vpmaddubsw %%ymm12, %%ymm14, %%ymm15\n\t"                                   \
  "vpmaddwd %[ones], %%ymm15, %%ymm15\n\t"                                     \
  "vpaddd %%ymm15, " C ", " C "\n\t"                                           \
  "vpmaddubsw %%ymm13, %%ymm14, %%ymm15\n\t"                                   \
  "vpmaddwd %[ones], %%ymm15, %%ymm15\n\t"                                     \
  "vpaddd %%ymm15, " D ", " D "\n\t"

// The 4 x 16 channel-column tile's sums over `groups` groups of the panel (piece: its blocks' stride), in one
// block of asm (as sums4x16, so the sums stay in registers).
void col_sums4(int64_t groups, const uint8_t* w, int64_t piece, const int64_t* off, const uint8_t* const* pos,
               __m256i (&acc0)[4], __m256i (&acc1)[4]) {
  __m256i c0 = _mm256_setzero_si256(), c1 = c0, c2 = c0, c3 = c0, d0 = c0, d1 = c0, d2 = c0, d3 = c0;
  const __m256i ones = _mm256_set1_epi16(1);
  const int64_t piece3 = 3 * piece;
  const uint8_t *q0 = pos[0], *q1 = pos[1], *q2 = pos[2], *q3 = pos[3];
  int64_t p;
  if (groups > 0) {
    __asm__("1:\n\t" MRT_COLS_STEP
            "subq $1, %[n]\n\t"
            "jnz 1b\n\t"
            : [c0] "+x"(c0), [c1] "+x"(c1), [c2] "+x"(c2), [c3] "+x"(c3), [d0] "+x"(d0), [d1] "+x"(d1),
              [d2] "+x"(d2), [d3] "+x"(d3), [off] "+r"(off), [w] "+r"(w), [p] "=&r"(p), [n] "+r"(groups)
            : [ones] "x"(ones), [piece] "r"(piece), [piece3] "r"(piece3), [q0] "r"(q0), [q1] "r"(q1), [q2] "r"(q2),
              [q3] "r"(q3)
            : "memory", "cc", "xmm12", "xmm13", "xmm14", "xmm15");
  }
  acc0[0] = c0, acc0[1] = c1, acc0[2] = c2, acc0[3] = c3;
  acc1[0] = d0, acc1[1] = d1, acc1[2] = d2, acc1[3] = d3;
}
#undef MRT_COLS_ROW
#undef MRT_COLS_STEP
#endif

// R positions (pos) x 16 output channels over `groups` groups of k from the panel at w (piece: its blocks'
// stride): the sums into out (row stride ldo: a position's 16 channels per row), plus corr (16 channels) when
// first, else added to what out holds.
template <int R>
MRT_PLANES_TILE void col_tile(int64_t groups, const uint8_t* w, int64_t piece, const int64_t* off,
                              const uint8_t* const* pos, const int32_t* corr, bool first, int32_t* out, int64_t ldo) {
  __m256i acc0[R], acc1[R];
#if defined(__GNUC__)
  if constexpr (R == 4) {
    col_sums4(groups, w, piece, off, pos, acc0, acc1);
  } else
#endif
    col_sums<R>(groups, w, piece, off, pos, acc0, acc1);
  const __m256i k0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(corr));
  const __m256i k1 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(corr + 8));
#pragma GCC unroll 4
  for (int r = 0; r < R; ++r) {
    __m256i* o = reinterpret_cast<__m256i*>(out + r * ldo);
    const __m256i c0 = first ? k0 : _mm256_loadu_si256(o), c1 = first ? k1 : _mm256_loadu_si256(o + 1);
    _mm256_storeu_si256(o, _mm256_add_epi32(acc0[r], c0));
    _mm256_storeu_si256(o + 1, _mm256_add_epi32(acc1[r], c1));
  }
}

// Positions computed by each form, times output channels (the position columns: items of kChunk positions over
// the planes' width, tiles of 16 or a last one of 8, times M in rows of 4; the channel columns: the map's
// positions in rows of 4, times M in columns of 16). The channel columns run where they do 4 % less work or
// better. Measured in a quantized ResNet-18 at 1 thread: its 3 x 3 layers on 14 x 14 maps (9 % less work) ran
// 2 % faster, on 7 x 7 (12 % less) 8 % faster, on 28 x 28 (3.9 % less) 5 % slower, so not those; alone, with
// weights that need no fix, the 28 x 28 layers ran 2 % faster and a 56 x 56 one (1.8 % less) 4 % slower.
bool channel_columns_pay(const DirectConv8& g, const Staging& s) {
  const int64_t Q = g.OH * s.Wq;
  int64_t positions = 0;
  for (int64_t q0 = 0; q0 < Q; q0 += kChunk) {
    const int64_t n = std::min(kChunk, Q - q0), rest = n % kCols;
    positions += n - rest + (rest == 0 ? 0 : rest <= kCols / 2 ? kCols / 2 : kCols);
  }
  const int64_t by_position = positions * ((g.M + 3) / 4 * 4);
  const int64_t by_channel = (g.OH * g.OW + 3) / 4 * 4 * ((g.M + 15) / 16 * 16);
  return by_channel * 25 <= by_position * 24;
}

// The channel-column form of conv8_planes_avx2, once the image is staged (img) and the corrections (corr, Mp
// rounded up to 16 values) and fix entries (fix, placed for this staging) made. The fix is summed first, per
// output channel over the whole map in runs of 16 positions of the planes' numbering, as the position-column
// tile sums it: its entries are a row's. (In the tile's columns a group of k would be paid for wherever one of
// its 16 rows has an entry: a sixth of the groups on a quantized ResNet-18's layers. Summed per item, in runs
// rounded to 16 per item, the fix made that model's 14 x 14 layers 1.5 % slower.)
void conv8_channel_columns(const DirectConv8& g, const Staging& s, const uint8_t* img, const PlaneWeights8& w,
                           const int32_t* corr, const PlaneFix& fix, int32_t* y, const DirectRequant8* rq,
                           ThreadPool* pool) {
  const PreparedA8& A = w.a;
  const int64_t Kp = A.Kp, P = g.OH * g.OW, Mq = plane_panel_rows(g.M);
  const int64_t Q = g.OH * s.Wq, Qr = (Q + kCols - 1) / kCols * kCols;
  static thread_local std::vector<int32_t> fix_sums_buf;
  Scratch<int32_t> fix_sums(fix_sums_buf, fix.begin ? static_cast<size_t>(g.M * Qr) : 0);
  if (fix.begin) {
    auto sum_fix = [&](int64_t m0, int64_t m1) {
      const __m256i ones = _mm256_set1_epi16(1);
      for (int64_t m = m0; m < m1; ++m) {
        if (fix.begin[m] == fix.begin[m + 1]) continue;
        for (int64_t t = 0; t < Q; t += kCols) {
          __m256i s0 = _mm256_setzero_si256(), s1 = s0;
          for (int32_t e = fix.begin[m]; e < fix.begin[m + 1]; ++e) {
            const uint8_t* q = img + t * 4 + fix.at[e];
            const __m256i a = _mm256_set1_epi32(fix.quad[e]);
            s0 = u8s8::madd4(s0, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(q)), a, ones);
            s1 = u8s8::madd4(s1, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(q + 32)), a, ones);
          }
          int32_t* o = fix_sums.data() + m * Qr + t;
          _mm256_storeu_si256(reinterpret_cast<__m256i*>(o), s0);
          _mm256_storeu_si256(reinterpret_cast<__m256i*>(o + 8), s1);
        }
      }
    };
    if (pool && pool->size() > 1 && g.M > 1) pool->parallel_for(g.M, 1, sum_fix);
    else sum_fix(0, g.M);
  }
  const int64_t chunks = (P + kColPositions - 1) / kColPositions, groups = (g.M + kColChannels - 1) / kColChannels;
  const int64_t kblocks = (Kp + kColBlockK - 1) / kColBlockK, kb = (Kp / 4 + kblocks - 1) / kblocks * 4;
  const int64_t piece = Kp * 4;  // from one 4-row block of the panel to the next
  auto body = [&](int64_t b, int64_t e) {
    alignas(32) int32_t acc[kColPositions * kColChannels];
    alignas(32) int32_t column[kColPositions];
    alignas(32) uint8_t bytes[kColPositions];
    const uint8_t* pos[kColPositions];
    for (int64_t item = b; item < e; ++item) {
      const int64_t gi = item / chunks, i0 = (item % chunks) * kColPositions;
      const int64_t m0 = gi * kColChannels, cols = std::min(kColChannels, Mq - m0);
      const int64_t n = std::min(kColPositions, P - i0);
      for (int64_t i = 0; i < n; ++i) pos[i] = img + ((i0 + i) / g.OW * s.Wq + (i0 + i) % g.OW) * 4;
      for (int64_t k0 = 0; k0 < Kp; k0 += kb) {
        const int64_t kn = std::min(kb, Kp - k0);
        for (int64_t c0 = 0; c0 < cols; c0 += 16) {
          const int64_t m = m0 + c0;
          const uint8_t* panel = w.panel.data() + (m / 4 * Kp + k0) * 4;
          const int64_t* off = s.off.data() + k0 / 4;
          int32_t* o = acc + c0;
          int64_t r = 0;
          for (; r + 4 <= n; r += 4)
            col_tile<4>(kn / 4, panel, piece, off, pos + r, corr + m, k0 == 0, o + r * kColChannels, kColChannels);
          switch (n - r) {
            case 3: col_tile<3>(kn / 4, panel, piece, off, pos + r, corr + m, k0 == 0, o + r * kColChannels,
                                kColChannels); break;
            case 2: col_tile<2>(kn / 4, panel, piece, off, pos + r, corr + m, k0 == 0, o + r * kColChannels,
                                kColChannels); break;
            case 1: col_tile<1>(kn / 4, panel, piece, off, pos + r, corr + m, k0 == 0, o + r * kColChannels,
                                kColChannels); break;
            default: break;
          }
        }
      }
      // each channel's n sums, plus its fix, from the item's rows of positions into its plane (positions i0..
      // are consecutive output pixels)
      for (int64_t c = 0; c < std::min(cols, g.M - m0); ++c) {
        const int64_t m = m0 + c;
        for (int64_t i = 0; i < n; ++i) column[i] = acc[i * kColChannels + c];
        if (fix.begin && fix.begin[m] != fix.begin[m + 1]) {
          const int32_t* f = fix_sums.data() + m * Qr;
          for (int64_t i = 0; i < n; ++i) column[i] += f[(i0 + i) / g.OW * s.Wq + (i0 + i) % g.OW];
        }
        if (rq) {
          requantize_bytes_avx2(column, rq->bias ? rq->bias[m] : 0, rq->multiplier[m], rq->zp, rq->lo, rq->hi, bytes,
                                n);
          copy_run(bytes, rq->y + m * P + i0, n);
        } else {
          std::memcpy(y + m * P + i0, column, static_cast<size_t>(n) * sizeof(int32_t));
        }
      }
    }
  };
  // item by item (parallel_for's at most 4 chunks per thread left up to a chunk to the slower thread)
  const int64_t items = groups * chunks;
  if (pool && pool->size() > 1 && items > 1) pool->parallel_tasks(items, body);
  else body(0, items);
}

}  // namespace

void conv8_planes_avx2(const DirectConv8& g, const uint8_t* x, bool x_signed, int32_t xzp, const PlaneWeights8& w,
                       int32_t* y, const DirectRequant8* rq, ThreadPool* pool) {
  const PreparedA8& A = w.a;
  MRT_ENFORCE(w.M == g.M && w.C == g.C && w.KH == g.KH && w.KW == g.KW && A.kernel && A.kernel->pair_limit > 0,
              MRT_INTERNAL, "8-bit plane conv: weights prepared for another geometry or kernel");
  const int64_t Mp = (g.M + 3) / 4 * 4;  // the panel's rows (prepare_a8 rounds M up to the kernel's 4 rows)
  const int64_t Mq = plane_panel_rows(Mp);  // (the channel columns read whole blocks of 16)
  MRT_ENFORCE(static_cast<int64_t>(w.panel.size()) == Mq * A.Kp && static_cast<int64_t>(A.rowsum.size()) == Mp &&
                  static_cast<int64_t>(A.fix_begin.size()) == Mp + 1,
              MRT_INTERNAL, "8-bit plane conv: weights not prepared as a panel of 4-row blocks, 16 rows at a time");
  const Staging s = staging_for(g);
  const int64_t nph = static_cast<int64_t>(s.phases.size()), planes = s.CQ * nph;
  MRT_ENFORCE(A.K == s.CQ * g.KH * g.KW * 4 && static_cast<int64_t>(w.slot_channel.size()) == s.CQ * 4,
              MRT_INTERNAL, "8-bit plane conv: weights of another depth");

  static thread_local std::vector<uint8_t> staging_buf;
  // planes from a cache line's start: a tile's groups of B are then whole lines where the tap's offset is
  // (a 64-byte load across two lines is two loads)
  Scratch<uint8_t> staged(staging_buf, static_cast<size_t>(planes * s.plane + 63));
  uint8_t* img = staged.data() + (64 - reinterpret_cast<uintptr_t>(staged.data()) % 64) % 64;
  const uint8_t flip = x_signed ? 0x80 : 0;
  const int32_t xz = x_signed ? xzp + 128 : xzp;
  const uint8_t fill = static_cast<uint8_t>(xz);
  auto stage = [&](int64_t b, int64_t e) {
    for (int64_t p = b / s.Hq, i = b % s.Hq, r = b; r < e; ++p, i = 0) {
      const int64_t i1 = std::min(s.Hq, i + (e - r));
      stage_rows(g, s, w.slot_channel.data(), x, fill, flip, p, i, i1, img);
      r += i1 - i;
      if (i1 == s.Hq) {
        // the slack past the plane's last row: its first row is the left padding of the reads past the last
        // row's end, the rest is read only for dropped positions
        uint8_t* tail = img + p * s.plane + s.Hq * s.Wq * 4;
        std::memset(tail, fill, static_cast<size_t>(s.Wq * 4));
        std::memset(tail + s.Wq * 4, 0, static_cast<size_t>(s.plane - (s.Hq + 1) * s.Wq * 4));
      }
    }
  };
  const int64_t stage_rows = planes * s.Hq;
  if (pool && pool->size() > 1 && planes * s.plane >= (int64_t{1} << 15))
    pool->parallel_for(stage_rows, std::max<int64_t>(1, 8192 / std::max<int64_t>(1, 4 * s.Wq)), stage);
  else
    stage(0, stage_rows);

  // per output channel: -xz * (the sum of its weights), wrapping like the sums
  static thread_local std::vector<int32_t> corr_buf;
  Scratch<int32_t> corr(corr_buf, static_cast<size_t>(Mq));
  std::fill(corr.data() + Mp, corr.data() + Mq, 0);
  for (int64_t m = 0; m < Mp; ++m)
    corr.data()[m] = static_cast<int32_t>(static_cast<uint32_t>(-xz) *
                                          static_cast<uint32_t>(A.rowsum[static_cast<size_t>(m)]));
  // the fix entries' groups of B in this staging, and their quads of A
  const size_t entries = A.fix_k.size();
  static thread_local std::vector<int64_t> fix_at_buf;
  static thread_local std::vector<int32_t> fix_quad_buf;
  Scratch<int64_t> fix_at(fix_at_buf, entries);
  Scratch<int32_t> fix_quad(fix_quad_buf, entries);
  for (size_t e = 0; e < entries; ++e) {
    const int32_t k = A.fix_k[e];
    fix_at.data()[e] = s.off[static_cast<size_t>(k >> 2)];
    fix_quad.data()[e] = static_cast<int32_t>(static_cast<uint32_t>(A.fix_value[e] & 0xFF) << (8 * (k & 3)));
  }
  if (channel_columns_pay(g, s)) {
    const PlaneFix fix{entries ? A.fix_begin.data() : nullptr, fix_at.data(), fix_quad.data()};
    conv8_channel_columns(g, s, img, w, corr.data(), fix, y, rq, pool);
    return;
  }
  const int64_t Q = g.OH * s.Wq, P = g.OH * g.OW, Kp = A.Kp;
  const int64_t chunks = (Q + kChunk - 1) / kChunk, groups = (g.M + kGroupRows - 1) / kGroupRows;
  // K in equal blocks of at most kBlockK bytes, multiples of 4
  const int64_t kblocks = (Kp + kBlockK - 1) / kBlockK, kb = (Kp / 4 + kblocks - 1) / kblocks * 4;
  auto body = [&](int64_t b, int64_t e) {
    alignas(32) int32_t acc[kGroupRows * kChunk];
    alignas(32) uint8_t bytes[kChunk];
    int64_t run_from[kChunk], run_len[kChunk], run_at[kChunk];  // runs of kept positions
    for (int64_t item = b; item < e; ++item) {
      const int64_t gi = item / chunks, q0 = (item % chunks) * kChunk;
      const int64_t m0 = gi * kGroupRows, rows = std::min(kGroupRows, g.M - m0);
      const int64_t n = std::min(kChunk, Q - q0);
      // K in blocks, so that a tile's groups of B (16 x 4 bytes each) stay in L1 over the item's row blocks
      for (int64_t k0 = 0; k0 < Kp; k0 += kb) {
        const int64_t kn = std::min(kb, Kp - k0);
        for (int64_t t = 0; t < n; t += kCols) {
          const PlaneSrc src{img + (q0 + t) * 4, s.off.data() + k0 / 4};
          const bool half = n - t <= kCols / 2;
          // whole blocks of 4 rows: the panel's rows past M are zeros, their sums land in acc rows not copied out
          for (int64_t r0 = 0; r0 < rows; r0 += 4) {
            const int64_t m = m0 + r0;
            const bool fixed = k0 == 0 && entries && A.fix_begin[static_cast<size_t>(m + 4)] !=
                                                         A.fix_begin[static_cast<size_t>(m)];
            const PlaneFix fix{A.fix_begin.data() + m, fix_at.data(), fix_quad.data()};
            const uint8_t* panel = w.panel.data() + (m / 4 * Kp + k0) * 4;
            (half ? tile<kCols / 2> : tile<kCols>)(kn, panel, src, corr.data() + m, k0 == 0, fixed ? &fix : nullptr,
                                                    acc + r0 * kChunk + t, kChunk);
          }
        }
      }
      // into the planes, position q0 + i being (oh, ow) = ((q0 + i) / Wq, (q0 + i) % Wq), kept when ow < OW:
      // the item's runs of kept positions, the same for each of its rows
      int64_t runs = 0;
      for (int64_t i = 0; i < n;) {
        const int64_t q = q0 + i, oh = q / s.Wq, ow = q % s.Wq;
        const int64_t len = std::min(n - i, s.Wq - ow);
        if (ow < g.OW) {
          run_from[runs] = i, run_len[runs] = std::min(len, g.OW - ow), run_at[runs] = oh * g.OW + ow;
          ++runs;
        }
        i += len;
      }
      for (int64_t r = 0; r < rows; ++r) {
        const int64_t m = m0 + r;
        const int32_t* a = acc + r * kChunk;
        if (rq) {
          // (the AVX2 requantization itself: int8 and uint8 bytes alike, by lo and hi)
          requantize_bytes_avx2(a, rq->bias ? rq->bias[m] : 0, rq->multiplier[m], rq->zp, rq->lo, rq->hi, bytes, n);
          for (int64_t u = 0; u < runs; ++u) copy_run(bytes + run_from[u], rq->y + m * P + run_at[u], run_len[u]);
        } else {
          for (int64_t u = 0; u < runs; ++u)
            std::memcpy(y + m * P + run_at[u], a + run_from[u], static_cast<size_t>(run_len[u]) * sizeof(int32_t));
        }
      }
    }
  };
  // item by item (parallel_for's at most 4 chunks per thread left up to a chunk to the slower thread)
  const int64_t items = groups * chunks;
  if (pool && pool->size() > 1 && items > 1) pool->parallel_tasks(items, body);
  else body(0, items);
}

}  // namespace quant
}  // namespace mrt
