// SGEMM micro-kernel for AVX-512F: 12 x 32 register tile (24 zmm accumulators, the A
// values are broadcast straight from memory). Compiled with -mavx512f (+vl/bw/dq) for
// x86-64 targets only; called only when the CPU has them.
#include <immintrin.h>

#include <algorithm>

#include "register_pin.h"
#include "sgemm_kernels.h"
#include "transpose8_avx.h"

namespace mrt {

namespace {

constexpr int kMr = 12;
constexpr int kNr = 32;

// The lanes of a 32-column tile's two vectors that hold its n columns.
inline void column_masks(int64_t n, __mmask16& m0, __mmask16& m1) {
  m0 = n >= 16 ? static_cast<__mmask16>(0xFFFF) : static_cast<__mmask16>((1u << n) - 1u);
  m1 = n >= 32 ? static_cast<__mmask16>(0xFFFF) : n > 16 ? static_cast<__mmask16>((1u << (n - 16)) - 1u) : 0;
}

inline void store_vec(float* c, __m512 acc, __m512 va, float beta, __mmask16 mask) {
  __m512 r = _mm512_mul_ps(acc, va);
  if (beta != 0.f) r = _mm512_fmadd_ps(_mm512_set1_ps(beta), _mm512_maskz_loadu_ps(mask, c), r);
  _mm512_mask_storeu_ps(c, mask, r);
}

// The tiles take the distance between A's steps as kAStep: kMr in an mr-high packed panel, M where a block of M
// rows is packed to its own height (rows_compact_a).

// Edge tile with n <= 16 columns: only the first 16 lanes of each B row are used.
template <int M, int kAStep = kMr>
void micro_avx512_half(int64_t kc, const float* a, const float* b, float* c, int64_t ldc, int64_t n, float alpha,
                       float beta) {
  __m512 acc[M];
#pragma GCC unroll 16
  for (int i = 0; i < M; ++i) acc[i] = _mm512_setzero_ps();
  for (int64_t k = 0; k < kc; ++k) {
    const __m512 b0 = in_register(_mm512_loadu_ps(b));
#pragma GCC unroll 16
    for (int i = 0; i < M; ++i) acc[i] = _mm512_fmadd_ps(_mm512_set1_ps(a[i]), b0, acc[i]);
    a += kAStep;
    b += kNr;
  }
  const __m512 va = _mm512_set1_ps(alpha);
  const __mmask16 m0 = n >= 16 ? static_cast<__mmask16>(0xFFFF) : static_cast<__mmask16>((1u << n) - 1u);
#pragma GCC unroll 16
  for (int i = 0; i < M; ++i) store_vec(c + i * ldc, acc[i], va, beta, m0);
}

// Edge tile with n <= 8 columns (a 14x14 map's 196 = 6 x 32 + 4): 8-lane vectors, which issue at twice the
// rate of 16-lane ones where the FPU is 256 bits wide or has two 512-bit FMA ports.
template <int M, int kAStep = kMr>
void micro_avx512_quarter(int64_t kc, const float* a, const float* b, float* c, int64_t ldc, int64_t n, float alpha,
                          float beta) {
  __m256 acc[M];
#pragma GCC unroll 16
  for (int i = 0; i < M; ++i) acc[i] = _mm256_setzero_ps();
  for (int64_t k = 0; k < kc; ++k) {
    const __m256 b0 = in_register(_mm256_loadu_ps(b));
#pragma GCC unroll 16
    for (int i = 0; i < M; ++i) acc[i] = _mm256_fmadd_ps(_mm256_set1_ps(a[i]), b0, acc[i]);
    a += kAStep;
    b += kNr;
  }
  const __m256 va = _mm256_set1_ps(alpha);
  const __mmask8 m0 = static_cast<__mmask8>((1u << n) - 1u);
#pragma GCC unroll 16
  for (int i = 0; i < M; ++i) {
    __m256 r = _mm256_mul_ps(acc[i], va);
    if (beta != 0.f) r = _mm256_fmadd_ps(_mm256_set1_ps(beta), _mm256_maskz_loadu_ps(m0, c + i * ldc), r);
    _mm256_mask_storeu_ps(c + i * ldc, m0, r);
  }
}

template <int M, int kAStep = kMr, bool kStream = false>
void micro_avx512_tile(int64_t kc, const float* a, const float* b, float* c, int64_t ldc, int64_t n, float alpha,
                       float beta, const float* ahead, int64_t lines) {
  if (kStream && n <= 16)
    for (; lines > 0; --lines, ahead += 16) _mm_prefetch(reinterpret_cast<const char*>(ahead), _MM_HINT_T0);
  if (n <= 8) {
    micro_avx512_quarter<M, kAStep>(kc, a, b, c, ldc, n, alpha, beta);
    return;
  }
  if (n <= 16) {
    micro_avx512_half<M, kAStep>(kc, a, b, c, ldc, n, alpha, beta);
    return;
  }
  // B's two lines kB steps ahead, into L1. With few rows a step takes a few cycles and the panel streams from L3
  // or memory (a constant MatMul weight at batch 1 or a few tokens): 8 KB ahead. On an AMD Zen 5 core (48 KB L1),
  // 4 rows against 1 MB weights, 16 of them (from L3): 253 -> 210 us at 1 thread, 165 -> 136 at 2; 64 of them
  // (64 MB, from memory): 1.84 -> 1.57 ms, 1.29 -> 1.02 (onnxruntime 2.09, 1.47), against 16 KB ahead into L2
  // only, which had beaten 16 KB ahead into L1 on an Intel VM (8 MB of weights: 225 -> 185 us). With more rows
  // the tile is bound by its multiply-adds; a short distance does.
  constexpr int kB = M <= 4 ? 64 : 8;
  __m512 acc0[M], acc1[M];
#pragma GCC unroll 16
  for (int i = 0; i < M; ++i) {
    acc0[i] = _mm512_setzero_ps();
    acc1[i] = _mm512_setzero_ps();
  }
  for (int64_t k = 0; k < kc; ++k) {
    const __m512 b0 = in_register(_mm512_loadu_ps(b));
    const __m512 b1 = in_register(_mm512_loadu_ps(b + 16));
    _mm_prefetch(reinterpret_cast<const char*>(b + kB * kNr), _MM_HINT_T0);
    _mm_prefetch(reinterpret_cast<const char*>(b + kB * kNr + 16), _MM_HINT_T0);
    // A 32 steps ahead: a layer's packed filters come from memory on their first panel when the model's
    // weights exceed the cache (a chain of 1x1 convolutions, 40 MB of filters: 3 % faster)
    _mm_prefetch(reinterpret_cast<const char*>(a + 32 * kAStep), _MM_HINT_T0);
    if (kStream && lines > 0) {
      _mm_prefetch(reinterpret_cast<const char*>(ahead), _MM_HINT_T0);
      ahead += 16;
      --lines;
    }
#pragma GCC unroll 16
    for (int i = 0; i < M; ++i) {
      const __m512 ai = _mm512_set1_ps(a[i]);
      acc0[i] = _mm512_fmadd_ps(ai, b0, acc0[i]);
      acc1[i] = _mm512_fmadd_ps(ai, b1, acc1[i]);
    }
    a += kAStep;
    b += kNr;
  }
  const __m512 va = _mm512_set1_ps(alpha);
  __mmask16 m0, m1;
  column_masks(n, m0, m1);
#pragma GCC unroll 16
  for (int i = 0; i < M; ++i) {
    store_vec(c + i * ldc, acc0[i], va, beta, m0);
    if (m1) store_vec(c + i * ldc + 16, acc1[i], va, beta, m1);
  }
}

template <int M, int kAStep = kMr>
void micro_avx512(int64_t kc, const float* a, const float* b, float* c, int64_t ldc, int64_t n, float alpha,
                  float beta) {
  micro_avx512_tile<M, kAStep>(kc, a, b, c, ldc, n, alpha, beta, nullptr, 0);
}

template <int M>
void micro_avx512_stream(int64_t kc, const float* a, const float* b, float* c, int64_t ldc, int64_t n, float alpha,
                         float beta, const float* ahead, int64_t lines) {
  micro_avx512_tile<M, kMr, true>(kc, a, b, c, ldc, n, alpha, beta, ahead, lines);
}

// A tile of one row (batch 1 against a weight matrix, the one-row edge of a taller GEMM): with one row each
// step is two multiply-adds, and one accumulator per vector would wait on the multiply-add latency at every
// step while B streams in. Four accumulators per vector (steps k mod 4) are summed at the end as
// (s0 + s1) + (s2 + s3).
template <int kAStep>
void micro_avx512_row(int64_t kc, const float* a, const float* b, float* c, int64_t ldc, int64_t n, float alpha,
                      float beta) {
  __m512 s0[4], s1[4];
  for (int u = 0; u < 4; ++u) s0[u] = s1[u] = _mm512_setzero_ps();
  int64_t k = 0;
  for (; k + 4 <= kc; k += 4) {
#pragma GCC unroll 4
    for (int u = 0; u < 4; ++u) {
      const __m512 ai = _mm512_set1_ps(a[u * kAStep]);
      s0[u] = _mm512_fmadd_ps(ai, _mm512_loadu_ps(b + u * kNr), s0[u]);
      s1[u] = _mm512_fmadd_ps(ai, _mm512_loadu_ps(b + u * kNr + 16), s1[u]);
    }
    a += 4 * kAStep;
    b += 4 * kNr;
  }
  for (int u = 0; k < kc; ++k, ++u) {
    const __m512 ai = _mm512_set1_ps(a[0]);
    s0[u] = _mm512_fmadd_ps(ai, _mm512_loadu_ps(b), s0[u]);
    s1[u] = _mm512_fmadd_ps(ai, _mm512_loadu_ps(b + 16), s1[u]);
    a += kAStep;
    b += kNr;
  }
  const __m512 va = _mm512_set1_ps(alpha);
  __mmask16 m0, m1;
  column_masks(n, m0, m1);
  store_vec(c, _mm512_add_ps(_mm512_add_ps(s0[0], s0[1]), _mm512_add_ps(s0[2], s0[3])), va, beta, m0);
  if (m1) store_vec(c + 16, _mm512_add_ps(_mm512_add_ps(s1[0], s1[1]), _mm512_add_ps(s1[2], s1[3])), va, beta, m1);
  (void)ldc;
}

void pack_b_avx512(const float* src, int64_t ldb, int64_t kc, float* dst) {
  for (int64_t k = 0; k < kc; ++k) {
    const float* s = src + k * ldb;
    _mm_prefetch(reinterpret_cast<const char*>(s + 8 * ldb), _MM_HINT_T0);
    _mm512_storeu_ps(dst + k * kNr, _mm512_loadu_ps(s));
    _mm512_storeu_ps(dst + k * kNr + 16, _mm512_loadu_ps(s + 16));
  }
}

// 4x4 transpose of xmm rows.
inline void transpose4(__m128& a, __m128& b, __m128& c, __m128& d) {
  const __m128 t0 = _mm_unpacklo_ps(a, b), t1 = _mm_unpackhi_ps(a, b);
  const __m128 t2 = _mm_unpacklo_ps(c, d), t3 = _mm_unpackhi_ps(c, d);
  a = _mm_movelh_ps(t0, t2);
  b = _mm_movehl_ps(t2, t0);
  c = _mm_movelh_ps(t1, t3);
  d = _mm_movehl_ps(t3, t1);
}

void pack_a_avx512(const float* src, int64_t lda, int64_t kc, float* dst) {
  int64_t k = 0;
  for (; k + 8 <= kc; k += 8) {
    __m256 v[8];
    for (int r = 0; r < 8; ++r) v[r] = _mm256_loadu_ps(src + r * lda + k);
    transpose8x8(v);
    for (int j = 0; j < 8; ++j) _mm256_storeu_ps(dst + (k + j) * kMr, v[j]);
    for (int half = 0; half < 2; ++half) {
      __m128 a = _mm_loadu_ps(src + 8 * lda + k + 4 * half), b = _mm_loadu_ps(src + 9 * lda + k + 4 * half);
      __m128 c = _mm_loadu_ps(src + 10 * lda + k + 4 * half), d = _mm_loadu_ps(src + 11 * lda + k + 4 * half);
      transpose4(a, b, c, d);
      float* o = dst + (k + 4 * half) * kMr + 8;
      _mm_storeu_ps(o, a);
      _mm_storeu_ps(o + kMr, b);
      _mm_storeu_ps(o + 2 * kMr, c);
      _mm_storeu_ps(o + 3 * kMr, d);
    }
  }
  for (; k < kc; ++k)
    for (int r = 0; r < kMr; ++r) dst[k * kMr + r] = src[r * lda + k];
}

inline __mmask16 first16(int64_t n) { return n >= 16 ? __mmask16(0xFFFF) : static_cast<__mmask16>((1u << n) - 1); }

inline float lanes_sum(__m512 v) {
  alignas(64) float l[16];
  _mm512_store_ps(l, v);
  float s[4];
  for (int i = 0; i < 4; ++i) s[i] = (l[i] + l[i + 4]) + (l[i + 8] + l[i + 12]);
  return (s[0] + s[1]) + (s[2] + s[3]);
}

// Four rows of b against a at a time, two vectors of k per step (eight independent sums in flight).
void gemv_dots_avx512(int64_t n, int64_t K, const float* a, const float* b, int64_t ldb, float* y) {
  int64_t j = 0;
  for (; j + 4 <= n; j += 4) {
    const float* r0 = b + j * ldb;
    const float *r1 = r0 + ldb, *r2 = r1 + ldb, *r3 = r2 + ldb;
    __m512 s0 = _mm512_setzero_ps(), s1 = s0, s2 = s0, s3 = s0, t0 = s0, t1 = s0, t2 = s0, t3 = s0;
    int64_t k = 0;
    for (; k + 32 <= K; k += 32) {
      const __m512 a0 = _mm512_loadu_ps(a + k), a1 = _mm512_loadu_ps(a + k + 16);
      s0 = _mm512_fmadd_ps(a0, _mm512_loadu_ps(r0 + k), s0);
      t0 = _mm512_fmadd_ps(a1, _mm512_loadu_ps(r0 + k + 16), t0);
      s1 = _mm512_fmadd_ps(a0, _mm512_loadu_ps(r1 + k), s1);
      t1 = _mm512_fmadd_ps(a1, _mm512_loadu_ps(r1 + k + 16), t1);
      s2 = _mm512_fmadd_ps(a0, _mm512_loadu_ps(r2 + k), s2);
      t2 = _mm512_fmadd_ps(a1, _mm512_loadu_ps(r2 + k + 16), t2);
      s3 = _mm512_fmadd_ps(a0, _mm512_loadu_ps(r3 + k), s3);
      t3 = _mm512_fmadd_ps(a1, _mm512_loadu_ps(r3 + k + 16), t3);
    }
    for (; k < K; k += 16) {
      const __mmask16 m = first16(K - k);
      const __m512 a0 = _mm512_maskz_loadu_ps(m, a + k);
      s0 = _mm512_fmadd_ps(a0, _mm512_maskz_loadu_ps(m, r0 + k), s0);
      s1 = _mm512_fmadd_ps(a0, _mm512_maskz_loadu_ps(m, r1 + k), s1);
      s2 = _mm512_fmadd_ps(a0, _mm512_maskz_loadu_ps(m, r2 + k), s2);
      s3 = _mm512_fmadd_ps(a0, _mm512_maskz_loadu_ps(m, r3 + k), s3);
    }
    y[j] = lanes_sum(_mm512_add_ps(s0, t0));
    y[j + 1] = lanes_sum(_mm512_add_ps(s1, t1));
    y[j + 2] = lanes_sum(_mm512_add_ps(s2, t2));
    y[j + 3] = lanes_sum(_mm512_add_ps(s3, t3));
  }
  for (; j < n; ++j) {
    const float* r0 = b + j * ldb;
    __m512 s0 = _mm512_setzero_ps(), t0 = s0;
    int64_t k = 0;
    for (; k + 32 <= K; k += 32) {
      s0 = _mm512_fmadd_ps(_mm512_loadu_ps(a + k), _mm512_loadu_ps(r0 + k), s0);
      t0 = _mm512_fmadd_ps(_mm512_loadu_ps(a + k + 16), _mm512_loadu_ps(r0 + k + 16), t0);
    }
    for (; k < K; k += 16) {
      const __mmask16 m = first16(K - k);
      s0 = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(m, a + k), _mm512_maskz_loadu_ps(m, r0 + k), s0);
    }
    y[j] = lanes_sum(_mm512_add_ps(s0, t0));
  }
}

// y[0, 16 V) (the last vector `last` lanes) over all of K in registers: a block of 128 columns (V = 8) streams
// its K rows of b once.
template <int V>
void axpy_block(int64_t K, const float* a, const float* b, int64_t ldb, float* y, __mmask16 last) {
  __m512 acc[V];
  for (int v = 0; v < V; ++v) acc[v] = _mm512_setzero_ps();
  for (int64_t k = 0; k < K; ++k) {
    const __m512 ak = _mm512_set1_ps(a[k]);
    const float* row = b + k * ldb;
#pragma GCC unroll 8
    for (int v = 0; v < V; ++v)
      acc[v] = _mm512_fmadd_ps(ak, _mm512_maskz_loadu_ps(v == V - 1 ? last : __mmask16(0xFFFF), row + 16 * v), acc[v]);
  }
  for (int v = 0; v < V; ++v) _mm512_mask_storeu_ps(y + 16 * v, v == V - 1 ? last : __mmask16(0xFFFF), acc[v]);
}

void gemv_axpys_avx512(int64_t n, int64_t K, const float* a, const float* b, int64_t ldb, float* y) {
  using Block = void (*)(int64_t, const float*, const float*, int64_t, float*, __mmask16);
  static constexpr Block kBlocks[8] = {axpy_block<1>, axpy_block<2>, axpy_block<3>, axpy_block<4>,
                                       axpy_block<5>, axpy_block<6>, axpy_block<7>, axpy_block<8>};
  for (int64_t j = 0; j < n; j += 128) {
    const int64_t cols = std::min<int64_t>(128, n - j), vectors = (cols + 15) / 16;
    kBlocks[vectors - 1](K, a, b + j, ldb, y + j, first16(cols - 16 * (vectors - 1)));
  }
}

const SgemmKernel kAvx512 = {"avx512f",
                             kMr,
                             kNr,
                             256,
                             288,
                             {nullptr, micro_avx512_row<kMr>, micro_avx512<2>, micro_avx512<3>, micro_avx512<4>,
                              micro_avx512<5>, micro_avx512<6>, micro_avx512<7>, micro_avx512<8>, micro_avx512<9>,
                              micro_avx512<10>, micro_avx512<11>, micro_avx512<12>},
                             pack_b_avx512,
                             pack_a_avx512,
                             128,
                             {nullptr, micro_avx512_row<1>, micro_avx512<2, 2>, micro_avx512<3, 3>, micro_avx512<4, 4>,
                              micro_avx512<5, 5>, micro_avx512<6, 6>, micro_avx512<7, 7>, micro_avx512<8, 8>,
                              micro_avx512<9, 9>, micro_avx512<10, 10>, micro_avx512<11, 11>, micro_avx512<12>},
                             gemv_dots_avx512,
                             gemv_axpys_avx512,
                             {nullptr, nullptr, micro_avx512_stream<2>, micro_avx512_stream<3>,
                              micro_avx512_stream<4>, micro_avx512_stream<5>, micro_avx512_stream<6>,
                              micro_avx512_stream<7>, micro_avx512_stream<8>, micro_avx512_stream<9>,
                              micro_avx512_stream<10>, micro_avx512_stream<11>, micro_avx512_stream<12>}};

}  // namespace

const SgemmKernel& sgemm_avx512_kernel() { return kAvx512; }

}  // namespace mrt
