// SGEMM micro-kernel for AVX-512F: 12 x 32 register tile (24 zmm accumulators, the A
// values are broadcast straight from memory). Compiled with -mavx512f (+vl/bw/dq) for
// x86-64 targets only; called only when the CPU has them.
#include <immintrin.h>

#include "sgemm_kernels.h"

namespace mrt {

namespace {

constexpr int kMr = 12;
constexpr int kNr = 32;

inline void store_vec(float* c, __m512 acc, __m512 va, float beta, __mmask16 mask) {
  __m512 r = _mm512_mul_ps(acc, va);
  if (beta != 0.f) r = _mm512_fmadd_ps(_mm512_set1_ps(beta), _mm512_maskz_loadu_ps(mask, c), r);
  _mm512_mask_storeu_ps(c, mask, r);
}

template <int M>
void micro_avx512(int64_t kc, const float* a, const float* b, float* c, int64_t ldc, int64_t n, float alpha,
                  float beta) {
  __m512 acc0[M], acc1[M];
#pragma GCC unroll 16
  for (int i = 0; i < M; ++i) {
    acc0[i] = _mm512_setzero_ps();
    acc1[i] = _mm512_setzero_ps();
  }
  for (int64_t k = 0; k < kc; ++k) {
    const __m512 b0 = _mm512_loadu_ps(b);
    const __m512 b1 = _mm512_loadu_ps(b + 16);
    _mm_prefetch(reinterpret_cast<const char*>(b + 8 * kNr), _MM_HINT_T0);
#pragma GCC unroll 16
    for (int i = 0; i < M; ++i) {
      const __m512 ai = _mm512_set1_ps(a[i]);
      acc0[i] = _mm512_fmadd_ps(ai, b0, acc0[i]);
      acc1[i] = _mm512_fmadd_ps(ai, b1, acc1[i]);
    }
    a += kMr;
    b += kNr;
  }
  const __m512 va = _mm512_set1_ps(alpha);
  const __mmask16 m0 = n >= 16 ? static_cast<__mmask16>(0xFFFF) : static_cast<__mmask16>((1u << n) - 1u);
  const __mmask16 m1 =
      n >= 32 ? static_cast<__mmask16>(0xFFFF) : n > 16 ? static_cast<__mmask16>((1u << (n - 16)) - 1u) : 0;
#pragma GCC unroll 16
  for (int i = 0; i < M; ++i) {
    store_vec(c + i * ldc, acc0[i], va, beta, m0);
    if (m1) store_vec(c + i * ldc + 16, acc1[i], va, beta, m1);
  }
}

const SgemmKernel kAvx512 = {"avx512f",
                             kMr,
                             kNr,
                             256,
                             144,
                             4096,
                             {nullptr, micro_avx512<1>, micro_avx512<2>, micro_avx512<3>, micro_avx512<4>,
                              micro_avx512<5>, micro_avx512<6>, micro_avx512<7>, micro_avx512<8>, micro_avx512<9>,
                              micro_avx512<10>, micro_avx512<11>, micro_avx512<12>}};

}  // namespace

const SgemmKernel& sgemm_avx512_kernel() { return kAvx512; }

}  // namespace mrt
