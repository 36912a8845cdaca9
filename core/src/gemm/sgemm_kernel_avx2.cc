// SGEMM micro-kernel for AVX2 + FMA: 6 x 16 register tile (12 accumulators).
// Compiled with -mavx2 -mfma for x86-64 targets only; called only when the CPU has both.
#include <immintrin.h>

#include "register_pin.h"
#include "sgemm_kernels.h"

namespace mrt {

namespace {

constexpr int kMr = 6;
constexpr int kNr = 16;

// Lane mask for the first n (0..8) floats of a 256-bit vector.
inline __m256i lane_mask(int64_t n) {
  const __m256i iota = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  return _mm256_cmpgt_epi32(_mm256_set1_epi32(static_cast<int>(n)), iota);
}

inline void store_vec(float* c, __m256 acc, __m256 va, float beta) {
  __m256 r = _mm256_mul_ps(acc, va);
  if (beta != 0.f) r = _mm256_fmadd_ps(_mm256_set1_ps(beta), _mm256_loadu_ps(c), r);
  _mm256_storeu_ps(c, r);
}

inline void store_vec_masked(float* c, __m256 acc, __m256 va, float beta, __m256i mask) {
  __m256 r = _mm256_mul_ps(acc, va);
  if (beta != 0.f) r = _mm256_fmadd_ps(_mm256_set1_ps(beta), _mm256_maskload_ps(c, mask), r);
  _mm256_maskstore_ps(c, mask, r);
}

// kAStep: the distance between A's steps, kMr in an mr-high packed panel, M where a block of M rows is packed to
// its own height (rows_compact_a).
template <int M, int kAStep = kMr>
void micro_avx2(int64_t kc, const float* a, const float* b, float* c, int64_t ldc, int64_t n, float alpha,
                float beta) {
  __m256 acc0[M], acc1[M];
#pragma GCC unroll 8
  for (int i = 0; i < M; ++i) {
    acc0[i] = _mm256_setzero_ps();
    acc1[i] = _mm256_setzero_ps();
  }
  for (int64_t k = 0; k < kc; ++k) {
    const __m256 b0 = in_register(_mm256_loadu_ps(b));
    const __m256 b1 = in_register(_mm256_loadu_ps(b + 8));
#pragma GCC unroll 8
    for (int i = 0; i < M; ++i) {
      const __m256 ai = _mm256_broadcast_ss(a + i);
      acc0[i] = _mm256_fmadd_ps(ai, b0, acc0[i]);
      acc1[i] = _mm256_fmadd_ps(ai, b1, acc1[i]);
    }
    a += kAStep;
    b += kNr;
  }
  const __m256 va = _mm256_set1_ps(alpha);
  if (n == kNr) {
#pragma GCC unroll 8
    for (int i = 0; i < M; ++i) {
      store_vec(c + i * ldc, acc0[i], va, beta);
      store_vec(c + i * ldc + 8, acc1[i], va, beta);
    }
  } else {
    const __m256i m0 = lane_mask(n < 8 ? n : 8);
    const __m256i m1 = lane_mask(n > 8 ? n - 8 : 0);
#pragma GCC unroll 8
    for (int i = 0; i < M; ++i) {
      store_vec_masked(c + i * ldc, acc0[i], va, beta, m0);
      if (n > 8) store_vec_masked(c + i * ldc + 8, acc1[i], va, beta, m1);
    }
  }
}

void pack_b_avx2(const float* src, int64_t ldb, int64_t kc, float* dst) {
  for (int64_t k = 0; k < kc; ++k) {
    const float* s = src + k * ldb;
    _mm256_storeu_ps(dst + k * kNr, _mm256_loadu_ps(s));
    _mm256_storeu_ps(dst + k * kNr + 8, _mm256_loadu_ps(s + 8));
  }
}

void pack_a_avx2(const float* src, int64_t lda, int64_t kc, float* dst) {
  int64_t k = 0;
  for (; k + 4 <= kc; k += 4) {
    __m128 a = _mm_loadu_ps(src + k), b = _mm_loadu_ps(src + lda + k);
    __m128 c = _mm_loadu_ps(src + 2 * lda + k), d = _mm_loadu_ps(src + 3 * lda + k);
    const __m128 t0 = _mm_unpacklo_ps(a, b), t1 = _mm_unpackhi_ps(a, b);
    const __m128 t2 = _mm_unpacklo_ps(c, d), t3 = _mm_unpackhi_ps(c, d);
    const __m128 e = _mm_loadu_ps(src + 4 * lda + k), f = _mm_loadu_ps(src + 5 * lda + k);
    const __m128 ef0 = _mm_unpacklo_ps(e, f), ef1 = _mm_unpackhi_ps(e, f);  // e0 f0 e1 f1 | e2 f2 e3 f3
    float* o = dst + k * kMr;
    _mm_storeu_ps(o, _mm_movelh_ps(t0, t2));
    _mm_storel_pi(reinterpret_cast<__m64*>(o + 4), ef0);
    _mm_storeu_ps(o + kMr, _mm_movehl_ps(t2, t0));
    _mm_storeh_pi(reinterpret_cast<__m64*>(o + kMr + 4), ef0);
    _mm_storeu_ps(o + 2 * kMr, _mm_movelh_ps(t1, t3));
    _mm_storel_pi(reinterpret_cast<__m64*>(o + 2 * kMr + 4), ef1);
    _mm_storeu_ps(o + 3 * kMr, _mm_movehl_ps(t3, t1));
    _mm_storeh_pi(reinterpret_cast<__m64*>(o + 3 * kMr + 4), ef1);
  }
  for (; k < kc; ++k)
    for (int r = 0; r < kMr; ++r) dst[k * kMr + r] = src[r * lda + k];
}

const SgemmKernel kAvx2 = {"avx2_fma",
                           kMr,
                           kNr,
                           256,
                           240,
                           {nullptr, micro_avx2<1>, micro_avx2<2>, micro_avx2<3>, micro_avx2<4>, micro_avx2<5>,
                            micro_avx2<6>},
                           pack_b_avx2,
                           pack_a_avx2,
                           0,
                           {nullptr, micro_avx2<1, 1>, micro_avx2<2, 2>, micro_avx2<3, 3>, micro_avx2<4, 4>,
                            micro_avx2<5, 5>, micro_avx2<6>}};

}  // namespace

const SgemmKernel& sgemm_avx2_kernel() { return kAvx2; }

}  // namespace mrt
