// AVX512-VNNI micro-kernel of the u8 x s8 8-bit GEMM (layout in quant_common.h): up to
// 8 rows x 32 columns of int32 accumulators, one vpdpbusd per row and 16 columns for
// every 4 values of k, then the zero-point correction on the way out.
#include <immintrin.h>

#include <cstring>

#include "quant_common.h"

#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC target("avx512vnni")
#elif defined(__clang__)
#pragma clang attribute push(__attribute__((target("avx512vnni"))), apply_to = function)
#endif

#include "quant_vnni.h"  // after the target pragma: dpbusd is compiled for AVX512-VNNI

namespace mrt {
namespace quant {
namespace {

constexpr int64_t kPanel = 32;  // columns per B panel (two zmm of 16 int32)

// With few rows the two accumulators per row are each one chain of dependent vpdpbusd (latency 4-5
// cycles), so a one-row block would issue one multiply every 2-3 cycles; S independent partial sums per
// accumulator, over alternating groups of k, keep 2 * R * S chains in flight, added once at the end.
template <int R>
constexpr int kSplit = R == 1 ? 4 : (R <= 3 ? 2 : 1);

template <int R>
void block(int64_t K4, const uint8_t* A, int64_t lda, const int8_t* panel, const int32_t* za, const int32_t* rowsum,
           const int32_t* zb, const int32_t* colfix, int32_t* C, int64_t ldc, int64_t valid_n) {
  constexpr int S = kSplit<R>;
  __m512i acc0[S][R], acc1[S][R];
  for (int s = 0; s < S; ++s) {
    for (int r = 0; r < R; ++r) {
      acc0[s][r] = _mm512_setzero_si512();
      acc1[s][r] = _mm512_setzero_si512();
    }
  }
  auto step = [&](int s, int64_t k) {
    const __m512i b0 = _mm512_loadu_si512(panel + k * kPanel);
    const __m512i b1 = _mm512_loadu_si512(panel + k * kPanel + 64);
    for (int r = 0; r < R; ++r) {
      int32_t quad;
      std::memcpy(&quad, A + r * lda + k, sizeof(quad));
      const __m512i a = _mm512_set1_epi32(quad);
      acc0[s][r] = dpbusd(acc0[s][r], a, b0);
      acc1[s][r] = dpbusd(acc1[s][r], a, b1);
    }
  };
  int64_t k = 0;
  for (; k + 4 * S <= K4; k += 4 * S) {
    for (int s = 0; s < S; ++s) step(s, k + 4 * s);
  }
  for (; k < K4; k += 4) step(0, k);
  for (int s = 1; s < S; ++s) {
    for (int r = 0; r < R; ++r) {
      acc0[0][r] = _mm512_add_epi32(acc0[0][r], acc0[s][r]);
      acc1[0][r] = _mm512_add_epi32(acc1[0][r], acc1[s][r]);
    }
  }
  const __m512i zb0 = _mm512_loadu_si512(zb), zb1 = _mm512_loadu_si512(zb + 16);
  const __m512i cf0 = _mm512_loadu_si512(colfix), cf1 = _mm512_loadu_si512(colfix + 16);
  const __mmask16 m0 = valid_n >= 16 ? __mmask16(0xFFFF) : __mmask16((1u << valid_n) - 1);
  const __mmask16 m1 = valid_n >= 32 ? __mmask16(0xFFFF) : (valid_n <= 16 ? __mmask16(0) : __mmask16((1u << (valid_n - 16)) - 1));
  for (int r = 0; r < R; ++r) {
    const __m512i rs = _mm512_set1_epi32(rowsum[r]), z = _mm512_set1_epi32(za[r]);
    const __m512i c0 = _mm512_add_epi32(_mm512_sub_epi32(acc0[0][r], _mm512_mullo_epi32(zb0, rs)), _mm512_mullo_epi32(cf0, z));
    const __m512i c1 = _mm512_add_epi32(_mm512_sub_epi32(acc1[0][r], _mm512_mullo_epi32(zb1, rs)), _mm512_mullo_epi32(cf1, z));
    _mm512_mask_storeu_epi32(C + r * ldc, m0, c0);
    _mm512_mask_storeu_epi32(C + r * ldc + 16, m1, c1);
  }
}

void vnni_block(int64_t rows, int64_t K4, const uint8_t* A, int64_t lda, const int8_t* panel, const int32_t* za,
                const int32_t* rowsum, const int32_t* zb, const int32_t* colfix, int32_t* C, int64_t ldc,
                int64_t valid_n) {
  switch (rows) {
    case 8: block<8>(K4, A, lda, panel, za, rowsum, zb, colfix, C, ldc, valid_n); break;
    case 7: block<7>(K4, A, lda, panel, za, rowsum, zb, colfix, C, ldc, valid_n); break;
    case 6: block<6>(K4, A, lda, panel, za, rowsum, zb, colfix, C, ldc, valid_n); break;
    case 5: block<5>(K4, A, lda, panel, za, rowsum, zb, colfix, C, ldc, valid_n); break;
    case 4: block<4>(K4, A, lda, panel, za, rowsum, zb, colfix, C, ldc, valid_n); break;
    case 3: block<3>(K4, A, lda, panel, za, rowsum, zb, colfix, C, ldc, valid_n); break;
    case 2: block<2>(K4, A, lda, panel, za, rowsum, zb, colfix, C, ldc, valid_n); break;
    default: block<1>(K4, A, lda, panel, za, rowsum, zb, colfix, C, ldc, valid_n); break;
  }
}

void vnni_colsum(const int8_t* panel, int64_t K4, int32_t* colsum) {
  const __m512i ones = _mm512_set1_epi8(1);
  __m512i acc0 = _mm512_setzero_si512(), acc1 = _mm512_setzero_si512();
  for (int64_t k = 0; k < K4; k += 4) {
    acc0 = _mm512_dpbusd_epi32(acc0, ones, _mm512_loadu_si512(panel + k * kPanel));
    acc1 = _mm512_dpbusd_epi32(acc1, ones, _mm512_loadu_si512(panel + k * kPanel + 64));
  }
  _mm512_storeu_si512(colsum, acc0);
  _mm512_storeu_si512(colsum + 16, acc1);
}

// u8 x s8 on vpdpbusd: 8 rows x 32 columns, groups of 4 k.
const Igemm8Kernel kVnni = {"avx512vnni", false, true, 4, 4, 32, 8, vnni_block, vnni_colsum, 0, nullptr};

}  // namespace

const Igemm8Kernel* igemm8_vnni_kernel() { return &kVnni; }

void requantize_bytes_avx512(const int32_t* acc, int32_t bias, double multiplier, double zp, double lo, double hi,
                             void* out, int64_t n) {
  const __m512i vb = _mm512_set1_epi32(bias);
  const __m512d vm = _mm512_set1_pd(multiplier), vz = _mm512_set1_pd(zp), vlo = _mm512_set1_pd(lo),
                vhi = _mm512_set1_pd(hi);
  // eight values: rint (ties to even) of acc * multiplier, plus zp, clamped (a NaN product clamps to lo, as
  // the scalar path does: max returns its second operand when the first is NaN)
  auto eight = [&](__m256i a) {
    __m512d v = _mm512_mul_pd(_mm512_cvtepi32_pd(a), vm);
    v = _mm512_add_pd(_mm512_roundscale_pd(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC), vz);
    v = _mm512_min_pd(_mm512_max_pd(v, vlo), vhi);
    return _mm512_cvtpd_epi32(v);
  };
  uint8_t* o = static_cast<uint8_t*>(out);
  int64_t i = 0;
  // in [lo, hi] already, so truncating each int32 to its low byte is exact for int8 and uint8 alike
  for (; i + 8 <= n; i += 8) {
    const __m256i a = _mm256_add_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(acc + i)),
                                       _mm512_castsi512_si256(vb));
    _mm_storel_epi64(reinterpret_cast<__m128i*>(o + i), _mm256_cvtepi32_epi8(eight(a)));
  }
  if (i < n) {
    const __mmask8 m = static_cast<__mmask8>((1u << (n - i)) - 1);
    const __m256i a = _mm256_add_epi32(_mm256_maskz_loadu_epi32(m, acc + i), _mm512_castsi512_si256(vb));
    _mm256_mask_cvtepi32_storeu_epi8(o + i, m, eight(a));
  }
}

}  // namespace quant
}  // namespace mrt

#if defined(__clang__)
#pragma clang attribute pop
#endif
