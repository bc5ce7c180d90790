#include "engine/compute_gate.h"

#include <algorithm>
#include <chrono>

namespace mx::engine {

ComputeGate::ComputeGate(Env* env, ComputeGateOptions options) : env_(env), options_(options) {
  options_.busy_share = std::clamp(options_.busy_share, 0.001, 1.0);
  accrued_at_us_ = env_->NowMicros();
}

void ComputeGate::AccrueLocked(uint64_t now_us) {
  if (active_loops_ > 0 && now_us > accrued_at_us_) {
    credit_us_ += options_.busy_share * static_cast<double>(now_us - accrued_at_us_);
    credit_us_ = std::min(credit_us_, static_cast<double>(options_.max_credit_us));
  }
  accrued_at_us_ = std::max(accrued_at_us_, now_us);
}

void ComputeGate::SetLoopActive(bool active) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    AccrueLocked(env_->NowMicros());
    if (active) {
      // Replies start now: background work earns its share from here on
      // (a debt from earlier busy slices is kept).
      if (active_loops_++ == 0) credit_us_ = std::min(credit_us_, 0.0);
    } else if (active_loops_ > 0) {
      --active_loops_;
    }
  }
  cv_.notify_all();
}

void ComputeGate::EnterStep() {
  std::unique_lock<std::mutex> lock(mu_);
  ++steps_waiting_;
  const uint64_t t0 = env_->NowMicros();
  // A slice that is running, or one that is due and has let a step run since
  // the last slice, goes first.
  cv_.wait(lock, [&] { return !slice_running_ && !(slice_wanted_ && step_since_slice_); });
  const uint64_t waited = env_->NowMicros() - t0;
  stats_.step_wait_us += waited;
  stats_.max_step_wait_us = std::max(stats_.max_step_wait_us, waited);
  --steps_waiting_;
  ++steps_running_;
  step_since_slice_ = true;
}

void ComputeGate::ExitStep() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (steps_running_ > 0) --steps_running_;
    ++stats_.steps;
  }
  cv_.notify_all();
}

bool ComputeGate::BeginSlice(bool urgent, const std::atomic<bool>* cancel, bool* idle_out,
                             uint64_t idle_only_until_us) {
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    if (cancel != nullptr && cancel->load()) {
      slice_wanted_ = false;
      lock.unlock();
      cv_.notify_all();
      return false;
    }
    const uint64_t now = env_->NowMicros();
    AccrueLocked(now);
    const bool idle = active_loops_ == 0;
    const bool deferred = !urgent && now < idle_only_until_us;
    if (idle || (!deferred && (urgent || credit_us_ >= 0))) {
      slice_wanted_ = true;
      const bool steps_first = steps_waiting_ > 0 && !step_since_slice_;
      if (steps_running_ == 0 && !steps_first && !slice_running_) {
        slice_running_ = true;
        slice_wanted_ = false;
        step_since_slice_ = false;
        slice_idle_ = idle;
        slice_start_us_ = now;
        ++stats_.slices;
        if (!idle) ++stats_.busy_slices;
        if (idle_out != nullptr) *idle_out = idle;
        return true;
      }
      cv_.wait_for(lock, std::chrono::milliseconds(50));
    } else if (deferred) {
      // Only while idle, until the deferral ends (SetLoopActive notifies).
      slice_wanted_ = false;
      cv_.wait_for(lock, std::chrono::microseconds(std::min<uint64_t>(idle_only_until_us - now, 100000)));
    } else {
      // Not yet earned: wait until the credit is back at zero.
      slice_wanted_ = false;
      const double wait_us = std::min(-credit_us_ / options_.busy_share + 1.0, 100000.0);
      cv_.wait_for(lock, std::chrono::microseconds(static_cast<int64_t>(wait_us)));
    }
  }
}

void ComputeGate::EndSlice() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    const uint64_t now = env_->NowMicros();
    const uint64_t took = now > slice_start_us_ ? now - slice_start_us_ : 0;
    AccrueLocked(now);
    if (!slice_idle_ || active_loops_ > 0) {
      credit_us_ -= static_cast<double>(took);
      stats_.busy_slice_us += took;
    }
    stats_.max_slice_us = std::max(stats_.max_slice_us, took);
    slice_running_ = false;
  }
  cv_.notify_all();
}

void ComputeGate::Wake() { cv_.notify_all(); }

bool ComputeGate::idle() const {
  std::lock_guard<std::mutex> lock(mu_);
  return active_loops_ == 0;
}

int ComputeGate::steps_running() const {
  std::lock_guard<std::mutex> lock(mu_);
  return steps_running_;
}

ComputeGateStats ComputeGate::stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  return stats_;
}

}  // namespace mx::engine
