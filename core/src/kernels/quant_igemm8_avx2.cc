// AVX2 micro-kernel of the 8-bit GEMM (layout in quant_common.h) on vpmaddubsw: B's bytes as uint8, A's as int8,
// up to 4 rows x 16 columns of int32 sums. Each group of 4 k costs, per row and 8 columns, one vpmaddubsw (the
// products of adjacent k, summed in pairs to int16), one vpmaddwd by 1 (the two pairs to int32) and one add:
// 3 vector operations for 32 multiply-adds, where the int16 kernel (quant_igemm_avx2.cc) needs 4.
//
// vpmaddubsw saturates a pair sum past the int16 range. With b in [0, 255], b0 * a0 + b1 * a1 stays in range
// whenever a0 and a1 differ in sign or |a0| + |a1| <= 128 (255 * 128 = 32640). prepare_a8 makes every pair of A
// so (a1 moved towards 0) and keeps what it took off as a list of (k, value) per row; avx2_fix adds those
// products back to each finished tile, so C is exact.
#include <immintrin.h>

#include <cstring>

#include "../gemm/backend_registry.h"
#include "quant_common.h"
#include "quant_u8s8_avx2.h"

namespace mrt {
namespace quant {
namespace {

using u8s8::kCols;
using u8s8::store_row;

// B's groups of 4 k in a packed panel: 64 bytes each, one after the other.
struct PanelSrc {
  const int8_t* panel;
  const int8_t* at(int64_t k) const { return panel + k * kCols; }
};

template <int R>
void block(int64_t Kp, const uint8_t* A, int64_t lda, const int8_t* panel, const int32_t* za, const int32_t* rowsum,
           const int32_t* zb, const int32_t* colfix, int32_t* C, int64_t ldc, int64_t valid_n) {
  __m256i acc0[R], acc1[R];
  u8s8::sums<R>(Kp, A, lda, PanelSrc{panel}, acc0, acc1);
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
  for (int64_t k = 0; k < Kp; k += 4, panel += 4 * kCols) {
    const __m256i b0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(panel));
    const __m256i b1 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(panel + 32));
    s0 = _mm256_add_epi32(s0, _mm256_madd_epi16(_mm256_maddubs_epi16(b0, ones8), ones16));
    s1 = _mm256_add_epi32(s1, _mm256_madd_epi16(_mm256_maddubs_epi16(b1, ones8), ones16));
  }
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(colsum), s0);
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(colsum + 8), s1);
}

void avx2_fix(int64_t rows, const int32_t* begin, const int32_t* fix_k, const int32_t* fix_value, const int8_t* panel,
              int32_t* C, int64_t ldc, int64_t valid_n) {
  u8s8::fix(rows, begin, fix_k, fix_value, PanelSrc{panel}, C, ldc, valid_n);
}

// int8 A x uint8 B on vpmaddubsw: 4 rows x 16 columns, groups of 4 k; pairs of A limited to 128 (above).
const Igemm8Kernel kAvx2 = {"avx2u8s8", true, false, 4, 4, kCols, u8s8::kRows, avx2_block, avx2_colsum, 128, avx2_fix};

}  // namespace

const Igemm8Kernel* igemm8_avx2_kernel() { return &kAvx2; }

void requantize_bytes_avx2(const int32_t* acc, int32_t bias, double multiplier, double zp, double lo, double hi,
                           void* out, int64_t n) {
  const __m128i vb = _mm_set1_epi32(bias);
  const __m256d vm = _mm256_set1_pd(multiplier), vz = _mm256_set1_pd(zp), vlo = _mm256_set1_pd(lo),
                vhi = _mm256_set1_pd(hi);
  // four values: rint (ties to even) of acc * multiplier, plus zp, clamped (a NaN product clamps to lo, as the
  // scalar path does: max returns its second operand when the first is NaN)
  auto four = [&](const int32_t* p) {
    const __m128i a = _mm_add_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)), vb);
    __m256d v = _mm256_mul_pd(_mm256_cvtepi32_pd(a), vm);
    v = _mm256_add_pd(_mm256_round_pd(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC), vz);
    return _mm256_cvtpd_epi32(_mm256_min_pd(_mm256_max_pd(v, vlo), vhi));
  };
  // in [lo, hi] already: each value's low byte is its int8 or uint8 form
  const __m128i low_bytes = _mm_setr_epi8(0, 2, 4, 6, 8, 10, 12, 14, -1, -1, -1, -1, -1, -1, -1, -1);
  uint8_t* o = static_cast<uint8_t*>(out);
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m128i w0 = _mm_shuffle_epi8(_mm_packs_epi32(four(acc + i), four(acc + i + 4)), low_bytes);
    const __m128i w1 = _mm_shuffle_epi8(_mm_packs_epi32(four(acc + i + 8), four(acc + i + 12)), low_bytes);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(o + i), _mm_unpacklo_epi64(w0, w1));
  }
  for (; i + 8 <= n; i += 8) {
    const __m128i w = _mm_shuffle_epi8(_mm_packs_epi32(four(acc + i), four(acc + i + 4)), low_bytes);
    _mm_storel_epi64(reinterpret_cast<__m128i*>(o + i), w);
  }
  for (; i < n; ++i) {
    const uint32_t sum = static_cast<uint32_t>(acc[i]) + static_cast<uint32_t>(bias);  // wrapping, as the lanes
    const double v = static_cast<double>(static_cast<int32_t>(sum));
    o[i] = static_cast<uint8_t>(static_cast<int32_t>(requantize(v, multiplier, zp, lo, hi)));
  }
}

}  // namespace quant
}  // namespace mrt
