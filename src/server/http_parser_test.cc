#include "server/http_parser.h"

#include <gtest/gtest.h>

namespace mx::server {
namespace {

// Feeds `bytes` in pieces of `step` bytes; returns the bytes consumed.
size_t FeedInSteps(RequestParser& p, std::string_view bytes, size_t step) {
  size_t used = 0;
  while (used < bytes.size() && !p.done() && !p.failed()) {
    size_t n = p.Feed(bytes.substr(used, std::min(step, bytes.size() - used)));
    used += n;
    if (n == 0) break;
  }
  return used;
}

TEST(HttpParserTest, SimpleGetInAnyPieces) {
  const std::string req = "GET /health?x=1 HTTP/1.1\r\nHost: localhost\r\nUser-Agent: t\r\n\r\n";
  for (size_t step : {1u, 2u, 7u, 1000u}) {
    RequestParser p({});
    EXPECT_EQ(FeedInSteps(p, req, step), req.size());
    ASSERT_TRUE(p.done()) << step;
    EXPECT_EQ(p.request().method, "GET");
    EXPECT_EQ(p.request().path, "/health");
    EXPECT_EQ(p.request().query, "x=1");
    ASSERT_EQ(p.request().headers.size(), 2u);
    EXPECT_EQ(p.request().headers[1].first, "user-agent");
    EXPECT_TRUE(p.request().keep_alive);
    EXPECT_TRUE(p.request().body.empty());
  }
}

TEST(HttpParserTest, ContentLengthBodyAndPipelinedRest) {
  const std::string one = "POST /x HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\n\r\nhello";
  const std::string two = "GET /y HTTP/1.1\r\nHost: a\r\n\r\n";
  RequestParser p({});
  const std::string both = one + two;
  EXPECT_EQ(p.Feed(both), one.size());
  ASSERT_TRUE(p.done());
  EXPECT_EQ(p.request().body, "hello");
  p.Reset();
  EXPECT_EQ(p.Feed(std::string_view(both).substr(one.size())), two.size());
  ASSERT_TRUE(p.done());
  EXPECT_EQ(p.request().path, "/y");
}

TEST(HttpParserTest, PostWithoutBodyFramingHasAnEmptyBody) {
  RequestParser p({});
  p.Feed("POST /api/models/a/load HTTP/1.1\r\nHost: a\r\n\r\n");
  ASSERT_TRUE(p.done());
  EXPECT_TRUE(p.request().body.empty());
}

TEST(HttpParserTest, ChunkedBodyWithExtensionsAndTrailers) {
  const std::string req =
      "POST /x HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n"
      "5;ext=1\r\nhello\r\n6\r\n world\r\n0\r\nX-Trailer: v\r\n\r\n";
  for (size_t step : {1u, 3u, 1000u}) {
    RequestParser p({});
    EXPECT_EQ(FeedInSteps(p, req, step), req.size());
    ASSERT_TRUE(p.done()) << step;
    EXPECT_EQ(p.request().body, "hello world");
    EXPECT_TRUE(p.request().chunked);
  }
}

TEST(HttpParserTest, ChunkedBodyOverTheLimitFailsBeforeItIsRead) {
  HttpLimits limits;
  limits.max_body_bytes = 100;
  RequestParser p(limits);
  p.Feed("POST /x HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n50\r\n");
  EXPECT_FALSE(p.failed());
  p.Feed(std::string(80, 'a') + "\r\n");
  p.Feed("20\r\n");  // 80 + 32 > 100
  ASSERT_TRUE(p.failed());
  EXPECT_EQ(p.error_status(), 413);
}

TEST(HttpParserTest, HugeChunkSizeIs413NotAnOverflow) {
  RequestParser p({});
  p.Feed("POST /x HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\nffffffffffffffff\r\n");
  ASSERT_TRUE(p.failed());
  EXPECT_EQ(p.error_status(), 413);
  RequestParser q({});
  q.Feed("POST /x HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n1ffffffffffffffff\r\n");
  ASSERT_TRUE(q.failed());
  EXPECT_EQ(q.error_status(), 400);
}

TEST(HttpParserTest, ContentLengthOverTheLimitFailsAtTheHead) {
  RequestParser p({});
  p.Feed("POST /x HTTP/1.1\r\nHost: a\r\nContent-Length: 9000000000\r\n\r\n");
  ASSERT_TRUE(p.failed());
  EXPECT_EQ(p.error_status(), 413);
}

TEST(HttpParserTest, HeadTooLargeIs431WithoutBufferingMore) {
  HttpLimits limits;
  limits.max_head_bytes = 1024;
  RequestParser p(limits);
  std::string head = "GET / HTTP/1.1\r\nHost: a\r\n";
  while (head.size() < 4096) head += "X-Pad: " + std::string(100, 'p') + "\r\n";
  const size_t used = p.Feed(head);
  ASSERT_TRUE(p.failed());
  EXPECT_EQ(p.error_status(), 431);
  EXPECT_LE(used, 4096u);
}

TEST(HttpParserTest, TooManyHeadersIs431) {
  HttpLimits limits;
  limits.max_headers = 4;
  RequestParser p(limits);
  p.Feed("GET / HTTP/1.1\r\nHost: a\r\nA: 1\r\nB: 1\r\nC: 1\r\nD: 1\r\n\r\n");
  ASSERT_TRUE(p.failed());
  EXPECT_EQ(p.error_status(), 431);
}

TEST(HttpParserTest, LongRequestLineIs414) {
  RequestParser p({});
  p.Feed("GET /" + std::string(9000, 'a'));
  ASSERT_TRUE(p.failed());
  EXPECT_EQ(p.error_status(), 414);
}

TEST(HttpParserTest, SmugglingShapesAreRefused) {
  for (const char* bad : {
           "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n",
           "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\n",
           "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: +5\r\n\r\n",
           "POST / HTTP/1.1\r\nHost: a\r\nContent-Length : 5\r\n\r\n",
           "GET / HTTP/1.1\r\nHost: a\r\n folded\r\n\r\n",
           "GET / HTTP/1.1\r\nHost: a\r\nX: a\x01b\r\n\r\n",
           "GET / HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n",
           "GET / HTTP/1.1\r\n\r\n",
           "GET /a\x7f HTTP/1.1\r\nHost: a\r\n\r\n",
           "GET http://a/ HTTP/1.1\r\nHost: a\r\n\r\n",
           "GET  / HTTP/1.1\r\nHost: a\r\n\r\n",
       }) {
    RequestParser p({});
    p.Feed(bad);
    EXPECT_TRUE(p.failed()) << bad;
    EXPECT_EQ(p.error_status(), 400) << bad;
  }
  RequestParser te({});
  te.Feed("POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: gzip, chunked\r\n\r\n");
  EXPECT_EQ(te.error_status(), 501);
  RequestParser v({});
  v.Feed("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n");
  EXPECT_EQ(v.error_status(), 505);
  RequestParser ex({});
  ex.Feed("POST / HTTP/1.1\r\nHost: a\r\nExpect: magic\r\n\r\n");
  EXPECT_EQ(ex.error_status(), 417);
}

// What a proxy might read differently: chunk framing lines that end with a
// bare LF, chunk extensions that do not parse (an unclosed quoted string
// could hide the next chunk line from one parser and not from another),
// two Authorization or Origin fields.
TEST(HttpParserTest, ChunkFramingAndSingletonFieldsAreStrict) {
  const std::string head = "POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n";
  for (const char* bad : {"5\nhello\r\n0\r\n\r\n", "5\r\nhello\n0\r\n\r\n", "5\r\nhello\r\n0\r\nX: v\n\r\n",
                          "5;a=\"x\r\nhello\r\n0\r\n\r\n", "5;a=\"x;\r\nhello\r\n0\r\n\r\n", "5;\r\nhello\r\n0\r\n\r\n",
                          "5;a=b c\r\nhello\r\n0\r\n\r\n", "5;=b\r\nhello\r\n0\r\n\r\n", "5 x\r\nhello\r\n0\r\n\r\n"}) {
    for (size_t step : {1u, 1000u}) {
      RequestParser p({});
      FeedInSteps(p, head + bad, step);
      EXPECT_TRUE(p.failed()) << bad;
      EXPECT_EQ(p.error_status(), 400) << bad;
    }
  }
  for (const char* good : {"5;a=\"x;y \\\" z\"\r\nhello\r\n0\r\n\r\n", "5 ; a = b ;c\r\nhello\r\n0\r\n\r\n",
                           "5;a\r\nhello\r\n0;last\r\n\r\n"}) {
    RequestParser p({});
    FeedInSteps(p, head + good, 1);
    ASSERT_TRUE(p.done()) << good << " " << p.error_message();
    EXPECT_EQ(p.request().body, "hello");
  }
  for (const char* field : {"Authorization: Bearer a", "Origin: http://a"}) {
    RequestParser p({});
    p.Feed(std::string("GET / HTTP/1.1\r\nHost: a\r\n") + field + "\r\n" + field + "\r\n\r\n");
    EXPECT_EQ(p.error_status(), 400) << field;
    EXPECT_NE(p.error_message().find("more than one"), std::string::npos) << p.error_message();
  }
}

TEST(HttpParserTest, KeepAliveRulesAndExpect) {
  RequestParser a({});
  a.Feed("GET / HTTP/1.1\r\nHost: a\r\nConnection: Close\r\n\r\n");
  EXPECT_FALSE(a.request().keep_alive);
  RequestParser b({});
  b.Feed("GET / HTTP/1.0\r\n\r\n");
  ASSERT_TRUE(b.done());
  EXPECT_FALSE(b.request().keep_alive);
  RequestParser c({});
  c.Feed("GET / HTTP/1.0\r\nConnection: keep-alive\r\n\r\n");
  EXPECT_TRUE(c.request().keep_alive);
  RequestParser d({});
  d.Feed("POST / HTTP/1.1\r\nHost: a\r\nExpect: 100-continue\r\nContent-Length: 3\r\n\r\n");
  EXPECT_TRUE(d.head_done());
  EXPECT_FALSE(d.done());
  EXPECT_TRUE(d.request().expect_continue);
}

TEST(HttpParserTest, BareLineFeedsAndLeadingEmptyLines) {
  RequestParser p({});
  const std::string req = "\r\n\nGET / HTTP/1.1\nHost: a\n\n";
  EXPECT_EQ(FeedInSteps(p, req, 1), req.size());
  ASSERT_TRUE(p.done());
  EXPECT_EQ(p.request().headers[0].second, "a");
}

TEST(HttpParserTest, PercentDecode) {
  std::string out;
  EXPECT_TRUE(PercentDecode("a%20b%0d%0A", &out));
  EXPECT_EQ(out, "a b\r\n");
  EXPECT_FALSE(PercentDecode("a%2", &out));
  EXPECT_FALSE(PercentDecode("a%zz", &out));
  EXPECT_TRUE(PercentDecode("a+b", &out));
  EXPECT_EQ(out, "a+b");
}

}  // namespace
}  // namespace mx::server
