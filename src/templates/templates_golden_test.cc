// Chat templates against jinja2: the in-tree goldens, the shared goldens of
// real templates (../shared/templates) and family detection of every file.
#include <gtest/gtest.h>

#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <vector>

#include "core/env.h"
#include "templates/chat_template.h"
#include "templates/templates_test_util.h"
#include "templates/testdata/official_templates.h"

namespace mx::templates {
namespace {

namespace td = testdata;

// ---------------------------------------------------------------------------
// Detection.

TEST(DetectFamilyTest, ReferenceTokenizerTemplateIsChatml) {
  const json tok = ReadJson(std::string(MATRICXON_REF_DIR) + "/tokenizer.json");
  const std::string tmpl = tok.at("chat_template").get<std::string>();
  EXPECT_EQ(tmpl, td::kRenderChatmlRef);
  EXPECT_EQ(DetectFamily(tmpl), TemplateFamily::kChatml);
}

TEST(DetectFamilyTest, OfficialTemplates) {
  EXPECT_EQ(DetectFamily(td::kQwen25), TemplateFamily::kChatml);
  EXPECT_EQ(DetectFamily(td::kRenderQwen3), TemplateFamily::kQwen3);
  EXPECT_EQ(DetectFamily(td::kRenderQwen35), TemplateFamily::kQwen35);
  EXPECT_EQ(DetectFamily(td::kRenderLlama3), TemplateFamily::kLlama3);
  EXPECT_EQ(DetectFamily(td::kLlama31), TemplateFamily::kLlama3);
  EXPECT_EQ(DetectFamily(td::kRenderMistralV1), TemplateFamily::kMistral);
  EXPECT_EQ(DetectFamily(td::kMistralV01), TemplateFamily::kMistral);
  EXPECT_EQ(DetectFamily(td::kMistralV7), TemplateFamily::kMistral);
  EXPECT_EQ(DetectFamily(td::kGemma2), TemplateFamily::kGemma);
  EXPECT_EQ(DetectFamily(td::kRenderGemma3), TemplateFamily::kGemma);
  EXPECT_EQ(DetectFamily(td::kRenderPhi35), TemplateFamily::kPhi3);
  EXPECT_EQ(DetectFamily(td::kPhi3Mini), TemplateFamily::kPhi3);
}

// Every template file of the shared goldens, and what DetectFamily makes of it.
// "none" files fall back to ChatML with a warning. Qwen3.5 is the only one the
// qwen3.5 rule takes; the other ChatML + <think> templates stay qwen3.
TEST(DetectFamilyTest, EveryTemplateFileOfTheSharedGoldens) {
  const std::map<std::string, std::string> expected = {
      {"ByteDance-Seed-OSS", "none"},
      {"CohereForAI-c4ai-command-r-plus-tool_use", "none"},
      {"GLM-4.6", "none"},
      {"GLM-4.7-Flash", "none"},
      {"HuggingFaceTB-SmolLM3-3B", "qwen3"},
      {"Kimi-K2-Instruct", "none"},
      {"LFM2-8B-A1B", "chatml"},
      {"LFM2.5-8B-A1B", "qwen3"},
      {"Mistral-Small-3.2-24B-Instruct-2506", "mistral"},
      {"Qwen-QwQ-32B", "qwen3"},
      {"Qwen-Qwen2.5-7B-Instruct", "chatml"},
      {"Qwen-Qwen3-0.6B", "qwen3"},
      {"Qwen3-Coder", "chatml"},  // XML tool calls, but no <think>
      {"Qwen3.5-4B", "qwen3.5"},
      {"Reka-Edge", "none"},
      {"deepseek-ai-DeepSeek-R1-Distill-Llama-8B", "none"},
      {"deepseek-ai-DeepSeek-R1-Distill-Qwen-32B", "none"},
      {"deepseek-ai-DeepSeek-V3.1", "none"},
      {"deepseek-ai-DeepSeek-V3.2", "none"},
      {"deepseek-ai-DeepSeek-V4", "none"},
      {"fireworks-ai-llama-3-firefunction-v2", "llama3"},
      {"ggml-vocab-phi-3", "phi3"},
      {"google-gemma-2-2b-it", "gemma"},
      {"google-gemma-4-31B-it-interleaved", "none"},
      {"google-gemma-4-31B-it", "none"},
      {"ibm-granite-granite-3.3-2B-Instruct", "none"},
      {"ibm-granite-granite-4.0", "none"},
      {"ibm-granite-granite-4.1", "none"},
      {"llama-cpp-deepseek-r1", "none"},
      {"meetkai-functionary-medium-v3.1", "llama3"},
      {"meetkai-functionary-medium-v3.2", "llama3"},
      {"meta-llama-Llama-3.1-8B-Instruct", "llama3"},
      {"meta-llama-Llama-3.2-3B-Instruct", "llama3"},
      {"meta-llama-Llama-3.3-70B-Instruct", "llama3"},
      {"microsoft-Phi-3.5-mini-instruct", "phi3"},
      {"mistralai-Ministral-3-14B-Reasoning-2512", "mistral"},
      {"mistralai-Mistral-Nemo-Instruct-2407", "mistral"},
      {"openai-gpt-oss-120b", "harmony"},
      {"openbmb-MiniCPM5-1B", "qwen3"},
      {"unsloth-mistral-Devstral-Small-2507", "mistral"},
  };
  const std::string dir = JoinPath(SharedTemplatesDir(), "jinja");
  Result<std::vector<std::string>> names = Env::Default()->ListDir(dir);
  ASSERT_TRUE(names.ok()) << names.status().ToString();
  std::set<std::string> seen;
  for (const std::string& name : *names) {
    const std::string ext = ".jinja";
    if (name.size() <= ext.size() || name.compare(name.size() - ext.size(), ext.size(), ext) != 0) {
      continue;
    }
    const std::string stem = name.substr(0, name.size() - ext.size());
    seen.insert(stem);
    const auto it = expected.find(stem);
    if (it == expected.end()) {
      ADD_FAILURE() << name << ": new template file, add what DetectFamily should return";
      continue;
    }
    EXPECT_EQ(DetectedName(ReadText(JoinPath(dir, name))), it->second) << name;
  }
  for (const auto& [stem, family] : expected) {
    EXPECT_TRUE(seen.count(stem)) << stem << ".jinja is missing from " << dir;
  }
}

TEST(DetectFamilyTest, OtherFamiliesAreNotRecognised) {
  EXPECT_EQ(DetectFamily(""), std::nullopt);
  EXPECT_EQ(DetectFamily(td::kPhi4), std::nullopt);        // <|im_start|> + <|im_sep|>
  EXPECT_EQ(DetectFamily(td::kZephyr), std::nullopt);      // <|user|> without <|end|>
  EXPECT_EQ(DetectFamily(td::kDeepseekR1), std::nullopt);  // <think> without <|im_start|>
  EXPECT_EQ(DetectFamily(td::kVicuna), std::nullopt);
  EXPECT_EQ(DetectFamily("{{ messages }}"), std::nullopt);
}

// ---------------------------------------------------------------------------
// Exact renderings.

// Every case of jinja_goldens.json: the official templates rendered by Python
// jinja2 as transformers does (see testdata/gen_goldens.py), with BOS text.
TEST(RenderTest, MatchesJinjaGoldens) {
  const json goldens =
      ReadJson(std::string(MATRICXON_SOURCE_DIR) + "/src/templates/testdata/jinja_goldens.json");
  size_t n_checked = 0;
  std::map<TemplateFamily, size_t> per_family;
  for (const json& c : goldens.at("cases")) {
    const std::string family_name = c.at("family").get<std::string>();
    Result<TemplateFamily> family = FamilyFromName(family_name);
    ASSERT_TRUE(family.ok()) << family_name;
    RenderOptions opt = Opts(c.at("add_generation_prompt").get<bool>(), /*bos=*/true);
    if (c.contains("enable_thinking")) opt.enable_thinking = c["enable_thinking"].get<bool>();
    SCOPED_TRACE(family_name + " / " + c.at("conversation").get<std::string>() +
                 " / gen=" + (opt.add_generation_prompt ? "1" : "0") + " / thinking=" +
                 (c.contains("enable_thinking") ? c["enable_thinking"].dump() : "unset"));
    const std::vector<ChatMessage> msgs =
        MessagesFromJson(goldens.at("conversations").at(c.at("conversation").get<std::string>()));
    Result<std::string> got = Render(*family, msgs, opt);
    if (c.contains("error")) {
      ASSERT_FALSE(got.ok()) << "expected an error like: " << c["error"];
      EXPECT_EQ(got.status().code(), Status::Code::kInvalidArgument);
    } else {
      ASSERT_TRUE(got.ok()) << got.status().ToString();
      EXPECT_EQ(*got, c.at("expected").get<std::string>());
    }
    ++n_checked;
    ++per_family[*family];
  }
  EXPECT_GE(n_checked, 370u);
  for (TemplateFamily f : kAllFamilies) {
    // Harmony's goldens are the shared ones (HarmonyMatchesTheOfficialTemplate).
    if (f == TemplateFamily::kHarmony) continue;
    EXPECT_GE(per_family[f], 34u) << FamilyName(f);
  }
}

TEST(RenderTest, ReferenceChatPromptByteForByte) {
  const json prompts = ReadJson(std::string(MATRICXON_REF_DIR) + "/prompts.json");
  std::vector<ChatMessage> msgs;
  for (const json& p : prompts) {
    if (p.at("name") == "chat") msgs = MessagesFromJson(p.at("messages"));
  }
  ASSERT_EQ(msgs.size(), 4u);
  const std::string rendered = MustRender(TemplateFamily::kChatml, msgs);
  for (const char* model : {"tiny-llama", "tiny-qwen3", "tiny-hybrid-nemotron_h", "tiny-qwen35"}) {
    const json ref = ReadJson(std::string(MATRICXON_REF_DIR) + "/ref-" + model + ".json");
    bool found = false;
    for (const json& p : ref.at("prompts")) {
      if (p.at("name") != "chat") continue;
      found = true;
      EXPECT_EQ(rendered, p.at("text").get<std::string>()) << model;
    }
    EXPECT_TRUE(found) << model;
  }
}

// ---------------------------------------------------------------------------
// The shared goldens (shared/templates/<template>.json): real templates
// rendered by jinja2 on a battery of conversations.

// A shared golden case as Render() arguments.
struct SharedCase {
  std::vector<ChatMessage> messages;
  RenderOptions options;
  bool has_tool_message = false;  // Render must refuse it (tool roles are not supported)
  std::string not_expressible;    // why ChatMessage / RenderOptions cannot say it ("" if they can)
};

// `join_text_parts`: a content array of text parts becomes the joined text
// (what the HTTP layer passes), for templates that concatenate the parts
// themselves; otherwise any content array is not expressible.
SharedCase ConvertSharedCase(const json& c, bool join_text_parts) {
  SharedCase out;
  out.options.add_generation_prompt = c.at("add_generation_prompt").get<bool>();
  out.options.include_bos_text = true;  // the templates print bos_token themselves
  if (c.contains("extra_vars")) {
    for (const auto& [name, value] : c["extra_vars"].items()) {
      if (name == "enable_thinking" && value.is_boolean()) {
        out.options.enable_thinking = value.get<bool>();
      } else if (name == "reasoning_effort" && value.is_string()) {
        out.options.reasoning_effort = value.get<std::string>();
      } else {
        out.not_expressible = "template variable " + name;
      }
    }
  }
  if (c.contains("undefined_vars")) out.not_expressible = "undefined variables";
  for (const json& m : c.at("messages")) {
    ChatMessage msg;
    msg.role = m.at("role").get<std::string>();
    out.has_tool_message |= msg.role == "tool";
    const json content = m.contains("content") ? m["content"] : json();
    if (content.is_string()) {
      msg.content = content.get<std::string>();
    } else if (content.is_array() && !join_text_parts) {
      out.not_expressible = "content array";
    } else if (content.is_array()) {
      for (const json& part : content) {
        if (part.value("type", "") == "text") {
          msg.content += part.at("text").get<std::string>();
        } else {
          out.not_expressible = "content part of type " + part.value("type", "?");
        }
      }
    } else if (!content.is_null()) {
      out.not_expressible = "content " + content.dump();
    }
    if (m.contains("reasoning_content")) {
      if (m["reasoning_content"].is_string()) {
        msg.reasoning_content = m["reasoning_content"].get<std::string>();
      } else {
        out.not_expressible = "reasoning_content that is not a string";
      }
    }
    // tool_calls, name, tool_call_id have no field in ChatMessage; every case
    // with them also has a tool message, which Render must refuse.
    out.messages.push_back(std::move(msg));
  }
  if (c.contains("tools") && !c["tools"].is_null() && !out.has_tool_message) {
    out.not_expressible = "tool definitions";
  }
  return out;
}

struct SharedTally {
  size_t rendered = 0;                       // compared byte for byte
  size_t refused_as_template = 0;            // the template raises; Render refuses
  size_t refused_tools = 0;                  // tool messages; Render refuses
  std::vector<std::string> not_expressible;  // case ids, in file order
};

// Renders every case of shared/templates/<name>.json with `family`: rendered
// cases must match byte for byte, error cases and cases with tool messages
// must be refused with InvalidArgument.
SharedTally CheckSharedGoldens(TemplateFamily family, const std::string& name,
                               bool join_text_parts) {
  const json golden = ReadJson(JoinPath(SharedTemplatesDir(), name + ".json"));
  SharedTally tally;
  for (const json& c : golden.at("cases")) {
    const std::string id = c.at("id").get<std::string>();
    SCOPED_TRACE(name + " / " + id);
    SharedCase sc = ConvertSharedCase(c, join_text_parts);
    // What strftime_now() gave when the golden was rendered.
    sc.options.current_date = golden.value("fixed_date", "");
    if (!sc.not_expressible.empty()) {
      tally.not_expressible.push_back(id);
      continue;
    }
    Result<std::string> got = Render(family, sc.messages, sc.options);
    if (sc.has_tool_message || c.contains("error")) {
      EXPECT_FALSE(got.ok()) << "rendered instead of refused:\n" << (got.ok() ? *got : "");
      EXPECT_EQ(got.status().code(), Status::Code::kInvalidArgument) << got.status().ToString();
      ++(sc.has_tool_message ? tally.refused_tools : tally.refused_as_template);
      continue;
    }
    if (!got.ok()) {
      ADD_FAILURE() << got.status().ToString();
      continue;
    }
    EXPECT_EQ(*got, c.at("rendered").get<std::string>());
    ++tally.rendered;
  }
  return tally;
}

// Every case of the official Qwen 3.5 template's goldens that ChatMessage can
// express: system/user/assistant, string content, reasoning_content, think
// blocks in content, enable_thinking unset/true/false, with and without the
// generation prompt; also text-part arrays, which the template concatenates.
TEST(SharedGoldensTest, Qwen35MatchesTheOfficialTemplate) {
  const SharedTally t =
      CheckSharedGoldens(TemplateFamily::kQwen35, "Qwen3.5-4B", /*join_text_parts=*/true);
  EXPECT_EQ(t.rendered, 25u);  // 23 with string content, content_parts, content_parts_multi
  EXPECT_EQ(t.refused_as_template, 2u);  // system_only, system_in_middle
  EXPECT_EQ(t.refused_tools, 6u);        // the tool-call round trips
  EXPECT_EQ(t.not_expressible, (std::vector<std::string>{"content_parts_image", "tools_first_turn",
                                                         "tools_no_system", "add_vision_id"}));
}

// kQwen3 shares its renderer with kQwen35: it still reproduces Qwen3's own
// template. That template fails on content arrays (jinja2 TypeError), so those
// cases are skipped.
TEST(SharedGoldensTest, Qwen3MatchesTheOfficialTemplate) {
  const SharedTally t =
      CheckSharedGoldens(TemplateFamily::kQwen3, "Qwen-Qwen3-0.6B", /*join_text_parts=*/false);
  EXPECT_EQ(t.rendered, 25u);
  EXPECT_EQ(t.refused_as_template, 0u);
  EXPECT_EQ(t.refused_tools, 6u);
  EXPECT_EQ(t.not_expressible, (std::vector<std::string>{"content_parts", "content_parts_multi",
                                                         "tools_first_turn", "tools_no_system"}));
}

// gpt-oss's template (harmony): every case without tools, builtin_tools or
// model_identity, byte for byte: system prompts as the developer message,
// the final channel, <|return|> after a chat-ending reply, reasoning_effort.
TEST(SharedGoldensTest, HarmonyMatchesTheOfficialTemplate) {
  const SharedTally t = CheckSharedGoldens(TemplateFamily::kHarmony, "openai-gpt-oss-120b",
                                           /*join_text_parts=*/false);
  EXPECT_EQ(t.rendered, 24u);
  EXPECT_EQ(t.refused_as_template, 0u);
  EXPECT_EQ(t.refused_tools, 6u);
  EXPECT_EQ(t.not_expressible,
            (std::vector<std::string>{"content_parts", "content_parts_multi", "tools_first_turn",
                                      "tools_no_system", "builtin_tools",
                                      "builtin_tools_with_tools", "model_identity",
                                      "builtin_tool_call"}));
}

}  // namespace
}  // namespace mx::templates
