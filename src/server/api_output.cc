#include "server/api_output.h"

#include <algorithm>
#include <cmath>
#include <iterator>
#include <limits>

namespace mx::server {
namespace {

using Json = nlohmann::json;
using OJson = nlohmann::ordered_json;

Status Bad(const std::string& field, const std::string& what) {
  return Status::InvalidArgument("'" + field + "' " + what);
}

bool Present(const OJson& j, const char* key) {
  auto it = j.find(key);
  return it != j.end() && !it->is_null();
}

// A bias value: a number in [-100, 100] (-100 bans the token), or false.

Status BiasValue(const Json& v, const std::string& field, float* out) {
  if (v.is_boolean()) {
    if (v.get<bool>()) return Bad(field, "may be false (ban the token) or a number, not true");
    *out = -std::numeric_limits<float>::infinity();
    return Status::Ok();
  }
  if (!v.is_number()) return Bad(field, "must be a number in [-100, 100] or false");
  const double d = v.get<double>();
  if (!(d >= -100.0 && d <= 100.0)) return Bad(field, "must be in [-100, 100], got " + v.dump());
  *out = d <= -100.0 ? -std::numeric_limits<float>::infinity() : static_cast<float>(d);
  return Status::Ok();
}

Status TokenId(const std::string& text, const std::string& field, int32_t* out) {
  if (text.empty() || text.size() > 10 ||
      text.find_first_not_of("0123456789") != std::string::npos) {
    return Bad(field,
               "has key \"" + text.substr(0, 40) + "\": keys must be token ids (decimal integers)");
  }
  const long long v = std::stoll(text);
  if (v > std::numeric_limits<int32_t>::max())
    return Bad(field, "has token id " + text + " out of range");
  *out = static_cast<int32_t>(v);
  return Status::Ok();
}

}  // namespace

Status ParseResponseFormat(const OJson& body, ResponseFormat* out) {
  int given = 0;
  if (auto it = body.find("response_format"); it != body.end() && !it->is_null()) {
    if (!it->is_object()) return Bad("response_format", "must be an object");
    auto t = it->find("type");
    if (t == it->end() || !t->is_string())
      return Bad("response_format.type", "is required (a string)");
    const std::string type = t->get<std::string>();
    if (type == "text") {
      out->kind = ResponseFormat::Kind::kText;
    } else if (type == "json_object") {
      out->kind = ResponseFormat::Kind::kJsonObject;
      ++given;
      if (Present(*it, "schema")) {  // llama.cpp's extension
        if (!(*it)["schema"].is_object()) return Bad("response_format.schema", "must be an object");
        out->kind = ResponseFormat::Kind::kJsonSchema;
        out->schema = (*it)["schema"];
      }
    } else if (type == "json_schema") {
      ++given;
      out->kind = ResponseFormat::Kind::kJsonSchema;
      auto js = it->find("json_schema");
      if (js == it->end() || !js->is_object()) {
        return Bad("response_format.json_schema", "is required (an object with 'schema')");
      }
      if (Present(*js, "name")) {
        if (!(*js)["name"].is_string())
          return Bad("response_format.json_schema.name", "must be a string");
        out->name = (*js)["name"].get<std::string>();
      }
      if (Present(*js, "strict") && !(*js)["strict"].is_boolean()) {
        return Bad("response_format.json_schema.strict", "must be a boolean");
      }
      if (!Present(*js, "schema")) {
        out->schema = OJson::object();  // OpenAI: any JSON object
        out->kind = ResponseFormat::Kind::kJsonObject;
      } else if (!(*js)["schema"].is_object() && !(*js)["schema"].is_boolean()) {
        return Bad("response_format.json_schema.schema", "must be an object");
      } else {
        out->schema = (*js)["schema"];
      }
    } else {
      return Bad("response_format.type",
                 "is '" + type + "': expected \"text\", \"json_object\" or \"json_schema\"");
    }
  }
  if (auto it = body.find("json_schema"); it != body.end() && !it->is_null()) {
    if (!it->is_object()) return Bad("json_schema", "must be an object (a JSON Schema)");
    ++given;
    out->kind = ResponseFormat::Kind::kJsonSchema;
    out->schema = *it;
  }
  if (auto it = body.find("grammar"); it != body.end() && !it->is_null()) {
    if (!it->is_string()) return Bad("grammar", "must be a string (GBNF)");
    if (!it->get<std::string>().empty()) {
      ++given;
      out->kind = ResponseFormat::Kind::kGrammar;
      out->grammar = it->get<std::string>();
    }
  }
  if (given > 1) {
    return Status::InvalidArgument(
        "at most one of 'response_format' (json), 'json_schema' and 'grammar' may be given");
  }
  return Status::Ok();
}

Status ParseToolOptions(const OJson& body, ToolOptions* out) {
  if (auto it = body.find("tools"); it != body.end() && !it->is_null()) {
    if (!it->is_array()) return Bad("tools", "must be an array");
    for (size_t i = 0; i < it->size(); ++i) {
      const OJson& t = (*it)[i];
      const std::string f = "tools[" + std::to_string(i) + "]";
      if (!t.is_object()) return Bad(f, "must be an object");
      if (Present(t, "type") && t["type"] != "function") {
        return Bad(f + ".type",
                   "is " + t["type"].dump() + ": only \"function\" tools are supported");
      }
      auto fn = t.find("function");
      if (fn == t.end() || !fn->is_object()) return Bad(f + ".function", "is required (an object)");
      auto name = fn->find("name");
      if (name == fn->end() || !name->is_string() || name->get<std::string>().empty()) {
        return Bad(f + ".function.name", "is required (a non-empty string)");
      }
      ToolSpec spec;
      spec.name = name->get<std::string>();
      for (const ToolSpec& other : out->tools) {
        if (other.name == spec.name)
          return Bad(f + ".function.name", "'" + spec.name + "' is given twice");
      }
      if (Present(*fn, "parameters")) {
        if (!(*fn)["parameters"].is_object())
          return Bad(f + ".function.parameters", "must be an object");
        spec.parameters = (*fn)["parameters"];
      }
      out->tools.push_back(std::move(spec));
    }
  }
  if (auto it = body.find("tool_choice"); it != body.end() && !it->is_null()) {
    if (it->is_string()) {
      const std::string c = it->get<std::string>();
      if (c == "auto") {
        out->choice = ToolChoice::kAuto;
      } else if (c == "none") {
        out->choice = ToolChoice::kNone;
      } else if (c == "required") {
        out->choice = ToolChoice::kRequired;
      } else {
        return Bad("tool_choice",
                   "is '" + c + "': expected \"auto\", \"none\", \"required\" or a function");
      }
    } else if (it->is_object()) {
      const OJson* name = nullptr;
      if (auto fn = it->find("function");
          fn != it->end() && fn->is_object() && fn->contains("name")) {
        name = &(*fn)["name"];
      }
      if (name == nullptr || !name->is_string()) {
        return Bad("tool_choice",
                   "must name a function: {\"type\": \"function\", \"function\": {\"name\": ...}}");
      }
      out->choice = ToolChoice::kNamed;
      out->named = name->get<std::string>();
    } else {
      return Bad("tool_choice", "must be a string or an object");
    }
    if (out->choice != ToolChoice::kAuto && out->choice != ToolChoice::kNone &&
        out->tools.empty()) {
      return Bad("tool_choice", "asks for a tool call but 'tools' is empty");
    }
    if (out->choice == ToolChoice::kNamed) {
      bool found = false;
      for (const ToolSpec& t : out->tools) found = found || t.name == out->named;
      if (!found)
        return Bad("tool_choice", "names '" + out->named + "', which is not among 'tools'");
    }
  }
  if (auto it = body.find("parallel_tool_calls"); it != body.end() && !it->is_null()) {
    if (!it->is_boolean()) return Bad("parallel_tool_calls", "must be a boolean");
    out->parallel = it->get<bool>();
  }
  return Status::Ok();
}

Status ParseLogitBias(const Json& body, std::vector<std::pair<int32_t, float>>* out) {
  auto it = body.find("logit_bias");
  if (it == body.end() || it->is_null()) return Status::Ok();
  if (it->is_object()) {
    if (it->size() > 4096) return Bad("logit_bias", "holds at most 4096 tokens");
    for (const auto& [key, value] : it->items()) {
      int32_t id = 0;
      float bias = 0;
      MX_RETURN_IF_ERROR(TokenId(key, "logit_bias", &id));
      MX_RETURN_IF_ERROR(BiasValue(value, "logit_bias[\"" + key + "\"]", &bias));
      out->emplace_back(id, bias);
    }
    return Status::Ok();
  }
  if (it->is_array()) {
    if (it->size() > 4096) return Bad("logit_bias", "holds at most 4096 tokens");
    for (size_t i = 0; i < it->size(); ++i) {
      const Json& e = (*it)[i];
      const std::string f = "logit_bias[" + std::to_string(i) + "]";
      if (!e.is_array() || e.size() != 2 || !e[0].is_number_integer() || e[0].get<int64_t>() < 0 ||
          e[0].get<int64_t>() > std::numeric_limits<int32_t>::max()) {
        return Bad(f, "must be [token id, bias]");
      }
      float bias = 0;
      MX_RETURN_IF_ERROR(BiasValue(e[1], f, &bias));
      out->emplace_back(static_cast<int32_t>(e[0].get<int64_t>()), bias);
    }
    return Status::Ok();
  }
  return Bad("logit_bias", "must be an object {\"token id\": bias} or an array of [id, bias]");
}

}  // namespace mx::server

namespace mx::server {
namespace {

// The fields ParseResponseFormat and ParseToolOptions read.
constexpr const char* kOutputFields[] = {"response_format", "json_schema", "grammar",
                                         "tools",           "tool_choice", "parallel_tool_calls"};

}  // namespace

Status ParseOutputFields(const Json& parsed, const std::string& body, ResponseFormat* format,
                         ToolOptions* tools) {
  const bool any = std::any_of(std::begin(kOutputFields), std::end(kOutputFields),
                               [&](const char* f) { return parsed.contains(f); });
  if (!any) return Status::Ok();
  const OJson j = OJson::parse(body, nullptr, /*allow_exceptions=*/false);
  if (!j.is_object()) return Status::InvalidArgument("the request body must be a JSON object");
  MX_RETURN_IF_ERROR(ParseResponseFormat(j, format));
  if (tools != nullptr) MX_RETURN_IF_ERROR(ParseToolOptions(j, tools));
  return Status::Ok();
}

}  // namespace mx::server
