// libFuzzer entry point for the JSON Schema converter (tests/fuzz/README.md).
// Parses the input as JSON; when it is, converts it as a schema and compiles
// the grammar. Aborts when an error is not an InvalidArgument naming the
// schema, or when a schema that converts yields a grammar that does not
// parse; ASan and UBSan catch the rest.
#include <cstddef>
#include <cstdint>
#include <cstdlib>

#include "grammar/json_schema.h"
#include "grammar/matcher.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto schema =
      nlohmann::ordered_json::parse(data, data + size, nullptr, /*allow_exceptions=*/false);
  if (schema.is_discarded()) return 0;
  auto text = mx::grammar::SchemaToGbnf(schema);
  if (!text.ok()) {
    if (text.status().code() != mx::Status::Code::kInvalidArgument ||
        text.status().message().rfind("json schema", 0) != 0) {
      std::abort();
    }
    return 0;
  }
  mx::grammar::GbnfLimits limits;
  limits.max_text_bytes = 16 << 20;
  auto g = mx::grammar::ParseGbnf(*text, limits);
  if (!g.ok()) {
    // Only whole-grammar limits and left recursion through $ref may fail here.
    const std::string& msg = g.status().message();
    if (msg.find("left recursion") == std::string::npos &&
        msg.find("GbnfLimits") == std::string::npos) {
      std::abort();
    }
    return 0;
  }
  mx::grammar::MatchLimits ml;
  ml.max_expand_steps = 1 << 14;
  auto m = mx::grammar::GrammarMatcher::Create(*g, ml);
  if (m.ok()) (*m)->AcceptBytes("{\"a\": [1, \"x\", null]}");
  return 0;
}
