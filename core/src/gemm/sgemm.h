// Single-precision GEMM used by MatMul, Gemm, Conv and ConvTranspose.
// C[M,N] = alpha * op(A)[M,K] * op(B)[K,N] + beta * C, row-major, with leading dims.
// beta == 0 means C is write-only (its old contents, even NaN, are ignored).
// The implementation picks the best micro-kernel for the running CPU (see sgemm.cc and
// backend_registry.h); MOSAICRT_SGEMM_KERNEL=portable|neon|avx2|avx512 forces a lower one
// (for testing).
#pragma once
#include <cstdint>
#include <vector>

#include "../aligned_vector.h"

namespace mrt {

class ThreadPool;
struct SgemmKernel;

// Called once per finished block of C (rows i..i+m, columns j..j+n, at c with row stride
// ldc: an M block by one B panel) while it is still in cache: fused output stages (bias,
// residual, activation). Called from several threads at once, each element exactly once.
// `prefetch`, when set, is called for each block a little ahead of its `apply` (while the GEMM computes the
// block before it), to start loading what `apply` will read (a residual).
struct TileEpilogue {
  void (*apply)(const void* ctx, int64_t i, int64_t m, int64_t j, int64_t n, float* c, int64_t ldc) = nullptr;
  const void* ctx = nullptr;
  void (*prefetch)(const void* ctx, int64_t i, int64_t m, int64_t j, int64_t n) = nullptr;
};

void sgemm(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, float alpha, const float* A, int64_t lda,
           const float* B, int64_t ldb, float beta, float* C, int64_t ldc, ThreadPool* pool);

// Name of the micro-kernel sgemm() dispatches to on this CPU ("avx512f", "avx2_fma", "neon",
// "portable").
const char* sgemm_kernel_name();
// Whether that micro-kernel is the AVX-512 one. The other AVX-512 kernels (convolutions, softmax rows, GELU)
// follow it, so that MOSAICRT_SGEMM_KERNEL=avx2 also runs, and tests, the paths of CPUs without AVX-512.
bool sgemm_kernel_is_avx512();

// An operand packed once into the micro-kernel's panel layout, for constant weights
// (MatMul/Gemm B, Conv filters as A). Build with sgemm_pack_a/b, keep it (e.g. in
// OpContext::node_cache) and pass it to sgemm_packed_a/b; the source may then go away.
struct PackedA {
  int64_t M = 0, K = 0;
  const SgemmKernel* kernel = nullptr;
  AlignedVector<float> data;  // per kc block: ceil(M/mr) panels of kc x mr values, zero padded
};
struct PackedB {
  int64_t K = 0, N = 0;
  const SgemmKernel* kernel = nullptr;
  AlignedVector<float> data;  // ceil(N/nr) panels of K x nr values, zero padded
};

// Pack op(A) ([M,K]) or op(B) ([K,N]) for the active micro-kernel.
PackedA sgemm_pack_a(bool trans_a, int64_t M, int64_t K, const float* A, int64_t lda);
PackedB sgemm_pack_b(bool trans_b, int64_t K, int64_t N, const float* B, int64_t ldb);

// C[M,N] = alpha * A * op(B) + beta * C with A pre-packed (M, K taken from it).
void sgemm_packed_a(const PackedA& A, bool trans_b, int64_t N, float alpha, const float* B, int64_t ldb, float beta,
                    float* C, int64_t ldc, ThreadPool* pool, const TileEpilogue* epilogue = nullptr);
// A B operand produced panel by panel by the caller instead of read from memory (Conv's
// im2col written straight into the panel layout, so the column matrix never exists).
// fill(ctx, k0, kc, j0, n, nr, dst) writes B[k0:k0+kc, j0:j0+n] as kc groups of nr values
// (dst[k*nr + j]), the columns n..nr-1 zero. Called from several threads at once.
struct PanelSourceB {
  void (*fill)(const void* ctx, int64_t k0, int64_t kc, int64_t j0, int64_t n, int nr, float* dst) = nullptr;
  const void* ctx = nullptr;
};
// C[M,N] = alpha * A * B + beta * C with A pre-packed and B from `source` (K from A).
void sgemm_packed_a_source(const PackedA& A, int64_t N, float alpha, const PanelSourceB& source, float beta, float* C,
                           int64_t ldc, ThreadPool* pool, const TileEpilogue* epilogue = nullptr);

// C[M,N] = alpha * op(A) * B + beta * C with B pre-packed (K, N taken from it).
void sgemm_packed_b(bool trans_a, int64_t M, float alpha, const float* A, int64_t lda, const PackedB& B, float beta,
                    float* C, int64_t ldc, ThreadPool* pool, const TileEpilogue* epilogue = nullptr);

}  // namespace mrt
