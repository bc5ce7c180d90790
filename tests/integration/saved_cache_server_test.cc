// Saved caches through the real server (SPEC §5-§8): a chat goes on from
// disk after a restart, another model file or another key never loads a
// file, a crash leaves no file that loads, the policy API validates, saves
// and applies, and `matricxon cache ls/verify/purge` work on the folder.
// Every test that gets a reply from a saved cache checks it against the
// reply read from scratch (cache_prompt: false): nothing wrong is loaded.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include <algorithm>
#include <fstream>
#include <thread>

#include "http_helpers.h"
#include "server_process.h"

namespace mx::testing {
namespace {

Reply Send(int port, const std::string& method, const std::string& path, const std::string& body = "",
           const std::string& token = "") {
  httplib::Client cli("127.0.0.1", port);
  cli.set_read_timeout(60, 0);
  httplib::Headers headers;
  if (!token.empty()) headers.emplace("Authorization", "Bearer " + token);
  httplib::Result res = method == "PUT"      ? cli.Put(path, headers, body, "application/json")
                        : method == "DELETE" ? cli.Delete(path, headers)
                                             : cli.Get(path, headers);
  return ToReply(res);
}

std::string ReadAll(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

const std::string kSystem =
    "You are the assistant of a small team. Keep answers short, cite the notes, and say when you do not know. "
    "The notes: saved caches keep every chat's state on disk so that a restarted server reads only new tokens.";
const std::string kSecretWord = "Quetzalcoatlus";

class SavedCacheServerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    signal(SIGPIPE, SIG_IGN);
    dir_ = TempDir(std::string("saved_") + ::testing::UnitTest::GetInstance()->current_test_info()->name());
    cache_dir_ = dir_ + "/prompt_cache";
    ASSERT_TRUE(MakeModel(dir_ + "/models/tiny.gguf"));
  }
  void TearDown() override {
    server_.reset();
    fs::remove_all(dir_);
  }

  // Starts a fresh server process on the same folders.
  void Start(std::vector<std::string> args = {}, std::map<std::string, std::string> env = {}) {
    server_ = std::make_unique<ServerProcess>();
    args.insert(args.end(), {"--threads", "1"});
    if (std::find(args.begin(), args.end(), "--ctx-size") == args.end()) {
      args.insert(args.end(), {"--ctx-size", "1024"});
    }
    env.emplace("MATRICXON_MODELS_DIR", dir_ + "/models");
    env.emplace("MATRICXON_PROMPT_CACHE_DIR", cache_dir_);
    std::string error;
    ASSERT_TRUE(server_->Start(args, env, dir_ + "/server" + std::to_string(++starts_) + ".log", &error)) << error;
  }
  // SIGTERM: flush, then exit 0.
  void Stop() {
    const int status = server_->StopWith(SIGTERM);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
  }
  int port() const { return server_->port(); }
  std::string Log() const { return server_->Log(); }

  Json Persistence() { return Send(port(), "GET", "/api/cache/persistence").body; }
  // The start-up check runs in the background: wait until it indexed n files.
  void WaitForFiles(size_t n) {
    for (int i = 0; i < 200 && Persistence()["files"].get<size_t>() < n; ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    ASSERT_GE(Persistence()["files"].get<size_t>(), n) << Log();
  }
  std::vector<std::string> SavedFiles(const std::string& suffix = ".mxpc") const {
    std::vector<std::string> out;
    if (!fs::exists(cache_dir_)) return out;
    for (const auto& e : fs::directory_iterator(cache_dir_)) {
      const std::string name = e.path().filename().string();
      if (name.size() > suffix.size() && name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0) {
        out.push_back(e.path().string());
      }
    }
    return out;
  }

  std::string dir_, cache_dir_;
  int starts_ = 0;
  std::unique_ptr<ServerProcess> server_;
};

TEST_F(SavedCacheServerTest, RestartedServerGoesOnFromDisk) {
  Start();
  std::vector<Msg> chat = {{"system", kSystem}, {"user", "Remember the word " + kSecretWord + ", please."}};
  Turn t1 = Chat(port(), chat);
  Reply ids = Post(port(), "/tokenize", Json{{"model", "tiny"}, {"content", kSecretWord + " please"}}.dump());
  ASSERT_EQ(ids.status, 200) << ids.raw;
  Stop();
  EXPECT_NE(Log().find("flushed 1 cached chats to disk"), std::string::npos) << Log();

  // The file holds neither the text nor the token ids in the clear.
  auto files = SavedFiles();
  ASSERT_EQ(files.size(), 1u);
  EXPECT_TRUE(SavedFiles(".tmp").empty());
  const std::string bytes = ReadAll(files[0]);
  EXPECT_EQ(bytes.find(kSecretWord), std::string::npos);
  std::string id_bytes;
  for (const auto& id : ids.body["tokens"]) {
    const int32_t v = id.get<int32_t>();
    id_bytes.append(reinterpret_cast<const char*>(&v), 4);
  }
  ASSERT_GE(id_bytes.size(), 12u);
  EXPECT_EQ(bytes.find(id_bytes), std::string::npos);
  struct stat st {};
  ASSERT_EQ(stat(cache_dir_.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0700u);
  ASSERT_EQ(stat((cache_dir_ + "/prompt_cache.key").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);

  Start();
  WaitForFiles(1);
  Reply metrics = Get(port(), "/metrics");
  EXPECT_NE(metrics.raw.find("matricxon_saved_cache_files 1"), std::string::npos) << metrics.raw;
  chat.push_back({"assistant", t1.text});
  chat.push_back({"user", "Which word was it?"});
  Turn t2 = Chat(port(), chat);
  EXPECT_GE(t2.cached, t1.prompt_tokens);
  EXPECT_NE(Log().find("reused " + std::to_string(t2.cached) + " of " + std::to_string(t2.prompt_tokens) +
                       " tokens from disk"),
            std::string::npos)
      << Log();
  EXPECT_EQ(Chat(port(), chat, 8, /*cache=*/false).text, t2.text);
}

// A chat saved at shutdown, then trimmed by its client (oldest exchange
// dropped, system prompt kept) after the restart: the saved state is loaded,
// the trimmed span removed (context shift) and only the new tail read.
TEST_F(SavedCacheServerTest, TrimmedChatShiftsFromDiskAfterARestart) {
  Start();
  std::vector<Msg> chat = {{"system", kSystem}};
  for (const char* q : {"first question about the cache?", "second question about tokens?",
                        "third question about the state?"}) {
    chat.push_back({"user", q});
    Turn t = Chat(port(), chat);
    chat.push_back({"assistant", t.text});
  }
  Stop();
  Start();
  WaitForFiles(1);
  chat.erase(chat.begin() + 1, chat.begin() + 3);  // the client drops the oldest exchange
  chat.push_back({"user", "fourth question after the trim?"});
  Turn t = Chat(port(), chat);
  EXPECT_GE(t.cached, t.prompt_tokens - 45) << Log();
  EXPECT_NE(Log().find("from disk after a context shift"), std::string::npos) << Log();
}

TEST_F(SavedCacheServerTest, ChatEvictedFromRamComesBackFromDisk) {
  Start({"--prompt-cache-slots", "1"});
  std::vector<Msg> a = {{"system", kSystem}, {"user", "alpha alpha alpha"}};
  Turn a1 = Chat(port(), a);
  Chat(port(), {{"user", "beta beta beta"}});  // a leaves RAM, written while the model is idle
  for (int i = 0; i < 200 && Persistence()["files"].get<int>() < 1; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  a.push_back({"assistant", a1.text});
  a.push_back({"user", "more"});
  Turn a2 = Chat(port(), a);
  EXPECT_GE(a2.cached, a1.prompt_tokens);
  EXPECT_NE(Log().find("tokens from disk"), std::string::npos) << Log();
  EXPECT_EQ(Chat(port(), a, 8, /*cache=*/false).text, a2.text);
}

TEST_F(SavedCacheServerTest, UnloadSavesTheModelsChats) {
  Start();
  std::vector<Msg> chat = {{"system", kSystem}, {"user", "before the unload"}};
  Turn t1 = Chat(port(), chat);
  EXPECT_EQ(Persistence()["files"], 0);  // still in RAM
  Reply r = Post(port(), "/api/models/tiny/unload", "{}");
  ASSERT_EQ(r.status, 200) << r.raw;
  // The unload queued the chat; the idle server writes it right away.
  WaitForFiles(1);
  EXPECT_EQ(Persistence()["files"], 1);
  chat.push_back({"assistant", t1.text});
  chat.push_back({"user", "after it"});
  Turn t2 = Chat(port(), chat);  // loads the model again, and the chat from disk
  EXPECT_GE(t2.cached, t1.prompt_tokens);
  EXPECT_NE(Log().find("tokens from disk"), std::string::npos) << Log();
  EXPECT_EQ(Chat(port(), chat, 8, /*cache=*/false).text, t2.text);
}

TEST_F(SavedCacheServerTest, AnotherModelFileNeverUsesTheSavedCache) {
  Start();
  std::vector<Msg> chat = {{"system", kSystem}, {"user", "First question?"}};
  Turn t1 = Chat(port(), chat);
  Stop();
  ASSERT_EQ(SavedFiles().size(), 1u);
  // The same name, another file (other weights).
  const std::string cmd = BinaryPath() + " make-model --out " + dir_ + "/models/tiny.gguf --seed 2 --quiet";
  ASSERT_EQ(std::system(cmd.c_str()), 0);
  Start();
  WaitForFiles(1);
  chat.push_back({"assistant", t1.text});
  chat.push_back({"user", "Second question?"});
  Turn t2 = Chat(port(), chat);
  EXPECT_EQ(t2.cached, 0);
  EXPECT_NE(Log().find("re-reading the entire chat (" + std::to_string(t2.prompt_tokens) +
                       " tokens): the saved cache was made by another model"),
            std::string::npos)
      << Log();
  EXPECT_EQ(Chat(port(), chat, 8, /*cache=*/false).text, t2.text);
}

// A chat saved by a server running q8_0 KV rows goes on from disk, exactly,
// under q8_0 after a restart; a server running f16 never loads the file
// (its rows are another layout) and says so. The RAM pool counts q8_0 rows
// at their real size.
TEST_F(SavedCacheServerTest, KvTypeOfTheFileMustBeTheServers) {
  auto ram_bytes = [&] {
    const Json c = Get(port(), "/api/cache").body;
    return c["models"][0]["used_bytes"].get<int64_t>();
  };
  Start({"--kv-type", "q8_0"});
  std::vector<Msg> chat = {{"system", kSystem},
                           {"user", "Remember the word " + kSecretWord + ", please."}};
  Turn t1 = Chat(port(), chat);
  const int64_t q8_bytes = ram_bytes();
  Stop();
  ASSERT_EQ(SavedFiles().size(), 1u);
  // `cache ls` says which KV type the file needs.
  const std::string ls = "env -u MATRICXON_CACHE_KEY " + BinaryPath() + " cache ls --dir " +
                         cache_dir_ + " --models-dir " + dir_ + "/models > " + dir_ +
                         "/ls.out 2>&1";
  ASSERT_EQ(std::system(ls.c_str()), 0);
  EXPECT_NE(ReadAll(dir_ + "/ls.out").find("model tiny (match, KV cache type q8_0)"),
            std::string::npos)
      << ReadAll(dir_ + "/ls.out");

  Start({}, {{"MATRICXON_KV_TYPE", "q8_0"}});
  WaitForFiles(1);
  chat.push_back({"assistant", t1.text});
  chat.push_back({"user", "Which word was it?"});
  Turn t2 = Chat(port(), chat);
  EXPECT_GE(t2.cached, t1.prompt_tokens) << Log();
  EXPECT_NE(Log().find("tokens from disk"), std::string::npos) << Log();
  EXPECT_EQ(Chat(port(), chat, 8, /*cache=*/false).text, t2.text);
  Stop();

  Start();  // f16, the default
  WaitForFiles(1);
  chat.push_back({"assistant", t2.text});
  chat.push_back({"user", "And once more?"});
  Turn t3 = Chat(port(), chat);
  EXPECT_EQ(t3.cached, 0);
  EXPECT_NE(Log().find(
                "re-reading the entire chat (" + std::to_string(t3.prompt_tokens) +
                " tokens): the saved cache was made with KV cache type q8_0 (this model runs f16)"),
            std::string::npos)
      << Log();
  EXPECT_EQ(Chat(port(), chat, 8, /*cache=*/false).text, t3.text);
  // The f16 chat is longer than the q8_0 one was and its rows twice the size
  // per token: its pool entry takes more memory (whole pages per layer).
  EXPECT_GT(ram_bytes(), q8_bytes);
}

TEST_F(SavedCacheServerTest, ChangedPassphraseDeletesOldFilesAndChatsGoOn) {
  Start({}, {{"MATRICXON_CACHE_KEY", "first passphrase"}});
  std::vector<Msg> chat = {{"system", kSystem}, {"user", "Hello?"}};
  Turn t1 = Chat(port(), chat);
  EXPECT_EQ(Persistence()["key_source"], "passphrase");
  Stop();
  ASSERT_EQ(SavedFiles().size(), 1u);
  EXPECT_FALSE(fs::exists(cache_dir_ + "/prompt_cache.key"));  // a passphrase never writes a key file

  Start({}, {{"MATRICXON_CACHE_KEY", "second passphrase"}});
  for (int i = 0; i < 200 && Log().find("saved caches checked") == std::string::npos; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  EXPECT_NE(Log().find("removed 0 damaged, 1 sealed with another key"), std::string::npos) << Log();
  EXPECT_TRUE(SavedFiles().empty());
  chat.push_back({"assistant", t1.text});
  chat.push_back({"user", "Still there?"});
  Turn t2 = Chat(port(), chat);
  EXPECT_EQ(t2.cached, 0);
  EXPECT_EQ(Chat(port(), chat, 8, /*cache=*/false).text, t2.text);
}

// A second server on a folder another server uses (another key here: its
// start-up would delete the first one's files as undecryptable) refuses to
// start and says why; the first one's saved chat stays and loads. A cluster
// node cannot join a folder that a plain server holds either.
TEST_F(SavedCacheServerTest, ASecondServerOnTheFolderRefusesToStart) {
  Start({}, {{"MATRICXON_CACHE_KEY", "first passphrase"}});
  std::vector<Msg> chat = {{"system", kSystem}, {"user", "a chat the first server keeps"}};
  const Turn t1 = Chat(port(), chat);
  ASSERT_EQ(Post(port(), "/api/models/tiny/unload", "{}").status, 200);
  WaitForFiles(1);
  for (const auto& env : std::vector<std::map<std::string, std::string>>{
           {{"MATRICXON_CACHE_KEY", "another passphrase"}},
           {{"MATRICXON_CACHE_KEY", "first passphrase"}, {"MATRICXON_CLUSTER_NODE", "true"}},
           {{"MATRICXON_PERSIST_PROMPT_CACHE", "false"}}}) {
    ServerProcess second;
    std::map<std::string, std::string> e = env;
    e.emplace("MATRICXON_MODELS_DIR", dir_ + "/models");
    e.emplace("MATRICXON_PROMPT_CACHE_DIR", cache_dir_);
    std::string error;
    EXPECT_FALSE(second.Start({"--threads", "1"}, e, dir_ + "/second.log", &error));
    EXPECT_NE(error.find("is in use by another Matricxon server"), std::string::npos) << error;
  }
  EXPECT_EQ(SavedFiles().size(), 1u);
  EXPECT_EQ(Persistence()["files"], 1);
  chat.push_back({"assistant", t1.text});
  chat.push_back({"user", "still there?"});
  EXPECT_GE(Chat(port(), chat).cached, t1.prompt_tokens);
  Stop();
  // Once it is gone, the folder is free again.
  Start({}, {{"MATRICXON_CACHE_KEY", "first passphrase"}});
  WaitForFiles(1);
}

TEST_F(SavedCacheServerTest, CrashLeavesNoFileThatLoads) {
  Start({"--prompt-cache-slots", "1"});
  std::vector<std::vector<Msg>> chats;
  for (int i = 0; i < 6; ++i) {
    chats.push_back({{"system", kSystem}, {"user", "chat number " + std::to_string(i) + " asks something"}});
    Chat(port(), chats.back());
  }
  WaitForFiles(1);  // some evictions are written once the loop is idle...
  chats.push_back({{"system", kSystem}, {"user", "one more chat"}});
  Chat(port(), chats.back());
  // ...and the kill may land while it writes the last ones.
  server_->StopWith(SIGKILL);
  // What a crash mid-save can leave: a temporary, and (were publication not
  // atomic) a cut-off file under a final name.
  auto files = SavedFiles();
  ASSERT_FALSE(files.empty());
  const std::string whole = ReadAll(files[0]);
  std::ofstream(cache_dir_ + "/0123456789abcdef0123456789abcdef.mxpc.tmp", std::ios::binary)
      << whole.substr(0, whole.size() / 2);
  std::ofstream(cache_dir_ + "/fedcba9876543210fedcba9876543210.mxpc", std::ios::binary)
      << whole.substr(0, whole.size() / 2);

  Start({"--prompt-cache-slots", "1"});
  for (int i = 0; i < 200 && Log().find("saved caches checked") == std::string::npos; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  // Ours, plus any the kill cut off mid-save.
  EXPECT_NE(Log().find("removed 1 damaged"), std::string::npos) << Log();
  EXPECT_NE(Log().find(" stale temporaries"), std::string::npos) << Log();
  EXPECT_EQ(Log().find(" 0 stale temporaries"), std::string::npos) << Log();
  EXPECT_FALSE(fs::exists(cache_dir_ + "/fedcba9876543210fedcba9876543210.mxpc"));
  EXPECT_TRUE(SavedFiles(".tmp").empty());
  for (auto& c : chats) {
    c.push_back({"assistant", "ok"});
    c.push_back({"user", "and?"});
    Turn cached = Chat(port(), c);
    EXPECT_EQ(Chat(port(), c, 8, /*cache=*/false).text, cached.text);
  }
}

TEST_F(SavedCacheServerTest, PolicyApiValidatesSavesAndApplies) {
  Start({}, {{"MATRICXON_ADMIN_TOKEN", "s3cret"}});
  Json p = Persistence();
  EXPECT_EQ(p["enabled"], true);
  EXPECT_EQ(p["budget_mb"], 4096);
  EXPECT_EQ(p["ttl_hours"], 168);
  EXPECT_EQ(p["used_bytes"], 0);
  EXPECT_EQ(p["files"], 0);
  EXPECT_EQ(p["key_source"], "generated");

  const std::string path = "/api/cache/persistence";
  EXPECT_EQ(Send(port(), "PUT", path, R"({"budget_mb": 10})").status, 401);
  EXPECT_EQ(Send(port(), "DELETE", path).status, 401);
  struct Bad {
    std::string body, field;
  };
  for (const Bad& bad : std::vector<Bad>{{"{nope", "JSON"},
                                         {R"({"budget_mb": 0})", "budget_mb"},
                                         {R"({"budget_mb": "10"})", "budget_mb"},
                                         {R"({"ttl_hours": -3})", "ttl_hours"},
                                         {R"({"ttl_hours": 2.5})", "ttl_hours"},
                                         {R"({"enabled": 1})", "enabled"},
                                         {R"({"budget_mb": 5, "colour": "red"})", "colour"}}) {
    Reply r = Send(port(), "PUT", path, bad.body, "s3cret");
    EXPECT_EQ(r.status, 400) << bad.body << " " << r.raw;
    EXPECT_NE(r.raw.find(bad.field), std::string::npos) << bad.body << " " << r.raw;
  }
  EXPECT_EQ(Persistence(), p);  // nothing changed
  EXPECT_FALSE(fs::exists(cache_dir_ + "/prompt_cache_policy.json"));

  // Two chats saved, then a budget too small for them evicts at once.
  Chat(port(), {{"system", kSystem}, {"user", "one"}});
  Chat(port(), {{"user", "two two"}});
  Reply del = Send(port(), "DELETE", path, "", "s3cret");  // nothing saved yet (the pool holds them)
  ASSERT_EQ(del.status, 200) << del.raw;
  EXPECT_EQ(del.body["deleted_files"], 0);
  Stop();
  ASSERT_EQ(SavedFiles().size(), 2u);

  Start({}, {{"MATRICXON_ADMIN_TOKEN", "s3cret"}, {"MATRICXON_PERSIST_CACHE_BUDGET_MB", "100"}});
  WaitForFiles(2);
  EXPECT_EQ(Persistence()["budget_mb"], 100);
  EXPECT_GT(Persistence()["used_bytes"].get<int64_t>(), 0);
  Reply put = Send(port(), "PUT", path, R"({"ttl_hours": 24})", "s3cret");
  ASSERT_EQ(put.status, 200) << put.raw;
  EXPECT_EQ(put.body["ttl_hours"], 24);
  EXPECT_EQ(put.body["files"], 2);
  EXPECT_TRUE(fs::exists(cache_dir_ + "/prompt_cache_policy.json"));
  Stop();

  // The saved policy wins over the environment from now on.
  Start({}, {{"MATRICXON_ADMIN_TOKEN", "s3cret"}, {"MATRICXON_PERSIST_CACHE_TTL_HOURS", "5"}});
  WaitForFiles(2);
  EXPECT_EQ(Persistence()["ttl_hours"], 24);
  EXPECT_EQ(Persistence()["budget_mb"], 100);
  del = Send(port(), "DELETE", path, "", "s3cret");
  ASSERT_EQ(del.status, 200) << del.raw;
  EXPECT_EQ(del.body["deleted_files"], 2);
  EXPECT_GT(del.body["deleted_bytes"].get<int64_t>(), 0);
  EXPECT_TRUE(SavedFiles().empty());
  EXPECT_EQ(Persistence()["files"], 0);
}

TEST_F(SavedCacheServerTest, ShrinkingTheBudgetDeletesFilesAtOnce) {
  Start({"--ctx-size", "2048"});
  std::string long_text;
  for (int i = 0; i < 600; ++i) long_text += "cache" + std::to_string(i % 10) + " ";
  Turn t = Chat(port(), {{"user", long_text}}, 4);
  Chat(port(), {{"user", "short one"}}, 4);
  Stop();
  auto files = SavedFiles();
  ASSERT_EQ(files.size(), 2u);
  uint64_t largest = 0;
  for (const auto& f : files) largest = std::max<uint64_t>(largest, fs::file_size(f));
  ASSERT_GT(largest, uint64_t{1} << 20) << t.prompt_tokens << " tokens";  // the long chat alone exceeds 1 MiB
  Start({"--ctx-size", "2048"});
  WaitForFiles(2);
  Reply put = Send(port(), "PUT", "/api/cache/persistence", R"({"budget_mb": 1})");
  ASSERT_EQ(put.status, 200) << put.raw;
  EXPECT_EQ(put.body["budget_mb"], 1);
  EXPECT_EQ(put.body["files"], 1);  // the long chat went at once, the short one fits
  EXPECT_LE(put.body["used_bytes"].get<uint64_t>(), uint64_t{1} << 20);
  EXPECT_EQ(SavedFiles().size(), 1u);
}

TEST_F(SavedCacheServerTest, TurningSavingOffDeletesEveryFile) {
  Start();
  Chat(port(), {{"system", kSystem}, {"user", "one"}});
  Stop();
  ASSERT_EQ(SavedFiles().size(), 1u);
  Start();
  WaitForFiles(1);
  Reply put = Send(port(), "PUT", "/api/cache/persistence", R"({"enabled": false})");
  ASSERT_EQ(put.status, 200) << put.raw;
  EXPECT_EQ(put.body["enabled"], false);
  EXPECT_TRUE(SavedFiles().empty());
  std::vector<Msg> chat = {{"user", "fresh chat"}};
  Turn t = Chat(port(), chat);
  EXPECT_NE(Log().find("re-reading the entire chat (" + std::to_string(t.prompt_tokens) +
                       " tokens): RAM holds no conversations; the disk cache is off"),
            std::string::npos)
      << Log();
  Stop();
  EXPECT_TRUE(SavedFiles().empty());  // nothing written while off, not even at shutdown
  // Off survives a restart (the policy file), even though the variable says on.
  Start({}, {{"MATRICXON_PERSIST_PROMPT_CACHE", "true"}});
  EXPECT_EQ(Persistence()["enabled"], false);
  put = Send(port(), "PUT", "/api/cache/persistence", R"({"enabled": true})");
  ASSERT_EQ(put.status, 200) << put.raw;
  EXPECT_EQ(put.body["enabled"], true);
}

TEST_F(SavedCacheServerTest, KeyFileReadableByOthersIsRefused) {
  Start();
  Stop();
  const std::string key = cache_dir_ + "/prompt_cache.key";
  ASSERT_TRUE(fs::exists(key));
  fs::permissions(key, fs::perms::owner_read | fs::perms::owner_write | fs::perms::group_read |
                           fs::perms::others_read);
  Start();
  Json p = Persistence();
  EXPECT_EQ(p["enabled"], false);
  EXPECT_NE(p["disabled_reason"].get<std::string>().find("has mode"), std::string::npos) << p.dump();
  EXPECT_NE(Log().find("prompt_cache.key has mode"), std::string::npos) << Log();
  // Turning it on cannot work either: 400 naming the field, nothing saved.
  Reply put = Send(port(), "PUT", "/api/cache/persistence", R"({"enabled": true, "ttl_hours": 1})");
  EXPECT_EQ(put.status, 400) << put.raw;
  EXPECT_EQ(put.body["error"]["param"], "enabled") << put.raw;
  EXPECT_FALSE(fs::exists(cache_dir_ + "/prompt_cache_policy.json"));
  EXPECT_EQ(Persistence()["ttl_hours"], 168);
  Turn t = Chat(port(), {{"user", "still answering"}});  // chats go on
  EXPECT_GT(t.prompt_tokens, 0);
}

TEST_F(SavedCacheServerTest, ClusterNodeWithoutKeyNeverCreatesOne) {
  Start({}, {{"MATRICXON_CLUSTER_NODE", "true"}});
  Json p = Persistence();
  EXPECT_EQ(p["enabled"], false);
  EXPECT_EQ(p["key_source"], "none");
  EXPECT_NE(Log().find("cluster node"), std::string::npos) << Log();
  Turn t = Chat(port(), {{"user", "hi"}});
  EXPECT_NE(Log().find("re-reading the entire chat (" + std::to_string(t.prompt_tokens) +
                       " tokens): RAM holds no conversations; the disk cache is off"),
            std::string::npos)
      << Log();
  Reply put = Send(port(), "PUT", "/api/cache/persistence", R"({"enabled": true})");
  EXPECT_EQ(put.status, 400) << put.raw;
  EXPECT_NE(put.raw.find("enabled"), std::string::npos);
  Stop();
  EXPECT_FALSE(fs::exists(cache_dir_ + "/prompt_cache.key"));
  EXPECT_TRUE(SavedFiles().empty());
}

TEST_F(SavedCacheServerTest, CacheCommandListsVerifiesAndPurges) {
  Start();
  Chat(port(), {{"system", kSystem}, {"user", "one"}});
  Stop();
  ASSERT_EQ(SavedFiles().size(), 1u);
  auto run = [&](const std::string& sub, std::string* out) {
    const std::string cmd = "env -u MATRICXON_CACHE_KEY " + BinaryPath() + " cache " + sub + " --dir " + cache_dir_ +
                            " --models-dir " + dir_ + "/models > " + dir_ + "/cli.out 2>&1";
    int rc = std::system(cmd.c_str());
    *out = ReadAll(dir_ + "/cli.out");
    return WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
  };
  std::string out;
  // With the folder's key: details from the decrypted metadata.
  EXPECT_EQ(run("ls", &out), 0) << out;
  EXPECT_NE(out.find("1 saved caches"), std::string::npos) << out;
  EXPECT_NE(out.find(" tokens  model tiny (match)  created 20"), std::string::npos) << out;
  EXPECT_NE(out.find("last used 20"), std::string::npos) << out;
  EXPECT_NE(out.find("1 match a model of"), std::string::npos) << out;
  EXPECT_EQ(out.find("not decrypted"), std::string::npos) << out;
  // Another model file under the same name: the fingerprint no longer matches.
  fs::rename(dir_ + "/models/tiny.gguf", dir_ + "/tiny.gguf.bak");
  const std::string other = BinaryPath() + " make-model --out " + dir_ + "/models/tiny.gguf --seed 2 --quiet";
  ASSERT_EQ(std::system(other.c_str()), 0);
  EXPECT_EQ(run("ls", &out), 0) << out;
  EXPECT_NE(out.find("(mismatch: no model in"), std::string::npos) << out;
  EXPECT_NE(out.find("0 match a model of"), std::string::npos) << out;
  fs::remove(dir_ + "/models/tiny.gguf");
  fs::rename(dir_ + "/tiny.gguf.bak", dir_ + "/models/tiny.gguf");
  // Without a key: what the file system says, and that details need the key.
  fs::rename(cache_dir_ + "/prompt_cache.key", dir_ + "/key.bak");
  EXPECT_EQ(run("ls", &out), 0) << out;
  EXPECT_NE(out.find("1 saved caches"), std::string::npos) << out;
  EXPECT_NE(out.find("need the key"), std::string::npos) << out;
  EXPECT_EQ(out.find(" tokens  model"), std::string::npos) << out;
  EXPECT_FALSE(fs::exists(cache_dir_ + "/prompt_cache.key"));  // never created by ls
  fs::rename(dir_ + "/key.bak", cache_dir_ + "/prompt_cache.key");
  EXPECT_EQ(run("verify", &out), 0) << out;
  EXPECT_NE(out.find("1 saved caches ok"), std::string::npos) << out;
  // A damaged file is reported by ls (and kept), then deleted by verify.
  std::ofstream(cache_dir_ + "/00112233445566778899aabbccddeeff.mxpc", std::ios::binary) << "not a cache";
  EXPECT_EQ(run("ls", &out), 0) << out;
  EXPECT_NE(out.find("FAILS ITS CHECK"), std::string::npos) << out;
  EXPECT_NE(out.find("1 fail their check"), std::string::npos) << out;
  EXPECT_TRUE(fs::exists(cache_dir_ + "/00112233445566778899aabbccddeeff.mxpc"));
  EXPECT_EQ(run("verify", &out), 0) << out;
  EXPECT_NE(out.find("removed 1 damaged"), std::string::npos) << out;
  EXPECT_EQ(run("purge", &out), 0) << out;
  EXPECT_NE(out.find("deleted 1 saved caches"), std::string::npos) << out;
  EXPECT_TRUE(SavedFiles().empty());
  EXPECT_EQ(run("bogus", &out), 2);
}

}  // namespace
}  // namespace mx::testing
