// Integer GEMM for the quantized kernels: packing of the operands (int16 pairs, or bytes
// for the 8-bit dot-product kernels) and the drivers that split C into (row block, panel)
// tiles over the thread pool. The micro-kernels are chosen at run time through the kernel
// registry (gemm/backend_registry.h): the portable int16 one below is always there; the
// x86 ones are registered below, the arm64 ones by quant_igemm_neon.cc.
#include <algorithm>
#include <cstdlib>
#include <cstring>
#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#include "../gemm/backend_registry.h"
#include "quant_common.h"

namespace mrt {
namespace quant {
namespace {

// B's K x N elements (row stride ldb) into `out` as panels of kIgemmPanel columns, pairs of k interleaved
// (PackedB's layout, Kp rows a panel), value(b, n) the element stored for b of column n; zero past K and N.
template <class S, class D, class Value>
void interleave_panels(const S* B, int64_t ldb, int64_t K, int64_t N, int64_t Kp, std::vector<D>& out,
                       const Value& value) {
  const int64_t panels = (N + kIgemmPanel - 1) / kIgemmPanel;
  out.assign(static_cast<size_t>(panels * Kp * kIgemmPanel), D(0));
  for (int64_t p = 0; p < panels; ++p) {
    D* dst = out.data() + p * Kp * kIgemmPanel;
    const int64_t n0 = p * kIgemmPanel, nn = std::min(kIgemmPanel, N - n0);
    for (int64_t k = 0; k < K; ++k) {
      const S* row = B + k * ldb + n0;
      D* d = dst + (k >> 1) * 2 * kIgemmPanel + (k & 1);
      for (int64_t j = 0; j < nn; ++j) d[2 * j] = value(row[j], n0 + j);
    }
  }
}

// K, N and the panel geometry of a PackedB or PackedBBytes (pairs of k: Kp is K rounded up to even).
template <class P>
void set_panel_shape(P& out, int64_t K, int64_t N) {
  out.K = K;
  out.N = N;
  out.Kp = (K + 1) & ~int64_t(1);
  out.panels = (N + kIgemmPanel - 1) / kIgemmPanel;
}

template <class S>
void pack_b_impl(PackedB& out, const S* B, int64_t ldb, int64_t K, int64_t N, const int32_t* zp, bool zp_per_col) {
  set_panel_shape(out, K, N);
  interleave_panels(B, ldb, K, N, out.Kp, out.data, [&](S b, int64_t n) {
    const int32_t z = zp ? (zp_per_col ? zp[n] : zp[0]) : 0;
    return static_cast<int16_t>(static_cast<int32_t>(b) - z);
  });
}

// Portable micro-kernels: same contract as the AVX2 ones, over int16 panels or the byte form (b_signed: int8
// bytes, else uint8; unused for int16 panels).
template <class Elem>
void portable_block(int64_t rows, int64_t Kp, const int16_t* A, int64_t lda, const Elem* panel, bool b_signed,
                    int32_t* C, int64_t ldc, int64_t valid_n) {
  const auto value = [b_signed](Elem v) -> int32_t {
    if constexpr (sizeof(Elem) == 1) return b_signed ? static_cast<int8_t>(v) : v;
    return v;
  };
  for (int64_t r = 0; r < rows; ++r) {
    int32_t acc[kIgemmPanel] = {0};
    const int16_t* a = A + r * lda;
    for (int64_t kp = 0; kp < Kp; kp += 2) {
      const int32_t a0 = a[kp], a1 = a[kp + 1];
      const Elem* b = panel + kp * kIgemmPanel;
      for (int64_t j = 0; j < kIgemmPanel; ++j) acc[j] += a0 * value(b[2 * j]) + a1 * value(b[2 * j + 1]);
    }
    std::memcpy(C + r * ldc, acc, static_cast<size_t>(valid_n) * sizeof(int32_t));
  }
}

void igemm_block_portable(int64_t rows, int64_t Kp, const int16_t* A, int64_t lda, const int16_t* panel, int32_t* C,
                          int64_t ldc, int64_t valid_n) {
  portable_block(rows, Kp, A, lda, panel, false, C, ldc, valid_n);
}

void igemm_bytes_block_portable(int64_t rows, int64_t Kp, const int16_t* A, int64_t lda, const uint8_t* panel,
                                bool b_signed, int32_t* C, int64_t ldc, int64_t valid_n) {
  portable_block(rows, Kp, A, lda, panel, b_signed, C, ldc, valid_n);
}

const Igemm16Kernel kPortable16 = {"portable", igemm_block_portable, igemm_bytes_block_portable};

const CpuKernelRegistrar kRegPortable({CpuKernelFamily::kIgemm16, "portable", 0, 0,
                                       []() -> const void* { return &kPortable16; }});
#if defined(MOSAICRT_X86_SIMD)
// Registered here, from baseline-compiled code: their files are compiled for AVX2/AVX-512.
const CpuKernelRegistrar kRegAvx2({CpuKernelFamily::kIgemm16, "avx2", 10, kCpuAvx2Fma, []() -> const void* {
                                     static const Igemm16Kernel k = {"avx2", igemm_block_avx2(),
                                                                     igemm_bytes_block_avx2()};
                                     return &k;
                                   }});
const CpuKernelRegistrar kRegAvx2U8S8({CpuKernelFamily::kIgemm8, "avx2u8s8", 20, kCpuAvx2Fma,
                                       []() -> const void* { return igemm8_avx2_kernel(); }});
const CpuKernelRegistrar kRegVnni({CpuKernelFamily::kIgemm8, "avx512vnni", 30, kCpuAvx512 | kCpuAvx512Vnni,
                                   []() -> const void* { return igemm8_vnni_kernel(); }});
#endif

int64_t round_up(int64_t v, int64_t m) { return (v + m - 1) / m * m; }

}  // namespace

void pack_b_u8(PackedB& out, const uint8_t* B, int64_t ldb, int64_t K, int64_t N, const int32_t* zp, bool zp_per_col) {
  pack_b_impl(out, B, ldb, K, N, zp, zp_per_col);
}
void pack_b_s8(PackedB& out, const int8_t* B, int64_t ldb, int64_t K, int64_t N, const int32_t* zp, bool zp_per_col) {
  pack_b_impl(out, B, ldb, K, N, zp, zp_per_col);
}
void pack_b_bytes(PackedBBytes& out, const void* B, bool b_signed, int64_t ldb, int64_t K, int64_t N,
                  const int32_t* zp, bool zp_per_col) {
  set_panel_shape(out, K, N);
  out.b_signed = b_signed;
  interleave_panels(static_cast<const uint8_t*>(B), ldb, K, N, out.Kp, out.data, [](uint8_t b, int64_t) { return b; });
  out.zb.clear();
  bool any = false;
  for (int64_t j = 0; zp && j < N && !any; ++j) any = zp[zp_per_col ? j : 0] != 0;
  if (any) {
    out.zb.assign(static_cast<size_t>(out.panels * kIgemmPanel), 0);
    for (int64_t j = 0; j < N; ++j) out.zb[static_cast<size_t>(j)] = zp[zp_per_col ? j : 0];
  }
}

void pack_b16_begin(PackedB& out, int64_t K, int64_t N) {
  set_panel_shape(out, K, N);
  // every element is written by pack_b16_columns: grown, never cleared
  const size_t size = static_cast<size_t>(out.panels * out.Kp * kIgemmPanel);
  if (out.data.size() < size) out.data.resize(size);
}

void pack_b16_columns(PackedB& out, const int16_t* src, int64_t ld, int64_t n0, int64_t n) {
  const int64_t K = out.K;
  for (int64_t c = 0; c < n; c += kIgemmPanel) {
    int16_t* dst = out.data.data() + (n0 + c) / kIgemmPanel * out.Kp * kIgemmPanel;
    const int64_t nn = std::min(kIgemmPanel, n - c);
    for (int64_t k = 0; k < out.Kp; k += 2, dst += 2 * kIgemmPanel) {
      const int16_t* r0 = src + k * ld + c;
      const int16_t* r1 = k + 1 < K ? r0 + ld : nullptr;  // the odd row past K: zeros
#if defined(__SSE2__)
      if (nn == kIgemmPanel && r1) {  // rows k and k + 1 interleaved, 8 columns per half
        const __m128i a0 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(r0));
        const __m128i a1 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(r0 + 8));
        const __m128i b0 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(r1));
        const __m128i b1 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(r1 + 8));
        _mm_storeu_si128(reinterpret_cast<__m128i*>(dst), _mm_unpacklo_epi16(a0, b0));
        _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + 8), _mm_unpackhi_epi16(a0, b0));
        _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + 16), _mm_unpacklo_epi16(a1, b1));
        _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + 24), _mm_unpackhi_epi16(a1, b1));
        continue;
      }
#endif
      for (int64_t j = 0; j < kIgemmPanel; ++j) {
        dst[2 * j] = j < nn ? r0[j] : int16_t(0);
        dst[2 * j + 1] = j < nn && r1 ? r1[j] : int16_t(0);
      }
    }
  }
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

const Igemm16Kernel& igemm16_active() {
  static const Igemm16Kernel* const k = [] {
    const CpuKernelEntry* e = active_cpu_kernel(CpuKernelFamily::kIgemm16);
    return e ? static_cast<const Igemm16Kernel*>(e->get()) : &kPortable16;
  }();
  return *k;
}

const Igemm16Kernel* igemm16_find(const char* name) {
  const CpuKernelEntry* e = find_cpu_kernel(CpuKernelFamily::kIgemm16, name);
  return e ? static_cast<const Igemm16Kernel*>(e->get()) : nullptr;
}

const Igemm8Kernel* igemm8_active() {
  static const Igemm8Kernel* const k = [] {
    const CpuKernelEntry* e = active_cpu_kernel(CpuKernelFamily::kIgemm8);
    return e ? static_cast<const Igemm8Kernel*>(e->get()) : nullptr;
  }();
  return k;
}

RequantizeBytesFn requantize_bytes_active() {
#if defined(MOSAICRT_X86_SIMD)
  if (cpu_has(kCpuAvx512)) return requantize_bytes_avx512;
  if (cpu_has(kCpuAvx2Fma)) return requantize_bytes_avx2;
#endif
  return nullptr;
}

const Igemm8Kernel* igemm8_find(const char* name) {
  const CpuKernelEntry* e = find_cpu_kernel(CpuKernelFamily::kIgemm8, name);
  return e ? static_cast<const Igemm8Kernel*>(e->get()) : nullptr;
}

void igemm(int64_t M, const int16_t* A, const PackedB& B, int32_t* C, int64_t ldc, ThreadPool* pool) {
  igemm_with(igemm16_active(), M, A, B, C, ldc, pool);
}

namespace {

// C's (row block, panel) tiles over the pool: tile(rows, m0, p, n0, valid_n) for every one; B: K x N in panels.
template <class Tile>
void for_each_tile(int64_t M, int64_t Kp, int64_t N, int64_t panels, int32_t* C, int64_t ldc, ThreadPool* pool,
                   const Tile& tile) {
  if (M <= 0 || N <= 0) return;
  if (Kp == 0) {
    for (int64_t m = 0; m < M; ++m) std::fill(C + m * ldc, C + m * ldc + N, 0);
    return;
  }
  const int64_t row_blocks = (M + kIgemmRows - 1) / kIgemmRows;
  const int64_t tasks = row_blocks * panels;
  auto run = [&](int64_t tb, int64_t te) {
    for (int64_t t = tb; t < te; ++t) {
      // Panel-major order: consecutive tasks reuse the same B panel from cache.
      const int64_t p = t / row_blocks, rb = t % row_blocks;
      const int64_t m0 = rb * kIgemmRows, n0 = p * kIgemmPanel;
      tile(std::min(kIgemmRows, M - m0), m0, p, n0, std::min(kIgemmPanel, N - n0));
    }
  };
  const int64_t work = Kp * kIgemmRows * kIgemmPanel;
  const int64_t grain = std::max<int64_t>(1, (1 << 16) / std::max<int64_t>(1, work));
  if (pool && tasks > 1) pool->parallel_for(tasks, grain, run);
  else run(0, tasks);
}

}  // namespace

void igemm_with(const Igemm16Kernel& kr, int64_t M, const int16_t* A, const PackedB& B, int32_t* C, int64_t ldc,
                ThreadPool* pool) {
  const IgemmBlockFn kernel = kr.block;
  const int64_t Kp = B.Kp;
  for_each_tile(M, Kp, B.N, B.panels, C, ldc, pool, [&](int64_t rows, int64_t m0, int64_t p, int64_t n0, int64_t vn) {
    kernel(rows, Kp, A + m0 * Kp, Kp, B.panel(p), C + m0 * ldc + n0, ldc, vn);
  });
}

void igemm_bytes_with(const Igemm16Kernel& kr, int64_t M, const int16_t* A, const PackedBBytes& B, int32_t* C,
                      int64_t ldc, ThreadPool* pool) {
  const IgemmBytesBlockFn kernel = kr.bytes_block;
  MRT_CHECK_IMPL(kernel != nullptr, "integer GEMM: kernel ", kr.name, " has no byte form");
  const int64_t Kp = B.Kp;
  std::vector<int32_t> rowsum;
  if (!B.zb.empty()) {
    rowsum.assign(static_cast<size_t>(std::max<int64_t>(M, 0)), 0);
    for (int64_t m = 0; m < M; ++m) {
      uint32_t s = 0;  // wrapping, as the sums it corrects
      for (int64_t k = 0; k < Kp; ++k) s += static_cast<uint32_t>(static_cast<int32_t>(A[m * Kp + k]));
      rowsum[static_cast<size_t>(m)] = static_cast<int32_t>(s);
    }
  }
  for_each_tile(M, Kp, B.N, B.panels, C, ldc, pool, [&](int64_t rows, int64_t m0, int64_t p, int64_t n0, int64_t vn) {
    int32_t* c = C + m0 * ldc + n0;
    kernel(rows, Kp, A + m0 * Kp, Kp, B.panel(p), B.b_signed, c, ldc, vn);
    if (rowsum.empty()) return;
    // the zero points, on the tile while it is in cache: C -= rowsum[m] * zb[n] (wrapping)
    for (int64_t r = 0; r < rows; ++r) {
      const uint32_t s = static_cast<uint32_t>(rowsum[static_cast<size_t>(m0 + r)]);
      int32_t* cr = c + r * ldc;
      const int32_t* z = B.zb.data() + n0;
      for (int64_t j = 0; j < vn; ++j)
        cr[j] = static_cast<int32_t>(static_cast<uint32_t>(cr[j]) - s * static_cast<uint32_t>(z[j]));
    }
  });
}

void pack_b8_begin(const Igemm8Kernel& kr, PackedB8& out, int64_t K, int64_t N) {
  out.kernel = &kr;
  out.K = K;
  out.N = N;
  out.nr = kr.panel;
  out.Kp = round_up(K, kr.kalign);
  out.panels = (N + out.nr - 1) / out.nr;
  // Every byte in use is written by pack_b8_columns: a reused buffer only grows (no zero fill of a part
  // that a smaller product left and this one regrows).
  const auto grow = [](auto& v, int64_t n) {
    if (v.size() < static_cast<size_t>(n)) v.resize(static_cast<size_t>(n));
  };
  grow(out.data, out.panels * out.Kp * out.nr);
  grow(out.zb, out.panels * out.nr);
  grow(out.colfix, out.panels * out.nr);
}

void pack_b8_columns(PackedB8& out, const void* B, bool b_is_u8, int64_t ldb, int64_t n0, int64_t n) {
  const Igemm8Kernel& kr = *out.kernel;
  const uint8_t* src = static_cast<const uint8_t*>(B);
  const int64_t nr = out.nr, kg = kr.kgroup, K = out.K, Kp = out.Kp;
  MRT_ENFORCE(n0 % nr == 0 && n0 + n <= out.N, MRT_INTERNAL, "pack_b8_columns: columns outside B");
  // Into the kernel's domain: a byte of the other signedness flips its top bit (b -+ 128).
  const uint8_t flip = b_is_u8 == kr.b_signed ? 0x80 : 0x00;
  const int64_t panel_bytes = Kp * nr;
  for (int64_t c0 = 0; c0 < n; c0 += nr) {
    const int64_t p = (n0 + c0) / nr, nn = std::min(nr, n - c0);
    int8_t* pd = out.data.data() + p * panel_bytes;
    for (int64_t k = 0; k < K; k += kg) {
      int8_t* d = pd + k * nr;  // kg rows x nr columns, column j's kg bytes at j * kg
      const int64_t kk = std::min<int64_t>(kg, K - k);
      int64_t j = 0;
#if defined(__SSE2__)
      if (kk == 4 && kg == 4) {
        const __m128i fl = _mm_set1_epi8(static_cast<char>(flip));
        for (; j + 16 <= nn; j += 16) {
          const uint8_t* r = src + k * ldb + c0 + j;
          const __m128i r0 = _mm_xor_si128(_mm_loadu_si128(reinterpret_cast<const __m128i*>(r)), fl);
          const __m128i r1 = _mm_xor_si128(_mm_loadu_si128(reinterpret_cast<const __m128i*>(r + ldb)), fl);
          const __m128i r2 = _mm_xor_si128(_mm_loadu_si128(reinterpret_cast<const __m128i*>(r + 2 * ldb)), fl);
          const __m128i r3 = _mm_xor_si128(_mm_loadu_si128(reinterpret_cast<const __m128i*>(r + 3 * ldb)), fl);
          interleave4x16(r0, r1, r2, r3, reinterpret_cast<uint8_t*>(d + j * 4));
        }
      }
#endif
      for (; j < nn; ++j) {
        int8_t* dj = d + j * kg;
        int64_t q = 0;
        for (; q < kk; ++q) dj[q] = static_cast<int8_t>(src[(k + q) * ldb + c0 + j] ^ flip);
        for (; q < kg; ++q) dj[q] = 0;
      }
      if (nn < nr) std::memset(d + nn * kg, 0, static_cast<size_t>((nr - nn) * kg));
    }
    const int64_t kdone = round_up(K, kg);
    if (kdone < Kp) std::memset(pd + kdone * nr, 0, static_cast<size_t>((Kp - kdone) * nr));
    // column sums in the kernel's domain, kept in colfix until pack_b8_end
    int32_t* colsum = out.colfix.data() + p * nr;
    if (kr.colsum) {
      kr.colsum(pd, Kp, colsum);
    } else {
      std::fill(colsum, colsum + nr, 0);
      for (int64_t k = 0; k < Kp; k += kg) {
        const int8_t* d = pd + k * nr;
        for (int64_t j = 0; j < nr; ++j) {
          int32_t s = 0;
          for (int64_t q = 0; q < kg; ++q) {
            const int8_t v = d[j * kg + q];
            s += kr.b_signed ? static_cast<int32_t>(v) : static_cast<int32_t>(static_cast<uint8_t>(v));
          }
          colsum[j] += s;
        }
      }
    }
  }
}

void pack_b8_end(PackedB8& out, bool b_is_u8, const int32_t* zp, bool zp_per_col) {
  const Igemm8Kernel& kr = *out.kernel;
  const bool flip = b_is_u8 == kr.b_signed;
  const int32_t zshift = flip ? (b_is_u8 ? -128 : 128) : 0;
  for (int64_t n = 0; n < out.N; ++n) {
    const int32_t z = (zp ? (zp_per_col ? zp[n] : zp[0]) : 0) + zshift;
    out.zb[n] = z;
    out.colfix[n] = static_cast<int32_t>(static_cast<uint32_t>(out.K * z - out.colfix[n]));
  }
}

void pack_b8(const Igemm8Kernel& kr, PackedB8& out, const void* B, bool b_is_u8, int64_t ldb, int64_t K, int64_t N,
             const int32_t* zp, bool zp_per_col) {
  pack_b8_begin(kr, out, K, N);
  pack_b8_columns(out, B, b_is_u8, ldb, 0, N);
  pack_b8_end(out, b_is_u8, zp, zp_per_col);
}

namespace {

// For a kernel with a pair_limit (its A is int8): each pair (a0, a1) of k = (2j, 2j + 1) of the same sign whose
// magnitudes sum past the limit gets a1 moved to sign * (limit - |a0|); the part taken off is listed per row for
// the kernel's fix. The row sums stay those of the original A.
void limit_pairs(const Igemm8Kernel& kr, PreparedA8& out) {
  out.fix_begin.clear();
  out.fix_k.clear();
  out.fix_value.clear();
  if (kr.pair_limit <= 0) return;
  MRT_CHECK_IMPL(kr.a_signed && kr.fix && kr.kgroup % 2 == 0, "integer GEMM: kernel ", kr.name,
                 " limits pairs of k but is not an int8-A kernel with a fix");
  const int64_t Mp = static_cast<int64_t>(out.zrow.size()), limit = kr.pair_limit;
  out.fix_begin.reserve(static_cast<size_t>(Mp + 1));
  out.fix_begin.push_back(0);
  for (int64_t m = 0; m < Mp; ++m) {
    int8_t* a = reinterpret_cast<int8_t*>(out.data.data() + m * out.Kp);
    for (int64_t k = 0; k + 1 < out.K; k += 2) {
      const int32_t a0 = a[k], a1 = a[k + 1];
      if ((a0 ^ a1) < 0 || std::abs(a0) + std::abs(a1) <= limit) continue;  // a zero has either sign: in range
      const int32_t kept = a1 < 0 ? -(limit - std::abs(a0)) : static_cast<int32_t>(limit - std::abs(a0));
      a[k + 1] = static_cast<int8_t>(kept);
      out.fix_k.push_back(static_cast<int32_t>(k + 1));
      out.fix_value.push_back(a1 - kept);
    }
    out.fix_begin.push_back(static_cast<int32_t>(out.fix_k.size()));
  }
}

}  // namespace

void prepare_a8(const Igemm8Kernel& kr, PreparedA8& out, int64_t M, const void* A, bool a_is_s8, int64_t lda,
                int64_t K, const int32_t* za, bool za_per_row) {
  out.kernel = &kr;
  out.M = M;
  out.K = K;
  out.Kp = round_up(K, kr.kalign);
  const int64_t Kp = out.Kp, Mp = round_up(M, kr.rows);
  const uint8_t* src = static_cast<const uint8_t*>(A);
  // sized, not refilled: each row's bytes are written below and only its padding is zeroed (the rows past M,
  // which a micro-kernel of more rows than are left may read, are zeroed too)
  out.data.resize(static_cast<size_t>(Mp * Kp));
  out.zrow.assign(static_cast<size_t>(Mp), 0);
  out.rowsum.assign(static_cast<size_t>(Mp), 0);
  if (Mp > M) std::fill(out.data.begin() + M * Kp, out.data.end(), uint8_t{0});
  const uint8_t flip = a_is_s8 != kr.a_signed ? 0x80 : 0x00;
  const int32_t zshift = flip ? (a_is_s8 ? 128 : -128) : 0;
  for (int64_t m = 0; m < M; ++m) {
    const uint8_t* s = src + m * lda;
    uint8_t* d = out.data.data() + m * Kp;
    int32_t sum = 0;
    if (kr.a_signed) {
      for (int64_t k = 0; k < K; ++k) {
        d[k] = static_cast<uint8_t>(s[k] ^ flip);
        sum += static_cast<int8_t>(d[k]);
      }
    } else {
      for (int64_t k = 0; k < K; ++k) {
        d[k] = static_cast<uint8_t>(s[k] ^ flip);
        sum += d[k];
      }
    }
    std::fill(d + K, d + Kp, uint8_t{0});
    out.rowsum[static_cast<size_t>(m)] = sum;
    out.zrow[static_cast<size_t>(m)] = (za ? (za_per_row ? za[m] : za[0]) : 0) + zshift;
  }
  limit_pairs(kr, out);
}

PreparedA8 prepare_a8(const Igemm8Kernel& kr, int64_t M, const void* A, bool a_is_s8, int64_t lda, int64_t K,
                      const int32_t* za, bool za_per_row) {
  PreparedA8 out;
  prepare_a8(kr, out, M, A, a_is_s8, lda, K, za, za_per_row);
  return out;
}

void igemm8(const PreparedA8& A, const PackedB8& B, int32_t* C, int64_t ldc, ThreadPool* pool) {
  MRT_ENFORCE(B.kernel != nullptr && B.kernel == A.kernel && B.K == A.K && B.Kp == A.Kp, MRT_INTERNAL,
              "integer GEMM: A and B were not prepared for one kernel and K");
  const Igemm8Kernel& kr = *B.kernel;
  const int64_t M = A.M;
  if (M <= 0 || B.N <= 0) return;
  const int64_t Kp = B.Kp, mr = kr.rows, Mp = round_up(M, mr);
  const int64_t nr = B.nr;
  const int64_t row_blocks = Mp / mr;
  const int64_t tasks = row_blocks * B.panels;
  auto run = [&](int64_t tb, int64_t te) {
    for (int64_t t = tb; t < te; ++t) {
      const int64_t p = t / row_blocks, rb = t % row_blocks;
      const int64_t m0 = rb * mr, rows = std::min(mr, M - m0);
      const int64_t n0 = p * nr, vn = std::min(nr, B.N - n0);
      kr.block(rows, Kp, A.data.data() + m0 * Kp, Kp, B.panel(p), A.zrow.data() + m0, A.rowsum.data() + m0,
               B.zb.data() + n0, B.colfix.data() + n0, C + m0 * ldc + n0, ldc, vn);
      if (!A.fix_begin.empty() && A.fix_begin[static_cast<size_t>(m0 + rows)] != A.fix_begin[static_cast<size_t>(m0)])
        kr.fix(rows, A.fix_begin.data() + m0, A.fix_k.data(), A.fix_value.data(), B.panel(p), C + m0 * ldc + n0, ldc,
               vn);
    }
  };
  const int64_t work = std::max<int64_t>(1, Kp * mr * nr);
  const int64_t grain = std::max<int64_t>(1, (1 << 17) / work);
  if (pool && tasks > 1) pool->parallel_for(tasks, grain, run);
  else run(0, tasks);
}

void igemm8(int64_t M, const void* A, bool a_is_s8, int64_t lda, int64_t K, const int32_t* za, bool za_per_row,
            const PackedB8& B, int32_t* C, int64_t ldc, ThreadPool* pool) {
  MRT_ENFORCE(B.kernel != nullptr && B.K == K, MRT_INTERNAL, "integer GEMM: B was not packed for this product");
  if (M <= 0 || B.N <= 0) return;
  // one prepared A per calling thread, its buffers kept from call to call (no allocation once they are large
  // enough); igemm8's workers only read it
  static thread_local PreparedA8 prepared;
  prepare_a8(*B.kernel, prepared, M, A, a_is_s8, lda, K, za, za_per_row);
  igemm8(prepared, B, C, ldc, pool);
  if (prepared.data.capacity() > kScratchKeep) prepared = PreparedA8();  // a large A is not kept between runs
}

}  // namespace quant
}  // namespace mrt
