// Conv's fused output stage on one row of a finished GEMM block, and ai.mosaicrt FusedConv's input stage, with AVX2: the kernels
// file is compiled with -mavx2 -mfma for x86-64 targets only; nn.cc calls it when the CPU
// has those features.
#include <immintrin.h>

#include <algorithm>
#include <cstdint>

#include "../gemm/transpose8_avx.h"
#include "nn_geometry.h"

namespace mrt {
namespace nn {

namespace {

// y[i] = act(y[i] + bias (+ z[i])) on one row; Act gives the vector and the scalar form of the activation.
template <class Act>
void stage_row(float* y, const float* z, float bias, int64_t n, const Act& act) {
  const __m256 vb = _mm256_set1_ps(bias);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    __m256 v = _mm256_add_ps(_mm256_loadu_ps(y + i), vb);
    if (z) v = _mm256_add_ps(v, _mm256_loadu_ps(z + i));
    _mm256_storeu_ps(y + i, act(v));
  }
  for (; i < n; ++i) {
    float v = y[i] + bias;
    if (z) v += z[i];
    y[i] = act(v);
  }
}

// Relu, max(v, 0) with a NaN going to 0 in both forms; or nothing.
struct ReluOrNone {
  bool relu;
  __m256 operator()(__m256 v) const { return relu ? _mm256_max_ps(v, _mm256_setzero_ps()) : v; }
  float operator()(float v) const { return relu ? (v > 0.f ? v : 0.f) : v; }
};

// Clip: std::min(std::max(v, lo), hi), which max(lo, v) then min(hi, .) match on every input, -0 and NaN too.
struct Clip {
  float lo, hi;
  __m256 operator()(__m256 v) const { return _mm256_min_ps(_mm256_set1_ps(hi), _mm256_max_ps(_mm256_set1_ps(lo), v)); }
  float operator()(float v) const { return std::min(std::max(v, lo), hi); }
};

}  // namespace

void conv_stage_row_avx2(float* y, const float* z, float bias, int64_t n, bool relu) {
  stage_row(y, z, bias, n, ReluOrNone{relu});
}

void conv_stage_row_clip_avx2(float* y, const float* z, float bias, int64_t n, float lo, float hi) {
  stage_row(y, z, bias, n, Clip{lo, hi});
}

void positions_tile_to_planes_avx2(const float* c, int64_t ldc, int64_t m, int64_t n, const float* bias,
                                   const float* z, const RegisterAct& act, float* y, int64_t positions) {
  const __m256 zero = _mm256_setzero_ps(), vlo = _mm256_set1_ps(act.lo), vhi = _mm256_set1_ps(act.hi);
  alignas(32) float part[8];  // the positions of a partial block (no masked stores: slow on AMD Zen 3)
  for (int64_t ch0 = 0; ch0 < n; ch0 += 8) {
    const int64_t nc = std::min<int64_t>(8, n - ch0);
    for (int64_t r0 = 0; r0 < m; r0 += 8) {
      const int64_t nr = std::min<int64_t>(8, m - r0);
      __m256 v[8];
      for (int64_t r = 0; r < 8; ++r) {
        const float* src = c + (r0 + r) * ldc + ch0;
        if (r >= nr) {
          v[r] = zero;
        } else if (nc == 8) {
          v[r] = _mm256_loadu_ps(src);
        } else {
          std::fill(part, part + 8, 0.f);
          std::copy(src, src + nc, part);
          v[r] = _mm256_load_ps(part);
        }
      }
      transpose8x8(v);  // v[k]: channel ch0 + k at positions r0 .. r0 + 7
      for (int64_t k = 0; k < nc; ++k) {
        const int64_t ch = ch0 + k;
        float* out = y + ch * positions + r0;
        __m256 s = _mm256_add_ps(v[k], _mm256_set1_ps(bias ? bias[ch] : 0.f));
        if (z) {
          const float* zr = z + ch * positions + r0;
          if (nr == 8) {
            s = _mm256_add_ps(s, _mm256_loadu_ps(zr));
          } else {
            std::copy(zr, zr + nr, part);
            s = _mm256_add_ps(s, _mm256_load_ps(part));
          }
        }
        if (act.kind == RegisterAct::kRelu) s = _mm256_max_ps(s, zero);
        else if (act.kind == RegisterAct::kClip) s = _mm256_min_ps(vhi, _mm256_max_ps(vlo, s));
        if (nr == 8) {
          _mm256_storeu_ps(out, s);
        } else {
          _mm256_store_ps(part, s);
          std::copy(part, part + nr, out);
        }
      }
    }
  }
}

void input_stage_rows_avx2(const float* x, int64_t ldx, const float* scale, const float* shift, int64_t rows,
                           int64_t n, int64_t ld, float* dst) {
  const __m256 zero = _mm256_setzero_ps();
  for (int64_t k = 0; k < rows; ++k) {
    const float* src = x + k * ldx;
    float* d = dst + k * ld;
    const float a = scale[k], b = shift[k];
    const __m256 va = _mm256_set1_ps(a), vb = _mm256_set1_ps(b);
    // the row's next stretch, asked for a panel ahead: a panel reads a short piece of each of its rows, which
    // lie a plane apart, more streams than the hardware prefetchers follow
    _mm_prefetch(reinterpret_cast<const char*>(src + ld), _MM_HINT_T0);
    _mm_prefetch(reinterpret_cast<const char*>(src + ld + 16), _MM_HINT_T0);
    int64_t j = 0;
    for (; j + 8 <= n; j += 8)  // a product, then a sum (no fused multiply-add): BatchNormalization's rounding
      _mm256_storeu_ps(d + j, _mm256_max_ps(_mm256_add_ps(_mm256_mul_ps(_mm256_loadu_ps(src + j), va), vb), zero));
    for (; j < n; ++j) {
      const float v = src[j] * a + b;
      d[j] = v > 0.f ? v : 0.f;
    }
    for (; j < ld; ++j) d[j] = 0.f;
  }
}

}  // namespace nn
}  // namespace mrt
