// 2-D MaxPool without dilation or Indices on AVX-512 (F + BW), for float and 8-bit planes, and the float
// AveragePool whose windows all lie inside the input (the same rows summed).
//
// One output row at a time: the window's input rows are reduced to one row by vertical maxima (whole vectors
// along W), written into a buffer whose padding columns hold the identity (the lowest value), and the row's
// outputs are then maxima of KW shifted reads of that buffer: consecutive reads with stride 1, the even
// elements of two (a permute) with stride 2, a scalar loop otherwise. 8-bit planes run in the unsigned domain
// (int8 with its top bit flipped), 64 bytes a vector.
#include <immintrin.h>

#include <algorithm>
#include <cstring>
#include <limits>
#include <vector>

#include "../threadpool.h"
#include "nn_geometry.h"

namespace mrt {
namespace nn {
namespace {

inline __mmask16 first16(int64_t n) { return n >= 16 ? __mmask16(0xFFFF) : static_cast<__mmask16>((1u << n) - 1); }
inline __mmask64 first64(int64_t n) { return n >= 64 ? ~__mmask64(0) : (__mmask64(1) << n) - 1; }

// The lanes of 16 columns from c that lie inside [0, w).
inline __mmask16 inside16(int64_t c, int64_t w) {
  const int64_t lo = std::max<int64_t>(0, -c), hi = std::min<int64_t>(16, w - c);
  return hi <= lo ? __mmask16(0) : static_cast<__mmask16>(((1u << hi) - 1) & ~((1u << lo) - 1));
}

// The running value combined with v: the max (v first, so a NaN input is skipped) or the sum.
template <bool kMax>
inline __m512 combine(__m512 v, __m512 acc) {
  return kMax ? _mm512_max_ps(v, acc) : _mm512_add_ps(acc, v);
}

// Maxima (sums) over input rows [ih0, ih1) of the 16 columns from c whose lanes inside the plane are m; the
// others hold the identity and are not read. kRows > 0: ih1 - ih0 is kRows (the loop unrolled).
template <bool kMax, int kRows>
inline __m512 column_max16(const float* xp, int64_t W, int64_t ih0, int64_t ih1, int64_t c, __mmask16 m,
                           __m512 ident) {
  __m512 acc = ident;
  const int64_t rows = kRows > 0 ? kRows : ih1 - ih0;
  const float* p = xp + ih0 * W + c;
  if (m == 0xFFFF) {  // (most of them: plain loads)
#pragma GCC unroll 8
    for (int64_t i = 0; i < rows; ++i) acc = combine<kMax>(_mm512_loadu_ps(p + i * W), acc);
  } else if (m) {
#pragma GCC unroll 8
    for (int64_t i = 0; i < rows; ++i) acc = combine<kMax>(_mm512_mask_loadu_ps(ident, m, p + i * W), acc);
  }
  return acc;
}

// The lanes inside the plane of each 16-column chunk a row reads: chunk k starts at column 16 k - pl (a row of
// stride 1 reads chunks 0 ... steps, one of stride 2 chunks 0 ... 2 steps + 1, steps = ceil(OW / 16)). In the
// calling thread's buffer (read by the pool's threads during the call; no allocation once it is large enough).
const std::vector<__mmask16>& chunk_masks(const MaxPool2d& g) {
  thread_local std::vector<__mmask16> m;
  m.resize(static_cast<size_t>(2 * ((g.OW + 15) / 16 + 1)));
  for (size_t k = 0; k < m.size(); ++k) m[k] = inside16(16 * static_cast<int64_t>(k) - g.pl, g.W);
  return m;
}

// Strides 1 and 2 with windows of at most 17 (stride 1) or 33 (stride 2) columns: everything stays in registers.
// With stride 1, a vector of 16 outputs reads the column maxima `cur` (its 16 first columns) and `next` (the 16
// after): tap kw is lanes kw..kw+15 of the pair. With stride 2, the 32 columns of a step are split into their
// even and odd columns first; tap kw is then the even (kw even) or odd (kw odd) vector shifted by kw / 2.
// Every max takes the running value as its second operand, so a NaN input is skipped as in the other paths.
// Column maxima come from loads of the input itself, never from a buffer written just before (that read-after-
// write through memory stalls on unaligned loads).
bool max_pool_in_registers(const MaxPool2d& g) {
  return (g.sw == 1 && g.KW <= 17) || (g.sw == 2 && g.KW <= 33);
}

// With kMax false the same rows are summed instead, for an average whose windows all lie inside the input: the
// sums are divided by `taps` on the way out. `masks`: chunk_masks(g).
// kRows, kKW > 0: the row's window is kRows x kKW (its loops unrolled; 0: as g and the row say).
template <bool kMax, int kRows = 0, int kKW = 0>
inline __attribute__((always_inline)) void max_pool_row_in_registers(const MaxPool2d& g, const __mmask16* masks,
                                                                     const float* xp, int64_t ih0, int64_t ih1,
                                                                     float* yr, float div_h = 1.f,
                                                                     const float* div_w = nullptr) {
  const int64_t KW = kKW > 0 ? kKW : g.KW;
  const __m512 ident = _mm512_set1_ps(kMax ? -std::numeric_limits<float>::infinity() : 0.f);
  const __m512 vdh = _mm512_set1_ps(div_h);
  // the 16 outputs from ow: the maxima, or the sums over their windows' tap counts (0 where a window has none)
  auto out = [&](__m512 v, int64_t ow) {
    if constexpr (kMax) return v;
    const __m512 c = _mm512_mul_ps(vdh, _mm512_maskz_loadu_ps(first16(g.OW - ow), div_w + ow));
    return _mm512_maskz_div_ps(_mm512_cmp_ps_mask(c, _mm512_setzero_ps(), _CMP_GT_OQ), v, c);
  };
  const __m512i lane = _mm512_set_epi32(15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0);
  auto column = [&](int64_t k) { return column_max16<kMax, kRows>(xp, g.W, ih0, ih1, 16 * k - g.pl, masks[k], ident); };
  if (g.sw == 1) {
    __m512 cur = column(0);
    for (int64_t ow = 0, k = 1; ow < g.OW; ow += 16, ++k) {
      // (the last vector of a row reads the next chunk only if its outputs' windows reach into it)
      const __m512 next = g.OW - ow - 1 + KW - 1 >= 16 ? column(k) : ident;
      __m512 acc = cur;
#pragma GCC unroll 8
      for (int64_t kw = 1; kw < KW; ++kw)
        acc = combine<kMax>(
            _mm512_permutex2var_ps(cur, _mm512_add_epi32(lane, _mm512_set1_epi32(static_cast<int>(kw))), next), acc);
      _mm512_mask_storeu_ps(yr + ow, first16(g.OW - ow), out(acc, ow));
      cur = next;
    }
    return;
  }
  const __m512i even = _mm512_add_epi32(lane, lane), odd = _mm512_add_epi32(even, _mm512_set1_epi32(1));
  auto split = [&](int64_t k, __m512& e, __m512& o) {  // chunks k and k + 1
    const __m512 a = column(k), b = column(k + 1);
    e = _mm512_permutex2var_ps(a, even, b);
    o = _mm512_permutex2var_ps(a, odd, b);
  };
  __m512 ce, co;
  split(0, ce, co);
  for (int64_t ow = 0, k = 2; ow < g.OW; ow += 16, k += 2) {
    __m512 ne = ident, no = ident;
    if (g.OW - ow - 1 + (KW - 1) / 2 >= 16) split(k, ne, no);
    __m512 acc = ce;
#pragma GCC unroll 8
    for (int64_t kw = 1; kw < KW; ++kw) {
      const __m512i shift = _mm512_add_epi32(lane, _mm512_set1_epi32(static_cast<int>(kw / 2)));
      acc = combine<kMax>(kw == 1   ? co  // (shifted by 0)
                          : kw % 2 ? _mm512_permutex2var_ps(co, shift, no)
                                   : _mm512_permutex2var_ps(ce, shift, ne),
                          acc);
    }
    _mm512_mask_storeu_ps(yr + ow, first16(g.OW - ow), out(acc, ow));
    ce = ne;
    co = no;
  }
}

// Two consecutive output rows of a 3 x 3, stride-2 max pool whose windows lie inside the plane (input rows ih0 to
// ih0 + 4, the middle one in both): the two rows' chains interleaved, and a load fewer a column chunk. The maxima
// are taken in the order max_pool_row_in_registers takes them (the same result for a NaN or a signed zero).
// For rows of one output vector, bound by each row's fixed work rather than by memory; alone, 1 thread, in one
// process alternating with single rows: SqueezeNet's 256 x 27 x 27 22.9 against 26.9 us, 480 x 28 x 28 40.8 against
// 45.3, 832 x 14 x 14 24.1 against 37.8. Wider rows gain nothing (128 x 55 x 55 the same) or lose (64 x 111 x 111,
// 4 % slower: five row streams at once).
inline void max_pool_rows_3x3s2_pair(const MaxPool2d& g, const __mmask16* masks, const float* xp, int64_t ih0,
                                     float* y0, float* y1) {
  const __m512 ident = _mm512_set1_ps(-std::numeric_limits<float>::infinity());
  // column maxima of chunk k for the first row's window (a) and the second's (b)
  auto columns = [&](int64_t k, __m512& a, __m512& b) {
    const __mmask16 m = masks[k];
    if (!m) {
      a = b = ident;
      return;
    }
    const float* p = xp + ih0 * g.W + 16 * k - g.pl;
    const __m512 r0 = _mm512_mask_loadu_ps(ident, m, p), r1 = _mm512_mask_loadu_ps(ident, m, p + g.W),
                 r2 = _mm512_mask_loadu_ps(ident, m, p + 2 * g.W), r3 = _mm512_mask_loadu_ps(ident, m, p + 3 * g.W),
                 r4 = _mm512_mask_loadu_ps(ident, m, p + 4 * g.W);
    a = _mm512_max_ps(r2, _mm512_max_ps(r1, _mm512_max_ps(r0, ident)));
    b = _mm512_max_ps(r4, _mm512_max_ps(r3, _mm512_max_ps(r2, ident)));
  };
  const __m512i lane = _mm512_set_epi32(15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0);
  const __m512i even = _mm512_add_epi32(lane, lane), odd = _mm512_add_epi32(even, _mm512_set1_epi32(1));
  const __m512i shift1 = _mm512_add_epi32(lane, _mm512_set1_epi32(1));
  // chunks k and k + 1 split into their even and odd columns, for both rows
  auto split = [&](int64_t k, __m512& ea, __m512& oa, __m512& eb, __m512& ob) {
    __m512 a0, b0, a1, b1;
    columns(k, a0, b0);
    columns(k + 1, a1, b1);
    ea = _mm512_permutex2var_ps(a0, even, a1);
    oa = _mm512_permutex2var_ps(a0, odd, a1);
    eb = _mm512_permutex2var_ps(b0, even, b1);
    ob = _mm512_permutex2var_ps(b0, odd, b1);
  };
  __m512 cea, coa, ceb, cob;
  split(0, cea, coa, ceb, cob);
  for (int64_t ow = 0, k = 2; ow < g.OW; ow += 16, k += 2) {
    __m512 nea = ident, noa = ident, neb = ident, nob = ident;
    if (g.OW - ow >= 16) split(k, nea, noa, neb, nob);  // (the last output's window reaches into chunk k)
    const __mmask16 st = first16(g.OW - ow);
    // taps 0, 1 and 2: even columns, odd columns, even columns one further
    const __m512 a = _mm512_max_ps(_mm512_permutex2var_ps(cea, shift1, nea), _mm512_max_ps(coa, cea));
    const __m512 b = _mm512_max_ps(_mm512_permutex2var_ps(ceb, shift1, neb), _mm512_max_ps(cob, ceb));
    _mm512_mask_storeu_ps(y0 + ow, st, a);
    _mm512_mask_storeu_ps(y1 + ow, st, b);
    cea = nea;
    coa = noa;
    ceb = neb;
    cob = nob;
  }
}

// fn(plane, oh) for the output rows [b, e) of all planes ((plane, oh) stepped along, not divided out of each
// row: a division per row of a few vectors showed in the time of small planes)
template <typename Fn>
inline void for_rows(const MaxPool2d& g, int64_t b, int64_t e, Fn&& fn) {
  for (int64_t item = b, plane = b / g.OH, oh = b % g.OH; item < e; ++item) {
    fn(plane, oh);
    if (++oh == g.OH) {
      oh = 0;
      ++plane;
    }
  }
}

}  // namespace

void max_pool_2d_float_avx512(const MaxPool2d& g, const float* x, float* y, ThreadPool& pool) {
  if (max_pool_in_registers(g)) {
    const std::vector<__mmask16>& masks = chunk_masks(g);
    // rows of one output vector (16 or fewer) in pairs where the windows allow (max_pool_rows_3x3s2_pair)
    const bool pairs = g.KH == 3 && g.KW == 3 && g.sh == 2 && g.sw == 2 && g.OW <= 16;
    pool.parallel_for(g.planes * g.OH, pool_rows_per_item(g.KH, g.W), [&](int64_t b, int64_t e) {
      // (plane, oh) stepped along, not divided out of each row: a division per row of a few vectors showed in the
      // time of small planes
      for (int64_t item = b, plane = b / g.OH, oh = b % g.OH; item < e;) {
        const int64_t h0 = oh * g.sh - g.pt, ih0 = std::max<int64_t>(0, h0), ih1 = std::min(g.H, h0 + g.KH);
        const float* xp = x + plane * g.H * g.W;
        float* yr = y + plane * g.OH * g.OW + oh * g.OW;
        int64_t rows = 1;
        if (pairs && h0 >= 0 && h0 + 5 <= g.H && oh + 1 < g.OH && item + 1 < e) {
          max_pool_rows_3x3s2_pair(g, masks.data(), xp, ih0, yr, yr + g.OW);
          rows = 2;
        } else if (ih1 - ih0 == 3 && g.KW == 3) {
          // the common windows with their loops unrolled (3 x 3 stride 2: 0.14 -> 0.09 ms on 64 x 111 x 111)
          max_pool_row_in_registers<true, 3, 3>(g, masks.data(), xp, ih0, ih1, yr);
        } else if (ih1 - ih0 == 2 && g.KW == 2) {
          max_pool_row_in_registers<true, 2, 2>(g, masks.data(), xp, ih0, ih1, yr);
        } else {
          max_pool_row_in_registers<true>(g, masks.data(), xp, ih0, ih1, yr);
        }
        item += rows;
        oh += rows;
        if (oh == g.OH) {
          oh = 0;
          ++plane;
        }
      }
    });
    return;
  }
  const float ident = -std::numeric_limits<float>::infinity();
  // the buffer: pl identity columns, the W reduced columns, identity up to the last read plus a vector
  const int64_t width = std::max(g.pl + g.W, (g.OW - 1) * g.sw + g.KW) + 48;
  pool.parallel_for(g.planes * g.OH, pool_rows_per_item(g.KH, g.W), [&](int64_t b, int64_t e) {
    thread_local std::vector<float> buf;  // per thread, so that a run allocates nothing after its first
    buf.assign(static_cast<size_t>(width), ident);
    float* row = buf.data() + g.pl;  // row[w] for w in [-pl, width - pl)
    const __m512i even = _mm512_set_epi32(30, 28, 26, 24, 22, 20, 18, 16, 14, 12, 10, 8, 6, 4, 2, 0);
    for (int64_t item = b; item < e; ++item) {
      const int64_t plane = item / g.OH, oh = item % g.OH;
      const float* xp = x + plane * g.H * g.W;
      float* yr = y + plane * g.OH * g.OW + oh * g.OW;
      const int64_t h0 = oh * g.sh - g.pt, ih0 = std::max<int64_t>(0, h0), ih1 = std::min(g.H, h0 + g.KH);
      for (int64_t w = 0; w < g.W; w += 16) {
        const __mmask16 m = first16(g.W - w);
        __m512 acc = _mm512_set1_ps(ident);
        for (int64_t ih = ih0; ih < ih1; ++ih) acc = _mm512_max_ps(_mm512_maskz_loadu_ps(m, xp + ih * g.W + w), acc);
        _mm512_mask_storeu_ps(row + w, m, acc);
      }
      const float* r0 = buf.data();  // output ow reads r0[ow * sw + kw]
      if (g.sw == 1 || g.sw == 2) {
        for (int64_t ow = 0; ow < g.OW; ow += 16) {
          __m512 acc = _mm512_set1_ps(ident);
          for (int64_t kw = 0; kw < g.KW; ++kw) {
            const float* s = r0 + ow * g.sw + kw;
            const __m512 v = g.sw == 1 ? _mm512_loadu_ps(s)
                                       : _mm512_permutex2var_ps(_mm512_loadu_ps(s), even, _mm512_loadu_ps(s + 16));
            acc = _mm512_max_ps(v, acc);
          }
          _mm512_mask_storeu_ps(yr + ow, first16(g.OW - ow), acc);
        }
      } else {
        for (int64_t ow = 0; ow < g.OW; ++ow) {
          float acc = ident;
          for (int64_t kw = 0; kw < g.KW; ++kw) {
            const float v = r0[ow * g.sw + kw];
            acc = v > acc ? v : acc;
          }
          yr[ow] = acc;
        }
      }
    }
  });
}

bool avg_pool_2d_float_avx512(const MaxPool2d& g, const float* div_h, const float* div_w, const float* x, float* y,
                              ThreadPool& pool) {
  if (!max_pool_in_registers(g)) return false;
  const std::vector<__mmask16>& masks = chunk_masks(g);
  pool.parallel_for(g.planes * g.OH, pool_rows_per_item(g.KH, g.W), [&](int64_t b, int64_t e) {
    for_rows(g, b, e, [&](int64_t plane, int64_t oh) {
      const int64_t h0 = oh * g.sh - g.pt, ih0 = std::max<int64_t>(0, h0), ih1 = std::min(g.H, h0 + g.KH);
      float* yr = y + plane * g.OH * g.OW + oh * g.OW;
      if (ih1 <= ih0) {  // a window wholly in the padding: no tap, 0
        std::fill(yr, yr + g.OW, 0.f);
        return;
      }
      max_pool_row_in_registers<false>(g, masks.data(), x + plane * g.H * g.W, ih0, ih1, yr, div_h[oh], div_w);
    });
  });
  return true;
}

void max_pool_2d_bytes_avx512(const MaxPool2d& g, const uint8_t* x, bool is_signed, uint8_t* y, ThreadPool& pool) {
  const __m512i flip = _mm512_set1_epi8(is_signed ? static_cast<char>(0x80) : 0);
  const int64_t width = std::max(g.pl + g.W, (g.OW - 1) * g.sw + g.KW) + 192;
  pool.parallel_for(g.planes * g.OH, pool_rows_per_item(g.KH, g.W), [&](int64_t b, int64_t e) {
    thread_local std::vector<uint8_t> buf;  // per thread, so that a run allocates nothing after its first
    buf.assign(static_cast<size_t>(width), 0);  // 0: the identity in the unsigned domain
    uint8_t* row = buf.data() + g.pl;
    const __m512i low_bytes = _mm512_set1_epi16(0x00FF);
    for (int64_t item = b; item < e; ++item) {
      const int64_t plane = item / g.OH, oh = item % g.OH;
      const uint8_t* xp = x + plane * g.H * g.W;
      uint8_t* yr = y + plane * g.OH * g.OW + oh * g.OW;
      const int64_t h0 = oh * g.sh - g.pt, ih0 = std::max<int64_t>(0, h0), ih1 = std::min(g.H, h0 + g.KH);
      for (int64_t w = 0; w < g.W; w += 64) {
        const __mmask64 m = first64(g.W - w);
        __m512i acc = _mm512_setzero_si512();
        for (int64_t ih = ih0; ih < ih1; ++ih)
          acc = _mm512_max_epu8(acc, _mm512_xor_si512(_mm512_maskz_loadu_epi8(m, xp + ih * g.W + w), flip));
        _mm512_mask_storeu_epi8(row + w, m, acc);
      }
      const uint8_t* r0 = buf.data();
      if (g.sw == 1) {
        for (int64_t ow = 0; ow < g.OW; ow += 64) {
          __m512i acc = _mm512_setzero_si512();
          for (int64_t kw = 0; kw < g.KW; ++kw) acc = _mm512_max_epu8(acc, _mm512_loadu_si512(r0 + ow + kw));
          _mm512_mask_storeu_epi8(yr + ow, first64(g.OW - ow), _mm512_xor_si512(acc, flip));
        }
      } else if (g.sw == 2) {  // 32 outputs a step: the even bytes of 64 (the low byte of each 16-bit pair)
        for (int64_t ow = 0; ow < g.OW; ow += 32) {
          __m256i acc = _mm256_setzero_si256();
          for (int64_t kw = 0; kw < g.KW; ++kw) {
            const __m512i v = _mm512_and_si512(_mm512_loadu_si512(r0 + 2 * ow + kw), low_bytes);
            acc = _mm256_max_epu8(acc, _mm512_cvtepi16_epi8(v));
          }
          const int64_t n = std::min<int64_t>(32, g.OW - ow);
          _mm256_mask_storeu_epi8(yr + ow, n >= 32 ? ~__mmask32(0) : (__mmask32(1) << n) - 1,
                                  _mm256_xor_si256(acc, _mm512_castsi512_si256(flip)));
        }
      } else {
        const uint8_t f = is_signed ? 0x80 : 0;
        for (int64_t ow = 0; ow < g.OW; ++ow) {
          uint8_t acc = 0;
          for (int64_t kw = 0; kw < g.KW; ++kw) acc = std::max(acc, r0[ow * g.sw + kw]);
          yr[ow] = static_cast<uint8_t>(acc ^ f);
        }
      }
    }
  });
}

}  // namespace nn
}  // namespace mrt
