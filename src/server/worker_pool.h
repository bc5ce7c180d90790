// WorkerPool: the threads that run HTTP handlers (they may block for a whole
// reply). A fixed capacity; threads start only when the work waiting
// outnumbers the idle ones, and stay until Join().
//
// Thread-safety: every method may be called from any thread.
#pragma once

#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace mx::server {

class WorkerPool {
 public:
  explicit WorkerPool(int max_threads) : max_threads_(max_threads) {}
  ~WorkerPool() { Join(); }
  WorkerPool(const WorkerPool&) = delete;
  WorkerPool& operator=(const WorkerPool&) = delete;

  void Submit(std::function<void()> task) {
    std::lock_guard<std::mutex> lock(mu_);
    tasks_.push_back(std::move(task));
    // Idle threads that were notified but have not taken their task yet
    // still count as idle: compare with the tasks waiting, or a request can
    // queue behind a long one (a reply) with no thread to run it.
    if (static_cast<int>(tasks_.size()) > idle_ &&
        static_cast<int>(threads_.size()) < max_threads_) {
      threads_.emplace_back([this] { Work(); });
    }
    cv_.notify_one();
  }
  // Runs the queued tasks to the end and stops the threads.
  void Join() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    for (auto& t : threads_) {
      if (t.joinable()) t.join();
    }
    threads_.clear();
  }
  int busy() const {
    std::lock_guard<std::mutex> lock(mu_);
    return static_cast<int>(threads_.size()) - idle_ + static_cast<int>(tasks_.size());
  }

 private:
  void Work() {
    std::unique_lock<std::mutex> lock(mu_);
    for (;;) {
      ++idle_;
      cv_.wait(lock, [&] { return stop_ || !tasks_.empty(); });
      --idle_;
      if (tasks_.empty()) return;  // stop_
      auto task = std::move(tasks_.front());
      tasks_.pop_front();
      lock.unlock();
      task();
      lock.lock();
    }
  }

  const int max_threads_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> tasks_;
  std::vector<std::thread> threads_;
  int idle_ = 0;
  bool stop_ = false;
};

}  // namespace mx::server
