// Block parsers of the families that write each parameter in its own tag;
// the arguments object is built from the parameters (ParamJson decides each
// value's JSON type from the tool's schema).
#include "toolcalls/formats.h"

namespace mx::toolcalls::internal {
namespace {

using Members = std::vector<std::pair<std::string, std::string>>;

ToolSchemas::ParamType TypeOf(const ToolSchemas* schemas, std::string_view tool,
                              std::string_view param) {
  return schemas ? schemas->TypeOf(tool, param) : ToolSchemas::ParamType::kUnknown;
}

Block Verdict(const Reader& r, std::vector<ToolCall> calls) {
  Block b;
  b.status = r.status();
  if (b.status == BlockStatus::kComplete && calls.empty()) b.status = BlockStatus::kMalformed;
  if (b.status == BlockStatus::kComplete) {
    b.end = r.pos();
    b.calls = std::move(calls);
  }
  return b;
}

void Close(Reader& r, std::string_view tag) {
  r.Space();
  if (!r.Done()) r.Lit(tag);
}

bool AddCall(Reader& r, std::string_view name, const Members& members,
             std::vector<ToolCall>* calls) {
  if (!r.ok()) return false;
  if (!IsToolName(name)) {
    r.Fail();
    return false;
  }
  calls->push_back(ToolCall{std::string(name), ObjectText(members), {}});
  return true;
}

// <function=NAME> <parameter=P>VALUE</parameter> ... </function>, one or more,
// between `open` and `close`. One newline after the parameter tag and one
// before its end tag are the template's, not the value's.
Block FunctionXml(std::string_view text, bool at_end, const ToolSchemas* schemas,
                  std::string_view open, std::string_view close) {
  Reader r(text, at_end);
  r.Lit(open);
  std::vector<ToolCall> calls;
  while (r.ok()) {
    r.Space();
    if (!r.Opt("<function=")) break;
    const std::string_view name = TrimSpace(r.Until(">", 256, "\n<"));
    Members members;
    while (r.ok()) {
      r.Space();
      if (!r.Opt("<parameter=")) break;
      const std::string param(TrimSpace(r.Until(">", 256, "\n<")));
      std::string_view value = r.Until("</parameter>");
      if (!value.empty() && value.front() == '\n') value.remove_prefix(1);
      if (!value.empty() && value.back() == '\n') value.remove_suffix(1);
      members.emplace_back(param, ParamJson(value, TypeOf(schemas, name, param)));
    }
    r.Space();
    r.Lit("</function>");
    AddCall(r, name, members, &calls);
  }
  Close(r, close);
  return Verdict(r, std::move(calls));
}

}  // namespace

Block ParseQwen3Xml(std::string_view text, bool at_end, const ToolSchemas* schemas) {
  // These models sometimes write the Hermes JSON body instead; accept it.
  Reader r(text, at_end);
  r.Lit("<tool_call>");
  r.Space();
  if (r.ok() && r.rest().empty() && !at_end) {
    Block b;
    b.status = BlockStatus::kNeedMore;
    return b;
  }
  if (r.ok() && r.rest().substr(0, 1) == "{") return ParseHermes(text, at_end, schemas);
  return FunctionXml(text, at_end, schemas, "<tool_call>", "</tool_call>");
}

Block ParseSeedOss(std::string_view text, bool at_end, const ToolSchemas* schemas) {
  return FunctionXml(text, at_end, schemas, "<seed:tool_call>", "</seed:tool_call>");
}

// <tool_call>NAME\n<arg_key>K</arg_key>\n<arg_value>V</arg_value>...</tool_call>
Block ParseGlm(std::string_view text, bool at_end, const ToolSchemas* schemas) {
  Reader r(text, at_end);
  r.Lit("<tool_call>");
  const std::string_view name = TrimSpace(r.Span("\n<", 256));  // to the newline or first tag
  Members members;
  while (r.ok()) {
    r.Space();
    if (!r.Opt("<arg_key>")) break;
    const std::string key(TrimSpace(r.Until("</arg_key>", 256, "<>")));
    r.Space();
    r.Lit("<arg_value>");
    const std::string_view value = r.Until("</arg_value>");
    members.emplace_back(key, ParamJson(value, TypeOf(schemas, name, key)));
  }
  std::vector<ToolCall> calls;
  Close(r, "</tool_call>");
  AddCall(r, name, members, &calls);
  return Verdict(r, std::move(calls));
}

// <function name="NAME"><param name="P">VALUE</param>...</function>; a value
// in <![CDATA[...]]> is a string.
Block ParseMiniCpm(std::string_view text, bool at_end, const ToolSchemas* schemas) {
  Reader r(text, at_end);
  r.Lit("<function name=\"");
  const std::string_view name = r.Until("\">", 256, "\n<>");
  Members members;
  while (r.ok()) {
    r.Space();
    if (!r.Opt("<param name=\"")) break;
    const std::string param(r.Until("\">", 256, "\n<>"));
    if (r.Opt("<![CDATA[")) {
      const std::string_view value = r.Until("]]>");
      r.Lit("</param>");
      members.emplace_back(param, QuoteJsonString(value));
    } else {
      const std::string_view value = r.Until("</param>");
      members.emplace_back(param, ParamJson(value, TypeOf(schemas, name, param)));
    }
  }
  r.Space();
  r.Lit("</function>");
  std::vector<ToolCall> calls;
  AddCall(r, name, members, &calls);
  return Verdict(r, std::move(calls));
}

// <｜DSML｜function_calls> (V3.2) or <｜DSML｜tool_calls> (V4), then
// <｜DSML｜invoke name="NAME"> with <｜DSML｜parameter name="P"
// string="true|false">V</｜DSML｜parameter>.
Block ParseDeepSeekDsml(std::string_view text, bool at_end, const ToolSchemas*) {
  constexpr std::string_view kBar = "\xEF\xBD\x9C";  // ｜
  const std::string dsml = "<" + std::string(kBar) + "DSML" + std::string(kBar);
  const std::string end_dsml = "</" + std::string(kBar) + "DSML" + std::string(kBar);
  Reader r(text, at_end);
  const bool v4 = r.Opt(kDsmlToolCalls);
  if (!v4) r.Lit(kDsmlFunctionCalls);
  std::vector<ToolCall> calls;
  while (r.ok()) {
    r.Space();
    if (!r.Opt(dsml + "invoke name=\"")) break;
    const std::string_view name = r.Until("\">", 256, "\n<>");
    Members members;
    while (r.ok()) {
      r.Space();
      if (!r.Opt(dsml + "parameter name=\"")) break;
      const std::string param(r.Until("\"", 256, "\n<>"));
      r.Space();
      r.Lit("string=\"");
      const std::string_view flag = r.Until("\">", 8);
      const std::string_view value = r.Until(end_dsml + "parameter>");
      if (!r.ok()) break;
      if (flag == "true") {
        members.emplace_back(param, QuoteJsonString(value));
      } else if (flag == "false") {
        members.emplace_back(param, ParamJson(value, ToolSchemas::ParamType::kOther));
      } else {
        r.Fail();
      }
    }
    r.Space();
    r.Lit(end_dsml + "invoke>");
    AddCall(r, name, members, &calls);
  }
  Close(r, end_dsml + (v4 ? "tool_calls>" : "function_calls>"));
  return Verdict(r, std::move(calls));
}

}  // namespace mx::toolcalls::internal
