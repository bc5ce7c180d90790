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

// How one syntax writes its calls: around all of them, between two, and
// one call as a GBNF sequence given the tool's name and its arguments rule.
struct Syntax {
  std::string prefix, separator, suffix;  // GBNF sequences ("" = nothing)
  std::string (*call)(const std::string& name, const std::string& args) = nullptr;
  bool parallel = true;  // the syntax writes several calls in a row
  // Arguments as XML parameters (qwen3_xml, seed_oss), each value on lines of
  // its own (qwen3_xml) or not (seed_oss).
  bool xml = false;
  bool xml_newlines = false;
};

std::string JsonNameArgs(const std::string& name, const std::string& args, const char* args_key) {
  return Lit("{\"name\": \"" + name + "\", \"" + args_key + "\": ") + " " + args + " " + Lit("}");
}

Result<Syntax> SyntaxOf(ToolCallFormat format) {
  Syntax s;
  switch (format) {
    case ToolCallFormat::kHermes:
      s.separator = Lit("\n");
      s.call = [](const std::string& n, const std::string& a) {
        return Lit("<tool_call>\n") + " " + JsonNameArgs(n, a, "arguments") + " " +
               Lit("\n</tool_call>");
      };
      return s;
    case ToolCallFormat::kQwen3Xml:
      s.separator = Lit("\n");
      s.xml = true;
      s.xml_newlines = true;
      s.call = [](const std::string& n, const std::string& a) {
        return Lit("<tool_call>\n<function=" + n + ">\n") + " " + a + " " +
               Lit("</function>\n</tool_call>");
      };
      return s;
    case ToolCallFormat::kSeedOss:
      s.separator = Lit("\n");
      s.xml = true;
      s.call = [](const std::string& n, const std::string& a) {
        return Lit("<seed:tool_call>\n<function=" + n + ">\n") + " " + a + " " +
               Lit("</function>\n</seed:tool_call>");
      };
      return s;
    case ToolCallFormat::kLlama3Json:
      s.parallel = false;
      s.call = [](const std::string& n, const std::string& a) {
        return JsonNameArgs(n, a, "parameters");
      };
      return s;
    case ToolCallFormat::kMistralJson:
      s.prefix = Lit("[TOOL_CALLS][");
      s.separator = Lit(", ");
      s.suffix = Lit("]");
      s.call = [](const std::string& n, const std::string& a) {
        return Lit("{\"name\": \"" + n + "\", \"arguments\": ") + " " + a + " " +
               Lit(", \"id\": \"") + " [a-zA-Z0-9]{9} " + Lit("\"}");
      };
      return s;
    case ToolCallFormat::kMistralArgs:
      s.call = [](const std::string& n, const std::string& a) {
        return Lit("[TOOL_CALLS]" + n + "[ARGS]") + " " + a;
      };
      return s;
    case ToolCallFormat::kHarmony:
      s.parallel = false;  // <|call|> ends the generation
      s.call = [](const std::string& n, const std::string& a) {
        return Lit("<|channel|>commentary to=functions." + n + " <|constrain|>json<|message|>") +
               " " + a;
      };
      return s;
    case ToolCallFormat::kDeepSeekR1:
      s.prefix = Lit("<｜tool▁calls▁begin｜>");
      s.separator = Lit("\n");
      s.suffix = Lit("<｜tool▁calls▁end｜>");
      s.call = [](const std::string& n, const std::string& a) {
        return Lit("<｜tool▁call▁begin｜>function<｜tool▁sep｜>" + n + "\n```json\n") + " " + a +
               " " + Lit("\n```<｜tool▁call▁end｜>");
      };
      return s;
    case ToolCallFormat::kDeepSeekV31:
      s.prefix = Lit("<｜tool▁calls▁begin｜>");
      s.suffix = Lit("<｜tool▁calls▁end｜>");
      s.call = [](const std::string& n, const std::string& a) {
        return Lit("<｜tool▁call▁begin｜>" + n + "<｜tool▁sep｜>") + " " + a + " " +
               Lit("<｜tool▁call▁end｜>");
      };
      return s;
    case ToolCallFormat::kKimiK2:
      s.prefix = Lit("<|tool_calls_section_begin|>");
      s.suffix = Lit("<|tool_calls_section_end|>");
      s.call = [](const std::string& n, const std::string& a) {
        return Lit("<|tool_call_begin|>functions." + n + ":") + " [0-9] " +
               Lit("<|tool_call_argument_begin|>") + " " + a + " " + Lit("<|tool_call_end|>");
      };
      return s;
    case ToolCallFormat::kFunctionaryV31:
      s.call = [](const std::string& n, const std::string& a) {
        return Lit("<function=" + n + ">") + " " + a + " " + Lit("</function>");
      };
      return s;
    case ToolCallFormat::kFirefunction:
      s.prefix = Lit(" functools[");
      s.separator = Lit(", ");
      s.suffix = Lit("]");
      s.call = [](const std::string& n, const std::string& a) {
        return JsonNameArgs(n, a, "arguments");
      };
      return s;
    case ToolCallFormat::kGranite:
      s.prefix = Lit("<|tool_call|>[");
      s.separator = Lit(", ");
      s.suffix = Lit("]");
      s.call = [](const std::string& n, const std::string& a) {
        return JsonNameArgs(n, a, "arguments");
      };
      return s;
    case ToolCallFormat::kCommandR:
      s.prefix = Lit("Action:\n```json\n[");
      s.separator = Lit(", ");
      s.suffix = Lit("]\n```");
      s.call = [](const std::string& n, const std::string& a) {
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

Result<std::string> ToolCallGbnf(ToolCallFormat format, const std::vector<ToolSpec>& tools,
                                 const std::string& only, bool parallel) {
  MX_ASSIGN_OR_RETURN(Syntax syntax, SyntaxOf(format));
  std::string rules, calls;
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
    const std::string call = "call-" + std::to_string(i);
    rules += call + " ::= " + syntax.call(t.name, args) + "\n";
    calls += (calls.empty() ? "" : " | ") + call;
  }
  if (calls.empty()) return Status::InvalidArgument("'tool_choice' names no tool of 'tools'");
  std::string root = "root ::= " + (syntax.prefix.empty() ? "" : syntax.prefix + " ") + "call";
  if (parallel && syntax.parallel) {
    root += " (" + (syntax.separator.empty() ? "" : syntax.separator + " ") + "call)*";
  }
  if (!syntax.suffix.empty()) root += " " + syntax.suffix;
  return root + "\ncall ::= " + calls + "\n" + rules;
}

}  // namespace mx::server
