// Arm64 8-bit GEMM micro-kernel on SDOT (FEAT_DotProd), s8 x s8 (layout in
// quant_common.h): up to 8 rows x 8 columns of int32 accumulators. A row's 16 bytes of k
// are loaded at once and each group of 4 is broadcast by lane into `sdot by element`.
// Compiled with -march=armv8.2-a+dotprod for arm64 targets only; nothing here runs
// unless the registry (quant_igemm_neon.cc) found HWCAP_ASIMDDP. Keep it free of
// static initializers.
#include <arm_neon.h>

#include <cstring>

#include "quant_igemm_neon.h"

namespace mrt {
namespace quant {
namespace {

constexpr int64_t kPanel = 8;
constexpr int64_t kRows = 8;

template <int R>
void block(int64_t Kp, const uint8_t* A, int64_t lda, const int8_t* panel, const int32_t* za, const int32_t* rowsum,
           const int32_t* zb, const int32_t* colfix, int32_t* C, int64_t ldc, int64_t valid_n, int64_t rows) {
  int32x4_t acc0[R], acc1[R];
  for (int r = 0; r < R; ++r) acc0[r] = acc1[r] = vdupq_n_s32(0);
  const int8_t* a = reinterpret_cast<const int8_t*>(A);
  for (int64_t k = 0; k < Kp; k += 16) {
    const int8_t* b = panel + k * kPanel;  // 4 groups of 4 k x 8 columns
    const int8x16_t b00 = vld1q_s8(b), b01 = vld1q_s8(b + 16);
    const int8x16_t b10 = vld1q_s8(b + 32), b11 = vld1q_s8(b + 48);
    const int8x16_t b20 = vld1q_s8(b + 64), b21 = vld1q_s8(b + 80);
    const int8x16_t b30 = vld1q_s8(b + 96), b31 = vld1q_s8(b + 112);
    for (int r = 0; r < R; ++r) {
      const int8x16_t ar = vld1q_s8(a + r * lda + k);
      acc0[r] = vdotq_laneq_s32(acc0[r], b00, ar, 0);
      acc1[r] = vdotq_laneq_s32(acc1[r], b01, ar, 0);
      acc0[r] = vdotq_laneq_s32(acc0[r], b10, ar, 1);
      acc1[r] = vdotq_laneq_s32(acc1[r], b11, ar, 1);
      acc0[r] = vdotq_laneq_s32(acc0[r], b20, ar, 2);
      acc1[r] = vdotq_laneq_s32(acc1[r], b21, ar, 2);
      acc0[r] = vdotq_laneq_s32(acc0[r], b30, ar, 3);
      acc1[r] = vdotq_laneq_s32(acc1[r], b31, ar, 3);
    }
  }
  for (int r = 0; r < R && r < rows; ++r)
    store_row(C + r * ldc, acc0[r], acc1[r], za[r], rowsum[r], zb, colfix, valid_n);
}

void dotprod_block(int64_t rows, int64_t Kp, const uint8_t* A, int64_t lda, const int8_t* panel, const int32_t* za,
                   const int32_t* rowsum, const int32_t* zb, const int32_t* colfix, int32_t* C, int64_t ldc,
                   int64_t valid_n) {
  // A holds a multiple of kRows rows, so a block may compute rows past `rows`.
  if (rows > 4) block<8>(Kp, A, lda, panel, za, rowsum, zb, colfix, C, ldc, valid_n, rows);
  else if (rows > 2) block<4>(Kp, A, lda, panel, za, rowsum, zb, colfix, C, ldc, valid_n, rows);
  else if (rows == 2) block<2>(Kp, A, lda, panel, za, rowsum, zb, colfix, C, ldc, valid_n, rows);
  else block<1>(Kp, A, lda, panel, za, rowsum, zb, colfix, C, ldc, valid_n, rows);
}

// Column sums of a panel: sdot against a vector of ones.
void dotprod_colsum(const int8_t* panel, int64_t Kp, int32_t* colsum) {
  const int8x16_t ones = vdupq_n_s8(1);
  int32x4_t s0 = vdupq_n_s32(0), s1 = vdupq_n_s32(0);
  for (int64_t k = 0; k < Kp; k += 4) {
    s0 = vdotq_s32(s0, vld1q_s8(panel + k * kPanel), ones);
    s1 = vdotq_s32(s1, vld1q_s8(panel + k * kPanel + 16), ones);
  }
  vst1q_s32(colsum, s0);
  vst1q_s32(colsum + 4, s1);
}

const Igemm8Kernel kDotprod = {"dotprod", true, true, 4, 16, kPanel, kRows, dotprod_block, dotprod_colsum, 0,
                                nullptr};

}  // namespace

const Igemm8Kernel* igemm8_dotprod_kernel() { return &kDotprod; }

}  // namespace quant
}  // namespace mrt
