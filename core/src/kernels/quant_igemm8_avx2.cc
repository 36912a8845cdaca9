// AVX2 micro-kernel of the 8-bit GEMM (layout in quant_common.h) on vpmaddubsw: B's bytes as uint8, A's as int8,
// up to 4 rows x 16 columns of int32 sums. Each group of 4 k costs, per row and 8 columns, one vpmaddubsw (the
// products of adjacent k, summed in pairs to int16), one vpmaddwd by 1 (the two pairs to int32) and one add:
// 3 vector operations for 32 multiply-adds, where the int16 kernel (quant_igemm_avx2.cc) needs 4.
//
// vpmaddubsw saturates a pair sum past the int16 range. With b in [0, 255], b0 * a0 + b1 * a1 stays in range
// whenever a0 and a1 differ in sign or |a0| + |a1| <= 128 (255 * 128 = 32640). prepare_a8 makes every pair of A
// so (a1 moved towards 0) and keeps what it took off as a list of (k, value) per row; fix_tile adds those
// products back to each finished tile, so C is exact.
#include <immintrin.h>

#include <cstring>

#include "../gemm/backend_registry.h"
#include "../gemm/register_pin.h"
#include "quant_common.h"

namespace mrt {
namespace quant {
namespace {

constexpr int64_t kPanel = 16;  // columns per B panel: two vectors of 8 columns x 4 bytes of k
constexpr int kRows = 4;

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
  if (valid_n == kPanel) {
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(c), c0);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(c + 8), c1);
  } else {
    alignas(32) int32_t tmp[kPanel];
    _mm256_store_si256(reinterpret_cast<__m256i*>(tmp), c0);
    _mm256_store_si256(reinterpret_cast<__m256i*>(tmp + 8), c1);
    std::memcpy(c, tmp, static_cast<size_t>(valid_n) * sizeof(int32_t));
  }
}

template <int R>
void block(int64_t Kp, const uint8_t* A, int64_t lda, const int8_t* panel, const int32_t* za, const int32_t* rowsum,
           const int32_t* zb, const int32_t* colfix, int32_t* C, int64_t ldc, int64_t valid_n) {
  __m256i acc0[R], acc1[R];
#pragma GCC unroll 4
  for (int r = 0; r < R; ++r) {
    acc0[r] = _mm256_setzero_si256();
    acc1[r] = _mm256_setzero_si256();
  }
  const __m256i ones = in_register(_mm256_set1_epi16(1));
  for (int64_t k = 0; k < Kp; k += 4, panel += 4 * kPanel) {
    const __m256i b0 = in_register(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(panel)));
    const __m256i b1 = in_register(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(panel + 32)));
#pragma GCC unroll 4
    for (int r = 0; r < R; ++r) {
      int32_t quad;
      std::memcpy(&quad, A + r * lda + k, sizeof(quad));
      const __m256i a = _mm256_set1_epi32(quad);
      acc0[r] = madd4(acc0[r], b0, a, ones);
      acc1[r] = madd4(acc1[r], b1, a, ones);
    }
  }
  // C = acc - zb[n] * rowsum[m] + za[m] * colfix[n] (quant_common.h)
  const __m256i zb0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(zb));
  const __m256i zb1 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(zb + 8));
  const __m256i cf0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(colfix));
  const __m256i cf1 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(colfix + 8));
#pragma GCC unroll 4
  for (int r = 0; r < R; ++r) {
    const __m256i rs = _mm256_set1_epi32(rowsum[r]), z = _mm256_set1_epi32(za[r]);
    const __m256i c0 = _mm256_add_epi32(_mm256_sub_epi32(acc0[r], _mm256_mullo_epi32(zb0, rs)),
                                        _mm256_mullo_epi32(cf0, z));
    const __m256i c1 = _mm256_add_epi32(_mm256_sub_epi32(acc1[r], _mm256_mullo_epi32(zb1, rs)),
                                        _mm256_mullo_epi32(cf1, z));
    store_row(C + r * ldc, c0, c1, valid_n);
  }
}

void avx2_block(int64_t rows, int64_t Kp, const uint8_t* A, int64_t lda, const int8_t* panel, const int32_t* za,
                const int32_t* rowsum, const int32_t* zb, const int32_t* colfix, int32_t* C, int64_t ldc,
                int64_t valid_n) {
  switch (rows) {
    case 4: block<4>(Kp, A, lda, panel, za, rowsum, zb, colfix, C, ldc, valid_n); break;
    case 3: block<3>(Kp, A, lda, panel, za, rowsum, zb, colfix, C, ldc, valid_n); break;
    case 2: block<2>(Kp, A, lda, panel, za, rowsum, zb, colfix, C, ldc, valid_n); break;
    default: block<1>(Kp, A, lda, panel, za, rowsum, zb, colfix, C, ldc, valid_n); break;
  }
}

// Column sums of a panel of uint8 bytes: vpmaddubsw by 1 (pairs up to 510, no saturation), then by 1 again.
void avx2_colsum(const int8_t* panel, int64_t Kp, int32_t* colsum) {
  const __m256i ones8 = _mm256_set1_epi8(1), ones16 = _mm256_set1_epi16(1);
  __m256i s0 = _mm256_setzero_si256(), s1 = _mm256_setzero_si256();
  for (int64_t k = 0; k < Kp; k += 4, panel += 4 * kPanel) {
    const __m256i b0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(panel));
    const __m256i b1 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(panel + 32));
    s0 = _mm256_add_epi32(s0, _mm256_madd_epi16(_mm256_maddubs_epi16(b0, ones8), ones16));
    s1 = _mm256_add_epi32(s1, _mm256_madd_epi16(_mm256_maddubs_epi16(b1, ones8), ones16));
  }
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(colsum), s0);
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(colsum + 8), s1);
}

// The products prepare_a8 took off A's saturating pairs, added to a finished tile: for row r, every entry e in
// [begin[r], begin[r + 1]) adds value[e] * b[k[e], n] to C[r, n]. Each entry is one more group of 4 k through
// vpmaddubsw, its value at byte k % 4 of A's quad and zeros elsewhere (|value| < 128: no pair saturates).
void avx2_fix(int64_t rows, const int32_t* begin, const int32_t* fix_k, const int32_t* fix_value, const int8_t* panel,
              int32_t* C, int64_t ldc, int64_t valid_n) {
  const __m256i ones = _mm256_set1_epi16(1);
  for (int64_t r = 0; r < rows; ++r) {
    if (begin[r] == begin[r + 1]) continue;
    __m256i s0 = _mm256_setzero_si256(), s1 = _mm256_setzero_si256();
    for (int32_t e = begin[r]; e < begin[r + 1]; ++e) {
      const int32_t k = fix_k[e];
      const int8_t* q = panel + (k & ~3) * kPanel;
      const __m256i a = _mm256_set1_epi32(static_cast<int32_t>(static_cast<uint32_t>(fix_value[e] & 0xFF)
                                                               << (8 * (k & 3))));
      s0 = madd4(s0, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(q)), a, ones);
      s1 = madd4(s1, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(q + 32)), a, ones);
    }
    int32_t* c = C + r * ldc;
    alignas(32) int32_t tmp[kPanel] = {};
    std::memcpy(tmp, c, static_cast<size_t>(valid_n) * sizeof(int32_t));
    const __m256i c0 = _mm256_add_epi32(_mm256_load_si256(reinterpret_cast<const __m256i*>(tmp)), s0);
    const __m256i c1 = _mm256_add_epi32(_mm256_load_si256(reinterpret_cast<const __m256i*>(tmp + 8)), s1);
    store_row(c, c0, c1, valid_n);
  }
}

// int8 A x uint8 B on vpmaddubsw: 4 rows x 16 columns, groups of 4 k; pairs of A limited to 128 (above).
const Igemm8Kernel kAvx2 = {"avx2u8s8", true, false, 4, 4, kPanel, kRows, avx2_block, avx2_colsum, 128, avx2_fix};

}  // namespace

const Igemm8Kernel* igemm8_avx2_kernel() { return &kAvx2; }

}  // namespace quant
}  // namespace mrt
