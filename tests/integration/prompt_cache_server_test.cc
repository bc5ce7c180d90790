// The prompt cache through the real server (SPEC §2, §8): the next turn of a
// chat reads only its new tokens, shared starts are copied, limits evict,
// `cache_prompt: false` bypasses the pool, /api/cache and /metrics report,
// and no reply ever changes because of the cache.
#include <gtest/gtest.h>
#include <signal.h>

#include <algorithm>
#include <fstream>
#include <random>
#include <sstream>
#include <thread>

#include "core/env.h"
#include "http_helpers.h"
#include "server_process.h"

namespace mx::testing {
namespace {

class CacheServerTest : public ::testing::Test {
 protected:
  void Start(std::vector<std::string> args) {
    signal(SIGPIPE, SIG_IGN);
    dir_ = TempDir("cache");
    ASSERT_TRUE(MakeModel(dir_ + "/models/tiny.gguf"));
    args.insert(args.end(), {"--threads", "1", "--ctx-size", "1024"});
    std::string error;
    ASSERT_TRUE(server_.Start(args, {{"MATRICXON_MODELS_DIR", dir_ + "/models"}}, dir_ + "/server.log", &error))
        << error;
  }
  // The server goes first: it may still be publishing a saved cache
  // (tmp -> rename) in dir_, which would race the removal.
  void TearDown() override {
    server_.Kill();
    fs::remove_all(dir_);
  }
  int port() const { return server_.port(); }
  std::string Log() const { return server_.Log(); }

  std::string dir_;
  ServerProcess server_;
};

const std::string kSystem =
    "You are the assistant of a small team. Keep answers short, cite the notes, and say when you do not know. "
    "The notes: the prompt cache keeps every chat's state so that the next turn reads only its new tokens.";

TEST_F(CacheServerTest, NextTurnReadsOnlyTheNewTokens) {
  Start({});
  std::vector<Msg> chat = {{"system", kSystem}, {"user", "What does the cache keep?"}};
  Turn t1 = Chat(port(), chat);
  EXPECT_EQ(t1.cached, 0);
  EXPECT_NE(Log().find("re-reading the entire chat (" + std::to_string(t1.prompt_tokens) +
                       " tokens): RAM holds no conversations"),
            std::string::npos)
      << Log();
  chat.push_back({"assistant", t1.text});
  chat.push_back({"user", "And what does the next turn read?"});
  Turn t2 = Chat(port(), chat);
  // Everything up to the first reply is reused (its tokens may re-tokenize
  // differently from how they were generated, so at least the first prompt).
  EXPECT_GE(t2.cached, t1.prompt_tokens);
  EXPECT_LT(t2.cached, t2.prompt_tokens);
  EXPECT_NE(Log().find("reused " + std::to_string(t2.cached) + " of " + std::to_string(t2.prompt_tokens) +
                       " tokens from RAM"),
            std::string::npos)
      << Log();
  // The same reply as reading everything.
  EXPECT_EQ(Chat(port(), chat, 8, /*cache=*/false).text, t2.text);
}

TEST_F(CacheServerTest, SharedStartIsCopiedAndBothChatsGoOn) {
  Start({});
  std::vector<Msg> a = {{"system", kSystem}, {"user", "First question about the notes?"}};
  std::vector<Msg> b = {{"system", kSystem}, {"user", "A different question entirely."}};
  Turn a1 = Chat(port(), a);
  Turn b1 = Chat(port(), b);
  EXPECT_GT(b1.cached, 20);  // the system prompt
  EXPECT_LT(b1.cached, b1.prompt_tokens);
  EXPECT_NE(Log().find("from a copy of a cached chat's shared start"), std::string::npos) << Log();
  // The first chat's entry stayed whole: its next turn reuses all of it.
  a.push_back({"assistant", a1.text});
  a.push_back({"user", "Thanks."});
  EXPECT_GE(Chat(port(), a).cached, a1.prompt_tokens);
  b.push_back({"assistant", b1.text});
  b.push_back({"user", "Thanks."});
  EXPECT_GE(Chat(port(), b).cached, b1.prompt_tokens);
}

TEST_F(CacheServerTest, RegeneratedReplyReusesThePrompt) {
  Start({});
  std::vector<Msg> chat = {{"system", kSystem}, {"user", "Say something."}};
  Turn t1 = Chat(port(), chat, 12);
  Turn again = Chat(port(), chat, 12);
  EXPECT_EQ(again.cached, t1.prompt_tokens - 1);  // all but the one token read for logits
  EXPECT_EQ(again.text, t1.text);
}

TEST_F(CacheServerTest, CacheOffPerRequestLeavesThePoolUntouched) {
  Start({});
  std::vector<Msg> chat = {{"user", "Hello there"}};
  Turn off = Chat(port(), chat, 4, /*cache=*/false);
  EXPECT_EQ(off.cached, 0);
  EXPECT_NE(Log().find("cache_prompt: false"), std::string::npos);
  Reply stats = Get(port(), "/api/cache");
  ASSERT_EQ(stats.status, 200) << stats.raw;
  ASSERT_EQ(stats.body["models"].size(), 1u);
  EXPECT_EQ(stats.body["models"][0]["entries"].size(), 0u);
  EXPECT_EQ(stats.body["models"][0]["lookups"], 0);
}

TEST_F(CacheServerTest, ApiCacheListsEntriesButNeverTokens) {
  Start({});
  Turn t = Chat(port(), {{"user", "Count me"}}, 5);
  Reply stats = Get(port(), "/api/cache");
  ASSERT_EQ(stats.status, 200);
  const Json& m = stats.body["models"][0];
  EXPECT_EQ(m["model"], "tiny");
  EXPECT_EQ(m["slots"], 4);
  ASSERT_EQ(m["entries"].size(), 1u);
  const Json& e = m["entries"][0];
  EXPECT_TRUE(e["tokens"].is_number_integer());
  EXPECT_GE(e["tokens"].get<int64_t>(), t.prompt_tokens);
  EXPECT_GT(e["bytes"].get<int64_t>(), 0);
  EXPECT_EQ(e["in_use"], false);
  for (const auto& [key, value] : e.items()) EXPECT_FALSE(value.is_array()) << key;
  Reply metrics = Get(port(), "/metrics");
  EXPECT_NE(metrics.raw.find("matricxon_prompt_cache_entries{model=\"tiny\"} 1"), std::string::npos) << metrics.raw;
}

TEST_F(CacheServerTest, SlotLimitEvictsTheLeastRecentlyUsedChat) {
  // Saved caches off: an evicted chat would otherwise come back from disk
  // (saved_cache_server_test covers that).
  Start({"--prompt-cache-slots", "1", "--persist-prompt-cache", "false"});
  std::vector<Msg> a = {{"user", "alpha alpha alpha"}}, b = {{"user", "beta beta beta"}};
  Turn a1 = Chat(port(), a);
  Chat(port(), b);  // a leaves the pool
  a.push_back({"assistant", a1.text});
  a.push_back({"user", "more"});
  // Its own entry is gone: only the template's first tokens, shared with b, are reused.
  Turn a2 = Chat(port(), a);
  EXPECT_LT(a2.cached, 8);
  EXPECT_LT(a2.cached, a1.prompt_tokens);
  Reply metrics = Get(port(), "/metrics");
  EXPECT_NE(metrics.raw.find("matricxon_prompt_cache_evictions_total{model=\"tiny\"} 2"), std::string::npos)
      << metrics.raw;
}

// pAIring trims the oldest exchanges (keeping the system prompt) once a chat
// outgrows the window: with context shift on, the cache survives every trim;
// off, the next turn re-reads from the common start.
TEST_F(CacheServerTest, TrimmedChatKeepsItsCacheThroughContextShift) {
  for (const char* setting : {"true", "false"}) {
    SCOPED_TRACE(setting);
    ServerProcess p;
    std::string error;
    const std::string dir = TempDir(std::string("shift_") + setting);
    ASSERT_TRUE(MakeModel(dir + "/models/tiny.gguf"));
    ASSERT_TRUE(p.Start({"--threads", "1", "--ctx-size", "1024", "--persist-prompt-cache", "false"},
                        {{"MATRICXON_MODELS_DIR", dir + "/models"}, {"MATRICXON_PROMPT_CACHE_CONTEXT_SHIFT", setting}},
                        dir + "/server.log", &error))
        << error;
    std::vector<Msg> chat = {{"system", kSystem}};
    const char* questions[] = {"first question about the cache", "second question about tokens",
                               "third question about the state", "fourth question about shifts",
                               "fifth question about trimming"};
    Turn last;
    for (int i = 0; i < 5; ++i) {
      if (i >= 3) chat.erase(chat.begin() + 1, chat.begin() + 3);  // drop the oldest exchange
      chat.push_back({"user", questions[i]});
      last = Chat(p.port(), chat, 6);
      chat.push_back({"assistant", last.text});
      if (i >= 3) {
        // On: all but the new exchange (reply + question + template, < 45 tokens) is
        // reused. Off: only the common start (system prompt) is.
        if (std::string(setting) == "true") {
          EXPECT_GE(last.cached, last.prompt_tokens - 45) << "turn " << i;
        } else {
          EXPECT_LT(last.cached, last.prompt_tokens - 45) << "turn " << i;
        }
      }
    }
    const size_t shifts = p.Log().find("after a context shift");
    EXPECT_EQ(shifts != std::string::npos, std::string(setting) == "true") << p.Log();
    p.Kill();
    fs::remove_all(dir);
  }
}

// The hybrid reference model (Mamba2 + attention): a recurrent state cannot be
// rewound, so the pool restarts from snapshots taken while prompts are read.
// The next turn continues in place; a regenerated reply restarts one token
// before the prompt's end and an edited last message at that message's
// start; every reply equals a full re-read.
TEST_F(CacheServerTest, HybridModelRestartsFromSnapshots) {
  signal(SIGPIPE, SIG_IGN);
  dir_ = TempDir("hybrid");
  fs::copy_file(std::string(MATRICXON_REF_DIR) + "/models/tiny-hybrid-nemotron_h.gguf", dir_ + "/models/tiny.gguf");
  std::string error;
  ASSERT_TRUE(server_.Start({"--threads", "1", "--ctx-size", "1024", "--persist-prompt-cache", "false"},
                            {{"MATRICXON_MODELS_DIR", dir_ + "/models"}}, dir_ + "/server.log", &error))
      << error;
  std::vector<Msg> chat = {{"system", kSystem}, {"user", "First question for the hybrid model?"}};
  Turn t1 = Chat(port(), chat);
  chat.push_back({"assistant", t1.text});
  chat.push_back({"user", "A second question."});
  Turn t2 = Chat(port(), chat);
  EXPECT_GT(t2.cached, 0);
  EXPECT_EQ(t2.text, Chat(port(), chat, 8, /*cache=*/false).text);

  // Regenerate the last reply: the snapshot one token before the prompt's end.
  Turn regen = Chat(port(), chat);
  EXPECT_EQ(regen.cached, regen.prompt_tokens - 1);
  EXPECT_EQ(regen.text, t2.text);

  // Edit the last message: the snapshot at its start (the message
  // boundary), which lies past what the second turn reused (the first
  // turn's end) and before the edited text.
  chat.back().content = "A different second question, edited.";
  Turn edited = Chat(port(), chat);
  EXPECT_GE(edited.cached, t2.cached);
  EXPECT_LT(edited.cached, edited.prompt_tokens - 8);
  EXPECT_EQ(edited.text, Chat(port(), chat, 8, /*cache=*/false).text);
  EXPECT_NE(Log().find("from a snapshot"), std::string::npos) << Log();
}

// A POST and how long the client waited for the whole reply.
struct TimedReply {
  Reply reply;
  double client_ms = 0;
};
TimedReply TimedPost(int port, const std::string& path, const std::string& body) {
  const uint64_t t0 = Env::Default()->NowMicros();
  TimedReply r;
  r.reply = Post(port, path, body);
  r.client_ms = static_cast<double>(Env::Default()->NowMicros() - t0) / 1000.0;
  return r;
}

// Every reply's `timings` (docs/http_api.md) agree with its usage, and the
// server's time for the request (queue, cache, prompt, predicted: intervals
// it measured while the client waited) fits in the client's wait.
void ExpectTimingsAgreeWithUsage(const Json& reply, double client_ms) {
  ASSERT_TRUE(reply.contains("timings")) << reply.dump();
  ASSERT_TRUE(reply.contains("usage")) << reply.dump();
  const Json& t = reply["timings"];
  const Json& u = reply["usage"];
  for (const char* f : {"cache_n", "prompt_n", "predicted_n"}) {
    ASSERT_TRUE(t[f].is_number_integer()) << f << " in " << t.dump();
  }
  for (const char* f : {"prompt_ms", "cache_ms", "queue_ms", "predicted_ms", "prompt_per_second",
                        "predicted_per_second"}) {
    ASSERT_TRUE(t[f].is_number()) << f << " in " << t.dump();
  }
  const double server_ms = t["queue_ms"].get<double>() + t["cache_ms"].get<double>() +
                           t["prompt_ms"].get<double>() + t["predicted_ms"].get<double>();
  EXPECT_LE(server_ms, client_ms) << t.dump();
  EXPECT_EQ(t["cache_n"], u["prompt_tokens_details"]["cached_tokens"]);
  EXPECT_EQ(t["prompt_n"].get<int64_t>() + t["cache_n"].get<int64_t>(), u["prompt_tokens"].get<int64_t>());
  EXPECT_EQ(t["predicted_n"], u["completion_tokens"]);
  EXPECT_GT(t["prompt_n"].get<int64_t>(), 0);  // at least the last prompt token is read
  EXPECT_GT(t["prompt_ms"].get<double>(), 0.0);
}

// The JSON events of an SSE body, in order, without `[DONE]` (which must end it).
std::vector<Json> SseEvents(const std::string& raw) {
  std::vector<Json> events;
  std::istringstream in(raw);
  std::string line, last;
  while (std::getline(in, line)) {
    if (line.rfind("data: ", 0) != 0) continue;
    last = line.substr(6);
    if (last != "[DONE]") events.push_back(Json::parse(last, nullptr, false));
  }
  EXPECT_EQ(last, "[DONE]");
  return events;
}

TEST_F(CacheServerTest, RepliesCarryTimingsThatAgreeWithUsage) {
  Start({"--persist-prompt-cache", "false"});
  std::vector<Msg> chat = {{"system", kSystem}, {"user", "What does the cache keep?"}};
  const TimedReply timed1 = TimedPost(port(), "/v1/chat/completions", ChatRequestBody(chat, 6).dump());
  const Reply& r1 = timed1.reply;
  ASSERT_EQ(r1.status, 200) << r1.raw;
  ExpectTimingsAgreeWithUsage(r1.body, timed1.client_ms);
  EXPECT_EQ(r1.body["timings"]["cache_n"], 0);

  chat.push_back({"assistant", r1.body["choices"][0]["message"]["content"].get<std::string>()});
  chat.push_back({"user", "And what does the next turn read?"});
  const TimedReply timed2 = TimedPost(port(), "/v1/chat/completions", ChatRequestBody(chat, 6).dump());
  const Reply& r2 = timed2.reply;
  ASSERT_EQ(r2.status, 200) << r2.raw;
  ExpectTimingsAgreeWithUsage(r2.body, timed2.client_ms);
  EXPECT_GT(r2.body["timings"]["cache_n"].get<int64_t>(), 0);
  EXPECT_LT(r2.body["timings"]["prompt_n"], r2.body["usage"]["prompt_tokens"]);

  // Streaming, as llama.cpp's server: the last chunk carries them (the usage
  // chunk when asked for, else the one with finish_reason).
  for (bool include_usage : {true, false}) {
    SCOPED_TRACE(include_usage);
    Json body = ChatRequestBody(chat, 4);
    body["stream"] = true;
    body["stream_options"] = {{"include_usage", include_usage}};
    const TimedReply timed = TimedPost(port(), "/v1/chat/completions", body.dump());
    const Reply& s = timed.reply;
    ASSERT_EQ(s.status, 200) << s.raw;
    std::vector<Json> events = SseEvents(s.raw);
    ASSERT_GE(events.size(), 2u) << s.raw;
    for (size_t i = 0; i + 1 < events.size(); ++i) EXPECT_FALSE(events[i].contains("timings")) << i;
    Json last = events.back();
    if (include_usage) {
      ExpectTimingsAgreeWithUsage(last, timed.client_ms);
    } else {
      EXPECT_FALSE(last["choices"][0]["finish_reason"].is_null()) << last.dump();
      ASSERT_TRUE(last.contains("timings")) << last.dump();
    }
    // The same prompt again: all but the one token read for logits is reused.
    EXPECT_EQ(last["timings"]["prompt_n"], 1) << last.dump();
  }

  // Text completions too.
  const TimedReply timed_text = TimedPost(port(), "/v1/completions",
                    Json{{"model", "tiny"}, {"prompt", "The cache keeps"}, {"max_tokens", 3}, {"temperature", 0}}
                        .dump());
  const Reply& text = timed_text.reply;
  ASSERT_EQ(text.status, 200) << text.raw;
  ExpectTimingsAgreeWithUsage(text.body, timed_text.client_ms);
}

// `matricxon bench chat` records each reply's timings in its CSV.
TEST_F(CacheServerTest, BenchChatRecordsTimings) {
  Start({"--persist-prompt-cache", "false"});
  const std::string out = dir_ + "/bench/chat";
  const std::string cmd = BinaryPath() + " bench chat --url http://127.0.0.1:" + std::to_string(port()) +
                          " --model tiny --turns 3 --system-words 20 --user-words 8 --reply-tokens 4 --modes on"
                          " --out " + out + " > " + dir_ + "/bench.log 2>&1";
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
  ASSERT_LT(col("prompt_ms"), cols.size()) << header;
  ASSERT_LT(col("cache_ms"), cols.size()) << header;
  ASSERT_LT(col("prompt_n"), cols.size()) << header;
  int rows = 0;
  while (std::getline(csv, line)) {
    std::vector<std::string> f;
    std::stringstream ls(line);
    for (std::string c; std::getline(ls, c, ',');) f.push_back(c);
    ASSERT_EQ(f.size(), cols.size()) << line;
    ++rows;
    EXPECT_GT(std::stod(f[col("prompt_ms")]), 0.0) << line;
    // The server reported its cache time (the column is empty otherwise), and
    // its cache and prompt time lie inside the client's wait for the reply
    // (the CSV keeps 6 significant digits).
    ASSERT_FALSE(f[col("cache_ms")].empty()) << line;
    EXPECT_LE(std::stod(f[col("cache_ms")]) + std::stod(f[col("prompt_ms")]),
              std::stod(f[col("total_ms")]) * 1.00001)
        << line;
    EXPECT_EQ(std::stoll(f[col("prompt_n")]) + std::stoll(f[col("cached_tokens")]),
              std::stoll(f[col("prompt_tokens")]))
        << line;
    if (rows > 1) {
      EXPECT_GT(std::stoll(f[col("cached_tokens")]), 0) << line;
    }
    // The tiny model's reply tokens have empty text: the first token is still
    // seen (by its logprobs), before the reply ends.
    EXPECT_LT(std::stod(f[col("ttft_ms")]), std::stod(f[col("total_ms")])) << line;
  }
  EXPECT_EQ(rows, 3);
  std::ifstream log(dir_ + "/bench.log");
  std::stringstream ss;
  ss << log.rdbuf();
  EXPECT_NE(ss.str().find("cache_ms/prompt_ms"), std::string::npos) << ss.str();
}

TEST_F(CacheServerTest, BadCacheSettingStopsStartup) {
  ServerProcess p;
  std::string error;
  dir_ = TempDir("cache_bad");
  EXPECT_FALSE(p.Start({}, {{"MATRICXON_PROMPT_CACHE_SLOTS", "65"}, {"MATRICXON_MODELS_DIR", dir_}},
                       dir_ + "/log", &error));
  EXPECT_NE(error.find("MATRICXON_PROMPT_CACHE_SLOTS"), std::string::npos) << error;
}

// A greedy chat turn with each reply token's piece and log-probability.
struct TokenTurn {
  Turn turn;
  Json tokens;  // choices[0].logprobs.content: [{token, logprob, bytes, top_logprobs}]
};
TokenTurn ChatTokens(int port, const std::vector<Msg>& msgs, int max_tokens, bool cache) {
  Json body = ChatRequestBody(msgs, max_tokens, cache);
  body["logprobs"] = true;
  Reply r = Post(port, "/v1/chat/completions", body.dump());
  EXPECT_EQ(r.status, 200) << r.raw;
  if (r.status != 200) return {};
  return {{r.body["choices"][0]["message"]["content"].get<std::string>(),
           r.body["usage"]["prompt_tokens"].get<int64_t>(),
           r.body["usage"]["prompt_tokens_details"]["cached_tokens"].get<int64_t>()},
          r.body["choices"][0]["logprobs"]["content"]};
}

// Random multi-turn chats from two concurrent users, with limits small enough
// to force copies, evictions and saved caches: every cached reply equals the
// reply read from scratch (cache_prompt: false), token for token and to the
// bit of each token's log-probability.
//
// Context shift is off here: it is approximate by design (kept rows were
// computed while seeing the dropped ones; prompt_cache_test bounds it), and
// these chats share a system prompt and an eight-word vocabulary, so a new
// chat whose first message equals a later message of another cached chat
// reads, token for token, like that chat trimmed by its client; with shift
// on, such a reply (and the rest of that chat) then differs from a re-read.
// Which entries the pool holds when that happens depends on how the two
// users' turns interleave, so with shift on the test failed only sometimes.
TEST_F(CacheServerTest, RandomChatsNeverChangeAReply) {
  Start({"--prompt-cache-slots", "3", "--parallel", "2", "--prompt-cache-context-shift", "false"});
  std::mt19937 rng(7);
  const std::vector<std::string> words = {"cache", "turn", "token", "model", "chat", "state", "reply", "notes"};
  auto sentence = [&] {
    std::string s;
    for (int i = 0, n = 2 + static_cast<int>(rng() % 5); i < n; ++i) s += words[rng() % words.size()] + " ";
    return s;
  };
  std::vector<std::vector<Msg>> chats;
  int reused = 0, tokens_compared = 0;
  for (int round = 0; round < 8; ++round) {
    std::vector<std::vector<Msg>> prompts;
    for (int u = 0; u < 2; ++u) {
      if (chats.empty() || rng() % 3 == 0) {
        chats.push_back({{"system", kSystem}, {"user", sentence()}});
        prompts.push_back(chats.back());
      } else {
        auto& c = chats[rng() % chats.size()];
        c.push_back({"user", sentence()});
        prompts.push_back(c);
      }
    }
    std::vector<TokenTurn> cached(2);
    std::thread other([&] { cached[1] = ChatTokens(port(), prompts[1], 6, /*cache=*/true); });
    cached[0] = ChatTokens(port(), prompts[0], 6, /*cache=*/true);
    other.join();
    for (int u = 0; u < 2; ++u) {
      const TokenTurn fresh = ChatTokens(port(), prompts[u], 6, /*cache=*/false);
      ASSERT_TRUE(fresh.tokens.is_array() && !fresh.tokens.empty()) << fresh.tokens.dump();
      ASSERT_EQ(cached[u].tokens, fresh.tokens)
          << "round " << round << " user " << u << ": reused " << cached[u].turn.cached << " of "
          << cached[u].turn.prompt_tokens << " prompt tokens\n"
          << Log();
      EXPECT_EQ(cached[u].turn.text, fresh.turn.text);
      reused += cached[u].turn.cached > 0;
      tokens_compared += static_cast<int>(fresh.tokens.size());
    }
    for (auto& c : chats) {
      if (c.back().role == "user") c.push_back({"assistant", "ok"});
    }
  }
  EXPECT_GT(reused, 6);
  EXPECT_GT(tokens_compared, 16);
  EXPECT_EQ(Log().find("context shift"), std::string::npos) << Log();
}

}  // namespace
}  // namespace mx::testing
