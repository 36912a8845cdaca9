// 8x8 transpose of ymm rows, for the AVX2 / AVX-512 kernel files (each compiled with its own ISA flags).
// Internal linkage on purpose: an inline function with external linkage compiled under different target
// flags could be merged by the linker into the variant of the wider ISA.
#pragma once
#include <immintrin.h>

#include <cstdint>

namespace mrt {
namespace {

// in[r] = row r (8 values) -> out[j] = column j (the 8 rows' values j)
inline void transpose8x8(__m256 (&v)[8]) {
  const __m256 t0 = _mm256_unpacklo_ps(v[0], v[1]), t1 = _mm256_unpackhi_ps(v[0], v[1]);
  const __m256 t2 = _mm256_unpacklo_ps(v[2], v[3]), t3 = _mm256_unpackhi_ps(v[2], v[3]);
  const __m256 t4 = _mm256_unpacklo_ps(v[4], v[5]), t5 = _mm256_unpackhi_ps(v[4], v[5]);
  const __m256 t6 = _mm256_unpacklo_ps(v[6], v[7]), t7 = _mm256_unpackhi_ps(v[6], v[7]);
  const __m256 u0 = _mm256_shuffle_ps(t0, t2, 0x44), u1 = _mm256_shuffle_ps(t0, t2, 0xEE);
  const __m256 u2 = _mm256_shuffle_ps(t1, t3, 0x44), u3 = _mm256_shuffle_ps(t1, t3, 0xEE);
  const __m256 u4 = _mm256_shuffle_ps(t4, t6, 0x44), u5 = _mm256_shuffle_ps(t4, t6, 0xEE);
  const __m256 u6 = _mm256_shuffle_ps(t5, t7, 0x44), u7 = _mm256_shuffle_ps(t5, t7, 0xEE);
  v[0] = _mm256_permute2f128_ps(u0, u4, 0x20);
  v[1] = _mm256_permute2f128_ps(u1, u5, 0x20);
  v[2] = _mm256_permute2f128_ps(u2, u6, 0x20);
  v[3] = _mm256_permute2f128_ps(u3, u7, 0x20);
  v[4] = _mm256_permute2f128_ps(u0, u4, 0x31);
  v[5] = _mm256_permute2f128_ps(u1, u5, 0x31);
  v[6] = _mm256_permute2f128_ps(u2, u6, 0x31);
  v[7] = _mm256_permute2f128_ps(u3, u7, 0x31);
}

// Within each 128-bit lane, rows a b c d (4 values each) -> columns: a = (a0 b0 c0 d0), b = (a1 b1 c1 d1), ...
inline void transpose4x4_lanes(__m256& a, __m256& b, __m256& c, __m256& d) {
  const __m256 t0 = _mm256_unpacklo_ps(a, b), t1 = _mm256_unpackhi_ps(a, b);
  const __m256 t2 = _mm256_unpacklo_ps(c, d), t3 = _mm256_unpackhi_ps(c, d);
  a = _mm256_shuffle_ps(t0, t2, 0x44), b = _mm256_shuffle_ps(t0, t2, 0xEE);
  c = _mm256_shuffle_ps(t1, t3, 0x44), d = _mm256_shuffle_ps(t1, t3, 0xEE);
}

// The first n values at p (n <= 0: none, n >= 4: four), the other lanes 0, by loads of 16, 8 and 4 bytes: a
// partial row read through a buffer instead (narrow stores read back by a vector load) stalls on the failed
// store forwarding.
inline __m128 load_first4(const float* p, int64_t n) {
  if (n >= 4) return _mm_loadu_ps(p);
  if (n == 3) return _mm_movelh_ps(_mm_castpd_ps(_mm_load_sd(reinterpret_cast<const double*>(p))), _mm_load_ss(p + 2));
  if (n == 2) return _mm_castpd_ps(_mm_load_sd(reinterpret_cast<const double*>(p)));
  return n == 1 ? _mm_load_ss(p) : _mm_setzero_ps();
}

// The same 8x8 transpose with the rows in memory (row r: 8 values at src + r * stride): v[j] = column j. The rows
// go in by 128-bit halves (row r's values 0-3 beside row r + 4's), so no instruction crosses lanes in registers:
// those (vperm2f128) cost 8 micro-ops each on AMD Zen 1, against one load each here. A partial block reads only
// its first `rows` rows and `cols` values of each, the rest of v as zeros (the defaults, a whole block, fold to
// plain loads).
inline void load_transposed8x8(const float* src, int64_t stride, __m256 (&v)[8], int64_t rows = 8, int64_t cols = 8) {
  const __m128 none = _mm_setzero_ps();
  for (int64_t r = 0; r < 4; ++r) {
    const float* lo = src + r * stride;
    const float* hi = src + (r + 4) * stride;
    const bool has_lo = r < rows, has_hi = r + 4 < rows;
    v[r] = _mm256_insertf128_ps(_mm256_castps128_ps256(has_lo ? load_first4(lo, cols) : none),
                                has_hi ? load_first4(hi, cols) : none, 1);
    v[r + 4] = _mm256_insertf128_ps(_mm256_castps128_ps256(has_lo ? load_first4(lo + 4, cols - 4) : none),
                                    has_hi ? load_first4(hi + 4, cols - 4) : none, 1);
  }
  transpose4x4_lanes(v[0], v[1], v[2], v[3]);
  transpose4x4_lanes(v[4], v[5], v[6], v[7]);
}

// The other way: column j of the rows v[0..7] (value j of each) stored as 8 values at dst + j * stride, by
// 128-bit halves. `v` is overwritten.
inline void store_transposed8x8(__m256 (&v)[8], float* dst, int64_t stride) {
  transpose4x4_lanes(v[0], v[1], v[2], v[3]);  // v[j], j < 4: column j's values 0-3 | column j + 4's values 0-3
  transpose4x4_lanes(v[4], v[5], v[6], v[7]);  // the same for values 4-7
  for (int j = 0; j < 4; ++j) {
    float* lo = dst + j * stride;
    float* hi = dst + (j + 4) * stride;
    _mm_storeu_ps(lo, _mm256_castps256_ps128(v[j]));
    _mm_storeu_ps(lo + 4, _mm256_castps256_ps128(v[j + 4]));
    _mm_storeu_ps(hi, _mm256_extractf128_ps(v[j], 1));
    _mm_storeu_ps(hi + 4, _mm256_extractf128_ps(v[j + 4], 1));
  }
}

}  // namespace
}  // namespace mrt
