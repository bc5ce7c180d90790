// gpt-oss harmony. A reply is a run of messages:
//   [<|start|>assistant]<|channel|>analysis<|message|>...<|end|>
//   <|start|>assistant<|channel|>commentary to=functions.NAME <|constrain|>json<|message|>{...}
//   <|start|>assistant<|channel|>final<|message|>...
// (the first message's <|start|>assistant is the generation prompt's; the
// recipient may also come before <|channel|>: " to=functions.NAME<|channel|>
// commentary json"). <|call|> and <|return|> end the generation, so they
// are usually not in the text. Each header is a block: a call's block runs to
// the end of its JSON arguments; any other header switches the text mode
// (analysis -> reasoning, final / commentary -> content). <|end|>, <|call|>
// and <|return|> are blocks that are dropped.
#include "toolcalls/formats.h"

namespace mx::toolcalls::internal {
namespace {

// The value after `key` in a header, up to a space or the next special token.
std::string_view HeaderField(std::string_view header, std::string_view key) {
  const size_t at = header.find(key);
  if (at == std::string_view::npos) return {};
  std::string_view v = header.substr(at + key.size());
  while (!v.empty() && v.front() == ' ') v.remove_prefix(1);
  return v.substr(0, v.find_first_of(" <"));
}

}  // namespace

Block ParseHarmony(std::string_view text, bool at_end, const ToolSchemas*) {
  Reader r(text, at_end);
  Block b;
  if (r.Opt("<|end|>") || r.Opt("<|call|>") || r.Opt("<|return|>")) {
    b.status = BlockStatus::kComplete;
    b.end = r.pos();
    b.trim = false;
    b.mode = TextMode::kContent;
    return b;
  }
  if (!r.ok()) {
    b.status = r.status();
    return b;
  }
  const std::string_view header = r.Until("<|message|>", 512, "\n");
  if (!r.ok()) {
    b.status = r.status();
    return b;
  }
  const std::string_view recipient = HeaderField(header, "to=");
  const std::string_view channel = HeaderField(header, "<|channel|>");
  if (recipient.empty()) {
    b.status = BlockStatus::kComplete;
    b.end = r.pos();
    b.trim = false;
    b.mode = channel == "analysis" ? TextMode::kReasoning : TextMode::kContent;
    return b;
  }
  // Built-in tools (browser.*, python) are not parsed: the message stays text.
  if (recipient.substr(0, 10) != "functions.") {
    b.status = BlockStatus::kMalformed;
    return b;
  }
  const std::string_view name = recipient.substr(10);
  const JsonValue* v = r.Json();
  if (!r.ok()) {
    b.status = r.status();
    return b;
  }
  std::optional<std::string> args = ArgumentsText(*v, &v->root());
  if (!args || !IsToolName(name)) {
    b.status = BlockStatus::kMalformed;
    return b;
  }
  b.status = BlockStatus::kComplete;
  b.end = r.pos();
  b.calls.push_back(ToolCall{std::string(name), std::move(*args), {}});
  b.mode = TextMode::kContent;
  return b;
}

}  // namespace mx::toolcalls::internal
