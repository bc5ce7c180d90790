#include "cache/policy/disk_policy.h"

#include <gtest/gtest.h>

namespace mx::cache {
namespace {

constexpr uint64_t kHour = uint64_t{3600} * 1000 * 1000;

std::vector<std::string> Ids(const std::vector<DiskRemoval>& plan) {
  std::vector<std::string> ids;
  for (const auto& r : plan) ids.push_back(r.id);
  return ids;
}

TEST(DiskPolicyTest, NothingToDoWithinLimits) {
  std::vector<DiskFileInfo> files = {{"a", 100, 0, 10 * kHour}, {"b", 100, 0, 11 * kHour}};
  EXPECT_TRUE(PlanDiskEviction(files, {1000, 24 * kHour}, 12 * kHour).empty());
}

TEST(DiskPolicyTest, OverBudgetRemovesLeastRecentlyUsedFirst) {
  std::vector<DiskFileInfo> files = {
      {"new", 400, 0, 30}, {"old", 400, 0, 10}, {"mid", 400, 0, 20}};
  auto plan = PlanDiskEviction(files, {800, 0}, 40);
  ASSERT_EQ(Ids(plan), std::vector<std::string>{"old"});
  EXPECT_EQ(plan[0].reason, DiskRemoveReason::kOverBudget);
  EXPECT_EQ(plan[0].bytes, 400u);
  EXPECT_EQ(Ids(PlanDiskEviction(files, {400, 0}, 40)), (std::vector<std::string>{"old", "mid"}));
}

TEST(DiskPolicyTest, ExpiredFilesGoEvenWithinBudget) {
  std::vector<DiskFileInfo> files = {{"stale", 1, 0, 0}, {"fresh", 1, 0, 100 * kHour}};
  auto plan = PlanDiskEviction(files, {1000, 24 * kHour}, 101 * kHour);
  ASSERT_EQ(Ids(plan), std::vector<std::string>{"stale"});
  EXPECT_EQ(plan[0].reason, DiskRemoveReason::kExpired);
  EXPECT_STREQ(DiskRemoveReasonName(plan[0].reason), "expired");
}

TEST(DiskPolicyTest, TtlIsMeasuredFromLastUseInclusive) {
  std::vector<DiskFileInfo> files = {{"a", 1, 0, 10 * kHour}};
  EXPECT_TRUE(PlanDiskEviction(files, {1000, 5 * kHour}, 15 * kHour - 1).empty());
  EXPECT_EQ(PlanDiskEviction(files, {1000, 5 * kHour}, 15 * kHour).size(), 1u);
}

TEST(DiskPolicyTest, ZeroTtlNeverExpires) {
  std::vector<DiskFileInfo> files = {{"a", 1, 0, 0}};
  EXPECT_TRUE(PlanDiskEviction(files, {1000, 0}, 1000 * kHour).empty());
}

TEST(DiskPolicyTest, LastUseInTheFutureIsNotExpired) {
  std::vector<DiskFileInfo> files = {{"a", 1, 0, 50 * kHour}};
  EXPECT_TRUE(PlanDiskEviction(files, {1000, kHour}, 10 * kHour).empty());
}

TEST(DiskPolicyTest, ExpiredRemovalsCountTowardsTheBudget) {
  // Removing the expired file already brings the rest within budget.
  std::vector<DiskFileInfo> files = {{"exp", 500, 0, 0}, {"x", 300, 0, 90 * kHour},
                                     {"y", 300, 0, 95 * kHour}};
  auto plan = PlanDiskEviction(files, {600, 24 * kHour}, 100 * kHour);
  EXPECT_EQ(Ids(plan), std::vector<std::string>{"exp"});
}

TEST(DiskPolicyTest, FileLargerThanTheBudgetIsRemoved) {
  std::vector<DiskFileInfo> files = {{"huge", 5000, 0, 10}};
  EXPECT_EQ(Ids(PlanDiskEviction(files, {1000, 0}, 20)), std::vector<std::string>{"huge"});
}

TEST(DiskPolicyTest, TiesBreakByCreationThenId) {
  std::vector<DiskFileInfo> files = {{"b", 10, 5, 7}, {"a", 10, 5, 7}, {"c", 10, 1, 7}};
  EXPECT_EQ(Ids(PlanDiskEviction(files, {10, 0}, 8)), (std::vector<std::string>{"c", "a"}));
}

TEST(DiskPolicyTest, EmptyInputGivesEmptyPlan) {
  EXPECT_TRUE(PlanDiskEviction({}, {0, 1}, 100).empty());
}

}  // namespace
}  // namespace mx::cache
