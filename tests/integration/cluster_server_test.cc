// Cluster nodes through the real server (SPEC §12, docs/cluster.md): several
// `matricxon serve` processes on one saved-cache folder with the same
// passphrase. A chat saved by one node goes on from disk on another without
// a restart; a starting node leaves another node's write in progress alone
// and removes a crash's stale temporary; three nodes writing at once keep
// the folder within its budget. Every reply from a saved cache is checked
// against the reply read from scratch (cache_prompt: false).
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>
#include <utime.h>

#include <fstream>
#include <random>
#include <thread>

#include "http_helpers.h"
#include "server_process.h"

namespace mx::testing {
namespace {

const std::string kSystem =
    "You are the assistant of a small team. Keep answers short, cite the notes, and say when you "
    "do not know. "
    "The notes: saved caches keep every chat's state on disk so that another node reads only new "
    "tokens.";

class ClusterServerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    signal(SIGPIPE, SIG_IGN);
    dir_ = TempDir(std::string("cluster_") +
                   ::testing::UnitTest::GetInstance()->current_test_info()->name());
    cache_dir_ = dir_ + "/shared_cache";
    ASSERT_TRUE(MakeModel(dir_ + "/models/tiny.gguf"));
  }
  void TearDown() override {
    nodes_.clear();
    fs::remove_all(dir_);
  }

  // Starts one more node on the shared folder; returns its index.
  size_t StartNode(std::vector<std::string> args = {},
                   std::map<std::string, std::string> env = {}) {
    auto node = std::make_unique<ServerProcess>();
    args.insert(args.end(), {"--threads", "1", "--ctx-size", "1024"});
    env.emplace("MATRICXON_MODELS_DIR", dir_ + "/models");
    env.emplace("MATRICXON_PROMPT_CACHE_DIR", cache_dir_);
    env.emplace("MATRICXON_CLUSTER_NODE", "true");
    env.emplace("MATRICXON_CACHE_KEY", "the cluster's passphrase");
    std::string error;
    const std::string log = dir_ + "/node" + std::to_string(starts_++) + ".log";
    EXPECT_TRUE(node->Start(args, env, log, &error)) << error;
    nodes_.push_back(std::move(node));
    return nodes_.size() - 1;
  }
  int port(size_t i) const { return nodes_[i]->port(); }
  std::string Log(size_t i) const { return nodes_[i]->Log(); }
  Json Persistence(size_t i) { return Get(port(i), "/api/cache/persistence").body; }
  // Waits until node i's start-up check has finished.
  void WaitForCheck(size_t i) {
    WaitUntil([&] { return Log(i).find("saved caches checked in") != std::string::npos; });
    ASSERT_NE(Log(i).find("saved caches checked in"), std::string::npos) << Log(i);
  }
  std::vector<std::string> Files(const std::string& suffix) const {
    std::vector<std::string> out;
    for (const auto& e : fs::directory_iterator(cache_dir_)) {
      const std::string name = e.path().filename().string();
      if (name.size() > suffix.size() &&
          name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0) {
        out.push_back(name);
      }
    }
    return out;
  }
  void WriteTemp(const std::string& name, int64_t age_s) {
    const std::string path = cache_dir_ + "/" + name;
    std::ofstream(path) << "a write in progress";
    const time_t t = time(nullptr) - age_s;
    struct utimbuf times {
      t, t
    };
    ASSERT_EQ(utime(path.c_str(), &times), 0);
  }

  std::string dir_, cache_dir_;
  std::vector<std::unique_ptr<ServerProcess>> nodes_;
  int starts_ = 0;
};

TEST_F(ClusterServerTest, ChatSavedOnOneNodeGoesOnFromDiskOnAnother) {
  const size_t a = StartNode({"--prompt-cache-slots", "1"});
  const size_t b = StartNode();
  WaitForCheck(b);  // b's index is built before a saves anything
  std::vector<Msg> chat = {{"system", kSystem}, {"user", "alpha alpha alpha"}};
  Turn t1 = Chat(port(a), chat);
  Chat(port(a), {{"user", "beta beta beta"}});  // the chat leaves a's RAM and is written
  WaitUntil([&] { return Persistence(a)["writes"].get<int>() >= 1; });
  ASSERT_GE(Persistence(a)["writes"].get<int>(), 1) << Log(a);
  ASSERT_EQ(Files(".mxpc").size(), 1u);

  chat.push_back({"assistant", t1.text});
  chat.push_back({"user", "more"});
  Turn t2 = Chat(port(b), chat);
  EXPECT_GE(t2.cached, t1.prompt_tokens) << Log(b);
  EXPECT_NE(Log(b).find("tokens from disk"), std::string::npos) << Log(b);
  EXPECT_NE(Log(b).find("refreshed the index"), std::string::npos) << Log(b);
  EXPECT_EQ(Chat(port(b), chat, 8, /*cache=*/false).text, t2.text);
}

TEST_F(ClusterServerTest, StartingNodeLeavesAWriteInProgressAndRemovesAStaleTemporary) {
  const size_t a = StartNode();
  WaitForCheck(a);
  const std::string in_progress =
      std::string(32, 'a') + ".mxpc.tmp";                        // another node, 5 s into a write
  const std::string stale = std::string(32, 'b') + ".mxpc.tmp";  // left by a crash an hour ago
  WriteTemp(in_progress, 5);
  WriteTemp(stale, 3600);
  const size_t c = StartNode();
  WaitForCheck(c);
  EXPECT_TRUE(fs::exists(cache_dir_ + "/" + in_progress)) << Log(c);
  EXPECT_FALSE(fs::exists(cache_dir_ + "/" + stale)) << Log(c);
  EXPECT_NE(Log(c).find("1 stale temporaries"), std::string::npos) << Log(c);
}

TEST_F(ClusterServerTest, PolicyPutOnOneNodeIsAppliedByTheOthers) {
  const size_t a = StartNode();
  const size_t b = StartNode();
  WaitForCheck(a);
  WaitForCheck(b);
  httplib::Client cli("127.0.0.1", port(a));
  auto put = cli.Put("/api/cache/persistence", R"({"budget_mb": 123, "ttl_hours": 5})",
                     "application/json");
  ASSERT_TRUE(put);
  ASSERT_EQ(put->status, 200) << put->body;
  // b looks at the policy file every 5 s.
  WaitUntil([&] { return Persistence(b)["budget_mb"].get<int64_t>() == 123; });
  EXPECT_EQ(Persistence(b)["budget_mb"].get<int64_t>(), 123) << Log(b);
  EXPECT_EQ(Persistence(b)["ttl_hours"].get<int64_t>(), 5) << Log(b);
  EXPECT_NE(Log(b).find("policy changed by another node"), std::string::npos) << Log(b);
  EXPECT_EQ(Log(a).find("policy changed by another node"), std::string::npos) << Log(a);

  // A damaged policy file is logged and ignored: the policy in force stays.
  std::ofstream(cache_dir_ + "/prompt_cache_policy.json") << "{\"budget_mb\": ";
  WaitUntil([&] { return Log(b).find("; ignored, the policy stays") != std::string::npos; });
  EXPECT_NE(Log(b).find("; ignored, the policy stays"), std::string::npos) << Log(b);
  EXPECT_EQ(Persistence(b)["budget_mb"].get<int64_t>(), 123) << Log(b);
  EXPECT_TRUE(Persistence(b)["enabled"].get<bool>()) << Log(b);
}

TEST_F(ClusterServerTest, ThreeNodesWritingAtOnceStayWithinTheFoldersBudget) {
  const size_t a = StartNode({"--prompt-cache-slots", "1"});
  WaitForCheck(a);
  // One saved chat's size, to set a budget of a few of them.
  Chat(port(a), {{"system", kSystem}, {"user", "measure"}});
  Chat(port(a), {{"user", "evict"}});
  WaitUntil([&] { return !Files(".mxpc").empty(); });
  ASSERT_FALSE(Files(".mxpc").empty());
  const uint64_t one = fs::file_size(cache_dir_ + "/" + Files(".mxpc")[0]);
  nodes_.clear();
  fs::remove_all(cache_dir_);
  const uint64_t budget_mb = std::max<uint64_t>(1, (3 * one) >> 20);
  const uint64_t budget = budget_mb << 20;
  const std::map<std::string, std::string> env = {
      {"MATRICXON_PERSIST_CACHE_BUDGET_MB", std::to_string(budget_mb)}};
  for (int i = 0; i < 3; ++i) WaitForCheck(StartNode({"--prompt-cache-slots", "1"}, env));
  std::vector<std::thread> clients;
  for (size_t n = 0; n < 3; ++n) {
    clients.emplace_back([&, n] {
      for (int k = 0; k < 6; ++k) {
        Chat(port(n), {{"system", kSystem},
                       {"user", "node " + std::to_string(n) + " chat " + std::to_string(k)}});
      }
    });
  }
  for (auto& t : clients) t.join();
  // Every node writes its evicted chats and enforces the budget after each.
  for (size_t n = 0; n < 3; ++n) {
    WaitUntil([&] { return Persistence(n)["writes"].get<int>() >= 5; });
  }
  // Each node enforces the budget right after its last write is counted:
  // wait (bounded) for the folder to be within it.
  auto used_bytes = [&] {
    uint64_t used = 0;
    for (const auto& name : Files(".mxpc")) {
      std::error_code ec;  // another node may delete a file between the listing and this
      const uintmax_t size = fs::file_size(cache_dir_ + "/" + name, ec);
      if (!ec) used += size;
    }
    return used;
  };
  WaitUntil([&] { return used_bytes() <= budget; });
  const uint64_t used = used_bytes();
  EXPECT_LE(used, budget);
  ASSERT_GT(15 * one, budget);        // the nodes had to evict
  EXPECT_GT(used + 2 * one, budget);  // no thundering purge: the folder is left nearly full
  // No node met a damaged file (a load racing a delete loads whole or misses).
  for (size_t n = 0; n < 3; ++n)
    EXPECT_EQ(Log(n).find("AEAD tag mismatch"), std::string::npos) << Log(n);
}

// A node killed (SIGKILL) at random moments while chats leave its RAM and are
// written never leaves a published file that another node finds damaged: a
// file is renamed into place only once sealed and synced, so a crash leaves
// at most a temporary. A node running beside it, and a node started after,
// check every file in the folder and find all of them sound.
TEST_F(ClusterServerTest, KilledWhileWritingNeverLeavesADamagedFile) {
  const size_t b = StartNode();
  WaitForCheck(b);
  std::mt19937 rng(20261201);
  std::string notes;
  for (int i = 0; i < 120; ++i) notes += "note" + std::to_string(i) + " ";
  for (int round = 0; round < 6; ++round) {
    const size_t a =
        StartNode({"--prompt-cache-slots", "1"}, {{"MATRICXON_PERSIST_WRITE_DEFER_MS", "0"}});
    // Each chat pushes the previous one out of a's one-slot pool, to be
    // written at once: the first is let finish, the second is cut at a
    // random moment of its write (or just before or after it).
    auto chat = [&](int k) {
      Chat(port(a), {{"system", kSystem}, {"user", notes + std::to_string(round * 10 + k)}}, 2);
    };
    chat(0);
    chat(1);
    WaitUntil([&] { return Persistence(a)["writes"].get<int>() >= 1; });
    ASSERT_GE(Persistence(a)["writes"].get<int>(), 1) << Log(a);
    chat(2);
    std::this_thread::sleep_for(std::chrono::microseconds(rng() % 3000));
    nodes_[a]->Kill();
  }
  const size_t published = Files(".mxpc").size();
  EXPECT_GE(published, 6u);
  RecordProperty("published", std::to_string(published));
  RecordProperty("temporaries_left", std::to_string(Files(".mxpc.tmp").size()));
  // b (running all along) refreshes its index over the folder on a miss.
  Chat(port(b), {{"system", kSystem}, {"user", notes + "0"}}, 2);
  EXPECT_EQ(Log(b).find("deleting"), std::string::npos) << Log(b);
  // A node started now checks every file.
  const size_t c = StartNode();
  WaitForCheck(c);
  const std::string log = Log(c);
  EXPECT_NE(log.find("removed 0 damaged"), std::string::npos) << log;
  EXPECT_NE(log.find(std::to_string(Files(".mxpc").size()) + " saved caches ok"), std::string::npos)
      << log;
}

}  // namespace
}  // namespace mx::testing
