// The grammar of a forced tool call (tool_choice "required" or a named
// function): GBNF for one call (or several, when parallel calls are allowed)
// in the model's own tool-call syntax, written the way its chat template
// renders calls in the history, with each call's arguments valid against the
// tool's `parameters` schema (grammar/json_schema.h). What it generates
// parses back with toolcalls::ParseToolCalls into those calls.
//
// Syntaxes: hermes, qwen3_xml, seed_oss, llama3_json, mistral_json,
// mistral_args, harmony, deepseek_r1, deepseek_v31, kimi_k2,
// functionary_v31, firefunction, granite, command_r. The others (and a
// template with no syntax) are an InvalidArgument saying so.
//
// Thread-safety: pure functions.
#pragma once

#include <string>
#include <vector>

#include "core/status.h"
#include "server/api_output.h"
#include "toolcalls/tool_call_format.h"

namespace mx::server {

// A tool-call grammar: GBNF, and for a lazy one (tool_choice "auto") the
// text that starts it (the syntax's opening marker, which is not grammar
// input: the grammar describes what follows it); `markers` are the special
// tokens' texts the syntax writes, which the grammar's vocabulary must let
// through as text.
struct ToolCallGrammar {
  std::string gbnf;
  std::string trigger;  // empty: not lazy
  std::vector<std::string> markers;
};

// `lazy`: the grammar of a call the model chose to begin (what follows the
// trigger); InvalidArgument for syntaxes without a marker of their own
// (llama3_json, firefunction: calls only at the reply's start; harmony).
Result<ToolCallGrammar> ToolCallGrammarFor(toolcalls::ToolCallFormat format,
                                           const std::vector<ToolSpec>& tools,
                                           const std::string& only, bool parallel, bool lazy);

// The forced grammar's GBNF, whose root is the call(s). `tools`: the request's tools; `only`: the
// one the reply must call ("" = any of them); `parallel`: one or more calls
// (else exactly one). Errors name the tool whose schema does not compile
// ("tools[1].function.parameters: json schema at /properties/x: ...").
Result<std::string> ToolCallGbnf(toolcalls::ToolCallFormat format,
                                 const std::vector<ToolSpec>& tools, const std::string& only,
                                 bool parallel);

}  // namespace mx::server
