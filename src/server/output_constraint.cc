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
      if (!forced) {
        // "auto": calls the model begins are kept well-formed, where the
        // syntax has a marker to begin them at (else they are only parsed).
        if (tools == nullptr || !tools->active() || think_open) return out;
        auto lazy =
            ToolCallGrammarFor(tool_format, tools->tools, "", tools->parallel, /*lazy=*/true);
        if (!lazy.ok()) return out;
        out.gbnf = std::move(lazy->gbnf);
        out.trigger = std::move(lazy->trigger);
        out.markers = std::move(lazy->markers);
        out.field = "the tools' call grammar";
        return out;
      }
      MX_ASSIGN_OR_RETURN(
          ToolCallGrammar g,
          ToolCallGrammarFor(tool_format, tools->tools,
                             tools->choice == ToolChoice::kNamed ? tools->named : "",
                             tools->parallel, /*lazy=*/false));
      // The grammar starts with its root rule; it becomes the answer.
      rules = "answer" + g.gbnf.substr(g.gbnf.find(" ::= "));
      out.markers = std::move(g.markers);
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
  if (think_open) out.trigger = "</think>";
  out.gbnf = std::string(think_open ? "root ::= [ \\t\\n]* answer\n" : "root ::= answer\n") + rules;
  return out;
}

Result<std::shared_ptr<const grammar::GrammarVocab>> ModelGrammarVocab(
    ServedModel& model, const std::vector<std::string>& control_as_text) {
  std::string key;
  for (const std::string& m : control_as_text) key += m + '\n';
  std::lock_guard<std::mutex> lock(model.grammar_vocab_mu);
  auto it = model.grammar_vocabs.find(key);
  if (it != model.grammar_vocabs.end()) return it->second;
  MX_ASSIGN_OR_RETURN(auto vocab,
                      grammar::GrammarVocabFromTokenizer(*model.model->tokenizer, control_as_text));
  model.grammar_vocabs.emplace(key, vocab);
  return vocab;
}

Result<std::shared_ptr<const engine::TokenConstraint>> BuildOutputConstraint(
    ServedModel& model, const ResponseFormat& format, const ToolOptions* tools,
    toolcalls::ToolCallFormat tool_format, bool think_open) {
  MX_ASSIGN_OR_RETURN(OutputGrammar og, OutputGrammarFor(format, tools, tool_format, think_open));
  if (og.gbnf.empty()) return std::shared_ptr<const engine::TokenConstraint>();
  auto g = grammar::ParseGbnf(og.gbnf);
  if (!g.ok()) return g.status().WithContext(og.field);
  MX_ASSIGN_OR_RETURN(auto vocab, ModelGrammarVocab(model, og.markers));
  if (!og.trigger.empty()) {
    MX_ASSIGN_OR_RETURN(auto lazy, grammar::GrammarConstraint::CreateLazy(std::move(g).value(),
                                                                          vocab, {og.trigger}));
    return std::shared_ptr<const engine::TokenConstraint>(std::move(lazy));
  }
  MX_ASSIGN_OR_RETURN(auto constraint,
                      grammar::GrammarConstraint::Create(std::move(g).value(), vocab));
  return std::shared_ptr<const engine::TokenConstraint>(std::move(constraint));
}

}  // namespace mx::server
