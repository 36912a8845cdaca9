// SGEMM micro-kernel for arm64 AdvSIMD: 8 x 12 register tile (24 accumulators, one
// fmla by element per 4 columns and row). Compiled for arm64 targets only, for the
// armv8-a baseline (AdvSIMD is mandatory there); registers itself with the kernel
// registry (backend_registry.h) -- generic code never names anything in this file.
#include <arm_neon.h>

#include <utility>

#include "backend_registry.h"
#include "sgemm_kernels.h"

namespace mrt {

namespace {

constexpr int kMr = 8;
constexpr int kNr = 12;

// acc += b * a[I], with a[0..7] held in two vectors.
template <size_t I>
inline float32x4_t fma_row(float32x4_t acc, float32x4_t b, float32x4_t a_lo, float32x4_t a_hi) {
  return vfmaq_laneq_f32(acc, b, I < 4 ? a_lo : a_hi, I & 3);
}

template <size_t... I>
inline void fma_tile(std::index_sequence<I...>, float32x4_t* c0, float32x4_t* c1, float32x4_t* c2, float32x4_t b0,
                     float32x4_t b1, float32x4_t b2, float32x4_t a_lo, float32x4_t a_hi) {
  ((c0[I] = fma_row<I>(c0[I], b0, a_lo, a_hi), c1[I] = fma_row<I>(c1[I], b1, a_lo, a_hi),
    c2[I] = fma_row<I>(c2[I], b2, a_lo, a_hi)),
   ...);
}

inline void store_vec(float* c, float32x4_t acc, float alpha, float beta) {
  float32x4_t r = vmulq_n_f32(acc, alpha);
  if (beta != 0.f) r = vfmaq_n_f32(r, vld1q_f32(c), beta);
  vst1q_f32(c, r);
}

template <int M>
void micro_neon(int64_t kc, const float* a, const float* b, float* c, int64_t ldc, int64_t n, float alpha,
                float beta) {
  float32x4_t acc0[M], acc1[M], acc2[M];
  for (int i = 0; i < M; ++i) acc0[i] = acc1[i] = acc2[i] = vdupq_n_f32(0.f);
  for (int64_t k = 0; k < kc; ++k) {
    const float32x4_t b0 = vld1q_f32(b), b1 = vld1q_f32(b + 4), b2 = vld1q_f32(b + 8);
    const float32x4_t a_lo = vld1q_f32(a);
    const float32x4_t a_hi = M > 4 ? vld1q_f32(a + 4) : a_lo;
    fma_tile(std::make_index_sequence<M>(), acc0, acc1, acc2, b0, b1, b2, a_lo, a_hi);
    a += kMr;
    b += kNr;
  }
  if (n == kNr) {
    for (int i = 0; i < M; ++i) {
      float* ci = c + i * ldc;
      store_vec(ci, acc0[i], alpha, beta);
      store_vec(ci + 4, acc1[i], alpha, beta);
      store_vec(ci + 8, acc2[i], alpha, beta);
    }
    return;
  }
  for (int i = 0; i < M; ++i) {  // edge tile: n < 12 columns
    float row[kNr];
    vst1q_f32(row, vmulq_n_f32(acc0[i], alpha));
    vst1q_f32(row + 4, vmulq_n_f32(acc1[i], alpha));
    vst1q_f32(row + 8, vmulq_n_f32(acc2[i], alpha));
    float* ci = c + i * ldc;
    if (beta == 0.f) {
      for (int64_t j = 0; j < n; ++j) ci[j] = row[j];
    } else {
      for (int64_t j = 0; j < n; ++j) ci[j] = row[j] + beta * ci[j];
    }
  }
}

void pack_b_neon(const float* src, int64_t ldb, int64_t kc, float* dst) {
  for (int64_t k = 0; k < kc; ++k) {
    const float* s = src + k * ldb;
    vst1q_f32(dst, vld1q_f32(s));
    vst1q_f32(dst + 4, vld1q_f32(s + 4));
    vst1q_f32(dst + 8, vld1q_f32(s + 8));
    dst += kNr;
  }
}

// In place 4x4 transpose: r[i] = row i (4 consecutive k) -> r[j] = the 4 rows at k = j.
inline void transpose4(float32x4_t& r0, float32x4_t& r1, float32x4_t& r2, float32x4_t& r3) {
  const float32x4_t t0 = vtrn1q_f32(r0, r1), t1 = vtrn2q_f32(r0, r1);
  const float32x4_t t2 = vtrn1q_f32(r2, r3), t3 = vtrn2q_f32(r2, r3);
  r0 = vreinterpretq_f32_f64(vtrn1q_f64(vreinterpretq_f64_f32(t0), vreinterpretq_f64_f32(t2)));
  r1 = vreinterpretq_f32_f64(vtrn1q_f64(vreinterpretq_f64_f32(t1), vreinterpretq_f64_f32(t3)));
  r2 = vreinterpretq_f32_f64(vtrn2q_f64(vreinterpretq_f64_f32(t0), vreinterpretq_f64_f32(t2)));
  r3 = vreinterpretq_f32_f64(vtrn2q_f64(vreinterpretq_f64_f32(t1), vreinterpretq_f64_f32(t3)));
}

void pack_a_neon(const float* src, int64_t lda, int64_t kc, float* dst) {
  int64_t k = 0;
  for (; k + 4 <= kc; k += 4) {
    for (int half = 0; half < 2; ++half) {
      const float* s = src + 4 * half * lda + k;
      float32x4_t r0 = vld1q_f32(s), r1 = vld1q_f32(s + lda), r2 = vld1q_f32(s + 2 * lda),
                  r3 = vld1q_f32(s + 3 * lda);
      transpose4(r0, r1, r2, r3);
      float* o = dst + k * kMr + 4 * half;
      vst1q_f32(o, r0);
      vst1q_f32(o + kMr, r1);
      vst1q_f32(o + 2 * kMr, r2);
      vst1q_f32(o + 3 * kMr, r3);
    }
  }
  for (; k < kc; ++k)
    for (int r = 0; r < kMr; ++r) dst[k * kMr + r] = src[r * lda + k];
}

const SgemmKernel kNeon = {"neon",
                           kMr,
                           kNr,
                           256,
                           kMr * 24,
                           {nullptr, micro_neon<1>, micro_neon<2>, micro_neon<3>, micro_neon<4>, micro_neon<5>,
                            micro_neon<6>, micro_neon<7>, micro_neon<8>},
                           pack_b_neon,
                           pack_a_neon};

}  // namespace

// External so that a build's symbol table shows whether the Arm kernels are compiled in.
const SgemmKernel& sgemm_neon_kernel() { return kNeon; }

namespace {
const CpuKernelRegistrar kRegNeon({CpuKernelFamily::kSgemm, "neon", 10, kCpuNeon,
                                   []() -> const void* { return &sgemm_neon_kernel(); }});
}  // namespace

}  // namespace mrt
