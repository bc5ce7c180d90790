#include "cache/policy/disk_policy.h"

#include <algorithm>
#include <tuple>

namespace mx::cache {

const char* DiskRemoveReasonName(DiskRemoveReason reason) {
  return reason == DiskRemoveReason::kExpired ? "expired" : "over budget";
}

std::vector<DiskRemoval> PlanDiskEviction(std::span<const DiskFileInfo> files,
                                          const DiskLimits& limits, uint64_t now_us) {
  std::vector<const DiskFileInfo*> order;
  order.reserve(files.size());
  for (const auto& f : files) order.push_back(&f);
  std::sort(order.begin(), order.end(), [](const DiskFileInfo* a, const DiskFileInfo* b) {
    return std::tie(a->last_used_us, a->created_us, a->id) <
           std::tie(b->last_used_us, b->created_us, b->id);
  });

  std::vector<DiskRemoval> plan;
  std::vector<const DiskFileInfo*> kept;
  uint64_t kept_bytes = 0;
  for (const DiskFileInfo* f : order) {
    const bool expired = limits.ttl_us > 0 && now_us >= f->last_used_us &&
                         now_us - f->last_used_us >= limits.ttl_us;
    if (expired) {
      plan.push_back({f->id, DiskRemoveReason::kExpired, f->bytes});
    } else {
      kept.push_back(f);
      kept_bytes += f->bytes;
    }
  }
  for (const DiskFileInfo* f : kept) {
    if (kept_bytes <= limits.budget_bytes) break;
    plan.push_back({f->id, DiskRemoveReason::kOverBudget, f->bytes});
    kept_bytes -= f->bytes;
  }
  return plan;
}

}  // namespace mx::cache
