// ConvInteger and QLinearConv: im2col of (x - x_zero_point) into int16 columns (padding
// contributes 0, i.e. the zero point), then per group W_g[M/g, C/g*k] x col[C/g*k, out]
// on the integer GEMM. Any number of spatial dimensions; weights of a constant W (and
// zero point) are widened once per session.
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <type_traits>

#include "quant_common.h"

namespace mrt {
namespace {

constexpr size_t kMaxConvDims = 8;  // spatial dimensions a convolution may have here

struct ConvGeom {
  int64_t N = 0, C = 0, M = 0, group = 1;
  Shape in, kernel, out;  // spatial dims
  std::vector<int64_t> stride, dil, pad_begin;
  int64_t in_size = 1, out_size = 1, kernel_size = 1;
};

ConvGeom conv_geometry(const Node& node, const Tensor& X, const Tensor& W, const char* op) {
  ConvGeom g;
  MRT_CHECK_ARG(X.rank() >= 3, op, ": input must have rank >= 3 (N x C x D1 ...), got ", X.describe());
  MRT_CHECK_ARG(W.rank() == X.rank(), op, ": weight ", W.describe(), " must have the rank of the input ", X.describe());
  const size_t nd = X.rank() - 2;
  MRT_CHECK_IMPL(nd <= kMaxConvDims, op, ": ", nd, " spatial dimensions (at most ", kMaxConvDims, " are supported)");
  g.N = X.dim(0);
  g.C = X.dim(1);
  g.M = W.dim(0);
  g.group = node.attr_int("group", 1);
  MRT_CHECK_ARG(g.group > 0 && g.C % g.group == 0 && g.M % g.group == 0, op, ": group ", g.group,
                " must divide the input channels ", g.C, " and output channels ", g.M);
  MRT_CHECK_ARG(W.dim(1) == g.C / g.group, op, ": weight ", W.describe(), " needs ", g.C / g.group,
                " input channels per group");
  g.in.assign(X.shape().begin() + 2, X.shape().end());
  g.kernel.assign(W.shape().begin() + 2, W.shape().end());
  const std::vector<int64_t> ks = node.attr_ints("kernel_shape");
  if (!ks.empty()) {
    MRT_CHECK_ARG(ks == g.kernel, op, ": kernel_shape ", shape_str(ks), " differs from the weight's ", shape_str(g.kernel));
  }
  g.stride = node.attr_ints("strides", std::vector<int64_t>(nd, 1));
  g.dil = node.attr_ints("dilations", std::vector<int64_t>(nd, 1));
  std::vector<int64_t> pads = node.attr_ints("pads", std::vector<int64_t>(2 * nd, 0));
  MRT_CHECK_ARG(g.stride.size() == nd && g.dil.size() == nd && pads.size() == 2 * nd, op,
                ": strides/dilations/pads do not match ", nd, " spatial dimensions");
  const std::string auto_pad = node.attr_string("auto_pad", "NOTSET");
  g.out.resize(nd);
  g.pad_begin.resize(nd);
  for (size_t d = 0; d < nd; ++d) {
    MRT_CHECK_ARG(g.stride[d] > 0 && g.dil[d] > 0 && g.kernel[d] > 0, op, ": strides, dilations and kernel must be positive");
    const int64_t ext = g.dil[d] * (g.kernel[d] - 1) + 1;
    if (auto_pad == "SAME_UPPER" || auto_pad == "SAME_LOWER") {
      const int64_t o = (g.in[d] + g.stride[d] - 1) / g.stride[d];
      const int64_t total = std::max<int64_t>(0, (o - 1) * g.stride[d] + ext - g.in[d]);
      g.pad_begin[d] = auto_pad == "SAME_UPPER" ? total / 2 : total - total / 2;
      g.out[d] = o;
    } else if (auto_pad == "VALID") {
      g.pad_begin[d] = 0;
      g.out[d] = g.in[d] >= ext ? (g.in[d] - ext) / g.stride[d] + 1 : 0;
    } else {
      MRT_CHECK_IMPL(auto_pad == "NOTSET" || auto_pad.empty(), op, ": auto_pad '", auto_pad, "' is not supported");
      MRT_CHECK_ARG(pads[d] >= 0 && pads[d + nd] >= 0, op, ": pads must be >= 0");
      g.pad_begin[d] = pads[d];
      const int64_t span = g.in[d] + pads[d] + pads[d + nd];
      g.out[d] = span >= ext ? (span - ext) / g.stride[d] + 1 : 0;
    }
  }
  g.in_size = norm::prod(g.in, 0, nd);
  g.out_size = norm::prod(g.out, 0, nd);
  g.kernel_size = norm::prod(g.kernel, 0, nd);
  return g;
}

// What each row of the column matrix reads (r = c * kernel_size + kidx), worked out once per product
// instead of once per row and slice of columns (integer divisions are most of a row's cost otherwise).
struct ColumnRows {
  size_t nd = 0;
  std::vector<int64_t> v;  // per row: channel offset, v0, v1, start, then the nd kernel coordinates
  int64_t stride() const { return 4 + static_cast<int64_t>(nd); }
};

ColumnRows column_rows(const ConvGeom& g, int64_t channels) {
  ColumnRows t;
  t.nd = g.in.size();
  const size_t last = t.nd - 1;
  const int64_t rows = channels * g.kernel_size, in_last = g.in[last], st = g.stride[last];
  t.v.resize(static_cast<size_t>(rows * t.stride()));
  // the last dimension's window for each of its kernel taps: output positions j whose input
  // start + j * st lies inside [0, in_last)
  std::vector<int64_t> window(static_cast<size_t>(3 * g.kernel[last]));
  for (int64_t k = 0; k < g.kernel[last]; ++k) {
    const int64_t start = -g.pad_begin[last] + k * g.dil[last];
    window[3 * k] = start >= 0 ? 0 : (-start + st - 1) / st;
    window[3 * k + 1] = start >= in_last ? 0 : (in_last - start + st - 1) / st;
    window[3 * k + 2] = start;
  }
  std::vector<int64_t> kc(t.nd, 0);  // kernel coordinates of row r, counted up (no divisions per row)
  int64_t c = 0;
  for (int64_t r = 0; r < rows; ++r) {
    int64_t* e = t.v.data() + r * t.stride();
    const int64_t* w = window.data() + 3 * kc[last];
    e[0] = c * g.in_size;
    e[1] = w[0];
    e[2] = w[1];
    e[3] = w[2];
    std::copy(kc.begin(), kc.end(), e + 4);
    size_t d = t.nd;
    while (d-- > 0) {
      if (++kc[d] < g.kernel[d]) break;
      kc[d] = 0;
    }
    if (d == static_cast<size_t>(-1)) ++c;  // every coordinate wrapped: the next channel
  }
  return t;
}

// One line segment of a column row: m values x[0], x[st], ... (minus sub) into out. Lines are short
// (tens of values), so the byte case copies with vector loads instead of a libc call per line, and
// stride 2 (every downsampling convolution) picks the even bytes of 32 at a time.
template <class S, class D>
inline void copy_line(const S* xs, int64_t st, int32_t sub, D* out, int64_t m) {
  int64_t t = 0;
  if constexpr (sizeof(S) == 1 && sizeof(D) == 1) {
    if (sub == 0) {
      const uint8_t* x = reinterpret_cast<const uint8_t*>(xs);
      uint8_t* o = reinterpret_cast<uint8_t*>(out);
#if defined(__SSE2__)
      if (st == 1) {
        if (m >= 16) {
          for (; t + 16 <= m; t += 16)
            _mm_storeu_si128(reinterpret_cast<__m128i*>(o + t), _mm_loadu_si128(reinterpret_cast<const __m128i*>(x + t)));
          if (t < m)  // the last 16 again, overlapping what was copied
            _mm_storeu_si128(reinterpret_cast<__m128i*>(o + m - 16),
                             _mm_loadu_si128(reinterpret_cast<const __m128i*>(x + m - 16)));
          return;
        }
      } else if (st == 2) {
        // (reads x[2t .. 2t + 31] for outputs t .. t + 15: stops while 2t + 31 is a byte the line reads)
        const __m128i even = _mm_set1_epi16(0x00FF);
        for (; t + 16 <= m && 2 * t + 31 <= 2 * (m - 1); t += 16) {
          const __m128i a = _mm_and_si128(_mm_loadu_si128(reinterpret_cast<const __m128i*>(x + 2 * t)), even);
          const __m128i b = _mm_and_si128(_mm_loadu_si128(reinterpret_cast<const __m128i*>(x + 2 * t + 16)), even);
          _mm_storeu_si128(reinterpret_cast<__m128i*>(o + t), _mm_packus_epi16(a, b));
        }
      }
#endif
      for (; t < m; ++t) o[t] = x[t * st];
      return;
    }
  }
#if defined(__SSE2__)
  if constexpr (sizeof(S) == 1 && sizeof(D) == 2) {
    // Bytes widened to 16 bits 8 at a time, less `sub`: the int16 columns of a quantized convolution on CPUs without
    // VNNI. The widening takes each 16-bit lane's high byte (a shift right, arithmetic for int8), so a line of stride
    // 2 loads 16 bytes whose high bytes are the 8 it needs. The last 8 outputs are made again by a load that ends
    // at the line's last byte (overlapping what was written), so no load reads past it.
    const uint8_t* x = reinterpret_cast<const uint8_t*>(xs);
    int16_t* o = reinterpret_cast<int16_t*>(out);
    const __m128i s = _mm_set1_epi16(static_cast<int16_t>(sub));
    const auto widen_high = [&](__m128i v) {
      return _mm_sub_epi16(std::is_signed_v<S> ? _mm_srai_epi16(v, 8) : _mm_srli_epi16(v, 8), s);
    };
    if ((st == 1 || st == 2) && m >= 8) {
      if (st == 1) {
        // 8 bytes placed in the high halves: the 8-byte load stays within the line
        const auto eight1 = [&](int64_t t8) {
          const __m128i v = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(x + t8));
          _mm_storeu_si128(reinterpret_cast<__m128i*>(o + t8), widen_high(_mm_unpacklo_epi8(v, v)));
        };
        for (; t + 8 <= m; t += 8) eight1(t);
        if (t < m) eight1(m - 8);
        return;
      }
      // stride 2: outputs t .. t + 7 from the bytes 2t - 1 .. 2t + 14, whose high bytes (odd offsets) are the 8
      // inputs (the first of them is before the line at t = 0: output 0 is made alone)
      const auto eight = [&](int64_t t8, const uint8_t* p) {
        const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
        _mm_storeu_si128(reinterpret_cast<__m128i*>(o + t8), widen_high(v));
      };
      if (m >= 9) {
        for (t = 1; t + 8 <= m; t += 8) eight(t, x + 2 * t - 1);
        if (t < m) eight(m - 8, x + 2 * (m - 8) - 1);
        o[0] = static_cast<int16_t>(static_cast<int32_t>(xs[0]) - sub);
        return;
      }
    }
  }
#endif
  for (; t < m; ++t) out[t] = static_cast<D>(static_cast<int32_t>(xs[t * st]) - sub);
}

template <class D>
inline void fill_line(D* out, int64_t m, D v) {
  for (int64_t t = 0; t < m; ++t) out[t] = v;
}

// Rows [r0, r1) of the column matrix, for the output positions [o0, o0 + n):
// col[r * ldc + (o - o0)] = x[c, in(o, kidx)] - sub with r = c * kernel_size + kidx, `pad` outside the input.
// kDims: the number of spatial dimensions when known at compile time (1, 2, 3), else 0.
template <size_t kDims, class S, class D>
void im2col_rows_nd(const S* x, int32_t sub, D pad, const ConvGeom& g, const ColumnRows& rows, int64_t r0, int64_t r1,
                    int64_t o0, int64_t n, D* col, int64_t ldc) {
  const size_t nd = kDims ? kDims : rows.nd, last = nd - 1;
  const int64_t last_out = g.out[last], in_last = g.in[last], st = g.stride[last];
  // the geometry in locals: byte stores may alias anything else, and would make every line reload it
  int64_t oc0[kMaxConvDims], oc[kMaxConvDims], out_d[kMaxConvDims], in_d[kMaxConvDims], first[kMaxConvDims],
      stride[kMaxConvDims], dil[kMaxConvDims];
  for (size_t d = 0; d < nd; ++d) {
    out_d[d] = g.out[d];
    in_d[d] = g.in[d];
    first[d] = -g.pad_begin[d];
    stride[d] = g.stride[d];
    dil[d] = g.dil[d];
  }
  // the output coordinates of o0 (the last one is where the first line starts)
  for (size_t d = nd, rest = static_cast<size_t>(o0); d-- > 0;) {
    oc0[d] = static_cast<int64_t>(rest % static_cast<size_t>(g.out[d]));
    rest /= static_cast<size_t>(g.out[d]);
  }
  for (int64_t r = r0; r < r1; ++r) {
    const int64_t* e = rows.v.data() + r * rows.stride();
    int64_t off[kMaxConvDims];  // input coordinate of output coordinate 0, per dimension
    for (size_t d = 0; d < last; ++d) off[d] = first[d] + e[4 + d] * dil[d];
    const int64_t v0 = e[1], v1 = e[2], start = e[3];
    const S* xc = x + e[0];
    D* dst = col + r * ldc;
    for (size_t d = 0; d < last; ++d) oc[d] = oc0[d];
    // Walk the positions one (partial) innermost line at a time.
    for (int64_t done = 0, j = oc0[last]; done < n; j = 0) {
      const int64_t cnt = std::min(last_out - j, n - done);
      int64_t base = 0;
      bool inside = true;
      for (size_t d = 0; d < last; ++d) {
        const int64_t i = oc[d] * stride[d] + off[d];
        if (i < 0 || i >= in_d[d]) { inside = false; break; }
        base = base * in_d[d] + i;
      }
      D* line = dst + done;  // output positions j .. j + cnt - 1 of this line
      if (!inside) {
        fill_line(line, cnt, pad);
      } else {
        const int64_t a = std::clamp(v0, j, j + cnt), b = std::clamp(v1, a, j + cnt);
        fill_line(line, a - j, pad);
        copy_line(xc + base * in_last + start + a * st, st, sub, line + (a - j), b - a);
        fill_line(line + (b - j), j + cnt - b, pad);
      }
      done += cnt;
      for (size_t d = last; d-- > 0;) {
        if (++oc[d] < out_d[d]) break;
        oc[d] = 0;
      }
    }
  }
}

template <class S, class D>
void im2col_rows(const S* x, int32_t sub, D pad, const ConvGeom& g, const ColumnRows& rows, int64_t r0, int64_t r1,
                 int64_t o0, int64_t n, D* col, int64_t ldc) {
  switch (rows.nd) {
    case 1: return im2col_rows_nd<1>(x, sub, pad, g, rows, r0, r1, o0, n, col, ldc);
    case 2: return im2col_rows_nd<2>(x, sub, pad, g, rows, r0, r1, o0, n, col, ldc);
    case 3: return im2col_rows_nd<3>(x, sub, pad, g, rows, r0, r1, o0, n, col, ldc);
    default: return im2col_rows_nd<0>(x, sub, pad, g, rows, r0, r1, o0, n, col, ldc);
  }
}

// B of one group's int16 product, (x - x_zero_point) packed a slice of output positions at a time, as
// pack_conv_columns below does for the 8-bit kernels: each slice's columns are made in a buffer of about 192 KiB
// (L2-resident; 64 KiB slices were 6 % slower) and packed from there, the slices spread over the threads. (The
// whole column matrix first, then packed on one thread, was a fifth of a quantized ResNet-18's time on an AVX2 CPU
// without VNNI, where this path runs: 70.5 -> 60.4 ms at 1 thread on an AMD Zen 3.)
template <class S>
void pack_conv_columns16(quant::PackedB& packed, const S* x, int32_t xzp, const ConvGeom& g, int64_t channels,
                         ThreadPool& pool) {
  const int64_t K = channels * g.kernel_size, N = g.out_size, nr = quant::kIgemmPanel;
  quant::pack_b16_begin(packed, K, N);
  const int64_t panels = (N + nr - 1) / nr;
  int64_t per = std::clamp<int64_t>((int64_t(96) << 10) / std::max<int64_t>(1, K * nr), 1, 16);
  per = std::min(per, std::max<int64_t>(1, panels / (2 * static_cast<int64_t>(pool.size()))));
  const int64_t chunk = per * nr, chunks = (N + chunk - 1) / chunk;
  const ColumnRows plan = column_rows(g, channels);
  pool.parallel_for(chunks, 1, [&](int64_t cb, int64_t ce) {
    static thread_local std::vector<int16_t> tile_buf;
    quant::Scratch<int16_t> tile(tile_buf, static_cast<size_t>(K * chunk));
    for (int64_t c = cb; c < ce; ++c) {
      const int64_t n0 = c * chunk, n = std::min(chunk, N - n0);
      im2col_rows(x, xzp, int16_t(0), g, plan, 0, K, n0, n, tile.data(), chunk);
      quant::pack_b16_columns(packed, tile.data(), chunk, n0, n);
    }
  });
}

// B of one group's product, packed for the 8-bit kernel a slice of output positions at a time: each slice's
// columns are made in a small buffer (cache resident) and packed from there, slices spread over the threads;
// a 1x1 convolution of stride 1 without padding packs straight from the image (its columns are the image).
void pack_conv_columns(const quant::Igemm8Kernel& k8, quant::PackedB8& packed, const uint8_t* x, bool x_u8,
                       int32_t xzp, const ConvGeom& g, int64_t channels, ThreadPool& pool) {
  const int64_t K = channels * g.kernel_size, N = g.out_size, nr = k8.panel;
  quant::pack_b8_begin(k8, packed, K, N);
  bool direct = g.kernel_size == 1;
  for (size_t d = 0; d < g.in.size() && direct; ++d)
    direct = g.stride[d] == 1 && g.pad_begin[d] == 0 && g.out[d] == g.in[d];
  const int64_t panels = (N + nr - 1) / nr;
  int64_t per = std::clamp<int64_t>((int64_t(64) << 10) / std::max<int64_t>(1, K * nr), 1, 8);
  per = std::min(per, std::max<int64_t>(1, panels / (2 * static_cast<int64_t>(pool.size()))));
  const int64_t chunk = per * nr, chunks = (N + chunk - 1) / chunk;
  const uint8_t pad = static_cast<uint8_t>(xzp);
  const ColumnRows plan = direct ? ColumnRows() : column_rows(g, channels);
  pool.parallel_for(chunks, 1, [&](int64_t cb, int64_t ce) {
    static thread_local std::vector<uint8_t> tile_buf;
    quant::Scratch<uint8_t> tile(tile_buf, direct ? 0 : static_cast<size_t>(K * chunk));
    for (int64_t c = cb; c < ce; ++c) {
      const int64_t n0 = c * chunk, n = std::min(chunk, N - n0);
      if (direct) {
        quant::pack_b8_columns(packed, x + n0, x_u8, g.in_size, n0, n);
        continue;
      }
      if (x_u8) im2col_rows(x, 0, pad, g, plan, 0, K, n0, n, tile.data(), chunk);
      else im2col_rows(reinterpret_cast<const int8_t*>(x), 0, pad, g, plan, 0, K, n0, n, tile.data(), chunk);
      quant::pack_b8_columns(packed, tile.data(), x_u8, chunk, n0, n);
    }
  });
  quant::pack_b8_end(packed, x_u8, &xzp, false);
}

// Constant weights in an 8-bit kernel's form, made once per node: for the direct kernel where it applies,
// else for im2col + igemm8 (one entry per group).
struct Weights8 {
  std::vector<quant::PreparedA8> gemm;
  std::vector<quant::DirectWeights8> direct;
  std::vector<quant::PlaneWeights8> planes;
  int64_t column_shifts = 1;  // the plane kernel's: see plane_column_shifts
};

// The direct 2-D kernel (quant_conv_direct_avx512.cc) needs AVX512-VNNI and int8 weights with zero points 0;
// it pays off with 8 or more output channels per group (its blocks are 16 wide), 3 or more input channels
// and a window of more than one tap or a stride.
bool direct8_applies(const quant::Igemm8Kernel& k8, const ConvGeom& g, const Tensor& W,
                     const std::vector<int32_t>& wzp) {
#if defined(MOSAICRT_X86_SIMD)
  if (std::strcmp(k8.name, "avx512vnni") != 0 || g.in.size() != 2 || W.dtype() != DType::kInt8) return false;
  if (g.M / g.group < 8 || g.C / g.group < 3) return false;
  // a 1x1 convolution of stride 1 packs its columns straight from the image (pack_conv_columns), at least as
  // fast as staging the image channels-last (ResNet-50's 256 -> 64 on 56x56: 0.36 against 0.38 ms)
  if (g.kernel_size == 1 && g.stride[0] == 1 && g.stride[1] == 1) return false;
  return std::all_of(wzp.begin(), wzp.end(), [](int32_t z) { return z == 0; });
#else
  (void)k8, (void)g, (void)W, (void)wzp;
  return false;
#endif
}

// The AVX2 plane kernel (quant_conv_planes_avx2.cc) needs the avx2u8s8 kernel, 2-D, weights whose zero points
// are 0 in its int8 domain, and 3 or more input and 8 or more output channels per group (it pads channels to 4).
bool planes8_applies(const quant::Igemm8Kernel& k8, const ConvGeom& g, const Tensor& W,
                     const std::vector<int32_t>& wzp) {
#if defined(MOSAICRT_X86_SIMD)
  if (std::strcmp(k8.name, "avx2u8s8") != 0 || g.in.size() != 2) return false;
  if (g.M / g.group < 8 || g.C / g.group < 3) return false;
  const int32_t zero = W.dtype() == DType::kInt8 ? 0 : 128;
  return std::all_of(wzp.begin(), wzp.end(), [zero](int32_t z) { return z == zero; }) && (!wzp.empty() || zero == 0);
#else
  (void)k8, (void)g, (void)W, (void)wzp;
  return false;
#endif
}

// The plane kernel's channel slots (PlaneWeights8::slot_channel). Its kernel sums the products of slots 2j and
// 2j + 1 in int16 with saturation, which an input's full range cannot reach while the two weights' magnitudes
// add up to at most 128 or their signs differ; each pair past that is one more fix entry (a fifth to a third of
// a layer's time where 2 % of its pairs are). The slots pair channels greedily: the channel with the most
// such clashes first, with the free channel (or zero slot) it clashes with least. Clashes are counted over the
// weights of up to 512 (output channel, tap) columns, evenly spread (a 512 x 512 3x3 layer: about 5 ms). A
// quantized ResNet-18's layers: 0.91 % of pairs clash in channel order, 0.56 % paired this way.
std::vector<int32_t> plane_channel_slots(const uint8_t* w, bool w_is_s8, int64_t M, int64_t C, int64_t taps) {
  // columns sampled: 512, fewer past 512 channels (each column costs a pass over the channels per large weight)
  const int64_t kSamples = std::clamp<int64_t>((int64_t{1} << 18) / std::max<int64_t>(C, 1), 64, 512);
  const int64_t N = (C + 3) / 4 * 4, columns = M * taps, step = std::max<int64_t>(1, columns / kSamples);
  // from[i * N + j]: the clashes of channels i and j counted from i, the larger weight of each (the lower index
  // on a tie); branch-free over j so that the loop is vectorized
  std::vector<int32_t> from(static_cast<size_t>(N * N), 0), mag(static_cast<size_t>(C)), pos(static_cast<size_t>(C));
  std::vector<int64_t> large;
  for (int64_t col = 0; col < columns; col += step) {
    const int64_t m = col / taps, t = col % taps;
    large.clear();
    for (int64_t c = 0; c < C; ++c) {
      const uint8_t b = w[(m * C + c) * taps + t];
      const int32_t v = w_is_s8 ? static_cast<int8_t>(b) : static_cast<int32_t>(b) - 128;
      mag[static_cast<size_t>(c)] = std::abs(v);
      pos[static_cast<size_t>(c)] = v > 0;
      if (std::abs(v) > 64) large.push_back(c);
    }
    const int32_t *mg = mag.data(), *ps = pos.data(), n = static_cast<int32_t>(C);
    for (const int64_t i : large) {
      const int32_t mi = mg[i], pi = ps[i], floor = 128 - mi, ii = static_cast<int32_t>(i);
      int32_t* row = from.data() + i * N;
      for (int32_t j = 0; j < n; ++j)
        row[j] += (ps[j] == pi) & (mg[j] > floor) & ((mg[j] < mi) | ((mg[j] == mi) & (j > ii)));
    }
  }
  auto clash = [&](int64_t i, int64_t j) {
    return from[static_cast<size_t>(i * N + j)] + from[static_cast<size_t>(j * N + i)];
  };
  std::vector<int64_t> total(static_cast<size_t>(N), 0), order(static_cast<size_t>(N));
  for (int64_t i = 0; i < N; ++i) {
    for (int64_t j = 0; j < N; ++j) total[static_cast<size_t>(i)] += clash(i, j);
    order[static_cast<size_t>(i)] = i;
  }
  std::stable_sort(order.begin(), order.end(),
                   [&](int64_t a, int64_t b) { return total[static_cast<size_t>(a)] > total[static_cast<size_t>(b)]; });
  std::vector<char> taken(static_cast<size_t>(N), 0);
  std::vector<int32_t> slots;
  slots.reserve(static_cast<size_t>(N));
  for (const int64_t i : order) {
    if (taken[static_cast<size_t>(i)]) continue;
    taken[static_cast<size_t>(i)] = 1;
    int64_t best = -1;
    for (int64_t j = 0; j < N; ++j)
      if (!taken[static_cast<size_t>(j)] && (best < 0 || clash(i, j) < clash(i, best))) best = j;
    taken[static_cast<size_t>(best)] = 1;
    slots.push_back(static_cast<int32_t>(i));
    slots.push_back(static_cast<int32_t>(best));
  }
  return slots;
}

// The plane kernel pads each group's input channels to quads, at every tap: a first layer's 3 channels under a
// 7-wide window make 4 x 7 bytes of k per window row for 21 weights. Seen as C x S channels, channel (c, s)
// being channel c read s taps further right, the window is ceil(KW / S) taps S x dw apart: with S = 4, 12
// slots (none empty) x 2 taps = 24 bytes. This returns the S of fewest bytes where it saves an eighth of them
// or more, else 1. (The input is then read through a copy with the shifted channels, made on every run.)
int64_t plane_column_shifts(int64_t C, int64_t KW) {
  auto bytes = [&](int64_t S) { return (C * S + 3) / 4 * 4 * ((KW + S - 1) / S); };
  int64_t best = 1;
  for (int64_t S = 2; S <= KW; ++S)
    if (bytes(S) < bytes(best)) best = S;
  return bytes(best) * 8 <= bytes(1) * 7 ? best : 1;
}

// Weights of C x S channels for S column shifts (M x C x KH x KW bytes in, M x C*S x KH x ceil(KW / S) out):
// channel c * S + s at tap k is channel c at tap k * S + s, the weights' zero point past the window.
std::vector<uint8_t> shifted_weights(const uint8_t* w, int64_t M, int64_t C, int64_t KH, int64_t KW, int64_t S,
                                     const int32_t* wz, bool wz_per_row) {
  const int64_t KWs = (KW + S - 1) / S;
  std::vector<uint8_t> out(static_cast<size_t>(M * C * S * KH * KWs));
  for (int64_t m = 0; m < M; ++m) {
    const uint8_t pad = static_cast<uint8_t>(wz ? wz[wz_per_row ? m : 0] : 0);
    for (int64_t c = 0; c < C; ++c)
      for (int64_t s = 0; s < S; ++s)
        for (int64_t kh = 0; kh < KH; ++kh)
          for (int64_t k = 0; k < KWs; ++k) {
            const int64_t kw = k * S + s;
            out[static_cast<size_t>((((m * C + c) * S + s) * KH + kh) * KWs + k)] =
                kw < KW ? w[((m * C + c) * KH + kh) * KW + kw] : pad;
          }
  }
  return out;
}

// The input of C x S channels for S column shifts: channel c * S + s, row h, column j is the padded input's
// column j + s * dw (x's column j + s * dw - pl), the zero point's byte outside x; Ws columns per row.
void shift_columns(const uint8_t* x, int64_t C, int64_t H, int64_t W, int64_t pl, int64_t dw, int64_t S, int64_t Ws,
                   uint8_t fill, uint8_t* out, ThreadPool& pool) {
  pool.parallel_for(C * S * H, std::max<int64_t>(1, 16384 / std::max<int64_t>(1, Ws)), [&](int64_t b, int64_t e) {
    for (int64_t row = b; row < e; ++row) {
      const int64_t c = row / (S * H), s = row / H % S, h = row % H;
      const uint8_t* src = x + (c * H + h) * W;
      uint8_t* d = out + row * Ws;
      const int64_t shift = s * dw - pl;  // d[j] = src[j + shift]
      const int64_t j0 = std::clamp<int64_t>(-shift, 0, Ws), j1 = std::clamp<int64_t>(W - shift, j0, Ws);
      std::memset(d, fill, static_cast<size_t>(j0));
      std::memcpy(d + j0, src + j0 + shift, static_cast<size_t>(j1 - j0));
      std::memset(d + j1, fill, static_cast<size_t>(Ws - j1));
    }
  });
}

// One group's weights (Mg x Cg x KH x KW bytes) in the plane kernel's order, prepared for its kernel.
quant::PlaneWeights8 prepare_plane_weights8(const quant::Igemm8Kernel& k8, const uint8_t* w, bool w_is_s8, int64_t M,
                                            int64_t C, int64_t KH, int64_t KW, const int32_t* wz, bool wz_per_row) {
  quant::PlaneWeights8 out;
  out.M = M, out.C = C, out.KH = KH, out.KW = KW;
  out.slot_channel = plane_channel_slots(w, w_is_s8, M, C, KH * KW);
  const int64_t CQ = (C + 3) / 4, K = CQ * KH * KW * 4;
  // slots past C: the zero point's byte, so that they are 0 once in the kernel's domain
  std::vector<uint8_t> a(static_cast<size_t>(M * K));
  for (int64_t m = 0; m < M; ++m) {
    const uint8_t pad = static_cast<uint8_t>(wz ? wz[wz_per_row ? m : 0] : 0);
    for (int64_t cq = 0; cq < CQ; ++cq)
      for (int64_t kh = 0; kh < KH; ++kh)
        for (int64_t kw = 0; kw < KW; ++kw)
          for (int64_t b = 0; b < 4; ++b) {
            const int64_t c = out.slot_channel[static_cast<size_t>(cq * 4 + b)];
            a[static_cast<size_t>(m * K + ((cq * KH + kh) * KW + kw) * 4 + b)] =
                c < C ? w[((m * C + c) * KH + kh) * KW + kw] : pad;
          }
  }
  quant::prepare_a8(k8, out.a, M, a.data(), w_is_s8, K, K, wz, wz_per_row);
  const int64_t Kp = out.a.Kp, Mp = static_cast<int64_t>(out.a.zrow.size());  // (prepare_a8's rows: M rounded up)
  MRT_CHECK_IMPL(Mp % 4 == 0 && Kp % 4 == 0, "8-bit plane conv: weights not in blocks of 4 rows and 4 k");
  out.panel.assign(static_cast<size_t>(quant::plane_panel_rows(Mp) * Kp), 0);
  for (int64_t m = 0; m < Mp; ++m)
    for (int64_t k = 0; k < Kp; k += 4)
      std::memcpy(out.panel.data() + (((m / 4) * (Kp / 4) + k / 4) * 4 + m % 4) * 4, out.a.data.data() + m * Kp + k, 4);
  std::vector<uint8_t>().swap(out.a.data);  // the panel holds the bytes
  return out;
}

struct PackedWeights {
  int64_t Kp = 0;
  std::vector<std::vector<int16_t>> groups;  // per group: M/g rows of Kp
};

// int32 y[N, M, out...] = conv(x - x_zp, w - w_zp). x_in.. indices of the inputs. With rq (QLinearConv), the
// direct kernel, where it applies, writes the requantized bytes instead (rq->y, planes of N x M) and the
// call returns true; otherwise, with y null, it returns false having computed nothing.
bool integer_conv(OpContext& ctx, const ConvGeom& g, size_t x_in, size_t xz_in, size_t w_in, size_t wz_in,
                  int32_t* y, const char* op, const quant::DirectRequant8* rq = nullptr) {
  const Tensor& X = ctx.input(x_in);
  const Tensor& W = ctx.input(w_in);
  MRT_CHECK_IMPL(X.dtype() == DType::kUInt8 || X.dtype() == DType::kInt8, op, ": input element type ",
                 dtype_name(X.dtype()), " is not supported (uint8/int8)");
  MRT_CHECK_IMPL(W.dtype() == DType::kUInt8 || W.dtype() == DType::kInt8, op, ": weight element type ",
                 dtype_name(W.dtype()), " is not supported (uint8/int8)");
  int32_t xzp = 0;
  if (const Tensor* z = ctx.optional_input(xz_in)) {
    MRT_CHECK_ARG(z->numel() == 1, op, ": x zero point must be a scalar, got ", z->describe());
    MRT_CHECK_ARG(z->dtype() == X.dtype(), op, ": x zero point type differs from the input's");
    xzp = quant::to_int32s(*z)[0];
  }
  const Tensor* wz = ctx.optional_input(wz_in);
  if (wz) {
    MRT_CHECK_ARG(wz->numel() == 1 || wz->numel() == g.M, op, ": w zero point ", wz->describe(),
                  " must be a scalar or hold one value per output channel (", g.M, ")");
    MRT_CHECK_ARG(wz->dtype() == W.dtype(), op, ": w zero point type differs from the weight's");
  }
  const int64_t Mg = g.M / g.group, Cg = g.C / g.group, Kc = Cg * g.kernel_size;
  if (g.out_size == 0 || g.N == 0 || g.M == 0) return y == nullptr;
  const quant::Igemm8Kernel* k8 = quant::igemm8_active();
  // On thin groups (depthwise and the like) the int16 GEMM is faster than a kernel with saturating pairs (AVX2)
  // and its per-group packing: a depthwise 144 x 56 x 56 3x3, 1.9 ms against 3.5.
  if (k8 && k8->pair_limit > 0 && (g.M / g.group < 8 || g.C / g.group < 3)) k8 = nullptr;
  if (k8) {
    // 8-bit GEMM on the raw bytes: columns padded with the x zero point's byte.
    std::vector<int32_t> wzp = wz ? quant::to_int32s(*wz) : std::vector<int32_t>();
    const bool per_row = wzp.size() > 1;
    const bool x_u8 = X.dtype() == DType::kUInt8;
    static thread_local quant::PackedB8 packed;
    struct Release {  // keep the packed buffer only while it is small
      ~Release() {
        if (packed.data.capacity() > quant::kScratchKeep) packed = quant::PackedB8();
      }
    } release;
    const uint8_t* w = static_cast<const uint8_t*>(W.raw());
    // Constant weights are put in the kernel's domain once per node (per group), not on every run.
    std::shared_ptr<Weights8> prepared;
    if (ctx.input_is_constant(w_in) && (!wz || ctx.input_is_constant(wz_in)))
      prepared = ctx.node_cache<Weights8>([&] {
        auto out = std::make_shared<Weights8>();
        [[maybe_unused]] const bool direct = direct8_applies(*k8, g, W, wzp);
        const bool planes = planes8_applies(*k8, g, W, wzp);
        if (planes) out->column_shifts = plane_column_shifts(Cg, g.kernel[1]);
        for (int64_t gi = 0; gi < g.group; ++gi) {
          if (planes) {
            const int32_t* z = wzp.empty() ? nullptr : wzp.data() + (per_row ? gi * Mg : 0);
            const int64_t S = out->column_shifts;
            if (S > 1) {
              const std::vector<uint8_t> ws = shifted_weights(w + gi * Mg * Kc, Mg, Cg, g.kernel[0], g.kernel[1], S, z,
                                                              per_row);
              out->planes.push_back(prepare_plane_weights8(*k8, ws.data(), W.dtype() == DType::kInt8, Mg, Cg * S,
                                                           g.kernel[0], (g.kernel[1] + S - 1) / S, z, per_row));
            } else {
              out->planes.push_back(prepare_plane_weights8(*k8, w + gi * Mg * Kc, W.dtype() == DType::kInt8, Mg, Cg,
                                                           g.kernel[0], g.kernel[1], z, per_row));
            }
            continue;
          }
#if defined(MOSAICRT_X86_SIMD)
          if (direct) {
            out->direct.push_back(quant::prepare_direct_weights8(reinterpret_cast<const int8_t*>(w) + gi * Mg * Kc,
                                                                 Mg, Cg, g.kernel[0], g.kernel[1], g.dil[1] != 1));
            continue;
          }
#endif
          out->gemm.push_back(quant::prepare_a8(*k8, Mg, w + gi * Mg * Kc, W.dtype() == DType::kInt8, Kc, Kc,
                                                wzp.empty() ? nullptr : wzp.data() + (per_row ? gi * Mg : 0), per_row));
        }
        return out;
      });
#if defined(MOSAICRT_X86_SIMD)
    if (prepared && (!prepared->direct.empty() || !prepared->planes.empty())) {
      quant::DirectConv8 d;
      d.C = Cg, d.H = g.in[0], d.W = g.in[1], d.M = Mg, d.OH = g.out[0], d.OW = g.out[1];
      d.KH = g.kernel[0], d.KW = g.kernel[1], d.sh = g.stride[0], d.sw = g.stride[1];
      d.dh = g.dil[0], d.dw = g.dil[1], d.pt = g.pad_begin[0], d.pl = g.pad_begin[1];
      // column shifts: the kernel reads a copy of each image and group with the shifted channels, no left padding
      const int64_t S = prepared->planes.empty() ? 1 : prepared->column_shifts;
      quant::DirectConv8 ds = d;
      if (S > 1) {
        ds.C = Cg * S, ds.KW = (g.kernel[1] + S - 1) / S, ds.dw = S * g.dil[1], ds.pl = 0;
        ds.W = (d.OW - 1) * d.sw + (ds.KW - 1) * ds.dw + 1;  // the columns the kernel reads
      }
      static thread_local std::vector<uint8_t> shifted_buf;
      quant::Scratch<uint8_t> shifted(shifted_buf, S > 1 ? static_cast<size_t>(ds.C * ds.H * ds.W) : 0);
      for (int64_t n = 0; n < g.N; ++n)
        for (int64_t gi = 0; gi < g.group; ++gi) {
          const int64_t plane0 = (n * g.M + gi * Mg) * g.out_size;
          quant::DirectRequant8 part;
          if (rq) {
            part = *rq;
            part.bias = rq->bias ? rq->bias + gi * Mg : nullptr;
            part.multiplier = rq->multiplier + gi * Mg;
            part.y = rq->y + plane0;
          }
          const uint8_t* xg = static_cast<const uint8_t*>(X.raw()) + (n * g.C + gi * Cg) * g.in_size;
          if (!prepared->planes.empty() && S > 1) {
            shift_columns(xg, Cg, d.H, d.W, d.pl, d.dw, S, ds.W, static_cast<uint8_t>(xzp), shifted.data(),
                          ctx.threads());
            quant::conv8_planes_avx2(ds, shifted.data(), !x_u8, xzp, prepared->planes[static_cast<size_t>(gi)],
                                     rq ? nullptr : y + plane0, rq ? &part : nullptr, &ctx.threads());
          } else if (!prepared->planes.empty()) {
            quant::conv8_planes_avx2(d, xg, !x_u8, xzp, prepared->planes[static_cast<size_t>(gi)],
                                     rq ? nullptr : y + plane0, rq ? &part : nullptr, &ctx.threads());
          } else {
            quant::conv8_direct_vnni(d, xg, !x_u8, xzp, prepared->direct[static_cast<size_t>(gi)],
                                     rq ? nullptr : y + plane0, rq ? &part : nullptr, &ctx.threads());
          }
        }
      return true;
    }
#endif
    if (!y) return false;
    for (int64_t n = 0; n < g.N; ++n) {
      for (int64_t gi = 0; gi < g.group; ++gi) {
        const int64_t xoff = (n * g.C + gi * Cg) * g.in_size;
        pack_conv_columns(*k8, packed, static_cast<const uint8_t*>(X.raw()) + xoff, x_u8, xzp, g, Cg, ctx.threads());
        const int32_t* z = wzp.empty() ? nullptr : wzp.data() + (per_row ? gi * Mg : 0);
        int32_t* yg = y + (n * g.M + gi * Mg) * g.out_size;
        if (prepared)
          quant::igemm8(prepared->gemm[static_cast<size_t>(gi)], packed, yg, g.out_size, &ctx.threads());
        else
          quant::igemm8(Mg, w + gi * Mg * Kc, W.dtype() == DType::kInt8, Kc, Kc, z, per_row, packed, yg, g.out_size,
                        &ctx.threads());
      }
    }
    return false;
  }
  if (!y) return false;
  const int64_t Kp = (Kc + 1) & ~int64_t(1);
  auto make = [&] {
    auto pw = std::make_shared<PackedWeights>();
    pw->Kp = Kp;
    std::vector<int32_t> zp = wz ? quant::to_int32s(*wz) : std::vector<int32_t>();
    const bool per_row = zp.size() > 1;
    for (int64_t gi = 0; gi < g.group; ++gi) {
      const int32_t* z = zp.empty() ? nullptr : zp.data() + (per_row ? gi * Mg : 0);
      pw->groups.push_back(quant::pack_a(W, gi * Mg * Kc, Mg, Kc, z, per_row, Kp));
    }
    return pw;
  };
  const bool w_const = ctx.input_is_constant(w_in) && (!wz || ctx.input_is_constant(wz_in));
  const std::shared_ptr<PackedWeights> pw = w_const ? ctx.node_cache<PackedWeights>(make) : make();

  static thread_local quant::PackedB packed;  // (grown, kept: its panels are all rewritten each time)
  for (int64_t n = 0; n < g.N; ++n) {
    for (int64_t gi = 0; gi < g.group; ++gi) {
      const int64_t xoff = (n * g.C + gi * Cg) * g.in_size;
      if (X.dtype() == DType::kUInt8) pack_conv_columns16(packed, X.data<uint8_t>() + xoff, xzp, g, Cg, ctx.threads());
      else pack_conv_columns16(packed, X.data<int8_t>() + xoff, xzp, g, Cg, ctx.threads());
      int32_t* yg = y + (n * g.M + gi * Mg) * g.out_size;
      quant::igemm(Mg, pw->groups[static_cast<size_t>(gi)].data(), packed, yg, g.out_size, &ctx.threads());
    }
  }
  return false;
}

Shape out_shape(const ConvGeom& g) {
  Shape s{g.N, g.M};
  s.insert(s.end(), g.out.begin(), g.out.end());
  return s;
}

void conv_integer_kernel(OpContext& ctx) {
  const ConvGeom g = conv_geometry(ctx.node(), ctx.input(0), ctx.input(1), "ConvInteger");
  Tensor& Y = ctx.output(0, DType::kInt32, out_shape(g));
  integer_conv(ctx, g, 0, 2, 1, 3, Y.data<int32_t>(), "ConvInteger");
}

void qlinear_conv_kernel(OpContext& ctx) {
  const char* op = "QLinearConv";
  const Tensor& X = ctx.input(0);
  const ConvGeom g = conv_geometry(ctx.node(), X, ctx.input(3), op);
  const std::vector<double> xs = norm::to_doubles(ctx.input(1), "x_scale");
  const std::vector<double> ws = norm::to_doubles(ctx.input(4), "w_scale");
  const std::vector<double> ys = norm::to_doubles(ctx.input(6), "y_scale");
  MRT_CHECK_ARG(xs.size() == 1 && ys.size() == 1, op, ": x_scale and y_scale must be scalars");
  MRT_CHECK_ARG(ws.size() == 1 || static_cast<int64_t>(ws.size()) == g.M, op, ": w_scale ", ctx.input(4).describe(),
                " must be a scalar or hold one value per output channel (", g.M, ")");
  const Tensor* zy = ctx.optional_input(7);
  const DType out = zy ? zy->dtype() : X.dtype();
  MRT_CHECK_IMPL(out == DType::kUInt8 || out == DType::kInt8, op, ": output element type ", dtype_name(out),
                 " is not supported (uint8/int8)");
  MRT_CHECK_ARG(!zy || zy->numel() == 1, op, ": y_zero_point must be a scalar");
  const int32_t yzp = zy ? quant::to_int32s(*zy)[0] : 0;
  std::vector<int32_t> bias;
  if (const Tensor* B = ctx.optional_input(8)) {
    MRT_CHECK_ARG(B->dtype() == DType::kInt32 && B->numel() == g.M, op, ": bias must be int32 with ", g.M,
                  " elements, got ", B->describe());
    bias = quant::to_int32s(*B);
  }
  const Shape os = out_shape(g);
  const DType st = ctx.input(1).dtype();
  auto in_prec = [&](double v) {
    return st == DType::kDouble ? v : static_cast<double>(static_cast<float>(v));
  };
  std::vector<double> mult(static_cast<size_t>(g.M));
  for (int64_t m = 0; m < g.M; ++m) mult[m] = in_prec(in_prec(xs[0] * ws[ws.size() == 1 ? 0 : m]) / ys[0]);
  double lo, hi;
  quant::qrange(out, lo, hi);
  Tensor& Y = ctx.output(0, out, os);
  // the direct kernel requantizes each tile as it is finished
  quant::DirectRequant8 rq;
  rq.bias = bias.empty() ? nullptr : bias.data();
  rq.multiplier = mult.data();
  rq.zp = yzp, rq.lo = lo, rq.hi = hi;
  rq.y = static_cast<uint8_t*>(Y.raw());
  if (integer_conv(ctx, g, 0, 2, 3, 5, nullptr, op, &rq)) return;
  static thread_local std::vector<int32_t> acc_buf;
  quant::Scratch<int32_t> acc(acc_buf, static_cast<size_t>(shape_size(os)));
  integer_conv(ctx, g, 0, 2, 3, 5, acc.data(), op);
  const int64_t planes = g.N * g.M, S = g.out_size;
  auto write = [&](auto* y) {
    using TOut = std::remove_pointer_t<decltype(y)>;
    ctx.threads().parallel_for(planes, std::max<int64_t>(1, 8192 / std::max<int64_t>(1, S)), [&](int64_t b, int64_t e) {
      for (int64_t p = b; p < e; ++p) {
        const int64_t m = p % g.M;
        const int32_t bm = bias.empty() ? 0 : bias[m];
        quant::requantize_row<TOut>(acc.data() + p * S, bm, mult[m], yzp, lo, hi, y + p * S, S);
      }
    });
  };
  if (acc.empty()) return;
  if (out == DType::kUInt8) write(Y.data<uint8_t>());
  else write(Y.data<int8_t>());
}

void conv_check(const Node& node, int64_t) {
  const std::string ap = node.attr_string("auto_pad", "NOTSET");
  MRT_CHECK_IMPL(ap == "NOTSET" || ap.empty() || ap == "SAME_UPPER" || ap == "SAME_LOWER" || ap == "VALID",
                 node.label(), ": auto_pad '", ap, "' is not supported");
}

}  // namespace

void register_quant_conv_kernels(KernelRegistry& r) {
  r.add("ConvInteger", 10, conv_integer_kernel, conv_check);
  r.add("QLinearConv", 10, qlinear_conv_kernel, conv_check);
}

}  // namespace mrt
