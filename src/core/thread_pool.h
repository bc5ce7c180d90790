// A persistent pool of compute threads. ParallelFor runs fn(task, thread) for
// task in [0, n_tasks) on the pool's threads plus the calling thread, and
// returns when every task is done. Tasks are handed out through one atomic
// counter (dynamic scheduling). The caller never waits for a worker that has
// not claimed a task: on a busy machine a sleeping worker simply misses the
// job and the caller runs the tasks itself. Workers spin briefly before
// sleeping, so the many small parallel regions of a forward pass rarely pay a
// wake-up.
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
  // Claims and runs tasks of the job tagged `generation` until none is left.
  void RunTasks(uint32_t generation, int thread_index);

  int n_threads_;
  std::vector<std::thread> workers_;
  std::mutex mu_;
  std::condition_variable wake_;
  // (generation << 32) | next task index. A task is claimed by a CAS on the
  // whole word, so a worker that wakes late can never claim (or run) a task
  // of a newer job with an older job's function.
  std::atomic<uint64_t> counter_{0};
  std::atomic<int64_t> done_{0};
  std::atomic<int64_t> n_tasks_{0};
  std::atomic<const std::function<void(int64_t, int)>*> fn_{nullptr};
  std::atomic<int> sleepers_{0};
  std::atomic<bool> stop_{false};
  uint32_t generation_ = 0;  // written by the ParallelFor caller only
};

// Number of physical cores (falls back to hardware_concurrency).
int PhysicalCoreCount();

}  // namespace mx
