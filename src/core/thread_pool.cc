#include "core/thread_pool.h"

#include <algorithm>
#include <fstream>
#include <set>
#include <string>
#include <utility>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace mx {
namespace {
inline void CpuRelax() {
#if defined(__x86_64__)
  _mm_pause();
#endif
}
constexpr int kSpinIterations = 20000;
}  // namespace

namespace {
inline uint64_t Pack(uint32_t generation, int64_t begin, int64_t end) {
  return (static_cast<uint64_t>(generation) << 32) | (static_cast<uint64_t>(begin) << 16) |
         static_cast<uint64_t>(end);
}
inline uint32_t GenerationOf(uint64_t w) { return static_cast<uint32_t>(w >> 32); }
inline int64_t BeginOf(uint64_t w) { return static_cast<int64_t>((w >> 16) & 0xffff); }
inline int64_t EndOf(uint64_t w) { return static_cast<int64_t>(w & 0xffff); }
}  // namespace

ThreadPool::ThreadPool(int n_threads)
    : n_threads_(n_threads < 1 ? 1 : n_threads), slots_(new Slot[n_threads_]) {
  for (int i = 1; i < n_threads_; ++i) workers_.emplace_back([this, i] { WorkerLoop(i); });
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_.store(true);
  }
  wake_.notify_all();
  for (auto& t : workers_) t.join();
}

int64_t ThreadPool::Claim(uint32_t generation, int s, bool front) {
  std::atomic<uint64_t>& range = slots_[s].range;
  uint64_t w = range.load(std::memory_order_acquire);
  for (;;) {
    if (GenerationOf(w) != generation) return -1;  // a newer job
    const int64_t b = BeginOf(w), e = EndOf(w);
    if (b >= e) return -1;
    const uint64_t next = front ? Pack(generation, b + 1, e) : Pack(generation, b, e - 1);
    // On failure w is reloaded; on success the word still named this job, so
    // the job cannot end before the claimed task is finished.
    if (range.compare_exchange_weak(w, next, std::memory_order_acq_rel,
                                    std::memory_order_acquire)) {
      return front ? b : e - 1;
    }
  }
}

void ThreadPool::RunTasks(uint32_t generation, int thread_index) {
  std::atomic<uint64_t>& finished = slots_[thread_index].finished;
  auto run = [&](int64_t task) {
    // Read after the claim: the job is current until this task is counted.
    (*fn_.load(std::memory_order_acquire))(task, thread_index);
    finished.store(finished.load(std::memory_order_relaxed) + 1, std::memory_order_release);
  };
  for (int64_t task; (task = Claim(generation, thread_index, true)) >= 0;) run(task);
  for (int k = 1; k < n_threads_; ++k) {
    const int victim = (thread_index + k) % n_threads_;
    for (int64_t task; (task = Claim(generation, victim, false)) >= 0;) run(task);
  }
}

void ThreadPool::RunJob(int64_t n_tasks, const Fn& fn) {
  const uint32_t generation = ++generation_;
  // Every earlier task is finished, so the counts are stable now.
  uint64_t target = static_cast<uint64_t>(n_tasks);
  for (int i = 0; i < n_threads_; ++i) target += slots_[i].finished.load(std::memory_order_acquire);
  fn_.store(&fn, std::memory_order_release);
  for (int i = 0; i < n_threads_; ++i) {
    slots_[i].range.store(
        Pack(generation, n_tasks * i / n_threads_, n_tasks * (i + 1) / n_threads_),
        std::memory_order_release);
  }
  job_.store(generation, std::memory_order_seq_cst);
  if (sleepers_.load(std::memory_order_seq_cst) > 0) {
    std::lock_guard<std::mutex> lock(mu_);  // pairs with the sleeper's predicate check
    wake_.notify_all();
  }
  RunTasks(generation, 0);
  auto finished = [&] {
    uint64_t sum = 0;
    for (int i = 0; i < n_threads_; ++i) sum += slots_[i].finished.load(std::memory_order_acquire);
    return sum;
  };
  int spins = 0;
  while (finished() != target) {
    if (++spins < kSpinIterations) {
      CpuRelax();
    } else {
      std::this_thread::yield();
    }
  }
}

void ThreadPool::ParallelFor(int64_t n_tasks, const Fn& fn) {
  if (n_tasks <= 0) return;
  if (n_threads_ == 1 || n_tasks == 1) {
    for (int64_t t = 0; t < n_tasks; ++t) fn(t, 0);
    return;
  }
  if (n_tasks <= kMaxTasksPerJob) {
    RunJob(n_tasks, fn);
    return;
  }
  // Task indices of a job fit 16 bits: longer loops run as several jobs.
  for (int64_t first = 0; first < n_tasks; first += kMaxTasksPerJob) {
    const int64_t n = std::min(kMaxTasksPerJob, n_tasks - first);
    const Fn part = [&fn, first](int64_t t, int thread) { fn(first + t, thread); };
    RunJob(n, part);
  }
}

void ThreadPool::WorkerLoop(int thread_index) {
  uint32_t seen = 0;
  for (;;) {
    int spins = 0;
    auto current = [&] { return job_.load(std::memory_order_acquire); };
    while (current() == seen && !stop_.load(std::memory_order_relaxed)) {
      if (++spins < kSpinIterations) {
        CpuRelax();
        continue;
      }
      std::unique_lock<std::mutex> lock(mu_);
      sleepers_.fetch_add(1, std::memory_order_seq_cst);
      wake_.wait(lock, [&] { return current() != seen || stop_.load(); });
      sleepers_.fetch_sub(1, std::memory_order_acq_rel);
    }
    if (stop_.load()) return;
    seen = current();
    RunTasks(seen, thread_index);
  }
}

int PhysicalCoreCount() {
  std::ifstream in("/proc/cpuinfo");
  std::set<std::pair<std::string, std::string>> cores;
  std::string line, phys, core;
  while (std::getline(in, line)) {
    if (line.rfind("physical id", 0) == 0) phys = line.substr(line.find(':') + 1);
    if (line.rfind("core id", 0) == 0) {
      core = line.substr(line.find(':') + 1);
      cores.insert({phys, core});
    }
  }
  if (!cores.empty()) return static_cast<int>(cores.size());
  unsigned n = std::thread::hardware_concurrency();
  return n == 0 ? 1 : static_cast<int>(n);
}

}  // namespace mx
