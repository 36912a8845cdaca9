// Sliding-window geometry shared by the nn kernels (Conv, ConvTranspose, pooling,
// Col2Im): attribute parsing, pad/output-size resolution and small index helpers.
#pragma once
#include <algorithm>
#include <cstdint>
#include <string>
#include <type_traits>
#include <vector>

#include "../gemm/sgemm.h"
#include "../kernel.h"
#include "elementwise_math.h"

namespace mrt {
namespace nn {

enum class AutoPad { kNotSet, kSameUpper, kSameLower, kValid };

inline AutoPad parse_auto_pad(const Node& node) {
  std::string s = node.attr_string("auto_pad", "NOTSET");
  if (s == "NOTSET" || s.empty()) return AutoPad::kNotSet;
  if (s == "SAME_UPPER") return AutoPad::kSameUpper;
  if (s == "SAME_LOWER") return AutoPad::kSameLower;
  if (s == "VALID") return AutoPad::kValid;
  fail(MRT_INVALID_MODEL, "auto_pad must be NOTSET, SAME_UPPER, SAME_LOWER or VALID, got '", s, "'");
}

// Floor division for possibly negative numerators (positive divisor).
inline int64_t floor_div(int64_t a, int64_t b) { return a >= 0 ? a / b : -((-a + b - 1) / b); }
inline int64_t ceil_div(int64_t a, int64_t b) { return -floor_div(-a, b); }

// Indices i in [0, n) with 0 <= i * s + off < limit form the range [lo, hi).
inline void valid_range(int64_t n, int64_t s, int64_t off, int64_t limit, int64_t& lo, int64_t& hi) {
  lo = off >= 0 ? 0 : ceil_div(-off, s);
  hi = (limit - 1 - off) < 0 ? 0 : floor_div(limit - 1 - off, s) + 1;
  hi = std::min(hi, n);
  lo = std::min(lo, hi);
}

// Output rows per work item of a 2-D pooling over rows of width W with windows KH rows high: about 4096 input
// values read.
inline int64_t pool_rows_per_item(int64_t KH, int64_t W) {
  return std::max<int64_t>(1, 4096 / std::max<int64_t>(1, KH * W));
}

// Resolved geometry of a sliding window over `nsp` spatial dimensions.
struct Window {
  size_t nsp = 0;
  std::vector<int64_t> in, kernel, stride, dilation, pad_begin, pad_end, out;
  int64_t eff_kernel(size_t d) const { return (kernel[d] - 1) * dilation[d] + 1; }
  // Promote to exactly `rank` spatial dims by prepending unit dims (rank >= nsp).
  void promote(size_t rank) {
    while (nsp < rank) {
      in.insert(in.begin(), 1);
      kernel.insert(kernel.begin(), 1);
      stride.insert(stride.begin(), 1);
      dilation.insert(dilation.begin(), 1);
      pad_begin.insert(pad_begin.begin(), 0);
      pad_end.insert(pad_end.begin(), 0);
      out.insert(out.begin(), 1);
      ++nsp;
    }
  }
};

// Read the stride/dilation/pads attributes for `nsp` spatial dims and check their values.
inline void read_window_attrs(const Node& node, size_t nsp, const char* op, Window& w) {
  w.nsp = nsp;
  w.stride = node.attr_ints("strides", std::vector<int64_t>(nsp, 1));
  w.dilation = node.attr_ints("dilations", std::vector<int64_t>(nsp, 1));
  std::vector<int64_t> pads = node.attr_ints("pads", std::vector<int64_t>(2 * nsp, 0));
  if (w.stride.empty()) w.stride.assign(nsp, 1);
  if (w.dilation.empty()) w.dilation.assign(nsp, 1);
  if (pads.empty()) pads.assign(2 * nsp, 0);
  MRT_CHECK_ARG(w.stride.size() == nsp, op, ": 'strides' has ", w.stride.size(), " values but the input has ", nsp,
                " spatial dimensions");
  MRT_CHECK_ARG(w.dilation.size() == nsp, op, ": 'dilations' has ", w.dilation.size(),
                " values but the input has ", nsp, " spatial dimensions");
  MRT_CHECK_ARG(pads.size() == 2 * nsp, op, ": 'pads' has ", pads.size(), " values, expected ", 2 * nsp);
  for (size_t d = 0; d < nsp; ++d) {
    MRT_CHECK_ARG(w.stride[d] >= 1, op, ": strides must be >= 1, got ", w.stride[d]);
    MRT_CHECK_ARG(w.dilation[d] >= 1, op, ": dilations must be >= 1, got ", w.dilation[d]);
    MRT_CHECK_ARG(pads[d] >= 0 && pads[d + nsp] >= 0, op, ": pads must be >= 0");
  }
  w.pad_begin.assign(pads.begin(), pads.begin() + static_cast<std::ptrdiff_t>(nsp));
  w.pad_end.assign(pads.begin() + static_cast<std::ptrdiff_t>(nsp), pads.end());
}

// Compute output sizes (and pads for auto_pad) of a forward sliding window (Conv, pools).
// `ceil_mode` only applies to explicit padding, as in the ONNX pooling ops.
inline void resolve_forward(Window& w, AutoPad auto_pad, bool ceil_mode, const char* op) {
  w.out.assign(w.nsp, 0);
  for (size_t d = 0; d < w.nsp; ++d) {
    const int64_t in = w.in[d], s = w.stride[d], k = w.eff_kernel(d);
    MRT_CHECK_ARG(w.kernel[d] >= 1, op, ": kernel dimensions must be >= 1, got ", w.kernel[d]);
    switch (auto_pad) {
      case AutoPad::kSameUpper:
      case AutoPad::kSameLower: {
        const int64_t out = ceil_div(in, s);
        const int64_t total = std::max<int64_t>(0, (out - 1) * s + k - in);
        const int64_t small = total / 2;
        w.pad_begin[d] = auto_pad == AutoPad::kSameUpper ? small : total - small;
        w.pad_end[d] = total - w.pad_begin[d];
        w.out[d] = out;
        break;
      }
      case AutoPad::kValid:
        w.pad_begin[d] = w.pad_end[d] = 0;
        MRT_CHECK_ARG(in >= k, op, ": kernel extent ", k, " is larger than input dimension ", in,
                      " (spatial axis ", d, ")");
        w.out[d] = (in - k) / s + 1;
        break;
      case AutoPad::kNotSet: {
        const int64_t span = in + w.pad_begin[d] + w.pad_end[d] - k;
        MRT_CHECK_ARG(span >= 0, op, ": kernel extent ", k, " is larger than the padded input dimension ",
                      in + w.pad_begin[d] + w.pad_end[d], " (spatial axis ", d, ")");
        if (ceil_mode) {
          int64_t out = ceil_div(span, s) + 1;
          // The last window must start inside the input or the leading padding.
          if ((out - 1) * s >= in + w.pad_begin[d]) --out;
          w.out[d] = out;
        } else {
          w.out[d] = span / s + 1;
        }
        break;
      }
    }
  }
}

// 16-bit float tensors (float16/bfloat16) widened to float32 and back (round to nearest even).
inline std::vector<float> widen(const Tensor& t) {
  std::vector<float> out(static_cast<size_t>(t.numel()));
  const uint16_t* src = t.data_as<uint16_t>();
  if (t.dtype() == DType::kFloat16) {
    halves_to_floats(src, out.data(), t.numel());
  } else if (t.dtype() == DType::kBFloat16) {
    for (size_t i = 0; i < out.size(); ++i) out[i] = bfloat16_to_float(src[i]);
  } else {
    fail(MRT_INTERNAL, "widen: ", dtype_name(t.dtype()), " is not a 16-bit float type");
  }
  return out;
}
inline void narrow(const float* src, Tensor& t) {
  uint16_t* dst = t.data_as<uint16_t>();
  const int64_t n = t.numel();
  if (t.dtype() == DType::kFloat16) {
    floats_to_halves(src, dst, n);
  } else {
    for (int64_t i = 0; i < n; ++i) dst[i] = float_to_bfloat16(src[i]);
  }
}

// An activation applied to accumulators before they leave the registers: Relu (max(v, 0), a NaN giving 0) or
// Clip (max(lo, v) then min(hi, .), a NaN staying NaN), as the scalar output stage computes them.
struct RegisterAct {
  enum Kind { kNone, kRelu, kClip } kind = kNone;
  float lo = 0.f, hi = 0.f;
};

// Runs stage(kind, with_bias) with the activation kind and the presence of a bias as compile-time constants
// (std::integral_constant), so that a tile's output stage is compiled once per case and tests neither for each
// vector. Both this and `stage` must be inlined into the tile (stage declared always_inline too): otherwise the
// tile's sums are kept in memory.
template <class Stage>
__attribute__((always_inline)) inline void with_output_stage(const RegisterAct& act, bool has_bias, Stage&& stage) {
  using Relu = std::integral_constant<RegisterAct::Kind, RegisterAct::kRelu>;
  using Clip = std::integral_constant<RegisterAct::Kind, RegisterAct::kClip>;
  using None = std::integral_constant<RegisterAct::Kind, RegisterAct::kNone>;
  switch (act.kind) {
    case RegisterAct::kRelu:
      has_bias ? stage(Relu(), std::true_type()) : stage(Relu(), std::false_type());
      break;
    case RegisterAct::kClip:
      has_bias ? stage(Clip(), std::true_type()) : stage(Clip(), std::false_type());
      break;
    default:
      has_bias ? stage(None(), std::true_type()) : stage(None(), std::false_type());
  }
}

#if defined(MOSAICRT_X86_SIMD)
// A tile of m output positions (rows, stride ldc) by n output channels (columns) into the channels' planes:
// y[ch * positions + r] = act(c[r * ldc + ch] + bias[ch] (+ z[ch * positions + r])), bias and z optional
// (nn_conv_stage_avx512.cc; needs AVX-512 F).
void positions_tile_to_planes_avx512(const float* c, int64_t ldc, int64_t m, int64_t n, const float* bias,
                                     const float* z, const RegisterAct& act, float* y, int64_t positions);
// The same on AVX2 (nn_conv_stage_avx2.cc), 8 x 8 blocks transposed in registers.
void positions_tile_to_planes_avx2(const float* c, int64_t ldc, int64_t m, int64_t n, const float* bias,
                                   const float* z, const RegisterAct& act, float* y, int64_t positions);
#endif

// One plane of a depthwise 2-D convolution (one input channel -> one output channel).
struct DepthwisePlane {
  int64_t H, W, KH, KW, OH, OW, sh, sw, dh, dw, ph, pw;
};
// `lanes` planes interleaved (flat[i * lanes + c] = plane c's value i, i < H * W) copied into the zero-padded
// layout of the blocked depthwise kernels: xi[(r * cols + j) * lanes + c] holds input row r - ph, column j - pw
// (0 outside the plane), for the `rows` x `cols` padded positions the windows reach.
inline void pad_interleaved_planes(const float* flat, int64_t lanes, const DepthwisePlane& g, int64_t rows,
                                   int64_t cols, float* xi) {
  const int64_t lo = std::clamp<int64_t>(g.pw, 0, cols), hi = std::clamp<int64_t>(g.pw + g.W, lo, cols);
  for (int64_t r = 0; r < rows; ++r) {
    float* d = xi + r * cols * lanes;
    const int64_t ih = r - g.ph;
    if (ih < 0 || ih >= g.H) {
      std::fill(d, d + cols * lanes, 0.f);
      continue;
    }
    std::fill(d, d + lo * lanes, 0.f);
    std::copy(flat + (ih * g.W + lo - g.pw) * lanes, flat + (ih * g.W + hi - g.pw) * lanes, d + lo * lanes);
    std::fill(d + hi * lanes, d + cols * lanes, 0.f);
  }
}

#if defined(MOSAICRT_X86_SIMD)
// y[OH, OW] = act(bias + conv(x[H, W], w[KH, KW])) (nn_depthwise_avx2.cc; needs AVX2 + FMA), `act` applied before
// the stores.
void depthwise_plane_avx2(const float* x, const float* w, float bias, float* y, const DepthwisePlane& g,
                          const RegisterAct& act);
// The same on AVX-512 (nn_depthwise_avx512.cc) for the windows depthwise3x3_avx512_applies accepts: 3x3,
// stride 1 or 2 in both directions, no dilation. Reads the plane in place (no padded copy).
bool depthwise3x3_avx512_applies(const DepthwisePlane& g);
// `act` is applied before the stores.
void depthwise3x3_plane_avx512(const float* x, const float* w, float bias, float* y, const DepthwisePlane& g,
                               const RegisterAct& act);
// The same for 8 consecutive channels at once (planes x[c * H * W], filters w[c * KH * KW], bias[c] or
// null, outputs y[c * OH * OW]), the channels in the vector lanes: for small outputs, where a plane's rows
// are too short for vectors along them.
void depthwise_block8_avx2(const float* x, const float* w, const float* bias, float* y, const DepthwisePlane& g,
                           const RegisterAct& act);
// The same for 16 planes on AVX-512 (nn_depthwise_avx512.cc), with `act` applied in the registers.
void depthwise_block16_avx512(const float* x, const float* w, const float* bias, float* y, const DepthwisePlane& g,
                              const RegisterAct& act);
// Conv's output stage on one row: y[i] = y[i] + bias (+ z[i] when z), then Relu when relu
// (nn_conv_stage_avx2.cc).
void conv_stage_row_avx2(float* y, const float* z, float bias, int64_t n, bool relu);
// The same with Clip(lo, hi) (Relu6 and other bounds) instead of Relu.
void conv_stage_row_clip_avx2(float* y, const float* z, float bias, int64_t n, float lo, float hi);
// ai.mosaicrt FusedConv's input stage on `rows` rows of n values: dst[k * ld + j] = relu(x[k * ldx + j] *
// scale[k] + shift[k]) for j < n, 0 for n <= j < ld (nn_conv_stage_avx2.cc).
void input_stage_rows_avx2(const float* x, int64_t ldx, const float* scale, const float* shift, int64_t rows,
                           int64_t n, int64_t ld, float* dst);
// The pointwise kernels' staged span: positions s0 .. s1 of the K planes (P positions each) into K rows ld apart,
// through the input stage when scale is given (zeros past the span), else copied (the rest of each row untouched).
inline void stage_span_rows_avx2(const float* x, int64_t P, const float* scale, const float* shift, int64_t K,
                                 int64_t s0, int64_t s1, int64_t ld, float* dst) {
  if (scale) {
    input_stage_rows_avx2(x + s0, P, scale, shift, K, s1 - s0, ld, dst);
    return;
  }
  for (int64_t k = 0; k < K; ++k) std::copy(x + k * P + s0, x + k * P + s1, dst + k * ld);
}

// 2-D MaxPool without dilation or Indices (nn_pool_avx512.cc; needs AVX-512 F + BW): `planes` planes of H x W
// into OH x OW, windows KH x KW with strides sh, sw from the padding pt (top) and pl (left).
struct MaxPool2d {
  int64_t planes, H, W, OH, OW, KH, KW, sh, sw, pt, pl;
};
void max_pool_2d_float_avx512(const MaxPool2d& g, const float* x, float* y, ThreadPool& pool);
// The same on AVX2 (nn_pool_avx2.cc) for strides 1 and 2 along W; false, with nothing written, for others.
bool max_pool_2d_float_avx2(const MaxPool2d& g, const float* x, float* y, ThreadPool& pool);
// AveragePool over the same geometry: a window's sum over div_h[oh] * div_w[ow], its tap counts along each axis
// (with or without the padding), 0 where that is 0. False, with nothing written, for windows wider than the
// kernel keeps in registers.
bool avg_pool_2d_float_avx512(const MaxPool2d& g, const float* div_h, const float* div_w, const float* x, float* y,
                              ThreadPool& pool);
// 8-bit planes: uint8, or int8 (is_signed) as their bytes.
void max_pool_2d_bytes_avx512(const MaxPool2d& g, const uint8_t* x, bool is_signed, uint8_t* y, ThreadPool& pool);
// The same on AVX2 (nn_pool_avx2.cc).
void max_pool_2d_bytes_avx2(const MaxPool2d& g, const uint8_t* x, bool is_signed, uint8_t* y, ThreadPool& pool);

// One group of a 2-D convolution (any kernel, stride, dilation and padding), computed directly
// (nn_conv_direct_avx512.cc; needs AVX-512 F).
struct DirectConv {
  int64_t C, H, W;    // input channels and plane
  int64_t M;          // output channels
  int64_t KH, KW, sh, sw, dh, dw;
  int64_t pt, pl;     // padding at the top and left (the bottom and right follow from OH, OW)
  int64_t OH, OW;
  // Applied to the accumulators before they leave the registers (the rest of an output stage goes
  // through `epi`): bias[m] added when set, then `act`.
  const float* bias = nullptr;
  RegisterAct act;
};
// w[M, K] in blocks of `lanes` output channels: for each k the block's values contiguous, the last block zero
// padded. The direct kernels' filter layout (K = C x taps, lanes direct_conv_lanes(M) or direct_conv_lanes_avx2(M))
// and the pointwise kernels' (lanes kPointwiseRows).
AlignedVector<float> pack_filter_blocks(const float* w, int64_t M, int64_t K, int64_t lanes);
// Output channels per block of the direct kernel (16, 32, 48 or 64, whichever pads M least).
int direct_conv_lanes(int64_t M);
// y[M, OH * OW] = conv(x[C, H, W]); `epi` (if set) is applied to each finished chunk of positions.
void conv_direct_avx512(const DirectConv& g, const float* x, const float* wpacked, float* y, const TileEpilogue& epi,
                        ThreadPool* pool);
// The same on AVX2 + FMA (nn_conv_direct_avx2.cc), in blocks of direct_conv_lanes_avx2(M) channels (8, 16 or 24).
int direct_conv_lanes_avx2(int64_t M);
void conv_direct_avx2(const DirectConv& g, const float* x, const float* wpacked, float* y, const TileEpilogue& epi,
                      ThreadPool* pool);

// A pointwise (1x1, stride 1, unpadded) convolution of one image and group, y[M, P] = w[M, K] x[K, P], with the
// positions in the vector lanes (nn_conv_pointwise_avx512.cc; needs AVX-512 F): the input rows are read where
// they are (no packed copy) and each output row leaves the registers finished: + bias[m], + z[m, p] (the
// residual, same layout as y), then `act`; bias and z optional.
struct PointwiseConv {
  int64_t K, M, P;
  const float* bias = nullptr;
  const float* z = nullptr;
  RegisterAct act;
  // ai.mosaicrt FusedConv's input stage, or null: the kernel reads relu(x[k] * in_scale[k] + in_shift[k])
  const float* in_scale = nullptr;
  const float* in_shift = nullptr;
};
// wpacked: w[M, K] in blocks of kPointwiseRows output channels (pack_filter_blocks).
constexpr int64_t kPointwiseRows = 6;
void conv_pointwise_avx512(const PointwiseConv& g, const float* x, const float* wpacked, float* y, ThreadPool* pool);
// One tile of the pointwise kernel over arbitrary input rows: for r < rows (<= kPointwiseRows) and n <= 64
// flat positions q = q0 + j over staged rows of Wq columns, of which the first OW are outputs: act(bias[r]
// + sum_s w[s][r] x[offs[s] + j]) is output (q / Wq, q % Wq), stored at y[r * ldy + (q / Wq) * OW + q % Wq]
// when q % Wq < OW, and computed and dropped otherwise (Wq >= 16, so a vector of positions spans at most two
// rows); `wpacked`: one block of pack_filter_blocks with lanes kPointwiseRows (steps x kPointwiseRows values),
// bias optional.
struct FlatRows {
  int64_t Wq, OW, row, col;  // the tile's first flat position is row * Wq + col (col < Wq)
};
// Where the outputs among a tile's n flat positions go, per vector of 16 of them: the lanes that are outputs
// (keep, the columns before OW of their staged row), how many (kept) and the output index of the first (at,
// row * OW + column); the kept lanes of a vector are consecutive outputs, however many row ends it spans. The
// same for every block of channels over the tile, so worked out once for all of them.
struct FlatTile {
  uint16_t keep[4];
  int64_t kept[4], at[4];
};
FlatTile flat_tile(const FlatRows& flat, int64_t n);
void pointwise_tile_offs_avx512(const float* x, const int64_t* offs, int64_t steps, const float* wpacked,
                                int64_t rows, int64_t n, const float* bias, const RegisterAct& act, float* y,
                                int64_t ldy, const FlatTile& lanes);
// A direct convolution of few (channel, tap) steps (conv_uses_direct_lanes) with the positions in the vector
// lanes: tiles of 64 flat positions of the staged rows (pointwise_tile_offs_avx512; outputs at least 16 wide,
// as conv_uses_direct_lanes asks, so the staged rows are too) by kPointwiseRows channels over the staged planes
// of conv_direct_avx512, each output written once, finished, with no transpose. `wpacked`: the filters
// [M, C * KH * KW] in pack_filter_blocks' layout (lanes kPointwiseRows).
void conv_direct_lanes_avx512(const DirectConv& g, const float* x, const float* wpacked, float* y,
                              const TileEpilogue& epi, ThreadPool* pool);
// The same two kernels on AVX2 + FMA (nn_conv_pointwise_avx2.cc, nn_conv_direct_avx2.cc), with tiles of
// kPointwiseTileAvx2 positions (two vectors of 8) by kPointwiseRows channels, in the same filter layout.
constexpr int64_t kPointwiseTileAvx2 = 16;
void conv_pointwise_avx2(const PointwiseConv& g, const float* x, const float* wpacked, float* y, ThreadPool* pool);
// Where the outputs among an AVX2 tile's n <= 16 flat positions go, per vector i of 8 lanes: its kept lanes (the
// outputs: columns before OW) are consecutive outputs, from output index to[i] on, `kept[i]` of them; with gap[i]
// they are not lanes [0, kept) (the vector starts past a row's outputs, or spans a row's end and the next row's
// start) and perm[i] moves them there. With `spill` the vector may be stored whole at to[i]: its lanes past
// kept[i] land on outputs the tile's next vector or the next tile of the same work item writes afterwards (false on
// an item's last tile and the map's last).
struct FlatTile8 {
  alignas(32) int32_t perm[2][8];
  int64_t to[2];
  uint8_t kept[2];
  bool gap[2];
  bool spill;
};
FlatTile8 flat_tile8(const FlatRows& flat, int64_t n, bool spill);
void pointwise_tile_offs_avx2(const float* x, const int64_t* offs, int64_t steps, const float* wpacked, int64_t rows,
                              int64_t n, const float* bias, const RegisterAct& act, float* y, int64_t ldy,
                              const FlatTile8& lanes);
void conv_direct_lanes_avx2(const DirectConv& g, const float* x, const float* wpacked, float* y,
                            const TileEpilogue& epi, ThreadPool* pool);
#endif

// A 3x3, stride-1, undilated convolution of one image and group by Winograd F(2x2, 3x3)
// (nn_winograd.cc): the output in tiles of 2x2 positions, TH x TW of them (T = TH * TW).
struct Winograd23 {
  int64_t C, H, W;  // input channels and plane
  int64_t M;        // output channels
  int64_t pt, pl;   // padding at the top and left
  int64_t OH, OW;
  int64_t tiles_h() const { return (OH + 1) / 2; }
  int64_t tiles_w() const { return (OW + 1) / 2; }
};
// u[16][M][C]: the transformed filters of w[M, C, 3, 3] (one M x C matrix per element of the 4x4 grid).
void winograd23_filters(const float* w, int64_t M, int64_t C, float* u);
// Columns past the last tile that the transforms' rows need (v's ldv and mt's ldm at least t1 - t0 + this).
constexpr int64_t kWinogradPad = 4;
// v[C][16][ldv]: the transformed input patches of the channels c0..c1 of x[C, H, W] and the tiles
// t0..t1 (column t - t0).
void winograd23_input(const Winograd23& g, const float* x, int64_t c0, int64_t c1, int64_t t0, int64_t t1, float* v,
                      int64_t ldv);
// Called on each finished piece of an output row (channel m, n values at offset `at` of its plane, at y)
// while it is in cache: bias, residual, activation.
struct WinogradOutputStage {
  void (*apply)(const void* ctx, int64_t m, int64_t at, int64_t n, float* y) = nullptr;
  const void* ctx = nullptr;
};
// The outputs of the tiles t0..t1 for the channels m0..m1 of y[M, OH, OW], from the 16 GEMM products
// mt[M][16][ldm] (column t - t0).
void winograd23_output(const Winograd23& g, const float* mt, int64_t ldm, int64_t m0, int64_t m1, int64_t t0,
                       int64_t t1, float* y, const WinogradOutputStage& stage);

// col2im accumulation over all sliding positions (defined in nn.cc): for every channel c,
// img[c, pos * stride - pad_begin + k * dilation] += col[(c, k), pos], where g.in is the
// image size and g.out the sliding-position grid (g.nsp >= 1; 2-D has a fast path).
void col2im_float(const float* col, int64_t channels, const Window& g, float* img);
void col2im_double(const double* col, int64_t channels, const Window& g, double* img);

}  // namespace nn

// Registered from nn_pool.cc (pooling, MaxUnpool, Col2Im) and nn_deform_conv.cc
// (DeformConv, CausalConvWithState).
void register_nn_pool_kernels(KernelRegistry& r);
void register_nn_deform_kernels(KernelRegistry& r);

}  // namespace mrt
