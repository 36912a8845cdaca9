// SGEMM micro-kernel for arm64 SME (FEAT_SME): the tile is one ZA tile of single
// precision, SVL/32 x SVL/32 values (8 x 8 at a 256-bit streaming vector length, 16 x 16
// at 512 bits; rows are capped at kSgemmMaxMr), accumulated with one fmopa outer product
// per k. Each call enters streaming mode, runs the whole tile and leaves it again, so no
// streaming state outlives a call.
//
// Compiled for arm64 targets only, for the armv8-a baseline: the SME instructions are
// inline assembly (the C++ compiler needs no SME support, only the assembler), and they run
// only after the registry found HWCAP2_SME. Registers itself (backend_registry.h).
#if defined(__aarch64__) && (defined(__GNUC__) || defined(__clang__))

#include <cstring>
#include <utility>

#include "backend_registry.h"
#include "sgemm_kernels.h"

namespace mrt {

namespace {

// Streaming vector length in 32-bit lanes. Only call when the CPU has SME.
int64_t sme_lanes() {
  int64_t bytes;
  asm volatile(".arch_extension sme\n\trdsvl %0, #1" : "=r"(bytes));
  return bytes / 4;
}

int64_t g_mr = 0;  // rows of the packed A panels (set once, before the kernel is handed out)

// c[i*ldc + j] = alpha * sum_k a[k*mr + i] * b[k*nr + j] + beta * c[i*ldc + j], i < m, j < n
// (nr = the streaming vector length in floats). Entering and leaving streaming mode zeroes
// every vector register, hence the clobbers of v0-v31.
void sme_tile(int64_t kc, const float* a, int64_t mr, const float* b, float* c, int64_t ldc, int64_t m, int64_t n,
              float alpha, float beta) {
  uint32_t alpha_bits, beta_bits;
  std::memcpy(&alpha_bits, &alpha, sizeof(alpha_bits));
  std::memcpy(&beta_bits, &beta, sizeof(beta_bits));
  const int64_t a_step = mr * 4, c_step = ldc * 4;
  asm volatile(
      ".arch_extension sme\n\t"
      "smstart\n\t"
      "zero {za}\n\t"
      "ptrue p0.s\n\t"
      "whilelt p1.s, xzr, %[mr]\n\t"
      "cbz %[kc], 2f\n"
      "1:\n\t"
      "ld1w {z0.s}, p1/z, [%[a]]\n\t"
      "ld1w {z1.s}, p0/z, [%[b]]\n\t"
      "fmopa za0.s, p1/m, p0/m, z0.s, z1.s\n\t"
      "add %[a], %[a], %[a_step]\n\t"
      "incb %[b]\n\t"
      "subs %[kc], %[kc], #1\n\t"
      "b.ne 1b\n"
      "2:\n\t"
      "whilelt p2.s, xzr, %[n]\n\t"
      "mov z3.s, %w[alpha]\n\t"
      "mov z4.s, %w[beta]\n\t"
      "mov w12, #0\n"
      "3:\n\t"
      "mova z2.s, p0/m, za0h.s[w12, 0]\n\t"
      "fmul z2.s, z2.s, z3.s\n\t"
      "cbz %w[beta], 4f\n\t"
      "ld1w {z5.s}, p2/z, [%[c]]\n\t"
      "fmla z2.s, p2/m, z5.s, z4.s\n"
      "4:\n\t"
      "st1w {z2.s}, p2, [%[c]]\n\t"
      "add %[c], %[c], %[c_step]\n\t"
      "add w12, w12, #1\n\t"
      "cmp x12, %[m]\n\t"
      "b.lt 3b\n\t"
      "smstop\n"
      : [kc] "+r"(kc), [a] "+r"(a), [b] "+r"(b), [c] "+r"(c)
      : [mr] "r"(mr), [a_step] "r"(a_step), [c_step] "r"(c_step), [m] "r"(m), [n] "r"(n),
        [alpha] "r"(alpha_bits), [beta] "r"(beta_bits)
      : "memory", "cc", "x12", "p0", "p1", "p2", "v0", "v1", "v2", "v3", "v4", "v5", "v6", "v7", "v8", "v9", "v10",
        "v11", "v12", "v13", "v14", "v15", "v16", "v17", "v18", "v19", "v20", "v21", "v22", "v23", "v24", "v25",
        "v26", "v27", "v28", "v29", "v30", "v31");
}

// Non-zero while a caller has ZA contents waiting for a lazy save (the SME procedure call
// standard's TPIDR2_EL0 protocol): this kernel then must not touch ZA.
bool za_lazy_save_pending() {
  uint64_t v;
  asm volatile(".arch_extension sme\n\tmrs %0, tpidr2_el0" : "=r"(v));
  return v != 0;
}

// The same tile in scalar code, for when ZA may not be used.
void scalar_tile(int64_t kc, const float* a, int64_t mr, const float* b, int64_t nr, float* c, int64_t ldc, int64_t m,
                 int64_t n, float alpha, float beta) {
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) {
      float acc = 0.f;
      for (int64_t k = 0; k < kc; ++k) acc += a[k * mr + i] * b[k * nr + j];
      float* cij = c + i * ldc + j;
      *cij = alpha * acc + (beta == 0.f ? 0.f : beta * *cij);
    }
}

template <int M>
void micro_sme(int64_t kc, const float* a, const float* b, float* c, int64_t ldc, int64_t n, float alpha,
               float beta) {
  if (za_lazy_save_pending()) {
    scalar_tile(kc, a, g_mr, b, sme_lanes(), c, ldc, M, n, alpha, beta);
    return;
  }
  // beta == 0: C is write-only; an exact 0 skips the load (-0.f compares equal too).
  sme_tile(kc, a, g_mr, b, c, ldc, M, n, alpha, beta == 0.f ? 0.f : beta);
}

template <size_t... I>
void fill_rows(SgemmKernel& k, std::index_sequence<I...>) {
  ((k.rows[I + 1] = static_cast<int>(I + 1) <= k.mr ? micro_sme<static_cast<int>(I + 1)> : nullptr), ...);
}

}  // namespace

// External so that a build's symbol table shows whether the Arm kernels are compiled in.
// Only call when the CPU has SME (it reads the streaming vector length).
const SgemmKernel& sgemm_sme_kernel() {
  static const SgemmKernel k = [] {
    const int64_t lanes = sme_lanes();
    SgemmKernel s = {"sme", 0, 0, 256, 0, {nullptr}};
    s.mr = static_cast<int>(lanes < kSgemmMaxMr ? lanes : kSgemmMaxMr);
    s.nr = static_cast<int>(lanes < kSgemmMaxNr ? lanes : kSgemmMaxNr);
    s.mc = s.mr * 16;
    g_mr = s.mr;
    fill_rows(s, std::make_index_sequence<kSgemmMaxMr>());
    return s;
  }();
  return k;
}

namespace {
const CpuKernelRegistrar kRegSme({CpuKernelFamily::kSgemm, "sme", 20, kCpuNeon | kCpuSme,
                                  []() -> const void* { return &sgemm_sme_kernel(); }});
}  // namespace

}  // namespace mrt

#endif
