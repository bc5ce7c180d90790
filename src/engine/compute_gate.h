// ComputeGate: how background disk work (sealing and writing saved caches)
// shares the machine with the compute loops of every loaded model, one gate
// per server (docs/saved_caches.md, "When states are written").
//
// Compute loops bracket each forward pass with EnterStep()/ExitStep() and say
// whether they have requests (SetLoopActive). Background work runs in short
// slices bracketed by BeginSlice()/EndSlice(). The gate guarantees:
//  * a slice never runs while a forward pass of any model runs (steps and
//    slices exclude each other; a step that wants to start while a slice
//    runs waits for that slice, so a step is delayed by at most one slice);
//  * while any loop is active, slices take at most `busy_share` of wall time
//    (a credit that accrues at busy_share per microsecond of activity, capped
//    at max_credit_us, and that each slice spends), unless the caller says
//    the work is urgent (the write queue is over its budget);
//  * when no loop is active (the server is idle), slices run back to back.
// Between two slices at least one waiting step gets to run, so urgent work
// cannot starve replies either.
//
// Thread-safety: every method may be called from any thread.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <mutex>

#include "core/env.h"

namespace mx::engine {

struct ComputeGateOptions {
  double busy_share = 0.10;        // share of wall time slices may take while replies run
  uint64_t max_credit_us = 10000;  // longest burst of slices after a quiet stretch
};

// What the gate has seen, for /api/cache/persistence and tests.
struct ComputeGateStats {
  uint64_t steps = 0;              // forward passes bracketed
  uint64_t slices = 0;             // background slices run
  uint64_t busy_slices = 0;        // ... of which while a loop was active
  uint64_t busy_slice_us = 0;      // their total time
  uint64_t max_slice_us = 0;       // the longest slice
  uint64_t step_wait_us = 0;       // total time steps waited for a slice to end
  uint64_t max_step_wait_us = 0;   // the longest such wait
};

class ComputeGate {
 public:
  explicit ComputeGate(Env* env, ComputeGateOptions options = {});
  ComputeGate(const ComputeGate&) = delete;
  ComputeGate& operator=(const ComputeGate&) = delete;

  // --- Compute loops.
  // A loop starts (true) or stops (false) having requests. Calls of one loop
  // alternate true/false.
  void SetLoopActive(bool active);
  // Before and after one forward pass. EnterStep waits while a slice runs.
  void EnterStep();
  void ExitStep();

  // --- Background work.
  // Waits until a slice may run (see the class comment), or until *cancel
  // becomes true or Wake() is called with it set (returns false: no slice).
  // `urgent`: ignore the busy share (steps still alternate with slices).
  // Until `idle_only_until_us` (Env::NowMicros; 0: never) a slice that is
  // not urgent runs only while no loop is active: work deferred for replies
  // pauses when a reply starts. *idle (optional): whether no loop was active
  // when the slice began (the slice may then use every core).
  bool BeginSlice(bool urgent, const std::atomic<bool>* cancel, bool* idle = nullptr,
                  uint64_t idle_only_until_us = 0);
  void EndSlice();
  // Re-evaluates waiting BeginSlice calls (after setting their cancel flag).
  void Wake();

  // No loop has requests.
  bool idle() const;
  // Forward passes running now (tests check writes against it).
  int steps_running() const;
  ComputeGateStats stats() const;

 private:
  // Adds the credit earned since the last call. REQUIRES: mu_ held.
  void AccrueLocked(uint64_t now_us);

  Env* const env_;
  ComputeGateOptions options_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  int active_loops_ = 0;         // guarded by mu_
  int steps_running_ = 0;        // guarded by mu_
  int steps_waiting_ = 0;        // guarded by mu_
  bool slice_running_ = false;   // guarded by mu_
  bool slice_wanted_ = false;    // guarded by mu_: a BeginSlice may run as soon as steps end
  bool step_since_slice_ = true; // guarded by mu_
  bool slice_idle_ = false;      // guarded by mu_: the running slice began with no loop active
  uint64_t slice_start_us_ = 0;  // guarded by mu_
  double credit_us_ = 0;         // guarded by mu_
  uint64_t accrued_at_us_ = 0;   // guarded by mu_
  ComputeGateStats stats_;       // guarded by mu_
};

// RAII bracket of one forward pass (no-op without a gate).
class StepScope {
 public:
  explicit StepScope(ComputeGate* gate) : gate_(gate) {
    if (gate_ != nullptr) gate_->EnterStep();
  }
  ~StepScope() {
    if (gate_ != nullptr) gate_->ExitStep();
  }
  StepScope(const StepScope&) = delete;
  StepScope& operator=(const StepScope&) = delete;

 private:
  ComputeGate* gate_;
};

}  // namespace mx::engine
