/* Loads the test-only plugin EP (core/tests/plugins/fake_ep.cc) through the C ABI and runs
 * a model with it: proves plugin loading (dlopen / LoadLibrary), partitioning, the kernel
 * context and policy selection on every target, under qemu/wine when cross built.
 * Usage: ep_plugin_check <fake EP library> <data/dense_relu.onnx> */
#include <stdio.h>
#include <string.h>

#include "mosaicrt/ep.h"
#include "mosaicrt/mosaicrt.h"
#include "check.h"

/* Runs the model once; writes the 6 outputs to y. */
static void run(MrtSession* sess, float* y) {
  const float x[8] = {1, 1, 1, 1, -1, 0, 2, 1};
  const int64_t shape[2] = {2, 4};
  MrtValue* in = NULL;
  MrtValue* out = NULL;
  const char* names[1] = {"x"};
  if (!ok(MrtCreateTensor(1, shape, 2, x, sizeof(x), &in), "tensor")) return;
  const MrtValue* ins[1] = {in};
  if (ok(MrtRun(sess, names, ins, 1, NULL, 0, &out), "run")) {
    const void* data = NULL;
    size_t bytes = 0;
    ok(MrtValueGetInfo(out, NULL, NULL, NULL, &data, &bytes), "value info");
    CHECK(bytes == 6 * sizeof(float), "output has %zu bytes", bytes);
    if (bytes == 6 * sizeof(float)) memcpy(y, data, bytes);
    MrtReleaseValue(out);
  }
  MrtReleaseValue(in);
}

static const char* ep_of(MrtSession* sess, const char* node) {
  size_t n = 0;
  ok(MrtSessionGetNodeCount(sess, &n), "node count");
  for (size_t i = 0; i < n; ++i) {
    const char *name = NULL, *op = NULL, *ep = NULL, *note = NULL;
    ok(MrtSessionGetNodeAssignment(sess, i, &name, &op, &ep, &note), "assignment");
    if (name && strcmp(name, node) == 0) return ep;
  }
  return "";
}

int main(int argc, char** argv) {
  if (argc < 3) {
    fprintf(stderr, "usage: %s <fake EP library> <dense_relu.onnx>\n", argv[0]);
    return 2;
  }
  float want[6] = {0}, got[6] = {0};
  MrtSession* cpu = NULL;
  if (!ok(MrtCreateSession(argv[2], NULL, &cpu), "cpu session")) return 1;
  run(cpu, want);
  MrtReleaseSession(cpu);

  if (!ok(MrtRegisterExecutionProviderLibrary("native:npu", argv[1]), "register")) return 1;
  MrtStatus* twice = MrtRegisterExecutionProviderLibrary("native:npu", argv[1]);
  CHECK(twice && MrtStatusGetCode(twice) == MRT_EP_ERROR, "registering a name twice must fail");
  if (twice) MrtReleaseStatus(twice);
  printf("providers: %s\n", MrtGetAvailableProviders());

  /* Explicit EP with an option: Relu only (the model's Add broadcasts a bias). */
  MrtSessionOptions* opts = NULL;
  MrtSession* sess = NULL;
  const char* keys[1] = {"ops"};
  const char* values[1] = {"Relu"};
  ok(MrtCreateSessionOptions(&opts), "options");
  ok(MrtSessionOptionsAppendExecutionProvider(opts, "FakeNpu_native", keys, values, 1), "append EP");
  if (ok(MrtCreateSession(argv[2], opts, &sess), "plugin session")) {
    CHECK(strcmp(ep_of(sess, "relu"), "FakeNpu_native") == 0, "relu ran on '%s'", ep_of(sess, "relu"));
    CHECK(strcmp(ep_of(sess, "mm"), MRT_CPU_EP_NAME) == 0, "mm ran on '%s'", ep_of(sess, "mm"));
    run(sess, got);
    for (int i = 0; i < 6; ++i) CHECK(got[i] == want[i], "y[%d] = %f, CPU EP gave %f", i, got[i], want[i]);
    /* (C ABI 1.3) partitions and copies: a host-memory EP makes none. */
    size_t n_nodes = 0;
    ok(MrtSessionGetNodeCount(sess, &n_nodes), "node count");
    for (size_t i = 0; i < n_nodes; ++i) {
      const char *name = NULL, *partition = NULL, *copies = NULL;
      ok(MrtSessionGetNodeAssignment(sess, i, &name, NULL, NULL, NULL), "assignment");
      ok(MrtSessionGetNodePartition(sess, i, &partition, &copies), "partition");
      int on_plugin = strcmp(ep_of(sess, name), "FakeNpu_native") == 0;
      CHECK(on_plugin == (partition && partition[0] != 0), "node '%s': partition '%s'", name, partition ? partition : "");
      CHECK(copies && copies[0] == 0, "node '%s': copies '%s' with host memory", name, copies ? copies : "");
    }
    uint64_t to_device = 1, to_host = 1, resident = 1, uploaded = 1;
    ok(MrtSessionGetTransferCounts(sess, &to_device, &to_host, &resident, &uploaded), "transfer counts");
    CHECK(to_device + to_host + resident + uploaded == 0, "host-memory EP: %llu/%llu/%llu/%llu copies",
          (unsigned long long)to_device, (unsigned long long)to_host, (unsigned long long)resident,
          (unsigned long long)uploaded);
    MrtStatus* busy = MrtUnregisterExecutionProviderLibrary("native:npu");
    CHECK(busy && MrtStatusGetCode(busy) == MRT_EP_ERROR, "unregistering an EP in use must fail");
    if (busy) MrtReleaseStatus(busy);
    MrtReleaseSession(sess);
  }
  MrtReleaseSessionOptions(opts);

  /* Policy: the simulated NPU is preferred. */
  opts = NULL;
  sess = NULL;
  ok(MrtCreateSessionOptions(&opts), "options");
  ok(MrtSessionOptionsSetEpSelectionPolicy(opts, MRT_EP_POLICY_PREFER_NPU), "policy");
  if (ok(MrtCreateSession(argv[2], opts, &sess), "policy session")) {
    const char* first = NULL;
    ok(MrtSessionGetProvider(sess, 0, &first), "provider 0");
    CHECK(first && strcmp(first, "FakeNpu_native") == 0, "PREFER_NPU chose '%s'", first ? first : "");
    MrtReleaseSession(sess);
  }
  MrtReleaseSessionOptions(opts);
  ok(MrtUnregisterExecutionProviderLibrary("native:npu"), "unregister");

  if (failures) {
    fprintf(stderr, "ep_plugin_check: %d failure(s)\n", failures);
    return 1;
  }
  printf("ep plugin check: OK (loaded %s; relu ran on FakeNpu_native, PREFER_NPU picked it)\n", argv[1]);
  return 0;
}
