// libFuzzer entry point for the JSON reader and writer (tests/fuzz/README.md):
// whatever ParseJson accepts must be written by ToJson and read back to the
// same value, keys in the same order.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "templates/jinja/json.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  auto v = mx::jinja::ParseJson(text);
  if (!v.ok()) return 0;
  for (const bool indent : {false, true}) {
    mx::jinja::JsonDumpOptions options;
    if (indent) options.indent = "  ";
    auto dumped = mx::jinja::ToJson(*v, options);
    if (!dumped.ok()) std::abort();
    auto again = mx::jinja::ParseJson(*dumped);
    if (!again.ok() || again->Repr() != v->Repr()) std::abort();
  }
  return 0;
}
