// Shared helpers of the chat-template tests (templates_test.cc,
// templates_golden_test.cc).
#pragma once

#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "core/env.h"
#include "templates/chat_template.h"

namespace mx::templates {

using json = nlohmann::json;  // the tests read jinja2 goldens

constexpr TemplateFamily kAllFamilies[] = {TemplateFamily::kChatml,  TemplateFamily::kQwen3,
                                           TemplateFamily::kQwen35,  TemplateFamily::kLlama3,
                                           TemplateFamily::kMistral, TemplateFamily::kGemma,
                                           TemplateFamily::kPhi3,    TemplateFamily::kHarmony};

inline json ReadJson(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  EXPECT_TRUE(in.good()) << "cannot open " << path;
  std::stringstream buf;
  buf << in.rdbuf();
  return json::parse(buf.str());
}

inline std::vector<ChatMessage> MessagesFromJson(const json& arr) {
  std::vector<ChatMessage> out;
  for (const json& m : arr) {
    ChatMessage msg{m.at("role").get<std::string>(), m.at("content").get<std::string>(), {}};
    if (m.contains("reasoning_content"))
      msg.reasoning_content = m["reasoning_content"].get<std::string>();
    out.push_back(std::move(msg));
  }
  return out;
}

inline std::string MustRender(TemplateFamily f, const std::vector<ChatMessage>& msgs,
                              RenderOptions opt = {}) {
  Result<std::string> r = Render(f, msgs, opt);
  EXPECT_TRUE(r.ok()) << FamilyName(f) << ": " << r.status().ToString();
  return r.ok() ? r.value() : std::string();
}

inline RenderOptions Opts(bool gen, bool bos = false) {
  RenderOptions o;
  o.add_generation_prompt = gen;
  o.include_bos_text = bos;
  return o;
}

inline bool StartsWith(const std::string& s, const std::string& prefix) {
  return s.compare(0, prefix.size(), prefix) == 0;
}

// The jinja2 goldens of real templates beside the reference data
// (shared/templates, format in its README.md).
inline std::string SharedTemplatesDir() { return JoinPath(MATRICXON_REF_DIR, "../templates"); }

inline std::string ReadText(const std::string& path) {
  Result<std::string> text = Env::Default()->ReadFile(path);
  EXPECT_TRUE(text.ok()) << text.status().ToString();
  return text.ok() ? text.value() : std::string();
}

// DetectFamily's answer as a name ("none" for nullopt), for readable failures.
inline std::string DetectedName(std::string_view jinja) {
  const std::optional<TemplateFamily> f = DetectFamily(jinja);
  return f ? std::string(FamilyName(*f)) : "none";
}

}  // namespace mx::templates
