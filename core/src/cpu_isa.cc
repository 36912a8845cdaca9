#include "cpu_isa.h"

#if defined(__linux__) && (defined(__aarch64__) || defined(__arm__))
#include <sys/auxv.h>
#endif
#if defined(__APPLE__) && defined(__aarch64__)
#include <sys/sysctl.h>
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

CpuIsa detect() {
  CpuIsa c;
#if (defined(__x86_64__) || defined(__i386__)) && (defined(__GNUC__) || defined(__clang__))
  __builtin_cpu_init();
  c.sse4_2 = __builtin_cpu_supports("sse4.2");
  c.avx = __builtin_cpu_supports("avx");
  c.avx2 = __builtin_cpu_supports("avx2");
  c.fma = __builtin_cpu_supports("fma");
  c.avx512f = __builtin_cpu_supports("avx512f");
  c.avx512bw = __builtin_cpu_supports("avx512bw");
  c.avx512vl = __builtin_cpu_supports("avx512vl");
  c.avx512dq = __builtin_cpu_supports("avx512dq");
  c.avx512_vnni = __builtin_cpu_supports("avx512vnni");
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
