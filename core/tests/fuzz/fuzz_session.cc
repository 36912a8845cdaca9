// Fuzz target 2: session creation from model bytes -- decoding, function inlining, type and
// shape inference, the graph optimizer (constant folding, fusions) and partitioning -- then
// every query a caller can make of the session.
#include <cstddef>
#include <cstdint>

#include "fuzz_common.h"

using mrt_fuzz::ok;

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  mrt_fuzz::set_fuzz_limits();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  MrtSessionOptions* options = mrt_fuzz::single_thread_options();
  MrtSession* session = nullptr;
  if (ok(MrtCreateSessionFromBytes(data, size, options, &session))) {
    for (int kind = MRT_IO_INPUT; kind <= MRT_IO_OVERRIDABLE_INITIALIZER; ++kind) {
      size_t n = 0;
      if (!ok(MrtSessionGetIoCount(session, static_cast<MrtIoKind>(kind), &n))) continue;
      for (size_t i = 0; i < n; ++i) {
        const char* name = nullptr;
        int32_t elem_type = 0;
        size_t rank = 0;
        if (!ok(MrtSessionGetIoInfo(session, static_cast<MrtIoKind>(kind), i, &name, &elem_type, &rank))) continue;
        for (size_t d = 0; rank != SIZE_MAX && d < rank; ++d) {
          int64_t value = 0;
          const char* symbol = nullptr;
          ok(MrtSessionGetIoDim(session, static_cast<MrtIoKind>(kind), i, d, &value, &symbol));
        }
      }
    }
    size_t nodes = 0;
    if (ok(MrtSessionGetNodeCount(session, &nodes)))
      for (size_t i = 0; i < nodes; ++i) {
        const char *name, *op, *ep, *note;
        ok(MrtSessionGetNodeAssignment(session, i, &name, &op, &ep, &note));
      }
    const char *producer, *graph, *domain, *doc, *graph_doc;
    int64_t version = 0;
    size_t n_meta = 0;
    if (ok(MrtSessionGetModelMetadata(session, &producer, &graph, &domain, &doc, &graph_doc, &version, &n_meta)))
      for (size_t i = 0; i < n_meta; ++i) {
        const char *k, *v;
        ok(MrtSessionGetCustomMetadata(session, i, &k, &v));
      }
    MrtReleaseSession(session);
  }
  MrtReleaseSessionOptions(options);
  return 0;
}
