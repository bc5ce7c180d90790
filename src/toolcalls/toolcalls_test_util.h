// Shared by the tool-call tests: the jinja2 goldens (../shared/templates) and
// the event -> ParsedToolCalls folding.
#pragma once

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "toolcalls/tool_calls.h"

namespace mx::toolcalls::testing {

using Json = nlohmann::ordered_json;

inline std::filesystem::path GoldensDir() { return MATRICXON_TEMPLATE_GOLDENS_DIR; }

// Every golden file, sorted by name; empty when the folder is absent.
inline std::vector<std::filesystem::path> GoldenFiles() {
  std::vector<std::filesystem::path> files;
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(GoldensDir(), ec)) {
    if (e.path().extension() == ".json") files.push_back(e.path());
  }
  std::sort(files.begin(), files.end());
  return files;
}

inline Json LoadJson(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return Json::parse(ss.str());
}

// Folds events into the whole-text result.
inline void Fold(const std::vector<ToolCallEvent>& events, ParsedToolCalls* r) {
  for (const ToolCallEvent& e : events) {
    switch (e.kind) {
      case ToolCallEvent::Kind::kContent:
        r->content += e.text;
        break;
      case ToolCallEvent::Kind::kReasoning:
        r->reasoning += e.text;
        break;
      case ToolCallEvent::Kind::kCallBegin:
        EXPECT_EQ(e.index, static_cast<int>(r->calls.size()));
        r->calls.push_back(ToolCall{e.text, {}, e.id});
        break;
      case ToolCallEvent::Kind::kArguments:
        ASSERT_GE(e.index, 0);
        ASSERT_LT(static_cast<size_t>(e.index), r->calls.size());
        r->calls[static_cast<size_t>(e.index)].arguments += e.text;
        break;
    }
  }
}

inline bool SameResult(const ParsedToolCalls& a, const ParsedToolCalls& b) {
  if (a.content != b.content || a.reasoning != b.reasoning || a.calls.size() != b.calls.size())
    return false;
  for (size_t i = 0; i < a.calls.size(); ++i) {
    if (a.calls[i].name != b.calls[i].name || a.calls[i].arguments != b.calls[i].arguments ||
        a.calls[i].id != b.calls[i].id)
      return false;
  }
  return true;
}

}  // namespace mx::toolcalls::testing
