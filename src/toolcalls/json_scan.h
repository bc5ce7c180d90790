// ScanJson: reads one JSON value out of model output, for the tool-call
// parsers. It validates strict JSON (RFC 8259; UTF-8 checked inside strings,
// nesting bounded), says whether the text is a complete value, a prefix of
// one or not JSON, and returns the value's compact text: the input bytes with
// the whitespace outside strings removed and raw control characters inside
// strings escaped (models write raw newlines in code arguments), everything
// else (number spelling, key order, escapes) kept as written. It also records
// where every value sits in that compact text, so that a parser can take a
// member (the "arguments" object) verbatim.
//
// Pure functions; thread-safe.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace mx::toolcalls::internal {

enum class ScanStatus {
  kComplete,  // a whole value; ScanResult::end is just past it
  kNeedMore,  // the text so far is a proper prefix of a JSON value
  kInvalid,   // no continuation of the text makes it JSON
};

struct JsonNode {
  enum class Kind { kObject, kArray, kString, kNumber, kLiteral };
  Kind kind = Kind::kLiteral;
  size_t begin = 0, end = 0;                         // span in JsonValue::compact
  std::vector<std::pair<std::string, int>> members;  // objects: decoded key -> node index
  std::vector<int> items;                            // arrays: node indices
};

struct JsonValue {
  std::string compact;
  std::vector<JsonNode> nodes;  // nodes[0] is the root (when complete)

  const JsonNode& root() const { return nodes[0]; }
  // The first member named `key` of object `obj`, or nullptr.
  const JsonNode* Member(const JsonNode& obj, std::string_view key) const;
  std::string_view Text(const JsonNode& n) const {
    return std::string_view(compact).substr(n.begin, n.end - n.begin);
  }
  // The decoded text of a string node.
  std::string StringValue(const JsonNode& n) const;
};

struct ScanResult {
  ScanStatus status = ScanStatus::kInvalid;
  size_t end = 0;   // kComplete: offset in `text` just past the value
  JsonValue value;  // kComplete only
};

// Scans the value that starts at `pos` (leading whitespace skipped).
// at_end: no more text follows, so a number or literal ending at the end of
// the text is complete and a prefix is kInvalid instead of kNeedMore.
// Nesting deeper than max_depth is kInvalid.
ScanResult ScanJson(std::string_view text, size_t pos, bool at_end, int max_depth = 128);

// Decodes the JSON string literal `literal` (with its quotes; already
// validated by ScanJson). Lone surrogates become U+FFFD.
std::string DecodeJsonString(std::string_view literal);

// `s` as a JSON string literal (quotes included): ", \ and control
// characters escaped, other bytes as they are (invalid UTF-8 becomes U+FFFD).
std::string QuoteJsonString(std::string_view s);

// True when `c` is JSON whitespace (space, tab, LF, CR).
inline bool IsJsonSpace(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

}  // namespace mx::toolcalls::internal
