#include "threadpool.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <exception>
#include <mutex>
#include <thread>
#include <vector>

#if defined(__x86_64__) || defined(__i386__) || defined(_M_X64) || defined(_M_IX86)
#include <immintrin.h>
#define MRT_CPU_RELAX() _mm_pause()
#elif defined(__aarch64__) && (defined(__GNUC__) || defined(__clang__))
#define MRT_CPU_RELAX() __asm__ __volatile__("yield")
#else
#define MRT_CPU_RELAX() ((void)0)
#endif

#if defined(__linux__)
#include <sched.h>
#endif

namespace mrt {

namespace {
thread_local bool t_in_parallel = false;

// Before blocking on a condition variable, waiters spin this long: waking a sleeping
// thread costs tens of microseconds (more in a VM), which dominates the short parallel
// regions of small ops, and the next job usually comes within this window.
constexpr std::chrono::microseconds kSpin{200};

// Spins until pred(), or until kSpin has elapsed with keep_spinning() false (checked as the spin goes);
// returns pred()'s last value.
template <class Pred, class Keep>
bool spin_until(Pred pred, Keep keep_spinning) {
  if (pred()) return true;
  auto deadline = std::chrono::steady_clock::now() + kSpin;
  for (;;) {
    for (int i = 0; i < 64; ++i) {
      MRT_CPU_RELAX();
      if (pred()) return true;
    }
    const auto now = std::chrono::steady_clock::now();
    if (keep_spinning()) deadline = now + kSpin;
    else if (now >= deadline) return pred();
    std::this_thread::yield();  // lets a thread sharing this CPU (oversubscription) progress
  }
}
}  // namespace

int current_cpu() {
#if defined(__linux__)
  return sched_getcpu();
#else
  return -1;
#endif
}

// The affinity is narrowed for the move only, which the kernel carries out before the narrowing call returns.
// Why: a worker woken from its sleep by the caller is often placed on the caller's CPU and stays there for
// milliseconds, until the scheduler's balancing moves it; meanwhile the two take turns on one CPU and the other
// idles. The transformer block at 4 tokens, 2 threads, runs 2-4 after a 0.5 s pause: 1.12 / 0.63 / 0.59 ms,
// with the move 0.86 / 0.54 / 0.44, with the threads pinned apart 0.71 / 0.44 / 0.43 (onnxruntime 0.83 / 0.58
// / 0.47; steady 0.41).
void leave_cpu(int cpu) {
#if defined(__linux__)
  if (cpu < 0 || sched_getcpu() != cpu) return;
  cpu_set_t allowed;
  if (sched_getaffinity(0, sizeof allowed, &allowed) != 0 || !CPU_ISSET(cpu, &allowed) || CPU_COUNT(&allowed) < 2)
    return;
  cpu_set_t others = allowed;
  CPU_CLR(cpu, &others);
  if (sched_setaffinity(0, sizeof others, &others) == 0) sched_setaffinity(0, sizeof allowed, &allowed);
#else
  (void)cpu;
#endif
}

// Workers wait for a "job" (a chunked range). Each participant (the caller is participant 0, worker i is
// participant i) owns a contiguous share of the chunks, the same share for the same job size every time, so
// that a chain of ops over the same tensor shapes keeps each part of the data on one core's cache; a
// participant that has run its own share takes the chunks left in the others' (each share is an atomic
// counter), so the caller waits only for the chunks to be done, never for a worker to show up: a worker the
// OS has not scheduled yet (a loaded machine, another session's pool on the same cores) finds the range
// exhausted when it wakes and does nothing, instead of holding up the caller until it runs.
struct ThreadPool::Impl {
  std::vector<std::thread> workers;
  std::mutex mutex;
  std::condition_variable wake, done;
  // Written under `mutex` (so that blocked waiters cannot miss a change), read lock-free
  // while spinning.
  std::atomic<bool> stop{false};
  std::atomic<uint64_t> generation{0};
  std::atomic<int> active_runs{0};  // see ThreadPool::begin_run
  std::atomic<int> sleepers{0};     // workers blocked on `wake` (counted under `mutex`)
  std::atomic<int> waker_cpu{-1};   // the CPU of the thread that last woke the workers (see leave_cpu)

  // Current job. Its fields are written only while `open` is false and no worker is
  // inside (`inside` == 0); a worker enters by incrementing `inside` and then checking
  // `open`.
  const std::function<void(int64_t, int64_t)>* fn = nullptr;
  int64_t n = 0, chunk = 1, chunks = 0;
  std::atomic<bool> open{false};
  std::atomic<int> inside{0};
  // Participant p's share: chunks [next, end) of its slot (each slot on its own cache line).
  struct alignas(64) Share {
    std::atomic<int64_t> next{0};
    int64_t end = 0;
  };
  std::unique_ptr<Share[]> shares;
  int participants = 1;
  std::atomic<int64_t> completed{0};
  std::exception_ptr error;
  std::mutex error_mutex;

  // Its own share first, then what is left of the others', starting with the next participant's.
  void run_chunks(int self) {
    t_in_parallel = true;
    for (int k = 0; k < participants; ++k) {
      Share& sh = shares[static_cast<size_t>((self + k) % participants)];
      for (;;) {
        if (sh.next.load(std::memory_order_relaxed) >= sh.end) break;
        const int64_t c = sh.next.fetch_add(1, std::memory_order_acq_rel);
        if (c >= sh.end) break;
        run_chunk(c);
      }
    }
    t_in_parallel = false;
  }

  void run_chunk(int64_t c) {
    const int64_t b = c * chunk, e = std::min(n, b + chunk);
    try {
      (*fn)(b, e);
    } catch (...) {
      std::lock_guard<std::mutex> lock(error_mutex);
      if (!error) error = std::current_exception();
    }
    if (completed.fetch_add(1, std::memory_order_acq_rel) + 1 == chunks) {
      std::lock_guard<std::mutex> lock(mutex);  // the caller may be blocked in done.wait
      done.notify_all();
    }
  }

  void worker_loop(int self) {
    uint64_t seen = 0;
    for (;;) {
      auto ready = [&] {
        return stop.load(std::memory_order_acquire) || generation.load(std::memory_order_acquire) != seen;
      };
      auto in_run = [&] { return active_runs.load(std::memory_order_seq_cst) > 0; };
      if (!spin_until(ready, in_run)) {
        std::unique_lock<std::mutex> lock(mutex);
        sleepers.fetch_add(1, std::memory_order_seq_cst);
        // A run that begins while this worker sleeps wakes it (begin_run), so that it spins again before
        // the run's first parallel region instead of being woken by it.
        wake.wait(lock, [&] { return ready() || in_run(); });
        sleepers.fetch_sub(1, std::memory_order_relaxed);
        lock.unlock();
        if (stop.load(std::memory_order_acquire)) return;
        leave_cpu(waker_cpu.load(std::memory_order_relaxed));
        if (!ready()) continue;
      }
      if (stop.load(std::memory_order_acquire)) return;
      seen = generation.load(std::memory_order_acquire);
      inside.fetch_add(1, std::memory_order_acq_rel);
      if (open.load(std::memory_order_acquire)) run_chunks(self);
      inside.fetch_sub(1, std::memory_order_acq_rel);
    }
  }
};

ThreadPool::ThreadPool(int threads) : impl_(new Impl) {
  if (threads <= 0) threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  threads_ = threads;
  impl_->participants = threads;
  impl_->shares.reset(new Impl::Share[static_cast<size_t>(threads)]);
  for (int i = 1; i < threads; ++i) impl_->workers.emplace_back([this, i] { impl_->worker_loop(i); });
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lock(impl_->mutex);
    impl_->stop.store(true, std::memory_order_release);
  }
  impl_->wake.notify_all();
  for (auto& t : impl_->workers) t.join();
}

// A worker asleep when a run begins is woken now: on a virtual machine a wake-up takes up to a few hundred
// microseconds, which the run's first parallel region would otherwise wait for (its chunks falling to the
// caller meanwhile); started here, the wake-up overlaps the run's setup and first nodes (the transformer block
// at 4 tokens, 2 threads, the first run after a 0.5 s pause: 1.7-2.0 -> 1.5 ms). The worker increments
// `sleepers` and then reads `active_runs`, this the other way round, both sequentially consistent: a worker
// about to sleep either sees the run or is seen.
void ThreadPool::begin_run() {
  Impl& im = *impl_;
  im.active_runs.fetch_add(1, std::memory_order_seq_cst);
  if (im.sleepers.load(std::memory_order_seq_cst) > 0) {
    im.waker_cpu.store(current_cpu(), std::memory_order_relaxed);
    { std::lock_guard<std::mutex> lock(im.mutex); }
    im.wake.notify_all();
  }
}
void ThreadPool::end_run() { impl_->active_runs.fetch_sub(1, std::memory_order_relaxed); }

void ThreadPool::parallel_for(int64_t n, int64_t grain, const std::function<void(int64_t, int64_t)>& fn) {
  if (n <= 0) return;
  grain = std::max<int64_t>(grain, 1);
  const int64_t max_chunks = (n + grain - 1) / grain;
  const int64_t target_chunks = std::min<int64_t>(max_chunks, static_cast<int64_t>(threads_) * 4);
  run_chunked(n, (n + target_chunks - 1) / target_chunks, fn);
}

void ThreadPool::parallel_tasks(int64_t n, const std::function<void(int64_t, int64_t)>& fn) {
  if (n <= 0) return;
  run_chunked(n, 1, fn);
}

void ThreadPool::run_chunked(int64_t n, int64_t chunk, const std::function<void(int64_t, int64_t)>& fn) {
  if (threads_ <= 1 || chunk >= n || t_in_parallel) {
    fn(0, n);
    return;
  }
  // One job at a time per pool; concurrent Run() calls on a session serialize here.
  std::unique_lock<std::mutex> job_lock(job_mutex_);
  Impl& im = *impl_;
  // A worker still inside from an earlier job (it woke late and found nothing to do)
  // leaves before the fields change.
  while (im.inside.load(std::memory_order_acquire) != 0) std::this_thread::yield();
  im.chunk = chunk;
  im.chunks = (n + im.chunk - 1) / im.chunk;
  im.n = n;
  im.fn = &fn;
  for (int p = 0; p < im.participants; ++p) {  // contiguous shares
    im.shares[static_cast<size_t>(p)].next.store(p * im.chunks / im.participants, std::memory_order_relaxed);
    im.shares[static_cast<size_t>(p)].end = (p + 1) * im.chunks / im.participants;
  }
  im.completed.store(0, std::memory_order_relaxed);
  im.error = nullptr;
  if (im.sleepers.load(std::memory_order_relaxed) > 0) im.waker_cpu.store(current_cpu(), std::memory_order_relaxed);
  {
    std::lock_guard<std::mutex> lock(im.mutex);
    im.open.store(true, std::memory_order_release);
    im.generation.fetch_add(1, std::memory_order_release);  // publishes the job fields
  }
  im.wake.notify_all();
  im.run_chunks(0);
  const int64_t chunks = im.chunks;
  auto finished = [&] { return im.completed.load(std::memory_order_acquire) == chunks; };
  if (!spin_until(finished, [] { return false; })) {
    std::unique_lock<std::mutex> lock(im.mutex);
    im.done.wait(lock, finished);
  }
  im.open.store(false, std::memory_order_release);
  im.fn = nullptr;
  if (im.error) std::rethrow_exception(im.error);
}

}  // namespace mrt
