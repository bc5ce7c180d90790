// libFuzzer target: random text through every format's whole-text parser and
// its stream (tests/fuzz/README.md). The first byte picks the format (and
// whether tool schemas are given), the second seeds the piece sizes of the
// stream. Aborts when the stream's events differ from the whole parse, when a
// call's arguments are not a JSON object, or when text is lost or invented
// (content + reasoning + calls never exceed the input's size by more than the
// escapes the arguments add).
#include <cstdint>
#include <cstdlib>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "toolcalls/tool_calls.h"

namespace {

using mx::toolcalls::ParsedToolCalls;
using mx::toolcalls::ToolCallEvent;
using mx::toolcalls::ToolCallFormat;

const mx::toolcalls::ToolSchemas& Schemas() {
  static const auto s = mx::toolcalls::ToolSchemas::FromJson(nlohmann::ordered_json::parse(R"([
    {"type": "function", "function": {"name": "f", "parameters": {"properties": {
      "a": {"type": "string"}, "b": {"type": "integer"}}}}}])"));
  return s;
}

void Fold(const std::vector<ToolCallEvent>& events, ParsedToolCalls* r) {
  for (const ToolCallEvent& e : events) {
    if (e.kind == ToolCallEvent::Kind::kContent) r->content += e.text;
    if (e.kind == ToolCallEvent::Kind::kReasoning) r->reasoning += e.text;
    if (e.kind == ToolCallEvent::Kind::kCallBegin) {
      if (e.index != static_cast<int>(r->calls.size())) abort();
      r->calls.push_back({e.text, {}, e.id});
    }
    if (e.kind == ToolCallEvent::Kind::kArguments) {
      if (e.index < 0 || static_cast<size_t>(e.index) >= r->calls.size()) abort();
      r->calls[static_cast<size_t>(e.index)].arguments += e.text;
    }
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 2) return 0;
  constexpr int kFormats = static_cast<int>(ToolCallFormat::kCommandR) + 1;
  const auto format = static_cast<ToolCallFormat>(data[0] % kFormats);
  const auto* schemas = (data[0] / kFormats) % 2 ? &Schemas() : nullptr;
  uint32_t seed = data[1];
  const std::string_view text(reinterpret_cast<const char*>(data + 2), size - 2);

  const ParsedToolCalls whole = mx::toolcalls::ParseToolCalls(format, text, schemas);
  for (const auto& c : whole.calls) {
    if (c.name.empty() || c.arguments.empty() || c.arguments[0] != '{') abort();
    const auto j = nlohmann::json::parse(c.arguments, nullptr, /*allow_exceptions=*/false);
    if (!j.is_object()) abort();
  }
  if (whole.content.size() + whole.reasoning.size() > text.size()) abort();

  mx::toolcalls::ToolCallStream stream(format, schemas);
  ParsedToolCalls streamed;
  for (size_t i = 0; i < text.size();) {
    seed = seed * 1103515245u + 12345u;
    const size_t n = 1 + (seed >> 16) % 7;
    Fold(stream.Feed(text.substr(i, n)), &streamed);
    i += n;
  }
  Fold(stream.Finish(), &streamed);
  if (streamed.content != whole.content || streamed.reasoning != whole.reasoning ||
      streamed.calls.size() != whole.calls.size()) {
    abort();
  }
  for (size_t i = 0; i < whole.calls.size(); ++i) {
    if (streamed.calls[i].name != whole.calls[i].name ||
        streamed.calls[i].arguments != whole.calls[i].arguments ||
        streamed.calls[i].id != whole.calls[i].id) {
      abort();
    }
  }
  return 0;
}
