// Helpers shared by the libFuzzer targets: a status that is released on every path, the
// session options the targets use, and the resource limits they run under.
#ifndef MOSAICRT_FUZZ_COMMON_H_
#define MOSAICRT_FUZZ_COMMON_H_

#include <cstdint>
#include <cstdlib>
#include <cstring>

#include "mosaicrt/mosaicrt.h"

namespace mrt_fuzz {

// Releases a status; returns whether the call succeeded. Any error code is a clean outcome:
// the targets look for crashes, sanitizer reports, hangs and unbounded memory, not errors.
inline bool ok(MrtStatus* s) {
  if (!s) return true;
  MrtReleaseStatus(s);
  return false;
}

// The limits a fuzzed model runs under: far below the defaults so that libFuzzer's 2 GB RSS
// limit is never the first thing to notice a huge tensor. Set before the first session.
inline void set_fuzz_limits() {
  setenv("MOSAICRT_MAX_TENSOR_BYTES", "67108864", 0);  // 64 MiB per tensor
  setenv("MOSAICRT_MAX_NODES", "4096", 0);
  setenv("MOSAICRT_MAX_GRAPH_DEPTH", "16", 0);
  setenv("MOSAICRT_DISABLE_GPU_DISCOVERY", "1", 0);
}

inline MrtSessionOptions* single_thread_options() {
  MrtSessionOptions* o = nullptr;
  if (!ok(MrtCreateSessionOptions(&o))) abort();
  if (!ok(MrtSessionOptionsSetIntraOpNumThreads(o, 1))) abort();
  return o;
}

}  // namespace mrt_fuzz

#endif  // MOSAICRT_FUZZ_COMMON_H_
