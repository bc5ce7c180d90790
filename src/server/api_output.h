// The request fields that shape what a reply may say: structured output
// (`response_format`, llama.cpp's `grammar` and `json_schema`), function
// calling (`tools`, `tool_choice`, `parallel_tool_calls`), and the sampler's
// `logit_bias`. Parsing validates shape and values (InvalidArgument naming
// the field -> HTTP 400); compiling a schema or grammar happens once the
// model is known (its vocabulary), in output_constraint.h. Schemas keep the
// client's key order (nlohmann::ordered_json), which decides the order in
// which a reply writes an object's properties.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "core/status.h"

namespace mx::server {

// What the reply's text must be.
struct ResponseFormat {
  enum class Kind { kText, kJsonObject, kJsonSchema, kGrammar };
  Kind kind = Kind::kText;
  nlohmann::ordered_json schema;  // kJsonSchema, in the client's key order
  std::string name;               // json_schema.name, for logs
  std::string grammar;            // kGrammar: GBNF text
};

struct ToolSpec {
  std::string name;
  nlohmann::ordered_json parameters = nlohmann::ordered_json::object();  // a JSON Schema
};

enum class ToolChoice { kAuto, kNone, kRequired, kNamed };

struct ToolOptions {
  std::vector<ToolSpec> tools;
  ToolChoice choice = ToolChoice::kAuto;
  std::string named;  // kNamed: the function the reply must call
  bool parallel = true;
  // Calls are parsed from the output (tools given and choice is not none).
  bool active() const { return !tools.empty() && choice != ToolChoice::kNone; }
};

// `response_format` {"type": "text" | "json_object" | "json_schema"},
// llama.cpp's top-level `json_schema` (an object) and `grammar` (GBNF text).
// At most one of them may constrain the reply.
Status ParseResponseFormat(const nlohmann::ordered_json& body, ResponseFormat* out);

// `tools` (an array of {"type": "function", "function": {"name",
// "description", "parameters"}}), `tool_choice` ("auto", "none",
// "required" or {"type": "function", "function": {"name": ...}} naming one
// of the tools) and `parallel_tool_calls`.
Status ParseToolOptions(const nlohmann::ordered_json& body, ToolOptions* out);

// Both of the above from the request body's text, parsed keeping the
// client's key order (a schema's properties are generated in that order);
// `tools` only when given (chat requests).
// `parsed`: the same body as nlohmann::json; when it holds none of these
// fields the text is not parsed again (a long chat's body is large).
Status ParseOutputFields(const nlohmann::json& parsed, const std::string& body,
                         ResponseFormat* format, ToolOptions* tools);

// `logit_bias`: OpenAI's object {"token id": bias} or llama.cpp's array
// [[id, bias], ...] where bias false bans the token; biases in [-100, 100]
// (-100 bans, as OpenAI's). Ids are checked against the vocabulary later.
Status ParseLogitBias(const nlohmann::json& body, std::vector<std::pair<int32_t, float>>* out);

}  // namespace mx::server
