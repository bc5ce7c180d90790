#include "core/thread_pool.h"

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

ThreadPool::ThreadPool(int n_threads) : n_threads_(n_threads < 1 ? 1 : n_threads) {
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

void ThreadPool::RunTasks(uint32_t generation, int thread_index) {
  for (;;) {
    uint64_t c = counter_.load(std::memory_order_acquire);
    if (static_cast<uint32_t>(c >> 32) != generation) return;  // a newer job
    const int64_t n = n_tasks_.load(std::memory_order_acquire);
    const auto* fn = fn_.load(std::memory_order_acquire);
    const int64_t task = static_cast<int64_t>(c & 0xffffffffu);
    if (task >= n) return;
    // Succeeds only while the word still names this job and this task, so
    // `fn` and `n` (read after the job was published) belong to it.
    if (!counter_.compare_exchange_weak(c, c + 1, std::memory_order_acq_rel)) continue;
    (*fn)(task, thread_index);
    done_.fetch_add(1, std::memory_order_acq_rel);
  }
}

void ThreadPool::ParallelFor(int64_t n_tasks, const std::function<void(int64_t, int)>& fn) {
  if (n_tasks <= 0) return;
  // Task indices live in the low 32 bits of the counter (0xffffffff = closed).
  if (n_threads_ == 1 || n_tasks == 1 || n_tasks >= 0xffffffffLL) {
    for (int64_t t = 0; t < n_tasks; ++t) fn(t, 0);
    return;
  }
  const uint32_t generation = ++generation_;
  // Close the counter before touching the job's parameters: a worker that
  // still holds a counter value of the previous job and then reads the new
  // parameters can no longer claim anything with it (its CAS must fail).
  counter_.store((static_cast<uint64_t>(generation) << 32) | 0xffffffffu, std::memory_order_seq_cst);
  n_tasks_.store(n_tasks, std::memory_order_release);
  fn_.store(&fn, std::memory_order_release);
  done_.store(0, std::memory_order_relaxed);
  counter_.store(static_cast<uint64_t>(generation) << 32, std::memory_order_seq_cst);
  if (sleepers_.load(std::memory_order_seq_cst) > 0) {
    std::lock_guard<std::mutex> lock(mu_);  // pairs with the sleeper's predicate check
    wake_.notify_all();
  }
  RunTasks(generation, 0);
  int spins = 0;
  while (done_.load(std::memory_order_acquire) != n_tasks) {
    if (++spins < kSpinIterations) {
      CpuRelax();
    } else {
      std::this_thread::yield();
    }
  }
}

void ThreadPool::WorkerLoop(int thread_index) {
  uint32_t seen = 0;
  for (;;) {
    int spins = 0;
    auto current = [&] { return static_cast<uint32_t>(counter_.load(std::memory_order_acquire) >> 32); };
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
