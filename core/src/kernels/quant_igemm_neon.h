// Arm64-only declarations shared by the quant_igemm_neon*.cc files. Only arm64 sources
// may include this header: generic code reaches these kernels through the kernel
// registry (gemm/backend_registry.h), which quant_igemm_neon.cc fills.
#pragma once
#include "quant_common.h"

namespace mrt {
namespace quant {

// quant_igemm_neon_dotprod.cc (compiled with +dotprod): s8 x s8 on SDOT, 8 x 8 tiles,
// groups of 4 k, K padded to 16.
const Igemm8Kernel* igemm8_dotprod_kernel();
// quant_igemm_neon_i8mm.cc (compiled with +i8mm): s8 x s8 on SMMLA, 8 x 8 tiles, groups
// of 8 k.
const Igemm8Kernel* igemm8_i8mm_kernel();

}  // namespace quant
}  // namespace mrt
