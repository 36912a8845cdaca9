// Registry of the ISA-specific CPU micro-kernels (SGEMM and integer GEMM backends) and
// detection of the running CPU's features. Compiled for every target.
//
// THE RULE: generic code (every source that is compiled for all targets) reaches an
// ISA-specific backend only through this registry. It never names a symbol that only an
// ISA source defines -- not even under #if defined(MOSAICRT_ARM64_KERNELS) -- because that
// is how a build whose target does not compile those sources (armv7, a misconfigured
// cross build) ends up with undefined references. Instead, each backend registers its
// kernels from its own translation unit with a static CpuKernelRegistrar, and the generic
// dispatch asks the registry for the best kernel of a family that the running CPU
// supports. A target that does not compile a backend simply has no entry for it.
//
// Arm64 sources (*_neon*.cc) register their kernels from a file compiled for the armv8-a
// baseline; files compiled with extra -march features (*_dotprod*, *_i8mm*) hold only
// kernels and constant descriptors, so no code of theirs runs at load time. The registry
// calls an entry's getter only after the CPU check passed. (x86 kernels, compiled with
// -mavx2/-mavx512f for the whole file, are registered from the generic files that drive
// them, for the same reason.)
//
// The registrars run when the library (or a program linking the core's objects) is
// loaded. Nothing may use the registry from a static initializer, and the objects must be
// linked whole (the core is a shared library or an object library, never a static archive
// from which the linker could drop a file that only holds kernels).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace mrt {

// CPU features the optimized kernels depend on (bit set).
enum CpuFeature : uint32_t {
  kCpuAvx2Fma = 1u << 0,
  kCpuAvx512 = 1u << 1,      // AVX-512 F + BW + VL + DQ
  kCpuAvx512Vnni = 1u << 2,
  kCpuNeon = 1u << 8,        // AdvSIMD (always present on arm64)
  kCpuDotprod = 1u << 9,     // SDOT/UDOT (HWCAP_ASIMDDP)
  kCpuI8mm = 1u << 10,       // SMMLA/UMMLA/USMMLA/USDOT (HWCAP2_I8MM)
  kCpuSme = 1u << 11,        // detected and reported only: no SME kernel yet
};

// Features of the running CPU (detected once).
uint32_t cpu_features();
// Whether the running CPU has every feature in `bits`.
inline bool cpu_has(uint32_t bits) { return (cpu_features() & bits) == bits; }
// Names of the features in `bits`, joined by '+' ("neon+dotprod+i8mm"; "none").
std::string cpu_feature_names(uint32_t bits);

enum class CpuKernelFamily {
  kSgemm,    // const SgemmKernel*          (gemm/sgemm_kernels.h)
  kIgemm16,  // const quant::Igemm16Kernel* (kernels/quant_common.h): int16 pair layout
  kIgemm8,   // const quant::Igemm8Kernel*  (kernels/quant_common.h): 8-bit dot products
};

struct CpuKernelEntry {
  CpuKernelFamily family;
  const char* name;     // the name MOSAICRT_SGEMM_KERNEL / MOSAICRT_IGEMM_KERNEL accept
  int priority;         // higher is preferred; 0 is the portable reference
  uint32_t features;    // CpuFeature bits the running CPU must have
  const void* (*get)(); // the kernel descriptor; called only when the CPU supports it
};

// Adds an entry at load time: `static const CpuKernelRegistrar reg({...});`.
class CpuKernelRegistrar {
 public:
  explicit CpuKernelRegistrar(const CpuKernelEntry& entry);
};

// Every entry of a family this build registered, best first (supported or not).
std::vector<const CpuKernelEntry*> cpu_kernels(CpuKernelFamily family);
bool cpu_kernel_supported(const CpuKernelEntry& entry);
// The entry named `name` if registered and supported by this CPU, else nullptr.
const CpuKernelEntry* find_cpu_kernel(CpuKernelFamily family, const char* name);
// The best supported entry (chosen once), nullptr if there is none. The environment
// variable of the family (MOSAICRT_SGEMM_KERNEL for kSgemm, MOSAICRT_IGEMM_KERNEL for the
// integer families) names a kernel to start the search at: kernels ranked above it are
// skipped ("portable" skips them all; an unknown name is ignored).
const CpuKernelEntry* active_cpu_kernel(CpuKernelFamily family);

// The active kernels and the CPU's features, in the key=value,... form of the build info:
// "sgemm=neon,igemm=i8mm,cpu=neon+dotprod+i8mm".
const char* cpu_kernel_summary();

}  // namespace mrt
