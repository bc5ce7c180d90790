#include "cache/policy/cache_policy.h"

#include <algorithm>
#include <cstring>

namespace mx::cache {

const char* ReuseKindName(ReuseKind kind) {
  switch (kind) {
    case ReuseKind::kNone: return "none";
    case ReuseKind::kInPlace: return "in place";
    case ReuseKind::kTruncateInPlace: return "truncated in place";
    case ReuseKind::kCopyPrefix: return "copy";
    case ReuseKind::kShiftInPlace: return "context shift";
  }
  return "?";
}

size_t CommonPrefix(std::span<const int32_t> a, std::span<const int32_t> b) {
  const size_t n = std::min(a.size(), b.size());
  // Compare 64 tokens at a time with memcmp (vectorised by libc), then
  // finish inside the first block that differs.
  constexpr size_t kBlock = 64;
  size_t i = 0;
  while (i + kBlock <= n && std::memcmp(a.data() + i, b.data() + i, kBlock * sizeof(int32_t)) == 0) {
    i += kBlock;
  }
  while (i < n && a[i] == b[i]) ++i;
  return i;
}

namespace {

// The best context shift over the idle entries, when it reuses more than
// `plain_reuse` tokens.
std::optional<LookupPlan> BestShift(std::span<const EntryInfo> entries, std::span<const int32_t> prompt,
                                    const LookupOptions& options, int64_t plain_reuse) {
  std::optional<LookupPlan> best;
  for (const EntryInfo& e : entries) {
    if (e.in_use || static_cast<int64_t>(e.tokens.size()) <= plain_reuse) continue;
    auto s = PlanShift(e.tokens, prompt, options.min_shift_kept);
    if (!s) continue;
    s->kept = std::min<int64_t>(s->kept, static_cast<int64_t>(prompt.size()) - 1 - s->drop_begin);
    if (s->kept <= 0 || s->reused() <= plain_reuse) continue;
    if (!KeepsTheLatestMessages(*s, e.prompt_len)) continue;
    if (best && s->reused() <= best->n_reuse) continue;
    LookupPlan plan;
    plan.kind = ReuseKind::kShiftInPlace;
    plan.entry_id = e.id;
    plan.entry_len = static_cast<int64_t>(e.tokens.size());
    plan.lcp = s->drop_begin;
    plan.n_reuse = s->reused();
    plan.shift = *s;
    best = plan;
  }
  return best;
}

}  // namespace

// Recurrent states: the newest usable cut (the live end of an idle entry, or
// any snapshot) at or before each entry's shared start.
LookupPlan PlanRecurrent(std::span<const EntryInfo> entries, std::span<const int32_t> prompt) {
  LookupPlan plan;
  const EntryInfo* best = nullptr;
  int64_t best_cut = 0, best_lcp = 0, longest_lcp = 0;
  for (const EntryInfo& e : entries) {
    const int64_t lcp = static_cast<int64_t>(CommonPrefix(e.tokens, prompt));
    longest_lcp = std::max(longest_lcp, lcp);
    const int64_t limit = std::min<int64_t>(lcp, static_cast<int64_t>(prompt.size()) - 1);
    const int64_t len = static_cast<int64_t>(e.tokens.size());
    int64_t cut = (!e.in_use && len <= limit) ? len : 0;
    for (int64_t c : e.cut_points) {
      if (c <= limit && c <= len && c > cut) cut = c;
    }
    if (cut > best_cut || (cut == best_cut && cut > 0 && e.last_used > best->last_used)) {
      best = &e;
      best_cut = cut;
      best_lcp = lcp;
    }
  }
  if (best == nullptr) {
    plan.why_none = longest_lcp == 0 ? "no cached chat shares a start with this prompt"
                                     : "no snapshot of the hybrid model's state lies within the shared start";
    plan.lcp = longest_lcp;  // where the prompt diverges: worth a snapshot
    return plan;
  }
  plan.entry_id = best->id;
  plan.lcp = best_lcp;
  plan.entry_len = static_cast<int64_t>(best->tokens.size());
  plan.n_reuse = best_cut;
  if (best->in_use) {
    plan.kind = ReuseKind::kCopyPrefix;  // never two writers: copy its snapshot
  } else if (best_cut == plan.entry_len) {
    plan.kind = ReuseKind::kInPlace;
  } else if (best_lcp >= best->prompt_len) {
    plan.kind = ReuseKind::kTruncateInPlace;
  } else {
    plan.kind = ReuseKind::kCopyPrefix;
  }
  return plan;
}

LookupPlan PlanLookup(std::span<const EntryInfo> entries, std::span<const int32_t> prompt,
                      const LookupOptions& options) {
  LookupPlan plan;
  if (entries.empty()) {
    plan.why_none = "RAM holds no conversations";
    return plan;
  }
  if (options.recurrent) return PlanRecurrent(entries, prompt);
  const EntryInfo* best = nullptr;
  size_t best_lcp = 0;
  for (const EntryInfo& e : entries) {
    size_t lcp = CommonPrefix(e.tokens, prompt);
    if (best == nullptr || lcp > best_lcp || (lcp == best_lcp && e.last_used > best->last_used)) {
      best = &e;
      best_lcp = lcp;
    }
  }
  const int64_t plain_reuse =
      best == nullptr ? 0 : std::min<int64_t>(static_cast<int64_t>(best_lcp), static_cast<int64_t>(prompt.size()) - 1);
  // A trimmed chat (the client dropped old messages) may reuse more than any
  // plain start; recurrent states cannot drop a span.
  if (options.context_shift) {
    if (auto shift = BestShift(entries, prompt, options, plain_reuse)) return *shift;
  }
  if (best == nullptr || best_lcp == 0) {
    plan.why_none = "no cached chat shares a start with this prompt";
    return plan;
  }
  const int64_t lcp = static_cast<int64_t>(best_lcp);
  const int64_t entry_len = static_cast<int64_t>(best->tokens.size());
  const int64_t reuse = plain_reuse;
  if (reuse <= 0) {
    plan.why_none = "the prompt is a single token";
    return plan;
  }
  plan.entry_id = best->id;
  plan.lcp = lcp;
  plan.entry_len = entry_len;
  plan.n_reuse = reuse;
  const int64_t tail = entry_len - reuse;
  if (best->in_use) {
    plan.kind = ReuseKind::kCopyPrefix;
  } else if (tail == 0) {
    plan.kind = ReuseKind::kInPlace;
  } else if (lcp >= best->prompt_len) {
    plan.kind = ReuseKind::kTruncateInPlace;
  } else {
    plan.kind = ReuseKind::kCopyPrefix;
  }
  return plan;
}

std::optional<ShiftPlan> PlanShift(std::span<const int32_t> entry, std::span<const int32_t> prompt,
                                   int64_t min_kept) {
  // Rows after a picture sit at positions behind their row numbers, which a
  // shift's re-rotation by the dropped row count would get wrong.
  if (std::any_of(entry.begin(), entry.end(), [](int32_t t) { return t < 0; })) return std::nullopt;
  const size_t a = CommonPrefix(entry, prompt);
  if (a >= prompt.size() || a + 1 >= entry.size()) return std::nullopt;
  std::optional<ShiftPlan> best;
  // The span ends where the entry picks up the prompt again: try every entry
  // position holding the prompt's next token, keep the longest continuation.
  for (size_t b = a + 1; b < entry.size(); ++b) {
    if (entry[b] != prompt[a]) continue;
    const size_t kept = CommonPrefix(entry.subspan(b), prompt.subspan(a));
    if (static_cast<int64_t>(kept) < min_kept) continue;
    if (!best || static_cast<int64_t>(kept) > best->kept) {
      best = ShiftPlan{static_cast<int64_t>(a), static_cast<int64_t>(b), static_cast<int64_t>(kept)};
    }
    if (b + kept == entry.size()) break;  // kept the whole rest of the entry: nothing longer exists
  }
  return best;
}

bool KeepsTheLatestMessages(const ShiftPlan& plan, int64_t entry_prompt_len) {
  return plan.drop_end + plan.kept >= entry_prompt_len;
}

std::vector<uint64_t> PlanEviction(std::span<const EntryInfo> entries, const PoolLimits& limits,
                                   uint64_t keep_id) {
  size_t count = entries.size(), bytes = 0;
  for (const EntryInfo& e : entries) bytes += e.bytes;
  std::vector<const EntryInfo*> candidates;
  for (const EntryInfo& e : entries) {
    if (!e.in_use && e.id != keep_id) candidates.push_back(&e);
  }
  std::sort(candidates.begin(), candidates.end(),
            [](const EntryInfo* a, const EntryInfo* b) { return a->last_used < b->last_used; });
  std::vector<uint64_t> out;
  for (const EntryInfo* e : candidates) {
    if (count <= limits.max_entries && bytes <= limits.budget_bytes) break;
    out.push_back(e->id);
    --count;
    bytes -= e->bytes;
  }
  return out;
}

}  // namespace mx::cache
