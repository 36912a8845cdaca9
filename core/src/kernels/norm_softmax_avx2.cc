// Softmax and LogSoftmax of contiguous float rows with AVX2 + FMA (declared in norm_util.h), for CPUs without
// AVX-512: softmax_row_avx512's three passes in 8 lanes, the same exp (range reduction and degree-7 series).
// Against the SSE row of norm_softmax.cc (five passes, the exp in a separate array pass) a 128-wide row took
// about half the time on an AMD Zen 3.
#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstdint>

#include "norm_util.h"

namespace mrt {
namespace norm {
namespace {

inline __m256i tail_mask(int64_t left) {
  return _mm256_cmpgt_epi32(_mm256_set1_epi32(static_cast<int>(std::min<int64_t>(left, 8))),
                            _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}

// exp of x <= 0 or NaN (x - max of its row), as exp16 in norm_softmax_avx512.cc
inline __m256 exp8(__m256 x) {
  __m256 xc = _mm256_min_ps(x, _mm256_set1_ps(89.f));
  xc = _mm256_max_ps(xc, _mm256_set1_ps(-87.33654f));
  const __m256 fn = _mm256_round_ps(_mm256_mul_ps(xc, _mm256_set1_ps(1.44269504088896341f)),
                                    _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m256 r = _mm256_fnmadd_ps(fn, _mm256_set1_ps(0.693359375f), xc);
  r = _mm256_fnmadd_ps(fn, _mm256_set1_ps(-2.12194440e-4f), r);
  __m256 p = _mm256_set1_ps(1.f / 5040.f);
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.f / 720.f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.f / 120.f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.f / 24.f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.f / 6.f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(0.5f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.f));
  const __m256i e = _mm256_min_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(fn), _mm256_set1_epi32(126)),
                                     _mm256_set1_epi32(254));
  const __m256 res = _mm256_mul_ps(_mm256_mul_ps(p, _mm256_castsi256_ps(_mm256_slli_epi32(e, 23))),
                                   _mm256_set1_ps(2.f));
  return _mm256_blendv_ps(res, x, _mm256_cmp_ps(x, x, _CMP_UNORD_Q));
}

inline float lanes_max(__m256 v) {
  __m128 m = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  m = _mm_max_ps(m, _mm_movehl_ps(m, m));
  return _mm_cvtss_f32(_mm_max_ss(m, _mm_movehdup_ps(m)));
}

inline float lanes_sum(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  return _mm_cvtss_f32(_mm_add_ss(s, _mm_movehdup_ps(s)));
}

}  // namespace

bool softmax_row_avx2(const float* x, float* y, int64_t n, bool log_softmax) {
  const int64_t full = n / 8 * 8;
  const __m256i tail = tail_mask(n - full);
  const __m256 ninf = _mm256_set1_ps(-INFINITY);
  __m256 vmx = ninf, nan = _mm256_setzero_ps();
  for (int64_t k = 0; k < full; k += 8) {
    const __m256 v = _mm256_loadu_ps(x + k);
    vmx = _mm256_max_ps(v, vmx);
    nan = _mm256_or_ps(nan, _mm256_cmp_ps(v, v, _CMP_UNORD_Q));
  }
  if (full < n) {  // the lanes past the row: -inf
    const __m256 v = _mm256_blendv_ps(ninf, _mm256_maskload_ps(x + full, tail), _mm256_castsi256_ps(tail));
    vmx = _mm256_max_ps(v, vmx);
    nan = _mm256_or_ps(nan, _mm256_cmp_ps(v, v, _CMP_UNORD_Q));
  }
  if (_mm256_movemask_ps(nan)) return false;
  const __m256 mx = _mm256_set1_ps(lanes_max(vmx));
  __m256 sum = _mm256_setzero_ps();
  if (!log_softmax) {
    for (int64_t k = 0; k < full; k += 8) {  // y = exp(x - max), summed
      const __m256 e = exp8(_mm256_sub_ps(_mm256_loadu_ps(x + k), mx));
      _mm256_storeu_ps(y + k, e);
      sum = _mm256_add_ps(sum, e);
    }
    if (full < n) {
      const __m256 e = _mm256_and_ps(exp8(_mm256_sub_ps(_mm256_maskload_ps(x + full, tail), mx)),
                                     _mm256_castsi256_ps(tail));
      _mm256_maskstore_ps(y + full, tail, e);
      sum = _mm256_add_ps(sum, e);
    }
    const __m256 inv = _mm256_set1_ps(1.f / lanes_sum(sum));
    for (int64_t k = 0; k < full; k += 8) _mm256_storeu_ps(y + k, _mm256_mul_ps(_mm256_loadu_ps(y + k), inv));
    if (full < n) _mm256_maskstore_ps(y + full, tail, _mm256_mul_ps(_mm256_maskload_ps(y + full, tail), inv));
    return true;
  }
  for (int64_t k = 0; k < full; k += 8) {  // the sum of exp(x - max); y = x - max
    const __m256 d = _mm256_sub_ps(_mm256_loadu_ps(x + k), mx);
    _mm256_storeu_ps(y + k, d);
    sum = _mm256_add_ps(sum, exp8(d));
  }
  if (full < n) {
    const __m256 d = _mm256_sub_ps(_mm256_maskload_ps(x + full, tail), mx);
    _mm256_maskstore_ps(y + full, tail, d);
    sum = _mm256_add_ps(sum, _mm256_and_ps(exp8(d), _mm256_castsi256_ps(tail)));
  }
  const __m256 lse = _mm256_set1_ps(std::log(lanes_sum(sum)));
  for (int64_t k = 0; k < full; k += 8) _mm256_storeu_ps(y + k, _mm256_sub_ps(_mm256_loadu_ps(y + k), lse));
  if (full < n) _mm256_maskstore_ps(y + full, tail, _mm256_sub_ps(_mm256_maskload_ps(y + full, tail), lse));
  return true;
}

}  // namespace norm
}  // namespace mrt
