// Tool calls in the chat history, as the chat template expects them.
//
// OpenAI clients send an assistant message's calls back with
// `function.arguments` as a JSON *string* and `content: null`. Most templates
// are written for what transformers users pass: arguments as an object (they
// iterate it with `|items` or print it with `|tojson`) and a string content.
// Given the string, they fail ("Can only get item pairs from a mapping":
// Qwen3-Coder, Qwen 3.5, Seed-OSS, GLM, MiniCPM 5, LFM2.5) or print it
// JSON-encoded a second time ("{\"city\": ...}": Qwen 2.5, QwQ, Llama 3.x,
// Mistral, DeepSeek R1 / V3.1, gpt-oss, Functionary v3.1, Firefunction, Gemma
// 4, Command R); given null content, several fail or print "None".
// A few templates want the wire form instead: DeepSeek-R1-Distill-Llama and
// Functionary v3.2 concatenate the arguments as a string, and the R1 distills
// render the calls only when content is null. docs/tool_calls.md lists them.
//
// An assistant message's reasoning comes back as `reasoning_content` (what
// the server answers, and what Qwen 3 / 3.5, GLM, DeepSeek and Gemma 4
// templates read), but gpt-oss's and LFM2.5's templates read `thinking`: given
// only `reasoning_content`, they drop the reasoning, and gpt-oss loses the
// analysis that led to a tool call.
//
// Pure functions; thread-safe.
#pragma once

#include <string_view>

#include "templates/jinja/value.h"

namespace mx::toolcalls {

struct HistoryForm {
  bool string_arguments = false;   // the template wants `arguments` as a JSON string
  bool keep_null_content = false;  // the template tests an assistant's content for none
  bool reasoning_as_thinking = false;  // the template reads the reasoning as `thinking`
  // The template refuses a tool-call message with both content and thinking
  // (gpt-oss: "Cannot pass both content and thinking ...").
  bool thinking_or_content = false;
};

// What `jinja_template` (its source) wants, from its text.
HistoryForm DetectHistoryForm(std::string_view jinja_template);

// `messages` (the request's list) with every assistant tool call's
// `function.arguments` in the form `form` asks for: a string holding a JSON
// object becomes that object (or, for string_arguments, an object becomes its
// json.dumps text), and, unless keep_null_content, a null `content` of an
// assistant message with tool calls becomes "". With reasoning_as_thinking,
// an assistant message's non-empty string `reasoning_content` is also given
// as `thinking` (unless the message has a `thinking` of its own); with
// thinking_or_content too, a tool-call message that so gets a thinking has
// its content made "" (the thinking is the analysis the template renders
// before the call; llama.cpp does the same). Anything else (arguments that
// are not JSON, messages of other shapes) is left as it is. A value that is
// not a list is returned unchanged.
jinja::Value NormalizeToolCallHistory(const jinja::Value& messages, HistoryForm form);

}  // namespace mx::toolcalls
