// JSON Schema -> GBNF, for response_format {"type":"json_schema"} and tool
// parameters. The subset and the whitespace rule are documented keyword by
// keyword in docs/structured_output.md; in short: type (and arrays of types),
// properties/required/additionalProperties, enum, const, items/prefixItems/
// minItems/maxItems, minLength/maxLength, format (date, time, date-time,
// uuid), minimum/maximum/exclusiveMinimum/exclusiveMaximum (integers; numbers
// with integer bounds), anyOf/oneOf, allOf of object schemas, local $ref
// (recursion allowed), nullable, and {} / true = any JSON value.
//
// Any other keyword is an error, never ignored: InvalidArgument
// "json schema at /properties/name: unsupported keyword 'pattern'". The
// annotations title, description, examples, default, $schema, $id,
// $comment, readOnly, writeOnly and deprecated are ignored.
//
// The generated grammar produces compact JSON with bounded whitespace: after
// '{', '[', ',', ':' and each member or element at most one space, or one
// newline followed by up to 20 spaces or tabs; nothing before or after the
// top-level value. Object members come in the order of "properties".
//
// Property order: nlohmann::json keeps object keys sorted, so properties
// come out alphabetically from it; parse the schema into
// nlohmann::ordered_json to keep the order it was written in.
//
// Thread-safety: pure functions.
#pragma once

#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "core/status.h"
#include "grammar/grammar.h"

namespace mx::grammar {

// The GBNF of `schema`, whose start rule is "root".
Result<std::string> SchemaToGbnf(const nlohmann::ordered_json& schema);
Result<std::string> SchemaToGbnf(const nlohmann::json& schema);

// Appends to *gbnf the rules of `schema`: a rule named `rule_name` that
// matches one value of the schema, and helper rules all named
// "<rule_name>-..." (so several schemas embed in one grammar when their
// names differ and none is a "-"-prefix of another's helpers, e.g. "tool-0",
// "tool-1"). rule_name: [a-zA-Z0-9-]+, else InvalidArgument. On error *gbnf
// is unchanged.
Status AppendSchemaRules(const nlohmann::ordered_json& schema, std::string_view rule_name,
                         std::string* gbnf);
Status AppendSchemaRules(const nlohmann::json& schema, std::string_view rule_name,
                         std::string* gbnf);

// SchemaToGbnf + ParseGbnf.
Result<std::shared_ptr<const Grammar>> CompileJsonSchema(const nlohmann::ordered_json& schema);
Result<std::shared_ptr<const Grammar>> CompileJsonSchema(const nlohmann::json& schema);

// response_format {"type":"json_object"}: any JSON object.
std::string JsonObjectGbnf();
Result<std::shared_ptr<const Grammar>> CompileJsonObject();

}  // namespace mx::grammar
