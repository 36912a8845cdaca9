// Conv's fused output stage on one row of a finished GEMM block, with AVX2: the kernels
// file is compiled with -mavx2 -mfma for x86-64 targets only; nn.cc calls it when the CPU
// has those features.
#include <immintrin.h>

#include <cstdint>

#include "nn_geometry.h"

namespace mrt {
namespace nn {

void conv_stage_row_avx2(float* y, const float* z, float bias, int64_t n, bool relu) {
  const __m256 vb = _mm256_set1_ps(bias), zero = _mm256_setzero_ps();
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    __m256 v = _mm256_add_ps(_mm256_loadu_ps(y + i), vb);
    if (z) v = _mm256_add_ps(v, _mm256_loadu_ps(z + i));
    if (relu) v = _mm256_max_ps(v, zero);
    _mm256_storeu_ps(y + i, v);
  }
  for (; i < n; ++i) {
    float v = y[i] + bias;
    if (z) v += z[i];
    if (relu) v = v > 0.f ? v : 0.f;
    y[i] = v;
  }
}

}  // namespace nn
}  // namespace mrt
