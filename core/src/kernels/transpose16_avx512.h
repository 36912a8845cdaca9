// A 16 x 16 float transpose in AVX-512 registers, shared by the kernels that move between the planes of NCHW
// and 16 channels in the vector lanes. Include only from files compiled for AVX-512.
#pragma once
#include <immintrin.h>

namespace mrt {
namespace nn {

// v[i] = row i of a 16 x 16 matrix, transposed in place: pairs of rows interleaved, then quads (within each
// 128-bit lane), then the lanes gathered across the four quads.
inline void transpose16(__m512 (&v)[16]) {
  __m512 t[16], u[16];
  for (int i = 0; i < 8; ++i) {  // t[2i], t[2i+1]: rows 2i and 2i+1 interleaved, columns 4L+0..1 and 4L+2..3
    t[2 * i] = _mm512_unpacklo_ps(v[2 * i], v[2 * i + 1]);
    t[2 * i + 1] = _mm512_unpackhi_ps(v[2 * i], v[2 * i + 1]);
  }
  for (int i = 0; i < 4; ++i) {  // u[4i + k]: column 4L + k of rows 4i..4i+3, in lane L
    u[4 * i + 0] = _mm512_shuffle_ps(t[4 * i], t[4 * i + 2], 0x44);
    u[4 * i + 1] = _mm512_shuffle_ps(t[4 * i], t[4 * i + 2], 0xEE);
    u[4 * i + 2] = _mm512_shuffle_ps(t[4 * i + 1], t[4 * i + 3], 0x44);
    u[4 * i + 3] = _mm512_shuffle_ps(t[4 * i + 1], t[4 * i + 3], 0xEE);
  }
  for (int k = 0; k < 4; ++k) {
    const __m512 e0 = _mm512_shuffle_f32x4(u[k], u[4 + k], 0x88), o0 = _mm512_shuffle_f32x4(u[k], u[4 + k], 0xDD);
    const __m512 e1 = _mm512_shuffle_f32x4(u[8 + k], u[12 + k], 0x88), o1 = _mm512_shuffle_f32x4(u[8 + k], u[12 + k], 0xDD);
    v[k] = _mm512_shuffle_f32x4(e0, e1, 0x88);
    v[k + 8] = _mm512_shuffle_f32x4(e0, e1, 0xDD);
    v[k + 4] = _mm512_shuffle_f32x4(o0, o1, 0x88);
    v[k + 12] = _mm512_shuffle_f32x4(o0, o1, 0xDD);
  }
}

}  // namespace nn
}  // namespace mrt
