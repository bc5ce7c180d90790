// ChatChoice: a reply's text -> the assistant message and the stream's
// deltas, which add up to the same message.
#include "server/chat_choice.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace mx::server {
namespace {

using Json = nlohmann::json;
using toolcalls::ToolCallFormat;

// The deltas of `text` fed in pieces of `piece` bytes, folded into a message.
Json StreamedMessage(const ChatChoiceOptions& options, const std::string& text, size_t piece) {
  ChatChoice choice(options);
  std::vector<Json> deltas;
  for (size_t at = 0; at < text.size(); at += piece) {
    for (Json& d : choice.Deltas(text.substr(at, piece))) deltas.push_back(std::move(d));
  }
  for (Json& d : choice.Rest()) deltas.push_back(std::move(d));
  std::string content, reasoning;
  size_t calls = 0;
  for (const Json& d : deltas) {
    content += d.value("content", "");
    reasoning += d.value("reasoning_content", "");
    if (d.contains("tool_calls")) ++calls;
  }
  Json m = {{"role", "assistant"}, {"content", content}};
  if (!reasoning.empty()) m["reasoning_content"] = reasoning;
  if (calls > 0) m["tool_call_deltas"] = calls;
  return m;
}

// What the server sets for a gpt-oss chat without tools (or tool_choice "none").
ChatChoiceOptions HarmonyWithoutCalls() {
  return {.tool_format = ToolCallFormat::kHarmony, .parse_calls = false, .env = Env::Default()};
}

TEST(ChatChoiceTest, HarmonyWithoutToolsSplitsAnalysisFromTheFinalAnswer) {
  const std::string text =
      "<|channel|>analysis<|message|>Just answer.<|end|><|start|>assistant<|channel|>final"
      "<|message|>Hello there.";
  ChatChoice choice(HarmonyWithoutCalls());
  const Json m = choice.Message(text);
  EXPECT_EQ(m["content"], "Hello there.") << m.dump();
  EXPECT_EQ(m["reasoning_content"], "Just answer.") << m.dump();
  EXPECT_FALSE(m.contains("tool_calls"));
  EXPECT_FALSE(choice.called());
  for (size_t piece : {1, 3, 7, 1000}) {
    EXPECT_EQ(StreamedMessage(HarmonyWithoutCalls(), text, piece), m) << "pieces of " << piece;
  }
}

TEST(ChatChoiceTest, HarmonyWithoutToolsKeepsACallAsContent) {
  const std::string call =
      "<|start|>assistant<|channel|>commentary to=functions.get_weather <|constrain|>json"
      "<|message|>{\"city\": \"Oslo\"}";
  const std::string text =
      "<|channel|>analysis<|message|>Call it anyway.<|end|>" + call + "<|call|>";
  ChatChoice choice(HarmonyWithoutCalls());
  const Json m = choice.Message(text);
  EXPECT_EQ(m["content"], call) << m.dump();
  EXPECT_EQ(m["reasoning_content"], "Call it anyway.");
  EXPECT_FALSE(m.contains("tool_calls")) << m.dump();
  EXPECT_FALSE(choice.called());
  for (size_t piece : {1, 5, 1000}) {
    EXPECT_EQ(StreamedMessage(HarmonyWithoutCalls(), text, piece), m) << "pieces of " << piece;
  }
  // With tools, the same reply calls the tool.
  ChatChoiceOptions with_tools = HarmonyWithoutCalls();
  with_tools.parse_calls = true;
  ChatChoice caller(with_tools);
  const Json called = caller.Message(text);
  EXPECT_TRUE(called["content"].is_null()) << called.dump();
  ASSERT_EQ(called["tool_calls"].size(), 1u) << called.dump();
  EXPECT_EQ(called["tool_calls"][0]["function"]["name"], "get_weather");
  EXPECT_TRUE(caller.called());
}

TEST(ChatChoiceTest, WithoutASyntaxTheTextIsContent) {
  const std::string text = "<|channel|>final<|message|>raw";
  ChatChoice choice(ChatChoiceOptions{});
  EXPECT_EQ(choice.Message(text), (Json{{"role", "assistant"}, {"content", text}}));
}

}  // namespace
}  // namespace mx::server
