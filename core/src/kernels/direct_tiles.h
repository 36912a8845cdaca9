// What the two direct convolution kernels share (nn_conv_direct_avx512.cc for float,
// quant_conv_direct_avx512.cc for 8-bit): tiles of R output positions x NZ vectors of 16 output channels,
// positions as the GEMM's rows. Include only from files compiled for AVX-512.
#pragma once
#include <immintrin.h>

#include <cstdint>

namespace mrt {
namespace direct {

// Positions per tile at most: the accumulators (R x NZ zmm), the NZ weight vectors and the broadcast stay within
// the 32 vector registers, the R base pointers within the general registers.
constexpr int max_rows(int nz) { return nz == 4 ? 6 : 8; }

// The block width in vectors of 16 channels (1 to 4) that pads the fewest of M output channels, the wider on
// ties (fewer broadcasts per product).
inline int block_vectors(int64_t M) {
  int best = 4;
  int64_t best_pad = (M + 63) / 64 * 64 - M;
  for (int nz = 3; nz >= 1; --nz) {
    const int64_t pad = (M + 16 * nz - 1) / (16 * nz) * (16 * nz) - M;
    if (pad < best_pad) best = nz, best_pad = pad;
  }
  return best;
}

// The n positions of a chunk in tiles of at most rmax, evened out (49 with 8: seven of 7, not six of 8 and one
// of 1, whose lone row would wait on the multiply latency): fn(first, count) per tile.
template <class Fn>
void for_each_tile(int64_t n, int rmax, Fn&& fn) {
  const int64_t tiles = (n + rmax - 1) / rmax;
  for (int64_t t = 0, r0 = 0; t < tiles; ++t) {
    const int64_t count = (n - r0) / (tiles - t);
    fn(r0, count);
    r0 += count;
  }
}

inline __mmask16 first16(int64_t n) { return n >= 16 ? __mmask16(0xFFFF) : static_cast<__mmask16>((1u << n) - 1); }

}  // namespace direct
}  // namespace mrt
