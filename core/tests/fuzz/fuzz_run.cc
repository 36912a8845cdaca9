// Fuzz target 3: run() on small fuzzed models with fuzzed inputs.
//
// Input layout: a 4-byte little-endian model length n, n bytes of ModelProto, then the feed
// pool. Each graph input gets a tensor of its declared element type; a dynamic dimension takes
// 1..4 from the pool, and the tensor's bytes are taken from the pool (repeated as needed). String
// inputs get strings of 0..11 pool bytes, and such runs go through MrtRun with values; every output
// byte is read, string elements and sequence items included.
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

// Reads every byte of an output value (string elements and sequence items included).
void touch(const MrtValue* v) {
  volatile uint8_t sink = 0;
  MrtValueKind kind = MRT_VALUE_NONE;
  if (!ok(MrtValueGetKind(v, &kind)) || kind == MRT_VALUE_NONE) return;
  if (kind == MRT_VALUE_SEQUENCE) {
    size_t count = 0;
    if (!ok(MrtValueGetSequenceInfo(v, &count, nullptr))) return;
    for (size_t k = 0; k < count; ++k) {
      MrtValue* item = nullptr;
      if (ok(MrtValueGetSequenceItem(v, k, &item))) touch(item);
      if (item) MrtReleaseValue(item);
    }
    return;
  }
  int32_t type = 0;
  size_t rank = 0, bytes = 0;
  const int64_t* shape = nullptr;
  const void* data = nullptr;
  if (!ok(MrtValueGetInfo(v, &type, &rank, &shape, &data, &bytes))) return;
  if (type == 8) {
    size_t numel = 1;
    for (size_t d = 0; d < rank; ++d) numel *= static_cast<size_t>(shape[d]);
    for (size_t i = 0; i < numel; ++i) {
      const char* text = nullptr;
      size_t len = 0;
      if (!ok(MrtValueGetString(v, i, &text, &len))) return;
      for (size_t b = 0; b < len; ++b) sink = sink ^ static_cast<uint8_t>(text[b]);
    }
    return;
  }
  for (size_t b = 0; data && b < bytes; ++b) sink = sink ^ static_cast<const uint8_t*>(data)[b];
}

void run_with_values(MrtSession* session, Pool& pool, const std::vector<const char*>& names,
                     const std::vector<MrtTensorRef>& refs, std::vector<MrtValue*>& outputs) {
  std::vector<MrtValue*> ins(refs.size(), nullptr);
  bool made = true;
  for (size_t i = 0; i < refs.size() && made; ++i) {
    const MrtTensorRef& r = refs[i];
    if (r.elem_type != 8) {
      made = ok(MrtCreateTensor(r.elem_type, r.shape, r.rank, r.data, r.data_bytes, &ins[i]));
      continue;
    }
    size_t numel = 1;
    for (size_t d = 0; d < r.rank; ++d) numel *= static_cast<size_t>(r.shape[d]);
    std::vector<std::string> text(numel);
    std::vector<const char*> ptrs(numel);
    std::vector<size_t> lengths(numel);
    for (size_t k = 0; k < numel; ++k) {
      text[k].resize(pool.next() % 12);
      for (auto& c : text[k]) c = static_cast<char>(pool.next());
      ptrs[k] = text[k].data();
      lengths[k] = text[k].size();
    }
    made = ok(MrtCreateStringTensor(r.shape, r.rank, ptrs.data(), lengths.data(), &ins[i]));
  }
  if (made && ok(MrtRun(session, names.data(), ins.data(), ins.size(), nullptr, 0, outputs.data())))
    for (MrtValue* v : outputs)
      if (v) touch(v);
  for (MrtValue* v : ins)
    if (v) MrtReleaseValue(v);
  for (MrtValue*& v : outputs) {
    if (v) MrtReleaseValue(v);
    v = nullptr;
  }
}

void run_once(MrtSession* session, Pool& pool) {
  size_t n_inputs = 0, n_outputs = 0;
  if (!ok(MrtSessionGetIoCount(session, MRT_IO_INPUT, &n_inputs))) return;
  if (!ok(MrtSessionGetIoCount(session, MRT_IO_OUTPUT, &n_outputs))) return;
  std::vector<const char*> names(n_inputs);
  std::vector<MrtTensorRef> refs(n_inputs);
  std::vector<std::vector<int64_t>> shapes(n_inputs);
  std::vector<std::vector<uint8_t>> buffers(n_inputs);
  bool has_strings = false;
  for (size_t i = 0; i < n_inputs; ++i) {
    int32_t elem_type = 0;
    size_t rank = 0;
    if (!ok(MrtSessionGetIoInfo(session, MRT_IO_INPUT, i, &names[i], &elem_type, &rank))) return;
    size_t esize = elem_type == 8 ? sizeof(const char*) : element_size(elem_type);
    if (!esize) return;  // complex, sequences, optionals: not fed here
    has_strings = has_strings || elem_type == 8;
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
  if (has_strings) {  // string inputs go through MrtRun with values
    run_with_values(session, pool, names, refs, outputs);
    return;
  }
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
