// Internal: the per-family block parsers the stream driver runs
// (tool_call_stream.cc). A format is a set of markers and a parser for the
// block that starts at one.
//
// The driver's contract with a parser: Parse(text, at_end) gets the text from
// the marker to the end of what has arrived; at_end says nothing more will.
// Its verdict may depend only on the text it was given, and must be stable:
// kComplete(end) or kMalformed on a text stay the same for every longer text
// (and for at_end), so a stream that asks early and a whole-text parse that
// asks once agree. kNeedMore with at_end is read as kMalformed.
#pragma once

#include <initializer_list>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "toolcalls/json_scan.h"
#include "toolcalls/tool_calls.h"

namespace mx::toolcalls::internal {

enum class BlockStatus { kComplete, kNeedMore, kMalformed };
enum class TextMode { kContent, kReasoning };

struct Block {
  BlockStatus status = BlockStatus::kMalformed;
  size_t end = 0;               // kComplete: bytes of the block
  std::vector<ToolCall> calls;  // kComplete: may be empty (a harmony header)
  // Drop the whitespace before and after the block (true for calls).
  bool trim = true;
  std::optional<TextMode> mode;  // the text after the block is this
};

using BlockParser = Block (*)(std::string_view text, bool at_end, const ToolSchemas* schemas);

struct FormatSpec {
  // A block may start at any occurrence of one of these.
  std::vector<std::string_view> markers;
  // ... or at one of these, when only whitespace and calls came before.
  std::vector<std::string_view> start_markers;
  BlockParser parse = nullptr;
};

// The spec of `format`; kNone has no markers.
const FormatSpec& SpecFor(ToolCallFormat format);

// A cursor over a block's text with a sticky verdict: the first step that
// fails sets kMalformed, or kNeedMore when more text could still make it
// succeed; later steps then do nothing and return false / empty.
class Reader {
 public:
  Reader(std::string_view text, bool at_end) : text_(text), at_end_(at_end) {}

  bool ok() const { return status_ == BlockStatus::kComplete; }
  BlockStatus status() const { return status_; }
  size_t pos() const { return pos_; }
  std::string_view rest() const { return text_.substr(pos_); }
  // True at the end of the text when no more will come.
  bool Done() const { return pos_ >= text_.size() && at_end_; }

  void Fail() { Set(BlockStatus::kMalformed); }
  void Set(BlockStatus s) {
    if (ok()) status_ = s;
  }
  void Space();
  // `lit` must come next.
  bool Lit(std::string_view lit);
  // Consumes `lit` when it comes next; false when something else does (or
  // the verdict is not ok). Needs more text while the rest is a prefix of it.
  bool Opt(std::string_view lit);
  // The text up to `lit` (which is consumed). At most max_bytes before it,
  // and none of `forbidden` in it.
  std::string_view Until(std::string_view lit, size_t max_bytes = std::string_view::npos,
                         std::string_view forbidden = {});
  // The text up to (not including) the first byte of `stops`; at most max_bytes.
  std::string_view Span(std::string_view stops, size_t max_bytes);
  // A JSON value (leading whitespace skipped); nullptr unless complete.
  const JsonValue* Json();

 private:
  std::string_view text_;
  bool at_end_;
  size_t pos_ = 0;
  BlockStatus status_ = BlockStatus::kComplete;
  std::vector<std::unique_ptr<JsonValue>> values_;
};

// A tool name: 1..256 bytes, no whitespace, no '<', '>', '"', '[' or '{'.
bool IsToolName(std::string_view name);
std::string_view TrimSpace(std::string_view s);

// The arguments text of a call whose object came as `args` inside `v`:
// an object -> its compact text; a string holding a JSON object -> that
// object's compact text; missing (nullptr) -> "{}". nullopt otherwise.
std::optional<std::string> ArgumentsText(const JsonValue& v, const JsonNode* args);

// One call from an object {"name": ..., <args_key>: {...}, "id"?: ...};
// false unless it has a valid name and arguments. Tries each key of args_keys.
bool CallFromObject(const JsonValue& v, const JsonNode& obj, std::string_view name_key,
                    std::initializer_list<std::string_view> args_keys, ToolCall* call);

// XML-style parameter value -> JSON text, by the parameter's type.
std::string ParamJson(std::string_view value, ToolSchemas::ParamType type);

// Builds the arguments object text from (name, JSON text) pairs in order.
std::string ObjectText(const std::vector<std::pair<std::string, std::string>>& members);

// Per-family parsers (formats_json.cc, formats_xml.cc, format_harmony.cc).
Block ParseHermes(std::string_view text, bool at_end, const ToolSchemas* schemas);
Block ParseLlama3(std::string_view text, bool at_end, const ToolSchemas* schemas);
Block ParseMistralJson(std::string_view text, bool at_end, const ToolSchemas* schemas);
Block ParseMistralArgs(std::string_view text, bool at_end, const ToolSchemas* schemas);
Block ParseDeepSeekR1(std::string_view text, bool at_end, const ToolSchemas* schemas);
Block ParseDeepSeekV31(std::string_view text, bool at_end, const ToolSchemas* schemas);
Block ParseKimiK2(std::string_view text, bool at_end, const ToolSchemas* schemas);
Block ParseFunctionaryV31(std::string_view text, bool at_end, const ToolSchemas* schemas);
Block ParseFirefunction(std::string_view text, bool at_end, const ToolSchemas* schemas);
Block ParseGranite(std::string_view text, bool at_end, const ToolSchemas* schemas);
Block ParseCommandR(std::string_view text, bool at_end, const ToolSchemas* schemas);
Block ParseQwen3Xml(std::string_view text, bool at_end, const ToolSchemas* schemas);
Block ParseSeedOss(std::string_view text, bool at_end, const ToolSchemas* schemas);
Block ParseGlm(std::string_view text, bool at_end, const ToolSchemas* schemas);
Block ParseMiniCpm(std::string_view text, bool at_end, const ToolSchemas* schemas);
Block ParseDeepSeekDsml(std::string_view text, bool at_end, const ToolSchemas* schemas);
Block ParseHarmony(std::string_view text, bool at_end, const ToolSchemas* schemas);

// DeepSeek's markers (full-width bars and U+2581 in UTF-8).
inline constexpr std::string_view kDsCallsBegin =
    "<\xEF\xBD\x9Ctool\xE2\x96\x81"
    "calls\xE2\x96\x81"
    "begin\xEF\xBD\x9C>";
inline constexpr std::string_view kDsCallsEnd =
    "<\xEF\xBD\x9Ctool\xE2\x96\x81"
    "calls\xE2\x96\x81"
    "end\xEF\xBD\x9C>";
inline constexpr std::string_view kDsCallBegin =
    "<\xEF\xBD\x9Ctool\xE2\x96\x81"
    "call\xE2\x96\x81"
    "begin\xEF\xBD\x9C>";
inline constexpr std::string_view kDsCallEnd =
    "<\xEF\xBD\x9Ctool\xE2\x96\x81"
    "call\xE2\x96\x81"
    "end\xEF\xBD\x9C>";
inline constexpr std::string_view kDsSep = "<\xEF\xBD\x9Ctool\xE2\x96\x81sep\xEF\xBD\x9C>";
inline constexpr std::string_view kDsmlFunctionCalls =
    "<\xEF\xBD\x9C"
    "DSML\xEF\xBD\x9C"
    "function_calls>";
inline constexpr std::string_view kDsmlToolCalls =
    "<\xEF\xBD\x9C"
    "DSML\xEF\xBD\x9C"
    "tool_calls>";

}  // namespace mx::toolcalls::internal
