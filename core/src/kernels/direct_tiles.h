// What the two direct convolution kernels share (nn_conv_direct_avx512.cc for float,
// quant_conv_direct_avx512.cc for 8-bit): tiles of R output positions x NZ vectors of 16 output channels,
// positions as the GEMM's rows. Include only from files compiled for AVX-512.
#pragma once
#include <immintrin.h>

#include <array>
#include <cstddef>
#include <cstdint>
#include <utility>

// A tile function: not inlined (inside the item loop GCC copied the accumulators between registers on every
// step), and with GCC its zeroing loops are not turned into memsets of a stack copy (about 40 cycles per
// accumulator array and tile, much of a thin layer's tile).
#if defined(__GNUC__) && !defined(__clang__)
#define MRT_DIRECT_TILE __attribute__((noinline, optimize("no-tree-loop-distribute-patterns")))
#elif defined(__clang__)
#define MRT_DIRECT_TILE __attribute__((noinline))
#else
#define MRT_DIRECT_TILE
#endif

namespace mrt {
namespace direct {

constexpr int64_t kChunk = 64;  // output positions per work item
constexpr int kMaxLanes = 64;   // output channels per block at most (NZ = 4)

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

// The tile functions of every shape, table[NZ - 1][R - 1], from Tile<R, NZ>::fn (a kernel's tile function
// template wrapped in a class template: R past max_rows(NZ) maps to the largest, never called).
template <template <int, int> class Tile, int NZ, size_t... I>
constexpr auto tile_row(std::index_sequence<I...>) {
  return std::array{Tile<(int(I) + 1 < max_rows(NZ) ? int(I) + 1 : max_rows(NZ)), NZ>::fn...};
}
template <template <int, int> class Tile>
constexpr auto tile_table() {
  return std::array{tile_row<Tile, 1>(std::make_index_sequence<8>()), tile_row<Tile, 2>(std::make_index_sequence<8>()),
                    tile_row<Tile, 3>(std::make_index_sequence<8>()), tile_row<Tile, 4>(std::make_index_sequence<8>())};
}

inline __mmask16 first16(int64_t n) { return n >= 16 ? __mmask16(0xFFFF) : static_cast<__mmask16>((1u << n) - 1); }

}  // namespace direct
}  // namespace mrt
