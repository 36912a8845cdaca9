// Kernel group: nn — Conv, com.microsoft FusedConv and ConvTranspose (pooling lives in
// nn_pool.cc, DeformConv/CausalConvWithState in nn_deform_conv.cc).
//
// Conv runs as im2col + GEMM per (image, group): the column matrix holds, for every
// (input channel, kernel offset) row, the input values seen by each output position.
// 1x1 stride-1 unpadded convolutions skip im2col (the input already is that matrix),
// depthwise convolutions use a direct kernel (AVX2 when the CPU has it). Constant
// filters are packed once per node for the SGEMM micro-kernel. The column buffer is
// bounded: it is built for a band of output positions at a time; with several threads
// every worker builds and multiplies its own cache-sized band (one parallel region per
// Conv), otherwise the bands run in order with a multi-threaded GEMM.
// ConvTranspose is the adjoint: GEMM into a column matrix, then col2im accumulation.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <memory>
#include <mutex>
#include <type_traits>

#include "../gemm/backend_registry.h"
#include "../gemm/sgemm.h"
#include "elementwise_common.h"
#include "elementwise_math.h"
#include "nn_geometry.h"

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

namespace mrt {
namespace {

using nn::AutoPad;
using nn::Window;

constexpr int64_t kColBufferBytes = int64_t{16} << 20;  // bound on one im2col/col2im buffer
constexpr int64_t kTileColBytes = int64_t{512} << 10;    // per-thread column band (about L2 size)

// ---------------------------------------------------------------------------------------
// GEMM for double (a plain loop; double convs are rare). float goes to mrt::sgemm.

void gemm(bool ta, bool tb, int64_t M, int64_t N, int64_t K, const double* A, int64_t lda, const double* B,
          int64_t ldb, double beta, double* C, int64_t ldc, ThreadPool*) {
  for (int64_t i = 0; i < M; ++i) {
    double* c = C + i * ldc;
    if (beta == 0.0)
      std::fill(c, c + N, 0.0);
    else if (beta != 1.0)
      for (int64_t j = 0; j < N; ++j) c[j] *= beta;
    for (int64_t k = 0; k < K; ++k) {
      const double a = ta ? A[k * lda + i] : A[i * lda + k];
      if (!tb) {
        const double* b = B + k * ldb;
        for (int64_t j = 0; j < N; ++j) c[j] += a * b[j];
      } else {
        for (int64_t j = 0; j < N; ++j) c[j] += a * B[j * ldb + k];
      }
    }
  }
}

template <class T>
std::unique_ptr<T[]> make_buffer(int64_t n) {
  return std::unique_ptr<T[]>(new T[static_cast<size_t>(std::max<int64_t>(n, 1))]);
}

// Grow-only per-thread column buffer for im2col: re-allocating it for every Conv costs page
// faults on each call (large blocks come straight from mmap). Bounded by kColBufferBytes.
template <class T>
T* col_scratch(int64_t n) {
  thread_local std::vector<T> buf;
  const size_t want = static_cast<size_t>(std::max<int64_t>(n, 1));
  if (buf.size() < want) buf.resize(want);
  return buf.data();
}

int64_t prod(const std::vector<int64_t>& v, size_t from = 0) {
  int64_t p = 1;
  for (size_t i = from; i < v.size(); ++i) p *= v[i];
  return p;
}

// ---------------------------------------------------------------------------------------
// im2col / col2im.
//
// A window `g` maps sliding positions (g.out) to image positions (g.in):
// image = pos * stride - pad_begin + k * dilation. For Conv the image is the input; for
// ConvTranspose/Col2Im the image is the output. Both work on a band [p0, p1) of flat
// sliding positions; the column matrix has `ld` columns per row. Rows are channel-major,
// then kernel offsets (row-major over the kernel dims).

// Calls fn(oh, ow_begin, ow_end, dst_offset) for the pieces of rows covering [p0, p1).
template <class Fn>
inline void for_each_row_piece(int64_t p0, int64_t p1, int64_t OW, Fn fn) {
  int64_t oh = p0 / OW, ow0 = p0 % OW;  // one division per band, not per piece
  for (int64_t p = p0; p < p1; ++oh, ow0 = 0) {
    const int64_t ow1 = std::min(OW, ow0 + (p1 - p));
    fn(oh, ow0, ow1, p - p0);
    p += ow1 - ow0;
  }
}

template <class T>
void im2col_2d(const T* img, int64_t channels, const Window& g, int64_t p0, int64_t p1, T* col, int64_t ld,
               ThreadPool* pool) {
  const int64_t H = g.in[0], W = g.in[1], KH = g.kernel[0], KW = g.kernel[1];
  const int64_t OW = g.out[1], sh = g.stride[0], sw = g.stride[1];
  const int64_t dh = g.dilation[0], dw = g.dilation[1], ph = g.pad_begin[0], pw = g.pad_begin[1];
  auto body = [&](int64_t c0, int64_t c1) {
    for (int64_t c = c0; c < c1; ++c) {
      const T* x = img + c * H * W;
      for (int64_t kh = 0; kh < KH; ++kh)
        for (int64_t kw = 0; kw < KW; ++kw) {
          T* row = col + ((c * KH + kh) * KW + kw) * ld;
          const int64_t off_w = kw * dw - pw;
          int64_t lo, hi;
          nn::valid_range(OW, sw, off_w, W, lo, hi);
          for_each_row_piece(p0, p1, OW, [&](int64_t oh, int64_t a, int64_t b, int64_t at) {
            T* dst = row + at - a;  // dst[ow] for ow in [a, b)
            const int64_t ih = oh * sh - ph + kh * dh;
            // Pieces are short (one output row): plain loops, no library calls.
            if (ih < 0 || ih >= H) {
              for (int64_t ow = a; ow < b; ++ow) dst[ow] = T(0);
              return;
            }
            const T* src = x + ih * W + off_w;
            const int64_t l = std::min(std::max(lo, a), b), h = std::max(std::min(hi, b), l);
            for (int64_t ow = a; ow < l; ++ow) dst[ow] = T(0);
            if (sw == 1) {
              for (int64_t ow = l; ow < h; ++ow) dst[ow] = src[ow];
            } else if (sw == 2) {
              for (int64_t ow = l; ow < h; ++ow) dst[ow] = src[2 * ow];
            } else {
              for (int64_t ow = l; ow < h; ++ow) dst[ow] = src[ow * sw];
            }
            for (int64_t ow = h; ow < b; ++ow) dst[ow] = T(0);
          });
        }
    }
  };
  if (pool && channels * KH * KW * (p1 - p0) >= (int64_t{1} << 15))
    pool->parallel_for(channels, 1, body);
  else
    body(0, channels);
}

// Generic N-D im2col / col2im over flat positions, by rows of the last output axis: a row's input offset on the
// other axes found once (an odometer over them, one step per row), its taps along the last axis copied (or
// added) as a strided run between the padding. (Bounds on every axis for every element made 3-D convolutions 8x
// slower than onnxruntime.)
template <class T, bool kToCol>
void cols_nd(T* img, int64_t channels, const Window& g, int64_t p0, int64_t p1, T* col, int64_t ld) {
  const size_t nsp = g.nsp, last = nsp - 1;
  const int64_t ksize = prod(g.kernel), isize = prod(g.in);
  const int64_t OW = g.out[last], W = g.in[last], sw = g.stride[last];
  std::vector<int64_t> kidx(nsp), oidx(nsp);
  for (int64_t c = 0; c < channels; ++c) {
    T* x = img + c * isize;
    for (int64_t kk = 0; kk < ksize; ++kk) {
      for (size_t d = nsp, rem = static_cast<size_t>(kk); d-- > 0;) {
        kidx[d] = static_cast<int64_t>(rem % static_cast<size_t>(g.kernel[d]));
        rem /= static_cast<size_t>(g.kernel[d]);
      }
      T* row = col + (c * ksize + kk) * ld;
      const int64_t off_w = kidx[last] * g.dilation[last] - g.pad_begin[last];
      int64_t lo, hi;
      nn::valid_range(OW, sw, off_w, W, lo, hi);
      // the output coordinates of the first row piece on the axes before the last
      for (size_t d = last, rem = static_cast<size_t>(p0 / OW); d-- > 0;) {
        oidx[d] = static_cast<int64_t>(rem % static_cast<size_t>(g.out[d]));
        rem /= static_cast<size_t>(g.out[d]);
      }
      for_each_row_piece(p0, p1, OW, [&](int64_t, int64_t a, int64_t b, int64_t at) {
        T* r = row + at - a;  // r[ow] for ow in [a, b)
        int64_t flat = 0;     // the input row's offset on the axes before the last
        bool inside = true;
        for (size_t d = 0; d < last && inside; ++d) {
          const int64_t i = oidx[d] * g.stride[d] - g.pad_begin[d] + kidx[d] * g.dilation[d];
          inside = i >= 0 && i < g.in[d];
          flat = flat * g.in[d] + i;
        }
        for (size_t d = last; d-- > 0;) {  // the next row
          if (++oidx[d] < g.out[d]) break;
          oidx[d] = 0;
        }
        const int64_t l = inside ? std::min(std::max(lo, a), b) : b, h = inside ? std::max(std::min(hi, b), l) : b;
        // (the taps' column is ow * sw + off_w, inside the row for ow in [l, h))
        T* in_row = x + (inside ? flat * W : 0);
        if constexpr (kToCol) {
          for (int64_t ow = a; ow < l; ++ow) r[ow] = T(0);
          if (sw == 1) {  // (a plain copy the compiler vectorizes)
            const T* src = in_row + off_w;
            for (int64_t ow = l; ow < h; ++ow) r[ow] = src[ow];
          } else {
            for (int64_t ow = l; ow < h; ++ow) r[ow] = in_row[ow * sw + off_w];
          }
          for (int64_t ow = h; ow < b; ++ow) r[ow] = T(0);
        } else if (sw == 1) {
          T* dst = in_row + off_w;
          for (int64_t ow = l; ow < h; ++ow) dst[ow] += r[ow];
        } else {
          for (int64_t ow = l; ow < h; ++ow) in_row[ow * sw + off_w] += r[ow];
        }
      });
    }
  }
}

// col2im: img[c, image position] += col[(c, k), position] over the band [p0, p1).
template <class T>
void col2im_2d(const T* col, int64_t channels, const Window& g, int64_t p0, int64_t p1, int64_t ld, T* img,
               ThreadPool* pool) {
  const int64_t H = g.in[0], W = g.in[1], KH = g.kernel[0], KW = g.kernel[1];
  const int64_t OW = g.out[1], sh = g.stride[0], sw = g.stride[1];
  const int64_t dh = g.dilation[0], dw = g.dilation[1], ph = g.pad_begin[0], pw = g.pad_begin[1];
  // Stride 2 along the width, no dilation: taps kw and kw + 1 write the even and odd columns of one run of the
  // output row, interleaved in vectors instead of two strided passes (ConvTranspose 2x2 stride 2, 64 -> 32 on
  // 56 x 56: the scatter took as long as the GEMM).
  const bool pairs = std::is_same<T, float>::value && sw == 2 && dw == 1 && KW >= 2;
  auto body = [&](int64_t c0, int64_t c1) {
    for (int64_t c = c0; c < c1; ++c) {
      T* y = img + c * H * W;
      for (int64_t kh = 0; kh < KH; ++kh)
        for (int64_t kw = 0; kw < KW; ++kw) {
          const T* row = col + ((c * KH + kh) * KW + kw) * ld;
          if (pairs && kw + 1 < KW) {
            const T* row1 = row + ld;
            const int64_t off0 = kw - pw, off1 = off0 + 1;
            int64_t lo0, hi0, lo1, hi1;
            nn::valid_range(OW, 2, off0, W, lo0, hi0);
            nn::valid_range(OW, 2, off1, W, lo1, hi1);
            for_each_row_piece(p0, p1, OW, [&](int64_t oh, int64_t a, int64_t b, int64_t at) {
              const int64_t ih = oh * sh - ph + kh * dh;
              if (ih < 0 || ih >= H) return;
              const T* s0 = row + at - a;  // s0[ow], s1[ow] for ow in [a, b)
              const T* s1 = row1 + at - a;
              T* dst = y + ih * W + off0;  // dst[2 ow] from tap kw, dst[2 ow + 1] from kw + 1
              // tap kw + 1's column is one further right: its valid outputs start and end no later than kw's
              // (lo1 <= lo0, hi1 <= hi0), so kw + 1 alone on [l1, l0), both on [l0, h1), kw alone on [h1, h0)
              const int64_t l0 = std::max(lo0, a), h0 = std::min(hi0, b), l1 = std::max(lo1, a), h1 = std::min(hi1, b);
              const int64_t h = std::max(l0, h1);
              for (int64_t ow = l1; ow < std::min(l0, h1); ++ow) dst[2 * ow + 1] += s1[ow];
              int64_t ow = l0;
#if defined(__SSE2__)
              if constexpr (std::is_same<T, float>::value) {
                for (; ow + 4 <= h; ow += 4) {
                  const __m128 v0 = _mm_loadu_ps(s0 + ow), v1 = _mm_loadu_ps(s1 + ow);
                  float* d = dst + 2 * ow;
                  _mm_storeu_ps(d, _mm_add_ps(_mm_loadu_ps(d), _mm_unpacklo_ps(v0, v1)));
                  _mm_storeu_ps(d + 4, _mm_add_ps(_mm_loadu_ps(d + 4), _mm_unpackhi_ps(v0, v1)));
                }
              }
#endif
              for (; ow < h; ++ow) {
                dst[2 * ow] += s0[ow];
                dst[2 * ow + 1] += s1[ow];
              }
              for (int64_t o = h; o < h0; ++o) dst[2 * o] += s0[o];
            });
            ++kw;  // (tap kw + 1 done with it)
            continue;
          }
          const int64_t off_w = kw * dw - pw;
          int64_t lo, hi;
          nn::valid_range(OW, sw, off_w, W, lo, hi);
          for_each_row_piece(p0, p1, OW, [&](int64_t oh, int64_t a, int64_t b, int64_t at) {
            const int64_t ih = oh * sh - ph + kh * dh;
            if (ih < 0 || ih >= H) return;
            const T* src = row + at - a;  // src[ow] for ow in [a, b)
            T* dst = y + ih * W + off_w;
            const int64_t l = std::max(lo, a), h = std::min(hi, b);
            if (sw == 1) {
              for (int64_t ow = l; ow < h; ++ow) dst[ow] += src[ow];
            } else {
              for (int64_t ow = l; ow < h; ++ow) dst[ow * sw] += src[ow];
            }
          });
        }
    }
  };
  if (pool && channels * KH * KW * (p1 - p0) >= (int64_t{1} << 15))
    pool->parallel_for(channels, 1, body);
  else
    body(0, channels);
}

// im2col straight into SGEMM B panels (PanelSourceB): the rows k0..k0+kc of the column
// matrix, for the positions p0+j0 .. p0+j0+n, as kc groups of nr values. 2-D windows only.
constexpr int kSgemmPanelPieces = 2 * 64 + 2;  // row pieces of one B panel (nr <= 64 positions)

struct Im2colPanels {
  const float* img;  // the group's input channels
  const Window* g;
  int64_t p0;        // first output position of the band
};

// dst[0, n) = src[0, n): the pieces are short (at most one panel row), where a library
// call costs more than the copy.
inline void copy_floats(float* dst, const float* src, int64_t n) {
  int64_t i = 0;
#if defined(__SSE2__)
  for (; i + 4 <= n; i += 4) _mm_storeu_ps(dst + i, _mm_loadu_ps(src + i));
#endif
  for (; i < n; ++i) dst[i] = src[i];
}

// dst[i] = src[2 * i] for i in [0, n) (stride-2 windows). The last element read is src[2n - 2]:
// a vector step reads src[2i .. 2i + 7], so it runs only while 2i + 7 <= 2n - 2 (the window may
// end at the last element of the input tensor).
inline void copy_even_floats(float* dst, const float* src, int64_t n) {
  int64_t i = 0;
#if defined(__SSE2__)
  for (; i + 5 <= n; i += 4) {
    const __m128 a = _mm_loadu_ps(src + 2 * i), b = _mm_loadu_ps(src + 2 * i + 4);
    _mm_storeu_ps(dst + i, _mm_shuffle_ps(a, b, _MM_SHUFFLE(2, 0, 2, 0)));
  }
#endif
  for (; i < n; ++i) dst[i] = src[2 * i];
}

void im2col_fill_panel(const void* ctx, int64_t k0, int64_t kc, int64_t j0, int64_t n, int nr, float* dst) {
  const Im2colPanels& s = *static_cast<const Im2colPanels*>(ctx);
  const Window& g = *s.g;
  const int64_t H = g.in[0], W = g.in[1], KH = g.kernel[0], KW = g.kernel[1];
  const int64_t OW = g.out[1], sh = g.stride[0], sw = g.stride[1];
  const int64_t dh = g.dilation[0], dw = g.dilation[1], ph = g.pad_begin[0], pw = g.pad_begin[1];
  // The panel's positions as pieces of output rows, and each kernel column's valid output
  // columns: both independent of k, so the divisions happen once per panel.
  struct Piece {
    int64_t oh, a, b, at;
  };
  Piece pieces[kSgemmPanelPieces];
  int np = 0;
  for_each_row_piece(s.p0 + j0, s.p0 + j0 + n, OW, [&](int64_t oh, int64_t a, int64_t b, int64_t at) {
    pieces[np++] = Piece{oh, a, b, at};
  });
  constexpr int64_t kMaxKw = 16;
  int64_t lo_kw[kMaxKw], hi_kw[kMaxKw];
  for (int64_t kw = 0; kw < std::min(KW, kMaxKw); ++kw)
    nn::valid_range(OW, sw, kw * dw - pw, W, lo_kw[kw], hi_kw[kw]);
  int64_t c = k0 / (KH * KW), kh = (k0 % (KH * KW)) / KW, kw = k0 % KW;
  for (int64_t k = 0; k < kc; ++k) {
    float* d = dst + k * nr;
    const float* x = s.img + c * H * W;
    const int64_t off_w = kw * dw - pw;
    int64_t lo, hi;
    if (kw < kMaxKw) {
      lo = lo_kw[kw];
      hi = hi_kw[kw];
    } else {
      nn::valid_range(OW, sw, off_w, W, lo, hi);
    }
    for (int pi = 0; pi < np; ++pi) {
      const int64_t a = pieces[pi].a, b = pieces[pi].b;
      float* out = d + pieces[pi].at - a;  // out[ow] for ow in [a, b)
      const int64_t ih = pieces[pi].oh * sh - ph + kh * dh;
      if (ih < 0 || ih >= H) {
        for (int64_t ow = a; ow < b; ++ow) out[ow] = 0.f;
        continue;
      }
      const float* src = x + ih * W + off_w;
      const int64_t l = std::min(std::max(lo, a), b), h = std::max(std::min(hi, b), l);
      for (int64_t ow = a; ow < l; ++ow) out[ow] = 0.f;
      if (sw == 1) {
        copy_floats(out + l, src + l, h - l);
      } else if (sw == 2) {
        copy_even_floats(out + l, src + 2 * l, h - l);
      } else {
        for (int64_t ow = l; ow < h; ++ow) out[ow] = src[ow * sw];
      }
      for (int64_t ow = h; ow < b; ++ow) out[ow] = 0.f;
    }
    for (int64_t j = n; j < nr; ++j) d[j] = 0.f;
    if (++kw == KW) {
      kw = 0;
      if (++kh == KH) {
        kh = 0;
        ++c;
      }
    }
  }
}

template <class T>
void im2col(const T* img, int64_t channels, const Window& g, int64_t p0, int64_t p1, T* col, int64_t ld,
            ThreadPool* pool) {
  if (g.nsp == 2)
    im2col_2d(img, channels, g, p0, p1, col, ld, pool);
  else
    cols_nd<T, true>(const_cast<T*>(img), channels, g, p0, p1, col, ld);  // reads img only
}

template <class T>
void col2im(const T* col, int64_t channels, const Window& g, int64_t p0, int64_t p1, int64_t ld, T* img,
            ThreadPool* pool) {
  if (g.nsp == 2)
    col2im_2d(col, channels, g, p0, p1, ld, img, pool);
  else
    cols_nd<T, false>(img, channels, g, p0, p1, const_cast<T*>(col), ld);  // reads col only
}

// Sliding positions per band so that one column buffer of `rows_of_col` rows stays under
// `budget` bytes; whole rows of width `row` when at least one fits.
int64_t band_cols(int64_t rows_of_col, int64_t total, int64_t row, size_t elem, int64_t budget) {
  const int64_t per_col = std::max<int64_t>(1, rows_of_col * static_cast<int64_t>(elem));
  int64_t cols = std::max<int64_t>(1, std::min(total, budget / per_col));
  if (cols >= row && cols < total) cols -= cols % row;
  return cols;
}

// ---------------------------------------------------------------------------------------
// Conv

struct ConvPlan {
  Window g;            // spatial geometry (promoted to >= 2 dims)
  int64_t N, C, M, group, Cg, Mg;
  Shape out_shape;
  int threads = 1;  // the session's intra-op threads (the paths' choice depends on it)
};

std::vector<int64_t> kernel_from(const Node& node, const Shape& w_shape, size_t nsp, const char* op) {
  std::vector<int64_t> wk(w_shape.begin() + 2, w_shape.end());
  if (node.has_attr("kernel_shape")) {
    std::vector<int64_t> k = node.attr_ints("kernel_shape");
    MRT_CHECK_ARG(k.size() == nsp, op, ": kernel_shape ", shape_str(k), " has ", k.size(),
                  " values but the input has ", nsp, " spatial dimensions");
    MRT_CHECK_ARG(k == wk, op, ": kernel_shape ", shape_str(k), " does not match the weight's spatial shape ",
                  shape_str(wk));
  }
  return wk;
}

ConvPlan plan_conv(const OpContext& ctx, const Tensor& X, const Tensor& W, const Tensor* B) {
  const Node& node = ctx.node();
  MRT_CHECK_ARG(X.rank() >= 3, "Conv: input X must have rank >= 3 (N, C, spatial...), got ", X.describe());
  MRT_CHECK_ARG(W.rank() == X.rank(), "Conv: weight W ", W.describe(), " must have the same rank as X ",
                X.describe());
  MRT_CHECK_ARG(W.dtype() == X.dtype(), "Conv: X is ", dtype_name(X.dtype()), " but W is ", dtype_name(W.dtype()));
  ConvPlan p;
  p.threads = ctx.threads().size();
  const size_t nsp = X.rank() - 2;
  p.N = X.dim(0);
  p.C = X.dim(1);
  p.M = W.dim(0);
  p.group = node.attr_int("group", 1);
  MRT_CHECK_ARG(p.group >= 1, "Conv: group must be >= 1, got ", p.group);
  MRT_CHECK_ARG(p.C % p.group == 0, "Conv: input channels ", p.C, " are not divisible by group ", p.group);
  MRT_CHECK_ARG(p.M % p.group == 0, "Conv: output channels ", p.M, " (W dim 0) are not divisible by group ",
                p.group);
  p.Cg = p.C / p.group;
  p.Mg = p.M / p.group;
  MRT_CHECK_ARG(W.dim(1) == p.Cg, "Conv: weight W ", W.describe(), " expects ", W.dim(1) * p.group,
                " input channels (W dim 1 x group ", p.group, ") but X ", X.describe(), " has ", p.C);
  if (B) {
    MRT_CHECK_ARG(B->dtype() == X.dtype(), "Conv: bias B is ", dtype_name(B->dtype()), ", expected ",
                  dtype_name(X.dtype()));
    MRT_CHECK_ARG(B->rank() == 1 && B->dim(0) == p.M, "Conv: bias B ", B->describe(), " must have shape [", p.M,
                  "]");
  }
  Window& g = p.g;
  nn::read_window_attrs(node, nsp, "Conv", g);
  g.in.assign(X.shape().begin() + 2, X.shape().end());
  g.kernel = kernel_from(node, W.shape(), nsp, "Conv");
  nn::resolve_forward(g, nn::parse_auto_pad(node), false, "Conv");
  p.out_shape = {p.N, p.M};
  p.out_shape.insert(p.out_shape.end(), g.out.begin(), g.out.end());
  g.promote(2);
  return p;
}

bool cpu_has_avx2() {
#if defined(MOSAICRT_X86_SIMD)
  // Same decision as the SGEMM dispatcher (CPU features, MOSAICRT_SGEMM_KERNEL override).
  static const bool yes = std::strcmp(sgemm_kernel_name(), "portable") != 0;
  return yes;
#else
  return false;
#endif
}

// The AVX-512 convolution kernels (direct, depthwise, pointwise) run where the SGEMM runs its AVX-512 kernel.
bool cpu_has_avx512_kernels() { return sgemm_kernel_is_avx512(); }


// Fused output stage of com.microsoft FusedConv: y = act(y + z), z optional (same shape).
struct Epilogue {
  enum Act { kNone, kRelu, kTanh, kSigmoid, kLeakyRelu, kClip, kHardSigmoid };
  Act act = kNone;
  float alpha = 0.f, beta = 0.f;
  const void* z = nullptr;  // same element type and shape as the output
  // A residual of another shape (the graph optimizer fuses an Add whose operands' shapes it cannot compare,
  // such as a symbolic batch): added with broadcasting after the convolution, then the activation.
  const Tensor* z_broadcast = nullptr;
  bool active() const { return act != kNone || z != nullptr; }
};

// Apply the epilogue to y[0, n) whose offset in the output tensor is `at`.
template <class T>
void apply_epilogue(const Epilogue* e, T* y, int64_t at, int64_t n) {
  if (!e || !e->active()) return;
#if defined(MOSAICRT_X86_SIMD)
  if constexpr (std::is_same<T, float>::value) {
    // the residual, Relu and Clip in one vectorized pass (a bias of -0 adds nothing, -0 included)
    if (cpu_has_avx2() && (e->act == Epilogue::kNone || e->act == Epilogue::kRelu || e->act == Epilogue::kClip)) {
      const float* z = e->z ? static_cast<const float*>(e->z) + at : nullptr;
      if (e->act == Epilogue::kClip) nn::conv_stage_row_clip_avx2(y, z, -0.f, n, e->alpha, e->beta);
      else nn::conv_stage_row_avx2(y, z, -0.f, n, e->act == Epilogue::kRelu);
      return;
    }
  }
#endif
  if (e->z) {
    const T* z = static_cast<const T*>(e->z) + at;
    for (int64_t i = 0; i < n; ++i) y[i] += z[i];
  }
  const T a = static_cast<T>(e->alpha), b = static_cast<T>(e->beta);
  switch (e->act) {
    case Epilogue::kNone:
      break;
    case Epilogue::kRelu:
      for (int64_t i = 0; i < n; ++i) y[i] = y[i] > T(0) ? y[i] : T(0);
      break;
    case Epilogue::kTanh:
    case Epilogue::kSigmoid:
      // float: the Tanh / Sigmoid kernels' own functions (vectorized where they are), so that a fused
      // activation gives the same values as the unfused one
      if constexpr (std::is_same<T, float>::value) {
        const bool tanh = e->act == Epilogue::kTanh;
#if defined(MOSAICRT_X86_SIMD)
        if (fastmath::cpu_has_avx2_fma()) {
          tanh ? fastmath::tanh_avx2(y, y, n) : fastmath::sigmoid_avx2(y, y, n);
          break;
        }
#endif
        for (int64_t i = 0; i < n; ++i) y[i] = tanh ? fastmath::tanh_f(y[i]) : fastmath::sigmoid_f(y[i]);
      } else if (e->act == Epilogue::kTanh) {
        for (int64_t i = 0; i < n; ++i) y[i] = std::tanh(y[i]);
      } else {
        for (int64_t i = 0; i < n; ++i) y[i] = T(1) / (T(1) + std::exp(-y[i]));
      }
      break;
    case Epilogue::kLeakyRelu:
      for (int64_t i = 0; i < n; ++i) y[i] = y[i] >= T(0) ? y[i] : a * y[i];
      break;
    case Epilogue::kClip:
      for (int64_t i = 0; i < n; ++i) y[i] = std::min(std::max(y[i], a), b);
      break;
    case Epilogue::kHardSigmoid:
      for (int64_t i = 0; i < n; ++i) y[i] = std::max(T(0), std::min(T(1), a * y[i] + b));
      break;
  }
}

#if defined(MOSAICRT_X86_SIMD)
// An epilogue's activation for the kernels that apply Relu and Clip in their registers (none for another one).
nn::RegisterAct register_act(const Epilogue* e) {
  nn::RegisterAct a;
  if (e && e->act == Epilogue::kRelu) a.kind = nn::RegisterAct::kRelu;
  if (e && e->act == Epilogue::kClip) a = {nn::RegisterAct::kClip, e->alpha, e->beta};
  return a;
}
// Whether register_act is the whole epilogue (its activation is one of those, with or without a residual).
bool register_act_with_residual(const Epilogue* e) {
  return !e || e->act == Epilogue::kNone || e->act == Epilogue::kRelu || e->act == Epilogue::kClip;
}
// The same without a residual: the kernels whose registers never see the residual.
bool register_act_covers(const Epilogue* e) { return register_act_with_residual(e) && !(e && e->z); }
#endif

// One plane; true when `epi` (its activation, without a residual) was applied too, by a kernel that does it
// before its stores (the caller applies it otherwise).
template <class T>
bool depthwise_plane(const T* xp, const T* wp, T b0, T* yp, const nn::DepthwisePlane& d,
                     const Epilogue* epi = nullptr) {
#if defined(MOSAICRT_X86_SIMD)
  if constexpr (std::is_same<T, float>::value) {
    if (cpu_has_avx512_kernels() && nn::depthwise3x3_avx512_applies(d)) {
      const bool with_act = epi && register_act_covers(epi);
      nn::depthwise3x3_plane_avx512(xp, wp, b0, yp, d, with_act ? register_act(epi) : nn::RegisterAct{});
      return with_act;
    }
    if (cpu_has_avx2()) {
      const bool with_act = epi && register_act_covers(epi);
      nn::depthwise_plane_avx2(xp, wp, b0, yp, d, with_act ? register_act(epi) : nn::RegisterAct{});
      return with_act;
    }
  }
#endif
  std::vector<int64_t> lo(static_cast<size_t>(d.KW)), hi(static_cast<size_t>(d.KW));
  for (int64_t kw = 0; kw < d.KW; ++kw) nn::valid_range(d.OW, d.sw, kw * d.dw - d.pw, d.W, lo[kw], hi[kw]);
  for (int64_t oh = 0; oh < d.OH; ++oh) {
    T* yr = yp + oh * d.OW;
    std::fill(yr, yr + d.OW, b0);
    for (int64_t kh = 0; kh < d.KH; ++kh) {
      const int64_t ih = oh * d.sh - d.ph + kh * d.dh;
      if (ih < 0 || ih >= d.H) continue;
      for (int64_t kw = 0; kw < d.KW; ++kw) {
        const T wv = wp[kh * d.KW + kw];
        const T* xr = xp + ih * d.W + (kw * d.dw - d.pw);
        const int64_t l = lo[kw], h = hi[kw];
        if (d.sw == 1) {
          for (int64_t ow = l; ow < h; ++ow) yr[ow] += wv * xr[ow];
        } else {
          for (int64_t ow = l; ow < h; ++ow) yr[ow] += wv * xr[ow * d.sw];
        }
      }
    }
  }
  return false;
}

// Output widths up to which depthwise convolutions put channels in the vector lanes (conv_depthwise_2d).
constexpr int64_t kDepthwiseBlockedWidth = 32;

// With several threads, depthwise convolutions of single planes (outputs wider than kDepthwiseBlockedWidth) run in
// bands of output rows, band-major: each thread's share of the work items (the pool hands out contiguous shares)
// is then a band of rows of every channel, the rows which the convolutions before and after it, split by
// positions, write and read on that thread. Split by channels, the next 1x1 convolution read half its input from
// the other core's cache: MobileNetV2 at 2 threads, AMD Zen 3, 0.97-0.98 of the time with bands. (The blocks of
// 8 channels on narrower maps, banded the same way, took 1.014-1.022 of the time: per-call costs on small maps.)
// Maps of fewer than 8 rows per thread stay whole. Maps of at most kDepthwiseBlockedWidth columns, which AVX2 CPUs
// give to those blocks of channels, go channel-major on AVX-512 CPUs too (each thread both bands of its share of
// the channels, the share of them the expansion before it wrote there): Intel Xeon (AVX-512), 2 threads, against
// band-major, one process: MobileNetV2 0.973-0.975, light ShuffleNet 0.931, ShuffleNet 0.975; wider maps kept.
inline int64_t depthwise_bands(const nn::DepthwisePlane& d, const ThreadPool& pool) {
  const int64_t threads = static_cast<int64_t>(pool.size());
  return threads > 1 && d.OH >= 8 * threads ? threads : 1;
}

// Band `band` of `bands` (output rows [band * OH / bands, (band + 1) * OH / bands)) of a plane as a plane of its
// own: its input starts in_at values into the input plane (the first row the band reads), its output out_at
// values into the output plane.
inline nn::DepthwisePlane depthwise_band(const nn::DepthwisePlane& d, int64_t band, int64_t bands, int64_t& in_at,
                                         int64_t& out_at) {
  const int64_t r0 = band * d.OH / bands, r1 = (band + 1) * d.OH / bands;
  const int64_t top = std::max<int64_t>(0, r0 * d.sh - d.ph);
  nn::DepthwisePlane db = d;
  db.OH = r1 - r0, db.H = d.H - top, db.ph = top - (r0 * d.sh - d.ph);
  in_at = top * d.W, out_at = r0 * d.OW;
  return db;
}

template <class T>
void conv_depthwise_2d(const ConvPlan& p, const T* x, const T* w, const T* bias, T* y, ThreadPool& pool,
                       const Epilogue* epi) {
  const Window& g = p.g;
  nn::DepthwisePlane d{g.in[0],     g.in[1],     g.kernel[0],   g.kernel[1],   g.out[0],      g.out[1],
                       g.stride[0], g.stride[1], g.dilation[0], g.dilation[1], g.pad_begin[0], g.pad_begin[1]};
  const int64_t in_size = d.H * d.W, out_size = d.OH * d.OW, ksize = d.KH * d.KW;
#if defined(MOSAICRT_X86_SIMD)
  if constexpr (std::is_same<T, float>::value) {
    // Narrow outputs (ShuffleNet's and MobileNet's 28x28 ... 7x7 maps, whose rows leave vectors along them
    // mostly empty): 8 channels at a time in the vector lanes, when each output channel has its own input
    // channel (no channel multiplier).
    // On AVX-512 the 3x3 windows take the in-place plane kernel from 9 columns on (16 lanes along a row of
    // 14: 64 us for 576 channels against the blocked path's 99, onnxruntime's 73); 7x7 maps keep the blocks.
    const bool plane512 = cpu_has_avx512_kernels() && nn::depthwise3x3_avx512_applies(d) && d.OW > 8;
    if (d.OW <= kDepthwiseBlockedWidth && p.M == p.C && p.M >= 8 && cpu_has_avx2() && !plane512) {
      // blocks of 16 channels on AVX-512 (Relu and Clip applied in the registers), then of 8, then single planes
      const int64_t wide = cpu_has_avx512_kernels() ? p.M / 16 : 0, blocks = (p.M - wide * 16) / 8;
      const int64_t rest = p.M - wide * 16 - blocks * 8, items = wide + blocks + rest;
      const bool in_regs = register_act_covers(epi);
      const nn::RegisterAct act = in_regs ? register_act(epi) : nn::RegisterAct{};
      pool.parallel_for(p.N * items, 1, [&](int64_t b, int64_t e) {
        for (int64_t item = b; item < e; ++item) {
          const int64_t n = item / items, k = item % items;
          int64_t m, count;
          if (k < wide) m = k * 16, count = 16;
          else if (k < wide + blocks) m = wide * 16 + (k - wide) * 8, count = 8;
          else m = wide * 16 + blocks * 8 + (k - wide - blocks), count = 1;
          const T* xp = x + (n * p.C + m) * in_size;
          T* yp = y + (n * p.M + m) * out_size;
          const T* bm = bias ? bias + m : nullptr;
          if (count == 16) {
            nn::depthwise_block16_avx512(xp, w + m * ksize, bm, yp, d, act);
            if (in_regs) continue;
          } else if (count == 8) {
            nn::depthwise_block8_avx2(xp, w + m * ksize, bm, yp, d, act);
            if (in_regs) continue;
          } else if (depthwise_plane(xp, w + m * ksize, bm ? *bm : T(0), yp, d, epi)) {
            continue;
          }
          for (int64_t c = 0; c < count; ++c)
            apply_epilogue(epi, yp + c * out_size, (yp - y) + c * out_size, out_size);
        }
      });
      return;
    }
  }
#endif
  const int64_t planes = p.N * p.M, bands = depthwise_bands(d, pool);
  const bool band_major = d.OW > kDepthwiseBlockedWidth;
  pool.parallel_for(planes * bands, 1, [&](int64_t b, int64_t e) {
    for (int64_t item = b; item < e; ++item) {
      const int64_t band = band_major ? item / planes : item % bands;
      const int64_t plane = band_major ? item % planes : item / bands;
      const int64_t n = plane / p.M, m = plane % p.M, c = m / p.Mg;  // Cg == 1: one input channel per group
      int64_t in_at, out_at;
      const nn::DepthwisePlane db = depthwise_band(d, band, bands, in_at, out_at);
      T* yb = y + plane * out_size + out_at;
      if (!depthwise_plane(x + (n * p.C + c) * in_size + in_at, w + m * ksize, bias ? bias[m] : T(0), yb, db, epi))
        apply_epilogue(epi, yb, plane * out_size + out_at, db.OH * d.OW);
    }
  });
}

// Constant Conv/ConvTranspose filters packed once per group for the SGEMM micro-kernel.
struct PackedFilters {
  // float16 filters widened once (the layouts below are made from these); empty for float filters
  std::vector<float> widened;
  std::vector<PackedA> groups;
  // Filters in the direct kernel's layout (conv_direct_avx512), per group; built on first use.
  std::vector<AlignedVector<float>> direct;
  std::once_flag direct_once;
  // Filters in the pointwise kernel's layout (conv_pointwise_avx512), per group; built on first use.
  std::vector<AlignedVector<float>> pointwise;
  std::once_flag pointwise_once;
  // The same layout over all the (channel, tap) steps, for conv_direct_lanes_avx512.
  std::vector<AlignedVector<float>> lanes;
  std::once_flag lanes_once;
  // Filters transposed (K x Mg) and packed as the GEMM's B, for outputs of few positions
  // (see conv_few_positions); built on first use.
  std::vector<PackedB> transposed;
  std::once_flag transposed_once;
  // The 16 transformed filter matrices of the Winograd path (see conv_uses_winograd), packed as the GEMMs'
  // A; built on first use.
  std::vector<PackedA> winograd;
  std::once_flag winograd_once;
};

// Convolutions with few output positions (a 7x7 map: 49) and many output channels waste
// much of the SGEMM's 32-wide column tiles on positions (49 = 32 + 17 of 64). Computed
// transposed instead, positions as GEMM rows (12-high tiles: 49 = 4 x 12 + 1) and channels
// as columns: Y^T[N, Mg] = im2col(X)^T W_g^T, then transposed into place with the bias and
// epilogue. Used where the direct kernel is not (conv_uses_transposed).
constexpr int64_t kFewPositions = 64;
bool conv_few_positions(int64_t positions, int64_t out_channels) {
  return positions <= kFewPositions && out_channels >= 64;
}

// Grow-only per-thread buffers: the transposed path's columns (0) and transposed output (1), the Winograd
// path's transformed input (2) and GEMM products (3), a strided 1x1 convolution's subsampled input (4).
float* conv_scratch(int which, int64_t n) {
  thread_local std::vector<float> buf[5];
  if (buf[which].size() < static_cast<size_t>(n)) buf[which].resize(static_cast<size_t>(n));
  return buf[which].data();
}

// C = A_g x B (+ beta C), with A_g the group's filter matrix, packed when available.
// `tile` (packed filters only) runs on each finished tile of C.
inline void filter_gemm(const PackedFilters* packed, int64_t grp, bool ta, int64_t M, int64_t N, int64_t K,
                        const float* A, int64_t lda, const float* B, int64_t ldb, float beta, float* C, int64_t ldc,
                        ThreadPool* pool, const TileEpilogue* tile = nullptr) {
  if (packed)
    sgemm_packed_a(packed->groups[static_cast<size_t>(grp)], false, N, 1.f, B, ldb, beta, C, ldc, pool, tile);
  else
    sgemm(ta, false, M, N, K, 1.f, A, lda, B, ldb, beta, C, ldc, pool);
}
inline void filter_gemm(const PackedFilters*, int64_t, bool ta, int64_t M, int64_t N, int64_t K, const double* A,
                        int64_t lda, const double* B, int64_t ldb, double beta, double* C, int64_t ldc,
                        ThreadPool* pool, const TileEpilogue* = nullptr) {
  gemm(ta, false, M, N, K, A, lda, B, ldb, beta, C, ldc, pool);
}

// Conv's output stage on one finished GEMM tile (float, packed filters): bias, then the
// FusedConv epilogue (residual, activation), while the tile is in cache.
struct ConvTileStage {
  const float* bias = nullptr;  // the group's biases, or nullptr
  const Epilogue* epi = nullptr;
  int64_t base = 0;             // offset of the GEMM's C in the output tensor
  int64_t ldc = 0;              // its row stride (for conv_tile_prefetch)
};

template <bool kBias, bool kZ, bool kRelu>
void tile_rows(const ConvTileStage& t, int64_t i, int64_t m, int64_t j, int64_t n, float* c, int64_t ldc) {
  for (int64_t r = 0; r < m; ++r) {
    float* __restrict row = c + r * ldc;
    const float b = kBias ? t.bias[i + r] : 0.f;
    const float* __restrict z = kZ ? static_cast<const float*>(t.epi->z) + t.base + (i + r) * ldc + j : nullptr;
    for (int64_t k = 0; k < n; ++k) {
      float v = row[k];
      if (kBias) v += b;
      if (kZ) v += z[k];
      if (kRelu) v = v > 0.f ? v : 0.f;
      row[k] = v;
    }
  }
}

// The residual's rows of a tile, asked for while the GEMM computes the tile before it: the residual was
// written layers ago and its rows are far apart, so the output stage would otherwise wait on each line.
void conv_tile_prefetch(const void* ctx, int64_t i, int64_t m, int64_t j, int64_t n) {
  const ConvTileStage& t = *static_cast<const ConvTileStage*>(ctx);
#if defined(__GNUC__) || defined(__clang__)
  const float* zt = static_cast<const float*>(t.epi->z) + t.base + i * t.ldc + j;
  for (int64_t r = 0; r < m; ++r)
    for (int64_t k = 0; k < n; k += 16) __builtin_prefetch(zt + r * t.ldc + k, 0, 3);
#else
  (void)t, (void)i, (void)m, (void)j, (void)n;
#endif
}

void conv_tile_stage(const void* ctx, int64_t i, int64_t m, int64_t j, int64_t n, float* c, int64_t ldc) {
  const ConvTileStage& t = *static_cast<const ConvTileStage*>(ctx);
  const bool z = t.epi && t.epi->z, relu = t.epi && t.epi->act == Epilogue::kRelu;
  const bool other = t.epi && t.epi->act != Epilogue::kNone && !relu;
#if defined(MOSAICRT_X86_SIMD)
  const bool clip = other && t.epi->act == Epilogue::kClip;
  if (cpu_has_avx2() && (!other || clip)) {
    for (int64_t r = 0; r < m; ++r) {
      float* row = c + r * ldc;
      const float* zr = z ? static_cast<const float*>(t.epi->z) + t.base + (i + r) * ldc + j : nullptr;
      const float b = t.bias ? t.bias[i + r] : 0.f;
      if (clip) nn::conv_stage_row_clip_avx2(row, zr, b, n, t.epi->alpha, t.epi->beta);
      else nn::conv_stage_row_avx2(row, zr, b, n, relu);
    }
    return;
  }
#endif
  if (t.bias) {
    if (z)
      relu ? tile_rows<true, true, true>(t, i, m, j, n, c, ldc) : tile_rows<true, true, false>(t, i, m, j, n, c, ldc);
    else
      relu ? tile_rows<true, false, true>(t, i, m, j, n, c, ldc) : tile_rows<true, false, false>(t, i, m, j, n, c, ldc);
  } else {
    if (z)
      relu ? tile_rows<false, true, true>(t, i, m, j, n, c, ldc) : tile_rows<false, true, false>(t, i, m, j, n, c, ldc);
    else if (relu)
      tile_rows<false, false, true>(t, i, m, j, n, c, ldc);
  }
  if (other) {  // activations other than Relu: their own pass over the (cached) rows
    Epilogue act = *t.epi;
    act.z = nullptr;
    for (int64_t r = 0; r < m; ++r) apply_epilogue(&act, c + r * ldc, 0, n);
  }
}

// The transposed GEMM's output stage (conv_few_positions): a finished tile of Y^T (positions i..i+m, channels
// j..j+n, still in cache) goes to its place in Y, with the bias and the epilogue. Row by row of the tile, so
// that its reads are sequential (its rows are Mg floats apart) and the writes stay in the block of n output
// rows; the parallel GEMM runs it in its tasks.
struct FewPositionsStage {
  float* y;            // the group's output, Mg rows of `positions`
  int64_t positions;
  const float* bias;   // the group's biases, or nullptr
  const Epilogue* epi;
  int64_t base;        // offset of y in the output tensor (the residual's offset)
};

void few_positions_stage(const void* ctx, int64_t i, int64_t m, int64_t j, int64_t n, float* c, int64_t ldc) {
  const FewPositionsStage& s = *static_cast<const FewPositionsStage*>(ctx);
  float* __restrict y = s.y + j * s.positions + i;
#if defined(MOSAICRT_X86_SIMD)
  // transposed in registers, the bias, residual and Relu or Clip on the way
  if (register_act_with_residual(s.epi) && cpu_has_avx2()) {
    const float* z = s.epi && s.epi->z ? static_cast<const float*>(s.epi->z) + s.base + j * s.positions + i : nullptr;
    if (cpu_has_avx512_kernels())
      nn::positions_tile_to_planes_avx512(c, ldc, m, n, s.bias ? s.bias + j : nullptr, z, register_act(s.epi), y,
                                          s.positions);
    else
      nn::positions_tile_to_planes_avx2(c, ldc, m, n, s.bias ? s.bias + j : nullptr, z, register_act(s.epi), y,
                                        s.positions);
    return;
  }
#endif
  for (int64_t r = 0; r < m; ++r) {
    const float* __restrict cr = c + r * ldc;
    for (int64_t ch = 0; ch < n; ++ch) y[ch * s.positions + r] = cr[ch] + (s.bias ? s.bias[j + ch] : 0.f);
  }
  if (s.epi)
    for (int64_t ch = 0; ch < n; ++ch) apply_epilogue(s.epi, y + ch * s.positions, s.base + (j + ch) * s.positions + i, m);
}

// C = A_g x im2col(x)[:, p0:p0+N] (+ beta C) with the columns generated inside the GEMM's
// B panels; false when not available (double, unpacked filters, N-D windows).
inline bool filter_gemm_image(const PackedFilters* packed, int64_t grp, const Window& g, const float* x, int64_t p0,
                              int64_t N, float beta, float* C, int64_t ldc, ThreadPool* pool,
                              const TileEpilogue* tile) {
  if (!packed || g.nsp != 2) return false;
  Im2colPanels src{x, &g, p0};
  PanelSourceB source;
  source.fill = im2col_fill_panel;
  source.ctx = &src;
  sgemm_packed_a_source(packed->groups[static_cast<size_t>(grp)], N, 1.f, source, beta, C, ldc, pool, tile);
  return true;
}
inline bool filter_gemm_image(const PackedFilters*, int64_t, const Window&, const double*, int64_t, int64_t, double,
                              double*, int64_t, ThreadPool*, const TileEpilogue*) {
  return false;
}

bool conv_is_depthwise(const ConvPlan& p) { return p.Cg == 1 && p.group > 1 && p.g.nsp == 2; }

// 3x3 convolutions with stride 1 and no dilation, on maps larger than the few-positions path's and with
// enough channels on both sides for the 16 GEMMs to be efficient, go through Winograd F(2x2, 3x3)
// (nn_winograd.cc): 16 multiplications per 2x2 output tile instead of 36.
// The transforms cost about as much per input and per output channel as the GEMMs do per pair of them, so
// both counts must be large: with 32 output channels (DenseNet's 128 -> 32) they were slower than the
// direct kernel. With 32 or 48 input channels (SqueezeNet's 32 -> 128 on 27x27, 48 -> 192 on 13x13) the
// machines disagree: on an Intel one as fast at 1 thread and slower at 2 (light SqueezeNet at 2 threads 3.44
// on the direct kernel against 3.24 ms); on an AMD Zen 4 one faster at both (alone, 1 thread, 32 -> 128
// 531 -> 419 us; light SqueezeNet, alternating, 7.55-7.73 -> 7.32-7.42 ms at 1 thread, 4.04-4.09 -> 3.87-3.89
// at 2), where the benchmark of record now runs. On an AMD Zen 5 VM the 2-thread runs decide it: alone, 32 ->
// 128 on 27 x 27 Winograd against direct 199 / 218 us at 1 thread, but at 2 threads, in the phases where a
// cross-core round trip takes ~500 ns, 230 against 120 (Winograd's pieces, each streaming its transformed input
// and products through L2, ran slower side by side than one thread alone; onnxruntime 120), and light
// SqueezeNet 0.924 on the direct kernel; so with several threads Winograd needs 64 input channels.
constexpr int64_t kWinogradMinInputs = 32, kWinogradMinOutputs = 64, kWinogradMinInputsThreaded = 64;
// Small maps of odd sides go to the direct kernel where there is one: their 2x2 tiles past the last row and
// column cost a tenth or more of the work for nothing (13 x 13: 196 positions computed for 169). Alone, on an
// AMD Zen 5 core, direct against Winograd, 1 thread / 2 threads: 48 -> 192 on 13 x 13 (SqueezeNet's) 0.92 / 0.90,
// 64 -> 128 0.93, 32 -> 128 0.80, 64 -> 256 1.02 / 0.99 (the one loss), 128 -> 128 on 9 x 9 0.96 / 0.98; on
// 15 x 15 (64 tiles, kept) Winograd won, 64 -> 64 1.05. Even maps keep Winograd (48 -> 192 on 14 x 14: direct
// 1.05, 64 -> 256 1.15).
constexpr int64_t kWinogradOddMapTiles = 64;
bool conv_uses_winograd(const ConvPlan& p) {
  const Window& g = p.g;
  const int64_t OH = g.out[0], OW = g.out[1], tiles = ((OH + 1) / 2) * ((OW + 1) / 2);
  return g.nsp == 2 && p.group == 1 && g.kernel[0] == 3 && g.kernel[1] == 3 && g.stride[0] == 1 &&
         g.stride[1] == 1 && g.dilation[0] == 1 && g.dilation[1] == 1 &&
         p.Cg >= (p.threads > 1 ? kWinogradMinInputsThreaded : kWinogradMinInputs) &&
         p.Mg >= kWinogradMinOutputs && !conv_few_positions(OH * OW, p.Mg) &&
         !(tiles < kWinogradOddMapTiles && 4 * tiles * 10 > 11 * OH * OW && cpu_has_avx512_kernels());
}

#if defined(MOSAICRT_X86_SIMD)
// Convolutions computed by the direct kernel (conv_direct_avx512, or conv_direct_avx2 on a CPU with AVX2 and no
// AVX-512) instead of im2col + GEMM: 2-D, strides up to 4, a window of more than one tap, at least 8 output
// channels per group. Winograd's convolutions keep their own path. On an AMD Zen 3 core (AVX2), alone, 1 thread,
// against im2col + GEMM: DenseNet's 3x3 128 -> 32 on 56 x 56 0.60, on 7 x 7 0.66; SqueezeNet's 16 -> 64 on 55 x 55
// 0.74; the 7x7 stride-2 stem 0.66; 3x3 stride 2 64 -> 128 to 28 x 28 0.90, 128 -> 256 0.96, 256 -> 512 to 7 x 7
// 1.09 (the one loss); 512 -> 512 on 7 x 7 0.92. Whole models, two processes alternating: the benchmark's DenseNet
// 0.70 at 1 thread, 0.69 at 2; light SqueezeNet 0.82 at 2; ResNet-18 0.88 at 2. Maps of few positions
// included: with the layer's weights coming from memory (a model larger than the cache), 3x3 512 -> 512 on 7x7
// took 2.3 ms here (AMD Zen 5) against the transposed GEMM's 3.0 (2 threads: 1.35 against 1.63), as every tile
// streams the filters in one pass with no im2col.
// The windows both direct kernels take (the channel counts aside).
bool conv_direct_geometry(const ConvPlan& p) {
  const Window& g = p.g;
  if (g.nsp != 2 || g.stride[0] > 4 || g.stride[1] > 4 || g.kernel[0] * g.kernel[1] < 2 || conv_is_depthwise(p) ||
      conv_uses_winograd(p))
    return false;
  return cpu_has_avx2();  // conv_direct_avx512, or conv_direct_avx2 on a CPU without AVX-512
}
bool conv_uses_direct(const ConvPlan& p) { return p.Mg >= 8 && conv_direct_geometry(p); }
// Direct convolutions of few (channel, tap) steps on rows of at least 16 positions go through
// conv_direct_lanes_avx512, positions in the vector lanes and each output row written once, instead of
// conv_direct_avx512, whose transpose of every output into its plane costs as much as the few products behind
// it. Alone, 1 thread: 3x3 stride-2 stems (27 steps) 3 -> 64 on 224 x 224 0.48 -> 0.42 ms, 3 -> 32 0.27 -> 0.22;
// 5x5 3 -> 64 0.76 -> 0.73; SqueezeNet's 3x3 16 -> 64 on 55 x 55 (144) 0.36 -> 0.33; 16 -> 64 stride 2 (144)
// 0.43 -> 0.42. Since its output stage was compiled per case (FlatTile) it also takes the 7x7 stride-2 stem
// (147 steps; it had gone the other way before, 1.35 -> 1.44 ms): alone, 1 thread, 3 -> 64 on 224 x 224 1016 ->
// 920 us (2 threads 521 -> 473), 3 -> 32 0.959; 7x7 4 -> 24 on 112 x 112 (196) 0.738; 3x3 20 -> 64 on 56 x 56
// (180) 0.923; a 5x5 8 -> 32 (200) 1.007 stays on the direct kernel. Any number of output
// channels per group (its blocks of 6 rows take 1 to 6), where the direct kernel needs 8: a ResNeXt grouped 3x3
// (32 groups of 4 -> 4 on 56 x 56) 1014 -> 219 us at 1 thread on the GEMM's 12-row tiles (onnxruntime 672).
// On AVX2 (conv_direct_lanes_avx2, tiles of 16 positions) only the stems' few steps: alone, 1 thread, AMD Zen 3,
// against conv_direct_avx2: 3x3 stride 2 3 -> 64 on 224 x 224 0.85 (padded 0.88), 3 -> 32 0.97, 3 -> 24 1.02,
// 3x3 3 -> 16 0.95; with more steps the tiles run at the same rate as the direct kernel's, which computes no
// dropped columns and has no blocks of fewer than 6 channels: 6 -> 32 (54 steps) 1.01-1.03, 7 -> 48 (63) 1.00,
// 16 -> 64 on 55 x 55 (144) 1.02, the 7x7 stem (147) 1.01, 7x7 4 -> 24 (196) 1.06.
constexpr int64_t kLanesMaxSteps = 196, kLanesMaxStepsAvx2 = 32;
bool conv_uses_direct_lanes(const ConvPlan& p) {
  const int64_t steps = p.Cg * p.g.kernel[0] * p.g.kernel[1];
  return conv_direct_geometry(p) && steps <= (cpu_has_avx512_kernels() ? kLanesMaxSteps : kLanesMaxStepsAvx2) &&
         p.g.out[1] >= 16;
}
#else
bool conv_uses_direct(const ConvPlan&) { return false; }
bool conv_uses_direct_lanes(const ConvPlan&) { return false; }
#endif

// The transposed GEMM (conv_few_positions) for the convolutions of few positions the direct kernel does not
// take: pointwise ones, and all of them on CPUs without it.
bool conv_uses_transposed(const ConvPlan& p) {
  return conv_few_positions(prod(p.g.out), p.Mg) && !conv_uses_direct(p);
}

// The Winograd path's output stage on a finished piece of an output row: bias and epilogue, as on a GEMM tile.
void winograd_output_stage(const void* ctx, int64_t m, int64_t at, int64_t n, float* y) {
  conv_tile_stage(ctx, m, 1, at, n, y, static_cast<const ConvTileStage*>(ctx)->ldc);
}

// Floats per piece of tiles of the Winograd path: its transformed input and products (16 x channels x tiles
// each) stay near L2 while they are made and used.
constexpr int64_t kWinogradPieceFloats = int64_t{512} << 10;

void conv_winograd(const ConvPlan& p, const float* x, const float* bias, float* y, ThreadPool& pool,
                   const PackedFilters& packed, const Epilogue* epi) {
  const Window& g = p.g;
  const nn::Winograd23 wg{p.C, g.in[0], g.in[1], p.M, g.pad_begin[0], g.pad_begin[1], g.out[0], g.out[1]};
  const int64_t in_size = wg.H * wg.W, out_size = wg.OH * wg.OW, T = wg.tiles_h() * wg.tiles_w();
  ConvTileStage stage;
  stage.bias = bias;
  stage.epi = epi;
  stage.ldc = out_size;
  nn::WinogradOutputStage out_stage;
  if (bias || (epi && epi->active())) {
    out_stage.apply = winograd_output_stage;
    out_stage.ctx = &stage;
  }
  // pieces of at least 32 tiles (a GEMM column panel), evened out to multiples of 16; several per thread when
  // there are enough tiles, then each piece runs its three steps alone on one thread. With fewer, one piece per
  // thread when each gets a GEMM panel or more, the tiles split evenly; otherwise each step is split between the
  // threads. Split steps exchange the transformed input and the products between the cores (the input
  // transform goes by channels, the GEMMs by matrix, the output transform by channels again), which costs little
  // when the two cores share a cache and much when they do not: on this 2-vCPU VM, in the phases where a
  // cross-core round trip takes ~500 ns instead of ~110, 3x3 128 -> 128 on 28 x 28 (196 tiles) at 2 threads took
  // 473 us split against 406 by pieces, where the cores sharing a cache take 313 against 329.
  const int64_t most = std::max<int64_t>(32, kWinogradPieceFloats / (16 * (p.C + p.M)) / 32 * 32);
  const int64_t threads = pool.size();
  int64_t pieces = (T + most - 1) / most;
  int64_t piece = ((T + pieces - 1) / pieces + 15) / 16 * 16;  // evened out
  bool by_piece = threads == 1 || pieces >= 2 * threads;
  if (!by_piece && T >= 32 * threads) {
    pieces = threads;
    piece = (T + threads - 1) / threads;
    by_piece = true;
  }
  auto run_piece = [&](int64_t n, int64_t t0, ThreadPool* inner) {
    const int64_t t1 = std::min(T, t0 + piece), nt = t1 - t0, ld = nt + nn::kWinogradPad;
    float* v = conv_scratch(2, 16 * p.C * ld);
    float* mt = conv_scratch(3, 16 * p.M * ld);
    const float* xn = x + n * p.C * in_size;
    float* yn = y + n * p.M * out_size;
    ConvTileStage image_stage = stage;
    image_stage.base = yn - y;
    nn::WinogradOutputStage image_out = out_stage;
    if (image_out.apply) image_out.ctx = &image_stage;
    auto steps = [&](int64_t count, int64_t grain, const std::function<void(int64_t, int64_t)>& fn) {
      if (inner) inner->parallel_for(count, grain, fn);
      else fn(0, count);
    };
    steps(p.C, 8, [&](int64_t b, int64_t e) { nn::winograd23_input(wg, xn, b, e, t0, t1, v, ld); });
    steps(16, 1, [&](int64_t b, int64_t e) {
      for (int64_t xi = b; xi < e; ++xi)
        sgemm_packed_a(packed.winograd[static_cast<size_t>(xi)], false, nt, 1.f, v + xi * ld, 16 * ld, 0.f,
                       mt + xi * ld, 16 * ld, nullptr);
    });
    steps(p.M, 8, [&](int64_t b, int64_t e) { nn::winograd23_output(wg, mt, ld, b, e, t0, t1, yn, image_out); });
  };
  if (by_piece) {
    pool.parallel_for(p.N * pieces, 1, [&](int64_t b, int64_t e) {
      for (int64_t item = b; item < e; ++item) run_piece(item / pieces, item % pieces * piece, nullptr);
    });
  } else {
    for (int64_t item = 0; item < p.N * pieces; ++item) run_piece(item / pieces, item % pieces * piece, &pool);
  }
}

// ai.mosaicrt FusedConv's input stage: the convolution reads relu(x * scale[c] + shift[c]) (float only).
struct InputStage {
  const float* scale;  // per input channel
  const float* shift;
};

// A pointwise convolution's B panels with the input stage applied on the way in: rows k of x (input
// channels, row stride ldx), the stage's scale and shift from the group's first channel on.
struct InputStagePanels {
  const float* x;
  int64_t ldx;
  InputStage stage;
};

// relu(x * scale[k] + shift[k]) on `rows` rows of n values into rows of ld (zeros past n)
void input_stage_rows(const float* x, int64_t ldx, const float* scale, const float* shift, int64_t rows, int64_t n,
                      int64_t ld, float* dst) {
#if defined(MOSAICRT_X86_SIMD)
  if (cpu_has_avx2()) {
    nn::input_stage_rows_avx2(x, ldx, scale, shift, rows, n, ld, dst);
    return;
  }
#endif
  for (int64_t k = 0; k < rows; ++k) {
    const float* __restrict src = x + k * ldx;
    float* __restrict d = dst + k * ld;
    const float a = scale[k], b = shift[k];
    for (int64_t j = 0; j < n; ++j) {
      const float v = src[j] * a + b;
      d[j] = v > 0.f ? v : 0.f;
    }
    for (int64_t j = n; j < ld; ++j) d[j] = 0.f;
  }
}

void input_stage_fill_panel(const void* ctx, int64_t k0, int64_t kc, int64_t j0, int64_t n, int nr, float* dst) {
  const InputStagePanels& s = *static_cast<const InputStagePanels*>(ctx);
  input_stage_rows(s.x + k0 * s.ldx + j0, s.ldx, s.stage.scale + k0, s.stage.shift + k0, kc, n, nr, dst);
}

// The input with the stage applied, for the convolutions that do not pack their input as it is (a per-thread
// buffer, released after use when large).
const float* staged_input(const InputStage& in, const float* x, int64_t N, int64_t C, int64_t plane, ThreadPool& pool,
                          std::vector<float>& buf) {
  buf.resize(static_cast<size_t>(N * C * plane));
  float* t = buf.data();
  pool.parallel_for(N * C, std::max<int64_t>(1, 16384 / std::max<int64_t>(1, plane)), [&](int64_t b, int64_t e) {
    for (int64_t nc = b; nc < e; ++nc)
      input_stage_rows(x + nc * plane, plane, in.scale + nc % C, in.shift + nc % C, 1, plane, plane, t + nc * plane);
  });
  return t;
}

bool is_pointwise(const Window& g) {
  for (size_t d = 0; d < g.nsp; ++d)
    if (g.kernel[d] != 1 || g.stride[d] != 1 || g.pad_begin[d] != 0 || g.pad_end[d] != 0) return false;
  return true;
}

// A 2-D 1x1 convolution with strides and no padding reads one input position per output position: it is the
// pointwise convolution of the input subsampled at the strides (as_pointwise: that plan). conv_run computes it
// that way where the pointwise kernel takes it (conv_uses_pointwise: the same test), rather than by the GEMM over
// columns gathered at the strides (on 14 x 14 outputs, 196 = 6 x 32 + 4 columns, its panels waste a tenth). Alone,
// two processes alternating, AMD Zen 5: ResNet-50's 512 -> 1024 from 28 x 28 0.901 at 1 thread, 0.912 at 2;
// 256 -> 512 from 56 x 56 0.910 / 0.942. In light ResNet-50 at 1 thread the two layers went from 970 / 876 us
// (onnxruntime 812 / 787) to 881 / 860 (828 / 805); the whole model 1.001 / 0.995, inside its noise.
bool is_strided_pointwise(const Window& g) {
  return g.nsp == 2 && !is_pointwise(g) && g.kernel[0] == 1 && g.kernel[1] == 1 && g.pad_begin[0] == 0 &&
         g.pad_begin[1] == 0 && g.pad_end[0] == 0 && g.pad_end[1] == 0;
}
ConvPlan as_pointwise(const ConvPlan& p) {
  ConvPlan q = p;
  q.g.in = q.g.out;
  q.g.stride = {1, 1};
  q.g.dilation = {1, 1};
  return q;
}

// Pointwise convolutions computed by the pointwise kernel (conv_pointwise_avx512) instead of the GEMM: those on
// maps of at least one tile of positions, whose input rows for one span of positions (K x span floats, a span of
// at least one tile) stay in L2 while every output channel is made from them: at most 2048 input channels, or any
// number on maps of at most 256 positions (one span then). Against the GEMM the input is not packed into panels.
// On an AMD Zen 5 core, 1 thread, alone: 256 -> 64 on 56 x 56 463 -> 389 us (2 threads 248 -> 218), 512 -> 128
// on 28 x 28 424 -> 389 (252 -> 217), 1024 -> 512 on 28 x 28 0.94, 2048 -> 256 on 28 x 28 0.97, 4096 -> 128 on
// 20 x 20 1.09 (a span's 1 MB no longer in L2: the GEMM); SqueezeNet's 512 -> 1000 on 13 x 13 770 -> 687 us
// (onnxruntime 699). Light ResNet-50, 1 thread: 0.979.
// On AVX2 (conv_pointwise_avx2, AMD Zen 3, 1 thread, alone, against the GEMM): SqueezeNet's 64 -> 16 on 55 x 55
// 148 -> 101 us, 128 -> 16 219 -> 169; MobileNetV2's 24 -> 144 on 56 x 56 0.93; 512 -> 1000 on 13 x 13 0.95, 1024
// -> 256 on 14 x 14 0.97, 128 -> 512 on 28 x 28 0.97; 144 -> 24, 192 -> 32 on 28 x 28, 576 -> 96 on 14 x 14 1.00.
// On maps larger than 32 x 32 with many channels on both sides the GEMM stays: ResNet-50's 64 -> 256 and 256 -> 64
// on 56 x 56 1.03-1.04 (each tile of 16 positions reads its K input rows from L2 for every block of channels, where
// the GEMM's packed panel stays in L1).
constexpr int64_t kPointwiseMaxPositionsAvx2 = 1024, kPointwiseMaxWorkAvx2 = 64 * 256;
bool conv_uses_pointwise(const ConvPlan& p) {
#if defined(MOSAICRT_X86_SIMD)
  // (a strided 1x1 convolution's subsampled plan differs only in its input map and strides)
  const int64_t positions = prod(p.g.out);
  if (!cpu_has_avx512_kernels() && positions > kPointwiseMaxPositionsAvx2 && p.Cg * p.Mg >= kPointwiseMaxWorkAvx2)
    return false;
  return (is_pointwise(p.g) || is_strided_pointwise(p.g)) && (p.Cg <= 2048 || positions <= 256) && positions >= 64 &&
         cpu_has_avx2();
#else
  (void)p;
  return false;
#endif
}

// Whether conv_run computes this float convolution with the pointwise kernel (its filters packed for it, an output
// stage the kernel applies in its registers; an input stage it applies to each span of positions it reads).
bool conv_runs_pointwise(const ConvPlan& p, const PackedFilters* packed, const Epilogue* epi) {
#if defined(MOSAICRT_X86_SIMD)
  return packed && !packed->pointwise.empty() && register_act_with_residual(epi) && conv_uses_pointwise(p);
#else
  (void)p, (void)packed, (void)epi;
  return false;
#endif
}

// The (image, group) tasks of a convolution kernel: run_task(t, pool) splits task t over the pool's threads, or
// runs it on the calling thread with a null pool. Tasks that share out evenly run side by side, each on one
// thread; otherwise one after the other, each split inside.
template <class RunTask>
void run_conv_tasks(ThreadPool& pool, int64_t tasks, RunTask&& run_task) {
  const int64_t threads = pool.size();
  if (threads > 1 && tasks > 1 && (tasks % threads == 0 || tasks >= 4 * threads)) {
    pool.parallel_tasks(tasks, [&](int64_t b, int64_t e) {
      for (int64_t t = b; t < e; ++t) run_task(t, nullptr);
    });
  } else {
    for (int64_t t = 0; t < tasks; ++t) run_task(t, &pool);
  }
}

template <class T>
void conv_run(const ConvPlan& p, const T* x, const T* w, const T* bias, T* y, ThreadPool& pool,
              const PackedFilters* packed, const Epilogue* epi = nullptr, const InputStage* in = nullptr) {
  const Window& g = p.g;
  const int64_t in_size = prod(g.in), out_size = prod(g.out), ksize = prod(g.kernel);
  if (out_size == 0 || p.N == 0 || p.M == 0) return;
  const bool pointwise = is_pointwise(g);
  if constexpr (std::is_same<T, float>::value) {
    // the input stage: applied by the pointwise kernel to each span it reads or while packing a pointwise
    // convolution's input (below), else once up front
    if (in && !(pointwise && packed && !conv_few_positions(out_size, p.Mg))) {
      static thread_local std::vector<float> buf;
      const float* staged = staged_input(*in, x, p.N, p.C, in_size, pool, buf);
      conv_run<T>(p, staged, w, bias, y, pool, packed, epi);
      if (buf.capacity() * sizeof(float) > (size_t{64} << 20)) std::vector<float>().swap(buf);
      return;
    }
  }
  if (conv_is_depthwise(p)) {
    conv_depthwise_2d(p, x, w, bias, y, pool, epi);
    return;
  }
  if constexpr (std::is_same<T, float>::value) {
    if (packed && !packed->winograd.empty() && conv_uses_winograd(p)) {
      conv_winograd(p, x, bias, y, pool, *packed, epi);
      return;
    }
  }
#if defined(MOSAICRT_X86_SIMD)
  if constexpr (std::is_same<T, float>::value) {
    if (is_strided_pointwise(g) && conv_runs_pointwise(p, packed, epi)) {
      // the input subsampled at the strides, then the pointwise kernel
      const int64_t planes = p.N * p.C, OH = g.out[0], OW = g.out[1], sh = g.stride[0], sw = g.stride[1];
      float* xs = conv_scratch(4, planes * out_size);
      pool.parallel_for(planes, std::max<int64_t>(1, 4096 / out_size), [&](int64_t b, int64_t e) {
        for (int64_t c = b; c < e; ++c)
          for (int64_t oy = 0; oy < OH; ++oy) {
            const float* src = x + c * in_size + oy * sh * g.in[1];
            float* dst = xs + c * out_size + oy * OW;
            for (int64_t ox = 0; ox < OW; ++ox) dst[ox] = src[ox * sw];
          }
      });
      conv_run<T>(as_pointwise(p), xs, w, bias, y, pool, packed, epi, in);
      return;
    }
    if (conv_runs_pointwise(p, packed, epi)) {
      auto run_task = [&](int64_t t, ThreadPool* inner) {
        const int64_t n = t / p.group, grp = t % p.group;
        const int64_t at = (n * p.M + grp * p.Mg) * out_size;
        nn::PointwiseConv pc{p.Cg, p.Mg, out_size, nullptr, nullptr, nn::RegisterAct{}};
        pc.bias = bias ? bias + grp * p.Mg : nullptr;
        pc.z = epi && epi->z ? static_cast<const float*>(epi->z) + at : nullptr;
        pc.act = register_act(epi);
        if (in) {
          pc.in_scale = in->scale + grp * p.Cg;
          pc.in_shift = in->shift + grp * p.Cg;
        }
        const float* xg = x + (n * p.C + grp * p.Cg) * in_size;
        const float* wg = packed->pointwise[static_cast<size_t>(grp)].data();
        if (cpu_has_avx512_kernels()) nn::conv_pointwise_avx512(pc, xg, wg, y + at, inner);
        else nn::conv_pointwise_avx2(pc, xg, wg, y + at, inner);
      };
      // (light ShuffleNet's 1x1 convolutions of 4 groups, split inside each group one after the other, took 1.2x
      // as long at 2 threads on an AMD Zen 3 as the GEMM's grouped path)
      run_conv_tasks(pool, p.N * p.group, run_task);
      return;
    }
    const bool lanes = conv_uses_direct_lanes(p);
    if (packed && !(lanes ? packed->lanes : packed->direct).empty() && (lanes || conv_uses_direct(p))) {
      nn::DirectConv dc{p.Cg,          g.in[0],       g.in[1],       p.Mg,          g.kernel[0],
                        g.kernel[1],   g.stride[0],   g.stride[1],   g.dilation[0], g.dilation[1],
                        g.pad_begin[0], g.pad_begin[1], g.out[0],     g.out[1],      nullptr,
                        nn::RegisterAct{}};
      // bias and a lone Relu or Clip are applied by the kernel in its registers; a residual or another
      // activation goes through the output stage on each finished piece
      const bool in_kernel = register_act_covers(epi);
      auto run_task = [&](int64_t t, ThreadPool* inner) {
        const int64_t n = t / p.group, grp = t % p.group;
        float* yg = y + (n * p.M + grp * p.Mg) * out_size;
        ConvTileStage stage;
        stage.bias = bias ? bias + grp * p.Mg : nullptr;
        stage.epi = epi;
        stage.base = yg - y;
        TileEpilogue tile;
        nn::DirectConv tg = dc;
        if (in_kernel) {
          tg.bias = stage.bias;
          tg.act = register_act(epi);
        } else if (bias || epi) {
          tile.apply = conv_tile_stage;
          tile.ctx = &stage;
        }
        const float* xg = x + (n * p.C + grp * p.Cg) * in_size;
        if (lanes && cpu_has_avx512_kernels())
          nn::conv_direct_lanes_avx512(tg, xg, packed->lanes[static_cast<size_t>(grp)].data(), yg, tile, inner);
        else if (lanes)
          nn::conv_direct_lanes_avx2(tg, xg, packed->lanes[static_cast<size_t>(grp)].data(), yg, tile, inner);
        else if (cpu_has_avx512_kernels())
          nn::conv_direct_avx512(tg, xg, packed->direct[static_cast<size_t>(grp)].data(), yg, tile, inner);
        else
          nn::conv_direct_avx2(tg, xg, packed->direct[static_cast<size_t>(grp)].data(), yg, tile, inner);
      };
      // (a grouped layer on a 7x7 map is a single work item per group)
      run_conv_tasks(pool, p.N * p.group, run_task);
      return;
    }
  }
#endif
  const int64_t K = p.Cg * ksize;  // GEMM depth
  const int64_t tasks = p.N * p.group;
  const int64_t threads = pool.size();
  if (K == 0) {  // no input channels: the output is the bias
    for (int64_t t = 0; t < tasks; ++t)
      for (int64_t m = 0; m < p.Mg; ++m) {
        T* ym = y + ((t / p.group) * p.M + (t % p.group) * p.Mg + m) * out_size;
        std::fill(ym, ym + out_size, bias ? bias[(t % p.group) * p.Mg + m] : T(0));
        apply_epilogue(epi, ym, ym - y, out_size);
      }
    return;
  }
  // Work items are (image/group task, band of output positions). With several threads
  // and enough items, each worker builds the columns of its own band (kept cache-sized)
  // and runs a single-threaded GEMM on it: one parallel region per Conv. Otherwise the
  // bands run in order and the GEMM itself is parallel.
  const int64_t row = g.out[g.nsp - 1];
  // Packed float filters on 2-D windows: im2col happens inside the GEMM's B panels, there is
  // no column buffer to bound.
  const bool direct = std::is_same<T, float>::value && packed && g.nsp == 2;
  int64_t band = pointwise || direct ? out_size : band_cols(K, out_size, row, sizeof(T), kColBufferBytes);
  bool tiled = false;
  if (threads > 1 && direct) {
    // No column buffer to keep small: whole tasks per worker when they share out evenly,
    // otherwise the GEMM splits each task's output by cost.
    tiled = tasks % threads == 0 || tasks >= 4 * threads;
  } else if (threads > 1) {
    const int64_t want_bands = (2 * threads + tasks - 1) / tasks;  // bands per task for 2 items per thread
    int64_t tband = pointwise ? out_size : band_cols(K, out_size, row, sizeof(T), kTileColBytes);
    tband = std::min(tband, (out_size + want_bands - 1) / want_bands);
    const int64_t items = tasks * ((out_size + tband - 1) / tband);
    // Bands must stay wide enough for an efficient GEMM.
    if (items >= threads && (tband >= 48 || tasks >= 2 * threads)) {
      tiled = true;
      band = tband;
    }
  }
  const int64_t bands = (out_size + band - 1) / band;

  auto run_item = [&](int64_t item, T* col, ThreadPool* gemm_pool) {
    const int64_t t = item / bands, bi = item % bands;
    const int64_t n = t / p.group, grp = t % p.group;
    const int64_t p0 = bi * band, p1 = std::min(out_size, p0 + band), cols = p1 - p0;
    const T* xg = x + (n * p.C + grp * p.Cg) * in_size;
    const T* wg = w + grp * p.Mg * K;
    T* yg = y + (n * p.M + grp * p.Mg) * out_size + p0;
    T beta = T(0);
    if constexpr (std::is_same<T, float>::value) {
      if (packed && !packed->transposed.empty() && cols == out_size && conv_few_positions(out_size, p.Mg)) {
        const float* a = xg;  // A[position, k] = columns^T
        int64_t lda = in_size;
        if (!pointwise) {
          float* cols_t = conv_scratch(0, K * out_size);
          im2col(xg, p.Cg, g, 0, out_size, cols_t, out_size, gemm_pool);
          a = cols_t;
          lda = out_size;
        }
        float* yt = conv_scratch(1, out_size * p.Mg);  // [position, channel]
        FewPositionsStage stage{yg, out_size, bias ? bias + grp * p.Mg : nullptr, epi, yg - y};
        TileEpilogue tile;
        tile.apply = few_positions_stage;
        tile.ctx = &stage;
        sgemm_packed_b(true, out_size, 1.f, a, lda, packed->transposed[static_cast<size_t>(grp)], 0.f, yt, p.Mg,
                       gemm_pool, &tile);
        return;
      }
    }
    // Packed float filters: bias and epilogue run on each GEMM tile as it is finished.
    TileEpilogue tile;
    ConvTileStage stage;
    if constexpr (std::is_same<T, float>::value) {
      if (packed) {
        stage.bias = bias ? bias + grp * p.Mg : nullptr;
        stage.epi = epi;
        stage.base = yg - y;
        stage.ldc = out_size;
        tile.apply = conv_tile_stage;
        tile.ctx = &stage;
        if (epi && epi->z) tile.prefetch = conv_tile_prefetch;
      }
    }
    const TileEpilogue* tile_stage = tile.apply ? &tile : nullptr;
    if (bias && !tile_stage) {
      for (int64_t m = 0; m < p.Mg; ++m) std::fill(yg + m * out_size, yg + m * out_size + cols, bias[grp * p.Mg + m]);
      beta = T(1);
    }
    if (pointwise && in) {
      if constexpr (std::is_same<T, float>::value) {
        const InputStagePanels src{xg + p0, in_size, {in->scale + grp * p.Cg, in->shift + grp * p.Cg}};
        PanelSourceB source;
        source.fill = input_stage_fill_panel;
        source.ctx = &src;
        sgemm_packed_a_source(packed->groups[static_cast<size_t>(grp)], cols, 1.f, source, beta, yg, out_size,
                              gemm_pool, tile_stage);
      }
    } else if (pointwise) {
      filter_gemm(packed, grp, false, p.Mg, cols, K, wg, K, xg + p0, in_size, beta, yg, out_size, gemm_pool,
                  tile_stage);
    } else if (direct && filter_gemm_image(packed, grp, g, xg, p0, cols, beta, yg, out_size, gemm_pool, tile_stage)) {
      // columns generated in the GEMM's panels
    } else {
      im2col(xg, p.Cg, g, p0, p1, col, cols, gemm_pool);
      filter_gemm(packed, grp, false, p.Mg, cols, K, wg, K, col, cols, beta, yg, out_size, gemm_pool, tile_stage);
    }
    if (epi && !tile_stage)
      for (int64_t m = 0; m < p.Mg; ++m) apply_epilogue(epi, yg + m * out_size, (yg - y) + m * out_size, cols);
  };

  const int64_t col_elems = pointwise || direct ? 0 : K * band;
  if (tiled) {
    pool.parallel_for(tasks * bands, 1, [&](int64_t b, int64_t e) {
      T* col = col_scratch<T>(col_elems);
      for (int64_t item = b; item < e; ++item) run_item(item, col, nullptr);
    });
  } else {
    T* col = col_scratch<T>(col_elems);
    for (int64_t item = 0; item < tasks * bands; ++item) run_item(item, col, &pool);
  }
}

// The convolution into output 0 (or into `into`, sized here).
void conv_compute(OpContext& ctx, const Epilogue* epi, const InputStage* in = nullptr, Tensor* into = nullptr) {
  const Tensor& X = ctx.input(0);
  const Tensor& W = ctx.input(1);
  const Tensor* B = ctx.optional_input(2);
  ConvPlan p = plan_conv(ctx, X, W, B);
  if (into) *into = Tensor(X.dtype(), p.out_shape, ctx.allocator());
  std::shared_ptr<PackedFilters> packed;
  // float filters, or constant float16 ones widened once (their convolution runs in float32 too)
  const bool half = X.dtype() == DType::kFloat16 && W.dtype() == DType::kFloat16;
  const float* wdata = nullptr;
  if ((X.dtype() == DType::kFloat || half) && ctx.input_is_constant(1) && !conv_is_depthwise(p) && X.numel() > 0) {
    packed = ctx.node_cache<PackedFilters>([&] {
      auto pf = std::make_shared<PackedFilters>();
      if (half) pf->widened = nn::widen(W);
      const float* w = half ? pf->widened.data() : W.data<float>();
      const int64_t K = W.numel() / std::max<int64_t>(p.M, 1);  // Cg * kernel size
      for (int64_t grp = 0; grp < p.group; ++grp)
        pf->groups.push_back(sgemm_pack_a(false, p.Mg, K, w + grp * p.Mg * K, K));
      return pf;
    });
    wdata = half ? packed->widened.data() : W.data<float>();
    if (conv_uses_winograd(p)) {
      std::call_once(packed->winograd_once, [&] {
        std::vector<float> u(static_cast<size_t>(16 * p.M * p.C));
        nn::winograd23_filters(wdata, p.M, p.C, u.data());
        for (int64_t xi = 0; xi < 16; ++xi)
          packed->winograd.push_back(sgemm_pack_a(false, p.M, p.C, u.data() + xi * p.M * p.C, p.C));
      });
    }
#if defined(MOSAICRT_X86_SIMD)
    if (conv_uses_direct_lanes(p)) {
      std::call_once(packed->lanes_once, [&] {
        const int64_t K = W.numel() / std::max<int64_t>(p.M, 1);  // Cg * taps
        for (int64_t grp = 0; grp < p.group; ++grp)
          packed->lanes.push_back(nn::pack_filter_blocks(wdata + grp * p.Mg * K, p.Mg, K, nn::kPointwiseRows));
      });
    } else if (conv_uses_direct(p)) {
      std::call_once(packed->direct_once, [&] {
        const int64_t taps = W.numel() / std::max<int64_t>(p.M * p.Cg, 1);
        for (int64_t grp = 0; grp < p.group; ++grp)
          packed->direct.push_back(nn::pack_filter_blocks(
              wdata + grp * p.Mg * p.Cg * taps, p.Mg, p.Cg * taps,
              cpu_has_avx512_kernels() ? nn::direct_conv_lanes(p.Mg) : nn::direct_conv_lanes_avx2(p.Mg)));
      });
    }
    if (conv_uses_pointwise(p)) {
      std::call_once(packed->pointwise_once, [&] {
        for (int64_t grp = 0; grp < p.group; ++grp)
          packed->pointwise.push_back(
              nn::pack_filter_blocks(wdata + grp * p.Mg * p.Cg, p.Mg, p.Cg, nn::kPointwiseRows));
      });
    }
#endif
    if (conv_uses_transposed(p)) {
      std::call_once(packed->transposed_once, [&] {
        const int64_t K = W.numel() / std::max<int64_t>(p.M, 1);
        for (int64_t grp = 0; grp < p.group; ++grp)
          packed->transposed.push_back(sgemm_pack_b(true, K, p.Mg, wdata + grp * p.Mg * K, K));
      });
    }
  }
  // A residual Z (FusedConv's input 3) that dies here takes the output where the pointwise kernel computes it:
  // that kernel reads each element of Z in its registers right before it writes the output's element there, so
  // the output costs no memory stream of its own (ResNet-50's 64 -> 256 on 56 x 56 wrote 3.2 MB besides reading
  // Z's 3.2 MB).
  const bool pointwise_kernel = conv_runs_pointwise(p, packed.get(), epi);
  Tensor* over_z = !into && epi && epi->z && X.dtype() == DType::kFloat && pointwise_kernel ? ctx.output_in_input(0, 3)
                                                                                            : nullptr;
  Tensor& Y = into ? *into : over_z ? *over_z : ctx.output(0, X.dtype(), p.out_shape);
  if (X.dtype() == DType::kFloat16 || X.dtype() == DType::kBFloat16) {
    // 16-bit floats: computed in float32 and rounded once at the end.
    std::vector<float> xf = nn::widen(X), wf = packed ? std::vector<float>() : nn::widen(W);
    std::vector<float> bf = B ? nn::widen(*B) : std::vector<float>();
    std::vector<float> yf(static_cast<size_t>(Y.numel()));
    conv_run<float>(p, xf.data(), packed ? wdata : wf.data(), B ? bf.data() : nullptr, yf.data(), ctx.threads(),
                    packed.get());
    nn::narrow(yf.data(), Y);
    return;
  }
  MRT_DISPATCH_FLOATING(X.dtype(), "Conv", {
    conv_run<T>(p, X.data<T>(), W.data<T>(), B ? B->data<T>() : nullptr, Y.data<T>(), ctx.threads(), packed.get(),
                epi, in);
  });
}

void conv_kernel(OpContext& ctx) { conv_compute(ctx, nullptr); }

// FusedConv's output stage from its attributes (activation, activation_params) and its residual input Z.
Epilogue fused_conv_epilogue(OpContext& ctx) {
  const Node& node = ctx.node();
  Epilogue e;
  const std::string act = node.attr_string("activation", "");
  const std::vector<float> params = node.attr_floats("activation_params");
  auto param = [&](size_t i, float def) { return i < params.size() ? params[i] : def; };
  if (act.empty() || act == "Identity") {
    e.act = Epilogue::kNone;
  } else if (act == "Relu") {
    e.act = Epilogue::kRelu;
  } else if (act == "Tanh") {
    e.act = Epilogue::kTanh;
  } else if (act == "Sigmoid") {
    e.act = Epilogue::kSigmoid;
  } else if (act == "LeakyRelu") {
    e.act = Epilogue::kLeakyRelu;
    e.alpha = param(0, 0.01f);
  } else if (act == "Clip") {
    e.act = Epilogue::kClip;
    e.alpha = param(0, -std::numeric_limits<float>::infinity());
    e.beta = param(1, std::numeric_limits<float>::infinity());
  } else if (act == "HardSigmoid") {
    e.act = Epilogue::kHardSigmoid;
    e.alpha = param(0, 0.2f);
    e.beta = param(1, 0.5f);
  } else {
    fail(MRT_NOT_IMPLEMENTED, "FusedConv: activation '", act, "' is not supported");
  }
  const Tensor& X = ctx.input(0);
  MRT_CHECK_IMPL(X.dtype() == DType::kFloat || X.dtype() == DType::kDouble, "FusedConv: element type ",
                 dtype_name(X.dtype()), " is not supported");
  if (const Tensor* Z = ctx.optional_input(3)) {
    ConvPlan p = plan_conv(ctx, X, ctx.input(1), ctx.optional_input(2));
    MRT_CHECK_ARG(Z->dtype() == X.dtype(), "FusedConv: Z ", Z->describe(), " must have the output's type ",
                  dtype_name(X.dtype()));
    if (Z->shape() == p.out_shape) e.z = Z->raw();
    else e.z_broadcast = Z;
  }
  return e;
}

// Conv (+ input stage) into a buffer of its own, then output = act(conv + Z) with Z broadcast against it
// (either may be the larger), as the unfused Conv -> Add -> activation computes it.
void conv_then_broadcast_residual(OpContext& ctx, const Epilogue& e, const InputStage* in) {
  const Tensor& Z = *e.z_broadcast;
  Tensor conv;
  conv_compute(ctx, nullptr, in, &conv);
  Tensor& Y = ctx.output(0, conv.dtype(), broadcast_shapes(conv.shape(), Z.shape()));
  Epilogue act_only = e;
  act_only.z = nullptr;
  act_only.z_broadcast = nullptr;
  MRT_DISPATCH_FLOATING(conv.dtype(), "FusedConv", {
    ew::binary_apply<T, T, T>(ctx, conv, Z, Y, [](T a, T b) { return a + b; });
    T* y = Y.data<T>();
    const int64_t n = Y.numel();
    ctx.threads().parallel_for(n, ew::kGrain, [&](int64_t b, int64_t end) {
      apply_epilogue<T>(&act_only, y + b, b, end - b);
    });
  });
}

// com.microsoft FusedConv: Conv + optional residual input Z + activation.
void fused_conv_kernel(OpContext& ctx) {
  const Epilogue e = fused_conv_epilogue(ctx);
  if (e.z_broadcast) conv_then_broadcast_residual(ctx, e, nullptr);
  else conv_compute(ctx, &e);
}

// ai.mosaicrt FusedConv (the graph optimizer's BatchNormalization → Relu → Conv): com.microsoft FusedConv
// whose input goes through relu(x * scale[c] + shift[c]) first, scale and shift its inputs 4 and 5.
void preactivated_conv_kernel(OpContext& ctx) {
  const Tensor& X = ctx.input(0);
  MRT_CHECK_IMPL(X.dtype() == DType::kFloat, "FusedConv (ai.mosaicrt): element type ", dtype_name(X.dtype()),
                 " is not supported (float)");
  MRT_CHECK_ARG(X.rank() >= 3, "FusedConv (ai.mosaicrt): input X must have rank >= 3, got ", X.describe());
  const Tensor& scale = ctx.input(4);
  const Tensor& shift = ctx.input(5);
  for (const Tensor* t : {&scale, &shift})
    MRT_CHECK_ARG(t->dtype() == DType::kFloat && t->rank() == 1 && t->dim(0) == X.dim(1),
                  "FusedConv (ai.mosaicrt): the input scale and shift must be float vectors of the ", X.dim(1),
                  " input channels, got ", t->describe());
  const Epilogue e = fused_conv_epilogue(ctx);
  const InputStage in{scale.data<float>(), shift.data<float>()};
  if (e.z_broadcast) conv_then_broadcast_residual(ctx, e, &in);
  else conv_compute(ctx, &e, &in);
}

void fused_conv_check(const Node& node, int64_t) {
  (void)nn::parse_auto_pad(node);
  const std::string act = node.attr_string("activation", "");
  MRT_CHECK_IMPL(act.empty() || act == "Identity" || act == "Relu" || act == "Tanh" || act == "Sigmoid" ||
                     act == "LeakyRelu" || act == "Clip" || act == "HardSigmoid",
                 "FusedConv: activation '", act, "' is not supported");
}

void conv_check(const Node& node, int64_t) { (void)nn::parse_auto_pad(node); }

// ---------------------------------------------------------------------------------------
// ConvTranspose

struct ConvTPlan {
  Window g;  // in = ConvTranspose output (the image), out = ConvTranspose input positions
  int64_t N, C, M, group, Cg, Mg;
  Shape out_shape;
};

ConvTPlan plan_conv_transpose(const OpContext& ctx, const Tensor& X, const Tensor& W, const Tensor* B) {
  const Node& node = ctx.node();
  const char* op = "ConvTranspose";
  MRT_CHECK_ARG(X.rank() >= 3, op, ": input X must have rank >= 3 (N, C, spatial...), got ", X.describe());
  MRT_CHECK_ARG(W.rank() == X.rank(), op, ": weight W ", W.describe(), " must have the same rank as X ",
                X.describe());
  MRT_CHECK_ARG(W.dtype() == X.dtype(), op, ": X is ", dtype_name(X.dtype()), " but W is ", dtype_name(W.dtype()));
  ConvTPlan p;
  const size_t nsp = X.rank() - 2;
  p.N = X.dim(0);
  p.C = X.dim(1);
  p.group = node.attr_int("group", 1);
  MRT_CHECK_ARG(p.group >= 1, op, ": group must be >= 1, got ", p.group);
  MRT_CHECK_ARG(W.dim(0) == p.C, op, ": weight W ", W.describe(), " dim 0 must equal the input channels ", p.C);
  MRT_CHECK_ARG(p.C % p.group == 0, op, ": input channels ", p.C, " are not divisible by group ", p.group);
  p.Cg = p.C / p.group;
  p.Mg = W.dim(1);
  p.M = p.Mg * p.group;
  if (B) {
    MRT_CHECK_ARG(B->dtype() == X.dtype(), op, ": bias B is ", dtype_name(B->dtype()), ", expected ",
                  dtype_name(X.dtype()));
    MRT_CHECK_ARG(B->rank() == 1 && B->dim(0) == p.M, op, ": bias B ", B->describe(), " must have shape [", p.M,
                  "]");
  }
  Window& g = p.g;
  nn::read_window_attrs(node, nsp, op, g);
  g.kernel = kernel_from(node, W.shape(), nsp, op);
  std::vector<int64_t> in(X.shape().begin() + 2, X.shape().end());
  std::vector<int64_t> out_pad = node.attr_ints("output_padding", std::vector<int64_t>(nsp, 0));
  if (out_pad.empty()) out_pad.assign(nsp, 0);
  MRT_CHECK_ARG(out_pad.size() == nsp, op, ": output_padding has ", out_pad.size(), " values, expected ", nsp);
  const AutoPad auto_pad = nn::parse_auto_pad(node);
  std::vector<int64_t> out_spatial(nsp);
  std::vector<int64_t> req = node.attr_ints("output_shape");
  if (!req.empty()) {
    MRT_CHECK_ARG(req.size() == nsp || req.size() == nsp + 2, op, ": output_shape ", shape_str(req),
                  " must have ", nsp, " values");
    req.erase(req.begin(), req.end() - static_cast<std::ptrdiff_t>(nsp));
  }
  for (size_t d = 0; d < nsp; ++d) {
    MRT_CHECK_ARG(out_pad[d] >= 0, op, ": output_padding must be >= 0, got ", out_pad[d]);
    const int64_t full = g.stride[d] * (in[d] - 1) + out_pad[d] + g.eff_kernel(d);
    if (auto_pad == AutoPad::kValid) {
      g.pad_begin[d] = g.pad_end[d] = 0;
    }
    if (!req.empty()) {  // pads are derived from output_shape (explicit pads are ignored)
      out_spatial[d] = req[d];
    } else if (auto_pad == AutoPad::kSameUpper || auto_pad == AutoPad::kSameLower) {
      out_spatial[d] = in[d] * g.stride[d];
    } else {
      out_spatial[d] = full - g.pad_begin[d] - g.pad_end[d];
      continue;
    }
    const int64_t total = full - out_spatial[d];
    const int64_t half = nn::floor_div(total, 2);
    if (auto_pad == AutoPad::kSameUpper) {
      g.pad_begin[d] = half;
      g.pad_end[d] = total - half;
    } else {
      g.pad_begin[d] = total - half;
      g.pad_end[d] = half;
    }
  }
  for (size_t d = 0; d < nsp; ++d)
    MRT_CHECK_ARG(out_spatial[d] >= 1, op, ": computed output size ", out_spatial[d], " along spatial axis ", d,
                  " is not positive (check pads/output_shape)");
  g.in = out_spatial;  // the image col2im writes into
  g.out = in;          // sliding positions = input positions
  p.out_shape = {p.N, p.M};
  p.out_shape.insert(p.out_shape.end(), out_spatial.begin(), out_spatial.end());
  g.promote(2);
  return p;
}

template <class T>
void conv_transpose_run(const ConvTPlan& p, const T* x, const T* w, const T* bias, T* y, ThreadPool& pool,
                        const PackedFilters* packed) {
  const Window& g = p.g;
  const int64_t in_size = prod(g.out), out_size = prod(g.in), ksize = prod(g.kernel);
  if (out_size == 0 || p.N == 0 || p.M == 0) return;
  const int64_t rows_of_col = p.Mg * ksize;
  const int64_t tasks = p.N * p.group;
  const bool per_task = pool.size() > 1 && tasks >= 2 * pool.size();
  const int64_t budget = per_task ? kColBufferBytes / pool.size() : kColBufferBytes;
  const int64_t band = band_cols(rows_of_col, in_size, g.out[g.nsp - 1], sizeof(T), budget);
  auto run_task = [&](int64_t t, T* col, ThreadPool* gemm_pool) {
    const int64_t n = t / p.group, grp = t % p.group;
    const T* xg = x + (n * p.C + grp * p.Cg) * in_size;
    const T* wg = w + grp * p.Cg * rows_of_col;
    T* yg = y + (n * p.M + grp * p.Mg) * out_size;
    for (int64_t m = 0; m < p.Mg; ++m)
      std::fill(yg + m * out_size, yg + (m + 1) * out_size, bias ? bias[grp * p.Mg + m] : T(0));
    if (in_size == 0 || p.Cg == 0) return;
    for (int64_t p0 = 0; p0 < in_size; p0 += band) {
      const int64_t p1 = std::min(in_size, p0 + band), cols = p1 - p0;
      // col[Mg*K, cols] = W_g^T [Mg*K, Cg] x X_g[:, band]
      filter_gemm(packed, grp, true, rows_of_col, cols, p.Cg, wg, rows_of_col, xg + p0, in_size, T(0), col,
                  cols, gemm_pool);
      col2im(col, p.Mg, g, p0, p1, cols, yg, gemm_pool);
    }
  };
  const int64_t col_elems = rows_of_col * band;
  if (per_task) {
    pool.parallel_for(tasks, 1, [&](int64_t b, int64_t e) {
      auto col = make_buffer<T>(col_elems);
      for (int64_t t = b; t < e; ++t) run_task(t, col.get(), nullptr);
    });
  } else {
    auto col = make_buffer<T>(col_elems);
    for (int64_t t = 0; t < tasks; ++t) run_task(t, col.get(), &pool);
  }
}

void conv_transpose_kernel(OpContext& ctx) {
  const Tensor& X = ctx.input(0);
  const Tensor& W = ctx.input(1);
  const Tensor* B = ctx.optional_input(2);
  ConvTPlan p = plan_conv_transpose(ctx, X, W, B);
  Tensor& Y = ctx.output(0, X.dtype(), p.out_shape);
  std::shared_ptr<PackedFilters> packed;
  if (X.dtype() == DType::kFloat && ctx.input_is_constant(1) && X.numel() > 0 && p.Cg > 0) {
    packed = ctx.node_cache<PackedFilters>([&] {
      auto pf = std::make_shared<PackedFilters>();
      const int64_t rows = W.numel() / std::max<int64_t>(p.C, 1);  // Mg * kernel size
      for (int64_t grp = 0; grp < p.group; ++grp)
        pf->groups.push_back(sgemm_pack_a(true, rows, p.Cg, W.data<float>() + grp * p.Cg * rows, rows));
      return pf;
    });
  }
  if (X.dtype() == DType::kFloat16 || X.dtype() == DType::kBFloat16) {
    std::vector<float> xf = nn::widen(X), wf = nn::widen(W), bf = B ? nn::widen(*B) : std::vector<float>();
    std::vector<float> yf(static_cast<size_t>(Y.numel()));
    conv_transpose_run<float>(p, xf.data(), wf.data(), B ? bf.data() : nullptr, yf.data(), ctx.threads(), nullptr);
    nn::narrow(yf.data(), Y);
    return;
  }
  MRT_DISPATCH_FLOATING(X.dtype(), "ConvTranspose", {
    conv_transpose_run<T>(p, X.data<T>(), W.data<T>(), B ? B->data<T>() : nullptr, Y.data<T>(), ctx.threads(),
                          packed.get());
  });
}

}  // namespace

// Col2Im (nn_pool.cc) reuses the col2im accumulation above; the SIMD kernels' filter packing.
namespace nn {
void col2im_float(const float* col, int64_t channels, const Window& g, float* img) {
  col2im(col, channels, g, 0, prod(g.out), prod(g.out), img, nullptr);
}
void col2im_double(const double* col, int64_t channels, const Window& g, double* img) {
  col2im(col, channels, g, 0, prod(g.out), prod(g.out), img, nullptr);
}

// (baseline code: the packing runs on every CPU whose kernels read it, whatever the flags of their own files)
AlignedVector<float> pack_filter_blocks(const float* w, int64_t M, int64_t K, int64_t lanes) {
  const int64_t blocks = (M + lanes - 1) / lanes;
  AlignedVector<float> out(static_cast<size_t>(blocks * K * lanes), 0.f);
  for (int64_t m = 0; m < M; ++m)
    for (int64_t k = 0; k < K; ++k) out[static_cast<size_t>(((m / lanes) * K + k) * lanes + m % lanes)] = w[m * K + k];
  return out;
}
}  // namespace nn

void register_nn_kernels(KernelRegistry& r) {
  r.add("Conv", 1, conv_kernel, conv_check);
  r.add_domain("com.microsoft", "FusedConv", 1, fused_conv_kernel, fused_conv_check);
  r.add_domain("ai.mosaicrt", "FusedConv", 1, preactivated_conv_kernel, fused_conv_check);
  r.add("ConvTranspose", 1, conv_transpose_kernel, conv_check);
  register_nn_pool_kernels(r);
  register_nn_deform_kernels(r);
}

}  // namespace mrt
