// Fuzz target 3: run() on small fuzzed models with fuzzed inputs.
//
// Input layout: a 4-byte little-endian model length n, n bytes of ModelProto, then the feed
// pool. Each graph input gets a tensor of its declared element type; a dynamic dimension takes
// 1..4 from the pool, and the tensor's bytes are taken from the pool (repeated as needed).
// Models with loops at the top level are created but not run: a fuzzed trip count is a hang by
// construction, not a finding.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "fuzz_common.h"

using mrt_fuzz::ok;

namespace {

// Bytes per element for the element types a caller can feed (0: not fed by this target).
size_t element_size(int32_t elem_type) {
  switch (elem_type) {
    case 1: case 6: case 12: return 4;              // float, int32, uint32
    case 2: case 3: case 9: return 1;               // uint8, int8, bool
    case 4: case 5: case 10: case 16: return 2;     // uint16, int16, float16, bfloat16
    case 7: case 11: case 13: return 8;             // int64, double, uint64
    default: return elem_type >= 17 && elem_type <= 26 ? 1 : 0;  // the narrow types: one byte each
  }
}

constexpr int64_t kMaxFeedElements = 1 << 14;

struct Pool {
  const uint8_t* data;
  size_t size;
  size_t pos = 0;
  uint8_t next() { return size ? data[pos++ % size] : 0; }
};

bool has_loop(MrtSession* session) {
  size_t n = 0;
  if (!ok(MrtSessionGetNodeCount(session, &n))) return true;
  for (size_t i = 0; i < n; ++i) {
    const char *name, *op, *ep, *note;
    if (!ok(MrtSessionGetNodeAssignment(session, i, &name, &op, &ep, &note))) return true;
    for (const char* loop : {"Loop", "Scan", "If", "SequenceMap"})
      if (std::strcmp(op, loop) == 0) return true;
  }
  return false;
}

void run_once(MrtSession* session, Pool& pool) {
  size_t n_inputs = 0, n_outputs = 0;
  if (!ok(MrtSessionGetIoCount(session, MRT_IO_INPUT, &n_inputs))) return;
  if (!ok(MrtSessionGetIoCount(session, MRT_IO_OUTPUT, &n_outputs))) return;
  std::vector<const char*> names(n_inputs);
  std::vector<MrtTensorRef> refs(n_inputs);
  std::vector<std::vector<int64_t>> shapes(n_inputs);
  std::vector<std::vector<uint8_t>> buffers(n_inputs);
  for (size_t i = 0; i < n_inputs; ++i) {
    int32_t elem_type = 0;
    size_t rank = 0;
    if (!ok(MrtSessionGetIoInfo(session, MRT_IO_INPUT, i, &names[i], &elem_type, &rank))) return;
    size_t esize = element_size(elem_type);
    if (!esize) return;  // strings, complex, sequences: not fed here
    if (rank == SIZE_MAX) rank = pool.next() % 3;
    if (rank > 8) return;
    int64_t numel = 1;
    for (size_t d = 0; d < rank; ++d) {
      int64_t value = 0;
      const char* symbol = nullptr;
      if (!ok(MrtSessionGetIoDim(session, MRT_IO_INPUT, i, d, &value, &symbol))) return;
      if (value < 0) value = 1 + pool.next() % 4;
      if (value > kMaxFeedElements) return;
      shapes[i].push_back(value);
      numel *= value;
      if (numel > kMaxFeedElements) return;
    }
    buffers[i].resize(static_cast<size_t>(numel) * esize);
    for (auto& b : buffers[i]) b = pool.next();
    if (elem_type == 9)
      for (auto& b : buffers[i]) b &= 1;
    refs[i] = MrtTensorRef{elem_type, rank, shapes[i].data(), buffers[i].data(), buffers[i].size()};
  }
  std::vector<MrtValue*> outputs(n_outputs, nullptr);
  std::vector<MrtTensorRef> info(n_outputs);
  if (ok(MrtRunWithOptions(session, nullptr, names.data(), refs.data(), n_inputs, nullptr, 0, nullptr,
                           outputs.data(), info.data()))) {
    volatile uint8_t sink = 0;
    for (size_t o = 0; o < n_outputs; ++o) {  // read every output byte: a short buffer is an ASan report
      const uint8_t* p = static_cast<const uint8_t*>(info[o].data);
      for (size_t b = 0; p && b < info[o].data_bytes; ++b) sink = sink ^ p[b];
    }
  }
  for (MrtValue* v : outputs)
    if (v) MrtReleaseValue(v);
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  mrt_fuzz::set_fuzz_limits();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 4) return 0;
  uint32_t n = static_cast<uint32_t>(data[0]) | static_cast<uint32_t>(data[1]) << 8 |
               static_cast<uint32_t>(data[2]) << 16 | static_cast<uint32_t>(data[3]) << 24;
  if (n > size - 4) n = static_cast<uint32_t>(size - 4);
  Pool pool{data + 4 + n, size - 4 - n};
  MrtSessionOptions* options = mrt_fuzz::single_thread_options();
  MrtSession* session = nullptr;
  if (ok(MrtCreateSessionFromBytes(data + 4, n, options, &session))) {
    if (!has_loop(session)) run_once(session, pool);
    MrtReleaseSession(session);
  }
  MrtReleaseSessionOptions(options);
  return 0;
}
