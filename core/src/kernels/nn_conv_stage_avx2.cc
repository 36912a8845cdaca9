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

// The first n (n <= 0: none, n >= 4: four) lanes of v stored at p by stores of 16, 8 and 4 bytes (load_first4 in
// transpose8_avx.h is the load): a copy through a buffer instead (a vector store read back by narrower loads, or
// narrow stores read back by a vector load) stalls on the failed store forwarding, for every output of a tile a
// few positions high (the transposed GEMM's tiles of 5 and 6 rows: half of 160 -> 960 on 7 x 7 at 2 threads, AMD
// Zen 1, went to those stalls).
inline void store_first4(float* p, __m128 v, int64_t n) {
  if (n >= 4) {
    _mm_storeu_ps(p, v);
    return;
  }
  if (n >= 2) _mm_store_sd(reinterpret_cast<double*>(p), _mm_castps_pd(v));
  if (n == 3) _mm_store_ss(p + 2, _mm_movehl_ps(v, v));
  if (n == 1) _mm_store_ss(p, v);
}
// The same for n (n <= 0: none, n >= 8: eight) values of a 256-bit vector.
inline __m256 load_first8(const float* p, int64_t n) {
  if (n >= 8) return _mm256_loadu_ps(p);
  if (n <= 4) return _mm256_zextps128_ps256(load_first4(p, n));
  return _mm256_insertf128_ps(_mm256_castps128_ps256(_mm_loadu_ps(p)), load_first4(p + 4, n - 4), 1);
}
inline void store_first8(float* p, __m256 v, int64_t n) {
  if (n >= 8) {
    _mm256_storeu_ps(p, v);
  } else if (n <= 4) {
    store_first4(p, _mm256_castps256_ps128(v), n);
  } else {
    _mm_storeu_ps(p, _mm256_castps256_ps128(v));
    store_first4(p + 4, _mm256_extractf128_ps(v, 1), n - 4);
  }
}

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
  for (int64_t ch0 = 0; ch0 < n; ch0 += 8) {
    const int64_t nc = std::min<int64_t>(8, n - ch0);
    for (int64_t r0 = 0; r0 < m; r0 += 8) {
      const int64_t nr = std::min<int64_t>(8, m - r0);
      // v[k]: channel ch0 + k at positions r0 .. r0 + 7; the rows past nr and the channels past nc as zeros
      __m256 v[8];
      load_transposed8x8(c + r0 * ldc + ch0, ldc, v, nr, nc);
      for (int64_t k = 0; k < nc; ++k) {
        const int64_t ch = ch0 + k;
        __m256 s = _mm256_add_ps(v[k], _mm256_set1_ps(bias ? bias[ch] : 0.f));
        if (z) s = _mm256_add_ps(s, load_first8(z + ch * positions + r0, nr));
        if (act.kind == RegisterAct::kRelu) s = _mm256_max_ps(s, zero);
        else if (act.kind == RegisterAct::kClip) s = _mm256_min_ps(vhi, _mm256_max_ps(vlo, s));
        store_first8(y + ch * positions + r0, s, nr);
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
