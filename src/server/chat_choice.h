// ChatChoice: one chat choice's text pipeline. The reply's text goes through
// the reasoning splitter (thinking models: reasoning_content) and, when the
// request has tools, the tool-call parser of the model's syntax (tool_calls);
// a harmony model's reply always goes through its parser, which splits the
// channels (analysis: reasoning_content), calls or no calls. It comes out as
// the deltas a stream sends, in order. A whole reply is the same pipeline over
// all of its text, so whole and streamed replies agree.
//
// Thread-safety: none (one per choice).
#pragma once

#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/env.h"
#include "server/reasoning.h"
#include "toolcalls/tool_calls.h"

namespace mx::server {

struct ChatChoiceOptions {
  bool split_reasoning = false;          // a thinking model's reply
  bool reasoning_starts_inside = false;  // the prompt opened a think block
  // The syntax the reply is parsed in (kNone: the text is content).
  toolcalls::ToolCallFormat tool_format = toolcalls::ToolCallFormat::kNone;
  // false: no tools to call; a call in tool_format's syntax stays content.
  bool parse_calls = true;
  const toolcalls::ToolSchemas* tool_schemas = nullptr;  // borrowed; may be null
  Env* env = nullptr;  // randomness for call ids (REQUIRED with tools)
};

class ChatChoice {
 public:
  explicit ChatChoice(const ChatChoiceOptions& options);

  // The deltas for the next piece of text: objects with "content",
  // "reasoning_content" and/or "tool_calls" (a call's first delta carries
  // index, id, type and name with empty arguments, the next its arguments),
  // as OpenAI streams them. None when everything was held back.
  std::vector<nlohmann::json> Deltas(const std::string& text);
  // The reply ended: the deltas of what was held back.
  std::vector<nlohmann::json> Rest();
  // Whole replies: the assistant message of all of `text` (content null when
  // it is empty and the reply called a tool, as OpenAI answers).
  nlohmann::json Message(const std::string& text);
  // The choice called a tool (its finish reason is then "tool_calls").
  bool called() const { return tools_ && tools_->calls() > 0; }

 private:
  void Route(const std::string& reasoning, const std::string& content, bool final,
             std::vector<nlohmann::json>* out);

  ChatChoiceOptions options_;
  std::unique_ptr<ReasoningSplitter> splitter_;
  std::unique_ptr<toolcalls::ToolCallStream> tools_;
};

}  // namespace mx::server
