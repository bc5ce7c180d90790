#include "templates/jinja/template.h"

#include "templates/jinja/ast.h"
#include "templates/jinja/interpreter.h"
#include "templates/jinja/lexer.h"
#include "templates/jinja/parser.h"
#include "templates/jinja/pystr.h"

namespace mx::jinja {
namespace {

// "line N: msg" from the lexer / parser -> "chat template line N: msg", same code.
Status Located(const Status& st) {
  const std::string msg = "chat template " + st.message();
  switch (st.code()) {
    case Status::Code::kNotSupported:
      return Status::NotSupported(msg);
    case Status::Code::kResourceExhausted:
      return Status::ResourceExhausted(msg);
    default:
      return Status::InvalidArgument(msg);
  }
}

}  // namespace

Result<Template> Template::Parse(std::string_view source, const Limits& limits) {
  if (source.size() > limits.max_source_bytes) {
    return Status::InvalidArgument("chat template: " + std::to_string(source.size()) +
                                   " bytes, more than the limit of " +
                                   std::to_string(limits.max_source_bytes) + " (max_source_bytes)");
  }
  if (!py::IsValidUtf8(source)) {
    return Status::InvalidArgument("chat template: the text is not valid UTF-8");
  }
  auto tokens = Tokenize(source);
  if (!tokens.ok()) return Located(tokens.status());
  auto program = ParseProgram(std::move(tokens).value(), limits.max_nesting);
  if (!program.ok()) return Located(program.status());
  return Template(std::make_shared<const Program>(std::move(program).value()), limits);
}

Result<std::string> Template::Render(const Value& context, const RenderOptions& options,
                                     RenderErrorInfo* error_info) const {
  Interpreter interpreter(*program_, limits_, options);
  return interpreter.Render(context, error_info);
}

}  // namespace mx::jinja
