// Reader, the shared helpers of the block parsers, and the format table.
#include <algorithm>

#include "toolcalls/formats.h"

namespace mx::toolcalls::internal {

void Reader::Space() {
  if (!ok()) return;
  while (pos_ < text_.size() && IsJsonSpace(text_[pos_])) ++pos_;
}

bool Reader::Opt(std::string_view lit) {
  if (!ok()) return false;
  const std::string_view r = rest();
  if (r.substr(0, lit.size()) == lit) {
    pos_ += lit.size();
    return true;
  }
  if (r.size() < lit.size() && lit.substr(0, r.size()) == r && !at_end_) {
    Set(BlockStatus::kNeedMore);
  }
  return false;
}

bool Reader::Lit(std::string_view lit) {
  if (Opt(lit)) return true;
  Fail();  // no-op when Opt asked for more
  return false;
}

std::string_view Reader::Until(std::string_view lit, size_t max_bytes, std::string_view forbidden) {
  if (!ok()) return {};
  const std::string_view r = rest();
  const size_t found = r.find(lit);
  // Bytes that are surely before the literal (a partial literal may end r).
  const size_t before = found != std::string_view::npos
                            ? found
                            : (r.size() >= lit.size() ? r.size() - lit.size() + 1 : 0);
  const std::string_view body = r.substr(0, before);
  if (body.size() > max_bytes || body.find_first_of(forbidden) != std::string_view::npos) {
    Fail();
    return {};
  }
  if (found == std::string_view::npos) {
    Set(at_end_ ? BlockStatus::kMalformed : BlockStatus::kNeedMore);
    return {};
  }
  pos_ += found + lit.size();
  return body;
}

std::string_view Reader::Span(std::string_view stops, size_t max_bytes) {
  if (!ok()) return {};
  const std::string_view r = rest();
  const size_t stop = r.find_first_of(stops);
  if (stop == std::string_view::npos ? r.size() > max_bytes : stop > max_bytes) {
    Fail();
    return {};
  }
  if (stop == std::string_view::npos) {
    Set(at_end_ ? BlockStatus::kMalformed : BlockStatus::kNeedMore);
    return {};
  }
  pos_ += stop;
  return r.substr(0, stop);
}

const JsonValue* Reader::Json() {
  if (!ok()) return nullptr;
  ScanResult s = ScanJson(text_, pos_, at_end_);
  if (s.status == ScanStatus::kNeedMore) {
    Set(BlockStatus::kNeedMore);
    return nullptr;
  }
  if (s.status == ScanStatus::kInvalid) {
    Fail();
    return nullptr;
  }
  pos_ = s.end;
  values_.push_back(std::make_unique<JsonValue>(std::move(s.value)));
  return values_.back().get();
}

bool IsToolName(std::string_view name) {
  if (name.empty() || name.size() > 256) return false;
  for (char c : name) {
    const auto u = static_cast<unsigned char>(c);
    if (u <= 0x20 || c == '<' || c == '>' || c == '"' || c == '[' || c == ']' || c == '{' ||
        c == '}' || c == '\\' || u == 0x7F) {
      return false;
    }
  }
  return true;
}

std::string_view TrimSpace(std::string_view s) {
  while (!s.empty() && IsJsonSpace(s.front())) s.remove_prefix(1);
  while (!s.empty() && IsJsonSpace(s.back())) s.remove_suffix(1);
  return s;
}

std::optional<std::string> ArgumentsText(const JsonValue& v, const JsonNode* args) {
  if (args == nullptr) return std::string("{}");
  if (args->kind == JsonNode::Kind::kObject) return std::string(v.Text(*args));
  if (args->kind != JsonNode::Kind::kString) return std::nullopt;
  // Arguments written as a JSON string holding the object (OpenAI wire form).
  const std::string inner = v.StringValue(*args);
  ScanResult s = ScanJson(inner, 0, /*at_end=*/true);
  if (s.status != ScanStatus::kComplete || s.value.root().kind != JsonNode::Kind::kObject ||
      !TrimSpace(std::string_view(inner).substr(s.end)).empty()) {
    return std::nullopt;
  }
  return std::move(s.value.compact);
}

bool CallFromObject(const JsonValue& v, const JsonNode& obj, std::string_view name_key,
                    std::initializer_list<std::string_view> args_keys, ToolCall* call) {
  if (obj.kind != JsonNode::Kind::kObject) return false;
  const JsonNode* name = v.Member(obj, name_key);
  if (name == nullptr || name->kind != JsonNode::Kind::kString) return false;
  call->name = v.StringValue(*name);
  if (!IsToolName(call->name)) return false;
  const JsonNode* args = nullptr;
  for (std::string_view k : args_keys) {
    if ((args = v.Member(obj, k)) != nullptr) break;
  }
  std::optional<std::string> text = ArgumentsText(v, args);
  if (!text) return false;
  call->arguments = std::move(*text);
  if (const JsonNode* id = v.Member(obj, "id");
      id != nullptr && id->kind == JsonNode::Kind::kString) {
    call->id = v.StringValue(*id);
  }
  return true;
}

std::string ParamJson(std::string_view value, ToolSchemas::ParamType type) {
  if (type == ToolSchemas::ParamType::kString) return QuoteJsonString(value);
  const std::string_view t = TrimSpace(value);
  ScanResult s = ScanJson(t, 0, /*at_end=*/true);
  if (s.status == ScanStatus::kComplete && s.end == t.size()) return std::move(s.value.compact);
  // Python's spelling, as templates that print values with `| string` write them.
  if (t == "True") return "true";
  if (t == "False") return "false";
  if (t == "None") return "null";
  return QuoteJsonString(value);
}

std::string ObjectText(const std::vector<std::pair<std::string, std::string>>& members) {
  std::string out = "{";
  for (size_t i = 0; i < members.size(); ++i) {
    if (i > 0) out.push_back(',');
    out += QuoteJsonString(members[i].first);
    out.push_back(':');
    out += members[i].second;
  }
  out.push_back('}');
  return out;
}

const FormatSpec& SpecFor(ToolCallFormat format) {
  static const FormatSpec kNoneSpec{};
  static const FormatSpec kHermesSpec{{"<tool_call>"}, {}, ParseHermes};
  static const FormatSpec kQwen3XmlSpec{{"<tool_call>"}, {}, ParseQwen3Xml};
  static const FormatSpec kSeedSpec{{"<seed:tool_call>"}, {}, ParseSeedOss};
  static const FormatSpec kLlama3Spec{{"<|python_tag|>"}, {"{"}, ParseLlama3};
  static const FormatSpec kMistralJsonSpec{{"[TOOL_CALLS]"}, {}, ParseMistralJson};
  static const FormatSpec kMistralArgsSpec{{"[TOOL_CALLS]"}, {}, ParseMistralArgs};
  static const FormatSpec kHarmonySpec{
      {"<|start|>", "<|channel|>", "<|end|>", "<|call|>", "<|return|>"},
      {"to=functions."},
      ParseHarmony};
  static const FormatSpec kDeepSeekR1Spec{{kDsCallsBegin, kDsCallBegin}, {}, ParseDeepSeekR1};
  static const FormatSpec kDeepSeekV31Spec{{kDsCallsBegin, kDsCallBegin}, {}, ParseDeepSeekV31};
  static const FormatSpec kDsmlSpec{{kDsmlFunctionCalls, kDsmlToolCalls}, {}, ParseDeepSeekDsml};
  static const FormatSpec kKimiSpec{
      {"<|tool_calls_section_begin|>", "<|tool_call_begin|>"}, {}, ParseKimiK2};
  static const FormatSpec kGlmSpec{{"<tool_call>"}, {}, ParseGlm};
  static const FormatSpec kMiniCpmSpec{{"<function name=\""}, {}, ParseMiniCpm};
  static const FormatSpec kFunctionarySpec{{"<function="}, {}, ParseFunctionaryV31};
  static const FormatSpec kFirefunctionSpec{{}, {"functools["}, ParseFirefunction};
  static const FormatSpec kGraniteSpec{{"<|tool_call|>"}, {}, ParseGranite};
  static const FormatSpec kCommandRSpec{{"Action:"}, {}, ParseCommandR};
  switch (format) {
    case ToolCallFormat::kNone:
      return kNoneSpec;
    case ToolCallFormat::kHermes:
      return kHermesSpec;
    case ToolCallFormat::kQwen3Xml:
      return kQwen3XmlSpec;
    case ToolCallFormat::kSeedOss:
      return kSeedSpec;
    case ToolCallFormat::kLlama3Json:
      return kLlama3Spec;
    case ToolCallFormat::kMistralJson:
      return kMistralJsonSpec;
    case ToolCallFormat::kMistralArgs:
      return kMistralArgsSpec;
    case ToolCallFormat::kHarmony:
      return kHarmonySpec;
    case ToolCallFormat::kDeepSeekR1:
      return kDeepSeekR1Spec;
    case ToolCallFormat::kDeepSeekV31:
      return kDeepSeekV31Spec;
    case ToolCallFormat::kDeepSeekDsml:
      return kDsmlSpec;
    case ToolCallFormat::kKimiK2:
      return kKimiSpec;
    case ToolCallFormat::kGlm:
      return kGlmSpec;
    case ToolCallFormat::kMiniCpm:
      return kMiniCpmSpec;
    case ToolCallFormat::kFunctionaryV31:
      return kFunctionarySpec;
    case ToolCallFormat::kFirefunction:
      return kFirefunctionSpec;
    case ToolCallFormat::kGranite:
      return kGraniteSpec;
    case ToolCallFormat::kCommandR:
      return kCommandRSpec;
  }
  return kNoneSpec;
}

}  // namespace mx::toolcalls::internal
