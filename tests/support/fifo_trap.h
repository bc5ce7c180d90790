// FifoTrap: a FIFO (named pipe) for tests of code that must never open one.
// Opening a FIFO for reading blocks until a writer comes, so a test of
// "FIFOs are refused" would hang forever when the code under test regresses.
// The trap's watchdog instead opens the FIFO for writing every `timeout_ms`
// (which lets a blocked reader's open return, and its reads see the end of
// the file) and records that it had to: the test then fails on hung()
// instead of hanging. Test-only; header-only.
#pragma once

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <string>
#include <thread>

namespace mx::testing_support {

class FifoTrap {
 public:
  // Makes a FIFO at `path` (mode 0600); ok() says whether mkfifo worked.
  explicit FifoTrap(std::string path, int timeout_ms = 2000)
      : path_(std::move(path)), timeout_ms_(timeout_ms) {
    ok_ = ::mkfifo(path_.c_str(), 0600) == 0;
    if (ok_) watchdog_ = std::thread([this] { Watch(); });
  }
  ~FifoTrap() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    if (watchdog_.joinable()) watchdog_.join();
  }
  FifoTrap(const FifoTrap&) = delete;
  FifoTrap& operator=(const FifoTrap&) = delete;

  bool ok() const { return ok_; }
  const std::string& path() const { return path_; }
  // True once somebody was found holding the FIFO open for reading (stuck).
  bool hung() const {
    std::lock_guard<std::mutex> lock(mu_);
    return hung_;
  }

 private:
  void Watch() {
    std::unique_lock<std::mutex> lock(mu_);
    while (!cv_.wait_for(lock, std::chrono::milliseconds(timeout_ms_), [this] { return stop_; })) {
      // O_NONBLOCK: succeeds only while a reader has the FIFO open (or is
      // blocked opening it); that reader is then released.
      int fd = ::open(path_.c_str(), O_WRONLY | O_NONBLOCK | O_CLOEXEC);
      if (fd >= 0) {
        hung_ = true;
        ::close(fd);
      }
    }
  }

  const std::string path_;
  const int timeout_ms_;
  bool ok_ = false;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;  // guarded by mu_
  bool hung_ = false;  // guarded by mu_
  std::thread watchdog_;
};

}  // namespace mx::testing_support
