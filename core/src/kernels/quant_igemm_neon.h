// Arm64-only declarations shared by the quant_igemm_neon*.cc files. Only arm64 sources
// may include this header: generic code reaches these kernels through the kernel
// registry (gemm/backend_registry.h), which quant_igemm_neon.cc fills.
#pragma once
#include <arm_neon.h>

#include <cstring>

#include "quant_common.h"

namespace mrt {
namespace quant {

// quant_igemm_neon_dotprod.cc (compiled with +dotprod): s8 x s8 on SDOT, 8 x 8 tiles,
// groups of 4 k, K padded to 16.
const Igemm8Kernel* igemm8_dotprod_kernel();
// quant_igemm_neon_i8mm.cc (compiled with +i8mm): s8 x s8 on SMMLA, 8 x 8 tiles, groups
// of 8 k.
const Igemm8Kernel* igemm8_i8mm_kernel();

// Shared by the 8x8 kernels above. Internal linkage on purpose: each file compiles it
// with its own -march (+dotprod, +i8mm), and an inline function with external linkage
// could be merged into one copy built for a newer ISA than some caller's CPU has.
namespace {
// One C row of an 8-column tile: acc - zb * rowsum + colfix * za, the first valid_n columns.
inline void store_row(int32_t* c, int32x4_t acc0, int32x4_t acc1, int32_t za, int32_t rowsum, const int32_t* zb,
                      const int32_t* colfix, int64_t valid_n) {
  acc0 = vmlaq_n_s32(vmlsq_n_s32(acc0, vld1q_s32(zb), rowsum), vld1q_s32(colfix), za);
  acc1 = vmlaq_n_s32(vmlsq_n_s32(acc1, vld1q_s32(zb + 4), rowsum), vld1q_s32(colfix + 4), za);
  if (valid_n == 8) {
    vst1q_s32(c, acc0);
    vst1q_s32(c + 4, acc1);
    return;
  }
  int32_t tmp[8];
  vst1q_s32(tmp, acc0);
  vst1q_s32(tmp + 4, acc1);
  std::memcpy(c, tmp, static_cast<size_t>(valid_n) * sizeof(int32_t));
}

}  // namespace

}  // namespace quant
}  // namespace mrt
