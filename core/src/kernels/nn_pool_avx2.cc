// 2-D MaxPool without dilation or Indices on AVX2: float for strides 1 and 2 along W, 8-bit for any.
//
// Every maximum comes from loads of the input itself: for each tap kw of a window row, the maximum over the
// window's input rows of the columns the 8 outputs read, combined into the running value. (The baseline path
// writes the vertical maxima of a row into a buffer and reads them back at the KW offsets: unaligned loads of
// data just stored, which cannot be forwarded and wait for the stores.) With stride 2 the 8 outputs read 15
// columns: a load at the first and one at the eighth, whose even and odd elements one in-lane shuffle per tap
// gathers; the order of the 64-bit pairs is fixed once per 8 outputs (a maximum is elementwise). No load reads
// a column outside the window's: outputs whose windows reach into the left or right padding are computed one at
// a time, and a row's last 8 outputs are computed again over the vectors before them where it does not end on a
// multiple of 8. Every maximum takes the running value second, as the other paths do, so a NaN input is
// skipped and of equal values (signed zeros) the first one read is kept: rows in order within a tap, taps in
// order.
#include <immintrin.h>

#include <algorithm>
#include <limits>
#include <vector>

#include "../threadpool.h"
#include "nn_geometry.h"

namespace mrt {
namespace nn {
namespace {

// The 8 outputs from `ow` of one row (all of their windows' columns inside the row), over input rows [r0, r0 + nr)
// of the plane xp. kRows, kKW > 0: the window's height and width at compile time (0: nr, g.KW).
template <int kStride, int kRows, int kKW>
inline void max8(const MaxPool2d& g, const float* xp, int64_t r0, int64_t nr, int64_t ow, float* yr) {
  const int64_t rows = kRows > 0 ? kRows : nr, KW = kKW > 0 ? kKW : g.KW, W = g.W;
  const __m256 ident = _mm256_set1_ps(-std::numeric_limits<float>::infinity());
  const float* p = xp + r0 * W + ow * kStride - g.pl;
  __m256 acc = ident;
  if constexpr (kStride == 2 && kKW == 3) {
    // 3 wide, stride 2: the 8 outputs' 17 columns by rows from 4 loads a row (columns 0..7, 8..15, 2..9, 9..16)
    // instead of 6; the taps' columns 2j, 2j + 1 and 2j + 2 gathered from them as below
    __m256 a = ident, b = ident, c = ident, d = ident;
#pragma GCC unroll 4
    for (int64_t r = 0; r < rows; ++r) {
      const float* q = p + r * W;
      a = _mm256_max_ps(_mm256_loadu_ps(q), a);
      b = _mm256_max_ps(_mm256_loadu_ps(q + 8), b);
      c = _mm256_max_ps(_mm256_loadu_ps(q + 2), c);
      d = _mm256_max_ps(_mm256_loadu_ps(q + 9), d);
    }
    // per 128-bit lane, columns (0, 2, 8, 10 | 4, 6, 12, 14) + kw
    acc = _mm256_max_ps(_mm256_shuffle_ps(a, b, _MM_SHUFFLE(2, 0, 2, 0)), acc);
    acc = _mm256_max_ps(_mm256_shuffle_ps(a, b, _MM_SHUFFLE(3, 1, 3, 1)), acc);
    acc = _mm256_max_ps(_mm256_shuffle_ps(c, d, _MM_SHUFFLE(3, 1, 2, 0)), acc);
    _mm256_storeu_ps(yr + ow, _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(acc), _MM_SHUFFLE(3, 1, 2, 0))));
    return;
  }
#pragma GCC unroll 4
  for (int64_t kw = 0; kw < KW; ++kw) {
    __m256 v = ident;
    if constexpr (kStride == 1) {
#pragma GCC unroll 4
      for (int64_t r = 0; r < rows; ++r) v = _mm256_max_ps(_mm256_loadu_ps(p + r * W + kw), v);
    } else {
      __m256 lo = ident, hi = ident;  // columns 0..7 and 7..14 of the 8 outputs' 15
#pragma GCC unroll 4
      for (int64_t r = 0; r < rows; ++r) {
        lo = _mm256_max_ps(_mm256_loadu_ps(p + r * W + kw), lo);
        hi = _mm256_max_ps(_mm256_loadu_ps(p + r * W + kw + 7), hi);
      }
      // per 128-bit lane: elements 0 and 2 of lo, 1 and 3 of hi (columns 0, 2, 8, 10 | 4, 6, 12, 14)
      v = _mm256_shuffle_ps(lo, hi, _MM_SHUFFLE(3, 1, 2, 0));
    }
    acc = _mm256_max_ps(v, acc);
  }
  if constexpr (kStride == 2)  // pairs (0, 2), (8, 10), (4, 6), (12, 14) into column order
    acc = _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(acc), _MM_SHUFFLE(3, 1, 2, 0)));
  _mm256_storeu_ps(yr + ow, acc);
}

// One output whose window may reach into the padding (skipped columns), in max8's order.
inline float max1(const MaxPool2d& g, const float* xp, int64_t r0, int64_t nr, int64_t ow) {
  float acc = -std::numeric_limits<float>::infinity();
  for (int64_t kw = 0; kw < g.KW; ++kw) {
    const int64_t c = ow * g.sw - g.pl + kw;
    if (c < 0 || c >= g.W) continue;
    float v = -std::numeric_limits<float>::infinity();
    for (int64_t r = 0; r < nr; ++r) {
      const float x = xp[(r0 + r) * g.W + c];
      v = x > v ? x : v;
    }
    acc = v > acc ? v : acc;
  }
  return acc;
}

template <int kStride, int kRows, int kKW>
void max_row(const MaxPool2d& g, const float* xp, int64_t r0, int64_t nr, float* yr) {
  // outputs [lo, hi) read only columns inside the row
  const int64_t lo = std::min(g.OW, (g.pl + kStride - 1) / kStride);
  const int64_t span = g.W - g.KW + g.pl;  // (negative: no window fits)
  const int64_t hi = span < 0 ? lo : std::max(lo, std::min(g.OW, span / kStride + 1));
  for (int64_t ow = 0; ow < lo; ++ow) yr[ow] = max1(g, xp, r0, nr, ow);
  int64_t ow = lo;
  if (hi - lo >= 8) {
    for (; ow + 8 <= hi; ow += 8) max8<kStride, kRows, kKW>(g, xp, r0, nr, ow, yr);
    if (ow < hi) max8<kStride, kRows, kKW>(g, xp, r0, nr, hi - 8, yr);  // (overlapping the vector before)
    ow = hi;
  }
  for (; ow < g.OW; ++ow) yr[ow] = max1(g, xp, r0, nr, ow);
}

template <int kStride>
void max_pool_rows(const MaxPool2d& g, const float* x, float* y, int64_t b, int64_t e) {
  for (int64_t item = b, plane = b / g.OH, oh = b % g.OH; item < e; ++item) {
    const int64_t h0 = oh * g.sh - g.pt, r0 = std::max<int64_t>(0, h0);
    const int64_t nr = std::max<int64_t>(0, std::min(g.H, h0 + g.KH) - r0);
    const float* xp = x + plane * g.H * g.W;
    float* yr = y + (plane * g.OH + oh) * g.OW;
    if (nr == 3 && g.KW == 3) max_row<kStride, 3, 3>(g, xp, r0, nr, yr);  // (the common window, unrolled)
    else if (nr == 2 && g.KW == 2) max_row<kStride, 2, 2>(g, xp, r0, nr, yr);
    else max_row<kStride, 0, 0>(g, xp, r0, nr, yr);
    if (++oh == g.OH) {
      oh = 0;
      ++plane;
    }
  }
}

}  // namespace

bool max_pool_2d_float_avx2(const MaxPool2d& g, const float* x, float* y, ThreadPool& pool) {
  if (g.sw != 1 && g.sw != 2) return false;
  const int64_t grain = pool_rows_per_item(g.KH, g.W);
  pool.parallel_for(g.planes * g.OH, grain, [&](int64_t b, int64_t e) {
    if (g.sw == 1) max_pool_rows<1>(g, x, y, b, e);
    else max_pool_rows<2>(g, x, y, b, e);
  });
  return true;
}

// 8-bit planes: the method of max_pool_2d_bytes_avx512 with vectors of 32 bytes. Each output row's window rows
// are reduced to one row (the vertical maxima, 32 columns a step) in a zero-padded buffer, whose windows then give
// 32 outputs a step: with stride 2 the even bytes of 64 (the low byte of each 16-bit pair, packed, the order of the
// 64-bit quarters fixed once per step). int8 goes through the unsigned domain (x ^ 0x80), where the padding's 0
// is the identity.
void max_pool_2d_bytes_avx2(const MaxPool2d& g, const uint8_t* x, bool is_signed, uint8_t* y, ThreadPool& pool) {
  const uint8_t f = is_signed ? 0x80 : 0;
  const __m256i flip = _mm256_set1_epi8(static_cast<char>(f));
  // the buffer: the left padding, the row, and room for the last step's whole vectors past the windows
  const int64_t width = std::max(g.pl + g.W, (g.OW - 1) * g.sw + g.KW) + 96;
  const int64_t grain = pool_rows_per_item(g.KH, g.W);
  pool.parallel_for(g.planes * g.OH, grain, [&](int64_t b, int64_t e) {
    thread_local std::vector<uint8_t> buf;  // per thread, so that a run allocates nothing after its first
    buf.assign(static_cast<size_t>(width), 0);
    uint8_t* row = buf.data() + g.pl;
    const __m256i low_bytes = _mm256_set1_epi16(0x00FF);
    alignas(32) uint8_t tail[32];
    for (int64_t item = b; item < e; ++item) {
      const int64_t plane = item / g.OH, oh = item % g.OH;
      const uint8_t* xp = x + plane * g.H * g.W;
      uint8_t* yr = y + plane * g.OH * g.OW + oh * g.OW;
      const int64_t h0 = oh * g.sh - g.pt, ih0 = std::max<int64_t>(0, h0), ih1 = std::min(g.H, h0 + g.KH);
      auto vertical = [&](int64_t w) {  // columns [w, w + 32)
        __m256i acc = _mm256_setzero_si256();
        for (int64_t ih = ih0; ih < ih1; ++ih) {
          const __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xp + ih * g.W + w));
          acc = _mm256_max_epu8(acc, _mm256_xor_si256(v, flip));
        }
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(row + w), acc);
      };
      int64_t w = 0;
      for (; w + 32 <= g.W; w += 32) vertical(w);
      if (w < g.W && g.W >= 32) {
        vertical(g.W - 32);  // a row's last columns, over the vector before
      } else {
        for (; w < g.W; ++w) {
          uint8_t acc = 0;
          for (int64_t ih = ih0; ih < ih1; ++ih) acc = std::max<uint8_t>(acc, xp[ih * g.W + w] ^ f);
          row[w] = acc;
        }
      }
      const uint8_t* r0 = buf.data();
      auto store = [&](int64_t ow, __m256i v) {  // outputs [ow, ow + 32) or the row's last ones
        v = _mm256_xor_si256(v, flip);
        if (ow + 32 <= g.OW) {
          _mm256_storeu_si256(reinterpret_cast<__m256i*>(yr + ow), v);
        } else {
          _mm256_store_si256(reinterpret_cast<__m256i*>(tail), v);
          std::copy(tail, tail + (g.OW - ow), yr + ow);
        }
      };
      if (g.sw == 1) {
        for (int64_t ow = 0; ow < g.OW; ow += 32) {
          __m256i acc = _mm256_setzero_si256();
          for (int64_t kw = 0; kw < g.KW; ++kw)
            acc = _mm256_max_epu8(acc, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(r0 + ow + kw)));
          store(ow, acc);
        }
      } else if (g.sw == 2) {
        for (int64_t ow = 0; ow < g.OW; ow += 32) {
          __m256i acc = _mm256_setzero_si256();
          for (int64_t kw = 0; kw < g.KW; ++kw) {
            const uint8_t* p = r0 + 2 * ow + kw;
            const __m256i* v = reinterpret_cast<const __m256i*>(p);
            const __m256i lo = _mm256_and_si256(_mm256_loadu_si256(v), low_bytes);
            const __m256i hi = _mm256_and_si256(_mm256_loadu_si256(v + 1), low_bytes);
            acc = _mm256_max_epu8(acc, _mm256_packus_epi16(lo, hi));  // quarters: lo 0, hi 0, lo 1, hi 1
          }
          store(ow, _mm256_permute4x64_epi64(acc, _MM_SHUFFLE(3, 1, 2, 0)));
        }
      } else {
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
