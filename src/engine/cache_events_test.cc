#include "engine/cache_events.h"

#include <gtest/gtest.h>

#include <string>
#include <thread>
#include <vector>

namespace mx::engine {
namespace {

CacheEvent Event(const std::string& model, int64_t cached, const std::string& tenant = "") {
  CacheEvent e;
  e.model = model;
  e.tenant = tenant;
  e.prompt_tokens = 100;
  e.cached_tokens = cached;
  e.source = cached > 0 ? CacheSource::kRam : CacheSource::kNone;
  e.line = "reused " + std::to_string(cached) + " of 100 tokens from RAM";
  return e;
}

TEST(CacheEventLogTest, EmptyLogHasNoEventsAndSeqZero) {
  CacheEventLog log;
  CacheEventPage page = log.Since(0, 100);
  EXPECT_TRUE(page.events.empty());
  EXPECT_EQ(page.last_seq, 0u);
  EXPECT_EQ(page.skipped, 0u);
}

TEST(CacheEventLogTest, PushAssignsIncreasingSeqAcrossModels) {
  CacheEventLog log;
  EXPECT_EQ(log.Push(Event("a", 1)), 1u);
  EXPECT_EQ(log.Push(Event("b", 2)), 2u);
  EXPECT_EQ(log.Push(Event("a", 3)), 3u);
  CacheEventPage page = log.Since(0, 100);
  ASSERT_EQ(page.events.size(), 3u);
  EXPECT_EQ(page.last_seq, 3u);
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_EQ(page.events[i].seq, i + 1);  // oldest first, models interleaved by seq
    EXPECT_EQ(page.events[i].cached_tokens, static_cast<int64_t>(i + 1));
  }
  EXPECT_EQ(page.events[1].model, "b");
}

TEST(CacheEventLogTest, SinceReturnsOnlyNewerEvents) {
  CacheEventLog log;
  for (int i = 0; i < 5; ++i) log.Push(Event("a", i));
  CacheEventPage page = log.Since(3, 100);
  ASSERT_EQ(page.events.size(), 2u);
  EXPECT_EQ(page.events[0].seq, 4u);
  EXPECT_EQ(page.events[1].seq, 5u);
  EXPECT_TRUE(log.Since(5, 100).events.empty());
  EXPECT_EQ(log.Since(5, 100).last_seq, 5u);
}

TEST(CacheEventLogTest, EachModelKeepsItsNewestEvents) {
  CacheEventLog log(3);
  for (int i = 0; i < 10; ++i) log.Push(Event("busy", i));
  log.Push(Event("quiet", 42));  // a busy model never pushes out another's events
  CacheEventPage page = log.Since(0, 100);
  ASSERT_EQ(page.events.size(), 4u);
  EXPECT_EQ(page.events[0].seq, 8u);
  EXPECT_EQ(page.events[2].seq, 10u);
  EXPECT_EQ(page.events[3].model, "quiet");
  EXPECT_EQ(page.last_seq, 11u);
}

TEST(CacheEventLogTest, LimitKeepsTheNewestAndCountsTheRest) {
  CacheEventLog log;
  for (int i = 0; i < 10; ++i) log.Push(Event(i % 2 ? "a" : "b", i));
  CacheEventPage page = log.Since(2, 3);
  ASSERT_EQ(page.events.size(), 3u);
  EXPECT_EQ(page.events[0].seq, 8u);
  EXPECT_EQ(page.events[2].seq, 10u);
  EXPECT_EQ(page.skipped, 5u);  // seq 3..7
  EXPECT_TRUE(log.Since(0, 0).events.empty());
}

TEST(CacheEventLogTest, TenantFilterShowsOnlyThatTenant) {
  CacheEventLog log;
  log.Push(Event("a", 1, "acme"));
  log.Push(Event("a", 2, "globex"));
  log.Push(Event("b", 3, "acme"));
  log.Push(Event("b", 4, ""));
  CacheEventPage page = log.Since(0, 100, std::string("acme"));
  ASSERT_EQ(page.events.size(), 2u);
  EXPECT_EQ(page.events[0].cached_tokens, 1);
  EXPECT_EQ(page.events[1].cached_tokens, 3);
  EXPECT_EQ(page.last_seq, 4u);  // the log's position, not the tenant's
  EXPECT_EQ(log.Since(0, 100, std::string("")).events.size(), 1u);
  EXPECT_TRUE(log.Since(0, 100, std::string("nobody")).events.empty());
}

TEST(CacheEventLogTest, SourceNames) {
  EXPECT_STREQ(CacheSourceName(CacheSource::kNone), "none");
  EXPECT_STREQ(CacheSourceName(CacheSource::kRam), "ram");
  EXPECT_STREQ(CacheSourceName(CacheSource::kCopy), "copy");
  EXPECT_STREQ(CacheSourceName(CacheSource::kDisk), "disk");
}

TEST(CacheEventLogTest, ConcurrentPushesGetDistinctSeqs) {
  CacheEventLog log(1000);
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&log, t] {
      for (int i = 0; i < 250; ++i) log.Push(Event("m" + std::to_string(t), i));
    });
  }
  for (auto& th : threads) th.join();
  CacheEventPage page = log.Since(0, 2000);
  ASSERT_EQ(page.events.size(), 1000u);
  for (size_t i = 0; i < page.events.size(); ++i) EXPECT_EQ(page.events[i].seq, i + 1);
}

}  // namespace
}  // namespace mx::engine
