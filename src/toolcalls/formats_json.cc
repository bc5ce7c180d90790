// Block parsers of the families whose arguments are a JSON object in the text.
#include "toolcalls/formats.h"

namespace mx::toolcalls::internal {
namespace {

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

// The closing tag, which may be missing when the reply ends right there.
void Close(Reader& r, std::string_view tag) {
  r.Space();
  if (!r.Done()) r.Lit(tag);
}

// Calls from a JSON array of call objects (or one object).
std::vector<ToolCall> CallList(Reader& r, std::string_view name_key,
                               std::initializer_list<std::string_view> args_keys) {
  std::vector<ToolCall> calls;
  const JsonValue* v = r.Json();
  if (v == nullptr) return calls;
  const JsonNode& root = v->root();
  std::vector<const JsonNode*> objects;
  if (root.kind == JsonNode::Kind::kArray) {
    for (int i : root.items) objects.push_back(&v->nodes[static_cast<size_t>(i)]);
  } else {
    objects.push_back(&root);
  }
  for (const JsonNode* o : objects) {
    ToolCall c;
    if (!CallFromObject(*v, *o, name_key, args_keys, &c)) {
      r.Fail();
      return {};
    }
    calls.push_back(std::move(c));
  }
  return calls;
}

// One call whose name was read already and whose arguments object comes next.
bool ArgsObject(Reader& r, std::string_view name, std::vector<ToolCall>* calls) {
  const JsonValue* v = r.Json();
  if (v == nullptr) return false;
  std::optional<std::string> args = ArgumentsText(*v, &v->root());
  if (!args || !IsToolName(name)) {
    r.Fail();
    return false;
  }
  calls->push_back(ToolCall{std::string(name), std::move(*args), {}});
  return true;
}

constexpr std::string_view kNameStop = " \t\r\n<>\"{}[]";

}  // namespace

Block ParseHermes(std::string_view text, bool at_end, const ToolSchemas*) {
  Reader r(text, at_end);
  r.Lit("<tool_call>");
  std::vector<ToolCall> calls;
  if (const JsonValue* v = r.Json()) {
    ToolCall c;
    if (v->root().kind != JsonNode::Kind::kObject ||
        !CallFromObject(*v, v->root(), "name", {"arguments", "parameters"}, &c)) {
      r.Fail();
    }
    calls.push_back(std::move(c));
  }
  Close(r, "</tool_call>");
  return Verdict(r, std::move(calls));
}

Block ParseLlama3(std::string_view text, bool at_end, const ToolSchemas*) {
  Reader r(text, at_end);
  r.Opt("<|python_tag|>");
  r.Space();
  // Decide early on a reply that is JSON but no call: its first key must be
  // "name" or "type".
  {
    std::string_view rest = r.rest();
    if (!rest.empty() && rest[0] == '{') {
      size_t i = 1;
      while (i < rest.size() && IsJsonSpace(rest[i])) ++i;
      const std::string_view key = rest.substr(i);
      bool possible = false;
      for (std::string_view k : {std::string_view("\"name\""), std::string_view("\"type\"")}) {
        const size_t n = std::min(key.size(), k.size());
        if (key.substr(0, n) == k.substr(0, n)) possible = true;
      }
      if (!possible) r.Fail();
    }
  }
  std::vector<ToolCall> calls;
  if (const JsonValue* v = r.Json()) {
    ToolCall c;
    // Unlike the tagged formats, nothing but the keys tells a call from a JSON
    // answer here, so the arguments must be present.
    const bool has_args = v->root().kind == JsonNode::Kind::kObject &&
                          (v->Member(v->root(), "parameters") || v->Member(v->root(), "arguments"));
    if (!has_args || !CallFromObject(*v, v->root(), "name", {"parameters", "arguments"}, &c)) {
      r.Fail();
    }
    calls.push_back(std::move(c));
  }
  return Verdict(r, std::move(calls));
}

Block ParseMistralJson(std::string_view text, bool at_end, const ToolSchemas*) {
  Reader r(text, at_end);
  r.Lit("[TOOL_CALLS]");
  std::vector<ToolCall> calls = CallList(r, "name", {"arguments"});
  return Verdict(r, std::move(calls));
}

Block ParseMistralArgs(std::string_view text, bool at_end, const ToolSchemas*) {
  Reader r(text, at_end);
  r.Lit("[TOOL_CALLS]");
  const std::string_view name = r.Until("[", 256, kNameStop);
  std::string id;
  if (r.Opt("CALL_ID]")) {
    id = std::string(r.Until("[ARGS]", 256, kNameStop));
  } else {
    r.Lit("ARGS]");
  }
  std::vector<ToolCall> calls;
  if (ArgsObject(r, name, &calls)) calls.back().id = std::move(id);
  return Verdict(r, std::move(calls));
}

// <｜tool▁calls▁begin｜> (optional) then calls, then <｜tool▁calls▁end｜>
// (optional). `call` reads one call after its <｜tool▁call▁begin｜>.
template <typename CallFn>
Block DeepSeekFrame(std::string_view text, bool at_end, CallFn call) {
  Reader r(text, at_end);
  r.Opt(kDsCallsBegin);
  std::vector<ToolCall> calls;
  while (r.ok()) {
    r.Space();
    if (!r.Opt(kDsCallBegin)) break;
    call(r, &calls);
    r.Space();
    r.Lit(kDsCallEnd);
  }
  if (r.ok()) r.Opt(kDsCallsEnd);
  return Verdict(r, std::move(calls));
}

Block ParseDeepSeekR1(std::string_view text, bool at_end, const ToolSchemas*) {
  return DeepSeekFrame(text, at_end, [](Reader& r, std::vector<ToolCall>* calls) {
    r.Opt("function");
    r.Lit(kDsSep);
    const std::string_view name = TrimSpace(r.Until("\n", 256, "<>{}\""));
    r.Space();
    const bool fence = r.Opt("```json") || r.Opt("```");
    ArgsObject(r, name, calls);
    if (fence) {
      r.Space();
      r.Lit("```");
    }
  });
}

Block ParseDeepSeekV31(std::string_view text, bool at_end, const ToolSchemas*) {
  return DeepSeekFrame(text, at_end, [](Reader& r, std::vector<ToolCall>* calls) {
    const std::string_view name = TrimSpace(r.Until(kDsSep, 256, "\n<>{}\""));
    ArgsObject(r, name, calls);
  });
}

Block ParseKimiK2(std::string_view text, bool at_end, const ToolSchemas*) {
  Reader r(text, at_end);
  r.Opt("<|tool_calls_section_begin|>");
  std::vector<ToolCall> calls;
  while (r.ok()) {
    r.Space();
    if (!r.Opt("<|tool_call_begin|>")) break;
    const std::string_view id = TrimSpace(r.Until("<|tool_call_argument_begin|>", 256, "\n{}\""));
    // functions.NAME:INDEX
    std::string_view name = id;
    if (name.substr(0, 10) == "functions.") name.remove_prefix(10);
    if (const size_t colon = name.rfind(':'); colon != std::string_view::npos) {
      name = name.substr(0, colon);
    }
    if (ArgsObject(r, name, &calls)) calls.back().id = std::string(id);
    r.Space();
    r.Lit("<|tool_call_end|>");
  }
  if (r.ok()) r.Opt("<|tool_calls_section_end|>");
  return Verdict(r, std::move(calls));
}

Block ParseFunctionaryV31(std::string_view text, bool at_end, const ToolSchemas*) {
  Reader r(text, at_end);
  r.Lit("<function=");
  const std::string_view name = r.Until(">", 256, kNameStop);
  std::vector<ToolCall> calls;
  ArgsObject(r, name, &calls);
  Close(r, "</function>");
  return Verdict(r, std::move(calls));
}

Block ParseFirefunction(std::string_view text, bool at_end, const ToolSchemas*) {
  Reader r(text, at_end);
  r.Lit("functools");
  std::vector<ToolCall> calls = CallList(r, "name", {"arguments"});
  return Verdict(r, std::move(calls));
}

Block ParseGranite(std::string_view text, bool at_end, const ToolSchemas*) {
  Reader r(text, at_end);
  r.Lit("<|tool_call|>");
  std::vector<ToolCall> calls = CallList(r, "name", {"arguments"});
  return Verdict(r, std::move(calls));
}

Block ParseCommandR(std::string_view text, bool at_end, const ToolSchemas*) {
  Reader r(text, at_end);
  r.Lit("Action:");
  r.Space();
  const bool fence = r.Opt("```json");
  std::vector<ToolCall> calls = CallList(r, "tool_name", {"parameters"});
  if (fence) Close(r, "```");
  return Verdict(r, std::move(calls));
}

}  // namespace mx::toolcalls::internal
