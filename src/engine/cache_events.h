// CacheEventLog: the last few prompt-cache log lines (SPEC §8) of every
// loaded model, one per request, for the status page (GET /api/cache/events).
// An event holds counts and the log line's text ("reused 880 of 906 tokens
// from disk ...", "re-reading the entire chat (906 tokens): ..."), which is
// made of numbers and fixed phrases: never a prompt's text or tokens.
//
//   CacheEventLog log(200);                     // per model
//   log.Push({.model = "tiny", .prompt_tokens = 906, ...});
//   CacheEventPage page = log.Since(last_seen, 100);
//
// Each model keeps its newest `per_model` events; older ones are dropped.
// Sequence numbers count over the whole log (1, 2, 3, ...), so a reader
// polls with the last one it saw.
//
// Thread-safety: every method may be called from any thread.
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

namespace mx::engine {

// Where a request's reused tokens came from.
enum class CacheSource {
  kNone,  // nothing reused: the whole prompt is read
  kRam,   // a cached chat in RAM continued in place (or taken back from the write queue)
  kCopy,  // a copy of a cached chat's shared start (or of its snapshot)
  kDisk,  // a saved cache loaded from disk
};
const char* CacheSourceName(CacheSource source);  // "none", "ram", "copy", "disk"

struct CacheEvent {
  uint64_t seq = 0;           // set by Push
  uint64_t time_unix_ms = 0;  // when the request started (wall clock)
  std::string model;
  std::string tenant;  // the request's tenant; "" without API keys
  int64_t prompt_tokens = 0;
  int64_t cached_tokens = 0;  // prompt tokens not read again
  CacheSource source = CacheSource::kNone;
  std::string line;  // what the cache did and why: the request's log line
};

struct CacheEventPage {
  std::vector<CacheEvent> events;  // ascending seq
  uint64_t last_seq = 0;           // the newest seq pushed so far (0: none); poll with since = this
  size_t skipped = 0;  // newer than `since` and matching, but older than the `limit` returned
};

class CacheEventLog {
 public:
  static constexpr size_t kDefaultPerModel = 200;

  // REQUIRES: per_model >= 1.
  explicit CacheEventLog(size_t per_model = kDefaultPerModel);

  // Stores `event` (its seq is assigned here, and returned), dropping its
  // model's oldest event when that model holds per_model already.
  uint64_t Push(CacheEvent event);

  // The newest `limit` events with seq > since, oldest first; with `tenant`
  // set, only that tenant's. The result is a copy.
  CacheEventPage Since(uint64_t since, size_t limit,
                       const std::optional<std::string>& tenant = std::nullopt) const;

 private:
  const size_t per_model_;
  mutable std::mutex mu_;
  uint64_t last_seq_ = 0;                                   // guarded by mu_
  std::map<std::string, std::deque<CacheEvent>> by_model_;  // guarded by mu_
};

}  // namespace mx::engine
