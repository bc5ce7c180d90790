// JSON <-> Value, with Python's json module semantics (what transformers' tojson
// filter and a server that json.loads a request would give):
//   * ParseJson keeps object key order, turns integers into int and numbers with
//     a fraction or exponent into float, and accepts NaN / Infinity as Python does.
//   * ToJson is json.dumps(x, ensure_ascii=False, sort_keys=...): non-ASCII text
//     is written as is, separators ", " and ": " (with an indent "," and ": ").
// Pure functions; thread-safe.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "core/status.h"
#include "templates/jinja/value.h"

namespace mx::jinja {

struct JsonParseOptions {
  // Deeper nesting is refused (InvalidArgument) rather than recursed into.
  int max_depth = 256;
};

// Parses one JSON text (surrounding whitespace allowed). Integers outside int64
// become floats. Fails with InvalidArgument naming the byte offset on malformed
// input or invalid UTF-8.
Result<Value> ParseJson(std::string_view text, const JsonParseOptions& options = {});

struct JsonDumpOptions {
  // json.dumps' indent: nullopt for one line; otherwise the text put before
  // each nesting level (indent=4 is "    ").
  std::optional<std::string> indent;
  // json.dumps' separators; empty means the defaults for the indent mode.
  std::optional<std::string> item_separator;
  std::optional<std::string> key_separator;
  bool sort_keys = false;
  // Output larger than this fails with ResourceExhausted.
  size_t max_bytes = SIZE_MAX;
};

// json.dumps. Fails with InvalidArgument ("Object of type X is not JSON
// serializable", "keys must be str, int, float, bool or None, not tuple") as
// Python does.
Result<std::string> ToJson(const Value& value, const JsonDumpOptions& options = {});

}  // namespace mx::jinja
