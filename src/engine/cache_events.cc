#include "engine/cache_events.h"

#include <algorithm>

namespace mx::engine {

const char* CacheSourceName(CacheSource source) {
  switch (source) {
    case CacheSource::kNone:
      return "none";
    case CacheSource::kRam:
      return "ram";
    case CacheSource::kCopy:
      return "copy";
    case CacheSource::kDisk:
      return "disk";
  }
  return "none";
}

CacheEventLog::CacheEventLog(size_t per_model) : per_model_(std::max<size_t>(per_model, 1)) {}

uint64_t CacheEventLog::Push(CacheEvent event) {
  std::lock_guard<std::mutex> lock(mu_);
  event.seq = ++last_seq_;
  std::deque<CacheEvent>& q = by_model_[event.model];
  if (q.size() >= per_model_) q.pop_front();
  q.push_back(std::move(event));
  return last_seq_;
}

CacheEventPage CacheEventLog::Since(uint64_t since, size_t limit,
                                    const std::optional<std::string>& tenant) const {
  CacheEventPage page;
  std::vector<const CacheEvent*> found;
  std::lock_guard<std::mutex> lock(mu_);
  page.last_seq = last_seq_;
  for (const auto& [model, q] : by_model_) {
    // Each queue is in seq order: skip to the first one after `since`.
    auto it = std::upper_bound(q.begin(), q.end(), since,
                               [](uint64_t s, const CacheEvent& e) { return s < e.seq; });
    for (; it != q.end(); ++it) {
      if (!tenant || it->tenant == *tenant) found.push_back(&*it);
    }
  }
  std::sort(found.begin(), found.end(),
            [](const CacheEvent* a, const CacheEvent* b) { return a->seq < b->seq; });
  const size_t first = found.size() > limit ? found.size() - limit : 0;
  page.skipped = first;
  page.events.reserve(found.size() - first);
  for (size_t i = first; i < found.size(); ++i) page.events.push_back(*found[i]);
  return page;
}

}  // namespace mx::engine
