// What the AVX2 vpmaddubsw kernels share (quant_igemm8_avx2.cc: the 8-bit GEMM; quant_conv_planes_avx2.cc: the
// convolution over channel-quad planes): a tile of up to 4 rows of int8 A (broadcast, 4 bytes of k at a time)
// by 16 columns of uint8 B (two vectors of 8 columns x 4 bytes of k), and the fix of A's limited pairs
// (quant_common.h, Igemm8Kernel::pair_limit). Where B's groups of 4 k lie is the source's business:
// src.at(k) points at the 64 bytes of the group starting at k (a multiple of 4). Include only from files
// compiled for AVX2.
#pragma once
#include <immintrin.h>

#include <cstdint>
#include <cstring>

#include "../gemm/register_pin.h"

namespace mrt {
namespace quant {
namespace u8s8 {

constexpr int64_t kCols = 16;  // columns per tile
constexpr int kRows = 4;       // rows per tile at most

// acc += the 8 int32 sums of b (8 columns x 4 uint8 bytes of k) times a (4 int8 bytes, every lane): vpmaddubsw,
// vpmaddwd by 1, vpaddd. In asm so the sums stay in their registers (GCC 12 copies every accumulator around the
// intrinsics' three-operand forms and spilled two of the eight at 4 rows).
inline __m256i madd4(__m256i acc, __m256i b, __m256i a, __m256i ones) {
#if defined(__GNUC__)
  __m256i t;
  __asm__("vpmaddubsw %3, %2, %1\n\tvpmaddwd %4, %1, %1\n\tvpaddd %1, %0, %0"
          : "+x"(acc), "=&x"(t)
          : "x"(b), "x"(a), "x"(ones));
  return acc;
#else
  return _mm256_add_epi32(acc, _mm256_madd_epi16(_mm256_maddubs_epi16(b, a), ones));
#endif
}

// 16 sums into c, valid_n of them (plain stores for a whole row: masked stores are slow on AMD cores).
inline void store_row(int32_t* c, __m256i c0, __m256i c1, int64_t valid_n) {
  if (valid_n == kCols) {
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(c), c0);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(c + 8), c1);
  } else {
    alignas(32) int32_t tmp[kCols];
    _mm256_store_si256(reinterpret_cast<__m256i*>(tmp), c0);
    _mm256_store_si256(reinterpret_cast<__m256i*>(tmp + 8), c1);
    std::memcpy(c, tmp, static_cast<size_t>(valid_n) * sizeof(int32_t));
  }
}

// The R x 16 sums over Kp values of k (a multiple of 4): acc0[r] columns 0..7, acc1[r] columns 8..15. With
// Cols 8, only the first 8 columns (acc0) are computed; acc1 is left zero.
template <int R, class Src, int Cols = 16>
inline void sums(int64_t Kp, const uint8_t* A, int64_t lda, const Src& src, __m256i (&acc0)[R], __m256i (&acc1)[R]) {
  static_assert(Cols == 16 || Cols == 8, "a tile is 16 or 8 columns wide");
#pragma GCC unroll 4
  for (int r = 0; r < R; ++r) {
    acc0[r] = _mm256_setzero_si256();
    acc1[r] = _mm256_setzero_si256();
  }
  const __m256i ones = in_register(_mm256_set1_epi16(1));
  for (int64_t k = 0; k < Kp; k += 4) {
    const int8_t* q = src.at(k);
    const __m256i b0 = in_register(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(q)));
    if constexpr (Cols == 16) {
      const __m256i b1 = in_register(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(q + 32)));
#pragma GCC unroll 4
      for (int r = 0; r < R; ++r) {
        int32_t quad;
        std::memcpy(&quad, A + r * lda + k, sizeof(quad));
        const __m256i a = _mm256_set1_epi32(quad);
        acc0[r] = madd4(acc0[r], b0, a, ones);
        acc1[r] = madd4(acc1[r], b1, a, ones);
      }
    } else {
#pragma GCC unroll 4
      for (int r = 0; r < R; ++r) {
        int32_t quad;
        std::memcpy(&quad, A + r * lda + k, sizeof(quad));
        acc0[r] = madd4(acc0[r], b0, _mm256_set1_epi32(quad), ones);
      }
    }
  }
}

// What the pair limit took off A, added back to a finished tile: for row r, every entry e in
// [begin[r], begin[r + 1]) adds value[e] * b[k[e], n] to C[r, n]. Each entry is one more group of 4 k through
// vpmaddubsw, its value at byte k % 4 of A's quad and zeros elsewhere (|value| < 128: no pair saturates).
template <class Src>
void fix(int64_t rows, const int32_t* begin, const int32_t* fix_k, const int32_t* fix_value, const Src& src,
         int32_t* C, int64_t ldc, int64_t valid_n) {
  const __m256i ones = _mm256_set1_epi16(1);
  for (int64_t r = 0; r < rows; ++r) {
    if (begin[r] == begin[r + 1]) continue;
    __m256i s0 = _mm256_setzero_si256(), s1 = _mm256_setzero_si256();
    for (int32_t e = begin[r]; e < begin[r + 1]; ++e) {
      const int32_t k = fix_k[e];
      const int8_t* q = src.at(k & ~3);
      const __m256i a = _mm256_set1_epi32(static_cast<int32_t>(static_cast<uint32_t>(fix_value[e] & 0xFF)
                                                               << (8 * (k & 3))));
      s0 = madd4(s0, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(q)), a, ones);
      s1 = madd4(s1, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(q + 32)), a, ones);
    }
    int32_t* c = C + r * ldc;
    alignas(32) int32_t tmp[kCols] = {};
    std::memcpy(tmp, c, static_cast<size_t>(valid_n) * sizeof(int32_t));
    const __m256i c0 = _mm256_add_epi32(_mm256_load_si256(reinterpret_cast<const __m256i*>(tmp)), s0);
    const __m256i c1 = _mm256_add_epi32(_mm256_load_si256(reinterpret_cast<const __m256i*>(tmp + 8)), s1);
    store_row(c, c0, c1, valid_n);
  }
}

}  // namespace u8s8
}  // namespace quant
}  // namespace mrt
