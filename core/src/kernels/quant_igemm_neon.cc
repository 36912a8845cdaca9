// Arm64 integer GEMM: the AdvSIMD micro-kernel of the int16 path (smlal on the pair
// layout of quant_common.h) and the registration of every arm64 integer GEMM kernel.
// Compiled for arm64 targets only, for the armv8-a baseline: the registrars run on every
// arm64 CPU at load time, so they live here and not in the files compiled with
// +dotprod / +i8mm, whose code runs only once the registry has checked the CPU's HWCAPs.
#include <arm_neon.h>

#include <cstring>

#include "../gemm/backend_registry.h"
#include "quant_igemm_neon.h"

namespace mrt {
namespace quant {
namespace {

// R rows x 16 columns: per row and 4 columns, lo accumulates the products of columns
// 0-1 (k0, k1 lanes side by side), hi those of columns 2-3; a pairwise add at the end
// gives the 4 column sums.
template <int R>
void block(int64_t Kp, const int16_t* A, int64_t lda, const int16_t* panel, int32_t* C, int64_t ldc,
           int64_t valid_n) {
  int32x4_t lo[R][4], hi[R][4];
  for (int r = 0; r < R; ++r)
    for (int q = 0; q < 4; ++q) lo[r][q] = hi[r][q] = vdupq_n_s32(0);
  for (int64_t kp = 0; kp < Kp; kp += 2) {
    const int16_t* b = panel + kp * kIgemmPanel;
    const int16x8_t b0 = vld1q_s16(b), b1 = vld1q_s16(b + 8), b2 = vld1q_s16(b + 16), b3 = vld1q_s16(b + 24);
    for (int r = 0; r < R; ++r) {
      int32_t pair;
      std::memcpy(&pair, A + r * lda + kp, sizeof(pair));
      const int16x8_t a = vreinterpretq_s16_s32(vdupq_n_s32(pair));  // a0 a1 a0 a1 ...
      const int16x4_t al = vget_low_s16(a);
      lo[r][0] = vmlal_s16(lo[r][0], al, vget_low_s16(b0));
      hi[r][0] = vmlal_high_s16(hi[r][0], a, b0);
      lo[r][1] = vmlal_s16(lo[r][1], al, vget_low_s16(b1));
      hi[r][1] = vmlal_high_s16(hi[r][1], a, b1);
      lo[r][2] = vmlal_s16(lo[r][2], al, vget_low_s16(b2));
      hi[r][2] = vmlal_high_s16(hi[r][2], a, b2);
      lo[r][3] = vmlal_s16(lo[r][3], al, vget_low_s16(b3));
      hi[r][3] = vmlal_high_s16(hi[r][3], a, b3);
    }
  }
  for (int r = 0; r < R; ++r) {
    int32_t* c = C + r * ldc;
    int32_t tmp[kIgemmPanel];
    int32_t* out = valid_n == kIgemmPanel ? c : tmp;
    for (int q = 0; q < 4; ++q) vst1q_s32(out + 4 * q, vpaddq_s32(lo[r][q], hi[r][q]));
    if (out == tmp) std::memcpy(c, tmp, static_cast<size_t>(valid_n) * sizeof(int32_t));
  }
}

void igemm_block_neon(int64_t rows, int64_t Kp, const int16_t* A, int64_t lda, const int16_t* panel, int32_t* C,
                      int64_t ldc, int64_t valid_n) {
  for (int64_t r = 0; r < rows; r += 3) {
    const int64_t n = rows - r;
    const int16_t* a = A + r * lda;
    int32_t* c = C + r * ldc;
    if (n >= 3) block<3>(Kp, a, lda, panel, c, ldc, valid_n);
    else if (n == 2) block<2>(Kp, a, lda, panel, c, ldc, valid_n);
    else block<1>(Kp, a, lda, panel, c, ldc, valid_n);
  }
}

const Igemm16Kernel kNeon16 = {"neon", igemm_block_neon, nullptr};

}  // namespace

// External so that a build's symbol table shows whether the Arm kernels are compiled in.
const Igemm16Kernel* igemm16_neon_kernel() { return &kNeon16; }

namespace {
const CpuKernelRegistrar kRegNeon({CpuKernelFamily::kIgemm16, "neon", 10, kCpuNeon,
                                   []() -> const void* { return igemm16_neon_kernel(); }});
const CpuKernelRegistrar kRegDotprod({CpuKernelFamily::kIgemm8, "dotprod", 20, kCpuNeon | kCpuDotprod,
                                      []() -> const void* { return igemm8_dotprod_kernel(); }});
const CpuKernelRegistrar kRegI8mm({CpuKernelFamily::kIgemm8, "i8mm", 30, kCpuNeon | kCpuI8mm,
                                   []() -> const void* { return igemm8_i8mm_kernel(); }});
}  // namespace

}  // namespace quant
}  // namespace mrt
