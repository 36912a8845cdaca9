// AVX2 micro-kernel of the integer GEMM (see quant_common.h for the packed layout):
// up to 6 rows x 16 columns of int32 accumulators; each k pair costs two vpmaddwd per row.
#include <immintrin.h>

#include <cstring>

#include "../gemm/register_pin.h"
#include "quant_common.h"

namespace mrt {
namespace quant {
namespace {

// R rows of 16 sums (acc0: columns 0..7, acc1: 8..15) into C, valid_n columns of each.
template <int R>
inline void store(const __m256i* acc0, const __m256i* acc1, int32_t* C, int64_t ldc, int64_t valid_n) {
#pragma GCC unroll 6
  for (int r = 0; r < R; ++r) {
    int32_t* c = C + r * ldc;
    if (valid_n == kIgemmPanel) {
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(c), acc0[r]);
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(c + 8), acc1[r]);
    } else {
      alignas(32) int32_t tmp[kIgemmPanel];
      _mm256_store_si256(reinterpret_cast<__m256i*>(tmp), acc0[r]);
      _mm256_store_si256(reinterpret_cast<__m256i*>(tmp + 8), acc1[r]);
      std::memcpy(c, tmp, static_cast<size_t>(valid_n) * sizeof(int32_t));
    }
  }
}

// A panel's two int16 vectors of a k pair (columns 0..7 and 8..15, pairs interleaved): the int16 panels (PackedB)
// as they are, the byte form (PackedBBytes) widened from its 32 bytes, sign- or zero-extended. Both advance
// 2 * kIgemmPanel elements a k pair.
struct Int16Pairs {
  using Elem = int16_t;
  static __m256i load(const int16_t* p) { return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)); }
};
template <bool Signed>
struct BytePairs {
  using Elem = uint8_t;
  static __m256i load(const uint8_t* p) {
    const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
    return Signed ? _mm256_cvtepi8_epi16(v) : _mm256_cvtepu8_epi16(v);
  }
};

// R rows x 16 columns over one panel of the form Pairs. Named arrays, loops unrolled: the 2R sums stay in
// registers. (With rolled loops and the A pairs read through memcpy GCC kept 8 of the 12 sums on the stack, a store
// and a reload per pair of k: the ResNet-18 of the benchmark, quantized, spent two thirds of its time here at
// 42 GMAC/s on an AMD Zen 3 core. The byte form's zero points are applied by the caller: a correction here made
// GCC keep half the sums on the stack too.)
template <int R, class Pairs>
void block(int64_t Kp, const int16_t* A, int64_t lda, const typename Pairs::Elem* panel, int32_t* C, int64_t ldc,
           int64_t valid_n) {
  __m256i acc0[R], acc1[R];
#pragma GCC unroll 6
  for (int r = 0; r < R; ++r) {
    acc0[r] = _mm256_setzero_si256();
    acc1[r] = _mm256_setzero_si256();
  }
  const int16_t* a = A;
  for (int64_t kp = 0; kp < Kp; kp += 2, a += 2, panel += 2 * kIgemmPanel) {
    const __m256i b0 = in_register(Pairs::load(panel));
    const __m256i b1 = in_register(Pairs::load(panel + 16));
#pragma GCC unroll 6
    for (int r = 0; r < R; ++r) {
      int32_t pair;
      std::memcpy(&pair, a + r * lda, sizeof(pair));
      const __m256i ar = _mm256_set1_epi32(pair);
      acc0[r] = _mm256_add_epi32(acc0[r], _mm256_madd_epi16(ar, b0));
      acc1[r] = _mm256_add_epi32(acc1[r], _mm256_madd_epi16(ar, b1));
    }
  }
  store<R>(acc0, acc1, C, ldc, valid_n);
}

// Up to kIgemmRows rows over one panel of the form Pairs.
template <class Pairs>
void rows_block(int64_t rows, int64_t Kp, const int16_t* A, int64_t lda, const typename Pairs::Elem* panel, int32_t* C,
                int64_t ldc, int64_t valid_n) {
  switch (rows) {
    case 6: block<6, Pairs>(Kp, A, lda, panel, C, ldc, valid_n); break;
    case 5: block<5, Pairs>(Kp, A, lda, panel, C, ldc, valid_n); break;
    case 4: block<4, Pairs>(Kp, A, lda, panel, C, ldc, valid_n); break;
    case 3: block<3, Pairs>(Kp, A, lda, panel, C, ldc, valid_n); break;
    case 2: block<2, Pairs>(Kp, A, lda, panel, C, ldc, valid_n); break;
    default:
      for (int64_t r = 0; r < rows; ++r) block<1, Pairs>(Kp, A + r * lda, lda, panel, C + r * ldc, ldc, valid_n);
      break;
  }
}

void igemm_block(int64_t rows, int64_t Kp, const int16_t* A, int64_t lda, const int16_t* panel, int32_t* C,
                 int64_t ldc, int64_t valid_n) {
  rows_block<Int16Pairs>(rows, Kp, A, lda, panel, C, ldc, valid_n);
}

void igemm_bytes_block(int64_t rows, int64_t Kp, const int16_t* A, int64_t lda, const uint8_t* panel, bool b_signed,
                       int32_t* C, int64_t ldc, int64_t valid_n) {
  if (b_signed) rows_block<BytePairs<true>>(rows, Kp, A, lda, panel, C, ldc, valid_n);
  else rows_block<BytePairs<false>>(rows, Kp, A, lda, panel, C, ldc, valid_n);
}

}  // namespace

IgemmBlockFn igemm_block_avx2() { return igemm_block; }
IgemmBytesBlockFn igemm_bytes_block_avx2() { return igemm_bytes_block; }

}  // namespace quant
}  // namespace mrt
