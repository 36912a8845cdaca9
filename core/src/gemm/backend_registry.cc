// CPU feature detection and the registry of ISA-specific micro-kernels (see the rule in
// backend_registry.h). Compiled for every target: it only uses what every target has
// (the OS's feature queries behind the target's own architecture macros).
#include "backend_registry.h"

#include <algorithm>
#include <climits>
#include <cstdlib>
#include <cstring>

#if defined(__linux__) && defined(__aarch64__)
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
constexpr unsigned long kHwcapAsimd = 1ul << 1, kHwcapAsimdDp = 1ul << 20;
constexpr unsigned long kHwcap2I8mm = 1ul << 13, kHwcap2Sme = 1ul << 23;
#endif

#if defined(__APPLE__) && defined(__aarch64__)
bool apple_has(const char* name) {
  int v = 0;
  size_t size = sizeof(v);
  return sysctlbyname(name, &v, &size, nullptr, 0) == 0 && v != 0;
}
#endif

uint32_t detect_features() {
  uint32_t f = 0;
#if (defined(__x86_64__) || defined(__i386__)) && (defined(__GNUC__) || defined(__clang__))
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) f |= kCpuAvx2Fma;
  if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
      __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("fma"))
    f |= kCpuAvx512;
  if ((f & kCpuAvx512) && __builtin_cpu_supports("avx512vnni")) f |= kCpuAvx512Vnni;
#elif defined(__aarch64__) || defined(_M_ARM64)
  f |= kCpuNeon;  // AdvSIMD is mandatory on arm64
#if defined(__linux__)
  const unsigned long hw = getauxval(kAtHwcap), hw2 = getauxval(kAtHwcap2);
  if (!(hw & kHwcapAsimd)) f &= ~kCpuNeon;
  if (hw & kHwcapAsimdDp) f |= kCpuDotprod;
  if (hw2 & kHwcap2I8mm) f |= kCpuI8mm;
  if (hw2 & kHwcap2Sme) f |= kCpuSme;
#elif defined(__APPLE__)
  if (apple_has("hw.optional.arm.FEAT_DotProd")) f |= kCpuDotprod;
  if (apple_has("hw.optional.arm.FEAT_I8MM")) f |= kCpuI8mm;
  if (apple_has("hw.optional.arm.FEAT_SME")) f |= kCpuSme;
#endif
#endif
  return f;
}

std::vector<CpuKernelEntry>& entries() {
  static std::vector<CpuKernelEntry> all;  // filled by the registrars at load time
  return all;
}

const char* env_var(CpuKernelFamily family) {
  return family == CpuKernelFamily::kSgemm ? "MOSAICRT_SGEMM_KERNEL" : "MOSAICRT_IGEMM_KERNEL";
}

// The highest priority allowed by the family's environment variable.
int priority_cap(CpuKernelFamily family) {
  const char* name = std::getenv(env_var(family));
  if (!name || !*name) return INT_MAX;
  if (std::strcmp(name, "portable") == 0) return 0;
  for (const CpuKernelEntry& e : entries())
    if (std::strcmp(env_var(e.family), env_var(family)) == 0 && std::strcmp(e.name, name) == 0) return e.priority;
  return INT_MAX;
}

const CpuKernelEntry* choose(CpuKernelFamily family) {
  const int cap = priority_cap(family);
  for (const CpuKernelEntry* e : cpu_kernels(family))
    if (e->priority <= cap && cpu_kernel_supported(*e)) return e;
  return nullptr;
}

}  // namespace

uint32_t cpu_features() {
  static const uint32_t f = detect_features();
  return f;
}

std::string cpu_feature_names(uint32_t bits) {
  static const struct {
    uint32_t bit;
    const char* name;
  } kNames[] = {{kCpuAvx2Fma, "avx2"}, {kCpuAvx512, "avx512"}, {kCpuAvx512Vnni, "avx512vnni"}, {kCpuNeon, "neon"},
                {kCpuDotprod, "dotprod"}, {kCpuI8mm, "i8mm"}, {kCpuSme, "sme"}};
  std::string s;
  for (const auto& n : kNames)
    if (bits & n.bit) s += (s.empty() ? "" : "+") + std::string(n.name);
  return s.empty() ? "none" : s;
}

CpuKernelRegistrar::CpuKernelRegistrar(const CpuKernelEntry& entry) { entries().push_back(entry); }

std::vector<const CpuKernelEntry*> cpu_kernels(CpuKernelFamily family) {
  std::vector<const CpuKernelEntry*> out;
  for (const CpuKernelEntry& e : entries())
    if (e.family == family) out.push_back(&e);
  std::stable_sort(out.begin(), out.end(),
                   [](const CpuKernelEntry* a, const CpuKernelEntry* b) { return a->priority > b->priority; });
  return out;
}

bool cpu_kernel_supported(const CpuKernelEntry& entry) {
  return (cpu_features() & entry.features) == entry.features;
}

const CpuKernelEntry* find_cpu_kernel(CpuKernelFamily family, const char* name) {
  for (const CpuKernelEntry& e : entries())
    if (e.family == family && std::strcmp(e.name, name) == 0) return cpu_kernel_supported(e) ? &e : nullptr;
  return nullptr;
}

const CpuKernelEntry* active_cpu_kernel(CpuKernelFamily family) {
  static const CpuKernelEntry* const sgemm = choose(CpuKernelFamily::kSgemm);
  static const CpuKernelEntry* const igemm16 = choose(CpuKernelFamily::kIgemm16);
  static const CpuKernelEntry* const igemm8 = choose(CpuKernelFamily::kIgemm8);
  switch (family) {
    case CpuKernelFamily::kSgemm: return sgemm;
    case CpuKernelFamily::kIgemm16: return igemm16;
    case CpuKernelFamily::kIgemm8: return igemm8;
  }
  return nullptr;
}

const char* cpu_kernel_summary() {
  static const std::string s = [] {
    const CpuKernelEntry* sg = active_cpu_kernel(CpuKernelFamily::kSgemm);
    const CpuKernelEntry* ig = active_cpu_kernel(CpuKernelFamily::kIgemm8);
    if (!ig) ig = active_cpu_kernel(CpuKernelFamily::kIgemm16);
    return std::string("sgemm=") + (sg ? sg->name : "portable") + ",igemm=" + (ig ? ig->name : "portable") +
           ",cpu=" + cpu_feature_names(cpu_features());
  }();
  return s.c_str();
}

}  // namespace mrt
