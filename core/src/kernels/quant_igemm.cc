// Integer GEMM for the quantized kernels: packing of both operands into int16 and the
// driver that splits C into (row block, panel) tiles over the thread pool. The
// micro-kernel is the AVX2 one (quant_igemm_avx2.cc) when the build and the running CPU
// have it, else the portable one below.
#include <algorithm>
#include <cstring>
#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#include "quant_common.h"

namespace mrt {
namespace quant {
namespace {

template <class S>
void pack_b_impl(PackedB& out, const S* B, int64_t ldb, int64_t K, int64_t N, const int32_t* zp, bool zp_per_col) {
  out.K = K;
  out.N = N;
  out.Kp = (K + 1) & ~int64_t(1);
  out.panels = (N + kIgemmPanel - 1) / kIgemmPanel;
  out.data.assign(static_cast<size_t>(out.panels * out.Kp * kIgemmPanel), 0);
  for (int64_t p = 0; p < out.panels; ++p) {
    int16_t* dst = out.data.data() + p * out.Kp * kIgemmPanel;
    const int64_t n0 = p * kIgemmPanel, nn = std::min(kIgemmPanel, N - n0);
    for (int64_t k = 0; k < K; ++k) {
      const S* row = B + k * ldb + n0;
      int16_t* d = dst + (k >> 1) * 2 * kIgemmPanel + (k & 1);
      for (int64_t j = 0; j < nn; ++j) {
        const int32_t z = zp ? (zp_per_col ? zp[n0 + j] : zp[0]) : 0;
        d[2 * j] = static_cast<int16_t>(static_cast<int32_t>(row[j]) - z);
      }
    }
  }
}

// Portable micro-kernel: same contract as the AVX2 one.
void igemm_block_portable(int64_t rows, int64_t Kp, const int16_t* A, int64_t lda, const int16_t* panel, int32_t* C,
                          int64_t ldc, int64_t valid_n) {
  for (int64_t r = 0; r < rows; ++r) {
    int32_t acc[kIgemmPanel] = {0};
    const int16_t* a = A + r * lda;
    for (int64_t kp = 0; kp < Kp; kp += 2) {
      const int32_t a0 = a[kp], a1 = a[kp + 1];
      const int16_t* b = panel + kp * kIgemmPanel;
      for (int64_t j = 0; j < kIgemmPanel; ++j) acc[j] += a0 * b[2 * j] + a1 * b[2 * j + 1];
    }
    std::memcpy(C + r * ldc, acc, static_cast<size_t>(valid_n) * sizeof(int32_t));
  }
}

IgemmBlockFn select_kernel() {
#if defined(MOSAICRT_X86_SIMD) && (defined(__GNUC__) || defined(__clang__))
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) {
    if (IgemmBlockFn f = igemm_block_avx2()) return f;
  }
#endif
  return igemm_block_portable;
}

}  // namespace

void pack_b_u8(PackedB& out, const uint8_t* B, int64_t ldb, int64_t K, int64_t N, const int32_t* zp, bool zp_per_col) {
  pack_b_impl(out, B, ldb, K, N, zp, zp_per_col);
}
void pack_b_s8(PackedB& out, const int8_t* B, int64_t ldb, int64_t K, int64_t N, const int32_t* zp, bool zp_per_col) {
  pack_b_impl(out, B, ldb, K, N, zp, zp_per_col);
}
void pack_b_s16(PackedB& out, const int16_t* B, int64_t ldb, int64_t K, int64_t N) {
  pack_b_impl(out, B, ldb, K, N, nullptr, false);
}

std::vector<int16_t> pack_a(const Tensor& A, int64_t offset, int64_t M, int64_t K, const int32_t* zp, bool zp_per_row,
                            int64_t Kp) {
  std::vector<int16_t> out(static_cast<size_t>(M * Kp), 0);
  auto fill = [&](auto* src) {
    for (int64_t m = 0; m < M; ++m) {
      const int32_t z = zp ? (zp_per_row ? zp[m] : zp[0]) : 0;
      const auto* s = src + offset + m * K;
      int16_t* d = out.data() + m * Kp;
      for (int64_t k = 0; k < K; ++k) d[k] = static_cast<int16_t>(static_cast<int32_t>(s[k]) - z);
    }
  };
  if (A.dtype() == DType::kUInt8) fill(A.data<uint8_t>());
  else if (A.dtype() == DType::kInt8) fill(A.data<int8_t>());
  else fail(MRT_NOT_IMPLEMENTED, "integer GEMM: element type ", dtype_name(A.dtype()), " is not supported (uint8/int8)");
  return out;
}

void igemm(int64_t M, const int16_t* A, const PackedB& B, int32_t* C, int64_t ldc, ThreadPool* pool) {
  static const IgemmBlockFn kernel = select_kernel();
  if (M <= 0 || B.N <= 0) return;
  const int64_t Kp = B.Kp;
  if (Kp == 0) {
    for (int64_t m = 0; m < M; ++m) std::fill(C + m * ldc, C + m * ldc + B.N, 0);
    return;
  }
  const int64_t row_blocks = (M + kIgemmRows - 1) / kIgemmRows;
  const int64_t tasks = row_blocks * B.panels;
  auto run = [&](int64_t tb, int64_t te) {
    for (int64_t t = tb; t < te; ++t) {
      // Panel-major order: consecutive tasks reuse the same B panel from cache.
      const int64_t p = t / row_blocks, rb = t % row_blocks;
      const int64_t m0 = rb * kIgemmRows, rows = std::min(kIgemmRows, M - m0);
      const int64_t n0 = p * kIgemmPanel, vn = std::min(kIgemmPanel, B.N - n0);
      kernel(rows, Kp, A + m0 * Kp, Kp, B.panel(p), C + m0 * ldc + n0, ldc, vn);
    }
  };
  const int64_t work = Kp * kIgemmRows * kIgemmPanel;
  const int64_t grain = std::max<int64_t>(1, (1 << 16) / std::max<int64_t>(1, work));
  if (pool && tasks > 1) pool->parallel_for(tasks, grain, run);
  else run(0, tasks);
}

#if !defined(MOSAICRT_X86_SIMD)
IgemmBlockFn igemm_block_avx2() { return nullptr; }
VnniBlockFn igemm_block_vnni() { return nullptr; }
VnniColsumFn igemm_colsum_vnni() { return nullptr; }
#endif

bool igemm_vnni_available() {
  static const bool ok = [] {
#if defined(MOSAICRT_X86_SIMD) && (defined(__GNUC__) || defined(__clang__))
    return igemm_block_vnni() != nullptr && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
           __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq") &&
           __builtin_cpu_supports("avx512vnni");
#else
    return false;
#endif
  }();
  return ok;
}

void pack_b8(PackedB8& out, const void* B, bool b_is_u8, int64_t ldb, int64_t K, int64_t N, const int32_t* zp,
             bool zp_per_col) {
  const uint8_t* src = static_cast<const uint8_t*>(B);
  out.K = K;
  out.N = N;
  out.K4 = (K + 3) & ~int64_t(3);
  out.panels = (N + kVnniPanel - 1) / kVnniPanel;
  out.data.assign(static_cast<size_t>(out.panels * out.K4 * kVnniPanel), 0);
  out.zb.assign(static_cast<size_t>(out.panels * kVnniPanel), 0);
  out.colfix.assign(out.zb.size(), 0);
  // Work in the int8 domain: a uint8 byte b becomes b - 128 (flip the top bit).
  const uint8_t flip = b_is_u8 ? 0x80 : 0x00;
  const int32_t zshift = b_is_u8 ? -128 : 0;
  static const VnniColsumFn colsum_fn = igemm_colsum_vnni();
  MRT_ENFORCE(colsum_fn != nullptr, MRT_INTERNAL, "integer GEMM: the VNNI kernel is not available");
  std::vector<int32_t> colsum(static_cast<size_t>(out.panels * kVnniPanel), 0);
  int8_t* base = out.data.data();
  const int64_t panel_bytes = out.K4 * kVnniPanel;
  for (int64_t p = 0; p < out.panels; ++p) {
    const int64_t n0 = p * kVnniPanel, nn = std::min(kVnniPanel, N - n0);
    int8_t* pd = base + p * panel_bytes;
    for (int64_t k = 0; k < K; k += 4) {
      int8_t* d = pd + k * kVnniPanel;  // 4 rows x 32 columns, interleaved by 4
      const int64_t kk = std::min<int64_t>(4, K - k);
      int64_t j = 0;
#if defined(__SSE2__)
      if (kk == 4) {
        const __m128i fl = _mm_set1_epi8(static_cast<char>(flip));
        for (; j + 16 <= nn; j += 16) {
          const uint8_t* r = src + k * ldb + n0 + j;
          const __m128i r0 = _mm_xor_si128(_mm_loadu_si128(reinterpret_cast<const __m128i*>(r)), fl);
          const __m128i r1 = _mm_xor_si128(_mm_loadu_si128(reinterpret_cast<const __m128i*>(r + ldb)), fl);
          const __m128i r2 = _mm_xor_si128(_mm_loadu_si128(reinterpret_cast<const __m128i*>(r + 2 * ldb)), fl);
          const __m128i r3 = _mm_xor_si128(_mm_loadu_si128(reinterpret_cast<const __m128i*>(r + 3 * ldb)), fl);
          const __m128i t0 = _mm_unpacklo_epi8(r0, r1), t1 = _mm_unpackhi_epi8(r0, r1);
          const __m128i t2 = _mm_unpacklo_epi8(r2, r3), t3 = _mm_unpackhi_epi8(r2, r3);
          __m128i* o = reinterpret_cast<__m128i*>(d + (j >> 4) * 64);
          _mm_storeu_si128(o, _mm_unpacklo_epi16(t0, t2));
          _mm_storeu_si128(o + 1, _mm_unpackhi_epi16(t0, t2));
          _mm_storeu_si128(o + 2, _mm_unpacklo_epi16(t1, t3));
          _mm_storeu_si128(o + 3, _mm_unpackhi_epi16(t1, t3));
        }
      }
#endif
      for (; j < nn; ++j) {
        int8_t* dj = d + (j >> 4) * 64 + (j & 15) * 4;
        for (int64_t q = 0; q < kk; ++q) dj[q] = static_cast<int8_t>(src[(k + q) * ldb + n0 + j] ^ flip);
      }
    }
    colsum_fn(pd, out.K4, colsum.data() + n0);
  }
  for (int64_t n = 0; n < N; ++n) {
    const int32_t z = (zp ? (zp_per_col ? zp[n] : zp[0]) : 0) + zshift;
    out.zb[n] = z;
    out.colfix[n] = static_cast<int32_t>(static_cast<uint32_t>(K * z - colsum[n]));
  }
}

void igemm_vnni(int64_t M, const void* A, bool a_is_s8, int64_t lda, int64_t K, const int32_t* za, bool za_per_row,
                const PackedB8& B, int32_t* C, int64_t ldc, ThreadPool* pool) {
  static const VnniBlockFn kernel = igemm_block_vnni();
  MRT_ENFORCE(kernel != nullptr, MRT_INTERNAL, "integer GEMM: the VNNI kernel is not available");
  if (M <= 0 || B.N <= 0) return;
  const uint8_t* src = static_cast<const uint8_t*>(A);
  const int64_t K4 = B.K4;
  // A in the uint8 domain: an int8 byte a becomes a + 128 (flip the top bit).
  std::vector<uint8_t> a8(static_cast<size_t>(M * K4), 0);
  std::vector<int32_t> zrow(static_cast<size_t>(M)), rowsum(static_cast<size_t>(M));
  const uint8_t flip = a_is_s8 ? 0x80 : 0x00;
  const int32_t zshift = a_is_s8 ? 128 : 0;
  for (int64_t m = 0; m < M; ++m) {
    const uint8_t* s = src + m * lda;
    uint8_t* d = a8.data() + m * K4;
    int32_t sum = 0;
    for (int64_t k = 0; k < K; ++k) {
      d[k] = static_cast<uint8_t>(s[k] ^ flip);
      sum += d[k];
    }
    rowsum[m] = sum;
    zrow[m] = (za ? (za_per_row ? za[m] : za[0]) : 0) + zshift;
  }
  const int64_t row_blocks = (M + kVnniRows - 1) / kVnniRows;
  const int64_t tasks = row_blocks * B.panels;
  auto run = [&](int64_t tb, int64_t te) {
    for (int64_t t = tb; t < te; ++t) {
      const int64_t p = t / row_blocks, rb = t % row_blocks;
      const int64_t m0 = rb * kVnniRows, rows = std::min(kVnniRows, M - m0);
      const int64_t n0 = p * kVnniPanel, vn = std::min(kVnniPanel, B.N - n0);
      kernel(rows, K4, a8.data() + m0 * K4, K4, B.panel(p), zrow.data() + m0, rowsum.data() + m0,
             B.zb.data() + n0, B.colfix.data() + n0, C + m0 * ldc + n0, ldc, vn);
    }
  };
  const int64_t work = std::max<int64_t>(1, K4 * kVnniRows * kVnniPanel);
  const int64_t grain = std::max<int64_t>(1, (1 << 17) / work);
  if (pool && tasks > 1) pool->parallel_for(tasks, grain, run);
  else run(0, tasks);
}

}  // namespace quant
}  // namespace mrt
