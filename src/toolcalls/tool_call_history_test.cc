// NormalizeToolCallHistory on the goldens: the OpenAI wire form of a chat
// (arguments as JSON strings, content null), normalized for the template,
// renders exactly as the golden of the chat written with objects.
#include "toolcalls/tool_call_history.h"

#include <gtest/gtest.h>

#include <map>

#include "templates/jinja/json.h"
#include "templates/jinja/template.h"
#include "toolcalls/toolcalls_test_util.h"

namespace mx::toolcalls {
namespace {

using testing::Json;

jinja::Value ToValue(const Json& j) {
  auto v = jinja::ParseJson(j.dump());
  EXPECT_TRUE(v.ok());
  return v.ok() ? *v : jinja::Value();
}

// The case's messages as an OpenAI client sends them back.
Json WireForm(Json messages) {
  for (Json& m : messages) {
    if (!m.contains("tool_calls")) continue;
    for (Json& c : m["tool_calls"]) {
      Json& args = c["function"]["arguments"];
      if (!args.is_string()) args = args.dump();
    }
    if (m["content"] == "") m["content"] = nullptr;
  }
  return messages;
}

// The case `c` of golden `file` rendered with `messages` normalized for the
// template (its form detected from the source).
Result<std::string> RenderNormalized(const Json& file, const jinja::Template& tmpl, const Json& c,
                                     const Json& messages) {
  Json ctx = Json::object();
  ctx["messages"] = messages;
  ctx["add_generation_prompt"] = c["add_generation_prompt"];
  ctx["bos_token"] = file["bos_token"];
  ctx["eos_token"] = file["eos_token"];
  ctx["tools"] = c.contains("tools") ? c["tools"] : Json();
  ctx["documents"] = Json();
  if (c.contains("extra_vars")) {
    for (auto it = c["extra_vars"].begin(); it != c["extra_vars"].end(); ++it) ctx[it.key()] = *it;
  }
  if (c.contains("undefined_vars")) {
    for (const Json& v : c["undefined_vars"]) ctx.erase(v.get<std::string>());
  }
  jinja::Value context = ToValue(ctx);
  jinja::Dict d = context.as_dict();
  const HistoryForm form = DetectHistoryForm(file["template"].get<std::string>());
  d.Set(jinja::Value::String("messages"), NormalizeToolCallHistory(*d.Find("messages"), form));
  jinja::RenderOptions options;
  options.now = jinja::DateTime{2026, 1, 15, 0, 0, 0};
  return tmpl.Render(jinja::Value::FromDict(std::move(d)), options);
}

TEST(NormalizeToolCallHistoryTest, ConvertsStringsAndNullContent) {
  const jinja::Value wire = ToValue(Json::parse(R"([{"role": "user", "content": "x"},
    {"role": "assistant", "content": null, "tool_calls": [{"id": "1", "type": "function",
     "function": {"name": "f", "arguments": "{\"b\": 1, \"a\": [2]}"}},
     {"function": {"name": "g", "arguments": "not json"}}]}])"));
  const jinja::Value n = NormalizeToolCallHistory(wire, HistoryForm{});
  EXPECT_EQ(
      jinja::ToJson(n).value(),
      R"([{"role": "user", "content": "x"}, {"role": "assistant", "content": "", "tool_calls": )"
      R"([{"id": "1", "type": "function", "function": {"name": "f", "arguments": {"b": 1, "a": [2]}}}, )"
      R"({"function": {"name": "g", "arguments": "not json"}}]}])");
  const jinja::Value back = NormalizeToolCallHistory(n, HistoryForm{true, true});
  EXPECT_EQ(
      jinja::ToJson(back.as_list()[1].as_dict().Find("tool_calls")->as_list()[0]).value(),
      R"({"id": "1", "type": "function", "function": {"name": "f", "arguments": "{\"b\": 1, \"a\": [2]}"}})");
}

TEST(NormalizeToolCallHistoryTest, WireFormRendersAsTheObjectGolden) {
  const auto files = testing::GoldenFiles();
  if (files.empty()) GTEST_SKIP() << "no goldens in " << testing::GoldensDir();
  int exact = 0;
  for (const auto& path : files) {
    const Json file = testing::LoadJson(path);
    const std::string name = file["template_name"].get<std::string>();
    const std::string source = file["template"].get<std::string>();
    const HistoryForm form = DetectHistoryForm(source);
    auto tmpl = jinja::Template::Parse(source);
    ASSERT_TRUE(tmpl.ok()) << name;
    for (const Json& c : file["cases"]) {
      const std::string id = c["id"];
      if (id != "tools_call_round_trip" && id != "tools_parallel_calls") continue;
      auto out = RenderNormalized(file, *tmpl, c, WireForm(c["messages"]));
      if (form.string_arguments || form.keep_null_content) {
        // These templates want the wire form; the objects golden is not theirs.
        EXPECT_TRUE(out.ok() || !c.contains("rendered")) << name << " " << id;
        continue;
      }
      if (!c.contains("rendered")) continue;  // the objects chat fails too
      ASSERT_TRUE(out.ok()) << name << " " << id << ": " << out.status().ToString();
      EXPECT_EQ(*out, c["rendered"].get<std::string>()) << name << " " << id;
      ++exact;
    }
  }
  RecordProperty("exact_renderings", exact);
  EXPECT_GT(exact, 50);
}

TEST(NormalizeToolCallHistoryTest, ReasoningIsGivenAsThinkingWhereTheTemplateReadsIt) {
  const jinja::Value wire = ToValue(Json::parse(R"([{"role": "user", "content": "x"},
    {"role": "assistant", "content": "Let me look.", "reasoning_content": "Need f.",
     "tool_calls": [{"function": {"name": "f", "arguments": "{}"}}]},
    {"role": "assistant", "content": "Done.", "reasoning_content": "Easy."},
    {"role": "assistant", "content": "Own.", "reasoning_content": "a", "thinking": "b"},
    {"role": "assistant", "content": "None.", "reasoning_content": ""},
    {"role": "user", "content": "y", "reasoning_content": "not an assistant's"}])"));
  HistoryForm gpt_oss;
  gpt_oss.reasoning_as_thinking = true;
  gpt_oss.thinking_or_content = true;
  const jinja::Value normalized = NormalizeToolCallHistory(wire, gpt_oss);
  const jinja::ValueList& n = normalized.as_list();
  auto field = [&](size_t i, std::string_view key) {
    const jinja::Value* v = n[i].Field(key);
    return v == nullptr ? std::string("(none)") : jinja::ToJson(*v).value();
  };
  // The call's message: its reasoning is the thinking; its content goes,
  // since the template takes one or the other.
  EXPECT_EQ(field(1, "thinking"), R"("Need f.")");
  EXPECT_EQ(field(1, "content"), R"("")");
  EXPECT_EQ(field(1, "reasoning_content"), R"("Need f.")");
  EXPECT_EQ(field(2, "thinking"), R"("Easy.")");
  EXPECT_EQ(field(2, "content"), R"("Done.")");
  EXPECT_EQ(field(3, "thinking"), R"("b")");  // the client's own
  EXPECT_EQ(field(4, "thinking"), "(none)");  // no reasoning
  EXPECT_EQ(field(5, "thinking"), "(none)");  // not an assistant
  // A template that reads thinking but takes both keeps the content.
  HistoryForm both;
  both.reasoning_as_thinking = true;
  const jinja::Value kept = NormalizeToolCallHistory(wire, both);
  EXPECT_EQ(jinja::ToJson(*kept.as_list()[1].Field("content")).value(), R"("Let me look.")");
  // A template that reads reasoning_content gets the messages as they are.
  const jinja::Value qwen = NormalizeToolCallHistory(wire, HistoryForm{});
  for (size_t i = 0; i < qwen.as_list().size(); ++i) {
    EXPECT_EQ(qwen.as_list()[i].Field("thinking") == nullptr, i != 3) << i;
  }
  EXPECT_EQ(jinja::ToJson(*qwen.as_list()[1].Field("reasoning_content")).value(), R"("Need f.")");
}

// The goldens: for a template that reads `thinking`, a chat sent with
// reasoning_content renders as jinja2 rendered it with thinking; for every
// other template, as jinja2 rendered it with reasoning_content (Qwen 3 / 3.5,
// GLM, DeepSeek... read that name). gpt-oss keeps the analysis before a call.
TEST(NormalizeToolCallHistoryTest, ReasoningReachesEveryTemplateUnderTheNameItReads) {
  const auto files = testing::GoldenFiles();
  if (files.empty()) GTEST_SKIP() << "no goldens in " << testing::GoldensDir();
  int compared = 0;
  bool gpt_oss_seen = false;
  for (const auto& path : files) {
    const Json file = testing::LoadJson(path);
    const std::string name = file["template_name"].get<std::string>();
    const std::string source = file["template"].get<std::string>();
    const HistoryForm form = DetectHistoryForm(source);
    auto tmpl = jinja::Template::Parse(source);
    ASSERT_TRUE(tmpl.ok()) << name;
    std::map<std::string, Json> cases;
    for (const Json& c : file["cases"]) cases[c["id"].get<std::string>()] = c;
    auto render = [&](const Json& c) { return RenderNormalized(file, *tmpl, c, c["messages"]); };
    for (const char* id : {"reasoning_history", "reasoning_history_two", "reasoning_last_no_gen"}) {
      auto it = cases.find(id);
      if (it == cases.end() || !it->second.contains("rendered")) continue;
      auto out = render(it->second);
      ASSERT_TRUE(out.ok()) << name << " " << id << ": " << out.status().ToString();
      if (!form.reasoning_as_thinking) {
        EXPECT_EQ(*out, it->second["rendered"].get<std::string>()) << name << " " << id;
        ++compared;
        continue;
      }
      // The same chat with the reasoning written as `thinking`.
      if (std::string(id) != "reasoning_history") continue;
      auto twin = cases.find("thinking_field_history");
      ASSERT_NE(twin, cases.end()) << name;
      EXPECT_EQ(*out, twin->second["rendered"].get<std::string>()) << name;
      ++compared;
    }
    if (name == "openai-gpt-oss-120b") {
      gpt_oss_seen = true;
      auto out = render(cases.at("tools_call_with_reasoning"));
      ASSERT_TRUE(out.ok()) << out.status().ToString();
      EXPECT_NE(out->find("<|start|>user<|message|>What's the weather in Paris?<|end|>"
                          "<|start|>assistant<|channel|>analysis<|message|>I need the weather "
                          "tool for Paris.<|end|><|start|>assistant to=functions.get_weather"),
                std::string::npos)
          << *out;
      // A chat ending with the reply (no generation prompt) shows its analysis.
      auto last = render(cases.at("reasoning_last_no_gen"));
      ASSERT_TRUE(last.ok());
      EXPECT_NE(last->find("<|start|>assistant<|channel|>analysis<|message|>The user greets me"),
                std::string::npos)
          << *last;
    }
  }
  EXPECT_TRUE(gpt_oss_seen);
  EXPECT_GT(compared, 40);
}

TEST(NormalizeToolCallHistoryTest, DetectedForms) {
  std::map<std::string, HistoryForm> got;
  for (const auto& path : testing::GoldenFiles()) {
    const Json file = testing::LoadJson(path);
    got[file["template_name"]] = DetectHistoryForm(file["template"].get<std::string>());
  }
  if (got.empty()) GTEST_SKIP();
  for (const auto& [name, form] : got) {
    const bool wants_string = name == "deepseek-ai-DeepSeek-R1-Distill-Llama-8B" ||
                              name == "meetkai-functionary-medium-v3.2";
    const bool keeps_null = name == "deepseek-ai-DeepSeek-R1-Distill-Llama-8B" ||
                            name == "deepseek-ai-DeepSeek-R1-Distill-Qwen-32B";
    EXPECT_EQ(form.string_arguments, wants_string) << name;
    EXPECT_EQ(form.keep_null_content, keeps_null) << name;
    const bool reads_thinking = name == "openai-gpt-oss-120b" || name == "LFM2.5-8B-A1B";
    EXPECT_EQ(form.reasoning_as_thinking, reads_thinking) << name;
    EXPECT_EQ(form.thinking_or_content, name == "openai-gpt-oss-120b") << name;
  }
}

}  // namespace
}  // namespace mx::toolcalls
