// Qwen 3.5 (qwen35: Gated DeltaNet + gated attention) through the real
// server, on the reference tiny-qwen35 model: the reference conversation
// turn by turn against llama.cpp's greedy tokens (with the cache reading only
// each turn's new tokens), a restart that goes on from the saved cache, and
// concurrent chats sharing a start whose replies never depend on the cache.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>

#include <algorithm>
#include <fstream>
#include <map>
#include <random>
#include <sstream>
#include <thread>

#include "http_helpers.h"
#include "server_process.h"

namespace mx::testing {
namespace {

const Json& Ref() {
  static const Json* ref = new Json(LoadRefJson("ref-tiny-qwen35.json"));
  return *ref;
}

std::vector<Msg> Messages(const Json& turn) {
  std::vector<Msg> m;
  for (const Json& x : turn["messages"])
    m.push_back({x["role"].get<std::string>(), x["content"].get<std::string>()});
  return m;
}

// A greedy reply of at most n tokens, with each token's bytes.
struct TokenReply {
  int status = 0;
  std::string text;  // message.content
  std::string finish_reason;
  std::vector<std::string> pieces;
  std::vector<double> logprobs;
  int64_t prompt_tokens = 0, cached = 0;
  std::string raw;
};
TokenReply Greedy(int port, const std::vector<Msg>& msgs, int n, bool cache = true) {
  Json body = ChatRequestBody(msgs, n, cache);
  body["logprobs"] = true;
  Reply r = Post(port, "/v1/chat/completions", body.dump());
  TokenReply t;
  t.status = r.status;
  t.raw = r.raw;
  if (r.status != 200) return t;
  t.text = r.body["choices"][0]["message"]["content"].get<std::string>();
  t.finish_reason = r.body["choices"][0]["finish_reason"].get<std::string>();
  for (const Json& tok : r.body["choices"][0]["logprobs"]["content"]) {
    std::string bytes;
    for (const Json& b : tok["bytes"]) bytes += static_cast<char>(b.get<int>());
    t.pieces.push_back(bytes);
    t.logprobs.push_back(tok["logprob"].get<double>());
  }
  t.prompt_tokens = r.body["usage"]["prompt_tokens"].get<int64_t>();
  t.cached = r.body["usage"]["prompt_tokens_details"]["cached_tokens"].get<int64_t>();
  return t;
}

class Qwen35ServerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    signal(SIGPIPE, SIG_IGN);
    ASSERT_FALSE(Ref().is_discarded()) << "ref-tiny-qwen35.json";
    dir_ = TempDir(std::string("qwen35_") +
                   ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::copy_file(std::string(MATRICXON_REF_DIR) + "/models/tiny-qwen35.gguf",
                  dir_ + "/models/tiny.gguf");
  }
  void TearDown() override {
    server_.reset();
    fs::remove_all(dir_);
  }
  void Start(std::vector<std::string> args) {
    server_ = std::make_unique<ServerProcess>();
    // F32 keys and values: llama.cpp's reference ran with them, so the
    // greedy tokens are comparable wherever its top-1 margin is above ~1e-4.
    args.insert(args.end(), {"--threads", "1", "--ctx-size", "1024", "--kv-type", "f32"});
    std::string error;
    ASSERT_TRUE(server_->Start(args,
                               {{"MATRICXON_MODELS_DIR", dir_ + "/models"},
                                {"MATRICXON_PROMPT_CACHE_DIR", dir_ + "/prompt_cache"}},
                               dir_ + "/server" + std::to_string(++starts_) + ".log", &error))
        << error;
  }
  int port() const { return server_->port(); }
  std::string Log() const { return server_->Log(); }

  // Turn k (0-based) of the reference conversation: the reply's tokens equal
  // llama.cpp's greedy ones while its margin allows a comparison.
  TokenReply ExpectReferenceTurn(size_t k) {
    const Json& turn = Ref()["conversation"]["turns"][k];
    TokenReply r = Greedy(port(), Messages(turn), 16);
    EXPECT_EQ(r.status, 200) << r.raw;
    EXPECT_EQ(r.prompt_tokens, turn["n_tokens"].get<int64_t>())
        << "turn " << k + 1 << ": template or tokenizer";
    // llama.cpp's greedy run was not stopped at the end of the turn; a
    // server reply is: compare the tokens before it, then the stop.
    const Json& greedy = turn["greedy"];
    const Json& eog = turn["reply"]["first_eog_step"];
    const size_t n_ref = eog.is_null() ? greedy["pieces_hex"].size() : eog.get<size_t>();
    size_t compared = 0;
    bool all = true;
    for (size_t i = 0; i < n_ref; ++i) {
      if (greedy["margin_top1_top2"][i].get<double>() < 1e-4) {
        all = false;
        break;
      }
      EXPECT_LT(i, r.pieces.size())
          << "turn " << k + 1 << ": reply ended at step " << r.pieces.size();
      if (i >= r.pieces.size()) break;
      EXPECT_EQ(r.pieces[i], FromHex(greedy["pieces_hex"][i].get<std::string>()))
          << "turn " << k + 1 << " step " << i;
      ++compared;
    }
    if (all && !eog.is_null()) {
      EXPECT_EQ(r.pieces.size(), n_ref)
          << "turn " << k + 1 << ": the end of the turn comes at step " << n_ref;
      EXPECT_EQ(r.finish_reason, "stop") << "turn " << k + 1;
    }
    EXPECT_GE(compared + (eog.is_null() ? 0 : 16 - n_ref), 8u) << "turn " << k + 1;
    return r;
  }

  std::string dir_;
  int starts_ = 0;
  std::unique_ptr<ServerProcess> server_;
};

TEST_F(Qwen35ServerTest, ReferenceConversationMatchesLlamaCppTurnByTurn) {
  Start({"--persist-prompt-cache", "false"});
  TokenReply t1 = ExpectReferenceTurn(0);
  EXPECT_EQ(t1.cached, 0);
  for (size_t k = 1; k < 3; ++k) {
    TokenReply t = ExpectReferenceTurn(k);
    // The earlier turns came from the cache: only the new message was read.
    const int64_t shared =
        Ref()["conversation"]["turns"][k]["common_prefix_tokens"]["with_previous_prompt"]
            .get<int64_t>();
    EXPECT_GE(t.cached, shared - 1) << "turn " << k + 1;
  }
  EXPECT_NE(Log().find("from RAM"), std::string::npos) << Log();
}

TEST_F(Qwen35ServerTest, RestartedServerGoesOnFromTheSavedCache) {
  Start({});
  ExpectReferenceTurn(0);
  ASSERT_EQ(server_->StopWith(SIGTERM), 0) << Log();  // writes the cached chat
  Start({});
  TokenReply t2 = ExpectReferenceTurn(1);
  EXPECT_GT(t2.cached, 40) << Log();
  EXPECT_NE(Log().find("tokens from disk"), std::string::npos) << Log();
}

// Several users at once with chats that share their start (the system
// prompt), continue, regenerate and edit their last message, with one RAM
// slot fewer than chats: every cached reply equals the reply read from
// scratch, token for token and to the bit of each log-probability, and
// (the snapshot at the end of the shared notes) nearly every turn after the
// first reuses something.
TEST_F(Qwen35ServerTest, ConcurrentChatsSharingAStartNeverChangeAReply) {
  Start({"--prompt-cache-slots", "2", "--parallel", "3", "--persist-prompt-cache", "false",
         "--prompt-cache-snapshot-every", "32"});
  const std::string system = Ref()["conversation"]["system"].get<std::string>();
  std::mt19937 rng(11);
  const std::vector<std::string> words = {"licence", "share", "modified", "program", "private",
                                          "source",  "copy",  "notes",    "why",     "line"};
  auto sentence = [&](int n) {
    std::string s;
    for (int i = 0; i < n; ++i) s += words[rng() % words.size()] + (i + 1 < n ? " " : "?");
    return s;
  };
  std::vector<std::vector<Msg>> chats(3);
  for (auto& c : chats) c = {{"system", system}, {"user", sentence(6)}};
  int reused = 0, compared = 0;
  for (int round = 0; round < 5; ++round) {
    std::vector<std::vector<Msg>> prompts = chats;
    if (round % 2 == 1) prompts[1].back().content = sentence(7);  // chat 1 edits its last message
    std::vector<TokenReply> cached(3);
    std::vector<std::thread> users;
    for (int u = 1; u < 3; ++u)
      users.emplace_back([&, u] { cached[u] = Greedy(port(), prompts[u], 6); });
    cached[0] = Greedy(port(), prompts[0], 6);
    for (auto& t : users) t.join();
    for (int u = 0; u < 3; ++u) {
      ASSERT_EQ(cached[u].status, 200)
          << "round " << round << " user " << u << ": " << cached[u].raw << "\n"
          << Log();
      const TokenReply fresh = Greedy(port(), prompts[u], 6, /*cache=*/false);
      ASSERT_EQ(fresh.status, 200) << fresh.raw;
      EXPECT_EQ(cached[u].pieces, fresh.pieces) << "round " << round << " user " << u;
      EXPECT_EQ(cached[u].logprobs, fresh.logprobs) << "round " << round << " user " << u;
      reused += cached[u].cached > 0;
      compared += static_cast<int>(fresh.pieces.size());
      // Round 2 regenerates user 2's reply: the chat is not advanced.
      if (round == 2 && u == 2) continue;
      chats[static_cast<size_t>(u)] = prompts[static_cast<size_t>(u)];
      chats[static_cast<size_t>(u)].push_back({"assistant", fresh.text});
      chats[static_cast<size_t>(u)].push_back({"user", sentence(5 + u)});
    }
  }
  EXPECT_GE(reused, 11) << Log();
  EXPECT_GT(compared, 5 * 3 * 3);
}

// A client that trims the oldest exchange (its window is full): a recurrent
// state cannot drop a span, so instead of a context shift the chat restarts
// from the newest snapshot the trimmed prompt still shares — the end of the
// system prompt — and the reply equals a re-read.
TEST_F(Qwen35ServerTest, TrimmedChatFallsBackToTheSnapshotAfterTheSystemPrompt) {
  Start({"--persist-prompt-cache", "false"});
  const std::string system = Ref()["conversation"]["system"].get<std::string>();
  std::vector<Msg> chat = {{"system", system}};
  for (const char* q : {"What does the licence require?", "And for private use?", "Why so?"}) {
    chat.push_back({"user", q});
    const TokenReply r = Greedy(port(), chat, 6);
    ASSERT_EQ(r.status, 200) << r.raw;
    chat.push_back({"assistant", r.text});
  }
  chat.push_back({"user", "Sum it up."});
  // The system prompt alone, as the history the template renders for it.
  Reply head = Post(port(), "/tokenize",
                    Json{{"model", "tiny"},
                         {"content", "<|im_start|>system\n" + system + "<|im_end|>\n"},
                         {"add_special", false}}
                        .dump());
  ASSERT_EQ(head.status, 200) << head.raw;
  chat.erase(chat.begin() + 1, chat.begin() + 3);  // the oldest question and its reply
  const TokenReply trimmed = Greedy(port(), chat, 6);
  const TokenReply fresh = Greedy(port(), chat, 6, /*cache=*/false);
  ASSERT_EQ(trimmed.status, 200) << trimmed.raw;
  EXPECT_EQ(trimmed.cached, static_cast<int64_t>(head.body["tokens"].size())) << Log();
  EXPECT_EQ(trimmed.pieces, fresh.pieces);
  EXPECT_EQ(trimmed.logprobs, fresh.logprobs);
}

// Qwen 3.5's own template (as real files carry it) opens a think block in
// the generation prompt and drops it from past replies, so each next turn
// leaves the cached chat right after "<|im_start|>assistant\n": the snapshot
// at the reply's start keeps all of the earlier turns (a few tokens re-read),
// and the replies equal re-reads.
TEST_F(Qwen35ServerTest, OfficialTemplateChatsKeepEarlierTurns) {
  fs::remove(dir_ + "/models/tiny.gguf");
  const std::string cmd = BinaryPath() + " make-model --preset tiny-qwen35 --chat-template " +
                          std::string(MATRICXON_REF_DIR) +
                          "/../templates/jinja/Qwen3.5-4B.jinja --quiet --out " + dir_ +
                          "/models/tiny.gguf";
  ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
  Start({"--persist-prompt-cache", "false"});
  std::vector<Msg> chat = {{"system", "You are a helpful assistant."},
                           {"user", "What is a prompt cache?"}};
  // The generation prompt, which the template rewrites in the next turn.
  Reply gen = Post(port(), "/tokenize",
                   Json{{"model", "tiny"},
                        {"content", "<|im_start|>assistant\n<think>\n"},
                        {"add_special", false}}
                       .dump());
  ASSERT_EQ(gen.status, 200) << gen.raw;
  const auto gen_len = static_cast<int64_t>(gen.body["tokens"].size());
  ASSERT_GT(gen_len, 3);
  int64_t last_prompt = 0;
  for (int turn = 0; turn < 3; ++turn) {
    SCOPED_TRACE("turn " + std::to_string(turn + 1));
    const TokenReply cached = Greedy(port(), chat, 12);
    const TokenReply fresh = Greedy(port(), chat, 12, /*cache=*/false);
    ASSERT_EQ(cached.status, 200) << cached.raw;
    EXPECT_EQ(cached.pieces, fresh.pieces);
    EXPECT_EQ(cached.logprobs, fresh.logprobs);
    // Everything before the previous generation prompt came from the cache
    // (the snapshot at the reply's start).
    if (turn > 0) {
      EXPECT_EQ(cached.cached, last_prompt - gen_len) << Log();
    }
    last_prompt = cached.prompt_tokens;
    chat.push_back({"assistant", cached.text});
    chat.push_back({"user", "And then what happens in turn " + std::to_string(turn + 2) + "?"});
  }
  EXPECT_NE(Log().find("family qwen3.5"), std::string::npos) << Log();
}

// A thinking model's reply: with Qwen 3.5's template the prompt opens the
// think block, so the reply (which never closes it here: random weights) is
// reasoning_content, in one piece and streamed alike; reasoning_format
// "none" leaves it in content.
TEST_F(Qwen35ServerTest, ReasoningIsSplitFromTheAnswer) {
  fs::remove(dir_ + "/models/tiny.gguf");
  const std::string cmd = BinaryPath() + " make-model --preset tiny-qwen35 --chat-template " +
                          std::string(MATRICXON_REF_DIR) +
                          "/../templates/jinja/Qwen3.5-4B.jinja --quiet --out " + dir_ +
                          "/models/tiny.gguf";
  ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
  Start({"--persist-prompt-cache", "false"});
  Json body = ChatRequestBody({{"user", "Think first, then answer."}}, 10);
  body["ignore_eos"] = true;
  Reply split = Post(port(), "/v1/chat/completions", body.dump());
  ASSERT_EQ(split.status, 200) << split.raw;
  const Json& msg = split.body["choices"][0]["message"];
  ASSERT_TRUE(msg.contains("reasoning_content")) << split.raw;
  const std::string reasoning = msg["reasoning_content"].get<std::string>();
  EXPECT_FALSE(reasoning.empty());
  EXPECT_EQ(msg["content"], "");
  body["reasoning_format"] = "none";
  Reply raw = Post(port(), "/v1/chat/completions", body.dump());
  ASSERT_EQ(raw.status, 200) << raw.raw;
  EXPECT_EQ(raw.body["choices"][0]["message"]["content"], reasoning);
  EXPECT_FALSE(raw.body["choices"][0]["message"].contains("reasoning_content"));
  // Streamed: the reasoning arrives as delta.reasoning_content.
  body.erase("reasoning_format");
  body["stream"] = true;
  httplib::Client cli("127.0.0.1", port());
  auto res = cli.Post("/v1/chat/completions", body.dump(), "application/json");
  ASSERT_TRUE(res && res->status == 200);
  std::string streamed, content;
  std::istringstream lines(res->body);
  for (std::string line; std::getline(lines, line);) {
    if (line.rfind("data: {", 0) != 0) continue;
    const Json ev = Json::parse(line.substr(6));
    if (!ev.contains("choices") || ev["choices"].empty()) continue;
    const Json& d = ev["choices"][0]["delta"];
    if (d.contains("reasoning_content")) streamed += d["reasoning_content"].get<std::string>();
    if (d.contains("content") && d["content"].is_string())
      content += d["content"].get<std::string>();
  }
  EXPECT_EQ(streamed, reasoning);
  EXPECT_EQ(content, "");
  body["reasoning_format"] = "sideways";
  body["stream"] = false;
  EXPECT_EQ(Post(port(), "/v1/chat/completions", body.dump()).status, 400);
}

// bench chat's hybrid scenario: every 3rd turn also a regenerated reply (the
// same prompt: all but one token from the snapshot before the end) and an
// edited last message (a restart inside the prompt), as CSV rows of their own.
TEST_F(Qwen35ServerTest, BenchChatHybridPresetSendsRegenerationsAndEdits) {
  Start({"--persist-prompt-cache", "false"});
  const std::string out = dir_ + "/bench/chat";
  const std::string cmd =
      BinaryPath() + " bench chat --url http://127.0.0.1:" + std::to_string(port()) +
      " --model tiny --preset hybrid --turns 3 --system-words 20 --user-words 12"
      " --reply-tokens 4 --modes on --out " +
      out + " > " + dir_ + "/bench.log 2>&1";
  ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
  std::ifstream csv(out + ".csv");
  std::string header, line;
  ASSERT_TRUE(std::getline(csv, header));
  std::vector<std::string> cols;
  std::stringstream hs(header);
  for (std::string c; std::getline(hs, c, ',');) cols.push_back(c);
  auto col = [&](const std::string& name) {
    return static_cast<size_t>(std::find(cols.begin(), cols.end(), name) - cols.begin());
  };
  ASSERT_LT(col("kind"), cols.size()) << header;
  std::map<std::string, int> kinds;
  while (std::getline(csv, line)) {
    std::vector<std::string> f;
    std::stringstream ls(line);
    for (std::string c; std::getline(ls, c, ',');) f.push_back(c);
    ASSERT_EQ(f.size(), cols.size()) << line;
    const std::string kind = f[col("kind")];
    ++kinds[kind];
    const int64_t prompt = std::stoll(f[col("prompt_tokens")]);
    const int64_t cached = std::stoll(f[col("cached_tokens")]);
    if (kind == "regenerate") {
      EXPECT_EQ(cached, prompt - 1) << line;
    }
    if (kind == "edit") {
      EXPECT_GT(cached, 0) << line;
      EXPECT_LT(cached, prompt - 1) << line;
    }
  }
  EXPECT_EQ(kinds["turn"], 3);
  EXPECT_EQ(kinds["regenerate"], 1);
  EXPECT_EQ(kinds["edit"], 1);
}

}  // namespace
}  // namespace mx::testing
