// Sliding-window chats through the real server: a Gemma-3-shaped model
// (make-model --preset tiny-gemma3: 5 local layers with a window of 32 and
// one global layer) whose chats are several windows long. Every way the
// prompt cache continues a chat (the next turn in place, a regenerated
// reply, an edited last message, a restart from the saved caches, a trimmed
// chat through a context shift) reuses exactly as many tokens as on a dense
// model of the same vocabulary and template, never re-reads the chat, and
// every greedy reply equals the same prompt read from scratch
// (cache_prompt: false).
#include <gtest/gtest.h>
#include <signal.h>

#include <cstdio>
#include <memory>

#include "http_helpers.h"
#include "server_process.h"

namespace mx::testing {
namespace {

const std::string kSystem =
    "You are the assistant of a small team. Keep answers short, cite the "
    "notes, and say when you do not know. "
    "The notes: the prompt cache keeps every chat's state so that the next "
    "turn reads only its new tokens, "
    "and a sliding window keeps only the last positions in view on most "
    "layers.";

// One request of the scenario: what the cache reused of how many tokens,
// and whether the reply equals the cold one.
struct Step {
  std::string what;
  int64_t prompt_tokens = 0, cached = 0;
};

class Gemma3CacheServerTest : public ::testing::Test {
 protected:
  void SetUp() override { signal(SIGPIPE, SIG_IGN); }
  void TearDown() override {
    server_.reset();
    for (const auto &d : dirs_) fs::remove_all(d);
  }

  void Start(const std::string &dir) {
    server_ = std::make_unique<ServerProcess>();
    std::string error;
    ASSERT_TRUE(server_->Start({"--threads", "1", "--ctx-size", "1024"},
                               {{"MATRICXON_MODELS_DIR", dir + "/models"},
                                {"MATRICXON_PROMPT_CACHE_DIR", dir + "/prompt_cache"}},
                               dir + "/server" + std::to_string(++starts_) + ".log", &error))
        << error;
  }
  void Stop() {
    const int status = server_->StopWith(SIGTERM);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
  }
  int port() const { return server_->port(); }

  // The chat of the scenario on a model made by `make-model <flags>`; with
  // `check_replies`, every cached reply is compared with the cold one.
  std::vector<Step> RunScenario(const std::string &name, const std::string &flags,
                                bool check_replies) {
    const std::string dir = TempDir("gemma3_" + name);
    dirs_.push_back(dir);
    fs::create_directories(dir + "/models");
    const std::string cmd =
        BinaryPath() + " make-model --out " + dir + "/models/tiny.gguf --quiet " + flags;
    EXPECT_EQ(std::system(cmd.c_str()), 0) << cmd;
    Start(dir);
    std::vector<Step> steps;
    auto ask = [&](const std::string &what, const std::vector<Msg> &chat) {
      SCOPED_TRACE(name + ": " + what);
      Turn t = Chat(port(), chat, 8);
      steps.push_back({what, t.prompt_tokens, t.cached});
      if (check_replies) {
        EXPECT_EQ(Chat(port(), chat, 8, /*cache=*/false).text, t.text);
      }
      return t;
    };
    std::vector<Msg> chat = {{"system", kSystem},
                             {"user", "What does the cache keep between the turns of a chat?"}};
    ask("first turn", chat);
    chat.push_back({"assistant", "It keeps the processed state of the chat."});
    chat.push_back({"user", "And what does the next turn read, once the state is kept?"});
    ask("next turn", chat);
    ask("regenerated reply", chat);
    chat.back().content = "And what does the next turn read? An edited question, this time.";
    ask("edited last message", chat);
    Stop();
    Start(dir);
    chat.push_back({"assistant", "Only the new tokens of the chat."});
    chat.push_back({"user", "Good. After a restart, is the state still there?"});
    ask("after a restart", chat);
    chat.push_back({"assistant", "Yes, from the saved caches."});
    chat.erase(chat.begin() + 1,
               chat.begin() + 3);  // the client drops the oldest exchange
    chat.push_back({"user", "Then the chat was trimmed. Is the rest still reused?"});
    ask("trimmed chat", chat);
    const std::string log = server_->Log();
    // After the restart only the cold requests (cache off) read a whole chat.
    size_t rereads = 0;
    for (size_t at = log.find("re-reading the entire chat"); at != std::string::npos;
         at = log.find("re-reading the entire chat", at + 1)) {
      const std::string line = log.substr(at, log.find('\n', at) - at);
      if (line.find("cache_prompt: false") == std::string::npos) ++rereads;
    }
    EXPECT_EQ(rereads, 0u) << log;
    EXPECT_NE(log.find("from disk"), std::string::npos) << log;
    EXPECT_NE(log.find("after a context shift"), std::string::npos) << log;
    server_.reset();
    return steps;
  }

  std::vector<std::string> dirs_;
  int starts_ = 0;
  std::unique_ptr<ServerProcess> server_;
};

TEST_F(Gemma3CacheServerTest, SlidingWindowChatsReuseWhatADenseModelReuses) {
  const std::vector<Step> gemma =
      RunScenario("swa", "--preset tiny-gemma3", /*check_replies=*/true);
  const std::vector<Step> dense = RunScenario("dense", "--preset tiny", /*check_replies=*/false);
  ASSERT_EQ(gemma.size(), 6u);
  ASSERT_EQ(dense.size(), gemma.size());
  for (size_t i = 0; i < gemma.size(); ++i) {
    SCOPED_TRACE(gemma[i].what);
    EXPECT_EQ(gemma[i].prompt_tokens, dense[i].prompt_tokens);
    EXPECT_EQ(gemma[i].cached, dense[i].cached);
    EXPECT_GT(gemma[i].prompt_tokens, 3 * 32) << "every prompt spans several windows";
    std::printf(
        "%-20s reused %3lld of %3lld tokens (dense model: %3lld of %3lld)\n", gemma[i].what.c_str(),
        static_cast<long long>(gemma[i].cached), static_cast<long long>(gemma[i].prompt_tokens),
        static_cast<long long>(dense[i].cached), static_cast<long long>(dense[i].prompt_tokens));
  }
  // What each way of continuing reuses (as prompt_cache_server_test states it
  // for dense models).
  EXPECT_EQ(gemma[0].cached, 0);
  EXPECT_GE(gemma[1].cached, gemma[0].prompt_tokens);
  EXPECT_EQ(gemma[2].cached, gemma[2].prompt_tokens - 1);
  EXPECT_GE(gemma[3].cached, gemma[0].prompt_tokens);
  EXPECT_GE(gemma[4].cached, gemma[3].prompt_tokens - 8);
  EXPECT_GE(gemma[5].cached, gemma[5].prompt_tokens - 60);  // all but the new exchange (~53 tokens)
}

}  // namespace
}  // namespace mx::testing
