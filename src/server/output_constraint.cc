#include "server/output_constraint.h"

#include "grammar/grammar_constraint.h"
#include "grammar/json_schema.h"
#include "server/tool_grammar.h"

namespace mx::server {

Result<OutputGrammar> OutputGrammarFor(const ResponseFormat& format, const ToolOptions* tools,
                                       toolcalls::ToolCallFormat tool_format, bool think_open) {
  const bool forced =
      tools != nullptr && tools->active() &&
      (tools->choice == ToolChoice::kRequired || tools->choice == ToolChoice::kNamed);
  OutputGrammar out;
  if (forced && format.kind != ResponseFormat::Kind::kText) {
    return Status::InvalidArgument(
        "'tool_choice' forces a tool call, which cannot be combined with 'response_format', "
        "'json_schema' or 'grammar'");
  }
  if (format.kind == ResponseFormat::Kind::kGrammar) {
    out.gbnf = format.grammar;
    out.field = "'grammar'";
    return out;
  }
  // The answer's rules under the name "answer", then the root.
  std::string rules;
  switch (format.kind) {
    case ResponseFormat::Kind::kText: {
      if (!forced) return out;
      MX_ASSIGN_OR_RETURN(
          std::string gbnf,
          ToolCallGbnf(tool_format, tools->tools,
                       tools->choice == ToolChoice::kNamed ? tools->named : "", tools->parallel));
      // ToolCallGbnf starts with its root rule; it becomes the answer.
      rules = "answer" + gbnf.substr(gbnf.find(" ::= "));
      out.field = "the forced tool call";
      break;
    }
    case ResponseFormat::Kind::kJsonObject:
      MX_RETURN_IF_ERROR(
          grammar::AppendSchemaRules(nlohmann::ordered_json{{"type", "object"}}, "answer", &rules));
      out.field = "'response_format' json_object";
      break;
    case ResponseFormat::Kind::kJsonSchema: {
      Status st = grammar::AppendSchemaRules(format.schema, "answer", &rules);
      if (!st.ok()) return st.WithContext("'response_format' json_schema");
      out.field = "'response_format' json_schema";
      break;
    }
    case ResponseFormat::Kind::kGrammar:
      break;
  }
  out.after_think = think_open;
  out.gbnf = std::string(think_open ? "root ::= [ \\t\\n]* answer\n" : "root ::= answer\n") + rules;
  return out;
}

Result<std::shared_ptr<const grammar::GrammarVocab>> ModelGrammarVocab(ServedModel& model) {
  std::call_once(model.grammar_vocab_once, [&] {
    model.grammar_vocab = grammar::GrammarVocabFromTokenizer(*model.model->tokenizer);
  });
  return model.grammar_vocab;
}

Result<std::shared_ptr<const engine::TokenConstraint>> BuildOutputConstraint(
    ServedModel& model, const ResponseFormat& format, const ToolOptions* tools,
    toolcalls::ToolCallFormat tool_format, bool think_open) {
  MX_ASSIGN_OR_RETURN(OutputGrammar og, OutputGrammarFor(format, tools, tool_format, think_open));
  if (og.gbnf.empty()) return std::shared_ptr<const engine::TokenConstraint>();
  auto g = grammar::ParseGbnf(og.gbnf);
  if (!g.ok()) return g.status().WithContext(og.field);
  MX_ASSIGN_OR_RETURN(auto vocab, ModelGrammarVocab(model));
  if (og.after_think) {
    MX_ASSIGN_OR_RETURN(auto lazy, grammar::GrammarConstraint::CreateLazy(std::move(g).value(),
                                                                          vocab, {"</think>"}));
    return std::shared_ptr<const engine::TokenConstraint>(std::move(lazy));
  }
  MX_ASSIGN_OR_RETURN(auto constraint,
                      grammar::GrammarConstraint::Create(std::move(g).value(), vocab));
  return std::shared_ptr<const engine::TokenConstraint>(std::move(constraint));
}

}  // namespace mx::server
