// Tenants through the real server (SPEC §13, docs/security.md): API keys from
// MATRICXON_API_KEYS_FILE guard the OpenAI and utility routes (401 in
// OpenAI's shape), the admin token stays separate, the file's mode is
// enforced, SIGHUP re-reads it, and a request's tenant is its key's (or
// "tenant/user" for a trusted key).
#include <gtest/gtest.h>
#include <httplib.h>
#include <signal.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <thread>

#include "http_helpers.h"
#include "server_process.h"

namespace mx::testing {
namespace {

const std::string kAcmeKey = "acme-key-0123456789abcdef";
const std::string kBetaKey = "beta-key-0123456789abcdef";
const std::string kPairingKey = "pairing-key-0123456789abcdef";
const std::string kNewKey = "new-key-0123456789abcdef";
const std::string kAdminToken = "admin-token-0123456789abcdef";

struct Answer {
  int status = 0;
  Json body;
  std::string raw;
  std::string www_authenticate;
};

Answer Send(int port, const std::string& method, const std::string& path, const std::string& body,
            const std::string& bearer) {
  httplib::Client cli("127.0.0.1", port);
  cli.set_read_timeout(120, 0);
  httplib::Headers headers;
  if (!bearer.empty()) headers.emplace("Authorization", "Bearer " + bearer);
  httplib::Result res = method == "GET" ? cli.Get(path.c_str(), headers)
                        : method == "DELETE"
                            ? cli.Delete(path.c_str(), headers)
                            : cli.Post(path.c_str(), headers, body, "application/json");
  Answer a;
  if (!res) return a;
  a.status = res->status;
  a.raw = res->body;
  a.body = Json::parse(res->body, nullptr, false);
  a.www_authenticate = res->get_header_value("WWW-Authenticate");
  return a;
}

std::string ChatBody(const std::string& text, const std::string& user = "") {
  Json b = {{"model", "tiny"},
            {"messages", {{{"role", "user"}, {"content", text}}}},
            {"max_tokens", 2},
            {"temperature", 0}};
  if (!user.empty()) b["user"] = user;
  return b.dump();
}

void ExpectApiKeyRefused(const Answer& a) {
  EXPECT_EQ(a.status, 401) << a.raw;
  EXPECT_EQ(a.www_authenticate, "Bearer");
  ASSERT_TRUE(a.body.is_object() && a.body.contains("error")) << a.raw;
  const Json& e = a.body["error"];
  EXPECT_EQ(e["type"], "authentication_error") << a.raw;
  EXPECT_EQ(e["code"], "invalid_api_key") << a.raw;
  EXPECT_TRUE(e.contains("param") && e["message"].is_string()) << a.raw;
}

// Writes the keys file with `mode` (chmod after writing: the umask does not apply).
void WriteKeys(const std::string& path, const std::string& text,
               fs::perms mode = fs::perms::owner_read | fs::perms::owner_write) {
  const std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::trunc);
    out << text;
  }
  fs::permissions(tmp, mode);
  fs::rename(tmp, path);  // a reader sees the old file or the new one
}

class TenantServerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    signal(SIGPIPE, SIG_IGN);
    dir_ = TempDir("tenants");
    ASSERT_TRUE(MakeModel(dir_ + "/models/tiny.gguf"));
    keys_path_ = dir_ + "/api_keys";
  }
  void TearDown() override {
    server_.Kill();
    fs::remove_all(dir_);
  }
  // Starts the server over the keys in keys_path_ (written first when `keys`
  // is not empty) with the admin token and `extra` settings.
  bool Start(const std::string& keys, std::map<std::string, std::string> extra,
             std::string* error) {
    if (!keys.empty()) WriteKeys(keys_path_, keys);
    extra["MATRICXON_MODELS_DIR"] = dir_ + "/models";
    extra["MATRICXON_API_KEYS_FILE"] = keys_path_;
    extra["MATRICXON_ADMIN_TOKEN"] = kAdminToken;
    // A fresh log per start: a restart must not find the last one's port.
    const std::string log = dir_ + "/server" + std::to_string(++starts_) + ".log";
    return server_.Start({"--threads", "1", "--ctx-size", "512"}, extra, log, error);
  }
  void StartOrFail(const std::string& keys, std::map<std::string, std::string> extra = {}) {
    std::string error;
    ASSERT_TRUE(Start(keys, std::move(extra), &error)) << error;
  }
  int port() const { return server_.port(); }
  // Waits until the log holds `needle` `times` times (or 10 s pass).
  bool WaitForLog(const std::string& needle, int times = 1) {
    for (int i = 0; i < 200; ++i) {
      const std::string log = server_.Log();
      int n = 0;
      for (size_t at = log.find(needle); at != std::string::npos; at = log.find(needle, at + 1))
        ++n;
      if (n >= times) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    return false;
  }
  int Chat(const std::string& key, const std::string& user = "") {
    return Send(port(), "POST", "/v1/chat/completions", ChatBody("Hello there", user), key).status;
  }

  std::string dir_, keys_path_;
  int starts_ = 0;
  ServerProcess server_;
};

const std::string kKeys = "# test keys\n" + kAcmeKey + " acme\n" + kBetaKey + " beta\n" +
                          kPairingKey + " pairing trusted\n";

TEST_F(TenantServerTest, TheApiRoutesNeedAKey) {
  StartOrFail(kKeys);
  ExpectApiKeyRefused(Send(port(), "POST", "/v1/chat/completions", ChatBody("Hi"), ""));
  ExpectApiKeyRefused(
      Send(port(), "POST", "/v1/chat/completions", ChatBody("Hi"), "wrong-key-0123456789abcdef"));
  ExpectApiKeyRefused(Send(port(), "POST", "/v1/chat/completions", ChatBody("Hi"), kAcmeKey + "x"));
  {
    httplib::Client cli("127.0.0.1", port());
    auto basic = cli.Post("/v1/chat/completions", {{"Authorization", "Basic " + kAcmeKey}},
                          ChatBody("Hi"), "application/json");
    ASSERT_TRUE(basic);
    EXPECT_EQ(basic->status, 401);
  }
  EXPECT_EQ(Chat(kAcmeKey), 200);
  const std::string tokens = Json{{"tokens", {1, 2}}}.dump();
  const std::string content = Json{{"content", "hi"}}.dump();
  for (const auto& [method, path, body] :
       std::vector<std::tuple<std::string, std::string, std::string>>{
           {"POST", "/v1/completions", Json{{"prompt", "Hi"}, {"max_tokens", 1}}.dump()},
           {"GET", "/v1/models", ""},
           {"POST", "/tokenize", content},
           {"POST", "/detokenize", tokens},
           {"POST", "/apply-template", ChatBody("Hi")}}) {
    ExpectApiKeyRefused(Send(port(), method, path, body, ""));
    ExpectApiKeyRefused(
        Send(port(), method, path, body, kAdminToken));  // the admin token is no API key
    Answer ok = Send(port(), method, path, body, kBetaKey);
    EXPECT_EQ(ok.status, 200) << method << " " << path << ": " << ok.raw;
  }
  // A HEAD of a guarded GET route is guarded too.
  httplib::Client cli("127.0.0.1", port());
  auto head = cli.Head("/v1/models");
  ASSERT_TRUE(head);
  EXPECT_EQ(head->status, 401);
}

TEST_F(TenantServerTest, HealthStaysOpenAndAdminRoutesNeedTheAdminToken) {
  StartOrFail(kKeys);
  EXPECT_EQ(Send(port(), "GET", "/health", "", "").status, 200);
  EXPECT_EQ(Send(port(), "GET", "/api/models", "", "").status, 200);
  EXPECT_EQ(Send(port(), "GET", "/metrics", "", "").status, 200);  // sharing "all": stats stay open
  for (const std::string& key : {std::string(), kAcmeKey, kPairingKey}) {
    Answer a = Send(port(), "POST", "/api/models/tiny/load", "", key);
    EXPECT_EQ(a.status, 401) << a.raw;
    EXPECT_EQ(a.body["error"]["code"], "unauthorized") << a.raw;
  }
  EXPECT_EQ(Send(port(), "POST", "/api/models/tiny/load", "", kAdminToken).status, 200);
  Answer routes = Send(port(), "GET", "/api/routes", "", "");
  ASSERT_EQ(routes.status, 200);
  std::map<std::string, std::string> access;
  for (const Json& r : routes.body["routes"])
    access[r["method"].get<std::string>() + " " + r["path"].get<std::string>()] = r["access"];
  EXPECT_EQ(access["POST /v1/chat/completions"], "api_key");
  EXPECT_EQ(access["POST /tokenize"], "api_key");
  EXPECT_EQ(access["GET /health"], "open");
  EXPECT_EQ(access["GET /api/cache"], "open");
  EXPECT_EQ(access["POST /api/models/{name}/load"], "admin");
}

TEST_F(TenantServerTest, AKeysFileOpenToOthersStopsStartUp) {
  WriteKeys(keys_path_, kKeys,
            fs::perms::owner_read | fs::perms::owner_write | fs::perms::group_read |
                fs::perms::others_read);
  std::string error;
  ASSERT_FALSE(Start("", {}, &error));
  EXPECT_NE(error.find("API keys file " + keys_path_ + " has mode 0644"), std::string::npos)
      << error;
  EXPECT_NE(error.find("chmod 600"), std::string::npos) << error;
}

TEST_F(TenantServerTest, ABadKeysFileStopsStartUpNamingTheLine) {
  std::string error;
  ASSERT_FALSE(Start(kKeys + kNewKey + " acme admin\n", {}, &error));
  EXPECT_NE(error.find(keys_path_ + " line 5: unknown word 'admin'"), std::string::npos) << error;
  EXPECT_EQ(error.find(kNewKey), std::string::npos) << "a key in the log: " << error;
}

TEST_F(TenantServerTest, TenantSharingWithoutKeysStopsStartUp) {
  std::string error;
  ASSERT_FALSE(server_.Start({"--prompt-cache-sharing", "tenant"},
                             {{"MATRICXON_MODELS_DIR", dir_ + "/models"}}, dir_ + "/server.log",
                             &error));
  EXPECT_NE(error.find("MATRICXON_PROMPT_CACHE_SHARING=tenant needs MATRICXON_API_KEYS_FILE"),
            std::string::npos)
      << error;
}

TEST_F(TenantServerTest, SighupReReadsTheKeysAndABrokenFileKeepsThem) {
  StartOrFail(kKeys);
  EXPECT_EQ(Chat(kNewKey), 401);
  // A new key, a removed line.
  WriteKeys(keys_path_, kAcmeKey + " acme\n" + kNewKey + " newcomer\n");
  kill(server_.pid(), SIGHUP);
  ASSERT_TRUE(WaitForLog("API keys re-read: 2 from " + keys_path_)) << server_.Log();
  EXPECT_EQ(Chat(kNewKey), 200);
  EXPECT_EQ(Chat(kAcmeKey), 200);
  ExpectApiKeyRefused(Send(port(), "POST", "/v1/chat/completions", ChatBody("Hi"), kBetaKey));
  // A broken file (a line without a tenant) and then one open to others: the keys stay.
  WriteKeys(keys_path_, kBetaKey + "\n");
  kill(server_.pid(), SIGHUP);
  ASSERT_TRUE(WaitForLog("API keys not re-read; the 2 keys in force stay")) << server_.Log();
  EXPECT_NE(server_.Log().find("line 1: a key without a tenant"), std::string::npos)
      << server_.Log();
  WriteKeys(keys_path_, kBetaKey + " beta\n",
            fs::perms::owner_read | fs::perms::owner_write | fs::perms::others_read);
  kill(server_.pid(), SIGHUP);
  ASSERT_TRUE(WaitForLog("API keys not re-read; the 2 keys in force stay", 2)) << server_.Log();
  EXPECT_EQ(Chat(kNewKey), 200);
  EXPECT_EQ(Chat(kAcmeKey), 200);
  EXPECT_EQ(Chat(kBetaKey), 401);
  // The server still stops cleanly on SIGTERM after the reloads.
  int status = server_.StopWith(SIGTERM);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
}

TEST_F(TenantServerTest, ATrustedKeyNamesItsUsersAnUntrustedKeyCannot) {
  StartOrFail(kKeys);
  EXPECT_EQ(Chat(kPairingKey, "u1"), 200);
  ASSERT_TRUE(WaitForLog("/v1/chat/completions -> 200")) << server_.Log();
  EXPECT_NE(server_.Log().find(", tenant pairing/u1)"), std::string::npos) << server_.Log();
  EXPECT_EQ(Chat(kPairingKey), 200);
  ASSERT_TRUE(WaitForLog(", tenant pairing)")) << server_.Log();
  EXPECT_EQ(Chat(kAcmeKey, "u1"), 200);  // an untrusted key's user is ignored
  ASSERT_TRUE(WaitForLog(", tenant acme)")) << server_.Log();
  EXPECT_EQ(server_.Log().find("acme/u1"), std::string::npos) << server_.Log();
  // Text completions too.
  Answer text = Send(port(), "POST", "/v1/completions",
                     Json{{"prompt", "Hi"}, {"max_tokens", 1}, {"user", "u2"}}.dump(), kPairingKey);
  EXPECT_EQ(text.status, 200) << text.raw;
  ASSERT_TRUE(WaitForLog(", tenant pairing/u2)")) << server_.Log();
  // A trusted key's user is checked; an untrusted key's is not looked at.
  for (const std::string& bad : {std::string("a b"), std::string("a/b"), std::string(129, 'u')}) {
    Answer a = Send(port(), "POST", "/v1/chat/completions", ChatBody("Hi", bad), kPairingKey);
    EXPECT_EQ(a.status, 400) << a.raw;
    EXPECT_EQ(a.body["error"]["param"], "user") << a.raw;
    EXPECT_EQ(Chat(kAcmeKey, bad), 200);
  }
  Answer typed = Send(
      port(), "POST", "/v1/chat/completions",
      Json{{"messages", {{{"role", "user"}, {"content", "Hi"}}}}, {"user", 7}}.dump(), kAcmeKey);
  EXPECT_EQ(typed.status, 400) << typed.raw;
}

TEST_F(TenantServerTest, TenantSharingKeepsTheCacheStatsForTheAdmin) {
  StartOrFail(kKeys, {{"MATRICXON_PROMPT_CACHE_SHARING", "tenant"}});
  EXPECT_EQ(Chat(kAcmeKey), 200);
  // /api/models counts each model's active requests: others' activity.
  for (const char* path : {"/api/cache", "/metrics", "/api/cache/persistence", "/api/models"}) {
    for (const std::string& key : {std::string(), kAcmeKey, kPairingKey}) {
      Answer a = Send(port(), "GET", path, "", key);
      EXPECT_EQ(a.status, 401) << path << ": " << a.raw;
    }
    EXPECT_EQ(Send(port(), "GET", path, "", kAdminToken).status, 200) << path;
  }
  EXPECT_EQ(Send(port(), "GET", "/health", "", "").status, 200);
}

// --- Isolation of the prompt cache (the engine honours the request's tenant).

const std::string kSystem =
    "You are the assistant of a small team. Keep answers short, cite the notes, and say when you "
    "do not know. The notes: the prompt cache keeps every chat's state so that the next turn "
    "reads only its new tokens.";

// A chat's reply: prompt tokens and how many of them came from the cache.
struct Reuse {
  int64_t prompt_tokens = -1, cached = -1;
};

class TenantCacheTest : public TenantServerTest {
 protected:
  Reuse Ask(const std::string& key, const std::string& question, const std::string& user = "") {
    Json b = {
        {"model", "tiny"},
        {"messages",
         {{{"role", "system"}, {"content", kSystem}}, {{"role", "user"}, {"content", question}}}},
        {"max_tokens", 4},
        {"temperature", 0}};
    if (!user.empty()) b["user"] = user;
    Answer a = Send(port(), "POST", "/v1/chat/completions", b.dump(), key);
    EXPECT_EQ(a.status, 200) << a.raw;
    if (a.status != 200) return {};
    Reuse r{a.body["usage"]["prompt_tokens"].get<int64_t>(),
            a.body["usage"]["prompt_tokens_details"]["cached_tokens"].get<int64_t>()};
    EXPECT_EQ(a.body["timings"]["cache_n"].get<int64_t>(), r.cached) << a.raw;
    return r;
  }
};

const std::string kQuestion = "What does the cache keep?";

TEST_F(TenantCacheTest, TenantSharingKeepsEachTenantsCachedStartsToItself) {
  StartOrFail(kKeys, {{"MATRICXON_PROMPT_CACHE_SHARING", "tenant"}});
  Reuse a1 = Ask(kAcmeKey, kQuestion);
  EXPECT_EQ(a1.cached, 0);
  Reuse b1 = Ask(kBetaKey, kQuestion);  // the very prompt acme has cached
  EXPECT_EQ(b1.cached, 0);
  Reuse a2 = Ask(kAcmeKey, kQuestion);
  EXPECT_GT(a2.cached, a1.prompt_tokens / 2) << "acme's repeat reuses its own chat";
  Reuse b2 = Ask(kBetaKey, kQuestion);
  EXPECT_GT(b2.cached, b1.prompt_tokens / 2) << "and beta its own";
}

TEST_F(TenantCacheTest, SharingAllSharesCachedStartsAcrossTenants) {
  StartOrFail(kKeys);
  Reuse a1 = Ask(kAcmeKey, kQuestion);
  EXPECT_EQ(a1.cached, 0);
  Reuse b1 = Ask(kBetaKey, kQuestion);
  EXPECT_GT(b1.cached, a1.prompt_tokens / 2) << "sharing all: beta reuses acme's start";
}

TEST_F(TenantCacheTest, ATrustedKeysUsersAreIsolatedAnUntrustedKeysAreNot) {
  StartOrFail(kKeys, {{"MATRICXON_PROMPT_CACHE_SHARING", "tenant"}});
  EXPECT_EQ(Ask(kPairingKey, kQuestion, "u1").cached, 0);
  EXPECT_EQ(Ask(kPairingKey, kQuestion, "u2").cached, 0);
  EXPECT_EQ(Ask(kPairingKey, kQuestion).cached, 0);  // tenant "pairing" itself is a third
  EXPECT_GT(Ask(kPairingKey, kQuestion, "u1").cached, 0);
  // An untrusted key's users are all its tenant: they share.
  EXPECT_EQ(Ask(kAcmeKey, kQuestion, "u1").cached, 0);
  EXPECT_GT(Ask(kAcmeKey, kQuestion, "u2").cached, 0);
}

TEST_F(TenantCacheTest, SavedCachesStayWithTheirTenantAcrossARestart) {
  StartOrFail(kKeys, {{"MATRICXON_PROMPT_CACHE_SHARING", "tenant"}});
  const Reuse a1 = Ask(kAcmeKey, kQuestion);
  ASSERT_EQ(server_.StopWith(SIGTERM) & 0xffff, 0);  // writes RAM to the saved caches
  StartOrFail(kKeys, {{"MATRICXON_PROMPT_CACHE_SHARING", "tenant"}});
  EXPECT_EQ(Ask(kBetaKey, kQuestion).cached, 0) << server_.Log();
  Reuse a2 = Ask(kAcmeKey, kQuestion);
  EXPECT_GT(a2.cached, a1.prompt_tokens / 2) << server_.Log();
  EXPECT_NE(server_.Log().find("from disk"), std::string::npos) << server_.Log();
}

TEST_F(TenantCacheTest, ForgettingATenantIsForTheAdmin) {
  const std::string percent_key = "percent-key-0123456789abcdef";
  StartOrFail(kKeys + percent_key + " team%41\n", {{"MATRICXON_PROMPT_CACHE_SHARING", "tenant"}});
  EXPECT_EQ(Ask(kPairingKey, kQuestion, "u1").cached, 0);
  EXPECT_EQ(Ask(kPairingKey, kQuestion, "u2").cached, 0);
  EXPECT_EQ(Ask(percent_key, kQuestion).cached, 0);
  for (const std::string& key : {std::string(), kPairingKey}) {
    EXPECT_EQ(Send(port(), "DELETE", "/api/cache/tenants/pairing%2Fu1", "", key).status, 401);
  }
  Answer forgot = Send(port(), "DELETE", "/api/cache/tenants/pairing%2Fu1", "", kAdminToken);
  ASSERT_EQ(forgot.status, 200) << forgot.raw;
  EXPECT_EQ(forgot.body["tenant"], "pairing/u1") << forgot.raw;
  EXPECT_EQ(
      forgot.body["ram"]["entries"].get<int64_t>() + forgot.body["ram"]["in_use"].get<int64_t>(), 1)
      << forgot.raw;
  EXPECT_EQ(Ask(kPairingKey, kQuestion, "u1").cached, 0) << "u1's chat is gone";
  EXPECT_GT(Ask(kPairingKey, kQuestion, "u2").cached, 0) << "u2's is not";
  // A tenant's own '%' is one percent-encoded character of the path, decoded once.
  Answer percent = Send(port(), "DELETE", "/api/cache/tenants/team%2541", "", kAdminToken);
  ASSERT_EQ(percent.status, 200) << percent.raw;
  EXPECT_EQ(percent.body["tenant"], "team%41") << percent.raw;
  EXPECT_EQ(Ask(percent_key, kQuestion).cached, 0);
}

}  // namespace
}  // namespace mx::testing
