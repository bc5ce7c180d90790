// A persistent pool of compute threads. ParallelFor runs fn(task, thread) for
// task in [0, n_tasks) on the pool's threads plus the calling thread, and
// returns when every task is done.
//
// Scheduling: the tasks are cut into one contiguous range per thread. A
// thread claims its own range's tasks in ascending order (a CAS on a word
// only it and late thieves touch, so claims cost no cache-line traffic), then
// steals from the far end of the others' ranges one task at a time. Tasks of
// neighbouring indices usually read neighbouring memory (MatMul row blocks),
// so each thread streams one region and the hardware prefetchers follow it.
// The caller never waits for a worker that has not claimed a task: on a busy
// machine a sleeping or descheduled worker simply has its range stolen.
// Workers spin briefly before sleeping, so the many small parallel regions of
// a forward pass rarely pay a wake-up.
//
// Thread-safety: one ParallelFor at a time per pool (a pool belongs to one
// model's compute loop). The results of a kernel must never depend on which
// thread ran which task; kernels keep their reduction order per output element.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
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
  using Fn = std::function<void(int64_t, int)>;
  // One thread's share of the current job and its count of finished tasks,
  // each on its own cache line.
  struct alignas(64) Slot {
    // (generation << 32) | (begin << 16) | end: the unclaimed tasks
    // [begin, end) of this thread's range in job `generation`. A task is
    // claimed by a CAS on the whole word, so a thread that read an older job's
    // word can never claim a task of a newer job.
    std::atomic<uint64_t> range{0};
    alignas(64) std::atomic<uint64_t> finished{0};  // written by its thread only
  };
  static constexpr int64_t kMaxTasksPerJob = 0xffff;

  void WorkerLoop(int thread_index);
  // One job of at most kMaxTasksPerJob tasks.
  void RunJob(int64_t n_tasks, const Fn& fn);
  // Claims and runs tasks of job `generation` (own range, then steals).
  void RunTasks(uint32_t generation, int thread_index);
  // Claims one task from slot `s` of job `generation`: its own range from the
  // front, another's from the back. Returns -1 when none is left (or the job
  // is no longer current).
  int64_t Claim(uint32_t generation, int s, bool front);

  int n_threads_;
  std::unique_ptr<Slot[]> slots_;
  std::vector<std::thread> workers_;
  std::mutex mu_;
  std::condition_variable wake_;
  alignas(64) std::atomic<uint32_t> job_{0};  // generation of the newest job
  std::atomic<const Fn*> fn_{nullptr};
  std::atomic<int> sleepers_{0};
  std::atomic<bool> stop_{false};
  uint32_t generation_ = 0;  // written by the ParallelFor caller only
};

// Number of physical cores (falls back to hardware_concurrency).
int PhysicalCoreCount();

}  // namespace mx
