// Conv's output stage for a tile computed transposed (rows are output positions, columns output channels: the
// few-positions GEMM), on AVX-512: 16 x 16 blocks of the tile are transposed in registers and written into the
// channels' planes with the bias, the residual and Relu or Clip applied on the way, in the order and with the
// operand order of the row stage (nn_conv_stage_avx2.cc), so the results are the same bits.
#include <immintrin.h>

#include <algorithm>
#include <cstdint>

#include "nn_geometry.h"
#include "transpose16_avx512.h"

namespace mrt {
namespace nn {

void positions_tile_to_planes_avx512(const float* c, int64_t ldc, int64_t m, int64_t n, const float* bias,
                                     const float* z, const RegisterAct& act, float* y, int64_t positions) {
  const __m512 zero = _mm512_setzero_ps(), vlo = _mm512_set1_ps(act.lo), vhi = _mm512_set1_ps(act.hi);
  for (int64_t ch0 = 0; ch0 < n; ch0 += 16) {
    const int64_t nc = std::min<int64_t>(16, n - ch0);
    const __mmask16 cols = static_cast<__mmask16>(nc >= 16 ? 0xFFFF : (1u << nc) - 1u);
    for (int64_t r0 = 0; r0 < m; r0 += 16) {
      const int64_t nr = std::min<int64_t>(16, m - r0);
      const __mmask16 rows = static_cast<__mmask16>(nr >= 16 ? 0xFFFF : (1u << nr) - 1u);
      __m512 v[16];
      for (int64_t r = 0; r < 16; ++r)
        v[r] = r < nr ? _mm512_maskz_loadu_ps(cols, c + (r0 + r) * ldc + ch0) : zero;
      transpose16(v);  // v[k]: channel ch0 + k at positions r0 .. r0 + 15
      for (int64_t k = 0; k < nc; ++k) {
        const int64_t ch = ch0 + k;
        __m512 s = _mm512_add_ps(v[k], _mm512_set1_ps(bias ? bias[ch] : 0.f));
        if (z) s = _mm512_add_ps(s, _mm512_maskz_loadu_ps(rows, z + ch * positions + r0));
        if (act.kind == RegisterAct::kRelu) s = _mm512_max_ps(s, zero);
        else if (act.kind == RegisterAct::kClip) s = _mm512_min_ps(vhi, _mm512_max_ps(vlo, s));
        _mm512_mask_storeu_ps(y + ch * positions + r0, rows, s);
      }
    }
  }
}

}  // namespace nn
}  // namespace mrt
