// SavedCacheStore, refreshing the index with files other nodes wrote or
// removed (saved_cache.h, docs/cluster.md): on the calling thread
// (Refresh) or on the store's refresher thread (RefreshInBackground), so
// that a compute loop never lists the folder while other replies wait.
#include <utility>

#include "core/logging.h"
#include "engine/saved_cache.h"

namespace mx::engine {

uint64_t IndexRefresh::AddWaker(std::function<void()> wake) {
  std::lock_guard<std::mutex> lock(mu_);
  if (done()) return 0;
  const uint64_t id = ++next_waker_;
  wakers_.emplace(id, std::move(wake));
  return id;
}

void IndexRefresh::RemoveWaker(uint64_t id) {
  if (id == 0) return;
  std::lock_guard<std::mutex> lock(mu_);
  wakers_.erase(id);
}

void IndexRefresh::Finish(cache::RefreshReport report) {
  std::lock_guard<std::mutex> lock(mu_);
  report_ = std::move(report);
  done_.store(true, std::memory_order_release);
  // Under the lock: RemoveWaker returns only once no waker runs.
  for (auto& [id, wake] : wakers_) wake();
  wakers_.clear();
}

cache::RefreshReport SavedCacheStore::Refresh(bool force) {
  auto d = disk();
  if (d == nullptr) return cache::RefreshReport{};
  cache::RefreshReport r = d->Refresh(force);
  if (r.added > 0 || r.forgotten > 0) {
    MX_LOG(kInfo) << "saved caches: refreshed the index in " << r.micros / 1000
                  << " ms: " << r.added << " new files, " << r.forgotten << " removed by others"
                  << (r.left > 0 ? ", " + std::to_string(r.left) + " left for the next refresh"
                                 : std::string());
  }
  return r;
}

std::shared_ptr<IndexRefresh> SavedCacheStore::RefreshInBackground() {
  std::lock_guard<std::mutex> lock(mu_);
  if (refresh_ != nullptr && !refresh_->done()) return refresh_;  // join it
  if (disk_ == nullptr || stop_refresher_ || !disk_->RefreshDue()) return nullptr;
  const uint64_t now = env_->NowMicros();
  refresh_ = std::make_shared<IndexRefresh>(now, now + options_.refresh_wait_ms * 1000);
  refresh_started_ = false;
  if (!refresher_.joinable()) refresher_ = std::thread([this] { RefresherLoop(); });
  refresh_cv_.notify_all();
  return refresh_;
}

void SavedCacheStore::RefresherLoop() {
  for (;;) {
    std::shared_ptr<IndexRefresh> job;
    {
      std::unique_lock<std::mutex> lock(mu_);
      refresh_cv_.wait(
          lock, [&] { return stop_refresher_ || (refresh_ != nullptr && !refresh_started_); });
      if (stop_refresher_) {
        // Nobody is left to wait (schedulers end before their store), but
        // a refresh asked for must still end.
        if (refresh_ != nullptr && !refresh_started_) refresh_->Finish(cache::RefreshReport{});
        return;
      }
      job = refresh_;
      refresh_started_ = true;
    }
    job->Finish(Refresh(/*force=*/false));
  }
}

}  // namespace mx::engine
