// Blocked, packed SGEMM driver.
//
// Loop structure (row-major C = alpha * op(A) * op(B) + beta * C):
//   parallel over tasks (an M block of mc rows x a share of the nr-wide B panels):
//    for each chunk of the task's panels  (its C block stays in L2 over the K steps)
//     for pc over K in steps of kc          one rank-kc update (beta applies on the first)
//       pack op(A)[ic:ic+mc, pc:pc+kc] into mr-high panels (per thread, stays in L2)
//       for each B panel of the task: pack it (kc x nr, stays in L1)
//         for each A panel: micro-kernel on an mr x nr tile of C
// Pre-packed operands (PackedA/PackedB) skip their packing step. PackedB panels hold the
// whole K (a kc block is an offset into them); PackedA is stored kc block by kc block.
#include "sgemm.h"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <vector>
#if defined(__SSE2__)
#include <xmmintrin.h>
#endif

#include "../error.h"
#include "../threadpool.h"
#include "backend_registry.h"
#include "sgemm_kernels.h"

namespace mrt {

namespace {

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

// Bytes of C one task keeps in cache across the K steps (a share of L2).
constexpr int64_t kCBlockBytes = int64_t{192} << 10;
// Bytes of packed B panels a task holds when K is one step (see single_step).
constexpr int64_t kStretchBytes = int64_t{192} << 10;
// The most a task's A may take packed for the whole K (whole_k_rows): half the L2 of the cores it was tuned on.
constexpr int64_t kWholeKABytes = int64_t{512} << 10;

int64_t packed_a_kc(const SgemmKernel& kr) { return kr.kc_packed_a > 0 ? kr.kc_packed_a : kr.kc; }

// K step for a depth of K: at most max_kc, the steps evened out (a multiple of 8 where
// max_kc is) so that there is no short last step (K = 147 -> 80 + 67, not 128 + 19).
// PackedA's layout follows it.
int64_t kc_step(int64_t max_kc, int64_t K) {
  if (K <= max_kc) return std::max<int64_t>(K, 1);
  const int64_t even = ceil_div(K, ceil_div(K, max_kc));
  const int64_t rounded = ceil_div(even, 8) * 8;
  return rounded <= max_kc ? rounded : even;
}

// ---------------------------------------------------------------------------------------
// Portable micro-kernel: plain C++ with GCC/Clang vector extensions where available (SSE2,
// NEON, ... without any ISA-specific code), scalar otherwise. The tile fits 16 vector
// registers (armv7 NEON, x86 SSE2); arm64's 32 registers take a taller tile.

#if defined(__aarch64__) || defined(_M_ARM64)
constexpr int kPortableMr = 8;
#else
constexpr int kPortableMr = 4;
#endif
constexpr int kPortableNr = 8;

#if defined(__GNUC__) || defined(__clang__)
typedef float v4f __attribute__((vector_size(16)));

inline v4f load4(const float* p) {
  v4f v;
  std::memcpy(&v, p, sizeof(v));
  return v;
}

template <int M>
void portable_micro(int64_t kc, const float* a, const float* b, float* c, int64_t ldc, int64_t n, float alpha,
                    float beta) {
  v4f acc0[M], acc1[M];
  for (int i = 0; i < M; ++i) acc0[i] = acc1[i] = v4f{0.f, 0.f, 0.f, 0.f};
  for (int64_t k = 0; k < kc; ++k) {
    const v4f b0 = load4(b), b1 = load4(b + 4);
    for (int i = 0; i < M; ++i) {
      const float ai = a[i];
      acc0[i] += ai * b0;
      acc1[i] += ai * b1;
    }
    a += kPortableMr;
    b += kPortableNr;
  }
  for (int i = 0; i < M; ++i) {
    float row[kPortableNr];
    std::memcpy(row, &acc0[i], sizeof(v4f));
    std::memcpy(row + 4, &acc1[i], sizeof(v4f));
    float* ci = c + i * ldc;
    if (beta == 0.f) {
      for (int64_t j = 0; j < n; ++j) ci[j] = alpha * row[j];
    } else {
      for (int64_t j = 0; j < n; ++j) ci[j] = alpha * row[j] + beta * ci[j];
    }
  }
}
#else
template <int M>
void portable_micro(int64_t kc, const float* a, const float* b, float* c, int64_t ldc, int64_t n, float alpha,
                    float beta) {
  float acc[M][kPortableNr] = {};
  for (int64_t k = 0; k < kc; ++k) {
    const float* bk = b + k * kPortableNr;
    const float* ak = a + k * kPortableMr;
    for (int i = 0; i < M; ++i)
      for (int j = 0; j < kPortableNr; ++j) acc[i][j] += ak[i] * bk[j];
  }
  for (int i = 0; i < M; ++i) {
    float* ci = c + i * ldc;
    for (int64_t j = 0; j < n; ++j) ci[j] = alpha * acc[i][j] + (beta == 0.f ? 0.f : beta * ci[j]);
  }
}
#endif

const SgemmKernel kPortable = {"portable",
                               kPortableMr,
                               kPortableNr,
                               256,
                               kPortableMr * 48,
                               {nullptr, portable_micro<1>, portable_micro<2>, portable_micro<3>, portable_micro<4>
#if defined(__aarch64__) || defined(_M_ARM64)
                                ,
                                portable_micro<5>, portable_micro<6>, portable_micro<7>, portable_micro<8>
#endif
                               }};

// ---------------------------------------------------------------------------------------
// Packing.

// The row panels of an M block of `total` rows, each at most mr high: panel r holds rows [start(r), start(r) +
// rows(r)) of the block. `base` rows each, the first `taller` one more; the last is cut at the block's end.
struct RowPanels {
  int64_t total = 0, base = 1, taller = 0, panels = 0;
  int64_t count() const { return panels; }
  int64_t start(int64_t r) const { return r * base + std::min(r, taller); }
  int64_t rows(int64_t r) const { return std::min(base + (r < taller ? 1 : 0), total - start(r)); }
};
// Panels of h rows, the last one shorter.
RowPanels uniform_panels(int64_t total, int64_t h) { return {total, h, 0, ceil_div(total, h)}; }

// op(A)[i0:i0+mc, k0:k0+kc] -> the row panels `panels` (of the mc rows, each at most mr high); panel r starts
// at dst + r*panel_stride and holds kc groups of mr values (rows past the panel's are zero).
void pack_a(const SgemmKernel& kr, bool trans_a, const float* A, int64_t lda, int64_t i0, const RowPanels& panels,
            int64_t k0, int64_t kc, float* dst, int64_t panel_stride) {
  const int mr = kr.mr;
  for (int64_t r = 0; r < panels.count(); ++r) {
    float* p = dst + r * panel_stride;
    const int64_t rows = panels.rows(r);
    const int64_t row0 = i0 + panels.start(r);
    if (trans_a) {  // A is [K, M]: A(i,k) = A[k*lda + i], mr values contiguous per k
      for (int64_t k = 0; k < kc; ++k) {
        const float* src = A + (k0 + k) * lda + row0;
        float* d = p + k * mr;
        int64_t i = 0;
        for (; i < rows; ++i) d[i] = src[i];
        for (; i < mr; ++i) d[i] = 0.f;
      }
    } else if (rows == mr && kr.pack_a_full) {
      kr.pack_a_full(A + row0 * lda + k0, lda, kc, p);
    } else {  // A is [M, K]: read the panel's rows side by side, write contiguously
      const float* rp[kSgemmMaxMr];
      for (int64_t i = 0; i < rows; ++i) rp[i] = A + (row0 + i) * lda + k0;
      int64_t k = 0;
#if defined(__SSE2__)
      // 4 rows x 4 steps at a time through a 4x4 transpose (panels shorter than mr, such as the 10-row panels of
      // a 49-row block, which the kernel's own packer does not take)
      if (mr % 4 == 0) {
        for (; k + 4 <= kc; k += 4) {
          int64_t i = 0;
          for (; i + 4 <= rows; i += 4) {
            __m128 r0 = _mm_loadu_ps(rp[i] + k), r1 = _mm_loadu_ps(rp[i + 1] + k);
            __m128 r2 = _mm_loadu_ps(rp[i + 2] + k), r3 = _mm_loadu_ps(rp[i + 3] + k);
            _MM_TRANSPOSE4_PS(r0, r1, r2, r3);
            _mm_storeu_ps(p + k * mr + i, r0);
            _mm_storeu_ps(p + (k + 1) * mr + i, r1);
            _mm_storeu_ps(p + (k + 2) * mr + i, r2);
            _mm_storeu_ps(p + (k + 3) * mr + i, r3);
          }
          for (int64_t kk = k; kk < k + 4; ++kk) {
            float* d = p + kk * mr;
            for (int64_t j = i; j < rows; ++j) d[j] = rp[j][kk];
            for (int64_t j = rows; j < mr; ++j) d[j] = 0.f;
          }
        }
      }
#endif
      for (; k < kc; ++k) {
        float* d = p + k * mr;
        int64_t i = 0;
        for (; i < rows; ++i) d[i] = rp[i][k];
        for (; i < mr; ++i) d[i] = 0.f;
      }
    }
  }
}

// op(A)[i0:i0+m, 0:K] -> K groups of m values (dst[k*m + i]): a block of a few rows at its own height, for the
// kernel's rows_compact_a tiles.
void pack_a_compact(bool trans_a, const float* A, int64_t lda, int64_t i0, int64_t m, int64_t K, float* dst) {
  if (trans_a) {  // A is [K, M]: the m values of a step are contiguous
    for (int64_t k = 0; k < K; ++k) std::copy_n(A + k * lda + i0, m, dst + k * m);
    return;
  }
  for (int64_t i = 0; i < m; ++i) {
    const float* row = A + (i0 + i) * lda;
    for (int64_t k = 0; k < K; ++k) dst[k * m + i] = row[k];
  }
}

// op(B)[k0:k0+kc, j0:j0+nc] panels q in [q0, q1) of nr columns; panel q starts at
// dst + (q - q0)*panel_stride and holds kc groups of nr values (columns past nc are zero).
template <int NR>
void pack_b_rows(const float* src, int64_t ldb, int64_t kc, float* dst) {
  for (int64_t k = 0; k < kc; ++k)
    for (int j = 0; j < NR; ++j) dst[k * NR + j] = src[k * ldb + j];
}

void pack_b(const SgemmKernel& kr, bool trans_b, const float* B, int64_t ldb, int64_t k0, int64_t kc, int64_t j0,
            int64_t nc, int64_t q0, int64_t q1, float* dst, int64_t panel_stride) {
  const int nr = kr.nr;
  for (int64_t q = q0; q < q1; ++q) {
    float* p = dst + (q - q0) * panel_stride;
    const int64_t cols = std::min<int64_t>(nr, nc - q * nr);
    const int64_t col0 = j0 + q * nr;
    if (!trans_b) {  // B is [K, N]: nr values contiguous per k
      const float* src = B + k0 * ldb + col0;
      if (cols == nr && kr.pack_b_full) {
        kr.pack_b_full(src, ldb, kc, p);
      } else if (cols == nr && nr == 8) {
        pack_b_rows<8>(src, ldb, kc, p);
      } else if (cols == nr && nr == 16) {
        pack_b_rows<16>(src, ldb, kc, p);
      } else {
        for (int64_t k = 0; k < kc; ++k) {
          float* d = p + k * nr;
          int64_t j = 0;
          for (; j < cols; ++j) d[j] = src[k * ldb + j];
          for (; j < nr; ++j) d[j] = 0.f;
        }
      }
    } else {  // B is [N, K]: B(k,j) = B[j*ldb + k]; read nr rows side by side
      const float* rp[kSgemmMaxNr];
      for (int64_t j = 0; j < cols; ++j) rp[j] = B + (col0 + j) * ldb + k0;
      for (int64_t k = 0; k < kc; ++k) {
        float* d = p + k * nr;
        int64_t j = 0;
        for (; j < cols; ++j) d[j] = rp[j][k];
        for (; j < nr; ++j) d[j] = 0.f;
      }
    }
  }
}

// Grow-only scratch owned by the calling thread, its start on a cache line (kCacheLine). A plain vector with the
// slack to align in: a thread_local AlignedVector crashed at thread exit in the MinGW build (its thread_local
// destructors can run after the thread's TLS block is gone, and the aligned free dereferences the stale pointer
// where free() tolerated it: sgemm_check under wine, now and then).
float* scratch(std::vector<float>& buf, size_t n) {
  constexpr size_t slack = kCacheLine / sizeof(float) - 1;
  if (buf.size() < n + slack) buf.resize(n + slack);
  const uintptr_t at = reinterpret_cast<uintptr_t>(buf.data());
  return reinterpret_cast<float*>((at + kCacheLine - 1) & ~uintptr_t{kCacheLine - 1});
}

void scale_c(int64_t M, int64_t N, float beta, float* C, int64_t ldc) {
  for (int64_t i = 0; i < M; ++i) {
    float* c = C + i * ldc;
    if (beta == 0.f) {
      std::fill(c, c + N, 0.f);
    } else if (beta != 1.f) {
      for (int64_t j = 0; j < N; ++j) c[j] *= beta;
    }
  }
}

// Asks for the cache lines of rows x cols floats at p (row stride ld), for writing.
inline void prefetch_rows(const float* p, int64_t rows, int64_t ld, int64_t cols) {
#if defined(__GNUC__) || defined(__clang__)
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; c += 16) __builtin_prefetch(p + r * ld + c, 1, 3);
#else
  (void)p, (void)rows, (void)ld, (void)cols;
#endif
}

// Row panels of an M block of `rows`: mr high when A is pre-packed (the last one shorter); otherwise mr high
// too when the last panel keeps at least 4 rows (full panels are packed by the kernel's own packer, a shorter
// panel by the generic loop, several times slower), else as many panels, evened out (see the driver). A
// transposed A (a Conv's columns, the transposed GEMM of few positions) is packed by the same loop at any
// height, so its panels differ by at most one row: 49 rows of mr 6 in 4 x 6 + 5 x 5, not 8 x 6 + 1. A row-major
// A keeps one height, ceil(rows / panels), so that most of its panels go through the kernel's packer (two
// heights made the transformer block's 128-row products at 2 threads 2-6 % slower, its 5-row panels packed
// element by element).
RowPanels row_panels(int64_t rows, int64_t mr, bool a_packed, bool a_trans) {
  const int64_t last = rows % mr;
  if (a_packed || last == 0 || last >= 4) return uniform_panels(rows, mr);
  const int64_t count = ceil_div(rows, mr);
  if (!a_trans) return uniform_panels(rows, ceil_div(rows, count));
  return {rows, rows / count, rows % count, count};
}

// What the micro-kernel calls on an M block of `rows` cost, in rows: a tile of fewer than 4 rows
// (8 accumulators) waits on the FMA latency, so it costs as much as 4 rows. (Counted over row-major A's panels
// for either A: the splits were tuned with these costs.)
double block_row_cost(int64_t rows, int64_t mr, bool a_packed) {
  const RowPanels panels = row_panels(rows, mr, a_packed, false);
  double cost = 0;
  for (int64_t r = 0; r < panels.count(); ++r) cost += static_cast<double>(std::max<int64_t>(panels.rows(r), 4));
  return cost;
}

// The parallel split of C into M blocks (mc rows, a multiple of mr, at most max_mc) times
// nsplit groups of B panels, chosen by cost: the pool hands the tasks out in order to
// whichever thread is free, a task costs its panels x (its rows + the packing of its B
// panels, which every M block repeats, and of its A rows, which every panel group
// repeats), and the split with the shortest simulated
// schedule wins (fewer tasks on a tie). Uneven splits (3 tasks on 2 threads, a lone
// 4-column panel group) lose to balanced ones.
void choose_split(int64_t M, int64_t npanels, int64_t mr, int64_t max_mc, int threads, bool a_packed,
                  double pack_rows, int64_t& mc_out, int64_t& nsplit_out) {
  const int64_t row_panels = ceil_div(M, mr);
  const double pack_panels = a_packed ? 0.0 : 0.5;  // packing one row of A, in panels computed against it
  const int64_t min_blocks = ceil_div(M, max_mc);
  const int64_t max_blocks = std::min(row_panels, std::max<int64_t>(min_blocks, 2 * threads));
  const int64_t max_split = std::min<int64_t>(npanels, 4 * threads);
  double best = -1;
  std::vector<double> load(static_cast<size_t>(threads));
  int64_t last_mc = -1;
  for (int64_t nb = min_blocks; nb <= max_blocks; ++nb) {
    // A pre-packed A comes in panels of mr rows, so its blocks are whole panels; rows packed by the task itself
    // can be split anywhere (128 rows on 2 threads: 64 + 64, where 72 + 56 lost to a split of the columns, in
    // which both threads pack all of A: the transformer's products at 2 threads spent 6 % packing A).
    const int64_t mc =
        a_packed ? std::min(max_mc, ceil_div(ceil_div(M, nb), mr) * mr) : std::min(max_mc, ceil_div(M, nb));
    if (mc == last_mc) continue;
    last_mc = mc;
    const int64_t blocks = ceil_div(M, mc);
    for (int64_t ns = 1; ns <= max_split; ++ns) {
      std::fill(load.begin(), load.end(), 0.0);
      for (int64_t t = 0; t < blocks * ns; ++t) {
        const int64_t rows = std::min(mc, M - (t / ns) * mc), js = t % ns;
        const int64_t panels = (js + 1) * npanels / ns - js * npanels / ns;
        *std::min_element(load.begin(), load.end()) +=
            static_cast<double>(panels) * (block_row_cost(rows, mr, a_packed) + pack_rows) +
            static_cast<double>(rows) * pack_panels;
      }
      const double span = *std::max_element(load.begin(), load.end());
      if (best < 0 || span < best * 0.999) {
        best = span;
        mc_out = mc;
        nsplit_out = ns;
      }
    }
  }
}

// Below ~2 MFLOP (a few microseconds) waking the workers costs more than it saves, unless the product streams
// at least kThreadBytes of B: a few rows against a weight matrix take the time of reading it, which two cores
// share (4 tokens against 256 x 256 weights, 0.5 MFLOP: the transformer block at 4 tokens 0.45 -> 0.41 ms at
// 2 threads, where its sixteen such products had run on one core).
constexpr double kThreadBytes = 256.0 * 1024;
bool use_threads(ThreadPool* pool, double flops, double b_bytes = 0) {
  return pool != nullptr && pool->size() > 1 && (flops >= 2.0e6 || b_bytes >= kThreadBytes);
}

// One operand: either raw memory (p, ld, trans) or a pre-packed operand.
struct OperandA {
  const float* p = nullptr;
  int64_t ld = 0;
  bool trans = false;
  const PackedA* packed = nullptr;
};
struct OperandB {
  const float* p = nullptr;
  int64_t ld = 0;
  bool trans = false;
  const PackedB* packed = nullptr;
  const PanelSourceB* source = nullptr;
};

// C[0,:] = alpha * a . op(B) + beta * C[0,:] for M == 1 (matrix-vector), without packing.
// The kernel's vector loops (gemv_dots / gemv_axpys) write y[0, n) = op(B)-products of the part; alpha and beta
// applied after (in place when they are 1 and 0). False when the kernel has none.
bool gemv_part(const SgemmKernel& kr, bool dots, int64_t n, int64_t K, float alpha, const float* a, const float* b,
               int64_t ldb, float beta, float* C, int64_t ldc) {
  const SgemvKernel fn = dots ? kr.gemv_dots : kr.gemv_axpys;
  if (!fn) return false;
  if (alpha == 1.f && beta == 0.f && ldc == 1) {
    fn(n, K, a, b, ldb, C);
    return true;
  }
  thread_local std::vector<float> part;
  if (part.size() < static_cast<size_t>(n)) part.resize(static_cast<size_t>(n));
  fn(n, K, a, b, ldb, part.data());
  for (int64_t j = 0; j < n; ++j) C[j * ldc] = alpha * part[j] + (beta == 0.f ? 0.f : beta * C[j * ldc]);
  return true;
}

void gemv_row(const SgemmKernel& kr, int64_t N, int64_t K, float alpha, const float* a, int64_t a_stride,
              const OperandB& B, float beta, float* C, ThreadPool* pool) {
  std::vector<float> av(static_cast<size_t>(K));
  for (int64_t k = 0; k < K; ++k) av[k] = a[k * a_stride];
  auto run = [&](int64_t j0, int64_t j1) {
    if (gemv_part(kr, B.trans, j1 - j0, K, alpha, av.data(), B.trans ? B.p + j0 * B.ld : B.p + j0, B.ld, beta,
                  C + j0, 1))
      return;
    if (!B.trans) {
      std::vector<float> acc(static_cast<size_t>(j1 - j0), 0.f);
      float* ac = acc.data();
      for (int64_t k = 0; k < K; ++k) {
        const float ak = av[k];
        const float* bk = B.p + k * B.ld + j0;
        for (int64_t j = 0; j < j1 - j0; ++j) ac[j] += ak * bk[j];
      }
      for (int64_t j = j0; j < j1; ++j) C[j] = alpha * ac[j - j0] + (beta == 0.f ? 0.f : beta * C[j]);
    } else {
      for (int64_t j = j0; j < j1; ++j) {
        const float* bj = B.p + j * B.ld;
        float part[8] = {0, 0, 0, 0, 0, 0, 0, 0};
        int64_t k = 0;
        for (; k + 8 <= K; k += 8)
          for (int u = 0; u < 8; ++u) part[u] += av[k + u] * bj[k + u];
        float s = 0.f;
        for (; k < K; ++k) s += av[k] * bj[k];
        s += ((part[0] + part[1]) + (part[2] + part[3])) + ((part[4] + part[5]) + (part[6] + part[7]));
        C[j] = alpha * s + (beta == 0.f ? 0.f : beta * C[j]);
      }
    }
  };
  if (use_threads(pool, 2.0 * N * K) && N >= 64) {
    pool->parallel_for(N, 32, run);
  } else {
    run(0, N);
  }
}

// C[:,0] = alpha * op(A) . b + beta * C[:,0] for N == 1 (matrix-vector), without packing.
void gemv_col(const SgemmKernel& kr, int64_t M, int64_t K, float alpha, const OperandA& A, const float* b,
              int64_t b_stride, float beta, float* C, int64_t ldc, ThreadPool* pool) {
  std::vector<float> bv(static_cast<size_t>(K));
  for (int64_t k = 0; k < K; ++k) bv[k] = b[k * b_stride];
  auto run = [&](int64_t i0, int64_t i1) {
    if (gemv_part(kr, !A.trans, i1 - i0, K, alpha, bv.data(), A.trans ? A.p + i0 : A.p + i0 * A.ld, A.ld, beta,
                  C + i0 * ldc, ldc))
      return;
    if (!A.trans) {
      for (int64_t i = i0; i < i1; ++i) {
        const float* ai = A.p + i * A.ld;
        float part[8] = {0, 0, 0, 0, 0, 0, 0, 0};
        int64_t k = 0;
        for (; k + 8 <= K; k += 8)
          for (int u = 0; u < 8; ++u) part[u] += ai[k + u] * bv[k + u];
        float s = 0.f;
        for (; k < K; ++k) s += ai[k] * bv[k];
        s += ((part[0] + part[1]) + (part[2] + part[3])) + ((part[4] + part[5]) + (part[6] + part[7]));
        C[i * ldc] = alpha * s + (beta == 0.f ? 0.f : beta * C[i * ldc]);
      }
    } else {  // A is [K, M]: accumulate rows of A scaled by b[k]
      std::vector<float> acc(static_cast<size_t>(i1 - i0), 0.f);
      float* ac = acc.data();
      for (int64_t k = 0; k < K; ++k) {
        const float bk = bv[k];
        const float* ak = A.p + k * A.ld + i0;
        for (int64_t i = 0; i < i1 - i0; ++i) ac[i] += bk * ak[i];
      }
      for (int64_t i = i0; i < i1; ++i)
        C[i * ldc] = alpha * ac[i - i0] + (beta == 0.f ? 0.f : beta * C[i * ldc]);
    }
  };
  if (use_threads(pool, 2.0 * M * K) && M >= 64) {
    pool->parallel_for(M, 32, run);
  } else {
    run(0, M);
  }
}

void gemm_driver(const SgemmKernel& kr, int64_t M, int64_t N, int64_t K, float alpha, const OperandA& A,
                 const OperandB& B, float beta, float* C, int64_t ldc, ThreadPool* pool,
                 const TileEpilogue* epilogue = nullptr) {
  MRT_ENFORCE(M >= 0 && N >= 0 && K >= 0, MRT_INTERNAL, "sgemm: negative size M=", M, " N=", N, " K=", K);
  if (M == 0 || N == 0) return;
  if (K == 0 || alpha == 0.f) {
    scale_c(M, N, beta, C, ldc);
    if (epilogue) epilogue->apply(epilogue->ctx, 0, M, 0, N, C, ldc);
    return;
  }
  if (M == 1 && !A.packed && !B.packed && !B.source) {
    gemv_row(kr, N, K, alpha, A.p, A.trans ? A.ld : 1, B, beta, C, pool);
    return;
  }
  if (N == 1 && !A.packed && !B.packed && !B.source) {
    gemv_col(kr, M, K, alpha, A, B.p, B.trans ? 1 : B.ld, beta, C, ldc, pool);
    return;
  }
  const int64_t mr = kr.mr, nr = kr.nr;
  const int threads = pool ? pool->size() : 1;
  const bool parallel = use_threads(pool, 2.0 * M * N * K, 4.0 * static_cast<double>(N) * K);

  const int64_t npanels = ceil_div(N, nr);
  // B panels produced by a source (Conv's im2col) cost more to remake for every M block
  // than a copy: taller blocks (a pre-packed A block streams from L2 either way).
  const int64_t max_mc = B.source && A.packed ? 2 * kr.mc : kr.mc;
  int64_t mc, nsplit = 1;
  if (parallel) {
    // Making one B panel, in rows computed against it: none when pre-packed, a copy, or
    // Conv's im2col (dearer).
    const double pack_rows = B.packed ? 0.0 : B.source ? 8.0 : 4.0;
    choose_split(M, npanels, mr, max_mc, threads, A.packed != nullptr, pack_rows, mc, nsplit);
  } else {  // even out the M blocks: blocks of mc rows (a multiple of mr, at most max_mc)
    mc = std::min(max_mc, ceil_div(ceil_div(M, ceil_div(M, max_mc)), mr) * mr);
  }
  const int64_t n_mblocks = ceil_div(M, mc);
  const int64_t ntasks = n_mblocks * nsplit;
  const int64_t a_panels = ceil_div(M, mr);  // pre-packed A: kc blocks of a_panels panels each
  const int64_t kcs = kc_step(A.packed ? packed_a_kc(kr) : kr.kc, K);

  // B panel q over K steps [pc, pc + kc): in place when pre-packed, else made into dst.
  auto b_panel = [&](int64_t q, int64_t pc, int64_t kc, float* dst) -> const float* {
    if (B.packed) return B.packed->data.data() + (q * K + pc) * nr;
    const int64_t j = q * nr;
    if (B.source) B.source->fill(B.source->ctx, pc, kc, j, std::min(nr, N - j), static_cast<int>(nr), dst);
    else pack_b(kr, B.trans, B.p, B.ld, pc, kc, 0, N, q, q + 1, dst, kc * nr);
    return dst;
  };
  // A depth of one K step (a pointwise Conv of few input channels): row panels outer over a stretch of
  // B panels packed once, so that each row of C (a Conv's output channel, a plane apart from the next)
  // is written, and the output stage reads its residual, as one sequential stretch: panels outer would
  // touch every row of the M block per panel, more streams than the hardware prefetchers follow.
  auto single_step = [&](int64_t ic, const RowPanels& panels, int64_t q0, int64_t q1, float* abuf) {
    thread_local std::vector<float> stretch_scratch;
    const int64_t panel_floats = K * nr;
    const int64_t stretch = std::max<int64_t>(1, kStretchBytes / (panel_floats * static_cast<int64_t>(sizeof(float))));
    float* bbuf = B.packed ? nullptr
                           : scratch(stretch_scratch, static_cast<size_t>(std::min(stretch, q1 - q0) * panel_floats));
    if (!A.packed) pack_a(kr, A.trans, A.p, A.ld, ic, panels, 0, K, abuf, K * mr);
    for (int64_t g0 = q0; g0 < q1; g0 += stretch) {
      const int64_t g1 = std::min(q1, g0 + stretch);
      auto panel = [&](int64_t q) { return B.packed ? b_panel(q, 0, K, nullptr) : bbuf + (q - g0) * panel_floats; };
      for (int64_t q = g0; q < g1 && !B.packed; ++q) b_panel(q, 0, K, bbuf + (q - g0) * panel_floats);
      const int64_t j0 = g0 * nr, cols = std::min(N, g1 * nr) - j0;
      for (int64_t r = 0; r < panels.count(); ++r) {
        const int64_t i = ic + panels.start(r), m = panels.rows(r);
        const float* ap = A.packed ? A.packed->data.data() + (i / mr) * K * mr : abuf + r * K * mr;
        float* crow = C + i * ldc;
        for (int64_t q = g0; q < g1; ++q) {
          const int64_t j = q * nr;
          kr.rows[m](K, ap, panel(q), crow + j, ldc, std::min(nr, N - j), alpha, beta);
        }
        if (epilogue) {
          if (epilogue->prefetch && r + 1 < panels.count())  // the next rows' inputs, while this stage runs
            epilogue->prefetch(epilogue->ctx, i + m, panels.rows(r + 1), j0, std::min<int64_t>(cols, 256));
          epilogue->apply(epilogue->ctx, i, m, j0, cols, crow + j0, ldc);
        }
      }
    }
  };
  // A block of one row panel (batch 1 or a few tokens against constant weights) with a pre-packed B: each B
  // panel through all its K steps before the next, so that B, laid out panel by panel over the whole K, is
  // read in one sequential stream (panels inner would jump a panel's K depth between consecutive tiles). The
  // rows' A is packed for all the K steps first, to the block's own height where the kernel has tiles for that
  // (a single row of a row-major A as it is), else in an mr-high panel; each output gets the same K steps in
  // the same order as below.
  auto one_panel_rows = [&](int64_t ic, int64_t mcb, int64_t q0, int64_t q1) {
    thread_local std::vector<float> row_scratch;
    const SgemmMicroKernel compact = A.packed ? nullptr : kr.rows_compact_a[mcb];
    const SgemmMicroKernel tile = compact ? compact : kr.rows[mcb];
    const int64_t a_step = compact ? mcb : mr;  // floats of A per K step
    const float* arow = nullptr;
    if (compact && mcb == 1 && (!A.trans || A.ld == 1)) {
      arow = A.p + (A.trans ? ic : ic * A.ld);
    } else if (compact) {
      float* packed = scratch(row_scratch, static_cast<size_t>(K * mcb));
      pack_a_compact(A.trans, A.p, A.ld, ic, mcb, K, packed);
      arow = packed;
    } else if (!A.packed) {
      float* packed = scratch(row_scratch, static_cast<size_t>(ceil_div(K, kcs) * kcs * mr));
      for (int64_t pc = 0; pc < K; pc += kcs) {
        const int64_t kc = std::min(kcs, K - pc);
        pack_a(kr, A.trans, A.p, A.ld, ic, uniform_panels(mcb, mcb), pc, kc, packed + pc * mr, kc * mr);
      }
      arow = packed;
    }
    for (int64_t q = q0; q < q1; ++q) {
      const int64_t j = q * nr, n = std::min(nr, N - j);
      for (int64_t pc = 0; pc < K; pc += kcs) {
        const int64_t kc = std::min(kcs, K - pc);
        const float* ap =
            A.packed ? A.packed->data.data() + pc * a_panels * mr + (ic / mr) * kc * mr : arow + pc * a_step;
        tile(kc, ap, b_panel(q, pc, kc, nullptr), C + ic * ldc + j, ldc, n, alpha, pc == 0 ? beta : 1.f);
      }
      if (epilogue) epilogue->apply(epilogue->ctx, ic, mcb, j, n, C + ic * ldc + j, ldc);
    }
  };
  // Several row panels against a pre-packed B over many K steps (the transposed GEMM of a Conv of few positions:
  // a 7 x 7 map's 49 rows against a layer's filters, which come from memory in a model larger than the cache):
  // as one_panel_rows, each B panel through all its K steps before the next, so that B is read in one sequential
  // stream, with the rows' A packed for the whole K first (row panel r's K steps contiguous, kept in L2). The
  // blocked order below reads B a K step's piece of one panel after another, a panel's depth apart. Each output
  // gets the same K steps in the same order as there. On an AMD Zen 5 core, one process alternating blocks: light
  // ResNet-50 0.984 at 1 thread, 0.993 at 2 (its 7 x 7 layers' filters from memory); alone, 2048 -> 512 on 7 x 7
  // 1.00 at 1 thread, 285 -> 228 us at 2; 512 -> 2048 on 7 x 7 0.957; MatMul 128 x 768 by 768 x 3072 0.973, 64 x
  // 3072 by 3072 x 768 at 2 threads 0.941.
  // Where the kernel has streaming tiles, each row panel's tile also loads its share of the next B piece (the
  // panels lie one after the other), a line per K step: the first row panel no longer waits on memory for
  // every line of its piece while the others find theirs in L1. A chain of 24 1x1 convolutions 512 <-> 2048 on
  // 7 x 7 (96 MB of filters, from memory), per layer: 536 -> 420 us at 1 thread (onnxruntime 460), 318 -> 243-251
  // at 2 (onnxruntime 241-246); light ResNet-50, two processes alternating, 0.968 at 1 thread, 0.975 at 2; the
  // transformer block 0.999 / 0.933. With the weights in the cache, alone: 49 x 512 by 512 x 2048 1.02, others
  // within 1 %.
  const int64_t kpad = ceil_div(K, kcs) * kcs;
  auto whole_k_rows = [&](int64_t ic, const RowPanels& panels, int64_t q0, int64_t q1) {
    thread_local std::vector<float> rows_scratch;
    const int64_t mcb = panels.total, rpanels = panels.count();
    float* packed = scratch(rows_scratch, static_cast<size_t>(rpanels * kpad * mr));
    for (int64_t pc = 0; pc < K; pc += kcs)
      pack_a(kr, A.trans, A.p, A.ld, ic, panels, pc, std::min(kcs, K - pc), packed + pc * mr, kpad * mr);
    for (int64_t q = q0; q < q1; ++q) {
      const int64_t j = q * nr, n = std::min(nr, N - j);
      for (int64_t pc = 0; pc < K; pc += kcs) {
        const int64_t kc = std::min(kcs, K - pc);
        const float* bp = b_panel(q, pc, kc, nullptr);
        const int64_t lines = kc * nr / 16, per = ceil_div(lines, rpanels);
        for (int64_t r = 0; r < rpanels; ++r) {
          const int64_t i = ic + panels.start(r), m = panels.rows(r);
          if (kr.rows_stream[m] && (q + 1 < q1 || pc + kc < K)) {
            // the next piece of this share's B stream (the panels are contiguous), a slice per row panel
            const float* ahead = bp + kc * nr + std::min(lines, r * per) * 16;
            kr.rows_stream[m](kc, packed + r * kpad * mr + pc * mr, bp, C + i * ldc + j, ldc, n, alpha,
                              pc == 0 ? beta : 1.f, ahead, std::max<int64_t>(0, std::min(per, lines - r * per)));
          } else {
            kr.rows[m](kc, packed + r * kpad * mr + pc * mr, bp, C + i * ldc + j, ldc, n, alpha,
                       pc == 0 ? beta : 1.f);
          }
        }
      }
      if (epilogue) epilogue->apply(epilogue->ctx, ic, mcb, j, n, C + ic * ldc + j, ldc);
    }
  };
  // One task = one M block x one share of the B panels, over the whole K: the only
  // synchronisation is the end of the parallel loop. Each task packs its A block (per kc
  // step, kept in L2) and each B panel right before using it (kept in L1); a B panel is
  // thus packed once per M block, which costs ~1/(2*mc) of the arithmetic.
  auto task = [&](int64_t t0, int64_t t1) {
    thread_local std::vector<float> a_scratch, b_scratch;
    float* abuf = A.packed ? nullptr : scratch(a_scratch, static_cast<size_t>(ceil_div(mc, mr) * mr * kcs));
    float* own_b = B.packed ? nullptr : scratch(b_scratch, static_cast<size_t>(kcs * nr));
    for (int64_t t = t0; t < t1; ++t) {
      const int64_t ib = t / nsplit, js = t % nsplit;
      const int64_t ic = ib * mc;
      const int64_t mcb = std::min(mc, M - ic);
      // Row panels of the block: mr high when pre-packed; otherwise evened out (49 rows: 10+10+10+10+9, not
      // 12+12+12+12+1, whose 1-row tile is bound by the FMA latency, not the throughput).
      const RowPanels panels = row_panels(mcb, mr, A.packed != nullptr, A.trans);
      const int64_t q0 = js * npanels / nsplit, q1 = (js + 1) * npanels / nsplit;
      if (B.packed && panels.count() == 1) {
        one_panel_rows(ic, mcb, q0, q1);
        continue;
      }
      if (K <= kcs) {
        single_step(ic, panels, q0, q1, abuf);
        continue;
      }
      if (B.packed && !A.packed &&
          panels.count() * kpad * mr * static_cast<int64_t>(sizeof(float)) <= kWholeKABytes) {
        whole_k_rows(ic, panels, q0, q1);
        continue;
      }
      // The task's panels in chunks whose C block (mcb x chunk columns) stays in L2 over
      // all the K steps, instead of the whole C row block going out to memory and back
      // once per K step when N is large.
      const int64_t chunk = std::max<int64_t>(1, kCBlockBytes / (mcb * nr * static_cast<int64_t>(sizeof(float))));
      for (int64_t g0 = q0; g0 < q1; g0 += chunk) {
        const int64_t g1 = std::min(q1, g0 + chunk);
        for (int64_t pc = 0; pc < K; pc += kcs) {
          const int64_t kc = std::min(kcs, K - pc);
          const float beta_k = pc == 0 ? beta : 1.f;
          if (!A.packed) pack_a(kr, A.trans, A.p, A.ld, ic, panels, pc, kc, abuf, kc * mr);
          for (int64_t q = g0; q < g1; ++q) {
            const int64_t j = q * nr;
            const int64_t n = std::min(nr, N - j);
            const float* bp = b_panel(q, pc, kc, own_b);
            for (int64_t r = 0; r < panels.count(); ++r) {
              const int64_t i = ic + panels.start(r);
              const int64_t m = panels.rows(r);
              const float* ap = A.packed ? A.packed->data.data() + pc * a_panels * mr + (i / mr) * kc * mr
                                         : abuf + r * kc * mr;
              kr.rows[m](kc, ap, bp, C + i * ldc + j, ldc, n, alpha, beta_k);
              // The same rows of the next panel, one tile ahead: on the first K step its C lines are cold (a
              // large output is written far apart, row by row), on the last the output stage reads its inputs.
              if (q + 1 < g1) {
                const int64_t jn = j + nr, nn = std::min(nr, N - jn);
                if (pc == 0) prefetch_rows(C + i * ldc + jn, m, ldc, nn);
                if (epilogue && epilogue->prefetch && pc + kc >= K) epilogue->prefetch(epilogue->ctx, i, m, jn, nn);
              }
            }
            // Output stage one panel behind (the previous panel's stores have retired;
            // both panels of the M block are still in cache).
            if (epilogue && pc + kc >= K && q > g0) {
              const int64_t jp = j - nr;
              epilogue->apply(epilogue->ctx, ic, mcb, jp, nr, C + ic * ldc + jp, ldc);
            }
          }
          if (epilogue && pc + kc >= K) {
            const int64_t jl = (g1 - 1) * nr;
            epilogue->apply(epilogue->ctx, ic, mcb, jl, std::min(nr, N - jl), C + ic * ldc + jl, ldc);
          }
        }
      }
    }
  };
  if (parallel && ntasks > 1) {
    pool->parallel_tasks(ntasks, task);
  } else {
    task(0, ntasks);
  }
}

// The portable kernel and the x86 kernels are registered here, from baseline-compiled
// code (their own files are compiled with -mavx2/-mavx512f throughout). Other backends
// register themselves (backend_registry.h).
const CpuKernelRegistrar kRegPortable({CpuKernelFamily::kSgemm, "portable", 0, 0,
                                       []() -> const void* { return &kPortable; }});
#if defined(MOSAICRT_X86_SIMD)
const CpuKernelRegistrar kRegAvx2({CpuKernelFamily::kSgemm, "avx2", 20, kCpuAvx2Fma,
                                   []() -> const void* { return &sgemm_avx2_kernel(); }});
const CpuKernelRegistrar kRegAvx512({CpuKernelFamily::kSgemm, "avx512", 30, kCpuAvx512,
                                     []() -> const void* { return &sgemm_avx512_kernel(); }});
#endif

}  // namespace

const SgemmKernel& sgemm_portable_kernel() { return kPortable; }

const SgemmKernel* sgemm_find_kernel(const char* name) {
  const CpuKernelEntry* e = find_cpu_kernel(CpuKernelFamily::kSgemm, name);
  return e ? static_cast<const SgemmKernel*>(e->get()) : nullptr;
}

const SgemmKernel& sgemm_active_kernel() {
  static const SgemmKernel* const kernel = [] {
    const CpuKernelEntry* e = active_cpu_kernel(CpuKernelFamily::kSgemm);
    return e ? static_cast<const SgemmKernel*>(e->get()) : &kPortable;
  }();
  return *kernel;
}

const char* sgemm_kernel_name() { return sgemm_active_kernel().name; }

bool sgemm_kernel_is_avx512() {
  static const bool yes = std::strcmp(sgemm_kernel_name(), "avx512f") == 0;
  return yes;
}

void sgemm_with_kernel(const SgemmKernel& kernel, bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K,
                       float alpha, const float* A, int64_t lda, const float* B, int64_t ldb, float beta, float* C,
                       int64_t ldc, ThreadPool* pool) {
  OperandA a;
  a.p = A;
  a.ld = lda;
  a.trans = trans_a;
  OperandB b;
  b.p = B;
  b.ld = ldb;
  b.trans = trans_b;
  gemm_driver(kernel, M, N, K, alpha, a, b, beta, C, ldc, pool);
}

PackedA sgemm_pack_a_with_kernel(const SgemmKernel& kernel, bool trans_a, int64_t M, int64_t K, const float* A,
                                 int64_t lda) {
  PackedA p;
  p.M = M;
  p.K = K;
  p.kernel = &kernel;
  const int64_t panels = ceil_div(M, kernel.mr);
  p.data.assign(static_cast<size_t>(panels * K * kernel.mr), 0.f);
  // Stored in the order the driver reads it: per kc block, every panel's kc x mr values
  // in turn, so that a task's A block for one kc step is one contiguous stream.
  const int64_t kcs = kc_step(packed_a_kc(kernel), K);
  for (int64_t pc = 0; pc < K && M > 0; pc += kcs) {
    const int64_t kc = std::min<int64_t>(kcs, K - pc);
    pack_a(kernel, trans_a, A, lda, 0, uniform_panels(M, kernel.mr), pc, kc, p.data.data() + pc * panels * kernel.mr,
           kc * kernel.mr);
  }
  return p;
}

PackedB sgemm_pack_b_with_kernel(const SgemmKernel& kernel, bool trans_b, int64_t K, int64_t N, const float* B,
                                 int64_t ldb) {
  PackedB p;
  p.K = K;
  p.N = N;
  p.kernel = &kernel;
  const int64_t panels = ceil_div(N, kernel.nr);
  p.data.assign(static_cast<size_t>(panels * K * kernel.nr), 0.f);
  if (N > 0 && K > 0) pack_b(kernel, trans_b, B, ldb, 0, K, 0, N, 0, panels, p.data.data(), K * kernel.nr);
  return p;
}

void sgemm(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, float alpha, const float* A, int64_t lda,
           const float* B, int64_t ldb, float beta, float* C, int64_t ldc, ThreadPool* pool) {
  sgemm_with_kernel(sgemm_active_kernel(), trans_a, trans_b, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc, pool);
}

PackedA sgemm_pack_a(bool trans_a, int64_t M, int64_t K, const float* A, int64_t lda) {
  return sgemm_pack_a_with_kernel(sgemm_active_kernel(), trans_a, M, K, A, lda);
}

PackedB sgemm_pack_b(bool trans_b, int64_t K, int64_t N, const float* B, int64_t ldb) {
  return sgemm_pack_b_with_kernel(sgemm_active_kernel(), trans_b, K, N, B, ldb);
}

void sgemm_packed_a(const PackedA& A, bool trans_b, int64_t N, float alpha, const float* B, int64_t ldb, float beta,
                    float* C, int64_t ldc, ThreadPool* pool, const TileEpilogue* epilogue) {
  MRT_ENFORCE(A.kernel != nullptr, MRT_INTERNAL, "sgemm_packed_a: operand was not packed");
  OperandA a;
  a.packed = &A;
  OperandB b;
  b.p = B;
  b.ld = ldb;
  b.trans = trans_b;
  gemm_driver(*A.kernel, A.M, N, A.K, alpha, a, b, beta, C, ldc, pool, epilogue);
}

void sgemm_packed_a_source(const PackedA& A, int64_t N, float alpha, const PanelSourceB& source, float beta, float* C,
                           int64_t ldc, ThreadPool* pool, const TileEpilogue* epilogue) {
  MRT_ENFORCE(A.kernel != nullptr && source.fill != nullptr, MRT_INTERNAL,
              "sgemm_packed_a_source: operand was not packed or has no source");
  OperandA a;
  a.packed = &A;
  OperandB b;
  b.source = &source;
  gemm_driver(*A.kernel, A.M, N, A.K, alpha, a, b, beta, C, ldc, pool, epilogue);
}

void sgemm_packed_b(bool trans_a, int64_t M, float alpha, const float* A, int64_t lda, const PackedB& B, float beta,
                    float* C, int64_t ldc, ThreadPool* pool, const TileEpilogue* epilogue) {
  MRT_ENFORCE(B.kernel != nullptr, MRT_INTERNAL, "sgemm_packed_b: operand was not packed");
  OperandA a;
  a.p = A;
  a.ld = lda;
  a.trans = trans_a;
  OperandB b;
  b.packed = &B;
  gemm_driver(*B.kernel, M, B.N, B.K, alpha, a, b, beta, C, ldc, pool, epilogue);
}

}  // namespace mrt
