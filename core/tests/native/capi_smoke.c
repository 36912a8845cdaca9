/* Exercises the C ABI from plain C: load a model, inspect its I/O, run it, check results
 * and error reporting. Usage: capi_smoke <path to data/dense_relu.onnx> */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mosaicrt/mosaicrt.h"
#include "check.h"

int main(int argc, char** argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: %s model.onnx\n", argv[0]);
    return 2;
  }
  uint32_t abi = MrtGetAbiVersion();
  CHECK(abi >> 16 == MRT_ABI_VERSION_MAJOR, "ABI major %u != header %d", abi >> 16, MRT_ABI_VERSION_MAJOR);
  printf("mosaicrt %s (%s)\n", MrtGetVersionString(), MrtGetBuildInfo());

  MrtSessionOptions* opts = NULL;
  MrtSession* sess = NULL;
  if (!ok(MrtCreateSessionOptions(&opts), "options")) return 1;
  ok(MrtSessionOptionsSetIntraOpNumThreads(opts, 2), "threads");
  if (!ok(MrtCreateSession(argv[1], opts, &sess), "create session")) return 1;
  MrtReleaseSessionOptions(opts);

  size_t n_in = 0, n_out = 0, rank = 0;
  const char* name = NULL;
  const char* sym = NULL;
  int32_t et = 0;
  int64_t dim = 0;
  ok(MrtSessionGetIoCount(sess, MRT_IO_INPUT, &n_in), "input count");
  ok(MrtSessionGetIoCount(sess, MRT_IO_OUTPUT, &n_out), "output count");
  CHECK(n_in == 1 && n_out == 1, "expected 1 input and 1 output, got %zu and %zu", n_in, n_out);
  ok(MrtSessionGetIoInfo(sess, MRT_IO_INPUT, 0, &name, &et, &rank), "input info");
  CHECK(strcmp(name, "x") == 0 && et == 1 && rank == 2, "input info: %s %d %zu", name, et, rank);
  ok(MrtSessionGetIoDim(sess, MRT_IO_INPUT, 0, 0, &dim, &sym), "input dim");
  CHECK(dim == -1 && strcmp(sym, "N") == 0, "dim 0 should be symbolic N, got %lld '%s'", (long long)dim, sym);

  /* x = [[1,1,1,1],[-1,0,2,1]] ; y = relu(x @ W + b) */
  const float x[8] = {1, 1, 1, 1, -1, 0, 2, 1};
  const int64_t shape[2] = {2, 4};
  MrtValue* in = NULL;
  MrtValue* out = NULL;
  ok(MrtCreateTensor(1, shape, 2, x, sizeof(x), &in), "create tensor");
  const char* in_names[1] = {"x"};
  const MrtValue* ins[1] = {in};
  if (ok(MrtRun(sess, in_names, ins, 1, NULL, 0, &out), "run")) {
    int32_t out_type = 0;
    size_t out_rank = 0, out_bytes = 0;
    const int64_t* out_shape = NULL;
    const void* data = NULL;
    ok(MrtValueGetInfo(out, &out_type, &out_rank, &out_shape, &data, &out_bytes), "value info");
    CHECK(out_type == 1 && out_rank == 2 && out_shape[0] == 2 && out_shape[1] == 3, "output metadata");
    const float expected[6] = {4.5f, 0.5f, 1.0f, 0.5f, 0.0f, 4.0f};
    const float* y = (const float*)data;
    for (int i = 0; i < 6; ++i) CHECK(fabsf(y[i] - expected[i]) < 1e-6f, "y[%d] = %f, expected %f", i, y[i], expected[i]);
    MrtReleaseValue(out);
  }

  /* 1.2: run with caller-described tensors, an output bound to a caller buffer, run options. */
  {
    float y[6] = {0};
    const int64_t y_shape[2] = {2, 3};
    MrtTensorRef in_ref = {1, 2, shape, (void*)x, sizeof(x)};
    MrtTensorRef bound = {1, 2, y_shape, y, sizeof(y)};
    MrtTensorRef info;
    MrtValue* made = (MrtValue*)1;
    MrtRunOptions* ro = NULL;
    ok(MrtCreateRunOptions(&ro), "run options");
    if (ok(MrtRunWithOptions(sess, ro, in_names, &in_ref, 1, NULL, 0, &bound, &made, &info), "run with options")) {
      CHECK(made == NULL && info.data == y && info.rank == 2, "the bound output must be written into the buffer");
      CHECK(fabsf(y[0] - 4.5f) < 1e-6f && fabsf(y[5] - 4.0f) < 1e-6f, "bound output values");
    }
    ok(MrtRunOptionsSetTerminate(ro, 1), "terminate");
    MrtStatus* cancelled = MrtRunWithOptions(sess, ro, in_names, &in_ref, 1, NULL, 0, NULL, &made, NULL);
    CHECK(cancelled && MrtStatusGetCode(cancelled) == MRT_CANCELLED, "a terminated run must fail with MRT_CANCELLED");
    if (cancelled) MrtReleaseStatus(cancelled);
    MrtReleaseRunOptions(ro);
  }

  /* Error paths: wrong input name, wrong data size, malformed model bytes. */
  const char* bad_names[1] = {"nope"};
  MrtStatus* st = MrtRun(sess, bad_names, ins, 1, NULL, 0, &out);
  CHECK(st && MrtStatusGetCode(st) == MRT_INVALID_ARGUMENT && strstr(MrtStatusGetMessage(st), "nope"),
        "unknown input name must be INVALID_ARGUMENT naming it");
  if (st) MrtReleaseStatus(st);
  MrtValue* bad = NULL;
  st = MrtCreateTensor(1, shape, 2, x, 7, &bad);
  CHECK(st && MrtStatusGetCode(st) == MRT_INVALID_ARGUMENT, "byte-count mismatch must be INVALID_ARGUMENT");
  if (st) MrtReleaseStatus(st);
  const unsigned char junk[5] = {0x3a, 0xff, 0xff, 0xff, 0x0f};
  MrtSession* s2 = NULL;
  st = MrtCreateSessionFromBytes(junk, sizeof(junk), NULL, &s2);
  CHECK(st && MrtStatusGetCode(st) == MRT_INVALID_MODEL && strstr(MrtStatusGetMessage(st), "byte"),
        "malformed bytes must be INVALID_MODEL with an offset");
  if (st) MrtReleaseStatus(st);

  /* Strings, sequences and none (ABI 1.4): the string elements are pointer-sized on every target. */
  {
    const char* words[3] = {"caf\xc3\xa9", "", "x"};
    const size_t lengths[3] = {5, 0, 1};
    const int64_t sshape[1] = {3};
    MrtValue* strs = NULL;
    CHECK(!MrtCreateStringTensor(sshape, 1, words, lengths, &strs), "MrtCreateStringTensor");
    const char* text = NULL;
    size_t len = 99;
    CHECK(!MrtValueGetString(strs, 0, &text, &len) && len == 5 && memcmp(text, words[0], 5) == 0, "string 0");
    CHECK(!MrtValueGetString(strs, 1, &text, &len) && len == 0, "string 1 is empty");
    const void* sdata = x;
    size_t sbytes = 1;
    int32_t stype = 0;
    CHECK(!MrtValueGetInfo(strs, &stype, NULL, NULL, &sdata, &sbytes) && stype == 8 && sdata == NULL && sbytes == 0,
          "a string tensor has no byte view");
    const MrtValue* items[2] = {in, strs};
    MrtValue* seq = NULL;
    st = MrtCreateSequence(0, items, 2, &seq);
    CHECK(st && MrtStatusGetCode(st) == MRT_INVALID_ARGUMENT, "a sequence of mixed element types is refused");
    if (st) MrtReleaseStatus(st);
    CHECK(!MrtCreateSequence(0, items + 1, 1, &seq), "MrtCreateSequence");
    size_t count = 0;
    MrtValueKind kind = MRT_VALUE_TENSOR;
    CHECK(!MrtValueGetKind(seq, &kind) && kind == MRT_VALUE_SEQUENCE, "sequence kind");
    CHECK(!MrtValueGetSequenceInfo(seq, &count, &stype) && count == 1 && stype == 8, "sequence info");
    MrtValue* item = NULL;
    CHECK(!MrtValueGetSequenceItem(seq, 0, &item) && !MrtValueGetString(item, 2, &text, &len) && len == 1 &&
              text[0] == 'x', "sequence item keeps its strings");
    MrtValue* none = NULL;
    CHECK(!MrtCreateNone(&none) && !MrtValueGetKind(none, &kind) && kind == MRT_VALUE_NONE, "none kind");
    MrtReleaseValue(item);
    MrtReleaseValue(seq);
    MrtReleaseValue(strs);
    MrtReleaseValue(none);
  }

  MrtReleaseValue(in);
  MrtReleaseSession(sess);
  printf("%d passed, %d failed\n", failures ? 0 : 1, failures ? 1 : 0);
  return failures ? 1 : 0;
}
