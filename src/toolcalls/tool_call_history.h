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
// Pure functions; thread-safe.
#pragma once

#include <string_view>

#include "templates/jinja/value.h"

namespace mx::toolcalls {

struct HistoryForm {
  bool string_arguments = false;   // the template wants `arguments` as a JSON string
  bool keep_null_content = false;  // the template tests an assistant's content for none
};

// What `jinja_template` (its source) wants, from its text.
HistoryForm DetectHistoryForm(std::string_view jinja_template);

// `messages` (the request's list) with every assistant tool call's
// `function.arguments` in the form `form` asks for: a string holding a JSON
// object becomes that object (or, for string_arguments, an object becomes its
// json.dumps text), and, unless keep_null_content, a null `content` of an
// assistant message with tool calls becomes "". Anything else (arguments
// that are not JSON, messages of other shapes) is left as it is. A value that
// is not a list is returned unchanged.
jinja::Value NormalizeToolCallHistory(const jinja::Value& messages, HistoryForm form);

}  // namespace mx::toolcalls
