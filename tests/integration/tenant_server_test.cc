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
    return server_.Start({"--threads", "1", "--ctx-size", "512"}, extra, dir_ + "/server.log",
                         error);
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
  for (const char* path : {"/api/cache", "/metrics", "/api/cache/persistence"}) {
    for (const std::string& key : {std::string(), kAcmeKey, kPairingKey}) {
      Answer a = Send(port(), "GET", path, "", key);
      EXPECT_EQ(a.status, 401) << path << ": " << a.raw;
    }
    EXPECT_EQ(Send(port(), "GET", path, "", kAdminToken).status, 200) << path;
  }
  EXPECT_EQ(Send(port(), "GET", "/health", "", "").status, 200);
}

}  // namespace
}  // namespace mx::testing
