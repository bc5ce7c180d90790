#include "cache/policy/cache_policy.h"

#include <gtest/gtest.h>

#include <random>

namespace mx::cache {
namespace {

std::vector<int32_t> Seq(int32_t from, int32_t to) {
  std::vector<int32_t> v;
  for (int32_t i = from; i < to; ++i) v.push_back(i);
  return v;
}

TEST(CommonPrefixTest, MatchesANaiveScan) {
  std::mt19937 rng(1);
  for (int round = 0; round < 500; ++round) {
    size_t n = rng() % 600;
    std::vector<int32_t> a(n), b;
    for (auto& x : a) x = static_cast<int32_t>(rng() % 5);
    b = a;
    if (n > 0 && rng() % 4 != 0) b[rng() % n] = 99;
    b.resize(rng() % (n + 3));
    size_t naive = 0;
    while (naive < a.size() && naive < b.size() && a[naive] == b[naive]) ++naive;
    ASSERT_EQ(CommonPrefix(a, b), naive);
  }
}

TEST(PlanLookupTest, EmptyPoolSaysSo) {
  auto prompt = Seq(0, 10);
  LookupPlan p = PlanLookup({}, prompt, {});
  EXPECT_EQ(p.kind, ReuseKind::kNone);
  EXPECT_EQ(p.why_none, "RAM holds no conversations");
}

TEST(PlanLookupTest, NothingSharedSaysSo) {
  auto held = Seq(100, 120), prompt = Seq(0, 10);
  std::vector<EntryInfo> e = {{1, held, static_cast<int64_t>(held.size()), 10, 1, false}};
  LookupPlan p = PlanLookup(e, prompt, {});
  EXPECT_EQ(p.kind, ReuseKind::kNone);
  EXPECT_EQ(p.why_none, "no cached chat shares a start with this prompt");
}

TEST(PlanLookupTest, LongestStartWinsThenMostRecent) {
  auto a = Seq(0, 5), b = Seq(0, 8), c = Seq(0, 8), prompt = Seq(0, 20);
  std::vector<EntryInfo> e = {{1, a, static_cast<int64_t>(a.size()), 1, 9, false}, {2, b, static_cast<int64_t>(b.size()), 1, 3, false}, {3, c, static_cast<int64_t>(c.size()), 1, 4, false}};
  LookupPlan p = PlanLookup(e, prompt, {});
  EXPECT_EQ(p.entry_id, 3u);  // 8 tokens shared with 2 and 3; 3 was used later
  EXPECT_EQ(p.kind, ReuseKind::kInPlace);
  EXPECT_EQ(p.n_reuse, 8);
}

TEST(PlanLookupTest, AlwaysLeavesOneTokenToRead) {
  auto held = Seq(0, 10), prompt = Seq(0, 10);
  std::vector<EntryInfo> e = {{1, held, static_cast<int64_t>(held.size()), 1, 1, false}};
  LookupPlan p = PlanLookup(e, prompt, {});
  EXPECT_EQ(p.n_reuse, 9);
  EXPECT_EQ(p.kind, ReuseKind::kTruncateInPlace);
}

TEST(PlanLookupTest, DivergingInTheReplyTruncatesInThePromptCopies) {
  auto held = Seq(0, 100);  // 90 prompt tokens, then a 10-token reply
  std::vector<EntryInfo> e = {{1, held, 90, 1, 1, false}};
  auto regen = Seq(0, 90);  // the same prompt again: the reply is regenerated
  LookupPlan p = PlanLookup(e, regen, {});
  EXPECT_EQ(p.kind, ReuseKind::kTruncateInPlace);
  EXPECT_EQ(p.n_reuse, 89);
  auto retokenized = Seq(0, 95);  // the next turn, whose copy of the reply re-tokenized differently
  retokenized.push_back(-1);
  p = PlanLookup(e, retokenized, {});
  EXPECT_EQ(p.kind, ReuseKind::kTruncateInPlace);
  EXPECT_EQ(p.n_reuse, 95);
  auto edited = Seq(0, 80);  // the last user message was edited: keep the entry, copy the start
  edited.push_back(-1);
  p = PlanLookup(e, edited, {});
  EXPECT_EQ(p.kind, ReuseKind::kCopyPrefix);
  EXPECT_EQ(p.n_reuse, 80);
  auto other = Seq(0, 30);  // another chat with the same start
  other.push_back(-1);
  EXPECT_EQ(PlanLookup(e, other, {}).kind, ReuseKind::kCopyPrefix);
}

TEST(PlanLookupTest, InUseEntryIsCopiedNeverTouched) {
  auto held = Seq(0, 10), prompt = Seq(0, 20);
  std::vector<EntryInfo> e = {{1, held, static_cast<int64_t>(held.size()), 1, 1, true}};
  LookupPlan p = PlanLookup(e, prompt, {});
  EXPECT_EQ(p.kind, ReuseKind::kCopyPrefix);
  EXPECT_EQ(p.n_reuse, 10);
}

TEST(PlanLookupTest, RecurrentStateRestartsFromTheNewestSnapshotWithinTheSharedStart) {
  LookupOptions rec;
  rec.recurrent = true;
  auto held = Seq(0, 100);  // 90 prompt tokens + a 10-token reply
  std::vector<int64_t> cuts = {32, 64, 89};
  std::vector<EntryInfo> e = {{1, held, 90, 1, 1, false, cuts}};
  auto longer = Seq(0, 115);  // the next turn: the live end continues in place
  LookupPlan p = PlanLookup(e, longer, rec);
  EXPECT_EQ(p.kind, ReuseKind::kInPlace);
  EXPECT_EQ(p.n_reuse, 100);
  auto regen = Seq(0, 90);  // regenerate: the snapshot one token before the prompt's end
  p = PlanLookup(e, regen, rec);
  EXPECT_EQ(p.kind, ReuseKind::kTruncateInPlace);
  EXPECT_EQ(p.n_reuse, 89);
  auto edited = Seq(0, 70);  // an edited message: newest snapshot at or before 70, copied
  edited.push_back(-1);
  p = PlanLookup(e, edited, rec);
  EXPECT_EQ(p.kind, ReuseKind::kCopyPrefix);
  EXPECT_EQ(p.n_reuse, 64);
  auto early = Seq(0, 20);  // shares less than the first snapshot
  early.push_back(-1);
  p = PlanLookup(e, early, rec);
  EXPECT_EQ(p.kind, ReuseKind::kNone);
  EXPECT_EQ(p.why_none, "no snapshot of the hybrid model's state lies within the shared start");
  EXPECT_EQ(p.lcp, 20);  // where it diverges, for the snapshot policy
  e[0].in_use = true;  // in use: the live end is off limits, snapshots can still be copied
  p = PlanLookup(e, longer, rec);
  EXPECT_EQ(p.kind, ReuseKind::kCopyPrefix);
  EXPECT_EQ(p.n_reuse, 89);
  // A fresh copy in use whose last snapshot is its end is still only copied.
  auto copy_tokens = Seq(0, 64);
  std::vector<int64_t> copy_cuts = {64};
  std::vector<EntryInfo> busy = {{2, copy_tokens, 64, 1, 1, true, copy_cuts}};
  p = PlanLookup(busy, longer, rec);
  EXPECT_EQ(p.kind, ReuseKind::kCopyPrefix);
  EXPECT_EQ(p.n_reuse, 64);
}

TEST(PlanShiftTest, FindsTheDroppedSpan) {
  auto system = Seq(0, 10), old_turns = Seq(100, 160), recent = Seq(200, 260), next = Seq(300, 320);
  std::vector<int32_t> entry = system;
  entry.insert(entry.end(), old_turns.begin(), old_turns.end());
  entry.insert(entry.end(), recent.begin(), recent.end());
  std::vector<int32_t> prompt = system;
  prompt.insert(prompt.end(), recent.begin(), recent.end());
  prompt.insert(prompt.end(), next.begin(), next.end());
  auto plan = PlanShift(entry, prompt);
  ASSERT_TRUE(plan.has_value());
  EXPECT_EQ(plan->drop_begin, 10);
  EXPECT_EQ(plan->drop_end, 70);
  EXPECT_EQ(plan->kept, 60);
  EXPECT_EQ(plan->reused(), 70);
}

// The same trim, but the dropped turns held a picture (negative rows): the
// rows after it are at positions behind their row numbers, so no shift.
TEST(PlanShiftTest, AnEntryWithPictureRowsIsNeverShifted) {
  auto system = Seq(0, 10), old_turns = Seq(100, 160), recent = Seq(200, 260), next = Seq(300, 320);
  std::vector<int32_t> entry = system;
  entry.insert(entry.end(), old_turns.begin(), old_turns.end());
  entry[20] = -7;
  entry.insert(entry.end(), recent.begin(), recent.end());
  std::vector<int32_t> prompt = system;
  prompt.insert(prompt.end(), recent.begin(), recent.end());
  prompt.insert(prompt.end(), next.begin(), next.end());
  EXPECT_FALSE(PlanShift(entry, prompt).has_value());
}

TEST(PlanShiftTest, DropInTheMiddleAndAtTheStart) {
  auto e = Seq(0, 100);
  std::vector<int32_t> middle(e.begin(), e.begin() + 40);
  middle.insert(middle.end(), e.begin() + 60, e.end());
  middle.push_back(-7);
  auto plan = PlanShift(e, middle);
  ASSERT_TRUE(plan.has_value());
  EXPECT_EQ(plan->drop_begin, 40);
  EXPECT_EQ(plan->drop_end, 60);
  EXPECT_EQ(plan->kept, 40);
  // No system prompt: the span starts at position 0.
  std::vector<int32_t> start(e.begin() + 30, e.end());
  plan = PlanShift(e, start);
  ASSERT_TRUE(plan.has_value());
  EXPECT_EQ(plan->drop_begin, 0);
  EXPECT_EQ(plan->drop_end, 30);
}

TEST(PlanShiftTest, NothingToShift) {
  auto e = Seq(0, 100);
  auto longer = Seq(0, 120);  // a plain continuation: no span was dropped
  EXPECT_FALSE(PlanShift(e, longer).has_value());
  auto other = Seq(500, 600);  // an unrelated chat
  EXPECT_FALSE(PlanShift(e, other).has_value());
  std::vector<int32_t> few(e.begin(), e.begin() + 10);  // only 5 tokens continue after the span
  few.insert(few.end(), e.begin() + 50, e.begin() + 55);
  few.push_back(-1);
  EXPECT_FALSE(PlanShift(e, few).has_value());
  EXPECT_TRUE(PlanShift(e, few, /*min_kept=*/5).has_value());
}

TEST(PlanShiftTest, RepeatedShiftsKeepFindingTheSpan) {
  // The chat overflows again and again: each time the oldest turn after the system prompt goes.
  std::vector<int32_t> state = Seq(0, 8);  // system
  for (int t = 0; t < 6; ++t) {
    auto turn = Seq(1000 * (t + 1), 1000 * (t + 1) + 30);
    state.insert(state.end(), turn.begin(), turn.end());
  }
  for (int round = 0; round < 4; ++round) {
    std::vector<int32_t> prompt(state.begin(), state.begin() + 8);
    prompt.insert(prompt.end(), state.begin() + 38, state.end());  // drop the oldest 30-token turn
    auto next = Seq(50000 + 100 * round, 50000 + 100 * round + 30);
    prompt.insert(prompt.end(), next.begin(), next.end());
    auto plan = PlanShift(state, prompt);
    ASSERT_TRUE(plan.has_value()) << round;
    EXPECT_EQ(plan->drop_begin, 8);
    EXPECT_EQ(plan->drop_end, 38);
    EXPECT_EQ(plan->kept, static_cast<int64_t>(state.size()) - 38);
    state = prompt;
  }
}

// Another chat whose first message equals a message in the middle of a
// cached chat looks like a trim of it, but it stops matching before that
// chat's last prompt ends: it is not shifted into (the cached chat stays
// whole), while the real trim, which keeps the latest messages, is.
TEST(PlanLookupTest, OnlyATrimThatKeepsTheLatestMessagesShifts) {
  std::vector<int32_t> held = Seq(0, 10);  // system
  auto m1 = Seq(100, 140), m2 = Seq(200, 260), m3 = Seq(300, 340), reply = Seq(400, 410);
  for (const auto* part : {&m1, &m2, &m3, &reply}) held.insert(held.end(), part->begin(), part->end());
  const int64_t prompt_len = static_cast<int64_t>(held.size() - reply.size());
  std::vector<EntryInfo> e = {{1, held, prompt_len, 1, 1, false}};
  std::vector<int32_t> other = Seq(0, 10);  // system, m2, then its own question
  other.insert(other.end(), m2.begin(), m2.end());
  other.push_back(-5);
  LookupPlan p = PlanLookup(e, other, {});
  EXPECT_EQ(p.kind, ReuseKind::kCopyPrefix);
  EXPECT_EQ(p.n_reuse, 10);
  std::vector<int32_t> trimmed = Seq(0, 10);  // system, m2, m3, the reply, a new question
  for (const auto* part : {&m2, &m3, &reply}) trimmed.insert(trimmed.end(), part->begin(), part->end());
  trimmed.push_back(-6);
  p = PlanLookup(e, trimmed, {});
  EXPECT_EQ(p.kind, ReuseKind::kShiftInPlace);
  EXPECT_EQ(p.n_reuse, static_cast<int64_t>(trimmed.size()) - 1);
}

TEST(PlanLookupTest, TrimmedChatShiftsUnlessTurnedOff) {
  std::vector<int32_t> held = Seq(0, 10);  // system
  auto old_turn = Seq(100, 140), rest = Seq(200, 300);
  held.insert(held.end(), old_turn.begin(), old_turn.end());
  held.insert(held.end(), rest.begin(), rest.end());
  std::vector<int32_t> prompt = Seq(0, 10);
  prompt.insert(prompt.end(), rest.begin(), rest.end());
  prompt.push_back(-3);
  std::vector<EntryInfo> e = {{1, held, static_cast<int64_t>(held.size()), 1, 1, false}};
  LookupPlan p = PlanLookup(e, prompt, {});
  EXPECT_EQ(p.kind, ReuseKind::kShiftInPlace);
  EXPECT_EQ(p.shift.drop_begin, 10);
  EXPECT_EQ(p.shift.drop_end, 50);
  EXPECT_EQ(p.n_reuse, 110);
  LookupOptions off;
  off.context_shift = false;
  p = PlanLookup(e, prompt, off);
  EXPECT_EQ(p.kind, ReuseKind::kCopyPrefix);
  EXPECT_EQ(p.n_reuse, 10);
  e[0].in_use = true;  // an entry in use is never shifted
  EXPECT_EQ(PlanLookup(e, prompt, {}).kind, ReuseKind::kCopyPrefix);
  LookupOptions rec;
  rec.recurrent = true;
  e[0].in_use = false;
  EXPECT_EQ(PlanLookup(e, prompt, rec).kind, ReuseKind::kNone);
}

TEST(PlanEvictionTest, LeastRecentlyUsedLeavesFirst) {
  std::vector<EntryInfo> e = {{1, {}, 0, 10, 5, false}, {2, {}, 0, 10, 1, false}, {3, {}, 0, 10, 3, false}};
  EXPECT_EQ(PlanEviction(e, {.max_entries = 2, .budget_bytes = 1000}, 0), std::vector<uint64_t>{2});
  EXPECT_EQ(PlanEviction(e, {.max_entries = 3, .budget_bytes = 15}, 0), (std::vector<uint64_t>{2, 3}));
}

TEST(PlanEvictionTest, InUseAndKeptEntriesStay) {
  std::vector<EntryInfo> e = {{1, {}, 0, 10, 1, true}, {2, {}, 0, 10, 2, false}, {3, {}, 0, 500, 3, false}};
  // Entry 3 alone is over the budget: it stays (it was just written), 2 leaves, 1 is in use.
  EXPECT_EQ(PlanEviction(e, {.max_entries = 4, .budget_bytes = 100}, 3), std::vector<uint64_t>{2});
}

}  // namespace
}  // namespace mx::cache
