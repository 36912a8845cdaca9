// The running CPU's instruction-set features, detected once, from the OS (cpuid on x86,
// HWCAPs on Linux arm64, sysctl on macOS). The one place that asks the hardware: kernel
// dispatch (gemm/backend_registry) and device discovery (ep/devices) both read this.
#pragma once
#include <string>

namespace mrt {

struct CpuIsa {
  // x86
  bool sse4_2 = false, avx = false, avx2 = false, fma = false;
  bool avx512f = false, avx512bw = false, avx512vl = false, avx512dq = false, avx512_vnni = false;
  // arm
  bool neon = false, fp16 = false, dotprod = false, sve = false, i8mm = false, bf16 = false, sme = false,
       sme2 = false;

  std::string names() const;  // the present features, comma-separated ("avx2,fma,avx512f", "neon,dotprod")
};

const CpuIsa& cpu_isa();

}  // namespace mrt
