// CPU feature detection and the registry of ISA-specific micro-kernels (see the rule in
// backend_registry.h). Compiled for every target: it only uses what every target has
// (the OS's feature queries behind the target's own architecture macros).
#include "backend_registry.h"

#include <algorithm>
#include <climits>
#include <cstdlib>
#include <cstring>

#include "cpu_isa.h"

namespace mrt {

namespace {

// The kernels' requirements, from the one hardware query (cpu_isa.h).
uint32_t detect_features() {
  const CpuIsa& c = cpu_isa();
  uint32_t f = 0;
  if (c.avx2 && c.fma) f |= kCpuAvx2Fma;
  if (c.avx512f && c.avx512bw && c.avx512vl && c.avx512dq && c.fma) f |= kCpuAvx512;
  if ((f & kCpuAvx512) && c.avx512_vnni) f |= kCpuAvx512Vnni;
#if defined(__aarch64__) || defined(_M_ARM64)
  if (c.neon) f |= kCpuNeon;  // the arm64 kernels; armv7 NEON is not one of their targets
#endif
  if (c.dotprod) f |= kCpuDotprod;
  if (c.i8mm) f |= kCpuI8mm;
  if (c.sme) f |= kCpuSme;
  return f;
}

std::vector<CpuKernelEntry>& entries() {
  // Filled by the registrars at load time; never destroyed (runs on other threads may still
  // dispatch through it while the process exits).
  static std::vector<CpuKernelEntry>& all = *new std::vector<CpuKernelEntry>();
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
  return cpu_has(entry.features);
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
