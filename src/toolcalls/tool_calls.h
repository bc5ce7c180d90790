// Tool calls in a model's reply: the reply text -> OpenAI `tool_calls`, whole
// (ParseToolCalls) or while it is generated (ToolCallStream).
//
//   const ToolCallFormat format = DetectToolCallFormat(chat_template_source);
//   const ToolSchemas schemas = ToolSchemas::FromJson(body["tools"]);
//   // whole reply:
//   ParsedToolCalls r = ParseToolCalls(format, reply_text, &schemas);
//   // streamed:
//   ToolCallStream stream(format, &schemas);
//   for (each text delta) send(stream.Feed(delta));
//   send(stream.Finish());
//
// What is parsed (docs/tool_calls.md): the text outside the calls is content;
// whitespace between content and a call, and between calls, is dropped. A call
// that is malformed (bad JSON, a missing part, unterminated at the end of the
// reply) is not a call: its text stays in the content. Nothing here fails.
//
// Streaming: text that could still be the start of a call marker is held back
// until it is known not to be one (as engine::TextStream holds possible stop
// strings), and a call is held until it is complete: its events (kCallBegin,
// then one kArguments with the whole arguments text) come out when the call's
// last byte has arrived. So the events never have to be taken back, and for
// every split of a text into deltas the events add up to ParseToolCalls of the
// whole text (ParseToolCalls is the stream run over the whole text).
//
// Call ids: the model's own id where its syntax has one (Mistral, Kimi); else
// the caller makes one, with MakeToolCallId.
//
// Without calls (parse_calls false: a chat with no tools to call, or
// tool_choice "none"), a call the model writes anyway is not a call: its text
// stays in the content as it was written, markers included. The rest of the
// syntax is still read: kHarmony's channels (analysis -> reasoning, final and
// commentary -> content).
//
// Thread-safety: ToolSchemas is immutable after construction; a ToolCallStream
// is one reply's and not thread-safe; the free functions are thread-safe.
#pragma once

#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "core/env.h"
#include "core/status.h"
#include "toolcalls/tool_call_format.h"

namespace mx::toolcalls {

// The parameter types of the request's tools, which decide how the XML-style
// formats (kQwen3Xml, kSeedOss, kGlm, kMiniCpm) read a parameter's text:
// a string parameter is always a JSON string; any other parameter is the
// text's JSON value when it is JSON (or True / False / None, as Python prints
// them), else a string.
class ToolSchemas {
 public:
  enum class ParamType { kUnknown, kString, kOther };

  ToolSchemas() = default;
  // From the OpenAI `tools` array ([{"type": "function", "function": {"name",
  // "parameters": {"properties": {...}}}}]). Entries of another shape are
  // skipped; nothing fails. A parameter is kString when its schema's "type" is
  // "string" (or a list of "string" and "null"), or it has no "type" and an
  // "enum" / "const" of strings only, or all its "anyOf" / "oneOf" branches are
  // strings; kOther when it has any other type; kUnknown otherwise.
  static ToolSchemas FromJson(const nlohmann::json& tools);
  static ToolSchemas FromJson(const nlohmann::ordered_json& tools);

  // kUnknown when the tool or the parameter is not declared (read like kOther).
  ParamType TypeOf(std::string_view tool, std::string_view param) const;

 private:
  std::map<std::string, std::map<std::string, ParamType, std::less<>>, std::less<>> tools_;
};

struct ToolCall {
  std::string name;
  // The arguments as compact JSON text (OpenAI's `function.arguments`
  // string), always an object: JSON formats give the model's object with the
  // whitespace outside strings removed (key order and number spelling kept);
  // XML formats give an object built from the parameters in order.
  std::string arguments;
  std::string id;  // the id the model wrote (Mistral [CALL_ID] / "id", Kimi); usually empty
};

struct ParsedToolCalls {
  std::string content;    // the text outside the calls
  std::string reasoning;  // kHarmony: the analysis channel; empty for the other formats
  std::vector<ToolCall> calls;
};

struct ToolCallEvent {
  enum class Kind {
    kContent,    // text: content
    kReasoning,  // text: reasoning (kHarmony's analysis channel)
    kCallBegin,  // index: the call's number (0, 1, ...); text: its name; id: ToolCall::id
    kArguments,  // index: the call; text: a fragment of its arguments text
  };
  Kind kind = Kind::kContent;
  int index = -1;
  std::string text;
  std::string id;
};

// The reply `text` parsed. schemas: may be null (every parameter kUnknown);
// borrowed for the call. parse_calls: false leaves calls in the content.
ParsedToolCalls ParseToolCalls(ToolCallFormat format, std::string_view text,
                               const ToolSchemas* schemas = nullptr, bool parse_calls = true);

class ToolCallStream {
 public:
  // schemas: may be null; borrowed, must outlive the stream. parse_calls:
  // false leaves calls in the content (calls() stays 0).
  explicit ToolCallStream(ToolCallFormat format, const ToolSchemas* schemas = nullptr,
                          bool parse_calls = true);
  ~ToolCallStream();
  ToolCallStream(const ToolCallStream&) = delete;
  ToolCallStream& operator=(const ToolCallStream&) = delete;

  // Adds the next piece of reply text (any split, even inside a UTF-8
  // character or a marker). Returns the events that are now certain, in
  // order; adjacent text events of one kind are merged, empty ones left out.
  std::vector<ToolCallEvent> Feed(std::string_view text);
  // The reply ended: returns the rest (a call still open becomes content).
  // Feed and Finish after Finish return nothing.
  std::vector<ToolCallEvent> Finish();
  // Calls begun so far.
  int calls() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// An id for a call the model wrote none for: "call_" + 24 random
// alphanumerics, or, for kMistralJson / kMistralArgs (whose templates refuse
// any other), 9 random alphanumerics. Randomness from env.RandomBytes;
// fails only when that does.
Result<std::string> MakeToolCallId(Env& env, ToolCallFormat format = ToolCallFormat::kNone);

}  // namespace mx::toolcalls
