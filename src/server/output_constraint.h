// The constraint a request's output fields put on its reply (constrained
// decoding, docs/structured_output.md): response_format json_object /
// json_schema, llama.cpp's grammar, or a forced tool call (tool_choice
// "required" or a named function, in the model's tool-call syntax;
// tool_grammar.h). Compiled once per request; every choice follows a clone.
//
// Thinking models: when the prompt leaves the reply inside an open think
// block (Qwen 3.5's generation prompt ends with "<think>\n"), the reply
// thinks freely first; the constraint starts after "</think>" (then
// whitespace, then the constrained answer). A client's own `grammar`
// constrains the whole reply as written.
//
// tool_choice "auto" (tools, no response format, no open think block, a
// syntax with an opening marker): the reply is free until it writes the
// marker; what follows is then a well-formed call of one of the tools with
// schema-valid arguments (or several), and nothing after them.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "core/status.h"
#include "engine/token_constraint.h"
#include "grammar/grammar_vocab.h"
#include "server/api_output.h"
#include "server/model_manager.h"
#include "toolcalls/tool_call_format.h"

namespace mx::server {

// What a request constrains and how.
struct OutputGrammar {
  std::string gbnf;  // empty: the reply is free
  // Lazy: free until this text appears ("</think>" for a thinking model, a
  // tool call's opening marker in "auto" mode), then the grammar; "": from
  // the reply's start.
  std::string trigger;
  std::vector<std::string> markers;  // special tokens' texts the grammar may write
  std::string field;                 // what the client wrote, for error messages
};

// The grammar of the request's output fields (no model needed). Errors are
// the client's (InvalidArgument naming the field: a schema keyword that is
// not supported, a forced call in a syntax the server cannot write, a
// forced call together with response_format). `tools`: null for text
// completions. `think_open`: the prompt leaves the reply inside a think
// block.
Result<OutputGrammar> OutputGrammarFor(const ResponseFormat& format, const ToolOptions* tools,
                                       toolcalls::ToolCallFormat tool_format, bool think_open);

// The model's vocabulary as constrained decoding sees it, built on first use
// and kept with the model. Thread-safe.
// `control_as_text`: special tokens' texts let through as text (a syntax's markers).
Result<std::shared_ptr<const grammar::GrammarVocab>> ModelGrammarVocab(
    ServedModel& model, const std::vector<std::string>& control_as_text = {});

// OutputGrammarFor compiled for `model`; null when the reply is free.
// A grammar that does not parse is the client's error (naming 'grammar').
Result<std::shared_ptr<const engine::TokenConstraint>> BuildOutputConstraint(
    ServedModel& model, const ResponseFormat& format, const ToolOptions* tools,
    toolcalls::ToolCallFormat tool_format, bool think_open);

}  // namespace mx::server
