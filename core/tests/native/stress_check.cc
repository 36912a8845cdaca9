// Concurrency and leak checks of the C ABI, meant to run under ThreadSanitizer (data races),
// AddressSanitizer/LeakSanitizer (leaks) or plain (RSS growth):
//
//   mrt_stress_check run-threads THREADS RUNS        one session, THREADS x RUNS runs with distinct
//                                                     inputs, every output checked
//   mrt_stress_check create-threads THREADS N        THREADS threads each create, run and destroy
//                                                     N sessions at once
//   mrt_stress_check ep-race ROUNDS EP_LIBRARY       EP registration/unregistration racing session
//                                                     creation and runs that use the EP
//   mrt_stress_check cycles N [EP_NAME=EP_LIBRARY]   N create/run/destroy cycles (with that EP when
//                                                     given); prints RSS after warm-up (N/10) and at the end
//
// The model is built here: Y = Relu(X @ W + B) with X [batch, 64] and fixed W, B, so every
// output is checked against a reference computed by this program. Each mode prints one JSON
// line with its numbers and exits 0 on success.
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "graph.h"
#include "mosaicrt/mosaicrt.h"

namespace {

constexpr int64_t kIn = 64, kOut = 16;
std::atomic<int> g_failures{0};

void report_failure(const char* what, MrtStatus* s) {
  if (g_failures.fetch_add(1) < 10)
    std::fprintf(stderr, "%s: %s\n", what, s ? MrtStatusGetMessage(s) : "wrong result");
  if (s) MrtReleaseStatus(s);
}

float weight(int64_t i, int64_t j) { return static_cast<float>(((i * 7 + j * 3) % 11) - 5) / 8.0f; }
float bias(int64_t j) { return static_cast<float>(j % 5) / 4.0f - 0.5f; }

std::string model_bytes() {
  mrt::Model m;
  m.ir_version = 8;
  m.opsets[""] = 17;
  mrt::Graph& g = m.graph;
  g.name = "stress";
  auto w = std::make_shared<mrt::Tensor>(mrt::DType::kFloat, mrt::Shape{kIn, kOut});
  auto b = std::make_shared<mrt::Tensor>(mrt::DType::kFloat, mrt::Shape{kOut});
  for (int64_t i = 0; i < kIn; ++i)
    for (int64_t j = 0; j < kOut; ++j) w->data<float>()[i * kOut + j] = weight(i, j);
  for (int64_t j = 0; j < kOut; ++j) b->data<float>()[j] = bias(j);
  g.initializers = {{"W", w}, {"B", b}};
  auto node = [](const char* op, std::vector<std::string> in, std::string out) {
    mrt::Node n;
    n.name = out;
    n.op_type = op;
    n.inputs = std::move(in);
    n.outputs = {std::move(out)};
    return n;
  };
  g.nodes = {node("MatMul", {"X", "W"}, "xw"), node("Add", {"xw", "B"}, "z"), node("Relu", {"z"}, "Y")};
  mrt::ValueInfo x{"X", mrt::DType::kFloat, true, {mrt::Dim{-1, "batch", ""}, mrt::Dim{kIn, "", ""}}, true};
  mrt::ValueInfo y{"Y", mrt::DType::kFloat, true, {mrt::Dim{-1, "batch", ""}, mrt::Dim{kOut, "", ""}}, true};
  g.inputs = {x};
  g.outputs = {y};
  return mrt::encode_model(m);
}

// One run with inputs derived from `key`; returns false (after reporting) on any error or mismatch.
bool run_and_check(MrtSession* session, uint64_t key) {
  const int64_t batch = 1 + static_cast<int64_t>(key % 4);
  std::vector<float> x(static_cast<size_t>(batch * kIn));
  for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(((key * 2654435761u + i * 40503u) % 1000)) / 500.0f - 1.0f;
  const int64_t shape[2] = {batch, kIn};
  MrtValue* in = nullptr;
  MrtStatus* s = MrtCreateTensorBorrowed(1, shape, 2, x.data(), x.size() * sizeof(float), &in);
  if (s) return report_failure("MrtCreateTensorBorrowed", s), false;
  const char* in_name = "X";
  const char* out_name = "Y";
  MrtValue* out = nullptr;
  s = MrtRun(session, &in_name, &in, 1, &out_name, 1, &out);
  MrtReleaseValue(in);
  if (s) return report_failure("MrtRun", s), false;
  int32_t elem_type = 0;
  size_t rank = 0, bytes = 0;
  const int64_t* out_shape = nullptr;
  const void* data = nullptr;
  bool good = !MrtValueGetInfo(out, &elem_type, &rank, &out_shape, &data, &bytes) && elem_type == 1 && rank == 2 &&
              out_shape[0] == batch && out_shape[1] == kOut;
  const float* y = static_cast<const float*>(data);
  for (int64_t r = 0; good && r < batch; ++r)
    for (int64_t j = 0; good && j < kOut; ++j) {
      double acc = bias(j);
      for (int64_t i = 0; i < kIn; ++i) acc += static_cast<double>(x[r * kIn + i]) * weight(i, j);
      double want = acc > 0 ? acc : 0;
      if (std::fabs(y[r * kOut + j] - want) > 1e-4 * (1 + std::fabs(want))) good = false;
    }
  MrtReleaseValue(out);
  if (!good) report_failure("run result", nullptr);
  return good;
}

MrtSession* create_session(const std::string& bytes, const char* ep_name, MrtStatus** error) {
  MrtSessionOptions* o = nullptr;
  MrtStatus* s = MrtCreateSessionOptions(&o);
  // MRT_STRESS_THREADS: intra-op threads per session (default 2). Under ASan, every thread ever
  // started leaves bookkeeping behind, so RSS is compared with 1 (no pool threads).
  const char* threads = std::getenv("MRT_STRESS_THREADS");
  if (!s) s = MrtSessionOptionsSetIntraOpNumThreads(o, threads ? std::atoi(threads) : 2);
  if (!s && ep_name) {
    // The fake EP (ep-race) is told to run Relu only (its Add does not broadcast); a real EP
    // ignores the option it does not know.
    const char* key = "ops";
    const char* value = "Relu";
    const bool fake = std::strncmp(ep_name, "Fake", 4) == 0;
    s = MrtSessionOptionsAppendExecutionProvider(o, ep_name, fake ? &key : nullptr, fake ? &value : nullptr,
                                                 fake ? 1 : 0);
  }
  MrtSession* session = nullptr;
  if (!s) s = MrtCreateSessionFromBytes(bytes.data(), bytes.size(), o, &session);
  MrtReleaseSessionOptions(o);
  *error = s;
  return s ? nullptr : session;
}

long rss_kb() {
  std::ifstream statm("/proc/self/statm");
  long pages = 0, resident = 0;
  statm >> pages >> resident;
  return resident * 4;  // 4 KiB pages on every Linux target this runs on
}

int run_threads(int threads, int runs) {
  std::string bytes = model_bytes();
  MrtStatus* s = nullptr;
  MrtSession* session = create_session(bytes, nullptr, &s);
  if (!session) return report_failure("create", s), 1;
  std::vector<std::thread> pool;
  std::atomic<int> ok{0};
  for (int t = 0; t < threads; ++t)
    pool.emplace_back([&, t] {
      for (int r = 0; r < runs; ++r)
        if (run_and_check(session, static_cast<uint64_t>(t) * 1000003u + static_cast<uint64_t>(r))) ok++;
    });
  for (auto& th : pool) th.join();
  MrtReleaseSession(session);
  std::printf("{\"mode\": \"run-threads\", \"threads\": %d, \"runs\": %d, \"checked\": %d, \"failures\": %d}\n", threads,
              runs, ok.load(), g_failures.load());
  return g_failures.load() ? 1 : 0;
}

int create_threads(int threads, int n) {
  std::string bytes = model_bytes();
  std::vector<std::thread> pool;
  std::atomic<int> created{0};
  for (int t = 0; t < threads; ++t)
    pool.emplace_back([&, t] {
      for (int i = 0; i < n; ++i) {
        MrtStatus* s = nullptr;
        MrtSession* session = create_session(bytes, nullptr, &s);
        if (!session) {
          report_failure("create", s);
          continue;
        }
        created++;
        run_and_check(session, static_cast<uint64_t>(t * n + i));
        MrtReleaseSession(session);
      }
    });
  for (auto& th : pool) th.join();
  std::printf("{\"mode\": \"create-threads\", \"threads\": %d, \"sessions\": %d, \"failures\": %d}\n", threads,
              created.load(), g_failures.load());
  return g_failures.load() ? 1 : 0;
}

// The fake EP (core/tests/plugins/fake_ep.cc) registered as "race:cpu" offers FakeCpu_race,
// which claims and computes Relu and Add.
int ep_race(int rounds, const char* library) {
  std::string bytes = model_bytes();
  std::atomic<bool> stop{false};
  std::atomic<int> registered{0}, refused_unregister{0}, with_ep{0}, without_ep{0};
  std::thread registrar([&] {
    for (int i = 0; i < rounds; ++i) {
      MrtStatus* s = MrtRegisterExecutionProviderLibrary("race:cpu", library);
      if (s) {
        MrtReleaseStatus(s);  // still registered: the last unregister was refused
      } else {
        registered++;
      }
      std::this_thread::sleep_for(std::chrono::microseconds(500));  // let creations meet the EP registered
      for (int k = 0; k < 8; ++k) {  // a session may hold the EP: unregistering is refused then
        s = MrtUnregisterExecutionProviderLibrary("race:cpu");
        if (!s) break;
        refused_unregister++;
        MrtReleaseStatus(s);
        std::this_thread::yield();
      }
      (void)MrtGetAvailableProviders();
    }
    stop = true;
  });
  std::vector<std::thread> users;
  for (int t = 0; t < 4; ++t)
    users.emplace_back([&, t] {
      for (uint64_t i = 0; !stop; ++i) {
        MrtStatus* s = nullptr;
        MrtSession* session = create_session(bytes, (i + t) % 2 ? "FakeCpu_race" : nullptr, &s);
        if (!session) {  // the EP is not registered right now: a clean error, nothing else
          if (MrtStatusGetCode(s) != MRT_INVALID_ARGUMENT && MrtStatusGetCode(s) != MRT_EP_ERROR)
            report_failure("create while racing", s);
          else
            MrtReleaseStatus(s);
          without_ep++;
          continue;
        }
        with_ep++;
        run_and_check(session, i * 4 + static_cast<uint64_t>(t));
        MrtReleaseSession(session);
      }
    });
  registrar.join();
  for (auto& th : users) th.join();
  MrtStatus* s = MrtUnregisterExecutionProviderLibrary("race:cpu");
  if (s) MrtReleaseStatus(s);
  std::printf("{\"mode\": \"ep-race\", \"rounds\": %d, \"registered\": %d, \"refused_unregister\": %d, "
              "\"sessions\": %d, \"create_refused\": %d, \"failures\": %d}\n",
              rounds, registered.load(), refused_unregister.load(), with_ep.load(), without_ep.load(),
              g_failures.load());
  return g_failures.load() ? 1 : 0;
}

int cycles(int n, const char* ep_spec) {
  std::string bytes = model_bytes();
  std::string ep_name;
  if (ep_spec) {
    const char* eq = std::strchr(ep_spec, '=');
    if (!eq) return std::fprintf(stderr, "EP spec must be NAME=LIBRARY\n"), 2;
    ep_name.assign(ep_spec, eq);
    MrtStatus* s = MrtRegisterExecutionProviderLibrary("stress", eq + 1);
    if (s) return report_failure("register EP", s), 1;
  }
  long warm = 0;
  const int warm_at = n / 10 > 0 ? n / 10 : 1;
  for (int i = 0; i < n; ++i) {
    MrtStatus* s = nullptr;
    MrtSession* session = create_session(bytes, ep_name.empty() ? nullptr : ep_name.c_str(), &s);
    if (!session) return report_failure("create", s), 1;
    run_and_check(session, static_cast<uint64_t>(i));
    MrtReleaseSession(session);
    if (i + 1 == warm_at) warm = rss_kb();
  }
  long end = rss_kb();
  if (ep_spec) {
    MrtStatus* s = MrtUnregisterExecutionProviderLibrary("stress");
    if (s) report_failure("unregister EP", s);
  }
  std::printf("{\"mode\": \"cycles\", \"cycles\": %d, \"ep\": \"%s\", \"warm_at\": %d, \"rss_warm_kb\": %ld, "
              "\"rss_end_kb\": %ld, \"growth_kb\": %ld, \"failures\": %d}\n",
              n, ep_name.empty() ? MRT_CPU_EP_NAME : ep_name.c_str(), warm_at, warm, end, end - warm,
              g_failures.load());
  return g_failures.load() ? 1 : 0;
}

}  // namespace

int main(int argc, char** argv) {
  std::string mode = argc > 1 ? argv[1] : "";
  if (mode == "run-threads" && argc == 4) return run_threads(std::atoi(argv[2]), std::atoi(argv[3]));
  if (mode == "create-threads" && argc == 4) return create_threads(std::atoi(argv[2]), std::atoi(argv[3]));
  if (mode == "ep-race" && argc == 4) return ep_race(std::atoi(argv[2]), argv[3]);
  if (mode == "cycles" && (argc == 3 || argc == 4)) return cycles(std::atoi(argv[2]), argc == 4 ? argv[3] : nullptr);
  std::fprintf(stderr,
               "usage: %s run-threads THREADS RUNS | create-threads THREADS N | ep-race ROUNDS EP_LIBRARY | "
               "cycles N [EP_NAME=EP_LIBRARY]\n",
               argv[0]);
  return 2;
}
