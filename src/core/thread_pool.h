// A persistent pool of compute threads. ParallelFor runs fn(task, thread) for
// task in [0, n_tasks) on the pool's threads plus the calling thread, and
// returns when every task is done. Tasks are handed out through one atomic
// counter (dynamic scheduling). Workers spin briefly before sleeping, so the
// many small parallel regions of a forward pass do not pay a wake-up each.
//
// Thread-safety: one ParallelFor at a time per pool (a pool belongs to one
// model's compute loop). The results of a kernel must never depend on which
// thread ran which task; kernels keep their reduction order per output element.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace mx {

class ThreadPool {
 public:
  // n_threads counts the caller: n_threads = 1 runs everything inline.
  explicit ThreadPool(int n_threads);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int n_threads() const { return n_threads_; }

  // Runs fn(task_index, thread_index) for every task; thread_index < n_threads().
  void ParallelFor(int64_t n_tasks, const std::function<void(int64_t, int)>& fn);

 private:
  void WorkerLoop(int thread_index);
  void RunTasks(int thread_index);

  int n_threads_;
  std::vector<std::thread> workers_;
  std::mutex mu_;
  std::condition_variable wake_;
  std::atomic<uint64_t> generation_{0};
  std::atomic<int64_t> next_task_{0};
  std::atomic<int> active_{0};
  std::atomic<bool> stop_{false};
  int64_t n_tasks_ = 0;
  const std::function<void(int64_t, int)>* fn_ = nullptr;
};

// Number of physical cores (falls back to hardware_concurrency).
int PhysicalCoreCount();

}  // namespace mx
