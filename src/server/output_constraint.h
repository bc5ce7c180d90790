// The constraint a request's output fields put on its reply (constrained
// decoding, docs/structured_output.md): response_format json_object /
// json_schema, llama.cpp's grammar, or a forced tool call (tool_choice
// "required" or a named function, in the model's tool-call syntax;
// tool_grammar.h). Compiled once per request; every choice follows a clone.
#pragma once

#include <memory>

#include "core/status.h"
#include "engine/token_constraint.h"
#include "grammar/grammar_vocab.h"
#include "server/api_output.h"
#include "server/model_manager.h"
#include "toolcalls/tool_call_format.h"

namespace mx::server {

// The model's vocabulary as constrained decoding sees it, built on first use
// and kept with the model. Thread-safe.
Result<std::shared_ptr<const grammar::GrammarVocab>> ModelGrammarVocab(ServedModel& model);

// Null when the reply is free. Errors are the client's (InvalidArgument
// naming the field: a schema keyword that is not supported, a grammar that
// does not parse, a forced call in a syntax the server cannot write, a
// forced call together with response_format).
// `tools`: null for text completions.
Result<std::shared_ptr<const engine::TokenConstraint>> BuildOutputConstraint(
    ServedModel& model, const ResponseFormat& format, const ToolOptions* tools,
    toolcalls::ToolCallFormat tool_format);

}  // namespace mx::server
