// Exiting the process while calls are in flight on other threads.
//
// exit() destroys the static objects of the core and of every EP library (oneDNN's primitive cache,
// for one) while threads other than the exiting one may still be inside a run. A run that touches a
// destroyed object crashes the process on its way out. The exit gate prevents it: the thread that
// exits first closes the gate (MrtBeginProcessExit; the Python package does it from an atexit hook,
// before the interpreter tears down), which stops the runs in flight at their next node, waits for
// them to leave, and keeps every other thread that calls in afterwards parked for good. The exiting
// thread itself goes on calling freely: its own atexit work may still use sessions.
#pragma once
#include <cstdint>

namespace mrt {

// Held for the length of a call that runs kernels or EP code: a run, a session's creation or release,
// an EP library's registration. Constructed after the gate closed on another thread, it never returns;
// destroyed there after the gate closed, it does not return either: the call's result would be handed
// back to a caller that the process is already tearing down.
class ExitPass {
 public:
  ExitPass();
  ~ExitPass();
  ExitPass(const ExitPass&) = delete;
  ExitPass& operator=(const ExitPass&) = delete;

 private:
  bool counted_ = false;  // false inside another pass of this thread, which does the counting
};

// True once the gate is closed and this is not the thread that closed it: runs check it between nodes
// and stop.
bool exit_stops_this_thread();

// Closes the gate and waits up to timeout_ms for the passes in flight on other threads to end.
// Returns how many were still in flight when it gave up (0: all ended). Calling it again (from any
// thread) waits again and does not move the exiting thread.
int64_t begin_process_exit(uint32_t timeout_ms);

}  // namespace mrt
