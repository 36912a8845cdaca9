// The in-place vpdpbusd shared by the AVX512-VNNI kernel files (quant_igemm_avx512.cc,
// quant_conv_direct_avx512.cc); include it after their avx512vnni target pragma.
#pragma once
#include <immintrin.h>

namespace mrt {
namespace quant {

// vpdpbusd with the accumulator updated in place. GCC 12 compiles the intrinsic as a three-operand
// instruction and copies every accumulator between registers around it (two extra moves per multiply, and
// spills once 24 accumulators are live); the asm form keeps them in their registers.
inline __m512i dpbusd(__m512i acc, __m512i u8, __m512i s8) {
#if defined(__GNUC__)
  __asm__("vpdpbusd %2, %1, %0" : "+v"(acc) : "v"(u8), "v"(s8));
  return acc;
#else
  return _mm512_dpbusd_epi32(acc, u8, s8);
#endif
}

}  // namespace quant
}  // namespace mrt
