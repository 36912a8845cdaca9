// Intra-op thread pool: a fixed set of workers that split a [0, n) range.
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>

namespace mrt {

// The CPU the calling thread runs on, or -1 where that is not known (Linux only).
int current_cpu();
// If the calling thread runs on `cpu`, moves it to another of the CPUs it may run on (the kernel picks which)
// and leaves its allowed set as it was; a thread allowed one CPU, or cpu < 0, is left where it is. Linux only.
void leave_cpu(int cpu);

class ThreadPool {
 public:
  // threads <= 0 → hardware concurrency. A pool of 1 runs everything inline.
  explicit ThreadPool(int threads);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int size() const { return threads_; }
  // Calls fn(begin, end) over disjoint chunks covering [0, n); chunks hold at least
  // `grain` items (except the last). Blocks until all chunks ran. Exceptions thrown by
  // fn are rethrown here (the first one). Nested calls run inline.
  void parallel_for(int64_t n, int64_t grain, const std::function<void(int64_t, int64_t)>& fn);
  // Calls fn(i, i + 1) for each i in [0, n), handed out in order to whichever thread is free: for work
  // already cut into tasks whose split was chosen by cost (parallel_for would merge them into at most
  // 4 chunks per thread, unevenly: 7 chunks of 4 tasks from 28). Blocks and rethrows as parallel_for.
  void parallel_tasks(int64_t n, const std::function<void(int64_t, int64_t)>& fn);

  // While a run is active (between begin_run and end_run; runs may overlap), idle workers keep spinning
  // between parallel regions instead of going to sleep after a short spin: a run's sequential stretches
  // (a Concat, a small op) would otherwise put them to sleep, and on a virtual machine waking a sleeping
  // thread can cost hundreds of microseconds. The spin yields the CPU to any other runnable thread.
  void begin_run();
  void end_run();
  // Marks a run for its lifetime.
  class RunScope {
   public:
    explicit RunScope(ThreadPool& pool) : pool_(pool) { pool_.begin_run(); }
    ~RunScope() { pool_.end_run(); }
    RunScope(const RunScope&) = delete;
    RunScope& operator=(const RunScope&) = delete;

   private:
    ThreadPool& pool_;
  };

 private:
  void run_chunked(int64_t n, int64_t chunk, const std::function<void(int64_t, int64_t)>& fn);

  struct Impl;
  std::unique_ptr<Impl> impl_;
  std::mutex job_mutex_;
  int threads_;
};

}  // namespace mrt
