#include "server/api_types.h"

#include <gtest/gtest.h>

#include "server/http_util.h"

namespace mx::server {
namespace {

Result<ChatRequest> Chat(const std::string& body) {
  auto j = ParseJsonBody(body);
  if (!j.ok()) return j.status();
  return ParseChatRequest(*j);
}

void ExpectBad(const Status& st, const std::string& needle) {
  EXPECT_EQ(st.code(), Status::Code::kInvalidArgument) << st.ToString();
  EXPECT_NE(st.message().find(needle), std::string::npos) << st.message();
}

TEST(ApiTypesTest, InvalidJsonIsRejected) { ExpectBad(ParseJsonBody("{nope").status(), "invalid JSON"); }

TEST(ApiTypesTest, BodyMustBeAnObject) { ExpectBad(ParseJsonBody("[1]").status(), "object"); }

TEST(ApiTypesTest, ChatWithStringAndPartsContent) {
  auto r = Chat(R"({"model":"m","messages":[{"role":"system","content":"S"},
      {"role":"user","content":[{"type":"text","text":"a"},{"type":"text","text":"b"}]}],
      "max_tokens":7,"temperature":0,"top_k":3,"top_p":0.5,"min_p":0.1,"seed":42,"stop":"X",
      "logprobs":true,"top_logprobs":2,"stream":true})");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->gen.model, "m");
  ASSERT_EQ(r->messages.size(), 2u);
  EXPECT_EQ(r->messages[1].content, "ab");
  EXPECT_EQ(*r->gen.max_tokens, 7);
  EXPECT_EQ(r->gen.sampling.temperature, 0.0f);
  EXPECT_EQ(r->gen.sampling.top_k, 3);
  EXPECT_EQ(r->gen.sampling.seed, 42u);
  EXPECT_EQ(r->gen.stop, std::vector<std::string>{"X"});
  EXPECT_TRUE(r->logprobs);
  EXPECT_EQ(r->top_logprobs, 2);
  EXPECT_TRUE(r->gen.stream);
}

TEST(ApiTypesTest, MaxCompletionTokensIsAccepted) {
  auto r = Chat(R"({"messages":[{"role":"user","content":"x"}],"max_completion_tokens":3})");
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(*r->gen.max_tokens, 3);
}

TEST(ApiTypesTest, UserFieldIsAString) {
  auto r = Chat(R"({"messages":[{"role":"user","content":"x"}],"user":"u-42"})");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->gen.user, "u-42");
  auto none = Chat(R"({"messages":[{"role":"user","content":"x"}]})");
  ASSERT_TRUE(none.ok());
  EXPECT_EQ(none->gen.user, "");
  ExpectBad(Chat(R"({"messages":[{"role":"user","content":"x"}],"user":7})").status(),
            "'user' must be a string");
  auto j = ParseJsonBody(R"({"prompt":"p","user":"u1"})");
  ASSERT_TRUE(j.ok());
  auto c = ParseCompletionRequest(*j);
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->gen.user, "u1");
}

// Picture parts parse (the picture is loaded once the model is known); a
// part without a URL names the field.
TEST(ApiTypesTest, ImagePartsNeedAUrl) {
  EXPECT_TRUE(Chat(R"({"model":"tiny","messages":[{"role":"user","content":[
      {"type":"image_url","image_url":{"url":"data:x"}},{"type":"input_image","image_url":"data:y"}]}]})")
                  .ok());
  ExpectBad(Chat(R"({"messages":[{"role":"user","content":[{"type":"image_url","image_url":{"u":1}}]}]})")
                .status(),
            "messages[0].content[0].image_url");
  ExpectBad(Chat(R"({"messages":[{"role":"user","content":[{"type":"image_url"}]}]})").status(),
            "messages[0].content[0].image_url");
}

TEST(ApiTypesTest, WrongTypeNamesTheField) {
  ExpectBad(Chat(R"({"messages":[{"role":"user","content":"x"}],"temperature":"hot"})").status(), "'temperature'");
  ExpectBad(Chat(R"({"messages":[{"role":"user","content":"x"}],"max_tokens":1.5})").status(), "'max_tokens'");
  ExpectBad(Chat(R"({"messages":"hi"})").status(), "'messages'");
  ExpectBad(Chat(R"({"messages":[{"role":"user","content":5}]})").status(), "messages[0].content");
}

TEST(ApiTypesTest, OutOfRangeValuesAreRejected) {
  ExpectBad(Chat(R"({"messages":[{"role":"user","content":"x"}],"temperature":3})").status(), "'temperature'");
  ExpectBad(Chat(R"({"messages":[{"role":"user","content":"x"}],"n":17})").status(), "'n' must be in [1, 16]");
  ExpectBad(Chat(R"({"messages":[{"role":"user","content":"x"}],"n":0})").status(), "'n' must be in [1, 16]");
  ExpectBad(Chat(R"({"messages":[{"role":"user","content":"x"}],"logprobs":true,"top_logprobs":21})").status(),
            "'top_logprobs'");
}

TEST(ApiTypesTest, MissingMessagesIsRejected) { ExpectBad(Chat(R"({"model":"m"})").status(), "'messages'"); }

TEST(ApiTypesTest, EmptyOrMissingRoleIsRejected) {
  ExpectBad(Chat(R"({"messages":[{"role":"","content":"x"}]})").status(), "role");
  ExpectBad(Chat(R"({"messages":[{"content":"x"}]})").status(), "role");
}

TEST(ApiTypesTest, ToolRoleAndToolCallsAreAccepted) {
  auto r = Chat(R"({"messages":[{"role":"user","content":"x"},
      {"role":"assistant","content":null,"tool_calls":[{"type":"function","function":{"name":"f","arguments":{}}}]},
      {"role":"tool","content":"42"}],"tools":[],"chat_template_kwargs":{"enable_thinking":false}})");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
}

TEST(ApiTypesTest, ChatTemplateKwargsMustBeAnObject) {
  ExpectBad(
      Chat(R"({"messages":[{"role":"user","content":"x"}],"chat_template_kwargs":[1]})").status(),
      "'chat_template_kwargs'");
}

TEST(ApiTypesTest, ChatTemplateKwargsHaveAtMost1024Keys) {
  auto body = [](size_t n) {
    std::string kw;
    for (size_t i = 0; i < n; ++i) kw += (i ? ",\"k" : "\"k") + std::to_string(i) + "\":1";
    return R"({"messages":[{"role":"user","content":"x"}],"chat_template_kwargs":{)" + kw + "}}";
  };
  EXPECT_TRUE(Chat(body(kMaxTemplateKwargs)).ok());
  auto r = Chat(body(kMaxTemplateKwargs + 1));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().message(), "'chat_template_kwargs' has 1025 keys; at most 1024 are accepted");
}

TEST(ApiTypesTest, ChatPromptKeepsKeyOrder) {
  auto p = ChatPromptFromBody(R"({"messages":[{"role":"user","content":"x"}],
      "tools":[{"zeta":1,"alpha":2}],"chat_template_kwargs":{"enable_thinking":false}})");
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  ASSERT_TRUE(p->tools.is_sequence());
  const auto& items = p->tools.as_list()[0].as_dict().items();
  ASSERT_EQ(items.size(), 2u);
  EXPECT_EQ(items[0].first.as_string(), "zeta");
  ASSERT_TRUE(p->kwargs.is_dict());
  EXPECT_FALSE(p->kwargs.as_dict().Find("enable_thinking")->Truthy());
}

TEST(ApiTypesTest, CompletionPromptStringOrTokens) {
  auto a = ParseCompletionRequest(Json::parse(R"({"prompt":"hello","echo":true,"logprobs":2})"));
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(a->prompt_text, "hello");
  EXPECT_FALSE(a->prompt_is_tokens);
  EXPECT_TRUE(a->echo);
  EXPECT_EQ(a->logprobs, 2);
  EXPECT_EQ(*a->gen.max_tokens, 16);
  auto b = ParseCompletionRequest(Json::parse(R"({"prompt":[1,2,3]})"));
  ASSERT_TRUE(b.ok());
  EXPECT_TRUE(b->prompt_is_tokens);
  EXPECT_EQ(b->prompt_tokens, (std::vector<int32_t>{1, 2, 3}));
  ExpectBad(ParseCompletionRequest(Json::parse(R"({"prompt":[1,"x"]})")).status(), "'prompt'");
  ExpectBad(ParseCompletionRequest(Json::parse(R"({"prompt":5})")).status(), "'prompt'");
}

TEST(ApiTypesTest, TokenizeAndDetokenize) {
  auto t = ParseTokenizeRequest(Json::parse(R"({"content":"hi","model":"m"})"));
  ASSERT_TRUE(t.ok());
  EXPECT_EQ(t->content, "hi");
  EXPECT_EQ(t->model, "m");
  ExpectBad(ParseTokenizeRequest(Json::parse(R"({"content":1})")).status(), "'content'");
  auto d = ParseDetokenizeRequest(Json::parse(R"({"tokens":[5,6]})"));
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(d->tokens, (std::vector<int32_t>{5, 6}));
  ExpectBad(ParseDetokenizeRequest(Json::parse(R"({"tokens":[-1]})")).status(), "'tokens'");
}

engine::GenEvent FinalEvent(int64_t prompt, int64_t cached, int64_t completion) {
  engine::GenEvent ev;
  ev.final = true;
  ev.prompt_tokens = prompt;
  ev.cached_tokens = cached;
  ev.completion_tokens = completion;
  return ev;
}

TEST(RenderTest, TimingsAgreeWithUsage) {
  engine::GenEvent ev = FinalEvent(300, 280, 8);
  ev.timings = {.queue_ms = 1.5, .cache_ms = 0.25, .prompt_ms = 40.0, .predicted_ms = 80.0};
  Json u = UsageJson(ev);
  Json t = TimingsJson(ev);
  EXPECT_EQ(u["prompt_tokens"], 300);
  EXPECT_EQ(u["total_tokens"], 308);
  EXPECT_EQ(t["cache_n"], u["prompt_tokens_details"]["cached_tokens"]);
  EXPECT_EQ(t["prompt_n"].get<int64_t>() + t["cache_n"].get<int64_t>(), u["prompt_tokens"].get<int64_t>());
  EXPECT_EQ(t["predicted_n"], u["completion_tokens"]);
  EXPECT_DOUBLE_EQ(t["queue_ms"].get<double>(), 1.5);
  EXPECT_DOUBLE_EQ(t["cache_ms"].get<double>(), 0.25);
  EXPECT_DOUBLE_EQ(t["prompt_ms"].get<double>(), 40.0);
  EXPECT_DOUBLE_EQ(t["prompt_per_token_ms"].get<double>(), 2.0);
  EXPECT_DOUBLE_EQ(t["prompt_per_second"].get<double>(), 500.0);
  EXPECT_DOUBLE_EQ(t["predicted_ms"].get<double>(), 80.0);
  EXPECT_DOUBLE_EQ(t["predicted_per_token_ms"].get<double>(), 10.0);
  EXPECT_DOUBLE_EQ(t["predicted_per_second"].get<double>(), 100.0);
}

TEST(RenderTest, TimingsRoundToTheMicrosecond) {
  engine::GenEvent ev = FinalEvent(10, 0, 1);
  ev.timings.cache_ms = 0.0123456;
  EXPECT_DOUBLE_EQ(TimingsJson(ev)["cache_ms"].get<double>(), 0.012);
}

TEST(RenderTest, RatesOverNoTimeAreZeroNotInfinite) {
  Json t = TimingsJson(FinalEvent(10, 0, 0));  // e.g. a request cancelled before its first step
  for (const char* f : {"prompt_per_second", "predicted_per_second", "predicted_per_token_ms"}) {
    ASSERT_TRUE(t[f].is_number()) << f;
    EXPECT_EQ(t[f].get<double>(), 0.0) << f;
  }
  EXPECT_EQ(t["prompt_n"], 10);
}

TEST(HttpUtilTest, StatusToHttpCode) {
  EXPECT_EQ(HttpCode(Status::Ok()), 200);
  EXPECT_EQ(HttpCode(Status::InvalidArgument("x")), 400);
  EXPECT_EQ(HttpCode(Status::NotFound("x")), 404);
  EXPECT_EQ(HttpCode(Status::ResourceExhausted("x")), 503);
  EXPECT_EQ(HttpCode(Status::IOError("x")), 500);
}

TEST(HttpUtilTest, ErrorShapeIsOpenAi) {
  Json j = ErrorJson(Status::NotFound("model 'x' does not exist"));
  ASSERT_TRUE(j.contains("error"));
  EXPECT_EQ(j["error"]["message"], "model 'x' does not exist");
  EXPECT_EQ(j["error"]["type"], "not_found_error");
  EXPECT_TRUE(j["error"].contains("param"));
  EXPECT_EQ(j["error"]["code"], "model_not_found");
}

}  // namespace
}  // namespace mx::server
