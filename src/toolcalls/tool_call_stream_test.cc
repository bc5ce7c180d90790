// ToolCallStream: the events of any split of a text add up to ParseToolCalls
// of the whole text; text is released as soon as it cannot start a marker.
#include <gtest/gtest.h>

#include <random>

#include "toolcalls/formats.h"
#include "toolcalls/tool_calls.h"
#include "toolcalls/toolcalls_test_util.h"

namespace mx::toolcalls {
namespace {

using F = ToolCallFormat;

struct Sample {
  F format;
  std::string text;
};

// Calls, preambles, parallel calls and malformed calls of every family.
std::vector<Sample> Samples() {
  return {
      {F::kHermes,
       "Let me check.\n\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": "
       "\"Paris\"}}\n</tool_call>\n<tool_call>\n{\"name\": \"s\", \"arguments\": {\"q\": \"é\"}}\n"
       "</tool_call>"},
      {F::kHermes, "<tool_call>{\"name\": \"f\", \"arguments\": {\"a\": }}</tool_call> after"},
      {F::kHermes, "a <tool_ca b <tool_call>{\"name\": \"f\", \"arguments\": {}}"},
      {F::kHermes,
       "  \n<tool_call>\n{\"name\": \"f\", \"arguments\": {\"x\": [1, 2]}}\n</tool_call>\n\n"},
      {F::kQwen3Xml,
       "Sure.\n<tool_call>\n<function=get_weather>\n<parameter=city>\nParis\n</parameter>\n"
       "<parameter=days>\n3\n</parameter>\n</function>\n</tool_call>\n<tool_call>\n<function=x>\n"
       "<parameter=a>\n1\n</function>\n</tool_call>"},
      {F::kQwen3Xml, "<tool_call>\n{\"name\": \"f\", \"arguments\": {}}\n</tool_call>"},
      {F::kLlama3Json, "{\"name\": \"John\", \"age\": 3}"},
      {F::kSeedOss,
       "<seed:tool_call>\n<function=f>\n<parameter=a>x</parameter>\n</function>\n</"
       "seed:tool_call>"},
      {F::kLlama3Json,
       "{\"name\": \"f\", \"parameters\": {\"a\": 1}}\n{\"name\": \"g\", \"parameters\": {}}"},
      {F::kLlama3Json, "  {\"answer\": {\"name\": 1}} and more"},
      {F::kLlama3Json, "Text <|python_tag|>{\"name\": \"f\", \"parameters\": {}}"},
      {F::kMistralJson,
       "[TOOL_CALLS][{\"name\": \"a\", \"arguments\": {}, \"id\": \"abcdefghi\"}]"},
      {F::kMistralArgs, "Ok[TOOL_CALLS]a[CALL_ID]abcdefghi[ARGS]{\"x\": 1}[TOOL_CALLS]b[ARGS]{}"},
      {F::kMistralArgs, "[TOOL_CALLS]a[ARGS]{\"x\": 1"},
      {F::kHarmony,
       "<|channel|>analysis<|message|>Think <|about|> it.<|end|><|start|>assistant<|channel|>"
       "commentary to=functions.f <|constrain|>json<|message|>{\"a\": 1}<|call|>"},
      {F::kHarmony, " to=functions.f<|channel|>commentary json<|message|>{\"a\": 2}"},
      {F::kHarmony,
       "<|channel|>analysis<|message|>x<|end|><|start|>assistant<|channel|>final<|message|>Done."},
      {F::kDeepSeekR1,
       "Hi<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>f\n```json\n{\"a\": 1}\n"
       "```<｜tool▁call▁end｜>\n<｜tool▁call▁begin｜>function<｜tool▁sep｜>g\n```json\n{}\n```"
       "<｜tool▁call▁end｜><｜tool▁calls▁end｜>"},
      {F::kDeepSeekV31,
       "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>f<｜tool▁sep｜>{\"a\": 1}<｜tool▁call▁end｜>"},
      {F::kDeepSeekDsml,
       "<｜DSML｜tool_calls>\n<｜DSML｜invoke name=\"f\">\n<｜DSML｜parameter name=\"a\" "
       "string=\"false\">1</｜DSML｜parameter>\n</｜DSML｜invoke>\n</｜DSML｜tool_calls>"},
      {F::kKimiK2,
       "<|tool_calls_section_begin|><|tool_call_begin|>functions.f:0<|tool_call_argument_begin|>"
       "{\"a\": 1}<|tool_call_end|><|tool_calls_section_end|>"},
      {F::kGlm, "<tool_call>f\n<arg_key>a</arg_key>\n<arg_value>1</arg_value>\n</tool_call>"},
      {F::kMiniCpm, "<function name=\"f\"><param name=\"a\">1</param></function>\n"},
      {F::kFunctionaryV31, "<function=f>{\"a\": 1}</function>"},
      {F::kFirefunction, " functools[{\"name\": \"f\", \"arguments\": {}}]"},
      {F::kGranite, "<|tool_call|>[{\"name\": \"f\", \"arguments\": {}}]"},
      {F::kCommandR, "Action:\n```json\n[{\"tool_name\": \"f\", \"parameters\": {}}]\n```"},
      {F::kNone, "plain text \n"},
  };
}

ParsedToolCalls StreamPieces(F format, const std::vector<std::string_view>& pieces) {
  ToolCallStream s(format);
  ParsedToolCalls r;
  for (std::string_view p : pieces) testing::Fold(s.Feed(p), &r);
  testing::Fold(s.Finish(), &r);
  return r;
}

TEST(ToolCallStreamTest, EverySplitInTwoOrThreeEqualsTheWholeParse) {
  for (const Sample& s : Samples()) {
    const ParsedToolCalls whole = ParseToolCalls(s.format, s.text);
    const std::string_view t(s.text);
    for (size_t i = 0; i <= t.size(); ++i) {
      ASSERT_TRUE(testing::SameResult(StreamPieces(s.format, {t.substr(0, i), t.substr(i)}), whole))
          << ToolCallFormatName(s.format) << " split at " << i << ": " << s.text;
      const size_t j = (i + t.size()) / 2;
      ASSERT_TRUE(testing::SameResult(
          StreamPieces(s.format, {t.substr(0, i), t.substr(i, j - i), t.substr(j)}), whole))
          << ToolCallFormatName(s.format) << " split at " << i << ", " << j;
    }
  }
}

TEST(ToolCallStreamTest, ByteByByteAndRandomPiecesEqualTheWholeParse) {
  std::mt19937 rng(7);
  for (const Sample& s : Samples()) {
    const ParsedToolCalls whole = ParseToolCalls(s.format, s.text);
    std::vector<std::string_view> bytes;
    for (size_t i = 0; i < s.text.size(); ++i)
      bytes.push_back(std::string_view(s.text).substr(i, 1));
    ASSERT_TRUE(testing::SameResult(StreamPieces(s.format, bytes), whole)) << s.text;
    for (int round = 0; round < 50; ++round) {
      std::vector<std::string_view> pieces;
      for (size_t i = 0; i < s.text.size();) {
        const size_t n = std::uniform_int_distribution<size_t>(0, 12)(rng);
        pieces.push_back(std::string_view(s.text).substr(i, n));
        i += n;
      }
      ASSERT_TRUE(testing::SameResult(StreamPieces(s.format, pieces), whole)) << s.text;
    }
  }
}

TEST(ToolCallStreamTest, ContentIsReleasedAsSoonAsItCannotStartAMarker) {
  ToolCallStream s(F::kHermes);
  auto ev = s.Feed("Hello <tool");
  ASSERT_EQ(ev.size(), 1u);
  EXPECT_EQ(ev[0].text, "Hello");  // " <tool" may start a call
  ev = s.Feed("box> ok");
  ASSERT_EQ(ev.size(), 1u);
  EXPECT_EQ(ev[0].text, " <toolbox> ok");
}

TEST(ToolCallStreamTest, ACallComesOutWhenItsLastByteArrives) {
  ToolCallStream s(F::kHermes);
  EXPECT_TRUE(
      s.Feed("<tool_call>\n{\"name\": \"f\", \"arguments\": {\"a\": 1}}\n</tool_cal").empty());
  auto ev = s.Feed("l>");
  ASSERT_EQ(ev.size(), 2u);
  EXPECT_EQ(ev[0].kind, ToolCallEvent::Kind::kCallBegin);
  EXPECT_EQ(ev[0].index, 0);
  EXPECT_EQ(ev[0].text, "f");
  EXPECT_EQ(ev[1].kind, ToolCallEvent::Kind::kArguments);
  EXPECT_EQ(ev[1].text, "{\"a\":1}");
  EXPECT_EQ(s.calls(), 1);
  EXPECT_TRUE(s.Finish().empty());
  EXPECT_TRUE(s.Feed("more").empty());  // after Finish
}

TEST(ToolCallStreamTest, AnUnterminatedCallBecomesContentAtFinish) {
  ToolCallStream s(F::kHermes);
  EXPECT_TRUE(s.Feed("<tool_call>{\"name\": \"f\", \"arguments\": {\"a\"").empty());
  auto ev = s.Finish();
  ASSERT_EQ(ev.size(), 1u);
  EXPECT_EQ(ev[0].kind, ToolCallEvent::Kind::kContent);
  EXPECT_EQ(ev[0].text, "<tool_call>{\"name\": \"f\", \"arguments\": {\"a\"");
}

TEST(ToolCallStreamTest, HarmonyReasoningIsStreamed) {
  ToolCallStream s(F::kHarmony);
  auto ev = s.Feed("<|channel|>analysis<|message|>Thinking");
  ASSERT_EQ(ev.size(), 1u);
  EXPECT_EQ(ev[0].kind, ToolCallEvent::Kind::kReasoning);
  EXPECT_EQ(ev[0].text, "Thinking");
}

// Without calls, every split of a harmony reply with a call gives the whole
// text's parse: reasoning split off, the call left in the content.
TEST(ToolCallStreamTest, WithoutCallsEverySplitAgreesWithTheWholeText) {
  const std::string text =
      "<|channel|>analysis<|message|>Think.<|end|><|start|>assistant to=functions.f<|channel|>"
      "commentary json<|message|>{\"a\": [1, 2]}<|call|>";
  const ParsedToolCalls whole = ParseToolCalls(F::kHarmony, text, nullptr, /*parse_calls=*/false);
  EXPECT_EQ(whole.reasoning, "Think.");
  EXPECT_EQ(whole.content,
            "<|start|>assistant to=functions.f<|channel|>commentary json<|message|>"
            "{\"a\": [1, 2]}");
  for (size_t cut = 0; cut <= text.size(); ++cut) {
    ToolCallStream s(F::kHarmony, nullptr, /*parse_calls=*/false);
    ParsedToolCalls r;
    testing::Fold(s.Feed(std::string_view(text).substr(0, cut)), &r);
    testing::Fold(s.Feed(std::string_view(text).substr(cut)), &r);
    testing::Fold(s.Finish(), &r);
    EXPECT_TRUE(testing::SameResult(r, whole)) << "cut at " << cut << ": " << r.content;
    EXPECT_EQ(s.calls(), 0);
  }
}

TEST(ToolCallStreamTest, LongArgumentsAreNotRescannedPerPiece) {
  // 200 KB of arguments fed one byte at a time stays fast enough for a unit
  // test only if blocks are not re-parsed on every byte.
  std::string text = "<tool_call>{\"name\": \"w\", \"arguments\": {\"text\": \"";
  text += std::string(200000, 'x');
  text += "\"}}</tool_call>";
  ToolCallStream s(F::kHermes);
  ParsedToolCalls r;
  for (size_t i = 0; i < text.size(); i += 3)
    testing::Fold(s.Feed(std::string_view(text).substr(i, 3)), &r);
  testing::Fold(s.Finish(), &r);
  ASSERT_EQ(r.calls.size(), 1u);
  EXPECT_EQ(r.calls[0].arguments.size(), 200000u + 11);
}

TEST(ToolCallStreamTest, NoMarkerContainsAnotherOfItsFormat) {
  // The driver relies on this: the earliest complete marker in a prefix is
  // the earliest in the whole text.
  for (int f = 0; f <= static_cast<int>(F::kCommandR); ++f) {
    const internal::FormatSpec& spec = internal::SpecFor(static_cast<F>(f));
    std::vector<std::string_view> all = spec.markers;
    all.insert(all.end(), spec.start_markers.begin(), spec.start_markers.end());
    for (std::string_view a : all) {
      for (std::string_view b : all) {
        if (a == b) continue;
        EXPECT_EQ(b.find(a), std::string_view::npos) << a << " in " << b;
      }
    }
  }
}

}  // namespace
}  // namespace mx::toolcalls
