// Integer GEMM for the quantized kernels: packing of both operands into int16 and the
// driver that splits C into (row block, panel) tiles over the thread pool. The
// micro-kernel is the AVX2 one (quant_igemm_avx2.cc) when the build and the running CPU
// have it, else the portable one below.
#include <algorithm>
#include <cstring>

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
#endif

}  // namespace quant
}  // namespace mrt
