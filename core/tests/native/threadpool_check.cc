// Native check of the intra-op thread pool: every index of every job runs exactly once,
// jobs back to back (late workers must not run a finished job's function or miss a new
// one), two pools driven at once from two threads (oversubscribed cores), parallel_tasks one
// index per call, a participant's share run by the other when it is held up, nested calls inline, and
// exceptions reaching the caller; on Linux, that idle workers sleep, that a run's start wakes them, and that
// leave_cpu moves a thread off a CPU without changing the CPUs it may use.
#include <atomic>
#include <chrono>
#include <cstdio>
#include <stdexcept>
#include <thread>
#include <vector>

#if defined(__linux__)
#include <dirent.h>
#include <sched.h>
#include <unistd.h>

#include <cstring>
#include <fstream>
#include <string>
#endif

#include "threadpool.h"

using namespace mrt;

namespace {

// Runs `jobs` parallel_for calls of varying sizes on `pool`; returns the number of errors.
int hammer(ThreadPool& pool, int jobs, unsigned seed) {
  int errors = 0;
  std::vector<std::atomic<int>> hits(4096);
  for (int j = 0; j < jobs; ++j) {
    seed = seed * 1103515245u + 12345u;
    const int64_t n = 1 + (seed >> 8) % 4096, grain = 1 + (seed >> 20) % 64;
    for (int64_t i = 0; i < n; ++i) hits[static_cast<size_t>(i)].store(0, std::memory_order_relaxed);
    pool.parallel_for(n, grain, [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) hits[static_cast<size_t>(i)].fetch_add(1, std::memory_order_relaxed);
    });
    for (int64_t i = 0; i < n; ++i)
      if (hits[static_cast<size_t>(i)].load() != 1) {
        std::printf("FAIL job %d (n=%lld grain=%lld): index %lld ran %d times\n", j, (long long)n, (long long)grain,
                    (long long)i, hits[static_cast<size_t>(i)].load());
        ++errors;
        break;
      }
  }
  return errors;
}

#if defined(__linux__)
// Threads of this process other than the caller that are running or runnable (state R): a spinning worker is,
// a sleeping one is not.
int runnable_others() {
  int n = 0;
  const std::string self = std::to_string(gettid());
  if (DIR* d = opendir("/proc/self/task")) {
    while (dirent* e = readdir(d)) {
      if (e->d_name[0] == '.' || self == e->d_name) continue;
      std::ifstream stat(std::string("/proc/self/task/") + e->d_name + "/stat");
      std::string line;
      std::getline(stat, line);
      const size_t close = line.rfind(')');  // the state follows the parenthesized name
      if (close != std::string::npos && close + 2 < line.size() && line[close + 2] == 'R') ++n;
    }
    closedir(d);
  }
  return n;
}

// Waits up to 2 s for runnable_others() == want; returns the last count.
int await_runnable(int want) {
  int n = -1;
  for (int i = 0; i < 200 && (n = runnable_others()) != want; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  return n;
}

int check_sleep_and_wake() {
  int failures = 0;
  ThreadPool pool(2);
  pool.parallel_for(1000, 1, [](int64_t, int64_t) {});
  if (const int n = await_runnable(0); n != 0) {
    std::printf("FAIL idle: %d threads still runnable 2 s after the last job\n", n);
    ++failures;
  }
  pool.begin_run();  // no parallel work yet: the run's start alone wakes the worker, which then spins
  if (const int n = await_runnable(1); n != 1) {
    std::printf("FAIL begin_run: %d threads runnable, expected the woken worker\n", n);
    ++failures;
  }
  pool.end_run();
  if (const int n = await_runnable(0); n != 0) {
    std::printf("FAIL end_run: %d threads still runnable 2 s after the run ended\n", n);
    ++failures;
  }
  return failures;
}

int check_leave_cpu() {
  cpu_set_t before, after;
  if (sched_getaffinity(0, sizeof before, &before) != 0 || CPU_COUNT(&before) < 2) {
    std::printf("leave_cpu: fewer than 2 CPUs allowed, not checked\n");
    return 0;
  }
  bool moved = false;
  for (int attempt = 0; attempt < 5 && !moved; ++attempt) {  // the scheduler may move the thread back at once
    const int cpu = current_cpu();
    leave_cpu(cpu);
    moved = current_cpu() != cpu;
  }
  sched_getaffinity(0, sizeof after, &after);
  int failures = 0;
  if (!moved) {
    std::printf("FAIL leave_cpu: the thread stayed on its CPU in 5 tries\n");
    ++failures;
  }
  if (!CPU_EQUAL(&before, &after)) {
    std::printf("FAIL leave_cpu: the allowed CPUs changed\n");
    ++failures;
  }
  return failures;
}
#endif

}  // namespace

int main() {
  int failures = 0;
  ThreadPool a(2), b(3);
  failures += hammer(a, 3000, 1);
  // Two pools at once: more workers than cores, so workers often wake late.
  int fa = 0, fb = 0;
  std::thread t([&] { fa = hammer(a, 3000, 7); });
  fb = hammer(b, 3000, 11);
  t.join();
  failures += fa + fb;
  // parallel_tasks: every index once, each in a call of its own (not merged into chunks).
  for (int64_t n : {1, 2, 7, 28, 1000}) {
    std::vector<std::atomic<int>> hits(static_cast<size_t>(n));
    std::atomic<int> wide{0};
    a.parallel_tasks(n, [&](int64_t b0, int64_t e0) {
      if (e0 != b0 + 1) wide.fetch_add(1);
      for (int64_t i = b0; i < e0; ++i) hits[static_cast<size_t>(i)].fetch_add(1);
    });
    for (int64_t i = 0; i < n; ++i)
      if (hits[static_cast<size_t>(i)].load() != 1 || wide.load() != 0) {
        std::printf("FAIL parallel_tasks n=%lld: index %lld ran %d times, %d calls of several tasks\n", (long long)n,
                    (long long)i, hits[static_cast<size_t>(i)].load(), wide.load());
        ++failures;
        break;
      }
  }
  // Shares are taken over: one task waits until every other task of the job has run, which needs the
  // participant holding it to have its share finished by the other (the waiter first in the caller's
  // share, then last in the worker's). A pool that ran only its own share would time out.
  for (int64_t waiter : {int64_t{0}, int64_t{7}}) {
    std::atomic<int> others{0};
    std::atomic<bool> timed_out{false};
    a.parallel_tasks(8, [&](int64_t b0, int64_t) {
      if (b0 != waiter) {
        others.fetch_add(1);
        return;
      }
      const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
      while (others.load() != 7)
        if (std::chrono::steady_clock::now() > deadline) {
          timed_out.store(true);
          return;
        }
    });
    if (timed_out.load()) {
      std::printf("FAIL take-over: task %lld waited 10 s for the other 7 (ran %d)\n", (long long)waiter, others.load());
      ++failures;
    }
  }
  // Nested parallel_for runs inline; exceptions propagate to the caller.
  std::atomic<int64_t> sum{0};
  a.parallel_for(64, 1, [&](int64_t b0, int64_t e0) {
    for (int64_t i = b0; i < e0; ++i) a.parallel_for(8, 1, [&](int64_t x, int64_t y) { sum += y - x; });
  });
  if (sum.load() != 64 * 8) {
    std::printf("FAIL nested: %lld\n", (long long)sum.load());
    ++failures;
  }
  bool caught = false;
  try {
    a.parallel_for(100, 1, [](int64_t b0, int64_t) {
      if (b0 == 0) throw std::runtime_error("boom");
    });
  } catch (const std::runtime_error&) {
    caught = true;
  }
  if (!caught) {
    std::printf("FAIL: exception not propagated\n");
    ++failures;
  }
  failures += hammer(a, 200, 3);  // the pool still works after an exception
#if defined(__linux__)
  failures += check_sleep_and_wake();
  failures += check_leave_cpu();
#endif
  std::printf("threadpool: %s\n", failures ? "FAILED" : "OK");
  return failures ? 1 : 0;
}
