// Arm64 8-bit GEMM micro-kernel on SMMLA (FEAT_I8MM), s8 x s8 (layout in
// quant_common.h): up to 8 rows x 8 columns. One smmla multiplies a 2 x 8 block of A
// (two rows, 8 k) by an 8 x 2 block of B (two columns, their 8 bytes side by side in the
// packed panel) into a 2 x 2 block of C, 32 multiply-adds per instruction.
// Compiled with -march=armv8.2-a+i8mm for arm64 targets only; nothing here runs unless
// the registry (quant_igemm_neon.cc) found HWCAP2_I8MM. Keep it free of static
// initializers.
#include <arm_neon.h>

#include <cstring>

#include "quant_igemm_neon.h"

namespace mrt {
namespace quant {
namespace {

constexpr int64_t kPanel = 8;
constexpr int64_t kRows = 8;

// P pairs of rows; acc[p][v] = C rows (2p, 2p+1) x columns (2v, 2v+1), row-major 2 x 2.
template <int P>
void block(int64_t Kp, const uint8_t* A, int64_t lda, const int8_t* panel, const int32_t* za, const int32_t* rowsum,
           const int32_t* zb, const int32_t* colfix, int32_t* C, int64_t ldc, int64_t valid_n, int64_t rows) {
  int32x4_t acc[P][4];
  for (int p = 0; p < P; ++p)
    for (int v = 0; v < 4; ++v) acc[p][v] = vdupq_n_s32(0);
  const int8_t* a = reinterpret_cast<const int8_t*>(A);
  for (int64_t k = 0; k < Kp; k += 8) {
    const int8_t* b = panel + k * kPanel;  // 8 columns x 8 k
    const int8x16_t b0 = vld1q_s8(b), b1 = vld1q_s8(b + 16), b2 = vld1q_s8(b + 32), b3 = vld1q_s8(b + 48);
    for (int p = 0; p < P; ++p) {
      const int8_t* ar = a + 2 * p * lda + k;
      const int8x16_t ap = vcombine_s8(vld1_s8(ar), vld1_s8(ar + lda));
      acc[p][0] = vmmlaq_s32(acc[p][0], ap, b0);
      acc[p][1] = vmmlaq_s32(acc[p][1], ap, b1);
      acc[p][2] = vmmlaq_s32(acc[p][2], ap, b2);
      acc[p][3] = vmmlaq_s32(acc[p][3], ap, b3);
    }
  }
  for (int p = 0; p < P; ++p) {
    const int r = 2 * p;
    if (r >= rows) break;
    // Row r: the low halves (columns 2v, 2v+1); row r + 1: the high halves.
    const int32x4_t r0 = vcombine_s32(vget_low_s32(acc[p][0]), vget_low_s32(acc[p][1]));
    const int32x4_t r1 = vcombine_s32(vget_low_s32(acc[p][2]), vget_low_s32(acc[p][3]));
    store_row(C + r * ldc, r0, r1, za[r], rowsum[r], zb, colfix, valid_n);
    if (r + 1 >= rows) break;
    const int32x4_t s0 = vcombine_s32(vget_high_s32(acc[p][0]), vget_high_s32(acc[p][1]));
    const int32x4_t s1 = vcombine_s32(vget_high_s32(acc[p][2]), vget_high_s32(acc[p][3]));
    store_row(C + (r + 1) * ldc, s0, s1, za[r + 1], rowsum[r + 1], zb, colfix, valid_n);
  }
}

void i8mm_block(int64_t rows, int64_t Kp, const uint8_t* A, int64_t lda, const int8_t* panel, const int32_t* za,
                const int32_t* rowsum, const int32_t* zb, const int32_t* colfix, int32_t* C, int64_t ldc,
                int64_t valid_n) {
  // A holds a multiple of kRows rows, so a block may compute rows past `rows`.
  if (rows > 4) block<4>(Kp, A, lda, panel, za, rowsum, zb, colfix, C, ldc, valid_n, rows);
  else if (rows > 2) block<2>(Kp, A, lda, panel, za, rowsum, zb, colfix, C, ldc, valid_n, rows);
  else block<1>(Kp, A, lda, panel, za, rowsum, zb, colfix, C, ldc, valid_n, rows);
}

const Igemm8Kernel kI8mm = {"i8mm", true, true, 8, 8, kPanel, kRows, i8mm_block, nullptr, 0, nullptr};

}  // namespace

const Igemm8Kernel* igemm8_i8mm_kernel() { return &kI8mm; }

}  // namespace quant
}  // namespace mrt
