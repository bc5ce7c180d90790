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
#pragma once

#include <memory>
#include <string>

#include "core/status.h"
#include "engine/token_constraint.h"
#include "grammar/grammar_vocab.h"
#include "server/api_output.h"
#include "server/model_manager.h"
#include "toolcalls/tool_call_format.h"

namespace mx::server {

// What a request constrains and how.
struct OutputGrammar {
  std::string gbnf;          // empty: the reply is free
  bool after_think = false;  // free until "</think>", then the grammar
  std::string field;         // what the client wrote, for error messages
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
Result<std::shared_ptr<const grammar::GrammarVocab>> ModelGrammarVocab(ServedModel& model);

// OutputGrammarFor compiled for `model`; null when the reply is free.
// A grammar that does not parse is the client's error (naming 'grammar').
Result<std::shared_ptr<const engine::TokenConstraint>> BuildOutputConstraint(
    ServedModel& model, const ResponseFormat& format, const ToolOptions* tools,
    toolcalls::ToolCallFormat tool_format, bool think_open);

}  // namespace mx::server
