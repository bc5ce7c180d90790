#include "server/output_constraint.h"

#include "grammar/grammar_constraint.h"
#include "grammar/json_schema.h"
#include "server/tool_grammar.h"

namespace mx::server {

Result<std::shared_ptr<const grammar::GrammarVocab>> ModelGrammarVocab(ServedModel& model) {
  std::call_once(model.grammar_vocab_once, [&] {
    model.grammar_vocab = grammar::GrammarVocabFromTokenizer(*model.model->tokenizer);
  });
  return model.grammar_vocab;
}

Result<std::shared_ptr<const engine::TokenConstraint>> BuildOutputConstraint(
    ServedModel& model, const ResponseFormat& format, const ToolOptions* tools,
    toolcalls::ToolCallFormat tool_format) {
  const bool forced =
      tools != nullptr && tools->active() &&
      (tools->choice == ToolChoice::kRequired || tools->choice == ToolChoice::kNamed);
  if (!forced && format.kind == ResponseFormat::Kind::kText) {
    return std::shared_ptr<const engine::TokenConstraint>();
  }
  if (forced && format.kind != ResponseFormat::Kind::kText) {
    return Status::InvalidArgument(
        "'tool_choice' forces a tool call, which cannot be combined with 'response_format', "
        "'json_schema' or 'grammar'");
  }
  Result<std::shared_ptr<const grammar::Grammar>> g = Status::Internal("no grammar");
  switch (format.kind) {
    case ResponseFormat::Kind::kText: {
      MX_ASSIGN_OR_RETURN(
          std::string gbnf,
          ToolCallGbnf(tool_format, tools->tools,
                       tools->choice == ToolChoice::kNamed ? tools->named : "", tools->parallel));
      g = grammar::ParseGbnf(gbnf);
      if (!g.ok()) return g.status().WithContext("the forced tool call's grammar");
      break;
    }
    case ResponseFormat::Kind::kJsonObject:
      g = grammar::CompileJsonObject();
      break;
    case ResponseFormat::Kind::kJsonSchema:
      g = grammar::CompileJsonSchema(format.schema);
      if (!g.ok()) return g.status().WithContext("'response_format' json_schema");
      break;
    case ResponseFormat::Kind::kGrammar:
      g = grammar::ParseGbnf(format.grammar);
      if (!g.ok()) return g.status().WithContext("'grammar'");
      break;
  }
  MX_RETURN_IF_ERROR(g.status());
  MX_ASSIGN_OR_RETURN(auto vocab, ModelGrammarVocab(model));
  MX_ASSIGN_OR_RETURN(auto constraint,
                      grammar::GrammarConstraint::Create(std::move(g).value(), vocab));
  return std::shared_ptr<const engine::TokenConstraint>(std::move(constraint));
}

}  // namespace mx::server
