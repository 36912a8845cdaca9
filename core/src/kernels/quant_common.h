// Helpers shared by the quantization kernels (quant*.cc): quantized value ranges,
// zero-point access and the integer GEMM used by MatMulInteger, QLinearMatMul,
// ConvInteger and QLinearConv.
//
// Integer GEMM, two forms:
// - int16: both operands are widened to int16 after subtracting their zero points (values
//   in [-255, 255]), so every product and every pair sum is exact in int32. B is packed
//   once into panels of kIgemmPanel columns with pairs of k interleaved, the layout the
//   AVX2 kernel consumes with vpmaddwd (16 multiply-adds per instruction) and the NEON one
//   with smlal.
// - 8-bit (igemm8): the raw bytes on dot-product instructions, zero points applied after.
//   Used when the CPU has such a kernel (AVX512-VNNI, arm64 dotprod / i8mm; AVX2's vpmaddubsw, whose saturating
//   pair sums are kept in range by a per-row fix of A: the convolutions, whose A is their weights).
// The kernels are chosen at run time through gemm/backend_registry.h
// (MOSAICRT_IGEMM_KERNEL=portable|neon|avx2|avx2u8s8|dotprod|i8mm|avx512vnni forces a lower one).
#pragma once
#include <cstdint>
#include <type_traits>
#include <vector>
#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#include "../aligned_vector.h"
#include "../kernel.h"
#include "norm_util.h"

namespace mrt {
namespace quant {

constexpr int64_t kIgemmPanel = 16;

inline bool is_quant_int(DType t) {
  return t == DType::kUInt8 || t == DType::kInt8 || t == DType::kUInt16 || t == DType::kInt16 ||
         t == DType::kInt32;
}

inline void qrange(DType t, double& lo, double& hi) {
  switch (t) {
    case DType::kUInt8: lo = 0; hi = 255; break;
    case DType::kInt8: lo = -128; hi = 127; break;
    case DType::kUInt16: lo = 0; hi = 65535; break;
    case DType::kInt16: lo = -32768; hi = 32767; break;
    case DType::kInt32: lo = -2147483648.0; hi = 2147483647.0; break;
    default: fail(MRT_NOT_IMPLEMENTED, "quantized element type ", dtype_name(t), " is not supported");
  }
}

// All elements of an 8/16/32-bit integer tensor as int32.
inline std::vector<int32_t> to_int32s(const Tensor& t) {
  std::vector<int32_t> out(static_cast<size_t>(t.numel()));
  switch (t.dtype()) {
    case DType::kUInt8: { const uint8_t* p = t.data<uint8_t>(); for (size_t i = 0; i < out.size(); ++i) out[i] = p[i]; break; }
    case DType::kInt8: { const int8_t* p = t.data<int8_t>(); for (size_t i = 0; i < out.size(); ++i) out[i] = p[i]; break; }
    case DType::kUInt16: { const uint16_t* p = t.data<uint16_t>(); for (size_t i = 0; i < out.size(); ++i) out[i] = p[i]; break; }
    case DType::kInt16: { const int16_t* p = t.data<int16_t>(); for (size_t i = 0; i < out.size(); ++i) out[i] = p[i]; break; }
    case DType::kInt32: { const int32_t* p = t.data<int32_t>(); for (size_t i = 0; i < out.size(); ++i) out[i] = p[i]; break; }
    default: fail(MRT_NOT_IMPLEMENTED, "zero point of element type ", dtype_name(t.dtype()), " is not supported");
  }
  return out;
}

// B operand packed for igemm: (b - zero_point) as int16 in panels of kIgemmPanel columns;
// within a panel, for each pair of rows (2kp, 2kp+1): col0(k0,k1), col1(k0,k1), ...
// Columns past N and the odd row past K are zero.
struct PackedB {
  int64_t K = 0, N = 0, Kp = 0, panels = 0;
  std::vector<int16_t> data;
  const int16_t* panel(int64_t p) const { return data.data() + p * Kp * kIgemmPanel; }
};

// Pack a K x N matrix (row stride ldb) of uint8/int8 values. zp: nullptr (0), one value
// (zp_per_col false) or N values, one per column.
void pack_b_u8(PackedB& out, const uint8_t* B, int64_t ldb, int64_t K, int64_t N, const int32_t* zp, bool zp_per_col);
void pack_b_s8(PackedB& out, const int8_t* B, int64_t ldb, int64_t K, int64_t N, const int32_t* zp, bool zp_per_col);
// An already zero-point-adjusted int16 K x N matrix packed in parts (QLinearConv's columns, made a slice of
// output positions at a time): begin sizes `out` for K x N, then each call packs columns [n0, n0 + n) (n0 a
// multiple of kIgemmPanel, n up to N - n0 and a multiple of it unless the last) from src (K rows of stride ld),
// whole panels including their zero padding; calls on disjoint columns may run at once.
void pack_b16_begin(PackedB& out, int64_t K, int64_t N);
void pack_b16_columns(PackedB& out, const int16_t* src, int64_t ld, int64_t n0, int64_t n);

// A operand: M rows of Kp int16 values (a - zero_point), zero past K. zp: nullptr,
// one value, or M values (one per row).
std::vector<int16_t> pack_a(const Tensor& A, int64_t offset, int64_t M, int64_t K, const int32_t* zp, bool zp_per_row,
                            int64_t Kp);

// Micro-kernel of the int16 GEMM: a rows x kIgemmPanel block of C for one panel (rows <=
// kIgemmRows); `valid_n` columns are stored. Kernels: portable (quant_igemm.cc), avx2,
// neon; chosen through the kernel registry (gemm/backend_registry.h, family kIgemm16).
using IgemmBlockFn = void (*)(int64_t rows, int64_t Kp, const int16_t* A, int64_t lda, const int16_t* panel,
                              int32_t* C, int64_t ldc, int64_t valid_n);
constexpr int64_t kIgemmRows = 6;  // rows per micro-kernel call

// B's raw bytes in PackedB's panel order (pairs of k interleaved per column), for a constant B: half the memory of
// the int16 panels, widened in registers by the kernel. The zero points are applied to the sums instead:
// C[m, n] = sum_k a16[m, k] * b[k, n] - rowsum[m] * zb[n], with rowsum[m] = sum_k a16[m, k] (exact in wrapping int32
// arithmetic, like the rest).
struct PackedBBytes {
  int64_t K = 0, N = 0, Kp = 0, panels = 0;
  bool b_signed = false;      // int8 bytes, else uint8
  std::vector<uint8_t> data;  // panels of Kp x kIgemmPanel bytes, zero past K and N
  std::vector<int32_t> zb;    // panels * kIgemmPanel column zero points (0 past N); empty when every one is 0
  const uint8_t* panel(int64_t p) const { return data.data() + p * Kp * kIgemmPanel; }
};
// B: K x N uint8 or int8 (b_signed) bytes, row stride ldb; zp as for pack_b_u8.
void pack_b_bytes(PackedBBytes& out, const void* B, bool b_signed, int64_t ldb, int64_t K, int64_t N,
                  const int32_t* zp, bool zp_per_col);
// Micro-kernel of the byte form: as IgemmBlockFn over a PackedBBytes panel, without its zero points (C = A16 x b;
// igemm_bytes_with applies them).
using IgemmBytesBlockFn = void (*)(int64_t rows, int64_t Kp, const int16_t* A, int64_t lda, const uint8_t* panel,
                                   bool b_signed, int32_t* C, int64_t ldc, int64_t valid_n);
struct Igemm16Kernel {
  const char* name;
  IgemmBlockFn block;
  IgemmBytesBlockFn bytes_block;  // nullptr: this kernel has no byte form (B is packed as int16)
};
#if defined(MOSAICRT_X86_SIMD)
IgemmBlockFn igemm_block_avx2();             // quant_igemm_avx2.cc
IgemmBytesBlockFn igemm_bytes_block_avx2();  // quant_igemm_avx2.cc
#endif

// The int16 kernel igemm() uses on this CPU, and one by name ("portable", "neon", "avx2")
// if this build and CPU support it, else nullptr.
const Igemm16Kernel& igemm16_active();
const Igemm16Kernel* igemm16_find(const char* name);

// C[M, N] (row stride ldc) = A16[M, Kp] * B. Threads over row blocks and panels.
void igemm(int64_t M, const int16_t* A, const PackedB& B, int32_t* C, int64_t ldc, ThreadPool* pool);
void igemm_with(const Igemm16Kernel& kernel, int64_t M, const int16_t* A, const PackedB& B, int32_t* C, int64_t ldc,
                ThreadPool* pool);
// The same over B's byte form, on a kernel with one (kernel.bytes_block).
void igemm_bytes_with(const Igemm16Kernel& kernel, int64_t M, const int16_t* A, const PackedBBytes& B, int32_t* C,
                      int64_t ldc, ThreadPool* pool);

// 8-bit GEMM on dot-product instructions (AVX512-VNNI vpdpbusd; arm64 SDOT, SMMLA): the
// raw bytes are multiplied, in the domain the kernel wants (int8 or uint8 per operand:
// a byte whose type differs is shifted by flipping its top bit, its zero point by 128),
// and the zero points applied afterwards with row/column sums:
//   C = acc - zb[n] * rowsum[m] + za[m] * (K * zb[n] - colsum[n])
// (exact in wrapping int32 arithmetic whenever the result fits in int32, like the int16
// path). Layout of a B panel of `panel` columns: for each group of `kgroup` values of k,
// column j's kgroup bytes at j * kgroup; K is zero padded to a multiple of `kalign`.
// A: rows of Kp bytes (row stride lda), zero padded past K, the number of rows a
// multiple of `rows` (zero rows), so a kernel may read a whole block of rows.
using Igemm8BlockFn = void (*)(int64_t rows, int64_t Kp, const uint8_t* A, int64_t lda, const int8_t* panel,
                               const int32_t* za, const int32_t* rowsum, const int32_t* zb, const int32_t* colfix,
                               int32_t* C, int64_t ldc, int64_t valid_n);
// Column sums of one packed panel (`panel` int32 values, in B's domain), Kp values of k.
using Igemm8ColsumFn = void (*)(const int8_t* panel, int64_t Kp, int32_t* colsum);
// For a kernel whose products are summed in saturating pairs (AVX2 vpmaddubsw): adds to a finished tile what
// prepare_a8 took off A's pairs, C[r, n] += value[e] * b[k[e], n] for each row r < rows and entry e in
// [begin[r], begin[r + 1]) (B's bytes read from the panel, in its domain).
using Igemm8FixFn = void (*)(int64_t rows, const int32_t* begin, const int32_t* fix_k, const int32_t* fix_value,
                             const int8_t* panel, int32_t* C, int64_t ldc, int64_t valid_n);
struct Igemm8Kernel {
  const char* name;
  bool a_signed, b_signed;  // domain of each operand's bytes: int8 (true) or uint8
  int64_t kgroup;           // 4 (dot products of 4 bytes) or 8 (2x8 by 8x2 matrix products)
  int64_t kalign;           // K is padded to a multiple of this (a multiple of kgroup)
  int64_t panel;            // columns per B panel
  int64_t rows;             // rows per micro-kernel call
  Igemm8BlockFn block;
  Igemm8ColsumFn colsum;    // nullptr: the generic column sums
  // 0: exact sums. Else the kernel sums the products of each pair of k (2j, 2j + 1) in int16 with saturation,
  // which B's full range cannot reach while |a0| + |a1| <= pair_limit or a0, a1 differ in sign; prepare_a8
  // moves every other pair's a1 inside that bound and `fix` adds the difference back.
  int32_t pair_limit;
  Igemm8FixFn fix;
};
#if defined(MOSAICRT_X86_SIMD)
const Igemm8Kernel* igemm8_vnni_kernel();  // quant_igemm_avx512.cc
const Igemm8Kernel* igemm8_avx2_kernel();  // quant_igemm8_avx2.cc
#endif

// The 8-bit kernel this CPU runs (nullptr: use the int16 path), and one by name
// ("avx512vnni", "avx2u8s8", "dotprod", "i8mm") if this build and CPU support it.
const Igemm8Kernel* igemm8_active();
const Igemm8Kernel* igemm8_find(const char* name);

struct PackedB8 {
  const Igemm8Kernel* kernel = nullptr;
  int64_t K = 0, N = 0, Kp = 0, panels = 0, nr = 0;  // Kp: K padded to the kernel's kalign
  AlignedVector<int8_t> data;   // panels of Kp x nr bytes in the kernel's layout
  std::vector<int32_t> zb;      // panels * nr: zero point of each column (in B's domain)
  std::vector<int32_t> colfix;  // panels * nr: K * zb[n] - sum_k b[k, n]
  const int8_t* panel(int64_t p) const { return data.data() + p * Kp * nr; }
};

// B: K x N matrix of uint8 (b_is_u8) or int8 bytes with row stride ldb, packed for `kernel`.
void pack_b8(const Igemm8Kernel& kernel, PackedB8& out, const void* B, bool b_is_u8, int64_t ldb, int64_t K,
             int64_t N, const int32_t* zp, bool zp_per_col);
// The same in parts, so B can be produced and packed a slice of columns at a time (in parallel; a
// convolution packs its image columns without materializing them all): begin sizes `out`; columns
// packs B's columns [n0, n0 + n) from `B` (K rows, row stride ldb, its column 0 being column n0; n0
// a multiple of the panel width, and every panel packed once); end sets the zero points.
void pack_b8_begin(const Igemm8Kernel& kernel, PackedB8& out, int64_t K, int64_t N);
void pack_b8_columns(PackedB8& out, const void* B, bool b_is_u8, int64_t ldb, int64_t n0, int64_t n);
void pack_b8_end(PackedB8& out, bool b_is_u8, const int32_t* zp, bool zp_per_col);
// C[M, N] = (A - za) x (B - zb) with A: M rows of K uint8 (or int8 when a_is_s8) bytes, row
// stride lda; runs B's kernel. za: nullptr, one value, or M values (za_per_row).
void igemm8(int64_t M, const void* A, bool a_is_s8, int64_t lda, int64_t K, const int32_t* za, bool za_per_row,
            const PackedB8& B, int32_t* C, int64_t ldc, ThreadPool* pool);

// Direct 2-D 8-bit convolution on AVX512-VNNI (quant_conv_direct_avx512.cc): one image and group, int32
// y[M, OH * OW] = conv(x - xz, w) for int8 weights whose zero points are all 0; no column matrix.
struct DirectConv8 {
  int64_t C = 0, H = 0, W = 0, M = 0, OH = 0, OW = 0, KH = 0, KW = 0;
  int64_t sh = 1, sw = 1, dh = 1, dw = 1, pt = 0, pl = 0;  // strides, dilations, leading pads
};
// The weights (M x C x KH x KW int8) in the kernel's order, made once per constant weight tensor.
struct DirectWeights8 {
  int64_t M = 0, C = 0, KH = 0, KW = 0;
  bool per_tap = false;        // one run of C bytes per tap (dilated columns), else one of KW x C per kernel row
  int nz = 4;                  // output channels per block: 16 x nz
  AlignedVector<int8_t> data;  // per block of 16 x nz channels, per run and quad of its bytes: nz x 64 bytes
  std::vector<int32_t> wsum;   // per output channel: the sum of its weights
};
// QLinearConv's requantization applied by the direct kernel to each finished tile (no int32 output):
// y[m, i] = requantize(acc + bias[m], multiplier[m], zp) as bytes (int8 or uint8 by lo/hi).
struct DirectRequant8 {
  const int32_t* bias = nullptr;      // M values, or nullptr
  const double* multiplier = nullptr;  // M values
  double zp = 0, lo = 0, hi = 255;
  uint8_t* y = nullptr;                // M x OH * OW bytes
};
#if defined(MOSAICRT_X86_SIMD)
DirectWeights8 prepare_direct_weights8(const int8_t* w, int64_t M, int64_t C, int64_t KH, int64_t KW, bool per_tap);
// y: int32 output (ConvInteger), or nullptr with rq: requantized bytes (QLinearConv).
void conv8_direct_vnni(const DirectConv8& g, const uint8_t* x, bool x_signed, int32_t xzp, const DirectWeights8& w,
                       int32_t* y, const DirectRequant8* rq, ThreadPool* pool);
#endif

// QLinearAdd / QLinearMul of two same-shaped 8-bit operands (contrib_qlinear_avx512.cc, contrib_qlinear_avx2.cc).
struct QLinearBinaryParams {
  float sa, sb, sc, zc, lo, hi;
  int32_t za, zb;
};
#if defined(MOSAICRT_X86_SIMD)
void qlinear_binary_avx512(bool mul, bool is_signed, const void* a, const void* b, void* y, int64_t n,
                           const QLinearBinaryParams& p);
// The same on AVX2 for the whole groups of 16 values: returns how many it wrote (the rest is the caller's).
int64_t qlinear_binary_avx2(bool mul, bool is_signed, const void* a, const void* b, void* y, int64_t n,
                            const QLinearBinaryParams& p);
#endif

// igemm8's A in `kernel`'s domain (bytes flipped to its signedness, rows padded to its row block, K to
// its kalign, row sums and zero points): made once per constant weight matrix instead of every run.
struct PreparedA8 {
  const Igemm8Kernel* kernel = nullptr;
  int64_t M = 0, K = 0, Kp = 0;
  std::vector<uint8_t> data;            // Mp x Kp
  std::vector<int32_t> zrow, rowsum;    // Mp
  // For a kernel with a pair_limit: what was taken off row m's pairs, entries [fix_begin[m], fix_begin[m + 1])
  // of (fix_k, fix_value); empty for other kernels.
  std::vector<int32_t> fix_begin, fix_k, fix_value;
};
PreparedA8 prepare_a8(const Igemm8Kernel& kernel, int64_t M, const void* A, bool a_is_s8, int64_t lda, int64_t K,
                      const int32_t* za, bool za_per_row);
// The same into `out`, whose buffers are reused (a caller that prepares A on every run keeps one).
void prepare_a8(const Igemm8Kernel& kernel, PreparedA8& out, int64_t M, const void* A, bool a_is_s8, int64_t lda,
                int64_t K, const int32_t* za, bool za_per_row);
// C[M, N] = A x B for a prepared A (made for B's kernel and K).
void igemm8(const PreparedA8& A, const PackedB8& B, int32_t* C, int64_t ldc, ThreadPool* pool);
// 2-D 8-bit convolution on AVX2 over planes of channel quads (quant_conv_planes_avx2.cc): one image and group,
// the weights as A of the avx2u8s8 kernel in the planes' order, k = ((q / 4 * KH + kh) * KW + kw) * 4 + q % 4
// for the channel in slot q (zero for a slot past C). Their zero points must be 0 in the kernel's int8 domain
// (int8 weights with zero point 0, uint8 with 128).
struct PlaneWeights8 {
  int64_t M = 0, C = 0, KH = 0, KW = 0;
  // per slot (C rounded up to 4 of them): its input channel, or C and up for a slot of zeros. Slots 2j and
  // 2j + 1 are summed as a pair in int16, so channels are paired to keep few pairs of large weights of one sign
  // (each such pair is one more fix entry: plane_channel_slots).
  std::vector<int32_t> slot_channel;
  PreparedA8 a;
  // a's rows (a.data is emptied) in blocks of 4 (Mp rows), each block's 4 rows interleaved by groups of 4 k:
  // row r's bytes k..k+3 of block rb at ((rb * Kp / 4 + k / 4) * 4 + r) * 4. A tile's 4 broadcasts for a group
  // of k are then 16 contiguous bytes, and a block of rows streams from one run of memory. Whole blocks of 16
  // rows (Mp rounded up to 16, zeros past Mp): the channel-column form reads 16 rows per group of k.
  std::vector<uint8_t> panel;
};
// The panel's rows for prepare_a8's Mp rows: whole blocks of 16.
inline int64_t plane_panel_rows(int64_t Mp) { return (Mp + 15) / 16 * 16; }
#if defined(MOSAICRT_X86_SIMD)
// y: int32 output (ConvInteger), or nullptr with rq: requantized bytes (QLinearConv).
void conv8_planes_avx2(const DirectConv8& g, const uint8_t* x, bool x_signed, int32_t xzp, const PlaneWeights8& w,
                       int32_t* y, const DirectRequant8* rq, ThreadPool* pool);
#endif

#if defined(__SSE2__)
// Four rows of 16 bytes into 16 groups of 4 (column j's bytes of rows 0..3 at out + 4j): the 8-bit GEMM's B
// panels (pack_b8_columns) and the AVX2 plane convolution's staged pixels.
inline void interleave4x16(__m128i r0, __m128i r1, __m128i r2, __m128i r3, uint8_t* out) {
  const __m128i t0 = _mm_unpacklo_epi8(r0, r1), t1 = _mm_unpackhi_epi8(r0, r1);
  const __m128i t2 = _mm_unpacklo_epi8(r2, r3), t3 = _mm_unpackhi_epi8(r2, r3);
  __m128i* o = reinterpret_cast<__m128i*>(out);
  _mm_storeu_si128(o, _mm_unpacklo_epi16(t0, t2));
  _mm_storeu_si128(o + 1, _mm_unpackhi_epi16(t0, t2));
  _mm_storeu_si128(o + 2, _mm_unpacklo_epi16(t1, t3));
  _mm_storeu_si128(o + 3, _mm_unpackhi_epi16(t1, t3));
}
#endif

// Round half to even without a libm call (so loops vectorize): values are first limited
// to +-2^50, which changes no saturated result; NaN passes through.
inline double round_even(double v) {
  v = v < -1e15 ? -1e15 : (v > 1e15 ? 1e15 : v);
  return (v + 6755399441055744.0) - 6755399441055744.0;  // 1.5 * 2^52
}
inline float round_even(float v) {
  v = v < -1e6f ? -1e6f : (v > 1e6f ? 1e6f : v);
  return (v + 12582912.f) - 12582912.f;  // 1.5 * 2^23
}
// Clamp into [lo, hi]; NaN becomes lo.
template <class F>
inline F saturate(F v, F lo, F hi) {
  v = v > lo ? v : lo;
  return v < hi ? v : hi;
}

// Requantize an int32 accumulator: clamp(rint(acc * multiplier) + zp) into [lo, hi].
inline double requantize(double acc, double multiplier, double zp, double lo, double hi) {
  return saturate(round_even(acc * multiplier) + zp, lo, hi);
}

// requantize_row for 8-bit outputs on wider vectors (AVX-512, AVX2), or nullptr on this CPU.
// (the values are clamped to [lo, hi] first, so the same bytes serve int8 and uint8 outputs)
using RequantizeBytesFn = void (*)(const int32_t* acc, int32_t bias, double multiplier, double zp, double lo,
                                   double hi, void* out, int64_t n);
RequantizeBytesFn requantize_bytes_active();
#if defined(MOSAICRT_X86_SIMD)
void requantize_bytes_avx512(const int32_t* acc, int32_t bias, double multiplier, double zp, double lo, double hi,
                             void* out, int64_t n);  // quant_igemm_avx512.cc
void requantize_bytes_avx2(const int32_t* acc, int32_t bias, double multiplier, double zp, double lo, double hi,
                           void* out, int64_t n);  // quant_igemm8_avx2.cc
#endif

// out[i] = requantize(acc[i] + bias, multiplier, zp) for n values (restrict pointers so the
// loop vectorizes despite the 8-bit stores).
template <class TOut>
void requantize_row(const int32_t* __restrict acc, int32_t bias, double multiplier, double zp, double lo, double hi,
                    TOut* __restrict out, int64_t n) {
  if constexpr (sizeof(TOut) == 1) {
    static const RequantizeBytesFn wide = requantize_bytes_active();
    if (wide) {
      wide(acc, bias, multiplier, zp, lo, hi, out, n);
      return;
    }
  }
  int64_t i = 0;
#if defined(__SSE2__)
  if (sizeof(TOut) == 1) {
    const __m128i vb = _mm_set1_epi32(bias);
    const __m128d vm = _mm_set1_pd(multiplier), vz = _mm_set1_pd(zp), vlo = _mm_set1_pd(lo), vhi = _mm_set1_pd(hi);
    const __m128d magic = _mm_set1_pd(6755399441055744.0), lim = _mm_set1_pd(1e15), nlim = _mm_set1_pd(-1e15);
    auto two = [&](__m128i a) {  // low two int32 of a -> requantized int32 in the low half
      __m128d v = _mm_mul_pd(_mm_cvtepi32_pd(a), vm);
      v = _mm_min_pd(_mm_max_pd(v, nlim), lim);
      v = _mm_add_pd(_mm_sub_pd(_mm_add_pd(v, magic), magic), vz);
      v = _mm_min_pd(_mm_max_pd(v, vlo), vhi);
      return _mm_cvttpd_epi32(v);
    };
    auto four = [&](const int32_t* p) {
      const __m128i a = _mm_add_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)), vb);
      return _mm_unpacklo_epi64(two(a), two(_mm_srli_si128(a, 8)));
    };
    for (; i + 16 <= n; i += 16) {
      const __m128i w0 = _mm_packs_epi32(four(acc + i), four(acc + i + 4));
      const __m128i w1 = _mm_packs_epi32(four(acc + i + 8), four(acc + i + 12));
      const __m128i b = std::is_signed<TOut>::value ? _mm_packs_epi16(w0, w1) : _mm_packus_epi16(w0, w1);
      _mm_storeu_si128(reinterpret_cast<__m128i*>(out + i), b);
    }
  }
#endif
  for (; i < n; ++i)
    out[i] = static_cast<TOut>(static_cast<int32_t>(requantize(static_cast<double>(acc[i]) + bias, multiplier, zp, lo, hi)));
}

// Per-thread scratch memory reused across runs (large buffers would otherwise be mapped
// and faulted in on every run). Buffers above kScratchKeep bytes are released after use.
constexpr size_t kScratchKeep = size_t(64) << 20;
// DynamicQuantizeLinear of n floats into y: uint8 with the scale and zero point that map [min(x, 0),
// max(x, 0)] onto [0, 255] (quant.cc).
struct DynamicQuantized {
  float scale;
  uint8_t zero_point;
};
DynamicQuantized dynamic_quantize_u8(ThreadPool& pool, const float* x, int64_t n, uint8_t* y);
// mn / mx folded with n values (a NaN compares false and is skipped): the scalar end of its range pass.
inline void fold_range(const float* v, int64_t n, float& mn, float& mx) {
  for (int64_t i = 0; i < n; ++i) {
    mn = v[i] < mn ? v[i] : mn;
    mx = v[i] > mx ? v[i] : mx;
  }
}
#if defined(MOSAICRT_X86_SIMD)
// Its two passes on AVX-512 (quant_dynamic_avx512.cc): mn / mx folded with the range of x (NaN skipped), and
// y = saturate(round(x / scale) + zp), as the generic loops compute them.
void minmax_f32_avx512(const float* x, int64_t n, float& mn, float& mx);
void quantize_u8_avx512(const float* x, uint8_t* y, int64_t n, float scale, float zp);
// The same into bytes saturated to [lo, hi] (0 and 255 for uint8, -128 and 127 for int8): QuantizeLinear's loop.
void quantize_bytes_avx512(const float* x, void* y, int64_t n, float scale, float zp, float lo, float hi);
#endif

// The buffer only grows (a resize that shrinks, then grows again on the next node, would zero-fill the
// regrown part every time): n values are in use.
template <class T>
struct Scratch {
  std::vector<T>& v;
  size_t n;
  explicit Scratch(std::vector<T>& buf, size_t count) : v(buf), n(count) {
    if (v.size() < n) v.resize(n);
  }
  ~Scratch() {
    if (v.capacity() * sizeof(T) > kScratchKeep) std::vector<T>().swap(v);
  }
  T* data() { return v.data(); }
  bool empty() const { return n == 0; }
};

}  // namespace quant
}  // namespace mrt
