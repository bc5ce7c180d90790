// The OpenAI chat fields a client may send beyond messages, over real HTTP
// against `matricxon serve` on a reference model (real text): n choices from
// one prompt read, logit_bias, penalties, seeds across the cache, stop
// strings that span tokens in a stream, and 400s naming the field.
#include <gtest/gtest.h>
#include <signal.h>

#include <filesystem>
#include <map>
#include <memory>
#include <string>

#include "http_helpers.h"
#include "server_process.h"

namespace mx::testing {
namespace {

namespace fs = std::filesystem;

Json UserChat(const std::string& text, int max_tokens) {
  return {{"model", "tiny"},
          {"messages", {{{"role", "user"}, {"content", text}}}},
          {"max_tokens", max_tokens},
          {"temperature", 0}};
}

class OpenAiApiServerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    signal(SIGPIPE, SIG_IGN);
    dir_ = TempDir(std::string("openai_api_") +
                   ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::copy_file(std::string(MATRICXON_REF_DIR) + "/models/tiny-qwen3.gguf",
                  dir_ + "/models/tiny.gguf");
    server_ = std::make_unique<ServerProcess>();
    std::string error;
    ASSERT_TRUE(
        server_->Start({"--threads", "1", "--ctx-size", "1024", "--persist-prompt-cache", "false"},
                       {{"MATRICXON_MODELS_DIR", dir_ + "/models"}}, dir_ + "/server.log", &error))
        << error;
  }
  void TearDown() override {
    server_.reset();
    fs::remove_all(dir_);
  }
  int port() const { return server_->port(); }

  // The reply's token pieces (from logprobs) and its content.
  struct Pieces {
    std::vector<std::string> pieces;
    std::string content;
    Json body;
  };
  Pieces Chat(Json body) {
    body["logprobs"] = true;
    Reply r = Post(port(), "/v1/chat/completions", body.dump());
    EXPECT_EQ(r.status, 200) << r.raw;
    Pieces p;
    if (r.status != 200) return p;
    for (const Json& e : r.body["choices"][0]["logprobs"]["content"])
      p.pieces.push_back(e["token"]);
    p.content = r.body["choices"][0]["message"]["content"];
    p.body = r.body;
    return p;
  }
  // The first token of `text` and its piece.
  std::pair<int32_t, std::string> FirstToken(const std::string& text) {
    Reply r = Post(port(), "/tokenize",
                   Json{{"content", text}, {"add_special", false}, {"with_pieces", true}}.dump());
    EXPECT_EQ(r.status, 200) << r.raw;
    if (r.status != 200 || r.body["tokens"].empty()) return {-1, ""};
    const Json& t = r.body["tokens"][0];
    return {t["id"].get<int32_t>(), t["piece"].get<std::string>()};
  }

  std::string dir_;
  std::unique_ptr<ServerProcess> server_;
};

TEST_F(OpenAiApiServerTest, ChoicesShareOnePromptReadWholeAndStreamed) {
  const std::string solo = Chat(UserChat("Tell me about the sea.", 10)).content;
  ASSERT_FALSE(solo.empty());
  Json body = UserChat("Tell me about the weather.", 10);
  body["n"] = 3;
  Reply r = Post(port(), "/v1/chat/completions", body.dump());
  ASSERT_EQ(r.status, 200) << r.raw;
  ASSERT_EQ(r.body["choices"].size(), 3u) << r.raw;
  int64_t per_choice = -1;
  for (int c = 0; c < 3; ++c) {
    const Json& ch = r.body["choices"][c];
    EXPECT_EQ(ch["index"], c);
    EXPECT_EQ(ch["message"]["content"], r.body["choices"][0]["message"]["content"])
        << "greedy choices agree";
    EXPECT_TRUE(ch["finish_reason"] == "length" || ch["finish_reason"] == "stop") << ch.dump();
  }
  const Reply one =
      Post(port(), "/v1/chat/completions", UserChat("Tell me about the weather.", 10).dump());
  ASSERT_EQ(one.status, 200);
  per_choice = one.body["usage"]["completion_tokens"].get<int64_t>();
  EXPECT_EQ(r.body["choices"][0]["message"]["content"],
            one.body["choices"][0]["message"]["content"]);
  // Usage: the prompt once, the completions of all three.
  EXPECT_EQ(r.body["usage"]["prompt_tokens"], one.body["usage"]["prompt_tokens"]);
  EXPECT_EQ(r.body["usage"]["completion_tokens"].get<int64_t>(), 3 * per_choice);
  EXPECT_NE(server_->Log().find("2 further choices copied from the prompt's state"),
            std::string::npos);

  body["stream"] = true;
  body["messages"][0]["content"] = "Tell me about the mountains.";
  body["stream_options"] = {{"include_usage", true}};
  Reply s = Post(port(), "/v1/chat/completions", body.dump());
  ASSERT_EQ(s.status, 200);
  bool done = false;
  std::vector<Json> events = ParseSse(s.raw, &done);
  EXPECT_TRUE(done);
  std::map<int, std::string> text;
  std::map<int, int> finishes;
  int usage_chunks = 0;
  for (const Json& e : events) {
    ASSERT_TRUE(e.is_object()) << s.raw;
    if (e.contains("usage") && !e["usage"].is_null()) {
      ++usage_chunks;
      EXPECT_TRUE(e["choices"].empty());
      EXPECT_EQ(e["usage"]["completion_tokens"].get<int64_t>() % 3, 0);
      continue;
    }
    ASSERT_EQ(e["choices"].size(), 1u);
    const Json& ch = e["choices"][0];
    const int c = ch["index"];
    EXPECT_GE(c, 0);
    EXPECT_LT(c, 3);
    if (ch["delta"].contains("content")) text[c] += ch["delta"]["content"].get<std::string>();
    if (!ch["finish_reason"].is_null()) ++finishes[c];
  }
  EXPECT_EQ(usage_chunks, 1);
  for (int c = 0; c < 3; ++c) {
    EXPECT_EQ(finishes[c], 1) << "choice " << c;
    EXPECT_EQ(text[c], text[0]) << "choice " << c;
  }
  EXPECT_FALSE(text[0].empty());
}

TEST_F(OpenAiApiServerTest, LogitBiasForcesAndBansTokens) {
  const Pieces greedy = Chat(UserChat("Say something.", 6));
  ASSERT_GE(greedy.pieces.size(), 2u);
  const auto [forced, piece] = FirstToken("hello");
  ASSERT_GE(forced, 0);
  Json body = UserChat("Say something.", 4);
  body["logit_bias"] = {{std::to_string(forced), 100}};
  const Pieces f = Chat(body);
  ASSERT_EQ(f.pieces.size(), 4u) << f.body.dump();
  for (const std::string& p : f.pieces) EXPECT_EQ(p, piece);
  // Banning the greedy first token changes the first token.
  const int32_t first = FirstToken(greedy.pieces[0]).first;
  body = UserChat("Say something.", 6);
  body["logit_bias"] = Json::array({Json::array({first, false})});
  const Pieces b = Chat(body);
  ASSERT_FALSE(b.pieces.empty());
  EXPECT_NE(b.pieces[0], greedy.pieces[0]);
  // An id outside the vocabulary is the client's error.
  body["logit_bias"] = {{"999999", 5}};
  Reply bad = Post(port(), "/v1/chat/completions", body.dump());
  EXPECT_EQ(bad.status, 400);
  EXPECT_NE(bad.raw.find("logit_bias"), std::string::npos) << bad.raw;
}

TEST_F(OpenAiApiServerTest, PenaltiesChangeTheReplyAndOutOfRangeIsNamed) {
  Json body = UserChat("Repeat after me: a a a a a a", 12);
  const Pieces plain = Chat(body);
  body["frequency_penalty"] = 2.0;
  body["presence_penalty"] = 2.0;
  body["repeat_last_n"] = -1;
  const Pieces penalised = Chat(body);
  EXPECT_NE(penalised.pieces, plain.pieces);
  for (const char* field : {"frequency_penalty", "presence_penalty"}) {
    Json bad = UserChat("x", 2);
    bad[field] = 2.5;
    Reply r = Post(port(), "/v1/chat/completions", bad.dump());
    EXPECT_EQ(r.status, 400) << field;
    EXPECT_NE(r.raw.find(field), std::string::npos) << r.raw;
  }
  Json bad = UserChat("x", 2);
  bad["n"] = 0;
  Reply r = Post(port(), "/v1/chat/completions", bad.dump());
  EXPECT_EQ(r.status, 400);
  EXPECT_NE(r.raw.find("'n'"), std::string::npos) << r.raw;
  // Unknown fields are ignored, as OpenAI does.
  Json unknown = UserChat("x", 2);
  unknown["some_future_field"] = {{"a", 1}};
  EXPECT_EQ(Post(port(), "/v1/chat/completions", unknown.dump()).status, 200);
}

TEST_F(OpenAiApiServerTest, SeededRepliesAreTheSameFromTheCacheAndFromAColdRead) {
  Json body = UserChat("Write a line of a poem.", 12);
  body["temperature"] = 1.0;
  body["seed"] = 1234;
  const Pieces first = Chat(body);
  const Pieces again = Chat(body);  // continues from the cached prompt
  EXPECT_GT(again.body["usage"]["prompt_tokens_details"]["cached_tokens"].get<int64_t>(), 0);
  EXPECT_EQ(again.pieces, first.pieces);
  body["cache_prompt"] = false;
  const Pieces cold = Chat(body);
  EXPECT_EQ(cold.body["usage"]["prompt_tokens_details"]["cached_tokens"], 0);
  EXPECT_EQ(cold.pieces, first.pieces);
  body["seed"] = 4321;
  body["cache_prompt"] = true;
  EXPECT_NE(Chat(body).pieces, first.pieces);
}

TEST_F(OpenAiApiServerTest, StopStringSpanningTokensIsNeverStreamed) {
  const Pieces greedy = Chat(UserChat("Tell me a story.", 12));
  // A stop string across the boundary of two pieces, past the first.
  size_t k = 1;
  while (k + 1 < greedy.pieces.size() && (greedy.pieces[k].empty() || greedy.pieces[k + 1].empty()))
    ++k;
  ASSERT_LT(k + 1, greedy.pieces.size()) << greedy.body.dump();
  const std::string stop =
      greedy.pieces[k].substr(greedy.pieces[k].size() - 1) + greedy.pieces[k + 1].substr(0, 1);
  const size_t at = greedy.content.find(stop);
  ASSERT_NE(at, std::string::npos);
  Json body = UserChat("Tell me a story.", 12);
  body["stop"] = Json::array({stop});
  body["stream"] = true;
  Reply s = Post(port(), "/v1/chat/completions", body.dump());
  ASSERT_EQ(s.status, 200);
  bool done = false;
  std::string text;
  std::string finish;
  for (const Json& e : ParseSse(s.raw, &done)) {
    if (e["choices"].empty()) continue;
    const Json& ch = e["choices"][0];
    if (ch["delta"].contains("content")) text += ch["delta"]["content"].get<std::string>();
    if (!ch["finish_reason"].is_null()) finish = ch["finish_reason"];
  }
  EXPECT_TRUE(done);
  EXPECT_EQ(text, greedy.content.substr(0, at));
  EXPECT_EQ(text.find(stop), std::string::npos);
  EXPECT_EQ(finish, "stop");
}

}  // namespace
}  // namespace mx::testing
