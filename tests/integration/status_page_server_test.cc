// The status page through the real server: GET / and its files are the
// embedded src/server/ui/ files with a strict CSP, the Origin and Host
// rules of the API apply to them (the page's own origin may call the API),
// and GET /api/cache/events shows each request's cache line with counts,
// never the prompt's text.
#include <gtest/gtest.h>
#include <signal.h>

#include <fstream>
#include <memory>
#include <sstream>
#include <string>

#include "http_helpers.h"
#include "server_process.h"

namespace mx::testing {
namespace {

const std::string kToken = "status-page-test-token";
const std::string kUniqueWord = "Xylophonequartzite";

std::string ReadSource(const std::string& relative) {
  std::ifstream f(std::string(MATRICXON_SOURCE_DIR) + "/" + relative, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

class StatusPageServerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    signal(SIGPIPE, SIG_IGN);
    dir_ = TempDir(std::string("status_") +
                   ::testing::UnitTest::GetInstance()->current_test_info()->name());
    ASSERT_TRUE(MakeModel(dir_ + "/models/tiny.gguf"));
    std::string error;
    ASSERT_TRUE(server_.Start(
        {"--threads", "1"},
        {{"MATRICXON_MODELS_DIR", dir_ + "/models"}, {"MATRICXON_ADMIN_TOKEN", kToken}},
        dir_ + "/server.log", &error))
        << error;
  }
  void TearDown() override {
    server_.Kill();
    fs::remove_all(dir_);
  }

  httplib::Result Get(const std::string& path, const httplib::Headers& headers = {}) {
    httplib::Client cli("127.0.0.1", server_.port());
    cli.set_read_timeout(60, 0);
    return cli.Get(path, headers);
  }
  std::string Own() const { return "127.0.0.1:" + std::to_string(server_.port()); }

  std::string dir_;
  ServerProcess server_;
};

void ExpectPageHeaders(const httplib::Result& res, const std::string& type) {
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 200);
  EXPECT_EQ(res->get_header_value("Content-Type"), type);
  const std::string csp = res->get_header_value("Content-Security-Policy");
  EXPECT_NE(csp.find("default-src 'none'"), std::string::npos) << csp;
  EXPECT_NE(csp.find("script-src 'self'"), std::string::npos) << csp;
  EXPECT_NE(csp.find("connect-src 'self'"), std::string::npos) << csp;
  EXPECT_NE(csp.find("frame-ancestors 'none'"), std::string::npos) << csp;
  EXPECT_EQ(csp.find("unsafe-inline"), std::string::npos) << csp;
  EXPECT_EQ(res->get_header_value("X-Content-Type-Options"), "nosniff");
  EXPECT_EQ(res->get_header_value("Cache-Control"), "no-store");
}

TEST_F(StatusPageServerTest, PageIsTheEmbeddedHtmlWithAStrictPolicy) {
  auto res = Get("/");
  ExpectPageHeaders(res, "text/html; charset=utf-8");
  EXPECT_EQ(res->body, ReadSource("src/server/ui/index.html"));
  // Script and style come from the page's own routes, never inline.
  EXPECT_NE(res->body.find("<script src=\"/ui/app.js\""), std::string::npos);
  EXPECT_NE(res->body.find("href=\"/ui/app.css\""), std::string::npos);
  EXPECT_EQ(res->body.find("<script>"), std::string::npos);
  EXPECT_EQ(res->body.find(" style="), std::string::npos);
  EXPECT_EQ(res->body.find("http://"), std::string::npos);  // nothing from elsewhere
  EXPECT_EQ(res->body.find("https://"), std::string::npos);
}

TEST_F(StatusPageServerTest, ScriptStyleAndIconAreServedWithTheirTypes) {
  const std::pair<const char*, const char*> files[] = {{"app.js", "text/javascript; charset=utf-8"},
                                                       {"app.css", "text/css; charset=utf-8"},
                                                       {"icon.svg", "image/svg+xml"}};
  for (const auto& [name, type] : files) {
    SCOPED_TRACE(name);
    auto res = Get(std::string("/ui/") + name);
    ExpectPageHeaders(res, type);
    EXPECT_EQ(res->body, ReadSource(std::string("src/server/ui/") + name));
  }
  auto missing = Get("/ui/nothing.js");
  ASSERT_TRUE(missing);
  EXPECT_EQ(missing->status, 404);
}

TEST_F(StatusPageServerTest, PageHasGetAndHeadOnly) {
  httplib::Client cli("127.0.0.1", server_.port());
  auto head = cli.Head("/");
  ASSERT_TRUE(head);
  EXPECT_EQ(head->status, 200);
  EXPECT_TRUE(head->body.empty());
  auto post = cli.Post("/", "x", "text/plain");
  ASSERT_TRUE(post);
  EXPECT_EQ(post->status, 405);
  EXPECT_EQ(post->get_header_value("Allow"), "GET, HEAD");
}

TEST_F(StatusPageServerTest, ForeignOriginAndHostAreRefusedLikeTheApi) {
  for (const std::string path : {"/", "/ui/app.js", "/api/cache/events"}) {
    SCOPED_TRACE(path);
    auto origin = Get(path, {{"Origin", "http://attacker.example"}});
    ASSERT_TRUE(origin);
    EXPECT_EQ(origin->status, 403);
    EXPECT_EQ(origin->body.find("<html"), std::string::npos);
    auto host = Get(path, {{"Host", "attacker.example:" + std::to_string(server_.port())}});
    ASSERT_TRUE(host);
    EXPECT_EQ(host->status, 403);
  }
}

TEST_F(StatusPageServerTest, ThePagesOwnOriginMayCallTheAdminRoutesWithTheToken) {
  httplib::Client cli("127.0.0.1", server_.port());
  const std::string body = R"({"budget_mb": 777})";
  // What a browser sends from the page: its origin, the same Host.
  httplib::Headers own = {{"Origin", "http://" + Own()}, {"Authorization", "Bearer " + kToken}};
  auto put = cli.Put("/api/cache/persistence", own, body, "application/json");
  ASSERT_TRUE(put);
  EXPECT_EQ(put->status, 200) << put->body;
  EXPECT_EQ(Json::parse(put->body)["budget_mb"], 777);
  // Without the token the admin route still refuses.
  auto no_token =
      cli.Put("/api/cache/persistence", {{"Origin", "http://" + Own()}}, body, "application/json");
  ASSERT_TRUE(no_token);
  EXPECT_EQ(no_token->status, 401);
  // Another local port is another origin.
  httplib::Headers other = {{"Origin", "http://127.0.0.1:1"},
                            {"Authorization", "Bearer " + kToken}};
  auto foreign = cli.Put("/api/cache/persistence", other, body, "application/json");
  ASSERT_TRUE(foreign);
  EXPECT_EQ(foreign->status, 403);
}

TEST_F(StatusPageServerTest, EventsShowEachRequestsCacheLineWithoutPromptText) {
  const std::string question = "Tell me about the " + kUniqueWord + " please.";
  Turn first = Chat(server_.port(), {{"user", question}});
  Turn second =
      Chat(server_.port(), {{"user", question}, {"assistant", first.text}, {"user", "More?"}});
  ASSERT_GT(second.cached, 0);

  auto res = Get("/api/cache/events");
  ASSERT_TRUE(res);
  ASSERT_EQ(res->status, 200) << res->body;
  EXPECT_EQ(res->body.find(kUniqueWord), std::string::npos) << res->body;
  EXPECT_EQ(res->body.find("More?"), std::string::npos) << res->body;
  Json j = Json::parse(res->body);
  ASSERT_EQ(j["events"].size(), 2u) << j.dump();
  const Json& a = j["events"][0];
  const Json& b = j["events"][1];
  EXPECT_EQ(a["model"], "tiny");
  EXPECT_EQ(a["tenant"], "");
  EXPECT_EQ(a["prompt_tokens"], first.prompt_tokens);
  EXPECT_EQ(a["cached_tokens"], 0);
  EXPECT_EQ(a["source"], "none");
  EXPECT_EQ(a["line"].get<std::string>().rfind("re-reading the entire chat", 0), 0u) << a.dump();
  EXPECT_EQ(b["prompt_tokens"], second.prompt_tokens);
  EXPECT_EQ(b["cached_tokens"], second.cached);
  EXPECT_EQ(b["source"], "ram");
  EXPECT_EQ(
      b["line"].get<std::string>().rfind("reused " + std::to_string(second.cached) + " of ", 0), 0u)
      << b.dump();
  EXPECT_GT(b["seq"].get<uint64_t>(), a["seq"].get<uint64_t>());
  EXPECT_EQ(j["last_seq"], b["seq"]);
  EXPECT_GT(a["time_unix_ms"].get<uint64_t>(), 1600000000000u);
  // The same line as the server log's.
  EXPECT_NE(server_.Log().find("model tiny: " + b["line"].get<std::string>()), std::string::npos);

  // Polling from the last seen sequence number gives only what is newer.
  auto since = Get("/api/cache/events?since=" + std::to_string(a["seq"].get<uint64_t>()));
  ASSERT_TRUE(since);
  Json s = Json::parse(since->body);
  ASSERT_EQ(s["events"].size(), 1u);
  EXPECT_EQ(s["events"][0]["seq"], b["seq"]);
  Json newest = Json::parse(Get("/api/cache/events?limit=1")->body);
  ASSERT_EQ(newest["events"].size(), 1u);
  EXPECT_EQ(newest["events"][0]["seq"], b["seq"]);
  EXPECT_EQ(newest["skipped"], 1);
  // Without API keys every request is tenant "".
  EXPECT_EQ(Json::parse(Get("/api/cache/events?tenant=")->body)["events"].size(), 2u);
  EXPECT_TRUE(Json::parse(Get("/api/cache/events?tenant=someone")->body)["events"].empty());
}

TEST_F(StatusPageServerTest, EventsQueryErrorsNameTheParameter) {
  for (const std::string q : {"limit=0", "since=x", "prompt=1"}) {
    SCOPED_TRACE(q);
    auto res = Get("/api/cache/events?" + q);
    ASSERT_TRUE(res);
    EXPECT_EQ(res->status, 400);
    const std::string name = q.substr(0, q.find('='));
    EXPECT_NE(Json::parse(res->body)["error"]["message"].get<std::string>().find("'" + name + "'"),
              std::string::npos)
        << res->body;
  }
}

TEST_F(StatusPageServerTest, RouteTableListsThePageAndTheEvents) {
  Json routes = Json::parse(Get("/api/routes")->body)["routes"];
  bool page = false, events = false;
  for (const Json& r : routes) {
    page |= r["path"] == "/" && r["method"] == "GET" && r["mutates"] == false;
    events |= r["path"] == "/api/cache/events" && r["method"] == "GET" && r["mutates"] == false;
  }
  EXPECT_TRUE(page);
  EXPECT_TRUE(events);
}

}  // namespace
}  // namespace mx::testing
