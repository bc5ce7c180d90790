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
      Json ctx = Json::object();
      ctx["messages"] = WireForm(c["messages"]);
      ctx["add_generation_prompt"] = c["add_generation_prompt"];
      ctx["bos_token"] = file["bos_token"];
      ctx["eos_token"] = file["eos_token"];
      ctx["tools"] = c.contains("tools") ? c["tools"] : Json();
      ctx["documents"] = Json();
      if (c.contains("extra_vars")) {
        for (auto it = c["extra_vars"].begin(); it != c["extra_vars"].end(); ++it)
          ctx[it.key()] = *it;
      }
      if (c.contains("undefined_vars")) {
        for (const Json& v : c["undefined_vars"]) ctx.erase(v.get<std::string>());
      }
      jinja::Value context = ToValue(ctx);
      jinja::Dict d = context.as_dict();
      d.Set(jinja::Value::String("messages"), NormalizeToolCallHistory(*d.Find("messages"), form));
      jinja::RenderOptions options;
      options.now = jinja::DateTime{2026, 1, 15, 0, 0, 0};
      auto out = tmpl->Render(jinja::Value::FromDict(std::move(d)), options);
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
  }
}

}  // namespace
}  // namespace mx::toolcalls
