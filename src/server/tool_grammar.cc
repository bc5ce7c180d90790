#include "server/tool_grammar.h"

#include <algorithm>
#include <string_view>

#include "grammar/grammar.h"
#include "grammar/json_schema.h"

namespace mx::server {
namespace {

using nlohmann::ordered_json;
using toolcalls::ToolCallFormat;

std::string Lit(std::string_view text) {
  std::string out;
  grammar::AppendGbnfLiteral(text, &out);
  return out;
}

// How one syntax writes its calls: `prefix` + `open` before all of them,
// `separator` between two, `suffix` after the last; each call is `head`
// then rest(name, args) (a GBNF sequence after the head). All but rest are
// raw text. The trigger of the lazy grammar (tool_choice "auto") is
// `prefix` when the syntax has one, else `head`.
struct Syntax {
  std::string prefix, open, separator, suffix, head;
  std::string (*rest)(const std::string& name, const std::string& args) = nullptr;
  bool parallel = true;  // the syntax writes several calls in a row
  // A call the parser only takes at the start of the reply (no trigger).
  bool start_only = false;
  // Arguments as XML parameters (qwen3_xml, seed_oss), each value on lines of
  // its own (qwen3_xml) or not (seed_oss).
  bool xml = false;
  bool xml_newlines = false;
  // Special tokens whose text the syntax writes (markers a model emits as one token).
  std::vector<std::string> markers;
  const std::string& trigger() const { return prefix.empty() ? head : prefix; }
};

std::string JsonNameArgs(const std::string& name, const std::string& args, const char* args_key) {
  return Lit("{\"name\": \"" + name + "\", \"" + args_key + "\": ") + " " + args + " " + Lit("}");
}

Result<Syntax> SyntaxOf(ToolCallFormat format) {
  Syntax s;
  switch (format) {
    case ToolCallFormat::kHermes:
      s.separator = "\n";
      s.head = "<tool_call>";
      s.markers = {"<tool_call>", "</tool_call>"};
      s.rest = [](const std::string& n, const std::string& a) {
        return Lit("\n") + " " + JsonNameArgs(n, a, "arguments") + " " + Lit("\n</tool_call>");
      };
      return s;
    case ToolCallFormat::kQwen3Xml:
      s.separator = "\n";
      s.head = "<tool_call>";
      s.markers = {"<tool_call>", "</tool_call>"};
      s.xml = true;
      s.xml_newlines = true;
      s.rest = [](const std::string& n, const std::string& a) {
        return Lit("\n<function=" + n + ">\n") + " " + a + " " + Lit("</function>\n</tool_call>");
      };
      return s;
    case ToolCallFormat::kSeedOss:
      s.separator = "\n";
      s.head = "<seed:tool_call>";
      s.markers = {"<seed:tool_call>", "</seed:tool_call>"};
      s.xml = true;
      s.rest = [](const std::string& n, const std::string& a) {
        return Lit("\n<function=" + n + ">\n") + " " + a + " " +
               Lit("</function>\n</seed:tool_call>");
      };
      return s;
    case ToolCallFormat::kLlama3Json:
      s.parallel = false;
      s.start_only = true;
      s.rest = [](const std::string& n, const std::string& a) {
        return JsonNameArgs(n, a, "parameters");
      };
      return s;
    case ToolCallFormat::kMistralJson:
      s.prefix = "[TOOL_CALLS]";
      s.open = "[";
      s.separator = ", ";
      s.suffix = "]";
      s.markers = {"[TOOL_CALLS]"};
      s.rest = [](const std::string& n, const std::string& a) {
        return Lit("{\"name\": \"" + n + "\", \"arguments\": ") + " " + a + " " +
               Lit(", \"id\": \"") + " [a-zA-Z0-9]{9} " + Lit("\"}");
      };
      return s;
    case ToolCallFormat::kMistralArgs:
      s.head = "[TOOL_CALLS]";
      s.markers = {"[TOOL_CALLS]", "[ARGS]"};
      s.rest = [](const std::string& n, const std::string& a) {
        return Lit(n + "[ARGS]") + " " + a;
      };
      return s;
    case ToolCallFormat::kHarmony:
      s.parallel = false;   // <|call|> ends the generation
      s.start_only = true;  // its analysis channel opens with the same tokens
      s.markers = {"<|channel|>", "<|constrain|>", "<|message|>"};
      s.rest = [](const std::string& n, const std::string& a) {
        return Lit("<|channel|>commentary to=functions." + n + " <|constrain|>json<|message|>") +
               " " + a;
      };
      return s;
    case ToolCallFormat::kDeepSeekR1:
      s.prefix = "<｜tool▁calls▁begin｜>";
      s.separator = "\n";
      s.suffix = "<｜tool▁calls▁end｜>";
      s.markers = {"<｜tool▁calls▁begin｜>", "<｜tool▁call▁begin｜>", "<｜tool▁sep｜>",
                   "<｜tool▁call▁end｜>", "<｜tool▁calls▁end｜>"};
      s.rest = [](const std::string& n, const std::string& a) {
        return Lit("<｜tool▁call▁begin｜>function<｜tool▁sep｜>" + n + "\n```json\n") + " " + a +
               " " + Lit("\n```<｜tool▁call▁end｜>");
      };
      return s;
    case ToolCallFormat::kDeepSeekV31:
      s.prefix = "<｜tool▁calls▁begin｜>";
      s.suffix = "<｜tool▁calls▁end｜>";
      s.markers = {"<｜tool▁calls▁begin｜>", "<｜tool▁call▁begin｜>", "<｜tool▁sep｜>",
                   "<｜tool▁call▁end｜>", "<｜tool▁calls▁end｜>"};
      s.rest = [](const std::string& n, const std::string& a) {
        return Lit("<｜tool▁call▁begin｜>" + n + "<｜tool▁sep｜>") + " " + a + " " +
               Lit("<｜tool▁call▁end｜>");
      };
      return s;
    case ToolCallFormat::kKimiK2:
      s.prefix = "<|tool_calls_section_begin|>";
      s.suffix = "<|tool_calls_section_end|>";
      s.markers = {"<|tool_calls_section_begin|>", "<|tool_call_begin|>",
                   "<|tool_call_argument_begin|>", "<|tool_call_end|>",
                   "<|tool_calls_section_end|>"};
      s.rest = [](const std::string& n, const std::string& a) {
        return Lit("<|tool_call_begin|>functions." + n + ":") + " [0-9] " +
               Lit("<|tool_call_argument_begin|>") + " " + a + " " + Lit("<|tool_call_end|>");
      };
      return s;
    case ToolCallFormat::kFunctionaryV31:
      s.head = "<function=";
      s.rest = [](const std::string& n, const std::string& a) {
        return Lit(n + ">") + " " + a + " " + Lit("</function>");
      };
      return s;
    case ToolCallFormat::kFirefunction:
      s.prefix = " functools";
      s.open = "[";
      s.separator = ", ";
      s.suffix = "]";
      s.start_only = true;
      s.rest = [](const std::string& n, const std::string& a) {
        return JsonNameArgs(n, a, "arguments");
      };
      return s;
    case ToolCallFormat::kGranite:
      s.prefix = "<|tool_call|>";
      s.open = "[";
      s.separator = ", ";
      s.suffix = "]";
      s.markers = {"<|tool_call|>"};
      s.rest = [](const std::string& n, const std::string& a) {
        return JsonNameArgs(n, a, "arguments");
      };
      return s;
    case ToolCallFormat::kCommandR:
      s.prefix = "Action:";
      s.open = "\n```json\n[";
      s.separator = ", ";
      s.suffix = "]\n```";
      s.rest = [](const std::string& n, const std::string& a) {
        return Lit("{\"tool_name\": \"" + n + "\", \"parameters\": ") + " " + a + " " + Lit("}");
      };
      return s;
    default:
      break;
  }
  const std::string name(toolcalls::ToolCallFormatName(format));
  return Status::InvalidArgument(
      format == ToolCallFormat::kNone
          ? std::string("'tool_choice' asks for a tool call, but the model's chat template has no "
                        "tool-call syntax the server knows (docs/tool_calls.md)")
          : "'tool_choice' cannot force a call in the " + name +
                " tool-call syntax (only 'auto' is supported for it; docs/tool_calls.md)");
}

// A GBNF sequence of raw text, "" for none.
std::string Seq(const std::string& text) { return text.empty() ? "" : Lit(text) + " "; }

// A schema whose values are strings only (written as raw text in XML).
bool IsStringSchema(const ordered_json& s) {
  if (!s.is_object()) return false;
  if (auto t = s.find("type"); t != s.end()) return *t == "string";
  for (const char* key : {"enum", "const"}) {
    auto it = s.find(key);
    if (it == s.end()) continue;
    if (it->is_string()) return true;
    if (!it->is_array() || it->empty()) return false;
    for (const auto& v : *it) {
      if (!v.is_string()) return false;
    }
    return true;
  }
  return false;
}

// XML parameters: each property of the schema (in its order, required ones
// always, the others optional) as <parameter=P>VALUE</parameter>.
Status AppendXmlParams(const ordered_json& schema, const std::string& rule, bool newlines,
                       const std::string& field, std::string* gbnf) {
  std::string seq;
  const ordered_json empty = ordered_json::object();
  const ordered_json& props = schema.contains("properties") ? schema["properties"] : empty;
  std::vector<std::string> required;
  if (auto r = schema.find("required"); r != schema.end() && r->is_array()) {
    for (const auto& v : *r) {
      if (v.is_string()) required.push_back(v.get<std::string>());
    }
  }
  int k = 0;
  for (const auto& [key, sub] : props.items()) {
    const std::string value = rule + "-v" + std::to_string(k++);
    if (IsStringSchema(sub) && !sub.contains("enum") && !sub.contains("const")) {
      // Raw text that cannot close the tag early, within the schema's
      // length bounds (in characters).
      const int64_t lo = sub.value("minLength", int64_t{0});
      const int64_t hi = sub.value("maxLength", int64_t{-1});
      std::string reps = "*";
      if (hi >= 0 || lo > 0) {
        reps = "{" + std::to_string(lo) + "," + (hi >= 0 ? std::to_string(std::max(hi, lo)) : "") +
               "}";
      }
      *gbnf += value + " ::= ([^<] | \"<\" [^/])" + reps + "\n";
    } else if (IsStringSchema(sub)) {
      std::string alts;
      const ordered_json& values =
          sub.contains("enum") ? sub["enum"] : ordered_json::array({sub["const"]});
      for (const auto& v : values) alts += (alts.empty() ? "" : " | ") + Lit(v.get<std::string>());
      *gbnf += value + " ::= " + alts + "\n";
    } else {
      Status st = grammar::AppendSchemaRules(sub, value, gbnf);
      if (!st.ok()) return st.WithContext(field + ".properties." + key);
    }
    const std::string open = "<parameter=" + key + ">" + (newlines ? "\n" : "");
    const std::string close = std::string(newlines ? "\n" : "") + "</parameter>\n";
    std::string one = Lit(open) + " " + value + " " + Lit(close);
    const bool must = std::find(required.begin(), required.end(), key) != required.end();
    seq += (seq.empty() ? "" : " ") + (must ? one : "(" + one + ")?");
  }
  *gbnf += rule + " ::= " + (seq.empty() ? "\"\"" : seq) + "\n";
  return Status::Ok();
}

}  // namespace

Result<ToolCallGrammar> ToolCallGrammarFor(ToolCallFormat format,
                                           const std::vector<ToolSpec>& tools,
                                           const std::string& only, bool parallel, bool lazy) {
  MX_ASSIGN_OR_RETURN(Syntax syntax, SyntaxOf(format));
  if (lazy && (syntax.start_only || syntax.trigger().empty())) {
    return Status::InvalidArgument("the " + std::string(toolcalls::ToolCallFormatName(format)) +
                                   " tool-call syntax has no marker to start a lazy grammar at");
  }
  std::string rules, calls, rests;
  for (size_t i = 0; i < tools.size(); ++i) {
    const ToolSpec& t = tools[i];
    if (!only.empty() && t.name != only) continue;
    const std::string field = "tools[" + std::to_string(i) + "].function.parameters";
    const std::string args = "args-" + std::to_string(i);
    if (syntax.xml) {
      MX_RETURN_IF_ERROR(AppendXmlParams(t.parameters, args, syntax.xml_newlines, field, &rules));
    } else {
      // Empty parameters: any JSON object (OpenAI's default).
      const ordered_json schema =
          t.parameters.empty() ? ordered_json{{"type", "object"}} : t.parameters;
      Status st = grammar::AppendSchemaRules(schema, args, &rules);
      if (!st.ok()) return st.WithContext(field);
    }
    const std::string rest = "rest-" + std::to_string(i);
    const std::string call = "call-" + std::to_string(i);
    rules += rest + " ::= " + syntax.rest(t.name, args) + "\n";
    rules += call + " ::= " + Seq(syntax.head) + rest + "\n";
    calls += (calls.empty() ? "" : " | ") + call;
    rests += (rests.empty() ? "" : " | ") + rest;
  }
  if (calls.empty()) return Status::InvalidArgument("'tool_choice' names no tool of 'tools'");
  // Lazy: the trigger (the prefix, or the first call's head) was written
  // already and is not grammar input.
  std::string root = "root ::= ";
  if (!lazy) root += Seq(syntax.prefix);
  root += Seq(syntax.open);
  root += lazy && syntax.prefix.empty() ? "first" : "call";
  if (parallel && syntax.parallel) root += " (" + Seq(syntax.separator) + "call)*";
  if (!syntax.suffix.empty()) root += " " + Lit(syntax.suffix);
  ToolCallGrammar out;
  out.gbnf = root + "\ncall ::= " + calls + "\n";
  if (lazy && syntax.prefix.empty()) out.gbnf += "first ::= " + rests + "\n";
  out.gbnf += rules;
  if (lazy) out.trigger = syntax.trigger();
  out.markers = syntax.markers;
  return out;
}

Result<std::string> ToolCallGbnf(ToolCallFormat format, const std::vector<ToolSpec>& tools,
                                 const std::string& only, bool parallel) {
  MX_ASSIGN_OR_RETURN(ToolCallGrammar g, ToolCallGrammarFor(format, tools, only, parallel, false));
  return g.gbnf;
}

}  // namespace mx::server
