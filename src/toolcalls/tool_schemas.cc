// ToolSchemas and MakeToolCallId.
#include "toolcalls/tool_calls.h"

namespace mx::toolcalls {
namespace {

using Ordered = nlohmann::ordered_json;

bool IsStringType(const Ordered& t) {
  if (t.is_string()) return t.get<std::string>() == "string";
  if (!t.is_array() || t.empty()) return false;
  bool has_string = false;
  for (const Ordered& e : t) {
    if (!e.is_string()) return false;
    const std::string s = e.get<std::string>();
    if (s == "string") {
      has_string = true;
    } else if (s != "null") {
      return false;
    }
  }
  return has_string;
}

ToolSchemas::ParamType TypeOfSchema(const Ordered& schema, int depth = 0) {
  using T = ToolSchemas::ParamType;
  if (!schema.is_object() || depth > 8) return T::kUnknown;
  if (auto it = schema.find("type"); it != schema.end()) {
    return IsStringType(*it) ? T::kString : T::kOther;
  }
  for (const char* key : {"enum", "const"}) {
    auto it = schema.find(key);
    if (it == schema.end()) continue;
    if (it->is_string()) return T::kString;
    if (!it->is_array() || it->empty()) return T::kOther;
    for (const Ordered& e : *it) {
      if (!e.is_string()) return T::kOther;
    }
    return T::kString;
  }
  for (const char* key : {"anyOf", "oneOf"}) {
    auto it = schema.find(key);
    if (it == schema.end() || !it->is_array() || it->empty()) continue;
    bool all_string = true;
    for (const Ordered& branch : *it) {
      const T t = TypeOfSchema(branch, depth + 1);
      // A {"type": "null"} branch does not make a string parameter non-string.
      const bool null_branch = branch.is_object() && branch.value("type", Ordered()) == "null";
      if (t != T::kString && !null_branch) all_string = false;
    }
    return all_string ? T::kString : T::kOther;
  }
  return T::kUnknown;
}

}  // namespace

ToolSchemas ToolSchemas::FromJson(const nlohmann::json& tools) {
  return FromJson(Ordered::parse(tools.dump()));
}

ToolSchemas ToolSchemas::FromJson(const nlohmann::ordered_json& tools) {
  ToolSchemas s;
  if (!tools.is_array()) return s;
  for (const Ordered& tool : tools) {
    if (!tool.is_object()) continue;
    const Ordered* fn = &tool;
    if (auto it = tool.find("function"); it != tool.end() && it->is_object()) fn = &*it;
    auto name = fn->find("name");
    if (name == fn->end() || !name->is_string()) continue;
    auto& params = s.tools_[name->get<std::string>()];
    auto p = fn->find("parameters");
    if (p == fn->end() || !p->is_object()) continue;
    auto props = p->find("properties");
    if (props == p->end() || !props->is_object()) continue;
    for (auto it = props->begin(); it != props->end(); ++it) params[it.key()] = TypeOfSchema(*it);
  }
  return s;
}

ToolSchemas::ParamType ToolSchemas::TypeOf(std::string_view tool, std::string_view param) const {
  auto t = tools_.find(tool);
  if (t == tools_.end()) return ParamType::kUnknown;
  auto p = t->second.find(param);
  return p == t->second.end() ? ParamType::kUnknown : p->second;
}

Result<std::string> MakeToolCallId(Env& env, ToolCallFormat format) {
  static constexpr std::string_view kAlphabet =
      "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
  const bool mistral =
      format == ToolCallFormat::kMistralJson || format == ToolCallFormat::kMistralArgs;
  const size_t n = mistral ? 9 : 24;
  std::string id = mistral ? "" : "call_";
  // Bytes >= 248 (= 4 * 62) are drawn again, so every character is equally likely.
  while (id.size() < (mistral ? 0 : 5) + n) {
    unsigned char bytes[32];
    MX_RETURN_IF_ERROR(env.RandomBytes(bytes, sizeof(bytes)));
    for (unsigned char b : bytes) {
      if (b >= 248 || id.size() == (mistral ? 0 : 5) + n) continue;
      id.push_back(kAlphabet[b % 62]);
    }
  }
  return id;
}

}  // namespace mx::toolcalls
