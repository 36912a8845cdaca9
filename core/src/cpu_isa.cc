#include "cpu_isa.h"

#if defined(__linux__) && (defined(__aarch64__) || defined(__arm__))
#include <sys/auxv.h>
#endif
#if defined(__APPLE__) && defined(__aarch64__)
#include <sys/sysctl.h>
#endif
#if (defined(__x86_64__) || defined(__i386__)) && (defined(__GNUC__) || defined(__clang__))
#include <cpuid.h>
#define MRT_X86_CPUID 1
#elif defined(_MSC_VER) && defined(_M_X64)
#include <intrin.h>
#define MRT_X86_CPUID 1
#endif

namespace mrt {

namespace {

#if defined(__linux__) && defined(__aarch64__)
// Linux arm64 ABI values (uapi asm/hwcap.h), spelled out so that older C libraries whose
// headers lack a constant still build.
constexpr unsigned long kAtHwcap = 16, kAtHwcap2 = 26;
constexpr unsigned long kHwcapAsimd = 1ul << 1, kHwcapAsimdHp = 1ul << 10, kHwcapAsimdDp = 1ul << 20,
                        kHwcapSve = 1ul << 22;
constexpr unsigned long kHwcap2I8mm = 1ul << 13, kHwcap2Bf16 = 1ul << 14, kHwcap2Sme = 1ul << 23,
                        kHwcap2Sme2 = 1ul << 37;
#elif defined(__linux__) && defined(__arm__)
constexpr unsigned long kAtHwcap = 16, kHwcapNeon = 1ul << 12;
#endif

#if defined(__APPLE__) && defined(__aarch64__)
bool apple_has(const char* name) {
  int v = 0;
  size_t size = sizeof(v);
  return sysctlbyname(name, &v, &size, nullptr, 0) == 0 && v != 0;
}
#endif

#if defined(MRT_X86_CPUID)
// CPUID leaf/subleaf → {eax, ebx, ecx, edx}; zeros when the leaf is beyond the CPU's maximum.
// Read directly (not through the compiler's __builtin_cpu_supports, whose runtime support is
// empty in some toolchains, e.g. zig's bundled compiler-rt, and absent in MSVC).
struct Regs {
  unsigned a = 0, b = 0, c = 0, d = 0;
};

Regs cpuid(unsigned leaf, unsigned sub) {
  Regs r;
#if defined(_MSC_VER)
  int v[4];
  __cpuidex(v, static_cast<int>(leaf), static_cast<int>(sub));
  r.a = v[0], r.b = v[1], r.c = v[2], r.d = v[3];
#else
  if (!__get_cpuid_count(leaf, sub, &r.a, &r.b, &r.c, &r.d)) return Regs{};
#endif
  return r;
}

// XCR0: which register states the OS saves on a context switch (only meaningful with OSXSAVE).
unsigned long long xcr0() {
#if defined(_MSC_VER)
  return _xgetbv(0);
#else
  unsigned lo = 0, hi = 0;
  __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
  return (static_cast<unsigned long long>(hi) << 32) | lo;
#endif
}
#endif

CpuIsa detect() {
  CpuIsa c;
#if defined(MRT_X86_CPUID)
  const Regs l1 = cpuid(1, 0);
  const Regs l7 = cpuid(0, 0).a >= 7 ? cpuid(7, 0) : Regs{};
  const bool osxsave = l1.c & (1u << 27);
  const unsigned long long xcr = osxsave ? xcr0() : 0;
  const bool os_avx = (xcr & 0x6) == 0x6;             // XMM and YMM state
  const bool os_avx512 = os_avx && (xcr & 0xE0) == 0xE0;  // opmask, ZMM0-15 high halves, ZMM16-31
  c.sse4_2 = l1.c & (1u << 20);
  c.avx = os_avx && (l1.c & (1u << 28));
  c.fma = c.avx && (l1.c & (1u << 12));
  c.avx2 = c.avx && (l7.b & (1u << 5));
  c.avx512f = os_avx512 && (l7.b & (1u << 16));
  c.avx512dq = c.avx512f && (l7.b & (1u << 17));
  c.avx512bw = c.avx512f && (l7.b & (1u << 30));
  c.avx512vl = c.avx512f && (l7.b & (1u << 31));
  c.avx512_vnni = c.avx512f && (l7.c & (1u << 11));
#elif defined(__aarch64__) || defined(_M_ARM64)
  c.neon = true;  // AdvSIMD is mandatory on arm64
#if defined(__linux__)
  const unsigned long hw = getauxval(kAtHwcap), hw2 = getauxval(kAtHwcap2);
  c.neon = hw & kHwcapAsimd;
  c.fp16 = hw & kHwcapAsimdHp;
  c.dotprod = hw & kHwcapAsimdDp;
  c.sve = hw & kHwcapSve;
  c.i8mm = hw2 & kHwcap2I8mm;
  c.bf16 = hw2 & kHwcap2Bf16;
  c.sme = hw2 & kHwcap2Sme;
  c.sme2 = hw2 & kHwcap2Sme2;
#elif defined(__APPLE__)
  c.dotprod = apple_has("hw.optional.arm.FEAT_DotProd");
  c.i8mm = apple_has("hw.optional.arm.FEAT_I8MM");
  c.sme = apple_has("hw.optional.arm.FEAT_SME");
  c.sme2 = apple_has("hw.optional.arm.FEAT_SME2");
#endif
#elif defined(__linux__) && defined(__arm__)
  c.neon = getauxval(kAtHwcap) & kHwcapNeon;
#endif
  return c;
}

}  // namespace

const CpuIsa& cpu_isa() {
  static const CpuIsa isa = detect();
  return isa;
}

std::string CpuIsa::names() const {
  const std::pair<bool, const char*> all[] = {
      {sse4_2, "sse4_2"}, {avx, "avx"},       {avx2, "avx2"},   {fma, "fma"},         {avx512f, "avx512f"},
      {avx512bw, "avx512bw"}, {avx512vl, "avx512vl"}, {avx512dq, "avx512dq"}, {avx512_vnni, "avx512_vnni"},
      {neon, "neon"},     {fp16, "fp16"},     {dotprod, "dotprod"}, {sve, "sve"},     {i8mm, "i8mm"},
      {bf16, "bf16"},     {sme, "sme"},       {sme2, "sme2"},
  };
  std::string s;
  for (const auto& [present, name] : all)
    if (present) s += (s.empty() ? "" : ",") + std::string(name);
  return s;
}

}  // namespace mrt
