// Fuzz target 4: the views of the graph the core hands plugin EPs. Each fuzzed model becomes a
// session with the probe EP (probe_ep.cc) first in line: it reads every byte of the graph view
// (GetCapability) and of each claimed node's view (CreateKernel) under ASan.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>

#include "fuzz_common.h"

using mrt_fuzz::ok;

#ifndef MRT_FUZZ_PROBE_EP_PATH
#error "MRT_FUZZ_PROBE_EP_PATH must name the probe EP library"
#endif

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  mrt_fuzz::set_fuzz_limits();
  const char* path = std::getenv("MRT_FUZZ_PROBE_EP");  // the library may be moved with the binary
  MrtStatus* s = MrtRegisterExecutionProviderLibrary("fuzz_probe", path ? path : MRT_FUZZ_PROBE_EP_PATH);
  if (s) {
    std::fprintf(stderr, "cannot register the probe EP: %s\n", MrtStatusGetMessage(s));
    std::abort();
  }
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  MrtSessionOptions* options = mrt_fuzz::single_thread_options();
  if (!ok(MrtSessionOptionsAppendExecutionProvider(options, "FuzzProbeEP", nullptr, nullptr, 0))) std::abort();
  MrtSession* session = nullptr;
  if (ok(MrtCreateSessionFromBytes(data, size, options, &session))) MrtReleaseSession(session);
  MrtReleaseSessionOptions(options);
  return 0;
}
