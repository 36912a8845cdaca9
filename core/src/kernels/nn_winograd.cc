// Winograd F(2x2, 3x3) transforms for 3x3 stride-1 convolutions (see nn_geometry.h, Winograd23).
//
// An output tile of 2x2 positions needs a 4x4 input patch d; with the 4x4 transformed filter U = G g G^T
// and transformed patch V = B^T d B, the tile is A^T (U .* V) A. Summed over the input channels, the 16
// element-wise products become 16 independent GEMMs (one per element xi of the 4x4 grid):
// M_xi[m, t] = sum_c U_xi[m, c] V_xi[c, t], 4 multiplications per output position instead of 9.
//   B^T = [1 0 -1 0; 0 1 1 0; 0 -1 1 0; 0 1 0 -1]   G = [1 0 0; .5 .5 .5; .5 -.5 .5; 0 0 1]
//   A^T = [1 1 1 0; 0 1 -1 -1]
// The transforms use only additions, subtractions and halvings, so the results differ from a direct
// convolution's by a few roundings per value.
//
// Layouts keep NCHW order: for a range of the tiles t = ty * TW + tx (row-major order), V is [C][16][ldv] and
// the products M are [M][16][ldm], so both transforms walk planes row by row and write or read one block per
// channel, and the GEMM for xi takes V[:, xi, :] as an ordinary B operand (row stride 16 x ldv).
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <vector>

#include "nn_geometry.h"

namespace mrt {
namespace nn {

void winograd23_filters(const float* w, int64_t M, int64_t C, float* u) {
  const int64_t mc = M * C;
  for (int64_t i = 0; i < mc; ++i) {
    const float* g = w + i * 9;
    float t[4][3];  // G g: rows of the 4x3 intermediate
    for (int col = 0; col < 3; ++col) {
      const float g0 = g[col], g1 = g[3 + col], g2 = g[6 + col];
      t[0][col] = g0;
      t[1][col] = 0.5f * (g0 + g1 + g2);
      t[2][col] = 0.5f * (g0 - g1 + g2);
      t[3][col] = g2;
    }
    for (int r = 0; r < 4; ++r) {  // (G g) G^T
      const float a = t[r][0], b = t[r][1], c = t[r][2];
      u[(r * 4 + 0) * mc + i] = a;
      u[(r * 4 + 1) * mc + i] = 0.5f * (a + b + c);
      u[(r * 4 + 2) * mc + i] = 0.5f * (a - b + c);
      u[(r * 4 + 3) * mc + i] = c;
    }
  }
}

namespace {

// The tiles of the range [t0, t1) in tile row ty: tx in [lo, hi).
struct RowSpan {
  int64_t lo, hi;
};
RowSpan row_span(int64_t ty, int64_t TW, int64_t t0, int64_t t1) {
  return {std::max<int64_t>(0, t0 - ty * TW), std::min<int64_t>(TW, t1 - ty * TW)};
}

// dst_even[i] = row[2i - pl], dst_odd[i] = the column after it, for i in [0, n): zero outside the row's W
// columns.
void split_columns(const float* row, int64_t W, int64_t pl, int64_t n, float* __restrict dst_even,
                   float* __restrict dst_odd) {
  // i in [lo, hi): both columns inside the row
  const int64_t lo = std::min(n, (pl + 1) / 2);
  const int64_t hi = std::max(lo, std::min<int64_t>(n, (W + pl) / 2));
  auto edge = [&](int64_t i) {
    const int64_t ie = 2 * i - pl, io = ie + 1;
    dst_even[i] = ie >= 0 && ie < W ? row[ie] : 0.f;
    dst_odd[i] = io >= 0 && io < W ? row[io] : 0.f;
  };
  for (int64_t i = 0; i < lo; ++i) edge(i);
  for (int64_t i = lo; i < hi; ++i) {
    dst_even[i] = row[2 * i - pl];
    dst_odd[i] = row[2 * i - pl + 1];
  }
  for (int64_t i = hi; i < n; ++i) edge(i);
}

// The transforms work on 4 tiles at a time with GCC/Clang vector extensions (an SSE or NEON register; the
// compiler does not vectorize these loops itself: their 16 rows a runtime stride apart defeat its dependence
// analysis).
static_assert(kWinogradPad >= 4, "kWinogradPad covers a group of 4 tiles");
#if defined(__GNUC__) || defined(__clang__)
typedef float Lanes __attribute__((vector_size(16)));
constexpr int64_t kLanes = 4;
#else
typedef float Lanes;
constexpr int64_t kLanes = 1;
#endif
inline Lanes load(const float* p) {
  Lanes v;
  std::memcpy(&v, p, sizeof(v));
  return v;
}
inline void store(float* p, Lanes v) { std::memcpy(p, &v, sizeof(v)); }

// V = B^T d B for the kLanes tiles at tx: d's rows are even[0..3] and odd[0..3] (columns 2tx,
// 2tx + 1, 2tx + 2, 2tx + 3 are even[tx], odd[tx], even[tx + 1], odd[tx + 1]); v[0..15] the 16 output rows.
inline void input_tiles(const float* const* even, const float* const* odd, float* const* v, int64_t tx) {
  Lanes w[4][4];  // B^T d: w[r][k] for row r, column k
  for (int k = 0; k < 4; ++k) {
    const float* const* src = k % 2 ? odd : even;
    const int64_t at = tx + k / 2;
    const Lanes a0 = load(src[0] + at), a1 = load(src[1] + at), a2 = load(src[2] + at),
            a3 = load(src[3] + at);
    w[0][k] = a0 - a2;
    w[1][k] = a1 + a2;
    w[2][k] = a2 - a1;
    w[3][k] = a1 - a3;
  }
  for (int r = 0; r < 4; ++r) {  // ... times B
    store(v[4 * r] + tx, w[r][0] - w[r][2]);
    store(v[4 * r + 1] + tx, w[r][1] + w[r][2]);
    store(v[4 * r + 2] + tx, w[r][2] - w[r][1]);
    store(v[4 * r + 3] + tx, w[r][1] - w[r][3]);
  }
}

// Y = A^T M A for the kLanes tiles at tx from the 16 product rows s[0..15]: y[0] and y[1] the
// even and odd columns of the tile's first output row, y[2] and y[3] of its second.
inline void output_tiles(const float* const* s, float* const* y, int64_t tx) {
  Lanes a[2][4];  // A^T M
  for (int k = 0; k < 4; ++k) {
    const Lanes e0 = load(s[k] + tx), e1 = load(s[4 + k] + tx), e2 = load(s[8 + k] + tx),
            e3 = load(s[12 + k] + tx);
    a[0][k] = e0 + e1 + e2;
    a[1][k] = e1 - e2 - e3;
  }
  for (int r = 0; r < 2; ++r) {  // ... times A
    store(y[2 * r] + tx, a[r][0] + a[r][1] + a[r][2]);
    store(y[2 * r + 1] + tx, a[r][1] - a[r][2] - a[r][3]);
  }
}

}  // namespace

void winograd23_input(const Winograd23& g, const float* x, int64_t c0, int64_t c1, int64_t t0, int64_t t1, float* v,
                      int64_t ldv) {
  const int64_t TW = g.tiles_w(), ty0 = t0 / TW, ty1 = (t1 - 1) / TW;
  // The input rows the tiles read (4 for the first tile row, 2 more for each next one), split into even and
  // odd columns (zero outside the image) so that every step below walks contiguous arrays: tile tx reads the
  // columns 2tx .. 2tx + 3, which are even[tx], odd[tx], even[tx + 1], odd[tx + 1].
  // Whole groups of kLanes tiles: a row's last group reads past its tiles (rows padded to `stride`) and writes
  // into the next row's columns, which that row writes again after it, or into the kWinogradPad columns past
  // the last tile.
  const int64_t half = TW + 1, stride = half + kLanes, rows = 2 * (ty1 - ty0) + 4;
  std::vector<float> buf(static_cast<size_t>(2 * rows * stride));
  float* even = buf.data();
  float* odd = even + rows * stride;
  for (int64_t c = c0; c < c1; ++c) {
    const float* plane = x + c * g.H * g.W;
    for (int64_t r = 0; r < rows; ++r) {
      const int64_t iy = 2 * ty0 - g.pt + r;
      if (iy < 0 || iy >= g.H) {
        std::fill(even + r * stride, even + r * stride + half, 0.f);
        std::fill(odd + r * stride, odd + r * stride + half, 0.f);
      } else {
        split_columns(plane + iy * g.W, g.W, g.pl, half, even + r * stride, odd + r * stride);
      }
    }
    float* vc = v + c * 16 * ldv;
    for (int64_t ty = ty0; ty <= ty1; ++ty) {
      const RowSpan span = row_span(ty, TW, t0, t1);
      const int64_t r0 = 2 * (ty - ty0), at = span.lo;
      const float* ev[4], *od[4];
      for (int r = 0; r < 4; ++r) {
        ev[r] = even + (r0 + r) * stride + at;
        od[r] = odd + (r0 + r) * stride + at;
      }
      float* out[16];
      for (int k = 0; k < 16; ++k) out[k] = vc + k * ldv + (ty * TW + at - t0);
      const int64_t tiles = span.hi - span.lo;
      for (int64_t tx = 0; tx < tiles; tx += kLanes) input_tiles(ev, od, out, tx);
    }
  }
}

void winograd23_output(const Winograd23& g, const float* mt, int64_t ldm, int64_t m0, int64_t m1, int64_t t0,
                       int64_t t1, float* y, const WinogradOutputStage& stage) {
  const int64_t TW = g.tiles_w();
  // a tile row's outputs, even and odd columns of its two rows, in whole groups of kLanes tiles (the last
  // group of a row reads the next row's products or the kWinogradPad columns past the last tile)
  const int64_t stride = TW + kLanes;
  std::vector<float> buf(static_cast<size_t>(4 * stride));
  float* cols[4] = {buf.data(), buf.data() + stride, buf.data() + 2 * stride, buf.data() + 3 * stride};
  for (int64_t m = m0; m < m1; ++m) {
    float* plane = y + m * g.OH * g.OW;
    for (int64_t ty = t0 / TW; ty * TW < t1; ++ty) {
      const RowSpan span = row_span(ty, TW, t0, t1);
      const int64_t tiles = span.hi - span.lo;
      const float* s[16];  // the 16 products of this channel, the rows of M's 4x4 grid
      for (int k = 0; k < 16; ++k) s[k] = mt + (m * 16 + k) * ldm + (ty * TW + span.lo - t0);
      for (int64_t tx = 0; tx < tiles; tx += kLanes) output_tiles(s, cols, tx);
      const int64_t ox = 2 * span.lo, n = std::min(g.OW, 2 * span.hi) - ox;
      for (int64_t r = 0; r < 2 && 2 * ty + r < g.OH; ++r) {
        const int64_t oy = 2 * ty + r;
        float* dst = plane + oy * g.OW + ox;
        const float* ev = cols[2 * r];
        const float* od = cols[2 * r + 1];
        for (int64_t i = 0; i < n / 2; ++i) {
          dst[2 * i] = ev[i];
          dst[2 * i + 1] = od[i];
        }
        if (n % 2) dst[n - 1] = ev[n / 2];
        if (stage.apply) stage.apply(stage.ctx, m, oy * g.OW + ox, n, dst);
      }
    }
  }
}

}  // namespace nn
}  // namespace mrt
