#include "server/cache_events_api.h"

#include <gtest/gtest.h>

namespace mx::server {
namespace {

TEST(EventsQueryTest, EmptyQueryGivesDefaults) {
  auto q = ParseEventsQuery("");
  ASSERT_TRUE(q.ok()) << q.status().ToString();
  EXPECT_EQ(q->since, 0u);
  EXPECT_EQ(q->limit, 200u);
  EXPECT_FALSE(q->tenant.has_value());
}

TEST(EventsQueryTest, ReadsEveryParameter) {
  auto q = ParseEventsQuery("since=42&limit=7&tenant=acme%2Fu1");
  ASSERT_TRUE(q.ok()) << q.status().ToString();
  EXPECT_EQ(q->since, 42u);
  EXPECT_EQ(q->limit, 7u);
  EXPECT_EQ(q->tenant, "acme/u1");
}

TEST(EventsQueryTest, EmptyTenantIsTheTenantWithoutApiKey) {
  auto q = ParseEventsQuery("tenant=");
  ASSERT_TRUE(q.ok());
  EXPECT_EQ(q->tenant, "");
  auto plus = ParseEventsQuery("tenant=a+b&&");
  ASSERT_TRUE(plus.ok());
  EXPECT_EQ(plus->tenant, "a b");
}

TEST(EventsQueryTest, BadValuesNameTheParameter) {
  for (const char* bad : {"since=-1", "since=abc", "since=", "since=1&since=2", "limit=0",
                          "limit=1001", "limit=x", "tenant=%zz", "tenant=a&tenant=b"}) {
    auto q = ParseEventsQuery(bad);
    ASSERT_FALSE(q.ok()) << bad;
    EXPECT_EQ(q.status().code(), Status::Code::kInvalidArgument) << bad;
    const std::string name = std::string(bad).substr(0, std::string(bad).find('='));
    EXPECT_NE(q.status().message().find("'" + name + "'"), std::string::npos)
        << q.status().message();
  }
}

TEST(EventsQueryTest, UnknownParameterIsRefused) {
  auto q = ParseEventsQuery("since=1&prompt=hello");
  ASSERT_FALSE(q.ok());
  EXPECT_NE(q.status().message().find("'prompt'"), std::string::npos) << q.status().message();
}

TEST(CacheEventsJsonTest, RendersEveryField) {
  engine::CacheEventPage page;
  page.last_seq = 9;
  page.skipped = 2;
  page.events.push_back({.seq = 9,
                         .time_unix_ms = 1700000000123,
                         .model = "tiny",
                         .tenant = "acme",
                         .prompt_tokens = 906,
                         .cached_tokens = 880,
                         .source = engine::CacheSource::kDisk,
                         .line = "reused 880 of 906 tokens from disk"});
  Json j = CacheEventsJson(page, {});
  EXPECT_EQ(j["last_seq"], 9);
  EXPECT_EQ(j["skipped"], 2);
  ASSERT_EQ(j["events"].size(), 1u);
  const Json& e = j["events"][0];
  EXPECT_EQ(e["seq"], 9);
  EXPECT_EQ(e["time_unix_ms"], 1700000000123);
  EXPECT_EQ(e["model"], "tiny");
  EXPECT_EQ(e["tenant"], "acme");
  EXPECT_EQ(e["prompt_tokens"], 906);
  EXPECT_EQ(e["cached_tokens"], 880);
  EXPECT_EQ(e["source"], "disk");
  EXPECT_EQ(e["line"], "reused 880 of 906 tokens from disk");
}

TEST(CacheEventsJsonTest, HidesTheAbsoluteFolders) {
  engine::CacheEventPage page;
  engine::CacheEvent e;
  e.line =
      "re-reading the entire chat (9 tokens): the saved cache could not be used "
      "(/srv/mx/cache/ab12.mxc: "
      "tag mismatch; /srv/mx/cache unreadable)";
  page.events.push_back(e);
  Json j = CacheEventsJson(
      page, {{"/srv/mx/cache", "the cache folder"}, {"models", "the models folder"}});
  EXPECT_EQ(j["events"][0]["line"],
            "re-reading the entire chat (9 tokens): the saved cache could not be used (ab12.mxc: "
            "tag mismatch; "
            "the cache folder unreadable)");
}

TEST(CacheEventsJsonTest, EmptyPage) {
  Json j = CacheEventsJson({}, {});
  EXPECT_TRUE(j["events"].is_array());
  EXPECT_TRUE(j["events"].empty());
  EXPECT_EQ(j["last_seq"], 0);
}

}  // namespace
}  // namespace mx::server
