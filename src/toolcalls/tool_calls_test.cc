// Whole-text parsing, one family at a time, on hand-written model outputs.
#include "toolcalls/tool_calls.h"

#include <gtest/gtest.h>

#include "core/env.h"

namespace mx::toolcalls {
namespace {

using F = ToolCallFormat;

// "name(arguments)" per call, joined by " | ".
std::string Calls(const ParsedToolCalls& r) {
  std::string s;
  for (const ToolCall& c : r.calls) {
    if (!s.empty()) s += " | ";
    s += c.name + "(" + c.arguments + ")";
    if (!c.id.empty()) s += "#" + c.id;
  }
  return s;
}

const ToolSchemas& WeatherSchemas() {
  static const ToolSchemas s = ToolSchemas::FromJson(nlohmann::ordered_json::parse(R"([
    {"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object",
      "properties": {"city": {"type": "string"}, "unit": {"type": "string", "enum": ["c", "f"]},
                     "days": {"type": "integer"}, "zip": {"type": ["string", "null"]},
                     "tags": {"type": "array"}, "exact": {"type": "boolean"}}}}}])"));
  return s;
}

TEST(HermesTest, PreambleAndParallelCalls) {
  const auto r =
      ParseToolCalls(F::kHermes,
                     "Let me check.\n<tool_call>\n{\"name\": \"get_weather\", "
                     "\"arguments\": {\"city\": \"Paris\"}}\n</tool_call>\n<tool_call>\n"
                     "{\"name\": \"search\", \"arguments\": {\"q\": \"a b\", \"n\": 3}}\n"
                     "</tool_call>");
  EXPECT_EQ(r.content, "Let me check.");
  EXPECT_EQ(Calls(r), R"(get_weather({"city":"Paris"}) | search({"q":"a b","n":3}))");
}

TEST(HermesTest, ClosingTagMayBeMissingAtTheEnd) {
  const auto r = ParseToolCalls(F::kHermes, "<tool_call>\n{\"name\": \"f\", \"arguments\": {}}\n");
  EXPECT_EQ(r.content, "");
  EXPECT_EQ(Calls(r), "f({})");
}

TEST(HermesTest, ArgumentsAsAJsonStringOrMissing) {
  EXPECT_EQ(Calls(ParseToolCalls(
                F::kHermes, R"(<tool_call>{"name": "f", "arguments": "{\"a\": 1}"}</tool_call>)")),
            R"(f({"a":1}))");
  EXPECT_EQ(Calls(ParseToolCalls(F::kHermes, R"(<tool_call>{"name": "now"}</tool_call>)")),
            "now({})");
}

TEST(HermesTest, MalformedCallsStayContent) {
  for (const std::string& text : std::vector<std::string>{
           "<tool_call>\n{\"name\": \"f\", \"arguments\": {\"a\": }}\n</tool_call>",  // bad JSON
           "<tool_call>\n{\"name\": \"f\", \"arguments\": {\"a\": 1}",          // unterminated
           "<tool_call>\n{\"arguments\": {}}\n</tool_call>",                    // no name
           "<tool_call>\n{\"name\": \"f\", \"arguments\": [1]}\n</tool_call>",  // not an object
           "<tool_call>\n{\"name\": \"f\"} trailing\n</tool_call>",             // junk
           "I wrote <tool_call> in prose.",
       }) {
    const auto r = ParseToolCalls(F::kHermes, text);
    EXPECT_EQ(r.content, text);
    EXPECT_TRUE(r.calls.empty()) << text;
  }
}

TEST(HermesTest, MalformedCallThenAGoodOne) {
  const auto r = ParseToolCalls(F::kHermes,
                                "<tool_call>oops</tool_call>\n<tool_call>{\"name\": \"g\", "
                                "\"arguments\": {}}</tool_call> done");
  EXPECT_EQ(r.content, "<tool_call>oops</tool_call>done");
  EXPECT_EQ(Calls(r), "g({})");
}

TEST(HermesTest, RawNewlineInAStringIsEscaped) {
  const auto r = ParseToolCalls(
      F::kHermes,
      "<tool_call>{\"name\": \"write\", \"arguments\": {\"text\": \"a\nb\"}}</tool_call>");
  EXPECT_EQ(Calls(r), R"(write({"text":"a\nb"}))");
}

TEST(Qwen3XmlTest, ParameterTypesFollowTheSchema) {
  const std::string text =
      "Checking.\n\n<tool_call>\n<function=get_weather>\n<parameter=city>\n123\n</parameter>\n"
      "<parameter=days>\n3\n</parameter>\n<parameter=exact>\nTrue\n</parameter>\n"
      "<parameter=tags>\n[\"a\", \"b\"]\n</parameter>\n<parameter=zip>\n75001\n</parameter>\n"
      "<parameter=note>\nline 1\nline \"2\"\n</parameter>\n</function>\n</tool_call>";
  const auto with = ParseToolCalls(F::kQwen3Xml, text, &WeatherSchemas());
  EXPECT_EQ(with.content, "Checking.");
  EXPECT_EQ(
      Calls(with),
      R"(get_weather({"city":"123","days":3,"exact":true,"tags":["a","b"],"zip":"75001","note":"line 1\nline \"2\""}))");
  // Without schemas a value is JSON when it parses as JSON.
  EXPECT_EQ(
      Calls(ParseToolCalls(F::kQwen3Xml, text)),
      R"(get_weather({"city":123,"days":3,"exact":true,"tags":["a","b"],"zip":75001,"note":"line 1\nline \"2\""}))");
}

TEST(Qwen3XmlTest, AHermesJsonBodyIsAccepted) {
  EXPECT_EQ(
      Calls(ParseToolCalls(
          F::kQwen3Xml, "<tool_call>\n{\"name\": \"f\", \"arguments\": {\"a\": 1}}\n</tool_call>")),
      R"(f({"a":1}))");
}

TEST(Qwen3XmlTest, NoParametersAndMalformed) {
  EXPECT_EQ(
      Calls(ParseToolCalls(F::kQwen3Xml, "<tool_call>\n<function=now>\n</function>\n</tool_call>")),
      "now({})");
  const std::string bad = "<tool_call>\n<function=f>\n<parameter=a>\n1\n</function>\n</tool_call>";
  EXPECT_EQ(ParseToolCalls(F::kQwen3Xml, bad).content, bad);
}

TEST(SeedOssTest, Call) {
  EXPECT_EQ(Calls(ParseToolCalls(F::kSeedOss,
                                 "<seed:tool_call>\n<function=get_weather>\n<parameter=city>Paris"
                                 "</parameter>\n<parameter=days>2</parameter>\n</function>\n"
                                 "</seed:tool_call>",
                                 &WeatherSchemas())),
            R"(get_weather({"city":"Paris","days":2}))");
}

TEST(Llama3Test, BareJsonAndPythonTag) {
  EXPECT_EQ(
      Calls(ParseToolCalls(F::kLlama3Json,
                           "{\"name\": \"get_weather\", \"parameters\": {\"city\": \"Paris\"}}")),
      R"(get_weather({"city":"Paris"}))");
  const auto r =
      ParseToolCalls(F::kLlama3Json,
                     "<|python_tag|>{\"type\": \"function\", \"name\": \"f\", \"parameters\": {}}");
  EXPECT_EQ(Calls(r), "f({})");
  EXPECT_EQ(r.content, "");
}

TEST(Llama3Test, JsonThatIsNoCallAndBuiltinToolsAreContent) {
  for (const std::string& text : std::vector<std::string>{
           std::string("{\"answer\": 42}"),
           std::string("{\"name\": \"John\", \"age\": 3}"),  // a JSON answer, no arguments
           std::string("Here: {\"name\": \"f\", \"parameters\": {}}"),  // not at the start
           std::string("<|python_tag|>brave_search.call(query=\"x\")"),
       }) {
    const auto r = ParseToolCalls(F::kLlama3Json, text);
    EXPECT_EQ(r.content, text);
    EXPECT_TRUE(r.calls.empty());
  }
}

TEST(MistralTest, JsonList) {
  const auto r = ParseToolCalls(
      F::kMistralJson,
      R"([TOOL_CALLS][{"name": "a", "arguments": {"x": 1}, "id": "abc123XYZ"}, {"name": "b", "arguments": {}}])");
  EXPECT_EQ(Calls(r), R"(a({"x":1})#abc123XYZ | b({}))");
}

TEST(MistralTest, NameArgsWithAndWithoutCallId) {
  const auto r = ParseToolCalls(F::kMistralArgs,
                                "Sure.[TOOL_CALLS]get_weather[CALL_ID]abc123XYZ[ARGS]{\"city\": "
                                "\"Paris\"}[TOOL_CALLS]search[ARGS]{\"q\": \"x\"}");
  EXPECT_EQ(r.content, "Sure.");
  EXPECT_EQ(Calls(r), R"(get_weather({"city":"Paris"})#abc123XYZ | search({"q":"x"}))");
  const std::string bad = "[TOOL_CALLS]get weather[ARGS]{}";
  EXPECT_EQ(ParseToolCalls(F::kMistralArgs, bad).content, bad);
}

TEST(HarmonyTest, AnalysisThenCall) {
  const auto r = ParseToolCalls(
      F::kHarmony,
      "<|channel|>analysis<|message|>Need the weather.<|end|><|start|>assistant<|channel|>"
      "commentary to=functions.get_weather <|constrain|>json<|message|>{\"city\": \"Paris\"}");
  EXPECT_EQ(r.reasoning, "Need the weather.");
  EXPECT_EQ(r.content, "");
  EXPECT_EQ(Calls(r), R"(get_weather({"city":"Paris"}))");
}

TEST(HarmonyTest, RecipientBeforeChannelAndCallToken) {
  const auto r = ParseToolCalls(
      F::kHarmony, " to=functions.f<|channel|>commentary json<|message|>{\"a\": 1}<|call|>");
  EXPECT_EQ(Calls(r), R"(f({"a":1}))");
  EXPECT_EQ(r.content, "");
}

TEST(HarmonyTest, FinalAnswer) {
  const auto r = ParseToolCalls(F::kHarmony,
                                "<|channel|>analysis<|message|>Easy.<|end|><|start|>assistant"
                                "<|channel|>final<|message|>It is 4.");
  EXPECT_EQ(r.reasoning, "Easy.");
  EXPECT_EQ(r.content, "It is 4.");
  EXPECT_TRUE(r.calls.empty());
}

TEST(HarmonyTest, BuiltinRecipientAndBadArgumentsAreContent) {
  const std::string builtin =
      "<|channel|>commentary to=browser.search <|constrain|>json<|message|>{\"q\": 1}";
  EXPECT_EQ(ParseToolCalls(F::kHarmony, builtin).content, builtin);
  const std::string bad = "<|channel|>commentary to=functions.f json<|message|>not json";
  EXPECT_EQ(ParseToolCalls(F::kHarmony, bad).content, bad);
}

// A gpt-oss chat without tools (or with tool_choice "none"): the channels are
// still split, and a call the model writes anyway stays content, verbatim.
TEST(HarmonyTest, WithoutCallsTheChannelsAreSplitAndACallStaysContent) {
  const auto answer = ParseToolCalls(F::kHarmony,
                                     "<|channel|>analysis<|message|>Just answer.<|end|><|start|>"
                                     "assistant<|channel|>final<|message|>Hello there.",
                                     nullptr, /*parse_calls=*/false);
  EXPECT_EQ(answer.reasoning, "Just answer.");
  EXPECT_EQ(answer.content, "Hello there.");
  EXPECT_TRUE(answer.calls.empty());

  const std::string call =
      "<|start|>assistant<|channel|>commentary to=functions.get_weather <|constrain|>json"
      "<|message|>{\"city\": \"Paris\"}";
  const auto r = ParseToolCalls(
      F::kHarmony, "<|channel|>analysis<|message|>Need the weather.<|end|>" + call + "<|call|>",
      &WeatherSchemas(), /*parse_calls=*/false);
  EXPECT_EQ(r.reasoning, "Need the weather.");
  EXPECT_EQ(r.content, call);
  EXPECT_TRUE(r.calls.empty());
  // The recipient in the role, at the start of the reply.
  const std::string in_role = " to=functions.f<|channel|>commentary json<|message|>{\"a\": 1}";
  EXPECT_EQ(ParseToolCalls(F::kHarmony, in_role, nullptr, false).content, in_role);
  // With calls, the same texts are calls.
  EXPECT_EQ(Calls(ParseToolCalls(F::kHarmony, in_role)), R"(f({"a":1}))");
}

// Every family: without calls, a reply with a call is all content, as written.
TEST(ToolCallsTest, WithoutCallsACallIsTextInEveryFamily) {
  const std::string hermes =
      "Sure.\n<tool_call>\n{\"name\": \"f\", \"arguments\": {}}\n</tool_call>";
  EXPECT_EQ(ParseToolCalls(F::kHermes, hermes, nullptr, false).content, hermes);
  const std::string mistral = "[TOOL_CALLS]a[ARGS]{\"x\": 1}";
  const auto r = ParseToolCalls(F::kMistralArgs, mistral, nullptr, false);
  EXPECT_EQ(r.content, mistral);
  EXPECT_TRUE(r.calls.empty());
}

TEST(DeepSeekTest, R1) {
  const auto r = ParseToolCalls(
      F::kDeepSeekR1,
      "I will "
      "call.\xEF\xBD\x9C<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>get_"
      "weather\n"
      "```json\n{\"city\": "
      "\"Paris\"}\n```<｜tool▁call▁end｜>\n<｜tool▁call▁begin｜>function<｜tool▁sep｜>"
      "f\n```json\n{}\n```<｜tool▁call▁end｜><｜tool▁calls▁end｜>");
  EXPECT_EQ(r.content, "I will call.\xEF\xBD\x9C");
  EXPECT_EQ(Calls(r), R"(get_weather({"city":"Paris"}) | f({}))");
}

TEST(DeepSeekTest, V31) {
  const auto r =
      ParseToolCalls(F::kDeepSeekV31,
                     "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>get_weather<｜tool▁sep｜>{"
                     "\"city\": \"Paris\"}<｜tool▁call▁end｜><｜tool▁calls▁end｜>");
  EXPECT_EQ(Calls(r), R"(get_weather({"city":"Paris"}))");
}

TEST(DeepSeekTest, Dsml) {
  const auto r =
      ParseToolCalls(F::kDeepSeekDsml,
                     "<｜DSML｜function_calls>\n<｜DSML｜invoke "
                     "name=\"get_weather\">\n<｜DSML｜parameter name=\"city\" "
                     "string=\"true\">Paris</｜DSML｜parameter>\n<｜DSML｜parameter name=\"days\" "
                     "string=\"false\">3"
                     "</｜DSML｜parameter>\n</｜DSML｜invoke>\n</｜DSML｜function_calls>");
  EXPECT_EQ(Calls(r), R"(get_weather({"city":"Paris","days":3}))");
}

TEST(KimiTest, SectionWithIds) {
  const auto r =
      ParseToolCalls(F::kKimiK2,
                     "<|tool_calls_section_begin|><|tool_call_begin|>functions.get_weather:0"
                     "<|tool_call_argument_begin|>{\"city\": "
                     "\"Paris\"}<|tool_call_end|><|tool_calls_section_end|>");
  EXPECT_EQ(Calls(r), R"(get_weather({"city":"Paris"})#functions.get_weather:0)");
}

TEST(GlmTest, ArgKeyValue) {
  const auto r = ParseToolCalls(F::kGlm,
                                "<tool_call>get_weather\n<arg_key>city</arg_key>\n<arg_value>Paris"
                                "</arg_value>\n<arg_key>days</arg_key>\n<arg_value>3</arg_value>\n"
                                "</tool_call>",
                                &WeatherSchemas());
  EXPECT_EQ(Calls(r), R"(get_weather({"city":"Paris","days":3}))");
  EXPECT_EQ(Calls(ParseToolCalls(F::kGlm, "<tool_call>now</tool_call>")), "now({})");
}

TEST(MiniCpmTest, ParamsAndCdata) {
  const auto r =
      ParseToolCalls(F::kMiniCpm,
                     "<function name=\"get_weather\"><param name=\"city\"><![CDATA[a<b]]>"
                     "</param><param name=\"days\">3</param></function>");
  EXPECT_EQ(Calls(r), R"(get_weather({"city":"a<b","days":3}))");
}

TEST(OtherFamiliesTest, FunctionaryFirefunctionGraniteCommandR) {
  EXPECT_EQ(Calls(ParseToolCalls(F::kFunctionaryV31,
                                 "<function=a>{\"x\": 1}</function><function=b>{}</function>")),
            R"(a({"x":1}) | b({}))");
  EXPECT_EQ(Calls(ParseToolCalls(F::kFirefunction,
                                 " functools[{\"name\": \"a\", \"arguments\": {\"x\": 1}}]")),
            R"(a({"x":1}))");
  EXPECT_EQ(
      Calls(ParseToolCalls(F::kGranite, "<|tool_call|>[{\"name\": \"a\", \"arguments\": {}}]")),
      "a({})");
  EXPECT_EQ(
      Calls(ParseToolCalls(F::kCommandR,
                           "Action:\n```json\n[{\"tool_name\": \"a\", \"parameters\": {\"x\": "
                           "2}}]\n```")),
      R"(a({"x":2}))");
}

TEST(NoneFormatTest, EverythingIsContent) {
  const std::string text = "<tool_call>{\"name\": \"f\", \"arguments\": {}}</tool_call>\n";
  const auto r = ParseToolCalls(F::kNone, text);
  EXPECT_EQ(r.content, text);
  EXPECT_TRUE(r.calls.empty());
}

TEST(ToolSchemasTest, Types) {
  const ToolSchemas& s = WeatherSchemas();
  using T = ToolSchemas::ParamType;
  EXPECT_EQ(s.TypeOf("get_weather", "city"), T::kString);
  EXPECT_EQ(s.TypeOf("get_weather", "zip"), T::kString);
  EXPECT_EQ(s.TypeOf("get_weather", "days"), T::kOther);
  EXPECT_EQ(s.TypeOf("get_weather", "nope"), T::kUnknown);
  EXPECT_EQ(s.TypeOf("other", "city"), T::kUnknown);
  const ToolSchemas e = ToolSchemas::FromJson(nlohmann::json::parse(R"([
    {"type": "function", "function": {"name": "f", "parameters": {"properties": {
      "a": {"enum": ["x", "y"]}, "b": {"anyOf": [{"type": "string"}, {"type": "null"}]},
      "c": {"anyOf": [{"type": "string"}, {"type": "integer"}]}, "d": {}}}}}, 7, {"x": 1}])"));
  EXPECT_EQ(e.TypeOf("f", "a"), T::kString);
  EXPECT_EQ(e.TypeOf("f", "b"), T::kString);
  EXPECT_EQ(e.TypeOf("f", "c"), T::kOther);
  EXPECT_EQ(e.TypeOf("f", "d"), T::kUnknown);
}

// An Env whose random bytes count up from a seed.
class CountingEnv : public EnvWrapper {
 public:
  CountingEnv() : EnvWrapper(Env::Default()) {}
  Status RandomBytes(void* buf, size_t n) override {
    auto* p = static_cast<unsigned char*>(buf);
    for (size_t i = 0; i < n; ++i) p[i] = next_++;
    return Status::Ok();
  }

 private:
  unsigned char next_ = 240;
};

TEST(MakeToolCallIdTest, ShapeAndUniformAlphabet) {
  CountingEnv env;
  auto id = MakeToolCallId(env);
  ASSERT_TRUE(id.ok());
  ASSERT_EQ(id->size(), 29u);
  EXPECT_EQ(id->substr(0, 5), "call_");
  // 240..247 map to 240 % 62 = 54.. ('2'..'9'); 248..255 are skipped; 0 -> 'A'.
  EXPECT_EQ(id->substr(5, 10), "23456789AB");
  auto mistral = MakeToolCallId(env, ToolCallFormat::kMistralArgs);
  ASSERT_TRUE(mistral.ok());
  EXPECT_EQ(mistral->size(), 9u);
  for (char c : *mistral) EXPECT_TRUE(std::isalnum(static_cast<unsigned char>(c)));
}

}  // namespace
}  // namespace mx::toolcalls
