#include "cache/policy/snapshot_policy.h"

#include <gtest/gtest.h>

namespace mx::cache {
namespace {

using Positions = std::vector<int64_t>;

SnapshotLimits Limits(size_t count, int64_t every = 256) {
  SnapshotLimits l;
  l.every = every;
  l.max_count = count;
  l.snapshot_bytes = 1000;
  l.budget_bytes = 1000 * 64;
  return l;
}

TEST(SnapshotLimitsTest, CountIsTheSettingOrWhatTheBudgetHolds) {
  SnapshotLimits l = Limits(8);
  EXPECT_EQ(l.Count(), 8u);
  l.budget_bytes = 3999;  // three whole snapshots
  EXPECT_EQ(l.Count(), 3u);
  l.budget_bytes = 999;
  EXPECT_EQ(l.Count(), 0u);
  l.snapshot_bytes = 0;  // no recurrent layers
  l.budget_bytes = 1 << 30;
  EXPECT_EQ(l.Count(), 0u);
  // A Qwen 3.5 0.8B-shaped state: 18 Gated DeltaNet layers, each a conv window
  // of 3 x 6144 floats and 16 heads of 128 x 128 floats, 4 bytes a float.
  l.snapshot_bytes = 18 * (3 * 6144 + 16 * 128 * 128) * 4;
  EXPECT_EQ(l.snapshot_bytes, 20201472u);  // 19.3 MiB
  l.budget_bytes = uint64_t{64} << 20;
  EXPECT_EQ(l.Count(), 3u);
  l.budget_bytes = uint64_t{256} << 20;
  EXPECT_EQ(l.Count(), 8u);  // 13 fit, the setting keeps 8
}

TEST(ClassifySnapshotTest, KindsInOrderOfUse) {
  const Positions starts = {0, 120, 400, 610};
  SnapshotRequest r{.prompt_len = 700, .n_reused = 0, .message_starts = starts, .diverged_at = 450};
  EXPECT_EQ(ClassifySnapshot(699, r), SnapshotKind::kBeforeEnd);
  EXPECT_EQ(ClassifySnapshot(610, r), SnapshotKind::kLastMessage);
  EXPECT_EQ(ClassifySnapshot(450, r), SnapshotKind::kDivergence);
  EXPECT_EQ(ClassifySnapshot(120, r), SnapshotKind::kFirstMessage);
  EXPECT_EQ(ClassifySnapshot(400, r), SnapshotKind::kMessage);
  EXPECT_EQ(ClassifySnapshot(512, r), SnapshotKind::kPeriodic);
  EXPECT_EQ(ClassifySnapshot(0, r), SnapshotKind::kPeriodic);  // never a boundary
}

// Qwen 3.5's template drops a reply's think block from the history, so the
// next turn leaves the chat right after the generation prompt's marker: that
// position outranks every message start, and is kept even when only two
// snapshots fit.
TEST(PlanSnapshotsTest, ReplyStartIsKeptRightAfterBeforeTheEnd) {
  const Positions starts = {0, 30, 52};
  SnapshotRequest r{.prompt_len = 60, .n_reused = 0, .message_starts = starts, .reply_start = 55};
  EXPECT_EQ(ClassifySnapshot(55, r), SnapshotKind::kReplyStart);
  EXPECT_EQ(PlanSnapshots(r, Limits(2)).take, (Positions{55, 59}));
  EXPECT_EQ(PlanSnapshots(r, Limits(3)).take, (Positions{52, 55, 59}));
}

// Without messages (text completions) the rule is every N tokens and one
// before the end, the newest kept.
TEST(PlanSnapshotsTest, WithoutMessagesEveryNAndBeforeTheEndNewestKept) {
  EXPECT_EQ(PlanSnapshots({.prompt_len = 600}, Limits(8)).take, (Positions{256, 512, 599}));
  EXPECT_EQ(PlanSnapshots({.prompt_len = 600, .n_reused = 300}, Limits(8)).take,
            (Positions{512, 599}));
  EXPECT_EQ(PlanSnapshots({.prompt_len = 100}, Limits(8)).take, (Positions{99}));
  EXPECT_EQ(PlanSnapshots({.prompt_len = 100, .n_reused = 99}, Limits(8)).take, (Positions{}));
  EXPECT_EQ(PlanSnapshots({.prompt_len = 3000}, Limits(3)).take, (Positions{2560, 2816, 2999}));
  EXPECT_EQ(PlanSnapshots({.prompt_len = 3000}, Limits(0)).take, (Positions{}));
}

// A chat's first turn: the end of the system prompt, the start of the
// question and one before the end come first, then every N tokens.
TEST(PlanSnapshotsTest, FirstTurnTakesMessageBoundariesFirst) {
  const Positions starts = {0, 120, 400};
  SnapshotRequest r{.prompt_len = 600, .message_starts = starts};
  EXPECT_EQ(PlanSnapshots(r, Limits(8)).take, (Positions{120, 256, 400, 512, 599}));
  EXPECT_EQ(PlanSnapshots(r, Limits(3)).take, (Positions{120, 400, 599}));
  EXPECT_EQ(PlanSnapshots(r, Limits(2)).take, (Positions{400, 599}));
}

// The next turn continues in place with a long message: its new snapshots do
// not push out the older message boundaries (the oldest, the shared notes,
// included); the periodic ones of the last turn go first.
TEST(PlanSnapshotsTest, LongNextTurnKeepsTheOlderMessageBoundaries) {
  const Positions existing = {120, 256, 400, 512, 599};  // the first turn's
  const Positions starts = {0, 120, 400, 597, 612};      // 597: the first reply
  SnapshotRequest r{
      .prompt_len = 2000, .n_reused = 610, .existing = existing, .message_starts = starts};
  SnapshotChoice c = PlanSnapshots(r, Limits(8));
  EXPECT_EQ(c.keep, (Positions{120, 400}));
  EXPECT_EQ(c.drop, (Positions{256, 512, 599}));
  EXPECT_EQ(c.take, (Positions{612, 1024, 1280, 1536, 1792, 1999}));
}

// An edited last message restarts from its start; the divergence is kept
// for the next edit or regeneration there, and the boundaries stay.
TEST(PlanSnapshotsTest, EditedMessageSnapshotsWhereItDiverged) {
  const Positions existing = {120, 400};
  const Positions starts = {0, 120, 400};
  SnapshotRequest r{.prompt_len = 500,
                    .n_reused = 400,
                    .existing = existing,
                    .message_starts = starts,
                    .diverged_at = 430};
  SnapshotChoice c = PlanSnapshots(r, Limits(8));
  EXPECT_EQ(c.keep, (Positions{120, 400}));
  EXPECT_TRUE(c.drop.empty());
  EXPECT_EQ(c.take, (Positions{430, 499}));
  // With room for two: before the end and the last message start.
  c = PlanSnapshots(r, Limits(2));
  EXPECT_EQ(c.keep, (Positions{400}));
  EXPECT_EQ(c.drop, (Positions{120}));
  EXPECT_EQ(c.take, (Positions{499}));
}

// A regenerated reply restarts from the snapshot one before the end: nothing
// new to take, and that snapshot stays.
TEST(PlanSnapshotsTest, RegeneratedReplyKeepsWhatItRestartedFrom) {
  const Positions existing = {120, 256, 499};
  const Positions starts = {0, 120, 400};
  SnapshotRequest r{
      .prompt_len = 500, .n_reused = 499, .existing = existing, .message_starts = starts};
  SnapshotChoice c = PlanSnapshots(r, Limits(2));
  EXPECT_EQ(c.keep, (Positions{120, 499}));
  EXPECT_EQ(c.drop, (Positions{256}));
  EXPECT_TRUE(c.take.empty());
}

// Positions appear once, whatever explains them twice.
TEST(PlanSnapshotsTest, ANewPositionIsTakenOnce) {
  const Positions starts = {0, 256, 599};
  SnapshotRequest r{.prompt_len = 600, .message_starts = starts, .diverged_at = 256};
  EXPECT_EQ(PlanSnapshots(r, Limits(8)).take, (Positions{256, 512, 599}));
}

}  // namespace
}  // namespace mx::cache
