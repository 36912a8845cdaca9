// A vector value kept in a register, for the AVX2 / AVX-512 kernel files (each compiled with its own ISA
// flags; internal linkage for the reason given in transpose8_avx.h).
#pragma once

namespace mrt {
namespace {

// A B vector loaded once for all of a tile's rows. With up to three rows GCC folds the load into each
// multiply-add instead: every step then loads B once per row, and where loads are 256 bits wide each 512-bit
// load takes a cycle (an AVX-512 2-row tile issued as slowly as a 4-row one; 8 MB of weights: 2 rows
// 181 -> 167 us, 3 rows 236 -> 167). The empty asm makes the value a register operand.
template <typename V>
inline V in_register(V v) {
#if defined(__GNUC__) && defined(__AVX512F__)
  __asm__("" : "+v"(v));  // any of the 32 vector registers
#elif defined(__GNUC__)
  __asm__("" : "+x"(v));
#endif
  return v;
}

}  // namespace
}  // namespace mrt
