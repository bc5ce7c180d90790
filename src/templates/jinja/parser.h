// Parser: tokens -> Program, following jinja2's grammar (parser.py) for the
// statements and expressions chat templates use. Internal to the jinja module.
#pragma once

#include <vector>

#include "core/status.h"
#include "templates/jinja/ast.h"
#include "templates/jinja/lexer.h"

namespace mx::jinja {

// Parses `tokens` (as Tokenize returns them, ending in kEof). Statements and
// expressions nested deeper than `max_nesting` are refused, so that parsing
// and rendering never recurse without bound. Fails with InvalidArgument
// "line N: ..." on a syntax error, an unknown tag, or a filter / test that does
// not exist (outside an `if`, where jinja2 too refuses it when compiling; inside
// one the error is raised only if the expression runs).
Result<Program> ParseProgram(std::vector<Token> tokens, int max_nesting);

}  // namespace mx::jinja
