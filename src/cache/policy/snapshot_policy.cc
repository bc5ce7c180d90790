#include "cache/policy/snapshot_policy.h"

#include <algorithm>

namespace mx::cache {

size_t SnapshotLimits::Count() const {
  if (snapshot_bytes == 0) return 0;
  return static_cast<size_t>(std::min<uint64_t>(max_count, budget_bytes / snapshot_bytes));
}

SnapshotKind ClassifySnapshot(int64_t pos, const SnapshotRequest& r) {
  const std::span<const int64_t> m = r.message_starts;
  // Position 0 needs no snapshot (an empty state), so it is never a boundary.
  const bool message = pos > 0 && std::binary_search(m.begin(), m.end(), pos);
  if (pos == r.prompt_len - 1) return SnapshotKind::kBeforeEnd;
  if (r.reply_start > 0 && pos == r.reply_start) return SnapshotKind::kReplyStart;
  if (message && pos == m.back()) return SnapshotKind::kLastMessage;
  if (r.diverged_at > 0 && pos == r.diverged_at) return SnapshotKind::kDivergence;
  if (message && m.size() > 1 && pos == m[1]) return SnapshotKind::kFirstMessage;
  if (message) return SnapshotKind::kMessage;
  return SnapshotKind::kPeriodic;
}

SnapshotChoice PlanSnapshots(const SnapshotRequest& r, const SnapshotLimits& limits) {
  // Every position the state could hold once the prompt is read: what it
  // holds, and the candidates in the part still to read.
  std::vector<int64_t> all(r.existing.begin(), r.existing.end());
  auto unread = [&](int64_t p) { return p > r.n_reused && p < r.prompt_len; };
  if (unread(r.prompt_len - 1)) all.push_back(r.prompt_len - 1);
  for (int64_t p : r.message_starts) {
    if (unread(p)) all.push_back(p);
  }
  if (unread(r.diverged_at)) all.push_back(r.diverged_at);
  if (unread(r.reply_start)) all.push_back(r.reply_start);
  if (limits.every > 0) {
    for (int64_t p = (r.n_reused / limits.every + 1) * limits.every; p < r.prompt_len - 1;
         p += limits.every) {
      all.push_back(p);
    }
  }
  std::sort(all.begin(), all.end());
  all.erase(std::unique(all.begin(), all.end()), all.end());
  std::erase_if(all, [](int64_t p) { return p <= 0; });

  // Most useful first: by kind, then the newest.
  std::vector<int64_t> ranked = all;
  std::stable_sort(ranked.begin(), ranked.end(), [&](int64_t a, int64_t b) {
    const SnapshotKind ka = ClassifySnapshot(a, r), kb = ClassifySnapshot(b, r);
    if (ka != kb) return ka < kb;
    return a > b;
  });
  ranked.resize(std::min(ranked.size(), limits.Count()));
  std::sort(ranked.begin(), ranked.end());

  SnapshotChoice out;
  auto chosen = [&](int64_t p) { return std::binary_search(ranked.begin(), ranked.end(), p); };
  std::vector<int64_t> existing(r.existing.begin(), r.existing.end());
  std::sort(existing.begin(), existing.end());
  existing.erase(std::unique(existing.begin(), existing.end()), existing.end());
  for (int64_t p : existing) (chosen(p) ? out.keep : out.drop).push_back(p);
  for (int64_t p : ranked) {
    if (!std::binary_search(existing.begin(), existing.end(), p)) out.take.push_back(p);
  }
  return out;
}

}  // namespace mx::cache
