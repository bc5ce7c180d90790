// JSON Schema -> GBNF (the subset of json_schema.h). One rule per schema
// node that has a name (properties, items, $defs), expressions inline for
// the rest; primitives emitted once, on first use.
#include "grammar/json_schema.h"

#include <cmath>
#include <map>
#include <optional>
#include <set>
#include <vector>

#include "grammar/json_schema_converter.h"

namespace mx::grammar {
namespace {

using schema_internal::Converter;
using schema_internal::OJson;

Status ValidRuleName(std::string_view name) {
  bool ok = !name.empty();
  for (char c : name) {
    ok = ok &&
         ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-');
  }
  if (!ok) {
    return Status::InvalidArgument("json schema: rule name '" + std::string(name) +
                                   "' is not of the form [a-zA-Z0-9-]+");
  }
  return Status::Ok();
}

OJson ToOrdered(const nlohmann::json& j) {
  return OJson::parse(j.dump(-1, ' ', false, nlohmann::detail::error_handler_t::replace));
}

}  // namespace

Status AppendSchemaRules(const OJson& schema, std::string_view rule_name, std::string* gbnf) {
  MX_RETURN_IF_ERROR(ValidRuleName(rule_name));
  std::string text;
  Converter c(schema, std::string(rule_name));
  MX_RETURN_IF_ERROR(c.Run(&text));
  *gbnf += text;
  return Status::Ok();
}

Status AppendSchemaRules(const nlohmann::json& schema, std::string_view rule_name,
                         std::string* gbnf) {
  return AppendSchemaRules(ToOrdered(schema), rule_name, gbnf);
}

Result<std::string> SchemaToGbnf(const OJson& schema) {
  std::string text;
  MX_RETURN_IF_ERROR(AppendSchemaRules(schema, "root", &text));
  return text;
}

Result<std::string> SchemaToGbnf(const nlohmann::json& schema) {
  return SchemaToGbnf(ToOrdered(schema));
}

Result<std::shared_ptr<const Grammar>> CompileJsonSchema(const OJson& schema) {
  MX_ASSIGN_OR_RETURN(std::string text, SchemaToGbnf(schema));
  GbnfLimits limits;
  limits.max_text_bytes = 16 << 20;
  auto g = ParseGbnf(text, limits);
  if (!g.ok()) return g.status().WithContext("json schema: the generated grammar");
  return g;
}

Result<std::shared_ptr<const Grammar>> CompileJsonSchema(const nlohmann::json& schema) {
  return CompileJsonSchema(ToOrdered(schema));
}

std::string JsonObjectGbnf() {
  auto text = SchemaToGbnf(OJson{{"type", "object"}});
  return text.value();
}

Result<std::shared_ptr<const Grammar>> CompileJsonObject() { return ParseGbnf(JsonObjectGbnf()); }

}  // namespace mx::grammar
