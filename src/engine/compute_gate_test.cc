#include "engine/compute_gate.h"

#include <gtest/gtest.h>

#include <atomic>
#include <thread>
#include <vector>

namespace mx::engine {
namespace {

// Counts what runs at once: a slice and a step never may.
struct Overlap {
  std::atomic<int> steps{0};
  std::atomic<int> slices{0};
  std::atomic<int> bad{0};
  void Step(ComputeGate& gate) {
    StepScope scope(&gate);
    ++steps;
    if (slices.load() != 0) ++bad;
    std::this_thread::yield();
    if (slices.load() != 0) ++bad;
    --steps;
  }
  bool Slice(ComputeGate& gate, bool urgent, const std::atomic<bool>* cancel = nullptr) {
    if (!gate.BeginSlice(urgent, cancel)) return false;
    ++slices;
    if (steps.load() != 0) ++bad;
    std::this_thread::yield();
    if (steps.load() != 0) ++bad;
    --slices;
    gate.EndSlice();
    return true;
  }
};

TEST(ComputeGateTest, IdleServerRunsSlicesAtOnce) {
  ComputeGate gate(Env::Default());
  EXPECT_TRUE(gate.idle());
  bool idle = false;
  ASSERT_TRUE(gate.BeginSlice(false, nullptr, &idle));
  EXPECT_TRUE(idle);
  gate.EndSlice();
  EXPECT_EQ(gate.stats().slices, 1u);
  EXPECT_EQ(gate.stats().busy_slices, 0u);
}

TEST(ComputeGateTest, SlicesNeverOverlapStepsOfAnyLoop) {
  ComputeGate gate(Env::Default(), {.busy_share = 1.0});
  Overlap o;
  std::atomic<bool> stop{false};
  std::vector<std::thread> loops;
  for (int l = 0; l < 2; ++l) {  // two models' compute loops
    loops.emplace_back([&] {
      gate.SetLoopActive(true);
      for (int i = 0; i < 3000; ++i) o.Step(gate);
      gate.SetLoopActive(false);
    });
  }
  std::thread writer([&] {
    while (!stop) o.Slice(gate, /*urgent=*/true);
  });
  for (auto& t : loops) t.join();
  stop = true;
  writer.join();
  EXPECT_EQ(o.bad.load(), 0);
  const ComputeGateStats st = gate.stats();
  EXPECT_EQ(st.steps, 6000u);
  EXPECT_GT(st.busy_slices, 0u);  // urgent work got in between the steps
}

TEST(ComputeGateTest, CancelledSliceReturnsWithoutRunning) {
  ComputeGate gate(Env::Default(), {.busy_share = 0.01});
  gate.SetLoopActive(true);
  // Spend the credit (a millisecond of work): the next slice must wait for
  // about 100 ms of replies before it may run.
  ASSERT_TRUE(gate.BeginSlice(true, nullptr));
  const uint64_t s0 = Env::Default()->NowMicros();
  while (Env::Default()->NowMicros() - s0 < 1000) {
  }
  gate.EndSlice();
  std::atomic<bool> cancel{false};
  std::atomic<bool> returned{false};
  bool got = true;
  std::thread writer([&] {
    got = gate.BeginSlice(false, &cancel);
    returned = true;
  });
  cancel = true;
  gate.Wake();
  writer.join();
  EXPECT_TRUE(returned);
  EXPECT_FALSE(got);
  gate.SetLoopActive(false);
}

// While a loop is active, slices take at most the busy share of the time the
// loop was active (plus the credit cap): counted from the gate's own books,
// not from a wall-clock bound on the test.
TEST(ComputeGateTest, BusySlicesStayWithinTheirShare) {
  ComputeGate gate(Env::Default(), {.busy_share = 0.05, .max_credit_us = 2000});
  std::atomic<bool> stop{false};
  Overlap o;
  const uint64_t t0 = Env::Default()->NowMicros();
  gate.SetLoopActive(true);
  std::thread writer([&] {
    while (!stop) {
      if (!gate.BeginSlice(false, &stop)) break;
      const uint64_t s0 = Env::Default()->NowMicros();
      while (Env::Default()->NowMicros() - s0 < 500) {
      }  // half a millisecond of work
      gate.EndSlice();
    }
  });
  for (int i = 0; i < 400; ++i) {
    o.Step(gate);
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
  gate.SetLoopActive(false);
  const uint64_t active_us = Env::Default()->NowMicros() - t0;
  stop = true;
  gate.Wake();
  writer.join();
  const ComputeGateStats st = gate.stats();
  EXPECT_GT(st.busy_slices, 0u);
  // Each slice is charged after it ran, so the books may overdraw by one
  // slice (the longest one) beyond the share and the credit cap.
  EXPECT_LE(static_cast<double>(st.busy_slice_us),
            0.05 * static_cast<double>(active_us) + 2000.0 + static_cast<double>(st.max_slice_us));
}

}  // namespace
}  // namespace mx::engine
