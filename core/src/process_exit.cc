#include "process_exit.h"

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <thread>

namespace mrt {
namespace {

struct Gate {
  std::atomic<int64_t> in_flight{0};  // outermost passes on any thread
  std::atomic<bool> closed{false};
  std::atomic<std::thread::id> exiting{};
  std::mutex mu;  // only for waiting: the exiting thread for passes to end, parked threads for ever
  std::condition_variable left;
};

// Never destroyed: it is used while exit() runs the destructors of everything else.
Gate& gate() {
  static Gate& g = *new Gate();
  return g;
}

thread_local int t_depth = 0;  // passes open on this thread; an EP callback may call in again

[[noreturn]] void park(Gate& g) {
  std::unique_lock<std::mutex> lock(g.mu);
  g.left.notify_all();  // this thread's pass may have been the last one the exiting thread waits for
  for (;;) g.left.wait(lock);
}

}  // namespace

bool exit_stops_this_thread() {
  Gate& g = gate();
  return g.closed.load() && g.exiting.load() != std::this_thread::get_id();
}

ExitPass::ExitPass() {
  if (t_depth++ > 0) return;  // counted by the outer pass
  Gate& g = gate();
  // Count first, then look at the gate; the exiting thread closes first, then counts. Whichever order
  // the two threads run in, either this pass sees the gate closed or the exiting thread sees it counted.
  g.in_flight.fetch_add(1);
  if (exit_stops_this_thread()) {
    g.in_flight.fetch_sub(1);
    park(g);
  }
  counted_ = true;
}

ExitPass::~ExitPass() {
  --t_depth;
  if (!counted_) return;
  Gate& g = gate();
  g.in_flight.fetch_sub(1);
  if (!g.closed.load()) return;
  if (exit_stops_this_thread()) park(g);
  std::lock_guard<std::mutex> lock(g.mu);
  g.left.notify_all();
}

int64_t begin_process_exit(uint32_t timeout_ms) {
  Gate& g = gate();
  {
    std::lock_guard<std::mutex> lock(g.mu);
    if (!g.closed.load()) {
      g.exiting.store(std::this_thread::get_id());
      g.closed.store(true);
    }
  }
  const int64_t own = t_depth > 0 ? 1 : 0;  // called from inside a pass of this thread: that one stays open
  std::unique_lock<std::mutex> lock(g.mu);
  g.left.wait_for(lock, std::chrono::milliseconds(timeout_ms), [&] { return g.in_flight.load() <= own; });
  return g.in_flight.load() - own;
}

}  // namespace mrt
