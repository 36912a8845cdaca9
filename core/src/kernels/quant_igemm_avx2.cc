// AVX2 micro-kernel of the integer GEMM (see quant_common.h for the packed layout):
// up to 6 rows x 16 columns of int32 accumulators; each k pair costs two vpmaddwd per row.
#include <immintrin.h>

#include <cstring>

#include "../gemm/register_pin.h"
#include "quant_common.h"

namespace mrt {
namespace quant {
namespace {

template <int R>
void block(int64_t Kp, const int16_t* A, int64_t lda, const int16_t* panel, int32_t* C, int64_t ldc, int64_t valid_n) {
  // Named arrays, loops unrolled: the 2R sums stay in registers. (With rolled loops and the A pairs read through
  // memcpy GCC kept 8 of the 12 sums on the stack, a store and a reload per pair of k: the ResNet-18 of the
  // benchmark, quantized, spent two thirds of its time here at 42 GMAC/s on an AMD Zen 3 core.)
  __m256i acc0[R], acc1[R];
#pragma GCC unroll 6
  for (int r = 0; r < R; ++r) {
    acc0[r] = _mm256_setzero_si256();
    acc1[r] = _mm256_setzero_si256();
  }
  const int16_t* a = A;
  for (int64_t kp = 0; kp < Kp; kp += 2, a += 2, panel += 2 * kIgemmPanel) {
    const __m256i b0 = in_register(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(panel)));
    const __m256i b1 = in_register(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(panel + 16)));
#pragma GCC unroll 6
    for (int r = 0; r < R; ++r) {
      int32_t pair;
      std::memcpy(&pair, a + r * lda, sizeof(pair));
      const __m256i ar = _mm256_set1_epi32(pair);
      acc0[r] = _mm256_add_epi32(acc0[r], _mm256_madd_epi16(ar, b0));
      acc1[r] = _mm256_add_epi32(acc1[r], _mm256_madd_epi16(ar, b1));
    }
  }
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

void igemm_block(int64_t rows, int64_t Kp, const int16_t* A, int64_t lda, const int16_t* panel, int32_t* C,
                 int64_t ldc, int64_t valid_n) {
  switch (rows) {
    case 6: block<6>(Kp, A, lda, panel, C, ldc, valid_n); break;
    case 5: block<5>(Kp, A, lda, panel, C, ldc, valid_n); break;
    case 4: block<4>(Kp, A, lda, panel, C, ldc, valid_n); break;
    case 3: block<3>(Kp, A, lda, panel, C, ldc, valid_n); break;
    case 2: block<2>(Kp, A, lda, panel, C, ldc, valid_n); break;
    default:
      for (int64_t r = 0; r < rows; ++r) block<1>(Kp, A + r * lda, lda, panel, C + r * ldc, ldc, valid_n);
      break;
  }
}

}  // namespace

IgemmBlockFn igemm_block_avx2() { return igemm_block; }

}  // namespace quant
}  // namespace mrt
