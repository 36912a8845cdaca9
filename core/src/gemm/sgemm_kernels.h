// Internal interface between the SGEMM driver (sgemm.cc) and its micro-kernels.
//
// A micro-kernel computes one register tile of C from two packed panels:
//   a: kc steps of `mr` values (rows of op(A) for one k), panel stride mr
//   b: kc steps of `nr` values (columns of op(B) for one k)
//   acc[i][j] = sum_k a[k*mr + i] * b[k*nr + j]      (i < m, j < n)
//   c[i*ldc + j] = alpha * acc[i][j] + beta * c[i*ldc + j]   (beta == 0: c is not read)
// rows[m] handles a tile of m rows (1 <= m <= mr); n (1 <= n <= nr) is a run-time argument
// so edge tiles are written in place without overrunning C. The optional rows_compact_a[m] tiles
// are the same with m in place of mr as the stride of a.
#pragma once
#include <cstdint>

#include "sgemm.h"

namespace mrt {

constexpr int kSgemmMaxMr = 16;
constexpr int kSgemmMaxNr = 64;

// Packs a full-width panel of a row-major (non-transposed) B: kc rows of nr floats, row
// stride ldb, into dst (kc groups of nr). Optional: nullptr uses the generic packer.
using SgemmPackB = void (*)(const float* src, int64_t ldb, int64_t kc, float* dst);

// Packs a full-height panel of a row-major (non-transposed) A: mr rows of kc floats, row
// stride lda, into dst (kc groups of mr). Optional: nullptr uses the generic packer.
using SgemmPackA = void (*)(const float* src, int64_t lda, int64_t kc, float* dst);

using SgemmMicroKernel = void (*)(int64_t kc, const float* a, const float* b, float* c, int64_t ldc, int64_t n,
                                  float alpha, float beta);
// A tile as SgemmMicroKernel that also prefetches `lines` cache lines from `ahead` on, one per K step from its
// first: a piece of a B streamed from memory, loaded over the tiles before it is used.
using SgemmStreamKernel = void (*)(int64_t kc, const float* a, const float* b, float* c, int64_t ldc, int64_t n,
                                   float alpha, float beta, const float* ahead, int64_t lines);

// Matrix-vector products for j in [0, n): y[j] = sum_k a[k] b[j * ldb + k] (the rows of b against a) or
// y[j] = sum_k a[k] b[k * ldb + j] (a combination of the rows of b). Optional: nullptr uses the generic loops.
using SgemvKernel = void (*)(int64_t n, int64_t K, const float* a, const float* b, int64_t ldb, float* y);

struct SgemmKernel {
  const char* name;
  int mr, nr;
  int64_t kc, mc;  // cache blocking: K step, M block rows (a multiple of mr)
  SgemmMicroKernel rows[kSgemmMaxMr + 1];
  SgemmPackB pack_b_full = nullptr;
  SgemmPackA pack_a_full = nullptr;
  // K step with a pre-packed A (Conv filters: A streams from memory once per call and each
  // B panel is packed right before use, so a shallower, L1-resident B panel pays off);
  // 0: kc.
  int64_t kc_packed_a = 0;
  // Optional: tiles of m rows whose A values for one k are m floats apart (a[k * m + i], not a[k * mr + i]),
  // for a block of a few rows against a pre-packed B: the rows are packed to their own height over the whole
  // K, a panel that stays in L1 where an mr-high one would not, and a single row is used as it is.
  SgemmMicroKernel rows_compact_a[kSgemmMaxMr + 1] = {};
  SgemvKernel gemv_dots = nullptr;   // rows of b against a
  SgemvKernel gemv_axpys = nullptr;  // a combination of the rows of b
  // Optional: the tiles of `rows` that also prefetch a stream (SgemmStreamKernel).
  SgemmStreamKernel rows_stream[kSgemmMaxMr + 1] = {};
};

const SgemmKernel& sgemm_portable_kernel();
#if defined(MOSAICRT_X86_SIMD)
const SgemmKernel& sgemm_avx2_kernel();    // sgemm_kernel_avx2.cc (AVX2 + FMA)
const SgemmKernel& sgemm_avx512_kernel();  // sgemm_kernel_avx512.cc (AVX-512F)
#endif
// Arm64 kernels (sgemm_kernel_neon.cc) are reached only through the registry
// (backend_registry.h): no declaration of theirs belongs here.

// The kernel sgemm() uses on this CPU (chosen once; honours MOSAICRT_SGEMM_KERNEL).
const SgemmKernel& sgemm_active_kernel();
// A registered kernel by name ("portable", "neon", "avx2", "avx512") if this build and CPU
// support it, else nullptr.
const SgemmKernel* sgemm_find_kernel(const char* name);

// The driver with an explicit kernel (used by the public entry points and the native check).
void sgemm_with_kernel(const SgemmKernel& kernel, bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K,
                       float alpha, const float* A, int64_t lda, const float* B, int64_t ldb, float beta, float* C,
                       int64_t ldc, ThreadPool* pool);
PackedA sgemm_pack_a_with_kernel(const SgemmKernel& kernel, bool trans_a, int64_t M, int64_t K, const float* A,
                                 int64_t lda);
PackedB sgemm_pack_b_with_kernel(const SgemmKernel& kernel, bool trans_b, int64_t K, int64_t N, const float* B,
                                 int64_t ldb);

}  // namespace mrt
