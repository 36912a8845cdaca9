// Softmax and LogSoftmax of contiguous float rows with AVX-512 (declared in norm_util.h): three passes over
// the row in 16 lanes, the exp computed as fastmath::exp_f computes it (the same range reduction and
// polynomial, with fused multiply-adds as the AVX2 build of it contracts them).
#include <immintrin.h>

#include <cmath>
#include <cstdint>

#include "norm_util.h"

namespace mrt {
namespace norm {
namespace {

inline __mmask16 tail_mask(int64_t left) {
  return left >= 16 ? __mmask16(0xFFFF) : static_cast<__mmask16>((1u << left) - 1);
}

// exp of x <= 0 or NaN (x - max of its row): the clamps, n ln2 + r with n rounded to nearest, the degree-7
// series of exp(r), times 2^(n-1) * 2; NaN passes through.
inline __m512 exp16(__m512 x) {
  __m512 xc = _mm512_min_ps(x, _mm512_set1_ps(89.f));
  xc = _mm512_max_ps(xc, _mm512_set1_ps(-87.33654f));
  const __m512 fn = _mm512_roundscale_ps(_mm512_mul_ps(xc, _mm512_set1_ps(1.44269504088896341f)),
                                         _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m512 r = _mm512_fnmadd_ps(fn, _mm512_set1_ps(0.693359375f), xc);
  r = _mm512_fnmadd_ps(fn, _mm512_set1_ps(-2.12194440e-4f), r);
  __m512 p = _mm512_set1_ps(1.f / 5040.f);
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.f / 720.f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.f / 120.f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.f / 24.f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.f / 6.f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(0.5f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.f));
  const __m512i e = _mm512_min_epi32(_mm512_add_epi32(_mm512_cvtps_epi32(fn), _mm512_set1_epi32(126)),
                                     _mm512_set1_epi32(254));
  const __m512 res = _mm512_mul_ps(_mm512_mul_ps(p, _mm512_castsi512_ps(_mm512_slli_epi32(e, 23))),
                                   _mm512_set1_ps(2.f));
  return _mm512_mask_blend_ps(_mm512_cmp_ps_mask(x, x, _CMP_UNORD_Q), res, x);
}

}  // namespace

bool softmax_row_avx512(const float* x, float* y, int64_t n, bool log_softmax) {
  __m512 vmx = _mm512_set1_ps(-INFINITY);
  __mmask16 nan = 0;
  for (int64_t k = 0; k < n; k += 16) {
    const __mmask16 m = tail_mask(n - k);
    const __m512 v = _mm512_maskz_loadu_ps(m, x + k);
    vmx = _mm512_mask_max_ps(vmx, m, v, vmx);
    nan |= _mm512_mask_cmp_ps_mask(m, v, v, _CMP_UNORD_Q);
  }
  if (nan) return false;
  const __m512 mx = _mm512_set1_ps(_mm512_reduce_max_ps(vmx));
  __m512 sum = _mm512_setzero_ps();
  if (!log_softmax) {
    for (int64_t k = 0; k < n; k += 16) {  // y = exp(x - max), summed
      const __mmask16 m = tail_mask(n - k);
      const __m512 e = exp16(_mm512_sub_ps(_mm512_maskz_loadu_ps(m, x + k), mx));
      _mm512_mask_storeu_ps(y + k, m, e);
      sum = _mm512_mask_add_ps(sum, m, sum, e);
    }
    const __m512 inv = _mm512_set1_ps(1.f / _mm512_reduce_add_ps(sum));
    for (int64_t k = 0; k < n; k += 16) {
      const __mmask16 m = tail_mask(n - k);
      _mm512_mask_storeu_ps(y + k, m, _mm512_mul_ps(_mm512_maskz_loadu_ps(m, y + k), inv));
    }
    return true;
  }
  for (int64_t k = 0; k < n; k += 16) {  // the sum of exp(x - max); y = x - max
    const __mmask16 m = tail_mask(n - k);
    const __m512 d = _mm512_sub_ps(_mm512_maskz_loadu_ps(m, x + k), mx);
    _mm512_mask_storeu_ps(y + k, m, d);
    sum = _mm512_mask_add_ps(sum, m, sum, exp16(d));
  }
  const __m512 lse = _mm512_set1_ps(std::log(_mm512_reduce_add_ps(sum)));
  for (int64_t k = 0; k < n; k += 16) {
    const __mmask16 m = tail_mask(n - k);
    _mm512_mask_storeu_ps(y + k, m, _mm512_sub_ps(_mm512_maskz_loadu_ps(m, y + k), lse));
  }
  return true;
}

namespace {
// the 8 lanes' sum, pairwise (GCC 12 warns on _mm512_reduce_add_pd's own code)
double lanes_sum(__m512d v) {
  alignas(64) double l[8];
  _mm512_store_pd(l, v);
  return ((l[0] + l[1]) + (l[2] + l[3])) + ((l[4] + l[5]) + (l[6] + l[7]));
}
}  // namespace

double row_sum_f64_avx512(const float* p, int64_t n) {
  __m512d a0 = _mm512_setzero_pd(), a1 = a0, a2 = a0, a3 = a0;
  int64_t j = 0;
  for (; j + 32 <= n; j += 32) {
    a0 = _mm512_add_pd(a0, _mm512_cvtps_pd(_mm256_loadu_ps(p + j)));
    a1 = _mm512_add_pd(a1, _mm512_cvtps_pd(_mm256_loadu_ps(p + j + 8)));
    a2 = _mm512_add_pd(a2, _mm512_cvtps_pd(_mm256_loadu_ps(p + j + 16)));
    a3 = _mm512_add_pd(a3, _mm512_cvtps_pd(_mm256_loadu_ps(p + j + 24)));
  }
  for (; j < n; j += 8) {
    const __mmask8 m = static_cast<__mmask8>(n - j >= 8 ? 0xFF : (1u << (n - j)) - 1);
    a0 = _mm512_add_pd(a0, _mm512_cvtps_pd(_mm256_maskz_loadu_ps(m, p + j)));
  }
  return lanes_sum(_mm512_add_pd(_mm512_add_pd(a0, a1), _mm512_add_pd(a2, a3)));
}

double row_sq_dev_f64_avx512(const float* p, int64_t n, double mean) {
  const __m512d mv = _mm512_set1_pd(mean);
  __m512d a0 = _mm512_setzero_pd(), a1 = a0, a2 = a0, a3 = a0;
  auto acc = [&](__m512d a, __m256 v) {
    const __m512d d = _mm512_sub_pd(_mm512_cvtps_pd(v), mv);
    return _mm512_fmadd_pd(d, d, a);
  };
  int64_t j = 0;
  for (; j + 32 <= n; j += 32) {
    a0 = acc(a0, _mm256_loadu_ps(p + j));
    a1 = acc(a1, _mm256_loadu_ps(p + j + 8));
    a2 = acc(a2, _mm256_loadu_ps(p + j + 16));
    a3 = acc(a3, _mm256_loadu_ps(p + j + 24));
  }
  for (; j < n; j += 8) {  // (masked-off lanes are 0 - mean: blended out)
    const __mmask8 m = static_cast<__mmask8>(n - j >= 8 ? 0xFF : (1u << (n - j)) - 1);
    a0 = _mm512_mask_mov_pd(a0, m, acc(a0, _mm256_maskz_loadu_ps(m, p + j)));
  }
  return lanes_sum(_mm512_add_pd(_mm512_add_pd(a0, a1), _mm512_add_pd(a2, a3)));
}

}  // namespace norm
}  // namespace mrt
