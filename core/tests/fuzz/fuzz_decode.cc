// Fuzz target 1: the ModelProto wire decoder, and the encoder on whatever it accepts.
// Malformed bytes must end in mrt::Error (a clean INVALID_MODEL / NOT_IMPLEMENTED), never in a
// crash, a sanitizer report or an unbounded allocation.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "error.h"
#include "fuzz_common.h"
#include "graph.h"

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  mrt_fuzz::set_fuzz_limits();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  mrt::DecodeOptions options;  // no model_dir: external data is refused, nothing is read from disk
  std::string bytes;
  try {
    mrt::Model model = mrt::decode_model(data, size, options);
    bytes = mrt::encode_model(model);
  } catch (const mrt::Error&) {
    return 0;
  }
  // What the encoder writes must decode again.
  try {
    mrt::decode_model(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size(), options);
  } catch (const mrt::Error& e) {
    std::fprintf(stderr, "the encoder wrote a model the decoder refuses: %s\n", e.what());
    std::abort();
  }
  return 0;
}
