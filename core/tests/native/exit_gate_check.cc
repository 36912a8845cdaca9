// The exit gate through the C ABI: a program that exits while other threads keep running a model.
// MrtBeginProcessExit must wait for the runs in flight, keep those threads out from then on (a call of
// theirs never returns, not even with an error) and leave the calling thread the whole API. main then
// returns with the other threads parked inside the library, and the process must end with status 0.
// Usage: exit_gate_check <path to data/dense_relu.onnx>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <thread>

#include "check.h"
#include "mosaicrt/mosaicrt.h"

namespace {

const float kX[8] = {1, 1, 1, 1, -1, 0, 2, 1};
const int64_t kShape[2] = {2, 4};

bool run_once(MrtSession* sess) {
  MrtValue* in = nullptr;
  MrtValue* out = nullptr;
  if (!ok(MrtCreateTensor(1, kShape, 2, kX, sizeof(kX), &in), "create tensor")) return false;
  const char* names[1] = {"x"};
  const MrtValue* ins[1] = {in};
  const bool ran = ok(MrtRun(sess, names, ins, 1, nullptr, 0, &out), "run");
  if (ran) MrtReleaseValue(out);
  MrtReleaseValue(in);
  return ran;
}

void sleep_ms(int ms) { std::this_thread::sleep_for(std::chrono::milliseconds(ms)); }

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s model.onnx\n", argv[0]);
    return 2;
  }
  MrtSession* sess = nullptr;
  if (!ok(MrtCreateSession(argv[1], nullptr, &sess), "create session")) return 1;

  constexpr int kThreads = 4;
  std::atomic<int64_t> returned{0};  // calls that came back to their thread
  std::atomic<int64_t> errors{0};
  for (int t = 0; t < kThreads; ++t)
    std::thread([&] {
      for (;;) {
        if (!run_once(sess)) errors.fetch_add(1);
        returned.fetch_add(1);
      }
    }).detach();
  while (returned.load() < 8 * kThreads) sleep_ms(1);

  const int64_t left = MrtBeginProcessExit(10000);
  CHECK(left == 0, "%lld calls still in flight after the wait", static_cast<long long>(left));
  sleep_ms(200);  // a thread between its call's return and its count
  const int64_t settled = returned.load();
  sleep_ms(300);
  CHECK(returned.load() == settled, "other threads' calls returned after the gate closed: %lld then %lld",
        static_cast<long long>(settled), static_cast<long long>(returned.load()));
  CHECK(errors.load() == 0, "%lld calls of other threads failed (a run the exit cut short must not return)",
        static_cast<long long>(errors.load()));

  // the exiting thread keeps the API: runs, a second close, a new session and its release
  CHECK(run_once(sess), "the exiting thread cannot run after closing the gate");
  CHECK(MrtBeginProcessExit(1000) == 0, "a second close must find nothing in flight");
  MrtSession* again = nullptr;
  if (ok(MrtCreateSession(argv[1], nullptr, &again), "create session after the close")) {
    CHECK(run_once(again), "a session created after the close cannot run");
    MrtReleaseSession(again);
  }
  std::printf("exit gate: %lld runs on %d threads before the close, %d failures\n",
              static_cast<long long>(settled), kThreads, failures);
  return failures ? 1 : 0;  // exit() with the other threads parked in the library
}
