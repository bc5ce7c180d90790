// Saved-cache (disk) eviction policy as a pure function (STYLE rule 9):
// which files to delete given their sizes and times, the byte budget, the
// TTL and an injected `now`. The disk store applies the plan.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace mx::cache {

// What the store knows of one saved file when planning.
struct DiskFileInfo {
  std::string id;
  uint64_t bytes = 0;         // size on disk
  uint64_t created_us = 0;    // wall clock, µs since the epoch
  uint64_t last_used_us = 0;  // wall clock, µs since the epoch
};

struct DiskLimits {
  uint64_t budget_bytes = uint64_t{4096} << 20;           // MATRICXON_PERSIST_CACHE_BUDGET_MB
  uint64_t ttl_us = uint64_t{168} * 3600 * 1000 * 1000;   // MATRICXON_PERSIST_CACHE_TTL_HOURS; 0 = never
};

enum class DiskRemoveReason { kExpired, kOverBudget };
// "expired" | "over budget"
const char* DiskRemoveReasonName(DiskRemoveReason reason);

struct DiskRemoval {
  std::string id;
  DiskRemoveReason reason = DiskRemoveReason::kExpired;
  uint64_t bytes = 0;
};

// The files to delete, in order: first every expired file (not used for
// ttl_us or longer at `now_us`; a last use in the future is not expired),
// then the least recently used (ties: older creation, then smaller id) until
// the rest fit in budget_bytes. A file larger than the whole budget goes too.
std::vector<DiskRemoval> PlanDiskEviction(std::span<const DiskFileInfo> files,
                                          const DiskLimits& limits, uint64_t now_us);

}  // namespace mx::cache
